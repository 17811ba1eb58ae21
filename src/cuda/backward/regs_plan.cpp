// regs_plan.cpp - backward-regs (a cluster of 1..16 CTAs per row) and backward-grid (a row's CTAs spread over
// the device behind a grid barrier): the configurations that hold rows in registers. performance.md#backward.
#include <algorithm>

#include "cuda/backward/plan.hpp"
#include "cuda/block_regs/plan.hpp"

namespace smx::cuda {
namespace {

// The forward's block-regs ranking, more values per thread ranking higher.
bool better_regs_choice(const BackwardRegsChoice& a, const BackwardRegsChoice& b, int min_ctas_per_sm) {
    return better_register_configuration(a, b, min_ctas_per_sm, [](int values) { return values; });
}

// The smallest CTA of an instance of `values` per thread that holds `slice_len` elements; 0 where the
// instance cannot (its launch bound, or the device's limit).
smxStatus_t regs_threads_for(const void* kernel, std::int64_t slice_len, int values, int min_threads, int max_threads,
                             int* threads) {
    *threads = 0;
    int instance_max_threads = 0;
    SMX_RETURN_IF_ERROR(max_threads_of(kernel, "backward-regs", &instance_max_threads));
    const std::int64_t wanted = std::max<std::int64_t>(round_up(ceil_div(slice_len, values), 32), min_threads);
    if (wanted <= std::min(instance_max_threads, max_threads)) *threads = static_cast<int>(wanted);
    return SMX_STATUS_SUCCESS;
}

// Instances of 8 and 16 values do not run in clusters where 16-bit dy and y have a 32-value one: as in the
// forward (regs_instance_clusters), they won on utilization alone and ran slower (performance.md#backward).
bool regs_instance_clusters(const SoftmaxBackwardInfo& info, int values) {
    return values >= 32 || dtype_size(info.dy_dtype) != 2 ||
           backward_regs_kernel(info.dy_dtype, info.dx_dtype, 32, BackwardRegsExchange::Pull) == nullptr;
}

// Clusters push their CTAs' sums unless SMX_CUDA_BACKWARD_EXCHANGE=pull; a single CTA exchanges nothing, and
// takes the pulling instance (the kernel it had before the push).
BackwardRegsExchange regs_exchange(const PlanContext& context, int cluster) {
    const bool pull = cluster == 1 || context.preferences.backward_exchange == BackwardExchangePreference::Pull;
    return pull ? BackwardRegsExchange::Pull : BackwardRegsExchange::Push;
}

int regs_min_threads(const PlanContext& context) {
    return context.preferences.regs_min_threads > 0 ? context.preferences.regs_min_threads
                                                    : context.tuning.backward.regs_min_threads;
}

}  // namespace

// The smallest cluster (1..16 CTAs) with a configuration of at least regs_min_ctas_per_sm CTAs per SM and
// regs_good_utilization of its register slots holding elements; the best configuration seen where none is.
smxStatus_t choose_backward_regs(const SoftmaxBackwardInfo& info, const PlanContext& context, BackwardRegsChoice* choice) {
    *choice = {};
    const BackwardTuning& tuning = context.tuning.backward;
    const DeviceLimits& limits = context.limits;
    const int cap = context.preferences.max_cluster;
    const int max_cluster = !has_clusters(limits)                          ? 1
                            : cap >= 1 && cap < kBackwardRegsMaxCluster ? cap
                                                                         : kBackwardRegsMaxCluster;
    const int pack = backward_pack(info);
    const int max_threads = std::min(kBackwardRegsMaxThreads, std::max(limits.max_threads_per_block, 32));
    const auto good = [&](const BackwardRegsChoice& c) {
        return c.fits && c.ctas_per_sm >= tuning.regs_min_ctas_per_sm && c.utilization >= tuning.regs_good_utilization;
    };
    BackwardRegsChoice fallback;
    for (int cluster = 1; cluster <= max_cluster && !choice->fits; ++cluster) {
        // Slices are whole packs, so every CTA's slice keeps the row's phase.
        const std::int64_t slice_len = round_up(ceil_div(info.row_len, cluster), pack);
        if (cluster > 1 && slice_len < tuning.regs_min_cluster_slice) break;
        if ((cluster - 1) * slice_len >= info.row_len) continue;  // the last CTA would have nothing
        BackwardRegsChoice best;
        for (int values : kBackwardRegsValueCounts) {
            if (cluster > 1 && !regs_instance_clusters(info, values)) continue;
            const BackwardRegsExchange exchange = regs_exchange(context, cluster);
            const void* kernel = backward_regs_kernel(info.dy_dtype, info.dx_dtype, values, exchange);
            if (kernel == nullptr) continue;
            int threads = 0;
            SMX_RETURN_IF_ERROR(regs_threads_for(kernel, slice_len, values, regs_min_threads(context), max_threads, &threads));
            if (threads == 0) continue;
            int ctas_per_sm = 0;
            SMX_RETURN_IF_ERROR(blocks_per_multiprocessor(kernel, threads, 0, &ctas_per_sm));
            if (ctas_per_sm == 0) continue;
            if (cluster > 1) {
                SMX_RETURN_IF_ERROR(allow_large_clusters(kernel, "backward-regs"));
                if (max_active_clusters(kernel, cluster, threads, 0) == 0) continue;
            }
            const double utilization =
                static_cast<double>(info.row_len) / (static_cast<double>(cluster) * threads * values);
            const BackwardRegsChoice candidate{true,        kernel,      cluster,    threads, values,
                                               slice_len,   ctas_per_sm, utilization, exchange};
            if (better_regs_choice(candidate, best, tuning.regs_min_ctas_per_sm)) best = candidate;
        }
        if (good(best)) *choice = best;
        if (better_regs_choice(best, fallback, tuning.regs_min_ctas_per_sm)) fallback = best;
    }
    if (!choice->fits) *choice = fallback;
    // One cluster per row: the rows past kRowsPerGridRow go to grid.y, within its limit.
    const std::int64_t rows_per_grid_row = std::min<std::int64_t>(info.rows, kRowsPerGridRow);
    choice->fits = choice->fits && ceil_div(info.rows, rows_per_grid_row) <= kMaxGridY;
    return SMX_STATUS_SUCCESS;
}

smxStatus_t plan_backward_regs(const SoftmaxBackwardInfo& info, const BackwardRegsChoice& choice, BackwardFamilyPlan* plan) {
    // grid.x = cluster x rows_per_grid_row, grid.y covers the rest of the rows.
    const std::int64_t rows_per_grid_row = std::min<std::int64_t>(info.rows, kRowsPerGridRow);
    const dim3 grid(static_cast<unsigned>(rows_per_grid_row * choice.cluster),
                    static_cast<unsigned>(ceil_div(info.rows, rows_per_grid_row)));
    BackwardRowsParams params = backward_rows_params(info);
    params.slice_len = choice.slice_len;
    const bool clustered = choice.cluster > 1;
    const Launch launch{choice.kernel, grid, dim3(static_cast<unsigned>(choice.threads)), 0,
                        clustered ? static_cast<unsigned>(choice.cluster) : 0u};
    const char* exchange = !clustered                                       ? ""
                           : choice.exchange == BackwardRegsExchange::Push ? " exchange=push"
                                                                           : " exchange=pull";
    *plan = make_backward_family_plan(
        info, params, {launch}, 0,
        fmt::format("cuda backward-regs values={} threads={} cluster={} slice={} ctas_per_sm={} grid={}x{}{}", choice.values,
                    choice.threads, choice.cluster, choice.slice_len, choice.ctas_per_sm, grid.x, grid.y, exchange));
    return SMX_STATUS_SUCCESS;
}

// Slices of about grid_slice_bytes of dy (doubled while a row would need more than grid_max_chunks_per_row
// CTAs, up to grid_max_slice_len elements), from the row length and dtype only, so a row's split never
// depends on the row count; the fewest values per thread that keep a CTA within grid_max_threads. Fits when
// rows x chunks CTAs can all be resident (a cooperative launch refuses more).
smxStatus_t choose_backward_grid(const SoftmaxBackwardInfo& info, const PlanContext& context, BackwardGridChoice* choice) {
    *choice = {};
    if (!context.limits.cooperative_launch) return SMX_STATUS_SUCCESS;
    const BackwardTuning& tuning = context.tuning.backward;
    std::int64_t slice_target = tuning.grid_slice_bytes / static_cast<std::int64_t>(dtype_size(info.dy_dtype));
    while (ceil_div(info.row_len, slice_target) > tuning.grid_max_chunks_per_row && 2 * slice_target <= tuning.grid_max_slice_len) {
        slice_target *= 2;
    }
    const std::int64_t wanted = ceil_div(info.row_len, slice_target);
    if (wanted < 2) return SMX_STATUS_SUCCESS;
    const std::int64_t slice_len = round_up(ceil_div(info.row_len, wanted), backward_pack(info));
    const std::int64_t chunks = ceil_div(info.row_len, slice_len);  // so that every CTA has elements
    for (int values : kBackwardRegsValueCounts) {
        // The grid form meets in the workspace: its CTAs exchange nothing through shared memory.
        const void* kernel = backward_regs_kernel(info.dy_dtype, info.dx_dtype, values, BackwardRegsExchange::Pull);
        if (kernel == nullptr) continue;
        int threads = 0;
        SMX_RETURN_IF_ERROR(regs_threads_for(kernel, slice_len, values, regs_min_threads(context), tuning.grid_max_threads, &threads));
        if (threads == 0) continue;
        int ctas_per_sm = 0;
        SMX_RETURN_IF_ERROR(blocks_per_multiprocessor(kernel, threads, 0, &ctas_per_sm));
        const std::int64_t resident = static_cast<std::int64_t>(ctas_per_sm) * context.limits.multiprocessor_count;
        *choice = {info.rows * chunks <= resident, kernel, threads, values, slice_len, chunks, ctas_per_sm};
        return SMX_STATUS_SUCCESS;
    }
    return SMX_STATUS_SUCCESS;
}

smxStatus_t plan_backward_grid(const SoftmaxBackwardInfo& info, const BackwardGridChoice& choice, BackwardFamilyPlan* plan) {
    const std::int64_t ctas = info.rows * choice.chunks;
    const std::size_t workspace = backward_workspace_bytes(info, ctas);
    BackwardRowsParams params = backward_rows_params(info);
    params.slice_len = choice.slice_len;
    params.chunks = choice.chunks;
    Launch launch{choice.kernel, dim3(static_cast<unsigned>(ctas)), dim3(static_cast<unsigned>(choice.threads)), 0, 0};
    launch.cooperative = true;
    *plan = make_backward_family_plan(
        info, params, {launch}, workspace,
        fmt::format("cuda backward-grid values={} threads={} chunks={} slice={} ctas_per_sm={} workspace={}", choice.values,
                    choice.threads, choice.chunks, choice.slice_len, choice.ctas_per_sm, workspace));
    return SMX_STATUS_SUCCESS;
}

}  // namespace smx::cuda
