// tile_plan.cpp - spatial-tile: tile width, cluster, CTA size and vector width for whole cached columns.
// The rules and their measurements: performance.md#spatial-tile.
#include <algorithm>
#include <climits>

#include "cuda/spatial/plan.hpp"

namespace smx::cuda {

SpatialParams spatial_params(const SoftmaxInfo& info) {
    SpatialParams params;
    params.rows = info.rows;
    params.row_len = info.row_len;
    params.x_axis_stride = info.x.axis_stride;
    params.y_axis_stride = info.y.axis_stride;
    params.inner = info.inner;
    params.x_outer_stride = info.x.outer_stride;
    params.y_outer_stride = info.y.outer_stride;
    params.log_mode = info.is_log() ? 1 : 0;
    return params;
}

namespace {

// A configuration: 16-byte vectors per tile row, cluster size, axis positions per CTA.
struct SpatialTileChoice {
    bool fits = false;
    int vectors = 0;
    int cluster = 1;
    std::int64_t slice_len = 0;
    std::size_t shared_bytes = 0;
};

// Lets a tile kernel take all the dynamic shared memory the device allows and, where clusters exist,
// clusters of 16.
smxStatus_t prepare_tile_kernel(const DeviceLimits& limits, const void* kernel, std::size_t* dynamic_limit) {
    SMX_RETURN_IF_ERROR(allow_all_dynamic_shared_memory(limits, kernel, "spatial-tile", dynamic_limit));
    if (*dynamic_limit == 0) return SMX_STATUS_SUCCESS;
    if (has_clusters(limits)) SMX_RETURN_IF_ERROR(allow_large_clusters(kernel, "spatial-tile"));
    return SMX_STATUS_SUCCESS;
}

// The first configuration that caches whole columns: one CTA per column tile at rows of 256 down to
// min_unclustered_vectors x 16 bytes within the per-CTA budget; else wide tile rows (256 bytes) and the
// smallest cluster within the budget, then narrower rows (down to 32 bytes), then the opt-in limit with
// clusters up to 16 (non-portable) and rows down to 16 bytes. Few tiles then spread over larger clusters.
smxStatus_t choose_spatial_tile(const SoftmaxInfo& info, const PlanContext& context, const void* kernel,
                                SpatialTileChoice* choice) {
    *choice = {};
    const DeviceLimits& limits = context.limits;
    const SpatialTuning& tuning = context.tuning.spatial;
    std::size_t dynamic_limit = 0;
    SMX_RETURN_IF_ERROR(prepare_tile_kernel(limits, kernel, &dynamic_limit));
    if (dynamic_limit == 0) return SMX_STATUS_SUCCESS;
    const bool clusters = has_clusters(limits);
    const std::int64_t pack = 16 / static_cast<std::int64_t>(dtype_size(info.x_dtype));
    const int max_vectors = static_cast<int>(std::min<std::int64_t>(kSpatialMaxVectors, next_pow2(ceil_div(info.inner, pack))));

    // Whether (vectors, cluster) caches a slice within `budget` bytes and the device can place it.
    const auto try_config = [&](int vectors, int cluster, std::size_t budget, bool* placed) -> smxStatus_t {
        *placed = false;
        const std::int64_t slice_len = ceil_div(info.row_len, cluster);
        const std::size_t shared_bytes = static_cast<std::size_t>(slice_len) * static_cast<std::size_t>(vectors) * 16;
        if (shared_bytes > std::min(budget, dynamic_limit)) return SMX_STATUS_SUCCESS;
        if (cluster == 1) {
            int blocks = 0;
            SMX_RETURN_IF_ERROR(blocks_per_multiprocessor(kernel, kSpatialTileThreads, shared_bytes, &blocks));
            if (blocks == 0) return SMX_STATUS_SUCCESS;
        } else {
            if (max_active_clusters(kernel, cluster, kSpatialTileThreads, shared_bytes) == 0) return SMX_STATUS_SUCCESS;
        }
        *choice = {true, vectors, cluster, slice_len, shared_bytes};
        *placed = true;
        return SMX_STATUS_SUCCESS;
    };

    bool placed = false;
    for (int vectors = max_vectors; vectors >= std::min(max_vectors, tuning.min_unclustered_vectors) && !placed;
         vectors /= 2) {
        SMX_RETURN_IF_ERROR(try_config(vectors, 1, tuning.tile_slice_budget, &placed));
    }
    const int max_cluster = clusters ? 8 : 1;
    for (int vectors = max_vectors; vectors >= std::min(max_vectors, 2) && !placed; vectors /= 2) {
        for (int cluster = 1; cluster <= max_cluster && !placed; cluster *= 2) {
            SMX_RETURN_IF_ERROR(try_config(vectors, cluster, tuning.tile_slice_budget, &placed));
        }
    }
    for (int vectors = max_vectors; vectors >= 1 && !placed; vectors /= 2) {
        for (int cluster = 1; cluster <= (clusters ? 16 : 1) && !placed; cluster *= 2) {
            SMX_RETURN_IF_ERROR(try_config(vectors, cluster, dynamic_limit, &placed));
        }
    }
    if (!placed) return SMX_STATUS_SUCCESS;
    // Few tiles would leave SMs idle: split each column over more CTAs while slices stay long enough.
    const std::int64_t tiles = info.outer * ceil_div(info.inner, choice->vectors * pack);
    const std::int64_t wanted_ctas = tuning.spread_ctas_per_sm * limits.multiprocessor_count;
    while (choice->cluster < max_cluster && tiles * choice->cluster < wanted_ctas &&
           ceil_div(info.row_len, 2 * choice->cluster) >= tuning.min_slice) {
        const SpatialTileChoice before = *choice;
        SMX_RETURN_IF_ERROR(try_config(before.vectors, before.cluster * 2, before.shared_bytes, &placed));
        if (!placed) {
            *choice = before;
            break;
        }
    }
    return SMX_STATUS_SUCCESS;
}

}  // namespace

smxStatus_t plan_spatial_tile(const SoftmaxInfo& info, const PlanContext& context, FamilyPlan* plan, bool* planned) {
    *planned = false;
    const SpatialTuning& tuning = context.tuning.spatial;
    const void* tile_kernel = spatial_tile_softmax_kernel(info.x_dtype, info.y_dtype, 16, kSpatialTileThreads);
    SMX_RETURN_IF_ERROR(require_kernel(tile_kernel, info.x_dtype, info.y_dtype, "spatial-tile"));
    SpatialTileChoice tile;
    SMX_RETURN_IF_ERROR(choose_spatial_tile(info, context, tile_kernel, &tile));
    if (!tile.fits) return SMX_STATUS_SUCCESS;
    const int width = tile.vectors * static_cast<int>(16 / dtype_size(info.x_dtype));
    // 16-bit x written as f32 at tile rows of narrow_vector_min_row_bytes or more: the same geometry in 8-byte
    // vectors (fewer registers, more CTAs per SM).
    int vector_bytes = 16;
    if (dtype_size(info.x_dtype) == 2 && dtype_size(info.y_dtype) == 4 && tile.vectors * 16 >= tuning.narrow_vector_min_row_bytes) {
        const void* narrow_kernel = spatial_tile_softmax_kernel(info.x_dtype, info.y_dtype, 8, kSpatialTileThreads);
        SMX_RETURN_IF_ERROR(require_kernel(narrow_kernel, info.x_dtype, info.y_dtype, "spatial-tile (8-byte vectors)"));
        std::size_t narrow_dynamic_limit = 0;
        SMX_RETURN_IF_ERROR(prepare_tile_kernel(context.limits, narrow_kernel, &narrow_dynamic_limit));
        // Same static shared memory, fewer registers: what fit the 16-byte kernel fits this one.
        if (tile.shared_bytes <= narrow_dynamic_limit) {
            tile_kernel = narrow_kernel;
            vector_bytes = 8;
        }
    }
    // Unclustered tiles take 128-thread CTAs where those let an SM hold more tiles at once (each CTA holds one
    // tile, and an SM's tiles in flight bound this kernel).
    int threads = kSpatialTileThreads;
    if (tile.cluster == 1) {
        const void* small_kernel = spatial_tile_softmax_kernel(info.x_dtype, info.y_dtype, vector_bytes, kSpatialTileSmallThreads);
        SMX_RETURN_IF_ERROR(require_kernel(small_kernel, info.x_dtype, info.y_dtype, "spatial-tile (128 threads)"));
        std::size_t small_dynamic_limit = 0;
        SMX_RETURN_IF_ERROR(prepare_tile_kernel(context.limits, small_kernel, &small_dynamic_limit));
        int large_blocks = 0;
        int small_blocks = 0;
        SMX_RETURN_IF_ERROR(blocks_per_multiprocessor(tile_kernel, threads, tile.shared_bytes, &large_blocks));
        if (tile.shared_bytes <= small_dynamic_limit) {
            SMX_RETURN_IF_ERROR(
                blocks_per_multiprocessor(small_kernel, kSpatialTileSmallThreads, tile.shared_bytes, &small_blocks));
        }
        if (small_blocks > large_blocks) {
            tile_kernel = small_kernel;
            threads = kSpatialTileSmallThreads;
        }
    }
    // Tile rows of half an L2 line fetch x's whole lines where x's rows span them: the other half is a
    // neighbouring tile's row that another CTA reads at about the same time.
    const int row_bytes = width * static_cast<int>(dtype_size(info.x_dtype));
    const bool whole_lines = vector_bytes == 16 && row_bytes == tuning.whole_line_row_bytes &&
                             info.inner * static_cast<std::int64_t>(dtype_size(info.x_dtype)) >= 2 * tuning.whole_line_row_bytes;
    const std::int64_t tiles_per_outer = ceil_div(info.inner, width);
    const std::int64_t clusters = std::min<std::int64_t>(info.outer * tiles_per_outer, INT_MAX / tile.cluster);
    const unsigned grid = static_cast<unsigned>(clusters * tile.cluster);
    SpatialParams params = spatial_params(info);
    params.x_whole_lines = whole_lines ? 1 : 0;
    params.tiles_per_outer = tiles_per_outer;
    params.tiles = info.outer * tiles_per_outer;
    params.tile_width = width;
    params.slice_len = tile.slice_len;
    const Launch launch{tile_kernel, dim3(grid), dim3(static_cast<unsigned>(threads)), tile.shared_bytes,
                        tile.cluster > 1 ? static_cast<unsigned>(tile.cluster) : 0u};
    *plan = make_family_plan(info, params, {launch}, 0,
                             fmt::format("cuda spatial-tile tile={} vectors={}x{}B cluster={} slice={} smem={} threads={} "
                                         "grid={}{}",
                                         width, tile.vectors * 16 / vector_bytes, vector_bytes, tile.cluster, tile.slice_len,
                                         tile.shared_bytes, threads, grid, whole_lines ? " lines=128B" : ""));
    *planned = true;
    return SMX_STATUS_SUCCESS;
}

}  // namespace smx::cuda
