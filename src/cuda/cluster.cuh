// cluster.cuh - thread-block cluster primitives for the kernels that spread one row (block-regs) or one
// column tile (spatial-tile) over several CTAs and combine their statistics through distributed shared
// memory (sm_90). Compiled for an older architecture, a cluster is a single CTA: rank 0 of 1.
#pragma once

#include <cooperative_groups.h>

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
