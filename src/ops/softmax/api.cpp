// api.cpp - the softmax C entry points: validate into an info, ask the backend for a plan, run it.
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
#include "cpu/softmax_cpu.hpp"
#include "ops/common/workspace.hpp"
#include "ops/softmax/info.hpp"
#include "ops/softmax/plan.hpp"

#if SMX_WITH_CUDA
#include "cuda/backend.hpp"
#endif

struct smxSoftmaxDescriptor {
    SMX_OBJECT_TAG("smxSoftmaxDescriptor_t");
    smxDeviceType_t device_type;  // copied from the handle: the descriptor does not keep the handle
    int device_id;
    bool check_device_pointers;   // the handle's smxSetDevicePointerChecks when the descriptor was created
    smx::SoftmaxInfo info;
    std::unique_ptr<smx::SoftmaxPlan> plan;
};

namespace smx {
namespace {

smxStatus_t create_descriptor(smxHandle_t handle, smxSoftmaxDescriptor_t* out, int mode, int axis,
                              smxTensorDescriptor_t y_desc, smxTensorDescriptor_t x_desc,
                              smxSoftmaxOptions_t options) {
    if (out == nullptr) return fail(SMX_STATUS_BAD_PARAM_NULL_POINTER, "desc (the output pointer) is NULL");
    *out = nullptr;
    SMX_RETURN_IF_ERROR(check_live(handle, "handle"));
    SMX_RETURN_IF_ERROR(check_live(x_desc, "xDesc"));
    SMX_RETURN_IF_ERROR(check_live(y_desc, "yDesc"));
    if (options != nullptr) SMX_RETURN_IF_ERROR(check_live(options, "options"));
    auto desc = std::make_unique<smxSoftmaxDescriptor>();
    desc->device_type = handle->device_type;
    desc->device_id = handle->device_id;
    desc->check_device_pointers = handle->check_device_pointers;
    SMX_RETURN_IF_ERROR(make_softmax_info(mode, axis, y_desc, x_desc, options != nullptr ? &options->settings : nullptr,
                                          &desc->info));
    if (handle->device_type == SMX_DEVICE_CPU) {
        SMX_RETURN_IF_ERROR(make_cpu_softmax_plan(desc->info, handle->cpu_threads, &desc->plan));
    } else {
#if SMX_WITH_CUDA
        SMX_RETURN_IF_ERROR(make_cuda_softmax_plan(desc->info, handle->device_id, handle->limits,
                                                   cuda::plan_preferences_from_environment(), &desc->plan));
#else
        return fail(SMX_STATUS_INTERNAL_ERROR, "a CUDA handle exists in a build without CUDA");
#endif
    }
    log_debug("softmax descriptor: {} | plan: {} | workspace {} B", describe(desc->info), desc->plan->description(),
              desc->plan->workspace_bytes());
    *out = desc.release();
    return SMX_STATUS_SUCCESS;
}

smxStatus_t forward(smxSoftmaxDescriptor_t desc, void* workspace, std::size_t workspace_bytes, void* y,
                    const void* x, const void* scale, const void* mask, void* stream) {
    SMX_RETURN_IF_ERROR(check_live(desc, "desc"));
    if (desc->info.numel == 0) return SMX_STATUS_SUCCESS;  // zero-size tensors: nothing to do, nothing launched
    if (x == nullptr) return fail(SMX_STATUS_BAD_PARAM_NULL_POINTER, "x is NULL but the tensor has {} elements", desc->info.numel);
    if (y == nullptr) return fail(SMX_STATUS_BAD_PARAM_NULL_POINTER, "y is NULL but the tensor has {} elements", desc->info.numel);
    SMX_RETURN_IF_ERROR(check_workspace(workspace, workspace_bytes, desc->plan->workspace_bytes()));
    OperandPointer operands[kMaxForwardOperands];
    int count = 0;
    SMX_RETURN_IF_ERROR(forward_operands(desc->info, y, x, scale, mask, operands, &count));
    SMX_RETURN_IF_ERROR(check_operand_pointers(operands, count));
#if SMX_WITH_CUDA
    if (desc->device_type == SMX_DEVICE_CUDA && desc->check_device_pointers) {
        SMX_RETURN_IF_ERROR(cuda_check_operand_pointers(desc->device_id, operands, count));
    }
#endif
    if (!desc->info.options.any()) return desc->plan->run(workspace, y, x, stream);
    return desc->plan->run_with_options(workspace, y, x, scale, mask, stream);
}

}  // namespace
}  // namespace smx

extern "C" {

SMX_API smxStatus_t smxCreateSoftmaxDescriptor(smxHandle_t handle, smxSoftmaxDescriptor_t* desc,
                                               smxSoftmaxMode_t mode, int axis, smxTensorDescriptor_t yDesc,
                                               smxTensorDescriptor_t xDesc) {
    const int mode_value = smx::raw_enum_value(mode);
    return smx::guard_api("smxCreateSoftmaxDescriptor",
                          [&] { return smx::create_descriptor(handle, desc, mode_value, axis, yDesc, xDesc, nullptr); });
}

SMX_API smxStatus_t smxCreateSoftmaxDescriptorWithOptions(smxHandle_t handle, smxSoftmaxDescriptor_t* desc,
                                                          smxSoftmaxMode_t mode, int axis, smxTensorDescriptor_t yDesc,
                                                          smxTensorDescriptor_t xDesc, smxSoftmaxOptions_t options) {
    const int mode_value = smx::raw_enum_value(mode);
    return smx::guard_api("smxCreateSoftmaxDescriptorWithOptions", [&] {
        return smx::create_descriptor(handle, desc, mode_value, axis, yDesc, xDesc, options);
    });
}

SMX_API smxStatus_t smxGetSoftmaxWorkspaceSize(smxSoftmaxDescriptor_t desc, size_t* workspaceBytes) {
    SMX_RETURN_IF_ERROR(smx::check_live(desc, "desc"));
    if (workspaceBytes == nullptr) return smx::fail(SMX_STATUS_BAD_PARAM_NULL_POINTER, "workspaceBytes is NULL");
    *workspaceBytes = desc->plan->workspace_bytes();
    return SMX_STATUS_SUCCESS;
}

SMX_API smxStatus_t smxGetSoftmaxPlan(smxSoftmaxDescriptor_t desc, const char** plan) {
    SMX_RETURN_IF_ERROR(smx::check_live(desc, "desc"));
    if (plan == nullptr) return smx::fail(SMX_STATUS_BAD_PARAM_NULL_POINTER, "plan is NULL");
    *plan = desc->plan->description().c_str();
    return SMX_STATUS_SUCCESS;
}

SMX_API smxStatus_t smxSoftmaxForward(smxSoftmaxDescriptor_t desc, void* workspace, size_t workspaceBytes, void* y,
                                      const void* x, void* stream) {
    return smx::guard_api("smxSoftmaxForward",
                          [&] { return smx::forward(desc, workspace, workspaceBytes, y, x, nullptr, nullptr, stream); });
}

SMX_API smxStatus_t smxSoftmaxForwardWithOptions(smxSoftmaxDescriptor_t desc, void* workspace, size_t workspaceBytes,
                                                 void* y, const void* x, const void* scale, const void* mask,
                                                 void* stream) {
    return smx::guard_api("smxSoftmaxForwardWithOptions",
                          [&] { return smx::forward(desc, workspace, workspaceBytes, y, x, scale, mask, stream); });
}

SMX_API smxStatus_t smxDestroySoftmaxDescriptor(smxSoftmaxDescriptor_t desc) {
    return smx::destroy_live(desc, "desc");
}

}  // extern "C"
