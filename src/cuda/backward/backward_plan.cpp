// backward_plan.cpp - the CUDA softmax backward plan: which backward family runs a problem, decided once from
// the SoftmaxBackwardInfo, the device's limits, its architecture's tuning table and the plan preferences
// (never from a pointer). run() only binds the pointers and launches. Each family's own choices live in its
// planner (warp_plan, regs_plan, split_plan, spatial_plan, general_plan).
#include <cuda_runtime.h>

#include <memory>
#include <string>

#include "cuda/backend.hpp"
#include "cuda/backward/plan.hpp"
#include "cuda/common/util.hpp"

namespace smx {
namespace {

using cuda::BackwardFamilyPlan;
using cuda::LongRowsPreference;
using cuda::PlanContext;

class CudaSoftmaxBackwardPlan final : public SoftmaxBackwardPlan {
public:
    CudaSoftmaxBackwardPlan(int device_id, BackwardFamilyPlan family) : device_id_(device_id), family_(std::move(family)) {}

    std::size_t workspace_bytes() const override { return family_.workspace; }
    const std::string& description() const override { return family_.text; }

    smxStatus_t run(void* workspace, void* dx, const void* dy, const void* y, void* stream) const override {
        return run_with_options(workspace, dx, dy, y, nullptr, nullptr, stream);
    }

    smxStatus_t run_with_options(void* workspace, void* dx, const void* dy, const void* y, const void* scale,
                                 const void* mask, void* stream) const override {
        if (!family_.call) return SMX_STATUS_SUCCESS;  // nothing to launch
        cuda::ScopedDevice device(device_id_);
        SMX_RETURN_IF_ERROR(device.status());
        return family_.call->run(cuda::BackwardPointers{dy, y, dx, workspace, scale, mask},
                                 static_cast<cudaStream_t>(stream));
    }

private:
    int device_id_;
    BackwardFamilyPlan family_;
};

// Rows layout, in order:
//   (a) rows of up to 1024 elements: a lane group per row (backward-warp);
//   (b) few long rows whose CTAs a cluster per row would leave most SMs idle: their CTAs spread over the
//       device behind a grid barrier (backward-grid), where every CTA fits at once: dy and y read once;
//   (c) rows a cluster of CTAs holds in registers (backward-regs): read once;
//   (d) the rest, rows too long for any cluster (and for the grid form): backward-split, dy and y read twice.
// Dy and y together are twice the forward's x, so a cluster holds rows half as long as the forward's does and
// split takes over earlier; the crossovers are the forward's until the H200 runs measure the backward's
// (performance.md#backward).
smxStatus_t plan_backward_rows(const SoftmaxBackwardInfo& info, const PlanContext& context, BackwardFamilyPlan* plan) {
    if (info.row_len <= cuda::kBackwardWarpMaxRowLen) return cuda::plan_backward_warp(info, context, plan);

    cuda::BackwardRegsChoice regs;
    SMX_RETURN_IF_ERROR(cuda::choose_backward_regs(info, context, &regs));
    cuda::BackwardGridChoice grid;
    SMX_RETURN_IF_ERROR(cuda::choose_backward_grid(info, context, &grid));
    const bool clusters_fill_device = regs.fits && info.rows * regs.cluster >= context.limits.multiprocessor_count;
    bool use_grid = grid.fits && info.row_len >= context.tuning.backward.grid_min_len && !clusters_fill_device;
    bool use_regs = !use_grid && regs.fits;
    switch (context.preferences.long_rows) {
        case LongRowsPreference::Rule:
        case LongRowsPreference::Steps: break;  // the backward has no steps form
        case LongRowsPreference::Cluster:
            use_grid = false;
            use_regs = regs.fits;
            break;
        case LongRowsPreference::Grid:
            use_grid = grid.fits;
            use_regs = !use_grid && regs.fits;
            break;
        case LongRowsPreference::Split: use_grid = use_regs = false; break;
    }
    if (use_grid) return cuda::plan_backward_grid(info, grid, plan);
    if (use_regs) return cuda::plan_backward_regs(info, regs, plan);
    return cuda::plan_backward_split(info, context, plan);
}

}  // namespace

smxStatus_t make_cuda_softmax_backward_plan(const SoftmaxBackwardInfo& info, int device_id, const DeviceLimits& limits,
                                            const cuda::PlanPreferences& preferences,
                                            std::unique_ptr<SoftmaxBackwardPlan>* plan) {
    BackwardFamilyPlan family;
    if (info.numel == 0) {
        family.text = "cuda none (zero-size tensor: nothing to launch)";
        *plan = std::make_unique<CudaSoftmaxBackwardPlan>(device_id, std::move(family));
        return SMX_STATUS_SUCCESS;
    }
    cuda::ScopedDevice device(device_id);
    SMX_RETURN_IF_ERROR(device.status());
    const PlanContext context{limits, cuda::tuning_for(limits), preferences};
    if (info.options.any()) {
        // Options: backward-general on every layout, as the forward's options run on its general family.
        SMX_RETURN_IF_ERROR(cuda::plan_backward_general_options(info, context, &family));
    } else if (cuda::backward_mixed_f64(info)) {
        // Dtype combinations with f64 on some side but not all: computed in double by the general family.
        SMX_RETURN_IF_ERROR(cuda::plan_backward_general(info, context, &family));
    } else {
        switch (info.layout) {
            case RowLayout::Rows: SMX_RETURN_IF_ERROR(plan_backward_rows(info, context, &family)); break;
            case RowLayout::Spatial: SMX_RETURN_IF_ERROR(cuda::plan_backward_spatial(info, context, &family)); break;
            case RowLayout::General: SMX_RETURN_IF_ERROR(cuda::plan_backward_general(info, context, &family)); break;
        }
    }
    *plan = std::make_unique<CudaSoftmaxBackwardPlan>(device_id, std::move(family));
    return SMX_STATUS_SUCCESS;
}

}  // namespace smx
