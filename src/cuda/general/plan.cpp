// plan.cpp - the general family's planner. performance.md#general.
#include "cuda/general/plan.hpp"

#include "cuda/general/params.hpp"

namespace smx::cuda {

int describe_index_space(const RowGeometry& geometry, std::initializer_list<IndexStrides> operands,
                         std::int64_t* index_shape) {
    switch (geometry.layout) {
        case RowLayout::Rows:
            index_shape[0] = geometry.rows;
            for (const IndexStrides& operand : operands) operand.strides[0] = operand.layout->row_stride;
            return 1;
        case RowLayout::Spatial:
            index_shape[0] = geometry.outer;
            index_shape[1] = geometry.inner;
            for (const IndexStrides& operand : operands) {
                operand.strides[0] = operand.layout->outer_stride;
                operand.strides[1] = 1;
            }
            return 2;
        case RowLayout::General:
            for (int d = 0; d < geometry.index_ndim; ++d) {
                index_shape[d] = geometry.index_shape[d];
                for (const IndexStrides& operand : operands) operand.strides[d] = operand.layout->index_strides[d];
            }
            return geometry.index_ndim;
    }
    return 0;
}

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
    params.index_ndim = describe_index_space(info, {{&info.x, params.x_index_strides}, {&info.y, params.y_index_strides}},
                                             params.index_shape);
    params.threads_per_row = threads_per_row;
    params.log_mode = info.is_log() ? 1 : 0;
    *plan = make_family_plan(info, params, {Launch{kernel, dim3(grid), dim3(kGeneralThreads), 0, 0}}, 0,
                             fmt::format("cuda general threads_per_row={} threads={} grid={}", threads_per_row,
                                         kGeneralThreads, grid));
    return SMX_STATUS_SUCCESS;
}

}  // namespace smx::cuda
