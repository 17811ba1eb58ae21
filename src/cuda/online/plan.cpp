// plan.cpp - block-online's persistent grid and split-row's chunks. performance.md#block-online, #split-row.
#include "cuda/online/plan.hpp"

#include <algorithm>

#include "cuda/online/params.hpp"

namespace smx::cuda {
namespace {

// Chunk lengths are multiples of this many elements: 128 bytes even for 16-bit x, so every chunk of a row
// starts at the row's 16-byte phase and the vector body stays aligned.
constexpr std::int64_t kSplitChunkGranule = 64;

// split-row's two kernels for the problem: the plain ones, or with options the unmasked set's instances (none for
// the masked sets, nor for the pairs without options instances), the statistics with the scale folded into their
// exps where the options fold it (rows_scale_folds), the write too for softmax (log-softmax writes z itself).
struct SplitRowKernels {
    const void* stats;
    const void* write;
};
SplitRowKernels split_row_kernels(const SoftmaxInfo& info, const PlanContext& context) {
    if (!info.options.any()) {
        return {split_row_stats_kernel(info.x_dtype, info.y_dtype), split_row_write_kernel(info.x_dtype, info.y_dtype)};
    }
    if (rows_option_set_for(info, context) != RowsOptionSet::Unmasked) return {nullptr, nullptr};
    const bool fold = rows_scale_folds(info.options);
    return {split_row_stats_options_kernel(info.x_dtype, info.y_dtype, fold),
            split_row_write_options_kernel(info.x_dtype, info.y_dtype, fold && !info.is_log())};
}

}  // namespace

bool split_row_takes_options(const SoftmaxInfo& info, const PlanContext& context) {
    const SplitRowKernels kernels = split_row_kernels(info, context);
    return kernels.stats != nullptr && kernels.write != nullptr;
}

smxStatus_t plan_block_online(const SoftmaxInfo& info, const PlanContext& context, FamilyPlan* plan) {
    const void* kernel = block_online_softmax_kernel(info.x_dtype, info.y_dtype);
    SMX_RETURN_IF_ERROR(require_kernel(kernel, info.x_dtype, info.y_dtype, "block-online"));
    int blocks = 0;
    SMX_RETURN_IF_ERROR(blocks_per_multiprocessor(kernel, kOnlineThreads, 0, &blocks));
    const unsigned grid = persistent_grid(info.rows, blocks, context.limits.multiprocessor_count);
    *plan = make_family_plan(info, rows_params<OnlineRowsParams>(info),
                             {Launch{kernel, dim3(grid), dim3(kOnlineThreads), 0, 0}}, 0,
                             fmt::format("cuda block-online threads={} grid={}", kOnlineThreads, grid));
    return SMX_STATUS_SUCCESS;
}

// Chunks of about row_len / chunk_target elements (a lone row spreads over ~2 waves of CTAs), within
// [min_chunk, max_chunk] and at most max_chunks per row.
smxStatus_t plan_split_row(const SoftmaxInfo& info, const PlanContext& context, FamilyPlan* plan) {
    const SplitRowTuning& tuning = context.tuning.split_row;
    const SplitRowKernels kernels = split_row_kernels(info, context);
    SMX_RETURN_IF_ERROR(require_kernel(kernels.stats, info.x_dtype, info.y_dtype, "split-row statistics"));
    SMX_RETURN_IF_ERROR(require_kernel(kernels.write, info.x_dtype, info.y_dtype, "split-row write"));
    std::int64_t chunk_len = std::clamp(next_pow2(ceil_div(info.row_len, tuning.chunk_target)), tuning.min_chunk, tuning.max_chunk);
    chunk_len = std::max(chunk_len, round_up(ceil_div(info.row_len, tuning.max_chunks), kSplitChunkGranule));
    const std::int64_t chunks = ceil_div(info.row_len, chunk_len);
    const int threads = chunk_len >= 16384 ? 512 : 256;
    const dim3 grid(static_cast<unsigned>(chunks), static_cast<unsigned>(std::min<std::int64_t>(info.rows, kMaxGridY)));
    OnlineRowsParams params = rows_params<OnlineRowsParams>(info);
    params.slice_len = chunk_len;
    params.chunks = chunks;
    const std::size_t workspace = static_cast<std::size_t>(info.rows * chunks) * stats_bytes(info);
    *plan = make_family_plan(info, params,
                             {Launch{kernels.stats, grid, dim3(threads), 0, 0}, Launch{kernels.write, grid, dim3(threads), 0, 0}},
                             workspace,
                             fmt::format("cuda split-row chunk={} chunks={} threads={} workspace={}", chunk_len, chunks,
                                         threads, workspace));
    return SMX_STATUS_SUCCESS;
}

}  // namespace smx::cuda
