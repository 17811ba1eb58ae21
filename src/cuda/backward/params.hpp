// params.hpp - the backward families' face towards the plan: their parameter structs, the constants their
// instances are compiled with and the instance getters. Plain C++: no CUDA types.
// The families (how each works: docs/cuda-kernels.md#backward):
//   backward-warp     Rows, n <= 1024: a group of 1..32 lanes per row, dy and y held in registers;
//   backward-regs     Rows, longer rows held in registers by a cluster of 1..16 CTAs (sums through DSMEM), or
//                     by CTAs spread over the device behind a grid barrier (backward-grid, a cooperative launch);
//   backward-split    Rows too long for registers: partial sums per chunk into the workspace, then a write pass
//                     that folds them and reads its chunk again;
//   backward-spatial  Spatial: a tile of contiguous columns, cached in shared memory where it fits;
//   backward-general  any strides, and every dtype combination with f64 on some side but not all; also every
//                     problem with the forward's options (the sums over the kept elements, dx scaled, 0 at
//                     excluded elements and in masked rows).
// Every kernel computes dx from dy and y along the axis, with s the row's sum:
//   softmax:     s = sum(dy * y),  dx = y * (dy - s)
//   log-softmax: s = sum(dy),      dx = dy - exp(y) * s
// dy and y share one dtype (T), dx has its own (D); the families other than general are instantiated for
// kEveryFamilyPair<T, D> (common/types.cuh).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "cuda/common/options.hpp"
#include "cuda/common/param_block.hpp"
#include "smx/smx.h"

namespace smx::cuda {

// A call's pointers as every backward family receives them.
struct BackwardPointers {
    const void* dy;
    const void* y;
    void* dx;
    void* workspace;
    const void* scale = nullptr;  // the option operands' data, NULL where the problem has none
    const void* mask = nullptr;
};

// Element sizes of the call's dtypes: dy and y (`value`), dx (`gradient`).
struct BackwardSizes {
    std::size_t value;
    std::size_t gradient;
};

// ---- Rows layout: warp, regs (cluster and grid) and split ---------------------------------------------

struct BackwardRowsParams {
    const void* dy = nullptr;
    const void* y = nullptr;
    void* dx = nullptr;
    void* workspace = nullptr;        // grid: a partial sum per CTA; split: a partial sum per (row, chunk)
    std::int64_t rows = 0;
    std::int64_t row_len = 0;
    std::int64_t dy_row_stride = 0;
    std::int64_t y_row_stride = 0;
    std::int64_t dx_row_stride = 0;
    std::int64_t slice_len = 0;       // regs: elements per CTA of a row; split: elements per chunk
    std::int64_t chunks = 0;          // regs: > 0 the grid form with this many CTAs per row; split: chunks per row
    int pack = 1;                     // elements of each operand per vector access (kPackOfPair of the dtypes)
    int log_mode = 0;                 // 1: log-softmax
    // Set at run time from the pointers (bind):
    int dy_rows_aligned = 0;          // warp: every row of the operand starts on a whole pack
    int y_rows_aligned = 0;
    int dx_rows_aligned = 0;
    int same_phase = 0;               // regs, split: every row of the three operands at one element phase within a
                                      // pack (bases and strides), so one head peel aligns them all

    void bind(const BackwardPointers& pointers, const BackwardSizes& sizes);
};

// backward-warp: rows of up to kBackwardWarpMaxRowLen; shape = lanes per row x packs per lane.
struct BackwardWarpShape {
    int lanes;
    int packs;
};
constexpr int kBackwardWarpThreads = 128;
constexpr int kBackwardWarpMaxRowLen = 1024;
// One pack per lane on 1..32 lanes, then 32 lanes with more packs; an instance exists where a lane holds at
// most 32 elements of each operand (packs x pack <= 32), which still covers 1024 for every pack size.
constexpr std::array<BackwardWarpShape, 10> kBackwardWarpShapes{
    {{1, 1}, {2, 1}, {4, 1}, {8, 1}, {16, 1}, {32, 1}, {32, 2}, {32, 4}, {32, 8}, {32, 16}}};
constexpr int kBackwardWarpMaxValues = 32;

// The index of the first shape that holds `row_len` at `pack` elements per pack (its instance exists).
int choose_backward_warp_shape(std::int64_t row_len, int pack);
const void* backward_warp_kernel(smxDataType_t value_dtype, smxDataType_t gradient_dtype, int shape_index);
// Per dy dtype, one per warp_<dtype>.cu (each file compiles in parallel).
const void* backward_warp_kernel_f16(smxDataType_t gradient_dtype, int shape_index);
const void* backward_warp_kernel_bf16(smxDataType_t gradient_dtype, int shape_index);
const void* backward_warp_kernel_f32(smxDataType_t gradient_dtype, int shape_index);
const void* backward_warp_kernel_f64(smxDataType_t gradient_dtype, int shape_index);

// backward-regs: values of each operand per thread (f64: 8 and 16 only); the 32-value instances launch at
// most kBackwardRegsWideThreads threads (their registers), the others up to 1024.
constexpr std::array<int, 3> kBackwardRegsValueCounts{{8, 16, 32}};
constexpr int kBackwardRegsMaxThreads = 1024;
constexpr int kBackwardRegsWideThreads = 512;
constexpr int kBackwardRegsMaxCluster = 16;
// How a backward-regs cluster's CTAs exchange their sums: each pushes its own into every peer's mailbox, or
// keeps it for the peers to pull (clusters behind SMX_CUDA_BACKWARD_EXCHANGE=pull, single CTAs, the grid form).
enum class BackwardRegsExchange { Pull, Push };
const void* backward_regs_kernel(smxDataType_t value_dtype, smxDataType_t gradient_dtype, int values,
                                 BackwardRegsExchange exchange);

// backward-split: the partial sums kernel (one instance per dy dtype) and the write kernel.
const void* backward_split_sums_kernel(smxDataType_t value_dtype, smxDataType_t gradient_dtype);
const void* backward_split_write_kernel(smxDataType_t value_dtype, smxDataType_t gradient_dtype);

// ---- Spatial layout ---------------------------------------------------------------------------------

struct BackwardSpatialParams {
    const void* dy = nullptr;
    const void* y = nullptr;
    void* dx = nullptr;
    std::int64_t row_len = 0;
    std::int64_t inner = 1;
    std::int64_t tiles_per_outer = 1;  // ceil(inner / tile_width)
    std::int64_t tiles = 0;            // outer x tiles_per_outer
    std::int64_t dy_axis_stride = 1;
    std::int64_t y_axis_stride = 1;
    std::int64_t dx_axis_stride = 1;
    std::int64_t dy_outer_stride = 0;
    std::int64_t y_outer_stride = 0;
    std::int64_t dx_outer_stride = 0;
    std::int64_t slice_len = 0;        // axis positions per CTA of a cluster
    int tile_width = 0;                // columns per tile: vectors x pack
    int pack = 1;                      // columns per vector
    int cached = 0;                    // 1: the slice's dy and y are kept in shared memory for the write pass
    int async_copies = 0;              // cached: 1 copies the slice in with cp.async (all in flight at once),
                                       // 0 loads it through registers a position at a time
    int whole_lines = 0;               // async_copies: fetch the operands' whole 128-byte lines on an L2 miss
    int log_mode = 0;
    int mailbox_offset = 0;            // the push instance: the mailbox's bytes into dynamic shared memory, after
                                       // the cache
    int vectors_aligned = 0;           // set at run time: every vector of every operand starts aligned

    void bind(const BackwardPointers& pointers, const BackwardSizes& sizes);
};

constexpr int kBackwardSpatialThreads = 256;
constexpr int kBackwardSpatialMaxVectors = 16;  // at most 256 bytes of dy per tile row
// How a backward-spatial cluster's CTAs exchange their column sums: each pushes its own into every peer's
// mailbox (clusters taking one tile each), or keeps them for the peers to pull (the kernel before the mailbox).
enum class BackwardSpatialExchange { Pull, Push };
const void* backward_spatial_kernel(smxDataType_t value_dtype, smxDataType_t gradient_dtype, BackwardSpatialExchange exchange);

// ---- any layout -------------------------------------------------------------------------------------

struct BackwardGeneralParams {
    const void* dy = nullptr;
    const void* y = nullptr;
    void* dx = nullptr;
    std::int64_t rows = 0;
    std::int64_t row_len = 0;
    std::int64_t dy_axis_stride = 1;
    std::int64_t y_axis_stride = 1;
    std::int64_t dx_axis_stride = 1;
    std::int64_t index_shape[SMX_MAX_DIMS] = {};  // collapsed row index space, outermost first
    std::int64_t dy_index_strides[SMX_MAX_DIMS] = {};
    std::int64_t y_index_strides[SMX_MAX_DIMS] = {};
    std::int64_t dx_index_strides[SMX_MAX_DIMS] = {};
    int index_ndim = 0;
    int threads_per_row = 32;  // 32 (a warp per row) or blockDim.x (a block per row)
    int log_mode = 0;

    void bind(const BackwardPointers& pointers, const BackwardSizes& sizes);
};

constexpr int kBackwardGeneralThreads = 256;
// Any dtype combination (computed in double where any side is f64).
const void* backward_general_kernel(smxDataType_t value_dtype, smxDataType_t gradient_dtype);

// backward-general with the forward's options: its parameters, the options', and every pointer bound at the call.
struct BackwardGeneralOptionsParams {
    BackwardGeneralParams general;
    OptionsParams options;
};

// The options' instance of backward-general (one per dtype combination; the option kinds are read at run time).
const void* backward_general_options_kernel(smxDataType_t value_dtype, smxDataType_t gradient_dtype);

}  // namespace smx::cuda
