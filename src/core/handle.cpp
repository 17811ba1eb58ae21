// handle.cpp - smxCreate / smxDestroy: bind to a device and cache its limits.
#include "core/handle.hpp"

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include "core/api_guard.hpp"
#include "core/enum_value.hpp"
#include "core/error.hpp"
#include "core/logging.hpp"

#if SMX_WITH_CUDA
#include "cuda/backend.hpp"
#endif

namespace smx {
namespace {

// The most threads a CPU handle's forward may use, whatever SMX_CPU_THREADS or the hardware says: it bounds
// what a stray value can make one forward start.
constexpr int kMaxCpuThreads = 1024;

// SMX_CPU_THREADS as a count in 1..kMaxCpuThreads (larger values capped), or 0 when it is not a positive
// decimal integer made of digits only.
int parse_cpu_threads(const char* text) {
    if (*text == '\0') return 0;
    int value = 0;
    for (; *text != '\0'; ++text) {
        if (*text < '0' || *text > '9') return 0;
        value = std::min(value * 10 + (*text - '0'), kMaxCpuThreads + 1);  // saturates: never overflows
    }
    return std::min(value, kMaxCpuThreads);
}

// Threads the CPU backend may use: SMX_CPU_THREADS if it is a positive integer, else every hardware thread.
int cpu_thread_budget() {
    if (const char* text = std::getenv("SMX_CPU_THREADS")) {
        if (const int requested = parse_cpu_threads(text)) return requested;
    }
    const unsigned hardware = std::thread::hardware_concurrency();
    return static_cast<int>(std::clamp<unsigned>(hardware, 1, kMaxCpuThreads));
}

smxStatus_t create_handle(smxHandle_t* out, int device_type, int device_id) {
    if (out == nullptr) return fail(SMX_STATUS_BAD_PARAM_NULL_POINTER, "handle (the output pointer) is NULL");
    *out = nullptr;
    smxHandle candidate{};
    candidate.device_id = device_id;
    candidate.cpu_threads = cpu_thread_budget();
    switch (device_type) {
        case SMX_DEVICE_CPU:
            if (device_id != 0) {
                return fail(SMX_STATUS_BAD_PARAM_DEVICE, "CPU device id {} out of range: the CPU is device 0",
                            device_id);
            }
            candidate.device_type = SMX_DEVICE_CPU;
            candidate.limits.name = "cpu";
            candidate.limits.multiprocessor_count = candidate.cpu_threads;
            break;
        case SMX_DEVICE_CUDA:
#if SMX_WITH_CUDA
            if (device_id < 0) {
                return fail(SMX_STATUS_BAD_PARAM_DEVICE, "CUDA device id {} is negative", device_id);
            }
            candidate.device_type = SMX_DEVICE_CUDA;
            SMX_RETURN_IF_ERROR(cuda_query_device(device_id, &candidate.limits));
            break;
#else
            return fail(SMX_STATUS_NOT_SUPPORTED_BACKEND_NOT_BUILT,
                        "this libsmx was built without the CUDA backend (SMX_WITH_CUDA=OFF); rebuild with a CUDA "
                        "toolkit to use SMX_DEVICE_CUDA");
#endif
        default:
            return fail(SMX_STATUS_BAD_PARAM_DEVICE,
                        "device type {} is not an smxDeviceType_t (SMX_DEVICE_CPU=1, SMX_DEVICE_CUDA=2)",
                        device_type);
    }
    auto created = std::make_unique<smxHandle>(candidate);
    log_info("handle on {} device {} ({}, {} SMs/threads)", device_type == SMX_DEVICE_CPU ? "cpu" : "cuda",
             device_id, candidate.limits.name, candidate.limits.multiprocessor_count);
    *out = created.release();  // last: nothing after it can fail and leave the caller a handle it never got
    return SMX_STATUS_SUCCESS;
}

}  // namespace
}  // namespace smx

extern "C" {

SMX_API smxStatus_t smxCreate(smxHandle_t* handle, smxDeviceType_t deviceType, int deviceId) {
    const int device_type = smx::raw_enum_value(deviceType);
    return smx::guard_api("smxCreate", [&] { return smx::create_handle(handle, device_type, deviceId); });
}

SMX_API smxStatus_t smxDestroy(smxHandle_t handle) { return smx::destroy_live(handle, "handle"); }

SMX_API smxStatus_t smxGetHandleDevice(smxHandle_t handle, smxDeviceType_t* deviceType, int* deviceId) {
    SMX_RETURN_IF_ERROR(smx::check_live(handle, "handle"));
    if (deviceType != nullptr) *deviceType = handle->device_type;
    if (deviceId != nullptr) *deviceId = handle->device_id;
    return SMX_STATUS_SUCCESS;
}

SMX_API smxStatus_t smxSetDevicePointerChecks(smxHandle_t handle, int enabled) {
    SMX_RETURN_IF_ERROR(smx::check_live(handle, "handle"));
    if (enabled != 0 && enabled != 1) {
        return smx::fail(SMX_STATUS_BAD_PARAM_MODE, "enabled is {}; smxSetDevicePointerChecks takes 0 or 1", enabled);
    }
    handle->check_device_pointers = enabled == 1;
    return SMX_STATUS_SUCCESS;
}

}  // extern "C"
