// test_nccl_vocab_parallel.cpp - libsmx_nccl across real GPUs: `smx_nccl_test [ranks]` forks one process per rank
// (no MPI: rank 0 makes the ncclUniqueId and hands it to the others through pipes), each on its own GPU with
// its own communicator. Every rank builds the same whole logits (a fixed seed), runs smxNccl* on its shard
// (uneven shards; special rows in different ranks' slices; a captured CUDA graph for softmax), and compares
// its results with single-GPU smx on the whole logits (smxSoftmaxForward, smxLogsumexp, smxCrossEntropy) on
// its own GPU. The one-read path (smxNcclCreateShardPeers, smxFusedShardSoftmax) runs the same softmaxes, and a
// shard every rank holds alike. Then the parent checks that every rank's logsumexp and loss, and the replicated
// shard's fused softmax, are the same bits.
// Exit 0: passed; 1: failed; 77: skipped (fewer GPUs than ranks, or no CUDA device).
//
// `smx_nccl_test RANKS --time ROWSxVOCAB[,ROWSxVOCAB...]` times the library instead (bf16 logits split evenly):
// each rank prints the median milliseconds of smxNccl{Softmax (both modes),Logsumexp,CrossEntropy} on its shard,
// of the fused path (fused_softmax, fused_log_softmax) and of the yardstick's parts (local_softmax, stats_allreduce),
// by CUDA events after a warm-up, every call started with the ranks lined up and its input rotated over copies
// that together exceed twice the L2 cache. bench/vocab_parallel.py times the same path from Python.
#include <cuda_runtime.h>
#include <nccl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "smx/smx_nccl.h"

namespace {

constexpr int kSkip = 77;
constexpr unsigned kRankSeconds = 300;
constexpr std::int64_t kRows = 48;
constexpr std::int64_t kClasses = 1003;  // split unevenly: the last rank holds fewer
int g_failures = 0;

#define CHECK(condition, ...)                                                                                   \
    do {                                                                                                        \
        if (!(condition)) {                                                                                     \
            std::fprintf(stderr, "rank %d: %s:%d: check failed: %s: ", g_rank, __FILE__, __LINE__, #condition); \
            std::fprintf(stderr, __VA_ARGS__);                                                                  \
            std::fprintf(stderr, "\n");                                                                         \
            ++g_failures;                                                                                       \
        }                                                                                                       \
    } while (0)

int g_rank = -1;

void require(bool ok, const char* what, const char* detail) {
    if (ok) return;
    std::fprintf(stderr, "rank %d: %s failed: %s\n", g_rank, what, detail);
    std::_Exit(1);
}
void require_cuda(cudaError_t error, const char* what) {
    require(error == cudaSuccess, what, cudaGetErrorString(error));
}
void require_smx(smxStatus_t status, const char* what) {
    require(status == SMX_STATUS_SUCCESS, what, smxGetLastErrorMessage());
}
void require_smx_nccl(smxStatus_t status, const char* what) {
    require(status == SMX_STATUS_SUCCESS, what, smxNcclGetLastErrorMessage());
}
void require_nccl(ncclResult_t result, const char* what) {
    require(result == ncclSuccess, what, ncclGetErrorString(result));
}

// Writes or reads exactly `bytes` through a pipe end.
void write_all(int fd, const void* data, std::size_t bytes) {
    const auto* p = static_cast<const unsigned char*>(data);
    while (bytes > 0) {
        const ssize_t n = write(fd, p, bytes);
        require(n > 0, "write to a pipe", std::strerror(errno));
        p += n;
        bytes -= static_cast<std::size_t>(n);
    }
}
void read_all(int fd, void* data, std::size_t bytes) {
    auto* p = static_cast<unsigned char*>(data);
    while (bytes > 0) {
        const ssize_t n = read(fd, p, bytes);
        require(n > 0, "read from a pipe", n == 0 ? "closed early" : std::strerror(errno));
        p += n;
        bytes -= static_cast<std::size_t>(n);
    }
}

// The whole logits, the same on every rank: N(0, 3)-like values from a fixed-seed generator, with special rows
// whose NaN, +inf and all -inf fall in different ranks' slices, and one of -inf but for its last element (every
// rank's slice all -inf but the last rank's).
std::vector<float> whole_logits() {
    std::vector<float> x(kRows * kClasses);
    std::uint64_t state = 0x9e3779b97f4a7c15ull;
    for (float& v : x) {
        double sum = 0;
        for (int k = 0; k < 4; ++k) {
            state = state * 6364136223846793005ull + 1442695040888963407ull;
            sum += static_cast<double>(state >> 11) / 9007199254740992.0;
        }
        v = static_cast<float>((sum - 2.0) * 3.0);
    }
    const float inf = std::numeric_limits<float>::infinity();
    x[1 * kClasses + kClasses - 1] = std::numeric_limits<float>::quiet_NaN();  // the last rank's slice
    x[3 * kClasses + 0] = inf;                                                 // the first rank's
    for (std::int64_t j = 0; j < kClasses; ++j) x[5 * kClasses + j] = -inf;
    for (std::int64_t j = 0; j < kClasses; j += 3) x[7 * kClasses + j] = -inf;
    for (std::int64_t j = 0; j + 1 < kClasses; ++j) x[6 * kClasses + j] = -inf;  // before row 8: the mean's rows
    return x;
}

std::vector<std::int64_t> targets() {
    std::vector<std::int64_t> t(kRows);
    for (std::int64_t r = 0; r < kRows; ++r) t[r] = (r * 337 + 11) % kClasses;
    t[2] = -100;  // ignored
    t[9] = 0;
    t[10] = kClasses - 1;
    return t;
}

// Relative closeness with NaN equal to NaN and infinities exact.
bool close(double got, double expected, double rtol) {
    if (std::isnan(expected) || std::isnan(got)) return std::isnan(expected) && std::isnan(got);
    if (std::isinf(expected) || std::isinf(got)) return got == expected;
    return std::fabs(got - expected) <= rtol * (std::fabs(expected) + 1e-6) + 1e-30;
}

template <class T>
std::vector<T> download(const void* device, std::size_t count) {
    std::vector<T> host(count);
    require_cuda(cudaMemcpy(host.data(), device, count * sizeof(T), cudaMemcpyDeviceToHost), "cudaMemcpy");
    return host;
}

void* device_copy(const void* host, std::size_t bytes) {
    void* device = nullptr;
    require_cuda(cudaMalloc(&device, bytes), "cudaMalloc");
    require_cuda(cudaMemcpy(device, host, bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
    return device;
}

void* device_alloc(std::size_t bytes) {
    void* device = nullptr;
    require_cuda(cudaMalloc(&device, bytes > 0 ? bytes : 1), "cudaMalloc");
    return device;
}

// An output buffer poisoned with 0x7F bytes: f32 3.4e38, finite, so an element left unwritten fails every
// comparison, NaN and infinite expectations included.
void* output_alloc(std::size_t bytes) {
    void* device = device_alloc(bytes);
    require_cuda(cudaMemset(device, 0x7F, bytes), "poison");
    return device;
}

struct Tensor {
    smxTensorDescriptor_t desc = nullptr;
    Tensor(smxDataType_t dtype, std::vector<std::int64_t> shape, std::vector<std::int64_t> strides = {}) {
        require_smx(smxCreateTensorDescriptor(&desc, dtype, static_cast<int>(shape.size()), shape.data(),
                                              strides.empty() ? nullptr : strides.data()),
                    "smxCreateTensorDescriptor");
    }
    ~Tensor() { smxDestroyTensorDescriptor(desc); }
};

// What a rank runs on: its GPU (the rank's number), its communicator, a CUDA handle and a stream, released in
// reverse order when the rank's run ends.
struct RankDevice {
    ncclComm_t comm = nullptr;
    smxHandle_t handle = nullptr;
    cudaStream_t stream = nullptr;

    RankDevice(int rank, int ranks, const ncclUniqueId& id) {
        require_cuda(cudaSetDevice(rank), "cudaSetDevice");
        require_nccl(ncclCommInitRank(&comm, ranks, id, rank), "ncclCommInitRank");
        require_smx(smxCreate(&handle, SMX_DEVICE_CUDA, rank), "smxCreate");
        require_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
    }
    ~RankDevice() {
        cudaStreamDestroy(stream);
        smxDestroy(handle);
        ncclCommDestroy(comm);
    }
};

// One call of a fused descriptor on `stream`, into a freshly poisoned y: plain (calls = 1, 2: the second a new
// epoch over the same mailbox rows), or captured in a CUDA graph and replayed `calls` times.
void fused_calls(smxFusedShardSoftmaxDescriptor_t desc, void* y, const void* x, std::size_t bytes, cudaStream_t stream,
                 int calls, bool graph) {
    if (!graph) {
        for (int k = 0; k < calls; ++k) {
            require_cuda(cudaMemsetAsync(y, 0x7F, bytes, stream), "poison");
            require_smx(smxFusedShardSoftmax(desc, y, x, stream), "smxFusedShardSoftmax");
        }
        require_cuda(cudaStreamSynchronize(stream), "sync");
        return;
    }
    cudaGraph_t captured = nullptr;
    cudaGraphExec_t instance = nullptr;
    require_cuda(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), "begin capture");
    require_smx(smxFusedShardSoftmax(desc, y, x, stream), "captured smxFusedShardSoftmax");
    require_cuda(cudaStreamEndCapture(stream, &captured), "end capture");
    require_cuda(cudaGraphInstantiate(&instance, captured, 0), "instantiate");
    for (int k = 0; k < calls; ++k) {
        require_cuda(cudaMemsetAsync(y, 0x7F, bytes, stream), "poison");
        require_cuda(cudaGraphLaunch(instance, stream), "graph launch");
    }
    require_cuda(cudaStreamSynchronize(stream), "sync");
    cudaGraphExecDestroy(instance);
    cudaGraphDestroy(captured);
}

// bf16 bits of a float, rounded to nearest even (the values here are finite).
std::uint16_t to_bf16(float value) {
    std::uint32_t bits = 0;
    std::memcpy(&bits, &value, sizeof bits);
    return static_cast<std::uint16_t>((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
}

float from_bf16(std::uint16_t bits) {
    const std::uint32_t widened = static_cast<std::uint32_t>(bits) << 16;
    float value;
    std::memcpy(&value, &widened, sizeof value);
    return value;
}

// The fused softmax of a shard of kRows x `columns` (F32 or BF16) that every rank holds alike, so the whole row is
// `ranks` copies of it: fresh values with a NaN row and an all -inf row, checked against a float64 softmax of
// the values as stored (bf16: to its rounding), and its y bytes returned, which every rank must produce alike.
std::vector<unsigned char> replicated_fused(smxHandle_t handle, smxShardPeers_t peers, cudaStream_t stream, int ranks,
                                            int rank, smxDataType_t dtype, std::int64_t columns) {
    const bool bf16 = dtype == SMX_DTYPE_BF16;
    const std::size_t count = static_cast<std::size_t>(kRows * columns), element = bf16 ? 2 : 4;
    std::vector<float> values(count);
    std::uint64_t state = 0x51ed270b2b6f3a1dull + static_cast<std::uint64_t>(columns);
    for (float& v : values) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        v = static_cast<float>((static_cast<double>(state >> 11) / 9007199254740992.0 - 0.5) * 20.0);
    }
    values[2 * columns + columns - 1] = std::numeric_limits<float>::quiet_NaN();
    for (std::int64_t j = 0; j < columns; ++j) values[4 * columns + j] = -INFINITY;
    std::vector<std::uint16_t> halves(bf16 ? count : 0);
    for (std::size_t k = 0; k < halves.size(); ++k) {
        halves[k] = std::isnan(values[k]) ? 0x7fc0 : std::isinf(values[k]) ? 0xff80 : to_bf16(values[k]);
        values[k] = from_bf16(halves[k]);
    }
    const Tensor desc_x(dtype, {kRows, columns});
    void* x = device_copy(bf16 ? static_cast<const void*>(halves.data()) : values.data(), count * element);
    void* y = output_alloc(count * element);
    smxFusedShardSoftmaxDescriptor_t desc = nullptr;
    require_smx(smxCreateFusedShardSoftmaxDescriptor(handle, &desc, peers, SMX_SOFTMAX, -1, desc_x.desc, desc_x.desc),
                "smxCreateFusedShardSoftmaxDescriptor");
    const char* plan = nullptr;
    require_smx(smxGetFusedShardSoftmaxPlan(desc, &plan), "smxGetFusedShardSoftmaxPlan");
    if (rank == 0) std::printf("fused plan (%lld %s columns): %s\n", (long long)columns, bf16 ? "bf16" : "f32", plan);
    fused_calls(desc, y, x, count * element, stream, 1, false);
    std::vector<unsigned char> bytes = download<unsigned char>(y, count * element);
    for (std::int64_t r = 0; r < kRows; ++r) {
        const float* row = &values[r * columns];
        double max = -INFINITY, sum = 0;
        bool nan = false;
        for (std::int64_t j = 0; j < columns; ++j) {
            nan = nan || std::isnan(row[j]);
            max = std::max<double>(max, row[j]);
        }
        for (std::int64_t j = 0; j < columns; ++j) sum += ranks * std::exp(row[j] - max);
        for (std::int64_t j = 0; j < columns; ++j) {
            const std::size_t k = static_cast<std::size_t>(r * columns + j);
            float got;
            if (bf16) {
                std::uint16_t half;
                std::memcpy(&half, &bytes[k * 2], 2);
                got = from_bf16(half);
            } else {
                std::memcpy(&got, &bytes[k * 4], 4);
            }
            const double want = nan || !std::isfinite(max) ? NAN : std::exp(row[j] - max) / sum;
            CHECK(close(got, want, bf16 ? 8e-3 : 1e-5), "replicated fused %s softmax [%lld, %lld]: got %.9g, "
                  "expected %.9g", bf16 ? "bf16" : "f32", (long long)r, (long long)j, got, want);
        }
    }
    smxDestroyFusedShardSoftmaxDescriptor(desc);
    cudaFree(x);
    cudaFree(y);
    return bytes;
}

// The one-read path (smxNcclCreateShardPeers, smxFusedShardSoftmax) on this rank's uneven f32 shard (the
// element-wise kernel: its rows are not whole 16-byte packs), checked by `compare(got, log_mode, what)`: softmax
// twice (out of place, then in place), log-softmax captured in a graph and replayed three times. Then shards every
// rank holds alike (replicated_fused: f32 of 4100 columns, 4 packs a thread; bf16 of 32064, 8 packs, the benchmark's
// x4 shard), whose y bytes, which every rank must produce alike (the same combined statistics), it returns.
template <class Compare>
std::vector<unsigned char> run_fused(int rank, int ranks, const RankDevice& device, const void* shard_device,
                                     const Tensor& shard_desc, std::int64_t length, const Compare& compare) {
    smxHandle_t handle = device.handle;
    cudaStream_t stream = device.stream;
    smxShardPeers_t peers = nullptr;
    require_smx_nccl(smxNcclCreateShardPeers(handle, device.comm, kRows, &peers), "smxNcclCreateShardPeers");
    const std::size_t shard_bytes = static_cast<std::size_t>(kRows * length) * sizeof(float);
    for (int log_mode = 0; log_mode < 2; ++log_mode) {
        smxFusedShardSoftmaxDescriptor_t desc = nullptr;
        require_smx(smxCreateFusedShardSoftmaxDescriptor(handle, &desc, peers, log_mode ? SMX_LOG_SOFTMAX : SMX_SOFTMAX,
                                                         -1, shard_desc.desc, shard_desc.desc),
                    "smxCreateFusedShardSoftmaxDescriptor");
        void* y = output_alloc(shard_bytes);
        fused_calls(desc, y, shard_device, shard_bytes, stream, log_mode ? 3 : 2, log_mode == 1);
        compare(download<float>(y, kRows * length), log_mode, log_mode ? "fused log_softmax (graph)" : "fused softmax");
        if (log_mode == 0) {  // in place, over a copy of the shard
            require_cuda(cudaMemcpy(y, shard_device, shard_bytes, cudaMemcpyDeviceToDevice), "cudaMemcpy");
            require_smx(smxFusedShardSoftmax(desc, y, y, stream), "in-place smxFusedShardSoftmax");
            require_cuda(cudaStreamSynchronize(stream), "sync");
            compare(download<float>(y, kRows * length), 0, "fused softmax in place");
        }
        cudaFree(y);
        smxDestroyFusedShardSoftmaxDescriptor(desc);
    }

    std::vector<unsigned char> bits = replicated_fused(handle, peers, stream, ranks, rank, SMX_DTYPE_F32, 4100);
    const std::vector<unsigned char> bf16_bits = replicated_fused(handle, peers, stream, ranks, rank, SMX_DTYPE_BF16, 32064);
    bits.insert(bits.end(), bf16_bits.begin(), bf16_bits.end());
    std::int64_t timed_out = -1;
    require_smx(smxGetShardPeersTimeouts(peers, &timed_out), "smxGetShardPeersTimeouts");
    CHECK(timed_out == 0, "%lld rows waited for a peer past the limit", (long long)timed_out);
    require_smx(smxDestroyShardPeers(peers), "smxDestroyShardPeers");
    return bits;
}

// One rank's whole run; returns its logsumexp and loss bytes for the parent's comparison.
std::vector<unsigned char> run_rank(int rank, int ranks, const ncclUniqueId& id) {
    const RankDevice device(rank, ranks, id);
    ncclComm_t comm = device.comm;
    smxHandle_t handle = device.handle;
    cudaStream_t stream = device.stream;

    // This rank's slice: as even as possible, the remainder to the first ranks.
    const std::int64_t start = rank * (kClasses / ranks) + std::min<std::int64_t>(rank, kClasses % ranks);
    const std::int64_t length = kClasses / ranks + (rank < kClasses % ranks ? 1 : 0);
    const std::vector<float> whole = whole_logits();
    std::vector<float> shard(kRows * length);
    for (std::int64_t r = 0; r < kRows; ++r) {
        std::memcpy(&shard[r * length], &whole[r * kClasses + start], length * sizeof(float));
    }
    const std::vector<std::int64_t> target = targets();
    void* whole_device = device_copy(whole.data(), whole.size() * sizeof(float));
    void* shard_device = device_copy(shard.data(), shard.size() * sizeof(float));
    void* target_device = device_copy(target.data(), target.size() * sizeof(std::int64_t));
    const Tensor whole_desc(SMX_DTYPE_F32, {kRows, kClasses}), shard_desc(SMX_DTYPE_F32, {kRows, length});
    const Tensor rows_desc(SMX_DTYPE_F32, {kRows}), one_desc(SMX_DTYPE_F32, {1}), target_desc(SMX_DTYPE_I64, {kRows});

    // Single-GPU smx on the whole logits: the expected results.
    std::vector<float> expected_softmax[2];
    for (int log_mode = 0; log_mode < 2; ++log_mode) {
        smxSoftmaxDescriptor_t desc = nullptr;
        require_smx(smxCreateSoftmaxDescriptor(handle, &desc, log_mode ? SMX_LOG_SOFTMAX : SMX_SOFTMAX, -1,
                                               whole_desc.desc, whole_desc.desc),
                    "smxCreateSoftmaxDescriptor");
        std::size_t bytes = 0;
        require_smx(smxGetSoftmaxWorkspaceSize(desc, &bytes), "workspace");
        void* workspace = device_alloc(bytes);
        void* y = output_alloc(whole.size() * sizeof(float));
        require_smx(smxSoftmaxForward(desc, workspace, bytes, y, whole_device, stream), "smxSoftmaxForward");
        require_cuda(cudaStreamSynchronize(stream), "sync");
        expected_softmax[log_mode] = download<float>(y, whole.size());
        cudaFree(y);
        cudaFree(workspace);
        smxDestroySoftmaxDescriptor(desc);
    }
    std::vector<float> want_lse;
    {
        smxLogsumexpDescriptor_t desc = nullptr;
        require_smx(smxCreateLogsumexpDescriptor(handle, &desc, -1, rows_desc.desc, whole_desc.desc),
                    "smxCreateLogsumexpDescriptor");
        std::size_t bytes = 0;
        require_smx(smxGetLogsumexpWorkspaceSize(desc, &bytes), "workspace");
        void* workspace = device_alloc(bytes);
        void* out = output_alloc(kRows * sizeof(float));
        require_smx(smxLogsumexp(desc, workspace, bytes, out, whole_device, stream), "smxLogsumexp");
        require_cuda(cudaStreamSynchronize(stream), "sync");
        want_lse = download<float>(out, kRows);
        cudaFree(out);
        cudaFree(workspace);
        smxDestroyLogsumexpDescriptor(desc);
    }

    // smx_nccl on this rank's shard.
    const auto compare_shard = [&](const std::vector<float>& got, const std::vector<float>& want, const char* what) {
        for (std::int64_t r = 0; r < kRows; ++r) {
            for (std::int64_t j = 0; j < length; ++j) {
                const double g = got[r * length + j], w = want[r * kClasses + start + j];
                CHECK(close(g, w, 1e-5), "%s [%lld, %lld]: got %.9g, expected %.9g", what, (long long)r,
                      (long long)(start + j), g, w);
            }
        }
    };
    for (int log_mode = 0; log_mode < 2; ++log_mode) {
        smxNcclDescriptor_t desc = nullptr;
        require_smx_nccl(smxNcclCreateSoftmaxDescriptor(handle, &desc, comm, log_mode ? SMX_LOG_SOFTMAX : SMX_SOFTMAX,
                                                        -1, shard_desc.desc, shard_desc.desc),
                         "smxNcclCreateSoftmaxDescriptor");
        std::size_t bytes = 0;
        require_smx_nccl(smxNcclGetWorkspaceSize(desc, &bytes), "smxNcclGetWorkspaceSize");
        void* workspace = device_alloc(bytes);
        void* y = output_alloc(shard.size() * sizeof(float));
        if (log_mode == 0) {
            require_smx_nccl(smxNcclSoftmax(desc, workspace, bytes, y, shard_device, stream), "smxNcclSoftmax");
        } else {  // captured in a CUDA graph, then replayed
            cudaGraph_t graph = nullptr;
            cudaGraphExec_t instance = nullptr;
            require_cuda(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), "begin capture");
            require_smx_nccl(smxNcclSoftmax(desc, workspace, bytes, y, shard_device, stream),
                             "captured smxNcclSoftmax");
            require_cuda(cudaStreamEndCapture(stream, &graph), "end capture");
            require_cuda(cudaGraphInstantiate(&instance, graph, 0), "instantiate");
            require_cuda(cudaGraphLaunch(instance, stream), "graph launch");
            require_cuda(cudaStreamSynchronize(stream), "sync");
            cudaGraphExecDestroy(instance);
            cudaGraphDestroy(graph);
        }
        require_cuda(cudaStreamSynchronize(stream), "sync");
        compare_shard(download<float>(y, shard.size()), expected_softmax[log_mode],
                      log_mode ? "log_softmax" : "softmax");
        cudaFree(y);
        cudaFree(workspace);
        smxNcclDestroyDescriptor(desc);
    }

    std::vector<unsigned char> bits = run_fused(rank, ranks, device, shard_device, shard_desc, length,
                                                [&](const std::vector<float>& got, int log_mode, const char* what) {
                                                    compare_shard(got, expected_softmax[log_mode], what);
                                                });
    {
        smxNcclDescriptor_t desc = nullptr;
        require_smx_nccl(smxNcclCreateLogsumexpDescriptor(handle, &desc, comm, -1, rows_desc.desc, shard_desc.desc),
                         "smxNcclCreateLogsumexpDescriptor");
        std::size_t bytes = 0;
        require_smx_nccl(smxNcclGetWorkspaceSize(desc, &bytes), "smxNcclGetWorkspaceSize");
        void* workspace = device_alloc(bytes);
        void* out = output_alloc(kRows * sizeof(float));
        require_smx_nccl(smxNcclLogsumexp(desc, workspace, bytes, out, shard_device, stream), "smxNcclLogsumexp");
        require_cuda(cudaStreamSynchronize(stream), "sync");
        const std::vector<float> lse = download<float>(out, kRows);
        for (std::int64_t r = 0; r < kRows; ++r) {
            CHECK(close(lse[r], want_lse[r], 1e-5), "logsumexp row %lld: got %.9g, expected %.9g", (long long)r, lse[r],
                  want_lse[r]);
        }
        bits.insert(bits.end(), reinterpret_cast<const unsigned char*>(lse.data()),
                    reinterpret_cast<const unsigned char*>(lse.data() + kRows));
        cudaFree(out);
        cudaFree(workspace);
        smxNcclDestroyDescriptor(desc);
    }
    // Cross-entropy with label smoothing: per row on every row (special rows included), and the mean of the rows
    // from 8 on (a special row would make it NaN), each against single-GPU smx on the whole logits.
    for (const smxLossReduction_t reduction : {SMX_REDUCTION_NONE, SMX_REDUCTION_MEAN}) {
        const std::int64_t first = reduction == SMX_REDUCTION_NONE ? 0 : 8, rows = kRows - first;
        const std::int64_t losses = reduction == SMX_REDUCTION_NONE ? rows : 1;
        smxCrossEntropyOptions_t options = SMX_CROSS_ENTROPY_OPTIONS_INIT;
        options.reduction = reduction;
        options.labelSmoothing = 0.1;
        const Tensor part(SMX_DTYPE_F32, {rows, length}), whole_part(SMX_DTYPE_F32, {rows, kClasses});
        const Tensor part_targets(SMX_DTYPE_I64, {rows}), loss_desc(SMX_DTYPE_F32, {losses});
        const void* part_target = static_cast<const std::int64_t*>(target_device) + first;
        void* loss = output_alloc(losses * sizeof(float));
        void* dlogits = output_alloc(rows * length * sizeof(float));
        void* single_loss = output_alloc(losses * sizeof(float));
        void* single_dlogits = output_alloc(rows * kClasses * sizeof(float));

        smxNcclDescriptor_t desc = nullptr;
        require_smx_nccl(smxNcclCreateCrossEntropyDescriptor(handle, &desc, comm, -1, &options, start, loss_desc.desc,
                                                             nullptr, part.desc, part.desc, part_targets.desc),
                         "smxNcclCreateCrossEntropyDescriptor");
        std::size_t bytes = 0;
        require_smx_nccl(smxNcclGetWorkspaceSize(desc, &bytes), "smxNcclGetWorkspaceSize");
        void* workspace = device_alloc(bytes);
        require_smx_nccl(
            smxNcclCrossEntropy(desc, workspace, bytes, loss, nullptr, dlogits,
                                static_cast<const float*>(shard_device) + first * length, part_target, stream),
            "smxNcclCrossEntropy");
        smxCrossEntropyDescriptor_t single = nullptr;
        require_smx(smxCreateCrossEntropyDescriptor(handle, &single, -1, &options, loss_desc.desc, nullptr,
                                                    whole_part.desc, whole_part.desc, part_targets.desc),
                    "smxCreateCrossEntropyDescriptor");
        std::size_t single_bytes = 0;
        require_smx(smxGetCrossEntropyWorkspaceSize(single, &single_bytes), "workspace");
        void* single_workspace = device_alloc(single_bytes);
        require_smx(smxCrossEntropy(single, single_workspace, single_bytes, single_loss, nullptr, single_dlogits,
                                    static_cast<const float*>(whole_device) + first * kClasses, part_target, stream),
                    "smxCrossEntropy");
        require_cuda(cudaStreamSynchronize(stream), "sync");

        const std::vector<float> got_loss = download<float>(loss, losses),
                                 want_loss = download<float>(single_loss, losses);
        for (std::int64_t k = 0; k < losses; ++k) {
            CHECK(close(got_loss[k], want_loss[k], 1e-5), "loss %lld (reduction %d): got %.9g, expected %.9g",
                  (long long)k, reduction, got_loss[k], want_loss[k]);
        }
        const std::vector<float> got = download<float>(dlogits, rows * length);
        const std::vector<float> want = download<float>(single_dlogits, rows * kClasses);
        for (std::int64_t r = 0; r < rows; ++r) {
            for (std::int64_t j = 0; j < length; ++j) {
                const double g = got[r * length + j], w = want[r * kClasses + start + j];
                const bool ok = std::isnan(w) ? std::isnan(g) : std::fabs(g - w) <= 1e-5 * std::fabs(w) + 1e-6;
                CHECK(ok, "dlogits [%lld, %lld] (reduction %d): got %.9g, expected %.9g", (long long)(first + r),
                      (long long)(start + j), reduction, g, w);
            }
        }
        bits.insert(bits.end(), reinterpret_cast<const unsigned char*>(got_loss.data()),
                    reinterpret_cast<const unsigned char*>(got_loss.data() + losses));
        for (void* pointer : {loss, dlogits, single_loss, single_dlogits, workspace, single_workspace}) {
            cudaFree(pointer);
        }
        smxDestroyCrossEntropyDescriptor(single);
        smxNcclDestroyDescriptor(desc);
    }
    cudaFree(target_device);
    cudaFree(shard_device);
    cudaFree(whole_device);
    return bits;
}

// ---- timing (--time) ---------------------------------------------------------------------------------------

constexpr int kTimingWarmup = 5;
constexpr int kTimingRepeats = 20;

struct Shape {
    std::int64_t rows;
    std::int64_t vocab;
};

// "8192x128256,16384x151936" -> shapes; false where the text is not such a list.
bool parse_shapes(const char* text, std::vector<Shape>* shapes) {
    while (*text != '\0') {
        char* end = nullptr;
        const long long rows = std::strtoll(text, &end, 10);
        if (end == text || *end != 'x') return false;
        const char* vocab_text = end + 1;
        const long long vocab = std::strtoll(vocab_text, &end, 10);
        if (end == vocab_text || rows <= 0 || vocab <= 0 || (*end != ',' && *end != '\0')) return false;
        shapes->push_back({rows, vocab});
        text = *end == ',' ? end + 1 : end;
    }
    return !shapes->empty();
}


// Device memory of `elements` bf16 logits: a block of random values (spread 3) repeated. Timing does not depend
// on the values, so one block generated on the host fills a buffer of any size.
void* random_bf16(std::size_t elements) {
    constexpr std::size_t kBlock = std::size_t{1} << 20;
    std::vector<std::uint16_t> block(std::min(elements, kBlock));
    std::uint64_t state = 0x2545f4914f6cdd1dull;
    for (std::uint16_t& v : block) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        v = to_bf16(static_cast<float>((static_cast<double>(state >> 11) / 9007199254740992.0 - 0.5) * 10.4));
    }
    auto* device = static_cast<unsigned char*>(device_alloc(elements * sizeof(std::uint16_t)));
    for (std::size_t done = 0; done < elements; done += block.size()) {
        const std::size_t count = std::min(block.size(), elements - done);
        require_cuda(cudaMemcpy(device + done * sizeof(std::uint16_t), block.data(), count * sizeof(std::uint16_t),
                                cudaMemcpyHostToDevice),
                     "cudaMemcpy");
    }
    return device;
}

// Median milliseconds of call(copy) over kTimingRepeats calls after kTimingWarmup, `copy` cycling over the
// rotated inputs; before each call the ranks line up (an all-reduce of one float, then the host waits for it).
template <class Call>
double median_ms(ncclComm_t comm, cudaStream_t stream, float* line_up, int copies, const Call& call) {
    cudaEvent_t start = nullptr, end = nullptr;
    require_cuda(cudaEventCreate(&start), "cudaEventCreate");
    require_cuda(cudaEventCreate(&end), "cudaEventCreate");
    std::vector<float> times;
    for (int k = 0; k < kTimingWarmup + kTimingRepeats; ++k) {
        require_nccl(ncclAllReduce(line_up, line_up, 1, ncclFloat32, ncclSum, comm, stream), "ncclAllReduce");
        require_cuda(cudaStreamSynchronize(stream), "sync");
        require_cuda(cudaEventRecord(start, stream), "cudaEventRecord");
        call(k % copies);
        require_cuda(cudaEventRecord(end, stream), "cudaEventRecord");
        require_cuda(cudaEventSynchronize(end), "cudaEventSynchronize");
        float ms = 0;
        require_cuda(cudaEventElapsedTime(&ms, start, end), "cudaEventElapsedTime");
        if (k >= kTimingWarmup) times.push_back(ms);
    }
    cudaEventDestroy(start);
    cudaEventDestroy(end);
    std::sort(times.begin(), times.end());
    const std::size_t half = times.size() / 2;
    return times.size() % 2 == 1 ? times[half] : 0.5 * (times[half - 1] + times[half]);
}

// The one-read path and the yardstick on the same inputs: fused softmax and log-softmax
// (smxFusedShardSoftmax), smx's softmax of the shard alone (local_softmax) and one all-reduce of the rows'
// (max, sum) pairs (stats_allreduce). The line to meet: fused <= 1.15 x (local_softmax + stats_allreduce).
void time_fused_and_parts(int rank, int ranks, const RankDevice& device, const Shape& shape, const Tensor& shard_desc,
                          const std::vector<void*>& inputs, const std::vector<void*>& outputs, float* line_up) {
    smxHandle_t handle = device.handle;
    cudaStream_t stream = device.stream;
    const int copies = static_cast<int>(inputs.size());
    const auto report = [&](const char* op, double ms) {
        std::printf("smx_nccl_time ranks=%d rank=%d rows=%lld vocab=%lld shard=%lld dtype=bf16 op=%s median_ms=%.4f "
                    "input_copies=%d\n",
                    ranks, rank, (long long)shape.rows, (long long)shape.vocab, (long long)(shape.vocab / ranks), op,
                    ms, copies);
        std::fflush(stdout);
    };
    smxShardPeers_t peers = nullptr;
    const smxStatus_t made = smxNcclCreateShardPeers(handle, device.comm, shape.rows, &peers);
    if (made != SMX_STATUS_SUCCESS) {  // no peer access here: the fused path is not available
        std::printf("smx_nccl_time rank=%d fused unavailable: %s\n", rank, smxNcclGetLastErrorMessage());
    } else {
        for (const smxSoftmaxMode_t mode : {SMX_SOFTMAX, SMX_LOG_SOFTMAX}) {
            smxFusedShardSoftmaxDescriptor_t desc = nullptr;
            const smxStatus_t status =
                smxCreateFusedShardSoftmaxDescriptor(handle, &desc, peers, mode, -1, shard_desc.desc, shard_desc.desc);
            if (status != SMX_STATUS_SUCCESS) {
                std::printf("smx_nccl_time rank=%d fused refused: %s\n", rank, smxGetLastErrorMessage());
                continue;
            }
            const double ms = median_ms(device.comm, stream, line_up, copies, [&](int c) {
                require_smx(smxFusedShardSoftmax(desc, outputs[c], inputs[c], stream), "smxFusedShardSoftmax");
            });
            report(mode == SMX_SOFTMAX ? "fused_softmax" : "fused_log_softmax", ms);
            smxDestroyFusedShardSoftmaxDescriptor(desc);
        }
        std::int64_t timed_out = -1;
        require_smx(smxGetShardPeersTimeouts(peers, &timed_out), "smxGetShardPeersTimeouts");
        if (timed_out != 0) std::printf("smx_nccl_time rank=%d fused: %lld rows timed out\n", rank, (long long)timed_out);
        require_smx(smxDestroyShardPeers(peers), "smxDestroyShardPeers");
    }

    smxSoftmaxDescriptor_t local = nullptr;
    require_smx(smxCreateSoftmaxDescriptor(handle, &local, SMX_SOFTMAX, -1, shard_desc.desc, shard_desc.desc),
                "smxCreateSoftmaxDescriptor");
    std::size_t bytes = 0;
    require_smx(smxGetSoftmaxWorkspaceSize(local, &bytes), "workspace");
    void* workspace = device_alloc(bytes);
    report("local_softmax", median_ms(device.comm, stream, line_up, copies, [&](int c) {
               require_smx(smxSoftmaxForward(local, workspace, bytes, outputs[c], inputs[c], stream),
                           "smxSoftmaxForward");
           }));
    auto* stats = static_cast<float*>(output_alloc(static_cast<std::size_t>(shape.rows) * 2 * sizeof(float)));
    report("stats_allreduce", median_ms(device.comm, stream, line_up, copies, [&](int) {
               require_nccl(ncclAllReduce(stats, stats, static_cast<std::size_t>(shape.rows) * 2, ncclFloat32, ncclSum,
                                          device.comm, stream),
                            "ncclAllReduce");
           }));
    cudaFree(stats);
    cudaFree(workspace);
    smxDestroySoftmaxDescriptor(local);
}

void time_rank(int rank, int ranks, const ncclUniqueId& id, const std::vector<Shape>& shapes) {
    const RankDevice device(rank, ranks, id);
    ncclComm_t comm = device.comm;
    smxHandle_t handle = device.handle;
    cudaStream_t stream = device.stream;
    int l2_bytes = 0;
    require_cuda(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, rank), "L2 size");
    auto* line_up = static_cast<float*>(device_alloc(sizeof(float)));
    require_cuda(cudaMemset(line_up, 0, sizeof(float)), "cudaMemset");
    for (const Shape& shape : shapes) {
        const std::int64_t shard = shape.vocab / ranks, start = rank * shard;
        const std::size_t elements = static_cast<std::size_t>(shape.rows * shard);
        const std::size_t shard_bytes = elements * sizeof(std::uint16_t);
        const int copies = static_cast<int>(std::max<std::size_t>(2, (2 * static_cast<std::size_t>(l2_bytes) +
                                                                      shard_bytes - 1) / shard_bytes));
        std::vector<void*> inputs, outputs;
        for (int c = 0; c < copies; ++c) {
            inputs.push_back(random_bf16(elements));
            outputs.push_back(output_alloc(shard_bytes));
        }
        std::vector<std::int64_t> target(static_cast<std::size_t>(shape.rows));
        for (std::int64_t r = 0; r < shape.rows; ++r) target[r] = (r * 7919 + 13) % shape.vocab;
        void* target_device = device_copy(target.data(), target.size() * sizeof(std::int64_t));
        void* rows_out = output_alloc(static_cast<std::size_t>(shape.rows) * sizeof(float));
        const Tensor shard_desc(SMX_DTYPE_BF16, {shape.rows, shard}), rows_desc(SMX_DTYPE_F32, {shape.rows});
        const Tensor target_desc(SMX_DTYPE_I64, {shape.rows}), one_desc(SMX_DTYPE_F32, {1});
        smxCrossEntropyOptions_t options = SMX_CROSS_ENTROPY_OPTIONS_INIT;  // mean, with dlogits: fwd + bwd

        smxNcclDescriptor_t descs[4] = {};
        const char* names[4] = {"softmax", "log_softmax", "logsumexp", "cross_entropy_with_dlogits"};
        require_smx_nccl(smxNcclCreateSoftmaxDescriptor(handle, &descs[0], comm, SMX_SOFTMAX, -1, shard_desc.desc,
                                                        shard_desc.desc),
                         "smxNcclCreateSoftmaxDescriptor");
        require_smx_nccl(smxNcclCreateSoftmaxDescriptor(handle, &descs[1], comm, SMX_LOG_SOFTMAX, -1, shard_desc.desc,
                                                        shard_desc.desc),
                         "smxNcclCreateSoftmaxDescriptor");
        require_smx_nccl(smxNcclCreateLogsumexpDescriptor(handle, &descs[2], comm, -1, rows_desc.desc, shard_desc.desc),
                         "smxNcclCreateLogsumexpDescriptor");
        require_smx_nccl(smxNcclCreateCrossEntropyDescriptor(handle, &descs[3], comm, -1, &options, start,
                                                             one_desc.desc, nullptr, shard_desc.desc, shard_desc.desc,
                                                             target_desc.desc),
                         "smxNcclCreateCrossEntropyDescriptor");
        std::size_t bytes = 0;
        for (smxNcclDescriptor_t desc : descs) {
            std::size_t needed = 0;
            require_smx_nccl(smxNcclGetWorkspaceSize(desc, &needed), "smxNcclGetWorkspaceSize");
            bytes = std::max(bytes, needed);
        }
        void* workspace = device_alloc(bytes);
        for (int op = 0; op < 4; ++op) {
            const double ms = median_ms(comm, stream, line_up, copies, [&](int c) {
                smxStatus_t status = SMX_STATUS_SUCCESS;
                if (op < 2) status = smxNcclSoftmax(descs[op], workspace, bytes, outputs[c], inputs[c], stream);
                if (op == 2) status = smxNcclLogsumexp(descs[op], workspace, bytes, rows_out, inputs[c], stream);
                if (op == 3) {
                    status = smxNcclCrossEntropy(descs[op], workspace, bytes, rows_out, nullptr, outputs[c], inputs[c],
                                                 target_device, stream);
                }
                require_smx_nccl(status, names[op]);
            });
            std::printf("smx_nccl_time ranks=%d rank=%d rows=%lld vocab=%lld shard=%lld dtype=bf16 op=%s median_ms=%.4f "
                        "input_copies=%d\n",
                        ranks, rank, (long long)shape.rows, (long long)shape.vocab, (long long)shard, names[op], ms,
                        copies);
            std::fflush(stdout);
        }
        time_fused_and_parts(rank, ranks, device, shape, shard_desc, inputs, outputs, line_up);
        for (smxNcclDescriptor_t desc : descs) smxNcclDestroyDescriptor(desc);
        for (void* pointer : inputs) cudaFree(pointer);
        for (void* pointer : outputs) cudaFree(pointer);
        for (void* pointer : {workspace, target_device, rows_out}) cudaFree(pointer);
    }
    cudaFree(line_up);
}

// The CUDA device count, asked in a child process: CUDA must not be initialized in a process that forks ranks.
int device_count() {
    const pid_t child = fork();
    if (child == 0) {
        int count = 0;
        std::_Exit(cudaGetDeviceCount(&count) == cudaSuccess ? std::min(count, 100) : 0);
    }
    int status = 0;
    waitpid(child, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 0;
}

}  // namespace

int main(int argc, char** argv) {
    const int ranks = argc > 1 ? std::atoi(argv[1]) : 2;
    if (ranks < 1) return 1;
    std::vector<Shape> timed_shapes;
    if (argc > 2) {
        if (argc != 4 || std::strcmp(argv[2], "--time") != 0 || !parse_shapes(argv[3], &timed_shapes)) {
            std::fprintf(stderr, "usage: smx_nccl_test [RANKS] [--time ROWSxVOCAB[,ROWSxVOCAB...]]\n");
            return 1;
        }
        for (const Shape& shape : timed_shapes) {
            if (shape.vocab % ranks != 0) {
                std::fprintf(stderr, "vocabulary %lld does not split evenly over %d ranks\n", (long long)shape.vocab,
                             ranks);
                return 1;
            }
        }
    }
    const int devices = device_count();
    if (devices < ranks) {
        std::printf("smx_nccl_test: %d ranks need %d CUDA devices, found %d: skipped\n", ranks, ranks, devices);
        return kSkip;
    }
    // Per rank: a pipe for the unique id (parent -> rank, from rank 0 through the parent) and one for the bits.
    std::vector<int> id_pipes(2 * ranks), bit_pipes(2 * ranks);
    for (int r = 0; r < ranks; ++r) {
        require(pipe(&id_pipes[2 * r]) == 0 && pipe(&bit_pipes[2 * r]) == 0, "pipe", std::strerror(errno));
    }
    std::vector<pid_t> children(ranks);
    for (int r = 0; r < ranks; ++r) {
        children[r] = fork();
        if (children[r] == 0) {
            g_rank = r;
            alarm(kRankSeconds);  // a rank whose peer died would wait in NCCL forever
            // Only this rank's own pipe ends stay open, so a peer's death reads as end of file, not a hang.
            for (int k = 0; k < ranks; ++k) {
                if (!(r == 0 && k == 0)) close(id_pipes[2 * k + 1]);
                if (k != r || r == 0) close(id_pipes[2 * k]);
                close(bit_pipes[2 * k]);
                if (k != r) close(bit_pipes[2 * k + 1]);
            }
            ncclUniqueId id;
            if (r == 0) {
                require_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
                write_all(id_pipes[1], &id, sizeof id);  // to the parent, which passes it on
            } else {
                read_all(id_pipes[2 * r], &id, sizeof id);
            }
            std::vector<unsigned char> bits;  // none when timing: every rank's are then equal
            if (timed_shapes.empty()) {
                bits = run_rank(r, ranks, id);
            } else {
                time_rank(r, ranks, id, timed_shapes);
            }
            const std::uint64_t size = bits.size();
            write_all(bit_pipes[2 * r + 1], &size, sizeof size);
            write_all(bit_pipes[2 * r + 1], bits.data(), bits.size());
            std::_Exit(g_failures == 0 ? 0 : 1);
        }
    }
    close(id_pipes[1]);
    for (int r = 0; r < ranks; ++r) {
        close(bit_pipes[2 * r + 1]);
        if (r > 0) close(id_pipes[2 * r]);
    }
    ncclUniqueId id;
    read_all(id_pipes[0], &id, sizeof id);
    for (int r = 1; r < ranks; ++r) write_all(id_pipes[2 * r + 1], &id, sizeof id);
    std::vector<std::vector<unsigned char>> bits(ranks);
    int failed = 0;
    for (int r = 0; r < ranks; ++r) {
        std::uint64_t size = 0;
        read_all(bit_pipes[2 * r], &size, sizeof size);
        bits[r].resize(size);
        read_all(bit_pipes[2 * r], bits[r].data(), size);
    }
    for (int r = 0; r < ranks; ++r) {
        int status = 0;
        waitpid(children[r], &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            std::fprintf(stderr, "rank %d failed\n", r);
            ++failed;
        }
        if (bits[r] != bits[0]) {
            std::fprintf(stderr, "rank %d's logsumexp and loss differ in their bits from rank 0's\n", r);
            ++failed;
        }
    }
    std::printf("smx_nccl_test: %d ranks: %s\n", ranks, failed == 0 ? "passed" : "FAILED");
    return failed == 0 ? 0 : 1;
}
