// info.hpp - a softmax or log-softmax backward problem (dy, y -> dx along an axis), validated once and reduced
// to the canonical rows every backend runs (ops/common/row_problem.hpp).
//   softmax:     dx = y * (dy - sum(dy * y))
//   log-softmax: dx = dy - exp(y) * sum(dy)
// With the forward's options (smx.h, smxCreateSoftmaxBackwardDescriptorWithOptions): the sums over the kept
// elements only, dx = scale * that at kept elements, 0 at excluded ones and, with masked rows zero, in rows
// whose forward had nothing to normalize.
#pragma once

#include <string>

#include "ops/common/row_problem.hpp"
#include "ops/softmax/options.hpp"
#include "smx/smx.h"

namespace smx {

struct SoftmaxBackwardInfo : RowGeometry {
    smxSoftmaxMode_t mode = SMX_SOFTMAX;
    smxDataType_t dy_dtype = SMX_DTYPE_F32;  // dy and y share one dtype (the forward's output dtype)
    smxDataType_t y_dtype = SMX_DTYPE_F32;
    smxDataType_t dx_dtype = SMX_DTYPE_F32;  // the forward's input dtype
    OperandLayout dy;
    OperandLayout y;
    OperandLayout dx;
    // dx and dy have identical strides and element size: dx == dy is a legal in-place call.
    bool dx_same_layout_as_dy = false;
    // The forward's options (ops/softmax/options.hpp): scale and mask operands checked against dx's shape.
    SoftmaxOptions options;

    bool is_log() const { return mode == SMX_LOG_SOFTMAX; }
};

// Validates (mode, axis, dx, dy, y) and fills `info`. `mode` is the raw value a caller passed; the tensors are
// live descriptors or NULL (refused). On failure returns the status and sets the last error.
smxStatus_t make_softmax_backward_info(int mode, int axis, const smxTensorDescriptor* dx,
                                       const smxTensorDescriptor* dy, const smxTensorDescriptor* y,
                                       SoftmaxBackwardInfo* info);

// The same for the forward made with options (`settings` NULL: none): the mask and per-row scale join dy, y and
// dx as operands of the row geometry, and each option is checked against dx's shape (the forward's x's).
smxStatus_t make_softmax_backward_info(int mode, int axis, const smxTensorDescriptor* dx,
                                       const smxTensorDescriptor* dy, const smxTensorDescriptor* y,
                                       const SoftmaxOptionSettings* settings, SoftmaxBackwardInfo* info);

// One line for logs.
std::string describe(const SoftmaxBackwardInfo& info);

// A call's operands, in the order the checks name them: dy, y, dx (which may be in place with dy), then the
// options' mask and scale where the problem has them. Fails where `scale` or `mask` is NULL and the problem
// needs its data, or not NULL and it has no such option.
constexpr int kMaxBackwardOperands = 5;
smxStatus_t backward_operands(const SoftmaxBackwardInfo& info, const void* dx, const void* dy, const void* y,
                              const void* scale, const void* mask, OperandPointer (&operands)[kMaxBackwardOperands],
                              int* count);

}  // namespace smx
