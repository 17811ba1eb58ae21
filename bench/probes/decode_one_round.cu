// decode_one_round.cu - whether issue 6's 64 x 128256 and 32 x 256000 f32 can reach 70% of copy with every
// row resident at once. smx runs them on block-regs clusters (8 or 16 CTAs of 512 threads a row, 64 KB of x
// a CTA in registers, 2 CTAs per SM): only ~30 such clusters fit at once, so 64 rows take 3 rounds and 32
// rows 2, and run 97 put that structure's floor at 62-68% of copy. Here a CTA also holds up to 64 KB of its
// slice in shared memory (one bulk copy, cp.async.bulk, completing on an mbarrier), so a row needs half the
// CTAs and every row of the shape fits in one round. Bytes only, no softmax arithmetic: each CTA loads its
// slice (registers and shared memory), sums the first float of every 16-byte unit (so every load has landed,
// as softmax's statistics need), passes one cluster barrier (where smx exchanges the statistics), and stores
// the slice, the shared-memory part by the threads (as a softmax, which must scale each value, would) or by
// one bulk copy (bytes only, a bound). Compared with a memcpy of the same bytes and with smx's geometry (no
// shared memory, clusters of 8 or 16), each variant checked once against x (every byte of y equal).
// Timed like smx-bench times a case (an event between calls, median of 200), x and y rotated through 1 GiB.
// Not part of the build:
//   nvcc -O3 -std=c++17 -arch=sm_90 bench/probes/decode_one_round.cu -o /tmp/dor && /tmp/dor
#include <cooperative_groups.h>

#include <cstdint>
#include <cstdio>
#include <vector>

#include "../../src/cuda/bulk_copy.cuh"
#include "probe_timing.cuh"

namespace cg = cooperative_groups;
using smx::cuda::bulk_barrier_init;
using smx::cuda::bulk_barrier_wait;
using smx::cuda::bulk_copy_expect;
using smx::cuda::bulk_copy_to_shared;
using smx::cuda::shared_address;

constexpr int kThreads = 512;
constexpr int kRegUnits = 8;  // 16-byte units a thread holds in registers: 64 KB a CTA, as smx's f32 instance
constexpr int kMaxStagedBytes = 64 * 1024;

enum class Staged { kNone, kThreadStores, kBulkStore };

// CTAs of a cluster take consecutive slices of `slice_units` units of their row (one row per cluster).
template <Staged kStaged>
__global__ void __launch_bounds__(kThreads, 2) row_slices(const float4* x, float4* y, long long row_units,
                                                          int slice_units, float* sink) {
    extern __shared__ float4 staged[];
    __shared__ std::uint64_t landed;
    cg::cluster_group cluster = cg::this_cluster();
    const long long row = blockIdx.x / cluster.num_blocks();
    const long long begin = row * row_units + static_cast<long long>(cluster.block_rank()) * slice_units;
    const long long end = min(begin + slice_units, (row + 1) * row_units);
    const int units = static_cast<int>(max(end - begin, 0LL));
    const int reg_units = min(units, kRegUnits * kThreads);
    const int staged_units = kStaged == Staged::kNone ? 0 : units - reg_units;
    const int t = threadIdx.x;

    if (kStaged != Staged::kNone) {
        if (t == 0) bulk_barrier_init(&landed);
        __syncthreads();  // the barrier initialized before anyone waits on it
        if (t == 0 && staged_units > 0) {
            bulk_copy_expect(&landed, staged_units * 16u);
            bulk_copy_to_shared(staged, x + begin + reg_units, staged_units * 16u, &landed);
        }
    }
    float4 held[kRegUnits];
#pragma unroll
    for (int k = 0; k < kRegUnits; ++k) {
        if (t + k * kThreads < reg_units) held[k] = x[begin + t + k * kThreads];
    }
    float sum = 0.f;
#pragma unroll
    for (int k = 0; k < kRegUnits; ++k) {
        if (t + k * kThreads < reg_units) sum += held[k].x;
    }
    if (staged_units > 0) {
        bulk_barrier_wait(&landed, 0);
        for (int i = t; i < staged_units; i += kThreads) sum += staged[i].x;
    }
    cluster.sync();  // where smx exchanges the row's statistics
    const float scale = sum == 1234567.f ? 2.f : 1.f;  // the stores depend on the loads through it
#pragma unroll
    for (int k = 0; k < kRegUnits; ++k) {
        if (t + k * kThreads < reg_units) {
            float4 value = held[k];
            value.x *= scale;
            y[begin + t + k * kThreads] = value;
        }
    }
    if (kStaged == Staged::kThreadStores) {
        for (int i = t; i < staged_units; i += kThreads) {
            float4 value = staged[i];
            value.x *= scale;
            y[begin + reg_units + i] = value;
        }
    }
    if (kStaged == Staged::kBulkStore && t == 0 && staged_units > 0) {
        if (scale != 1.f) sink[0] = scale;
        asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\n" ::"l"(y + begin + reg_units),
                     "r"(shared_address(staged)), "r"(staged_units * 16u)
                     : "memory");
        asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
        asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
    }
}

int main() {
    cudaStream_t s;
    PROBE_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    const auto time_each = [&](auto launch) { return median_us_per_call(s, 200, 10, 20000000, launch); };
    GibBuffers buffers;
    const double copy_tbps = allocate_and_time_gib_copy(&buffers, s, time_each);
    float* sink;
    PROBE_CHECK(cudaMalloc(&sink, 64));

    struct Shape {
        long long rows, cols;
        int smx_cluster;  // smx's clusters for the shape (block-regs, registers only)
        int round_cluster;  // half the CTAs: registers and shared memory
    };
    for (const Shape shape : {Shape{64, 128256, 8, 4}, Shape{32, 256000, 16, 8}}) {
        const long long row_units = shape.cols / 4;
        const size_t bytes = static_cast<size_t>(shape.rows * shape.cols) * sizeof(float);
        const int rotation = static_cast<int>(GibBuffers::kBytes / bytes);
        const auto x_of = [&](int i) { return reinterpret_cast<const float4*>(buffers.a + (i % rotation) * bytes); };
        const auto y_of = [&](int i) { return reinterpret_cast<float4*>(buffers.b + (i % rotation) * bytes); };
        const double moved = 2.0 * bytes;
        std::printf("\n%lld x %lld f32, %.1f MB moved\n", shape.rows, shape.cols, moved / 1e6);
        const auto report = [&](const char* name, double us, const char* check) {
            std::printf("  %-58s %7.2f us %6.1f%% %s\n", name, us, 100.0 * moved / (us * 1e-6) / 1e12 / copy_tbps, check);
        };
        report("memcpy of the same bytes", time_each([&](int i) {
                   PROBE_CHECK(cudaMemcpyAsync(y_of(i), x_of(i), bytes, cudaMemcpyDeviceToDevice, s));
               }),
               "");

        const auto run = [&](auto kernel, Staged staged, int cluster_size) {
            const int slice_units = static_cast<int>((row_units + cluster_size - 1) / cluster_size);
            const int staged_units = staged == Staged::kNone ? 0 : slice_units - kRegUnits * kThreads;
            if (slice_units > kRegUnits * kThreads + (staged == Staged::kNone ? 0 : kMaxStagedBytes / 16)) {
                std::printf("  clusters of %d do not hold the row\n", cluster_size);
                return;
            }
            const int shared = staged == Staged::kNone ? 0 : kMaxStagedBytes;
            PROBE_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, shared));
            PROBE_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
            cudaLaunchAttribute cluster_dim;
            cluster_dim.id = cudaLaunchAttributeClusterDimension;
            cluster_dim.val.clusterDim.x = cluster_size;
            cluster_dim.val.clusterDim.y = 1;
            cluster_dim.val.clusterDim.z = 1;
            cudaLaunchConfig_t config{};
            config.gridDim = static_cast<unsigned>(shape.rows * cluster_size);
            config.blockDim = kThreads;
            config.dynamicSmemBytes = shared;
            config.stream = s;
            config.attrs = &cluster_dim;
            config.numAttrs = 1;
            int fit = 0;
            PROBE_CHECK(cudaOccupancyMaxActiveClusters(&fit, kernel, &config));
            const auto launch = [&](int i) {
                PROBE_CHECK(cudaLaunchKernelEx(&config, kernel, x_of(i), y_of(i), row_units, slice_units, sink));
            };
            const double us = time_each(launch);
            // Check: y of slot 0 poisoned, written once, compared with x byte for byte.
            PROBE_CHECK(cudaMemsetAsync(y_of(0), 0xff, bytes, s));
            launch(0);
            PROBE_CHECK(cudaStreamSynchronize(s));
            PROBE_CHECK(cudaGetLastError());
            std::vector<unsigned> host_x(bytes / 4), host_y(bytes / 4);
            PROBE_CHECK(cudaMemcpy(host_x.data(), x_of(0), bytes, cudaMemcpyDeviceToHost));
            PROBE_CHECK(cudaMemcpy(host_y.data(), y_of(0), bytes, cudaMemcpyDeviceToHost));
            long long differing = 0;
            for (size_t i = 0; i < host_x.size(); ++i) differing += host_x[i] != host_y[i];
            char name[128], check[64];
            std::snprintf(name, sizeof name, "%s, clusters of %d (%d KB regs + %d KB shared a CTA; %d fit)",
                          staged == Staged::kNone ? "registers" : staged == Staged::kThreadStores ? "staged, thread stores" : "staged, bulk store",
                          cluster_size, kRegUnits * kThreads * 16 / 1024, staged_units * 16 / 1024, fit);
            std::snprintf(check, sizeof check, "check: %lld words differ", differing);
            report(name, us, check);
        };
        for (int sample = 0; sample < 2; ++sample) {
            run(row_slices<Staged::kNone>, Staged::kNone, shape.smx_cluster);
            run(row_slices<Staged::kThreadStores>, Staged::kThreadStores, shape.round_cluster);
            run(row_slices<Staged::kBulkStore>, Staged::kBulkStore, shape.round_cluster);
        }
    }
    return 0;
}
