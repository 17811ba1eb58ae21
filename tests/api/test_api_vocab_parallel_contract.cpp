// The C API contract of the vocabulary-parallel operators: what is theirs to refuse (statistics widths and rank
// multiples, the shard's place in the vocabulary, statistics dtypes, overlaps with the statistics) with its status
// and a message naming it; what is allowed (in place, zero rows, one rank) works. The checks they share with the
// softmax and log-probability operators (row_problem, entry.hpp) have their own tests.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "api/api_checks.hpp"
#include "support/logprobs_reference.hpp"

using Catch::Matchers::Contains;
using namespace smx_test;

namespace {

struct CpuHandle : Handle {
    CpuHandle() : Handle(SMX_DEVICE_CPU, 0) { REQUIRE(status == SMX_STATUS_SUCCESS); }
};

struct Statistics {
    smxShardStatisticsDescriptor_t desc = nullptr;
    smxStatus_t status;
    Statistics(smxHandle_t handle, std::int64_t start, smxTensorDescriptor_t stats, smxTensorDescriptor_t x,
               smxTensorDescriptor_t target)
        : status(smxCreateShardStatisticsDescriptor(handle, &desc, -1, start, stats, x, target)) {}
    ~Statistics() { smxDestroyShardStatisticsDescriptor(desc); }
};

struct Softmax {
    smxShardSoftmaxDescriptor_t desc = nullptr;
    smxStatus_t status;
    Softmax(smxHandle_t handle, smxSoftmaxMode_t mode, smxTensorDescriptor_t y, smxTensorDescriptor_t x,
            smxTensorDescriptor_t stats)
        : status(smxCreateShardSoftmaxDescriptor(handle, &desc, mode, -1, y, x, stats)) {}
    ~Softmax() { smxDestroyShardSoftmaxDescriptor(desc); }
};

struct Logsumexp {
    smxShardLogsumexpDescriptor_t desc = nullptr;
    smxStatus_t status;
    Logsumexp(smxHandle_t handle, smxTensorDescriptor_t out, smxTensorDescriptor_t stats)
        : status(smxCreateShardLogsumexpDescriptor(handle, &desc, -1, out, stats)) {}
    ~Logsumexp() { smxDestroyShardLogsumexpDescriptor(desc); }
};

struct CrossEntropy {
    smxShardCrossEntropyDescriptor_t desc = nullptr;
    smxStatus_t status;
    CrossEntropy(smxHandle_t handle, std::int64_t start, smxTensorDescriptor_t loss, smxTensorDescriptor_t dlogits,
                 smxTensorDescriptor_t logits, smxTensorDescriptor_t target, smxTensorDescriptor_t stats)
        : status(smxCreateShardCrossEntropyDescriptor(handle, &desc, -1, nullptr, start, loss, nullptr, dlogits, logits,
                                                      target, stats)) {}
    ~CrossEntropy() { smxDestroyShardCrossEntropyDescriptor(desc); }
};

// A (4, 6) f32 shard and the statistics of two ranks of softmax (width 2) and cross-entropy (width 5).
struct Operands {
    TensorDesc x{SMX_DTYPE_F32, {4, 6}, {}};
    TensorDesc rows_f32{SMX_DTYPE_F32, {4}, {}};
    TensorDesc rows_i64{SMX_DTYPE_I64, {4}, {}};
    TensorDesc loss{SMX_DTYPE_F32, {1}, {}};
    TensorDesc softmax_stats{SMX_DTYPE_F32, {4, 2}, {1, 4}};
    TensorDesc cross_entropy_stats{SMX_DTYPE_F32, {4, 5}, {1, 4}};
    TensorDesc gathered_softmax{SMX_DTYPE_F32, {4, 4}, {1, 4}};
    TensorDesc gathered_cross_entropy{SMX_DTYPE_F32, {4, 10}, {1, 4}};
};

}  // namespace

TEST_CASE("shard statistics take width 2 without a target and 5 with one, in the statistics dtype", "[api]") {
    CpuHandle handle;
    Operands op;
    CHECK(Statistics(handle.handle, 0, op.softmax_stats.desc, op.x.desc, nullptr).status == SMX_STATUS_SUCCESS);
    CHECK(Statistics(handle.handle, 0, op.cross_entropy_stats.desc, op.x.desc, op.rows_i64.desc).status ==
          SMX_STATUS_SUCCESS);
    CHECK(Statistics(handle.handle, 0, op.cross_entropy_stats.desc, op.x.desc, nullptr).status ==
          SMX_STATUS_BAD_PARAM_SHAPE);
    CHECK_THAT(last_error(), Contains("stats has 5 values per row") && Contains("softmax statistics are 2"));
    CHECK(Statistics(handle.handle, 0, op.softmax_stats.desc, op.x.desc, op.rows_i64.desc).status ==
          SMX_STATUS_BAD_PARAM_SHAPE);
    const TensorDesc f64_stats(SMX_DTYPE_F64, {4, 2}, {1, 4});
    CHECK(Statistics(handle.handle, 0, f64_stats.desc, op.x.desc, nullptr).status ==
          SMX_STATUS_NOT_SUPPORTED_DTYPE_PAIR);
    CHECK_THAT(last_error(), Contains("stats dtype f64 with x f32"));
    CHECK(Statistics(handle.handle, 0, op.cross_entropy_stats.desc, op.x.desc, op.rows_f32.desc).status ==
          SMX_STATUS_NOT_SUPPORTED_DTYPE_PAIR);
    const TensorDesc broadcast_stats(SMX_DTYPE_F32, {4, 2}, {0, 1});
    CHECK(Statistics(handle.handle, 0, broadcast_stats.desc, op.x.desc, nullptr).status ==
          SMX_STATUS_BAD_PARAM_OVERLAP);
}

TEST_CASE("a shard's first class is not negative, and f32 statistics count its classes exactly", "[api]") {
    CpuHandle handle;
    Operands op;
    CHECK(Statistics(handle.handle, -1, op.cross_entropy_stats.desc, op.x.desc, op.rows_i64.desc).status ==
          SMX_STATUS_BAD_PARAM);
    CHECK_THAT(last_error(), Contains("vocabStart -1 is negative"));
    CHECK(CrossEntropy(handle.handle, -1, op.loss.desc, nullptr, op.x.desc, op.rows_i64.desc,
                       op.gathered_cross_entropy.desc)
              .status == SMX_STATUS_BAD_PARAM);
    CHECK(Statistics(handle.handle, -5, op.softmax_stats.desc, op.x.desc, nullptr).status == SMX_STATUS_SUCCESS);
    const TensorDesc empty_shard(SMX_DTYPE_F32, {4, 0}, {});
    CHECK(Statistics(handle.handle, 10, op.cross_entropy_stats.desc, empty_shard.desc, op.rows_i64.desc).status ==
          SMX_STATUS_SUCCESS);
    const TensorDesc wide(SMX_DTYPE_F32, {1, (1 << 24) + 1}, {});
    const TensorDesc wide_stats(SMX_DTYPE_F32, {1, 5}, {});
    const TensorDesc one_i64(SMX_DTYPE_I64, {1}, {});
    CHECK(Statistics(handle.handle, 0, wide_stats.desc, wide.desc, one_i64.desc).status == SMX_STATUS_BAD_PARAM);
    CHECK_THAT(last_error(), Contains("count at most 2^24"));
}

TEST_CASE("gathered statistics are a positive multiple of the width in the statistics dtype", "[api]") {
    CpuHandle handle;
    Operands op;
    const TensorDesc three(SMX_DTYPE_F32, {4, 3}, {});
    const TensorDesc none(SMX_DTYPE_F32, {4, 0}, {});
    for (const TensorDesc* stats : {&three, &none}) {
        CHECK(Softmax(handle.handle, SMX_SOFTMAX, op.x.desc, op.x.desc, stats->desc).status ==
              SMX_STATUS_BAD_PARAM_SHAPE);
        CHECK_THAT(last_error(), Contains("gathered statistics are 2 per rank"));
        CHECK(Logsumexp(handle.handle, op.rows_f32.desc, stats->desc).status == SMX_STATUS_BAD_PARAM_SHAPE);
    }
    CHECK(CrossEntropy(handle.handle, 0, op.loss.desc, nullptr, op.x.desc, op.rows_i64.desc,
                       op.cross_entropy_stats.desc)
              .status == SMX_STATUS_SUCCESS);  // width 5: one rank's cross-entropy statistics
    CHECK(CrossEntropy(handle.handle, 0, op.loss.desc, nullptr, op.x.desc, op.rows_i64.desc, op.gathered_softmax.desc)
              .status == SMX_STATUS_BAD_PARAM_SHAPE);
    CHECK_THAT(last_error(), Contains("gathered statistics are 5 per rank"));
    const TensorDesc f64_stats(SMX_DTYPE_F64, {4, 4}, {});
    CHECK(Softmax(handle.handle, SMX_SOFTMAX, op.x.desc, op.x.desc, f64_stats.desc).status ==
          SMX_STATUS_NOT_SUPPORTED_DTYPE_PAIR);
    const TensorDesc f64_rows(SMX_DTYPE_F64, {4}, {});
    CHECK(Logsumexp(handle.handle, f64_rows.desc, f64_stats.desc).status == SMX_STATUS_SUCCESS);
    CHECK(Logsumexp(handle.handle, op.rows_f32.desc, f64_stats.desc).status == SMX_STATUS_NOT_SUPPORTED_DTYPE_PAIR);
    const TensorDesc f16_stats(SMX_DTYPE_F16, {4, 4}, {});
    const TensorDesc f16_rows(SMX_DTYPE_F16, {4}, {});
    CHECK(Logsumexp(handle.handle, f16_rows.desc, f16_stats.desc).status == SMX_STATUS_NOT_SUPPORTED_DTYPE_PAIR);
    CHECK(Softmax(handle.handle, static_cast<smxSoftmaxMode_t>(7), op.x.desc, op.x.desc, op.gathered_softmax.desc)
              .status == SMX_STATUS_BAD_PARAM_MODE);
    CHECK(Softmax(handle.handle, SMX_SOFTMAX, op.x.desc, op.x.desc, nullptr).status ==
          SMX_STATUS_BAD_PARAM_NULL_POINTER);
    CHECK(CrossEntropy(handle.handle, 0, op.loss.desc, nullptr, op.x.desc, op.rows_i64.desc, nullptr).status ==
          SMX_STATUS_BAD_PARAM_NULL_POINTER);
    CHECK_THAT(last_error(), Contains("statsDesc is NULL"));
}

TEST_CASE("shard softmax runs in place, refuses y over the statistics, and skips zero elements", "[api]") {
    CpuHandle handle;
    Operands op;
    Softmax softmax(handle.handle, SMX_LOG_SOFTMAX, op.x.desc, op.x.desc, op.gathered_softmax.desc);
    REQUIRE(softmax.status == SMX_STATUS_SUCCESS);
    std::vector<float> x(24, 0.5f);
    std::vector<float> stats = {
        0.5f,      0.5f,      0.5f,      0.5f,      6.0f, 6.0f, 6.0f, 6.0f,  // rank 0: max 0.5, sum 6
        -INFINITY, -INFINITY, -INFINITY, -INFINITY, 0,    0,    0,    0};    // rank 1: no classes
    REQUIRE(smxShardSoftmax(softmax.desc, nullptr, 0, x.data(), x.data(), stats.data(), nullptr) == SMX_STATUS_SUCCESS);
    CHECK(x[0] == Approx(-std::log(6.0f)));
    std::vector<float> big(64);
    CHECK(smxShardSoftmax(softmax.desc, nullptr, 0, big.data(), big.data() + 32, big.data() + 16, nullptr) ==
          SMX_STATUS_BAD_PARAM_OVERLAP);
    CHECK_THAT(last_error(), Contains("y") && Contains("stats"));
    CHECK(smxShardSoftmax(softmax.desc, nullptr, 0, x.data(), x.data(), nullptr, nullptr) ==
          SMX_STATUS_BAD_PARAM_NULL_POINTER);
    const TensorDesc empty(SMX_DTYPE_F32, {0, 6}, {});
    const TensorDesc empty_stats(SMX_DTYPE_F32, {0, 2}, {});
    Softmax nothing(handle.handle, SMX_SOFTMAX, empty.desc, empty.desc, empty_stats.desc);
    REQUIRE(nothing.status == SMX_STATUS_SUCCESS);
    CHECK(smxShardSoftmax(nothing.desc, nullptr, 0, nullptr, nullptr, nullptr, nullptr) == SMX_STATUS_SUCCESS);
}

TEST_CASE("the shard descriptors answer their queries and refuse one another", "[api]") {
    CpuHandle handle;
    Operands op;
    Statistics statistics(handle.handle, 0, op.softmax_stats.desc, op.x.desc, nullptr);
    CrossEntropy cross_entropy(handle.handle, 0, op.loss.desc, op.x.desc, op.x.desc, op.rows_i64.desc,
                               op.gathered_cross_entropy.desc);
    REQUIRE(statistics.status == SMX_STATUS_SUCCESS);
    REQUIRE(cross_entropy.status == SMX_STATUS_SUCCESS);
    const char* plan = nullptr;
    CHECK(smxGetShardStatisticsPlan(statistics.desc, &plan) == SMX_STATUS_SUCCESS);
    CHECK_THAT(std::string(plan), Contains("cpu reference"));
    std::size_t bytes = 1;
    CHECK(smxGetShardStatisticsWorkspaceSize(statistics.desc, &bytes) == SMX_STATUS_SUCCESS);
    CHECK(bytes == 0);
    CHECK(smxGetShardCrossEntropyWorkspaceSize(cross_entropy.desc, &bytes) == SMX_STATUS_SUCCESS);
    CHECK(bytes == 4 * sizeof(double));  // the mean's per-row losses
    CHECK(smxGetShardCrossEntropyWorkspaceSize(cross_entropy.desc, nullptr) == SMX_STATUS_BAD_PARAM_NULL_POINTER);
    std::vector<float> x(24, 1.0f), stats(40, 0.0f), dlogits(24);
    std::int64_t target[4] = {0, 1, 2, 3};
    float loss = 0.0f;
    CHECK(smxShardCrossEntropy(cross_entropy.desc, nullptr, 0, &loss, nullptr, dlogits.data(), x.data(), target,
                               stats.data(), nullptr) == SMX_STATUS_BAD_PARAM_WORKSPACE);
    CHECK(smxShardSoftmax(reinterpret_cast<smxShardSoftmaxDescriptor_t>(statistics.desc), nullptr, 0, x.data(),
                          x.data(), stats.data(), nullptr) == SMX_STATUS_BAD_PARAM_OBJECT);
    CHECK(smxDestroyShardLogsumexpDescriptor(reinterpret_cast<smxShardLogsumexpDescriptor_t>(cross_entropy.desc)) ==
          SMX_STATUS_BAD_PARAM_OBJECT);
    CHECK(smxDestroyShardStatisticsDescriptor(nullptr) == SMX_STATUS_SUCCESS);
    CHECK(smxDestroyShardSoftmaxDescriptor(nullptr) == SMX_STATUS_SUCCESS);
    CHECK(smxDestroyShardLogsumexpDescriptor(nullptr) == SMX_STATUS_SUCCESS);
    CHECK(smxDestroyShardCrossEntropyDescriptor(nullptr) == SMX_STATUS_SUCCESS);
}

// ---- the one-read path's setup (smxShardPeers_t): what a build without GPUs can check ----------------------

TEST_CASE("shard peers refuse a bad group, NULL and foreign objects, and a CPU handle", "[api]") {
    CpuHandle handle;
    smxShardPeers_t peers = reinterpret_cast<smxShardPeers_t>(&handle);  // overwritten with NULL on failure
    struct BadGroup {
        int ranks;
        int rank;
        std::int64_t max_rows;
        const char* message;
    };
    const BadGroup bad_groups[] = {{0, 0, 4, "ranks 0 is outside [1, 8]"},
                                   {SMX_SHARD_PEERS_MAX_RANKS + 1, 0, 4, "ranks 9 is outside"},
                                   {2, -1, 4, "rank -1 is outside [0, 2)"},
                                   {2, 2, 4, "rank 2 is outside [0, 2)"},
                                   {2, 0, -1, "maxRows -1 is outside"},
                                   {2, 0, std::int64_t{1} << 31, "maxRows 2147483648 is outside"}};
    for (const BadGroup& group : bad_groups) {
        CHECK(smxCreateShardPeers(handle.handle, &peers, group.ranks, group.rank, group.max_rows) ==
              SMX_STATUS_BAD_PARAM);
        CHECK_THAT(last_error(), Contains(group.message));
        CHECK(peers == nullptr);
    }
    CHECK(smxCreateShardPeers(handle.handle, &peers, 2, 1, 4) == SMX_STATUS_BAD_PARAM_DEVICE);
    CHECK_THAT(last_error(), Contains("a CPU handle has no peers"));
    CHECK(peers == nullptr);
    CHECK(smxCreateShardPeers(handle.handle, nullptr, 2, 1, 4) == SMX_STATUS_BAD_PARAM_NULL_POINTER);
    CHECK(smxCreateShardPeers(nullptr, &peers, 2, 1, 4) == SMX_STATUS_BAD_PARAM_NULL_POINTER);

    unsigned char handles[2 * SMX_SHARD_PEERS_HANDLE_BYTES] = {};
    std::int64_t timed_out = 0;
    CHECK(smxGetShardPeersHandle(nullptr, handles) == SMX_STATUS_BAD_PARAM_NULL_POINTER);
    CHECK(smxConnectShardPeers(nullptr, handles) == SMX_STATUS_BAD_PARAM_NULL_POINTER);
    CHECK(smxGetShardPeersTimeouts(nullptr, &timed_out) == SMX_STATUS_BAD_PARAM_NULL_POINTER);
    CHECK(smxDestroyShardPeers(nullptr) == SMX_STATUS_SUCCESS);
    // Another kind of object passed as peers is refused by its tag, and not freed.
    const auto foreign = reinterpret_cast<smxShardPeers_t>(handle.handle);
    CHECK(smxGetShardPeersHandle(foreign, handles) == SMX_STATUS_BAD_PARAM_OBJECT);
    CHECK(smxConnectShardPeers(foreign, handles) == SMX_STATUS_BAD_PARAM_OBJECT);
    CHECK(smxDestroyShardPeers(foreign) == SMX_STATUS_BAD_PARAM_OBJECT);
    CHECK_THAT(last_error(), Contains("smxShardPeers_t"));
}

TEST_CASE("the fused shard softmax refuses NULL or foreign peers before anything else", "[api]") {
    CpuHandle handle;
    Operands op;
    smxFusedShardSoftmaxDescriptor_t desc = nullptr;
    CHECK(smxCreateFusedShardSoftmaxDescriptor(handle.handle, &desc, nullptr, SMX_SOFTMAX, -1, op.x.desc, op.x.desc) ==
          SMX_STATUS_BAD_PARAM_NULL_POINTER);
    CHECK_THAT(last_error(), Contains("peers is NULL"));
    const auto foreign = reinterpret_cast<smxShardPeers_t>(handle.handle);
    CHECK(smxCreateFusedShardSoftmaxDescriptor(handle.handle, &desc, foreign, SMX_SOFTMAX, -1, op.x.desc, op.x.desc) ==
          SMX_STATUS_BAD_PARAM_OBJECT);
    CHECK(desc == nullptr);
    CHECK(smxFusedShardSoftmax(nullptr, nullptr, nullptr, nullptr) == SMX_STATUS_BAD_PARAM_NULL_POINTER);
    CHECK(smxDestroyFusedShardSoftmaxDescriptor(nullptr) == SMX_STATUS_SUCCESS);
}

TEST_CASE("the fused kernel's longest row follows the dtype's 16-byte packs and excludes f64", "[api]") {
    std::int64_t f32 = -1, f16 = -1, bf16 = -1, f64 = -1;
    REQUIRE(smxGetFusedShardSoftmaxMaxRowLength(SMX_DTYPE_F32, &f32) == SMX_STATUS_SUCCESS);
    REQUIRE(smxGetFusedShardSoftmaxMaxRowLength(SMX_DTYPE_F16, &f16) == SMX_STATUS_SUCCESS);
    REQUIRE(smxGetFusedShardSoftmaxMaxRowLength(SMX_DTYPE_BF16, &bf16) == SMX_STATUS_SUCCESS);
    REQUIRE(smxGetFusedShardSoftmaxMaxRowLength(SMX_DTYPE_F64, &f64) == SMX_STATUS_SUCCESS);
    CHECK(f32 > 0);
    CHECK(f16 == 2 * f32);  // the same bytes of registers hold twice the 16-bit values
    CHECK(bf16 == f16);
    CHECK(f64 == 0);
    CHECK(smxGetFusedShardSoftmaxMaxRowLength(SMX_DTYPE_F32, nullptr) == SMX_STATUS_BAD_PARAM_NULL_POINTER);
}
