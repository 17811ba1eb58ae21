// cluster.cuh - thread-block cluster primitives for the kernels that spread one row (block-regs,
// backward-regs) or one column tile (spatial-tile, backward-spatial) over several CTAs and combine their
// statistics through distributed shared memory (sm_90). Compiled for an older architecture, a cluster is a
// single CTA: rank 0 of 1.
#pragma once

#include <cooperative_groups.h>

#include <cstdint>

namespace smx::cuda {

__device__ __forceinline__ unsigned cluster_rank() {
#if __CUDA_ARCH__ >= 900
    return cooperative_groups::this_cluster().block_rank();
#else
    return 0u;
#endif
}

__device__ __forceinline__ unsigned cluster_size() {
#if __CUDA_ARCH__ >= 900
    return cooperative_groups::this_cluster().num_blocks();
#else
    return 1u;
#endif
}

// Every thread of every CTA of the cluster arrives (release) and waits (acquire): shared memory written
// before it is visible to every peer after it. Only called with more than one CTA in the cluster.
__device__ __forceinline__ void cluster_sync() {
#if __CUDA_ARCH__ >= 900
    cooperative_groups::this_cluster().sync();
#endif
}

// The two halves of cluster_sync, so work can run between them: arrive once done reading the peers'
// shared memory, wait before this CTA's shared memory may be rewritten or released.
__device__ __forceinline__ void cluster_arrive() {
#if __CUDA_ARCH__ >= 900
    asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void cluster_wait() {
#if __CUDA_ARCH__ >= 900
    asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
#endif
}

// Waits until every CTA of the cluster has arrived here, with no memory ordering: for a CTA that must stay
// resident (its shared memory readable) until its peers are done reading it, when those reads are complete
// because their values were used before the peers arrive. cluster_sync()'s release half would also make
// each thread wait for all of its own global stores to be acknowledged (a GPU-scope MEMBAR before the
// arrive): at the end of a kernel, the whole slice of y just written (performance.md#block-regs).
__device__ __forceinline__ void cluster_sync_unordered() {
#if __CUDA_ARCH__ >= 900
    asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
    asm volatile("barrier.cluster.wait.aligned;\n" ::: "memory");
#endif
}

// ---- one value per CTA, pushed to every peer (sm_90) ---------------------------------------------
// A mailbox in each CTA's shared memory: slot r receives rank r's value by st.async, a remote store whose
// arrival counts its bytes on the receiving CTA's mbarrier (`landed`), so a CTA waits only until its own
// slots are full. Compared with writing a value locally, cluster_sync() and reading the peers' copies, it
// saves both release barriers (each a GPU-scope MEMBAR: wait until every global access of the thread is
// acknowledged) and the barrier at exit, since no CTA ever reads another's shared memory
// (performance.md#block-regs). Protocol:
// mailbox_open at the start (thread 0 sets up the mbarrier, every thread arrives at the cluster barrier,
// relaxed), cluster_wait before the first post (every peer's mailbox is then set up), one post per
// (sender, receiver), mailbox_wait, then read the slots. One use per kernel launch (phase 0). kSlots: the
// largest cluster the kernel launches with.
template <class T, int kSlots>
struct ClusterMailbox {
    T slots[kSlots];
    std::uint64_t landed;  // mbarrier: phase 0 completes once every rank's value has landed
};

// The mailbox's steps on slots and an mbarrier laid out by the caller (backward-spatial: a vector of column
// sums per rank, in dynamic shared memory); ClusterMailbox's below are these with one slot per rank.
// Opens the mailbox whose mbarrier is `landed`, expecting `bytes` from the peers in all. The compiler may turn
// thread 0's branch into warp-wide predicated instructions (`@!UP0 SYNCS.EXCH.64` in the SASS), the likely cause
// of racecheck's reports at this init and arrive: check a new caller's SASS
// (performance.md#backward-spatial-push-per-dtype-pair).
__device__ __forceinline__ void mailbox_open_bytes(std::uint64_t* landed, unsigned bytes) {
#if __CUDA_ARCH__ >= 900
    if (threadIdx.x == 0) {
        const unsigned barrier = static_cast<unsigned>(__cvta_generic_to_shared(landed));
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(barrier) : "memory");
        // The one arrival, and the bytes to expect (peers' stores may land before it: the count may dip).
        asm volatile("{\n .reg .b64 state;\n mbarrier.arrive.expect_tx.shared::cta.b64 state, [%0], %1;\n}\n" ::"r"(barrier),
                     "r"(bytes)
                     : "memory");
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
#endif
}

// Stores `value` into CTA `to_rank`'s copy of `local_slot`, counted on its copy of `local_landed` (after
// cluster_wait()).
template <class T>
__device__ __forceinline__ void mailbox_post_slot(T* local_slot, std::uint64_t* local_landed, const T& value, unsigned to_rank) {
#if __CUDA_ARCH__ >= 900
    static_assert(sizeof(T) == 4 || sizeof(T) == 8 || sizeof(T) == 16,
                  "a value is one 32-bit word, or two 32- or 64-bit words");
    const unsigned local_slot_address = static_cast<unsigned>(__cvta_generic_to_shared(local_slot));
    const unsigned local_landed_address = static_cast<unsigned>(__cvta_generic_to_shared(local_landed));
    unsigned slot, landed;
    asm("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(slot) : "r"(local_slot_address), "r"(to_rank));
    asm("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(landed) : "r"(local_landed_address), "r"(to_rank));
    if constexpr (sizeof(T) == 4) {
        const unsigned word = *reinterpret_cast<const unsigned*>(&value);
        asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%0], %1, [%2];\n" ::"r"(slot), "r"(word),
                     "r"(landed)
                     : "memory");
    } else if constexpr (sizeof(T) == 8) {
        const uint2 words = *reinterpret_cast<const uint2*>(&value);
        asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.b32 [%0], {%1, %2}, [%3];\n" ::"r"(slot),
                     "r"(words.x), "r"(words.y), "r"(landed)
                     : "memory");
    } else {
        const ulonglong2 words = *reinterpret_cast<const ulonglong2*>(&value);
        asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.b64 [%0], {%1, %2}, [%3];\n" ::"r"(slot),
                     "l"(words.x), "l"(words.y), "r"(landed)
                     : "memory");
    }
#endif
}

// Waits until every byte the mailbox of mbarrier `landed` expects has landed.
__device__ __forceinline__ void mailbox_wait_landed(std::uint64_t* landed) {
#if __CUDA_ARCH__ >= 900
    const unsigned barrier = static_cast<unsigned>(__cvta_generic_to_shared(landed));
    unsigned done = 0;
    do {
        asm volatile(
            "{\n .reg .pred p;\n mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], 0;\n selp.u32 %0, 1, 0, p;\n}\n"
            : "=r"(done)
            : "r"(barrier)
            : "memory");
    } while (done == 0);
#endif
}

template <class T, int kSlots>
__device__ __forceinline__ void mailbox_open(ClusterMailbox<T, kSlots>& box, unsigned ranks) {
    mailbox_open_bytes(&box.landed, ranks * static_cast<unsigned>(sizeof(T)));
}

// Stores `value` into slot `from_rank` of CTA `to_rank`'s mailbox (after cluster_wait()).
template <class T, int kSlots>
__device__ __forceinline__ void mailbox_post(ClusterMailbox<T, kSlots>& box, const T& value, unsigned from_rank, unsigned to_rank) {
    mailbox_post_slot(&box.slots[from_rank], &box.landed, value, to_rank);
}

// Waits until every rank's value has landed in this CTA's slots.
template <class T, int kSlots>
__device__ __forceinline__ void mailbox_wait(ClusterMailbox<T, kSlots>& box) {
    mailbox_wait_landed(&box.landed);
}

// Peer `rank`'s copy of the shared variable at `local` (distributed shared memory on sm_90).
template <class T>
__device__ __forceinline__ T read_peer(const T* local, unsigned rank) {
#if __CUDA_ARCH__ >= 900
    return *cooperative_groups::this_cluster().map_shared_rank(local, rank);
#else
    return *local;
#endif
}

}  // namespace smx::cuda
