// mixed_pair_floor.cu - what a kernel can reach per call when it reads one byte and writes two (16-bit x
// written as f32), against the 1:1 copy that issue 5's "% of copy" is measured by. Seven lastdim records of
// 16-bit -> f32 sit at 89.1-89.8% of copy (rows of 32 and 4096x16384; perf-notes run 213) while f32 -> 16-bit,
// which reads two bytes per byte written, reaches 90-103%: this probe moves each mix's bytes with no
// softmax arithmetic, the best case for any softmax of that pair. Timed like smx-bench times a case (CUDA
// events between calls, the stream held by a spin kernel until all are enqueued, median of 100; x and y
// rotated through 1 GiB each), for the element counts of 1048576 x 32 and 4096 x 16384:
//   memcpy     cudaMemcpy of the same total bytes (x's + y's bytes, half read, half written)
//   copy       a 1:1 kernel copy of the same total bytes: 16 bytes in, 16 out per thread
//   widen half-sector   bf16 -> f32: 16 bytes in (8 values), 32 bytes out per thread as two 16-byte stores
//                       to consecutive addresses, so each store instruction fills half of every sector it
//                       touches (1 or 2 packs per thread; the pattern smx's stores had before perf-notes run 125)
//   widen 8B -> 16B     8 bytes in (4 values), one 16-byte store per thread: whole sectors both ways
//                       (1 or 2 per thread, the second kThreads apart)
//   widen lane pairs    16 bytes in per thread; a lane and its partner swap half their values (4 shuffles) so
//                       each 16-byte store instruction fills whole 32-byte sectors (smx's warp kernel stores so)
//   narrow              f32 -> bf16: 32 bytes in, 16 bytes out per thread (the mirror mix, for reference)
// Every variant's output on the first slot is checked element by element against the host's conversion.
// Floor: the byte mix of 16-bit x written as f32 (one byte read per two written) against the 1:1 copy.
// Output: docs/benchmarks/mixed-pair-floor-h200.txt (perf-notes run 214).
// Built by -DSMX_BUILD_PROBES=ON as build/bench/probes/probe_mixed_pair_floor; alone:
//   nvcc -O3 -std=c++17 -arch=sm_90 bench/probes/mixed_pair_floor.cu -o /tmp/mpf && /tmp/mpf
#include <cuda_bf16.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "probe_timing.cuh"

constexpr int kThreads = 256;

// bf16 to f32 is exact: the bf16 bits become the f32's high half.
__device__ __forceinline__ float4 widen_half(unsigned lo, unsigned hi) {
    return make_float4(__uint_as_float(lo << 16), __uint_as_float(lo & 0xffff0000u), __uint_as_float(hi << 16),
                       __uint_as_float(hi & 0xffff0000u));
}

__global__ void copy_kernel(const uint4* __restrict__ x, uint4* __restrict__ y, long long units) {
    const long long i = static_cast<long long>(blockIdx.x) * kThreads + threadIdx.x;
    if (i < units) y[i] = x[i];
}

// packs: 16-byte packs of 8 bf16 values; each thread widens kPacks of them, kThreads apart.
template <int kPacks>
__global__ void widen_kernel(const uint4* __restrict__ x, float4* __restrict__ y, long long packs) {
    const long long first = static_cast<long long>(blockIdx.x) * kThreads * kPacks + threadIdx.x;
    uint4 held[kPacks];
#pragma unroll
    for (int p = 0; p < kPacks; ++p) {
        if (first + p * kThreads < packs) held[p] = x[first + p * kThreads];
    }
#pragma unroll
    for (int p = 0; p < kPacks; ++p) {
        const long long pack = first + p * kThreads;
        if (pack < packs) {
            y[2 * pack] = widen_half(held[p].x, held[p].y);
            y[2 * pack + 1] = widen_half(held[p].z, held[p].w);
        }
    }
}

// groups: 8-byte groups of 4 bf16 values; each thread widens kGroups of them, kThreads apart, one 16-byte
// store each.
template <int kGroups>
__global__ void widen_groups_kernel(const uint2* __restrict__ x, float4* __restrict__ y, long long groups) {
    const long long first = static_cast<long long>(blockIdx.x) * kThreads * kGroups + threadIdx.x;
    uint2 held[kGroups];
#pragma unroll
    for (int g = 0; g < kGroups; ++g) {
        if (first + g * kThreads < groups) held[g] = x[first + g * kThreads];
    }
#pragma unroll
    for (int g = 0; g < kGroups; ++g) {
        if (first + g * kThreads < groups) y[first + g * kThreads] = widen_half(held[g].x, held[g].y);
    }
}

// One 16-byte pack per thread (the grid covers the packs exactly: packs is a multiple of kThreads here). Lanes
// 2k and 2k+1 hold packs P and P+1, whose 64 bytes of output are P's halves h0 h1, then P+1's: the even lane
// stores P.h0 and P+1.h0, the odd lane P.h1 and P+1.h1, so both store instructions fill whole sectors.
__global__ void widen_pairs_kernel(const uint4* __restrict__ x, float4* __restrict__ y, long long packs) {
    const long long pack = static_cast<long long>(blockIdx.x) * kThreads + threadIdx.x;
    const uint4 held = x[pack];
    const float4 h0 = widen_half(held.x, held.y);
    const float4 h1 = widen_half(held.z, held.w);
    const bool odd = threadIdx.x & 1;
    const float4 send = odd ? h0 : h1;
    float4 got;
    got.x = __shfl_xor_sync(0xffffffffu, send.x, 1);
    got.y = __shfl_xor_sync(0xffffffffu, send.y, 1);
    got.z = __shfl_xor_sync(0xffffffffu, send.z, 1);
    got.w = __shfl_xor_sync(0xffffffffu, send.w, 1);
    // Even lane: own h0 at +0, partner's h0 at +2. Odd lane: partner's h1 at +1, own h1 at +3. Selected per
    // component and stored at a computed index, so each store is one instruction for the whole warp (a
    // branch on `odd` would split it into two half-warp stores, each covering half of every sector).
    float4 first, second;
    first.x = odd ? got.x : h0.x;
    first.y = odd ? got.y : h0.y;
    first.z = odd ? got.z : h0.z;
    first.w = odd ? got.w : h0.w;
    second.x = odd ? h1.x : got.x;
    second.y = odd ? h1.y : got.y;
    second.z = odd ? h1.z : got.z;
    second.w = odd ? h1.w : got.w;
    const long long pair_base = 2 * (pack & ~1LL);  // float4 index of the pair's first output
    const int lane_half = static_cast<int>(threadIdx.x & 1);
    y[pair_base + lane_half] = first;
    y[pair_base + 2 + lane_half] = second;
}

// f32 -> bf16, round to nearest even, for finite values (the probe's data are).
__device__ __forceinline__ unsigned narrow_pair(float a, float b) {
    const __nv_bfloat162 pair = __floats2bfloat162_rn(a, b);  // a in the low half: the lower address
    return static_cast<unsigned>(__bfloat16_as_ushort(pair.x)) |
           (static_cast<unsigned>(__bfloat16_as_ushort(pair.y)) << 16);
}

__global__ void narrow_kernel(const float4* __restrict__ x, uint4* __restrict__ y, long long packs) {
    const long long pack = static_cast<long long>(blockIdx.x) * kThreads + threadIdx.x;
    if (pack < packs) {
        const float4 a = x[2 * pack];
        const float4 b = x[2 * pack + 1];
        y[pack] = make_uint4(narrow_pair(a.x, a.y), narrow_pair(a.z, a.w), narrow_pair(b.x, b.y), narrow_pair(b.z, b.w));
    }
}

static unsigned short host_bf16(float value) {  // round to nearest even (finite values)
    unsigned bits;
    std::memcpy(&bits, &value, sizeof bits);
    bits += 0x7fffu + ((bits >> 16) & 1u);
    return static_cast<unsigned short>(bits >> 16);
}

static float host_widen(unsigned short bits) {
    const unsigned word = static_cast<unsigned>(bits) << 16;
    float value;
    std::memcpy(&value, &word, sizeof value);
    return value;
}

int main() {
    cudaStream_t stream;
    PROBE_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    const long long spin = 200000000;  // ~0.1 s at 1.98 GHz: the host enqueues 100 calls well within it
    const auto time_each = [&](auto launch) { return median_us_per_call(stream, 100, 5, spin, launch); };
    GibBuffers gib;
    const double copy_tbps = allocate_and_time_gib_copy(&gib, stream, time_each);

    const long long counts[] = {1048576LL * 32, 4096LL * 16384};
    const char* labels[] = {"1048576 x 32", "4096 x 16384"};
    for (int c = 0; c < 2; ++c) {
        const long long n = counts[c];
        const size_t half_bytes = static_cast<size_t>(n) * 2;  // bf16
        const size_t full_bytes = static_cast<size_t>(n) * 4;  // f32
        const int slots = static_cast<int>(GibBuffers::kBytes / full_bytes);
        const size_t moved = half_bytes + full_bytes;
        std::printf("\n%s elements: 16-bit <-> f32 moves %.1f MB (read + written), %d slots rotated\n", labels[c],
                    moved / 1e6, slots);
        std::printf("%-34s %9s %8s %7s  check\n", "variant", "us", "TB/s", "% copy");

        // Inputs: bf16 x in every slot of buffer a (for widen), f32 x in every slot of buffer b (for narrow),
        // each slot the same random values; the checks read slot 0.
        std::vector<float> values(n);
        uint32_t state = 12345u + static_cast<uint32_t>(c);
        for (long long i = 0; i < n; ++i) {
            state = state * 1664525u + 1013904223u;
            values[i] = (static_cast<float>(state >> 8) / 16777216.0f - 0.5f) * 24.0f;
        }
        std::vector<unsigned short> narrow_values(n);
        for (long long i = 0; i < n; ++i) narrow_values[i] = host_bf16(values[i]);

        const auto report = [&](const char* name, double us, const char* check) {
            const double tbps = moved / (us * 1e-6) / 1e12;
            std::printf("%-34s %9.2f %8.3f %6.1f%%  %s\n", name, us, tbps, 100.0 * tbps / copy_tbps, check);
        };
        const auto fill_widen_inputs = [&] {
            for (int s = 0; s < slots; ++s) {
                PROBE_CHECK(cudaMemcpy(gib.a + s * full_bytes, narrow_values.data(), half_bytes, cudaMemcpyHostToDevice));
            }
        };
        const auto check_widen = [&]() -> const char* {
            std::vector<float> got(n);
            PROBE_CHECK(cudaMemcpy(got.data(), gib.b, full_bytes, cudaMemcpyDeviceToHost));
            for (long long i = 0; i < n; ++i) {
                if (got[i] != host_widen(narrow_values[i])) return "FAIL";
            }
            return "ok";
        };

        for (int sample = 1; sample <= 2; ++sample) {
            std::printf("-- sample %d\n", sample);
            const size_t copy_bytes = moved / 2;
            report("memcpy of the same bytes moved", time_each([&](int i) {
                       const size_t at = static_cast<size_t>(i % slots) * full_bytes;
                       PROBE_CHECK(cudaMemcpyAsync(gib.b + at, gib.a + at, copy_bytes, cudaMemcpyDeviceToDevice, stream));
                   }),
                   "-");
            const long long copy_units = static_cast<long long>(copy_bytes / 16);
            report("copy kernel, same bytes", time_each([&](int i) {
                       const size_t at = static_cast<size_t>(i % slots) * full_bytes;
                       copy_kernel<<<static_cast<unsigned>((copy_units + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
                           reinterpret_cast<const uint4*>(gib.a + at), reinterpret_cast<uint4*>(gib.b + at), copy_units);
                   }),
                   "-");

            fill_widen_inputs();
            const long long packs = n / 8;
            PROBE_CHECK(cudaMemset(gib.b, 0xff, full_bytes));  // poison slot 0 so each check sees its own writes
            double us = time_each([&](int i) {
                const size_t at = static_cast<size_t>(i % slots) * full_bytes;
                widen_kernel<1><<<static_cast<unsigned>((packs + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
                    reinterpret_cast<const uint4*>(gib.a + at), reinterpret_cast<float4*>(gib.b + at), packs);
            });
            report("widen half-sector, 1 pack", us, check_widen());
            PROBE_CHECK(cudaMemset(gib.b, 0xff, full_bytes));
            us = time_each([&](int i) {
                const size_t at = static_cast<size_t>(i % slots) * full_bytes;
                widen_kernel<2><<<static_cast<unsigned>((packs + 2 * kThreads - 1) / (2 * kThreads)), kThreads, 0,
                                  stream>>>(reinterpret_cast<const uint4*>(gib.a + at),
                                            reinterpret_cast<float4*>(gib.b + at), packs);
            });
            report("widen half-sector, 2 packs", us, check_widen());
            const long long groups = n / 4;
            for (int per_thread = 1; per_thread <= 2; ++per_thread) {
                PROBE_CHECK(cudaMemset(gib.b, 0xff, full_bytes));
                const long long per_cta = static_cast<long long>(kThreads) * per_thread;
                us = time_each([&](int i) {
                    const size_t at = static_cast<size_t>(i % slots) * full_bytes;
                    const unsigned grid = static_cast<unsigned>((groups + per_cta - 1) / per_cta);
                    const auto* xs = reinterpret_cast<const uint2*>(gib.a + at);
                    auto* ys = reinterpret_cast<float4*>(gib.b + at);
                    if (per_thread == 1) {
                        widen_groups_kernel<1><<<grid, kThreads, 0, stream>>>(xs, ys, groups);
                    } else {
                        widen_groups_kernel<2><<<grid, kThreads, 0, stream>>>(xs, ys, groups);
                    }
                });
                report(per_thread == 1 ? "widen 8B -> 16B, 1 a thread" : "widen 8B -> 16B, 2 a thread", us, check_widen());
            }
            PROBE_CHECK(cudaMemset(gib.b, 0xff, full_bytes));
            us = time_each([&](int i) {
                const size_t at = static_cast<size_t>(i % slots) * full_bytes;
                widen_pairs_kernel<<<static_cast<unsigned>(packs / kThreads), kThreads, 0, stream>>>(
                    reinterpret_cast<const uint4*>(gib.a + at), reinterpret_cast<float4*>(gib.b + at), packs);
            });
            report("widen lane pairs, 1 pack", us, check_widen());

            // narrow: f32 x in buffer b's slots, bf16 y in buffer a's.
            for (int s = 0; s < slots; ++s) {
                PROBE_CHECK(cudaMemcpy(gib.b + s * full_bytes, values.data(), full_bytes, cudaMemcpyHostToDevice));
            }
            PROBE_CHECK(cudaMemset(gib.a, 0xff, half_bytes));
            us = time_each([&](int i) {
                const size_t at = static_cast<size_t>(i % slots) * full_bytes;
                narrow_kernel<<<static_cast<unsigned>((packs + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
                    reinterpret_cast<const float4*>(gib.b + at), reinterpret_cast<uint4*>(gib.a + at), packs);
            });
            std::vector<unsigned short> narrowed(n);
            PROBE_CHECK(cudaMemcpy(narrowed.data(), gib.a, half_bytes, cudaMemcpyDeviceToHost));
            report("narrow f32 -> bf16 (mirror mix)", us,
                   std::memcmp(narrowed.data(), narrow_values.data(), half_bytes) == 0 ? "ok" : "FAIL");
        }
    }
    return 0;
}
