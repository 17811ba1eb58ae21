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

bool rows_options_apply(const RowGeometry& geometry, const SoftmaxOptions& options) {
    if (geometry.layout != RowLayout::Rows) return false;
    if (options.needs_mask_data() && options.mask_layout.axis_stride != 1 && geometry.row_len > 1) return false;
    return !options.causal || options.causal_row_divisor == 1;
}

RowsOptionSet rows_option_set(const SoftmaxOptions& options, smxDataType_t x_dtype, bool force_any) {
    if (force_any) return RowsOptionSet::Any;
    switch (options.mask_kind) {
        case MaskKind::None: return RowsOptionSet::Unmasked;
        case MaskKind::Keep: return RowsOptionSet::Keep;
        case MaskKind::Additive: return options.mask_dtype == x_dtype ? RowsOptionSet::AdditiveOfX : RowsOptionSet::Any;
    }
    return RowsOptionSet::Any;
}

const char* option_set_name(RowsOptionSet set) {
    switch (set) {
        case RowsOptionSet::Unmasked: return "unmasked";
        case RowsOptionSet::Keep: return "keep";
        case RowsOptionSet::AdditiveOfX: return "additive";
        case RowsOptionSet::Any: return "any";
    }
    return "any";
}

bool rows_scale_folds(const SoftmaxOptions& options) {
    if (options.scale_kind == ScaleKind::None) return true;
    return options.scale_kind == ScaleKind::Scalar && scalar_scale_folds(options.scale);
}

RowsOptionsParams rows_options_params(const RowGeometry& geometry, const SoftmaxOptions& options) {
    // The general family's reading of the options, with each operand's index strides reduced to its row stride.
    const OptionsParams general = options_params(geometry, options);
    RowsOptionsParams params;
    params.scalar_scale = general.scalar_scale;
    params.scale_row_stride = options.scale_layout.row_stride;
    params.mask_row_stride = options.mask_layout.row_stride;
    params.causal_offset = general.causal_offset;
    params.causal_queries = general.causal_queries;
    params.scale_kind = general.scale_kind;
    params.mask_kind = general.mask_kind;
    params.mask_dtype = general.mask_dtype;
    params.causal = general.causal;
    params.zero_rows = general.zero_rows;
    params.fold_scale = rows_scale_folds(options) ? 1 : 0;
    constexpr std::int64_t kFastQueryLimit = std::int64_t{1} << 31;
    if (params.causal != 0 && geometry.rows <= kFastQueryLimit && params.causal_queries < kFastQueryLimit) {
        params.causal_fast_query = 1;
        params.causal_divisor = make_fast_divisor(static_cast<std::uint32_t>(params.causal_queries));
    }
    return params;
}

}  // namespace smx::cuda
