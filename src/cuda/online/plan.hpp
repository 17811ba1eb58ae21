// plan.hpp - the two-pass row families' planners: block-online (a CTA per row) and split-row (chunks of few
// very long rows over many CTAs, two kernels).
#pragma once

#include "cuda/plan/context.hpp"

namespace smx::cuda {

smxStatus_t plan_block_online(const SoftmaxInfo& info, const PlanContext& context, FamilyPlan* plan);
smxStatus_t plan_split_row(const SoftmaxInfo& info, const PlanContext& context, FamilyPlan* plan);

}  // namespace smx::cuda
