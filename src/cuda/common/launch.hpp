// launch.hpp - how the CUDA plans launch and size kernels: a launch's shape, a family's planned launches with
// their typed parameters (bound to the call's pointers at run time), and the occupancy queries planners ask.
// Host code only; the kernels themselves never see these types.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

#include "core/device_limits.hpp"
#include "cuda/common/param_block.hpp"
#include "smx/smx.h"

namespace smx::cuda {

// One kernel launch of a plan.
struct Launch {
    const void* kernel = nullptr;
    dim3 grid;
    dim3 block;
    std::size_t shared_bytes = 0;  // dynamic shared memory
    unsigned cluster = 0;          // CTAs per cluster; 0: an ordinary launch
    bool cooperative = false;      // every CTA resident at once (grid-wide barrier inside)
    // Programmatic dependent launch: the launch may begin while the stream's previous kernel still runs, so its
    // setup overlaps that kernel's tail; the kernel calls wait_for_previous_grid() before touching memory.
    bool after_previous = false;
};

// Launches each of `launches` in order with one parameter struct (passed by value), on `stream`. Checks each
// launch call's own result.
smxStatus_t launch_all(const Launch* launches, int count, void* params, cudaStream_t stream);

// The call's operand pointers as a forward kernel family sees them (scale and mask: the option operands' data,
// NULL where the problem has none).
struct ForwardOperands {
    const void* x;
    void* y;
    void* workspace;
    const void* scale = nullptr;
    const void* mask = nullptr;
};

// A family's ready launches: run() only binds the call's pointers into a copy of the parameters and launches.
class KernelCall {
public:
    virtual ~KernelCall() = default;
    virtual smxStatus_t run(const ForwardOperands& operands, cudaStream_t stream) const = 0;
};

// Whether a family's parameters carry the fast families' options (a member `options` with bind(scale, mask)).
template <class Params, class = void>
constexpr bool kCarriesOptions = false;
template <class Params>
constexpr bool kCarriesOptions<Params, std::void_t<decltype(std::declval<Params&>().options.bind(nullptr, nullptr))>> = true;

// Params: a family's parameter struct, with bind(x, y, workspace, x_size, y_size) filling in the pointers (and
// options.bind(scale, mask) the option operands' where it carries them); its kernels take it as a ParamBlock.
template <class Params>
class FamilyCall final : public KernelCall {
public:
    ParamBlock<Params> params;
    std::array<Launch, 2> launches;
    int launch_count = 0;
    std::size_t x_size = 0;
    std::size_t y_size = 0;

    smxStatus_t run(const ForwardOperands& operands, cudaStream_t stream) const override {
        ParamBlock<Params> bound = params;
        bound.bind(operands.x, operands.y, operands.workspace, x_size, y_size);
        if constexpr (kCarriesOptions<Params>) bound.options.bind(operands.scale, operands.mask);
        return launch_all(launches.data(), launch_count, &bound, stream);
    }
};

// What a family's planner hands back: the call, the workspace it needs and the plan text users see. Where the
// chosen kernels need aligned bases (checked at run time), `unaligned` is the plan for other pointers.
struct FamilyPlan {
    std::unique_ptr<KernelCall> call;
    std::size_t workspace = 0;
    std::string text;
    std::unique_ptr<FamilyPlan> unaligned;
    std::uintptr_t x_base_alignment = 1;
    std::uintptr_t y_base_alignment = 1;
};

// ---- integer helpers ------------------------------------------------------------------------------------
inline std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }
inline std::int64_t round_up(std::int64_t a, std::int64_t b) { return ceil_div(a, b) * b; }
inline std::int64_t next_pow2(std::int64_t v) {
    std::int64_t p = 1;
    while (p < v) p *= 2;
    return p;
}
inline std::int64_t prev_pow2(std::int64_t v) {
    std::int64_t p = 1;
    while (p * 2 <= v) p *= 2;
    return p;
}

// A persistent grid: at most what the device keeps resident at once, at least 1, within gridDim.x.
inline unsigned persistent_grid(std::int64_t work_items, int blocks_per_sm, int sms) {
    const std::int64_t resident = static_cast<std::int64_t>(std::max(blocks_per_sm, 1)) * std::max(sms, 1);
    return static_cast<unsigned>(std::clamp<std::int64_t>(std::min(work_items, resident), 1, INT_MAX));
}

// ---- occupancy and kernel attributes --------------------------------------------------------------------

// SMX_STATUS_INTERNAL_ERROR naming the family and pair where a getter found no instance.
smxStatus_t require_kernel(const void* kernel, smxDataType_t x_dtype, smxDataType_t y_dtype, const char* family);

smxStatus_t blocks_per_multiprocessor(const void* kernel, int threads, std::size_t shared_bytes, int* blocks);

// How many clusters of `cluster` CTAs (of `threads` threads and `shared_bytes` of dynamic shared memory) the
// device can keep resident at once; 0 when it cannot place one (a refused shape is an answer, not a failure).
int max_active_clusters(const void* kernel, int cluster, int threads, std::size_t shared_bytes);

// Raises a kernel's dynamic shared memory limit to all the device allows next to its static shared memory
// (*dynamic_limit; 0 when none is left). Always the same value for a kernel, so plans made concurrently never
// lower it under one another.
smxStatus_t allow_all_dynamic_shared_memory(const DeviceLimits& limits, const void* kernel, const char* family,
                                            std::size_t* dynamic_limit);

// Lets `kernel` run in clusters of up to 16 CTAs (non-portable above 8); always the same value for a kernel.
smxStatus_t allow_large_clusters(const void* kernel, const char* family);

// The kernel's own thread limit (its __launch_bounds__): the occupancy query does not refuse larger blocks,
// the launch does.
smxStatus_t max_threads_of(const void* kernel, const char* family, int* max_threads);

// Whether the device runs thread-block clusters (sm_90 and later).
inline bool has_clusters(const DeviceLimits& limits) {
    return limits.cluster_launch && limits.compute_capability_major >= 9;
}

// Whether the device starts a kernel while the one before it in the stream finishes (programmatic dependent
// launch, sm_90 and later).
inline bool has_dependent_launch(const DeviceLimits& limits) { return limits.compute_capability_major >= 9; }

}  // namespace smx::cuda
