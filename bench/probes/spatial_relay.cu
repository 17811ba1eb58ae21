// spatial_relay.cu - probe (perf-notes.md run 133): softmax over a strided axis with the columns cut into
// bands and the axis into segments, the segments' per-column (max, sum) relayed through global memory
// instead of held on chip. A negative result: 29-50% of memcpy on the layouts grid, under spatial-tile's
// 55-91%.
//
// The spatial-tile kernel keeps a whole column on chip (one CTA's shared memory, or a cluster's), which
// forces narrow row pieces (64 bytes at 8192 rows) and, for long columns, clusters that wait for each other;
// bench/probes/spatial_tile_floor.cu measured the access pattern alone at 71% of memcpy for 64-byte pieces
// on 8192x4096 dim=0 but 91% at 256 bytes. Here a persistent cooperative grid gives each CTA one segment
// (L axis positions) of a band (W columns, 128 or 256 bytes of x per row) per step, software-pipelined by
// one step:
//   step s: load item s into registers; fold it into per-column partials, publish them and count the
//           band's arrival (the last of the band's S segments folds the S partials in segment order, so
//           the result is deterministic, and raises the band's ready flag); then write item s-1: wait for
//           its band's flag, read the final statistics, store y from the registers kept since step s-1.
// x is read from DRAM once and y written once; the workspace holds S partials per column. Every CTA of a
// step works on its own band slot, bands aligned to steps (the grid is a multiple of S), so a wait is only
// ever for the previous step's arrivals (deadlock-free under a cooperative launch). The flags reset
// themselves (arrivals by the folder, ready and done by the band's last reader), checked after each case.
// Each case is timed without and with a cudaMemsetAsync of the flags before every call; then a control
// without the relay (each CTA writes its segment with its own statistics, wrong wherever S > 1) times the
// same pipeline without its global round trips.
//
//   nvcc -O3 -std=c++17 -arch=sm_90 bench/probes/spatial_relay.cu -o /tmp/relay && /tmp/relay
#include <cuda_bf16.h>

#include <cmath>
#include <cstdio>
#include <cstring>

#include "probe_timing.cuh"

constexpr float kLog2e = 1.4426950408889634f;

struct Args {
    const void* x;
    void* y;
    long long outer_stride, axis_stride;  // elements, x and y alike
    long long axis, inner;
    int vectors;        // V: 16-byte vectors per row piece of a band
    int rows_per_item;  // L = kV x (threads / V)
    int segments;       // S = ceil(axis / L)
    long long bands_per_outer, bands;
    int bands_per_step;  // gridDim.x / S
    int steps;
    float2* partials;  // [bands][S][W]
    float2* finals;    // [bands][W]
    unsigned* arrive;  // [bands] x 3: arrivals, ready, done
    int relay;  // 0: the control without the relay (each CTA writes with its own segment's statistics)
};

__device__ __forceinline__ float ex2(float v) {
    float r;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(v));
    return r;
}
__device__ __forceinline__ unsigned load_acquire(const unsigned* p) {
    unsigned v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ void store_release(unsigned* p, unsigned v) {
    asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

template <class X>
struct Vec;
template <>
struct Vec<float> {
    static constexpr int P = 4;
    __device__ static void widen(const uint4& u, float (&v)[4]) {
        v[0] = __uint_as_float(u.x), v[1] = __uint_as_float(u.y), v[2] = __uint_as_float(u.z), v[3] = __uint_as_float(u.w);
    }
    __device__ static uint4 narrow(const float (&v)[4]) {
        return make_uint4(__float_as_uint(v[0]), __float_as_uint(v[1]), __float_as_uint(v[2]), __float_as_uint(v[3]));
    }
};
template <>
struct Vec<__nv_bfloat16> {
    static constexpr int P = 8;
    __device__ static void widen(const uint4& u, float (&v)[8]) {
        const unsigned w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            v[2 * i] = __uint_as_float(w[i] << 16);
            v[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
        }
    }
    __device__ static uint4 narrow(const float (&v)[8]) {
        unsigned w[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const __nv_bfloat162 pair = __floats2bfloat162_rn(v[2 * i], v[2 * i + 1]);
            w[i] = *reinterpret_cast<const unsigned*>(&pair);
        }
        return make_uint4(w[0], w[1], w[2], w[3]);
    }
};

__device__ __forceinline__ float2 merge(float2 a, float2 b) {  // (max, sum relative to max)
    const float m = fmaxf(a.x, b.x);
    if (m == -INFINITY) return make_float2(m, a.y + b.y);
    return make_float2(m, a.y * ex2((a.x - m) * kLog2e) + b.y * ex2((b.x - m) * kLog2e));
}

// Calls visit(k, values) with the widened values of each of a thread's kV held rows that lie inside the axis.
template <class X, int kV, class Visit>
__device__ __forceinline__ void for_each_held_row(const uint4 (&held)[kV], long long first_row, int row_step, long long axis,
                                                  Visit&& visit) {
#pragma unroll
    for (int k = 0; k < kV; ++k) {
        if (first_row + k * row_step < axis) {
            float values[Vec<X>::P];
            Vec<X>::widen(held[k], values);
            visit(k, values);
        }
    }
}

template <class X, int kThreads, int kV, int kMinCtas, bool kLog>
__global__ void __launch_bounds__(kThreads, kMinCtas) relay_softmax(const Args a) {
    constexpr int P = Vec<X>::P;
    const int V = a.vectors;
    const int W = V * P;
    const int tid = threadIdx.x;
    const int lane = tid & 31;
    const int warp = tid >> 5;
    const int vec = tid & (V - 1);
    const int row0 = tid / V;
    const int row_step = kThreads / V;
    const int S = a.segments;
    const int seg = blockIdx.x % S;
    const int slot = blockIdx.x / S;
    const X* x = static_cast<const X*>(a.x);
    X* y = static_cast<X*>(a.y);
    __shared__ float2 warp_part[kThreads / 32][256];
    __shared__ int last_arrival;
    __shared__ float2 own_final[2][256];  // the control's statistics, by step parity
    unsigned* arrive = a.arrive;
    unsigned* ready = a.arrive + a.bands;
    unsigned* done = a.arrive + 2 * a.bands;

    uint4 cur[kV], prev[kV];
    long long prev_band = -1;
    long long prev_offset = 0;
    const long long first_row = static_cast<long long>(seg) * a.rows_per_item + row0;
    for (int s = 0; s <= a.steps; ++s) {
        const long long band = static_cast<long long>(s) * a.bands_per_step + slot;
        const bool have_cur = s < a.steps && band < a.bands;
        long long offset = 0;
        if (have_cur) {
            const long long outer = band / a.bands_per_outer;
            const long long column = (band - outer * a.bands_per_outer) * W + vec * P;
            offset = outer * a.outer_stride + first_row * a.axis_stride + column;
            const X* source = x + offset;
#pragma unroll
            for (int k = 0; k < kV; ++k) {
                if (first_row + k * row_step < a.axis) {
                    cur[k] = __ldg(reinterpret_cast<const uint4*>(source + k * row_step * a.axis_stride));
                }
            }
        }
        if (have_cur) {
            float m[P], sum[P];
#pragma unroll
            for (int e = 0; e < P; ++e) m[e] = -INFINITY, sum[e] = 0.f;
            for_each_held_row<X, kV>(cur, first_row, row_step, a.axis, [&](int, const float (&v)[P]) {
#pragma unroll
                for (int e = 0; e < P; ++e) m[e] = fmaxf(m[e], v[e]);
            });
            for_each_held_row<X, kV>(cur, first_row, row_step, a.axis, [&](int, const float (&v)[P]) {
#pragma unroll
                for (int e = 0; e < P; ++e) {
                    const float sh = m[e] == -INFINITY ? 0.f : m[e];
                    sum[e] += ex2((v[e] - sh) * kLog2e);
                }
            });
#pragma unroll
            for (int e = 0; e < P; ++e) {
                float2 st = make_float2(m[e], sum[e]);
                for (int off = 16; off >= V; off >>= 1) {
                    const float2 o = make_float2(__shfl_xor_sync(~0u, st.x, off), __shfl_xor_sync(~0u, st.y, off));
                    st = merge(st, o);
                }
                if (lane < V) warp_part[warp][vec * P + e] = st;
            }
            __syncthreads();
            if (tid < W) {
                float2 st = warp_part[0][tid];
                for (int w = 1; w < kThreads / 32; ++w) st = merge(st, warp_part[w][tid]);
                if (a.relay) {
                    a.partials[(band * S + seg) * W + tid] = st;
                } else {
                    own_final[s & 1][tid] = st;
                }
            }
            __syncthreads();
            // One thread's fence after the CTA barrier publishes every thread's partial (as a grid barrier does).
            if (tid == 0) {
                if (a.relay) {
                    __threadfence();
                    last_arrival = atomicAdd(arrive + band, 1u) == static_cast<unsigned>(S - 1);
                } else {
                    last_arrival = 0;
                }
            }
            __syncthreads();
            if (last_arrival) {
                // Fold the band's S partials: q threads per column, segments j = sub, sub + q, ... in order,
                // then the q results in order.
                __threadfence();
                const int q = kThreads / W;
                const int column = tid % W;
                const int sub = tid / W;
                float2 st = make_float2(-INFINITY, 0.f);
                const float2* column_partials = a.partials + band * S * W + column;
#pragma unroll 8
                for (int j = sub; j < S; j += q) st = merge(st, __ldcg(column_partials + static_cast<long long>(j) * W));
                warp_part[sub][column] = st;
                __syncthreads();
                if (tid < W) {
                    float2 total = warp_part[0][tid];
                    for (int i = 1; i < q; ++i) total = merge(total, warp_part[i][tid]);
                    a.finals[band * W + tid] = total;
                }
                __syncthreads();
                if (tid == 0) {
                    __threadfence();
                    arrive[band] = 0;
                    store_release(ready + band, 1u);
                }
            }
        }
        // Write the previous step's item once its band's statistics are final.
        if (prev_band >= 0) {
            if (tid == 0 && a.relay) {
                while (load_acquire(ready + prev_band) == 0) __nanosleep(32);
                if (atomicAdd(done + prev_band, 1u) == static_cast<unsigned>(S - 1)) {
                    ready[prev_band] = 0;  // every segment has seen it: reset for the next call
                    done[prev_band] = 0;
                }
            }
            __syncthreads();
            float shift[P], factor[P];
#pragma unroll
            for (int e = 0; e < P; ++e) {
                const float2 f = a.relay ? __ldcg(a.finals + prev_band * W + vec * P + e) : own_final[(s - 1) & 1][vec * P + e];
                shift[e] = f.x == -INFINITY ? 0.f : f.x;
                factor[e] = kLog ? logf(f.y) : 1.f / f.y;
            }
            X* target = y + prev_offset;
            for_each_held_row<X, kV>(prev, first_row, row_step, a.axis, [&](int k, const float (&v)[P]) {
                float out[P];
#pragma unroll
                for (int e = 0; e < P; ++e) {
                    out[e] = kLog ? (v[e] - shift[e]) - factor[e] : ex2((v[e] - shift[e]) * kLog2e) * factor[e];
                }
                *reinterpret_cast<uint4*>(target + k * row_step * a.axis_stride) = Vec<X>::narrow(out);
            });
        }
#pragma unroll
        for (int k = 0; k < kV; ++k) prev[k] = cur[k];
        prev_band = have_cur ? band : -1;
        prev_offset = offset;
        __syncthreads();  // warp_part is rewritten next step
    }
}

__device__ unsigned long long hash64(unsigned long long v) {
    v ^= v >> 33;
    v *= 0xff51afd7ed558ccdull;
    v ^= v >> 33;
    v *= 0xc4ceb9fe1a85ec53ull;
    return v ^ (v >> 33);
}

template <class X>
__global__ void fill(X* x, long long n, unsigned long long seed) {
    for (long long i = blockIdx.x * 256ll + threadIdx.x; i < n; i += gridDim.x * 256ll) {
        const double u = (hash64(i * 7919 + seed) >> 11) * (1.0 / 9007199254740992.0);
        x[i] = static_cast<X>(static_cast<float>(16.0 * u - 8.0));
    }
}

// One thread per column, double precision; the largest relative error of y, as float bits (ordered as ints).
template <class X>
__global__ void check(const X* x, const X* y, long long outer, long long axis, long long inner, long long os, long long as,
                      int log_mode, unsigned* worst) {
    const long long column = blockIdx.x * 256ll + threadIdx.x;
    if (column >= outer * inner) return;
    const long long base = (column / inner) * os + column % inner;
    double m = -INFINITY, s = 0;
    for (long long j = 0; j < axis; ++j) m = fmax(m, static_cast<double>(static_cast<float>(x[base + j * as])));
    for (long long j = 0; j < axis; ++j) s += exp(static_cast<double>(static_cast<float>(x[base + j * as])) - m);
    float local = 0.f;
    for (long long j = 0; j < axis; ++j) {
        const double v = static_cast<double>(static_cast<float>(x[base + j * as])) - m;
        const double ref = log_mode ? v - log(s) : exp(v) / s;
        const double got = static_cast<float>(y[base + j * as]);
        const double err = fabs(got - ref) / fmax(fabs(ref), 1e-30);
        local = fmaxf(local, static_cast<float>(err != err ? 1e30 : err));
    }
    atomicMax(worst, __float_as_uint(local));
}

struct Layout {
    const char* name;
    long long outer, axis, inner, outer_stride, axis_stride;
};

template <class X, int kThreads, int kV, int kMinCtas>
void run_config(const Layout& l, int row_bytes, cudaStream_t stream, X** xs, X** ys, int buffers, float2* partials,
                float2* finals, unsigned* flags, double copy_tbps, int log_mode, int relay = 1) {
    constexpr int P = Vec<X>::P;
    const int V = row_bytes / 16;
    const int W = V * P;
    if (W > 256 || l.inner % W != 0) return;
    Args a{};
    a.outer_stride = l.outer_stride;
    a.axis_stride = l.axis_stride;
    a.axis = l.axis;
    a.inner = l.inner;
    a.vectors = V;
    a.rows_per_item = kV * (kThreads / V);
    a.segments = static_cast<int>((l.axis + a.rows_per_item - 1) / a.rows_per_item);
    a.bands_per_outer = l.inner / W;
    a.bands = l.outer * a.bands_per_outer;
    a.relay = relay;
    const void* kernel = log_mode ? reinterpret_cast<const void*>(relay_softmax<X, kThreads, kV, kMinCtas, true>)
                                  : reinterpret_cast<const void*>(relay_softmax<X, kThreads, kV, kMinCtas, false>);
    int per_sm = 0, sms = 0;
    PROBE_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, 0));
    PROBE_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    const int resident = per_sm * sms;
    if (a.segments > resident) return;
    a.bands_per_step = resident / a.segments;
    if (a.bands_per_step > a.bands) a.bands_per_step = static_cast<int>(a.bands);
    a.steps = static_cast<int>((a.bands + a.bands_per_step - 1) / a.bands_per_step);
    const int grid = a.bands_per_step * a.segments;
    a.partials = partials;
    a.finals = finals;
    a.arrive = flags;
    PROBE_CHECK(cudaMemsetAsync(flags, 0, 3 * a.bands * sizeof(unsigned), stream));
    int current = 0;
    const auto launch = [&](bool with_memset) {
        a.x = xs[current];
        a.y = ys[current];
        if (with_memset) PROBE_CHECK(cudaMemsetAsync(flags, 0, 3 * a.bands * sizeof(unsigned), stream));
        void* params[] = {&a};
        PROBE_CHECK(cudaLaunchCooperativeKernel(kernel, dim3(grid), dim3(kThreads), params, 0, stream));
    };
    const double us = median_us_per_call(stream, 30, 3, 4000000, [&](int call) {
        current = call % buffers;
        launch(false);
    });
    const double us_memset = median_us_per_call(stream, 30, 3, 4000000, [&](int call) {
        current = call % buffers;
        launch(true);
    });
    // Correctness on buffer pair 0 after a poisoned y.
    const long long elements = l.outer * l.axis * l.inner;
    PROBE_CHECK(cudaMemsetAsync(ys[0], 0xff, elements * sizeof(X), stream));
    current = 0;
    launch(false);
    unsigned* worst;
    PROBE_CHECK(cudaMallocAsync(&worst, 4 + 3 * a.bands * sizeof(unsigned), stream));
    PROBE_CHECK(cudaMemsetAsync(worst, 0, 4, stream));
    check<X><<<static_cast<unsigned>((l.outer * l.inner + 255) / 256), 256, 0, stream>>>(xs[0], ys[0], l.outer, l.axis, l.inner,
                                                                                     l.outer_stride, l.axis_stride, log_mode, worst);
    PROBE_CHECK(cudaGetLastError());
    unsigned worst_bits = 0;
    std::vector<unsigned> left(3 * a.bands);
    PROBE_CHECK(cudaMemcpyAsync(&worst_bits, worst, 4, cudaMemcpyDeviceToHost, stream));
    PROBE_CHECK(cudaMemcpyAsync(left.data(), flags, left.size() * 4, cudaMemcpyDeviceToHost, stream));
    PROBE_CHECK(cudaStreamSynchronize(stream));
    PROBE_CHECK(cudaFreeAsync(worst, stream));
    unsigned nonzero = 0;
    for (unsigned v : left) nonzero += v != 0;
    float worst_err;
    std::memcpy(&worst_err, &worst_bits, 4);
    cudaFuncAttributes attributes{};
    PROBE_CHECK(cudaFuncGetAttributes(&attributes, kernel));
    const double bytes = 2.0 * elements * sizeof(X);
    std::printf("%-22s %-4s %-3s%s %4dB T=%d kV=%d L=%4d S=%4d regs=%3d ctas/sm=%d grid=%4d steps=%3d | %7.1f us %5.1f%% | +memset %7.1f us %5.1f%% | err %.2e flags %u\n",
                l.name, sizeof(X) == 4 ? "f32" : "bf16", log_mode ? "log" : "sm", relay ? "" : " norelay", row_bytes, kThreads, kV, a.rows_per_item, a.segments,
                attributes.numRegs, per_sm, grid, a.steps, us, 100.0 * bytes / (us * 1e-6) / 1e12 / copy_tbps, us_memset,
                100.0 * bytes / (us_memset * 1e-6) / 1e12 / copy_tbps, worst_err, nonzero);
}

int main() {
    cudaStream_t stream;
    PROBE_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    GibBuffers gib;
    const double copy_tbps = allocate_and_time_gib_copy(&gib, stream, [&](auto launch) {
        return median_us_per_call(stream, 30, 3, 4000000, launch);
    });
    PROBE_CHECK(cudaFree(gib.a));
    PROBE_CHECK(cudaFree(gib.b));
    const Layout layouts[] = {
        {"8192x4096 dim=0", 1, 8192, 4096, 0, 4096},
        {"16x8x4096x64 dim=2", 128, 4096, 64, 4096 * 64, 64},
        {"8192x4096 transposed", 1, 4096, 8192, 0, 8192},
        {"32x1024x1024 dim=1", 32, 1024, 1024, 1024 * 1024, 1024},
        {"64x128x4096 dim=1", 64, 128, 4096, 128 * 4096, 4096},
    };
    constexpr int kBuffers = 4;
    const long long elements = 32ll << 20;
    float* xf[kBuffers];
    float* yf[kBuffers];
    __nv_bfloat16* xb[kBuffers];
    __nv_bfloat16* yb[kBuffers];
    for (int i = 0; i < kBuffers; ++i) {
        PROBE_CHECK(cudaMalloc(&xf[i], elements * 4));
        PROBE_CHECK(cudaMalloc(&yf[i], elements * 4));
        PROBE_CHECK(cudaMalloc(&xb[i], elements * 2));
        PROBE_CHECK(cudaMalloc(&yb[i], elements * 2));
        fill<<<2048, 256>>>(xf[i], elements, 17 + i);
        fill<<<2048, 256>>>(xb[i], elements, 29 + i);
        PROBE_CHECK(cudaGetLastError());
    }
    float2 *partials, *finals;
    unsigned* flags;
    PROBE_CHECK(cudaMalloc(&partials, elements * sizeof(float2)));  // generous: S x W per band <= elements
    PROBE_CHECK(cudaMalloc(&finals, elements * sizeof(float2) / 8));
    PROBE_CHECK(cudaMalloc(&flags, 3 * (1 << 20) * sizeof(unsigned)));
    PROBE_CHECK(cudaDeviceSynchronize());
    for (const Layout& l : layouts) {
        for (int log_mode = 0; log_mode < 2; ++log_mode) {
            for (int row_bytes : {128, 256}) {
                run_config<float, 256, 8, 2>(l, row_bytes, stream, xf, yf, kBuffers, partials, finals, flags, copy_tbps, log_mode);
                run_config<float, 128, 8, 4>(l, row_bytes, stream, xf, yf, kBuffers, partials, finals, flags, copy_tbps, log_mode);
                run_config<float, 128, 4, 6>(l, row_bytes, stream, xf, yf, kBuffers, partials, finals, flags, copy_tbps, log_mode);
                run_config<float, 256, 4, 3>(l, row_bytes, stream, xf, yf, kBuffers, partials, finals, flags, copy_tbps, log_mode);
                run_config<__nv_bfloat16, 256, 8, 2>(l, row_bytes, stream, xb, yb, kBuffers, partials, finals, flags, copy_tbps, log_mode);
                run_config<__nv_bfloat16, 128, 8, 4>(l, row_bytes, stream, xb, yb, kBuffers, partials, finals, flags, copy_tbps, log_mode);
                run_config<__nv_bfloat16, 128, 4, 6>(l, row_bytes, stream, xb, yb, kBuffers, partials, finals, flags, copy_tbps, log_mode);
                run_config<__nv_bfloat16, 256, 4, 3>(l, row_bytes, stream, xb, yb, kBuffers, partials, finals, flags, copy_tbps, log_mode);
            }
        }
    }
    // The control: the same kernel without the relay (wrong results wherever S > 1), softmax, the best
    // configurations above: how much of the step is the relay's.
    std::printf("\ncontrol without the relay (results wrong where S > 1):\n");
    for (const Layout& l : layouts) {
        for (int row_bytes : {128, 256}) {
            run_config<float, 256, 8, 2>(l, row_bytes, stream, xf, yf, kBuffers, partials, finals, flags, copy_tbps, 0, 0);
            run_config<float, 128, 8, 4>(l, row_bytes, stream, xf, yf, kBuffers, partials, finals, flags, copy_tbps, 0, 0);
            run_config<__nv_bfloat16, 256, 8, 2>(l, row_bytes, stream, xb, yb, kBuffers, partials, finals, flags, copy_tbps, 0, 0);
            run_config<__nv_bfloat16, 128, 8, 4>(l, row_bytes, stream, xb, yb, kBuffers, partials, finals, flags, copy_tbps, 0, 0);
        }
    }
    return 0;
}
