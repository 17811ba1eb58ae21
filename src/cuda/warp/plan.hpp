// plan.hpp - the warp family's planner: rows of up to kWarpMaxRowLen elements.
#pragma once

#include "cuda/plan/context.hpp"

namespace smx::cuda {

// The shape that holds the row, its CTA size and index width.
smxStatus_t plan_warp(const SoftmaxInfo& info, const PlanContext& context, FamilyPlan* plan);

}  // namespace smx::cuda
