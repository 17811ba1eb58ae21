// call.hpp - how a backward plan launches: a family's planned launches with its typed parameters (bound to
// the call's dy, y, dx and workspace at run time), and what a backward family planner hands back. The
// three-operand counterpart of common/launch.hpp's FamilyCall and FamilyPlan (whose bind takes x and y).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>

#include "core/dtype.hpp"
#include "cuda/backward/params.hpp"
#include "cuda/common/launch.hpp"
#include "cuda/plan/context.hpp"
#include "ops/softmax/plan.hpp"
#include "ops/softmax_backward/info.hpp"

namespace smx::cuda {

class BackwardKernelCall {
public:
    virtual ~BackwardKernelCall() = default;
    virtual smxStatus_t run(const BackwardPointers& pointers, cudaStream_t stream) const = 0;
};

// Params: a backward family's parameter struct, with bind(pointers, sizes); its kernels take it as a ParamBlock.
template <class Params>
class BackwardFamilyCall final : public BackwardKernelCall {
public:
    ParamBlock<Params> params;
    std::array<Launch, 2> launches;
    int launch_count = 0;
    BackwardSizes sizes{};

    smxStatus_t run(const BackwardPointers& pointers, cudaStream_t stream) const override {
        ParamBlock<Params> bound = params;
        bound.bind(pointers, sizes);
        return launch_all(launches.data(), launch_count, &bound, stream);
    }
};

// A backward family planner's result: the call, the workspace it needs and the plan text users see.
struct BackwardFamilyPlan {
    std::unique_ptr<BackwardKernelCall> call;
    std::size_t workspace = 0;
    std::string text;
};

// The family plan of `params` launched as `launches` (at most two), needing `workspace` bytes.
template <class Params>
BackwardFamilyPlan make_backward_family_plan(const SoftmaxBackwardInfo& info, const Params& params,
                                             std::initializer_list<Launch> launches, std::size_t workspace,
                                             std::string text) {
    auto call = std::make_unique<BackwardFamilyCall<Params>>();
    static_cast<Params&>(call->params) = params;
    for (const Launch& launch : launches) call->launches[call->launch_count++] = launch;
    call->sizes = {dtype_size(info.dy_dtype), dtype_size(info.dx_dtype)};
    BackwardFamilyPlan plan;
    plan.call = std::move(call);
    plan.workspace = workspace;
    plan.text = std::move(text);
    return plan;
}

// Elements of each operand a vector access moves for the problem's dtypes: 16 bytes of the wider of dy and
// dx (kPackOfPair), so dy/y loads and dx stores are each whole 8- or 16-byte units.
inline int backward_pack(const SoftmaxBackwardInfo& info) {
    const std::size_t wider = std::max(dtype_size(info.dy_dtype), dtype_size(info.dx_dtype));
    return static_cast<int>(16 / wider);
}

// Bytes of one partial sum in the workspace: a double where the compute type is, else a float.
inline std::size_t backward_sum_bytes(const SoftmaxBackwardInfo& info) {
    return info.dy_dtype == SMX_DTYPE_F64 ? sizeof(double) : sizeof(float);
}

// Workspace bytes for `sums` partial sums, a whole number of kWorkspaceAlignment units.
inline std::size_t backward_workspace_bytes(const SoftmaxBackwardInfo& info, std::int64_t sums) {
    const std::int64_t bytes = sums * static_cast<std::int64_t>(backward_sum_bytes(info));
    return static_cast<std::size_t>(round_up(bytes, static_cast<std::int64_t>(kWorkspaceAlignment)));
}

// Whether any operand is f64 but not all: such problems compute in double on the general family.
inline bool backward_mixed_f64(const SoftmaxBackwardInfo& info) {
    return (info.dy_dtype == SMX_DTYPE_F64) != (info.dx_dtype == SMX_DTYPE_F64);
}

// The Rows families' parameters with the fields they all share filled in from the problem.
BackwardRowsParams backward_rows_params(const SoftmaxBackwardInfo& info);

// SMX_STATUS_INTERNAL_ERROR naming the family and dtypes where a getter found no instance.
smxStatus_t require_backward_kernel(const void* kernel, const SoftmaxBackwardInfo& info, const char* family);

}  // namespace smx::cuda
