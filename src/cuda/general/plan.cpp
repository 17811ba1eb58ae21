// plan.cpp - the general family's planner. performance.md#general.
#include "cuda/general/plan.hpp"

#include "cuda/general/params.hpp"

namespace smx::cuda {
namespace {

// The rows' index space with each operand's strides, for any layout.
void describe_index_space(const SoftmaxInfo& info, GeneralParams* params) {
    switch (info.layout) {
        case RowLayout::Rows:
            params->index_ndim = 1;
            params->index_shape[0] = info.rows;
            params->x_index_strides[0] = info.x.row_stride;
            params->y_index_strides[0] = info.y.row_stride;
            return;
        case RowLayout::Spatial:
            params->index_ndim = 2;
            params->index_shape[0] = info.outer;
            params->index_shape[1] = info.inner;
            params->x_index_strides[0] = info.x.outer_stride;
            params->y_index_strides[0] = info.y.outer_stride;
            params->x_index_strides[1] = 1;
            params->y_index_strides[1] = 1;
            return;
        case RowLayout::General:
            params->index_ndim = info.index_ndim;
            for (int d = 0; d < info.index_ndim; ++d) {
                params->index_shape[d] = info.index_shape[d];
                params->x_index_strides[d] = info.x.index_strides[d];
                params->y_index_strides[d] = info.y.index_strides[d];
            }
            return;
    }
}

}  // namespace

smxStatus_t plan_general(const SoftmaxInfo& info, const PlanContext& context, FamilyPlan* plan) {
    const void* kernel = general_softmax_kernel(info.x_dtype, info.y_dtype);
    SMX_RETURN_IF_ERROR(require_kernel(kernel, info.x_dtype, info.y_dtype, "general"));
    const int threads_per_row = info.row_len >= context.tuning.general.block_row_len ? kGeneralThreads : 32;
    int blocks = 0;
    SMX_RETURN_IF_ERROR(blocks_per_multiprocessor(kernel, kGeneralThreads, 0, &blocks));
    const unsigned grid =
        persistent_grid(ceil_div(info.rows, kGeneralThreads / threads_per_row), blocks, context.limits.multiprocessor_count);
    GeneralParams params;
    params.rows = info.rows;
    params.row_len = info.row_len;
    params.x_axis_stride = info.x.axis_stride;
    params.y_axis_stride = info.y.axis_stride;
    describe_index_space(info, &params);
    params.threads_per_row = threads_per_row;
    params.log_mode = info.is_log() ? 1 : 0;
    *plan = make_family_plan(info, params, {Launch{kernel, dim3(grid), dim3(kGeneralThreads), 0, 0}}, 0,
                             fmt::format("cuda general threads_per_row={} threads={} grid={}", threads_per_row,
                                         kGeneralThreads, grid));
    return SMX_STATUS_SUCCESS;
}

}  // namespace smx::cuda
