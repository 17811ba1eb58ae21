// entry.hpp - the steps the C entry points of every descriptor-based operator share (ops/<op>/api.cpp): create a
// descriptor (live arguments, a validated info, the handle's backend plan), check a call's pointers on the device,
// answer the workspace and plan queries. Templates over the descriptor type, which holds `device` (a
// DescriptorDevice), `info` and `plan`; the operator's file supplies a make_plan(handle, info, &plan) overload
// per info type in namespace smx, found where create() is instantiated.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <memory>
#include <utility>

#include "core/error.hpp"
#include "core/handle.hpp"
#include "core/logging.hpp"
#include "core/object_tag.hpp"
#include "core/tensor.hpp"
#include "ops/common/row_problem.hpp"

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

// A CUDA planner's name where CUDA is built, else nullptr (backend_plan never calls it then).
#if SMX_WITH_CUDA
#define SMX_CUDA_PLANNER(planner) planner
#else
#define SMX_CUDA_PLANNER(planner) nullptr
#endif

// The tensor descriptors a create call reads, with their argument names for messages.
using NamedTensors = std::initializer_list<std::pair<const smxTensorDescriptor*, const char*>>;

// Creates a descriptor of kind Descriptor: `make_info(&info)` validates the problem (the tensor descriptors
// it reads are checked live first; NULL ones are make_info's to refuse or accept), then the handle's backend
// plans it through make_plan(handle, info, &plan).
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
inline smxStatus_t check_device(const DescriptorDevice& device, const TouchedOperands& operands) {
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

}  // namespace smx
