// stats.cu - the stats and combine kernels: one read of x per row (Rows layout), then the row's result
// (logsumexp, the gathered log-probabilities, or the cross-entropy loss and lse). Traffic: x read once (plus
// the K gathered elements or the target logit, from L2), one value per row (K for gather) written.
//   stats, lane groups  rows of up to a few thousand elements: a group of 8 or 32 lanes per row, grid-striding
//                       over the rows, statistics by shuffles;
//   stats, CTA          one CTA per row chunk: chunks == 1, the CTA owns the row; chunks > 1 and a cluster of that
//                       many CTAs, the CTAs' statistics meet through distributed shared memory (pushed into
//                       every peer's mailbox for float statistics) and rank 0
//                       finishes the row; chunks > 1 and `split`, each CTA leaves its chunk's statistics in the
//                       workspace and
//   combine             folds them, a warp per row in chunk order, and finishes the row.
// Every fold has a fixed order, so the results are the same bits on every run. performance.md#log-probabilities.
#include <type_traits>

#include "cuda/logprobs/rows.cuh"

namespace smx::cuda {
namespace {

// Cross-entropy's target index and its logit, where the thread that finishes the row read them beforehand.
template <class C>
struct RowTarget {
    std::int64_t index;
    C logit;
};

// The row's result, written by a group of `lanes` threads (lane 0..lanes-1) once its statistics are complete;
// cross-entropy's target is read here unless `target` brings it.
template <class X, class C>
__device__ __forceinline__ void finish_row(const LogprobsRowsParams& args, std::int64_t row, const RowStats<C>& stats,
                                           int lane, int lanes, const RowTarget<C>* target = nullptr) {
    const X* x_row = static_cast<const X*>(args.operand.x) + row * args.x_row_stride;
    const RowResult<C> result = row_result(stats);
    C* out = static_cast<C*>(args.operand.out);
    const bool index_64 = args.index_64 != 0;
    switch (static_cast<RowOp>(args.op)) {
        case RowOp::Logsumexp:
            if (lane == 0) out[row * args.out_row_stride] = result.lse;
            return;
        case RowOp::Gather:
            for (std::int64_t k = lane; k < args.gathered; k += lanes) {
                const std::int64_t i = load_index(args.operand.index, row * args.index_row_stride + k * args.index_axis_stride, index_64);
                out[row * args.out_row_stride + k * args.out_axis_stride] =
                    gathered_log_prob(result, i, args.row_len, [&](std::int64_t j) { return C(to_compute(x_row[j])); });
            }
            return;
        case RowOp::CrossEntropy: {
            if (lane != 0) return;
            const std::int64_t t = target != nullptr ? target->index : load_index(args.operand.index, row * args.index_row_stride, index_64);
            C target_logit = C(0);
            if (target != nullptr) {
                target_logit = target->logit;
            } else if (t >= 0 && t < args.row_len) {
                target_logit = C(to_compute(x_row[t]));
            }
            const CrossEntropyRow<C> ce = cross_entropy_row(result, stats.mean, t, args.row_len, args.ignore_index,
                                                            static_cast<C>(args.label_smoothing), target_logit);
            if (args.reduction == SMX_REDUCTION_NONE) {
                out[row * args.out_row_stride] = ce.loss;
            } else {
                workspace_row_losses<C>(args.operand.workspace)[row] = {ce.loss, ce.ignored ? C(0) : C(1)};
            }
            if (args.operand.lse != nullptr) static_cast<C*>(args.operand.lse)[row * args.lse_row_stride] = result.lse;
            if (args.lse_to_workspace != 0) workspace_row_lse<C>(args.operand.workspace, args.rows)[row] = result.lse;
            return;
        }
    }
}

template <class C>
__device__ __forceinline__ C inverse_length(std::int64_t n) {
    return n > 0 ? C(1) / static_cast<C>(n) : C(0);
}

// Lane groups: group_threads (8 or 32) lanes per row; the loop bound is the warp's so every lane reaches every
// shuffle.
template <bool kMean, class X>
__device__ __forceinline__ void stats_lane_groups(const LogprobsRowsParams& args) {
    using C = ComputeType<X>;
    const int lanes = args.group_threads;
    const int lane = threadIdx.x % 32;
    const int groups_per_warp = 32 / lanes;
    const std::int64_t warps_per_block = blockDim.x / 32;
    const std::int64_t first_warp = static_cast<std::int64_t>(blockIdx.x) * warps_per_block + threadIdx.x / 32;
    const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * warps_per_block * groups_per_warp;
    const X* x = static_cast<const X*>(args.operand.x);
    const C inv_n = inverse_length<C>(args.row_len);
    for (std::int64_t warp_row = first_warp * groups_per_warp; warp_row < args.rows; warp_row += stride) {
        const std::int64_t row = warp_row + lane / lanes;
        const bool valid = row < args.rows;
        const RowStats<C> own = range_stats<kMean>(x + (valid ? row : 0) * args.x_row_stride, valid ? args.row_len : 0,
                                                   lane % lanes, lanes, inv_n);
        const RowStats<C> stats = lane_group_stats(own, lanes);
        if (valid) finish_row<X>(args, row, stats, lane % lanes, lanes);
    }
}

// One CTA per (row, chunk): grid.x = chunks x rows of one grid row, grid.y the grid rows. kEarlyTarget: the
// cross-entropy instances, which read the target with the row (an instance of their own, so logsumexp's and the
// gather's code does not carry the early reads).
template <bool kMean, bool kEarlyTarget, class X>
__device__ __forceinline__ void stats_ctas(const LogprobsRowsParams& args) {
    using C = ComputeType<X>;
    __shared__ RowStats<C> scratch[33];
    __shared__ RowStats<C> exchange;
    __shared__ RowStats<C> cluster_result;
    constexpr bool kPushStats = std::is_same_v<C, float>;  // as ce-regs: float statistics pushed, double pulled
    __shared__ RowStatsMailbox mailbox;
    const std::int64_t chunks = args.chunks;
    const std::int64_t rows_per_grid_row = gridDim.x / chunks;
    const std::int64_t row = static_cast<std::int64_t>(blockIdx.y) * rows_per_grid_row + blockIdx.x / chunks;
    const std::int64_t chunk = blockIdx.x % chunks;
    if (row >= args.rows) return;  // a cluster's CTAs share the row, so they leave together
    const bool cluster = chunks > 1 && args.split == 0;
    if (kPushStats && cluster) mailbox_open(mailbox, static_cast<unsigned>(chunks));
    const std::int64_t begin = chunk * args.slice_len;
    const std::int64_t remaining = args.row_len - begin;
    const std::int64_t count = remaining < 0 ? 0 : (remaining < args.slice_len ? remaining : args.slice_len);
    const X* x_row = static_cast<const X*>(args.operand.x) + row * args.x_row_stride;
    // Cross-entropy's target: its index read before the row and its logit right after it, so neither round trip
    // waits after the reduction, where the finishing thread held its CTA for both in turn.
    const bool reads_target = kEarlyTarget && threadIdx.x == 0 && (chunks == 1 || (cluster && chunk == 0));
    RowTarget<C> target{0, C(0)};
    if (reads_target) target.index = load_index(args.operand.index, row * args.index_row_stride, args.index_64 != 0);
    RowStats<C> stats = range_stats<kMean>(x_row + begin, count, threadIdx.x, blockDim.x, inverse_length<C>(args.row_len));
    if (reads_target && target.index >= 0 && target.index < args.row_len) target.logit = C(to_compute(x_row[target.index]));
    stats = cta_stats(stats, scratch);
    if (chunks == 1) {
        finish_row<X>(args, row, stats, threadIdx.x, blockDim.x, kEarlyTarget ? &target : nullptr);
    } else if (args.split != 0) {
        if (threadIdx.x == 0) workspace_partials<C>(args.operand.workspace, args.rows)[row * chunks + chunk] = stats;
    } else if constexpr (kPushStats) {
        stats = pushed_cluster_row_stats(stats, mailbox, &cluster_result, static_cast<unsigned>(chunk),
                                         static_cast<unsigned>(chunks));
        if (chunk == 0) finish_row<X>(args, row, stats, threadIdx.x, blockDim.x, kEarlyTarget ? &target : nullptr);
    } else {
        stats = cluster_row_stats(stats, &exchange, &cluster_result, static_cast<unsigned>(chunks));
        if (chunk == 0) finish_row<X>(args, row, stats, threadIdx.x, blockDim.x, kEarlyTarget ? &target : nullptr);
        cluster_wait();  // peers may still be reading `exchange`
    }
}

template <class X, bool kMean, bool kEarlyTarget>
__global__ void __launch_bounds__(kStatsMaxThreads) logprobs_stats(const ParamBlock<LogprobsRowsParams> args) {
    begin_dependent_kernel();
    if (args.group_threads < static_cast<int>(blockDim.x)) {
        stats_lane_groups<kMean, X>(args);
    } else {
        stats_ctas<kMean, kEarlyTarget, X>(args);
    }
}

// A warp per row folds the row's chunk partials in chunk order (each lane its strided share, then the
// butterfly), then finishes the row.
template <class X>
__global__ void __launch_bounds__(kCombineThreads) logprobs_combine(const ParamBlock<LogprobsRowsParams> args) {
    begin_dependent_kernel();
    using C = ComputeType<X>;
    const int lane = threadIdx.x % 32;
    const std::int64_t warps_per_block = blockDim.x / 32;
    const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * warps_per_block;
    const RowStats<C>* partials = workspace_partials<C>(args.operand.workspace, args.rows);
    for (std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * warps_per_block + threadIdx.x / 32; row < args.rows;
         row += stride) {
        RowStats<C> folded = empty_row_stats<C>();
        for (std::int64_t c = lane; c < args.chunks; c += 32) folded = combine_row_stats(folded, partials[row * args.chunks + c]);
        finish_row<X>(args, row, lane_group_stats(folded, 32), lane, 32);
    }
}

}  // namespace

const void* logprobs_stats_kernel(smxDataType_t x_dtype, bool with_mean, bool cross_entropy) {
    return visit_dtype(x_dtype, [with_mean, cross_entropy](auto tag) -> const void* {
        using X = typename decltype(tag)::type;
        if (with_mean) return reinterpret_cast<const void*>(&logprobs_stats<X, true, true>);  // only cross-entropy smooths
        return cross_entropy ? reinterpret_cast<const void*>(&logprobs_stats<X, false, true>)
                             : reinterpret_cast<const void*>(&logprobs_stats<X, false, false>);
    });
}

const void* logprobs_combine_kernel(smxDataType_t x_dtype) {
    return visit_dtype(x_dtype, [](auto tag) -> const void* {
        return reinterpret_cast<const void*>(&logprobs_combine<typename decltype(tag)::type>);
    });
}

}  // namespace smx::cuda
