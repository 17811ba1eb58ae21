// grid_plan.cpp - grid-regs: a row's CTAs spread over the device and combined through the workspace behind a
// grid barrier (one cooperative launch), and grid-regs-steps, the same for rows whose CTAs do not all fit at
// once, a group of rows per step. The rules and their measurements: performance.md#grid-regs.
#include <algorithm>
#include <cstdint>

#include "cuda/block_regs/params.hpp"
#include "cuda/block_regs/plan.hpp"

namespace smx::cuda {
namespace {

// Slice length (before rounding to even slices) for a row: from its length and dtype only, so a row's split
// never depends on the row count. About slice_bytes of x, doubled while a row would need more than
// max_chunks_per_row CTAs, up to max_slice_len elements and wide_slice_bytes.
std::int64_t grid_regs_slice_target(std::int64_t row_len, std::int64_t x_size, const GridRegsTuning& tuning) {
    std::int64_t slice = tuning.slice_bytes / x_size;
    while (ceil_div(row_len, slice) > tuning.max_chunks_per_row && 2 * slice <= tuning.max_slice_len &&
           2 * slice * x_size <= tuning.wide_slice_bytes) {
        slice *= 2;
    }
    return slice;
}

// Grid-regs' options rows of 16-bit x in the unmasked set, and 16-bit x's per-row folded softmax, take their
// loads-first instance where all their CTAs are resident with it (it may have fewer per SM than the shared instance:
// its registers), which then stands in the choice with its own CTAs per SM; elsewhere they keep the shared instance.
smxStatus_t take_loads_first_instance(const SoftmaxInfo& info, const PlanContext& context, GridRegsChoice* choice) {
    if (!choice->fits) return SMX_STATUS_SUCCESS;
    const void* kernel = nullptr;
    if (choice->kernel ==
        block_regs_softmax_options_kernel(info.x_dtype, info.y_dtype, choice->values, RowsOptionSet::Unmasked)) {
        kernel = grid_regs_loads_first_options_kernel(info.x_dtype, info.y_dtype, choice->values);
    } else if (choice->kernel == block_regs_softmax_row_folded_kernel(info.x_dtype, info.y_dtype, choice->values)) {
        kernel = grid_regs_row_folded_loads_first_kernel(info.x_dtype, info.y_dtype, choice->values);
    }
    if (kernel == nullptr) return SMX_STATUS_SUCCESS;
    int ctas_per_sm = 0;
    SMX_RETURN_IF_ERROR(regs_ctas_per_sm(context, kernel, choice->threads, choice->shared_bytes, &ctas_per_sm));
    const std::int64_t resident = static_cast<std::int64_t>(ctas_per_sm) * context.limits.multiprocessor_count;
    if (info.rows * choice->chunks > resident) return SMX_STATUS_SUCCESS;
    choice->kernel = kernel;
    choice->ctas_per_sm = ctas_per_sm;
    choice->resident = resident;
    return SMX_STATUS_SUCCESS;
}

// Slices of about slice_target elements (whole 16-byte packs, so each keeps the row's phase), the fewest values
// per thread that keep a CTA within the thread cap; fits when rows x chunks CTAs can all be resident (a
// cooperative launch refuses more).
smxStatus_t choose_grid_regs_for(const SoftmaxInfo& info, const PlanContext& context, std::int64_t slice_target,
                                 GridRegsChoice* choice) {
    *choice = {};
    if (!context.limits.cooperative_launch) return SMX_STATUS_SUCCESS;
    const std::int64_t x_size = static_cast<std::int64_t>(dtype_size(info.x_dtype));
    const std::int64_t wanted = ceil_div(info.row_len, slice_target);
    if (wanted < 2) return SMX_STATUS_SUCCESS;
    const std::int64_t slice_len = round_up(ceil_div(info.row_len, wanted), 16 / x_size);
    const std::int64_t chunks = ceil_div(info.row_len, slice_len);  // so that every CTA has elements
    for (int values : kBlockRegsValueCounts) {
        const void* kernel = block_regs_kernel_for(info, context, values);
        if (kernel == nullptr) continue;
        const std::int64_t threads =
            std::max<std::int64_t>(round_up(ceil_div(slice_len, values), 32), context.tuning.block_regs.min_threads);
        if (threads > context.tuning.grid_regs.max_threads) continue;
        int instance_max_threads = 0;
        SMX_RETURN_IF_ERROR(max_threads_of(kernel, "block-regs", &instance_max_threads));
        if (threads > instance_max_threads) continue;
        const std::size_t shared_bytes = regs_shared_bytes(info, context, values, static_cast<int>(threads));
        int ctas_per_sm = 0;
        SMX_RETURN_IF_ERROR(regs_ctas_per_sm(context, kernel, static_cast<int>(threads), shared_bytes, &ctas_per_sm));
        const std::int64_t resident = static_cast<std::int64_t>(ctas_per_sm) * context.limits.multiprocessor_count;
        *choice = {info.rows * chunks <= resident, kernel, static_cast<int>(threads), values, slice_len, chunks,
                   ctas_per_sm, resident, shared_bytes};
        return take_loads_first_instance(info, context, choice);
    }
    return SMX_STATUS_SUCCESS;
}

}  // namespace

smxStatus_t choose_grid_regs(const SoftmaxInfo& info, const PlanContext& context, GridRegsChoice* choice) {
    const GridRegsTuning& tuning = context.tuning.grid_regs;
    const std::int64_t x_size = static_cast<std::int64_t>(dtype_size(info.x_dtype));
    SMX_RETURN_IF_ERROR(choose_grid_regs_for(info, context, grid_regs_slice_target(info.row_len, x_size, tuning), choice));
    // Where several long rows' CTAs do not all fit at the length's slice: wide slices, if those fit.
    if (!choice->fits && info.rows > 1 && info.row_len >= tuning.full_len) {
        GridRegsChoice wide;
        SMX_RETURN_IF_ERROR(choose_grid_regs_for(info, context, tuning.wide_slice_bytes / x_size, &wide));
        if (wide.fits) *choice = wide;
    }
    return SMX_STATUS_SUCCESS;
}

smxStatus_t choose_grid_regs_steps(const SoftmaxInfo& info, const PlanContext& context, const GridRegsChoice& choice,
                                   GridRegsSteps* steps) {
    *steps = {};
    if (choice.kernel == nullptr || choice.values != kGridRegsStepsValues) return SMX_STATUS_SUCCESS;
    // With options, the unmasked set's instance (scale, causal, masked rows; softmax's with the scale folded into
    // the exps where the options allow it); masks have none.
    const bool unmasked_options = info.options.any() && regs_option_set_for(info, context) == RowsOptionSet::Unmasked;
    const bool fold = rows_scale_folds(info.options) && !info.is_log();
    const void* kernel = !info.options.any() ? grid_regs_steps_kernel(info.x_dtype, info.y_dtype)
                         : unmasked_options  ? grid_regs_steps_options_kernel(info.x_dtype, info.y_dtype, fold)
                                             : nullptr;
    if (kernel == nullptr || choice.chunks > kGridRegsStepsMaxChunks) return SMX_STATUS_SUCCESS;
    const std::size_t shared_bytes = grid_regs_steps_shared_bytes(info.x_dtype, info.y_dtype, choice.slice_len);
    std::size_t dynamic_limit = 0;
    SMX_RETURN_IF_ERROR(allow_all_dynamic_shared_memory(context.limits, kernel, "grid-regs-steps", &dynamic_limit));
    if (shared_bytes > dynamic_limit) return SMX_STATUS_SUCCESS;
    int ctas_per_sm = 0;
    SMX_RETURN_IF_ERROR(blocks_per_multiprocessor(kernel, choice.threads, shared_bytes, &ctas_per_sm));
    const std::int64_t resident = static_cast<std::int64_t>(ctas_per_sm) * context.limits.multiprocessor_count;
    const std::int64_t rows_per_step = std::min(info.rows, resident / choice.chunks);
    if (rows_per_step < 1) return SMX_STATUS_SUCCESS;
    *steps = {true, kernel, shared_bytes, ctas_per_sm, rows_per_step, ceil_div(info.rows, rows_per_step)};
    return SMX_STATUS_SUCCESS;
}

namespace {

BlockRegsParams grid_regs_params(const SoftmaxInfo& info, const GridRegsChoice& choice) {
    BlockRegsParams params = block_regs_params(info, choice.slice_len);
    params.chunks = choice.chunks;
    return params;
}

}  // namespace

smxStatus_t plan_grid_regs(const SoftmaxInfo& info, const GridRegsChoice& choice, FamilyPlan* plan) {
    const std::int64_t ctas = info.rows * choice.chunks;
    const std::size_t workspace = static_cast<std::size_t>(ctas) * stats_bytes(info);
    Launch launch{choice.kernel, dim3(static_cast<unsigned>(ctas)), dim3(static_cast<unsigned>(choice.threads)),
                  choice.shared_bytes, 0};
    launch.cooperative = true;
    *plan = make_family_plan(info, grid_regs_params(info, choice), {launch}, workspace,
                             fmt::format("cuda grid-regs values={} threads={} chunks={} slice={} ctas_per_sm={} "
                                         "workspace={}{}{}",
                                         choice.values, choice.threads, choice.chunks, choice.slice_len,
                                         choice.ctas_per_sm, workspace, regs_instance_note(info, choice.kernel, choice.values),
                                         staged_mask_note(choice.shared_bytes)));
    return SMX_STATUS_SUCCESS;
}

// Same slices, threads, workspace and fold order as grid-regs, so a row comes out bitwise as grid-regs writes it.
smxStatus_t plan_grid_regs_steps(const SoftmaxInfo& info, const GridRegsChoice& choice, const GridRegsSteps& steps,
                                 FamilyPlan* plan) {
    const std::size_t workspace = static_cast<std::size_t>(info.rows * choice.chunks) * stats_bytes(info);
    BlockRegsParams params = grid_regs_params(info, choice);
    params.row_steps = steps.steps;
    Launch launch{steps.kernel, dim3(static_cast<unsigned>(steps.rows_per_step * choice.chunks)),
                  dim3(static_cast<unsigned>(choice.threads)), steps.shared_bytes, 0};
    launch.cooperative = true;
    *plan = make_family_plan(info, params, {launch}, workspace,
                             fmt::format("cuda grid-regs-steps values={} threads={} chunks={} slice={} rows_per_step={} "
                                         "steps={} staged={} ctas_per_sm={} workspace={}",
                                         choice.values, choice.threads, choice.chunks, choice.slice_len,
                                         steps.rows_per_step, steps.steps, steps.shared_bytes, steps.ctas_per_sm,
                                         workspace));
    return SMX_STATUS_SUCCESS;
}

}  // namespace smx::cuda
