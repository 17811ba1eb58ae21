// api.cpp - the C entry points of logsumexp, log-softmax gather and cross-entropy: validate into an info, ask
// the handle's backend for a plan, run it. One flow for the three, as for softmax (ops/softmax/api.cpp).
#include <cstdint>

#include "core/api_guard.hpp"
#include "core/error.hpp"
#include "cpu/logprobs_cpu.hpp"
#include "ops/common/entry.hpp"
#include "ops/common/workspace.hpp"
#include "ops/logprobs/info.hpp"
#include "ops/logprobs/plan.hpp"

struct smxLogsumexpDescriptor {
    SMX_OBJECT_TAG("smxLogsumexpDescriptor_t");
    smx::DescriptorDevice device;
    smx::LogsumexpInfo info;
    std::unique_ptr<smx::LogsumexpPlan> plan;
};

struct smxLogSoftmaxGatherDescriptor {
    SMX_OBJECT_TAG("smxLogSoftmaxGatherDescriptor_t");
    smx::DescriptorDevice device;
    smx::LogSoftmaxGatherInfo info;
    std::unique_ptr<smx::LogSoftmaxGatherPlan> plan;
};

struct smxCrossEntropyDescriptor {
    SMX_OBJECT_TAG("smxCrossEntropyDescriptor_t");
    smx::DescriptorDevice device;
    smx::CrossEntropyInfo info;
    std::unique_ptr<smx::CrossEntropyPlan> plan;
};

namespace smx {

// The backend's plan of each info (create() in ops/common/entry.hpp finds them by their argument types).
smxStatus_t make_plan(const smxHandle& handle, const LogsumexpInfo& info, std::unique_ptr<LogsumexpPlan>* plan) {
    return backend_plan(handle, info, plan, make_cpu_logsumexp_plan, SMX_CUDA_PLANNER(make_cuda_logsumexp_plan));
}

smxStatus_t make_plan(const smxHandle& handle, const LogSoftmaxGatherInfo& info,
                      std::unique_ptr<LogSoftmaxGatherPlan>* plan) {
    return backend_plan(handle, info, plan, make_cpu_log_softmax_gather_plan,
                        SMX_CUDA_PLANNER(make_cuda_log_softmax_gather_plan));
}

smxStatus_t make_plan(const smxHandle& handle, const CrossEntropyInfo& info, std::unique_ptr<CrossEntropyPlan>* plan) {
    return backend_plan(handle, info, plan, make_cpu_cross_entropy_plan,
                        SMX_CUDA_PLANNER(make_cuda_cross_entropy_plan));
}

namespace {

smxStatus_t logsumexp(smxLogsumexpDescriptor_t desc, void* workspace, std::size_t workspace_bytes, void* out,
                      const void* x, void* stream) {
    SMX_RETURN_IF_ERROR(check_live(desc, "desc"));
    if (desc->info.rows == 0) return SMX_STATUS_SUCCESS;  // out is empty: nothing to write, nothing launched
    SMX_RETURN_IF_ERROR(check_workspace(workspace, workspace_bytes, desc->plan->workspace_bytes()));
    TouchedOperands operands;
    SMX_RETURN_IF_ERROR(check_logsumexp_pointers(desc->info, out, x, operands));
    SMX_RETURN_IF_ERROR(check_device(desc->device, operands));
    return desc->plan->run(workspace, out, x, stream);
}

smxStatus_t log_softmax_gather(smxLogSoftmaxGatherDescriptor_t desc, void* workspace, std::size_t workspace_bytes,
                               void* out, const void* x, const void* index, void* stream) {
    SMX_RETURN_IF_ERROR(check_live(desc, "desc"));
    if (desc->info.rows * desc->info.gathered == 0) return SMX_STATUS_SUCCESS;  // out is empty
    SMX_RETURN_IF_ERROR(check_workspace(workspace, workspace_bytes, desc->plan->workspace_bytes()));
    TouchedOperands operands;
    SMX_RETURN_IF_ERROR(check_log_softmax_gather_pointers(desc->info, out, x, index, operands));
    SMX_RETURN_IF_ERROR(check_device(desc->device, operands));
    return desc->plan->run(workspace, out, x, index, stream);
}

smxStatus_t cross_entropy(smxCrossEntropyDescriptor_t desc, void* workspace, std::size_t workspace_bytes, void* loss,
                          void* lse, void* dlogits, const void* logits, const void* target, void* stream) {
    SMX_RETURN_IF_ERROR(check_live(desc, "desc"));
    const CrossEntropyInfo& info = desc->info;
    if (info.rows == 0 && !info.reduced()) return SMX_STATUS_SUCCESS;  // a reduced loss is written even then
    SMX_RETURN_IF_ERROR(check_workspace(workspace, workspace_bytes, desc->plan->workspace_bytes()));
    TouchedOperands operands;
    SMX_RETURN_IF_ERROR(check_cross_entropy_pointers(info, loss, lse, dlogits, logits, target, operands));
    SMX_RETURN_IF_ERROR(check_device(desc->device, operands));
    return desc->plan->run(workspace, loss, info.has_lse ? lse : nullptr, info.has_dlogits ? dlogits : nullptr,
                           logits, target, stream);
}

}  // namespace
}  // namespace smx

extern "C" {

SMX_API smxStatus_t smxCreateLogsumexpDescriptor(smxHandle_t handle, smxLogsumexpDescriptor_t* desc, int axis,
                                                 smxTensorDescriptor_t outDesc, smxTensorDescriptor_t xDesc) {
    return smx::guard_api("smxCreateLogsumexpDescriptor", [&] {
        return smx::create(handle, desc, {{xDesc, "xDesc"}, {outDesc, "outDesc"}},
                           [&](smx::LogsumexpInfo* info) { return smx::make_logsumexp_info(axis, outDesc, xDesc, info); });
    });
}

SMX_API smxStatus_t smxGetLogsumexpWorkspaceSize(smxLogsumexpDescriptor_t desc, size_t* workspaceBytes) {
    return smx::workspace_size(desc, workspaceBytes);
}

SMX_API smxStatus_t smxGetLogsumexpPlan(smxLogsumexpDescriptor_t desc, const char** plan) {
    return smx::plan_text(desc, plan);
}

SMX_API smxStatus_t smxLogsumexp(smxLogsumexpDescriptor_t desc, void* workspace, size_t workspaceBytes, void* out,
                                 const void* x, void* stream) {
    return smx::guard_api("smxLogsumexp",
                          [&] { return smx::logsumexp(desc, workspace, workspaceBytes, out, x, stream); });
}

SMX_API smxStatus_t smxDestroyLogsumexpDescriptor(smxLogsumexpDescriptor_t desc) {
    return smx::destroy_live(desc, "desc");
}

SMX_API smxStatus_t smxCreateLogSoftmaxGatherDescriptor(smxHandle_t handle, smxLogSoftmaxGatherDescriptor_t* desc,
                                                        int axis, smxTensorDescriptor_t outDesc,
                                                        smxTensorDescriptor_t xDesc, smxTensorDescriptor_t indexDesc) {
    return smx::guard_api("smxCreateLogSoftmaxGatherDescriptor", [&] {
        return smx::create(handle, desc, {{xDesc, "xDesc"}, {indexDesc, "indexDesc"}, {outDesc, "outDesc"}},
                           [&](smx::LogSoftmaxGatherInfo* info) {
                               return smx::make_log_softmax_gather_info(axis, outDesc, xDesc, indexDesc, info);
                           });
    });
}

SMX_API smxStatus_t smxGetLogSoftmaxGatherWorkspaceSize(smxLogSoftmaxGatherDescriptor_t desc, size_t* workspaceBytes) {
    return smx::workspace_size(desc, workspaceBytes);
}

SMX_API smxStatus_t smxGetLogSoftmaxGatherPlan(smxLogSoftmaxGatherDescriptor_t desc, const char** plan) {
    return smx::plan_text(desc, plan);
}

SMX_API smxStatus_t smxLogSoftmaxGather(smxLogSoftmaxGatherDescriptor_t desc, void* workspace, size_t workspaceBytes,
                                        void* out, const void* x, const void* index, void* stream) {
    return smx::guard_api("smxLogSoftmaxGather", [&] {
        return smx::log_softmax_gather(desc, workspace, workspaceBytes, out, x, index, stream);
    });
}

SMX_API smxStatus_t smxDestroyLogSoftmaxGatherDescriptor(smxLogSoftmaxGatherDescriptor_t desc) {
    return smx::destroy_live(desc, "desc");
}

SMX_API smxStatus_t smxCreateCrossEntropyDescriptor(smxHandle_t handle, smxCrossEntropyDescriptor_t* desc, int axis,
                                                    const smxCrossEntropyOptions_t* options,
                                                    smxTensorDescriptor_t lossDesc, smxTensorDescriptor_t lseDesc,
                                                    smxTensorDescriptor_t dlogitsDesc, smxTensorDescriptor_t logitsDesc,
                                                    smxTensorDescriptor_t targetDesc) {
    return smx::guard_api("smxCreateCrossEntropyDescriptor", [&] {
        return smx::create(handle, desc,
                           {{logitsDesc, "logitsDesc"}, {targetDesc, "targetDesc"}, {lossDesc, "lossDesc"},
                            {lseDesc, "lseDesc"}, {dlogitsDesc, "dlogitsDesc"}},
                           [&](smx::CrossEntropyInfo* info) {
                               return smx::make_cross_entropy_info(axis, options, lossDesc, lseDesc, dlogitsDesc,
                                                                   logitsDesc, targetDesc, info);
                           });
    });
}

SMX_API smxStatus_t smxGetCrossEntropyWorkspaceSize(smxCrossEntropyDescriptor_t desc, size_t* workspaceBytes) {
    return smx::workspace_size(desc, workspaceBytes);
}

SMX_API smxStatus_t smxGetCrossEntropyPlan(smxCrossEntropyDescriptor_t desc, const char** plan) {
    return smx::plan_text(desc, plan);
}

SMX_API smxStatus_t smxCrossEntropy(smxCrossEntropyDescriptor_t desc, void* workspace, size_t workspaceBytes,
                                    void* loss, void* lse, void* dlogits, const void* logits, const void* target,
                                    void* stream) {
    return smx::guard_api("smxCrossEntropy", [&] {
        return smx::cross_entropy(desc, workspace, workspaceBytes, loss, lse, dlogits, logits, target, stream);
    });
}

SMX_API smxStatus_t smxDestroyCrossEntropyDescriptor(smxCrossEntropyDescriptor_t desc) {
    return smx::destroy_live(desc, "desc");
}

}  // extern "C"
