// options.cpp - the softmax options as a kernel reads them (options.hpp).
#include "cuda/common/options.hpp"

#include <algorithm>

#include "cuda/general/plan.hpp"  // describe_index_space
#include "ops/softmax/options.hpp"

namespace smx::cuda {

OptionsParams options_params(const RowGeometry& geometry, const SoftmaxOptions& options) {
    OptionsParams params;
    std::int64_t index_shape[SMX_MAX_DIMS];  // the kernel's own index space: only the strides are kept here
    switch (options.scale_kind) {
        case ScaleKind::None: params.scale_kind = 0; break;
        case ScaleKind::Scalar:
            params.scale_kind = 1;
            params.scalar_scale = options.scale;
            break;
        case ScaleKind::PerRow:
            params.scale_kind = 2;
            describe_index_space(geometry, {{&options.scale_layout, params.scale_index_strides}}, index_shape);
            break;
    }
    params.mask_kind = options.mask_kind == MaskKind::Keep ? 1 : options.mask_kind == MaskKind::Additive ? 2 : 0;
    if (params.mask_kind != 0) {
        params.mask_dtype = options.mask_dtype;
        params.mask_axis_stride = options.mask_layout.axis_stride;
        describe_index_space(geometry, {{&options.mask_layout, params.mask_index_strides}}, index_shape);
    }
    if (options.causal) {
        params.causal = 1;
        params.causal_queries = options.causal_queries;
        params.causal_row_divisor = options.causal_row_divisor;
        // Past these bounds every query keeps all or nothing, so the clamp changes no result.
        params.causal_offset = std::clamp<std::int64_t>(options.causal_offset, -options.causal_queries, geometry.row_len);
    }
    params.zero_rows = options.masked_rows == SMX_MASKED_ROWS_ZERO ? 1 : 0;
    return params;
}

}  // namespace smx::cuda
