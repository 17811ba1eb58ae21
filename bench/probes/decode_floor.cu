// decode_floor.cu - what a single decode row costs before any softmax arithmetic (perf-notes.md run 14):
// load-then-store kernels timed like smx-bench times a case (CUDA events between back-to-back launches,
// the stream held by a spin kernel until all are enqueued, median of 300), by how the bytes are split over
// CTAs, with no barrier, a cluster barrier or a cooperative grid barrier between the loads and the stores,
// on buffers rotated through ~1 GiB or always the same (hot) ones. Not part of the build:
//   nvcc -O3 -std=c++17 -arch=sm_90 bench/probes/decode_floor.cu -o decode_floor && ./decode_floor
#include <cooperative_groups.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "probe_timing.cuh"

namespace cg = cooperative_groups;
#define CK(x) PROBE_CHECK(x)

__global__ void empty_kernel(int*) {}

// mode 0: no barrier, 1: __syncthreads, 2: cluster barrier, 3: grid barrier (cooperative)
template <int kV>
__global__ void __launch_bounds__(512) copy_kernel(const float4* x, float4* y, long long n4, int mode, float* sink) {
    long long per = (n4 + gridDim.x - 1) / gridDim.x;
    long long b = blockIdx.x * per, e = min(n4, b + per);
    float4 v[kV];
    float acc = 0;
#pragma unroll
    for (int k = 0; k < kV; ++k) { long long i = b + threadIdx.x + (long long)k * blockDim.x; if (i < e) v[k] = x[i]; }
#pragma unroll
    for (int k = 0; k < kV; ++k) { long long i = b + threadIdx.x + (long long)k * blockDim.x; if (i < e) acc += v[k].x; }
    if (mode == 1) __syncthreads();
    if (mode == 2) cg::this_cluster().sync();
    if (mode == 3) cg::this_grid().sync();
    if (acc == 12345.f) sink[0] = acc;
#pragma unroll
    for (int k = 0; k < kV; ++k) { long long i = b + threadIdx.x + (long long)k * blockDim.x; if (i < e) y[i] = v[k]; }
}


int main() {
    int sms; CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    cudaStream_t s; CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    float* sink; CK(cudaMalloc(&sink, 64));
    CK(cudaFuncSetAttribute(copy_kernel<8>, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
    CK(cudaFuncSetAttribute(copy_kernel<2>, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
    CK(cudaFuncSetAttribute(copy_kernel<1>, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
    CK(cudaFuncSetAttribute(empty_kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
    const int calls = 300;
    auto time_it = [&](auto launch) { return median_us_per_call(s, calls, 20, 20000000, launch); };  // spin ~10 ms
    auto launch_copy = [&](const float* x, float* y, long long bytes, int grid, int cluster, int mode, int kv) {
        long long n4 = bytes / 16;
        cudaLaunchAttribute at[1]; int na = 0;
        if (cluster > 1) { at[0].id = cudaLaunchAttributeClusterDimension; at[0].val.clusterDim = {(unsigned)cluster, 1, 1}; na = 1; }
        if (mode == 3) { at[0].id = cudaLaunchAttributeCooperative; at[0].val.cooperative = 1; na = 1; }
        cudaLaunchConfig_t c{}; c.gridDim = grid; c.blockDim = 512; c.stream = s; c.attrs = at; c.numAttrs = na;
        const float4* xx = (const float4*)x; float4* yy = (float4*)y;
        if (kv == 8) CK(cudaLaunchKernelEx(&c, copy_kernel<8>, xx, yy, n4, mode, sink));
        else if (kv == 2) CK(cudaLaunchKernelEx(&c, copy_kernel<2>, xx, yy, n4, mode, sink));
        else CK(cudaLaunchKernelEx(&c, copy_kernel<1>, xx, yy, n4, mode, sink));
    };
    int* dummy; CK(cudaMalloc(&dummy, 4));
    printf("memset4 %.2f us\n", time_it([&](int) { CK(cudaMemsetAsync(dummy, 0, 4, s)); }));
    for (int cl : {1, 2, 8, 16}) {
        cudaLaunchAttribute at; at.id = cudaLaunchAttributeClusterDimension; at.val.clusterDim = {(unsigned)cl, 1, 1};
        cudaLaunchConfig_t c{}; c.gridDim = 16; c.blockDim = 512; c.stream = s; c.attrs = &at; c.numAttrs = 1;
        printf("empty grid=16 cluster=%d %.2f us\n", cl, time_it([&](int) { CK(cudaLaunchKernelEx(&c, empty_kernel, dummy)); }));
    }
    {
        cudaLaunchAttribute at; at.id = cudaLaunchAttributeCooperative; at.val.cooperative = 1;
        cudaLaunchConfig_t c{}; c.gridDim = sms; c.blockDim = 512; c.stream = s; c.attrs = &at; c.numAttrs = 1;
        printf("empty grid=%d cooperative %.2f us\n", sms, time_it([&](int) { CK(cudaLaunchKernelEx(&c, empty_kernel, dummy)); }));
    }
    for (long long bytes : {513024LL, 1024000LL, 4194304LL}) {
        const int buffers = (int)std::min<long long>(1000, (1LL << 30) / bytes);
        std::vector<float*> xs(buffers), ys(buffers);
        for (int i = 0; i < buffers; ++i) { CK(cudaMalloc(&xs[i], bytes)); CK(cudaMalloc(&ys[i], bytes)); CK(cudaMemsetAsync(xs[i], 0x3c, bytes, s)); }
        CK(cudaStreamSynchronize(s));
        struct Cfg { int grid, cluster, mode; };
        std::vector<Cfg> cfgs = {{8, 8, 2}, {16, 16, 0}, {16, 16, 2}, {16, 1, 0}, {32, 1, 0}, {64, 1, 0}, {sms, 1, 0}, {sms, 1, 3}, {2 * sms, 1, 0}, {4 * sms, 1, 0}};
        for (auto cf : cfgs) {
            long long per_thread16 = (bytes / 16 + (long long)cf.grid * 512 - 1) / ((long long)cf.grid * 512);
            int kv = per_thread16 <= 1 ? 1 : per_thread16 <= 2 ? 2 : 8;
            if (per_thread16 > 8) continue;
            float rot = time_it([&](int i) { launch_copy(xs[i % buffers], ys[i % buffers], bytes, cf.grid, cf.cluster, cf.mode, kv); });
            float hot = time_it([&](int) { launch_copy(xs[0], ys[0], bytes, cf.grid, cf.cluster, cf.mode, kv); });
            printf("bytes=%lld grid=%d cluster=%d mode=%d kv=%d  rotated %.2f us  hot %.2f us\n", bytes, cf.grid, cf.cluster, cf.mode, kv, rot, hot);
        }
        for (int i = 0; i < buffers; ++i) { CK(cudaFree(xs[i])); CK(cudaFree(ys[i])); }
    }
    return 0;
}
