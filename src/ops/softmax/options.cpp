// options.cpp - the smxSoftmaxOptions_t entry points (each setter checks what it can alone; the rest is
// checked against x when a descriptor is made), the mask's broadcast and the options' text.
#include "ops/softmax/options.hpp"

#include <cmath>
#include <memory>

#include "core/api_guard.hpp"
#include "core/dtype.hpp"
#include "core/enum_value.hpp"
#include "core/error.hpp"

namespace smx {

smxStatus_t broadcast_mask(const smxTensorDescriptor& mask, const smxTensorDescriptor& x, smxTensorDescriptor* out) {
    if (mask.ndim > x.ndim) {
        return fail(SMX_STATUS_BAD_PARAM_NDIM, "mask shape {} has more dims than x shape {}: it cannot broadcast to x",
                    format_dims(mask.shape, mask.ndim), format_dims(x.shape, x.ndim));
    }
    smxTensorDescriptor broadcast = mask;
    broadcast.ndim = x.ndim;
    broadcast.numel = x.numel;
    const int lead = x.ndim - mask.ndim;  // NumPy aligns the trailing dims
    for (int i = 0; i < x.ndim; ++i) {
        const int m = i - lead;
        const std::int64_t size = m >= 0 ? mask.shape[m] : 1;
        if (size != x.shape[i] && size != 1) {
            return fail(SMX_STATUS_BAD_PARAM_SHAPE,
                        "mask shape {} does not broadcast to x shape {}: mask dim {} has size {}, x's {} (each must "
                        "match or be 1)",
                        format_dims(mask.shape, mask.ndim), format_dims(x.shape, x.ndim), m, size, x.shape[i]);
        }
        broadcast.shape[i] = x.shape[i];
        broadcast.strides[i] = size == 1 ? 0 : mask.strides[m];
    }
    *out = broadcast;
    return SMX_STATUS_SUCCESS;
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

smxStatus_t add_option_operands(const SoftmaxOptionSettings* settings, const smxTensorDescriptor& x,
                                OptionOperands* option_operands, OperandSpec* operands, int* count) {
    if (!any_option(settings)) return SMX_STATUS_SUCCESS;
    option_operands->settings = settings;
    if (settings->has_mask) {
        SMX_RETURN_IF_ERROR(broadcast_mask(settings->mask_tensor, x, &option_operands->mask));
        option_operands->mask_index = *count;
        operands[(*count)++] = {"mask", &option_operands->mask, false};
    }
    if (settings->has_scale_tensor) {
        option_operands->scale_index = *count;
        operands[(*count)++] = {"scale", &settings->scale_tensor, false, OperandShape::PerRow};
    }
    return SMX_STATUS_SUCCESS;
}

smxStatus_t make_options(const OptionOperands& option_operands, const RowGeometry& geometry,
                         const OperandSpec* operands, const OperandLayout* layouts, int count, SoftmaxOptions* options) {
    const SoftmaxOptionSettings* settings = option_operands.settings;
    if (settings == nullptr) return SMX_STATUS_SUCCESS;
    if (option_operands.scale_index >= 0) {
        options->scale_kind = ScaleKind::PerRow;
        options->scale_layout = layouts[option_operands.scale_index];
    } else if (settings->scale != 1.0) {
        options->scale_kind = ScaleKind::Scalar;
        options->scale = settings->scale;
    }
    if (option_operands.mask_index >= 0) {
        options->mask_dtype = option_operands.mask.dtype;
        options->mask_kind = option_operands.mask.dtype == SMX_DTYPE_BOOL ? MaskKind::Keep : MaskKind::Additive;
        options->mask_layout = layouts[option_operands.mask_index];
    }
    if (settings->causal) {
        options->causal = true;
        options->causal_offset = settings->causal_offset;
        bool query_strides_one = true;
        for (int k = 0; k < count && geometry.ndim >= 2; ++k) {
            query_strides_one = query_strides_one && operands[k].tensor->strides[geometry.ndim - 2] == 1;
        }
        SMX_RETURN_IF_ERROR(make_causal(geometry, query_strides_one, options));
    }
    options->masked_rows = settings->masked_rows;
    options->batch_invariant = settings->batch_invariant;
    return SMX_STATUS_SUCCESS;
}

smxStatus_t add_option_pointers(const SoftmaxOptions& options, const void* scale, const void* mask, const char* call,
                                OperandPointer* operands, int* count) {
    if (options.needs_scale_data() && scale == nullptr) {
        return fail(SMX_STATUS_BAD_PARAM_NULL_POINTER, "scale is NULL but the descriptor has a per-row scale ({} takes its data)",
                    call);
    }
    if (options.needs_mask_data() && mask == nullptr) {
        return fail(SMX_STATUS_BAD_PARAM_NULL_POINTER, "mask is NULL but the descriptor has a mask ({} takes its data)", call);
    }
    if (!options.needs_scale_data() && scale != nullptr) {
        return fail(SMX_STATUS_BAD_PARAM, "scale is not NULL but the descriptor has no per-row scale");
    }
    if (!options.needs_mask_data() && mask != nullptr) {
        return fail(SMX_STATUS_BAD_PARAM, "mask is not NULL but the descriptor has no mask");
    }
    if (mask != nullptr) operands[(*count)++] = {"mask", mask, options.mask_dtype, &options.mask_layout, false, -1, false};
    if (scale != nullptr) operands[(*count)++] = {"scale", scale, SMX_DTYPE_F32, &options.scale_layout, false, -1, false};
    return SMX_STATUS_SUCCESS;
}

std::string describe(const SoftmaxOptions& options) {
    if (!options.any()) return {};
    std::string text;
    const auto add = [&text](const std::string& item) { text += (text.empty() ? " options=" : ",") + item; };
    if (options.scale_kind == ScaleKind::Scalar) add(fmt::format("scale({})", options.scale));
    if (options.scale_kind == ScaleKind::PerRow) add("scale(per-row)");
    if (options.mask_kind == MaskKind::Keep) add("mask(keep)");
    if (options.mask_kind == MaskKind::Additive) add(fmt::format("mask(additive {})", dtype_name(options.mask_dtype)));
    if (options.causal) add(fmt::format("causal({})", options.causal_offset));
    if (options.masked_rows == SMX_MASKED_ROWS_ZERO) add("masked_rows=zero");
    if (options.batch_invariant) add("batch_invariant");
    return text;
}

namespace {

// A 0 or 1 flag argument; anything else is SMX_STATUS_BAD_PARAM_MODE.
smxStatus_t check_flag(int value, const char* name) {
    if (value == 0 || value == 1) return SMX_STATUS_SUCCESS;
    return fail(SMX_STATUS_BAD_PARAM_MODE, "{} must be 0 or 1, not {}", name, value);
}

smxStatus_t set_scale_tensor(smxSoftmaxOptions_t options, smxTensorDescriptor_t scale) {
    SMX_RETURN_IF_ERROR(check_live(options, "options"));
    if (scale == nullptr) {
        options->settings.has_scale_tensor = false;
        options->settings.scale = 1.0;
        return SMX_STATUS_SUCCESS;
    }
    SMX_RETURN_IF_ERROR(check_live(scale, "scaleDesc"));
    if (scale->dtype != SMX_DTYPE_F32) {
        return fail(SMX_STATUS_NOT_SUPPORTED_DTYPE_PAIR, "a per-row scale is f32, not {}", dtype_name(scale->dtype));
    }
    options->settings.has_scale_tensor = true;
    options->settings.scale_tensor = *scale;
    return SMX_STATUS_SUCCESS;
}

smxStatus_t set_mask(smxSoftmaxOptions_t options, smxTensorDescriptor_t mask) {
    SMX_RETURN_IF_ERROR(check_live(options, "options"));
    if (mask == nullptr) {
        options->settings.has_mask = false;
        return SMX_STATUS_SUCCESS;
    }
    SMX_RETURN_IF_ERROR(check_live(mask, "maskDesc"));
    if (mask->dtype != SMX_DTYPE_BOOL && !is_floating_dtype(mask->dtype)) {
        return fail(SMX_STATUS_NOT_SUPPORTED_DTYPE_PAIR,
                    "a mask is bool (keep) or floating (additive: f16, bf16, f32, f64), not {}",
                    dtype_name(mask->dtype));
    }
    options->settings.has_mask = true;
    options->settings.mask_tensor = *mask;
    return SMX_STATUS_SUCCESS;
}

}  // namespace
}  // namespace smx

extern "C" {

SMX_API smxStatus_t smxCreateSoftmaxOptions(smxSoftmaxOptions_t* options) {
    return smx::guard_api("smxCreateSoftmaxOptions", [&] {
        if (options == nullptr) return smx::fail(SMX_STATUS_BAD_PARAM_NULL_POINTER, "options (the output pointer) is NULL");
        *options = nullptr;
        *options = std::make_unique<smxSoftmaxOptions>().release();
        return SMX_STATUS_SUCCESS;
    });
}

SMX_API smxStatus_t smxDestroySoftmaxOptions(smxSoftmaxOptions_t options) {
    return smx::destroy_live(options, "options");
}

SMX_API smxStatus_t smxSetSoftmaxScale(smxSoftmaxOptions_t options, double scale) {
    SMX_RETURN_IF_ERROR(smx::check_live(options, "options"));
    options->settings.has_scale_tensor = false;
    options->settings.scale = scale;
    return SMX_STATUS_SUCCESS;
}

SMX_API smxStatus_t smxSetSoftmaxScaleTensor(smxSoftmaxOptions_t options, smxTensorDescriptor_t scaleDesc) {
    return smx::set_scale_tensor(options, scaleDesc);
}

SMX_API smxStatus_t smxSetSoftmaxMask(smxSoftmaxOptions_t options, smxTensorDescriptor_t maskDesc) {
    return smx::set_mask(options, maskDesc);
}

SMX_API smxStatus_t smxSetSoftmaxCausal(smxSoftmaxOptions_t options, int enabled, int64_t offset) {
    SMX_RETURN_IF_ERROR(smx::check_live(options, "options"));
    SMX_RETURN_IF_ERROR(smx::check_flag(enabled, "causal's enabled"));
    options->settings.causal = enabled == 1;
    options->settings.causal_offset = offset;
    return SMX_STATUS_SUCCESS;
}

SMX_API smxStatus_t smxSetSoftmaxMaskedRows(smxSoftmaxOptions_t options, smxMaskedRows_t maskedRows) {
    SMX_RETURN_IF_ERROR(smx::check_live(options, "options"));
    const int value = smx::raw_enum_value(maskedRows);
    if (value != SMX_MASKED_ROWS_NAN && value != SMX_MASKED_ROWS_ZERO) {
        return smx::fail(SMX_STATUS_BAD_PARAM_MODE,
                         "masked rows {} is not an smxMaskedRows_t (SMX_MASKED_ROWS_NAN=0, SMX_MASKED_ROWS_ZERO=1)",
                         value);
    }
    options->settings.masked_rows = static_cast<smxMaskedRows_t>(value);
    return SMX_STATUS_SUCCESS;
}

SMX_API smxStatus_t smxSetSoftmaxBatchInvariant(smxSoftmaxOptions_t options, int enabled) {
    SMX_RETURN_IF_ERROR(smx::check_live(options, "options"));
    SMX_RETURN_IF_ERROR(smx::check_flag(enabled, "batch invariance's enabled"));
    options->settings.batch_invariant = enabled == 1;
    return SMX_STATUS_SUCCESS;
}

}  // extern "C"
