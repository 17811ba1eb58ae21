// info.hpp - the log-probability operators' problems, validated once and reduced to the canonical rows every
// backend runs (ops/common/row_problem.hpp):
//   logsumexp            x -> out                    out per row: log(sum(exp(x)))
//   log_softmax_gather   x, index -> out             out[k] = x[index[k]] - logsumexp(x), K per row
//   cross_entropy        logits, target -> loss (+ lse, dlogits)
// Each is one RowGeometry over x (or logits): per-row operands (out, target, lse, an unreduced loss) are
// OperandShape::PerRow, gathered ones (index, out) OperandShape::Gathered, so row r of the geometry names the
// same row in every operand; each operand's row start comes from its own OperandLayout as for softmax:
//   Rows     r * row_stride
//   Spatial  (r / inner) * outer_stride + r % inner
//   General  the multi-index of r over index_shape, dotted with index_strides
// and element j of the row (j < the operand's axis_len) sits axis_stride * j further on.
#pragma once

#include <cstdint>
#include <string>

#include "ops/common/row_problem.hpp"
#include "smx/smx.h"

namespace smx {

// The dtype of every floating result these operators write but dlogits: F64 for an F64 x, else F32.
inline smxDataType_t statistics_dtype(smxDataType_t x_dtype) {
    return x_dtype == SMX_DTYPE_F64 ? SMX_DTYPE_F64 : SMX_DTYPE_F32;
}

// Checks shared by every operator of log-probabilities (these and ops/vocab_parallel): each refuses with
// SMX_STATUS_NOT_SUPPORTED_DTYPE_PAIR, naming the operand.
smxStatus_t check_floating(const char* name, smxDataType_t dtype);  // f16, bf16, f32 or f64
smxStatus_t check_index(const char* name, smxDataType_t dtype);     // i32 or i64
// A result of the statistics dtype: f32, or f64 for an f64 x (named x_name).
smxStatus_t check_statistics(const char* name, smxDataType_t dtype, const char* x_name, smxDataType_t x_dtype);

// ---- logsumexp ------------------------------------------------------------------------------------------

struct LogsumexpInfo : RowGeometry {
    smxDataType_t x_dtype = SMX_DTYPE_F32;
    smxDataType_t out_dtype = SMX_DTYPE_F32;  // statistics_dtype(x_dtype)
    OperandLayout x;
    OperandLayout out;  // PerRow
};

// Validates (axis, out, x) and fills `info`. Tensors are live descriptors or NULL (refused). On failure returns
// the status and sets the last error.
smxStatus_t make_logsumexp_info(int axis, const smxTensorDescriptor* out, const smxTensorDescriptor* x,
                                LogsumexpInfo* info);

// One line for logs: "logsumexp f32->f32 shape [8,1024] axis 1: rows rows=8 row_len=1024 ...".
std::string describe(const LogsumexpInfo& info);

// The call-time pointer checks below collect the operands the call touches (those with elements) in
// `operands`, for the device's own check (cuda_check_operand_pointers) to follow.

// Call-time check of the actual pointers of the tensors the call touches: not NULL, aligned, and out meets no
// byte of x.
smxStatus_t check_logsumexp_pointers(const LogsumexpInfo& info, const void* out, const void* x,
                                     TouchedOperands& operands);

// ---- log_softmax_gather ---------------------------------------------------------------------------------

struct LogSoftmaxGatherInfo : RowGeometry {
    smxDataType_t x_dtype = SMX_DTYPE_F32;
    smxDataType_t index_dtype = SMX_DTYPE_I64;  // I32 or I64
    smxDataType_t out_dtype = SMX_DTYPE_F32;    // statistics_dtype(x_dtype)
    std::int64_t gathered = 0;                  // K, the indices per row (index.axis_len == out.axis_len == K)
    OperandLayout x;
    OperandLayout index;  // Gathered
    OperandLayout out;    // Gathered
};

// An index outside [0, row_len) writes this: no log-probability is +inf (they are <= 0 or NaN).
inline constexpr double kGatherOutOfRange = __builtin_huge_val();

// Validates (axis, out, x, index) and fills `info`. On failure returns the status and sets the last error.
smxStatus_t make_log_softmax_gather_info(int axis, const smxTensorDescriptor* out, const smxTensorDescriptor* x,
                                         const smxTensorDescriptor* index, LogSoftmaxGatherInfo* info);

std::string describe(const LogSoftmaxGatherInfo& info);

// Call-time check of the pointers of the tensors the call touches: not NULL, aligned, and out meets no byte of
// x or index.
smxStatus_t check_log_softmax_gather_pointers(const LogSoftmaxGatherInfo& info, const void* out, const void* x,
                                              const void* index, TouchedOperands& operands);

// ---- cross_entropy --------------------------------------------------------------------------------------

struct CrossEntropyInfo : RowGeometry {
    smxLossReduction_t reduction = SMX_REDUCTION_MEAN;
    std::int64_t ignore_index = -100;
    double label_smoothing = 0.0;  // in [0, 1]

    smxDataType_t logits_dtype = SMX_DTYPE_F32;
    smxDataType_t target_dtype = SMX_DTYPE_I64;   // I32 or I64
    smxDataType_t loss_dtype = SMX_DTYPE_F32;     // statistics_dtype(logits_dtype)
    smxDataType_t lse_dtype = SMX_DTYPE_F32;      // statistics_dtype(logits_dtype), where has_lse
    smxDataType_t dlogits_dtype = SMX_DTYPE_F32;  // any floating dtype, where has_dlogits
    bool has_lse = false;
    bool has_dlogits = false;

    OperandLayout logits;
    OperandLayout target;   // PerRow
    OperandLayout loss;     // PerRow for SMX_REDUCTION_NONE; else the one element at offset 0
    OperandLayout lse;      // PerRow, where has_lse
    OperandLayout dlogits;  // Full, where has_dlogits
    // dlogits and logits have identical strides and element size: dlogits == logits is a legal in-place call.
    bool dlogits_same_layout_as_logits = false;

    bool reduced() const { return reduction != SMX_REDUCTION_NONE; }
};

// Validates (axis, options, loss, lse, dlogits, logits, target) and fills `info`. `options` is the caller's
// struct or NULL (defaults); lse and dlogits may be NULL (not computed). `extra`, where not NULL, is one more
// operand of an operator built on this one (the vocabulary-parallel statistics): it joins the one row analysis
// and its layout goes to `extra_layout`; its dtype is the caller's to check. On failure returns the status
// and sets the last error.
smxStatus_t make_cross_entropy_info(int axis, const smxCrossEntropyOptions_t* options,
                                    const smxTensorDescriptor* loss, const smxTensorDescriptor* lse,
                                    const smxTensorDescriptor* dlogits, const smxTensorDescriptor* logits,
                                    const smxTensorDescriptor* target, CrossEntropyInfo* info,
                                    const OperandSpec* extra = nullptr, OperandLayout* extra_layout = nullptr);

std::string describe(const CrossEntropyInfo& info);

// Call-time check of the pointers of the tensors the call touches (lse and dlogits only where the info has
// them; a reduced loss always): not NULL, aligned; loss, lse and dlogits meet no other operand's bytes, except
// dlogits == logits in place with the same layout.
smxStatus_t check_cross_entropy_pointers(const CrossEntropyInfo& info, const void* loss, const void* lse,
                                         const void* dlogits, const void* logits, const void* target,
                                         TouchedOperands& operands);

}  // namespace smx
