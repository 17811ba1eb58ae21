// split_plan.cpp - backward-split's chunks: from the row length only, so a row's sum is folded in the same
// order whatever the row count. performance.md#backward.
#include <algorithm>

#include "cuda/backward/plan.hpp"

namespace smx::cuda {
namespace {

// Chunk lengths are multiples of this many elements (128 bytes of 16-bit dy), so every chunk of a row starts
// at the row's phase and the packs of every operand stay aligned alike.
constexpr std::int64_t kSplitChunkGranule = 64;

}  // namespace

// Chunks of about row_len / split_chunk_target elements within [split_min_chunk, split_max_chunk], raised so
// that a row has at most split_max_chunks; a CTA per (chunk, row), rows past grid.y's limit looped over.
smxStatus_t plan_backward_split(const SoftmaxBackwardInfo& info, const PlanContext& context, BackwardFamilyPlan* plan) {
    const BackwardTuning& tuning = context.tuning.backward;
    const void* sums_kernel = backward_split_sums_kernel(info.dy_dtype, info.dx_dtype);
    const void* write_kernel = backward_split_write_kernel(info.dy_dtype, info.dx_dtype);
    SMX_RETURN_IF_ERROR(require_backward_kernel(sums_kernel, info, "backward-split sums"));
    SMX_RETURN_IF_ERROR(require_backward_kernel(write_kernel, info, "backward-split write"));
    std::int64_t chunk_len = std::clamp(next_pow2(ceil_div(info.row_len, tuning.split_chunk_target)), tuning.split_min_chunk,
                                        tuning.split_max_chunk);
    chunk_len = std::max(chunk_len, round_up(ceil_div(info.row_len, tuning.split_max_chunks), kSplitChunkGranule));
    const std::int64_t chunks = ceil_div(info.row_len, chunk_len);
    const int threads = chunk_len >= tuning.split_wide_chunk ? 512 : 256;
    const dim3 grid(static_cast<unsigned>(chunks), static_cast<unsigned>(std::min<std::int64_t>(info.rows, kMaxGridY)));
    BackwardRowsParams params = backward_rows_params(info);
    params.slice_len = chunk_len;
    params.chunks = chunks;
    const std::size_t workspace = backward_workspace_bytes(info, info.rows * chunks);
    *plan = make_backward_family_plan(
        info, params, {Launch{sums_kernel, grid, dim3(threads), 0, 0}, Launch{write_kernel, grid, dim3(threads), 0, 0}},
        workspace, fmt::format("cuda backward-split chunk={} chunks={} threads={} workspace={}", chunk_len, chunks, threads, workspace));
    return SMX_STATUS_SUCCESS;
}

}  // namespace smx::cuda
