// plan.cpp - the log-probability kernels' planners (plan.hpp): the stats kernel's row groups, clusters and
// splits, ce-regs' cluster and CTA, ce-write's chunks, the general kernel's groups and the per-row kernels.
// Every number comes from the tuning table (tuning.logprobs); performance.md#log-probabilities says why.
#include "cuda/logprobs/plan.hpp"

#include <algorithm>
#include <climits>

#include "core/dtype.hpp"
#include "cuda/block_regs/plan.hpp"
#include "ops/logprobs/info.hpp"

namespace smx::cuda {
namespace {

constexpr std::int64_t kChunkGranule = 64;                         // chunk lengths: whole 128-byte lines of 16-bit x
constexpr std::int64_t kRowsPerGridRowCap = std::int64_t{1} << 20;  // grid.x = chunks x rows of a grid row

std::int64_t statistics_size(smxDataType_t x_dtype) {
    return static_cast<std::int64_t>(dtype_size(statistics_dtype(x_dtype)));
}

// Rows of one grid row for `per_row` CTAs a row: grid.x = per_row x that, grid.y the rest (within its limit).
std::int64_t rows_per_grid_row(std::int64_t rows, std::int64_t per_row) {
    return std::max<std::int64_t>(1, std::min(rows, kRowsPerGridRowCap / std::max<std::int64_t>(per_row, 1)));
}

dim3 row_chunk_grid(std::int64_t rows, std::int64_t per_row, std::int64_t* rows_per_grid_row_out) {
    const std::int64_t per_grid_row = rows_per_grid_row(rows, per_row);
    if (rows_per_grid_row_out != nullptr) *rows_per_grid_row_out = per_grid_row;
    return dim3(static_cast<unsigned>(per_row * per_grid_row), static_cast<unsigned>(ceil_div(rows, per_grid_row)));
}

smxStatus_t check_grid(const dim3& grid, const char* family) {
    if (grid.y <= static_cast<unsigned>(kMaxGridY)) return SMX_STATUS_SUCCESS;
    return fail(SMX_STATUS_NOT_SUPPORTED, "{} needs a grid of {} x {} CTAs, past the device's y limit", family, grid.x,
                grid.y);
}

// The largest cluster a plan may take: the family's limit, or the preferences' cap; 1 without clusters.
int cluster_cap(const PlanContext& context) {
    if (!has_clusters(context.limits)) return 1;
    const int cap = context.preferences.max_cluster;
    return cap >= 1 && cap < kCeRegsMaxCluster ? cap : kCeRegsMaxCluster;
}

}  // namespace

const void* ce_regs_kernel(smxDataType_t x_dtype, smxDataType_t dlogits_dtype, int values_per_thread) {
    switch (x_dtype) {
        case SMX_DTYPE_F16: return ce_regs_kernel_f16(dlogits_dtype, values_per_thread);
        case SMX_DTYPE_BF16: return ce_regs_kernel_bf16(dlogits_dtype, values_per_thread);
        case SMX_DTYPE_F32: return ce_regs_kernel_f32(dlogits_dtype, values_per_thread);
        case SMX_DTYPE_F64: return ce_regs_kernel_f64(dlogits_dtype, values_per_thread);
        case SMX_DTYPE_I32:
        case SMX_DTYPE_I64:
        case SMX_DTYPE_BOOL: break;  // refused by the info
    }
    return nullptr;
}

// ---- stats ---------------------------------------------------------------------------------------------------

smxStatus_t choose_stats(const RowsProblem& problem, bool with_mean, bool cross_entropy, const PlanContext& context,
                         StatsChoice* choice) {
    const LogprobsTuning& tuning = context.tuning.logprobs;
    *choice = {};
    choice->kernel = logprobs_stats_kernel(problem.x_dtype, with_mean, cross_entropy);
    SMX_RETURN_IF_ERROR(require_kernel(choice->kernel, problem.x_dtype, problem.x_dtype, "logprobs stats"));
    choice->slice_len = problem.row_len;
    if (problem.row_len <= tuning.warp_max_len) {
        choice->group_threads = problem.row_len <= tuning.eight_lane_max_len ? 8 : 32;
        choice->threads = 256;
        return blocks_per_multiprocessor(choice->kernel, choice->threads, 0, &choice->ctas_per_sm);
    }
    choice->threads = problem.row_len >= tuning.wide_cta_min_len ? kStatsMaxThreads : 256;
    choice->group_threads = choice->threads;
    SMX_RETURN_IF_ERROR(blocks_per_multiprocessor(choice->kernel, choice->threads, 0, &choice->ctas_per_sm));
    const std::int64_t resident = static_cast<std::int64_t>(std::max(choice->ctas_per_sm, 1)) * context.limits.multiprocessor_count;
    const LongRowsPreference preference = context.preferences.long_rows;
    const bool forced = preference == LongRowsPreference::Cluster || preference == LongRowsPreference::Split;
    // Fewer rows than the device holds CTAs: each row over several CTAs, chunks of at least min_chunk, as many
    // as keep every row's CTAs resident at once (one wave: a second one would start only as the first ends).
    const std::int64_t most_chunks = problem.row_len / tuning.min_chunk;
    if ((problem.rows >= resident && !forced) || most_chunks < 2) return SMX_STATUS_SUCCESS;
    std::int64_t chunks = std::min(tuning.fill_waves * resident / problem.rows, most_chunks);
    if (forced) chunks = std::max<std::int64_t>(chunks, 2);
    if (chunks < 2) return SMX_STATUS_SUCCESS;
    // A cluster per row where one of at most cap CTAs makes enough CTAs: no workspace, no second kernel. The
    // largest such cluster whose rows all fit the device at once (clusters pack into GPCs, so fewer fit than
    // resident / C).
    const int cap = cluster_cap(context);
    const bool try_cluster = preference != LongRowsPreference::Split && cap >= 2 &&
                             (chunks <= cap || problem.rows * cap >= resident || preference == LongRowsPreference::Cluster);
    if (try_cluster) {
        SMX_RETURN_IF_ERROR(allow_large_clusters(choice->kernel, "logprobs stats"));
        for (std::int64_t wanted = std::min<std::int64_t>(chunks, cap); wanted >= 2; --wanted) {
            const std::int64_t slice_len = round_up(ceil_div(problem.row_len, wanted), kChunkGranule);
            const std::int64_t ranks = ceil_div(problem.row_len, slice_len);
            if (ranks < 2) break;
            const int fitting = max_active_clusters(choice->kernel, static_cast<int>(ranks), choice->threads, 0);
            const bool one_wave = fitting >= problem.rows || preference == LongRowsPreference::Cluster;
            if (fitting > 0 && one_wave) {
                choice->chunks = ranks;
                choice->slice_len = slice_len;
                return SMX_STATUS_SUCCESS;
            }
        }
    }
    choice->slice_len = round_up(ceil_div(problem.row_len, chunks), kChunkGranule);
    choice->chunks = ceil_div(problem.row_len, choice->slice_len);
    choice->split = choice->chunks > 1;
    return SMX_STATUS_SUCCESS;
}

smxStatus_t add_stats(const RowsProblem& problem, const StatsChoice& choice, LogprobsRowsParams params,
                      LogprobsCall* call) {
    params.group_threads = choice.group_threads;
    params.chunks = choice.chunks;
    params.slice_len = choice.slice_len;
    params.split = choice.split ? 1 : 0;
    if (choice.group_threads < choice.threads) {
        const std::int64_t rows_per_block = choice.threads / choice.group_threads;
        const unsigned grid = static_cast<unsigned>(std::clamp<std::int64_t>(ceil_div(problem.rows, rows_per_block), 1, INT_MAX));
        call->add(params, Launch{choice.kernel, dim3(grid), dim3(static_cast<unsigned>(choice.threads)), 0, 0},
                  fmt::format("stats group={} threads={} grid={}", choice.group_threads, choice.threads, grid));
        return SMX_STATUS_SUCCESS;
    }
    const dim3 grid = row_chunk_grid(problem.rows, choice.chunks, nullptr);
    SMX_RETURN_IF_ERROR(check_grid(grid, "logprobs stats"));
    const bool cluster = choice.chunks > 1 && !choice.split;
    const Launch launch{choice.kernel, grid, dim3(static_cast<unsigned>(choice.threads)), 0,
                        cluster ? static_cast<unsigned>(choice.chunks) : 0u};
    if (!cluster && !choice.split) {
        call->add(params, launch, fmt::format("stats group=cta threads={} grid={}x{} ctas_per_sm={}", choice.threads,
                                              grid.x, grid.y, choice.ctas_per_sm));
        return SMX_STATUS_SUCCESS;
    }
    if (cluster) {
        call->add(params, launch, fmt::format("stats group=cluster cluster={} slice={} threads={} grid={}x{}", choice.chunks,
                                              choice.slice_len, choice.threads, grid.x, grid.y));
        return SMX_STATUS_SUCCESS;
    }
    call->need_workspace(partials_end(problem.rows, choice.chunks, statistics_size(problem.x_dtype)));
    call->add(params, launch, fmt::format("stats group=split chunks={} slice={} threads={} grid={}x{}", choice.chunks,
                                          choice.slice_len, choice.threads, grid.x, grid.y));
    const void* combine = logprobs_combine_kernel(problem.x_dtype);
    SMX_RETURN_IF_ERROR(require_kernel(combine, problem.x_dtype, problem.x_dtype, "logprobs combine"));
    const std::int64_t rows_per_block = kCombineThreads / 32;
    const unsigned combine_grid = static_cast<unsigned>(std::clamp<std::int64_t>(ceil_div(problem.rows, rows_per_block), 1, INT_MAX));
    call->add(params, Launch{combine, dim3(combine_grid), dim3(kCombineThreads), 0, 0},
              fmt::format("combine grid={}", combine_grid));
    return SMX_STATUS_SUCCESS;
}

// ---- ce-regs ------------------------------------------------------------------------------------------------

namespace {

// The forward's block-regs ranking (better_register_configuration), more values per thread ranking higher.
bool better_regs(const CeRegsChoice& a, const CeRegsChoice& b, int min_ctas_per_sm) {
    return better_register_configuration(a, b, min_ctas_per_sm, [](int values) { return values; });
}

}  // namespace

namespace {

// The smallest cluster whose best configuration has >= min_ctas_per_sm CTAs per SM with >= good_utilization of
// its register slots holding logits (*found; fits false where none), and the best configuration seen on the way
// (*best_seen).
smxStatus_t search_ce_regs(const RowsProblem& problem, const PlanContext& context, int min_ctas_per_sm,
                           double good_utilization, CeRegsChoice* found, CeRegsChoice* best_seen) {
    const LogprobsTuning& tuning = context.tuning.logprobs;
    *found = {};
    *best_seen = {};
    const int max_cluster = cluster_cap(context);
    const int max_threads = std::min(kCeRegsMaxThreads, std::max(context.limits.max_threads_per_block, tuning.regs_min_threads));
    // Whole 16-byte packs of the wider of logits and dlogits: every CTA's slice keeps the row's phase.
    const std::int64_t pack = 16 / static_cast<std::int64_t>(std::max(dtype_size(problem.x_dtype), dtype_size(problem.dlogits_dtype)));
    for (int cluster = 1; cluster <= max_cluster; ++cluster) {
        const std::int64_t slice_len = round_up(ceil_div(problem.row_len, cluster), pack);
        if (cluster > 1 && slice_len < tuning.regs_min_cluster_slice) break;
        if ((cluster - 1) * slice_len >= problem.row_len) continue;  // the last CTA would have nothing
        CeRegsChoice best;
        for (int values : kCeRegsValueCounts) {
            const void* kernel = ce_regs_kernel(problem.x_dtype, problem.dlogits_dtype, values);
            if (kernel == nullptr) continue;
            int instance_max_threads = 0;
            SMX_RETURN_IF_ERROR(max_threads_of(kernel, "ce-regs", &instance_max_threads));
            const std::int64_t threads = std::max<std::int64_t>(round_up(ceil_div(slice_len, values), 32), tuning.regs_min_threads);
            if (threads > max_threads || threads > instance_max_threads) continue;
            int ctas_per_sm = 0;
            SMX_RETURN_IF_ERROR(blocks_per_multiprocessor(kernel, static_cast<int>(threads), 0, &ctas_per_sm));
            if (ctas_per_sm == 0) continue;
            if (cluster > 1) {
                SMX_RETURN_IF_ERROR(allow_large_clusters(kernel, "ce-regs"));
                if (max_active_clusters(kernel, cluster, static_cast<int>(threads), 0) == 0) continue;
            }
            const CeRegsChoice candidate{true, kernel, cluster, static_cast<int>(threads), values, slice_len, ctas_per_sm,
                                         static_cast<double>(problem.row_len) / static_cast<double>(cluster * threads * values)};
            if (better_regs(candidate, best, min_ctas_per_sm)) best = candidate;
        }
        if (best.fits && best.ctas_per_sm >= min_ctas_per_sm && best.utilization >= good_utilization) {
            *found = best;
            return SMX_STATUS_SUCCESS;
        }
        if (better_regs(best, *best_seen, min_ctas_per_sm)) *best_seen = best;
    }
    return SMX_STATUS_SUCCESS;
}

}  // namespace

smxStatus_t choose_ce_regs(const RowsProblem& problem, const PlanContext& context, CeRegsChoice* choice) {
    const LogprobsTuning& tuning = context.tuning.logprobs;
    *choice = {};
    if (problem.row_len < 1) return SMX_STATUS_SUCCESS;
    CeRegsChoice best_seen;
    SMX_RETURN_IF_ERROR(search_ce_regs(problem, context, tuning.regs_min_ctas_per_sm, tuning.regs_good_utilization, choice,
                                       &best_seen));
    if (!choice->fits) {
        *choice = best_seen;
        return SMX_STATUS_SUCCESS;
    }
    // More, smaller CTAs per SM where the forward's block-regs measured them faster (performance.md#block-regs):
    // 16-bit logits and dlogits at 4+ per SM with fuller slots; f32 logits at 8, else 4 per SM. Taken where found.
    struct Denser {
        int min_ctas_per_sm;
        double good_utilization;
    };
    const bool packed_pair = dtype_size(problem.x_dtype) == 2 && dtype_size(problem.dlogits_dtype) == 2;
    const bool f32_logits = problem.x_dtype == SMX_DTYPE_F32;
    const Denser packed[] = {{tuning.regs_packed_min_ctas_per_sm, tuning.regs_packed_good_utilization}};
    const Denser f32[] = {{tuning.regs_f32_min_ctas_per_sm, tuning.regs_good_utilization},
                          {tuning.regs_f32_fallback_min_ctas_per_sm, tuning.regs_good_utilization}};
    const Denser* searches = packed_pair ? packed : f32_logits ? f32 : nullptr;
    const int search_count = packed_pair ? 1 : f32_logits ? 2 : 0;
    for (int i = 0; i < search_count && choice->ctas_per_sm < searches[i].min_ctas_per_sm; ++i) {
        CeRegsChoice denser;
        SMX_RETURN_IF_ERROR(search_ce_regs(problem, context, searches[i].min_ctas_per_sm, searches[i].good_utilization,
                                           &denser, &best_seen));
        if (denser.fits) {
            *choice = denser;
            break;
        }
    }
    return SMX_STATUS_SUCCESS;
}

void add_ce_regs(const RowsProblem& problem, const CeRegsChoice& choice, LogprobsRowsParams params, LogprobsCall* call) {
    params.chunks = choice.cluster;
    params.slice_len = choice.slice_len;
    const dim3 grid = row_chunk_grid(problem.rows, choice.cluster, &params.rows_per_grid_row);
    const Launch launch{choice.kernel, grid, dim3(static_cast<unsigned>(choice.threads)), 0,
                        choice.cluster > 1 ? static_cast<unsigned>(choice.cluster) : 0u};
    call->add(params, launch,
              fmt::format("ce-regs values={} threads={} cluster={} slice={} ctas_per_sm={} grid={}x{}", choice.values,
                          choice.threads, choice.cluster, choice.slice_len, choice.ctas_per_sm, grid.x, grid.y));
}

// ---- ce-write -----------------------------------------------------------------------------------------------

smxStatus_t add_ce_write(const RowsProblem& problem, LogprobsRowsParams params, const PlanContext& context,
                         LogprobsCall* call) {
    const void* kernel = ce_write_kernel(problem.x_dtype, problem.dlogits_dtype);
    SMX_RETURN_IF_ERROR(require_kernel(kernel, problem.x_dtype, problem.dlogits_dtype, "ce-write"));
    params.slice_len = std::min(round_up(problem.row_len, kChunkGranule), round_up(context.tuning.logprobs.write_chunk, kChunkGranule));
    params.chunks = ceil_div(problem.row_len, params.slice_len);
    const dim3 grid = row_chunk_grid(problem.rows, params.chunks, nullptr);
    SMX_RETURN_IF_ERROR(check_grid(grid, "ce-write"));
    call->need_workspace(partials_offset(problem.rows, statistics_size(problem.x_dtype)));  // through row_lse
    call->add(params, Launch{kernel, grid, dim3(kWriteThreads), 0, 0},
              fmt::format("ce-write chunks={} slice={} threads={} grid={}x{}", params.chunks, params.slice_len,
                          kWriteThreads, grid.x, grid.y));
    return SMX_STATUS_SUCCESS;
}

// ---- general and per-row ----------------------------------------------------------------------------------------

smxStatus_t add_general(LogprobsGeneralParams params, smxDataType_t x_dtype, smxDataType_t dlogits_dtype,
                        const PlanContext& context, LogprobsCall* call) {
    const void* kernel = logprobs_general_kernel(x_dtype, dlogits_dtype);
    SMX_RETURN_IF_ERROR(require_kernel(kernel, x_dtype, dlogits_dtype, "logprobs general"));
    params.threads_per_row = params.row_len >= context.tuning.logprobs.general_block_row_len ? kGeneralThreads : 32;
    int blocks = 0;
    SMX_RETURN_IF_ERROR(blocks_per_multiprocessor(kernel, kGeneralThreads, 0, &blocks));
    const unsigned grid = persistent_grid(ceil_div(params.rows, kGeneralThreads / params.threads_per_row), blocks,
                                          context.limits.multiprocessor_count);
    call->add(params, Launch{kernel, dim3(grid), dim3(kGeneralThreads), 0, 0},
              fmt::format("general threads_per_row={} threads={} grid={}", params.threads_per_row, kGeneralThreads, grid));
    return SMX_STATUS_SUCCESS;
}

void add_ce_count(const LogprobsPerRowParams& params, LogprobsCall* call) {
    call->need_workspace(kRowLossesOffset);
    call->add(params, Launch{ce_count_kernel(), dim3(1), dim3(kPerRowThreads), 0, 0}, "count");
}

void add_ce_finish(const LogprobsPerRowParams& params, smxDataType_t statistics_dtype, LogprobsCall* call) {
    call->need_workspace(row_lse_offset(params.rows, static_cast<std::int64_t>(dtype_size(statistics_dtype))));
    const char* what = params.reduction == SMX_REDUCTION_SUM ? "finish sum" : params.reduction == SMX_REDUCTION_MEAN ? "finish mean" : "finish scatter";
    call->add(params, Launch{ce_finish_kernel(statistics_dtype), dim3(1), dim3(kPerRowThreads), 0, 0}, what);
}

}  // namespace smx::cuda
