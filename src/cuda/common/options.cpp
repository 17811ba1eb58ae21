// options.cpp - the softmax options as a kernel reads them (options.hpp).
#include "cuda/common/options.hpp"

#include <algorithm>

#include "ops/softmax/info.hpp"

namespace smx::cuda {

IndexSpace index_space(const SoftmaxInfo& info) {
    IndexSpace space;
    switch (info.layout) {
        case RowLayout::Rows:
            space.ndim = 1;
            space.shape[0] = info.rows;
            break;
        case RowLayout::Spatial:
            space.ndim = 2;
            space.shape[0] = info.outer;
            space.shape[1] = info.inner;
            break;
        case RowLayout::General:
            space.ndim = info.index_ndim;
            std::copy(info.index_shape, info.index_shape + info.index_ndim, space.shape);
            break;
    }
    return space;
}

void index_strides(const SoftmaxInfo& info, const OperandLayout& layout, std::int64_t* strides) {
    switch (info.layout) {
        case RowLayout::Rows: strides[0] = layout.row_stride; return;
        case RowLayout::Spatial:
            strides[0] = layout.outer_stride;
            strides[1] = 1;  // the inner dim is contiguous in every operand
            return;
        case RowLayout::General: std::copy(layout.index_strides, layout.index_strides + info.index_ndim, strides); return;
    }
}

OptionsParams options_params(const SoftmaxInfo& info) {
    const SoftmaxOptions& options = info.options;
    OptionsParams params;
    switch (options.scale_kind) {
        case ScaleKind::None: params.scale_kind = 0; break;
        case ScaleKind::Scalar:
            params.scale_kind = 1;
            params.scalar_scale = options.scale;
            break;
        case ScaleKind::PerRow:
            params.scale_kind = 2;
            index_strides(info, options.scale_layout, params.scale_index_strides);
            break;
    }
    params.mask_kind = options.mask_kind == MaskKind::Keep ? 1 : options.mask_kind == MaskKind::Additive ? 2 : 0;
    if (params.mask_kind != 0) {
        params.mask_dtype = options.mask_dtype;
        params.mask_axis_stride = options.mask_layout.axis_stride;
        index_strides(info, options.mask_layout, params.mask_index_strides);
    }
    if (options.causal) {
        params.causal = 1;
        params.causal_queries = options.causal_queries;
        params.causal_row_divisor = options.causal_row_divisor;
        // Past these bounds every query keeps all or nothing, so the clamp changes no result.
        params.causal_offset = std::clamp<std::int64_t>(options.causal_offset, -options.causal_queries, info.row_len);
    }
    params.zero_rows = options.masked_rows == SMX_MASKED_ROWS_ZERO ? 1 : 0;
    return params;
}

}  // namespace smx::cuda
