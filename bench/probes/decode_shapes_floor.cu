// decode_shapes_floor.cu - what issue 6's shapes (1-64 rows of 128256-256000 elements, 4 rows of 4194304:
// 0.5-134 MB moved) can reach per call before any softmax arithmetic: at these sizes a launch's fixed costs
// weigh against a few microseconds of traffic. Plain kernels, timed like smx-bench times a case (CUDA
// events between back-to-back launches, the stream held by a spin kernel until all are enqueued, median of
// 100, x and y rotated through 1 GiB each), in % of the 1 GiB memcpy rate measured in the same run:
//   memcpy   cudaMemcpyAsync of the case's x into y (the same bytes as the case)
//   stream   a grid-stride copy kernel (4 CTAs of 512 per SM, 4 loads of 16 B in flight per thread)
//   rows     smx's split of each row into C slices of at most S KiB of x (S as in smx's plans: 16 for single
//            rows and bf16 8 x 128256, 32 for split-row's bf16 chunks, 64 for the others), each CTA loading
//            its slice into registers (up to 8 x 16 B per thread, all issued first), then storing it,
//            launched three ways:
//              plain    no barrier, the CTAs in as many waves as they need
//              cluster  a cluster of C CTAs per row, one cluster barrier between the loads and the stores
//                       (how block-regs combines a row's statistics)
//              grid     one cooperative launch, every CTA resident, one grid barrier between the loads and
//                       the stores (how grid-regs does); only where all CTAs fit on the device at once
// Element sizes 4 (f32 -> f32) and 2 (bf16 -> bf16), y the size of x.
// Floor: what issue 6's decode shapes allow per call: memcpy, a copy kernel, and smx's row split under
// a cluster or a grid barrier.
// Output: docs/benchmarks/decode-shapes-floor-h200.txt (perf-notes run 97).
// Built by -DSMX_BUILD_PROBES=ON as build/bench/probes/probe_decode_shapes_floor; alone:
//   nvcc -O3 -std=c++17 -arch=sm_90 bench/probes/decode_shapes_floor.cu -o /tmp/dsf && /tmp/dsf
#include <cooperative_groups.h>

#include <algorithm>
#include <cstdio>

#include "probe_timing.cuh"

namespace cg = cooperative_groups;

constexpr int kThreads = 512;
constexpr int kSliceUnits = 8;     // 16-byte units per thread in a row slice, at most: 512 x 8 x 16 B = 64 KiB
constexpr int kStreamUnroll = 4;   // 16-byte loads in flight per thread and step in the stream kernel

enum class Barrier { kNone, kCluster, kGrid };

// One CTA per row slice: row = blockIdx.x / slices, slice = blockIdx.x % slices (a cluster's CTAs are
// consecutive, so its rank is the slice). Every load is issued before the barrier, every store after it.
__global__ void __launch_bounds__(kThreads) row_slice_copy(const float4* x, float4* y, long long row_units,
                                                           long long slice_units, int slices, Barrier barrier,
                                                           float* sink) {
    const long long row = blockIdx.x / slices;
    const long long begin = static_cast<long long>(blockIdx.x % slices) * slice_units;
    const long long count = row_units - begin < slice_units ? row_units - begin : slice_units;
    const float4* source = x + row * row_units + begin;
    float4* target = y + row * row_units + begin;
    float4 held[kSliceUnits];
    float acc = 0.f;
#pragma unroll
    for (int k = 0; k < kSliceUnits; ++k) {
        const long long i = threadIdx.x + static_cast<long long>(k) * kThreads;
        if (i < count) held[k] = source[i];
    }
#pragma unroll
    for (int k = 0; k < kSliceUnits; ++k) {
        const long long i = threadIdx.x + static_cast<long long>(k) * kThreads;
        if (i < count) acc += held[k].x;  // uses every load before the barrier, as the statistics do
    }
    __syncthreads();  // stands in for the CTA's reduction
    if (barrier == Barrier::kCluster) cg::this_cluster().sync();
    if (barrier == Barrier::kGrid) cg::this_grid().sync();
    if (acc == 1234567.f) sink[0] = acc;
#pragma unroll
    for (int k = 0; k < kSliceUnits; ++k) {
        const long long i = threadIdx.x + static_cast<long long>(k) * kThreads;
        if (i < count) target[i] = held[k];
    }
}

__global__ void __launch_bounds__(kThreads) stream_copy(const float4* x, float4* y, long long units) {
    const long long stride = static_cast<long long>(gridDim.x) * kThreads * kStreamUnroll;
    for (long long base = static_cast<long long>(blockIdx.x) * kThreads * kStreamUnroll + threadIdx.x; base < units;
         base += stride) {
        float4 v[kStreamUnroll];
#pragma unroll
        for (int u = 0; u < kStreamUnroll; ++u) {
            const long long i = base + static_cast<long long>(u) * kThreads;
            if (i < units) v[u] = x[i];
        }
#pragma unroll
        for (int u = 0; u < kStreamUnroll; ++u) {
            const long long i = base + static_cast<long long>(u) * kThreads;
            if (i < units) y[i] = v[u];
        }
    }
}

int main() {
    int sms = 0;
    PROBE_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    cudaStream_t s;
    PROBE_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    float* sink;
    PROBE_CHECK(cudaMalloc(&sink, 64));
    const auto time_each = [&](auto launch) { return median_us_per_call(s, 100, 10, 20000000, launch); };

    GibBuffers buffers;
    const double copy_tbps = allocate_and_time_gib_copy(&buffers, s, time_each);
    const size_t gib = GibBuffers::kBytes;
    char* a = buffers.a;
    char* b = buffers.b;

    PROBE_CHECK(cudaFuncSetAttribute(row_slice_copy, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
    cudaFuncAttributes attributes{};
    PROBE_CHECK(cudaFuncGetAttributes(&attributes, row_slice_copy));
    int slice_per_sm = 0, stream_per_sm = 0;
    PROBE_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&slice_per_sm, row_slice_copy, kThreads, 0));
    PROBE_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&stream_per_sm, stream_copy, kThreads, 0));
    const int stream_grid = sms * std::min(stream_per_sm, 4);
    std::printf("row_slice_copy: %d registers, %d CTAs of %d per SM; stream_copy grid %d\n\n", attributes.numRegs,
                slice_per_sm, kThreads, stream_grid);
    std::printf("%-12s %2s %3s %3s %5s | %8s %8s %8s %8s %8s | %7s %7s %7s %7s %7s  (us per call; %% of the 1 GiB memcpy rate)\n",
                "case", "eb", "S", "C", "CTAs", "memcpy", "stream", "plain", "cluster", "grid", "memcpy", "stream", "plain", "cluster", "grid");

    struct Case {
        long long rows, cols;
        int f32_slice_kib, bf16_slice_kib;  // smx's slice of x per CTA for the shape (plan text in the benchmark)
    };
    const Case cases[] = {{1, 128256, 16, 16}, {1, 256000, 16, 16}, {8, 128256, 64, 16},
                          {64, 128256, 64, 64}, {32, 256000, 64, 64}, {4, 4194304, 64, 32}};
    for (const Case& c : cases) {
        for (const int element_bytes : {4, 2}) {
            const long long row_bytes = c.cols * element_bytes;
            const size_t bytes = static_cast<size_t>(c.rows * row_bytes);  // of x, and of y
            const int slots = static_cast<int>(gib / bytes);
            const auto x_of = [&](int i) { return reinterpret_cast<const float4*>(a + (i % slots) * bytes); };
            const auto y_of = [&](int i) { return reinterpret_cast<float4*>(b + (i % slots) * bytes); };
            const long long row_units = row_bytes / 16;  // every case's rows are whole 16-byte units
            const int slice_kib = element_bytes == 4 ? c.f32_slice_kib : c.bf16_slice_kib;
            const long long slice_cap = static_cast<long long>(slice_kib) * 1024 / 16;
            const int slices = static_cast<int>((row_units + slice_cap - 1) / slice_cap);
            const long long slice_units = (row_units + slices - 1) / slices;
            const int ctas = static_cast<int>(c.rows * slices);

            const double memcpy_us = time_each([&](int i) {
                PROBE_CHECK(cudaMemcpyAsync(y_of(i), x_of(i), bytes, cudaMemcpyDeviceToDevice, s));
            });
            const double stream_us = time_each([&](int i) {
                stream_copy<<<stream_grid, kThreads, 0, s>>>(x_of(i), y_of(i), static_cast<long long>(bytes / 16));
                PROBE_CHECK(cudaGetLastError());
            });
            // Median us of the row slices under one barrier; 0 where that launch cannot be made.
            const auto rows_us = [&](Barrier barrier) -> double {
                cudaLaunchAttribute attribute{};
                cudaLaunchConfig_t config{};
                config.gridDim = dim3(static_cast<unsigned>(ctas));
                config.blockDim = dim3(kThreads);
                config.stream = s;
                if (barrier == Barrier::kCluster) {
                    if (slices > 16) return 0.0;
                    attribute.id = cudaLaunchAttributeClusterDimension;
                    attribute.val.clusterDim.x = static_cast<unsigned>(slices);
                    attribute.val.clusterDim.y = 1;
                    attribute.val.clusterDim.z = 1;
                    config.attrs = &attribute;
                    config.numAttrs = 1;
                    int active = 0;
                    if (cudaOccupancyMaxActiveClusters(&active, row_slice_copy, &config) != cudaSuccess || active == 0) {
                        (void)cudaGetLastError();
                        return 0.0;
                    }
                } else if (barrier == Barrier::kGrid) {
                    if (ctas > slice_per_sm * sms) return 0.0;
                    attribute.id = cudaLaunchAttributeCooperative;
                    attribute.val.cooperative = 1;
                    config.attrs = &attribute;
                    config.numAttrs = 1;
                }
                return time_each([&](int i) {
                    PROBE_CHECK(cudaLaunchKernelEx(&config, row_slice_copy, x_of(i), y_of(i), row_units, slice_units, slices,
                                                   barrier, sink));
                });
            };
            const double plain_us = rows_us(Barrier::kNone);
            const double cluster_us = rows_us(Barrier::kCluster);
            const double grid_us = rows_us(Barrier::kGrid);
            const auto percent = [&](double micros) {
                return micros == 0.0 ? 0.0 : 100.0 * 2.0 * bytes / (micros * 1e-6) / 1e12 / copy_tbps;
            };
            char label[32];
            std::snprintf(label, sizeof(label), "%lldx%lld", c.rows, c.cols);
            std::printf("%-12s %2d %3d %3d %5d | %8.1f %8.1f %8.1f %8.1f %8.1f | %6.1f%% %6.1f%% %6.1f%% %6.1f%% %6.1f%%\n", label,
                        element_bytes, slice_kib, slices, ctas, memcpy_us, stream_us, plain_us, cluster_us, grid_us, percent(memcpy_us),
                        percent(stream_us), percent(plain_us), percent(cluster_us), percent(grid_us));
        }
    }
    std::printf("\n(0.0: that launch cannot be made: a cluster over 16 CTAs, or more CTAs than the device holds at once)\n");
    return 0;
}
