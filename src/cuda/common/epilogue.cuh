// epilogue.cuh - what a row kernel's body is templated on besides its traffic pattern: the input transform
// applied to each element as it enters the compute type, and the output formula written once the row's
// statistics (max, sum of exp(v - max)) are known. Both are types whose members inline into the body, so a
// body's SASS is what it would be with the formulas written in place.
//
// The forward softmax formulas are the first of them; an operator that needs another input (a scale, a
// mask) or another output (statistics only, a gathered log-probability, a loss gradient) adds a type here and
// instantiates the bodies with it.
#pragma once

#include "cuda/common/math.cuh"

namespace smx::cuda {

// The input as it is: the element's value in the compute type. (kRaw: bodies that reduce the max on the input
// dtype's packed pairs may do so only for inputs taken as they are.)
struct PlainInput {
    static constexpr bool kRaw = true;
    template <class C>
    __device__ __forceinline__ C operator()(C value) const {
        return value;
    }
};

// Output formulas for bodies that hold a row's elements while its statistics are reduced. kKeepsExp: the body
// keeps each element's exp(v - max) (its sum's common factor 2^r included) instead of v. row_factor turns the
// row's sum of those exps and the factor's inverse (unbias) into what element() takes.

// softmax: e / sum, the exps' common factor cancelling.
struct SoftmaxOutput {
    static constexpr bool kKeepsExp = true;
    template <class C>
    __device__ __forceinline__ static C row_factor(C sum, C /*unbias*/) {
        return reciprocal(sum);
    }
    template <class C>
    __device__ __forceinline__ static C element(C held_exp, C /*max*/, C factor) {
        return held_exp * factor;
    }
};

// log-softmax: (v - max) - log(sum), the sum without the exps' common factor.
struct LogSoftmaxOutput {
    static constexpr bool kKeepsExp = false;
    template <class C>
    __device__ __forceinline__ static C row_factor(C sum, C unbias) {
        return log_of(sum * unbias);
    }
    template <class C>
    __device__ __forceinline__ static C element(C held_value, C max, C factor) {
        return (held_value - max) - factor;
    }
};

// Output formulas for bodies that read x again once the statistics are known (two passes): the element from its
// value. ForwardOutput takes the mode at run time, so one instance serves softmax and log-softmax.
struct ForwardOutput {
    bool log;
    // log(sum) where the formula needs it, else 0 (not computed).
    template <class C>
    __device__ __forceinline__ C log_sum_of(C sum) const {
        return log ? log_of(sum) : C(0);
    }
    template <class C>
    __device__ __forceinline__ C element_from_value(C value, C max, C inverse_sum, C log_sum) const {
        return softmax_output(value - max, inverse_sum, log_sum, log);
    }
    // The same with the exp taken by the body's shifted exp functor: exp(value) * factor, factor = the
    // functor's unbias / sum.
    template <class C, class Exp>
    __device__ __forceinline__ C element_from_value(C value, C max, C log_sum, const Exp& exp, C factor) const {
        return log ? (value - max) - log_sum : exp(value) * factor;
    }
};

// ---- backward: the gradient formulas ---------------------------------------------------------------
// A backward body reduces one statistic per row, the sum of term(dy, y) over it, then writes
// element(dy, y, sum). Written exactly as the formulas, so IEEE special values come out as they do from them:
// a NaN or an infinity in a term reaches the sum, and 0 * inf stays NaN.

// exp(v) for a log-softmax gradient's weights: 2^(v log2(e)) from the SFU for float (one FMUL and one
// MUFU.EX2, ~3 ulp for |v| < 1, the product's rounding adding ~|v| 2^-24 of relative error beyond), which
// keeps exp's special values: -inf -> 0, +inf -> +inf, NaN -> NaN, overflow -> +inf (exp_of's exact split
// can make NaN of arguments past 88: its callers take exps of v - max <= 0 only).
__device__ __forceinline__ float gradient_exp(float v) { return exp2_approx(v * kLog2e); }
__device__ __forceinline__ double gradient_exp(double v) { return exp(v); }

// softmax: dx = y * (dy - sum(dy * y)).
struct SoftmaxGradient {
    template <class C>
    __device__ __forceinline__ static C term(C dy, C y) {
        return dy * y;
    }
    template <class C>
    __device__ __forceinline__ static C element(C dy, C y, C sum) {
        return y * (dy - sum);
    }
    // element() split for bodies that hold y as floats while the sum is reduced: weight(y) may be taken then,
    // element_of_weight(dy, weight(y), sum) once the sum is known.
    template <class C>
    __device__ __forceinline__ static C weight(C y) {
        return y;
    }
    template <class C>
    __device__ __forceinline__ static C element_of_weight(C dy, C weight, C sum) {
        return element(dy, weight, sum);
    }
};

// log-softmax: dx = dy - exp(y) * sum(dy).
struct LogSoftmaxGradient {
    template <class C>
    __device__ __forceinline__ static C term(C dy, C /*y*/) {
        return dy;
    }
    template <class C>
    __device__ __forceinline__ static C element(C dy, C y, C sum) {
        return element_of_weight(dy, weight(y), sum);
    }
    template <class C>
    __device__ __forceinline__ static C weight(C y) {
        return gradient_exp(y);
    }
    template <class C>
    __device__ __forceinline__ static C element_of_weight(C dy, C weight, C sum) {
        return dy - weight * sum;
    }
};

// Both, the mode chosen at run time (a select per element): for the general family, one instance per dtype
// combination.
struct GradientOutput {
    bool log;
    template <class C>
    __device__ __forceinline__ C term(C dy, C y) const {
        return log ? LogSoftmaxGradient::term(dy, y) : SoftmaxGradient::term(dy, y);
    }
    template <class C>
    __device__ __forceinline__ C element(C dy, C y, C sum) const {
        return log ? LogSoftmaxGradient::element(dy, y, sum) : SoftmaxGradient::element(dy, y, sum);
    }
};

}  // namespace smx::cuda
