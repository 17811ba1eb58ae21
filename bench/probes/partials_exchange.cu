// partials_exchange.cu - the least a single decode row's grid-regs structure costs per call, piece by piece,
// and whether a cheaper exchange of the CTAs' partials than a grid barrier would bring it under issue 6's
// targets. One f32 row (32000, 128256, 256000 elements) moved the way grid-regs moves it (CTAs of 512
// threads, 16 KiB of x each, held in registers, then stored), every launch cooperative, with:
//   copy                  nothing between the loads and the stores
//   + block reduction     one value summed over the CTA (warp butterflies, shared memory, two CTA barriers)
//   + grid sync           that value written to the CTA's slot, cooperative_groups' grid sync, then one warp
//                         of every CTA reads every slot and folds them: smx's exchange, for one value
//   + tagged slots        no barrier: each slot's two 64-bit words carry the launch's tag beside the value,
//                         and the reading warp polls the slots until every one holds this launch's tag (the
//                         barrier and the data in one round trip; needs a tag no earlier launch used, which
//                         the host passes here)
// A check first: every CTA's folded value the same under both exchanges and equal to the host's sum (to 1e-5)
// for an input of varied values.
// Timed like smx-bench times a case (an event between calls, median of 200), x and y rotated through 1 GiB.
// smx itself does more than this on each side of the exchange (a max and a sum, exps, the normalization),
// so these are floors.
// Floor: grid-regs' exchange for one decode row with one value and no exps, piece by piece.
// Output: docs/benchmarks/partials-exchange-h200.txt (perf-notes run 198).
// Built by -DSMX_BUILD_PROBES=ON as build/bench/probes/probe_partials_exchange; alone:
//   nvcc -O3 -std=c++17 -arch=sm_90 bench/probes/partials_exchange.cu -o /tmp/px && /tmp/px
#include <cooperative_groups.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "probe_timing.cuh"

namespace cg = cooperative_groups;

constexpr int kThreads = 512;
constexpr int kUnits = 2;            // 16-byte units per thread: 512 x 2 x 16 B = 16 KiB a CTA
constexpr int kMaxSlotsPerLane = 4;  // one warp reads every slot: up to 128 CTAs

enum class Exchange { kNone, kBlockReduction, kGridSync, kTaggedSlots };

__device__ float block_sum(float value, float* scratch) {
    for (int offset = 16; offset > 0; offset >>= 1) value += __shfl_xor_sync(0xffffffffu, value, offset);
    if ((threadIdx.x & 31) == 0) scratch[threadIdx.x >> 5] = value;
    __syncthreads();
    if (threadIdx.x < 32) {
        float warps = threadIdx.x < kThreads / 32 ? scratch[threadIdx.x] : 0.f;
        for (int offset = 8; offset > 0; offset >>= 1) warps += __shfl_xor_sync(0xffffffffu, warps, offset);
        if (threadIdx.x == 0) scratch[0] = warps;
    }
    __syncthreads();
    return scratch[0];
}

// A slot is two 64-bit words, each (tag << 32 | value bits): each word is read and written whole, so a word
// whose tag matches holds this launch's value (a 16-byte vector access is atomic only per element).
__device__ __forceinline__ void store_slot(unsigned long long* slot, unsigned long long word) {
    asm volatile("st.relaxed.gpu.global.v2.u64 [%0], {%1, %1};" ::"l"(slot), "l"(word) : "memory");
}
__device__ __forceinline__ void load_slot(const unsigned long long* slot, unsigned long long& first,
                                          unsigned long long& second) {
    asm volatile("ld.relaxed.gpu.global.v2.u64 {%0, %1}, [%2];" : "=l"(first), "=l"(second) : "l"(slot) : "memory");
}
__device__ __forceinline__ float slot_value(unsigned long long word) {
    return __uint_as_float(static_cast<unsigned>(word));
}

// Warp 0 reads every CTA's slot (lane l the slots l, l + 32, ...), in the tagged mode until each word carries
// `tag`, and leaves the fold of the slots' values in scratch[1].
template <bool kTagged>
__device__ void fold_slots(const unsigned long long* slots, unsigned tag, float* scratch) {
    if (threadIdx.x >= 32) return;
    unsigned long long first[kMaxSlotsPerLane], second[kMaxSlotsPerLane];
    bool ready;
    do {
        ready = true;
#pragma unroll
        for (int k = 0; k < kMaxSlotsPerLane; ++k) {
            const unsigned j = threadIdx.x + 32 * k;
            if (j < gridDim.x) {
                load_slot(slots + 2 * j, first[k], second[k]);
                ready &= !kTagged || (static_cast<unsigned>(first[k] >> 32) == tag &&
                                      static_cast<unsigned>(second[k] >> 32) == tag);
            }
        }
    } while (!ready);
    float total = 0.f;
#pragma unroll
    for (int k = 0; k < kMaxSlotsPerLane; ++k) {
        if (threadIdx.x + 32 * k < gridDim.x) total += slot_value(first[k]) + slot_value(second[k]);
    }
    for (int offset = 16; offset > 0; offset >>= 1) total += __shfl_xor_sync(0xffffffffu, total, offset);
    if (threadIdx.x == 0) scratch[1] = total;
}

// `totals`, where not null, receives each CTA's folded value (the check).
template <Exchange kExchange>
__global__ void __launch_bounds__(kThreads) slice_copy(const float4* x, float4* y, long long units,
                                                       unsigned long long* slots, unsigned tag, float* totals) {
    __shared__ float scratch[32];
    float4 held[kUnits];
    const float sum = load_slice<kThreads, kUnits>(x, units, held);
    float scale = 1.f;  // the stores depend on the exchanged value through it
    if (kExchange == Exchange::kNone) {
        __syncthreads();
    } else {
        float total = block_sum(sum, scratch);
        if (kExchange != Exchange::kBlockReduction) {
            const unsigned long long word = (static_cast<unsigned long long>(tag) << 32) | __float_as_uint(total);
            if (threadIdx.x == 0) store_slot(slots + 2 * blockIdx.x, word);
            if (kExchange == Exchange::kGridSync) cg::this_grid().sync();
            fold_slots<kExchange == Exchange::kTaggedSlots>(slots, tag, scratch);
            __syncthreads();
            total = scratch[1];
        }
        if (totals != nullptr && threadIdx.x == 0) totals[blockIdx.x] = total;
        scale = total == 1234567.f ? 2.f : 1.f;
    }
    store_slice<kThreads, kUnits>(y, units, held, scale);
}

int main() {
    cudaStream_t s;
    PROBE_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    const auto time_each = [&](auto launch) { return median_us_per_call(s, 200, 10, 20000000, launch); };
    GibBuffers buffers;
    allocate_and_time_gib_copy(&buffers, s, time_each);
    constexpr int kMaxCtas = 32 * kMaxSlotsPerLane;
    unsigned long long* slots;
    float* totals;
    PROBE_CHECK(cudaMalloc(&slots, kMaxCtas * 16));
    PROBE_CHECK(cudaMemset(slots, 0, kMaxCtas * 16));
    PROBE_CHECK(cudaMalloc(&totals, 2 * kMaxCtas * sizeof(float)));
    unsigned next_tag = 1;  // never 0, the slots' first contents; one per launch

    for (long long cols : {32000LL, 128256LL, 256000LL}) {
        const size_t bytes = cols * sizeof(float);
        const long long units = static_cast<long long>(bytes / 16);
        const int ctas = static_cast<int>((units + kThreads * kUnits - 1) / (kThreads * kUnits));
        const int rotation = static_cast<int>(GibBuffers::kBytes / bytes);
        const auto x_of = [&](int i) { return reinterpret_cast<const float4*>(buffers.a + (i % rotation) * bytes); };
        const auto y_of = [&](int i) { return reinterpret_cast<float4*>(buffers.b + (i % rotation) * bytes); };
        cudaLaunchAttribute cooperative;
        cooperative.id = cudaLaunchAttributeCooperative;
        cooperative.val.cooperative = 1;
        cudaLaunchConfig_t config{};
        config.gridDim = ctas;
        config.blockDim = kThreads;
        config.stream = s;
        config.attrs = &cooperative;
        config.numAttrs = 1;

        std::vector<float> row(cols);
        for (long long i = 0; i < cols; ++i) row[i] = static_cast<float>((i * 7919) % 1000) / 1000.f;
        PROBE_CHECK(cudaMemcpy(buffers.a, row.data(), bytes, cudaMemcpyHostToDevice));
        PROBE_CHECK(cudaDeviceSynchronize());  // a copy from pageable memory may return before it lands
        PROBE_CHECK(cudaLaunchKernelEx(&config, slice_copy<Exchange::kGridSync>, x_of(0), y_of(0), units, slots,
                                       next_tag++, totals));
        PROBE_CHECK(cudaLaunchKernelEx(&config, slice_copy<Exchange::kTaggedSlots>, x_of(0), y_of(0), units, slots,
                                       next_tag++, totals + kMaxCtas));
        PROBE_CHECK(cudaStreamSynchronize(s));  // s does not wait for the legacy stream's copies, nor they for it
        std::vector<float> folded(2 * kMaxCtas);
        PROBE_CHECK(cudaMemcpy(folded.data(), totals, folded.size() * sizeof(float), cudaMemcpyDeviceToHost));
        double expected = 0.0;  // each slot holds its CTA's sum twice
        for (long long i = 0; i < cols; i += 4) expected += 2.0 * row[i];
        int differing = 0;
        for (int c = 0; c < ctas; ++c) {
            differing += folded[c] != folded[kMaxCtas + c] || std::fabs(folded[c] - expected) > 1e-5 * expected;
        }
        std::printf("1 x %lld f32, %d CTAs of %d threads; check: folded %.3f (expected %.3f), %d CTAs differ\n",
                    cols, ctas, kThreads, folded[0], expected, differing);

        const auto run = [&](const char* name, auto kernel) {
            const double us = time_each([&](int i) {
                PROBE_CHECK(cudaLaunchKernelEx(&config, kernel, x_of(i), y_of(i), units, slots, next_tag++,
                                               static_cast<float*>(nullptr)));
            });
            std::printf("  %-20s %6.2f us per call\n", name, us);
        };
        for (int rep = 0; rep < 2; ++rep) {
            run("copy", slice_copy<Exchange::kNone>);
            run("+ block reduction", slice_copy<Exchange::kBlockReduction>);
            run("+ grid sync", slice_copy<Exchange::kGridSync>);
            run("+ tagged slots", slice_copy<Exchange::kTaggedSlots>);
        }
    }
    return 0;
}
