// plan.hpp - the general family's planner: any strides, a warp or a block per row.
#pragma once

#include "cuda/plan/context.hpp"

namespace smx::cuda {

// Any layout: Rows and Spatial problems are described by their index space too (the family every dtype pair
// with f64 on one side only runs on).
smxStatus_t plan_general(const SoftmaxInfo& info, const PlanContext& context, FamilyPlan* plan);

// A problem with options (scale, mask, causal, masked rows, batch invariance), any layout and dtype pair: the
// general kernel with the options' input transform and output rule. Its reduction order depends on the row
// length alone, which makes it the batch-invariant plan too.
smxStatus_t plan_general_options(const SoftmaxInfo& info, const PlanContext& context, FamilyPlan* plan);

}  // namespace smx::cuda
