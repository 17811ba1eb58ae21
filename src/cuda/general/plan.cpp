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

namespace {

// The family's parameters and persistent grid for `kernel`: a warp per row, or the whole block for rows of
// tuning.general.block_row_len and more. Both depend on the row length alone, so a row is reduced in the same
// order whatever the number of rows (what batch invariance relies on).
smxStatus_t general_shape(const SoftmaxInfo& info, const PlanContext& context, const void* kernel,
                          GeneralParams* params, unsigned* grid) {
    const int threads_per_row = info.row_len >= context.tuning.general.block_row_len ? kGeneralThreads : 32;
    int blocks = 0;
    SMX_RETURN_IF_ERROR(blocks_per_multiprocessor(kernel, kGeneralThreads, 0, &blocks));
    *grid = persistent_grid(ceil_div(info.rows, kGeneralThreads / threads_per_row), blocks,
                            context.limits.multiprocessor_count);
    params->rows = info.rows;
    params->row_len = info.row_len;
    params->x_axis_stride = info.x.axis_stride;
    params->y_axis_stride = info.y.axis_stride;
    params->index_ndim = describe_index_space(
        info, {{&info.x, params->x_index_strides}, {&info.y, params->y_index_strides}}, params->index_shape);
    params->threads_per_row = threads_per_row;
    params->log_mode = info.is_log() ? 1 : 0;
    return SMX_STATUS_SUCCESS;
}

std::string general_text(const GeneralParams& params, unsigned grid) {
    return fmt::format("cuda general threads_per_row={} threads={} grid={}", params.threads_per_row, kGeneralThreads,
                       grid);
}

// The general kernel with options: its parameters exceed the 360-byte block the tuned families travel in, and
// it takes the option operands' pointers too, so it binds and launches them itself.
class GeneralOptionsCall final : public KernelCall {
public:
    GeneralOptionsCall(const GeneralOptionsParams& params, const Launch& launch) : params_(params), launch_(launch) {}

    smxStatus_t run(const ForwardOperands& operands, cudaStream_t stream) const override {
        GeneralOptionsParams bound = params_;
        bound.general.x = operands.x;
        bound.general.y = operands.y;
        bound.options.scale = static_cast<const float*>(operands.scale);
        bound.options.mask = operands.mask;
        return launch_all(&launch_, 1, &bound, stream);
    }

private:
    GeneralOptionsParams params_;
    Launch launch_;
};

}  // namespace

smxStatus_t plan_general(const SoftmaxInfo& info, const PlanContext& context, FamilyPlan* plan) {
    const void* kernel = general_softmax_kernel(info.x_dtype, info.y_dtype);
    SMX_RETURN_IF_ERROR(require_kernel(kernel, info.x_dtype, info.y_dtype, "general"));
    GeneralParams params;
    unsigned grid = 0;
    SMX_RETURN_IF_ERROR(general_shape(info, context, kernel, &params, &grid));
    *plan = make_family_plan(info, params, {Launch{kernel, dim3(grid), dim3(kGeneralThreads), 0, 0}}, 0,
                             general_text(params, grid));
    return SMX_STATUS_SUCCESS;
}

namespace {

// The general-rows kernel for a batch-invariant Rows problem the fast families leave (softmax_plan.cpp) or the
// general-rows preference sends here: the held-values instance of the fewest held steps covering every
// thread's share of the row (`held_steps=N` in the plan text), else the streamed one (`window_steps=N`);
// nullptr where none applies (another layout or mask layout, a pair without instances, or the general
// override). Loads ahead (`loads=ahead`) unless the preference asks for the structure before them
// (`loads=in-order`). `shape` receives the plan text's part naming the instance.
const void* general_rows_kernel(const SoftmaxInfo& info, const PlanContext& context, int threads_per_row,
                                std::string* shape) {
    const BatchInvariantPreference preference = context.preferences.batch_invariant;
    if (!info.options.batch_invariant || preference == BatchInvariantPreference::General) return nullptr;
    if (!rows_options_apply(info, info.options) || info.x.axis_stride != 1 || info.y.axis_stride != 1) return nullptr;
    const bool loads_ahead = preference != BatchInvariantPreference::GeneralRowsInOrder;
    const char* loads = loads_ahead ? "ahead" : "in-order";
    const std::int64_t steps = ceil_div(info.row_len, std::int64_t{threads_per_row} * kGeneralUnroll);
    for (int held : kGeneralHeldSteps) {
        if (held >= steps) {
            *shape = fmt::format("held_steps={} loads={}", held, loads);
            return general_rows_options_kernel(info.x_dtype, info.y_dtype, threads_per_row, held, loads_ahead);
        }
    }
    if (threads_per_row != kGeneralThreads) return nullptr;
    *shape = fmt::format("window_steps={} loads={}", kGeneralWindowSteps, loads);
    return general_rows_streamed_options_kernel(info.x_dtype, info.y_dtype, loads_ahead);
}

}  // namespace

smxStatus_t plan_general_options(const SoftmaxInfo& info, const PlanContext& context, FamilyPlan* plan) {
    const void* kernel = general_softmax_options_kernel(info.x_dtype, info.y_dtype);
    SMX_RETURN_IF_ERROR(require_kernel(kernel, info.x_dtype, info.y_dtype, "general (options)"));
    GeneralOptionsParams params;
    unsigned grid = 0;
    SMX_RETURN_IF_ERROR(general_shape(info, context, kernel, &params.general, &grid));
    params.options = options_params(info, info.options);
    std::string text = general_text(params.general, grid);
    std::string rows_shape;
    if (const void* rows_kernel = general_rows_kernel(info, context, params.general.threads_per_row, &rows_shape)) {
        // The same parameters (a Rows problem's index space is its rows); only the grid follows the instance.
        kernel = rows_kernel;
        SMX_RETURN_IF_ERROR(general_shape(info, context, kernel, &params.general, &grid));
        text = fmt::format("cuda general-rows threads_per_row={} {} threads={} grid={}", params.general.threads_per_row,
                           rows_shape, kGeneralThreads, grid);
    }
    FamilyPlan chosen;
    chosen.call = std::make_unique<GeneralOptionsCall>(params, Launch{kernel, dim3(grid), dim3(kGeneralThreads), 0, 0});
    chosen.text = text + describe(info.options);
    *plan = std::move(chosen);
    return SMX_STATUS_SUCCESS;
}

}  // namespace smx::cuda
