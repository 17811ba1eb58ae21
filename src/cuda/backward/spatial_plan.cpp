// spatial_plan.cpp - backward-spatial's tile width, cluster and whether the tile is cached: whole columns of dy
// and y kept in shared memory by one CTA or a cluster where they fit, else read twice. performance.md#backward.
#include <algorithm>
#include <climits>

#include "cuda/backward/plan.hpp"

namespace smx::cuda {
namespace {

struct SpatialChoice {
    bool cached = false;
    int vectors = 0;
    int cluster = 1;
    std::int64_t slice_len = 0;
    std::size_t shared_bytes = 0;  // the cache's, then the mailbox's where the cluster pushes its sums
};

}  // namespace

// The first configuration that caches whole columns, searched as spatial-tile searches (tuning values of its
// own, since dy and y are cached): one CTA per tile at tile rows of the widest vectors down to
// spatial_min_unclustered_row_bytes within the budget; then the smallest cluster (up to 8, or 16 for rows of
// spatial_large_cluster_row_bytes or less) within the budget, from wide tile rows down to two vectors; then
// clusters up to 16 and all the shared memory a CTA may have (every cluster within SMX_CUDA_MAX_CLUSTER).
// None: the widest tile read twice. Few tiles then spread over larger clusters.
smxStatus_t plan_backward_spatial(const SoftmaxBackwardInfo& info, const PlanContext& context, BackwardFamilyPlan* plan) {
    const BackwardTuning& tuning = context.tuning.backward;
    const DeviceLimits& limits = context.limits;
    const void* pull_kernel = backward_spatial_kernel(info.dy_dtype, info.dx_dtype, BackwardSpatialExchange::Pull);
    const void* push_kernel = backward_spatial_kernel(info.dy_dtype, info.dx_dtype, BackwardSpatialExchange::Push);
    SMX_RETURN_IF_ERROR(require_backward_kernel(pull_kernel, info, "backward-spatial"));
    SMX_RETURN_IF_ERROR(require_backward_kernel(push_kernel, info, "backward-spatial"));
    // The push instance's static shared memory also holds the mailbox's mbarrier, so its dynamic limit is lower.
    std::size_t pull_dynamic_limit = 0;
    std::size_t push_dynamic_limit = 0;
    SMX_RETURN_IF_ERROR(allow_all_dynamic_shared_memory(limits, pull_kernel, "backward-spatial", &pull_dynamic_limit));
    SMX_RETURN_IF_ERROR(allow_all_dynamic_shared_memory(limits, push_kernel, "backward-spatial", &push_dynamic_limit));
    const bool clusters = has_clusters(limits);
    if (clusters) {
        SMX_RETURN_IF_ERROR(allow_large_clusters(pull_kernel, "backward-spatial"));
        SMX_RETURN_IF_ERROR(allow_large_clusters(push_kernel, "backward-spatial"));
    }
    const int pack = backward_pack(info);
    const auto value_size = static_cast<std::int64_t>(dtype_size(info.dy_dtype));
    const int max_vectors =
        static_cast<int>(std::min<std::int64_t>(kBackwardSpatialMaxVectors, next_pow2(ceil_div(info.inner, pack))));
    constexpr int kThreads = kBackwardSpatialThreads;
    const auto tile_count = [&](int vectors) {
        return info.outer * ceil_div(info.inner, static_cast<std::int64_t>(vectors) * pack);
    };
    // A cluster pushes its CTAs' column sums where the grid gives each cluster one tile (a mailbox serves one
    // exchange): a float (f64: double) per column and rank after the cache (its mbarrier is static). Not for
    // 16-bit dy and y with 16-bit dx, where the push measured slower: their clustered plans' 64 KiB cache and the
    // kernel's static shared memory fill an SM at three CTAs to the byte, so the mailbox costs a CTA per SM
    // (performance.md#backward-spatial-push-per-dtype-pair); nor under SMX_CUDA_BACKWARD_EXCHANGE=pull.
    const bool sixteen_bit_pair = dtype_size(info.dy_dtype) == 2 && dtype_size(info.dx_dtype) == 2;
    const bool pull_sums = sixteen_bit_pair || context.preferences.backward_exchange == BackwardExchangePreference::Pull;
    const auto pushes = [&](int vectors, int cluster) {
        return !pull_sums && cluster > 1 && tile_count(vectors) <= INT_MAX / cluster;
    };
    const auto kernel_for = [&](int vectors, int cluster) { return pushes(vectors, cluster) ? push_kernel : pull_kernel; };
    const auto dynamic_limit_for = [&](int vectors, int cluster) {
        return pushes(vectors, cluster) ? push_dynamic_limit : pull_dynamic_limit;
    };
    const auto sum_size = static_cast<std::size_t>(info.dy_dtype == SMX_DTYPE_F64 ? 8 : 4);
    const auto mailbox_bytes = [&](int vectors, int cluster) {
        return pushes(vectors, cluster) ? static_cast<std::size_t>(cluster) * vectors * pack * sum_size : std::size_t{0};
    };

    SpatialChoice choice;
    // Whether (vectors, cluster) caches its slice within `budget` bytes and the device can place it.
    const auto try_cached = [&](int vectors, int cluster, std::size_t budget, bool* placed) -> smxStatus_t {
        *placed = false;
        const std::int64_t slice_len = ceil_div(info.row_len, cluster);
        const auto bytes = static_cast<std::size_t>(slice_len * vectors * pack * value_size * 2) + mailbox_bytes(vectors, cluster);
        if (bytes > std::min(budget, dynamic_limit_for(vectors, cluster))) return SMX_STATUS_SUCCESS;
        if (cluster == 1) {
            int blocks = 0;
            SMX_RETURN_IF_ERROR(blocks_per_multiprocessor(pull_kernel, kThreads, bytes, &blocks));
            if (blocks == 0) return SMX_STATUS_SUCCESS;
        } else if (max_active_clusters(kernel_for(vectors, cluster), cluster, kThreads, bytes) == 0) {
            return SMX_STATUS_SUCCESS;
        }
        choice = {true, vectors, cluster, slice_len, bytes};
        *placed = true;
        return SMX_STATUS_SUCCESS;
    };
    bool placed = false;
    // SMX_CUDA_MAX_CLUSTER caps every cluster (the GPU suite's synccheck stage keeps to 8: its false reports
    // at the mailbox's mbarrier in larger clusters, cuda-kernels.md).
    const int cap = context.preferences.max_cluster;
    const int max_cluster = !clusters ? 1 : cap >= 1 && cap < kBackwardRegsMaxCluster ? cap : kBackwardRegsMaxCluster;
    const int budget_max_cluster = std::min(max_cluster, 8);
    const auto row_bytes = [&](int vectors) { return static_cast<std::int64_t>(vectors) * pack * value_size; };
    // The rule counts rows in bytes (vectors of 16-bit dy with f32 dx are 8 bytes) and lets rows narrower than
    // a line take clusters of 16 before rows narrow further; SMX_CUDA_BACKWARD_SPATIAL_ROWS=narrow: the vector
    // count and clusters of 8 as before.
    const bool narrow_rows = context.preferences.backward_spatial_rows == BackwardSpatialRowsPreference::Narrow;
    const auto unclustered_enough = [&](int vectors) {
        return narrow_rows ? vectors >= std::min(max_vectors, tuning.spatial_min_unclustered_vectors)
                           : vectors == max_vectors || row_bytes(vectors) >= tuning.spatial_min_unclustered_row_bytes;
    };
    const auto budget_cluster_limit = [&](int vectors) {
        const bool large = clusters && !narrow_rows && row_bytes(vectors) <= tuning.spatial_large_cluster_row_bytes;
        return large ? max_cluster : budget_max_cluster;
    };
    if (pull_dynamic_limit > 0) {  // the larger of the two limits
        for (int vectors = max_vectors; vectors >= 1 && unclustered_enough(vectors) && !placed; vectors /= 2) {
            SMX_RETURN_IF_ERROR(try_cached(vectors, 1, tuning.spatial_tile_budget, &placed));
        }
        for (int vectors = max_vectors; vectors >= std::min(max_vectors, 2) && !placed; vectors /= 2) {
            for (int cluster = 1; cluster <= budget_cluster_limit(vectors) && !placed; cluster *= 2) {
                SMX_RETURN_IF_ERROR(try_cached(vectors, cluster, tuning.spatial_tile_budget, &placed));
            }
        }
        for (int vectors = max_vectors; vectors >= 1 && !placed; vectors /= 2) {
            for (int cluster = 1; cluster <= max_cluster && !placed; cluster *= 2) {
                SMX_RETURN_IF_ERROR(try_cached(vectors, cluster, dynamic_limit_for(vectors, cluster), &placed));
            }
        }
    }
    if (!placed) choice = {false, max_vectors, 1, info.row_len, 0};
    // Few tiles would leave SMs idle: split each column over more CTAs while slices stay long enough.
    const std::int64_t tiles_per_outer = ceil_div(info.inner, static_cast<std::int64_t>(choice.vectors) * pack);
    const std::int64_t tiles = tile_count(choice.vectors);
    const std::int64_t wanted_ctas = tuning.spatial_spread_ctas_per_sm * limits.multiprocessor_count;
    while (choice.cluster < budget_max_cluster && tiles * choice.cluster < wanted_ctas &&
           ceil_div(info.row_len, 2 * choice.cluster) >= tuning.spatial_min_slice) {
        const SpatialChoice before = choice;
        if (before.cached) {
            SMX_RETURN_IF_ERROR(try_cached(before.vectors, before.cluster * 2, before.shared_bytes, &placed));
            if (!placed) {
                choice = before;
                break;
            }
        } else {
            const int cluster = before.cluster * 2;
            const std::size_t mailbox = mailbox_bytes(before.vectors, cluster);
            if (mailbox > dynamic_limit_for(before.vectors, cluster) ||
                max_active_clusters(kernel_for(before.vectors, cluster), cluster, kThreads, mailbox) == 0) {
                break;
            }
            choice.cluster = cluster;
            choice.slice_len = ceil_div(info.row_len, choice.cluster);
            choice.shared_bytes = mailbox;
        }
    }

    const int width = choice.vectors * pack;
    // The cached slice comes in by cp.async unless asked otherwise; tile rows narrower than a line fetch the
    // operands' whole lines where those rows hold other tiles' columns, read by neighbouring CTAs.
    const BackwardSpatialCopyPreference copy = context.preferences.backward_spatial_copy;
    const bool async_copies = choice.cached && copy != BackwardSpatialCopyPreference::Registers;
    const std::int64_t tile_row_bytes = width * value_size;
    const bool whole_lines = async_copies && copy == BackwardSpatialCopyPreference::Rule &&
                             tile_row_bytes <= tuning.spatial_whole_line_row_bytes && info.inner * value_size >= 2 * tile_row_bytes;
    const std::int64_t cluster_count = std::min<std::int64_t>(tiles, INT_MAX / choice.cluster);
    const unsigned grid = static_cast<unsigned>(cluster_count * choice.cluster);
    BackwardSpatialParams params;
    params.row_len = info.row_len;
    params.inner = info.inner;
    params.tiles_per_outer = tiles_per_outer;
    params.tiles = tiles;
    params.dy_axis_stride = info.dy.axis_stride;
    params.y_axis_stride = info.y.axis_stride;
    params.dx_axis_stride = info.dx.axis_stride;
    params.dy_outer_stride = info.dy.outer_stride;
    params.y_outer_stride = info.y.outer_stride;
    params.dx_outer_stride = info.dx.outer_stride;
    params.slice_len = choice.slice_len;
    params.tile_width = width;
    params.pack = pack;
    params.cached = choice.cached ? 1 : 0;
    params.async_copies = async_copies ? 1 : 0;
    params.whole_lines = whole_lines ? 1 : 0;
    params.log_mode = info.is_log() ? 1 : 0;
    const bool push_sums = pushes(choice.vectors, choice.cluster);
    params.mailbox_offset = static_cast<int>(choice.shared_bytes - mailbox_bytes(choice.vectors, choice.cluster));
    const Launch launch{kernel_for(choice.vectors, choice.cluster), dim3(grid), dim3(kThreads), choice.shared_bytes,
                        choice.cluster > 1 ? static_cast<unsigned>(choice.cluster) : 0u};
    const char* exchange = choice.cluster == 1 ? "" : push_sums ? " exchange=push" : " exchange=pull";
    *plan = make_backward_family_plan(
        info, params, {launch}, 0,
        fmt::format("cuda backward-spatial tile={} vectors={} cluster={} slice={} cached={} smem={} threads={} grid={}{}{}{}{}",
                    width, choice.vectors, choice.cluster, choice.slice_len, choice.cached ? 1 : 0, choice.shared_bytes,
                    kThreads, grid, async_copies ? " copies=async" : "", whole_lines ? " lines=128B" : "",
                    narrow_rows ? " rows=narrow" : "", exchange));
    return SMX_STATUS_SUCCESS;
}

}  // namespace smx::cuda
