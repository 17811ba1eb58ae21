// Status strings, the version, the thread-local last error and logging: the parts of the C API that are
// about reporting rather than computing.
//
// Two logging tests need a process where nobody has chosen a log level yet; they are hidden ([.]) and CTest
// runs each in a process of its own (tests/CMakeLists.txt), with SMX_LOG_LEVEL controlled.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "api/api_checks.hpp"
#include "support/reference.hpp"

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using namespace smx_test;

namespace {

const std::vector<std::pair<smxStatus_t, const char*>> kAllStatuses = {
    {SMX_STATUS_SUCCESS, "SMX_STATUS_SUCCESS"},
    {SMX_STATUS_BAD_PARAM, "SMX_STATUS_BAD_PARAM"},
    {SMX_STATUS_BAD_PARAM_NULL_POINTER, "SMX_STATUS_BAD_PARAM_NULL_POINTER"},
    {SMX_STATUS_BAD_PARAM_DTYPE, "SMX_STATUS_BAD_PARAM_DTYPE"},
    {SMX_STATUS_BAD_PARAM_NDIM, "SMX_STATUS_BAD_PARAM_NDIM"},
    {SMX_STATUS_BAD_PARAM_SHAPE, "SMX_STATUS_BAD_PARAM_SHAPE"},
    {SMX_STATUS_BAD_PARAM_STRIDES, "SMX_STATUS_BAD_PARAM_STRIDES"},
    {SMX_STATUS_BAD_PARAM_AXIS, "SMX_STATUS_BAD_PARAM_AXIS"},
    {SMX_STATUS_BAD_PARAM_OVERLAP, "SMX_STATUS_BAD_PARAM_OVERLAP"},
    {SMX_STATUS_BAD_PARAM_WORKSPACE, "SMX_STATUS_BAD_PARAM_WORKSPACE"},
    {SMX_STATUS_BAD_PARAM_MODE, "SMX_STATUS_BAD_PARAM_MODE"},
    {SMX_STATUS_BAD_PARAM_DEVICE, "SMX_STATUS_BAD_PARAM_DEVICE"},
    {SMX_STATUS_BAD_PARAM_ALIGNMENT, "SMX_STATUS_BAD_PARAM_ALIGNMENT"},
    {SMX_STATUS_BAD_PARAM_OBJECT, "SMX_STATUS_BAD_PARAM_OBJECT"},
    {SMX_STATUS_NOT_SUPPORTED, "SMX_STATUS_NOT_SUPPORTED"},
    {SMX_STATUS_NOT_SUPPORTED_DEVICE_ABSENT, "SMX_STATUS_NOT_SUPPORTED_DEVICE_ABSENT"},
    {SMX_STATUS_NOT_SUPPORTED_BACKEND_NOT_BUILT, "SMX_STATUS_NOT_SUPPORTED_BACKEND_NOT_BUILT"},
    {SMX_STATUS_NOT_SUPPORTED_DTYPE_PAIR, "SMX_STATUS_NOT_SUPPORTED_DTYPE_PAIR"},
    {SMX_STATUS_INTERNAL_ERROR, "SMX_STATUS_INTERNAL_ERROR"},
    {SMX_STATUS_ALLOC_FAILED, "SMX_STATUS_ALLOC_FAILED"},
    {SMX_STATUS_EXECUTION_FAILED, "SMX_STATUS_EXECUTION_FAILED"},
};

// Collects every message the library hands to the log callback.
struct LogCapture {
    std::mutex mutex;
    std::vector<std::pair<smxLogLevel_t, std::string>> messages;

    static void callback(smxLogLevel_t level, const char* message, void* user_data) {
        auto* self = static_cast<LogCapture*>(user_data);
        std::lock_guard<std::mutex> lock(self->mutex);
        self->messages.emplace_back(level, message);
    }
    // How many captured messages at exactly `level` contain `fragment`.
    int count(smxLogLevel_t level, const std::string& fragment) {
        std::lock_guard<std::mutex> lock(mutex);
        int found = 0;
        for (const auto& m : messages) found += m.first == level && m.second.find(fragment) != std::string::npos;
        return found;
    }
    std::size_t size() {
        std::lock_guard<std::mutex> lock(mutex);
        return messages.size();
    }
};

// Creates a CPU handle and a softmax descriptor (which logs its plan at DEBUG), and returns the plan text.
std::string create_and_run_cpu_softmax() {
    Handle handle(SMX_DEVICE_CPU, 0);
    REQUIRE(handle.status == SMX_STATUS_SUCCESS);
    HostTensor x = make_tensor(SMX_DTYPE_F32, {3, 17});
    HostTensor y = make_tensor(SMX_DTYPE_F32, {3, 17});
    fill_random(x, test_rng());
    TensorDesc x_desc(x), y_desc(y);
    SoftmaxDesc desc(handle.handle, SMX_SOFTMAX, 1, y_desc.desc, x_desc.desc);
    REQUIRE(desc.status == SMX_STATUS_SUCCESS);
    REQUIRE(smxSoftmaxForward(desc.desc, nullptr, 0, y.data(), x.data(), nullptr) == SMX_STATUS_SUCCESS);
    const char* plan = nullptr;
    REQUIRE(smxGetSoftmaxPlan(desc.desc, &plan) == SMX_STATUS_SUCCESS);
    return plan;
}

}  // namespace

// ---- status and version -----------------------------------------------------------------------------

TEST_CASE("smxGetStatusString gives every status a distinct string that starts with its name", "[api]") {
    std::set<std::string> seen;
    for (const auto& [status, name] : kAllStatuses) {
        const char* text = smxGetStatusString(status);
        REQUIRE(text != nullptr);
        CHECK_THAT(std::string(text), StartsWith(std::string(name) + ":"));
        CHECK(std::string(text).size() > std::string(name).size() + 2);  // a description follows the name
        CHECK(seen.insert(text).second);
    }
}

TEST_CASE("smxGetStatusString answers an unknown code with SMX_STATUS_UNKNOWN, never NULL", "[api]") {
    for (int code : {1, 1999, 2013, 3004, 4002, 5001, -1}) {
        const char* text = smxGetStatusString(static_cast<smxStatus_t>(code));
        REQUIRE(text != nullptr);
        CHECK_THAT(std::string(text), StartsWith("SMX_STATUS_UNKNOWN"));
    }
}

TEST_CASE("SMX_STATUS_CATEGORY rounds every code down to its thousand", "[api]") {
    for (const auto& entry : kAllStatuses) {
        const int code = static_cast<int>(entry.first);
        const int category = SMX_STATUS_CATEGORY(entry.first);
        CHECK(category == code - code % 1000);
        CHECK((category == 0 || category == 2000 || category == 3000 || category == 4000 || category == 5000));
    }
    CHECK(SMX_STATUS_CATEGORY(SMX_STATUS_BAD_PARAM_ALIGNMENT) == SMX_STATUS_BAD_PARAM);
    CHECK(SMX_STATUS_CATEGORY(SMX_STATUS_NOT_SUPPORTED_DTYPE_PAIR) == SMX_STATUS_NOT_SUPPORTED);
    CHECK(SMX_STATUS_CATEGORY(SMX_STATUS_ALLOC_FAILED) == SMX_STATUS_INTERNAL_ERROR);
}

TEST_CASE("smxGetVersion returns the SMX_VERSION this test was compiled against", "[api]") {
    CHECK(SMX_VERSION == SMX_VERSION_MAJOR * 10000 + SMX_VERSION_MINOR * 100 + SMX_VERSION_PATCH);
    CHECK(smxGetVersion() == SMX_VERSION);
}

// ---- last error -------------------------------------------------------------------------------------

TEST_CASE("a successful call leaves the last error alone", "[api]") {
    CHECK(smxCreate(nullptr, SMX_DEVICE_CPU, 0) == SMX_STATUS_BAD_PARAM_NULL_POINTER);
    const std::string before = last_error();
    REQUIRE_FALSE(before.empty());
    Handle handle(SMX_DEVICE_CPU, 0);
    REQUIRE(handle.status == SMX_STATUS_SUCCESS);
    CHECK(last_error() == before);
}

TEST_CASE("the last error is per thread: failures on two threads do not see each other", "[api]") {
    std::atomic<int> failed{0};
    std::string seen_by[2];
    std::string fresh_thread_error = "not read";
    auto fail_then_read = [&](int which) {
        if (which == 0) {
            fresh_thread_error = last_error();  // nothing has failed on this thread yet
            smxCreate(nullptr, SMX_DEVICE_CPU, 7);
            const std::int64_t shape[1] = {2};
            smxTensorDescriptor_t desc;
            smxCreateTensorDescriptor(&desc, SMX_DTYPE_F32, 9, shape, nullptr);
        } else {
            smxHandle_t handle;
            smxCreate(&handle, SMX_DEVICE_CPU, 5);
        }
        failed.fetch_add(1);
        while (failed.load() < 2) std::this_thread::yield();  // both have failed before either reads
        seen_by[which] = last_error();
    };
    std::thread first(fail_then_read, 0), second(fail_then_read, 1);
    first.join();
    second.join();
    CHECK(fresh_thread_error.empty());
    CHECK_THAT(seen_by[0], Contains("ndim 9"));
    CHECK_THAT(seen_by[1], Contains("CPU device id 5"));
}

// ---- logging ----------------------------------------------------------------------------------------

TEST_CASE("smxSetLogLevel refuses a value that is not an smxLogLevel_t", "[api][logging]") {
    LogDefaultsGuard restore;
    for (int level : {5, -1, 7}) {
        CHECK(smxSetLogLevel(static_cast<smxLogLevel_t>(level)) == SMX_STATUS_BAD_PARAM);
        CHECK_THAT(last_error(), Contains("log level " + std::to_string(level)));
    }
}

TEST_CASE("at SMX_LOG_DEBUG the callback receives the descriptor's problem and chosen plan", "[api][logging]") {
    LogDefaultsGuard restore;
    LogCapture capture;
    REQUIRE(smxSetLogLevel(SMX_LOG_DEBUG) == SMX_STATUS_SUCCESS);
    REQUIRE(smxSetLogCallback(&LogCapture::callback, &capture) == SMX_STATUS_SUCCESS);
    const std::string plan = create_and_run_cpu_softmax();
    CHECK(capture.count(SMX_LOG_DEBUG, "softmax descriptor: softmax f32->f32 shape [3,17] axis 1") == 1);
    CHECK(capture.count(SMX_LOG_DEBUG, "plan: " + plan) == 1);
    CHECK(capture.count(SMX_LOG_INFO, "handle on cpu device 0") == 1);
    // A refused call is logged at DEBUG with its status and message.
    smxHandle_t handle;
    smxCreate(&handle, SMX_DEVICE_CPU, 3);
    CHECK(capture.count(SMX_LOG_DEBUG, "smxCreate failed (2010): CPU device id 3") == 1);
}

TEST_CASE("messages below the log level are dropped, and SMX_LOG_OFF drops everything", "[api][logging]") {
    LogDefaultsGuard restore;
    LogCapture capture;
    REQUIRE(smxSetLogLevel(SMX_LOG_INFO) == SMX_STATUS_SUCCESS);
    REQUIRE(smxSetLogCallback(&LogCapture::callback, &capture) == SMX_STATUS_SUCCESS);
    create_and_run_cpu_softmax();
    CHECK(capture.count(SMX_LOG_INFO, "handle on cpu") == 1);
    CHECK(capture.count(SMX_LOG_DEBUG, "") == 0);

    for (smxLogLevel_t quiet : {SMX_LOG_WARN, SMX_LOG_OFF}) {
        const std::size_t before = capture.size();
        REQUIRE(smxSetLogLevel(quiet) == SMX_STATUS_SUCCESS);
        create_and_run_cpu_softmax();
        CHECK(capture.size() == before);
    }
}

TEST_CASE("removing the callback sends messages to standard error again", "[api][logging]") {
    LogDefaultsGuard restore;
    LogCapture capture;
    REQUIRE(smxSetLogLevel(SMX_LOG_INFO) == SMX_STATUS_SUCCESS);
    REQUIRE(smxSetLogCallback(&LogCapture::callback, &capture) == SMX_STATUS_SUCCESS);
    REQUIRE(smxSetLogCallback(nullptr, nullptr) == SMX_STATUS_SUCCESS);
    StderrCapture stderr_capture;
    {
        Handle handle(SMX_DEVICE_CPU, 0);
        REQUIRE(handle.status == SMX_STATUS_SUCCESS);
    }
    CHECK_THAT(stderr_capture.text(), Contains("[smx info] handle on cpu device 0"));
    CHECK(capture.size() == 0);
}

namespace {

// A callback that calls smx from inside itself: a failing smxCreate (logged at DEBUG) and an attempt to
// replace the callback, on its first message only.
struct ReenteringCallback {
    LogCapture capture;
    std::atomic<int> entered{0};
    smxStatus_t nested_create = SMX_STATUS_SUCCESS;
    std::string nested_error;
    smxStatus_t nested_set_callback = SMX_STATUS_SUCCESS;

    static void callback(smxLogLevel_t level, const char* message, void* user_data) {
        auto* self = static_cast<ReenteringCallback*>(user_data);
        LogCapture::callback(level, message, &self->capture);
        if (self->entered++ != 0) return;
        smxHandle_t handle = nullptr;
        self->nested_create = smxCreate(&handle, SMX_DEVICE_CPU, 7);
        self->nested_error = smxGetLastErrorMessage();
        self->nested_set_callback = smxSetLogCallback(nullptr, nullptr);
    }
};

}  // namespace

TEST_CASE("a callback may call smx: nested messages are dropped, the caller's last error is kept", "[api][logging]") {
    LogDefaultsGuard restore;
    ReenteringCallback reentering;
    REQUIRE(smxSetLogLevel(SMX_LOG_DEBUG) == SMX_STATUS_SUCCESS);
    REQUIRE(smxSetLogCallback(&ReenteringCallback::callback, &reentering) == SMX_STATUS_SUCCESS);
    smxHandle_t handle = nullptr;
    CHECK(smxCreate(&handle, SMX_DEVICE_CPU, 3) == SMX_STATUS_BAD_PARAM_DEVICE);  // logged: the callback runs
    CHECK_THAT(last_error(), Contains("CPU device id 3"));  // not the nested call's "id 7"
    REQUIRE(smxSetLogCallback(nullptr, nullptr) == SMX_STATUS_SUCCESS);
    CHECK(reentering.entered.load() == 1);
    CHECK(reentering.nested_create == SMX_STATUS_BAD_PARAM_DEVICE);
    CHECK_THAT(reentering.nested_error, Contains("CPU device id 7"));
    CHECK(reentering.nested_set_callback == SMX_STATUS_NOT_SUPPORTED);
    CHECK(reentering.capture.count(SMX_LOG_DEBUG, "CPU device id 3") == 1);
    CHECK(reentering.capture.count(SMX_LOG_DEBUG, "CPU device id 7") == 0);
    CHECK(reentering.capture.count(SMX_LOG_DEBUG, "smxSetLogCallback") == 0);
}

TEST_CASE("once smxSetLogCallback returns, the callback it replaced is running nowhere", "[api][logging]") {
    LogDefaultsGuard restore;
    // A slow callback, entered on another thread; the main thread replaces it meanwhile.
    struct Slow {
        std::atomic<bool> entered{false};
        std::atomic<bool> finished{false};
        static void callback(smxLogLevel_t, const char*, void* user_data) {
            auto* self = static_cast<Slow*>(user_data);
            self->entered = true;
            std::this_thread::sleep_for(std::chrono::milliseconds(200));
            self->finished = true;
        }
    } slow;
    REQUIRE(smxSetLogLevel(SMX_LOG_INFO) == SMX_STATUS_SUCCESS);
    REQUIRE(smxSetLogCallback(&Slow::callback, &slow) == SMX_STATUS_SUCCESS);
    std::thread logging_thread([] { Handle handle(SMX_DEVICE_CPU, 0); });  // logs at INFO
    while (!slow.entered.load()) std::this_thread::yield();
    REQUIRE(smxSetLogCallback(nullptr, nullptr) == SMX_STATUS_SUCCESS);
    CHECK(slow.finished.load());
    logging_thread.join();
}

TEST_CASE("a callback that throws ends its delivery: the callback can still be replaced", "[api][logging]") {
    LogDefaultsGuard restore;
    struct Throwing {
        static void callback(smxLogLevel_t, const char*, void*) { throw std::runtime_error("from the callback"); }
    };
    REQUIRE(smxSetLogLevel(SMX_LOG_DEBUG) == SMX_STATUS_SUCCESS);
    REQUIRE(smxSetLogCallback(&Throwing::callback, nullptr) == SMX_STATUS_SUCCESS);
    {
        smxHandle_t handle = nullptr;
        CHECK(smxCreate(&handle, SMX_DEVICE_CPU, 3) == SMX_STATUS_BAD_PARAM_DEVICE);
    }
    CHECK_THAT(last_error(), Contains("CPU device id 3"));
    LogCapture capture;
    CHECK(smxSetLogCallback(&LogCapture::callback, &capture) == SMX_STATUS_SUCCESS);  // would wait for ever
    smxHandle_t handle = nullptr;
    CHECK(smxCreate(&handle, SMX_DEVICE_CPU, 4) == SMX_STATUS_BAD_PARAM_DEVICE);
    CHECK(capture.count(SMX_LOG_DEBUG, "CPU device id 4") == 1);  // messages still flow on this thread
    CHECK(smxSetLogCallback(nullptr, nullptr) == SMX_STATUS_SUCCESS);
}

namespace {

// Log callbacks that break the rule that a callback must not throw: one throws a non-std::exception value.
void callback_throwing_an_int(smxLogLevel_t, const char*, void*) { throw 42; }
void callback_throwing_a_std_exception(smxLogLevel_t, const char*, void*) {
    throw std::runtime_error("from the callback");
}

}  // namespace

TEST_CASE("a callback that throws changes no status, output or message, and nothing is printed", "[api][logging]") {
    LogDefaultsGuard restore;
    REQUIRE(smxSetLogLevel(SMX_LOG_DEBUG) == SMX_STATUS_SUCCESS);
    for (smxLogCallback_t callback : {&callback_throwing_an_int, &callback_throwing_a_std_exception}) {
        REQUIRE(smxSetLogCallback(callback, nullptr) == SMX_STATUS_SUCCESS);
        test_rng();  // it prints its seed on first use: keep that out of the captured standard error
        StderrCapture stderr_capture;
        smxHandle_t handle = nullptr;
        CHECK(smxCreate(&handle, SMX_DEVICE_CPU, 0) == SMX_STATUS_SUCCESS);  // logs at INFO once the handle exists
        CHECK(smxDestroy(handle) == SMX_STATUS_SUCCESS);
        handle = reinterpret_cast<smxHandle_t>(static_cast<std::uintptr_t>(0xdeadbeef));
        CHECK(smxCreate(&handle, SMX_DEVICE_CPU, 3) == SMX_STATUS_BAD_PARAM_DEVICE);  // its failure logs at DEBUG
        CHECK(handle == nullptr);
        CHECK_THAT(last_error(), Contains("CPU device id 3"));
        CHECK_THAT(create_and_run_cpu_softmax(), Contains("cpu reference"));  // the descriptor logs its plan
        CHECK(stderr_capture.text().empty());
    }
}

// Hidden: needs a process where no level was ever chosen and SMX_LOG_LEVEL is unset (CTest runs it so).
TEST_CASE("logging is silent by default, and installing a callback turns it on at SMX_LOG_INFO",
          "[.][logging_defaults]") {
    LogDefaultsGuard restore;
    test_rng();  // it prints its seed on first use: keep that out of the captured standard error
    {
        StderrCapture stderr_capture;
        create_and_run_cpu_softmax();
        smxHandle_t handle;
        smxCreate(&handle, SMX_DEVICE_CPU, 3);  // a failure is logged at DEBUG, which is off too
        CHECK(stderr_capture.text().empty());
    }
    LogCapture capture;
    REQUIRE(smxSetLogCallback(&LogCapture::callback, &capture) == SMX_STATUS_SUCCESS);
    create_and_run_cpu_softmax();
    CHECK(capture.count(SMX_LOG_INFO, "handle on cpu device 0") == 1);
    CHECK(capture.count(SMX_LOG_DEBUG, "") == 0);
}

// Hidden: CTest runs it in its own process with SMX_LOG_LEVEL=debug.
TEST_CASE("SMX_LOG_LEVEL sets the level, and a callback installed later keeps it", "[.][logging_env]") {
    LogDefaultsGuard restore;
    test_rng();  // it prints its seed on first use: keep that out of the captured standard error
    {
        StderrCapture stderr_capture;
        create_and_run_cpu_softmax();
        CHECK_THAT(stderr_capture.text(), Contains("[smx debug] softmax descriptor:"));
    }
    LogCapture capture;
    REQUIRE(smxSetLogCallback(&LogCapture::callback, &capture) == SMX_STATUS_SUCCESS);
    create_and_run_cpu_softmax();
    CHECK(capture.count(SMX_LOG_DEBUG, "softmax descriptor:") == 1);
}
