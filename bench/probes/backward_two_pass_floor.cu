// backward_two_pass_floor.cu - the floor of backward-split, softmax's gradient over few very long rows: one
// kernel reads dy and y for the row's sum(dy * y), a second reads both again and writes dx (log-softmax's first
// kernel reads dy alone). Plain kernels with no gradient arithmetic, timed like smx-bench times a case (CUDA
// events between back-to-back launches, the stream held by a spin kernel until all are enqueued, median of 200,
// inputs rotated through 2 GiB):
//   sums        read dy and y (a sum kept in registers)                 bytes |dy| + |y|
//   write       read dy and y, write dx                                 bytes |dy| + |y| + |dx|
//   pair        sums, then write, of the same operands (one "call")    counted as |dy| + |y| + |dx|
//   pair, rev   the same, write walking the operands from their end (the last bytes the sums kernel read
//               are the likeliest still in L2), as backward-split orders its write kernel's CTAs
//   log pair    read dy, then the reversed write                        counted as |dy| + |y| + |dx|
// and the device-to-device cudaMemcpy rate on 1 GiB (the benchmark's copy bandwidth). "% copy" is what a
// kernel pair moving exactly these bytes would score in smx-bench. Sizes: 4 x 4194304 elements of 4 and 2
// bytes (the decode grid's longest rows, f32 and 16-bit dy, y and dx).
// Output: docs/benchmarks/backward-two-pass-floor-h200.txt. Built by -DSMX_BUILD_PROBES=ON as
// build/bench/probes/probe_backward_two_pass_floor; alone:
//   nvcc -O3 -std=c++17 -arch=sm_90 bench/probes/backward_two_pass_floor.cu -o /tmp/btpf && /tmp/btpf
#include <cstdio>

#include "probe_timing.cuh"

constexpr int kThreads = 512;
constexpr int kUnroll = 4;  // 16-byte loads of each operand in flight per thread and step

// Streams a and b (n4 float4 units each), every load of a step issued first; steps go from the operands'
// start, or from their end where kReverse. kWrite: writes a + b to out; otherwise sums them and writes the sum
// only if it is an impossible value, so the loads cannot be dropped. b == nullptr: a alone is read.
template <bool kWrite, bool kReverse>
__global__ void __launch_bounds__(kThreads)
    pair_stream_kernel(const float4* a, const float4* b, float4* out, long long n4, float* sink) {
    float acc = 0.f;
    const long long step_units = static_cast<long long>(kThreads) * kUnroll;
    const long long steps = (n4 + step_units - 1) / step_units;
    for (long long s = blockIdx.x; s < steps; s += gridDim.x) {
        const long long step = kReverse ? steps - 1 - s : s;
        const long long base = step * step_units + threadIdx.x;
        float4 va[kUnroll];
        float4 vb[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
            const long long i = base + static_cast<long long>(u) * kThreads;
            va[u] = i < n4 ? a[i] : make_float4(0.f, 0.f, 0.f, 0.f);
            vb[u] = b != nullptr && i < n4 ? b[i] : make_float4(0.f, 0.f, 0.f, 0.f);
        }
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
            const long long i = base + static_cast<long long>(u) * kThreads;
            if (kWrite && i < n4) {
                out[i] = make_float4(va[u].x + vb[u].x, va[u].y + vb[u].y, va[u].z + vb[u].z, va[u].w + vb[u].w);
            }
            acc += va[u].x + vb[u].x;
        }
    }
    if (!kWrite && acc == 1234567.f) sink[0] = acc;
}

int main() {
    int sms = 0;
    PROBE_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    int per_sm = 0;
    PROBE_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, pair_stream_kernel<true, false>, kThreads, 0));
    const int grid = sms * std::max(per_sm, 1);
    cudaStream_t s;
    PROBE_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    float* sink;
    PROBE_CHECK(cudaMalloc(&sink, 64));
    const auto time_each = [&](auto launch) { return median_us_per_call(s, 200, 10, 40000000, launch); };

    GibBuffers buffers;
    const double copy_tbps = allocate_and_time_gib_copy(&buffers, s, time_each);
    const size_t gib = GibBuffers::kBytes;
    std::printf("grid %d CTAs of %d threads, %d loads of 16 B of each operand in flight per thread\n\n", grid,
                kThreads, kUnroll);
    std::printf("%-12s %9s %9s %9s %9s %9s %9s %9s %9s\n", "operand B", "sums us", "write us", "pair us", "% copy",
                "rev us", "% copy", "log us", "% copy");
    for (const size_t bytes : {size_t{4} * 4194304 * 4, size_t{4} * 4194304 * 2}) {
        // dy and y side by side in buffer a, dx in buffer b, slots rotated (>> the 60 MiB L2).
        const int slots = static_cast<int>(gib / (2 * bytes));
        const long long n4 = static_cast<long long>(bytes / 16);
        const auto dy_of = [&](int i) { return reinterpret_cast<const float4*>(buffers.a + (i % slots) * 2 * bytes); };
        const auto y_of = [&](int i) { return reinterpret_cast<const float4*>(buffers.a + (i % slots) * 2 * bytes + bytes); };
        const auto dx_of = [&](int i) { return reinterpret_cast<float4*>(buffers.b + (i % slots) * bytes); };
        const auto sums = [&](int i, bool log) {
            pair_stream_kernel<false, false><<<grid, kThreads, 0, s>>>(dy_of(i), log ? nullptr : y_of(i), nullptr, n4, sink);
        };
        const auto write = [&](int i, bool reverse) {
            if (reverse) {
                pair_stream_kernel<true, true><<<grid, kThreads, 0, s>>>(dy_of(i), y_of(i), dx_of(i), n4, sink);
            } else {
                pair_stream_kernel<true, false><<<grid, kThreads, 0, s>>>(dy_of(i), y_of(i), dx_of(i), n4, sink);
            }
        };
        const double sums_us = time_each([&](int i) { sums(i, false); });
        const double write_us = time_each([&](int i) { write(i, false); });
        const double pair_us = time_each([&](int i) { sums(i, false); write(i, false); });
        const double rev_us = time_each([&](int i) { sums(i, false); write(i, true); });
        const double log_us = time_each([&](int i) { sums(i, true); write(i, true); });
        const auto pct = [&](double us) { return 100.0 * (3.0 * bytes / (us * 1e-6) / 1e12) / copy_tbps; };
        std::printf("%-12zu %9.1f %9.1f %9.1f %8.1f%% %9.1f %8.1f%% %9.1f %8.1f%%\n", bytes, sums_us, write_us, pair_us,
                    pct(pair_us), rev_us, pct(rev_us), log_us, pct(log_us));
    }
    PROBE_CHECK(cudaGetLastError());
    return 0;
}
