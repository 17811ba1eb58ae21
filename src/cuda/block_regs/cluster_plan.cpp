// cluster_plan.cpp - block-regs: the cluster of CTAs (1..16) that holds a row in registers, its CTA size and
// values per thread. The rules and their measurements: performance.md#block-regs.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "cuda/block_regs/params.hpp"
#include "cuda/block_regs/plan.hpp"

namespace smx::cuda {
namespace {

// The packed instance: 16-bit x held two to a register, 64 values a thread.
constexpr int kPackedValues = 64;

// What a search accepts: at least min_ctas_per_sm CTAs per SM and at least good_utilization of the register
// slots holding elements; only_values (0: any) limits it to one instance, max_cluster (0: the device's and
// the preferences' limit) to clusters of at most that many CTAs. staged_f32_mask: the search tries f32 x's
// additive instance with its mask staged (block_regs_staged_mask_kernel) in place of block_regs_kernel_for's.
struct RegsSearch {
    int min_ctas_per_sm;
    double good_utilization;
    int only_values = 0;
    int max_cluster = 0;
    bool staged_f32_mask = false;
};

// The kernel a search tries at `values` per thread (nullptr: none).
const void* regs_search_kernel(const SoftmaxInfo& info, const PlanContext& context, const RegsSearch& search,
                               int values) {
    if (!search.staged_f32_mask) return block_regs_kernel_for(info, context, values);
    if (values != kBlockRegsStagedF32Values) return nullptr;
    return block_regs_staged_mask_kernel(info.x_dtype, info.y_dtype, info.is_log());
}

// better_register_configuration with more values per thread ranking higher, but the packed instance first
// only for 16-bit outputs (packed_first) and last otherwise.
bool better_regs_choice(const RegsChoice& a, const RegsChoice& b, bool packed_first, int min_ctas_per_sm) {
    const auto rank = [packed_first](int values) { return values == kPackedValues ? (packed_first ? 128 : 0) : values; };
    return better_register_configuration(a, b, min_ctas_per_sm, rank);
}

// The smallest CTA for an instance of `values` per thread: widened instances (8-32) may run two warps, the
// packed one keeps more (performance.md#block-regs, CTA size).
int regs_min_threads(int values, const PlanContext& context) {
    if (context.preferences.regs_min_threads > 0) return context.preferences.regs_min_threads;
    return values <= 32 ? context.tuning.block_regs.min_threads_widened : context.tuning.block_regs.min_threads;
}

bool is_good_regs_choice(const RegsChoice& choice, const RegsSearch& search) {
    return choice.fits && choice.ctas_per_sm >= search.min_ctas_per_sm && choice.utilization >= search.good_utilization;
}

// 16-bit x written as 16-bit: the pairs whose packed instance ranks first and the packed searches are for.
bool packed_pair(const SoftmaxInfo& info) { return dtype_size(info.x_dtype) == 2 && dtype_size(info.y_dtype) == 2; }

// Instances of 8 and 16 values do not run in clusters where the pair has a 32-value instance: they won on
// utilization alone and ran far slower (performance.md#block-regs).
bool regs_instance_clusters(const SoftmaxInfo& info, const PlanContext& context, int values) {
    return values >= 32 || block_regs_kernel_for(info, context, 32) == nullptr;
}

// The largest cluster a plan may take: the family's limit, or the preferences' cap.
int max_regs_cluster(const PlanContext& context) {
    const int cap = context.preferences.max_cluster;
    return cap >= 1 && cap < kBlockRegsMaxCluster ? cap : kBlockRegsMaxCluster;
}

// The smallest cluster (1..16 CTAs, any integer) with a configuration the search accepts; the best
// configuration seen when none does. Clusters are checked for placement (16 needs the non-portable opt-in).
smxStatus_t search_regs_config(const SoftmaxInfo& info, const PlanContext& context, const RegsSearch& search,
                               RegsChoice* choice) {
    *choice = {};
    const DeviceLimits& limits = context.limits;
    const int device_max_cluster = max_regs_cluster(context);
    const int max_cluster = !has_clusters(limits)      ? 1
                            : search.max_cluster > 0 ? std::min(search.max_cluster, device_max_cluster)
                                                     : device_max_cluster;
    const int max_threads =
        std::min(kBlockRegsMaxThreads, std::max(limits.max_threads_per_block, context.tuning.block_regs.min_threads));
    const std::int64_t pack = 16 / static_cast<std::int64_t>(dtype_size(info.x_dtype));
    const bool packed_first = packed_pair(info);
    RegsChoice fallback;
    for (int cluster = 1; cluster <= max_cluster; ++cluster) {
        // Slices are whole packs, so every CTA's slice keeps the row's 16-byte phase.
        const std::int64_t slice_len = round_up(ceil_div(info.row_len, cluster), pack);
        if (cluster > 1 && slice_len < context.tuning.block_regs.min_cluster_slice) break;
        if ((cluster - 1) * slice_len >= info.row_len) continue;  // the last CTA would have nothing
        RegsChoice best;
        for (int values : kBlockRegsValueCounts) {
            if (search.only_values != 0 && values != search.only_values) continue;
            if (cluster > 1 && !regs_instance_clusters(info, context, values)) continue;
            const void* kernel = regs_search_kernel(info, context, search, values);
            if (kernel == nullptr) continue;
            int instance_max_threads = 0;
            SMX_RETURN_IF_ERROR(max_threads_of(kernel, "block-regs", &instance_max_threads));
            const std::int64_t threads =
                std::max<std::int64_t>(round_up(ceil_div(slice_len, values), 32), regs_min_threads(values, context));
            if (threads > max_threads || threads > instance_max_threads) continue;
            const std::size_t shared_bytes = regs_shared_bytes(info, context, values, static_cast<int>(threads));
            // The staged packed instance lost to the 32-value one wherever it held a row in one CTA
            // (performance.md#block-regs, staged masks).
            if (cluster == 1 && shared_bytes > 0) continue;
            int ctas_per_sm = 0;
            SMX_RETURN_IF_ERROR(regs_ctas_per_sm(context, kernel, static_cast<int>(threads), shared_bytes, &ctas_per_sm));
            if (ctas_per_sm == 0) continue;
            if (cluster > 1) {
                SMX_RETURN_IF_ERROR(allow_large_clusters(kernel, "block-regs"));
                if (max_active_clusters(kernel, cluster, static_cast<int>(threads), shared_bytes) == 0) continue;
            }
            const RegsChoice candidate{true,
                                       kernel,
                                       cluster,
                                       static_cast<int>(threads),
                                       values,
                                       slice_len,
                                       ctas_per_sm,
                                       static_cast<double>(info.row_len) / static_cast<double>(cluster * threads * values),
                                       shared_bytes};
            if (better_regs_choice(candidate, best, packed_first, search.min_ctas_per_sm)) best = candidate;
        }
        if (is_good_regs_choice(best, search)) {
            *choice = best;
            return SMX_STATUS_SUCCESS;
        }
        if (better_regs_choice(best, fallback, packed_first, search.min_ctas_per_sm)) fallback = best;
    }
    *choice = fallback;
    return SMX_STATUS_SUCCESS;
}

// Runs `search` and replaces *choice with what it finds only where the search accepts it.
smxStatus_t take_if_found(const SoftmaxInfo& info, const PlanContext& context, const RegsSearch& search,
                          RegsChoice* choice) {
    RegsChoice found;
    SMX_RETURN_IF_ERROR(search_regs_config(info, context, search, &found));
    if (is_good_regs_choice(found, search)) *choice = found;
    return SMX_STATUS_SUCCESS;
}

// The packed hold's folded and row-folded softmax take their loads-first instance where every cluster of the launch
// is resident with it at once (a one-wave plan, whose CTAs wait on every instruction before their first load; the
// instance reads past a causal window, which a launch of several waves would pay for). It then stands in the choice
// with its own CTAs per SM; elsewhere the shared instance stays.
smxStatus_t take_packed_loads_first_instance(const SoftmaxInfo& info, const PlanContext& context, RegsChoice* choice) {
    if (!choice->fits || choice->values != kPackedValues) return SMX_STATUS_SUCCESS;
    const bool row_folded =
        choice->kernel == block_regs_softmax_row_folded_kernel(info.x_dtype, info.y_dtype, choice->values);
    const bool folded = choice->kernel == block_regs_softmax_folded_kernel(info.x_dtype, info.y_dtype, choice->values);
    if (!row_folded && !folded) return SMX_STATUS_SUCCESS;
    const void* kernel = block_regs_packed_loads_first_kernel(info.x_dtype, info.y_dtype, choice->values, row_folded);
    if (kernel == nullptr) return SMX_STATUS_SUCCESS;
    int ctas_per_sm = 0;
    SMX_RETURN_IF_ERROR(regs_ctas_per_sm(context, kernel, choice->threads, choice->shared_bytes, &ctas_per_sm));
    std::int64_t resident_clusters = static_cast<std::int64_t>(ctas_per_sm) * context.limits.multiprocessor_count;
    if (choice->cluster > 1) {
        SMX_RETURN_IF_ERROR(allow_large_clusters(kernel, "block-regs"));
        resident_clusters = max_active_clusters(kernel, choice->cluster, choice->threads, choice->shared_bytes);
    }
    if (info.rows > resident_clusters) return SMX_STATUS_SUCCESS;
    choice->kernel = kernel;
    choice->ctas_per_sm = ctas_per_sm;
    return SMX_STATUS_SUCCESS;
}

}  // namespace

smxStatus_t choose_regs_config(const SoftmaxInfo& info, const PlanContext& context, RegsChoice* choice) {
    const BlockRegsTuning& tuning = context.tuning.block_regs;
    SMX_RETURN_IF_ERROR(search_regs_config(info, context, RegsSearch{tuning.min_ctas_per_sm, tuning.good_utilization}, choice));
    // f32 x given CTAs that fit fewer than f32_min_ctas_per_sm per SM: clusters of smaller CTAs where one
    // holds the row, else, below f32_fallback_min_ctas_per_sm, the search at that many.
    if (info.x_dtype == SMX_DTYPE_F32 && choice->fits && choice->ctas_per_sm < tuning.f32_min_ctas_per_sm) {
        SMX_RETURN_IF_ERROR(
            take_if_found(info, context, RegsSearch{tuning.f32_min_ctas_per_sm, tuning.good_utilization}, choice));
        if (choice->ctas_per_sm < tuning.f32_fallback_min_ctas_per_sm) {
            SMX_RETURN_IF_ERROR(take_if_found(
                info, context, RegsSearch{tuning.f32_fallback_min_ctas_per_sm, tuning.good_utilization}, choice));
        }
        // An additive mask still below that: its 32-value instance, the mask staged in shared memory, at as many
        // CTAs per SM (plain's configuration where that holds the row; performance.md, "options: f32 additive
        // masks staged").
        if (choice->ctas_per_sm < tuning.f32_fallback_min_ctas_per_sm &&
            regs_option_set_for(info, context) == RowsOptionSet::AdditiveOfX) {
            const RegsSearch staged{tuning.f32_fallback_min_ctas_per_sm, tuning.good_utilization,
                                    kBlockRegsStagedF32Values, 0, true};
            SMX_RETURN_IF_ERROR(take_if_found(info, context, staged, choice));
        }
    } else {
        // 16-bit -> 16-bit given packed CTAs that fit only min_ctas_per_sm: the packed search; given one packed
        // CTA a row that fits fewer than packed_pair_min_ctas_per_sm, a pair of CTAs that fit that many.
        const bool packed = packed_pair(info) && choice->fits && choice->values == kPackedValues;
        if (packed && choice->ctas_per_sm <= tuning.min_ctas_per_sm) {
            const RegsSearch search{tuning.packed_min_ctas_per_sm, tuning.packed_good_utilization, kPackedValues};
            SMX_RETURN_IF_ERROR(take_if_found(info, context, search, choice));
        }
        if (packed && choice->cluster == 1 && choice->ctas_per_sm < tuning.packed_pair_min_ctas_per_sm) {
            const RegsSearch pair{tuning.packed_pair_min_ctas_per_sm, tuning.packed_good_utilization, kPackedValues, 2};
            SMX_RETURN_IF_ERROR(take_if_found(info, context, pair, choice));
        }
    }
    // One cluster per row: the rows past kRowsPerGridRow go to grid.y, within its limit.
    const std::int64_t rows_per_grid_row = std::min<std::int64_t>(info.rows, kRowsPerGridRow);
    choice->fits = choice->fits && ceil_div(info.rows, rows_per_grid_row) <= kMaxGridY;
    return take_packed_loads_first_instance(info, context, choice);
}

bool regs_outruns_grid(const SoftmaxInfo& info, const PlanContext& context, const RegsChoice& choice) {
    const BlockRegsTuning& tuning = context.tuning.block_regs;
    const bool push_cluster = info.x_dtype == SMX_DTYPE_F32 && choice.values >= 32 && choice.ctas_per_sm >= tuning.min_ctas_per_sm;
    const bool packed_cluster =
        packed_pair(info) && choice.values == kPackedValues && choice.ctas_per_sm >= tuning.packed_min_ctas_per_sm;
    return choice.fits && (push_cluster || packed_cluster) &&
           info.rows * info.row_len >= tuning.cluster_over_grid_min_elements;
}

// Whether the unmasked set's packed options instance computes these options as the reference does: it holds
// -inf in x's dtype past the causal window and multiplies by the scale at each use, so a causal window needs a
// scale that keeps -inf: none or a scalar positive in float, the compute type (a per-row scale of 0 or below,
// or a scalar that rounds to 0 in float such as 1e-50, would turn it into NaN or +inf). Huge scales gave NaN
// rows on the H200 (a per-row scale of 1e30, run E3) where the 32-value instance, which rounds z = scale * x
// before the exponent, matches the reference: so per-row scales, whose values the plan cannot see, and scalars
// past kPackedOptionsMaxScale take the 32-value instance (softmax's per-row scales fold on the packed hold in an
// instance of their own: block_regs_kernel_for).
namespace {
constexpr double kPackedOptionsMaxScale = 65536.0;

bool block_regs_packed_options_apply(const SoftmaxOptions& options) {
    if (options.scale_kind == ScaleKind::PerRow) return false;
    if (options.scale_kind == ScaleKind::Scalar && !(std::fabs(options.scale) <= kPackedOptionsMaxScale)) return false;
    if (!options.causal) return true;
    return options.scale_kind == ScaleKind::None ||
           (options.scale_kind == ScaleKind::Scalar && static_cast<float>(options.scale) > 0.0f);
}
}  // namespace

RowsOptionSet regs_option_set_for(const SoftmaxInfo& info, const PlanContext& context) {
    const RowsOptionSet set = rows_option_set_for(info, context);
    if (info.x_dtype != SMX_DTYPE_F32) return set;
    if (set == RowsOptionSet::Keep) return RowsOptionSet::Any;
    // f32 x and an additive mask outgrow 64 registers at 32 values, so the additive set stops at 16.
    const std::int64_t additive_set_max_row = std::int64_t{16} * kBlockRegsMaxThreads * max_regs_cluster(context);
    return set == RowsOptionSet::AdditiveOfX && info.row_len > additive_set_max_row ? RowsOptionSet::Any : set;
}

const void* block_regs_kernel_for(const SoftmaxInfo& info, const PlanContext& context, int values) {
    if (info.options.any()) {
        // Softmax's per-row scales in the unmasked set: each row folds its own (row_scale_fold) where the pair and
        // count have that instance (32 values, 16-bit x at the packed 64 where the override allows packed options).
        const bool per_row = info.options.scale_kind == ScaleKind::PerRow;
        if (per_row && !info.is_log() && regs_option_set_for(info, context) == RowsOptionSet::Unmasked &&
            (values != kPackedValues || context.preferences.packed_options)) {
            const void* row_folded = block_regs_softmax_row_folded_kernel(info.x_dtype, info.y_dtype, values);
            if (row_folded != nullptr) return row_folded;
        }
        const bool packed_allowed = context.preferences.packed_options && block_regs_packed_options_apply(info.options);
        if (values == kPackedValues && !packed_allowed) return nullptr;
        const RowsOptionSet set = regs_option_set_for(info, context);
        if (set == RowsOptionSet::Unmasked && !info.is_log() && rows_scale_folds(info.options)) {
            const void* folded = block_regs_softmax_folded_kernel(info.x_dtype, info.y_dtype, values);
            if (folded != nullptr) return folded;
        }
        return block_regs_softmax_options_kernel(info.x_dtype, info.y_dtype, values, set);
    }
    return block_regs_softmax_kernel(info.x_dtype, info.y_dtype, values);
}

std::size_t regs_shared_bytes(const SoftmaxInfo& info, const PlanContext& context, int values, int threads) {
    if (!info.options.any()) return 0;
    const std::size_t x_size = dtype_size(info.x_dtype);
    const bool staged = block_regs_stages_mask(values, regs_option_set_for(info, context), x_size, dtype_size(info.y_dtype));
    return staged ? block_regs_mask_stage_bytes(threads, values, x_size) : 0;
}

smxStatus_t regs_ctas_per_sm(const PlanContext& context, const void* kernel, int threads, std::size_t shared_bytes,
                             int* ctas_per_sm) {
    *ctas_per_sm = 0;
    if (shared_bytes > 0) {
        std::size_t dynamic_limit = 0;
        SMX_RETURN_IF_ERROR(allow_all_dynamic_shared_memory(context.limits, kernel, "block-regs", &dynamic_limit));
        if (shared_bytes > dynamic_limit) return SMX_STATUS_SUCCESS;
    }
    return blocks_per_multiprocessor(kernel, threads, shared_bytes, ctas_per_sm);
}

std::string staged_mask_note(std::size_t shared_bytes) {
    return shared_bytes > 0 ? fmt::format(" staged_mask={}", shared_bytes) : std::string();
}

const char* regs_instance_note(const SoftmaxInfo& info, const void* kernel, int values) {
    if (kernel == block_regs_softmax_folded_kernel(info.x_dtype, info.y_dtype, values)) return " folded";
    if (kernel == block_regs_packed_loads_first_kernel(info.x_dtype, info.y_dtype, values, false)) {
        return " folded loads-first";
    }
    if (kernel == block_regs_packed_loads_first_kernel(info.x_dtype, info.y_dtype, values, true) ||
        kernel == grid_regs_row_folded_loads_first_kernel(info.x_dtype, info.y_dtype, values)) {
        return " row-folded loads-first";
    }
    if (kernel == grid_regs_loads_first_options_kernel(info.x_dtype, info.y_dtype, values)) return " loads-first";
    return kernel == block_regs_softmax_row_folded_kernel(info.x_dtype, info.y_dtype, values) ? " row-folded" : "";
}

BlockRegsParams block_regs_params(const SoftmaxInfo& info, std::int64_t slice_len) {
    BlockRegsParams params = rows_params<BlockRegsParams>(info);
    params.slice_len = slice_len;
    return params;
}

smxStatus_t plan_block_regs(const SoftmaxInfo& info, const RegsChoice& choice, FamilyPlan* plan) {
    // grid.x = cluster x rows_per_grid_row, grid.y covers the rest of the rows.
    const std::int64_t rows_per_grid_row = std::min<std::int64_t>(info.rows, kRowsPerGridRow);
    const dim3 grid(static_cast<unsigned>(rows_per_grid_row * choice.cluster),
                    static_cast<unsigned>(ceil_div(info.rows, rows_per_grid_row)));
    const BlockRegsParams params = block_regs_params(info, choice.slice_len);
    const Launch launch{choice.kernel, grid, dim3(static_cast<unsigned>(choice.threads)), choice.shared_bytes,
                        choice.cluster > 1 ? static_cast<unsigned>(choice.cluster) : 0u};
    *plan = make_family_plan(info, params, {launch}, 0,
                             fmt::format("cuda block-regs values={} threads={} cluster={} slice={} ctas_per_sm={} grid={}x{}{}{}",
                                         choice.values, choice.threads, choice.cluster, choice.slice_len,
                                         choice.ctas_per_sm, grid.x, grid.y,
                                         regs_instance_note(info, choice.kernel, choice.values),
                                         staged_mask_note(choice.shared_bytes)));
    return SMX_STATUS_SUCCESS;
}

}  // namespace smx::cuda
