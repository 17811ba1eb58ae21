// dependent_launch.cuh - programmatic dependent launch inside a kernel (sm_90 and later; no-ops before).
// A launch marked Launch::after_previous may start while the stream's previous kernel still runs: it must
// wait for that kernel (its writes visible) before touching memory. Kernels that may precede such a launch
// let it start early. Without the launch attribute both are no-ops.
#pragma once

namespace smx::cuda {

// Blocks until the kernels this launch depends on have finished and their writes are visible.
__device__ __forceinline__ void wait_for_previous_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Lets the stream's next kernel, if launched after_previous, begin launching once every CTA of this one has
// called it (or exited); that kernel still waits for this one to finish before it reads.
__device__ __forceinline__ void allow_next_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" :::);
#endif
}

// Both, first thing in every log-probability kernel: a plan's launches after its first start early
// (LogprobsCall), and each lets its successor do the same.
__device__ __forceinline__ void begin_dependent_kernel() {
    allow_next_grid();
    wait_for_previous_grid();
}

}  // namespace smx::cuda
