// api.cpp - the C entry points of logsumexp, log-softmax gather and cross-entropy: validate into an info, ask
// the handle's backend for a plan, run it. One flow for the three, as for softmax (ops/softmax/api.cpp).
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <utility>

#include "core/api_guard.hpp"
#include "core/error.hpp"
#include "core/handle.hpp"
#include "core/logging.hpp"
#include "core/object_tag.hpp"
#include "core/tensor.hpp"
#include "cpu/logprobs_cpu.hpp"
#include "ops/common/workspace.hpp"
#include "ops/logprobs/info.hpp"
#include "ops/logprobs/plan.hpp"

#if SMX_WITH_CUDA
#include "cuda/backend.hpp"
#endif

namespace smx {

// What each descriptor copies from its handle: the descriptor does not keep the handle.
struct DescriptorDevice {
    smxDeviceType_t type = SMX_DEVICE_CPU;
    int id = 0;
    bool check_pointers = true;  // the handle's smxSetDevicePointerChecks when the descriptor was created
};

}  // namespace smx

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
namespace {

// The backend's plan for a validated info: the CPU plan, or the CUDA planner where the handle is CUDA (a
// null planner in a build without CUDA, where no CUDA handle can exist).
template <class Info, class Plan, class CudaPlanner>
smxStatus_t backend_plan(const smxHandle& handle, const Info& info, std::unique_ptr<Plan>* plan,
                         smxStatus_t (*cpu_planner)(const Info&, int, std::unique_ptr<Plan>*),
                         [[maybe_unused]] CudaPlanner cuda_planner) {
    if (handle.device_type == SMX_DEVICE_CPU) return cpu_planner(info, handle.cpu_threads, plan);
#if SMX_WITH_CUDA
    return cuda_planner(info, handle.device_id, handle.limits, cuda::plan_preferences_from_environment(), plan);
#else
    return fail(SMX_STATUS_INTERNAL_ERROR, "a CUDA handle exists in a build without CUDA");
#endif
}

#if SMX_WITH_CUDA
#define SMX_CUDA_PLANNER(planner) planner
#else
#define SMX_CUDA_PLANNER(planner) nullptr
#endif

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

// Creates a descriptor of kind Descriptor: `make_info(&info)` validates the problem (the tensor descriptors
// it reads are checked live first; NULL ones are make_info's to refuse or accept), then the handle's backend
// plans it.
using NamedTensors = std::initializer_list<std::pair<const smxTensorDescriptor*, const char*>>;

template <class Descriptor, class MakeInfo>
smxStatus_t create(smxHandle_t handle, Descriptor** out, NamedTensors tensors, const MakeInfo& make_info) {
    if (out == nullptr) return fail(SMX_STATUS_BAD_PARAM_NULL_POINTER, "desc (the output pointer) is NULL");
    *out = nullptr;
    SMX_RETURN_IF_ERROR(check_live(handle, "handle"));
    for (const auto& [tensor, name] : tensors) {
        if (tensor != nullptr) SMX_RETURN_IF_ERROR(check_live(tensor, name));
    }
    auto desc = std::make_unique<Descriptor>();
    desc->device = {handle->device_type, handle->device_id, handle->check_device_pointers};
    SMX_RETURN_IF_ERROR(make_info(&desc->info));
    SMX_RETURN_IF_ERROR(make_plan(*handle, desc->info, &desc->plan));
    log_debug("{} descriptor: {} | plan: {} | workspace {} B", Descriptor::kObjectKind, describe(desc->info),
              desc->plan->description(), desc->plan->workspace_bytes());
    *out = desc.release();
    return SMX_STATUS_SUCCESS;
}

// The device's check of the operands a call touches, where the descriptor's handle asked for it.
smxStatus_t check_device(const DescriptorDevice& device, const TouchedOperands& operands) {
#if SMX_WITH_CUDA
    if (device.type == SMX_DEVICE_CUDA && device.check_pointers) {
        return cuda_check_operand_pointers(device.id, operands.data(), operands.size());
    }
#endif
    (void)device;
    (void)operands;
    return SMX_STATUS_SUCCESS;
}

template <class Descriptor>
smxStatus_t workspace_size(const Descriptor* desc, std::size_t* bytes) {
    SMX_RETURN_IF_ERROR(check_live(desc, "desc"));
    if (bytes == nullptr) return fail(SMX_STATUS_BAD_PARAM_NULL_POINTER, "workspaceBytes is NULL");
    *bytes = desc->plan->workspace_bytes();
    return SMX_STATUS_SUCCESS;
}

template <class Descriptor>
smxStatus_t plan_text(const Descriptor* desc, const char** plan) {
    SMX_RETURN_IF_ERROR(check_live(desc, "desc"));
    if (plan == nullptr) return fail(SMX_STATUS_BAD_PARAM_NULL_POINTER, "plan is NULL");
    *plan = desc->plan->description().c_str();
    return SMX_STATUS_SUCCESS;
}

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
