// bench_device_cuda.cpp - a CUDA GPU as a BenchDevice: device memory, CUDA-event timing with the stream
// held until every timed call is enqueued, graph replay timing, and device-to-device copy bandwidth.
// Built only when smx-bench links the CUDA runtime (SMX_BENCH_WITH_CUDA).
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>

#include "bench_device.hpp"
#include "bench_stats.hpp"

namespace smx_bench {
namespace {

void check_cuda(cudaError_t error, const std::string& what) {
    if (error != cudaSuccess) {
        throw BenchError(what + " failed: " + cudaGetErrorName(error) + ": " + cudaGetErrorString(error));
    }
}

// Holds a stream (a host function that waits) until open() is called, so that the calls enqueued behind
// it run back to back however slowly the host enqueues them.
class StreamGate {
public:
    explicit StreamGate(cudaStream_t stream) : stream_(stream) {
        check_cuda(cudaLaunchHostFunc(stream_, &StreamGate::wait_until_open, this), "cudaLaunchHostFunc (stream gate)");
    }
    // The host function reads *this: it must have finished before the gate goes away.
    ~StreamGate() {
        open();
        cudaStreamSynchronize(stream_);
    }
    StreamGate(const StreamGate&) = delete;
    StreamGate& operator=(const StreamGate&) = delete;

    void open() { open_.store(true, std::memory_order_release); }

    // Whether the gate let the stream go at its deadline, before open(): the calls queued after that point
    // ran as they were enqueued, so their intervals may hold host time. Valid once the stream has passed it.
    bool expired() const { return expired_.load(std::memory_order_acquire); }

private:
    static void CUDART_CB wait_until_open(void* self) {
        auto* gate = static_cast<StreamGate*>(self);
        // A deadline, because an enqueue that blocks on a full launch queue would otherwise never return.
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
        while (!gate->open_.load(std::memory_order_acquire)) {
            if (std::chrono::steady_clock::now() >= deadline) {
                gate->expired_.store(true, std::memory_order_release);
                return;
            }
            std::this_thread::yield();
        }
    }

    cudaStream_t stream_;
    std::atomic<bool> open_{false};
    std::atomic<bool> expired_{false};
};

// `count` timing events, destroyed with the object.
class EventSet {
public:
    explicit EventSet(int count) {
        events_.reserve(count);
        for (int i = 0; i < count; ++i) {
            cudaEvent_t event;
            check_cuda(cudaEventCreate(&event), "cudaEventCreate");
            events_.push_back(event);
        }
    }
    ~EventSet() {
        for (cudaEvent_t event : events_) cudaEventDestroy(event);
    }
    EventSet(const EventSet&) = delete;
    EventSet& operator=(const EventSet&) = delete;

    cudaEvent_t operator[](int i) const { return events_[i]; }

    // Microseconds between consecutive events.
    std::vector<double> intervals_us() const {
        std::vector<double> micros;
        for (std::size_t i = 0; i + 1 < events_.size(); ++i) {
            float millis = 0.0f;
            check_cuda(cudaEventElapsedTime(&millis, events_[i], events_[i + 1]), "cudaEventElapsedTime");
            micros.push_back(1000.0 * millis);
        }
        return micros;
    }

private:
    std::vector<cudaEvent_t> events_;
};

class CudaDevice final : public BenchDevice {
public:
    explicit CudaDevice(int device_id) : device_id_(device_id) {
        check_cuda(cudaSetDevice(device_id_), "cudaSetDevice");
        cudaDeviceProp properties{};
        check_cuda(cudaGetDeviceProperties(&properties, device_id_), "cudaGetDeviceProperties");
        name_ = properties.name;
        int l2_bytes = 0;
        check_cuda(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, device_id_), "cudaDeviceGetAttribute(L2)");
        l2_bytes_ = static_cast<std::size_t>(l2_bytes);
        check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    }
    ~CudaDevice() override { cudaStreamDestroy(stream_); }

    smxDeviceType_t type() const override { return SMX_DEVICE_CUDA; }
    std::string name() const override { return name_; }
    std::size_t cache_bytes() const override { return l2_bytes_; }

    void* allocate(std::size_t bytes) override {
        void* data = nullptr;
        check_cuda(cudaMalloc(&data, bytes), "cudaMalloc of " + std::to_string(bytes) + " bytes");
        return data;
    }

    void release(void* data) noexcept override { cudaFree(data); }

    void copy_to_device(void* device_dst, const void* host_src, std::size_t bytes) override {
        check_cuda(cudaMemcpyAsync(device_dst, host_src, bytes, cudaMemcpyHostToDevice, stream_), "cudaMemcpyAsync H2D");
        synchronize();  // the host buffer is reused right after
    }

    void copy_to_host(void* host_dst, const void* device_src, std::size_t bytes) override {
        check_cuda(cudaMemcpyAsync(host_dst, device_src, bytes, cudaMemcpyDeviceToHost, stream_), "cudaMemcpyAsync D2H");
        synchronize();
    }

    void gather_to_host(void* host_dst, const void* device_src, std::size_t element_bytes, std::int64_t stride_bytes,
                        std::int64_t count) override {
        check_cuda(cudaMemcpy2DAsync(host_dst, element_bytes, device_src, static_cast<std::size_t>(stride_bytes),
                                     element_bytes, static_cast<std::size_t>(count), cudaMemcpyDeviceToHost, stream_),
                   "cudaMemcpy2DAsync D2H (row gather)");
        synchronize();
    }

    void poison(void* data, std::size_t bytes) override {
        check_cuda(cudaMemsetAsync(data, 0xFF, bytes, stream_), "cudaMemsetAsync (poison)");
    }

    void synchronize() override {
        check_cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
        check_cuda(cudaGetLastError(), "a previous CUDA call");
    }

    void* stream() override { return stream_; }

    std::vector<double> time_each(const std::function<void(int)>& launch, int calls) override {
        EventSet events(calls + 1);  // call i runs between events i and i+1
        StreamGate gate(stream_);
        check_cuda(cudaEventRecord(events[0], stream_), "cudaEventRecord");
        for (int call = 0; call < calls; ++call) {
            launch(call);
            check_cuda(cudaEventRecord(events[call + 1], stream_), "cudaEventRecord");
        }
        gate.open();
        synchronize();
        if (gate.expired()) {
            throw std::runtime_error("the stream gate opened at its 2 s deadline, before every timed call was "
                                     "enqueued: the intervals could hold host time");
        }
        return events.intervals_us();
    }

    std::optional<double> time_graph(const std::function<void(int)>& launch, int captured, int replays) override {
        cudaGraph_t graph = nullptr;
        check_cuda(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal), "cudaStreamBeginCapture");
        try {
            for (int call = 0; call < captured; ++call) launch(call);
        } catch (...) {
            cudaStreamEndCapture(stream_, &graph);  // leave capture mode before reporting
            if (graph != nullptr) cudaGraphDestroy(graph);
            throw;
        }
        check_cuda(cudaStreamEndCapture(stream_, &graph), "cudaStreamEndCapture");
        cudaGraphExec_t executable = nullptr;
        const cudaError_t instantiated = cudaGraphInstantiate(&executable, graph, 0);
        cudaGraphDestroy(graph);
        check_cuda(instantiated, "cudaGraphInstantiate");
        struct ExecGuard {
            cudaGraphExec_t exec;
            ~ExecGuard() { cudaGraphExecDestroy(exec); }
        } guard{executable};

        constexpr int warmup_replays = 2;  // uploads the graph and warms the launch path
        for (int r = 0; r < warmup_replays; ++r) check_cuda(cudaGraphLaunch(executable, stream_), "cudaGraphLaunch");
        synchronize();
        std::vector<double> micros = time_each(
            [&](int) { check_cuda(cudaGraphLaunch(executable, stream_), "cudaGraphLaunch"); }, replays);
        for (double& replay : micros) replay /= captured;
        return summarize(std::move(micros)).median_us;
    }

    double copy_bandwidth(int repetitions, std::string* description) override {
        std::size_t free_bytes = 0, total_bytes = 0;
        check_cuda(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
        const std::size_t bytes = std::min<std::size_t>(std::size_t{1} << 30, free_bytes / 4);
        DeviceBuffer first(*this, bytes);
        DeviceBuffer second(*this, bytes);
        check_cuda(cudaMemsetAsync(first.data(), 0x5A, bytes, stream_), "cudaMemsetAsync");  // non-zero data
        check_cuda(cudaMemsetAsync(second.data(), 0xA5, bytes, stream_), "cudaMemsetAsync");
        const auto copy = [&](int call) {
            const bool forward = call % 2 == 0;
            check_cuda(cudaMemcpyAsync(forward ? second.data() : first.data(), forward ? first.data() : second.data(),
                                       bytes, cudaMemcpyDeviceToDevice, stream_),
                       "cudaMemcpyAsync D2D");
        };
        constexpr int warmup_copies = 3;
        for (int call = 0; call < warmup_copies; ++call) copy(call);
        synchronize();
        const std::vector<double> micros = time_each(copy, repetitions);
        *description = "device-to-device cudaMemcpyAsync of " + std::to_string(bytes >> 20) + " MiB";
        return 2.0 * static_cast<double>(bytes) / (summarize(micros).median_us * 1e-6);
    }

    std::optional<double> smallest_operation_us(int repetitions) override {
        DeviceBuffer target(*this, 4);
        const auto memset = [&](int) { check_cuda(cudaMemsetAsync(target.data(), 0, 4, stream_), "cudaMemsetAsync"); };
        for (int call = 0; call < 3; ++call) memset(call);
        synchronize();
        return summarize(time_each(memset, repetitions)).median_us;
    }

private:
    int device_id_;
    std::string name_;
    std::size_t l2_bytes_ = 0;
    cudaStream_t stream_ = nullptr;
};

}  // namespace

bool cuda_device_support_built() { return true; }

std::unique_ptr<BenchDevice> make_cuda_device(int device_id) { return std::make_unique<CudaDevice>(device_id); }

}  // namespace smx_bench
