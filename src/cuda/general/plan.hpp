// plan.hpp - the general family's planner: any strides, a warp or a block per row.
#pragma once

#include <cstdint>
#include <initializer_list>

#include "cuda/plan/context.hpp"

namespace smx::cuda {

// Where one operand's strides over the rows' index space go, from its layout.
struct IndexStrides {
    const OperandLayout* layout;
    std::int64_t* strides;  // SMX_MAX_DIMS entries
};

// The rows' index space of any layout as the general kernels walk it, outermost dim first (Rows problems are
// one dim, Spatial ones two): fills index_shape and each operand's strides, and returns the dim count.
int describe_index_space(const RowGeometry& geometry, std::initializer_list<IndexStrides> operands,
                         std::int64_t* index_shape);

// Any layout: Rows and Spatial problems are described by their index space too (the family every dtype pair
// with f64 on one side only runs on).
smxStatus_t plan_general(const SoftmaxInfo& info, const PlanContext& context, FamilyPlan* plan);

// A problem with options (scale, mask, causal, masked rows, batch invariance), any layout and dtype pair: the
// general kernel with the options' input transform and output rule. Its reduction order depends on the row
// length alone, which makes it the batch-invariant plan too.
smxStatus_t plan_general_options(const SoftmaxInfo& info, const PlanContext& context, FamilyPlan* plan);

}  // namespace smx::cuda
