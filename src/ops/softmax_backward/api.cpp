// api.cpp - the softmax backward C entry points: validate into an info, ask the backend for a plan, run it.
#include <cstdint>
#include <memory>
#include <string>

#include "core/api_guard.hpp"
#include "core/enum_value.hpp"
#include "core/error.hpp"
#include "core/handle.hpp"
#include "core/logging.hpp"
#include "core/object_tag.hpp"
#include "core/tensor.hpp"
#include "cpu/softmax_backward_cpu.hpp"
#include "ops/common/workspace.hpp"
#include "ops/softmax_backward/info.hpp"
#include "ops/softmax_backward/plan.hpp"

#if SMX_WITH_CUDA
#include "cuda/backend.hpp"
#endif

struct smxSoftmaxBackwardDescriptor {
    SMX_OBJECT_TAG("smxSoftmaxBackwardDescriptor_t");
    smxDeviceType_t device_type;  // copied from the handle: the descriptor does not keep the handle
    int device_id;
    bool check_device_pointers;   // the handle's smxSetDevicePointerChecks when the descriptor was created
    smx::SoftmaxBackwardInfo info;
    std::unique_ptr<smx::SoftmaxBackwardPlan> plan;
};

namespace smx {
namespace {

smxStatus_t create_descriptor(smxHandle_t handle, smxSoftmaxBackwardDescriptor_t* out, int mode, int axis,
                              smxTensorDescriptor_t dx_desc, smxTensorDescriptor_t dy_desc,
                              smxTensorDescriptor_t y_desc, smxSoftmaxOptions_t options) {
    if (out == nullptr) return fail(SMX_STATUS_BAD_PARAM_NULL_POINTER, "desc (the output pointer) is NULL");
    *out = nullptr;
    SMX_RETURN_IF_ERROR(check_live(handle, "handle"));
    SMX_RETURN_IF_ERROR(check_live(dy_desc, "dyDesc"));
    SMX_RETURN_IF_ERROR(check_live(y_desc, "yDesc"));
    SMX_RETURN_IF_ERROR(check_live(dx_desc, "dxDesc"));
    if (options != nullptr) SMX_RETURN_IF_ERROR(check_live(options, "options"));
    auto desc = std::make_unique<smxSoftmaxBackwardDescriptor>();
    desc->device_type = handle->device_type;
    desc->device_id = handle->device_id;
    desc->check_device_pointers = handle->check_device_pointers;
    SMX_RETURN_IF_ERROR(make_softmax_backward_info(mode, axis, dx_desc, dy_desc, y_desc,
                                                   options != nullptr ? &options->settings : nullptr, &desc->info));
    if (handle->device_type == SMX_DEVICE_CPU) {
        SMX_RETURN_IF_ERROR(make_cpu_softmax_backward_plan(desc->info, handle->cpu_threads, &desc->plan));
    } else {
#if SMX_WITH_CUDA
        SMX_RETURN_IF_ERROR(make_cuda_softmax_backward_plan(desc->info, handle->device_id, handle->limits,
                                                            cuda::plan_preferences_from_environment(), &desc->plan));
#else
        return fail(SMX_STATUS_INTERNAL_ERROR, "a CUDA handle exists in a build without CUDA");
#endif
    }
    log_debug("softmax backward descriptor: {} | plan: {} | workspace {} B", describe(desc->info),
              desc->plan->description(), desc->plan->workspace_bytes());
    *out = desc.release();
    return SMX_STATUS_SUCCESS;
}

smxStatus_t backward(smxSoftmaxBackwardDescriptor_t desc, void* workspace, std::size_t workspace_bytes, void* dx,
                     const void* dy, const void* y, const void* scale, const void* mask, void* stream) {
    SMX_RETURN_IF_ERROR(check_live(desc, "desc"));
    const std::int64_t numel = desc->info.numel;
    if (numel == 0) return SMX_STATUS_SUCCESS;  // zero-size tensors: nothing to do, nothing launched
    if (dy == nullptr) return fail(SMX_STATUS_BAD_PARAM_NULL_POINTER, "dy is NULL but the tensor has {} elements", numel);
    if (y == nullptr) return fail(SMX_STATUS_BAD_PARAM_NULL_POINTER, "y is NULL but the tensor has {} elements", numel);
    if (dx == nullptr) return fail(SMX_STATUS_BAD_PARAM_NULL_POINTER, "dx is NULL but the tensor has {} elements", numel);
    SMX_RETURN_IF_ERROR(check_workspace(workspace, workspace_bytes, desc->plan->workspace_bytes()));
    OperandPointer operands[kMaxBackwardOperands];
    int count = 0;
    SMX_RETURN_IF_ERROR(backward_operands(desc->info, dx, dy, y, scale, mask, operands, &count));
    SMX_RETURN_IF_ERROR(check_operand_pointers(operands, count));
#if SMX_WITH_CUDA
    if (desc->device_type == SMX_DEVICE_CUDA && desc->check_device_pointers) {
        SMX_RETURN_IF_ERROR(cuda_check_operand_pointers(desc->device_id, operands, count));
    }
#endif
    if (!desc->info.options.any()) return desc->plan->run(workspace, dx, dy, y, stream);
    return desc->plan->run_with_options(workspace, dx, dy, y, scale, mask, stream);
}

}  // namespace
}  // namespace smx

extern "C" {

SMX_API smxStatus_t smxCreateSoftmaxBackwardDescriptor(smxHandle_t handle, smxSoftmaxBackwardDescriptor_t* desc,
                                                       smxSoftmaxMode_t mode, int axis, smxTensorDescriptor_t dxDesc,
                                                       smxTensorDescriptor_t dyDesc, smxTensorDescriptor_t yDesc) {
    const int mode_value = smx::raw_enum_value(mode);
    return smx::guard_api("smxCreateSoftmaxBackwardDescriptor", [&] {
        return smx::create_descriptor(handle, desc, mode_value, axis, dxDesc, dyDesc, yDesc, nullptr);
    });
}

SMX_API smxStatus_t smxCreateSoftmaxBackwardDescriptorWithOptions(smxHandle_t handle,
                                                                  smxSoftmaxBackwardDescriptor_t* desc,
                                                                  smxSoftmaxMode_t mode, int axis,
                                                                  smxTensorDescriptor_t dxDesc,
                                                                  smxTensorDescriptor_t dyDesc,
                                                                  smxTensorDescriptor_t yDesc,
                                                                  smxSoftmaxOptions_t options) {
    const int mode_value = smx::raw_enum_value(mode);
    return smx::guard_api("smxCreateSoftmaxBackwardDescriptorWithOptions", [&] {
        return smx::create_descriptor(handle, desc, mode_value, axis, dxDesc, dyDesc, yDesc, options);
    });
}

SMX_API smxStatus_t smxGetSoftmaxBackwardWorkspaceSize(smxSoftmaxBackwardDescriptor_t desc, size_t* workspaceBytes) {
    SMX_RETURN_IF_ERROR(smx::check_live(desc, "desc"));
    if (workspaceBytes == nullptr) return smx::fail(SMX_STATUS_BAD_PARAM_NULL_POINTER, "workspaceBytes is NULL");
    *workspaceBytes = desc->plan->workspace_bytes();
    return SMX_STATUS_SUCCESS;
}

SMX_API smxStatus_t smxGetSoftmaxBackwardPlan(smxSoftmaxBackwardDescriptor_t desc, const char** plan) {
    SMX_RETURN_IF_ERROR(smx::check_live(desc, "desc"));
    if (plan == nullptr) return smx::fail(SMX_STATUS_BAD_PARAM_NULL_POINTER, "plan is NULL");
    *plan = desc->plan->description().c_str();
    return SMX_STATUS_SUCCESS;
}

SMX_API smxStatus_t smxSoftmaxBackward(smxSoftmaxBackwardDescriptor_t desc, void* workspace, size_t workspaceBytes,
                                       void* dx, const void* dy, const void* y, void* stream) {
    return smx::guard_api("smxSoftmaxBackward",
                          [&] { return smx::backward(desc, workspace, workspaceBytes, dx, dy, y, nullptr, nullptr, stream); });
}

SMX_API smxStatus_t smxSoftmaxBackwardWithOptions(smxSoftmaxBackwardDescriptor_t desc, void* workspace,
                                                  size_t workspaceBytes, void* dx, const void* dy, const void* y,
                                                  const void* scale, const void* mask, void* stream) {
    return smx::guard_api("smxSoftmaxBackwardWithOptions", [&] {
        return smx::backward(desc, workspace, workspaceBytes, dx, dy, y, scale, mask, stream);
    });
}

SMX_API smxStatus_t smxDestroySoftmaxBackwardDescriptor(smxSoftmaxBackwardDescriptor_t desc) {
    return smx::destroy_live(desc, "desc");
}

}  // extern "C"
