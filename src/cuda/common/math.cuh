// math.cuh - softmax arithmetic with the reference's special values: -inf, the fast and exact exp forms,
// (max, sum) statistics and how they combine, online and segmented.
#pragma once

#include <cstdint>
#include <type_traits>

#include "cuda/common/types.cuh"

namespace smx::cuda {
// ---- math with the reference's special values ----------------------------------------------------

__device__ __forceinline__ float negative_infinity(float) { return __int_as_float(0xff800000); }
__device__ __forceinline__ double negative_infinity(double) { return __longlong_as_double(0xfff0000000000000ULL); }
template <class C>
__device__ __forceinline__ C neg_inf() {
    return negative_infinity(C{});
}

constexpr float kLog2e = 1.44269502162933349609375f;  // log2(e) rounded to float

// 2^v from the SFU (MUFU.EX2, ~2 ulp; results below the normal range flush to 0).
__device__ __forceinline__ float exp2_approx(float v) {
    float power;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(power) : "f"(v));
    return power;
}

// exp for the float path, ~3 ulp in a handful of instructions (expf costs ~20 and made the kernels
// instruction-bound): exp(v) = 2^(v*log2e), with the product split exactly into hi + lo by an FMA, 2^hi from
// the SFU (ex2.approx, ~2 ulp) and the residual lo applied to first order. Arguments below -104 (where
// exp underflows to 0 in float) are clamped first so -inf gives 0, not inf*0 = NaN; NaN stays NaN (the
// comparison is false for it), because a NaN anywhere must reach the row's sum.
__device__ __forceinline__ float exp_of(float v) {
    constexpr float kLog2eLow = 1.925962989e-8f;  // log2(e) - kLog2e
    constexpr float kLn2 = 0.693147180559945309f;
    const float clamped = v < -104.0f ? -104.0f : v;
    const float hi = clamped * kLog2e;
    const float lo = fmaf(clamped, kLog2e, -hi) + clamped * kLog2eLow;
    const float power = exp2_approx(hi);
    return fmaf(power, lo * kLn2, power);
}
__device__ __forceinline__ double exp_of(double v) { return exp(v); }

// ---- exp relative to one shift, for whole rows --------------------------------------------------
// A kernel exponentiates every value of a row (or a thread's share of it) relative to one shift s. With
// S = s * log2(e) rounded once per row, exp(v - s) = 2^(v * log2(e) - S) is one FFMA (exact product,
// one rounding) and one MUFU.EX2 per element, against ~8 instructions for exp_of(v - s); 16-bit rows were
// instruction-bound, so this matters (performance.md#shared-arithmetic).
// Error per element: half an ulp of the exponent plus ex2.approx's ~2 ulp, no worse than exp_of(v - s),
// whose subtraction rounds too. What the fast form adds is a factor common to the shift: the values are
// exp(v - s) * 2^r with r = s * log2(e) - S (exact by FMA, |r| <= half an ulp of S); unbias() = 2^-r
// removes it from a sum (softmax's e / sum cancels it anyway, log(sum) and cross-shift sums need it).

// The fast form, valid for |s| < 2^24 (every finite f16 shift): r stays below 1 and 2^r is a modest factor.
struct ShiftedExpFast {
    float scaled_shift;  // S
    float residual;      // r
    __device__ __forceinline__ explicit ShiftedExpFast(float shift)
        : scaled_shift(shift * kLog2e), residual(fmaf(shift, kLog2e, -scaled_shift)) {}
    __device__ __forceinline__ float operator()(float v) const { return exp2_approx(fmaf(v, kLog2e, -scaled_shift)); }
    __device__ __forceinline__ float unbias() const { return exp2_approx(-residual); }
};

// The general form: huge or non-finite shifts (special values keep exp_of's exact handling) and double.
template <class C>
struct ShiftedExpExact {
    C shift;
    __device__ __forceinline__ explicit ShiftedExpExact(C s) : shift(s) {}
    __device__ __forceinline__ C operator()(C v) const { return exp_of(v - shift); }
    __device__ __forceinline__ C unbias() const { return C(1); }
};

// Whether the fast form applies to `shift` (false for inf and NaN, whose exact handling exp_of keeps).
__device__ __forceinline__ bool fast_exp_applies(float shift) { return fabsf(shift) < 0x1p24f; }
__device__ __forceinline__ bool fast_exp_applies(double) { return false; }

// Which form a loop uses, chosen once for the whole loop so that it never branches per element and
// several rows' exps can interleave: form.make(shift) gives the functor for one shift.
struct FastExpForm {
    __device__ __forceinline__ ShiftedExpFast make(float shift) const { return ShiftedExpFast(shift); }
};
struct ExactExpForm {
    template <class C>
    __device__ __forceinline__ ShiftedExpExact<C> make(C shift) const {
        return ShiftedExpExact<C>(shift);
    }
};

// Calls body(form) with FastExpForm when `fast` (every shift the body will use passed fast_exp_applies),
// ExactExpForm otherwise; compute type C = double always takes the exact form.
template <class C, class Body>
__device__ __forceinline__ void with_exp_form(bool fast, Body&& body) {
    if constexpr (std::is_same_v<C, float>) {
        if (fast) {
            body(FastExpForm{});
            return;
        }
    }
    body(ExactExpForm{});
}

// Calls body(exp) with the exp functor for one shift.
template <class C, class Body>
__device__ __forceinline__ void with_shifted_exp(C shift, Body&& body) {
    with_exp_form<C>(fast_exp_applies(shift), [&](auto form) { body(form.make(shift)); });
}

// ---- exp of values held before a scale ------------------------------------------------------------------
// A body that holds x where the row's values are z = s * x (s > 0, finite, one per launch) keeps its one FFMA
// per element by folding s into the multiplier: exp(s x - shift) = 2^(x * (s log2(e)) - S), with S and its
// residual those of ShiftedExpFast(shift), the shift in z's units. Rounding s log2(e) puts at most |z| 2^-24
// into the exponent, as rounding z = s * x did.
struct ScaledShiftedExpFast {
    ShiftedExpFast shifted;
    float multiplier;  // s * log2(e)
    __device__ __forceinline__ float operator()(float v) const {
        return exp2_approx(fmaf(v, multiplier, -shifted.scaled_shift));
    }
    __device__ __forceinline__ float unbias() const { return shifted.unbias(); }
};

// The exact form for huge or non-finite shifts: z rounded on its own (an FMA of s * v with the shift would leave
// a residual as large as z's ulp, which past 2^24 is no longer small), then exp_of as ShiftedExpExact.
template <class C>
struct ScaledShiftedExpExact {
    C shift;
    C scale;
    __device__ __forceinline__ C operator()(C v) const {
        if constexpr (std::is_same_v<C, float>) return exp_of(__fmul_rn(scale, v) - shift);
        else return exp_of(__dmul_rn(scale, v) - shift);
    }
    __device__ __forceinline__ C unbias() const { return C(1); }
};

// The forms of values held before a scale, as FastExpForm and ExactExpForm are for z.
struct ScaledFastExpForm {
    float multiplier;
    __device__ __forceinline__ ScaledShiftedExpFast make(float shift) const { return {ShiftedExpFast(shift), multiplier}; }
};
template <class C>
struct ScaledExactExpForm {
    C scale;
    __device__ __forceinline__ ScaledShiftedExpExact<C> make(C shift) const { return {shift, scale}; }
};

// with_exp_form for values held before `scale`.
template <class C, class Body>
__device__ __forceinline__ void with_scaled_exp_form(bool fast, C scale, Body&& body) {
    if constexpr (std::is_same_v<C, float>) {
        if (fast) {
            body(ScaledFastExpForm{scale * kLog2e});
            return;
        }
    }
    body(ScaledExactExpForm<C>{scale});
}

// Softmax outputs in one exp each: exp(v - max) / sum = 2^(v log2(e) - T) with T = max log2(e) + log2(sum),
// one FFMA and one MUFU.EX2 per output instead of an exp and a multiply. T is rounded once (by an FMA),
// which puts up to half an ulp of T into every output's exponent: under 2^-14 (4e-5 relative) while
// |T| < 2^10, far below a 16-bit output's own rounding (f16: 4.9e-4, bf16: 3.9e-3) but not a float's, so
// it is for 16-bit y only. applies() is false for larger |T| and for rows whose T is not finite (all -inf,
// NaN, +inf): callers then keep the two-step form and its exact special values.
struct FoldedSoftmaxExp {
    float scaled_log_sum_exp;  // T
    __device__ __forceinline__ FoldedSoftmaxExp(float row_max, float row_sum)
        : scaled_log_sum_exp(fmaf(row_max, kLog2e, log2f(row_sum))) {}
    __device__ __forceinline__ bool applies() const { return fabsf(scaled_log_sum_exp) < 0x1p10f; }
    __device__ __forceinline__ float operator()(float v) const { return exp2_approx(fmaf(v, kLog2e, -scaled_log_sum_exp)); }
    // The same for a value held before a scale s (multiplier: s * log2(e); ScaledShiftedExpFast).
    __device__ __forceinline__ float of_scaled(float v, float multiplier) const {
        return exp2_approx(fmaf(v, multiplier, -scaled_log_sum_exp));
    }
};

// 1 / sum for a softmax sum, in one MUFU.RCP (~1 ulp), where `1 / v` compiles to a full division with a
// slow path. Safe for the sums it is given: they are >= 1/2 (the max element alone adds 2^r >= 1/2), 0
// for an all -inf row (inf: the row becomes NaN, as it must), or NaN; never denormal.
__device__ __forceinline__ float reciprocal(float v) {
    float inverse;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(inverse) : "f"(v));
    return inverse;
}
__device__ __forceinline__ double reciprocal(double v) { return 1.0 / v; }
__device__ __forceinline__ float log_of(float v) { return logf(v); }
__device__ __forceinline__ double log_of(double v) { return log(v); }

// max that propagates NaN from either side (fmaxf drops it): a NaN anywhere poisons the row.
template <class C>
__device__ __forceinline__ C max_nan(C a, C b) {
    return (a > b || a != a) ? a : b;
}

// max that may drop a NaN (one FMNMX instead of three instructions). Kernels that use it carry NaN through
// the sum instead: every value is exponentiated relative to the max, so a NaN (or +inf: inf - inf) always
// reaches the sum, and a NaN sum makes every output NaN.
__device__ __forceinline__ float max_skip_nan(float a, float b) { return fmaxf(a, b); }
__device__ __forceinline__ double max_skip_nan(double a, double b) { return fmax(a, b); }

// Running max of 16-bit elements taken two at a time in the input dtype: one HMNMX2 per pair instead of
// two widenings and two FMNMX (a max never rounds, so the result is exact). Like max_skip_nan it drops a
// NaN (the sum carries it). Packs of 16-bit elements only (their pairs are 4-byte aligned). Used by the
// spatial tiles' max pass and the online statistics; not by block-regs, whose packed 16 -> 16 instances
// lost with it (performance.md#shared-arithmetic).
template <class X>
struct PairOf;  // the two-element type of a 16-bit dtype, and its (-inf, -inf)
template <>
struct PairOf<__nv_bfloat16> {
    using type = __nv_bfloat162;
    static __device__ __forceinline__ type neg_inf() {
        return __halves2bfloat162(__ushort_as_bfloat16(0xFF80u), __ushort_as_bfloat16(0xFF80u));
    }
};
template <>
struct PairOf<__half> {
    using type = __half2;
    static __device__ __forceinline__ type neg_inf() {
        return __halves2half2(__ushort_as_half(0xFC00u), __ushort_as_half(0xFC00u));
    }
};

template <class X>
struct PairedMax {
    typename PairOf<X>::type max = PairOf<X>::neg_inf();
    __device__ __forceinline__ void add(typename PairOf<X>::type pair) { max = __hmax2(max, pair); }
    __device__ __forceinline__ float low() const { return __low2float(max); }    // of the first elements
    __device__ __forceinline__ float high() const { return __high2float(max); }  // of the second elements
    __device__ __forceinline__ float result() const { return max_skip_nan(low(), high()); }
};

// The pairs of a pack of 16-bit elements (pair k: elements 2k and 2k + 1).
template <class X, int kPack>
__device__ __forceinline__ typename PairOf<X>::type pair_of(const Packed<X, kPack>& pack, int k) {
    static_assert(kPack % 2 == 0, "whole pairs");
    return reinterpret_cast<const typename PairOf<X>::type*>(pack.value)[k];
}

// Adds every pair of a pack of 16-bit elements to one PairedMax.
template <class X, int kPack>
__device__ __forceinline__ void add_pairs(PairedMax<X>& running, const Packed<X, kPack>& pack) {
#pragma unroll
    for (int k = 0; k < kPack / 2; ++k) running.add(pair_of(pack, k));
}

// Softmax statistics of a set of values: `max` and `sum` of exp(v - max). Empty or all -inf: (-inf, 0).
// Invariant: when max is +inf or NaN, sum is NaN (the row's outputs are NaN, as in the reference).
template <class C>
struct Stats {
    C max;
    C sum;
};

// Statistics another CTA of this grid wrote during this launch: loaded from L2 (ld.global.cg), never
// from this SM's L1, which is not coherent with other SMs' writes. One vector load for both fields, so
// `source` must be aligned to sizeof(Stats<C>) (the workspace is 16-byte aligned and holds whole Stats).
// Volatile: with two scalar loads the compiler sank the sum's into combine()'s branch on the max, a second
// round trip to L2 per partial; a volatile load also stays where it is written, ahead of any fold
// (performance.md#grid-regs).
template <class C>
__device__ __forceinline__ Stats<C> load_stats_uncached(const Stats<C>* source) {
    static_assert(std::is_same_v<C, float> || std::is_same_v<C, double>, "compute types");
    Stats<C> loaded;
    if constexpr (std::is_same_v<C, float>) {
        asm volatile("ld.global.cg.v2.f32 {%0, %1}, [%2];" : "=f"(loaded.max), "=f"(loaded.sum) : "l"(source) : "memory");
    } else {
        asm volatile("ld.global.cg.v2.f64 {%0, %1}, [%2];" : "=d"(loaded.max), "=d"(loaded.sum) : "l"(source) : "memory");
    }
    return loaded;
}

template <class C>
__device__ __forceinline__ Stats<C> empty_stats() {
    return {neg_inf<C>(), C(0)};
}

// exp(old_max - new_max), exact 1 when equal so that two -inf maxima do not make NaN.
template <class C>
__device__ __forceinline__ C rescale(C old_max, C new_max) {
    return old_max == new_max ? C(1) : exp_of(old_max - new_max);
}

template <class C>
__device__ __forceinline__ Stats<C> combine(Stats<C> a, Stats<C> b) {
    const C max = max_nan(a.max, b.max);
    if (max == neg_inf<C>()) return {max, C(0)};
    return {max, a.sum * rescale(a.max, max) + b.sum * rescale(b.max, max)};
}

// What the values given to add_group and add_chunk are: z itself, exponentiated relative to one shift. A body
// that holds x where z = s * x (a scale folded into the exps) passes its input's InputValues instead
// (options.cuh): its maxima turned into z's units, its exps taking s in their multiplier.
struct ZValues {
    template <class C>
    __device__ __forceinline__ C to_shift(C values_max) const {
        return values_max;
    }
    template <class C, class Body>
    __device__ __forceinline__ void with_exp(C shift, Body&& body) const {
        with_shifted_exp(shift, body);
    }
};

// Adds a group of values whose max is group_max (in z's units) to running statistics, with one rescale of the
// running sum: sum_exps(exp) returns the group's sum of exp(v) for the exp functor it is given (relative to the
// new max), `held` what the values are (ZValues: z). The group is summed on its own first: far fewer additions
// into the long-running sum.
template <class C, class SumExps, class Held = ZValues>
__device__ __forceinline__ void add_group(Stats<C>& stats, C group_max, const SumExps& sum_exps, const Held& held = {}) {
    const C max = max_nan(stats.max, group_max);
    if (max == neg_inf<C>()) return;  // everything so far is -inf: nothing to add
    C group_sum = 0;
    C unbias = 1;
    held.with_exp(max, [&](const auto& exp) {
        group_sum = sum_exps(exp);
        unbias = exp.unbias();
    });
    stats = {max, stats.sum * rescale(stats.max, max) + group_sum * unbias};
}

// Adds N values (padding must be -inf) to running statistics with one rescale per chunk; `held` says what the
// values are (ZValues: z).
template <int N, class C, class Held = ZValues>
__device__ __forceinline__ void add_chunk(Stats<C>& stats, const C* values, const Held& held = {}) {
    C chunk_max = values[0];
#pragma unroll
    for (int k = 1; k < N; ++k) chunk_max = max_nan(chunk_max, values[k]);
    add_group(
        stats, held.to_shift(chunk_max),
        [&](const auto& exp) {
            C sum = 0;
#pragma unroll
            for (int k = 0; k < N; ++k) sum += exp(values[k]);  // +inf - +inf = NaN poisons, as it must
            return sum;
        },
        held);
}

// A thread's statistics over a strided loop, j = first, first + stride, ... < end, summed in two levels:
// step(j, segment) adds loop step j's values to a segment's statistics, and every kSegmentSteps steps the
// segment joins the thread's total. Added straight into one running sum, a long loop's float32 roundings
// can all lean one way (a column padded with one constant adds the same group sum at every step) and grow
// with the step count, past f32's tolerance at a few thousand steps a thread (performance.md#spatial-online).
// In two levels no sum takes more than kSegmentSteps + steps / kSegmentSteps additions. Nested loops
// rather than a step counter: nothing is added to the inner loop.
constexpr int kSegmentSteps = 64;

template <class C, class Step>
__device__ __forceinline__ Stats<C> segmented_stats(std::int64_t first, std::int64_t end, std::int64_t stride,
                                                   const Step& step) {
    const std::int64_t segment_span = stride * kSegmentSteps;
    const auto segment_from = [&](std::int64_t segment_first) {
        const std::int64_t segment_end = end - segment_first < segment_span ? end : segment_first + segment_span;
        Stats<C> segment = empty_stats<C>();
        for (std::int64_t j = segment_first; j < segment_end; j += stride) step(j, segment);
        return segment;
    };
    // The first segment is the total so far, so a loop of one segment (most rows) pays no combine, which is
    // measurable on short loops (performance.md#split-row-chunks-and-kernels).
    Stats<C> total = segment_from(first);
    for (std::int64_t segment_first = first + segment_span; segment_first < end; segment_first += segment_span) {
        total = combine(total, segment_from(segment_first));
    }
    return total;
}

// segmented_stats for kColumns statistics side by side (a thread's columns of one vector): step(j, segment)
// adds loop step j's values to each of segment's columns. (A separate function: routing the one-column
// form through this one cost the general and online kernels registers and changed their code.)
template <int kColumns, class C>
struct ColumnStats {
    Stats<C> column[kColumns];
};

template <int kColumns, class C, class Step>
__device__ __forceinline__ ColumnStats<kColumns, C> segmented_column_stats(std::int64_t first, std::int64_t end,
                                                                          std::int64_t stride, const Step& step) {
    const std::int64_t segment_span = stride * kSegmentSteps;
    const auto segment_from = [&](std::int64_t segment_first) {
        const std::int64_t segment_end = end - segment_first < segment_span ? end : segment_first + segment_span;
        ColumnStats<kColumns, C> segment;
#pragma unroll
        for (int k = 0; k < kColumns; ++k) segment.column[k] = empty_stats<C>();
        for (std::int64_t j = segment_first; j < segment_end; j += stride) step(j, segment.column);
        return segment;
    };
    ColumnStats<kColumns, C> total = segment_from(first);
    for (std::int64_t segment_first = first + segment_span; segment_first < end; segment_first += segment_span) {
        const ColumnStats<kColumns, C> segment = segment_from(segment_first);
#pragma unroll
        for (int k = 0; k < kColumns; ++k) total.column[k] = combine(total.column[k], segment.column[k]);
    }
    return total;
}

// The output for one shifted value v - max, given 1/sum or log(sum).
template <class C>
__device__ __forceinline__ C softmax_output(C shifted, C inverse_sum, C log_sum, bool log_mode) {
    return log_mode ? shifted - log_sum : exp_of(shifted) * inverse_sum;
}

}  // namespace smx::cuda
