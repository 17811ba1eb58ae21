// bench_device_cpu.cpp - the host as a BenchDevice: plain memory, std::chrono timing, memcpy bandwidth.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <thread>

#include "bench_device.hpp"
#include "bench_stats.hpp"

namespace smx_bench {
namespace {

std::string cpu_model_name() {
    std::ifstream cpuinfo("/proc/cpuinfo");
    std::string line;
    while (std::getline(cpuinfo, line)) {
        if (line.rfind("model name", 0) == 0) {
            const std::size_t colon = line.find(':');
            if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
        }
    }
    return "cpu";
}

class CpuDevice final : public BenchDevice {
public:
    smxDeviceType_t type() const override { return SMX_DEVICE_CPU; }

    std::string name() const override {
        return cpu_model_name() + " (" + std::to_string(std::max(1u, std::thread::hardware_concurrency())) +
               " threads)";
    }

    // The L3 as the OS reports it, capped: a VM may report a whole socket's L3, and the CPU backend's
    // numbers are context, not worth rotating through gigabytes on a small machine.
    std::size_t cache_bytes() const override {
        constexpr std::size_t cap = std::size_t{32} << 20;
        const long last_level = sysconf(_SC_LEVEL3_CACHE_SIZE);
        return last_level > 0 ? std::min(static_cast<std::size_t>(last_level), cap) : cap;
    }

    void* allocate(std::size_t bytes) override {
        void* data = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
        if (data == nullptr) throw BenchError("host allocation of " + std::to_string(bytes) + " bytes failed");
        return data;
    }

    void release(void* data) noexcept override { std::free(data); }

    void copy_to_device(void* device_dst, const void* host_src, std::size_t bytes) override {
        std::memcpy(device_dst, host_src, bytes);
    }

    void copy_to_host(void* host_dst, const void* device_src, std::size_t bytes) override {
        std::memcpy(host_dst, device_src, bytes);
    }

    void gather_to_host(void* host_dst, const void* device_src, std::size_t element_bytes, std::int64_t stride_bytes,
                        std::int64_t count) override {
        auto* dst = static_cast<unsigned char*>(host_dst);
        const auto* src = static_cast<const unsigned char*>(device_src);
        for (std::int64_t i = 0; i < count; ++i) std::memcpy(dst + i * element_bytes, src + i * stride_bytes, element_bytes);
    }

    void poison(void* data, std::size_t bytes) override { std::memset(data, 0xFF, bytes); }
    void synchronize() override {}
    void* stream() override { return nullptr; }

    std::vector<double> time_each(const std::function<void(int)>& launch, int calls) override {
        std::vector<double> micros;
        micros.reserve(calls);
        for (int call = 0; call < calls; ++call) {
            const auto start = std::chrono::steady_clock::now();
            launch(call);
            const auto stop = std::chrono::steady_clock::now();
            micros.push_back(std::chrono::duration<double, std::micro>(stop - start).count());
        }
        return micros;
    }

    std::optional<double> time_graph(const std::function<void(int)>&, int, int) override { return std::nullopt; }

    std::optional<double> smallest_operation_us(int) override { return std::nullopt; }

    double copy_bandwidth(int repetitions, std::string* description) override {
        const std::size_t bytes = std::max<std::size_t>(2 * cache_bytes(), std::size_t{64} << 20);
        DeviceBuffer first(*this, bytes);
        DeviceBuffer second(*this, bytes);
        std::memset(first.data(), 0x5A, bytes);  // touch every page, with non-zero data
        std::memset(second.data(), 0xA5, bytes);
        const std::vector<double> micros = time_each(
            [&](int call) {
                const bool forward = call % 2 == 0;
                std::memcpy(forward ? second.data() : first.data(), forward ? first.data() : second.data(), bytes);
            },
            repetitions);
        *description = "host memcpy of " + std::to_string(bytes >> 20) + " MiB, one thread";
        return 2.0 * static_cast<double>(bytes) / (summarize(micros).median_us * 1e-6);
    }
};

}  // namespace

std::unique_ptr<BenchDevice> make_cpu_device() { return std::make_unique<CpuDevice>(); }

void check_smx(smxStatus_t status, const std::string& what) {
    if (status != SMX_STATUS_SUCCESS) {
        throw BenchError(what + " failed: " + smxGetStatusString(status) + ": " + smxGetLastErrorMessage());
    }
}

}  // namespace smx_bench
