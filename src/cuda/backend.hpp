// backend.hpp - the CUDA backend's face towards the operators. Plain C++: no CUDA types cross it, so the
// core compiles without the CUDA toolkit. Only built when SMX_WITH_CUDA is on.
#pragma once

#include <memory>

#include "core/device_limits.hpp"
#include "cuda/plan/preferences.hpp"
#include "ops/softmax/info.hpp"
#include "ops/softmax/plan.hpp"
#include "ops/softmax_backward/info.hpp"
#include "ops/softmax_backward/plan.hpp"

namespace smx {

// Checks that CUDA device `device_id` exists and reads its limits once.
// Fails with SMX_STATUS_NOT_SUPPORTED_DEVICE_ABSENT (no driver or no device) or
// SMX_STATUS_BAD_PARAM_DEVICE (id out of range).
smxStatus_t cuda_query_device(int device_id, DeviceLimits* limits);

// Chooses the kernel family and its launch shape for a validated problem on that device.
smxStatus_t make_cuda_softmax_plan(const SoftmaxInfo& info, int device_id, const DeviceLimits& limits,
                                   const cuda::PlanPreferences& preferences, std::unique_ptr<SoftmaxPlan>* plan);

// Chooses the backward kernels for a validated backward problem on that device (src/cuda/backward/).
smxStatus_t make_cuda_softmax_backward_plan(const SoftmaxBackwardInfo& info, int device_id, const DeviceLimits& limits,
                                            const cuda::PlanPreferences& preferences,
                                            std::unique_ptr<SoftmaxBackwardPlan>* plan);

// Forward-time check that y and x are memory the device `device_id` can address (device or managed
// memory of that device, or mapped host memory); refuses plain host pointers and other devices' memory.
smxStatus_t cuda_check_data_pointers(int device_id, const void* y, const void* x);

// The same check for one pointer, named `name` in the message ("dy"): for operators with other operands.
smxStatus_t cuda_check_data_pointer(int device_id, const void* pointer, const char* name);

}  // namespace smx
