// info.hpp - a softmax problem (x -> y along an axis), validated once and reduced to the canonical rows every
// backend runs (ops/common/row_problem.hpp).
#pragma once

#include <string>

#include "ops/common/row_problem.hpp"
#include "ops/softmax/options.hpp"
#include "smx/smx.h"

namespace smx {

struct SoftmaxInfo : RowGeometry {
    smxSoftmaxMode_t mode = SMX_SOFTMAX;
    smxDataType_t x_dtype = SMX_DTYPE_F32;
    smxDataType_t y_dtype = SMX_DTYPE_F32;
    OperandLayout x;
    OperandLayout y;
    // x and y have identical strides and element size: y == x is a legal in-place call.
    bool same_layout = false;
    // Scale, mask, causal, masked rows, batch invariance (ops/softmax/options.hpp); none by default.
    SoftmaxOptions options;

    bool is_log() const { return mode == SMX_LOG_SOFTMAX; }
};

// Validates (mode, axis, y, x) and fills `info`. `mode` is the raw value a caller passed; y and x are live
// descriptors or NULL (refused). On failure returns the status and sets the last error.
smxStatus_t make_softmax_info(int mode, int axis, const smxTensorDescriptor* y, const smxTensorDescriptor* x,
                              SoftmaxInfo* info);

// The same with options (`settings` NULL: none): the mask and per-row scale join x and y as operands of the row
// geometry, and each option is checked against x.
smxStatus_t make_softmax_info(int mode, int axis, const smxTensorDescriptor* y, const smxTensorDescriptor* x,
                              const SoftmaxOptionSettings* settings, SoftmaxInfo* info);

// One line for logs: "softmax f16->f32 shape [8,1024] axis 1: rows rows=8 row_len=1024 ...".
std::string describe(const SoftmaxInfo& info);

// A call's operands, in the order the checks name them: x, y (which may be in place with x), then the options'
// mask and scale where the problem has them. Fails where `scale` or `mask` is NULL and the problem needs its
// data, or not NULL and it has no such option.
constexpr int kMaxForwardOperands = 4;
smxStatus_t forward_operands(const SoftmaxInfo& info, const void* y, const void* x, const void* scale,
                             const void* mask, OperandPointer (&operands)[kMaxForwardOperands], int* count);

}  // namespace smx
