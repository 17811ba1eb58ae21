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
        const C scaled = options.scale_kind != 0 ? scale * value : value;
        if (options.mask_kind != 2) return scaled;
        return scaled + load_additive<C>(options.mask, options.mask_dtype, mask_offset + j * options.mask_axis_stride);
    }
};

// The options' input transform for rows located in an index space (options.hpp): binds row r by its multi-index.
template <class C>
struct OptionsInput {
    const OptionsParams& options;
    int index_ndim;
    const std::int64_t* index_shape;
    std::int64_t row_len;
};

template <class C>
__device__ __forceinline__ OptionsRowInput<C> bind_row(const OptionsInput<C>& input, std::int64_t row) {
    const OptionsParams& options = input.options;
    std::int64_t mask_offset = 0;
    std::int64_t scale_offset = 0;
    std::int64_t rest = row;
    for (int d = input.index_ndim - 1; d >= 0; --d) {
        const std::int64_t index = rest % input.index_shape[d];
        rest /= input.index_shape[d];
        mask_offset += index * options.mask_index_strides[d];
        scale_offset += index * options.scale_index_strides[d];
    }
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

// ---- the fast row families (Rows layout: RowsOptionsParams) ------------------------------------------
// Their bodies take an input type with kPerRow: PlainInput's is false (every element kept, the body's code as
// it was), RowsOptionsInput binds each row's scale, mask row and causal window, and turns each x into z.

// Bytes of an additive mask element (F16, BF16, F32 or F64).
__device__ __forceinline__ std::int64_t additive_mask_bytes(int dtype) {
    return dtype == SMX_DTYPE_F16 || dtype == SMX_DTYPE_BF16 ? 2 : dtype == SMX_DTYPE_F32 ? 4 : 8;
}

// One row's options on the fast families: elements at or past `read_len` are excluded and never read (the
// causal window; the plain rows' edge handling bounds the reads), the others become z = scale * x + additive
// mask, or -inf where a keep mask excludes them. An excluded element's -inf then gives 0 (log: -inf) through
// the plain formulas, NaN in a row whose sum is NaN, and NaN in a row with nothing to normalize, as the
// reference has it; zero_rows is applied at the write (empty_row_value).
template <class C>
struct RowsOptionsRow {
    const RowsOptionsParams& options;
    const unsigned char* mask_row;  // the row's mask bytes (either kind); NULL without a mask
    std::int64_t read_len;
    C scale;

    __device__ __forceinline__ C operator()(C value, std::int64_t j) const {
        if (options.mask_kind == 1 && mask_row[j] == 0) return neg_inf<C>();
        const C scaled = options.scale_kind != 0 ? scale * value : value;
        if (options.mask_kind != 2) return scaled;
        return scaled + load_additive<C>(mask_row, options.mask_dtype, j);
    }
};

// A slice of a row's keep mask as a body's loops read it: index i is element slice_begin + i of the row.
template <class C>
struct KeepMaskSlice {
    const unsigned char* mask;
    __device__ __forceinline__ bool keeps(int i) const { return mask[i] != 0; }
    __device__ __forceinline__ C operator()(C z, int i) const { return keeps(i) ? z : neg_inf<C>(); }
};

// The same for an additive mask of element type M: z plus the mask element.
template <class C, class M>
struct AdditiveMaskSlice {
    const M* mask;
    __device__ __forceinline__ C operator()(C z, int i) const { return z + C(to_compute(mask[i])); }
};

// Calls body(slice) with the row's keep mask from element slice_begin on; nothing without one.
template <class C, class Body>
__device__ __forceinline__ void visit_keep_mask(const RowsOptionsRow<C>& row, std::int64_t slice_begin, const Body& body) {
    if (row.options.mask_kind == 1) body(KeepMaskSlice<C>{row.mask_row + slice_begin});
}

// Calls body(slice) with the row's additive mask from element slice_begin on, typed by its dtype (uniform per
// launch: one loop per type rather than a switch per element); nothing without one.
template <class C, class Body>
__device__ __forceinline__ void visit_additive_mask(const RowsOptionsRow<C>& row, std::int64_t slice_begin, const Body& body) {
    if (row.options.mask_kind != 2) return;
    const auto typed = [&](auto type_tag) {
        using M = typename decltype(type_tag)::type;
        body(AdditiveMaskSlice<C, M>{reinterpret_cast<const M*>(row.mask_row) + slice_begin});
    };
    switch (row.options.mask_dtype) {
        case SMX_DTYPE_F16: typed(TypeTag<__half>{}); break;
        case SMX_DTYPE_BF16: typed(TypeTag<__nv_bfloat16>{}); break;
        case SMX_DTYPE_F32: typed(TypeTag<float>{}); break;
        default: typed(TypeTag<double>{}); break;
    }
}

struct RowsOptionsInput {
    static constexpr bool kRaw = false;
    static constexpr bool kPerRow = true;
    const RowsOptionsParams& options;

    template <class Params>
    __device__ __forceinline__ static RowsOptionsInput of(const Params& args) {
        return {args.options};
    }

    template <class C>
    __device__ __forceinline__ RowsOptionsRow<C> bind(std::int64_t row, std::int64_t row_len) const {
        const unsigned char* mask_row = nullptr;
        if (options.mask_kind != 0) {
            const std::int64_t mask_size = options.mask_kind == 1 ? 1 : additive_mask_bytes(options.mask_dtype);
            mask_row = static_cast<const unsigned char*>(options.mask) + row * options.mask_row_stride * mask_size;
        }
        std::int64_t read_len = row_len;
        if (options.causal != 0) {
            const std::int64_t last = row % options.causal_queries + options.causal_offset;  // clamped: no overflow
            read_len = last + 1 < read_len ? (last + 1 < 0 ? 0 : last + 1) : read_len;
        }
        C scale = C(1);
        if (options.scale_kind == 1) scale = C(options.scalar_scale);
        if (options.scale_kind == 2) scale = C(options.scale[row * options.scale_row_stride]);
        return {options, mask_row, read_len, scale};
    }

    // Whether a row writes empty_row_value everywhere: masked_rows zero and nothing to normalize (the formulas
    // give such rows NaN, masked_rows nan's value). A kept NaN leaves the max -inf (the max skips NaN), but that
    // row stays NaN, as the reference has it: row_has_nan says whether a kept z is NaN.
    template <class C>
    __device__ __forceinline__ bool writes_empty_row(C row_max, bool row_has_nan) const {
        return options.zero_rows != 0 && row_max == neg_inf<C>() && !row_has_nan;
    }
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
