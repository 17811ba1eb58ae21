// cluster_mailbox_synccheck.cu - smx's cluster mailbox (src/cuda/cluster.cuh: mailbox_open, mailbox_post,
// mailbox_wait; block-regs pushes its CTAs' statistics through it) alone, in a kernel whose CTAs each post one
// value to every peer and sum what lands, at clusters of 8 and 16 CTAs of 128 or 512 threads, with no dynamic
// shared memory or 120 KB (so 1 CTA per SM), with and without an mbarrier.inval after the wait. Run plainly it
// checks the sums; under compute-sanitizer --tool synccheck it shows whether the tool's "Barrier error detected.
// Missing wait." on the mailbox's mbarrier (perf-notes runs 217-218: block-regs at clusters of 16) comes from the
// protocol alone. Not part of the build:
//   nvcc -O3 -std=c++17 -arch=sm_90 -I src bench/probes/cluster_mailbox_synccheck.cu -o mailbox && ./mailbox
//   compute-sanitizer --tool synccheck --print-limit 1 ./mailbox          (and ./mailbox inval)
#include <cstdio>

#include "cuda/cluster.cuh"
using namespace smx::cuda;
struct alignas(8) Two { float a, b; };
template <bool kInval>
__global__ void k_mailbox(float* out) {
    extern __shared__ char pad[];
    __shared__ ClusterMailbox<Two, 16> box;
    const unsigned ranks = cluster_size(), rank = cluster_rank();
    mailbox_open(box, ranks);
    if (threadIdx.x == 0) pad[0] = 1;
    cluster_wait();
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    __shared__ float result;
    if (warp == 0) {
        Two mine{static_cast<float>(rank), 1.0f};
        if (lane < static_cast<int>(ranks)) mailbox_post(box, mine, rank, lane);
        mailbox_wait(box);
        float s = lane < static_cast<int>(ranks) ? box.slots[lane].a : 0.f;
        for (int o = 16; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
        if (lane == 0) result = s;
        if constexpr (kInval) {
            __syncwarp();
            if (lane == 0) {
                const unsigned landed = static_cast<unsigned>(__cvta_generic_to_shared(&box.landed));
                asm volatile("mbarrier.inval.shared::cta.b64 [%0];\n" ::"r"(landed) : "memory");
            }
        }
    }
    __syncthreads();
    if (threadIdx.x == 0) out[blockIdx.x] = result;
}
template <bool kInval>
void run_all(float* out) {
    cudaFuncSetAttribute(k_mailbox<kInval>, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
    cudaFuncSetAttribute(k_mailbox<kInval>, cudaFuncAttributeMaxDynamicSharedMemorySize, 120 * 1024);
    for (int cluster : {8, 16}) {
        for (int threads : {128, 512}) {
            for (int smem : {0, 120 * 1024}) {
                cudaLaunchConfig_t config = {};
                config.gridDim = dim3(cluster * 256);
                config.blockDim = dim3(threads);
                config.dynamicSmemBytes = smem;
                cudaLaunchAttribute attribute[1];
                attribute[0].id = cudaLaunchAttributeClusterDimension;
                attribute[0].val.clusterDim.x = cluster;
                attribute[0].val.clusterDim.y = 1;
                attribute[0].val.clusterDim.z = 1;
                config.attrs = attribute;
                config.numAttrs = 1;
                const cudaError_t e = cudaLaunchKernelEx(&config, k_mailbox<kInval>, out);
                const cudaError_t s = cudaDeviceSynchronize();
                float h = -1;
                cudaMemcpy(&h, out + cluster * 255, sizeof h, cudaMemcpyDeviceToHost);
                std::printf("inval %d mailbox cluster %2d threads %3d smem %6d: %s / %s, sum %g (expect %d)\n", int(kInval), cluster, threads, smem,
                            cudaGetErrorString(e), cudaGetErrorString(s), h, cluster * (cluster - 1) / 2);
            }
        }
    }
}
int main(int argc, char** argv) {
    float* out;
    cudaMalloc(&out, 16 * 256 * sizeof(float));
    if (argc > 1) run_all<true>(out); else run_all<false>(out);
    return 0;
}
