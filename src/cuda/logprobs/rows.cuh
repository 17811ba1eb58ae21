// rows.cuh - what every log-probability kernel shares: a row's statistics (max, sum of exp, mean) with
// logsumexp's special values kept apart, their accumulation over a stretch of x in 16-byte packs, their
// combination across a lane group, a CTA and a cluster of CTAs (each in a fixed order, so a row's result is the
// same bits on every run), the row's results (logsumexp, a gathered log-probability, the cross-entropy loss and
// its gradient) and the workspace regions (params.hpp).
//
// Special values. logsumexp must tell a row holding +inf (result +inf) from one holding NaN (NaN), which the
// forward's statistics do not (their max turns NaN for both). Here `max` is the max of the row's non-NaN values
// (fmaxf and HMNMX2 drop NaN) and the exps are taken relative to `max` where it is finite, to 0 where it is not:
//   - a NaN reaches the sum through its exp and stays there (NaN * 0 is NaN when a sum is rescaled);
//   - a +inf makes max +inf and adds exp(+inf) = +inf, which no later rescale or addition turns into NaN;
//   - an all -inf (or empty) row keeps max -inf and sum 0 (exp(-inf - 0) = 0, never -inf - -inf).
// So: sum NaN -> NaN; else max +inf -> +inf; else max -inf -> -inf; else max + log(sum).
#pragma once

#include <cstdint>
#include <type_traits>

#include "cuda/common/cluster.cuh"
#include "cuda/common/dependent_launch.cuh"
#include "cuda/common/math.cuh"
#include "cuda/logprobs/params.hpp"
#include "ops/logprobs/info.hpp"  // kGatherOutOfRange

namespace smx::cuda {

// ---- indices and the workspace ----------------------------------------------------------------------------

// Element `offset` of an I32 or I64 index tensor.
__device__ __forceinline__ std::int64_t load_index(const void* base, std::int64_t offset, bool index_64) {
    return index_64 ? static_cast<const std::int64_t*>(base)[offset] : static_cast<const std::int32_t*>(base)[offset];
}

template <class C>
__device__ __forceinline__ RowLoss<C>* workspace_row_losses(void* workspace) {
    return reinterpret_cast<RowLoss<C>*>(static_cast<unsigned char*>(workspace) + kRowLossesOffset);
}
template <class C>
__device__ __forceinline__ C* workspace_row_lse(void* workspace, std::int64_t rows) {
    return reinterpret_cast<C*>(static_cast<unsigned char*>(workspace) + row_lse_offset(rows, sizeof(C)));
}
template <class C>
__device__ __forceinline__ RowStats<C>* workspace_partials(void* workspace, std::int64_t rows) {
    return reinterpret_cast<RowStats<C>*>(static_cast<unsigned char*>(workspace) + partials_offset(rows, sizeof(C)));
}

// The gradient's scale: 1 / the rows a MEAN counts (the count kernel's result), 1 for SUM and NONE, and 1 where
// no row counts (every row is then ignored and its gradient 0).
template <class C>
__device__ __forceinline__ C gradient_scale(const void* workspace, int reduction) {
    if (reduction != SMX_REDUCTION_MEAN) return C(1);
    const auto* region = static_cast<const unsigned char*>(workspace);
    return *reinterpret_cast<const C*>(region + (std::is_same_v<C, double> ? 0 : sizeof(double)));
}

// ---- statistics ---------------------------------------------------------------------------------------------

__device__ __forceinline__ float quiet_nan(float) { return __int_as_float(0x7fffffff); }
__device__ __forceinline__ double quiet_nan(double) { return __longlong_as_double(0x7ff8000000000000ULL); }
template <class C>
__device__ __forceinline__ C nan_of() {
    return quiet_nan(C{});
}

// a * b + c, rounded once.
__device__ __forceinline__ float fused(float a, float b, float c) { return fmaf(a, b, c); }
__device__ __forceinline__ double fused(double a, double b, double c) { return fma(a, b, c); }

template <class C>
__device__ __forceinline__ RowStats<C> empty_row_stats() {
    return {neg_inf<C>(), C(0), C(0)};
}

// The shift a sum's exps are relative to: its max where finite, else 0 (see the top of this file).
template <class C>
__device__ __forceinline__ C exp_shift(C max) {
    return ::isfinite(max) ? max : C(0);
}

// Two sets' statistics as one. rescale() is exactly 1 for equal maxima and exp(-inf) = 0 where a max is -inf
// below a finite one or finite below +inf, so every case of the top of this file holds.
template <class C>
__device__ __forceinline__ RowStats<C> combine_row_stats(const RowStats<C>& a, const RowStats<C>& b) {
    const C max = max_skip_nan(a.max, b.max);
    return {max, a.sum * rescale(a.max, max) + b.sum * rescale(b.max, max), a.mean + b.mean};
}

// combine_row_stats with one exp instead of two: the side that holds the max has a rescale of exactly 1, so only
// the other side's is computed. The same factors and the same rounding (the compiler fuses combine_row_stats' sum
// as b.sum * b_scale + (a.sum * a_scale rounded), written out here), so the same bits.
template <class C>
__device__ __forceinline__ RowStats<C> combine_row_stats_one_exp(const RowStats<C>& a, const RowStats<C>& b) {
    const C max = max_skip_nan(a.max, b.max);
    const bool a_holds_max = a.max == max;
    const C lower_scale = rescale(a_holds_max ? b.max : a.max, max);
    const C a_scale = a_holds_max ? C(1) : lower_scale;
    const C b_scale = b.max == max ? C(1) : lower_scale;
    return {max, fused(b.sum, b_scale, a.sum * a_scale), a.mean + b.mean};
}

// The two forms as the reductions below take them (a template argument): the stats kernel keeps the two exps, the
// code it was measured with; ce-regs takes one (performance.md, "ce-regs' instruction count").
struct BothRescales {
    template <class C>
    __device__ __forceinline__ RowStats<C> operator()(const RowStats<C>& a, const RowStats<C>& b) const {
        return combine_row_stats(a, b);
    }
};
struct OneRescale {
    template <class C>
    __device__ __forceinline__ RowStats<C> operator()(const RowStats<C>& a, const RowStats<C>& b) const {
        return combine_row_stats_one_exp(a, b);
    }
};

// Adds a group of values whose NaN-free max is group_max, with one rescale of the running sum: sum_exps(exp)
// returns the group's sum of exp(v) for the exp functor it is given (relative to the new shift).
template <class C, class SumExps>
__device__ __forceinline__ void add_group_to(RowStats<C>& stats, C group_max, const SumExps& sum_exps) {
    const C max = max_skip_nan(stats.max, group_max);
    C group_sum = 0;
    C unbias = 1;
    with_shifted_exp(exp_shift(max), [&](const auto& exp) {
        group_sum = sum_exps(exp);
        unbias = exp.unbias();
    });
    stats.sum = stats.sum * rescale(stats.max, max) + group_sum * unbias;
    stats.max = max;
}

template <class C>
__device__ __forceinline__ void add_value_to(RowStats<C>& stats, C value, C inv_n, bool with_mean) {
    add_group_to(stats, max_skip_nan(neg_inf<C>(), value), [&](const auto& exp) { return exp(value); });
    if (with_mean) stats.mean = fused(value, inv_n, stats.mean);
}

constexpr int kStatsUnroll = 4;      // 16-byte packs in flight per thread and loop step
constexpr int kStatsSegmentSteps = 64;  // loop steps summed apart before joining a thread's total (accuracy)

// The NaN-free max of the packs with loaded[u]: 16-bit x on its packed pairs, in the input dtype (one HMNMX2 per
// two elements; a max never rounds).
template <int kCount, class X, int kPack>
__device__ __forceinline__ ComputeType<X> packs_max(const Packed<X, kPack> (&raw)[kCount], const bool (&loaded)[kCount]) {
    using C = ComputeType<X>;
    if constexpr (sizeof(X) == 2) {
        PairedMax<X> paired;
#pragma unroll
        for (int u = 0; u < kCount; ++u) {
            if (loaded[u]) add_pairs(paired, raw[u]);
        }
        return paired.result();
    } else {
        C max = neg_inf<C>();
#pragma unroll
        for (int u = 0; u < kCount; ++u) {
            if (!loaded[u]) continue;
#pragma unroll
            for (int k = 0; k < kPack; ++k) max = max_skip_nan(max, to_compute(raw[u].value[k]));
        }
        return max;
    }
}

// One loop step: up to kStatsUnroll packs of x (those `loaded`). The step's max first (packs_max), one exp per
// element relative to the new max, one rescale of the running sum. 16-bit packs stay packed and are widened at
// each use (widen_element_on_use), which keeps their registers halved.
template <bool kMean, class X, int kPack, class C>
__device__ __forceinline__ void add_packs_to(RowStats<C>& stats, const Packed<X, kPack> (&raw)[kStatsUnroll],
                                             const bool (&loaded)[kStatsUnroll], C inv_n) {
    add_group_to(stats, packs_max(raw, loaded), [&](const auto& exp) {
        C sum = 0;
#pragma unroll
        for (int u = 0; u < kStatsUnroll; ++u) {
            if (!loaded[u]) continue;
#pragma unroll
            for (int k = 0; k < kPack; ++k) sum += exp(widen_element_on_use(raw[u], k));
        }
        return sum;
    });
    if constexpr (kMean) {
        C step_mean = 0;
#pragma unroll
        for (int u = 0; u < kStatsUnroll; ++u) {
            if (!loaded[u]) continue;
#pragma unroll
            for (int k = 0; k < kPack; ++k) step_mean = fused(widen_element_on_use(raw[u], k), inv_n, step_mean);
        }
        stats.mean += step_mean;
    }
}

// Where the 16-byte body of x[0, count) starts, how many whole packs it has, and where its tail starts.
struct PackedRange {
    std::int64_t head;
    std::int64_t packs;
    std::int64_t tail;
};

template <class X>
__device__ __forceinline__ PackedRange packed_range(const X* x, std::int64_t count) {
    constexpr int kPack = kPackOf<X>;
    const std::int64_t shift = static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(x) % 16 / sizeof(X));
    const std::int64_t head = shift == 0 ? 0 : (count < kPack - shift ? count : kPack - shift);
    const std::int64_t packs = (count - head) / kPack;
    return {head, packs, head + packs * kPack};
}

// This thread's share of the statistics of x[0, count) (any alignment), `threads` threads striding over the
// 16-byte packs and then the few elements before and after them. Long stretches are summed in segments of
// kStatsSegmentSteps steps: no float sum then takes more than a few dozen additions.
template <bool kMean, class X, class C = ComputeType<X>>
__device__ __forceinline__ RowStats<C> range_stats(const X* x, std::int64_t count, int tid, int threads, C inv_n) {
    constexpr int kPack = kPackOf<X>;
    using Pack = Packed<X, kPack>;
    const PackedRange range = packed_range(x, count);
    const Pack* body = reinterpret_cast<const Pack*>(x + range.head);
    const std::int64_t step = static_cast<std::int64_t>(threads) * kStatsUnroll;
    const std::int64_t segment_span = step * kStatsSegmentSteps;
    const auto segment_from = [&](std::int64_t first) {
        const std::int64_t end = range.packs - first < segment_span ? range.packs : first + segment_span;
        RowStats<C> segment = empty_row_stats<C>();
        for (std::int64_t p = first; p < end; p += step) {
            Pack raw[kStatsUnroll];
            bool loaded[kStatsUnroll];
#pragma unroll
            for (int u = 0; u < kStatsUnroll; ++u) {
                const std::int64_t pack = p + static_cast<std::int64_t>(u) * threads;
                loaded[u] = pack < end;
                if (loaded[u]) raw[u] = body[pack];
            }
            add_packs_to<kMean>(segment, raw, loaded, inv_n);
        }
        return segment;
    };
    RowStats<C> stats = segment_from(tid);  // a stretch of one segment (most) pays no combine
    for (std::int64_t first = tid + segment_span; first < range.packs; first += segment_span) {
        stats = combine_row_stats(stats, segment_from(first));
    }
    // The elements outside the packs: fewer than two packs' worth.
    const std::int64_t edges = range.head + (count - range.tail);
    for (std::int64_t e = tid; e < edges; e += threads) {
        const std::int64_t j = e < range.head ? e : range.tail + (e - range.head);
        add_value_to(stats, to_compute(x[j]), inv_n, kMean);
    }
    return stats;
}

// This thread's share of the statistics of a row whose element j is value_at(j), j < count, threads striding
// (any layout: the general kernel). Summed in segments as range_stats is; the mean only where with_mean.
template <class C, class ValueAt>
__device__ __forceinline__ RowStats<C> strided_stats(const ValueAt& value_at, std::int64_t count, int tid, int threads,
                                                    C inv_n, bool with_mean) {
    constexpr int kUnroll = 4;  // elements in flight per thread and step
    const std::int64_t step = static_cast<std::int64_t>(threads) * kUnroll;
    const std::int64_t segment_span = step * kStatsSegmentSteps;
    const auto segment_from = [&](std::int64_t first) {
        const std::int64_t end = count - first < segment_span ? count : first + segment_span;
        RowStats<C> segment = empty_row_stats<C>();
        for (std::int64_t j = first; j < end; j += step) {
            C values[kUnroll];
            C step_max = neg_inf<C>();
#pragma unroll
            for (int u = 0; u < kUnroll; ++u) {
                const std::int64_t position = j + static_cast<std::int64_t>(u) * threads;
                values[u] = position < end ? value_at(position) : neg_inf<C>();
                step_max = max_skip_nan(step_max, values[u]);
            }
            add_group_to(segment, step_max, [&](const auto& exp) {
                C sum = 0;
#pragma unroll
                for (int u = 0; u < kUnroll; ++u) sum += exp(values[u]);
                return sum;
            });
            if (with_mean) {
#pragma unroll
                for (int u = 0; u < kUnroll; ++u) {
                    if (j + static_cast<std::int64_t>(u) * threads < end) segment.mean = fused(values[u], inv_n, segment.mean);
                }
            }
        }
        return segment;
    };
    RowStats<C> stats = segment_from(tid);
    for (std::int64_t first = tid + segment_span; first < count; first += segment_span) {
        stats = combine_row_stats(stats, segment_from(first));
    }
    return stats;
}

// Element offset of row `row` in operand slot `slot` of an index space of `ndim` dims (row-major over them).
__device__ __forceinline__ std::int64_t space_offset(const IndexSpace& space, int ndim, int slot, std::int64_t row) {
    if (ndim == 1) return row * space.strides[slot][0];  // rows: no division
    std::int64_t offset = 0;
    for (int d = ndim - 1; d >= 0; --d) {
        offset += row % space.shape[d] * space.strides[slot][d];
        row /= space.shape[d];
    }
    return offset;
}

// ---- combining across threads -------------------------------------------------------------------------------

template <class C>
__device__ __forceinline__ RowStats<C> shuffle_row_stats(const RowStats<C>& s, int lane, int width) {
    return {__shfl_sync(0xffffffffu, s.max, lane, width), __shfl_sync(0xffffffffu, s.sum, lane, width),
            __shfl_sync(0xffffffffu, s.mean, lane, width)};
}

// The statistics of a group of `width` lanes (a power of two up to 32; every lane of the warp calls it), combined
// by xor butterflies; every lane returns the group's first lane's result, so all agree bitwise.
template <class C, class Combine = BothRescales>
__device__ __forceinline__ RowStats<C> lane_group_stats(RowStats<C> s, int width) {
    for (int offset = width / 2; offset > 0; offset /= 2) {
        const RowStats<C> other{__shfl_xor_sync(0xffffffffu, s.max, offset, width),
                                __shfl_xor_sync(0xffffffffu, s.sum, offset, width),
                                __shfl_xor_sync(0xffffffffu, s.mean, offset, width)};
        s = Combine{}(s, other);
    }
    return shuffle_row_stats(s, 0, width);
}

// The CTA's statistics in every thread: each warp's, then warp 0 folds the warps' in order. scratch: 33 entries.
// Starts and ends with every thread's earlier use of scratch complete (its last entry is read after a barrier
// that every thread passes before the next call writes it).
template <class C, class Combine = BothRescales>
__device__ __forceinline__ RowStats<C> cta_stats(RowStats<C> s, RowStats<C>* scratch) {
    s = lane_group_stats<C, Combine>(s, 32);
    const int lane = threadIdx.x % 32;
    const int warp = threadIdx.x / 32;
    if (lane == 0) scratch[warp] = s;
    __syncthreads();
    if (warp == 0) {
        const int warps = blockDim.x / 32;
        s = lane_group_stats<C, Combine>(lane < warps ? scratch[lane] : empty_row_stats<C>(), 32);
        if (lane == 0) scratch[32] = s;
    }
    __syncthreads();
    return scratch[32];
}

// The cluster's statistics in every thread of every CTA, from each CTA's (`s`, the same in all its threads):
// published in `exchange`, then warp 0 of every CTA folds them in rank order (bitwise the same everywhere).
// Ends with this CTA's arrival at the cluster barrier: call cluster_wait() before `exchange` may be rewritten
// or the CTA exits, so no peer reads it after. `result`: shared, read by every thread.
template <class C, class Combine = BothRescales>
__device__ __forceinline__ RowStats<C> cluster_row_stats(const RowStats<C>& s, RowStats<C>* exchange,
                                                         RowStats<C>* result, unsigned ranks) {
    if (threadIdx.x == 0) *exchange = s;
    cluster_sync();
    if (threadIdx.x < 32) {
        const unsigned lane = threadIdx.x;
        const RowStats<C> peer = lane < ranks ? read_peer(exchange, lane) : empty_row_stats<C>();
        const RowStats<C> folded = lane_group_stats<C, Combine>(peer, 32);
        if (lane == 0) *result = folded;
    }
    __syncthreads();
    const RowStats<C> row = *result;
    cluster_arrive();
    return row;
}

// The same exchange by pushes (float statistics): each CTA stores its statistics into every peer's mailbox
// (cluster.cuh), then warp 0 of every CTA folds its own slots in rank order. No release barrier and none at exit,
// which the pull above needs; the forward's block-regs measured the difference (performance.md#block-regs).
// Protocol: mailbox_open(mailbox, ranks) by every thread at the kernel's start, then this once.
struct PushedRowStats {
    float max;
    float sum;
    float mean;
    float unused;  // a mailbox slot holds 8 or 16 bytes
};
using RowStatsMailbox = ClusterMailbox<PushedRowStats, kCeRegsMaxCluster>;

template <class Combine = BothRescales>
__device__ __forceinline__ RowStats<float> pushed_cluster_row_stats(const RowStats<float>& s, RowStatsMailbox& mailbox,
                                                                    RowStats<float>* result, unsigned rank, unsigned ranks) {
    cluster_wait();  // every peer's mailbox is set up
    if (threadIdx.x < 32) {
        const unsigned lane = threadIdx.x;
        if (lane < ranks) mailbox_post(mailbox, PushedRowStats{s.max, s.sum, s.mean, 0.0f}, rank, lane);
        mailbox_wait(mailbox);
        RowStats<float> peer = empty_row_stats<float>();
        if (lane < ranks) peer = {mailbox.slots[lane].max, mailbox.slots[lane].sum, mailbox.slots[lane].mean};
        const RowStats<float> folded = lane_group_stats<float, Combine>(peer, 32);
        if (lane == 0) *result = folded;
    }
    __syncthreads();
    return *result;
}

// ---- a row's results -------------------------------------------------------------------------------------------

template <class C>
struct RowResult {
    C max;
    C log_sum;
    C lse;          // logsumexp's value, special values included
    bool ordinary;  // no NaN and a finite max: the log-probabilities are finite or -inf
};

template <class C>
__device__ __forceinline__ RowResult<C> row_result(const RowStats<C>& s) {
    RowResult<C> r;
    r.max = s.max;
    r.log_sum = log_of(s.sum);
    r.ordinary = ::isfinite(s.max) && s.sum == s.sum;
    r.lse = s.sum != s.sum ? s.sum : ::isfinite(s.max) ? s.max + r.log_sum : s.max;
    return r;
}

// log_softmax(x)[i] for an index i into a row of n: +inf outside [0, n) (x is not read), NaN in a row that is
// not ordinary, else (v - max) - log(sum). value_at(i) reads x[i].
template <class C, class ValueAt>
__device__ __forceinline__ C gathered_log_prob(const RowResult<C>& r, std::int64_t i, std::int64_t n,
                                               const ValueAt& value_at) {
    if (i < 0 || i >= n) return C(kGatherOutOfRange);
    if (!r.ordinary) return nan_of<C>();
    return (value_at(i) - r.max) - r.log_sum;
}

// Cross-entropy of one row with target t (PyTorch's F.cross_entropy with class indices and label smoothing eps):
// ignored rows lose 0 and have gradient 0; a target outside [0, n) or a row that is not ordinary gives NaN for
// both; else loss = (1 - eps) (lse - x_t) + eps / n * sum(lse - x) (+inf where that sum overflows).
template <class C>
struct CrossEntropyRow {
    C loss;
    bool ignored;
    bool valid;  // not ignored, target in range, row ordinary: the gradient follows the formula
};

template <class C>
__device__ __forceinline__ CrossEntropyRow<C> cross_entropy_row(const RowResult<C>& r, C mean, std::int64_t t,
                                                               std::int64_t n, std::int64_t ignore_index, C eps,
                                                               C target_logit) {
    CrossEntropyRow<C> row;
    row.ignored = t == ignore_index;
    row.valid = !row.ignored && t >= 0 && t < n && r.ordinary;
    row.loss = row.ignored ? C(0) : row.valid ? -((target_logit - r.max) - r.log_sum) : nan_of<C>();
    // eps == 0 adds nothing, not 0 * inf (a row with a -inf logit has mean -inf).
    if (row.valid && eps > C(0)) {
        // The smoothing term is eps / n times the sum over the classes of lse - x, in double as the reference and
        // PyTorch sum it: +inf once that sum passes the largest double (huge f64 logits), never the finite
        // eps * (lse - mean) that the mean alone would give.
        const double smooth = (static_cast<double>(r.lse) - static_cast<double>(mean)) * static_cast<double>(n);
        const double e = static_cast<double>(eps);
        row.loss = static_cast<C>((1.0 - e) * static_cast<double>(row.loss) + e / static_cast<double>(n) * smooth);
    }
    return row;
}

// dlogits of one row: scale * (softmax - eps / n) everywhere, minus scale * (1 - eps) at the target; 0 in an
// ignored row and NaN in an invalid one. The exps come from the body's exp functor for shift lse (exp(v) =
// exp(v - lse) up to the factor unbias, folded into `factor`).
template <class C>
struct GradientRow {
    bool formula;      // else every element is `constant`
    C constant;        // 0 (ignored) or NaN (invalid)
    C factor;          // scale * unbias
    C offset;          // -scale * eps / n
    C target_adjust;   // scale * (1 - eps), subtracted at the target
    std::int64_t target;

    template <class Exp>
    __device__ __forceinline__ C element(C value, const Exp& exp) const {
        return fused(exp(value), factor, offset);
    }
};

template <class C>
__device__ __forceinline__ GradientRow<C> gradient_row(bool valid, bool ignored, std::int64_t t, std::int64_t n, C eps,
                                                      C scale, C unbias) {
    GradientRow<C> g;
    g.formula = valid;
    g.constant = ignored ? C(0) : nan_of<C>();
    g.factor = scale * unbias;
    g.offset = -scale * (eps / static_cast<C>(n));
    g.target_adjust = scale * (C(1) - eps);
    g.target = t;
    return g;
}

// Subtracts the target's term from the one of kPack gradients (columns first_col...) that is the target's, if any:
// one comparison per pack for every other thread.
template <int kPack, class C>
__device__ __forceinline__ void adjust_target(C (&values)[kPack], std::int64_t first_col, const GradientRow<C>& g) {
    const std::int64_t at = g.target - first_col;
    if (at >= 0 && at < kPack) {
#pragma unroll
        for (int k = 0; k < kPack; ++k) {
            if (k == at) values[k] -= g.target_adjust;
        }
    }
}

// The dtype pairs ce-regs and ce-write are instantiated for (params.hpp, is_fast_dlogits_pair): dlogits of the
// logits' dtype or f32, computed in the logits' compute type.
template <class X, class D>
constexpr bool kFastDlogitsPair = std::is_same_v<X, D> || std::is_same_v<D, float>;

}  // namespace smx::cuda
