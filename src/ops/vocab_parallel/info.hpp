// info.hpp - the vocabulary-parallel operators' problems, validated once and reduced to canonical rows
// (ops/common/row_problem.hpp). Each rank holds a shard of x along the axis (its slice of the vocabulary):
//   shard_statistics     x (, target) -> stats              per row: (max, sum of exp(x - max)) of the shard,
//                                                           plus, with a target, (target logit or 0, mean, n)
//   shard_softmax        x, gathered stats -> y             y = softmax / log-softmax of the whole row
//   shard_logsumexp      gathered stats -> out              out = logsumexp of the whole row
//   shard_cross_entropy  logits, target, gathered stats -> loss (+ lse, dlogits of the shard)
// Statistics run along the problem's axis: a shard's are `width` values per row (kSoftmaxStatistics or
// kCrossEntropyStatistics), the gathered ones `ranks * width`, rank w's at axis positions [w * width,
// (w + 1) * width). A stats tensor is a Gathered operand (x's shape but for the axis), so it joins the one row
// analysis and row r names the same row in every operand. docs/distributed.md derives the formulas.
#pragma once

#include <cstdint>
#include <string>

#include "ops/logprobs/info.hpp"
#include "smx/smx.h"

namespace smx {

// A shard's statistics per row, in this order along the statistics axis.
inline constexpr std::int64_t kSoftmaxStatistics = SMX_SHARD_SOFTMAX_STATISTICS;             // max, sum
inline constexpr std::int64_t kCrossEntropyStatistics = SMX_SHARD_CROSS_ENTROPY_STATISTICS;  // + x_t, mean, count

// ---- shard_statistics -----------------------------------------------------------------------------------

struct ShardStatisticsInfo : RowGeometry {
    smxDataType_t x_dtype = SMX_DTYPE_F32;
    smxDataType_t stats_dtype = SMX_DTYPE_F32;  // statistics_dtype(x_dtype)
    smxDataType_t target_dtype = SMX_DTYPE_I64;
    bool has_target = false;                    // cross-entropy statistics: width kCrossEntropyStatistics
    std::int64_t width = kSoftmaxStatistics;    // statistics per row
    std::int64_t vocab_start = 0;               // the global class of the shard's element 0 (has_target)
    OperandLayout x;
    OperandLayout stats;   // Gathered, axis_len == width
    OperandLayout target;  // PerRow, where has_target
};

// Validates the arguments of smxCreateShardStatisticsDescriptor and fills `info`. target may be NULL (softmax
// statistics; vocab_start is then ignored). On failure returns the status and sets the last error.
smxStatus_t make_shard_statistics_info(int axis, std::int64_t vocab_start, const smxTensorDescriptor* stats,
                                       const smxTensorDescriptor* x, const smxTensorDescriptor* target,
                                       ShardStatisticsInfo* info);

std::string describe(const ShardStatisticsInfo& info);

// Call-time check of the pointers the call touches (collected in `operands` for the device's check): not NULL,
// aligned, and stats meets no byte of x or target.
smxStatus_t check_shard_statistics_pointers(const ShardStatisticsInfo& info, const void* stats, const void* x,
                                            const void* target, TouchedOperands& operands);

// ---- shard_softmax --------------------------------------------------------------------------------------

struct ShardSoftmaxInfo : RowGeometry {
    smxSoftmaxMode_t mode = SMX_SOFTMAX;
    smxDataType_t x_dtype = SMX_DTYPE_F32;
    smxDataType_t y_dtype = SMX_DTYPE_F32;
    smxDataType_t stats_dtype = SMX_DTYPE_F32;  // statistics_dtype(x_dtype)
    std::int64_t ranks = 1;                      // stats.axis_len / kSoftmaxStatistics
    OperandLayout x;
    OperandLayout y;
    OperandLayout stats;  // Gathered, axis_len == ranks * kSoftmaxStatistics
    bool same_layout = false;  // y == x is a legal in-place call

    bool is_log() const { return mode == SMX_LOG_SOFTMAX; }
};

smxStatus_t make_shard_softmax_info(int mode, int axis, const smxTensorDescriptor* y, const smxTensorDescriptor* x,
                                    const smxTensorDescriptor* stats, ShardSoftmaxInfo* info);

std::string describe(const ShardSoftmaxInfo& info);

// Not NULL, aligned; y meets no byte of stats, nor of x unless y == x with the same layout.
smxStatus_t check_shard_softmax_pointers(const ShardSoftmaxInfo& info, const void* y, const void* x, const void* stats,
                                         TouchedOperands& operands);

// ---- shard_logsumexp ------------------------------------------------------------------------------------

// The gathered statistics are the problem's "x" here: rows of ranks * kSoftmaxStatistics values.
struct ShardLogsumexpInfo : RowGeometry {
    smxDataType_t stats_dtype = SMX_DTYPE_F32;  // f32 or f64; out has the same
    std::int64_t ranks = 1;
    OperandLayout stats;  // Full
    OperandLayout out;    // PerRow
};

smxStatus_t make_shard_logsumexp_info(int axis, const smxTensorDescriptor* out, const smxTensorDescriptor* stats,
                                      ShardLogsumexpInfo* info);

std::string describe(const ShardLogsumexpInfo& info);

smxStatus_t check_shard_logsumexp_pointers(const ShardLogsumexpInfo& info, const void* out, const void* stats,
                                           TouchedOperands& operands);

// ---- shard_cross_entropy --------------------------------------------------------------------------------

// The cross-entropy problem of the shard (row_len is the shard's class count; the loss options as for
// smxCrossEntropy), the gathered statistics, and where the shard sits in the vocabulary.
struct ShardCrossEntropyInfo : CrossEntropyInfo {
    smxDataType_t stats_dtype = SMX_DTYPE_F32;  // statistics_dtype(logits_dtype)
    std::int64_t ranks = 1;                      // stats.axis_len / kCrossEntropyStatistics
    std::int64_t vocab_start = 0;
    OperandLayout stats;  // Gathered, axis_len == ranks * kCrossEntropyStatistics
};

smxStatus_t make_shard_cross_entropy_info(int axis, const smxCrossEntropyOptions_t* options, std::int64_t vocab_start,
                                          const smxTensorDescriptor* loss, const smxTensorDescriptor* lse,
                                          const smxTensorDescriptor* dlogits, const smxTensorDescriptor* logits,
                                          const smxTensorDescriptor* target, const smxTensorDescriptor* stats,
                                          ShardCrossEntropyInfo* info);

std::string describe(const ShardCrossEntropyInfo& info);

// check_cross_entropy_pointers, and stats read-only beside them.
smxStatus_t check_shard_cross_entropy_pointers(const ShardCrossEntropyInfo& info, const void* loss, const void* lse,
                                               const void* dlogits, const void* logits, const void* target,
                                               const void* stats, TouchedOperands& operands);

}  // namespace smx
