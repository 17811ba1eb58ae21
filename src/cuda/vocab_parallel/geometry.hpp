// geometry.hpp - a validated problem's rows (ops/common/row_problem.hpp) as the vocabulary-parallel kernels' params
// carry them: the shared row space and one operand's strides in it. Host code, shared by the planners.
#pragma once

#include <algorithm>

#include "cuda/vocab_parallel/params.hpp"
#include "ops/common/row_problem.hpp"

namespace smx::cuda {

inline RowSpace row_space(const RowGeometry& g) {
    RowSpace space;
    space.layout = static_cast<int>(g.layout);
    space.rows = g.rows;
    space.inner = g.inner;
    space.index_ndim = g.index_ndim;
    std::copy(g.index_shape, g.index_shape + SMX_MAX_DIMS, space.index_shape);
    return space;
}

inline OperandStrides strides_of(const RowGeometry& g, const OperandLayout& layout) {
    OperandStrides strides;
    strides.axis = layout.axis_stride;
    strides.row = g.layout == RowLayout::Rows ? layout.row_stride : layout.outer_stride;
    std::copy(layout.index_strides, layout.index_strides + SMX_MAX_DIMS, strides.index);
    return strides;
}

}  // namespace smx::cuda
