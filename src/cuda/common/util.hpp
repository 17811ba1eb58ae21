// util.hpp - host-side helpers of the CUDA backend: CUDA errors as smx statuses, and a guard that
// makes a device current for a scope and restores the caller's device afterwards.
#pragma once

#include <cuda_runtime.h>

#include "core/error.hpp"

namespace smx::cuda {

// Fails with SMX_STATUS_EXECUTION_FAILED, naming what was attempted and CUDA's error name and text.
// Clears CUDA's (non-sticky) last error so the caller's next CUDA call does not see ours.
inline smxStatus_t cuda_failure(cudaError_t error, const char* what) {
    (void)cudaGetLastError();
    return fail(SMX_STATUS_EXECUTION_FAILED, "{} failed: {} ({})", what, cudaGetErrorName(error),
                cudaGetErrorString(error));
}

// Makes `device` current when it is not (cudaGetDevice is a cheap thread-local read) and restores the
// previous device on destruction. status() reports a failed switch.
class ScopedDevice {
public:
    explicit ScopedDevice(int device) {
        error_ = cudaGetDevice(&previous_);
        if (error_ == cudaSuccess && previous_ != device) {
            error_ = cudaSetDevice(device);
            switched_ = error_ == cudaSuccess;
        }
    }
    ~ScopedDevice() {
        if (switched_) (void)cudaSetDevice(previous_);
    }
    ScopedDevice(const ScopedDevice&) = delete;
    ScopedDevice& operator=(const ScopedDevice&) = delete;

    smxStatus_t status() const {
        return error_ == cudaSuccess ? SMX_STATUS_SUCCESS : cuda_failure(error_, "making the handle's device current");
    }

private:
    int previous_ = 0;
    bool switched_ = false;
    cudaError_t error_ = cudaSuccess;
};

}  // namespace smx::cuda
