// plan.hpp - the Spatial-layout planners: spatial-tile where a cluster can cache whole columns, else the
// two-pass column families (spatial-split, spatial-online).
#pragma once

#include "cuda/plan/context.hpp"
#include "cuda/spatial/params.hpp"

namespace smx::cuda {

// The parameters every Spatial family starts from: the problem's sizes and strides.
SpatialParams spatial_params(const SoftmaxInfo& info);

// Whole columns cached on chip by one CTA or a cluster; *planned = false where no cluster holds a column.
smxStatus_t plan_spatial_tile(const SoftmaxInfo& info, const PlanContext& context, FamilyPlan* plan, bool* planned);

// Columns too long for any cluster: spatial-split (with vector instances where the layout allows, and the
// one-element plan kept for misaligned bases), or spatial-online.
smxStatus_t plan_long_columns(const SoftmaxInfo& info, const PlanContext& context, FamilyPlan* plan);

}  // namespace smx::cuda
