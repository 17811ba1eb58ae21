// logprobs_plan.cpp - the CUDA plans of logsumexp, log-softmax gather and cross-entropy: which kernels run a
// problem, decided once from its info, the device's limits, the tuning table and the plan preferences. run()
// only binds the pointers and launches. The kernels and their planners: src/cuda/logprobs/.
#include <cuda_runtime.h>

#include <initializer_list>
#include <memory>
#include <string>
#include <utility>

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "cuda/backend.hpp"
#include "cuda/common/util.hpp"
#include "cuda/logprobs/plan.hpp"

namespace smx {
namespace {

using cuda::LogprobsCall;
using cuda::LogprobsGeneralParams;
using cuda::LogprobsPerRowParams;
using cuda::LogprobsPointers;
using cuda::LogprobsRowsParams;
using cuda::PlanContext;
using cuda::RowOp;
using cuda::RowsProblem;

// What the three plans share: the device, the launches and their text.
class CudaLogprobsRun {
public:
    CudaLogprobsRun(int device_id, LogprobsCall call, const std::string& family)
        : device_id_(device_id), call_(std::move(call)), text_(call_.text(family)) {}

    std::size_t workspace_bytes() const { return call_.workspace(); }
    const std::string& description() const { return text_; }
    smxStatus_t run(const LogprobsPointers& pointers, void* stream) const {
        cuda::ScopedDevice device(device_id_);
        SMX_RETURN_IF_ERROR(device.status());
        return call_.run(pointers, static_cast<cudaStream_t>(stream));
    }

private:
    int device_id_;
    LogprobsCall call_;
    std::string text_;
};

class CudaLogsumexpPlan final : public LogsumexpPlan {
public:
    explicit CudaLogsumexpPlan(CudaLogprobsRun run) : run_(std::move(run)) {}
    std::size_t workspace_bytes() const override { return run_.workspace_bytes(); }
    const std::string& description() const override { return run_.description(); }
    smxStatus_t run(void* workspace, void* out, const void* x, void* stream) const override {
        return run_.run(LogprobsPointers{x, nullptr, out, nullptr, nullptr, workspace}, stream);
    }

private:
    CudaLogprobsRun run_;
};

class CudaLogSoftmaxGatherPlan final : public LogSoftmaxGatherPlan {
public:
    explicit CudaLogSoftmaxGatherPlan(CudaLogprobsRun run) : run_(std::move(run)) {}
    std::size_t workspace_bytes() const override { return run_.workspace_bytes(); }
    const std::string& description() const override { return run_.description(); }
    smxStatus_t run(void* workspace, void* out, const void* x, const void* index, void* stream) const override {
        return run_.run(LogprobsPointers{x, index, out, nullptr, nullptr, workspace}, stream);
    }

private:
    CudaLogprobsRun run_;
};

class CudaCrossEntropyPlan final : public CrossEntropyPlan {
public:
    explicit CudaCrossEntropyPlan(CudaLogprobsRun run) : run_(std::move(run)) {}
    std::size_t workspace_bytes() const override { return run_.workspace_bytes(); }
    const std::string& description() const override { return run_.description(); }
    smxStatus_t run(void* workspace, void* loss, void* lse, void* dlogits, const void* logits, const void* target,
                    void* stream) const override {
        return run_.run(LogprobsPointers{logits, target, loss, lse, dlogits, workspace}, stream);
    }

private:
    CudaLogprobsRun run_;
};

// The general kernel's (and the per-row kernels') index space over the geometry's rows, with one operand layout
// per slot (NULL: a slot not used).
cuda::IndexSpace index_space(const RowGeometry& geometry, std::initializer_list<const OperandLayout*> slots, int* ndim) {
    cuda::IndexSpace space;
    switch (geometry.layout) {
        case RowLayout::Rows:
            *ndim = 1;
            space.shape[0] = geometry.rows;
            break;
        case RowLayout::Spatial:
            *ndim = 2;
            space.shape[0] = geometry.outer;
            space.shape[1] = geometry.inner;
            break;
        case RowLayout::General:
            *ndim = geometry.index_ndim;
            for (int d = 0; d < geometry.index_ndim; ++d) space.shape[d] = geometry.index_shape[d];
            break;
    }
    int slot = 0;
    for (const OperandLayout* layout : slots) {
        if (layout != nullptr) {
            space.axis_stride[slot] = layout->axis_stride;
            switch (geometry.layout) {
                case RowLayout::Rows: space.strides[slot][0] = layout->row_stride; break;
                case RowLayout::Spatial:
                    space.strides[slot][0] = layout->outer_stride;
                    space.strides[slot][1] = 1;
                    break;
                case RowLayout::General:
                    for (int d = 0; d < geometry.index_ndim; ++d) space.strides[slot][d] = layout->index_strides[d];
                    break;
            }
        }
        ++slot;
    }
    return space;
}

LogprobsGeneralParams general_params(const RowGeometry& geometry, RowOp op,
                                     std::initializer_list<const OperandLayout*> slots) {
    LogprobsGeneralParams params;
    int ndim = 0;
    params.space = index_space(geometry, slots, &ndim);
    params.ndim = static_cast<std::int8_t>(ndim);
    params.rows = geometry.rows;
    params.row_len = geometry.row_len;
    params.op = static_cast<std::int8_t>(op);
    return params;
}

LogprobsRowsParams rows_params(const RowGeometry& geometry, RowOp op) {
    LogprobsRowsParams params;
    params.rows = geometry.rows;
    params.row_len = geometry.row_len;
    params.op = static_cast<int>(op);
    return params;
}

// The stats kernel over Rows (lane groups, a CTA, a cluster or a split per row, as the problem asks).
smxStatus_t plan_stats(const RowsProblem& problem, bool with_mean, const LogprobsRowsParams& params,
                       const PlanContext& context, LogprobsCall* call, std::string* family) {
    cuda::StatsChoice choice;
    const bool cross_entropy = static_cast<RowOp>(params.op) == RowOp::CrossEntropy;
    SMX_RETURN_IF_ERROR(cuda::choose_stats(problem, with_mean, cross_entropy, context, &choice));
    *family = choice.split ? "stats-split" : choice.chunks > 1 ? "stats-cluster" : "stats";
    return cuda::add_stats(problem, choice, params, call);
}

template <class Plan, class Base>
smxStatus_t finish_plan(int device_id, LogprobsCall call, const std::string& family, std::unique_ptr<Base>* plan) {
    *plan = std::make_unique<Plan>(CudaLogprobsRun(device_id, std::move(call), family));
    return SMX_STATUS_SUCCESS;
}

}  // namespace

// logsumexp: Rows through the stats kernel (lane groups for short rows, a CTA per row, a cluster or a split for few
// long rows); every other layout through the general kernel.
smxStatus_t make_cuda_logsumexp_plan(const LogsumexpInfo& info, int device_id, const DeviceLimits& limits,
                                     const cuda::PlanPreferences& preferences, std::unique_ptr<LogsumexpPlan>* plan) {
    LogprobsCall call(cuda::has_dependent_launch(limits));
    if (info.rows == 0) {
        call.note("nothing to write");
        return finish_plan<CudaLogsumexpPlan>(device_id, std::move(call), "none", plan);
    }
    cuda::ScopedDevice device(device_id);
    SMX_RETURN_IF_ERROR(device.status());
    const PlanContext context{limits, cuda::tuning_for(limits), preferences};
    std::string family = "general";
    if (info.layout == RowLayout::Rows) {
        LogprobsRowsParams params = rows_params(info, RowOp::Logsumexp);
        params.x_row_stride = info.x.row_stride;
        params.out_row_stride = info.out.row_stride;
        const RowsProblem problem{info.rows, info.row_len, info.x_dtype, info.x_dtype};
        SMX_RETURN_IF_ERROR(plan_stats(problem, false, params, context, &call, &family));
    } else {
        SMX_RETURN_IF_ERROR(cuda::add_general(general_params(info, RowOp::Logsumexp, {&info.x, &info.out}), info.x_dtype,
                                              info.x_dtype, context, &call));
    }
    return finish_plan<CudaLogsumexpPlan>(device_id, std::move(call), family, plan);
}

// log_softmax_gather: as logsumexp, each row's K indices read once its statistics are complete.
smxStatus_t make_cuda_log_softmax_gather_plan(const LogSoftmaxGatherInfo& info, int device_id,
                                              const DeviceLimits& limits, const cuda::PlanPreferences& preferences,
                                              std::unique_ptr<LogSoftmaxGatherPlan>* plan) {
    LogprobsCall call(cuda::has_dependent_launch(limits));
    if (info.rows * info.gathered == 0) {
        call.note("nothing to write");
        return finish_plan<CudaLogSoftmaxGatherPlan>(device_id, std::move(call), "none", plan);
    }
    cuda::ScopedDevice device(device_id);
    SMX_RETURN_IF_ERROR(device.status());
    const PlanContext context{limits, cuda::tuning_for(limits), preferences};
    std::string family = "general";
    const int index_64 = info.index_dtype == SMX_DTYPE_I64 ? 1 : 0;
    if (info.layout == RowLayout::Rows) {
        LogprobsRowsParams params = rows_params(info, RowOp::Gather);
        params.x_row_stride = info.x.row_stride;
        params.index_row_stride = info.index.row_stride;
        params.index_axis_stride = info.index.axis_stride;
        params.out_row_stride = info.out.row_stride;
        params.out_axis_stride = info.out.axis_stride;
        params.gathered = info.gathered;
        params.index_64 = index_64;
        const RowsProblem problem{info.rows, info.row_len, info.x_dtype, info.x_dtype};
        SMX_RETURN_IF_ERROR(plan_stats(problem, false, params, context, &call, &family));
    } else {
        LogprobsGeneralParams params = general_params(info, RowOp::Gather, {&info.x, &info.index, &info.out});
        params.gathered = info.gathered;
        params.index_64 = static_cast<std::int8_t>(index_64);
        SMX_RETURN_IF_ERROR(cuda::add_general(params, info.x_dtype, info.x_dtype, context, &call));
    }
    return finish_plan<CudaLogSoftmaxGatherPlan>(device_id, std::move(call), family, plan);
}

// cross_entropy, in launch order:
//   count    MEAN with dlogits: the rows it counts, which scale the gradient;
//   Rows with dlogits of the logits' dtype or f32: ce-regs where a cluster holds the row in registers (logits read
//            once); else stats (a CTA, a cluster or a split per row) leaving each row's lse, then ce-write (logits
//            read twice, the second time partly from L2). Without dlogits: stats alone.
//   other layouts and dlogits dtypes: the general kernel, its per-row results compact in the workspace;
//   finish   SUM and MEAN: the per-row losses reduced in a fixed order; general: the loss and lse scattered.
smxStatus_t make_cuda_cross_entropy_plan(const CrossEntropyInfo& info, int device_id, const DeviceLimits& limits,
                                         const cuda::PlanPreferences& preferences,
                                         std::unique_ptr<CrossEntropyPlan>* plan) {
    LogprobsCall call(cuda::has_dependent_launch(limits));
    if (info.rows == 0 && !info.reduced()) {
        call.note("nothing to write");
        return finish_plan<CudaCrossEntropyPlan>(device_id, std::move(call), "none", plan);
    }
    cuda::ScopedDevice device(device_id);
    SMX_RETURN_IF_ERROR(device.status());
    const PlanContext context{limits, cuda::tuning_for(limits), preferences};
    const smxDataType_t dlogits_dtype = info.has_dlogits ? info.dlogits_dtype : info.logits_dtype;
    const bool with_gradient = info.has_dlogits && info.numel > 0;
    const bool fast = info.layout == RowLayout::Rows && cuda::is_fast_dlogits_pair(info.logits_dtype, dlogits_dtype);
    const int index_64 = info.target_dtype == SMX_DTYPE_I64 ? 1 : 0;

    // The per-row kernels' view: slot 0 the target, 1 lse, 2 an unreduced loss.
    LogprobsPerRowParams per_row;
    int per_row_ndim = 0;
    per_row.space = index_space(info, {&info.target, info.has_lse ? &info.lse : nullptr,
                                       info.reduced() ? nullptr : &info.loss}, &per_row_ndim);
    per_row.ndim = per_row_ndim;
    per_row.rows = info.rows;
    per_row.ignore_index = info.ignore_index;
    per_row.reduction = info.reduction;
    per_row.index_64 = index_64;
    per_row.scatter_loss = fast ? 0 : 1;
    per_row.scatter_lse = !fast && info.has_lse ? 1 : 0;
    if (info.reduction == SMX_REDUCTION_MEAN && with_gradient && info.rows > 0) cuda::add_ce_count(per_row, &call);

    std::string family = "general";
    if (info.rows > 0 && fast) {
        LogprobsRowsParams params = rows_params(info, RowOp::CrossEntropy);
        params.x_row_stride = info.logits.row_stride;
        params.dlogits_row_stride = info.has_dlogits ? info.dlogits.row_stride : 0;
        params.index_row_stride = info.target.row_stride;
        params.out_row_stride = info.reduced() ? 0 : info.loss.row_stride;
        params.lse_row_stride = info.has_lse ? info.lse.row_stride : 0;
        params.ignore_index = info.ignore_index;
        params.label_smoothing = info.label_smoothing;
        params.reduction = info.reduction;
        params.index_64 = index_64;
        const RowsProblem problem{info.rows, info.row_len, info.logits_dtype, dlogits_dtype};
        const bool with_mean = info.label_smoothing > 0.0;
        cuda::CeRegsChoice regs;
        if (with_gradient && context.preferences.long_rows != cuda::LongRowsPreference::Split) {
            SMX_RETURN_IF_ERROR(cuda::choose_ce_regs(problem, context, &regs));
        }
        if (regs.fits) {
            family = "ce-regs";
            cuda::add_ce_regs(problem, regs, params, &call);
        } else {
            params.lse_to_workspace = with_gradient ? 1 : 0;
            SMX_RETURN_IF_ERROR(plan_stats(problem, with_mean, params, context, &call, &family));
            if (with_gradient) {
                family = "ce-two-pass";
                SMX_RETURN_IF_ERROR(cuda::add_ce_write(problem, params, context, &call));
            }
        }
    } else if (info.rows > 0) {
        LogprobsGeneralParams params = general_params(
            info, RowOp::CrossEntropy, {&info.logits, info.has_dlogits ? &info.dlogits : nullptr, &info.target});
        params.ignore_index = info.ignore_index;
        params.label_smoothing = info.label_smoothing;
        params.index_64 = static_cast<std::int8_t>(index_64);
        params.reduction = static_cast<std::int8_t>(info.reduction);
        call.need_workspace(cuda::partials_offset(info.rows, static_cast<std::int64_t>(dtype_size(info.loss_dtype))));
        SMX_RETURN_IF_ERROR(cuda::add_general(params, info.logits_dtype, dlogits_dtype, context, &call));
    }
    if (info.reduced() || !fast) cuda::add_ce_finish(per_row, info.loss_dtype, &call);
    if (info.rows == 0) family = "finish";
    return finish_plan<CudaCrossEntropyPlan>(device_id, std::move(call), family, plan);
}

}  // namespace smx
