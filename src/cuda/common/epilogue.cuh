// epilogue.cuh - what a row kernel's body is templated on besides its traffic pattern: the input transform
// applied to each element as it enters the compute type, and the output formula written once the row's
// statistics (max, sum of exp(v - max)) are known. Both are types whose members inline into the body, so a
// body's SASS is what it would be with the formulas written in place.
//
// The forward softmax formulas are the first of them; an operator that needs another input (a scale, a
// mask) or another output (statistics only, a gathered log-probability, a loss gradient) adds a type here and
// instantiates the bodies with it.
#pragma once

#include <type_traits>

#include "cuda/common/math.cuh"

namespace smx::cuda {

// The input as it is: the element's value in the compute type. kRaw: the value is the input element itself,
// so a body may reduce the max on the input dtype's packed pairs (PairedMax); bodies widen the pairs and
// take the max of the transformed values for any input whose kRaw is false.
struct PlainInput {
    static constexpr bool kRaw = true;
    static constexpr bool kPerRow = false;  // nothing bound per row (options.cuh's RowsOptionsInput binds it)
    template <class Params>
    __device__ __forceinline__ static PlainInput of(const Params& /*args*/) {
        return {};
    }
    template <class C>
    __device__ __forceinline__ C operator()(C value) const {
        return value;
    }
};

// ---- output formulas ----------------------------------------------------------------------------------
// A formula with its mode fixed at compile time (SoftmaxOutput, LogSoftmaxOutput) has:
//   kUsesExp      whether the output is a function of exp(v - max) (softmax) rather than of v - max
//                 (log-softmax): a body that holds a row keeps each element's exp instead of v, a body that
//                 reads v again computes the exp there;
//   row_factor    what element() takes from the row, from `sum`, the row's sum of exp(v - max), and `scale`,
//                 a callable giving what turns the exps the body holds into exp(v - max), called only by
//                 formulas of exps (softmax needs the two only up to a common factor, which cancels;
//                 log-softmax needs the sum exact);
//   element       the output from what the body holds (the exp where kUsesExp, else v), max and the factor;
//   element_from_value  the same from v and the body's exp functor relative to max (two-pass bodies).
// And from FixedFormula: of(args), uses_exp() and visit(), which ForwardOutput has too, so that a body can
// take either.

template <class Formula>
struct FixedFormula {
    // The formula as a kernel's parameters ask for it (a fixed formula takes nothing from them).
    template <class Params>
    __device__ __forceinline__ static Formula of(const Params& /*args*/) {
        return {};
    }
    __device__ __forceinline__ static constexpr bool uses_exp() { return Formula::kUsesExp; }
    // body(formula) or body(formula, factor): the formula of this mode, for a body that runs one loop per mode.
    template <class Body>
    __device__ __forceinline__ void visit(Body&& body) const {
        body(Formula{});
    }
    template <class C, class Body>
    __device__ __forceinline__ void visit(C factor, Body&& body) const {
        body(Formula{}, factor);
    }
};

// softmax: e / sum.
struct SoftmaxOutput : FixedFormula<SoftmaxOutput> {
    static constexpr bool kUsesExp = true;
    template <class C, class Scale>
    __device__ __forceinline__ static C row_factor(C sum, const Scale& scale) {
        return scale() * reciprocal(sum);
    }
    template <class C>
    __device__ __forceinline__ static C element(C held_exp, C /*max*/, C factor) {
        return held_exp * factor;
    }
    template <class C, class Exp>
    __device__ __forceinline__ static C element_from_value(C value, C max, C factor, const Exp& exp) {
        return element(exp(value), max, factor);
    }
    // The element from v in one exp, 1 / sum folded into its exponent (FoldedSoftmaxExp, float only): for
    // outputs whose own rounding hides the error that adds (16-bit), where its applies() holds.
    __device__ __forceinline__ static FoldedSoftmaxExp folded_exp(float max, float sum) {
        return FoldedSoftmaxExp(max, sum);
    }
};

// log-softmax: (v - max) - log(sum).
struct LogSoftmaxOutput : FixedFormula<LogSoftmaxOutput> {
    static constexpr bool kUsesExp = false;
    template <class C, class Scale>
    __device__ __forceinline__ static C row_factor(C sum, const Scale& /*scale*/) {
        return log_of(sum);
    }
    template <class C>
    __device__ __forceinline__ static C element(C held_value, C max, C factor) {
        return (held_value - max) - factor;
    }
    template <class C, class Exp>
    __device__ __forceinline__ static C element_from_value(C value, C max, C factor, const Exp& /*exp*/) {
        return element(value, max, factor);
    }
};

// ForwardOutput's row factor: each formula's, the other one 0 (not computed).
template <class C>
struct ForwardFactor {
    C log_sum;      // log-softmax's
    C inverse_sum;  // softmax's (its scale included)
};

// Softmax or log-softmax with the mode taken at run time, so one instance serves both. visit() branches
// once into the mode's fixed formula, for a body that runs one loop per mode; element() tests the mode per
// element, for a body that keeps one loop (fewer registers in some, at a select per element).
struct ForwardOutput {
    bool log;

    template <class Params>
    __device__ __forceinline__ static ForwardOutput of(const Params& args) {
        return {args.log_mode != 0};
    }
    __device__ __forceinline__ bool uses_exp() const { return !log; }
    template <class Body>
    __device__ __forceinline__ void visit(Body&& body) const {
        if (log) {
            body(LogSoftmaxOutput{});
        } else {
            body(SoftmaxOutput{});
        }
    }
    template <class C, class Body>
    __device__ __forceinline__ void visit(const ForwardFactor<C>& factor, Body&& body) const {
        if (log) {
            body(LogSoftmaxOutput{}, factor.log_sum);
        } else {
            body(SoftmaxOutput{}, factor.inverse_sum);
        }
    }
    // row_factor and element as the fixed formulas have them, for bodies that hold the row.
    template <class C, class Scale>
    __device__ __forceinline__ ForwardFactor<C> row_factor(C sum, const Scale& scale) const {
        const C log_sum = log ? LogSoftmaxOutput::row_factor(sum, scale) : C(0);
        const C inverse_sum = log ? C(0) : SoftmaxOutput::row_factor(sum, scale);
        return {log_sum, inverse_sum};
    }
    // Both elements, then a select: as a branch, the compiler merged it with the body's next branch on the
    // mode (block-regs' edge element).
    template <class C>
    __device__ __forceinline__ C element(C held, C max, const ForwardFactor<C>& factor) const {
        const C log_element = LogSoftmaxOutput::element(held, max, factor.log_sum);
        const C exp_element = SoftmaxOutput::element(held, max, factor.inverse_sum);
        return log ? log_element : exp_element;
    }

    // For bodies that read x again once the statistics are known (two passes): the element from its value.
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
    // functor's unbias / sum. (Written out: built from the fixed formulas' members, it compiled into a
    // branch where this is a select.)
    template <class C, class Exp>
    __device__ __forceinline__ C element_from_value(C value, C max, C log_sum, const Exp& exp, C factor) const {
        return log ? (value - max) - log_sum : exp(value) * factor;
    }
};

// Whether a formula's mode is fixed at compile time (it has kUsesExp).
template <class Output>
constexpr bool kModeFixed = std::is_base_of_v<FixedFormula<Output>, Output>;

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
