// params.hpp - the warp family's face towards the plan: its parameter struct, the shapes it is instantiated
// with, and the getter that hands out instances. Plain C++: no CUDA types.
// The family: rows of up to kWarpMaxRowLen elements (Rows layout), each held in registers by a group of
// 1..32 lanes; statistics by warp shuffles. x read once, y written once. Measurements: performance.md#warp.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "cuda/common/options.hpp"
#include "cuda/common/param_block.hpp"
#include "smx/smx.h"

namespace smx::cuda {

struct WarpParams {
    const void* x = nullptr;
    void* y = nullptr;
    std::int64_t rows = 0;
    std::int64_t row_len = 0;
    std::int64_t x_row_stride = 0;
    std::int64_t y_row_stride = 0;
    int log_mode = 0;    // 1: log-softmax
    int x_vector = 0;    // x's base and row stride allow 16-byte loads (set at run time from the pointer)
    int y_vector = 0;    // y's base and row stride allow whole-pack stores (set at run time from the pointer)
    int offsets_32 = 0;  // index in 32 bits (the plan found every offset within them)
    RowsOptionsParams options;  // read by the options instances only (last: the plain ones' offsets stay)

    // Fills in the call's pointers and the alignment facts only they decide.
    void bind(const void* x_pointer, void* y_pointer, void* workspace, std::size_t x_size, std::size_t y_size);
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

// Every instance's launch bound (4 warps); the plan launches 64 or 128 threads (plan_warp,
// performance.md#warp-cta-size).
constexpr int kWarpKernelThreads = 128;
constexpr int kWarpMaxRowLen = 1024;  // 32 lanes x 32 register-held elements per lane
// Shapes of at most this many values per thread also have a body with 32-bit index arithmetic; wider shapes
// lost with it and index in 64 bits (performance.md#warp).
constexpr int kWarpOffsets32MaxValues = 16;

// The instantiated shapes per 16-byte pack size (elements per 16 bytes of x), sorted by capacity. Narrow rows:
// one pack per lane on 1..32 lanes, or two packs on half the lanes where the pair takes them
// (warp_narrow_two_packs); wide rows: 32 lanes and several packs per lane. Rows per thread: see
// warp_narrow_rows_per_thread (f32 x lists both, choose_warp_shape picks). Why each: performance.md#warp.
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

// Rows per thread of the narrow shapes (fewer than 32 lanes): one, except f32 x written narrower and f64,
// which take two (performance.md#warp-rows-per-thread-and-packs-per-lane).
constexpr int warp_narrow_rows_per_thread(std::size_t x_size, std::size_t y_size) {
    return x_size == 2 || (x_size == 4 && y_size == 4) ? 1 : 2;
}
// Whether a narrow shape of two packs per lane on `lanes` lanes serves this pair, in place of one pack on
// twice the lanes: f32 x and 16-bit -> 16-bit always, 16-bit -> f32 on 16 lanes only
// (performance.md#warp-rows-per-thread-and-packs-per-lane).
constexpr bool warp_narrow_two_packs(std::size_t x_size, std::size_t y_size, int lanes) {
    return x_size == 4 || (x_size == 2 && y_size == 2) || (x_size == 2 && y_size == 4 && lanes == 16);
}

// Index of the smallest shape whose capacity holds `row_len` (<= kWarpMaxRowLen) for x and y elements of
// `x_size` and `y_size` bytes, with the rows per thread that pair takes on narrow rows; the shape itself
// through *shape.
int choose_warp_shape(std::int64_t row_len, std::size_t x_size, std::size_t y_size, WarpShape* shape);

// The instance for shape `shape_index` of x's table, or nullptr for a pair or shape that has none.
const void* warp_softmax_kernel(smxDataType_t x_dtype, smxDataType_t y_dtype, int shape_index);
// Per x dtype, one per instances_<x>.cu (each file compiles in parallel).
const void* warp_softmax_kernel_f16(smxDataType_t y_dtype, int shape_index);
const void* warp_softmax_kernel_bf16(smxDataType_t y_dtype, int shape_index);
const void* warp_softmax_kernel_f32(smxDataType_t y_dtype, int shape_index);
const void* warp_softmax_kernel_f64(smxDataType_t y_dtype, int shape_index);

// The options instance (RowsOptionsInput) of shape `shape_index` for option set `set`, or nullptr for pairs
// without one (kRowsOptionsPair: f64 and the cross 16-bit pairs have none).
const void* warp_softmax_options_kernel(smxDataType_t x_dtype, smxDataType_t y_dtype, int shape_index, RowsOptionSet set);
const void* warp_softmax_options_kernel_f16(smxDataType_t y_dtype, int shape_index, RowsOptionSet set);
const void* warp_softmax_options_kernel_bf16(smxDataType_t y_dtype, int shape_index, RowsOptionSet set);
const void* warp_softmax_options_kernel_f32(smxDataType_t y_dtype, int shape_index, RowsOptionSet set);

}  // namespace smx::cuda
