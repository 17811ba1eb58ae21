// params.hpp - the log-probability kernels' face towards their planners: the operands a call binds, the
// parameter structs (one per kernel kind, each travelling in a ParamBlock), the constants the instances are
// compiled with and the instance getters. Plain C++: no CUDA types.
// The kernels (src/cuda/logprobs/):
//   stats     one read of x per row: (max, sum of exp, mean) reduced by a lane group, a CTA, a cluster of CTAs
//             (DSMEM) or CTAs over chunks (partials in the workspace, then `combine`), then the row's result:
//             logsumexp, the gathered log-probabilities, or the cross-entropy loss (and lse).
//   ce-regs   cross-entropy with dlogits for rows a cluster of CTAs holds in registers: logits read once,
//             dlogits written once.
//   ce-write  the second pass of cross-entropy for rows too long for registers: each chunk read again and its
//             dlogits written, from the row's lse that `stats` left in the workspace.
//   general   any layout, any dtype pair: a warp or a CTA per row from its multi-index, two passes.
//   per-row   the count a MEAN divides by, the reduction of per-row losses in a fixed order, and the scatter of
//             per-row results the general kernel leaves compact in the workspace.
// Traffic and measurements: performance.md#log-probabilities.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cuda/common/param_block.hpp"
#include "smx/smx.h"

namespace smx::cuda {

// What a row's result is: written by the stats kernels' and the general kernel's last step.
enum class RowOp : int { Logsumexp = 0, Gather = 1, CrossEntropy = 2 };

// The pointers of one call, in the operators' terms: x is logsumexp's and gather's x or cross-entropy's logits,
// index gather's index or cross-entropy's target, out logsumexp's and gather's out or cross-entropy's loss.
struct LogprobsPointers {
    const void* x = nullptr;
    const void* index = nullptr;
    void* out = nullptr;
    void* lse = nullptr;      // cross-entropy's lse, NULL where not asked for
    void* dlogits = nullptr;  // cross-entropy's dlogits, NULL where not asked for
    void* workspace = nullptr;
};

// Every log-probability plan's workspace has one layout, so that each kernel finds its regions from the base
// and the row count alone; a plan sizes it to the last region it uses. Each region starts on a 16-byte unit:
//   [0, 16)       scale     the gradient's scale for a MEAN, 1 / the rows it counts (1 where none does): a double
//                           at 0, the same rounded to float at 8 (count kernel -> ce-regs, ce-write, general)
//   row_losses    RowLoss<C> per row: the loss and whether the row counts (-> finish)
//   row_lse       C per row: the row's lse (stats -> ce-write; general -> finish)
//   partials      RowStats<C> per chunk of every row (split stats -> combine)
// C is the statistics type: float, or double for f64 logits (stat_size its bytes).
constexpr std::int64_t workspace_units(std::int64_t bytes) { return (bytes + 15) / 16 * 16; }
constexpr std::int64_t kRowLossesOffset = 16;
constexpr std::int64_t row_lse_offset(std::int64_t rows, std::int64_t stat_size) {
    return kRowLossesOffset + workspace_units(rows * 2 * stat_size);
}
constexpr std::int64_t partials_offset(std::int64_t rows, std::int64_t stat_size) {
    return row_lse_offset(rows, stat_size) + workspace_units(rows * stat_size);
}
constexpr std::int64_t partials_end(std::int64_t rows, std::int64_t chunks, std::int64_t stat_size) {
    return partials_offset(rows, stat_size) + workspace_units(rows * chunks * 3 * stat_size);
}

// The Rows-layout kernels (stats, combine, ce-regs, ce-write): row r of each operand starts at r * its row
// stride; x and dlogits are contiguous along the axis; index and a gather's out have their own axis strides.
struct LogprobsRowsParams {
    LogprobsPointers operand;
    std::int64_t rows = 0;
    std::int64_t row_len = 0;           // n, the classes of cross-entropy
    std::int64_t x_row_stride = 0;
    std::int64_t dlogits_row_stride = 0;
    std::int64_t index_row_stride = 0;  // gather's index or cross-entropy's target
    std::int64_t index_axis_stride = 0;
    std::int64_t out_row_stride = 0;    // logsumexp's out, gather's out, an unreduced loss
    std::int64_t out_axis_stride = 0;
    std::int64_t lse_row_stride = 0;
    std::int64_t gathered = 0;          // K: indices per row
    std::int64_t ignore_index = -100;
    double label_smoothing = 0.0;
    std::int64_t chunks = 1;            // stats: chunks of a row (> 1: a cluster's ranks or split partials)
    std::int64_t slice_len = 0;         // elements per chunk (ce-regs: per CTA of the cluster)
    std::int64_t rows_per_grid_row = 0; // ce-regs: rows of one grid row (grid.x = cluster x this)
    int op = 0;                         // RowOp
    int reduction = SMX_REDUCTION_NONE;
    int index_64 = 0;                   // index / target is I64 (else I32)
    int group_threads = 32;             // stats: threads per row (8, 32, or the CTA: blockDim.x)
    int split = 0;                      // stats: chunk partials go to the workspace (else through the cluster)
    int lse_to_workspace = 0;           // stats and combine: cross-entropy rows also leave lse in row_lse

    void bind(const LogprobsPointers& pointers) { operand = pointers; }
};

// The general kernel's index space: up to kMaxIndexDims collapsed dims, and three operand slots, each with its
// axis stride and index strides (slot use per operator: logsumexp x, out; gather x, index, out; cross-entropy
// logits, dlogits, target, with lse and the loss left compact in the workspace for the per-row kernel).
constexpr int kMaxIndexDims = SMX_MAX_DIMS - 1;
constexpr int kGeneralSlots = 3;

// (ndim, the number of dims in use, travels beside it.)
struct IndexSpace {
    std::int64_t shape[kMaxIndexDims] = {};
    std::int64_t axis_stride[kGeneralSlots] = {};
    std::int64_t strides[kGeneralSlots][kMaxIndexDims] = {};
};

struct LogprobsGeneralParams {
    LogprobsPointers operand;
    IndexSpace space;
    std::int64_t rows = 0;
    std::int64_t row_len = 0;
    std::int64_t gathered = 0;
    std::int64_t ignore_index = -100;
    double label_smoothing = 0.0;
    int threads_per_row = 32;      // 32 (a warp per row) or blockDim.x (a CTA per row)
    std::int8_t ndim = 0;          // index dims in use
    std::int8_t op = 0;            // RowOp
    std::int8_t index_64 = 0;      // index / target is I64 (else I32)
    std::int8_t reduction = SMX_REDUCTION_NONE;  // cross-entropy: MEAN scales dlogits by the workspace's count

    void bind(const LogprobsPointers& pointers) { operand = pointers; }
};

// The per-row kernels (count, finish): cross-entropy's per-row operands in any layout. Slots: 0 target, 1 lse,
// 2 an unreduced loss (axis strides unused).
struct LogprobsPerRowParams {
    LogprobsPointers operand;
    IndexSpace space;
    std::int64_t rows = 0;
    std::int64_t ignore_index = -100;
    int ndim = 0;
    int reduction = SMX_REDUCTION_NONE;
    int index_64 = 0;
    int scatter_loss = 0;  // finish: the unreduced loss is compact in the workspace (general plans)
    int scatter_lse = 0;   // finish: lse is compact in the workspace (general plans)

    void bind(const LogprobsPointers& pointers) { operand = pointers; }
};

// ---- instances ------------------------------------------------------------------------------------------

// The stats kernel for x's dtype; with_mean: it also sums x / n (label smoothing); cross_entropy: the instance that
// reads each row's target with the row (the other ops' instances have no such reads).
const void* logprobs_stats_kernel(smxDataType_t x_dtype, bool with_mean, bool cross_entropy);
// The combine kernel (split partials -> the row's result) for x's dtype.
const void* logprobs_combine_kernel(smxDataType_t x_dtype);
// ce-write for (logits, dlogits) dtypes: dlogits of the logits' dtype or f32 (nullptr otherwise).
const void* ce_write_kernel(smxDataType_t x_dtype, smxDataType_t dlogits_dtype);
// ce-regs for (logits, dlogits) and values per thread (nullptr where there is no such instance); per logits dtype,
// one per regs_<x>.cu (each file compiles in parallel).
const void* ce_regs_kernel(smxDataType_t x_dtype, smxDataType_t dlogits_dtype, int values_per_thread);
const void* ce_regs_kernel_f16(smxDataType_t dlogits_dtype, int values_per_thread);
const void* ce_regs_kernel_bf16(smxDataType_t dlogits_dtype, int values_per_thread);
const void* ce_regs_kernel_f32(smxDataType_t dlogits_dtype, int values_per_thread);
const void* ce_regs_kernel_f64(smxDataType_t dlogits_dtype, int values_per_thread);
// The general kernel: any dtype pair (dlogits_dtype is ignored but for cross-entropy; pass x's).
const void* logprobs_general_kernel(smxDataType_t x_dtype, smxDataType_t dlogits_dtype);
// The per-row kernels, by the statistics dtype (F32 or F64).
const void* ce_count_kernel();
const void* ce_finish_kernel(smxDataType_t statistics_dtype);

// Whether ce-regs and ce-write have an instance for the pair: dlogits of the logits' dtype, or f32.
constexpr bool is_fast_dlogits_pair(smxDataType_t x_dtype, smxDataType_t dlogits_dtype) {
    return dlogits_dtype == x_dtype || dlogits_dtype == SMX_DTYPE_F32;
}

// Values per thread ce-regs is instantiated with, ascending; 64 for 16-bit logits only (held two to a register),
// 32 not for f64.
constexpr int kCeRegsValueCounts[] = {8, 16, 32, 64};
constexpr int kCeRegsMaxThreads = 1024;
constexpr int kCeRegsMaxCluster = 16;

constexpr int kStatsMaxThreads = 512;    // the stats kernel's launch bound
constexpr int kWriteThreads = 512;       // ce-write's CTA
constexpr int kCombineThreads = 128;     // combine: a warp per row
constexpr int kGeneralThreads = 256;     // general: a warp or the CTA per row
constexpr int kPerRowThreads = 1024;     // count and finish: one CTA

// Per-row records in the workspace, in the statistics type C (float or double).
template <class C>
struct RowLoss {
    C loss;
    C counted;  // 1 where the row's target is not ignore_index, else 0
};

template <class C>
struct RowStats {
    C max;   // of the row's values that are not NaN; -inf for none
    C sum;   // of exp(v - max) (exp(v) where max is infinite): NaN if a NaN, +inf if max is +inf
    C mean;  // sum of v / n (only where label smoothing asks for it)
};

}  // namespace smx::cuda
