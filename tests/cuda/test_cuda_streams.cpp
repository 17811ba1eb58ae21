// [cuda] streams: a forward captured into a CUDA graph and replayed on new data, and handles used from
// several host threads on their own streams at once.
#if SMX_TEST_WITH_CUDA

#include <atomic>
#include <cstdint>
#include <optional>
#include <random>
#include <thread>

#include "cuda_helpers.hpp"

using namespace smx_test;

namespace {

// Owns a captured graph and its executable instance.
struct CapturedGraph {
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t instance = nullptr;
    ~CapturedGraph() {
        if (instance != nullptr) cudaGraphExecDestroy(instance);
        if (graph != nullptr) cudaGraphDestroy(graph);
    }
};

}  // namespace

TEST_CASE("cuda graph: a captured forward replays correctly with new input copied in between",
          "[cuda][sanitize]") {
    CudaHandle handle;
    struct Case {
        smxDataType_t x_dtype, y_dtype;
        std::vector<std::int64_t> shape;
        int axis;
    };
    const Case cases[] = {{SMX_DTYPE_F16, SMX_DTYPE_F32, {1000, 100}, 1},
                          {SMX_DTYPE_F32, SMX_DTYPE_F32, {2, 300000}, 1},
                          {SMX_DTYPE_BF16, SMX_DTYPE_BF16, {64, 7, 33}, 1}};
    for (const Case& c : cases) {
        for (bool log_mode : {false, true}) {
            HostTensor x = make_tensor(c.x_dtype, c.shape);
            HostTensor y = make_tensor(c.y_dtype, c.shape);
            DeviceTensor x_device(x), y_device(y);
            TensorDesc x_desc(x), y_desc(y);
            SoftmaxDesc desc(handle.get(), log_mode ? SMX_LOG_SOFTMAX : SMX_SOFTMAX, c.axis, y_desc.desc, x_desc.desc);
            REQUIRE(desc.status == SMX_STATUS_SUCCESS);
            const char* plan = nullptr;
            SMX_REQUIRE_OK(smxGetSoftmaxPlan(desc.desc, &plan));
            std::size_t workspace_bytes = 0;
            SMX_REQUIRE_OK(smxGetSoftmaxWorkspaceSize(desc.desc, &workspace_bytes));
            DeviceBuffer workspace(workspace_bytes);
            DeviceStream stream;

            CapturedGraph captured;
            SMX_REQUIRE_CUDA(cudaStreamBeginCapture(stream.get(), cudaStreamCaptureModeGlobal));
            const smxStatus_t forward_status = smxSoftmaxForward(desc.desc, workspace.get(), workspace_bytes,
                                                                 y_device.data(), x_device.data(), stream.get());
            const std::string forward_error = forward_status == SMX_STATUS_SUCCESS ? "" : smxGetLastErrorMessage();
            // End the capture before any REQUIRE so a failure leaves the stream usable.
            const cudaError_t end_status = cudaStreamEndCapture(stream.get(), &captured.graph);
            INFO(describe_case(y, x, c.axis, log_mode) << " | plan: " << plan << " | " << forward_error);
            REQUIRE(forward_status == SMX_STATUS_SUCCESS);
            SMX_REQUIRE_CUDA(end_status);
            std::size_t node_count = 0;
            SMX_REQUIRE_CUDA(cudaGraphGetNodes(captured.graph, nullptr, &node_count));
            CHECK(node_count >= 1);
            SMX_REQUIRE_CUDA(cudaGraphInstantiate(&captured.instance, captured.graph, 0));

            for (int replay = 0; replay < 2; ++replay) {
                fill_random(x, test_rng());  // fresh data each replay: the graph must read it, not a copy
                x_device.upload(x);
                y_device.poison();
                SMX_REQUIRE_CUDA(cudaGraphLaunch(captured.instance, stream.get()));
                SMX_REQUIRE_CUDA(cudaStreamSynchronize(stream.get()));
                y_device.download(y);
                INFO("replay " << replay);
                CHECK(compare_to_reference(y, reference_softmax(x, c.axis, log_mode), log_mode) == "");
            }
        }
    }
}

namespace {

// Thread-side plumbing: Catch2's assertions are not thread-safe, so worker threads report failures as
// text and the test thread asserts on it.
struct RawDeviceMemory {
    void* pointer = nullptr;
    ~RawDeviceMemory() {
        if (pointer != nullptr) cudaFree(pointer);
    }
};

struct RawStream {
    cudaStream_t stream = nullptr;
    ~RawStream() {
        if (stream != nullptr) cudaStreamDestroy(stream);
    }
};

std::string cuda_failure(const char* what, cudaError_t status) {
    return std::string(what) + " failed: " + cudaGetErrorName(status) + ": " + cudaGetErrorString(status);
}

std::string smx_failure(const char* what, smxStatus_t status) {
    return std::string(what) + " failed: " + smxGetStatusString(status) + ": " + smxGetLastErrorMessage();
}

struct WorkerCase {
    smxDataType_t x_dtype, y_dtype;
    std::vector<std::int64_t> shape;
    bool log_mode;
};

constexpr int kIterations = 8;

// Runs `kIterations` forwards of `work` on its own stream with fresh data, each checked against the
// reference. Uses `shared_desc` when given, else creates its own handle and descriptor.
// `ready` counts threads that are set up; each waits for all of them so the forwards really overlap.
std::string run_worker(const WorkerCase& work, smxSoftmaxDescriptor_t shared_desc, std::uint64_t seed,
                       std::atomic<int>* ready, int thread_count) {
    std::mt19937_64 rng(seed);
    HostTensor x = make_tensor(work.x_dtype, work.shape);
    HostTensor y = make_tensor(work.y_dtype, work.shape);
    std::optional<Handle> own_handle;
    std::optional<SoftmaxDesc> own_desc;
    smxSoftmaxDescriptor_t desc = shared_desc;
    if (desc == nullptr) {
        own_handle.emplace(SMX_DEVICE_CUDA, 0);
        if (own_handle->status != SMX_STATUS_SUCCESS) return smx_failure("smxCreate", own_handle->status);
        TensorDesc x_desc(x), y_desc(y);
        own_desc.emplace(own_handle->handle, work.log_mode ? SMX_LOG_SOFTMAX : SMX_SOFTMAX, -1, y_desc.desc, x_desc.desc);
        if (own_desc->status != SMX_STATUS_SUCCESS) return smx_failure("smxCreateSoftmaxDescriptor", own_desc->status);
        desc = own_desc->desc;
    }
    std::size_t workspace_bytes = 0;
    smxStatus_t status = smxGetSoftmaxWorkspaceSize(desc, &workspace_bytes);
    if (status != SMX_STATUS_SUCCESS) return smx_failure("smxGetSoftmaxWorkspaceSize", status);

    RawDeviceMemory x_device, y_device, workspace;
    RawStream stream;
    cudaError_t cuda_status;
    if ((cuda_status = cudaMalloc(&x_device.pointer, x.storage.size())) != cudaSuccess) return cuda_failure("cudaMalloc x", cuda_status);
    if ((cuda_status = cudaMalloc(&y_device.pointer, y.storage.size())) != cudaSuccess) return cuda_failure("cudaMalloc y", cuda_status);
    if ((cuda_status = cudaMalloc(&workspace.pointer, workspace_bytes + 1)) != cudaSuccess) return cuda_failure("cudaMalloc workspace", cuda_status);
    if ((cuda_status = cudaStreamCreateWithFlags(&stream.stream, cudaStreamNonBlocking)) != cudaSuccess) {
        return cuda_failure("cudaStreamCreateWithFlags", cuda_status);
    }
    ready->fetch_add(1);
    while (ready->load() < thread_count) std::this_thread::yield();

    for (int iteration = 0; iteration < kIterations; ++iteration) {
        fill_random(x, rng);
        if ((cuda_status = cudaMemcpyAsync(x_device.pointer, x.storage.data(), x.storage.size(), cudaMemcpyHostToDevice,
                                           stream.stream)) != cudaSuccess) {
            return cuda_failure("cudaMemcpyAsync x", cuda_status);
        }
        if ((cuda_status = cudaMemsetAsync(y_device.pointer, 0xFF, y.storage.size(), stream.stream)) != cudaSuccess) {
            return cuda_failure("cudaMemsetAsync y", cuda_status);
        }
        status = smxSoftmaxForward(desc, workspace.pointer, workspace_bytes, y_device.pointer, x_device.pointer,
                                   stream.stream);
        if (status != SMX_STATUS_SUCCESS) return smx_failure("smxSoftmaxForward", status);
        if ((cuda_status = cudaMemcpyAsync(y.storage.data(), y_device.pointer, y.storage.size(), cudaMemcpyDeviceToHost,
                                           stream.stream)) != cudaSuccess) {
            return cuda_failure("cudaMemcpyAsync y", cuda_status);
        }
        if ((cuda_status = cudaStreamSynchronize(stream.stream)) != cudaSuccess) {
            return cuda_failure("cudaStreamSynchronize", cuda_status);
        }
        const std::string mismatch = compare_to_reference(y, reference_softmax(x, -1, work.log_mode), work.log_mode);
        if (!mismatch.empty()) return "iteration " + std::to_string(iteration) + ": " + mismatch;
    }
    return "";
}

// Runs one worker per case on its own thread and checks every one of them succeeded.
void run_workers_at_once(const std::vector<WorkerCase>& cases, smxSoftmaxDescriptor_t shared_desc) {
    std::vector<std::string> results(cases.size());
    std::vector<std::uint64_t> seeds;
    for (std::size_t i = 0; i < cases.size(); ++i) seeds.push_back(test_rng()());  // test_rng is not thread-safe
    std::atomic<int> ready{0};
    std::vector<std::thread> threads;
    for (std::size_t i = 0; i < cases.size(); ++i) {
        threads.emplace_back([&, i] {
            results[i] = run_worker(cases[i], shared_desc, seeds[i], &ready, static_cast<int>(cases.size()));
            // A worker that failed before the barrier must not leave the others waiting forever.
            if (!results[i].empty()) ready.fetch_add(static_cast<int>(cases.size()));
        });
    }
    for (std::thread& thread : threads) thread.join();
    for (std::size_t i = 0; i < cases.size(); ++i) {
        INFO("thread " << i << ": " << describe_case(make_tensor(cases[i].y_dtype, cases[i].shape),
                                                      make_tensor(cases[i].x_dtype, cases[i].shape), -1,
                                                      cases[i].log_mode));
        CHECK(results[i] == "");
    }
}

}  // namespace

TEST_CASE("cuda threads: two handles on two host threads and two streams at once", "[cuda]") {
    run_workers_at_once({{SMX_DTYPE_F32, SMX_DTYPE_F32, {300, 1000}, false},
                         {SMX_DTYPE_F16, SMX_DTYPE_BF16, {5, 70000}, true}},
                        nullptr);
}

TEST_CASE("cuda threads: one descriptor shared by two threads on two streams", "[cuda]") {
    const WorkerCase work = {SMX_DTYPE_F32, SMX_DTYPE_F16, {64, 4097}, false};
    CudaHandle handle;
    TensorDesc x_desc(work.x_dtype, work.shape, {}), y_desc(work.y_dtype, work.shape, {});
    SoftmaxDesc shared(handle.get(), SMX_SOFTMAX, -1, y_desc.desc, x_desc.desc);
    REQUIRE(shared.status == SMX_STATUS_SUCCESS);
    run_workers_at_once({work, work}, shared.desc);
}

#endif  // SMX_TEST_WITH_CUDA
