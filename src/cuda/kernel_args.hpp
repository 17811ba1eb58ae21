// kernel_args.hpp - what the plan (plain C++) and the kernels (CUDA) share: the one argument struct every
// softmax kernel takes, the warp kernel's shape table, and the getters that hand out kernel instances as
// type-erased pointers for cudaLaunchKernel / cudaLaunchKernelExC. No CUDA types cross this header.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "smx/smx.h"

namespace smx::cuda {

// Every kernel takes this struct by value; each family reads the fields its comment names.
struct SoftmaxKernelArgs {
    const void* x = nullptr;
    void* y = nullptr;
    void* workspace = nullptr;        // split-row, grid-regs, spatial-split: per-chunk (max, sum) partials
    std::int64_t rows = 0;
    std::int64_t row_len = 0;
    // Rows layout (warp, block-regs, block-online, split-row).
    std::int64_t x_row_stride = 0;
    std::int64_t y_row_stride = 0;
    std::int64_t slice_len = 0;       // block-regs, spatial-tile: elements per row CTA; split-row, spatial-split: per chunk
    std::int64_t chunks = 0;          // split-row: chunks per row; spatial-split: per column; block-regs: > 0 selects grid-regs
    std::int64_t row_steps = 1;       // grid-regs steps: rows each group of `chunks` CTAs takes in turn
    // Spatial and General layouts.
    std::int64_t x_axis_stride = 1;
    std::int64_t y_axis_stride = 1;
    std::int64_t inner = 1;           // spatial: contiguous columns per outer index
    std::int64_t tiles_per_outer = 1; // spatial: ceil(inner / tile_width)
    std::int64_t tiles = 0;           // spatial: outer x tiles_per_outer (no 64-bit division in the kernel)
    std::int64_t x_outer_stride = 0;
    std::int64_t y_outer_stride = 0;
    std::int64_t index_shape[SMX_MAX_DIMS] = {};    // general: collapsed row index space, outermost first
    std::int64_t x_index_strides[SMX_MAX_DIMS] = {};
    std::int64_t y_index_strides[SMX_MAX_DIMS] = {};
    int index_ndim = 0;
    int tile_width = 32;              // spatial: columns per tile (online: pow2 <= 32; split: pow2 <= 64; tile: V x 16-byte pack)
    int threads_per_row = 32;         // general: 32 (a warp per row) or blockDim.x (a block per row)
    int log_mode = 0;                 // 1: log-softmax (a uniform runtime branch halves the instances)
    int x_vector = 0;                 // warp kernel: x base and row stride allow 16-byte loads (set by run())
    int y_vector = 0;                 // warp kernel: y base and row stride allow full-pack stores (set by run())
    int offsets_32 = 0;               // warp kernel: index in 32 bits (the plan found every offset within them)
    int x_whole_lines = 0;            // spatial-tile: x's copies ask L2 to fetch whole 128-byte lines (set by the plan)
};

// Per-thread shape of the warp kernel: `lanes` threads share a row, each holding `cols_per_lane`
// elements in registers, and each thread works on `rows_per_thread` rows at once.
struct WarpShape {
    int lanes;
    int cols_per_lane;
    int rows_per_thread;
    constexpr int capacity() const { return lanes * cols_per_lane; }
    // Narrow (fewer than 32 lanes) and holding two packs of `pack` x elements per lane: the shapes that
    // warp_narrow_two_packs admits per dtype pair.
    constexpr bool narrow_two_packs(int pack) const { return lanes < 32 && cols_per_lane > pack; }
};

// 4 warps: small CTAs, many of them overlapping on each SM. The launch bound of every warp instance; the plan
// launches shapes on 32 lanes and the narrow two-pack ones as 64-thread CTAs (plan_warp).
constexpr int kWarpKernelThreads = 128;
constexpr int kWarpMaxRowLen = 1024;     // 32 lanes x 32 register-held elements per lane
// Warp shapes of at most this many values per thread also have a body with 32-bit index arithmetic (used
// where the plan finds every offset within 32 bits); wider shapes index in 64 bits (perf-notes run 121).
constexpr int kWarpOffsets32MaxValues = 16;
constexpr int kSpatialTileThreads = 256; // spatial-tile CTA: 8 warps, 3-4 CTAs per SM
constexpr int kSpatialTileSmallThreads = 128; // spatial-tile CTA where it lets an SM hold more tiles (the plan)
constexpr int kSpatialMaxVectors = 16;   // spatial-tile: at most 16 x 16 bytes = 256 bytes of a row per tile
constexpr int kSpatialSplitThreads = 512; // spatial-split CTA (both kernels)
// spatial-split: axis positions per thread and loop step. H200, perf-notes run 167 (quick smx-bench softmax,
// five long-column shapes, f32 / bf16 / bf16 -> f32): 8 against 4 1-11% faster on all 15 cases; 16 up to 4%
// faster on three f32 cases than 8, up to 20% slower on bf16 (300000 x 64 dim=0).
constexpr int kSpatialSplitUnroll = 8;
// spatial-split's vector instances: columns per thread in 16 bytes of compute values (4 f32, 2 f64); vectors
// per thread and loop step (8 spilled 8-24 bytes at the 64-register bound and lost 9-13% on 300000 x 64
// dim=0, perf-notes run 174); at most this many columns a tile (so at most 32 vectors side by side, one warp's
// lanes, as the column fold's [warp][column] partials require).
constexpr int kSpatialSplitPackBytes = 16;
constexpr int kSpatialSplitVectorUnroll = 4;
constexpr int kSpatialSplitMaxWidth = 64;

// The instantiated warp shapes per 16-byte pack size (elements per 16 bytes of x), sorted by capacity.
// Narrow rows: one pack per lane and 1..32 lanes. Wide rows: 32 lanes and several packs per lane (which
// already gives several loads in flight). Narrow rows take one row per thread (more, smaller CTAs at 16
// per SM) except f32 x written to a narrower y and f64, which take two; f32 x lists both, sorted by
// rows per thread at equal capacity (choose_warp_shape picks; perf-notes run 66). Two packs per lane on
// fewer lanes (warp_narrow_two_packs; perf-notes runs 116-117, 128): f32 x holds rows of 17-128 that way
// (4, 8, 16 lanes; every y), in place of one pack on twice the lanes; 16-bit x lists two such shapes (2 and
// 16 lanes) ahead of the one-pack shape of the same capacity, taken by 16-bit -> 16-bit rows, and the one
// on 16 lanes also by 16-bit -> f32.
template <int kPack>
struct WarpShapeTable;
template <>
struct WarpShapeTable<8> {  // f16, bf16
    static constexpr std::array<WarpShape, 11> shapes{{{1, 8, 1}, {2, 8, 1}, {2, 16, 1}, {4, 8, 1}, {8, 8, 1},
                                                       {16, 8, 1}, {16, 16, 1}, {32, 8, 2}, {32, 16, 1},
                                                       {32, 24, 1}, {32, 32, 1}}};
};
template <>
struct WarpShapeTable<4> {  // f32
    static constexpr std::array<WarpShape, 13> shapes{{{1, 4, 1}, {1, 4, 2}, {2, 4, 1}, {2, 4, 2}, {4, 4, 1},
                                                       {4, 4, 2}, {4, 8, 1}, {8, 8, 1}, {16, 8, 1}, {32, 8, 1},
                                                       {32, 16, 1}, {32, 24, 1}, {32, 32, 1}}};
};
template <>
struct WarpShapeTable<2> {  // f64
    static constexpr std::array<WarpShape, 11> shapes{{{1, 2, 2}, {2, 2, 2}, {4, 2, 2}, {8, 2, 2}, {16, 2, 2},
                                                       {32, 2, 2}, {32, 4, 1}, {32, 8, 1}, {32, 16, 1},
                                                       {32, 24, 1}, {32, 32, 1}}};
};

// Rows per thread of the narrow warp shapes (fewer than 32 lanes) for x and y elements of these sizes.
constexpr int warp_narrow_rows_per_thread(std::size_t x_size, std::size_t y_size) {
    return x_size == 2 || (x_size == 4 && y_size == 4) ? 1 : 2;
}
// Whether a narrow shape of two packs per lane on `lanes` lanes serves this pair, in place of one pack on
// twice the lanes: f32 x and 16-bit -> 16-bit always; 16-bit x written as f32 on 16 lanes (rows of
// 129-256: +0.4-0.7 points of copy, perf-notes run 128) but not on 2 (rows of 17-32: -1 to -2.5 points
// against one pack on 4 lanes; before its stores went through lane pairs that shape ran at 53%, runs 75
// and 119).
constexpr bool warp_narrow_two_packs(std::size_t x_size, std::size_t y_size, int lanes) {
    return x_size == 4 || (x_size == 2 && y_size == 2) || (x_size == 2 && y_size == 4 && lanes == 16);
}

// Index of the smallest shape whose capacity holds `row_len` (<= kWarpMaxRowLen) for x and y elements of
// `x_size` and `y_size` bytes, with the rows per thread that pair takes on narrow rows; the shape itself
// through *shape.
int choose_warp_shape(std::int64_t row_len, std::size_t x_size, std::size_t y_size, WarpShape* shape);

// Kernel instances, or nullptr for a dtype pair that has none. Defined next to each kernel family.
const void* warp_softmax_kernel(smxDataType_t x_dtype, smxDataType_t y_dtype, int shape_index);
// Values per thread the block-regs kernel is instantiated with (f64: 8 and 16 only; 64: 16-bit x only), ascending.
// 64 only for 16-bit inputs, which stay packed in registers (32 registers for 64 values).
constexpr std::array<int, 4> kBlockRegsValueCounts{{8, 16, 32, 64}};
constexpr int kBlockRegsMaxThreads = 1024;
constexpr int kBlockRegsMaxCluster = 16;  // above 8 needs cudaFuncAttributeNonPortableClusterSizeAllowed

// nullptr also when `values_per_thread` has no instance for x_dtype.
const void* block_regs_softmax_kernel(smxDataType_t x_dtype, smxDataType_t y_dtype, int values_per_thread);
// The block-regs kernel as grid-regs with row steps (args.row_steps), instantiated at kGridRegsStepsValues
// values per thread for f32 x only (nullptr for other x). A step's CTAs fold at most kGridRegsStepsMaxChunks
// partials.
constexpr int kGridRegsStepsValues = 32;
constexpr int kGridRegsStepsMaxChunks = 512;
const void* grid_regs_steps_kernel(smxDataType_t x_dtype, smxDataType_t y_dtype);
// Dynamic shared memory the row-steps kernel needs for slices of `slice_len` elements: the slice staged
// by a bulk copy one step ahead where x's packs are 16 bytes (x at least as wide as y), else 0.
std::size_t grid_regs_steps_shared_bytes(smxDataType_t x_dtype, smxDataType_t y_dtype, std::int64_t slice_len);
const void* block_online_softmax_kernel(smxDataType_t x_dtype, smxDataType_t y_dtype);
const void* split_row_stats_kernel(smxDataType_t x_dtype, smxDataType_t y_dtype);
const void* split_row_write_kernel(smxDataType_t x_dtype, smxDataType_t y_dtype);
// vector_bytes: 16 (every pair), or 8 (16-bit x written as f32 only); threads: kSpatialTileThreads or
// kSpatialTileSmallThreads (nullptr otherwise).
const void* spatial_tile_softmax_kernel(smxDataType_t x_dtype, smxDataType_t y_dtype, int vector_bytes, int threads);
const void* spatial_online_softmax_kernel(smxDataType_t x_dtype, smxDataType_t y_dtype);
// vectors: the instances that take kSpatialSplitPackBytes of compute values a thread (4 columns, 2 for f64)
// in both kernels; otherwise one element a thread.
const void* spatial_split_stats_kernel(smxDataType_t x_dtype, smxDataType_t y_dtype, bool vectors);
const void* spatial_split_write_kernel(smxDataType_t x_dtype, smxDataType_t y_dtype, bool vectors);
const void* general_softmax_kernel(smxDataType_t x_dtype, smxDataType_t y_dtype);

// Per-warp-kernel-file getters, one per x dtype (each file compiles in parallel).
const void* warp_softmax_kernel_f16(smxDataType_t y_dtype, int shape_index);
const void* warp_softmax_kernel_bf16(smxDataType_t y_dtype, int shape_index);
const void* warp_softmax_kernel_f32(smxDataType_t y_dtype, int shape_index);
const void* warp_softmax_kernel_f64(smxDataType_t y_dtype, int shape_index);

}  // namespace smx::cuda
