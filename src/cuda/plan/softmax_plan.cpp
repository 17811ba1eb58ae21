// softmax_plan.cpp - the CUDA softmax plan: which kernel family runs a problem, decided once from the
// SoftmaxInfo, the device's limits, its architecture's tuning table and the plan preferences (never from a
// pointer). run() only binds the pointers and launches. Each family's own choices live in its folder.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "cuda/backend.hpp"
#include "cuda/block_regs/params.hpp"
#include "cuda/block_regs/plan.hpp"
#include "cuda/common/options.hpp"
#include "cuda/common/util.hpp"
#include "cuda/general/plan.hpp"
#include "cuda/online/plan.hpp"
#include "cuda/spatial/plan.hpp"
#include "cuda/warp/params.hpp"
#include "cuda/warp/plan.hpp"

namespace smx {
namespace {

using cuda::FamilyPlan;
using cuda::LongRowsPreference;
using cuda::PlanContext;

class CudaSoftmaxPlan final : public SoftmaxPlan {
public:
    CudaSoftmaxPlan(int device_id, FamilyPlan family) : device_id_(device_id), family_(std::move(family)) {}

    std::size_t workspace_bytes() const override { return family_.workspace; }
    const std::string& description() const override { return family_.text; }

    smxStatus_t run(void* workspace, void* y, const void* x, void* stream) const override {
        return run_with_options(workspace, y, x, nullptr, nullptr, stream);
    }

    smxStatus_t run_with_options(void* workspace, void* y, const void* x, const void* scale, const void* mask,
                                 void* stream) const override {
        if (!family_.call) return SMX_STATUS_SUCCESS;  // nothing to launch
        // Bases misaligned for the chosen kernels' vector accesses take the plan made for them.
        const FamilyPlan& chosen = family_.unaligned && (reinterpret_cast<std::uintptr_t>(x) % family_.x_base_alignment != 0 ||
                                                         reinterpret_cast<std::uintptr_t>(y) % family_.y_base_alignment != 0)
                                       ? *family_.unaligned
                                       : family_;
        cuda::ScopedDevice device(device_id_);
        SMX_RETURN_IF_ERROR(device.status());
        return chosen.call->run(cuda::ForwardOperands{x, y, workspace, scale, mask}, static_cast<cudaStream_t>(stream));
    }

private:
    int device_id_;
    FamilyPlan family_;
};

// The Rows families plan_rows decides between.
enum class RowsFamily { Warp, BlockRegs, GridRegs, GridRegsSteps, SplitRow, BlockOnline };

// Rows layout, in order: (a) short rows in one warp's registers; (b) rows a cluster of CTAs holds in
// registers; (d) few long rows spread over the device behind a grid barrier (grid-regs) while every row's
// CTAs fit at once, or (e) in steps of rows where one row's fit; split-row for rows too long for any cluster
// and too few to fill the device; (c) block-online for the rest. performance.md#grid-regs has the crossovers.
// The configurations it weighed are left in regs, grid_regs and steps.
smxStatus_t choose_rows_family(const SoftmaxInfo& info, const PlanContext& context, RowsFamily* family,
                               cuda::RegsChoice* regs, cuda::GridRegsChoice* grid_regs, cuda::GridRegsSteps* steps) {
    if (info.row_len <= cuda::kWarpMaxRowLen) {
        *family = RowsFamily::Warp;
        return SMX_STATUS_SUCCESS;
    }
    SMX_RETURN_IF_ERROR(cuda::choose_regs_config(info, context, regs));
    SMX_RETURN_IF_ERROR(cuda::choose_grid_regs(info, context, grid_regs));
    const cuda::GridRegsTuning& grid_tuning = context.tuning.grid_regs;
    const bool grid_fills_lightly = 2 * info.rows * grid_regs->chunks <= grid_regs->resident;
    bool use_grid = grid_regs->fits && info.row_len >= grid_tuning.min_len && !cuda::regs_outruns_grid(info, context, *regs) &&
                    (info.row_len >= grid_tuning.full_len || grid_fills_lightly);
    bool split = !use_grid && info.row_len >= context.tuning.split_row.min_len && !regs->fits &&
                 info.rows < context.limits.multiprocessor_count;
    if (!grid_regs->fits) SMX_RETURN_IF_ERROR(cuda::choose_grid_regs_steps(info, context, *grid_regs, steps));
    bool use_steps = steps->fits && split;
    switch (context.preferences.long_rows) {
        case LongRowsPreference::Rule: break;
        case LongRowsPreference::Cluster: use_grid = split = use_steps = false; break;
        case LongRowsPreference::Grid:
            use_grid = grid_regs->fits;
            split = split && !use_grid;
            use_steps = use_steps && !use_grid;
            break;
        case LongRowsPreference::Split:
            use_grid = use_steps = false;
            split = info.row_len >= context.tuning.split_row.min_len;
            break;
        case LongRowsPreference::Steps:
            use_steps = steps->fits;
            use_grid = use_grid && !use_steps;
            split = split && !use_grid && !use_steps;
            break;
    }
    *family = use_grid ? RowsFamily::GridRegs
              : use_steps ? RowsFamily::GridRegsSteps
              : split ? RowsFamily::SplitRow
              : regs->fits ? RowsFamily::BlockRegs
                           : RowsFamily::BlockOnline;
    return SMX_STATUS_SUCCESS;
}

smxStatus_t plan_rows(const SoftmaxInfo& info, const PlanContext& context, FamilyPlan* plan) {
    RowsFamily family{};
    cuda::RegsChoice regs;
    cuda::GridRegsChoice grid_regs;
    cuda::GridRegsSteps steps;
    SMX_RETURN_IF_ERROR(choose_rows_family(info, context, &family, &regs, &grid_regs, &steps));
    switch (family) {
        case RowsFamily::Warp: return cuda::plan_warp(info, context, plan);
        case RowsFamily::BlockRegs: return cuda::plan_block_regs(info, regs, plan);
        case RowsFamily::GridRegs: return cuda::plan_grid_regs(info, grid_regs, plan);
        case RowsFamily::GridRegsSteps: return cuda::plan_grid_regs_steps(info, grid_regs, steps, plan);
        case RowsFamily::SplitRow: return cuda::plan_split_row(info, context, plan);
        case RowsFamily::BlockOnline: return cuda::plan_block_online(info, context, plan);
    }
    return SMX_STATUS_INTERNAL_ERROR;
}

// The option set a Rows problem's options instance is compiled for: the warp family's (rows it takes) or
// block-regs' and grid-regs' (regs_option_set_for: f32 keep masks on the any set; grid-regs-steps and split-row
// take the unmasked set alone).
cuda::RowsOptionSet rows_family_option_set(const SoftmaxInfo& info, const PlanContext& context) {
    return info.row_len <= cuda::kWarpMaxRowLen ? cuda::rows_option_set_for(info, context)
                                                : cuda::regs_option_set_for(info, context);
}

// The options instance of the family the plain problem takes (plan_rows_options); *planned is false where
// that family has none (block-online; grid-regs-steps and split-row with a mask) or its configuration does not
// fit.
smxStatus_t plan_rows_options_by_plain_family(const SoftmaxInfo& info, const PlanContext& context, FamilyPlan* plan,
                                              bool* planned) {
    SoftmaxInfo plain = info;
    plain.options = SoftmaxOptions{};
    RowsFamily family{};
    cuda::RegsChoice regs;
    cuda::GridRegsChoice grid_regs;
    cuda::GridRegsSteps steps;
    SMX_RETURN_IF_ERROR(choose_rows_family(plain, context, &family, &regs, &grid_regs, &steps));
    const auto plan_block_regs_options = [&]() -> smxStatus_t {
        SMX_RETURN_IF_ERROR(cuda::choose_regs_config(info, context, &regs));
        if (regs.fits) SMX_RETURN_IF_ERROR(cuda::plan_block_regs(info, regs, plan));
        *planned = regs.fits;
        return SMX_STATUS_SUCCESS;
    };
    if (family == RowsFamily::Warp) {
        SMX_RETURN_IF_ERROR(cuda::plan_warp(info, context, plan));
        *planned = true;
    } else if (family == RowsFamily::BlockRegs) {
        SMX_RETURN_IF_ERROR(plan_block_regs_options());
    } else if (family == RowsFamily::GridRegs) {
        SMX_RETURN_IF_ERROR(cuda::choose_grid_regs(info, context, &grid_regs));
        if (grid_regs.fits) SMX_RETURN_IF_ERROR(cuda::plan_grid_regs(info, grid_regs, plan));
        *planned = grid_regs.fits;
        // Decode batches plain splits at the packed 64 values (64 x 128256 16-bit): the masked sets' widened
        // values need twice the CTAs, more than the device holds at once, so one cluster a row in waves.
        if (!*planned) SMX_RETURN_IF_ERROR(plan_block_regs_options());
    } else if (family == RowsFamily::GridRegsSteps) {
        // Plain's steps configuration on the options instance (unmasked set: choose_grid_regs_steps).
        SMX_RETURN_IF_ERROR(cuda::choose_grid_regs(info, context, &grid_regs));
        SMX_RETURN_IF_ERROR(cuda::choose_grid_regs_steps(info, context, grid_regs, &steps));
        if (steps.fits) SMX_RETURN_IF_ERROR(cuda::plan_grid_regs_steps(info, grid_regs, steps, plan));
        *planned = steps.fits;
    } else if (family == RowsFamily::SplitRow && cuda::split_row_takes_options(info, context)) {
        SMX_RETURN_IF_ERROR(cuda::plan_split_row(info, context, plan));
        *planned = true;
    }
    return SMX_STATUS_SUCCESS;
}

// Rows a batch-invariant plan configures block-regs for: enough to fill any device several times, so the
// cluster, CTA size and values per thread are those of a large batch whatever the call's row count.
constexpr std::int64_t kBatchInvariantPlanningRows = std::int64_t{1} << 20;

// A batch-invariant Rows problem on a fast family's options instance, configured from the row length, the
// dtypes, the mode and the option set alone (never the row count), so a row is split among threads and
// reduced the same way at any position of any batch (docs/design.md, "Batch invariance"):
// - rows of the warp family take its shape (a function of the row length and dtypes) where a thread holds
//   one row: a thread of two rows picks one exp form for both, so a neighbour's special values would change
//   a row's bits (f32 -> 16-bit rows of up to 16 elements);
// - longer rows take block-regs' cluster as the search picks it for a large batch, where the row's bytes are a
//   multiple of 16: block-regs peels the elements before a slice's first 16-byte boundary, so rows of other
//   lengths would start at different phases in a batch and be split differently.
// Never grid-regs, split-row or the others, whose split of a row follows the row count. *planned is false
// where neither applies (general-rows then; also rows longer than a cluster holds).
smxStatus_t plan_batch_invariant_rows(const SoftmaxInfo& info, const PlanContext& context, FamilyPlan* plan,
                                      bool* planned) {
    *planned = false;
    if (info.row_len <= cuda::kWarpMaxRowLen) {
        cuda::WarpShape shape{};
        cuda::choose_warp_shape(info.row_len, dtype_size(info.x_dtype), dtype_size(info.y_dtype), &shape);
        if (shape.rows_per_thread != 1) return SMX_STATUS_SUCCESS;
        SMX_RETURN_IF_ERROR(cuda::plan_warp(info, context, plan));
        *planned = true;
        return SMX_STATUS_SUCCESS;
    }
    if (info.row_len * static_cast<std::int64_t>(dtype_size(info.x_dtype)) % 16 != 0) return SMX_STATUS_SUCCESS;
    SoftmaxInfo large_batch = info;
    large_batch.rows = kBatchInvariantPlanningRows;
    cuda::RegsChoice regs;
    SMX_RETURN_IF_ERROR(cuda::choose_regs_config(large_batch, context, &regs));
    const std::int64_t rows_per_grid_row = std::min<std::int64_t>(info.rows, cuda::kRowsPerGridRow);
    if (!regs.fits || cuda::ceil_div(info.rows, rows_per_grid_row) > cuda::kMaxGridY) return SMX_STATUS_SUCCESS;
    SMX_RETURN_IF_ERROR(cuda::plan_block_regs(info, regs, plan));
    *planned = true;
    return SMX_STATUS_SUCCESS;
}

// A Rows problem with options (rows_take_options): the family the plain problem would take decides, so options
// move no crossover; warp, block-regs and grid-regs then run their options instance, configured by the same
// search over the options instances (8, 16 and 32 values for block-regs and grid-regs; the packed 64 for the
// unmasked set of 16-bit x). Grid-regs rows whose options configuration does not fit at once take block-regs'
// clusters where a cluster holds the row. The decode rows past a cluster that plain gives grid-regs-steps or
// split-row take those families' instances of the unmasked set (scale, causal, masked rows, at plain's
// configuration); with a mask (bool or additive) they have none. Batch invariance takes
// plan_batch_invariant_rows instead. The others (block-online, those masked decode rows), and a configuration
// the options instances cannot take, run on the general family. The plan text names the options after the
// family, then the option set its instance is compiled for (set=unmasked, keep, additive or any: RowsOptionSet).
smxStatus_t plan_rows_options(const SoftmaxInfo& info, const PlanContext& context, FamilyPlan* plan) {
    bool planned = false;
    if (info.options.batch_invariant) {
        SMX_RETURN_IF_ERROR(plan_batch_invariant_rows(info, context, plan, &planned));
    } else {
        SMX_RETURN_IF_ERROR(plan_rows_options_by_plain_family(info, context, plan, &planned));
    }
    if (!planned) return cuda::plan_general_options(info, context, plan);  // its text names the options
    plan->text += describe(info.options);
    plan->text += fmt::format(" set={}", cuda::option_set_name(rows_family_option_set(info, context)));
    return SMX_STATUS_SUCCESS;
}

// Spatial layout: whole columns cached on chip by one CTA or a cluster (x read once), else the long-column
// families (x read twice).
smxStatus_t plan_spatial(const SoftmaxInfo& info, const PlanContext& context, FamilyPlan* plan) {
    bool planned = false;
    SMX_RETURN_IF_ERROR(cuda::plan_spatial_tile(info, context, plan, &planned));
    if (planned) return SMX_STATUS_SUCCESS;
    return cuda::plan_long_columns(info, context, plan);
}

// Whether a problem's options run on the fast row families' options instances (plan_rows_options): Rows layout
// with the mask contiguous along the axis and a pair with options instances (the benchmark grids': f64 and the
// cross 16-bit pairs have none). Batch invariance too, unless SMX_CUDA_BATCH_INVARIANT sends it to the
// general-rows or general kernels (docs/design.md, "Batch invariance").
bool rows_take_options(const SoftmaxInfo& info, const PlanContext& context) {
    if (!cuda::rows_options_apply(info, info.options)) return false;
    if (info.options.batch_invariant && context.preferences.batch_invariant != cuda::BatchInvariantPreference::Rule) {
        return false;
    }
    const cuda::RowsOptionSet set = rows_family_option_set(info, context);
    if (info.row_len > cuda::kWarpMaxRowLen) {
        return cuda::block_regs_softmax_options_kernel(info.x_dtype, info.y_dtype, 16, set) != nullptr;
    }
    cuda::WarpShape shape{};
    const int shape_index = cuda::choose_warp_shape(info.row_len, dtype_size(info.x_dtype), dtype_size(info.y_dtype), &shape);
    return cuda::warp_softmax_options_kernel(info.x_dtype, info.y_dtype, shape_index, set) != nullptr;
}

// Dtype pairs with f64 on one side only: computed in double by the general family on every layout.
bool mixed_f64_pair(const SoftmaxInfo& info) {
    return (info.x_dtype == SMX_DTYPE_F64) != (info.y_dtype == SMX_DTYPE_F64);
}

}  // namespace

smxStatus_t make_cuda_softmax_plan(const SoftmaxInfo& info, int device_id, const DeviceLimits& limits,
                                   const cuda::PlanPreferences& preferences, std::unique_ptr<SoftmaxPlan>* plan) {
    FamilyPlan family;
    if (info.numel == 0) {
        family.text = "cuda none (zero-size tensor: nothing to launch)";
        *plan = std::make_unique<CudaSoftmaxPlan>(device_id, std::move(family));
        return SMX_STATUS_SUCCESS;
    }
    cuda::ScopedDevice device(device_id);
    SMX_RETURN_IF_ERROR(device.status());
    const PlanContext context{limits, cuda::tuning_for(limits), preferences};
    if (info.options.any() && rows_take_options(info, context)) {
        SMX_RETURN_IF_ERROR(plan_rows_options(info, context, &family));
    } else if (info.options.any()) {
        // The other problems with options: the general family (docs/design.md, "Softmax options").
        SMX_RETURN_IF_ERROR(cuda::plan_general_options(info, context, &family));
    } else if (mixed_f64_pair(info)) {
        SMX_RETURN_IF_ERROR(cuda::plan_general(info, context, &family));
    } else {
        switch (info.layout) {
            case RowLayout::Rows: SMX_RETURN_IF_ERROR(plan_rows(info, context, &family)); break;
            case RowLayout::Spatial: SMX_RETURN_IF_ERROR(plan_spatial(info, context, &family)); break;
            case RowLayout::General: SMX_RETURN_IF_ERROR(cuda::plan_general(info, context, &family)); break;
        }
    }
    *plan = std::make_unique<CudaSoftmaxPlan>(device_id, std::move(family));
    return SMX_STATUS_SUCCESS;
}

}  // namespace smx
