// options.cuh - the softmax options as an input transform and an output formula (the epilogue types'
// style, common/epilogue.cuh): a row's input binds the row's scale, mask and causal window, says which
// elements are kept and turns each kept x into z = scale * x + additive mask; the output writes excluded
// elements and rows with nothing to normalize. Semantics: ops/softmax/options.hpp.
//
// A body takes any input through bind_row(input, row): inputs that are the same for every row (PlainInput)
// keep every element (kMayExclude false, so a body's exclusion code compiles away), while OptionsInput binds
// the row's option operands.
#pragma once

#include <cstdint>
#include <type_traits>

#include "cuda/common/epilogue.cuh"
#include "cuda/common/math.cuh"
#include "cuda/common/options.hpp"

namespace smx::cuda {

template <class C>
__device__ __forceinline__ C quiet_nan() {
    if constexpr (sizeof(C) == 4) return __int_as_float(0x7fffffff);
    else return __longlong_as_double(0x7fffffffffffffffLL);
}

// A row input of an input transform that is the same for every row.
template <class Input>
struct EveryRowInput {
    static constexpr bool kMayExclude = false;
    const Input& input;
    __device__ __forceinline__ bool kept(std::int64_t) const { return true; }
    template <class C>
    __device__ __forceinline__ C operator()(C value, std::int64_t) const {
        return input(value);
    }
};

template <class Input>
__device__ __forceinline__ EveryRowInput<Input> bind_row(const Input& input, std::int64_t) {
    return {input};
}

// An additive mask element in the compute type, whatever its dtype (read at run time: one instance per dtype
// pair rather than one per mask dtype too).
template <class C>
__device__ __forceinline__ C load_additive(const void* mask, int dtype, std::int64_t offset) {
    switch (dtype) {
        case SMX_DTYPE_F16: return C(to_compute(static_cast<const __half*>(mask)[offset]));
        case SMX_DTYPE_BF16: return C(to_compute(static_cast<const __nv_bfloat16*>(mask)[offset]));
        case SMX_DTYPE_F32: return C(static_cast<const float*>(mask)[offset]);
        default: return C(static_cast<const double*>(mask)[offset]);
    }
}

// z's product and sum each rounded on its own, never fused into an FMA: the compiler fuses or not by the code
// around them, and batch invariance needs every kernel that computes z to get the same bits.
__device__ __forceinline__ float rounded_product(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double rounded_product(double a, double b) { return __dmul_rn(a, b); }
__device__ __forceinline__ float rounded_sum(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ double rounded_sum(double a, double b) { return __dadd_rn(a, b); }

// One row's options: which elements are kept, and z for a kept one.
template <class C>
struct OptionsRowInput {
    static constexpr bool kMayExclude = true;
    const OptionsParams& options;
    std::int64_t mask_offset;  // the row's mask start
    std::int64_t last_kept;    // the causal window's last kept element (row_len - 1 without causal; -1: none)
    C scale;

    __device__ __forceinline__ bool kept(std::int64_t j) const {
        if (j > last_kept) return false;
        if (options.mask_kind != 1) return true;
        return static_cast<const unsigned char*>(options.mask)[mask_offset + j * options.mask_axis_stride] != 0;
    }
    __device__ __forceinline__ C operator()(C value, std::int64_t j) const {
        const C scaled = options.scale_kind != 0 ? rounded_product(scale, value) : value;
        if (options.mask_kind != 2) return scaled;
        return rounded_sum(scaled, load_additive<C>(options.mask, options.mask_dtype, mask_offset + j * options.mask_axis_stride));
    }
};

// Calls visit(std::integral_constant<RowsOptionSet, S>) for set S = `set`: the warp getter's one switch over
// the sets.
template <class Visitor>
const void* visit_option_set(RowsOptionSet set, Visitor visit) {
    switch (set) {
        case RowsOptionSet::Unmasked: return visit(std::integral_constant<RowsOptionSet, RowsOptionSet::Unmasked>{});
        case RowsOptionSet::Keep: return visit(std::integral_constant<RowsOptionSet, RowsOptionSet::Keep>{});
        case RowsOptionSet::AdditiveOfX: return visit(std::integral_constant<RowsOptionSet, RowsOptionSet::AdditiveOfX>{});
        case RowsOptionSet::Any: return visit(std::integral_constant<RowsOptionSet, RowsOptionSet::Any>{});
    }
    return nullptr;
}

// The options' input transform for rows located in an index space (options.hpp): binds row r by its multi-index.
template <class C>
struct OptionsInput {
    const OptionsParams& options;
    int index_ndim;
    const std::int64_t* index_shape;
    std::int64_t row_len;
};

// Row r's options once its mask and per-row scale starts are known.
template <class C>
__device__ __forceinline__ OptionsRowInput<C> bind_row_at(const OptionsInput<C>& input, std::int64_t row,
                                                        std::int64_t mask_offset, std::int64_t scale_offset) {
    const OptionsParams& options = input.options;
    std::int64_t last_kept = input.row_len - 1;
    if (options.causal != 0) {
        const std::int64_t query = (row / options.causal_row_divisor) % options.causal_queries;
        const std::int64_t last = query + options.causal_offset;  // the offset is clamped: no overflow
        last_kept = last < last_kept ? (last < -1 ? -1 : last) : last_kept;
    }
    C scale = C(1);
    if (options.scale_kind == 1) scale = C(options.scalar_scale);
    if (options.scale_kind == 2) scale = C(options.scale[scale_offset]);
    return {options, mask_offset, last_kept, scale};
}

template <class C>
__device__ __forceinline__ OptionsRowInput<C> bind_row(const OptionsInput<C>& input, std::int64_t row) {
    std::int64_t mask_offset = 0;
    std::int64_t scale_offset = 0;
    std::int64_t rest = row;
    for (int d = input.index_ndim - 1; d >= 0; --d) {
        const std::int64_t index = rest % input.index_shape[d];
        rest /= input.index_shape[d];
        mask_offset += index * input.options.mask_index_strides[d];
        scale_offset += index * input.options.scale_index_strides[d];
    }
    return bind_row_at(input, row, mask_offset, scale_offset);
}

// Row r of a Rows problem (index_ndim 1): its starts are r times each operand's row stride, no divmod.
template <class C>
__device__ __forceinline__ OptionsRowInput<C> bind_rows_row(const OptionsInput<C>& input, std::int64_t row) {
    return bind_row_at(input, row, row * input.options.mask_index_strides[0], row * input.options.scale_index_strides[0]);
}

// ---- the fast row families (Rows layout: RowsOptionsParams) ------------------------------------------
// Their bodies take an input type with kPerRow: PlainInput's is false (every element kept, the body's code as
// it was), RowsOptionsInput binds each row's scale, mask row and causal window, and turns each x into z.

// Bytes of an additive mask element (F16, BF16, F32 or F64).
__device__ __forceinline__ std::int64_t additive_mask_bytes(int dtype) {
    return dtype == SMX_DTYPE_F16 || dtype == SMX_DTYPE_BF16 ? 2 : dtype == SMX_DTYPE_F32 ? 4 : 8;
}

// Which of the unmasked set's options a body reads at run time: the scale's kind and the causal window (every
// instance), or, fixed at compile time in the warp family's 16-bit rows, whose bodies are short enough that the
// run-time tests, the scalar's conversion and the multiply by 1 without a scale cost them (performance.md,
// "Session 10: warpopt and decodeopt3"): no scale (z = x, as 1 * x is; the window read at run time), or each row's
// own scale without a causal window.
enum class UnmaskedForm { RunTime, NoScale, RowScaleNoWindow };

// One row's options on the fast families: elements at or past `read_len` are excluded and never read (the
// causal window; the plain rows' edge handling bounds the reads), the others become z = scale * x + additive
// mask, or -inf where a keep mask excludes them. An excluded element's -inf then gives 0 (log: -inf) through
// the plain formulas, NaN in a row whose sum is NaN, and NaN in a row with nothing to normalize, as the
// reference has it; zero_rows is applied at the write (empty_row_value). kSet (RowsOptionSet) is the mask
// form the instance is compiled for, X its x type (an AdditiveOfX mask's element type). kFoldScale (unmasked
// set only): z is x here, where the body holds x and folds the scale into its exps (RowsOptionsInput), or where
// the rows have no scale (UnmaskedForm::NoScale).
template <class C, RowsOptionSet kSet, class X, bool kFoldScale = false>
struct RowsOptionsRow {
    const RowsOptionsParams& options;
    const unsigned char* mask_row;  // the row's mask bytes (either kind); NULL without a mask
    std::int64_t read_len;
    C scale;

    // The scale applied to a value, or the value as it is where the exps take the scale. The product is rounded
    // on its own: fused into the exact exp's subtraction of the shift (z - max), its rounding error, as large as
    // z's ulp, would become the exponent (exp of +-1e23 at a scale of 1e30).
    __device__ __forceinline__ C scaled(C value) const {
        if constexpr (kFoldScale) return value;
        else return rounded_product(scale, value);
    }
    __device__ __forceinline__ C operator()(C value, std::int64_t j) const {
        if constexpr (kSet == RowsOptionSet::Unmasked) {
            return scaled(value);
        } else if constexpr (kSet == RowsOptionSet::Keep) {
            return mask_row[j] != 0 ? rounded_product(scale, value) : neg_inf<C>();
        } else if constexpr (kSet == RowsOptionSet::AdditiveOfX) {
            return scale * value + C(to_compute(reinterpret_cast<const X*>(mask_row)[j]));
        } else {
            if (options.mask_kind == 1 && mask_row[j] == 0) return neg_inf<C>();
            const C scaled = options.scale_kind != 0 ? rounded_product(scale, value) : value;
            if (options.mask_kind != 2) return scaled;
            return scaled + load_additive<C>(mask_row, options.mask_dtype, j);
        }
    }
};

// ---- masks read a pack at a time (block-regs) ---------------------------------------------------------
// A pack of x's values meets the same number of mask elements; reading them when the pack is widened keeps
// no per-element option state across the body's loops (the 32-value instances had no registers for it).

// kCount consecutive mask elements of type M, aligned for one 16-byte (or the whole group's, if smaller) load.
template <class M, int kCount>
struct MaskGroup {
    static constexpr int kBytes = kCount * static_cast<int>(sizeof(M));
    static constexpr int kUnitBytes = kBytes < 16 ? kBytes : 16;
    alignas(kUnitBytes) M value[kCount];
};

// Reads the group at `first`: whole units (ld.global.nc: the mask is read-only for the call) where `vector`
// says the row's groups are aligned to them, else element by element.
template <class M, int kCount>
__device__ __forceinline__ MaskGroup<M, kCount> load_mask_group(const M* first, bool vector) {
    using Group = MaskGroup<M, kCount>;
    using Unit = std::conditional_t<Group::kUnitBytes == 16, uint4, std::conditional_t<Group::kUnitBytes == 8, uint2, unsigned>>;
    static_assert(sizeof(Unit) == Group::kUnitBytes && Group::kBytes % Group::kUnitBytes == 0, "whole units");
    Group group;
    if (vector) {
        const Unit* units = reinterpret_cast<const Unit*>(first);
#pragma unroll
        for (int u = 0; u < Group::kBytes / Group::kUnitBytes; ++u) reinterpret_cast<Unit*>(group.value)[u] = __ldg(units + u);
    } else {
#pragma unroll
        for (int k = 0; k < kCount; ++k) group.value[k] = first[k];
    }
    return group;
}

// z of a pack without a mask: the scaled value as it is.
struct NoMaskPack {
    template <class C>
    __device__ __forceinline__ C operator()(C scaled, int) const {
        return scaled;
    }
};

// A pack's keep mask bytes: -inf where they exclude.
template <int kPack>
struct KeepMaskPack {
    MaskGroup<unsigned char, kPack> keep;
    template <class C>
    __device__ __forceinline__ C operator()(C scaled, int k) const {
        return keep.value[k] != 0 ? scaled : neg_inf<C>();
    }
};

// A pack's additive mask elements of type M, added to the scaled values.
template <class M, int kPack>
struct AdditiveMaskPack {
    MaskGroup<M, kPack> add;
    template <class C>
    __device__ __forceinline__ C operator()(C scaled, int k) const {
        return scaled + C(to_compute(add.value[k]));
    }
};

// The additive mask pack of kPack elements a kernel staged in shared memory as a Packed (block-regs' f32 x at 32
// values), for the widen that applies loaded packs.
template <class M, int kPack>
__device__ __forceinline__ AdditiveMaskPack<M, kPack> additive_mask_pack_of(const Packed<M, kPack>& staged) {
    AdditiveMaskPack<M, kPack> pack;
#pragma unroll
    for (int k = 0; k < kPack; ++k) pack.add.value[k] = staged.value[k];
    return pack;
}

// Reads the mask pack of pack `pack` of a slice's body (one reader per mask kind and type).
template <class Pack, class M, int kPack>
struct MaskPackReader {
    const M* body;  // the mask element of the body's first element; unused without a mask
    bool vector;    // the body's mask groups are aligned for whole-unit loads
    __device__ __forceinline__ Pack operator()(int pack) const {
        if constexpr (std::is_same_v<Pack, NoMaskPack>) {
            return {};
        } else {
            return {load_mask_group<M, kPack>(body + pack * kPack, vector)};
        }
    }
};

// The reader of a row's mask packs of type Pack (elements M) for the body of a slice from row element
// body_begin on (a 16-byte boundary of x): its groups are aligned as x's packs when the first one is aligned to
// a whole unit.
template <class Pack, class M, int kPack>
__device__ __forceinline__ MaskPackReader<Pack, M, kPack> mask_pack_reader(const unsigned char* mask_row,
                                                                          std::int64_t body_begin) {
    const M* mask_body = reinterpret_cast<const M*>(mask_row) + body_begin;
    const bool vector = reinterpret_cast<std::uintptr_t>(mask_body) % MaskGroup<M, kPack>::kUnitBytes == 0;
    return {mask_body, vector};
}

// Calls body(reader) with the reader of the row's mask kind and type (uniform per launch: one loop per kind
// rather than a test per element; block-regs' any set) for the body of a slice from row element body_begin on.
template <int kPack, class C, RowsOptionSet kSet, class X, bool kFoldScale, class Body>
__device__ __forceinline__ void visit_mask_packs(const RowsOptionsRow<C, kSet, X, kFoldScale>& row, std::int64_t body_begin, const Body& body) {
    const auto typed = [&](auto pack_tag, auto type_tag) {
        using Pack = typename decltype(pack_tag)::type;
        using M = typename decltype(type_tag)::type;
        body(mask_pack_reader<Pack, M, kPack>(row.mask_row, body_begin));
    };
    if (row.options.mask_kind == 0) {
        typed(TypeTag<NoMaskPack>{}, TypeTag<unsigned char>{});
    } else if (row.options.mask_kind == 1) {
        typed(TypeTag<KeepMaskPack<kPack>>{}, TypeTag<unsigned char>{});
    } else {
        switch (row.options.mask_dtype) {
            case SMX_DTYPE_F16: typed(TypeTag<AdditiveMaskPack<__half, kPack>>{}, TypeTag<__half>{}); break;
            case SMX_DTYPE_BF16: typed(TypeTag<AdditiveMaskPack<__nv_bfloat16, kPack>>{}, TypeTag<__nv_bfloat16>{}); break;
            case SMX_DTYPE_F32: typed(TypeTag<AdditiveMaskPack<float, kPack>>{}, TypeTag<float>{}); break;
            default: typed(TypeTag<AdditiveMaskPack<double, kPack>>{}, TypeTag<double>{}); break;
        }
    }
}

// z of the kPack values of x at row elements col.. (col a multiple of kPack), in place: the row's mask read as
// one group (whole-unit loads where the row's mask is aligned to them: then so is every pack's group). The
// warp family's packs; Any reads its mask element by element.
template <int kPack, class C, RowsOptionSet kSet, class X, bool kFoldScale>
__device__ __forceinline__ void transform_pack(const RowsOptionsRow<C, kSet, X, kFoldScale>& row, C* pack, int col) {
    const auto apply = [&](auto type_tag, const auto& make_pack) {
        using M = typename decltype(type_tag)::type;
        const M* first = reinterpret_cast<const M*>(row.mask_row) + col;
        const bool vector = reinterpret_cast<std::uintptr_t>(row.mask_row) % MaskGroup<M, kPack>::kUnitBytes == 0;
        const auto mask = make_pack(load_mask_group<M, kPack>(first, vector));
#pragma unroll
        for (int k = 0; k < kPack; ++k) pack[k] = mask(row.scale * pack[k], k);
    };
    if constexpr (kSet == RowsOptionSet::Keep) {
        apply(TypeTag<unsigned char>{}, [](const auto& group) { return KeepMaskPack<kPack>{group}; });
    } else if constexpr (kSet == RowsOptionSet::AdditiveOfX) {
        apply(TypeTag<X>{}, [](const auto& group) { return AdditiveMaskPack<X, kPack>{group}; });
    } else {
#pragma unroll
        for (int k = 0; k < kPack; ++k) pack[k] = row(pack[k], col + k);
    }
}

// The options of the fast row families' instances of set kSet (x type X): binds each row's options.
// kFoldScale (the unmasked set's softmax where options.fold_scale): the body holds x, takes the max of x and
// turns it into z's (held_max_to_shift: s max(x) = max(s x) for s > 0), and exponentiates with the scale in the exp's
// multiplier (with_value_exp_form), so no element pays a multiply (performance.md, "options: scale folded").
// kFoldRowScale (with kFoldScale; block-regs' per-row fold): each row folds its own scale instead of the launch's
// (FoldedRowValues), in instances of their own, so the launch's fold compiles as it did without it.
// kForm (unmasked set only, without a fold): which options the body reads at run time (UnmaskedForm).
template <RowsOptionSet kSet, class X, bool kFoldScale = false, bool kFoldRowScale = false,
          UnmaskedForm kForm = UnmaskedForm::RunTime>
struct RowsOptionsInput {
    static constexpr bool kRaw = false;
    static constexpr bool kPerRow = true;
    static constexpr bool kFoldsScale = kFoldScale;
    static constexpr bool kFoldsRowScale = kFoldRowScale;
    // The warp family loads a pack that straddles the causal window whole: not the any set, whose transform reads
    // its mask element by element (past the window too) and whose registers it would cost.
    static constexpr bool kLoadsStraddlingPacks = kSet != RowsOptionSet::Any;
    using XType = X;
    static_assert(!kFoldScale || kSet == RowsOptionSet::Unmasked, "the masked sets multiply at the load");
    static_assert(!kFoldRowScale || kFoldScale, "a row's own fold is a fold");
    static_assert(kForm == UnmaskedForm::RunTime || (kSet == RowsOptionSet::Unmasked && !kFoldScale),
                  "a form fixed at compile time is the unmasked set's, its scale a multiply");
    const RowsOptionsParams& options;

    template <class Params>
    __device__ __forceinline__ static RowsOptionsInput of(const Params& args) {
        return {args.options};
    }

    // The launch's scale (1 without one): inputs that fold it have no per-row scale.
    template <class C>
    __device__ __forceinline__ C launch_scale() const {
        return options.scale_kind == 1 ? C(options.scalar_scale) : C(1);
    }

    // The row's type: z is x where the body folds the scale or the rows have none.
    template <class C>
    using Row = RowsOptionsRow<C, kSet, X, kFoldScale || kForm == UnmaskedForm::NoScale>;

    template <class C>
    __device__ __forceinline__ Row<C> bind(std::int64_t row, std::int64_t row_len) const {
        const unsigned char* mask_row = nullptr;
        if constexpr (kSet == RowsOptionSet::Keep || kSet == RowsOptionSet::AdditiveOfX) {
            constexpr std::int64_t kMaskSize = kSet == RowsOptionSet::Keep ? 1 : sizeof(X);
            mask_row = static_cast<const unsigned char*>(options.mask) + row * options.mask_row_stride * kMaskSize;
        } else if constexpr (kSet == RowsOptionSet::Any) {
            if (options.mask_kind != 0) {
                const std::int64_t mask_size = options.mask_kind == 1 ? 1 : additive_mask_bytes(options.mask_dtype);
                mask_row = static_cast<const unsigned char*>(options.mask) + row * options.mask_row_stride * mask_size;
            }
        }
        const std::int64_t window_len = read_len(row, row_len);
        C scale = C(1);
        if constexpr (kForm == UnmaskedForm::RowScaleNoWindow) {
            scale = C(options.scale[row * options.scale_row_stride]);
        } else if constexpr (kForm == UnmaskedForm::RunTime) {
            if (options.scale_kind == 1) scale = C(options.scalar_scale);
            if (options.scale_kind == 2) scale = C(options.scale[row * options.scale_row_stride]);
        }
        return {options, mask_row, window_len, scale};
    }

    // Whether rows may end their reads before row_len (a causal window).
    __device__ __forceinline__ bool has_window() const { return kForm != UnmaskedForm::RowScaleNoWindow && options.causal != 0; }

    // Row r's elements before the end of its causal window (row_len without one).
    __device__ __forceinline__ std::int64_t read_len(std::int64_t row, std::int64_t row_len) const {
        if (kForm == UnmaskedForm::RowScaleNoWindow || options.causal == 0) return row_len;
        const std::int64_t last = causal_query(row) + options.causal_offset;  // clamped: no overflow
        return last + 1 < row_len ? (last + 1 < 0 ? 0 : last + 1) : row_len;
    }

    // Row r's causal query, r % causal_queries.
    __device__ __forceinline__ std::int64_t causal_query(std::int64_t row) const {
        if (options.causal_fast_query != 0) {
            const auto index = static_cast<std::uint32_t>(row);
            return index - fast_quotient(index, options.causal_divisor) * static_cast<std::uint32_t>(options.causal_queries);
        }
        return row % options.causal_queries;
    }

    // Whether a row writes empty_row_value everywhere: masked_rows zero and nothing to normalize (the formulas
    // give such rows NaN, masked_rows nan's value). A kept NaN leaves the max -inf (the max skips NaN), but that
    // row stays NaN, as the reference has it: row_has_nan says whether a kept z is NaN.
    template <class C>
    __device__ __forceinline__ bool writes_empty_row(C row_max, bool row_has_nan) const {
        return options.zero_rows != 0 && row_max == neg_inf<C>() && !row_has_nan;
    }
};

// Whether an input is the unmasked set's RowsOptionsInput (block-regs' packed hold reads no mask for it).
template <class Input>
constexpr bool kUnmaskedOptions = false;
template <class X, bool kFoldScale, bool kFoldRowScale, UnmaskedForm kForm>
constexpr bool kUnmaskedOptions<RowsOptionsInput<RowsOptionSet::Unmasked, X, kFoldScale, kFoldRowScale, kForm>> = true;

// Whether an input is the additive set's RowsOptionsInput (block-regs' packed hold stages its mask: kernel.cuh).
template <class Input>
constexpr bool kAdditiveOfXOptions = false;
template <class X>
constexpr bool kAdditiveOfXOptions<RowsOptionsInput<RowsOptionSet::AdditiveOfX, X>> = true;

// Whether a body's held values are x before the scale (RowsOptionsInput's kFoldScale).
template <class Input, class = void>
constexpr bool kHeldBeforeScale = false;
template <class Input>
constexpr bool kHeldBeforeScale<Input, std::void_t<decltype(Input::kFoldsScale)>> = Input::kFoldsScale;

// Whether a body folds each row's own scale (RowsOptionsInput's kFoldRowScale).
template <class Input, class = void>
constexpr bool kRowScaleFolded = false;
template <class Input>
constexpr bool kRowScaleFolded<Input, std::void_t<decltype(Input::kFoldsRowScale)>> = Input::kFoldsRowScale;

// with_exp_form for the values a body holds for `input`: z itself, or x before the launch's scale.
template <class C, class Input, class Body>
__device__ __forceinline__ void with_value_exp_form(const Input& input, bool fast, Body&& body) {
    if constexpr (kHeldBeforeScale<Input>) {
        with_scaled_exp_form<C>(fast, input.template launch_scale<C>(), body);
    } else {
        with_exp_form<C>(fast, body);
    }
}

// with_shifted_exp for the values a body holds for `input` (the shift in z's units).
template <class C, class Input, class Body>
__device__ __forceinline__ void with_value_shifted_exp(const Input& input, C shift, Body&& body) {
    with_value_exp_form<C>(input, fast_exp_applies(shift), [&](auto form) { body(form.make(shift)); });
}

// A max of the values a body holds for `input` in z's units (the plain inputs': as it is).
template <class Input, class C>
__device__ __forceinline__ C held_max_to_shift(const Input& input, C held_max) {
    if constexpr (kHeldBeforeScale<Input>) return input.template launch_scale<C>() * held_max;
    else return held_max;
}

// What a body's values are for `input`, as add_group and add_chunk read them (math.cuh): z for the inputs that
// hold it (as ZValues), x before the launch's scale for a folded input (maxima turned into z's units, the scale
// in the exps' multiplier).
template <class Input>
struct InputValues {
    const Input& input;
    template <class C>
    __device__ __forceinline__ C to_shift(C values_max) const {
        return held_max_to_shift(input, values_max);
    }
    template <class C, class Body>
    __device__ __forceinline__ void with_exp(C shift, Body&& body) const {
        with_value_shifted_exp(input, shift, body);
    }
    // The value held for an element that `input` read as `value`: that value.
    template <class C>
    __device__ __forceinline__ C held(C value) const {
        return value;
    }
};

// What a body's values are for one row that folds its own scale (kRowScaleFolded; RowScaleFold, options.hpp): the
// row's x times its pre_factor, maxima turned into z's units by its factor, the factor in the exps' multiplier
// (the exact form past kFoldedScaleMax, where factor * log2(e) may not be finite). It keeps the row's scale and
// splits it where it is used, so no instruction waits on the scale's load before x's loads are issued.
template <class C>
struct FoldedRowValues {
    C scale;
    __device__ __forceinline__ RowScaleFold<C> fold() const { return row_scale_fold(scale); }
    __device__ __forceinline__ C to_shift(C values_max) const { return fold().factor * values_max; }
    __device__ __forceinline__ bool multiplier_finite() const { return fold().factor <= C(kFoldedScaleMax); }
    // Whether x must be multiplied by the pre_factor (rows whose scale is not positive: rare, so one uniform
    // branch rather than a multiply per element on every row).
    __device__ __forceinline__ bool pre_factor_applies() const { return !(scale > C(0)); }
    __device__ __forceinline__ C held(C x) const { return fold().pre_factor * x; }
    // The pre_factor applied to a pack of x in x's dtype: exact (x, -x, 0 or NaN), so a packed hold keeps it.
    template <class X, int kPack>
    __device__ __forceinline__ void apply_pre_factor(Packed<X, kPack>& pack) const {
#pragma unroll
        for (int k = 0; k < kPack; ++k) pack.value[k] = StoreAs<X>::from(held(C(to_compute(pack.value[k]))));
    }
    template <class Body>
    __device__ __forceinline__ void with_exp(C shift, Body&& body) const {
        with_scaled_exp_form<C>(fast_exp_applies(shift) && multiplier_finite(), fold().factor,
                                [&](auto form) { body(form.make(shift)); });
    }
};

// The values a block-regs row holds for `input`: each row's x times its pre_factor where the body folds each
// row's scale (FoldedRowValues), else as `input` has them (InputValues: z, or x before the launch's scale).
template <class C, class Input, class Row>
__device__ __forceinline__ auto row_held_values(const Input& input, const Row& row) {
    if constexpr (kRowScaleFolded<Input>) {
        return FoldedRowValues<C>{row.scale};
    } else {
        return InputValues<Input>{input};
    }
}

// Calls body(TypeTag<folded input>) where the launch folds the scale into softmax's exps (kSet unmasked, a
// softmax output, options.fold_scale), else body(TypeTag<Input>): one uniform branch per launch.
template <class Input, class Output, class Params, class Body>
__device__ __forceinline__ void with_folded_input(const Params& args, Body&& body) {
    if constexpr (kUnmaskedOptions<Input> && kModeFixed<Output>) {
        if constexpr (Output::kUsesExp) {
            if (args.options.fold_scale != 0) {
                body(TypeTag<RowsOptionsInput<RowsOptionSet::Unmasked, typename Input::XType, true>>{});
                return;
            }
        }
    }
    body(TypeTag<Input>{});
}

// Calls body(TypeTag<input>) with the options' form fixed at compile time (UnmaskedForm) where kFixed and the launch
// has no scale, or a per-row scale without a causal window (uniform branches, once per launch), else
// body(TypeTag<Input>): Input an unmasked set's input without a fold. A scalar scale that does not fold, and a
// per-row scale with a causal window, keep the run-time form.
template <class Input, bool kFixed, class Params, class Body>
__device__ __forceinline__ void with_fixed_form_input(const Params& args, Body&& body) {
    if constexpr (kFixed && kUnmaskedOptions<Input> && !kHeldBeforeScale<Input>) {
        using X = typename Input::XType;
        if (args.options.scale_kind == 0) {
            body(TypeTag<RowsOptionsInput<RowsOptionSet::Unmasked, X, false, false, UnmaskedForm::NoScale>>{});
            return;
        }
        if (args.options.scale_kind == 2 && args.options.causal == 0) {
            body(TypeTag<RowsOptionsInput<RowsOptionSet::Unmasked, X, false, false, UnmaskedForm::RowScaleNoWindow>>{});
            return;
        }
    }
    body(TypeTag<Input>{});
}

// A pack's kPack mask elements of type M as the 32-bit words they fill in memory, made from the group either load
// form read (whole units or element by element). Block-regs' 32-value 16-bit instances hold their loaded masks so:
// the two forms then meet as words, where as elements the compiler split each unit into them beside its load, and
// each pack waited there for its mask before the next pack's loads were issued (performance.md, "options: 16-bit
// masks on 32-value rows").
template <class M, int kPack>
struct MaskWords {
    static_assert(kPack * sizeof(M) % 4 == 0, "whole words");
    std::uint32_t word[kPack * sizeof(M) / 4];

    MaskWords() = default;
    __device__ __forceinline__ MaskWords(const MaskGroup<M, kPack>& group) { memcpy(word, group.value, sizeof(word)); }
};

// KeepMaskPack's bytes held as words: byte k of the pack is byte k % 4 of word k / 4.
template <int kPack>
struct KeepMaskWords {
    MaskWords<unsigned char, kPack> keep;
    template <class C>
    __device__ __forceinline__ C operator()(C scaled, int k) const {
        return (keep.word[k / 4] >> (8 * (k % 4)) & 0xffu) != 0 ? scaled : neg_inf<C>();
    }
};

// AdditiveMaskPack's 16-bit elements held as words: element k is the low (k even) or high half of word k / 2,
// widened from it as x's packs are (bf16: one instruction).
template <class M, int kPack>
struct AdditiveMaskWords {
    static_assert(sizeof(M) == 2, "two elements a word");
    MaskWords<M, kPack> add;
    template <class C>
    __device__ __forceinline__ C operator()(C scaled, int k) const {
        const std::uint32_t word = add.word[k / 2];
        if constexpr (std::is_same_v<M, __nv_bfloat16>) {
            return scaled + __uint_as_float(k % 2 == 0 ? word << 16 : word & 0xffff0000u);
        } else {
            return scaled + C(__half2float(__ushort_as_half(static_cast<unsigned short>(k % 2 == 0 ? word : word >> 16))));
        }
    }
};

// The mask packs block-regs loads together with x's packs for an input (kLoaded): the keep set's bytes and the
// additive set's elements of x's dtype, so a pack's mask is in flight with its values rather than requested
// when the pack is widened; kAsWords: held as words (MaskWords). Other inputs load none (NoMaskPack: empty).
template <class Input, int kPack, bool kAsWords = false>
struct LoadedMaskPack {
    static constexpr bool kLoaded = false;
    using Pack = NoMaskPack;
    using Element = unsigned char;
};
template <class X, int kPack, bool kAsWords>
struct LoadedMaskPack<RowsOptionsInput<RowsOptionSet::Keep, X>, kPack, kAsWords> {
    static constexpr bool kLoaded = true;
    using Pack = std::conditional_t<kAsWords, KeepMaskWords<kPack>, KeepMaskPack<kPack>>;
    using Element = unsigned char;
};
template <class X, int kPack, bool kAsWords>
struct LoadedMaskPack<RowsOptionsInput<RowsOptionSet::AdditiveOfX, X>, kPack, kAsWords> {
    static constexpr bool kLoaded = true;
    using Pack = std::conditional_t<kAsWords, AdditiveMaskWords<X, kPack>, AdditiveMaskPack<X, kPack>>;
    using Element = X;
};

// Whether a fast family's row writes empty_row_value (never for inputs without per-row options).
template <class Input, class C>
__device__ __forceinline__ bool writes_empty_row(const Input& input, C row_max, bool row_has_nan) {
    if constexpr (Input::kPerRow) {
        return input.writes_empty_row(row_max, row_has_nan);
    } else {
        return false;
    }
}

// masked_rows zero's value for a row with nothing to normalize: 0, log-softmax -inf.
template <class C>
__device__ __forceinline__ C empty_row_value(bool log) {
    return log ? neg_inf<C>() : C(0);
}

// A fast family's row of an input that binds nothing per row: it reads the whole row, each value as it is.
template <class Input>
struct WholeRowInput {
    const Input& input;
    std::int64_t read_len;
    template <class C>
    __device__ __forceinline__ C operator()(C value, std::int64_t) const {
        return input(value);
    }
};

// Row `row` of `input` as a fast family's body reads it: read_len and the transform of element j.
template <class C, class Input>
__device__ __forceinline__ auto bind_fast_row(const Input& input, std::int64_t row, std::int64_t row_len) {
    if constexpr (Input::kPerRow) {
        return input.template bind<C>(row, row_len);
    } else {
        return WholeRowInput<Input>{input, row_len};
    }
}

// The forward output with the options' rules (mode at run time, as ForwardOutput): a row with nothing to
// normalize (statistics max -inf: nothing kept, or every kept z -inf) gives NaN or, with zero_rows, 0 (log:
// -inf); an excluded element gives 0 (log: -inf), but NaN in a row whose sum is NaN (a kept NaN or +inf).
struct MaskedForwardOutput {
    bool log;
    bool zero_rows;

    template <class C>
    __device__ __forceinline__ C empty_row_value() const {
        if (!zero_rows) return quiet_nan<C>();
        return log ? neg_inf<C>() : C(0);
    }
    template <class C>
    __device__ __forceinline__ C element_from_value(C value, C max, C inverse_sum, C log_sum) const {
        if (max == neg_inf<C>()) return empty_row_value<C>();
        if constexpr (std::is_same_v<C, float>) {
            // exp(v - max) in one FFMA and one MUFU.EX2 (ShiftedExpFast, its bias taken out with 1/sum) where
            // exp_of takes ~8 instructions: 16-bit rows are instruction-bound (performance.md, batch invariance).
            if (!log && fast_exp_applies(max)) {
                const ShiftedExpFast exp(max);
                return exp(value) * (inverse_sum * exp.unbias());
            }
        }
        return softmax_output(value - max, inverse_sum, log_sum, log);
    }
    template <class C>
    __device__ __forceinline__ C excluded(const Stats<C>& stats) const {
        if (stats.sum != stats.sum) return quiet_nan<C>();
        if (stats.max == neg_inf<C>()) return empty_row_value<C>();
        return log ? neg_inf<C>() : C(0);
    }
};

}  // namespace smx::cuda
