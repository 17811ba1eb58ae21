// narrow_rows_bulk.cu - whether the copy engine can lift 16-bit rows of 32 over the 90% line (issue 5: smx's
// warp kernel holds 87.7-89.5% of copy there, and ncu finds it waiting on its loads at 62% achieved occupancy;
// perf-notes run 130). The warp kernel keeps 32 bytes of x per thread in flight; a persistent CTA that stages
// whole tiles of rows in shared memory with bulk copies (cp.async.bulk, one instruction per tile, completion
// on an mbarrier) keeps several tiles in flight per SM without registers. Timed like smx-bench times a case
// (CUDA events between calls, the stream held by a spin kernel until all are enqueued, median of 200, x and
// y rotated through 1 GiB each), x = 1048576 x 32 bf16 (64 MiB), y bf16 or f32:
//   memcpy        cudaMemcpy moving the case's bytes (x's bytes copied for bf16 -> bf16, (x + y) / 2 for -> f32),
//                 and before the cases, memcpy per call at 67-537 MB moved
//   regs          smx's geometry: 64-thread CTAs, 2 threads a row, 2 x 16 bytes of x each, one row pair per
//                 thread pair and a grid covering every row; "copy" moves the values with no arithmetic
//   bulk          persistent CTAs (occupancy x SMs) of 256 threads; tiles of R rows in S shared-memory stages,
//                 thread 0 issuing the next tile of a stage as soon as every thread has read it; y stored from
//                 registers (st) or staged in shared memory and written by a bulk copy per tile (bulk-st)
// Softmax arithmetic as smx's warp kernel does it for 16-bit x: max, one fast exp2 per value for the sum, a
// lane-pair shuffle per reduction, and the write's exp2 with log2(sum) folded into its shift. Each variant's
// output on the first slot is checked against a float64 reference on every 61st row.
// Floor: a memcpy's own rate per call at 67-537 MB moved, the line the 16-bit rows of 32 are judged by.
// Output: docs/benchmarks/narrow-rows-bulk-h200.txt (perf-notes run 200).
// Built by -DSMX_BUILD_PROBES=ON as build/bench/probes/probe_narrow_rows_bulk; alone:
//   nvcc -O3 -std=c++17 -arch=sm_90 bench/probes/narrow_rows_bulk.cu -o /tmp/nrb && /tmp/nrb
#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "../../src/cuda/common/bulk_copy.cuh"
#include "probe_timing.cuh"

using smx::cuda::bulk_barrier_init;
using smx::cuda::bulk_barrier_wait;
using smx::cuda::bulk_copy_after_reads;
using smx::cuda::bulk_copy_expect;
using smx::cuda::bulk_copy_to_shared;
using smx::cuda::shared_address;

constexpr int kCols = 32;
constexpr int kRowBytesIn = kCols * 2;  // bf16 x
constexpr int kRegsThreads = 64;  // smx's plan for these rows: 64-thread CTAs
constexpr int kBulkThreads = 256;
constexpr int kBulkRowsPerPass = kBulkThreads / 2;
constexpr int kBarrierBytes = 128;  // up to 16 stages' mbarriers, padded so the stages start 128-byte aligned

enum class Work { kCopy, kSoftmax, kLogSoftmax };

__device__ __forceinline__ float fast_exp2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

__device__ __forceinline__ float fast_log2(float x) {
    float y;
    asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

// Eight bf16 values of a 16-byte pack, widened from their 32-bit words.
__device__ __forceinline__ void widen(uint4 pack, float* v) {
    const unsigned words[4] = {pack.x, pack.y, pack.z, pack.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        v[2 * i] = __uint_as_float(words[i] << 16);
        v[2 * i + 1] = __uint_as_float(words[i] & 0xffff0000u);
    }
}

__device__ __forceinline__ unsigned pack_bf16(float lo, float hi) {
    const __nv_bfloat162 pair = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const unsigned*>(&pair);
}

// Softmax of one row of 32 held by a lane pair, 16 values each (every lane of the warp takes part).
template <Work kWork>
__device__ __forceinline__ void half_row(float (&v)[16]) {
    if (kWork == Work::kCopy) return;
    constexpr float kLog2e = 1.4426950408889634f;
    float max = v[0];
#pragma unroll
    for (int i = 1; i < 16; ++i) max = fmaxf(max, v[i]);
    max = fmaxf(max, __shfl_xor_sync(0xffffffffu, max, 1));
    const float shift = max * kLog2e;
    float sum = 0.f;
#pragma unroll
    for (int i = 0; i < 16; ++i) sum += fast_exp2(fmaf(v[i], kLog2e, -shift));
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    if (kWork == Work::kLogSoftmax) {
        const float total = max + fast_log2(sum) * 0.6931471805599453f;
#pragma unroll
        for (int i = 0; i < 16; ++i) v[i] -= total;
    } else {
        const float total = shift + fast_log2(sum);
#pragma unroll
        for (int i = 0; i < 16; ++i) v[i] = fast_exp2(fmaf(v[i], kLog2e, -total));
    }
}

// A lane's 16 outputs as 16-byte units: 2 for bf16 y, 4 for f32 y.
template <class Out>
struct HalfRowOut;
template <>
struct HalfRowOut<__nv_bfloat16> {
    static constexpr int kUnits = 2;
    __device__ static void make(const float (&v)[16], uint4 (&units)[2]) {
#pragma unroll
        for (int u = 0; u < 2; ++u) {
            units[u] = make_uint4(pack_bf16(v[8 * u], v[8 * u + 1]), pack_bf16(v[8 * u + 2], v[8 * u + 3]),
                                  pack_bf16(v[8 * u + 4], v[8 * u + 5]), pack_bf16(v[8 * u + 6], v[8 * u + 7]));
        }
    }
};
template <>
struct HalfRowOut<float> {
    static constexpr int kUnits = 4;
    __device__ static void make(const float (&v)[16], uint4 (&units)[4]) {
#pragma unroll
        for (int u = 0; u < 4; ++u) {
            units[u] = make_uint4(__float_as_uint(v[4 * u]), __float_as_uint(v[4 * u + 1]),
                                  __float_as_uint(v[4 * u + 2]), __float_as_uint(v[4 * u + 3]));
        }
    }
};

// units[u] <- units[u ^ swap] for a swap below kUnits, one select per word and swap bit.
template <int kUnits>
__device__ __forceinline__ void permute_units(uint4 (&units)[kUnits], int swap) {
    const auto exchange = [](uint4& a, uint4& b, bool apply) {
        const uint4 old_a = a;
        a = apply ? b : a;
        b = apply ? old_a : b;
    };
#pragma unroll
    for (int bit = 1; bit < kUnits; bit <<= 1) {
#pragma unroll
        for (int u = 0; u < kUnits; ++u) {
            if ((u & bit) == 0) exchange(units[u], units[u | bit], (swap & bit) != 0);
        }
    }
}

// smx's geometry: a lane pair per row, a grid covering every row once.
template <class Out, Work kWork>
__global__ void __launch_bounds__(kRegsThreads) regs_kernel(const uint4* x, uint4* y, long long rows) {
    constexpr int kUnits = HalfRowOut<Out>::kUnits;
    const long long row = static_cast<long long>(blockIdx.x) * (kRegsThreads / 2) + threadIdx.x / 2;
    const int half = threadIdx.x & 1;
    float v[16];
    if (row < rows) {
        const uint4* source = x + row * 4 + half * 2;
        const uint4 first = source[0];
        const uint4 second = source[1];
        widen(first, v);
        widen(second, v + 8);
    } else {
#pragma unroll
        for (int i = 0; i < 16; ++i) v[i] = 0.f;
    }
    half_row<kWork>(v);
    if (row < rows) {
        uint4 units[kUnits];
        HalfRowOut<Out>::make(v, units);
        uint4* target = y + row * (2 * kUnits) + half * kUnits;
#pragma unroll
        for (int u = 0; u < kUnits; ++u) target[u] = units[u];
    }
}

// Persistent CTAs staging tiles of `tile_rows` rows through `stages` shared-memory stages by bulk copies.
// Shared memory: the stages' mbarriers, the stages of x, and (kBulkStore) two tiles of y.
template <class Out, Work kWork, bool kBulkStore>
__global__ void __launch_bounds__(kBulkThreads) bulk_kernel(const unsigned char* x, unsigned char* y, long long rows,
                                                            int tile_rows, int stages) {
    constexpr int kUnits = HalfRowOut<Out>::kUnits;
    constexpr int kRowBytesOut = 32 * static_cast<int>(sizeof(Out));
    extern __shared__ __align__(128) unsigned char shared[];
    auto* full = reinterpret_cast<std::uint64_t*>(shared);
    unsigned char* x_stages = shared + kBarrierBytes;
    unsigned char* y_tiles = x_stages + static_cast<size_t>(stages) * tile_rows * kRowBytesIn;
    const long long tiles = (rows + tile_rows - 1) / tile_rows;
    const int t = threadIdx.x;
    const int half = t & 1;

    const auto issue = [&](long long tile, int stage) {
        const long long first = tile * tile_rows;
        const unsigned bytes = static_cast<unsigned>(min(static_cast<long long>(tile_rows), rows - first) * kRowBytesIn);
        bulk_copy_expect(&full[stage], bytes);
        bulk_copy_to_shared(x_stages + static_cast<size_t>(stage) * tile_rows * kRowBytesIn, x + first * kRowBytesIn,
                            bytes, &full[stage]);
    };
    if (t == 0) {
        for (int s = 0; s < stages; ++s) bulk_barrier_init(&full[s]);
        for (int s = 0; s < stages; ++s) {
            const long long tile = blockIdx.x + static_cast<long long>(s) * gridDim.x;
            if (tile < tiles) issue(tile, s);
        }
    }
    __syncthreads();

    int step = 0;
    for (long long tile = blockIdx.x; tile < tiles; tile += gridDim.x, ++step) {
        const int stage = step % stages;
        bulk_barrier_wait(&full[stage], static_cast<unsigned>((step / stages) & 1));
        const long long first = tile * tile_rows;
        const int rows_here = static_cast<int>(min(static_cast<long long>(tile_rows), rows - first));
        const unsigned char* x_tile = x_stages + static_cast<size_t>(stage) * tile_rows * kRowBytesIn;
        unsigned char* y_tile = y_tiles + static_cast<size_t>(step & 1) * tile_rows * kRowBytesOut;
        for (int pass = 0; pass < tile_rows / kBulkRowsPerPass; ++pass) {
            const int row = pass * kBulkRowsPerPass + t / 2;
            // Lanes 4-7 of each 8 read their two units in the other order: 8 lanes' 16-byte reads then fall on
            // distinct banks.
            const int swap_in = (t >> 2) & 1;
            const uint4* source = reinterpret_cast<const uint4*>(x_tile + row * kRowBytesIn + half * 32);
            float v[16];
            const uint4 read_first = source[swap_in];
            const uint4 read_second = source[swap_in ^ 1];
            widen(swap_in ? read_second : read_first, v);
            widen(swap_in ? read_first : read_second, v + 8);
            half_row<kWork>(v);
            uint4 units[kUnits];
            HalfRowOut<Out>::make(v, units);
            if (kBulkStore) {
                // The same idea for y's tile: unit u goes in the u-th store as unit u ^ swap_out (selects, so
                // the units stay in registers).
                uint4* target = reinterpret_cast<uint4*>(y_tile + row * kRowBytesOut + half * kUnits * 16);
                const int swap_out = kUnits == 2 ? swap_in : (t >> 1) & 3;
                permute_units(units, swap_out);
#pragma unroll
                for (int u = 0; u < kUnits; ++u) target[u ^ swap_out] = units[u];
            } else if (row < rows_here) {
                uint4* target = reinterpret_cast<uint4*>(y + (first + row) * kRowBytesOut) + half * kUnits;
#pragma unroll
                for (int u = 0; u < kUnits; ++u) target[u] = units[u];
            }
        }
        if (kBulkStore) {
            asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // y's tile visible to the bulk store
            // The next step writes the tile the store issued last step reads: that store must be done reading.
            if (t == 0) asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
        }
        __syncthreads();
        if (t == 0) {
            if (kBulkStore) {
                asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\n" ::"l"(
                                 y + first * kRowBytesOut),
                             "r"(shared_address(y_tile)), "r"(static_cast<unsigned>(rows_here * kRowBytesOut))
                             : "memory");
                asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
            }
            const long long next = tile + static_cast<long long>(stages) * gridDim.x;
            if (next < tiles) {
                bulk_copy_after_reads();
                issue(next, stage);
            }
        }
    }
    if (kBulkStore && t == 0) asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
}

__global__ void fill_bf16(unsigned short* x, long long n) {
    for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<long long>(gridDim.x) * blockDim.x) {
        unsigned h = static_cast<unsigned>(i) * 2654435761u ^ static_cast<unsigned>(i >> 32) * 40503u;
        h ^= h >> 15;
        h *= 2246822519u;
        h ^= h >> 13;
        const float value = (h & 0xffffff) * (8.0f / 16777216.0f) - 4.0f;  // uniform in [-4, 4)
        x[i] = static_cast<unsigned short>(__float_as_uint(value) >> 16);
    }
}

struct Variant {
    const char* name;
    int tile_rows = 0;  // bulk only
    int stages = 0;
};

int main() {
    int sms = 0;
    PROBE_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    cudaStream_t s;
    PROBE_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    const auto time_each = [&](auto launch) { return median_us_per_call(s, 200, 20, 40000000, launch); };
    GibBuffers buffers;
    const double copy_tbps = allocate_and_time_gib_copy(&buffers, s, time_each);
    fill_bf16<<<4 * sms, 256, 0, s>>>(reinterpret_cast<unsigned short*>(buffers.a), GibBuffers::kBytes / 2);
    PROBE_CHECK(cudaGetLastError());
    PROBE_CHECK(cudaStreamSynchronize(s));

    // What a cudaMemcpy reaches per call, timed the same way, with as many bytes moved (read + written) as
    // the cases under 90%: 16-bit rows of 32 (134 MB, 201 MB to f32), 16-bit 8192 x 8192 (268 MB), and for
    // scale, f32 rows of 32 / 8192 x 8192 (268 / 537 MB).
    std::printf("\n%-34s %9s %8s %7s\n", "memcpy, MB moved", "us", "TB/s", "% copy");
    for (const size_t moved : {size_t{64} << 20, size_t{128} << 20, size_t{192} << 20, size_t{256} << 20,
                               size_t{512} << 20}) {
        const size_t half = moved / 2;
        const int slots = static_cast<int>(GibBuffers::kBytes / half);
        const double us = time_each([&](int i) {
            PROBE_CHECK(cudaMemcpyAsync(buffers.b + (i % slots) * half, buffers.a + (i % slots) * half, half,
                                        cudaMemcpyDeviceToDevice, s));
        });
        char name[64];
        std::snprintf(name, sizeof name, "memcpy %.1f MB", moved / 1e6);
        std::printf("%-34s %9.2f %8.3f %6.1f%%\n", name, us, moved / (us * 1e-6) / 1e12,
                    100.0 * moved / (us * 1e-6) / 1e12 / copy_tbps);
    }

    constexpr long long kRows = 1048576;
    const size_t x_bytes = static_cast<size_t>(kRows) * kRowBytesIn;
    std::vector<unsigned short> host_x(x_bytes / 2);
    PROBE_CHECK(cudaMemcpy(host_x.data(), buffers.a, x_bytes, cudaMemcpyDeviceToHost));

    const auto run_pair = [&](auto out_tag, const char* pair) {
        using Out = decltype(out_tag);
        const size_t y_bytes = static_cast<size_t>(kRows) * 32 * sizeof(Out);
        const int slots = static_cast<int>(GibBuffers::kBytes / y_bytes);
        const auto x_of = [&](int i) { return buffers.a + (i % slots) * x_bytes; };
        const auto y_of = [&](int i) { return buffers.b + (i % slots) * y_bytes; };
        const double bytes = static_cast<double>(x_bytes + y_bytes);
        std::printf("\n%s, 1048576 x 32, %.1f MB moved, %d slots rotated\n", pair, bytes / 1e6, slots);
        std::printf("%-34s %9s %8s %7s %s\n", "variant", "us", "TB/s", "% copy", "check (max rel err / rows)");

        const auto report = [&](const char* name, double us, Work work, bool checked) {
            std::printf("%-34s %9.2f %8.3f %6.1f%%", name, us, bytes / (us * 1e-6) / 1e12,
                        100.0 * bytes / (us * 1e-6) / 1e12 / copy_tbps);
            if (checked) {
                // Slot 0's output against a float64 reference on every 61st row.
                std::vector<Out> host_y(static_cast<size_t>(kRows) * 32);
                PROBE_CHECK(cudaMemcpy(host_y.data(), y_of(0), y_bytes, cudaMemcpyDeviceToHost));
                double worst = 0.0;
                long long checked_rows = 0;
                for (long long r = 0; r < kRows; r += 61, ++checked_rows) {
                    double in[32];
                    double max = -INFINITY;
                    for (int c = 0; c < 32; ++c) {
                        const unsigned bits = static_cast<unsigned>(host_x[r * 32 + c]) << 16;
                        float value;
                        std::memcpy(&value, &bits, 4);
                        in[c] = value;
                        max = std::fmax(max, in[c]);
                    }
                    double sum = 0.0;
                    for (int c = 0; c < 32; ++c) sum += std::exp(in[c] - max);
                    for (int c = 0; c < 32; ++c) {
                        double expected = in[c];
                        if (work == Work::kSoftmax) expected = std::exp(in[c] - max) / sum;
                        if (work == Work::kLogSoftmax) expected = in[c] - max - std::log(sum);
                        const double got = static_cast<double>(static_cast<float>(host_y[r * 32 + c]));
                        const double error = std::fabs(got - expected) / std::fmax(std::fabs(expected), 1e-3);
                        if (!(error <= worst)) worst = std::isnan(error) ? INFINITY : error;  // NaN: poison left
                    }
                }
                const double allowed = sizeof(Out) == 2 ? 1.0 / 128 : 2e-5;
                std::printf("  %.2e / %lld %s", worst, checked_rows, worst <= allowed ? "ok" : "FAILED");
            }
            std::printf("\n");
        };

        for (int sample = 0; sample < 2; ++sample) {
            std::printf("-- sample %d\n", sample + 1);
            // A memcpy moving the case's bytes: x's bytes for bf16 -> bf16, (x + y) / 2 for bf16 -> f32.
            const size_t memcpy_bytes = (x_bytes + y_bytes) / 2;
            report("memcpy of the same bytes moved", time_each([&](int i) {
                       PROBE_CHECK(cudaMemcpyAsync(y_of(i), x_of(i), memcpy_bytes, cudaMemcpyDeviceToDevice, s));
                   }),
                   Work::kCopy, false);
            const auto regs = [&](auto kernel, const char* name, Work work) {
                const int grid = static_cast<int>(kRows / (kRegsThreads / 2));
                const auto launch = [&](int i) {
                    kernel<<<grid, kRegsThreads, 0, s>>>(reinterpret_cast<const uint4*>(x_of(i)),
                                                         reinterpret_cast<uint4*>(y_of(i)), kRows);
                };
                const double us = time_each(launch);
                PROBE_CHECK(cudaMemsetAsync(y_of(0), 0xff, y_bytes, s));  // poison: unwritten rows show
                launch(0);
                PROBE_CHECK(cudaStreamSynchronize(s));
                PROBE_CHECK(cudaGetLastError());
                report(name, us, work, true);
            };
            regs(regs_kernel<Out, Work::kCopy>, "regs copy", Work::kCopy);
            regs(regs_kernel<Out, Work::kSoftmax>, "regs softmax", Work::kSoftmax);
            regs(regs_kernel<Out, Work::kLogSoftmax>, "regs log-softmax", Work::kLogSoftmax);

            const auto bulk = [&](auto kernel, const char* what, Work work, int tile_rows, int stages) {
                const size_t out_tile = static_cast<size_t>(tile_rows) * 32 * sizeof(Out);
                const bool bulk_store = std::strstr(what, "bulk-st") != nullptr;
                const size_t shared = kBarrierBytes + static_cast<size_t>(stages) * tile_rows * kRowBytesIn +
                                      (bulk_store ? 2 * out_tile : 0);
                if (shared > 227 * 1024 || stages * 8 > kBarrierBytes) return;
                PROBE_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                 static_cast<int>(shared)));
                int per_sm = 0;
                PROBE_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kBulkThreads, shared));
                const int grid = per_sm * sms;
                const auto launch = [&](int i) {
                    kernel<<<grid, kBulkThreads, shared, s>>>(reinterpret_cast<const unsigned char*>(x_of(i)),
                                                              reinterpret_cast<unsigned char*>(y_of(i)), kRows,
                                                              tile_rows, stages);
                };
                const double us = time_each(launch);
                PROBE_CHECK(cudaMemsetAsync(y_of(0), 0xff, y_bytes, s));  // poison: unwritten rows show
                launch(0);
                PROBE_CHECK(cudaStreamSynchronize(s));
                PROBE_CHECK(cudaGetLastError());
                char name[96];
                std::snprintf(name, sizeof name, "%s R=%d S=%d %dx%d", what, tile_rows, stages, per_sm, kBulkThreads);
                report(name, us, work, true);
            };
            for (const int tile_rows : {128, 256, 512}) {
                for (const int stages : {2, 4, 6}) {
                    bulk(bulk_kernel<Out, Work::kSoftmax, false>, "bulk st softmax", Work::kSoftmax, tile_rows, stages);
                    bulk(bulk_kernel<Out, Work::kSoftmax, true>, "bulk bulk-st softmax", Work::kSoftmax, tile_rows,
                         stages);
                }
            }
            bulk(bulk_kernel<Out, Work::kCopy, false>, "bulk st copy", Work::kCopy, 256, 4);
            bulk(bulk_kernel<Out, Work::kCopy, true>, "bulk bulk-st copy", Work::kCopy, 256, 4);
            bulk(bulk_kernel<Out, Work::kLogSoftmax, false>, "bulk st log-softmax", Work::kLogSoftmax, 256, 4);
            bulk(bulk_kernel<Out, Work::kLogSoftmax, true>, "bulk bulk-st log-softmax", Work::kLogSoftmax, 256, 4);
        }
    };
    run_pair(__nv_bfloat16{}, "bf16 -> bf16");
    run_pair(float{}, "bf16 -> f32");
    return 0;
}
