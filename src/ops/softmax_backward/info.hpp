// info.hpp - a softmax or log-softmax backward problem (dy, y -> dx along an axis), validated once and reduced
// to the canonical rows every backend runs (ops/common/row_problem.hpp).
//   softmax:     dx = y * (dy - sum(dy * y))
//   log-softmax: dx = dy - exp(y) * sum(dy)
#pragma once

#include <array>
#include <string>

#include "ops/common/row_problem.hpp"
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

    bool is_log() const { return mode == SMX_LOG_SOFTMAX; }
};

// Validates (mode, axis, dx, dy, y) and fills `info`. `mode` is the raw value a caller passed; the tensors are
// live descriptors or NULL (refused). On failure returns the status and sets the last error.
smxStatus_t make_softmax_backward_info(int mode, int axis, const smxTensorDescriptor* dx,
                                       const smxTensorDescriptor* dy, const smxTensorDescriptor* y,
                                       SoftmaxBackwardInfo* info);

// One line for logs.
std::string describe(const SoftmaxBackwardInfo& info);

// A call's three operands, in the order the checks name them: dy, y, then dx (which may be in place with dy).
std::array<OperandPointer, 3> backward_operands(const SoftmaxBackwardInfo& info, const void* dx, const void* dy,
                                                const void* y);

// Call-time check of the actual pointers: dx may be in place with dy (same pointer, same layout) and must meet
// no other operand's bytes; every pointer aligned to its element size.
smxStatus_t check_backward_pointers(const SoftmaxBackwardInfo& info, const void* dx, const void* dy, const void* y);

}  // namespace smx
