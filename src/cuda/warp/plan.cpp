// plan.cpp - the warp family's planner: the smallest shape that holds the row, the CTA size and the index width.
#include "cuda/warp/plan.hpp"

#include <algorithm>
#include <climits>
#include <cstdint>

#include "cuda/warp/params.hpp"

namespace smx::cuda {

void WarpParams::bind(const void* x_pointer, void* y_pointer, void*, std::size_t x_size, std::size_t y_size) {
    x = x_pointer;
    y = y_pointer;
    // Whole-pack access needs every row start aligned: the base and the row stride in bytes.
    x_vector = reinterpret_cast<std::uintptr_t>(x_pointer) % 16 == 0 &&
               (x_row_stride * static_cast<std::int64_t>(x_size)) % 16 == 0;
    y_vector = reinterpret_cast<std::uintptr_t>(y_pointer) % 16 == 0 &&
               (y_row_stride * static_cast<std::int64_t>(y_size)) % 16 == 0;
}

namespace {

// Whether the warp kernel may index in 32 bits: shapes of at most kWarpOffsets32MaxValues values per thread,
// where the row count (with more than a CTA's rows to spare past it) and every element's offset from its base
// fit in INT_MAX; a thread then issues its first load after fewer instructions (performance.md#warp).
bool warp_offsets_fit_32_bits(const SoftmaxInfo& info, const WarpShape& shape, const PlanPreferences& preferences) {
    if (shape.cols_per_lane * shape.rows_per_thread > kWarpOffsets32MaxValues) return false;
    if (preferences.warp_offsets_64) return false;
    constexpr std::int64_t kLimit = INT_MAX;
    constexpr std::int64_t kSpareRows = std::int64_t{1} << 16;  // > a CTA's rows: indices past the end fit too
    if (info.rows > kLimit - kSpareRows) return false;
    for (const std::int64_t stride : {info.x.row_stride, info.y.row_stride}) {
        if (stride < -kLimit || stride > kLimit) return false;
        const std::int64_t magnitude = stride < 0 ? -stride : stride;
        if (magnitude > 0 && info.rows - 1 > (kLimit - info.row_len) / magnitude) return false;
    }
    return true;
}

}  // namespace

smxStatus_t plan_warp(const SoftmaxInfo& info, const PlanContext& context, FamilyPlan* plan) {
    WarpShape shape{};
    const int shape_index = choose_warp_shape(info.row_len, dtype_size(info.x_dtype), dtype_size(info.y_dtype), &shape);
    const void* kernel = info.options.any() ? warp_softmax_options_kernel(info.x_dtype, info.y_dtype, shape_index,
                                                                          rows_option_set_for(info, context))
                                            : warp_softmax_kernel(info.x_dtype, info.y_dtype, shape_index);
    SMX_RETURN_IF_ERROR(require_kernel(kernel, info.x_dtype, info.y_dtype, "warp"));
    const int pack = static_cast<int>(16 / dtype_size(info.x_dtype));
    // Shapes on 32 lanes and the narrow two-pack ones move >= 2 KiB of x per small CTA (performance.md#warp).
    const bool small_ctas = shape.lanes == 32 || shape.narrow_two_packs(pack);
    const int threads = context.preferences.warp_threads > 0 ? context.preferences.warp_threads
                        : small_ctas                        ? context.tuning.warp.small_cta_threads
                                                            : context.tuning.warp.cta_threads;
    const std::int64_t rows_per_block =
        static_cast<std::int64_t>(threads / 32) * (32 / shape.lanes) * shape.rows_per_thread;
    // One pass of the grid over the rows, not a persistent grid: the block scheduler overlaps one block's
    // tail with the next (performance.md#warp).
    const unsigned grid = static_cast<unsigned>(std::clamp<std::int64_t>(ceil_div(info.rows, rows_per_block), 1, INT_MAX));
    WarpParams params = rows_params<WarpParams>(info);
    params.offsets_32 = warp_offsets_fit_32_bits(info, shape, context.preferences) ? 1 : 0;
    *plan = make_family_plan(info, params, {Launch{kernel, dim3(grid), dim3(threads), 0, 0}}, 0,
                             fmt::format("cuda warp lanes={} cols_per_lane={} rows_per_thread={} threads={} grid={} "
                                         "offsets={}",
                                         shape.lanes, shape.cols_per_lane, shape.rows_per_thread, threads, grid,
                                         params.offsets_32 != 0 ? 32 : 64));
    return SMX_STATUS_SUCCESS;
}

int choose_warp_shape(std::int64_t row_len, std::size_t x_size, std::size_t y_size, WarpShape* shape) {
    // The first shape of x's table that holds the row and that this pair takes: narrow shapes with the pair's
    // rows per thread, or two packs per lane where warp_narrow_two_packs admits them (performance.md#warp).
    const int narrow_rows = warp_narrow_rows_per_thread(x_size, y_size);
    const int pack = static_cast<int>(16 / x_size);
    const auto pick = [&](const auto& shapes) {
        int index = 0;
        const auto fits = [&](const WarpShape& s) {
            if (s.capacity() < row_len) return false;
            if (s.narrow_two_packs(pack)) return warp_narrow_two_packs(x_size, y_size, s.lanes);
            return s.lanes == 32 || s.rows_per_thread == narrow_rows;
        };
        while (index + 1 < static_cast<int>(shapes.size()) && !fits(shapes[index])) ++index;
        *shape = shapes[index];
        return index;
    };
    switch (x_size) {
        case 2: return pick(WarpShapeTable<8>::shapes);
        case 4: return pick(WarpShapeTable<4>::shapes);
        default: return pick(WarpShapeTable<2>::shapes);
    }
}

const void* warp_softmax_options_kernel(smxDataType_t x_dtype, smxDataType_t y_dtype, int shape_index, RowsOptionSet set) {
    switch (x_dtype) {
        case SMX_DTYPE_F16: return warp_softmax_options_kernel_f16(y_dtype, shape_index, set);
        case SMX_DTYPE_BF16: return warp_softmax_options_kernel_bf16(y_dtype, shape_index, set);
        case SMX_DTYPE_F32: return warp_softmax_options_kernel_f32(y_dtype, shape_index, set);
        default: return nullptr;  // f64 and the types softmax refuses: no options instance
    }
}

const void* warp_softmax_kernel(smxDataType_t x_dtype, smxDataType_t y_dtype, int shape_index) {
    switch (x_dtype) {
        case SMX_DTYPE_F16: return warp_softmax_kernel_f16(y_dtype, shape_index);
        case SMX_DTYPE_BF16: return warp_softmax_kernel_bf16(y_dtype, shape_index);
        case SMX_DTYPE_F32: return warp_softmax_kernel_f32(y_dtype, shape_index);
        case SMX_DTYPE_F64: return warp_softmax_kernel_f64(y_dtype, shape_index);
        case SMX_DTYPE_I32:
        case SMX_DTYPE_I64:
        case SMX_DTYPE_BOOL: break;  // refused by the softmax info
    }
    return nullptr;
}

}  // namespace smx::cuda
