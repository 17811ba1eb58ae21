// info.cpp - validation of a softmax backward problem: its mode and dtypes here, its operands' geometry in
// ops/common/row_problem.cpp.
#include "ops/softmax_backward/info.hpp"

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "core/tensor.hpp"

namespace smx {

smxStatus_t make_softmax_backward_info(int mode, int axis, const smxTensorDescriptor* dx,
                                       const smxTensorDescriptor* dy, const smxTensorDescriptor* y,
                                       SoftmaxBackwardInfo* info) {
    return make_softmax_backward_info(mode, axis, dx, dy, y, nullptr, info);
}

smxStatus_t make_softmax_backward_info(int mode, int axis, const smxTensorDescriptor* dx,
                                       const smxTensorDescriptor* dy, const smxTensorDescriptor* y,
                                       const SoftmaxOptionSettings* settings, SoftmaxBackwardInfo* info) {
    if (mode != SMX_SOFTMAX && mode != SMX_LOG_SOFTMAX) {
        return fail(SMX_STATUS_BAD_PARAM_MODE, "mode {} is not an smxSoftmaxMode_t (SMX_SOFTMAX=1, SMX_LOG_SOFTMAX=2)",
                    mode);
    }
    // Operands: dy, y, dx, then the mask (broadcast to dx's shape) and the per-row scale where set.
    OperandSpec operands[5] = {{"dy", dy, false}, {"y", y, false}, {"dx", dx, true}};
    int count = 3;
    OptionOperands option_operands;
    if (dy != nullptr && y != nullptr && dx != nullptr) {  // else make_row_geometry names the NULL one
        SMX_RETURN_IF_ERROR(add_option_operands(settings, *dx, &option_operands, operands, &count));
    }
    SoftmaxBackwardInfo out;
    OperandLayout layouts[5];
    SMX_RETURN_IF_ERROR(make_row_geometry(axis, operands, count, &out, layouts));
    // BOOL describes masks (softmax options), never a value this operator computes on.
    for (int k = 0; k < 3; ++k) {  // dy, y, dx
        if (!is_floating_dtype(operands[k].tensor->dtype)) {
            return fail(SMX_STATUS_NOT_SUPPORTED_DTYPE_PAIR, "{} is {}: dx, dy and y must each be one of f16, bf16, f32, f64",
                        operands[k].name, dtype_name(operands[k].tensor->dtype));
        }
    }
    // dy is the gradient of y, so it comes in y's dtype (PyTorch's backward requires the same).
    if (dy->dtype != y->dtype) {
        return fail(SMX_STATUS_NOT_SUPPORTED_DTYPE_PAIR,
                    "dy is {} but y is {}: dy and y must share one dtype (the forward's output dtype); dx may be any "
                    "of f16, bf16, f32, f64",
                    dtype_name(dy->dtype), dtype_name(y->dtype));
    }
    out.mode = static_cast<smxSoftmaxMode_t>(mode);
    out.dy_dtype = dy->dtype;
    out.y_dtype = y->dtype;
    out.dx_dtype = dx->dtype;
    out.dy = layouts[0];
    out.y = layouts[1];
    out.dx = layouts[2];
    out.dx_same_layout_as_dy = same_layout(*dx, *dy);
    SMX_RETURN_IF_ERROR(make_options(option_operands, out, operands, layouts, count, &out.options));
    *info = out;
    return SMX_STATUS_SUCCESS;
}

std::string describe(const SoftmaxBackwardInfo& info) {
    const NamedLayout operands[] = {{"dy", &info.dy}, {"y", &info.y}, {"dx", &info.dx}};
    return fmt::format("{} backward (dy {}, y {})->dx {} shape {} axis {}: {}", info.is_log() ? "log_softmax" : "softmax",
                       dtype_name(info.dy_dtype), dtype_name(info.y_dtype), dtype_name(info.dx_dtype),
                       format_dims(info.shape, info.ndim), info.axis, describe_geometry(info, operands, 3)) +
           describe(info.options);
}

smxStatus_t backward_operands(const SoftmaxBackwardInfo& info, const void* dx, const void* dy, const void* y,
                              const void* scale, const void* mask, OperandPointer (&operands)[kMaxBackwardOperands],
                              int* count) {
    // dx may replace dy in place (the backends read each dy element before writing its dx), never y: a kernel
    // holding only part of a row may write some of its dx before another thread has read the y it needs.
    operands[0] = {"dy", dy, info.dy_dtype, &info.dy, false, -1, false};
    operands[1] = {"y", y, info.y_dtype, &info.y, false, -1, false};
    operands[2] = {"dx", dx, info.dx_dtype, &info.dx, true, 0, info.dx_same_layout_as_dy};
    *count = 3;
    return add_option_pointers(info.options, scale, mask, "smxSoftmaxBackwardWithOptions", operands, count);
}

}  // namespace smx
