// cuda_helpers.hpp - what the [cuda] tests share: checked CUDA calls, RAII device memory, moving a
// HostTensor's whole storage to and from the device (so strided, padded and negative-stride layouts keep
// their shape), poisoning device outputs, and running one descriptor on a CUDA handle with its workspace.
// Everything goes through the public C API and the CUDA runtime only.
#pragma once

#if SMX_TEST_WITH_CUDA

#include <cuda_runtime_api.h>

#include <catch2/catch.hpp>

#include <cstddef>
#include <string>
#include <vector>

#include "support/environment.hpp"
#include "support/reference.hpp"

// Fails the current test with the CUDA error text and the call that produced it.
#define SMX_REQUIRE_CUDA(call)                                                                              \
    do {                                                                                                    \
        const cudaError_t smx_cuda_status_ = (call);                                                        \
        if (smx_cuda_status_ != cudaSuccess) {                                                              \
            FAIL(#call << " failed: " << cudaGetErrorName(smx_cuda_status_) << ": "                         \
                       << cudaGetErrorString(smx_cuda_status_));                                            \
        }                                                                                                   \
    } while (0)

// Requires an smx call to succeed; on failure shows the status name and the last-error detail.
#define SMX_REQUIRE_OK(call)                                                                                \
    do {                                                                                                    \
        const smxStatus_t smx_status_ = (call);                                                             \
        INFO(#call << " -> " << smxGetStatusString(smx_status_) << ": " << smxGetLastErrorMessage());      \
        REQUIRE(smx_status_ == SMX_STATUS_SUCCESS);                                                         \
    } while (0)

namespace smx_test {

// One cudaMalloc'ed block, freed on destruction. Move-only.
class DeviceBuffer {
public:
    DeviceBuffer() = default;
    explicit DeviceBuffer(std::size_t bytes);
    ~DeviceBuffer();
    DeviceBuffer(DeviceBuffer&& other) noexcept;
    DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;

    void* get() const { return pointer_; }
    std::size_t bytes() const { return bytes_; }

private:
    void* pointer_ = nullptr;
    std::size_t bytes_ = 0;
};

// A device copy of a HostTensor's whole storage; data() points at element [0,...,0] exactly as
// HostTensor::data() does, so the host tensor's shape and strides describe it.
class DeviceTensor {
public:
    // Allocates room for `host`'s storage (contents undefined until upload or poison).
    explicit DeviceTensor(const HostTensor& host);

    void* data() const;
    void upload(const HostTensor& host);          // host storage -> device, synchronously
    void download(HostTensor& host) const;        // device -> host storage, synchronously
    void poison();                                // every byte 0xFF: a NaN in every dtype, as poison() does

private:
    DeviceBuffer buffer_;
    std::size_t first_element_byte_ = 0;          // HostTensor::offset in bytes
};

// A cudaStream_t created with cudaStreamNonBlocking, destroyed on destruction.
class DeviceStream {
public:
    DeviceStream();
    ~DeviceStream();
    DeviceStream(const DeviceStream&) = delete;
    DeviceStream& operator=(const DeviceStream&) = delete;
    cudaStream_t get() const { return stream_; }

private:
    cudaStream_t stream_ = nullptr;
};

// The CUDA handle every test uses (device 0); REQUIREs that it could be created.
class CudaHandle {
public:
    CudaHandle();
    smxHandle_t get() const { return handle_.handle; }

private:
    Handle handle_{SMX_DEVICE_CUDA, 0};
};

// The outcome of one forward call through run_on_device.
struct DeviceRun {
    smxStatus_t status = SMX_STATUS_SUCCESS;
    std::string error;   // smxGetLastErrorMessage() when status is not SUCCESS
    std::string plan;    // smxGetSoftmaxPlan() when the descriptor was created
    std::size_t workspace_bytes = 0;
};

// Creates the descriptor for (y, x, axis, mode) on `handle`, queries and allocates its workspace, runs
// forward on `stream` with the given device pointers, and waits for the stream. CUDA failures FAIL the
// test; smx failures come back in the result.
DeviceRun run_on_device(smxHandle_t handle, const HostTensor& y, void* y_device, const HostTensor& x,
                        const void* x_device, int axis, bool log_mode, cudaStream_t stream = nullptr);

// The whole round trip: uploads x, poisons y on the device, runs, downloads y into `y` and compares it
// with the float64 reference. Returns "" when every element is within tolerance, else the reason
// (smx failure or the worst mismatch). `plan` receives the plan text when given.
std::string check_on_device(smxHandle_t handle, HostTensor& y, const HostTensor& x, int axis, bool log_mode,
                            std::string* plan = nullptr);

// Same, computing in place: x's storage is uploaded, forward runs with y == x, and the result is
// downloaded into `x_then_y` (which must have equal dtypes and layout for y).
std::string check_in_place_on_device(smxHandle_t handle, HostTensor& x_then_y, int axis, bool log_mode,
                                     std::string* plan = nullptr);

// A contiguous (rows, row_len) case on fresh random x, softmax over the last axis: checked against the
// reference with check_on_device (a mismatch fails the test, with the case and plan in the message).
// Returns the plan text.
std::string check_random_rows(smxHandle_t handle, smxDataType_t x_dtype, smxDataType_t y_dtype, std::int64_t rows,
                              std::int64_t row_len, bool log_mode);

// The kernel kind of a CUDA plan text: the word after "cuda " ("warp", "block-regs", ...); "" if the
// text does not start with "cuda ".
std::string kernel_kind(const std::string& plan);

// SMX_CUDA_LONG_ROWS (cluster|grid|split|steps: the plan's long-rows rule overridden) for the guard's
// lifetime.
class ScopedLongRowsOverride : public ScopedEnvironment {
public:
    explicit ScopedLongRowsOverride(const char* value) : ScopedEnvironment("SMX_CUDA_LONG_ROWS", value) {}
};

// The plan text the handle makes for softmax over the last axis of a contiguous (rows, row_len) x -> y.
std::string plan_for_rows(smxHandle_t handle, smxDataType_t x_dtype, smxDataType_t y_dtype, std::int64_t rows,
                          std::int64_t row_len);

// The value of `key=` in a plan text ("chunks=32 ..." -> 32); -1 when absent.
std::int64_t plan_value(const std::string& plan, const std::string& key);

// Describes a case for INFO messages: "f16->f32 softmax shape [4,7] strides [7,1] axis 1".
std::string describe_case(const HostTensor& y, const HostTensor& x, int axis, bool log_mode);

// An input and an output dtype, for tests that loop over pairs.
struct DtypePair {
    smxDataType_t x, y;
};

// The current device's multiprocessor count (plans switch on rows per SM).
int multiprocessor_count();

}  // namespace smx_test

#endif  // SMX_TEST_WITH_CUDA
