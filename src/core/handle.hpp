// handle.hpp - the handle behind smxHandle_t: a device and its cached limits.
#pragma once

#include "core/device_limits.hpp"
#include "core/object_tag.hpp"
#include "smx/smx.h"

struct smxHandle {
    SMX_OBJECT_TAG("smxHandle_t");
    smxDeviceType_t device_type;
    int device_id;
    smx::DeviceLimits limits;  // read once in smxCreate
    int cpu_threads;           // CPU handles: how many threads forward may use (>= 1)
    bool check_device_pointers = true;  // smxSetDevicePointerChecks; descriptors copy it when created
};
