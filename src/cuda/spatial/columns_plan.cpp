// columns_plan.cpp - columns too long for any cluster (x read twice): spatial-split, or spatial-online.
// The rules and their measurements: performance.md#spatial-split, #spatial-online.
#include <algorithm>
#include <cstring>

#include "cuda/spatial/plan.hpp"

namespace smx::cuda {
namespace {

// Columns a spatial-split thread takes at once (1 for the one-element instances) and the byte alignment its
// vector accesses need of x and y.
struct SplitPacks {
    int columns = 1;
    std::size_t x_alignment = 1;
    std::size_t y_alignment = 1;
};

// Whether spatial-split's vector instances can run these tensors given aligned bases: inner a whole number of
// vectors (so a vector is valid whole or not at all), and strides that keep every vector of x and of y aligned
// to its size. *packs: the vector.
bool split_vectors_fit(const SoftmaxInfo& info, SplitPacks* packs) {
    const auto x_size = static_cast<std::int64_t>(dtype_size(info.x_dtype));
    const auto y_size = static_cast<std::int64_t>(dtype_size(info.y_dtype));
    const std::int64_t compute_size = info.x_dtype == SMX_DTYPE_F64 ? 8 : 4;
    const std::int64_t columns = kSpatialSplitPackBytes / compute_size;
    const std::int64_t x_alignment = columns * x_size;
    const std::int64_t y_alignment = columns * y_size;
    const bool several_outer = info.outer > 1;  // a single outer index's stride is never used
    const bool fits = info.inner % columns == 0 && (info.x.axis_stride * x_size) % x_alignment == 0 &&
                      (!several_outer || (info.x.outer_stride * x_size) % x_alignment == 0) &&
                      (info.y.axis_stride * y_size) % y_alignment == 0 &&
                      (!several_outer || (info.y.outer_stride * y_size) % y_alignment == 0);
    *packs = {static_cast<int>(columns), static_cast<std::size_t>(x_alignment), static_cast<std::size_t>(y_alignment)};
    return fits;
}

// Spatial-split over tiles of `width` columns: chunks of whole loop steps (of both kernels), as many as fill
// the device's resident slots of both kernels split_waves times and at least two, none under split_min_steps
// steps a thread. *planned = false where the column makes one chunk only, or the tiles exceed the grid's y limit.
smxStatus_t plan_spatial_split(const SoftmaxInfo& info, const PlanContext& context, const SplitPacks& packs, int width,
                               FamilyPlan* plan, bool* planned) {
    *planned = false;
    const SpatialTuning& tuning = context.tuning.spatial;
    const bool vectors = packs.columns > 1;
    const std::int64_t tiles_per_outer = ceil_div(info.inner, width);
    const std::int64_t tiles = info.outer * tiles_per_outer;
    if (tiles > kMaxGridY) return SMX_STATUS_SUCCESS;
    const void* stats_kernel = spatial_split_stats_kernel(info.x_dtype, info.y_dtype, vectors);
    const void* write_kernel = spatial_split_write_kernel(info.x_dtype, info.y_dtype, vectors);
    SMX_RETURN_IF_ERROR(require_kernel(stats_kernel, info.x_dtype, info.y_dtype, "spatial-split statistics"));
    SMX_RETURN_IF_ERROR(require_kernel(write_kernel, info.x_dtype, info.y_dtype, "spatial-split write"));
    int stats_blocks = 0;
    int write_blocks = 0;
    SMX_RETURN_IF_ERROR(blocks_per_multiprocessor(stats_kernel, kSpatialSplitThreads, 0, &stats_blocks));
    SMX_RETURN_IF_ERROR(blocks_per_multiprocessor(write_kernel, kSpatialSplitThreads, 0, &write_blocks));
    const std::int64_t slots =
        static_cast<std::int64_t>(context.limits.multiprocessor_count) * std::max(std::min(stats_blocks, write_blocks), 1);
    const int unroll = vectors ? kSpatialSplitVectorUnroll : kSpatialSplitUnroll;
    const std::int64_t axis_threads = kSpatialSplitThreads / (width / packs.columns);
    const std::int64_t step_positions = axis_threads * unroll;
    // As many chunks as wanted and the minimum chunk allows; where they would spill into a last wave under half
    // full, fewer, in whole waves. Rounding the chunk up to whole loop steps then only lowers the count.
    const std::int64_t wanted_chunks = std::max<std::int64_t>(2, tuning.split_waves * slots / tiles);
    std::int64_t target_chunks =
        std::max<std::int64_t>(1, std::min(wanted_chunks, info.row_len / (step_positions * tuning.split_min_steps)));
    const std::int64_t ctas = tiles * target_chunks;
    if (ctas > slots && ctas % slots != 0 && ctas % slots < slots / 2) {
        target_chunks = std::max<std::int64_t>(1, ctas / slots * slots / tiles);
    }
    const std::int64_t chunk_len = round_up(ceil_div(info.row_len, target_chunks), step_positions);
    const std::int64_t chunks = ceil_div(info.row_len, chunk_len);
    if (chunks < 2) return SMX_STATUS_SUCCESS;
    const dim3 grid(static_cast<unsigned>(chunks), static_cast<unsigned>(tiles));
    SpatialParams params = spatial_params(info);
    params.tiles_per_outer = tiles_per_outer;
    params.tiles = tiles;
    params.tile_width = width;
    params.slice_len = chunk_len;
    params.chunks = chunks;
    const std::size_t workspace = static_cast<std::size_t>(tiles * chunks * width) * stats_bytes(info);
    *plan = make_family_plan(info, params,
                             {Launch{stats_kernel, grid, dim3(kSpatialSplitThreads), 0, 0},
                              Launch{write_kernel, grid, dim3(kSpatialSplitThreads), 0, 0}},
                             workspace,
                             fmt::format("cuda spatial-split tile={} columns_per_thread={} axis_threads={} chunk={} "
                                         "chunks={} threads={} workspace={}",
                                         width, packs.columns, axis_threads, chunk_len, chunks, kSpatialSplitThreads,
                                         workspace));
    *planned = true;
    return SMX_STATUS_SUCCESS;
}

// One element a thread: spatial-split, or spatial-online where preferred, where a column is too short for two
// chunks, or where the tiles exceed the grid's y limit.
smxStatus_t plan_one_element_columns(const SoftmaxInfo& info, const PlanContext& context, FamilyPlan* plan) {
    const int width = static_cast<int>(std::min<std::int64_t>(32, next_pow2(info.inner)));
    if (context.preferences.long_columns != LongColumnsPreference::Online) {
        bool planned = false;
        SMX_RETURN_IF_ERROR(plan_spatial_split(info, context, SplitPacks{}, width, plan, &planned));
        if (planned) return SMX_STATUS_SUCCESS;
    }
    // Spatial-online: one CTA per tile, with enough threads along the axis to fill every SM when tiles are few,
    // but no more than the axis has.
    const std::int64_t tiles_per_outer = ceil_div(info.inner, width);
    const std::int64_t tiles = info.outer * tiles_per_outer;
    const void* kernel = spatial_online_softmax_kernel(info.x_dtype, info.y_dtype);
    SMX_RETURN_IF_ERROR(require_kernel(kernel, info.x_dtype, info.y_dtype, "spatial-online"));
    const DeviceLimits& limits = context.limits;
    const std::int64_t device_threads =
        static_cast<std::int64_t>(limits.multiprocessor_count) * std::max(limits.max_threads_per_multiprocessor, 1024);
    std::int64_t threads = std::clamp<std::int64_t>(prev_pow2(std::max<std::int64_t>(device_threads / tiles, 1)), 128, 1024);
    while (threads > 32 && threads / 2 >= width * next_pow2(info.row_len)) threads /= 2;
    int blocks = 0;
    SMX_RETURN_IF_ERROR(blocks_per_multiprocessor(kernel, static_cast<int>(threads), 0, &blocks));
    const unsigned grid = persistent_grid(tiles, blocks, limits.multiprocessor_count);
    SpatialParams params = spatial_params(info);
    params.tiles_per_outer = tiles_per_outer;
    params.tiles = tiles;
    params.tile_width = width;
    *plan = make_family_plan(info, params, {Launch{kernel, dim3(grid), dim3(static_cast<unsigned>(threads)), 0, 0}}, 0,
                             fmt::format("cuda spatial-online tile={} axis_threads={} threads={} grid={}", width,
                                         threads / width, threads, grid));
    return SMX_STATUS_SUCCESS;
}

}  // namespace

// Where inner is wider than split_vectors_min_inner and the strides allow vector accesses, spatial-split's
// vector instances (tiles of up to kSpatialSplitMaxWidth columns), with the one-element plan kept for calls
// whose x or y base is misaligned for them; otherwise the one-element plan alone.
smxStatus_t plan_long_columns(const SoftmaxInfo& info, const PlanContext& context, FamilyPlan* plan) {
    SplitPacks packs;
    if (info.inner > context.tuning.spatial.split_vectors_min_inner &&
        context.preferences.long_columns != LongColumnsPreference::Online && split_vectors_fit(info, &packs)) {
        const int width = static_cast<int>(std::min<std::int64_t>(kSpatialSplitMaxWidth, next_pow2(info.inner)));
        bool planned = false;
        SMX_RETURN_IF_ERROR(plan_spatial_split(info, context, packs, width, plan, &planned));
        if (planned) {
            auto unaligned = std::make_unique<FamilyPlan>();
            SMX_RETURN_IF_ERROR(plan_one_element_columns(info, context, unaligned.get()));
            plan->workspace = std::max(plan->workspace, unaligned->workspace);
            plan->text += fmt::format("; unaligned x or y: {}", unaligned->text.substr(std::strlen("cuda ")));
            plan->x_base_alignment = packs.x_alignment;
            plan->y_base_alignment = packs.y_alignment;
            plan->unaligned = std::move(unaligned);
            return SMX_STATUS_SUCCESS;
        }
    }
    return plan_one_element_columns(info, context, plan);
}

}  // namespace smx::cuda
