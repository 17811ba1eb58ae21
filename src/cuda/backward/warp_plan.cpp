// warp_plan.cpp - backward-warp's planner: the smallest shape that holds the row, a grid covering every row.
#include <algorithm>
#include <climits>

#include "cuda/backward/plan.hpp"

namespace smx::cuda {

int choose_backward_warp_shape(std::int64_t row_len, int pack) {
    int index = 0;
    const auto holds = [&](const BackwardWarpShape& shape) {
        return shape.packs * pack <= kBackwardWarpMaxValues && shape.lanes * shape.packs * pack >= row_len;
    };
    while (index + 1 < static_cast<int>(kBackwardWarpShapes.size()) && !holds(kBackwardWarpShapes[index])) ++index;
    return index;
}

const void* backward_warp_kernel(smxDataType_t value_dtype, smxDataType_t gradient_dtype, int shape_index) {
    switch (value_dtype) {
        case SMX_DTYPE_F16: return backward_warp_kernel_f16(gradient_dtype, shape_index);
        case SMX_DTYPE_BF16: return backward_warp_kernel_bf16(gradient_dtype, shape_index);
        case SMX_DTYPE_F32: return backward_warp_kernel_f32(gradient_dtype, shape_index);
        case SMX_DTYPE_F64: return backward_warp_kernel_f64(gradient_dtype, shape_index);
        case SMX_DTYPE_I32:
        case SMX_DTYPE_I64:
        case SMX_DTYPE_BOOL: break;  // refused by the backward info
    }
    return nullptr;
}

smxStatus_t plan_backward_warp(const SoftmaxBackwardInfo& info, const PlanContext& context, BackwardFamilyPlan* plan) {
    const int pack = backward_pack(info);
    const int shape_index = choose_backward_warp_shape(info.row_len, pack);
    const BackwardWarpShape shape = kBackwardWarpShapes[static_cast<std::size_t>(shape_index)];
    const void* kernel = backward_warp_kernel(info.dy_dtype, info.dx_dtype, shape_index);
    SMX_RETURN_IF_ERROR(require_backward_kernel(kernel, info, "backward-warp"));
    const int threads = context.preferences.warp_threads > 0 ? context.preferences.warp_threads : context.tuning.backward.warp_threads;
    const std::int64_t rows_per_block = static_cast<std::int64_t>(threads / 32) * (32 / shape.lanes);
    const unsigned grid = static_cast<unsigned>(std::clamp<std::int64_t>(ceil_div(info.rows, rows_per_block), 1, INT_MAX));
    *plan = make_backward_family_plan(info, backward_rows_params(info), {Launch{kernel, dim3(grid), dim3(threads), 0, 0}}, 0,
                                      fmt::format("cuda backward-warp lanes={} packs={} pack={} threads={} grid={}",
                                                  shape.lanes, shape.packs, pack, threads, grid));
    return SMX_STATUS_SUCCESS;
}

}  // namespace smx::cuda
