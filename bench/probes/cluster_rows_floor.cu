// cluster_rows_floor.cu - the floor of the block-regs structure on long f32 rows (perf-notes.md run 52): each
// CTA loads its slice of a row into registers (8 x 16 bytes per thread, all issued first), then stores it,
// with no softmax arithmetic, launched like block-regs (C CTAs per row, one row per cluster) in three modes:
//   plain     the same CTAs without a cluster and without any barrier
//   cluster   a cluster launch, no cluster barrier
//   barrier   a cluster launch with one cluster barrier between the loads and the stores (as block-regs
//             exchanges its statistics)
// compiled with __launch_bounds__(1024) and (512) (the compiler then allocates registers differently, which
// the output reports with the CTAs per SM); then, with the barrier, other splits of the same rows (clusters of 1-16, 16 or 32
// floats per thread, registers free); all
// timed like smx-bench times a case (CUDA events between back-to-back launches, the stream held by a spin
// kernel until all are enqueued, median of 30). Rows are padded to a multiple of 4 floats (50257 -> 50260)
// so every slice is whole 16-byte units. Not part of the build:
//   nvcc -O3 -std=c++17 -arch=sm_90 bench/probes/cluster_rows_floor.cu -o cluster_rows_floor && ./cluster_rows_floor
#include <cooperative_groups.h>

#include <algorithm>
#include <cstdio>

#include "probe_timing.cuh"

namespace cg = cooperative_groups;

// mode 0: plain launch; 1: cluster launch, no barrier; 2: cluster launch with a cluster barrier.
// kUnits 16-byte units per thread: 8 = 32 floats, as block-regs' f32 32-value instances hold.
// kMaxThreads: the launch bound, which changes the code the compiler makes (registers, see main).
template <int kUnits, int kMaxThreads = 1024>
__global__ void __launch_bounds__(kMaxThreads) slice_copy(const float4* x, float4* y, long long row4, long long slice4,
                                                  int ranks, int mode, float* sink) {
    const unsigned rank = mode == 0 ? blockIdx.x % ranks : cg::this_cluster().block_rank();
    const long long row = blockIdx.x / ranks;
    const long long begin = static_cast<long long>(rank) * slice4;
    const long long count = row4 - begin < slice4 ? row4 - begin : slice4;
    const float4* source = x + row * row4 + begin;
    float4* target = y + row * row4 + begin;
    float4 v[kUnits];
    float acc = 0.f;
#pragma unroll
    for (int k = 0; k < kUnits; ++k) {
        const long long i = threadIdx.x + static_cast<long long>(k) * blockDim.x;
        if (i < count) v[k] = source[i];
    }
#pragma unroll
    for (int k = 0; k < kUnits; ++k) {
        const long long i = threadIdx.x + static_cast<long long>(k) * blockDim.x;
        if (i < count) acc += v[k].x;
    }
    __syncthreads();  // stands in for the CTA's reduction
    if (mode == 2) cg::this_cluster().sync();
    if (acc == 1234567.f) sink[0] = acc;
#pragma unroll
    for (int k = 0; k < kUnits; ++k) {
        const long long i = threadIdx.x + static_cast<long long>(k) * blockDim.x;
        if (i < count) target[i] = v[k];
    }
}

int main() {
    cudaStream_t s;
    PROBE_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    float* sink;
    PROBE_CHECK(cudaMalloc(&sink, 64));
    // Rows of 0.1-2 GB: one buffer each for x and y, far past the L2, so no rotation.
    const auto time_each = [&](auto launch) { return median_us_per_call(s, 30, 3, 4000000, [&](int) { launch(); }); };

    struct Shape {
        long long rows, cols;
        int cluster, threads;  // block-regs' f32 -> f32 choice for the shape (plan text in the benchmark)
    };
    const Shape shapes[] = {{8192, 32000, 2, 512}, {8192, 50257, 4, 416}, {4096, 128256, 8, 512}, {16384, 4096, 1, 128}};
    size_t max_bytes = 0;
    for (const Shape& shape : shapes) max_bytes = std::max(max_bytes, static_cast<size_t>(shape.rows * ((shape.cols + 3) / 4 * 4) * 4));
    char *x, *y;
    PROBE_CHECK(cudaMalloc(&x, max_bytes));
    PROBE_CHECK(cudaMalloc(&y, max_bytes));
    PROBE_CHECK(cudaMemset(x, 0x3c, max_bytes));
    const double memcpy_us = time_each([&] { PROBE_CHECK(cudaMemcpyAsync(y, x, max_bytes, cudaMemcpyDeviceToDevice, s)); });
    const double copy_tbps = 2.0 * max_bytes / (memcpy_us * 1e-6) / 1e12;
    std::printf("memcpy %zu bytes: %.1f us, %.3f TB/s (read + write)\n\n", max_bytes, memcpy_us, copy_tbps);
    PROBE_CHECK(cudaFuncSetAttribute(slice_copy<4>, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
    PROBE_CHECK(cudaFuncSetAttribute(slice_copy<8>, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
    PROBE_CHECK(cudaFuncSetAttribute(slice_copy<8, 512>, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));

    // Median us of one configuration; 0 if it does not fit (threads > 1024 or a cluster the device refuses).
    // bound512: the 32-float kernel compiled with __launch_bounds__(512) instead of 1024.
    const auto run = [&](const Shape& shape, int units, int cluster, int threads, int mode, bool bound512 = false) -> double {
        const long long row4 = (shape.cols + 3) / 4;
        const long long slice4 = (row4 + cluster - 1) / cluster;
        if (threads > (bound512 ? 512 : 1024) || static_cast<long long>(threads) * units < slice4) return 0.0;
        const void* kernel = bound512     ? reinterpret_cast<const void*>(slice_copy<8, 512>)
                             : units == 4 ? reinterpret_cast<const void*>(slice_copy<4>)
                                          : reinterpret_cast<const void*>(slice_copy<8>);
        cudaLaunchAttribute attribute{};
        attribute.id = cudaLaunchAttributeClusterDimension;
        attribute.val.clusterDim.x = static_cast<unsigned>(cluster);
        attribute.val.clusterDim.y = 1;
        attribute.val.clusterDim.z = 1;
        cudaLaunchConfig_t config{};
        config.gridDim = dim3(static_cast<unsigned>(shape.rows * cluster));
        config.blockDim = dim3(static_cast<unsigned>(threads));
        config.stream = s;
        config.attrs = &attribute;
        config.numAttrs = mode == 0 ? 0 : 1;
        if (mode != 0) {
            int active = 0;
            if (cudaOccupancyMaxActiveClusters(&active, kernel, &config) != cudaSuccess || active == 0) {
                (void)cudaGetLastError();
                return 0.0;
            }
        }
        const float4* xs = reinterpret_cast<const float4*>(x);
        float4* ys = reinterpret_cast<float4*>(y);
        return time_each([&] {
            void* args[] = {&xs, &ys, const_cast<long long*>(&row4), const_cast<long long*>(&slice4), &cluster, &mode, &sink};
            PROBE_CHECK(cudaLaunchKernelExC(&config, kernel, args));
        });
    };
    const auto percent = [&](const Shape& shape, double micros) {
        return micros == 0.0 ? 0.0 : 100.0 * 2.0 * shape.rows * shape.cols * 4 / (micros * 1e-6) / 1e12 / copy_tbps;
    };

    for (const bool bound512 : {false, true}) {
        const void* kernel = bound512 ? reinterpret_cast<const void*>(slice_copy<8, 512>) : reinterpret_cast<const void*>(slice_copy<8>);
        cudaFuncAttributes attributes{};
        PROBE_CHECK(cudaFuncGetAttributes(&attributes, kernel));
        int per_sm_512 = 0, per_sm_416 = 0;
        PROBE_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm_512, kernel, 512, 0));
        PROBE_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm_416, kernel, 416, 0));
        std::printf("block-regs' own configurations (f32 -> f32), 32 floats per thread, __launch_bounds__(%d): %d registers, "
                    "%d CTAs of 512 (%d of 416) per SM:\n", bound512 ? 512 : 1024, attributes.numRegs, per_sm_512, per_sm_416);
        std::printf("%-14s %7s %7s %11s %11s %11s %9s %9s %9s\n", "shape", "cluster", "threads", "plain us", "cluster us",
                    "barrier us", "plain %", "cluster %", "barrier %");
        for (const Shape& shape : shapes) {
            double micros[3];
            for (int mode = 0; mode < 3; ++mode) micros[mode] = run(shape, 8, shape.cluster, shape.threads, mode, bound512);
            char label[32];
            std::snprintf(label, sizeof(label), "%lldx%lld", shape.rows, shape.cols);
            std::printf("%-14s %7d %7d %11.1f %11.1f %11.1f %8.1f%% %8.1f%% %8.1f%%\n", label, shape.cluster, shape.threads,
                        micros[0], micros[1], micros[2], percent(shape, micros[0]), percent(shape, micros[1]),
                        percent(shape, micros[2]));
        }
        std::printf("\n");
    }
    std::printf("\nwith the cluster barrier, other splits (%% of copy; threads = the slice in units, rounded to 32):\n");
    std::printf("%-14s %6s", "shape", "units");
    for (int cluster = 1; cluster <= 16; cluster *= 2) std::printf("   C=%-2d threads", cluster);
    std::printf("\n");
    for (const Shape& shape : shapes) {
        for (int units : {4, 8}) {
            char label[32];
            std::snprintf(label, sizeof(label), "%lldx%lld", shape.rows, shape.cols);
            std::printf("%-14s %6d", label, units);
            for (int cluster = 1; cluster <= 16; cluster *= 2) {
                const long long slice4 = ((shape.cols + 3) / 4 + cluster - 1) / cluster;
                const int threads = static_cast<int>(std::max<long long>(128, (slice4 + units - 1) / units + 31) / 32 * 32);
                std::printf("   %5.1f%% %5d", percent(shape, run(shape, units, cluster, threads, 2)), threads);
            }
            std::printf("\n");
        }
    }
    return 0;
}
