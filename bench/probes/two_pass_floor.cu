// two_pass_floor.cu - the floor of a two-pass softmax over few very long rows (split-row: one kernel reads
// x for the statistics, a second reads x again and writes y; perf-notes.md run 51). Plain kernels with no
// softmax arithmetic, timed like smx-bench times a case (CUDA events between back-to-back launches, the
// stream held by a spin kernel until all are enqueued, median of 200, inputs rotated through ~1.5 GiB):
//   read   one read of x (a sum kept in registers)            bytes |x|
//   copy   read x, write y                                    bytes |x| + |y|
//   pair   read, then copy, of the same x (one "call")        counted as |x| + |y|, like a softmax case
// and the device-to-device cudaMemcpy rate on 1 GiB (the benchmark's copy bandwidth). "pair % of copy" is
// what a two-pass kernel pair moving exactly these bytes at these rates would score in smx-bench. Sizes:
// x of 4 x 4194304 f32 (67 MB) and bf16 (34 MB), y the same size as x.
// Floor: two passes over x (a read kernel, then a copy kernel), what split-row can reach.
// Output: not committed; perf-notes runs 51 and 97 hold its figures.
// Built by -DSMX_BUILD_PROBES=ON as build/bench/probes/probe_two_pass_floor; alone:
//   nvcc -O3 -std=c++17 -arch=sm_90 bench/probes/two_pass_floor.cu -o /tmp/tpf && /tmp/tpf
#include <cstdio>

#include "probe_timing.cuh"

constexpr int kThreads = 512;
constexpr int kUnroll = 4;  // 16-byte loads in flight per thread and step

// Streams x (n4 float4 units) with every load of a step issued first. kWrite: copies it to y; otherwise
// sums it and writes the sum only if it is an impossible value, so the loads cannot be dropped.
template <bool kWrite>
__global__ void __launch_bounds__(kThreads) stream_kernel(const float4* x, float4* y, long long n4, float* sink) {
    float acc = 0.f;
    const long long stride = static_cast<long long>(gridDim.x) * kThreads * kUnroll;
    for (long long base = static_cast<long long>(blockIdx.x) * kThreads * kUnroll + threadIdx.x; base < n4; base += stride) {
        float4 v[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
            const long long i = base + static_cast<long long>(u) * kThreads;
            v[u] = i < n4 ? x[i] : make_float4(0.f, 0.f, 0.f, 0.f);
        }
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
            const long long i = base + static_cast<long long>(u) * kThreads;
            if (kWrite && i < n4) y[i] = v[u];
            acc += v[u].x;
        }
    }
    if (!kWrite && acc == 1234567.f) sink[0] = acc;
}

int main() {
    int sms = 0;
    PROBE_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    int per_sm = 0;
    PROBE_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, stream_kernel<false>, kThreads, 0));
    const int grid = sms * std::max(per_sm, 1);
    cudaStream_t s;
    PROBE_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    float* sink;
    PROBE_CHECK(cudaMalloc(&sink, 64));
    const auto time_each = [&](auto launch) { return median_us_per_call(s, 200, 10, 40000000, launch); };

    GibBuffers buffers;
    const double copy_tbps = allocate_and_time_gib_copy(&buffers, s, time_each);
    const size_t gib = GibBuffers::kBytes;
    char* a = buffers.a;
    char* b = buffers.b;
    std::printf("grid %d CTAs of %d threads, %d loads of 16 B in flight per thread\n\n", grid, kThreads, kUnroll);

    std::printf("%-26s %9s %9s %9s %9s %9s %9s %12s\n", "x bytes", "read us", "TB/s", "copy us", "TB/s", "pair us",
                "TB/s", "pair % copy");
    for (const size_t bytes : {size_t{4} * 4194304 * 4, size_t{4} * 4194304 * 2}) {
        // Slots of x and y rotated through a and b (at least 1.5 GiB in all, >> the 60 MiB L2).
        const int slots = static_cast<int>(gib / bytes);
        const long long n4 = static_cast<long long>(bytes / 16);
        const auto x_of = [&](int i) { return reinterpret_cast<const float4*>(a + (i % slots) * bytes); };
        const auto y_of = [&](int i) { return reinterpret_cast<float4*>(b + (i % slots) * bytes); };
        const double read_us = time_each([&](int i) { stream_kernel<false><<<grid, kThreads, 0, s>>>(x_of(i), nullptr, n4, sink); });
        const double copy_us = time_each([&](int i) { stream_kernel<true><<<grid, kThreads, 0, s>>>(x_of(i), y_of(i), n4, sink); });
        const double pair_us = time_each([&](int i) {
            stream_kernel<false><<<grid, kThreads, 0, s>>>(x_of(i), nullptr, n4, sink);
            stream_kernel<true><<<grid, kThreads, 0, s>>>(x_of(i), y_of(i), n4, sink);
        });
        const double read_tbps = bytes / (read_us * 1e-6) / 1e12;
        const double copy_kernel_tbps = 2.0 * bytes / (copy_us * 1e-6) / 1e12;
        const double pair_tbps = 2.0 * bytes / (pair_us * 1e-6) / 1e12;
        std::printf("%-26zu %9.1f %9.3f %9.1f %9.3f %9.1f %9.3f %11.1f%%\n", bytes, read_us, read_tbps, copy_us,
                    copy_kernel_tbps, pair_us, pair_tbps, 100.0 * pair_tbps / copy_tbps);
    }
    return 0;
}
