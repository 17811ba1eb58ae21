// general_plan.cpp - backward-general's planner: a warp per row, or a block for long rows; a persistent grid.
#include "cuda/backward/plan.hpp"
#include "cuda/general/plan.hpp"

namespace smx::cuda {

smxStatus_t plan_backward_general(const SoftmaxBackwardInfo& info, const PlanContext& context, BackwardFamilyPlan* plan) {
    const void* kernel = backward_general_kernel(info.dy_dtype, info.dx_dtype);
    SMX_RETURN_IF_ERROR(require_backward_kernel(kernel, info, "backward-general"));
    const int threads_per_row = info.row_len >= context.tuning.backward.general_block_row_len ? kBackwardGeneralThreads : 32;
    int blocks = 0;
    SMX_RETURN_IF_ERROR(blocks_per_multiprocessor(kernel, kBackwardGeneralThreads, 0, &blocks));
    const unsigned grid = persistent_grid(ceil_div(info.rows, kBackwardGeneralThreads / threads_per_row), blocks,
                                          context.limits.multiprocessor_count);
    BackwardGeneralParams params;
    params.rows = info.rows;
    params.row_len = info.row_len;
    params.dy_axis_stride = info.dy.axis_stride;
    params.y_axis_stride = info.y.axis_stride;
    params.dx_axis_stride = info.dx.axis_stride;
    params.index_ndim = describe_index_space(
        info, {{&info.dy, params.dy_index_strides}, {&info.y, params.y_index_strides}, {&info.dx, params.dx_index_strides}},
        params.index_shape);
    params.threads_per_row = threads_per_row;
    params.log_mode = info.is_log() ? 1 : 0;
    *plan = make_backward_family_plan(info, params, {Launch{kernel, dim3(grid), dim3(kBackwardGeneralThreads), 0, 0}}, 0,
                                      fmt::format("cuda backward-general threads_per_row={} threads={} grid={}",
                                                  threads_per_row, kBackwardGeneralThreads, grid));
    return SMX_STATUS_SUCCESS;
}

}  // namespace smx::cuda
