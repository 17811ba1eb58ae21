// info.cpp - validation of a softmax problem: its mode and dtypes here, its operands' geometry in
// ops/common/row_problem.cpp.
#include "ops/softmax/info.hpp"

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "core/tensor.hpp"

namespace smx {

smxStatus_t make_softmax_info(int mode, int axis, const smxTensorDescriptor* y, const smxTensorDescriptor* x,
                              SoftmaxInfo* info) {
    return make_softmax_info(mode, axis, y, x, nullptr, info);
}

namespace {

// The option settings that change the problem (a scale of exactly 1 does not).
bool any_option(const SoftmaxOptionSettings* settings) {
    return settings != nullptr && (settings->has_scale_tensor || settings->scale != 1.0 || settings->has_mask ||
                                   settings->causal || settings->masked_rows != SMX_MASKED_ROWS_NAN ||
                                   settings->batch_invariant);
}

// The causal window's checks and its row mapping: row r's query index is (r / divisor) % queries. The query dim
// (ndim - 2) is the innermost factor of the last collapsed index dim, and rows run row-major over the collapsed
// dims in every layout but a Spatial one whose contiguous (inner) dim comes first, where the last dim is the
// outer one: there the query index is the outer index's. `query_strides_one`: dim ndim - 2 has stride 1 in every
// operand, i.e. it is part of the inner dim.
smxStatus_t make_causal(const RowGeometry& geometry, bool query_strides_one, SoftmaxOptions* options) {
    if (geometry.ndim < 2) {
        return fail(SMX_STATUS_BAD_PARAM_NDIM, "causal needs x of 2 or more dims (queries, keys), not shape {}",
                    format_dims(geometry.shape, geometry.ndim));
    }
    if (geometry.axis != geometry.ndim - 1) {
        return fail(SMX_STATUS_BAD_PARAM_AXIS, "causal needs the softmax along the last dim ({}), not axis {}",
                    geometry.ndim - 1, geometry.axis);
    }
    options->causal_queries = geometry.shape[geometry.ndim - 2];
    const bool inner_first = geometry.layout == RowLayout::Spatial && !query_strides_one;
    options->causal_row_divisor = options->causal_queries > 1 && inner_first ? geometry.inner : 1;
    return SMX_STATUS_SUCCESS;
}

}  // namespace

smxStatus_t make_softmax_info(int mode, int axis, const smxTensorDescriptor* y, const smxTensorDescriptor* x,
                              const SoftmaxOptionSettings* settings, SoftmaxInfo* info) {
    if (mode != SMX_SOFTMAX && mode != SMX_LOG_SOFTMAX) {
        return fail(SMX_STATUS_BAD_PARAM_MODE, "mode {} is not an smxSoftmaxMode_t (SMX_SOFTMAX=1, SMX_LOG_SOFTMAX=2)",
                    mode);
    }
    const bool with_options = any_option(settings) && x != nullptr && y != nullptr;
    // Operands: x, y, then the mask (broadcast to x's shape) and the per-row scale where set.
    OperandSpec operands[4] = {{"x", x, false}, {"y", y, true}};
    int count = 2;
    int mask_index = -1;
    int scale_index = -1;
    smxTensorDescriptor mask;
    if (with_options && settings->has_mask) {
        SMX_RETURN_IF_ERROR(broadcast_mask(settings->mask_tensor, *x, &mask));
        mask_index = count;
        operands[count++] = {"mask", &mask, false};
    }
    if (with_options && settings->has_scale_tensor) {
        scale_index = count;
        operands[count++] = {"scale", &settings->scale_tensor, false, OperandShape::PerRow};
    }
    SoftmaxInfo out;
    OperandLayout layouts[4];
    SMX_RETURN_IF_ERROR(make_row_geometry(axis, operands, count, &out, layouts));
    if (!is_supported_dtype_pair(x->dtype, y->dtype)) {
        return fail(SMX_STATUS_NOT_SUPPORTED_DTYPE_PAIR, "dtype pair x {} -> y {} is not supported: {}",
                    dtype_name(x->dtype), dtype_name(y->dtype), kSupportedDtypePairs);
    }
    out.mode = static_cast<smxSoftmaxMode_t>(mode);
    out.x_dtype = x->dtype;
    out.y_dtype = y->dtype;
    out.x = layouts[0];
    out.y = layouts[1];
    out.same_layout = same_layout(*x, *y);
    if (with_options) {
        SoftmaxOptions& options = out.options;
        if (scale_index >= 0) {
            options.scale_kind = ScaleKind::PerRow;
            options.scale_layout = layouts[scale_index];
        } else if (settings->scale != 1.0) {
            options.scale_kind = ScaleKind::Scalar;
            options.scale = settings->scale;
        }
        if (mask_index >= 0) {
            options.mask_dtype = mask.dtype;
            options.mask_kind = mask.dtype == SMX_DTYPE_BOOL ? MaskKind::Keep : MaskKind::Additive;
            options.mask_layout = layouts[mask_index];
        }
        if (settings->causal) {
            options.causal = true;
            options.causal_offset = settings->causal_offset;
            bool query_strides_one = true;
            for (int k = 0; k < count && out.ndim >= 2; ++k) {
                query_strides_one = query_strides_one && operands[k].tensor->strides[out.ndim - 2] == 1;
            }
            SMX_RETURN_IF_ERROR(make_causal(out, query_strides_one, &options));
        }
        options.masked_rows = settings->masked_rows;
        options.batch_invariant = settings->batch_invariant;
    }
    *info = out;
    return SMX_STATUS_SUCCESS;
}

std::string describe(const SoftmaxInfo& info) {
    const NamedLayout operands[] = {{"x", &info.x}, {"y", &info.y}};
    return fmt::format("{} {}->{} shape {} axis {}: {}", info.is_log() ? "log_softmax" : "softmax",
                       dtype_name(info.x_dtype), dtype_name(info.y_dtype), format_dims(info.shape, info.ndim), info.axis,
                       describe_geometry(info, operands, 2)) +
           describe(info.options);
}

smxStatus_t check_forward_pointers(const SoftmaxInfo& info, const void* y, const void* x) {
    return check_forward_pointers(info, y, x, nullptr, nullptr);
}

smxStatus_t check_forward_pointers(const SoftmaxInfo& info, const void* y, const void* x, const void* scale,
                                   const void* mask) {
    const SoftmaxOptions& options = info.options;
    if (options.needs_scale_data() && scale == nullptr) {
        return fail(SMX_STATUS_BAD_PARAM_NULL_POINTER,
                    "scale is NULL but the descriptor has a per-row scale (smxSoftmaxForwardWithOptions takes its data)");
    }
    if (options.needs_mask_data() && mask == nullptr) {
        return fail(SMX_STATUS_BAD_PARAM_NULL_POINTER,
                    "mask is NULL but the descriptor has a mask (smxSoftmaxForwardWithOptions takes its data)");
    }
    if (!options.needs_scale_data() && scale != nullptr) {
        return fail(SMX_STATUS_BAD_PARAM, "scale is not NULL but the descriptor has no per-row scale");
    }
    if (!options.needs_mask_data() && mask != nullptr) {
        return fail(SMX_STATUS_BAD_PARAM, "mask is not NULL but the descriptor has no mask");
    }
    OperandPointer operands[4] = {{"x", x, info.x_dtype, &info.x, false, -1, false},
                                  {"y", y, info.y_dtype, &info.y, true, 0, info.same_layout}};
    int count = 2;
    if (mask != nullptr) operands[count++] = {"mask", mask, options.mask_dtype, &options.mask_layout, false, -1, false};
    if (scale != nullptr) operands[count++] = {"scale", scale, SMX_DTYPE_F32, &options.scale_layout, false, -1, false};
    return check_operand_pointers(operands, count);
}

}  // namespace smx
