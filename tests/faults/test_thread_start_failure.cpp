// CPU forwards and backwards whose worker threads cannot all start. This executable replaces the global
// operator new and pthread_create (libsmx binds to both at run time, the executable's definitions first), so a
// test can make exactly the Nth allocation, or the Nth thread start, after arming fail inside the compute
// call's spawn loop (cpu/rows.hpp). It is its own executable so the replacements touch no other test; it runs
// under ASan too (the replacements allocate with malloc and forward to the next pthread_create, ASan's
// interceptor there).
#include <catch2/catch.hpp>

#include <dlfcn.h>
#include <pthread.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <new>

#include "support/environment.hpp"
#include "support/reference.hpp"

using Catch::Matchers::Contains;
using namespace smx_test;

namespace {

// A countdown per fault: while positive it is armed, and the call that takes it from 1 to 0 fails.
std::atomic<long> g_allocations_until_failure{0};
std::atomic<long> g_thread_starts_until_failure{0};
std::atomic<long> g_faults_injected{0};

bool take_fault(std::atomic<long>& countdown) {
    long left = countdown.load();
    while (left > 0 && !countdown.compare_exchange_weak(left, left - 1)) {
    }
    if (left != 1) return false;
    ++g_faults_injected;
    return true;
}

void* allocate(std::size_t bytes) noexcept {
    if (take_fault(g_allocations_until_failure)) return nullptr;
    return std::malloc(bytes == 0 ? 1 : bytes);
}

void* allocate_or_throw(std::size_t bytes) {
    if (void* memory = allocate(bytes)) return memory;
    throw std::bad_alloc();
}

// Arms one fault for the duration of one call: the Nth allocation or thread start from now on fails.
class ArmedFault {
public:
    ArmedFault(std::atomic<long>& countdown, long nth) : countdown_(countdown) {
        g_faults_injected = 0;
        countdown_ = nth;
    }
    ~ArmedFault() { countdown_ = 0; }
    // Whether the armed call was reached (and failed) before disarming.
    static bool fired() { return g_faults_injected.load() > 0; }
    ArmedFault(const ArmedFault&) = delete;
    ArmedFault& operator=(const ArmedFault&) = delete;

private:
    std::atomic<long>& countdown_;
};

}  // namespace

void* operator new(std::size_t bytes) { return allocate_or_throw(bytes); }
void* operator new[](std::size_t bytes) { return allocate_or_throw(bytes); }
void* operator new(std::size_t bytes, const std::nothrow_t&) noexcept { return allocate(bytes); }
void* operator new[](std::size_t bytes, const std::nothrow_t&) noexcept { return allocate(bytes); }
void operator delete(void* memory) noexcept { std::free(memory); }
void operator delete[](void* memory) noexcept { std::free(memory); }
void operator delete(void* memory, std::size_t) noexcept { std::free(memory); }
void operator delete[](void* memory, std::size_t) noexcept { std::free(memory); }
void operator delete(void* memory, const std::nothrow_t&) noexcept { std::free(memory); }
void operator delete[](void* memory, const std::nothrow_t&) noexcept { std::free(memory); }

extern "C" int pthread_create(pthread_t* thread, const pthread_attr_t* attributes, void* (*start)(void*),
                              void* argument) noexcept {
    using Create = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
    static const Create next = reinterpret_cast<Create>(dlsym(RTLD_NEXT, "pthread_create"));
    if (take_fault(g_thread_starts_until_failure)) return EAGAIN;  // what the system says at its thread limit
    return next(thread, attributes, start, argument);
}

namespace {

// 64 rows of 65536 f32 on a handle allowed 8 threads: a forward that starts 7 workers.
struct ThreadedForward {
    ScopedEnvironment threads{"SMX_CPU_THREADS", "8"};
    Handle handle{SMX_DEVICE_CPU, 0};
    HostTensor x = make_tensor(SMX_DTYPE_F32, {64, 65536});
    HostTensor y = make_tensor(SMX_DTYPE_F32, {64, 65536});
    TensorDesc x_desc{x};
    TensorDesc y_desc{y};
    SoftmaxDesc desc{handle.handle, SMX_SOFTMAX, 1, y_desc.desc, x_desc.desc};

    ThreadedForward() {
        REQUIRE(handle.status == SMX_STATUS_SUCCESS);
        REQUIRE(desc.status == SMX_STATUS_SUCCESS);
        const char* plan = nullptr;
        REQUIRE(smxGetSoftmaxPlan(desc.desc, &plan) == SMX_STATUS_SUCCESS);
        REQUIRE_THAT(plan, Contains("threads=8"));
        fill_random(x, test_rng());
    }
    smxStatus_t run() { return smxSoftmaxForward(desc.desc, nullptr, 0, y.data(), x.data(), nullptr); }
    HostTensor& output() { return y; }
    std::string compare() const { return compare_to_reference(y, reference_softmax(x, 1, false), false); }
};

// The same shape through the log-softmax backward: 7 workers again.
struct ThreadedBackward {
    ScopedEnvironment threads{"SMX_CPU_THREADS", "8"};
    Handle handle{SMX_DEVICE_CPU, 0};
    HostTensor dy = make_tensor(SMX_DTYPE_F32, {64, 65536});
    HostTensor y = make_tensor(SMX_DTYPE_F32, {64, 65536});
    HostTensor dx = make_tensor(SMX_DTYPE_F32, {64, 65536});
    TensorDesc tensor_desc{dx};
    SoftmaxBackwardDesc desc{handle.handle, SMX_LOG_SOFTMAX, 1, tensor_desc.desc, tensor_desc.desc, tensor_desc.desc};

    ThreadedBackward() {
        REQUIRE(handle.status == SMX_STATUS_SUCCESS);
        REQUIRE(desc.status == SMX_STATUS_SUCCESS);
        const char* plan = nullptr;
        REQUIRE(smxGetSoftmaxBackwardPlan(desc.desc, &plan) == SMX_STATUS_SUCCESS);
        REQUIRE_THAT(plan, Contains("threads=8"));
        fill_random(dy, test_rng());
        fill_random(y, test_rng(), 0.1);
    }
    smxStatus_t run() { return smxSoftmaxBackward(desc.desc, nullptr, 0, dx.data(), dy.data(), y.data(), nullptr); }
    HostTensor& output() { return dx; }
    std::string compare() const {
        return compare_backward_to_reference(dx, reference_softmax_backward(dy, y, 1, true), 0.0);
    }
};

// Runs the call (a ThreadedForward or ThreadedBackward) with the Nth call counted by `countdown` failing, for
// N = 1, 2, ... until a run no longer reaches the Nth call: every one must succeed and write what the
// unfaulted run writes. Returns how many N were reached, i.e. how many chances to fail the call had.
template <typename Threaded>
int check_every_fault_point(std::atomic<long>& countdown) {
    Threaded call;
    REQUIRE(call.run() == SMX_STATUS_SUCCESS);
    REQUIRE(call.compare() == "");
    const std::vector<unsigned char> expected = call.output().storage;
    int reached = 0;
    for (long nth = 1;; ++nth) {
        poison(call.output());
        smxStatus_t status;
        bool fired;
        {
            ArmedFault fault(countdown, nth);
            status = call.run();
            fired = ArmedFault::fired();
        }
        if (!fired) break;
        ++reached;
        INFO("fault at call " << nth << ": " << smxGetStatusString(status) << " " << smxGetLastErrorMessage());
        CHECK(status == SMX_STATUS_SUCCESS);
        const bool every_row_written = call.output().storage == expected;  // the caller computed the rows no worker took
        CHECK(every_row_written);
    }
    return reached;
}

// Whether libsmx's allocations reach this executable's operator new (they do where libsmx binds libstdc++'s
// operator new at run time): a tensor descriptor is allocated with new, so an armed first allocation fails it.
bool library_allocations_reach_this_operator_new() {
    const std::int64_t shape[1] = {4};
    smxTensorDescriptor_t desc = nullptr;
    smxStatus_t status;
    bool fired;
    {
        ArmedFault fault(g_allocations_until_failure, 1);
        status = smxCreateTensorDescriptor(&desc, SMX_DTYPE_F32, 1, shape, nullptr);
        fired = ArmedFault::fired();
    }
    if (status == SMX_STATUS_SUCCESS) smxDestroyTensorDescriptor(desc);
    return fired;
}

}  // namespace

TEST_CASE("a failed allocation while forward starts its threads still computes every row", "[cpu][faults]") {
    // On the H200 machine's image (Ubuntu 24.04, GCC 13) the forward reached no armed allocation; where the
    // library's allocations do not reach this operator new at all, the test says so instead of failing.
    if (!library_allocations_reach_this_operator_new()) {
        WARN("libsmx's allocations do not reach this executable's operator new here: allocation faults untestable");
        return;
    }
    // One chance per worker (its std::thread state) at least, most of them with earlier workers running.
    CHECK(check_every_fault_point<ThreadedForward>(g_allocations_until_failure) >= 7);
    CHECK(check_every_fault_point<ThreadedBackward>(g_allocations_until_failure) >= 7);
}

TEST_CASE("a thread the system refuses to start still leaves every row computed", "[cpu][faults]") {
    CHECK(check_every_fault_point<ThreadedForward>(g_thread_starts_until_failure) == 7);
    CHECK(check_every_fault_point<ThreadedBackward>(g_thread_starts_until_failure) == 7);
}
