// plan.hpp - the two-pass row families' planners: block-online (a CTA per row) and split-row (chunks of few
// very long rows over many CTAs, two kernels).
#pragma once

#include "cuda/plan/context.hpp"

namespace smx::cuda {

smxStatus_t plan_block_online(const SoftmaxInfo& info, const PlanContext& context, FamilyPlan* plan);
// Split-row, with its options instances where the problem has options (split_row_takes_options must hold then).
smxStatus_t plan_split_row(const SoftmaxInfo& info, const PlanContext& context, FamilyPlan* plan);

// Whether split-row has options instances for the problem's options: the unmasked set (scale, causal window,
// masked rows) of a pair of kRowsOptionsPair.
bool split_row_takes_options(const SoftmaxInfo& info, const PlanContext& context);

}  // namespace smx::cuda
