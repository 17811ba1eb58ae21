// info.cpp - validation of the log-probability problems: their dtypes and options here, their operands'
// geometry in ops/common/row_problem.cpp.
#include "ops/logprobs/info.hpp"

#include <cmath>
#include <cstring>

#include "core/dtype.hpp"
#include "core/enum_value.hpp"
#include "core/error.hpp"
#include "core/tensor.hpp"

namespace smx {
namespace {

// The largest options size accepted: a guard against an uninitialized `size`, far above any version's.
constexpr std::size_t kMaxOptionsBytes = 4096;

// The options a caller passed (NULL: defaults), read as far as its `size` says; bytes past what this
// library knows must be zero, so an option it cannot honour is never silently dropped.
smxStatus_t read_options(const smxCrossEntropyOptions_t* options, smxCrossEntropyOptions_t* out) {
    *out = smxCrossEntropyOptions_t SMX_CROSS_ENTROPY_OPTIONS_INIT;
    if (options == nullptr) return SMX_STATUS_SUCCESS;
    const std::size_t size = options->size;
    if (size < sizeof(smxCrossEntropyOptions_t) || size > kMaxOptionsBytes) {
        return fail(SMX_STATUS_BAD_PARAM,
                    "options->size {} is not the size of an smxCrossEntropyOptions_t ({} to {} bytes; set it to "
                    "sizeof(smxCrossEntropyOptions_t))",
                    size, sizeof(smxCrossEntropyOptions_t), kMaxOptionsBytes);
    }
    const auto* bytes = reinterpret_cast<const unsigned char*>(options);
    for (std::size_t i = sizeof(smxCrossEntropyOptions_t); i < size; ++i) {
        if (bytes[i] != 0) {
            return fail(SMX_STATUS_NOT_SUPPORTED,
                        "options byte {} is set, but this library knows only the first {} bytes of "
                        "smxCrossEntropyOptions_t (an option of a newer version)",
                        i, sizeof(smxCrossEntropyOptions_t));
        }
    }
    std::memcpy(out, options, sizeof *out);
    return SMX_STATUS_SUCCESS;
}

}  // namespace

smxStatus_t check_floating(const char* name, smxDataType_t dtype) {
    if (is_floating_dtype(dtype)) return SMX_STATUS_SUCCESS;
    return fail(SMX_STATUS_NOT_SUPPORTED_DTYPE_PAIR, "{} dtype {} is not supported: {} must be f16, bf16, f32 or f64",
                name, dtype_name(dtype), name);
}

smxStatus_t check_index(const char* name, smxDataType_t dtype) {
    if (is_index_dtype(dtype)) return SMX_STATUS_SUCCESS;
    return fail(SMX_STATUS_NOT_SUPPORTED_DTYPE_PAIR, "{} dtype {} is not supported: {} must be i32 or i64", name,
                dtype_name(dtype), name);
}

smxStatus_t check_statistics(const char* name, smxDataType_t dtype, const char* x_name, smxDataType_t x_dtype) {
    if (dtype == statistics_dtype(x_dtype)) return SMX_STATUS_SUCCESS;
    return fail(SMX_STATUS_NOT_SUPPORTED_DTYPE_PAIR, "{} dtype {} with {} {} is not supported: {} must be {}", name,
                dtype_name(dtype), x_name, dtype_name(x_dtype), name, dtype_name(statistics_dtype(x_dtype)));
}

// ---- logsumexp ------------------------------------------------------------------------------------------

smxStatus_t make_logsumexp_info(int axis, const smxTensorDescriptor* out, const smxTensorDescriptor* x,
                                LogsumexpInfo* info) {
    const OperandSpec operands[] = {{"x", x, false}, {"out", out, true, OperandShape::PerRow}};
    LogsumexpInfo result;
    OperandLayout layouts[2];
    SMX_RETURN_IF_ERROR(make_row_geometry(axis, operands, 2, &result, layouts));
    SMX_RETURN_IF_ERROR(check_floating("x", x->dtype));
    SMX_RETURN_IF_ERROR(check_statistics("out", out->dtype, "x", x->dtype));
    result.x_dtype = x->dtype;
    result.out_dtype = out->dtype;
    result.x = layouts[0];
    result.out = layouts[1];
    *info = result;
    return SMX_STATUS_SUCCESS;
}

std::string describe(const LogsumexpInfo& info) {
    const NamedLayout operands[] = {{"x", &info.x}, {"out", &info.out}};
    return fmt::format("logsumexp {}->{} shape {} axis {}: {}", dtype_name(info.x_dtype), dtype_name(info.out_dtype),
                       format_dims(info.shape, info.ndim), info.axis, describe_geometry(info, operands, 2));
}

smxStatus_t check_logsumexp_pointers(const LogsumexpInfo& info, const void* out, const void* x,
                                     TouchedOperands& operands) {
    SMX_RETURN_IF_ERROR(operands.add(info.numel, {"x", x, info.x_dtype, &info.x, false, -1, false}));
    SMX_RETURN_IF_ERROR(operands.add(info.rows, {"out", out, info.out_dtype, &info.out, true, -1, false}));
    return operands.check();
}

// ---- log_softmax_gather ---------------------------------------------------------------------------------

smxStatus_t make_log_softmax_gather_info(int axis, const smxTensorDescriptor* out, const smxTensorDescriptor* x,
                                         const smxTensorDescriptor* index, LogSoftmaxGatherInfo* info) {
    const OperandSpec operands[] = {{"x", x, false},
                                    {"index", index, false, OperandShape::Gathered},
                                    {"out", out, true, OperandShape::Gathered}};
    LogSoftmaxGatherInfo result;
    OperandLayout layouts[3];
    SMX_RETURN_IF_ERROR(make_row_geometry(axis, operands, 3, &result, layouts));
    if (layouts[2].axis_len != layouts[1].axis_len) {
        return fail(SMX_STATUS_BAD_PARAM_SHAPE, "out shape {} != index shape {}", format_dims(out->shape, out->ndim),
                    format_dims(index->shape, index->ndim));
    }
    SMX_RETURN_IF_ERROR(check_floating("x", x->dtype));
    SMX_RETURN_IF_ERROR(check_index("index", index->dtype));
    SMX_RETURN_IF_ERROR(check_statistics("out", out->dtype, "x", x->dtype));
    result.x_dtype = x->dtype;
    result.index_dtype = index->dtype;
    result.out_dtype = out->dtype;
    result.gathered = layouts[1].axis_len;
    result.x = layouts[0];
    result.index = layouts[1];
    result.out = layouts[2];
    *info = result;
    return SMX_STATUS_SUCCESS;
}

std::string describe(const LogSoftmaxGatherInfo& info) {
    const NamedLayout operands[] = {{"x", &info.x}, {"index", &info.index}, {"out", &info.out}};
    return fmt::format("log_softmax_gather {}[{}]->{} shape {} axis {} K={}: {}", dtype_name(info.x_dtype),
                       dtype_name(info.index_dtype), dtype_name(info.out_dtype), format_dims(info.shape, info.ndim),
                       info.axis, info.gathered, describe_geometry(info, operands, 3));
}

smxStatus_t check_log_softmax_gather_pointers(const LogSoftmaxGatherInfo& info, const void* out, const void* x,
                                              const void* index, TouchedOperands& operands) {
    SMX_RETURN_IF_ERROR(operands.add(info.numel, {"x", x, info.x_dtype, &info.x, false, -1, false}));
    const std::int64_t gathered = info.rows * info.gathered;
    SMX_RETURN_IF_ERROR(operands.add(gathered, {"index", index, info.index_dtype, &info.index, false, -1, false}));
    SMX_RETURN_IF_ERROR(operands.add(gathered, {"out", out, info.out_dtype, &info.out, true, -1, false}));
    return operands.check();
}

// ---- cross_entropy --------------------------------------------------------------------------------------

smxStatus_t make_cross_entropy_info(int axis, const smxCrossEntropyOptions_t* options,
                                    const smxTensorDescriptor* loss, const smxTensorDescriptor* lse,
                                    const smxTensorDescriptor* dlogits, const smxTensorDescriptor* logits,
                                    const smxTensorDescriptor* target, CrossEntropyInfo* info, const OperandSpec* extra,
                                    OperandLayout* extra_layout) {
    smxCrossEntropyOptions_t settings;
    SMX_RETURN_IF_ERROR(read_options(options, &settings));
    const int reduction = raw_enum_value(settings.reduction);
    if (reduction != SMX_REDUCTION_NONE && reduction != SMX_REDUCTION_SUM && reduction != SMX_REDUCTION_MEAN) {
        return fail(SMX_STATUS_BAD_PARAM_MODE,
                    "reduction {} is not an smxLossReduction_t (NONE=0, SUM=1, MEAN=2)", reduction);
    }
    if (!(settings.labelSmoothing >= 0.0 && settings.labelSmoothing <= 1.0)) {
        return fail(SMX_STATUS_BAD_PARAM, "labelSmoothing {} is outside [0, 1]", settings.labelSmoothing);
    }
    if (loss == nullptr) return fail(SMX_STATUS_BAD_PARAM_NULL_POINTER, "lossDesc is NULL");
    const bool reduced = reduction != SMX_REDUCTION_NONE;

    // The operands in a fixed order; the optional ones join the list only when given.
    enum { kLogits, kTarget, kLoss, kLse, kDlogits, kExtra, kCount };
    OperandSpec operands[kCount];
    int slot[kCount];
    int count = 0;
    const auto add = [&](int which, OperandSpec spec) {
        slot[which] = count;
        operands[count++] = spec;
    };
    add(kLogits, {"logits", logits, false});
    add(kTarget, {"target", target, false, OperandShape::PerRow});
    slot[kLoss] = slot[kLse] = slot[kDlogits] = slot[kExtra] = -1;
    if (!reduced) add(kLoss, {"loss", loss, true, OperandShape::PerRow});
    if (lse != nullptr) add(kLse, {"lse", lse, true, OperandShape::PerRow});
    if (dlogits != nullptr) add(kDlogits, {"dlogits", dlogits, true});
    if (extra != nullptr) add(kExtra, *extra);

    CrossEntropyInfo result;
    OperandLayout layouts[kCount];
    SMX_RETURN_IF_ERROR(make_row_geometry(axis, operands, count, &result, layouts));
    if (reduced && loss->numel != 1) {
        return fail(SMX_STATUS_BAD_PARAM_SHAPE, "loss shape {} holds {} elements; a reduced loss is one element",
                    format_dims(loss->shape, loss->ndim), loss->numel);
    }
    SMX_RETURN_IF_ERROR(check_floating("logits", logits->dtype));
    SMX_RETURN_IF_ERROR(check_index("target", target->dtype));
    SMX_RETURN_IF_ERROR(check_statistics("loss", loss->dtype, "logits", logits->dtype));
    if (lse != nullptr) SMX_RETURN_IF_ERROR(check_statistics("lse", lse->dtype, "logits", logits->dtype));
    if (dlogits != nullptr) SMX_RETURN_IF_ERROR(check_floating("dlogits", dlogits->dtype));

    result.reduction = static_cast<smxLossReduction_t>(reduction);
    result.ignore_index = settings.ignoreIndex;
    result.label_smoothing = settings.labelSmoothing;
    result.logits_dtype = logits->dtype;
    result.target_dtype = target->dtype;
    result.loss_dtype = loss->dtype;
    result.logits = layouts[slot[kLogits]];
    result.target = layouts[slot[kTarget]];
    if (reduced) {
        result.loss.axis_len = 1;
        result.loss.axis_stride = 0;  // one element at offset 0: every other field stays 0
    } else {
        result.loss = layouts[slot[kLoss]];
    }
    if (lse != nullptr) {
        result.has_lse = true;
        result.lse_dtype = lse->dtype;
        result.lse = layouts[slot[kLse]];
    }
    if (dlogits != nullptr) {
        result.has_dlogits = true;
        result.dlogits_dtype = dlogits->dtype;
        result.dlogits = layouts[slot[kDlogits]];
        result.dlogits_same_layout_as_logits = same_layout(*dlogits, *logits);
    }
    if (extra != nullptr) *extra_layout = layouts[slot[kExtra]];
    *info = result;
    return SMX_STATUS_SUCCESS;
}

std::string describe(const CrossEntropyInfo& info) {
    NamedLayout operands[5] = {{"logits", &info.logits}, {"target", &info.target}, {"loss", &info.loss}};
    int count = 3;
    if (info.has_lse) operands[count++] = {"lse", &info.lse};
    if (info.has_dlogits) operands[count++] = {"dlogits", &info.dlogits};
    static constexpr const char* kReductions[] = {"none", "sum", "mean"};
    return fmt::format(
        "cross_entropy {}[{}]->{}{}{} shape {} axis {} reduction={} ignore_index={} label_smoothing={}: {}",
        dtype_name(info.logits_dtype), dtype_name(info.target_dtype), dtype_name(info.loss_dtype),
        info.has_lse ? " +lse" : "", info.has_dlogits ? fmt::format(" +dlogits {}", dtype_name(info.dlogits_dtype)) : "",
        format_dims(info.shape, info.ndim), info.axis, kReductions[info.reduction], info.ignore_index,
        info.label_smoothing, describe_geometry(info, operands, count));
}

smxStatus_t check_cross_entropy_pointers(const CrossEntropyInfo& info, const void* loss, const void* lse,
                                         const void* dlogits, const void* logits, const void* target,
                                         TouchedOperands& operands) {
    // logits comes first: dlogits, touched only where logits is, names it as index 0 for in place.
    SMX_RETURN_IF_ERROR(operands.add(info.numel, {"logits", logits, info.logits_dtype, &info.logits, false, -1, false}));
    SMX_RETURN_IF_ERROR(operands.add(info.rows, {"target", target, info.target_dtype, &info.target, false, -1, false}));
    const std::int64_t loss_elements = info.reduced() ? 1 : info.rows;
    SMX_RETURN_IF_ERROR(operands.add(loss_elements, {"loss", loss, info.loss_dtype, &info.loss, true, -1, false}));
    if (info.has_lse) SMX_RETURN_IF_ERROR(operands.add(info.rows, {"lse", lse, info.lse_dtype, &info.lse, true, -1, false}));
    if (info.has_dlogits) {
        SMX_RETURN_IF_ERROR(operands.add(info.numel, {"dlogits", dlogits, info.dlogits_dtype, &info.dlogits, true, 0,
                                                      info.dlogits_same_layout_as_logits}));
    }
    return operands.check();
}

}  // namespace smx
