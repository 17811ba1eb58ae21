// async_copy.cuh - cp.async copies from global to shared memory (sm_80+), for the kernels that cache a tile
// on chip: every copy of a thread can be in flight at once without holding a register (spatial-tile,
// backward-spatial). A thread's own copies are visible to it after it waits for them; other threads need a
// barrier as well.
#pragma once

#include <cstddef>

namespace smx::cuda {

// An 8- or 16-byte async copy. cp.async.cg (L2 only) takes 16 bytes; 8-byte copies go through L1 (.ca).
// kWholeLine: on an L2 miss, fetch the source's whole 128-byte line from DRAM (the .L2::128B prefetch size)
// rather than only the sectors asked for. The plans ask for it where a tile row is less than a line and the
// line's other part is a neighbouring tile's row that another CTA reads at about the same time: DRAM then
// serves the line in one access (plan_spatial_tile, plan_backward_spatial; performance.md#spatial-tile).
template <int kBytes, bool kWholeLine = false>
__device__ __forceinline__ void copy_vector_async(void* shared_target, const void* global_source) {
    static_assert(kBytes == 8 || kBytes == 16, "8 or 16 bytes");
    const unsigned shared_address = static_cast<unsigned>(__cvta_generic_to_shared(shared_target));
    const std::size_t global_address = __cvta_generic_to_global(global_source);
    if constexpr (kBytes == 16 && kWholeLine) {
        asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16;\n" ::"r"(shared_address), "l"(global_address) : "memory");
    } else if constexpr (kBytes == 16) {
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(shared_address), "l"(global_address) : "memory");
    } else if constexpr (kWholeLine) {
        asm volatile("cp.async.ca.shared.global.L2::128B [%0], [%1], 8;\n" ::"r"(shared_address), "l"(global_address) : "memory");
    } else {
        asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"(shared_address), "l"(global_address) : "memory");
    }
}

// copy_vector_async of 16 bytes.
template <bool kWholeLine = false>
__device__ __forceinline__ void copy_16_bytes_async(void* shared_target, const void* global_source) {
    copy_vector_async<16, kWholeLine>(shared_target, global_source);
}

__device__ __forceinline__ void wait_async_copies() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }

// Closes this thread's current group of cp.async copies (an empty group is allowed and completes at once).
__device__ __forceinline__ void commit_async_copies() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

// Waits until at most `pending` of this thread's newest copy groups are still in flight, so every older
// group has landed. wait_group takes an immediate: counts above 7 wait for all but the newest 7, which
// covers every older group too.
__device__ __forceinline__ void wait_async_copies_but(int pending) {
    switch (pending) {
        case 0: asm volatile("cp.async.wait_group 0;\n" ::: "memory"); break;
        case 1: asm volatile("cp.async.wait_group 1;\n" ::: "memory"); break;
        case 2: asm volatile("cp.async.wait_group 2;\n" ::: "memory"); break;
        case 3: asm volatile("cp.async.wait_group 3;\n" ::: "memory"); break;
        case 4: asm volatile("cp.async.wait_group 4;\n" ::: "memory"); break;
        case 5: asm volatile("cp.async.wait_group 5;\n" ::: "memory"); break;
        case 6: asm volatile("cp.async.wait_group 6;\n" ::: "memory"); break;
        default: asm volatile("cp.async.wait_group 7;\n" ::: "memory"); break;
    }
}

}  // namespace smx::cuda
