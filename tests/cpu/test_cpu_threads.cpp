// SMX_CPU_THREADS, read at smxCreate: how many threads a CPU handle's forward may use, as the plan text
// shows it ("threads=N"). Values past int are capped at the documented limit, never wrapped; values that are
// not a positive decimal integer are ignored.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <thread>

#include "support/environment.hpp"
#include "support/reference.hpp"

using namespace smx_test;

namespace {

constexpr int kMaxCpuThreads = 1024;  // the cap docs/api.md gives for SMX_CPU_THREADS

// The threads a new CPU handle plans for softmax over `rows` rows of 65536 f32 (each row worth a thread).
int planned_threads(std::int64_t rows) {
    Handle handle(SMX_DEVICE_CPU, 0);
    REQUIRE(handle.status == SMX_STATUS_SUCCESS);
    TensorDesc tensor(SMX_DTYPE_F32, {rows, 65536}, {});
    SoftmaxDesc desc(handle.handle, SMX_SOFTMAX, 1, tensor.desc, tensor.desc);
    REQUIRE(desc.status == SMX_STATUS_SUCCESS);
    const char* plan = nullptr;
    REQUIRE(smxGetSoftmaxPlan(desc.desc, &plan) == SMX_STATUS_SUCCESS);
    const std::string text = plan;
    const std::size_t at = text.find("threads=");
    REQUIRE(at != std::string::npos);
    return std::stoi(text.substr(at + 8));
}

// What a handle gets without a usable SMX_CPU_THREADS: every hardware thread, up to the cap.
int hardware_threads() {
    return std::min<int>(std::max<unsigned>(1, std::thread::hardware_concurrency()), kMaxCpuThreads);
}

}  // namespace

TEST_CASE("SMX_CPU_THREADS sets the threads a CPU forward may use", "[cpu]") {
    for (const char* value : {"1", "3", "8", "0008", "1024"}) {
        const ScopedEnvironment threads("SMX_CPU_THREADS", value);
        INFO("SMX_CPU_THREADS=" << value);
        CHECK(planned_threads(2048) == std::stoi(value));
    }
}

TEST_CASE("SMX_CPU_THREADS above the cap, past int and past long included, gives the cap, not a wrapped count",
          "[cpu]") {
    for (const char* value : {"1025", "2147483648", "4294967295", "4294967297", "99999999999999999999999999"}) {
        const ScopedEnvironment threads("SMX_CPU_THREADS", value);
        INFO("SMX_CPU_THREADS=" << value);
        CHECK(planned_threads(2048) == kMaxCpuThreads);
    }
}

TEST_CASE("SMX_CPU_THREADS that is not a positive decimal integer is ignored: every hardware thread", "[cpu]") {
    const int expected = hardware_threads();
    for (const char* value : {"", "0", "-3", "-4294967295", "abc", "8x", " 8", "+8", "0x10", "1e3"}) {
        const ScopedEnvironment threads("SMX_CPU_THREADS", value);
        INFO("SMX_CPU_THREADS=" << value);
        CHECK(planned_threads(2048) == expected);
    }
}
