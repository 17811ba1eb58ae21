// plan.hpp - the block-regs family's planners: rows held in registers by a cluster of CTAs per row
// (block-regs), or by CTAs spread over the device behind a grid barrier (grid-regs, grid-regs-steps). Each
// has a choose step (the configuration, and whether it fits) and an apply step (the plan); the rows decision
// tree (plan/softmax_plan.cpp) weighs the choices against each other.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "cuda/block_regs/params.hpp"
#include "cuda/plan/context.hpp"

namespace smx::cuda {

// A block-regs configuration: cluster size, threads, values per thread and how well they fit.
struct RegsChoice {
    bool fits = false;
    const void* kernel = nullptr;
    int cluster = 1;
    int threads = 0;
    int values = 0;               // elements of the row each thread holds in registers
    std::int64_t slice_len = 0;   // elements per CTA of the cluster
    int ctas_per_sm = 0;          // resident CTAs per SM (occupancy API)
    double utilization = 0.0;     // row_len / (cluster x threads x values): registers holding real elements
    std::size_t shared_bytes = 0; // dynamic shared memory per CTA (the staged mask: regs_shared_bytes)
};

// Whether register configuration `a` serves a row better than `b` (Choice: fits, ctas_per_sm, utilization,
// values): several CTAs per SM first (one CTA's loads overlap another's math and stores), then the fewest
// idle register slots (to 1%), then the higher rank(values); equal: `b`, the one found first (the smaller
// cluster). The block-regs search's order, shared with the backward's (performance.md#block-regs).
template <class Choice, class Rank>
bool better_register_configuration(const Choice& a, const Choice& b, int min_ctas_per_sm, const Rank& rank) {
    if (!b.fits) return a.fits;
    if (!a.fits) return false;
    const bool a_overlaps = a.ctas_per_sm >= min_ctas_per_sm;
    const bool b_overlaps = b.ctas_per_sm >= min_ctas_per_sm;
    if (a_overlaps != b_overlaps) return a_overlaps;
    const int a_percent = static_cast<int>(a.utilization * 100.0);
    const int b_percent = static_cast<int>(b.utilization * 100.0);
    if (a_percent != b_percent) return a_percent > b_percent;
    return rank(a.values) > rank(b.values);
}

// The option set of block-regs' and grid-regs' options instances: rows_option_set_for, but f32 x takes the any
// set's 32-value instances for a keep mask (faster than the keep set's 16: performance.md, "Session 5 on the
// H200") and for an additive mask past the rows its 16-value instances hold in the largest cluster.
RowsOptionSet regs_option_set_for(const SoftmaxInfo& info, const PlanContext& context);

// The block-regs kernel of `values` per thread for the problem: the options instance of its option set where
// it has options (nullptr where that pair or count has none), or for the unmasked set's softmax whose scale
// folds (rows_scale_folds) the folded instance where the pair and count have one, and for its per-row scales the
// per-row folded instance where they have one (block_regs_softmax_row_folded_kernel).
const void* block_regs_kernel_for(const SoftmaxInfo& info, const PlanContext& context, int values);

// Dynamic shared memory a block-regs or grid-regs CTA of `threads` at `values` per thread needs for the problem:
// the staged mask of the additive set's packed instance or of f32 x's 32-value one (block_regs_stages_mask), else 0.
std::size_t regs_shared_bytes(const SoftmaxInfo& info, const PlanContext& context, int values, int threads);

// CTAs per SM of block-regs `kernel` at `threads` and `shared_bytes` of dynamic shared memory (0 where they
// exceed what the kernel may have), its dynamic shared memory limit raised first where it needs any.
smxStatus_t regs_ctas_per_sm(const PlanContext& context, const void* kernel, int threads, std::size_t shared_bytes,
                             int* ctas_per_sm);

// What a block-regs or grid-regs plan text adds for a CTA's staged mask of `shared_bytes`: " staged_mask=<bytes>",
// or "" without one.
std::string staged_mask_note(std::size_t shared_bytes);

// What a block-regs or grid-regs plan text adds after its configuration for `kernel` of `values` per thread:
// " folded" for the folded instance (block_regs_softmax_folded_kernel), " row-folded" for the per-row folded one
// (block_regs_softmax_row_folded_kernel), " loads-first" for grid-regs' (grid_regs_loads_first_options_kernel),
// " folded loads-first" and " row-folded loads-first" for the packed ones (block_regs_packed_loads_first_kernel) and
// " row-folded loads-first" for grid-regs' 32 values (grid_regs_row_folded_loads_first_kernel), else "".
const char* regs_instance_note(const SoftmaxInfo& info, const void* kernel, int values);

// The configuration for a row: the default search, then the searches for f32 x (the last of them for an additive
// mask on its staged instance: block_regs_staged_mask_kernel) and for packed 16-bit x (performance.md#block-regs);
// the packed folded and row-folded softmax on their loads-first instance where all the launch's clusters fit at once.
smxStatus_t choose_regs_config(const SoftmaxInfo& info, const PlanContext& context, RegsChoice* choice);

// The parameters every block-regs plan starts from: the problem's rows and `slice_len` elements per CTA.
BlockRegsParams block_regs_params(const SoftmaxInfo& info, std::int64_t slice_len);

// A cluster per row with `choice` (fits).
smxStatus_t plan_block_regs(const SoftmaxInfo& info, const RegsChoice& choice, FamilyPlan* plan);

// Whether `choice` is one of the push-statistics or packed configurations that beat grid-regs from
// tuning.block_regs.cluster_over_grid_min_elements on (performance.md#grid-regs).
bool regs_outruns_grid(const SoftmaxInfo& info, const PlanContext& context, const RegsChoice& choice);

// A grid-regs configuration: the block-regs kernel with `chunks` CTAs per row combined by a grid barrier.
struct GridRegsChoice {
    bool fits = false;  // the device supports it and every row's CTAs are resident at once
    const void* kernel = nullptr;
    int threads = 0;
    int values = 0;
    std::int64_t slice_len = 0;
    std::int64_t chunks = 0;
    int ctas_per_sm = 0;
    std::int64_t resident = 0;     // CTAs the device holds at once
    std::size_t shared_bytes = 0;  // dynamic shared memory per CTA (regs_shared_bytes)
};

// Grid-regs for the row length's slice, or its wide slice where rows do not all fit (performance.md#grid-regs); 16-bit
// x's options rows of the unmasked set, and its per-row folded softmax, on their loads-first instance where its CTAs
// all fit.
smxStatus_t choose_grid_regs(const SoftmaxInfo& info, const PlanContext& context, GridRegsChoice* choice);

// Grid-regs steps: a grid-regs configuration of kGridRegsStepsValues values that does not fit every row at
// once, on the row-steps kernel, rows_per_step rows at a time (a problem with options: its options instance,
// unmasked set only). fits = false where the kernel has no instance, the device cannot hold one row's CTAs at
// once, or a row has more CTAs than a step folds.
struct GridRegsSteps {
    bool fits = false;
    const void* kernel = nullptr;
    std::size_t shared_bytes = 0;  // the staged slice (dynamic shared memory)
    int ctas_per_sm = 0;
    std::int64_t rows_per_step = 0;
    std::int64_t steps = 0;
};

smxStatus_t choose_grid_regs_steps(const SoftmaxInfo& info, const PlanContext& context, const GridRegsChoice& choice,
                                   GridRegsSteps* steps);

smxStatus_t plan_grid_regs(const SoftmaxInfo& info, const GridRegsChoice& choice, FamilyPlan* plan);
smxStatus_t plan_grid_regs_steps(const SoftmaxInfo& info, const GridRegsChoice& choice, const GridRegsSteps& steps,
                                 FamilyPlan* plan);

}  // namespace smx::cuda
