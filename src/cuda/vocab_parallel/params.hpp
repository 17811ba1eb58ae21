// params.hpp - the vocabulary-parallel kernels' face towards their planner (plan.cpp): the parameter structs, the
// constants the instances are compiled with and the instance getters. Plain C++: no CUDA types.
// The kernels (docs/cuda-kernels.md, "Vocabulary-parallel"):
//   statistics   a CTA per row: one read of the shard's row, its (max, sum of exp) and, for cross-entropy, the
//                target's logit, the mean logit and the class count; several 16-byte loads in flight per thread
//                where the axis is contiguous
//   normalize    an element-wise pass with a per-row value: the row's statistics combined over the ranks, then
//                y = exp(x - M) / S or x - M - log S (softmax), or the shard's dlogits (cross-entropy); CTAs over
//                chunks of a row, each thread loading all its 16-byte packs of a chunk before storing any, where
//                the row allows; any layout otherwise
//   row          a thread per row, any layout: the combined logsumexp, or a cross-entropy row's loss (and lse)
//   count/reduce one CTA each: the rows a MEAN counts, and the per-row losses added in a fixed order
#pragma once

#include <cstddef>
#include <cstdint>

#include "ops/common/row_problem.hpp"
#include "smx/smx.h"

namespace smx::cuda {

// Where row r of an operand starts, for any layout: what ops/common/row_problem.hpp's row_offset computes on the
// host, with the geometry's fields every operand shares.
struct RowSpace {
    int layout = 0;  // static_cast<int>(RowLayout): 0 Rows, 1 Spatial, 2 General
    int index_ndim = 0;
    std::int64_t rows = 0;
    std::int64_t inner = 1;
    std::int64_t index_shape[SMX_MAX_DIMS] = {};
};

// One operand's strides in that space.
struct OperandStrides {
    std::int64_t axis = 1;   // between elements of a row
    std::int64_t row = 0;    // Rows: between rows; Spatial: between outer indices
    std::int64_t index[SMX_MAX_DIMS] = {};  // General
};

// The statistics a rank contributes per row, in order (smx.h, SMX_SHARD_*_STATISTICS).
constexpr int kSoftmaxStatisticsWidth = 2;
constexpr int kCrossEntropyStatisticsWidth = 5;

struct StatisticsParams {
    const void* x = nullptr;
    void* stats = nullptr;
    const void* target = nullptr;  // cross-entropy statistics only
    RowSpace space;
    OperandStrides x_strides;
    OperandStrides stats_strides;
    OperandStrides target_strides;
    std::int64_t row_len = 0;
    std::int64_t vocab_start = 0;
    int width = kSoftmaxStatisticsWidth;
    int target_is_i64 = 1;
};

// What the normalize kernel writes from x and the gathered statistics.
enum class NormalizeOutput : int { Softmax = 0, LogSoftmax = 1, Dlogits = 2 };

struct NormalizeParams {
    const void* x = nullptr;
    void* y = nullptr;
    const void* stats = nullptr;
    const void* target = nullptr;     // Dlogits
    const double* count = nullptr;    // Dlogits of a MEAN: the rows counted (workspace), else NULL (scale 1)
    RowSpace space;
    OperandStrides x_strides;
    OperandStrides y_strides;
    OperandStrides stats_strides;
    OperandStrides target_strides;
    std::int64_t row_len = 0;
    std::int64_t ranks = 1;
    std::int64_t chunk = 0;           // elements (Rows: 16-byte packs) a CTA of grid.x covers
    std::int64_t vocab_start = 0;     // Dlogits
    std::int64_t ignore_index = -100; // Dlogits
    double label_smoothing = 0.0;     // Dlogits
    int output = 0;                   // NormalizeOutput
    int width = kSoftmaxStatisticsWidth;
    int target_is_i64 = 1;
    int vector = 0;                   // 1: the Rows kernel with 16-byte accesses (axis contiguous in x and y)
};

// What the row kernel computes per row.
enum class RowOutput : int { Logsumexp = 0, CrossEntropy = 1 };

struct RowParams {
    const void* stats = nullptr;
    const void* target = nullptr;  // CrossEntropy
    void* out = nullptr;           // Logsumexp: out; CrossEntropy: the per-row loss (reduction NONE), else NULL
    void* lse = nullptr;           // CrossEntropy: NULL where not asked for
    double* row_losses = nullptr;  // CrossEntropy reduced: one double per row (workspace)
    RowSpace space;
    OperandStrides stats_strides;
    OperandStrides target_strides;
    OperandStrides out_strides;
    OperandStrides lse_strides;
    std::int64_t ranks = 1;
    std::int64_t ignore_index = -100;
    double label_smoothing = 0.0;
    int output = 0;  // RowOutput
    int width = kSoftmaxStatisticsWidth;
    int target_is_i64 = 1;
};

// The count kernel (rows whose target is not ignore_index, into *count) and the reduce kernel (row_losses added
// in a fixed order, divided by *count for a MEAN, rounded once into loss).
struct LossParams {
    const void* target = nullptr;
    double* count = nullptr;
    const double* row_losses = nullptr;
    void* loss = nullptr;
    RowSpace space;
    OperandStrides target_strides;
    std::int64_t ignore_index = -100;
    int target_is_i64 = 1;
    int mean = 0;
};

constexpr int kVocabParallelThreads = 256;  // normalize CTAs, and statistics CTAs on rows shorter than below
// Statistics rows this long take kStatisticsMaxThreads-thread CTAs: twice the loads in flight per row, as the
// log-probability stats kernel's wide_cta_min_len (cuda/plan/tuning.cpp) does on the same traffic.
constexpr std::int64_t kStatisticsWideRowLen = 65536;
constexpr int kStatisticsMaxThreads = 512;  // the statistics kernel's launch bound
// 16-byte packs (of the wider dtype) each normalize thread has in flight: its whole share of a chunk, loaded
// before any is stored (x and y may be one buffer, so the compiler would not hoist loads over stores itself).
constexpr int kNormalizePacksPerThread = 4;
constexpr int kRowThreads = 128;            // row kernel CTAs (a thread per row)
constexpr int kLossThreads = 1024;          // the one CTA of count and reduce: fixed, so the sum's order is too

// Instances; nullptr for a dtype (pair) without one. stats_dtype is F32, or F64 for F64 x. cross_entropy: the
// statistics kernel writes kCrossEntropyStatisticsWidth values per row, else kSoftmaxStatisticsWidth.
const void* statistics_kernel(smxDataType_t x_dtype, bool vector, bool cross_entropy);
const void* normalize_kernel(smxDataType_t x_dtype, smxDataType_t y_dtype, bool vector);
const void* row_kernel(smxDataType_t stats_dtype);
const void* count_kernel();
const void* reduce_kernel(smxDataType_t loss_dtype);

}  // namespace smx::cuda
