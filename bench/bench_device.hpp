// bench_device.hpp - the memory and timing services smx-bench needs from the device it measures:
// allocation, copies to and from the host, poisoning, per-call timing, graph replay timing, and the
// copy bandwidth that "% of copy" is measured against. One implementation per device type.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "smx/smx.h"

namespace smx_bench {

// Any failure of the device or of an smx call inside a case; the case is marked FAIL with its text.
struct BenchError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// Throws BenchError naming `what` and smx's last error message unless `status` is success.
void check_smx(smxStatus_t status, const std::string& what);

class BenchDevice {
public:
    virtual ~BenchDevice() = default;

    virtual smxDeviceType_t type() const = 0;
    // A human-readable name ("NVIDIA H200", or the CPU's model name).
    virtual std::string name() const = 0;
    // The last-level cache size in bytes; inputs rotate through at least four times this.
    virtual std::size_t cache_bytes() const = 0;

    // Device memory (host memory on the CPU), 256-byte aligned. Throws BenchError when it fails.
    virtual void* allocate(std::size_t bytes) = 0;
    virtual void release(void* data) noexcept = 0;
    virtual void copy_to_device(void* device_dst, const void* host_src, std::size_t bytes) = 0;
    virtual void copy_to_host(void* host_dst, const void* device_src, std::size_t bytes) = 0;
    // Copies `count` elements of `element_bytes`, `stride_bytes` apart on the device, densely to the host.
    virtual void gather_to_host(void* host_dst, const void* device_src, std::size_t element_bytes,
                                std::int64_t stride_bytes, std::int64_t count) = 0;
    // Fills with 0xFF bytes: a NaN in every floating dtype, so unwritten outputs fail the check.
    virtual void poison(void* data, std::size_t bytes) = 0;
    // Waits for all enqueued work and throws BenchError if any of it failed.
    virtual void synchronize() = 0;
    // The stream smx forwards are enqueued on (nullptr on the CPU).
    virtual void* stream() = 0;

    // Runs launch(0 .. calls-1) and returns each call's time in microseconds. On a GPU every call is
    // bracketed by events, and the stream is held until all calls are enqueued so that host launch cost
    // never shows as idle device time.
    virtual std::vector<double> time_each(const std::function<void(int call)>& launch, int calls) = 0;

    // GPU only: captures launch(0 .. captured-1) into one graph and times `replays` replays of it.
    // Returns the median replay time divided by `captured` (microseconds per forward), or nullopt on a
    // device without graphs. Throws BenchError if capture or replay fails.
    virtual std::optional<double> time_graph(const std::function<void(int call)>& launch, int captured,
                                             int replays) = 0;

    // The device's copy bandwidth in bytes per second (bytes read + bytes written), measured now the
    // same way the cases are; `description` says what was copied.
    virtual double copy_bandwidth(int repetitions, std::string* description) = 0;

    // GPU only: the median time of the smallest operation (a 4-byte memset) timed like a case, i.e. the
    // floor under any one-launch case's time (launch and event overhead); nullopt elsewhere.
    virtual std::optional<double> smallest_operation_us(int repetitions) = 0;
};

// A buffer on a BenchDevice, released when it goes out of scope.
class DeviceBuffer {
public:
    DeviceBuffer() = default;
    DeviceBuffer(BenchDevice& device, std::size_t bytes) : device_(&device), bytes_(bytes) {
        data_ = bytes > 0 ? device.allocate(bytes) : nullptr;
    }
    ~DeviceBuffer() {
        if (data_ != nullptr) device_->release(data_);
    }
    DeviceBuffer(DeviceBuffer&& other) noexcept { swap(other); }
    DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
        swap(other);
        return *this;
    }
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;

    void* data() const { return data_; }
    std::size_t bytes() const { return bytes_; }

private:
    void swap(DeviceBuffer& other) noexcept {
        std::swap(device_, other.device_);
        std::swap(data_, other.data_);
        std::swap(bytes_, other.bytes_);
    }
    BenchDevice* device_ = nullptr;
    void* data_ = nullptr;
    std::size_t bytes_ = 0;
};

std::unique_ptr<BenchDevice> make_cpu_device();

// Whether this smx-bench was built with the CUDA runtime (it can then measure a CUDA handle).
bool cuda_device_support_built();

// The CUDA device `device_id`; throws BenchError if the bench was built without CUDA or the device fails.
std::unique_ptr<BenchDevice> make_cuda_device(int device_id);

}  // namespace smx_bench
