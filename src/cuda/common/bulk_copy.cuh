// bulk_copy.cuh - the copy engine's global -> shared copies (sm_90 cp.async.bulk) and the mbarrier a CTA
// waits on for them. One thread issues a copy and the byte count it expects; every thread waits for the
// barrier's phase. kHasBulkCopy is false where the device code is compiled for an older architecture:
// callers then load from global memory themselves.
#pragma once

#include <cstdint>

namespace smx::cuda {

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
constexpr bool kHasBulkCopy = false;
#else
constexpr bool kHasBulkCopy = true;
#endif

__device__ __forceinline__ unsigned shared_address(const void* pointer) {
    return static_cast<unsigned>(__cvta_generic_to_shared(pointer));
}

// One arrival completes each phase (plus the bytes announced by bulk_copy_expect).
__device__ __forceinline__ void bulk_barrier_init(std::uint64_t* barrier) {
#if __CUDA_ARCH__ >= 900
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(shared_address(barrier)) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}

// The calling thread's arrival for this phase, announcing `bytes` still to land (0: the phase completes).
__device__ __forceinline__ void bulk_copy_expect(std::uint64_t* barrier, unsigned bytes) {
#if __CUDA_ARCH__ >= 900
    asm volatile("{\n .reg .b64 state;\n mbarrier.arrive.expect_tx.shared::cta.b64 state, [%0], %1;\n}\n" ::"r"(
                     shared_address(barrier)),
                 "r"(bytes)
                 : "memory");
#endif
}

// Copies `bytes` (a multiple of 16; both addresses 16-byte aligned) from global memory into this CTA's
// shared memory; their arrival counts on `barrier`. Shared memory the CTA's threads read before must be
// ordered first: __syncthreads(), then bulk_copy_after_reads() in the issuing thread.
__device__ __forceinline__ void bulk_copy_to_shared(void* target, const void* source, unsigned bytes,
                                                    std::uint64_t* barrier) {
#if __CUDA_ARCH__ >= 900
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                     shared_address(target)),
                 "l"(source), "r"(bytes), "r"(shared_address(barrier))
                 : "memory");
#endif
}

// Orders this CTA's earlier generic-proxy accesses to shared memory (after a __syncthreads) before the
// async-proxy writes of a bulk copy issued next.
__device__ __forceinline__ void bulk_copy_after_reads() {
#if __CUDA_ARCH__ >= 900
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

// Waits until the barrier's phase of parity `parity` (0 for the first phase, then 1, 0, ...) completes.
__device__ __forceinline__ void bulk_barrier_wait(std::uint64_t* barrier, unsigned parity) {
#if __CUDA_ARCH__ >= 900
    unsigned done = 0;
    do {
        asm volatile(
            "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
            : "=r"(done)
            : "r"(shared_address(barrier)), "r"(parity)
            : "memory");
    } while (done == 0);
#endif
}

}  // namespace smx::cuda
