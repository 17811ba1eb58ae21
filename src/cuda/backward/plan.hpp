// plan.hpp - the backward family planners. Each has a choose step where the rows decision tree
// (backward_plan.cpp) weighs configurations against each other (what fits, at what occupancy) and an apply
// step returning the BackwardFamilyPlan.
#pragma once

#include <cstdint>

#include "cuda/backward/call.hpp"

namespace smx::cuda {

// Rows of up to kBackwardWarpMaxRowLen: the smallest shape that holds the row.
smxStatus_t plan_backward_warp(const SoftmaxBackwardInfo& info, const PlanContext& context, BackwardFamilyPlan* plan);

// A cluster of CTAs per row holding it in registers.
struct BackwardRegsChoice {
    bool fits = false;
    const void* kernel = nullptr;
    int cluster = 1;
    int threads = 0;
    int values = 0;              // elements of each operand a thread holds
    std::int64_t slice_len = 0;  // elements per CTA
    int ctas_per_sm = 0;
    double utilization = 0.0;    // row_len / (cluster x threads x values)
    BackwardRegsExchange exchange = BackwardRegsExchange::Pull;  // the kernel's, named in clusters' plan text
};
smxStatus_t choose_backward_regs(const SoftmaxBackwardInfo& info, const PlanContext& context, BackwardRegsChoice* choice);
smxStatus_t plan_backward_regs(const SoftmaxBackwardInfo& info, const BackwardRegsChoice& choice, BackwardFamilyPlan* plan);

// The regs kernel with `chunks` CTAs per row spread over the device, their sums meeting behind a grid
// barrier; fits when every CTA is resident at once (a cooperative launch).
struct BackwardGridChoice {
    bool fits = false;
    const void* kernel = nullptr;
    int threads = 0;
    int values = 0;
    std::int64_t slice_len = 0;
    std::int64_t chunks = 0;
    int ctas_per_sm = 0;
};
smxStatus_t choose_backward_grid(const SoftmaxBackwardInfo& info, const PlanContext& context, BackwardGridChoice* choice);
smxStatus_t plan_backward_grid(const SoftmaxBackwardInfo& info, const BackwardGridChoice& choice, BackwardFamilyPlan* plan);

// Any row length and count: chunks of each row over CTAs, partial sums through the workspace, two kernels.
smxStatus_t plan_backward_split(const SoftmaxBackwardInfo& info, const PlanContext& context, BackwardFamilyPlan* plan);

// The Spatial layout: tiles cached in shared memory by one CTA or a cluster where they fit, else read twice.
smxStatus_t plan_backward_spatial(const SoftmaxBackwardInfo& info, const PlanContext& context, BackwardFamilyPlan* plan);

// Any layout and dtype combination: a warp or a block per row.
smxStatus_t plan_backward_general(const SoftmaxBackwardInfo& info, const PlanContext& context, BackwardFamilyPlan* plan);

// A problem with the forward's options (scale, mask, causal, masked rows, batch invariance), any layout and dtype
// combination: backward-general with the options' exclusion, scale and masked-rows rule. Its reduction order
// depends on the row length alone, which makes it the batch-invariant plan too.
smxStatus_t plan_backward_general_options(const SoftmaxBackwardInfo& info, const PlanContext& context,
                                          BackwardFamilyPlan* plan);

}  // namespace smx::cuda
