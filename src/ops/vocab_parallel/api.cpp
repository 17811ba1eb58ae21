// api.cpp - the C entry points of the vocabulary-parallel operators (shard statistics, shard softmax, shard
// logsumexp, shard cross-entropy): validate into an info, ask the handle's backend for a plan, run it, as for
// the log-probability operators (ops/logprobs/api.cpp), with the shared steps of ops/common/entry.hpp.
#include <cstdint>

#include "core/api_guard.hpp"
#include "core/enum_value.hpp"
#include "core/error.hpp"
#include "cpu/vocab_parallel_cpu.hpp"
#include "ops/common/entry.hpp"
#include "ops/common/workspace.hpp"
#include "ops/vocab_parallel/info.hpp"
#include "ops/vocab_parallel/plan.hpp"

struct smxShardStatisticsDescriptor {
    SMX_OBJECT_TAG("smxShardStatisticsDescriptor_t");
    smx::DescriptorDevice device;
    smx::ShardStatisticsInfo info;
    std::unique_ptr<smx::ShardStatisticsPlan> plan;
};

struct smxShardSoftmaxDescriptor {
    SMX_OBJECT_TAG("smxShardSoftmaxDescriptor_t");
    smx::DescriptorDevice device;
    smx::ShardSoftmaxInfo info;
    std::unique_ptr<smx::ShardSoftmaxPlan> plan;
};

struct smxShardLogsumexpDescriptor {
    SMX_OBJECT_TAG("smxShardLogsumexpDescriptor_t");
    smx::DescriptorDevice device;
    smx::ShardLogsumexpInfo info;
    std::unique_ptr<smx::ShardLogsumexpPlan> plan;
};

struct smxShardCrossEntropyDescriptor {
    SMX_OBJECT_TAG("smxShardCrossEntropyDescriptor_t");
    smx::DescriptorDevice device;
    smx::ShardCrossEntropyInfo info;
    std::unique_ptr<smx::ShardCrossEntropyPlan> plan;
};

namespace smx {

// The backend's plan of each info (create() in ops/common/entry.hpp finds them by their argument types).
smxStatus_t make_plan(const smxHandle& handle, const ShardStatisticsInfo& info,
                      std::unique_ptr<ShardStatisticsPlan>* plan) {
    return backend_plan(handle, info, plan, make_cpu_shard_statistics_plan,
                        SMX_CUDA_PLANNER(make_cuda_shard_statistics_plan));
}

smxStatus_t make_plan(const smxHandle& handle, const ShardSoftmaxInfo& info, std::unique_ptr<ShardSoftmaxPlan>* plan) {
    return backend_plan(handle, info, plan, make_cpu_shard_softmax_plan,
                        SMX_CUDA_PLANNER(make_cuda_shard_softmax_plan));
}

smxStatus_t make_plan(const smxHandle& handle, const ShardLogsumexpInfo& info,
                      std::unique_ptr<ShardLogsumexpPlan>* plan) {
    return backend_plan(handle, info, plan, make_cpu_shard_logsumexp_plan,
                        SMX_CUDA_PLANNER(make_cuda_shard_logsumexp_plan));
}

smxStatus_t make_plan(const smxHandle& handle, const ShardCrossEntropyInfo& info,
                      std::unique_ptr<ShardCrossEntropyPlan>* plan) {
    return backend_plan(handle, info, plan, make_cpu_shard_cross_entropy_plan,
                        SMX_CUDA_PLANNER(make_cuda_shard_cross_entropy_plan));
}

namespace {

smxStatus_t shard_statistics(smxShardStatisticsDescriptor_t desc, void* workspace, std::size_t workspace_bytes,
                             void* stats, const void* x, const void* target, void* stream) {
    SMX_RETURN_IF_ERROR(check_live(desc, "desc"));
    const ShardStatisticsInfo& info = desc->info;
    if (info.rows == 0) return SMX_STATUS_SUCCESS;  // stats are empty: nothing to write, nothing launched
    SMX_RETURN_IF_ERROR(check_workspace(workspace, workspace_bytes, desc->plan->workspace_bytes()));
    TouchedOperands operands;
    SMX_RETURN_IF_ERROR(check_shard_statistics_pointers(info, stats, x, target, operands));
    SMX_RETURN_IF_ERROR(check_device(desc->device, operands));
    return desc->plan->run(workspace, stats, x, info.has_target ? target : nullptr, stream);
}

smxStatus_t shard_softmax(smxShardSoftmaxDescriptor_t desc, void* workspace, std::size_t workspace_bytes, void* y,
                          const void* x, const void* stats, void* stream) {
    SMX_RETURN_IF_ERROR(check_live(desc, "desc"));
    if (desc->info.numel == 0) return SMX_STATUS_SUCCESS;  // y is empty
    SMX_RETURN_IF_ERROR(check_workspace(workspace, workspace_bytes, desc->plan->workspace_bytes()));
    TouchedOperands operands;
    SMX_RETURN_IF_ERROR(check_shard_softmax_pointers(desc->info, y, x, stats, operands));
    SMX_RETURN_IF_ERROR(check_device(desc->device, operands));
    return desc->plan->run(workspace, y, x, stats, stream);
}

smxStatus_t shard_logsumexp(smxShardLogsumexpDescriptor_t desc, void* workspace, std::size_t workspace_bytes, void* out,
                            const void* stats, void* stream) {
    SMX_RETURN_IF_ERROR(check_live(desc, "desc"));
    if (desc->info.rows == 0) return SMX_STATUS_SUCCESS;  // out is empty
    SMX_RETURN_IF_ERROR(check_workspace(workspace, workspace_bytes, desc->plan->workspace_bytes()));
    TouchedOperands operands;
    SMX_RETURN_IF_ERROR(check_shard_logsumexp_pointers(desc->info, out, stats, operands));
    SMX_RETURN_IF_ERROR(check_device(desc->device, operands));
    return desc->plan->run(workspace, out, stats, stream);
}

smxStatus_t shard_cross_entropy(smxShardCrossEntropyDescriptor_t desc, void* workspace, std::size_t workspace_bytes,
                                void* loss, void* lse, void* dlogits, const void* logits, const void* target,
                                const void* stats, void* stream) {
    SMX_RETURN_IF_ERROR(check_live(desc, "desc"));
    const ShardCrossEntropyInfo& info = desc->info;
    if (info.rows == 0 && !info.reduced()) return SMX_STATUS_SUCCESS;  // a reduced loss is written even then
    SMX_RETURN_IF_ERROR(check_workspace(workspace, workspace_bytes, desc->plan->workspace_bytes()));
    TouchedOperands operands;
    SMX_RETURN_IF_ERROR(check_shard_cross_entropy_pointers(info, loss, lse, dlogits, logits, target, stats, operands));
    SMX_RETURN_IF_ERROR(check_device(desc->device, operands));
    return desc->plan->run(workspace, loss, info.has_lse ? lse : nullptr, info.has_dlogits ? dlogits : nullptr, logits,
                           target, stats, stream);
}

}  // namespace
}  // namespace smx

extern "C" {

SMX_API smxStatus_t smxCreateShardStatisticsDescriptor(smxHandle_t handle, smxShardStatisticsDescriptor_t* desc,
                                                       int axis, int64_t vocabStart, smxTensorDescriptor_t statsDesc,
                                                       smxTensorDescriptor_t xDesc, smxTensorDescriptor_t targetDesc) {
    return smx::guard_api("smxCreateShardStatisticsDescriptor", [&] {
        return smx::create(handle, desc, {{xDesc, "xDesc"}, {statsDesc, "statsDesc"}, {targetDesc, "targetDesc"}},
                           [&](smx::ShardStatisticsInfo* info) {
                               return smx::make_shard_statistics_info(axis, vocabStart, statsDesc, xDesc,
                                                                      targetDesc, info);
                           });
    });
}

SMX_API smxStatus_t smxGetShardStatisticsWorkspaceSize(smxShardStatisticsDescriptor_t desc, size_t* workspaceBytes) {
    return smx::workspace_size(desc, workspaceBytes);
}

SMX_API smxStatus_t smxGetShardStatisticsPlan(smxShardStatisticsDescriptor_t desc, const char** plan) {
    return smx::plan_text(desc, plan);
}

SMX_API smxStatus_t smxShardStatistics(smxShardStatisticsDescriptor_t desc, void* workspace, size_t workspaceBytes,
                                       void* stats, const void* x, const void* target, void* stream) {
    return smx::guard_api("smxShardStatistics", [&] {
        return smx::shard_statistics(desc, workspace, workspaceBytes, stats, x, target, stream);
    });
}

SMX_API smxStatus_t smxDestroyShardStatisticsDescriptor(smxShardStatisticsDescriptor_t desc) {
    return smx::destroy_live(desc, "desc");
}

SMX_API smxStatus_t smxCreateShardSoftmaxDescriptor(smxHandle_t handle, smxShardSoftmaxDescriptor_t* desc,
                                                    smxSoftmaxMode_t mode, int axis, smxTensorDescriptor_t yDesc,
                                                    smxTensorDescriptor_t xDesc, smxTensorDescriptor_t statsDesc) {
    return smx::guard_api("smxCreateShardSoftmaxDescriptor", [&] {
        return smx::create(handle, desc, {{xDesc, "xDesc"}, {yDesc, "yDesc"}, {statsDesc, "statsDesc"}},
                           [&](smx::ShardSoftmaxInfo* info) {
                               return smx::make_shard_softmax_info(smx::raw_enum_value(mode), axis, yDesc, xDesc,
                                                                   statsDesc, info);
                           });
    });
}

SMX_API smxStatus_t smxGetShardSoftmaxWorkspaceSize(smxShardSoftmaxDescriptor_t desc, size_t* workspaceBytes) {
    return smx::workspace_size(desc, workspaceBytes);
}

SMX_API smxStatus_t smxGetShardSoftmaxPlan(smxShardSoftmaxDescriptor_t desc, const char** plan) {
    return smx::plan_text(desc, plan);
}

SMX_API smxStatus_t smxShardSoftmax(smxShardSoftmaxDescriptor_t desc, void* workspace, size_t workspaceBytes, void* y,
                                    const void* x, const void* stats, void* stream) {
    return smx::guard_api("smxShardSoftmax",
                          [&] { return smx::shard_softmax(desc, workspace, workspaceBytes, y, x, stats, stream); });
}

SMX_API smxStatus_t smxDestroyShardSoftmaxDescriptor(smxShardSoftmaxDescriptor_t desc) {
    return smx::destroy_live(desc, "desc");
}

SMX_API smxStatus_t smxCreateShardLogsumexpDescriptor(smxHandle_t handle, smxShardLogsumexpDescriptor_t* desc, int axis,
                                                      smxTensorDescriptor_t outDesc, smxTensorDescriptor_t statsDesc) {
    return smx::guard_api("smxCreateShardLogsumexpDescriptor", [&] {
        return smx::create(handle, desc, {{statsDesc, "statsDesc"}, {outDesc, "outDesc"}},
                           [&](smx::ShardLogsumexpInfo* info) {
                               return smx::make_shard_logsumexp_info(axis, outDesc, statsDesc, info);
                           });
    });
}

SMX_API smxStatus_t smxGetShardLogsumexpWorkspaceSize(smxShardLogsumexpDescriptor_t desc, size_t* workspaceBytes) {
    return smx::workspace_size(desc, workspaceBytes);
}

SMX_API smxStatus_t smxGetShardLogsumexpPlan(smxShardLogsumexpDescriptor_t desc, const char** plan) {
    return smx::plan_text(desc, plan);
}

SMX_API smxStatus_t smxShardLogsumexp(smxShardLogsumexpDescriptor_t desc, void* workspace, size_t workspaceBytes,
                                      void* out, const void* stats, void* stream) {
    return smx::guard_api("smxShardLogsumexp",
                          [&] { return smx::shard_logsumexp(desc, workspace, workspaceBytes, out, stats, stream); });
}

SMX_API smxStatus_t smxDestroyShardLogsumexpDescriptor(smxShardLogsumexpDescriptor_t desc) {
    return smx::destroy_live(desc, "desc");
}

SMX_API smxStatus_t smxCreateShardCrossEntropyDescriptor(
    smxHandle_t handle, smxShardCrossEntropyDescriptor_t* desc, int axis, const smxCrossEntropyOptions_t* options,
    int64_t vocabStart, smxTensorDescriptor_t lossDesc, smxTensorDescriptor_t lseDesc,
    smxTensorDescriptor_t dlogitsDesc, smxTensorDescriptor_t logitsDesc, smxTensorDescriptor_t targetDesc,
    smxTensorDescriptor_t statsDesc) {
    return smx::guard_api("smxCreateShardCrossEntropyDescriptor", [&] {
        return smx::create(handle, desc,
                           {{logitsDesc, "logitsDesc"},
                            {targetDesc, "targetDesc"},
                            {lossDesc, "lossDesc"},
                            {lseDesc, "lseDesc"},
                            {dlogitsDesc, "dlogitsDesc"},
                            {statsDesc, "statsDesc"}},
                           [&](smx::ShardCrossEntropyInfo* info) {
                               return smx::make_shard_cross_entropy_info(axis, options, vocabStart, lossDesc,
                                                                         lseDesc, dlogitsDesc, logitsDesc, targetDesc,
                                                                         statsDesc, info);
                           });
    });
}

SMX_API smxStatus_t smxGetShardCrossEntropyWorkspaceSize(smxShardCrossEntropyDescriptor_t desc,
                                                         size_t* workspaceBytes) {
    return smx::workspace_size(desc, workspaceBytes);
}

SMX_API smxStatus_t smxGetShardCrossEntropyPlan(smxShardCrossEntropyDescriptor_t desc, const char** plan) {
    return smx::plan_text(desc, plan);
}

SMX_API smxStatus_t smxShardCrossEntropy(smxShardCrossEntropyDescriptor_t desc, void* workspace, size_t workspaceBytes,
                                         void* loss, void* lse, void* dlogits, const void* logits, const void* target,
                                         const void* stats, void* stream) {
    return smx::guard_api("smxShardCrossEntropy", [&] {
        return smx::shard_cross_entropy(desc, workspace, workspaceBytes, loss, lse, dlogits, logits, target, stats,
                                        stream);
    });
}

SMX_API smxStatus_t smxDestroyShardCrossEntropyDescriptor(smxShardCrossEntropyDescriptor_t desc) {
    return smx::destroy_live(desc, "desc");
}

}  // extern "C"
