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

smxStatus_t make_softmax_info(int mode, int axis, const smxTensorDescriptor* y, const smxTensorDescriptor* x,
                              const SoftmaxOptionSettings* settings, SoftmaxInfo* info) {
    if (mode != SMX_SOFTMAX && mode != SMX_LOG_SOFTMAX) {
        return fail(SMX_STATUS_BAD_PARAM_MODE, "mode {} is not an smxSoftmaxMode_t (SMX_SOFTMAX=1, SMX_LOG_SOFTMAX=2)",
                    mode);
    }
    // Operands: x, y, then the mask (broadcast to x's shape) and the per-row scale where set.
    OperandSpec operands[4] = {{"x", x, false}, {"y", y, true}};
    int count = 2;
    OptionOperands option_operands;
    if (x != nullptr && y != nullptr) {  // else make_row_geometry names the NULL one
        SMX_RETURN_IF_ERROR(add_option_operands(settings, *x, &option_operands, operands, &count));
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
    SMX_RETURN_IF_ERROR(make_options(option_operands, out, operands, layouts, count, &out.options));
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

smxStatus_t forward_operands(const SoftmaxInfo& info, const void* y, const void* x, const void* scale,
                             const void* mask, OperandPointer (&operands)[kMaxForwardOperands], int* count) {
    operands[0] = {"x", x, info.x_dtype, &info.x, false, -1, false};
    operands[1] = {"y", y, info.y_dtype, &info.y, true, 0, info.same_layout};
    *count = 2;
    return add_option_pointers(info.options, scale, mask, "smxSoftmaxForwardWithOptions", operands, count);
}

}  // namespace smx
