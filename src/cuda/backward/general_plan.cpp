// general_plan.cpp - backward-general's planner: a warp per row, or a block for long rows; a persistent grid.
// Also the planner of every backward problem with the forward's options.
#include "cuda/backward/plan.hpp"
#include "cuda/general/plan.hpp"

namespace smx::cuda {
namespace {

// The family's parameters and persistent grid for `kernel`: a warp per row, or the whole block for rows of
// tuning.backward.general_block_row_len and more. Both depend on the row length alone, so a row is reduced in
// the same order whatever the number of rows (what batch invariance relies on).
smxStatus_t backward_general_shape(const SoftmaxBackwardInfo& info, const PlanContext& context, const void* kernel,
                                   BackwardGeneralParams* params, unsigned* grid) {
    const int threads_per_row = info.row_len >= context.tuning.backward.general_block_row_len ? kBackwardGeneralThreads : 32;
    int blocks = 0;
    SMX_RETURN_IF_ERROR(blocks_per_multiprocessor(kernel, kBackwardGeneralThreads, 0, &blocks));
    *grid = persistent_grid(ceil_div(info.rows, kBackwardGeneralThreads / threads_per_row), blocks,
                            context.limits.multiprocessor_count);
    params->rows = info.rows;
    params->row_len = info.row_len;
    params->dy_axis_stride = info.dy.axis_stride;
    params->y_axis_stride = info.y.axis_stride;
    params->dx_axis_stride = info.dx.axis_stride;
    params->index_ndim = describe_index_space(
        info, {{&info.dy, params->dy_index_strides}, {&info.y, params->y_index_strides}, {&info.dx, params->dx_index_strides}},
        params->index_shape);
    params->threads_per_row = threads_per_row;
    params->log_mode = info.is_log() ? 1 : 0;
    return SMX_STATUS_SUCCESS;
}

std::string backward_general_text(const BackwardGeneralParams& params, unsigned grid) {
    return fmt::format("cuda backward-general threads_per_row={} threads={} grid={}", params.threads_per_row,
                       kBackwardGeneralThreads, grid);
}

// backward-general with options: its parameters exceed the block the tuned families travel in, and it takes the
// option operands' pointers too, so it binds and launches them itself.
class BackwardGeneralOptionsCall final : public BackwardKernelCall {
public:
    BackwardGeneralOptionsCall(const BackwardGeneralOptionsParams& params, const Launch& launch)
        : params_(params), launch_(launch) {}

    smxStatus_t run(const BackwardPointers& pointers, cudaStream_t stream) const override {
        BackwardGeneralOptionsParams bound = params_;
        bound.general.dy = pointers.dy;
        bound.general.y = pointers.y;
        bound.general.dx = pointers.dx;
        bound.options.scale = static_cast<const float*>(pointers.scale);
        bound.options.mask = pointers.mask;
        return launch_all(&launch_, 1, &bound, stream);
    }

private:
    BackwardGeneralOptionsParams params_;
    Launch launch_;
};

}  // namespace

smxStatus_t plan_backward_general(const SoftmaxBackwardInfo& info, const PlanContext& context, BackwardFamilyPlan* plan) {
    const void* kernel = backward_general_kernel(info.dy_dtype, info.dx_dtype);
    SMX_RETURN_IF_ERROR(require_backward_kernel(kernel, info, "backward-general"));
    BackwardGeneralParams params;
    unsigned grid = 0;
    SMX_RETURN_IF_ERROR(backward_general_shape(info, context, kernel, &params, &grid));
    *plan = make_backward_family_plan(info, params, {Launch{kernel, dim3(grid), dim3(kBackwardGeneralThreads), 0, 0}}, 0,
                                      backward_general_text(params, grid));
    return SMX_STATUS_SUCCESS;
}

smxStatus_t plan_backward_general_options(const SoftmaxBackwardInfo& info, const PlanContext& context,
                                          BackwardFamilyPlan* plan) {
    const void* kernel = backward_general_options_kernel(info.dy_dtype, info.dx_dtype);
    SMX_RETURN_IF_ERROR(require_backward_kernel(kernel, info, "backward-general (options)"));
    BackwardGeneralOptionsParams params;
    unsigned grid = 0;
    SMX_RETURN_IF_ERROR(backward_general_shape(info, context, kernel, &params.general, &grid));
    params.options = options_params(info, info.options);
    BackwardFamilyPlan chosen;
    chosen.call = std::make_unique<BackwardGeneralOptionsCall>(
        params, Launch{kernel, dim3(grid), dim3(kBackwardGeneralThreads), 0, 0});
    chosen.text = backward_general_text(params.general, grid) + describe(info.options);
    *plan = std::move(chosen);
    return SMX_STATUS_SUCCESS;
}

}  // namespace smx::cuda
