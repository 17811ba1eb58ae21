// info.cpp - validation of a softmax problem: its mode and dtypes here, its operands' geometry in
// ops/common/row_problem.cpp.
#include "ops/softmax/info.hpp"

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "core/tensor.hpp"

namespace smx {

smxStatus_t make_softmax_info(int mode, int axis, const smxTensorDescriptor* y, const smxTensorDescriptor* x,
                              SoftmaxInfo* info) {
    if (mode != SMX_SOFTMAX && mode != SMX_LOG_SOFTMAX) {
        return fail(SMX_STATUS_BAD_PARAM_MODE, "mode {} is not an smxSoftmaxMode_t (SMX_SOFTMAX=1, SMX_LOG_SOFTMAX=2)",
                    mode);
    }
    const OperandSpec operands[] = {{"x", x, false}, {"y", y, true}};
    SoftmaxInfo out;
    OperandLayout layouts[2];
    SMX_RETURN_IF_ERROR(make_row_geometry(axis, operands, 2, &out, layouts));
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
    *info = out;
    return SMX_STATUS_SUCCESS;
}

std::string describe(const SoftmaxInfo& info) {
    std::string text = fmt::format("{} {}->{} shape {} axis {}: {} rows={} row_len={} axis_stride x={} y={}",
                                   info.is_log() ? "log_softmax" : "softmax", dtype_name(info.x_dtype),
                                   dtype_name(info.y_dtype), format_dims(info.shape, info.ndim), info.axis,
                                   layout_name(info.layout), info.rows, info.row_len, info.x.axis_stride,
                                   info.y.axis_stride);
    switch (info.layout) {
        case RowLayout::Rows:
            text += fmt::format(" row_stride x={} y={}", info.x.row_stride, info.y.row_stride);
            break;
        case RowLayout::Spatial:
            text += fmt::format(" outer={} inner={} outer_stride x={} y={}", info.outer, info.inner,
                                info.x.outer_stride, info.y.outer_stride);
            break;
        case RowLayout::General:
            text += fmt::format(" index {} x_strides {} y_strides {}", format_dims(info.index_shape, info.index_ndim),
                                format_dims(info.x.index_strides, info.index_ndim),
                                format_dims(info.y.index_strides, info.index_ndim));
            break;
    }
    return text;
}

smxStatus_t check_forward_pointers(const SoftmaxInfo& info, const void* y, const void* x) {
    const OperandPointer operands[] = {{"x", x, info.x_dtype, &info.x, false, -1, false},
                                       {"y", y, info.y_dtype, &info.y, true, 0, info.same_layout}};
    return check_operand_pointers(operands, 2);
}

}  // namespace smx
