// info.cpp - validation of the vocabulary-parallel problems: their statistics widths, vocabulary slice and dtypes
// here, their operands' geometry in ops/common/row_problem.cpp (and the cross-entropy's in ops/logprobs/info.cpp).
#include "ops/vocab_parallel/info.hpp"

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "core/tensor.hpp"

namespace smx {
namespace {

// The gathered statistics hold `width` values for each of one or more ranks; returns the rank count.
smxStatus_t count_ranks(const char* name, std::int64_t axis_len, std::int64_t width, std::int64_t* ranks) {
    if (axis_len < width || axis_len % width != 0) {
        return fail(SMX_STATUS_BAD_PARAM_SHAPE,
                    "{} has {} values per row along the axis; gathered statistics are {} per rank, for one rank or "
                    "more",
                    name, axis_len, width);
    }
    *ranks = axis_len / width;
    return SMX_STATUS_SUCCESS;
}

// The shard's first class is a class, and its class count (a statistic) is exact in the statistics dtype.
smxStatus_t check_vocabulary(std::int64_t vocab_start, std::int64_t classes, smxDataType_t stats_dtype) {
    if (vocab_start < 0) return fail(SMX_STATUS_BAD_PARAM, "vocabStart {} is negative", vocab_start);
    constexpr std::int64_t kLargestExactFloatCount = std::int64_t{1} << 24;
    if (stats_dtype == SMX_DTYPE_F32 && classes > kLargestExactFloatCount) {
        return fail(SMX_STATUS_BAD_PARAM, "a shard of {} classes: f32 statistics count at most 2^24 exactly", classes);
    }
    return SMX_STATUS_SUCCESS;
}

}  // namespace

// ---- shard_statistics -----------------------------------------------------------------------------------

smxStatus_t make_shard_statistics_info(int axis, std::int64_t vocab_start, const smxTensorDescriptor* stats,
                                       const smxTensorDescriptor* x, const smxTensorDescriptor* target,
                                       ShardStatisticsInfo* info) {
    const OperandSpec operands[] = {{"x", x, false},
                                    {"stats", stats, true, OperandShape::Gathered},
                                    {"target", target, false, OperandShape::PerRow}};
    const bool has_target = target != nullptr;
    ShardStatisticsInfo result;
    OperandLayout layouts[3];
    SMX_RETURN_IF_ERROR(make_row_geometry(axis, operands, has_target ? 3 : 2, &result, layouts));
    result.has_target = has_target;
    result.width = has_target ? kCrossEntropyStatistics : kSoftmaxStatistics;
    if (layouts[1].axis_len != result.width) {
        return fail(SMX_STATUS_BAD_PARAM_SHAPE, "stats has {} values per row along the axis; {} statistics are {}",
                    layouts[1].axis_len, has_target ? "cross-entropy" : "softmax", result.width);
    }
    SMX_RETURN_IF_ERROR(check_floating("x", x->dtype));
    SMX_RETURN_IF_ERROR(check_statistics("stats", stats->dtype, "x", x->dtype));
    if (has_target) {
        SMX_RETURN_IF_ERROR(check_index("target", target->dtype));
        SMX_RETURN_IF_ERROR(check_vocabulary(vocab_start, result.row_len, stats->dtype));
        result.target_dtype = target->dtype;
        result.vocab_start = vocab_start;
        result.target = layouts[2];
    }
    result.x_dtype = x->dtype;
    result.stats_dtype = stats->dtype;
    result.x = layouts[0];
    result.stats = layouts[1];
    *info = result;
    return SMX_STATUS_SUCCESS;
}

std::string describe(const ShardStatisticsInfo& info) {
    const NamedLayout operands[] = {{"x", &info.x}, {"stats", &info.stats}, {"target", &info.target}};
    const std::string vocabulary =
        info.has_target ? fmt::format(" target {} classes [{}, {})", dtype_name(info.target_dtype), info.vocab_start,
                                      info.vocab_start + info.row_len)
                        : std::string();
    return fmt::format("shard_statistics {}->{} width {} shape {} axis {}{}: {}", dtype_name(info.x_dtype),
                       dtype_name(info.stats_dtype), info.width, format_dims(info.shape, info.ndim), info.axis,
                       vocabulary, describe_geometry(info, operands, info.has_target ? 3 : 2));
}

smxStatus_t check_shard_statistics_pointers(const ShardStatisticsInfo& info, const void* stats, const void* x,
                                            const void* target, TouchedOperands& operands) {
    SMX_RETURN_IF_ERROR(operands.add(info.numel, {"x", x, info.x_dtype, &info.x, false, -1, false}));
    if (info.has_target) {
        SMX_RETURN_IF_ERROR(
            operands.add(info.rows, {"target", target, info.target_dtype, &info.target, false, -1, false}));
    }
    SMX_RETURN_IF_ERROR(
        operands.add(info.rows * info.width, {"stats", stats, info.stats_dtype, &info.stats, true, -1, false}));
    return operands.check();
}

// ---- shard_softmax --------------------------------------------------------------------------------------

smxStatus_t make_shard_softmax_info(int mode, int axis, const smxTensorDescriptor* y, const smxTensorDescriptor* x,
                                    const smxTensorDescriptor* stats, ShardSoftmaxInfo* info) {
    if (mode != SMX_SOFTMAX && mode != SMX_LOG_SOFTMAX) {
        return fail(SMX_STATUS_BAD_PARAM_MODE, "mode {} is not an smxSoftmaxMode_t (SMX_SOFTMAX=1, SMX_LOG_SOFTMAX=2)",
                    mode);
    }
    const OperandSpec operands[] = {{"x", x, false}, {"y", y, true}, {"stats", stats, false, OperandShape::Gathered}};
    ShardSoftmaxInfo result;
    OperandLayout layouts[3];
    SMX_RETURN_IF_ERROR(make_row_geometry(axis, operands, 3, &result, layouts));
    SMX_RETURN_IF_ERROR(count_ranks("stats", layouts[2].axis_len, kSoftmaxStatistics, &result.ranks));
    if (!is_supported_dtype_pair(x->dtype, y->dtype)) {
        return fail(SMX_STATUS_NOT_SUPPORTED_DTYPE_PAIR, "dtype pair x {} -> y {} is not supported: {}",
                    dtype_name(x->dtype), dtype_name(y->dtype), kSupportedDtypePairs);
    }
    SMX_RETURN_IF_ERROR(check_statistics("stats", stats->dtype, "x", x->dtype));
    result.mode = static_cast<smxSoftmaxMode_t>(mode);
    result.x_dtype = x->dtype;
    result.y_dtype = y->dtype;
    result.stats_dtype = stats->dtype;
    result.x = layouts[0];
    result.y = layouts[1];
    result.stats = layouts[2];
    result.same_layout = same_layout(*x, *y);
    *info = result;
    return SMX_STATUS_SUCCESS;
}

std::string describe(const ShardSoftmaxInfo& info) {
    const NamedLayout operands[] = {{"x", &info.x}, {"y", &info.y}, {"stats", &info.stats}};
    return fmt::format("shard_{} {}->{} stats {} ranks {} shape {} axis {}: {}",
                       info.is_log() ? "log_softmax" : "softmax", dtype_name(info.x_dtype), dtype_name(info.y_dtype),
                       dtype_name(info.stats_dtype), info.ranks, format_dims(info.shape, info.ndim), info.axis,
                       describe_geometry(info, operands, 3));
}

smxStatus_t check_shard_softmax_pointers(const ShardSoftmaxInfo& info, const void* y, const void* x, const void* stats,
                                         TouchedOperands& operands) {
    SMX_RETURN_IF_ERROR(operands.add(info.numel, {"x", x, info.x_dtype, &info.x, false, -1, false}));
    SMX_RETURN_IF_ERROR(operands.add(info.numel, {"stats", stats, info.stats_dtype, &info.stats, false, -1, false}));
    SMX_RETURN_IF_ERROR(operands.add(info.numel, {"y", y, info.y_dtype, &info.y, true, 0, info.same_layout}));
    return operands.check();
}

// ---- shard_logsumexp ------------------------------------------------------------------------------------

smxStatus_t make_shard_logsumexp_info(int axis, const smxTensorDescriptor* out, const smxTensorDescriptor* stats,
                                      ShardLogsumexpInfo* info) {
    const OperandSpec operands[] = {{"stats", stats, false}, {"out", out, true, OperandShape::PerRow}};
    ShardLogsumexpInfo result;
    OperandLayout layouts[2];
    SMX_RETURN_IF_ERROR(make_row_geometry(axis, operands, 2, &result, layouts));
    SMX_RETURN_IF_ERROR(count_ranks("stats", result.row_len, kSoftmaxStatistics, &result.ranks));
    if (stats->dtype != SMX_DTYPE_F32 && stats->dtype != SMX_DTYPE_F64) {
        return fail(SMX_STATUS_NOT_SUPPORTED_DTYPE_PAIR, "stats dtype {} is not supported: statistics are f32 or f64",
                    dtype_name(stats->dtype));
    }
    if (out->dtype != stats->dtype) {
        return fail(SMX_STATUS_NOT_SUPPORTED_DTYPE_PAIR, "out dtype {} with stats {} is not supported: out must be {}",
                    dtype_name(out->dtype), dtype_name(stats->dtype), dtype_name(stats->dtype));
    }
    result.stats_dtype = stats->dtype;
    result.stats = layouts[0];
    result.out = layouts[1];
    *info = result;
    return SMX_STATUS_SUCCESS;
}

std::string describe(const ShardLogsumexpInfo& info) {
    const NamedLayout operands[] = {{"stats", &info.stats}, {"out", &info.out}};
    return fmt::format("shard_logsumexp {} ranks {} shape {} axis {}: {}", dtype_name(info.stats_dtype), info.ranks,
                       format_dims(info.shape, info.ndim), info.axis, describe_geometry(info, operands, 2));
}

smxStatus_t check_shard_logsumexp_pointers(const ShardLogsumexpInfo& info, const void* out, const void* stats,
                                           TouchedOperands& operands) {
    SMX_RETURN_IF_ERROR(operands.add(info.numel, {"stats", stats, info.stats_dtype, &info.stats, false, -1, false}));
    SMX_RETURN_IF_ERROR(operands.add(info.rows, {"out", out, info.stats_dtype, &info.out, true, -1, false}));
    return operands.check();
}

// ---- shard_cross_entropy --------------------------------------------------------------------------------

smxStatus_t make_shard_cross_entropy_info(int axis, const smxCrossEntropyOptions_t* options, std::int64_t vocab_start,
                                          const smxTensorDescriptor* loss, const smxTensorDescriptor* lse,
                                          const smxTensorDescriptor* dlogits, const smxTensorDescriptor* logits,
                                          const smxTensorDescriptor* target, const smxTensorDescriptor* stats,
                                          ShardCrossEntropyInfo* info) {
    if (stats == nullptr) return fail(SMX_STATUS_BAD_PARAM_NULL_POINTER, "statsDesc is NULL");
    const OperandSpec stats_spec{"stats", stats, false, OperandShape::Gathered};
    ShardCrossEntropyInfo result;
    SMX_RETURN_IF_ERROR(make_cross_entropy_info(axis, options, loss, lse, dlogits, logits, target, &result, &stats_spec,
                                                &result.stats));
    SMX_RETURN_IF_ERROR(count_ranks("stats", result.stats.axis_len, kCrossEntropyStatistics, &result.ranks));
    SMX_RETURN_IF_ERROR(check_statistics("stats", stats->dtype, "logits", logits->dtype));
    SMX_RETURN_IF_ERROR(check_vocabulary(vocab_start, result.row_len, stats->dtype));
    result.stats_dtype = stats->dtype;
    result.vocab_start = vocab_start;
    *info = result;
    return SMX_STATUS_SUCCESS;
}

std::string describe(const ShardCrossEntropyInfo& info) {
    return fmt::format("shard_{} | stats {} ranks {} classes [{}, {}): stats len={} axis_stride={}",
                       describe(static_cast<const CrossEntropyInfo&>(info)), dtype_name(info.stats_dtype), info.ranks,
                       info.vocab_start, info.vocab_start + info.row_len, info.stats.axis_len, info.stats.axis_stride);
}

smxStatus_t check_shard_cross_entropy_pointers(const ShardCrossEntropyInfo& info, const void* loss, const void* lse,
                                               const void* dlogits, const void* logits, const void* target,
                                               const void* stats, TouchedOperands& operands) {
    SMX_RETURN_IF_ERROR(check_cross_entropy_pointers(info, loss, lse, dlogits, logits, target, operands));
    SMX_RETURN_IF_ERROR(operands.add(info.rows * info.stats.axis_len,
                                     {"stats", stats, info.stats_dtype, &info.stats, false, -1, false}));
    return operands.check();
}

}  // namespace smx
