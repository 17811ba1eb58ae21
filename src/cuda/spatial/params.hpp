// params.hpp - the Spatial-layout families' face towards the plan (the axis strided, `inner` contiguous):
//   spatial-tile    a tile of contiguous columns cached whole in shared memory by one CTA or a cluster;
//                   x read once, y written once;
//   spatial-online  one CTA per tile, online statistics then a second read of x;
//   spatial-split   the columns cut into chunks, two kernels, chunk statistics through the workspace.
// Measurements: performance.md#spatial-tile, performance.md#spatial-online and performance.md#spatial-split.
// Plain C++: no CUDA types.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cuda/common/param_block.hpp"
#include "smx/smx.h"

namespace smx::cuda {

struct SpatialParams {
    const void* x = nullptr;
    void* y = nullptr;
    void* workspace = nullptr;        // spatial-split: per-chunk (max, sum) of every column
    std::int64_t rows = 0;
    std::int64_t row_len = 0;
    std::int64_t x_axis_stride = 1;
    std::int64_t y_axis_stride = 1;
    std::int64_t inner = 1;           // contiguous columns per outer index
    std::int64_t tiles_per_outer = 1; // ceil(inner / tile_width)
    std::int64_t tiles = 0;           // outer x tiles_per_outer (no 64-bit division in the kernel)
    std::int64_t x_outer_stride = 0;
    std::int64_t y_outer_stride = 0;
    std::int64_t slice_len = 0;       // tile: axis positions per CTA; split: per chunk
    std::int64_t chunks = 0;          // split: chunks per column
    int tile_width = 32;              // columns per tile (online: pow2 <= 32; split: pow2 <= 64; tile: V x pack)
    int log_mode = 0;                 // 1: log-softmax
    int x_whole_lines = 0;            // tile: x's copies ask L2 to fetch whole 128-byte lines

    void bind(const void* x_pointer, void* y_pointer, void* workspace_pointer, std::size_t, std::size_t) {
        x = x_pointer;
        y = y_pointer;
        workspace = workspace_pointer;
    }
};

constexpr int kSpatialTileThreads = 256;       // spatial-tile CTA: 8 warps, 3-4 CTAs per SM
constexpr int kSpatialTileSmallThreads = 128;  // where it lets an SM hold more tiles (the plan decides)
constexpr int kSpatialMaxVectors = 16;         // spatial-tile: at most 16 x 16 bytes = 256 bytes of a row per tile
constexpr int kSpatialSplitThreads = 512;      // spatial-split CTA (both kernels)
// spatial-split: axis positions per thread and loop step; 16 bytes of compute values per vector thread, 4 such
// vectors per step, tiles of at most 64 columns (one warp's lanes side by side). performance.md#spatial-split.
constexpr int kSpatialSplitUnroll = 8;
constexpr int kSpatialSplitPackBytes = 16;
constexpr int kSpatialSplitVectorUnroll = 4;
constexpr int kSpatialSplitMaxWidth = 64;

// vector_bytes: 16 (every pair), or 8 (16-bit x written as f32 only); threads: kSpatialTileThreads or
// kSpatialTileSmallThreads (nullptr otherwise).
const void* spatial_tile_softmax_kernel(smxDataType_t x_dtype, smxDataType_t y_dtype, int vector_bytes, int threads);
const void* spatial_online_softmax_kernel(smxDataType_t x_dtype, smxDataType_t y_dtype);
// vectors: the instances that take kSpatialSplitPackBytes of compute values a thread (4 columns, 2 for f64)
// in both kernels; otherwise one element a thread.
const void* spatial_split_stats_kernel(smxDataType_t x_dtype, smxDataType_t y_dtype, bool vectors);
const void* spatial_split_write_kernel(smxDataType_t x_dtype, smxDataType_t y_dtype, bool vectors);

}  // namespace smx::cuda
