// fused.cu - the one-read vocabulary-parallel softmax (docs/distributed.md, "Phase 2"). Shape class: rows that fit
// in kFusedThreads * packs 16-byte packs, any layout (16-byte accesses where the host found the rows aligned).
// Each CTA takes the next row from this rank's counter, so every rank takes its rows in increasing order, and:
//   1. loads the row into registers (x read once, streaming), its max and sum of exp(x - max) over the CTA;
//   2. publishes them into every rank's mailbox slot for (row, this rank), each value stamped with the call's
//      epoch in one 8-byte word, a relaxed system-scope store (through NVLink for a peer);
//   3. waits (thread w, relaxed loads on its own mailbox) until both words of rank w carry the epoch, for every w;
//   4. combines the ranks' statistics in rank order (combine_ranks, as the three-step path) and writes y from
//      the held row (streaming).
// Progress: stats are published before waiting and rows are taken in increasing order, so the smallest row
// not yet finished on every rank is held (or next to be taken) by a CTA on every rank and completes.
// A wait longer than kPeerWaitLimitNs gives up: the row's result is NaN, the count in the control block grows
// and the group is marked broken (later waits end at once), so a missing peer fails a call, never hangs it.
#include "cuda/vocab_parallel/common.cuh"
#include "cuda/vocab_parallel/fused_params.hpp"

namespace smx::cuda {
namespace {

__device__ __forceinline__ unsigned long long stamp(float value, std::uint32_t epoch) {
    return static_cast<unsigned long long>(epoch) << 32 | __float_as_uint(value);
}

// Relaxed, not release: a release would first wait until every earlier store of the CTA (the previous row's y)
// is visible system-wide. Each 8-byte element of the vector store is single-copy atomic, which is all a reader
// needs (fused_params.hpp, MailboxSlot).
__device__ __forceinline__ void publish(MailboxSlot* slot, float max, float sum, std::uint32_t epoch) {
    asm volatile("st.relaxed.sys.global.v2.u64 [%0], {%1, %2};" ::"l"(slot), "l"(stamp(max, epoch)),
                 "l"(stamp(sum, epoch))
                 : "memory");
}

// The slot's (max, sum) where both words carry `epoch`; false where either is from an earlier call.
__device__ __forceinline__ bool read_published(const MailboxSlot* slot, std::uint32_t epoch, float* max, float* sum) {
    unsigned long long stamped_max;
    unsigned long long stamped_sum;
    asm volatile("ld.relaxed.sys.global.v2.u64 {%0, %1}, [%2];"
                 : "=l"(stamped_max), "=l"(stamped_sum)
                 : "l"(slot)
                 : "memory");
    if (stamped_max >> 32 != epoch || stamped_sum >> 32 != epoch) return false;
    *max = __uint_as_float(static_cast<std::uint32_t>(stamped_max));
    *sum = __uint_as_float(static_cast<std::uint32_t>(stamped_sum));
    return true;
}

__device__ __forceinline__ unsigned long long global_time_ns() {
    unsigned long long now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    return now;
}

// Waits until `slot` holds `epoch`'s statistics and reads them; false where the wait ran out (or another row's
// did before).
__device__ bool wait_for_published(const MailboxSlot* slot, std::uint32_t epoch, FusedControl* control, float* max,
                                   float* sum) {
    if (read_published(slot, epoch, max, sum)) return true;
    const unsigned long long start = global_time_ns();
    for (unsigned spins = 1;; ++spins) {
        __nanosleep(100);
        if (read_published(slot, epoch, max, sum)) return true;
        // The clock and the broken flag now and then: both are slower reads than the slot.
        if (spins % 64 != 0) continue;
        if (*static_cast<volatile std::uint32_t*>(&control->broken) != 0) return false;
        if (global_time_ns() - start > kPeerWaitLimitNs) {
            atomicAdd(&control->timed_out_rows, 1ull);
            atomicExch(&control->broken, 1u);
            return false;
        }
    }
}

// The max over the CTA, NaN where any thread's is; every thread gets it. scratch: 32 entries.
__device__ __forceinline__ float block_max(float value, float* scratch) {
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) value = max_nan(value, __shfl_xor_sync(0xffffffffu, value, offset));
    if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = value;
    __syncthreads();
    value = threadIdx.x % 32 < blockDim.x / 32 ? scratch[threadIdx.x % 32] : neg_inf<float>();
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) value = max_nan(value, __shfl_xor_sync(0xffffffffu, value, offset));
    __syncthreads();  // scratch is rewritten by the next reduction
    return value;
}

// A row held in registers: thread t's pack u covers elements [(u * blockDim.x + t) * kPack, ... + kPack).
// kVector: 16-byte loads and stores, the row a whole number of packs (so a pack is all in or all out, tested in
// 32 bits); else element by element along the axis stride.
template <class X, int kPacks, bool kVector>
struct HeldRow {
    static constexpr int kPack = kPackOf<X>;
    Packed<X, kPack> raw[kPacks];

    __device__ __forceinline__ int pack_index(int u) const { return u * static_cast<int>(blockDim.x) + threadIdx.x; }
    __device__ __forceinline__ bool holds(const FusedParams& p, int u, int e) const {
        if constexpr (kVector) {
            return pack_index(u) < p.row_len / kPack;
        } else {
            return pack_index(u) * kPack + e < p.row_len;
        }
    }

    __device__ __forceinline__ void load(const FusedParams& p, const X* x_row) {
#pragma unroll
        for (int u = 0; u < kPacks; ++u) {
            const int j = pack_index(u) * kPack;
            if constexpr (kVector) {
                if (holds(p, u, 0)) raw[u] = load_streaming(reinterpret_cast<const Packed<X, kPack>*>(x_row + j));
            } else {
#pragma unroll
                for (int e = 0; e < kPack; ++e) {
                    if (holds(p, u, e)) raw[u].value[e] = x_row[static_cast<std::int64_t>(j + e) * p.x_strides.axis];
                }
            }
        }
    }

    template <class Visit>
    __device__ __forceinline__ void for_each(const FusedParams& p, const Visit& visit) const {
#pragma unroll
        for (int u = 0; u < kPacks; ++u) {
#pragma unroll
            for (int e = 0; e < kPack; ++e) {
                if (holds(p, u, e)) visit(widen_element_on_use(raw[u], e));
            }
        }
    }

    template <class Value>
    __device__ __forceinline__ void store(const FusedParams& p, X* y_row, const Value& value) const {
#pragma unroll
        for (int u = 0; u < kPacks; ++u) {
            const int j = pack_index(u) * kPack;
            if constexpr (kVector) {
                if (!holds(p, u, 0)) continue;
                float values[kPack];
#pragma unroll
                for (int e = 0; e < kPack; ++e) values[e] = value(widen_element_on_use(raw[u], e));
                store_pack<X, kPack, Access::Streaming>(y_row + j, values);
            } else {
#pragma unroll
                for (int e = 0; e < kPack; ++e) {
                    if (holds(p, u, e)) {
                        y_row[static_cast<std::int64_t>(j + e) * p.y_strides.axis] =
                            StoreAs<X>::from(value(widen_element_on_use(raw[u], e)));
                    }
                }
            }
        }
    }
};

// Two CTAs per SM where a thread holds at most 8 packs (64 registers), so one CTA loads and stores while the
// other waits for its peers; more packs take one.
template <int kPacks, bool kVector>
constexpr int kFusedMinBlocks = kVector && kPacks <= 8 ? 2 : 1;

template <class X, int kPacks, bool kVector>
__global__ void __launch_bounds__(kFusedThreads, (kFusedMinBlocks<kPacks, kVector>)) fused_shard_softmax(const FusedParams p) {
    __shared__ std::uint32_t taken_row;
    __shared__ float scratch[32];
    __shared__ float sum_scratch[32];  // the sum's own, so it needs no barrier before the publish (block_sum)
    __shared__ float gathered[SMX_SHARD_PEERS_MAX_RANKS * kSoftmaxStatisticsWidth];
    // Written by the begin kernel, which ran before this one on the stream.
    const std::uint32_t epoch = __ldcg(&p.control->epoch);
    const std::int64_t set_offset = (epoch % 2) * p.max_rows * p.ranks;
    const X* x = static_cast<const X*>(p.x);
    X* y = static_cast<X*>(p.y);

    for (;;) {
        if (threadIdx.x == 0) taken_row = atomicAdd(&p.control->next_row, 1u);
        __syncthreads();
        const std::int64_t row = taken_row;
        __syncthreads();  // taken_row is read by all before thread 0 takes the next
        if (row >= p.space.rows) return;

        HeldRow<X, kPacks, kVector> held;
        held.load(p, x + row_start(p.space, p.x_strides, row));
        float thread_max = neg_inf<float>();
        held.for_each(p, [&](float v) { thread_max = max_nan(thread_max, v); });
        const float local_max = block_max(thread_max, scratch);
        float local_sum = 0.0f;
        if (isfinite(local_max)) {
            float thread_sum = 0.0f;
            with_shifted_exp(local_max, [&](const auto& exp) {
                held.for_each(p, [&](float v) { thread_sum += exp(v); });
                thread_sum *= exp.unbias();
            });
            // The next write of sum_scratch is the next row's, after the barriers around `gathered`.
            local_sum = block_sum<float, false>(thread_sum, sum_scratch);
        }

        const std::int64_t row_slots = set_offset + row * p.ranks;
        if (threadIdx.x < p.ranks) {
            // smxShardStatistics' convention: the sum only where the max is finite.
            publish(p.mailboxes[threadIdx.x] + row_slots + p.rank, local_max, local_sum, epoch);
            const MailboxSlot* arrived = p.mailboxes[p.rank] + row_slots + threadIdx.x;
            float max = 0.0f;
            float sum = 0.0f;
            if (!wait_for_published(arrived, epoch, p.control, &max, &sum)) {
                max = __int_as_float(0x7fc00000);  // NaN: a rank that never arrived poisons the row
                sum = 0.0f;
            }
            gathered[threadIdx.x * kSoftmaxStatisticsWidth] = max;
            gathered[threadIdx.x * kSoftmaxStatisticsWidth + 1] = sum;
        }
        __syncthreads();
        const CombinedStats<float> c =
            combine_ranks(GatheredStats<float>{gathered, 1, p.ranks, kSoftmaxStatisticsWidth});
        __syncthreads();  // gathered is rewritten for the next row

        X* y_row = y + row_start(p.space, p.y_strides, row);
        if (!c.finite()) {
            held.store(p, y_row, [](float) { return __int_as_float(0x7fc00000); });
        } else if (p.log != 0) {
            const float log_sum = log_of(c.sum);
            held.store(p, y_row, [&](float v) { return (v - c.max) - log_sum; });
        } else {
            // exp(v - M) / S relative to one shift, as the three-step normalize computes it.
            with_shifted_exp(c.max, [&](const auto& exp) {
                const float a = exp.unbias() / c.sum;
                held.store(p, y_row, [&](float v) { return a * exp(v); });
            });
        }
    }
}

__global__ void fused_begin(const FusedParams p) {
    p.control->epoch += 1;
    p.control->next_row = 0;
}

template <class X, bool kVector>
const void* fused_instance(int packs) {
    switch (packs) {
        case 1: return reinterpret_cast<const void*>(&fused_shard_softmax<X, 1, kVector>);
        case 2: return reinterpret_cast<const void*>(&fused_shard_softmax<X, 2, kVector>);
        case 4: return reinterpret_cast<const void*>(&fused_shard_softmax<X, 4, kVector>);
        case 8: return reinterpret_cast<const void*>(&fused_shard_softmax<X, 8, kVector>);
        case 16: return reinterpret_cast<const void*>(&fused_shard_softmax<X, 16, kVector>);
        default: return nullptr;
    }
}

}  // namespace

const void* fused_softmax_kernel(smxDataType_t dtype, int packs, bool vector) {
    return visit_dtype(dtype, [packs, vector](auto tag) -> const void* {
        using X = typename decltype(tag)::type;
        if constexpr (std::is_same_v<X, double>) {
            return nullptr;  // f64 statistics do not fit the f32 mailbox
        } else {
            return vector ? fused_instance<X, true>(packs) : fused_instance<X, false>(packs);
        }
    });
}

const void* fused_begin_kernel() { return reinterpret_cast<const void*>(&fused_begin); }

}  // namespace smx::cuda
