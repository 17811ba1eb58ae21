// spatial_l2_reread.cu - whether L2 can stand in for shared memory as the tile's cache on the layouts grid
// (perf-notes run 204). spatial-tile caches a CTA's whole tile (W columns x its slice of the axis) in shared
// memory, so an SM holds 3 tiles of 64 KB at once, and each CTA is a serial chain: load, statistics over the
// landed tile, fold, stores (run 89); on 8192x4096 dim=0 that geometry moves bytes at only 76-78% of memcpy
// under its cluster barrier (run 152). Here nothing is cached on chip: a CTA reads its tile twice, the first
// time folding each batch of loads into running (max, sum) statistics as it lands, the second time (soon
// after, so from L2) to write y. No shared-memory budget caps the CTAs per SM, the statistics overlap the
// loads, and the tile rows can be 128 or 256 bytes wide whatever the axis; the cost is a second read that
// must hit L2 (what is in flight at once: 132 SMs x CTAs per SM x a CTA's bytes, printed as "live").
//
// Geometry: thread t takes the 16-byte vector t % (P / 16) of a tile row of P bytes (P = 128 or 256) at axis
// positions t / (P / 16) + k (threads / (P / 16)), kUnroll loads in flight a batch; one tile of one outer
// index per CTA (first part, the layouts spatial-tile runs unclustered) or per cluster of C CTAs, each CTA
// a slice of the axis, the CTAs' column statistics folded over distributed shared memory between two
// cluster barriers (second part, the layouts it clusters). Statistics in the log2 domain with the fast
// exp2, the warps' partials folded max-first in shared memory. Cache hints compared: none; the second read
// and the stores evict-first (ld.global.cs / st.global.cs); and that plus the first read under an L2
// evict_last policy. f32 -> f32 and bf16 -> bf16, softmax and (two variants each) log-softmax.
//
// Checked once per variant: y poisoned (all bits set) then written once: every element must be written and
// finite, and every 7th column of every outer index is compared with a float64 reference of the same input
// (relative error, f32 1e-5, bf16 8e-3). Timed like smx-bench times a case (an event between calls, median
// of 50), x and y rotated through 1 GiB each. % is of the 1 GiB memcpy rate, as smx-bench reports. Not part
// of the build:
//   nvcc -O3 -std=c++17 -arch=sm_90 bench/probes/spatial_l2_reread.cu -o /tmp/slr && /tmp/slr
#include <cooperative_groups.h>
#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "probe_timing.cuh"

namespace cg = cooperative_groups;

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

__device__ __forceinline__ float fast_exp2(float v) {
    float r;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(v));
    return r;
}

// The 16-byte vector of each element type: values a vector holds, and its conversions to and from float.
template <class T>
struct Vec;

template <>
struct Vec<float> {
    static constexpr int kCount = 4;
    static constexpr unsigned kNegInfWord = 0xff800000u;
    __device__ static void unpack(uint4 u, float (&v)[4]) {
        v[0] = __uint_as_float(u.x);
        v[1] = __uint_as_float(u.y);
        v[2] = __uint_as_float(u.z);
        v[3] = __uint_as_float(u.w);
    }
    __device__ static uint4 pack(const float (&v)[4]) {
        return make_uint4(__float_as_uint(v[0]), __float_as_uint(v[1]), __float_as_uint(v[2]), __float_as_uint(v[3]));
    }
};

template <>
struct Vec<__nv_bfloat16> {
    static constexpr int kCount = 8;
    static constexpr unsigned kNegInfWord = 0xff80ff80u;
    __device__ static void unpack(uint4 u, float (&v)[8]) {
        const unsigned words[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            v[2 * i] = __uint_as_float(words[i] << 16);
            v[2 * i + 1] = __uint_as_float(words[i] & 0xffff0000u);
        }
    }
    __device__ static uint4 pack(const float (&v)[8]) {
        unsigned words[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const __nv_bfloat162 pair = __floats2bfloat162_rn(v[2 * i], v[2 * i + 1]);
            std::memcpy(&words[i], &pair, 4);
        }
        return make_uint4(words[0], words[1], words[2], words[3]);
    }
};

enum class Hints { kPlain, kStreamSecond, kKeepFirst };

template <Hints kHints>
__device__ __forceinline__ uint4 load_first(const uint4* p, std::uint64_t policy) {
    uint4 u;
    if constexpr (kHints == Hints::kKeepFirst) {
        asm volatile("ld.global.L2::cache_hint.v4.u32 {%0,%1,%2,%3}, [%4], %5;"
                     : "=r"(u.x), "=r"(u.y), "=r"(u.z), "=r"(u.w)
                     : "l"(p), "l"(policy));
    } else {
        u = *p;
    }
    return u;
}

template <Hints kHints>
__device__ __forceinline__ uint4 load_second(const uint4* p) {
    if constexpr (kHints == Hints::kPlain) return *p;
    return __ldcs(p);
}

template <Hints kHints>
__device__ __forceinline__ void store_out(uint4* p, uint4 u) {
    if constexpr (kHints == Hints::kPlain) {
        *p = u;
    } else {
        __stcs(p, u);
    }
}

// (m, s) <- the fold of (m, s) and (other_m, other_s), both in the log2 domain (s = sum of 2^(t - m)).
__device__ __forceinline__ void fold(float& m, float& s, float other_m, float other_s) {
    const float top = fmaxf(m, other_m);
    if (top == -INFINITY) return;
    s = s * fast_exp2(m - top) + other_s * fast_exp2(other_m - top);
    m = top;
}

// kClustered: launched in clusters of C CTAs along the axis (C from the launch), CTA r of a cluster taking
// axis positions [r S, (r + 1) S) of the tile, S = ceil(axis / C); each CTA's column statistics are folded
// with its peers' over distributed shared memory between two cluster barriers.
template <class T, int kThreads, int kPieceBytes, int kUnroll, bool kLog, Hints kHints, bool kClustered>
__global__ void __launch_bounds__(kThreads) reread_tile(const T* __restrict__ x, T* __restrict__ y, int axis,
                                                       long long inner, long long tiles_per_outer) {
    constexpr int kCols = Vec<T>::kCount;
    constexpr int kColLanes = kPieceBytes / 16;
    constexpr int kRowLanes = kThreads / kColLanes;
    constexpr int kWidth = kColLanes * kCols;
    constexpr int kWarps = kThreads / 32;
    static_assert(kColLanes <= 32 && 32 % kColLanes == 0, "a tile row within one warp");
    __shared__ float warp_max[kWarps][kWidth];
    __shared__ float warp_sum[kWarps][kWidth];
    __shared__ float column_max[kWidth];    // this CTA's
    __shared__ float column_sum[kWidth];    // this CTA's
    __shared__ float final_max[kWidth];     // the whole column's
    __shared__ float column_scale[kWidth];  // softmax: 1 / sum; log-softmax: max (natural) + ln sum

    int row_begin = 0;
    int row_end = axis;
    long long tile = blockIdx.x;
    if constexpr (kClustered) {
        const cg::cluster_group cluster = cg::this_cluster();
        const int slice = (axis + static_cast<int>(cluster.num_blocks()) - 1) / static_cast<int>(cluster.num_blocks());
        tile = blockIdx.x / cluster.num_blocks();
        row_begin = min(axis, static_cast<int>(cluster.block_rank()) * slice);
        row_end = min(axis, row_begin + slice);
    }
    const long long outer = tile / tiles_per_outer;
    const long long first_column = (tile - outer * tiles_per_outer) * kWidth;
    const int column_lane = threadIdx.x % kColLanes;
    const int row_lane = threadIdx.x / kColLanes;
    const long long offset = outer * axis * inner + first_column + column_lane * kCols;
    const uint4* xv = reinterpret_cast<const uint4*>(x + offset);
    uint4* yv = reinterpret_cast<uint4*>(y + offset);
    const long long row_step = inner / kCols;  // in vectors
    std::uint64_t policy = 0;
    if constexpr (kHints == Hints::kKeepFirst) {
        asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
    }

    // First read: running statistics, one rescale per batch of kUnroll rows.
    float m[kCols], s[kCols];
#pragma unroll
    for (int c = 0; c < kCols; ++c) {
        m[c] = -INFINITY;
        s[c] = 0.f;
    }
    for (int row0 = row_begin + row_lane; row0 < row_end; row0 += kRowLanes * kUnroll) {
        uint4 u[kUnroll];
#pragma unroll
        for (int k = 0; k < kUnroll; ++k) {
            const int row = row0 + k * kRowLanes;
            if (row < row_end) u[k] = load_first<kHints>(xv + row * row_step, policy);
        }
        // Rows past the axis read as -inf; the loads stay raw until used (unpacking twice is cheaper than
        // holding kUnroll x kCols floats, which cost bf16 20-40 registers).
#pragma unroll
        for (int k = 0; k < kUnroll; ++k) {
            if (row0 + k * kRowLanes >= row_end) u[k] = make_uint4(Vec<T>::kNegInfWord, Vec<T>::kNegInfWord, Vec<T>::kNegInfWord, Vec<T>::kNegInfWord);
        }
        float batch_max[kCols];
#pragma unroll
        for (int c = 0; c < kCols; ++c) batch_max[c] = -INFINITY;
#pragma unroll
        for (int k = 0; k < kUnroll; ++k) {
            float v[kCols];
            Vec<T>::unpack(u[k], v);
#pragma unroll
            for (int c = 0; c < kCols; ++c) batch_max[c] = fmaxf(batch_max[c], v[c]);
        }
#pragma unroll
        for (int c = 0; c < kCols; ++c) {
            const float top = fmaxf(m[c], batch_max[c] * kLog2e);  // x log2e is monotonic, so max commutes with it
            s[c] = m[c] == -INFINITY ? 0.f : s[c] * fast_exp2(m[c] - top);
            m[c] = top;
        }
#pragma unroll
        for (int k = 0; k < kUnroll; ++k) {
            float v[kCols];
            Vec<T>::unpack(u[k], v);
#pragma unroll
            for (int c = 0; c < kCols; ++c) s[c] += fast_exp2(fmaf(v[c], kLog2e, -m[c]));
        }
    }

    // Fold the row lanes: within the warp by shuffles, across warps in shared memory, max first.
#pragma unroll
    for (int lanes = kColLanes; lanes < 32; lanes *= 2) {
#pragma unroll
        for (int c = 0; c < kCols; ++c) {
            const float other_m = __shfl_xor_sync(0xffffffffu, m[c], lanes);
            const float other_s = __shfl_xor_sync(0xffffffffu, s[c], lanes);
            fold(m[c], s[c], other_m, other_s);
        }
    }
    const int warp = threadIdx.x / 32;
    if (threadIdx.x % 32 < kColLanes) {
#pragma unroll
        for (int c = 0; c < kCols; ++c) {
            warp_max[warp][column_lane * kCols + c] = m[c];
            warp_sum[warp][column_lane * kCols + c] = s[c];
        }
    }
    __syncthreads();
    if (threadIdx.x < kWidth) {
        float top = -INFINITY;
        for (int w = 0; w < kWarps; ++w) top = fmaxf(top, warp_max[w][threadIdx.x]);
        float sum = 0.f;
        for (int w = 0; w < kWarps; ++w) sum += warp_sum[w][threadIdx.x] * fast_exp2(warp_max[w][threadIdx.x] - top);
        column_max[threadIdx.x] = top;
        column_sum[threadIdx.x] = sum;
    }
    if constexpr (kClustered) {
        cg::cluster_group cluster = cg::this_cluster();
        cluster.sync();  // every CTA's statistics written
        if (threadIdx.x < kWidth) {
            float top = -INFINITY;
            for (unsigned peer = 0; peer < cluster.num_blocks(); ++peer) {
                top = fmaxf(top, cluster.map_shared_rank(column_max, peer)[threadIdx.x]);
            }
            float sum = 0.f;
            for (unsigned peer = 0; peer < cluster.num_blocks(); ++peer) {
                const float peer_max = cluster.map_shared_rank(column_max, peer)[threadIdx.x];
                if (peer_max != -INFINITY) sum += cluster.map_shared_rank(column_sum, peer)[threadIdx.x] * fast_exp2(peer_max - top);
            }
            final_max[threadIdx.x] = top;
            column_scale[threadIdx.x] = kLog ? top * kLn2 + logf(sum) : 1.f / sum;
        }
        cluster.sync();  // every peer read (no CTA leaves while its statistics may be read) and this CTA's final
    } else {
        if (threadIdx.x < kWidth) {
            final_max[threadIdx.x] = column_max[threadIdx.x];
            column_scale[threadIdx.x] = kLog ? column_max[threadIdx.x] * kLn2 + logf(column_sum[threadIdx.x]) : 1.f / column_sum[threadIdx.x];
        }
        __syncthreads();
    }
    float top[kCols], scale[kCols];
#pragma unroll
    for (int c = 0; c < kCols; ++c) {
        top[c] = final_max[column_lane * kCols + c];
        scale[c] = column_scale[column_lane * kCols + c];
    }

    // Second read (from L2 if the tile is still there) and the stores.
    for (int row0 = row_begin + row_lane; row0 < row_end; row0 += kRowLanes * kUnroll) {
        uint4 u[kUnroll];
#pragma unroll
        for (int k = 0; k < kUnroll; ++k) {
            const int row = row0 + k * kRowLanes;
            if (row < row_end) u[k] = load_second<kHints>(xv + row * row_step);
        }
#pragma unroll
        for (int k = 0; k < kUnroll; ++k) {
            const int row = row0 + k * kRowLanes;
            if (row >= row_end) continue;
            float v[kCols];
            Vec<T>::unpack(u[k], v);
#pragma unroll
            for (int c = 0; c < kCols; ++c) {
                v[c] = kLog ? v[c] - scale[c] : fast_exp2(fmaf(v[c], kLog2e, -top[c])) * scale[c];
            }
            store_out<kHints>(yv + row * row_step, Vec<T>::pack(v));
        }
    }
}

struct Layout {
    const char* name;
    long long outer;
    int axis;
    long long inner;
};

const char* hints_name(Hints h) {
    return h == Hints::kPlain ? "plain" : h == Hints::kStreamSecond ? "2nd read+stores .cs" : "1st evict_last, 2nd+st .cs";
}

float to_float(float v) { return v; }
float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
float from_float(float v, float) { return v; }
__nv_bfloat16 from_float(float v, __nv_bfloat16) { return __float2bfloat16(v); }

int main() {
    cudaStream_t stream;
    PROBE_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    const auto time_each = [&](auto launch) { return median_us_per_call(stream, 50, 5, 20000000, launch); };
    GibBuffers buffers;
    const double copy_tbps = allocate_and_time_gib_copy(&buffers, stream, time_each);
    cudaDeviceProp prop;
    PROBE_CHECK(cudaGetDeviceProperties(&prop, 0));
    std::printf("L2 %d MB, %d SMs\n", prop.l2CacheSize >> 20, prop.multiProcessorCount);

    std::mt19937 generator(2041);
    std::uniform_real_distribution<float> uniform(-4.f, 4.f);

    // The layouts spatial-tile runs unclustered, then those it clusters.
    const Layout unclustered[] = {{"32x1024x1024 dim=1", 32, 1024, 1024}, {"64x128x4096 dim=1", 64, 128, 4096}};
    const Layout clustered[] = {{"8192x4096 dim=0", 1, 8192, 4096},
                                {"16x8x4096x64 dim=2", 128, 4096, 64},
                                {"8192x4096 transposed (4096x8192 dim=0)", 1, 4096, 8192}};

    const auto run_type = [&](auto type_tag, const char* type_name, double tolerance, const Layout& layout, auto variants) {
        using T = decltype(type_tag);
        const long long count = layout.outer * layout.axis * layout.inner;
        const size_t bytes = static_cast<size_t>(count) * sizeof(T);
        const int rotation = static_cast<int>(GibBuffers::kBytes / bytes);
        const auto x_of = [&](int i) { return reinterpret_cast<const T*>(buffers.a + (i % rotation) * bytes); };
        const auto y_of = [&](int i) { return reinterpret_cast<T*>(buffers.b + (i % rotation) * bytes); };
        std::vector<T> host_x(count);
        for (auto& v : host_x) v = from_float(uniform(generator), type_tag);
        for (int slot = 0; slot < rotation; ++slot) {
            PROBE_CHECK(cudaMemcpy(const_cast<T*>(x_of(slot)), host_x.data(), bytes, cudaMemcpyHostToDevice));
        }
        const double moved = 2.0 * bytes;
        const auto pct = [&](double us) { return 100.0 * moved / (us * 1e-6) / 1e12 / copy_tbps; };
        std::printf("\n%s %s -> %s, %.1f MB moved\n", layout.name, type_name, type_name, moved / 1e6);
        const double copy_us = time_each([&](int i) {
            PROBE_CHECK(cudaMemcpyAsync(y_of(i), x_of(i), bytes, cudaMemcpyDeviceToDevice, stream));
        });
        std::printf("  %-70s %7.2f us %6.1f%%\n", "memcpy of the same bytes", copy_us, pct(copy_us));

        std::vector<T> host_y(count);
        const auto run = [&](auto kernel, int threads, int piece, int unroll, bool log_mode, Hints hints, int cluster) {
            const int width = piece / 16 * (16 / static_cast<int>(sizeof(T)));
            if (layout.inner % width != 0) {
                std::printf("  %d-byte tile rows are wider than the inner extent\n", piece);
                return;
            }
            const long long tiles_per_outer = layout.inner / width;
            const unsigned grid = static_cast<unsigned>(layout.outer * tiles_per_outer * cluster);
            cudaLaunchAttribute cluster_dim;
            cluster_dim.id = cudaLaunchAttributeClusterDimension;
            cluster_dim.val.clusterDim.x = cluster;
            cluster_dim.val.clusterDim.y = 1;
            cluster_dim.val.clusterDim.z = 1;
            cudaLaunchConfig_t config{};
            config.gridDim = grid;
            config.blockDim = threads;
            config.stream = stream;
            config.attrs = &cluster_dim;
            config.numAttrs = cluster > 1 ? 1 : 0;
            if (cluster > 1) PROBE_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
            const auto launch = [&](int i) {
                PROBE_CHECK(cudaLaunchKernelEx(&config, kernel, x_of(i), y_of(i), layout.axis, layout.inner, tiles_per_outer));
            };
            const double us = time_each(launch);
            PROBE_CHECK(cudaMemsetAsync(y_of(0), 0xff, bytes, stream));
            launch(0);
            PROBE_CHECK(cudaStreamSynchronize(stream));
            PROBE_CHECK(cudaMemcpy(host_y.data(), y_of(0), bytes, cudaMemcpyDeviceToHost));
            long long bad_values = 0;
            for (long long i = 0; i < count; ++i) bad_values += !std::isfinite(to_float(host_y[i]));
            double worst = 0.0;
            for (long long o = 0; o < layout.outer; ++o) {
                for (long long c = 0; c < layout.inner; c += 7) {
                    const long long base = o * layout.axis * layout.inner + c;
                    const auto at = [&](int j) { return double(to_float(host_x[base + j * layout.inner])); };
                    double top = -INFINITY, sum = 0.0;
                    for (int j = 0; j < layout.axis; ++j) top = std::max(top, at(j));
                    for (int j = 0; j < layout.axis; ++j) sum += std::exp(at(j) - top);
                    for (int j = 0; j < layout.axis; ++j) {
                        const double want = log_mode ? at(j) - top - std::log(sum) : std::exp(at(j) - top) / sum;
                        const double got = to_float(host_y[base + j * layout.inner]);
                        worst = std::max(worst, std::fabs(got - want) / std::fabs(want));
                    }
                }
            }
            int per_sm = 0;
            PROBE_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, 0));
            cudaFuncAttributes attributes;
            PROBE_CHECK(cudaFuncGetAttributes(&attributes, kernel));
            const double live_mb = double(prop.multiProcessorCount) * per_sm * bytes / grid / 1e6;
            char name[160];
            std::snprintf(name, sizeof name, "%s %4d thr %3d B x%d C=%-2d %-26s %2d/SM %3d reg %4.0f MB live", log_mode ? "log" : "sm ",
                          threads, piece, unroll, cluster, hints_name(hints), per_sm, attributes.numRegs, live_mb);
            std::printf("  %-70s %7.2f us %6.1f%%  unwritten or non-finite %lld, worst rel err %.2e %s\n", name, us,
                        pct(us), bad_values, worst, bad_values == 0 && worst <= tolerance ? "ok" : "FAIL");
        };
        variants(run, type_tag);
    };

// One variant: the kernel instance and its description (CLUSTER a literal: 1 is a plain launch).
#define VARIANT(THREADS, PIECE, UNROLL, LOG, HINTS, CLUSTER)                                                   \
    run(reread_tile<T, THREADS, PIECE, UNROLL, LOG, Hints::HINTS, (CLUSTER > 1)>, THREADS, PIECE, UNROLL, LOG, \
        Hints::HINTS, CLUSTER)

    const auto unclustered_variants = [](auto run, auto type_tag) {
        using T = decltype(type_tag);
        VARIANT(256, 128, 4, false, kPlain, 1);
        VARIANT(256, 128, 4, false, kStreamSecond, 1);
        VARIANT(256, 128, 4, false, kKeepFirst, 1);
        VARIANT(256, 256, 4, false, kPlain, 1);
        VARIANT(256, 256, 4, false, kStreamSecond, 1);
        VARIANT(256, 256, 4, false, kKeepFirst, 1);
        VARIANT(512, 128, 4, false, kStreamSecond, 1);
        VARIANT(512, 256, 4, false, kStreamSecond, 1);
        VARIANT(1024, 128, 4, false, kStreamSecond, 1);
        VARIANT(1024, 256, 4, false, kStreamSecond, 1);
        VARIANT(128, 128, 4, false, kStreamSecond, 1);
        VARIANT(256, 128, 8, false, kStreamSecond, 1);
        VARIANT(256, 128, 4, true, kStreamSecond, 1);
        VARIANT(256, 256, 4, true, kStreamSecond, 1);
    };
    const auto clustered_variants = [](auto run, auto type_tag) {
        using T = decltype(type_tag);
        VARIANT(512, 128, 4, false, kKeepFirst, 8);
        VARIANT(512, 128, 4, false, kKeepFirst, 16);
        VARIANT(256, 128, 4, false, kKeepFirst, 8);
        VARIANT(256, 128, 4, false, kKeepFirst, 16);
        VARIANT(512, 256, 4, false, kKeepFirst, 8);
        VARIANT(512, 256, 4, false, kKeepFirst, 16);
        VARIANT(256, 256, 4, false, kKeepFirst, 16);
        VARIANT(256, 128, 8, false, kKeepFirst, 8);
        VARIANT(256, 128, 8, false, kKeepFirst, 16);
        VARIANT(512, 128, 4, false, kStreamSecond, 16);
        VARIANT(512, 128, 4, true, kKeepFirst, 16);
    };
#undef VARIANT
    for (const Layout& layout : unclustered) run_type(float{}, "f32", 1e-5, layout, unclustered_variants);
    for (const Layout& layout : unclustered) run_type(__nv_bfloat16{}, "bf16", 8e-3, layout, unclustered_variants);
    for (const Layout& layout : clustered) run_type(float{}, "f32", 1e-5, layout, clustered_variants);
    for (const Layout& layout : clustered) run_type(__nv_bfloat16{}, "bf16", 8e-3, layout, clustered_variants);
    return 0;
}
