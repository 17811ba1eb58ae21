// normalize.cu - step 3 of softmax and log-softmax, and the shard's dlogits of cross-entropy: an element-wise pass
// with one formula per row, made once per row from the ranks' statistics combined in rank order (a handful of
// loads from L2). Shape class: any rows of any layout; grid.x covers a row in chunks, grid.y the rows (looping
// past 65535). Traffic: x read once, y written once, the row's statistics (ranks * width values) per CTA.
// The vector kernel (Rows layout) moves 16-byte packs of the wider dtype: a row's elements before x's first
// pack boundary and after its last pack go element by element, and a row whose y is not aligned like its x
// (a padded row stride, say) goes element by element entirely; the other kernel steps along the axis strides.
#include "cuda/vocab_parallel/common.cuh"

namespace smx::cuda {
namespace {

// A row's formula: y = a * exp(x - max) + b, plus d at the target's column (softmax: a = 1 / S; dlogits:
// scaled, smoothed, one-hot), or y = (x - max) - log_sum (log-softmax), or a constant (NaN rows, ignored rows).
template <class C>
struct RowFormula {
    enum Kind { Constant, Exp, Log } kind = Constant;
    C constant = 0;
    C max = 0;
    C a = 0, b = 0, d = 0;
    std::int64_t target_column = -1;
    C log_sum = 0;
};

template <class S, class C>
__device__ __forceinline__ RowFormula<C> row_formula(const NormalizeParams& p, std::int64_t row) {
    const GatheredStats<S> gathered{static_cast<const S*>(p.stats) + row_start(p.space, p.stats_strides, row),
                                    p.stats_strides.axis, p.ranks, p.width};
    const CombinedStats<S> c = combine_ranks(gathered);
    const C nan = C(0) / C(0);
    RowFormula<C> f;
    f.max = C(c.max);
    if (p.output == static_cast<int>(NormalizeOutput::Dlogits)) {
        const std::int64_t t = load_class(p.target, p.target_is_i64 != 0, row_start(p.space, p.target_strides, row));
        if (t == p.ignore_index) return f;  // 0: an ignored row has no gradient
        const S classes = gathered.total(4);
        if (!(t >= 0 && static_cast<S>(t) < classes && c.finite())) {
            f.constant = nan;  // a target outside the vocabulary, or a row whose log-softmax is NaN
            return f;
        }
        const C scale = p.count != nullptr && *p.count > 0 ? C(1) / C(*p.count) : C(1);
        const C eps = C(p.label_smoothing);
        f.kind = RowFormula<C>::Exp;
        f.a = scale / C(c.sum);
        f.b = -scale * eps / C(classes);
        f.d = -scale * (C(1) - eps);
        f.target_column = t - p.vocab_start;  // outside [0, row_len) where another rank holds it
        return f;
    }
    if (!c.finite()) {
        f.constant = nan;
        return f;
    }
    if (p.output == static_cast<int>(NormalizeOutput::LogSoftmax)) {
        f.kind = RowFormula<C>::Log;
        f.log_sum = C(log_of(c.sum));
    } else {
        f.kind = RowFormula<C>::Exp;
        f.a = C(1) / C(c.sum);
    }
    return f;
}

// Calls out(j, value(x_j, j)) for this CTA's elements of one row, element j at x_row[j * x_stride].
template <class X, class Y, class Value>
__device__ __forceinline__ void strided_elements(const NormalizeParams& p, const X* x_row, Y* y_row,
                                                 const Value& value) {
    using C = PairComputeType<X, Y>;
    const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * p.chunk;
    const std::int64_t end = first + p.chunk < p.row_len ? first + p.chunk : p.row_len;
    for (std::int64_t j = first + threadIdx.x; j < end; j += blockDim.x) {
        const C v = C(to_compute(x_row[j * p.x_strides.axis]));
        y_row[j * p.y_strides.axis] = StoreAs<Y>::from(value(v, j));
    }
}

// The same over a contiguous row in packs: chunk c of grid.x covers the packs from x's first pack boundary
// on; chunk 0 also takes the elements before it and after the last whole pack.
template <class X, class Y, class Value>
__device__ __forceinline__ void packed_elements(const NormalizeParams& p, const X* x_row, Y* y_row,
                                                const Value& value) {
    using C = PairComputeType<X, Y>;
    constexpr int kPack = kPackOfPair<X, Y>;
    const std::int64_t n = p.row_len;
    const auto x_address = reinterpret_cast<std::uintptr_t>(x_row) / sizeof(X);
    const auto to_boundary = static_cast<std::int64_t>((kPack - x_address % kPack) % kPack);
    const std::int64_t head = to_boundary < n ? to_boundary : n;
    if (reinterpret_cast<std::uintptr_t>(y_row + head) % kStoreAlignment<Y, kPack> != 0) {
        strided_elements(p, x_row, y_row, value);  // y not aligned like x: this row element by element
        return;
    }
    const std::int64_t packs = (n - head) / kPack;
    const std::int64_t tail = head + packs * kPack;
    const std::int64_t packs_per_chunk = p.chunk / kPack;
    const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * packs_per_chunk;
    const std::int64_t end = first + packs_per_chunk < packs ? first + packs_per_chunk : packs;
#pragma unroll 4
    for (std::int64_t k = first + threadIdx.x; k < end; k += blockDim.x) {
        const std::int64_t j = head + k * kPack;
        C values[kPack];
        load_pack<X, C, kPack>(x_row + j, values);
#pragma unroll
        for (int e = 0; e < kPack; ++e) values[e] = value(values[e], j + e);
        store_pack<Y, kPack>(y_row + j, values);
    }
    if (blockIdx.x == 0) {
        for (std::int64_t j = threadIdx.x; j < head; j += blockDim.x) {
            y_row[j] = StoreAs<Y>::from(value(C(to_compute(x_row[j])), j));
        }
        for (std::int64_t j = tail + threadIdx.x; j < n; j += blockDim.x) {
            y_row[j] = StoreAs<Y>::from(value(C(to_compute(x_row[j])), j));
        }
    }
}

template <class X, class Y, bool kVector>
__global__ void __launch_bounds__(kVocabParallelThreads) shard_normalize(const NormalizeParams p) {
    using C = PairComputeType<X, Y>;
    using S = ComputeType<X>;  // the statistics' dtype: double for f64 x, else float
    const X* x = static_cast<const X*>(p.x);
    Y* y = static_cast<Y*>(p.y);
    for (std::int64_t row = blockIdx.y; row < p.space.rows; row += gridDim.y) {
        const RowFormula<C> f = row_formula<S, C>(p, row);
        const X* x_row = x + row_start(p.space, p.x_strides, row);
        Y* y_row = y + row_start(p.space, p.y_strides, row);
        const auto run = [&](const auto& value) {
            if constexpr (kVector) {
                packed_elements(p, x_row, y_row, value);
            } else {
                strided_elements(p, x_row, y_row, value);
            }
        };
        // One loop per kind of formula: none branches per element but on the target's column.
        switch (f.kind) {
            case RowFormula<C>::Exp:
                run([&](C v, std::int64_t j) {
                    const C shifted = f.a * exp_of(v - f.max) + f.b;
                    return j == f.target_column ? shifted + f.d : shifted;
                });
                break;
            case RowFormula<C>::Log: run([&](C v, std::int64_t) { return (v - f.max) - f.log_sum; }); break;
            case RowFormula<C>::Constant: run([&](C, std::int64_t) { return f.constant; }); break;
        }
    }
}

}  // namespace

const void* normalize_kernel(smxDataType_t x_dtype, smxDataType_t y_dtype, bool vector) {
    return visit_any_dtype_pair(x_dtype, y_dtype, [vector](auto x_tag, auto y_tag) -> const void* {
        using X = typename decltype(x_tag)::type;
        using Y = typename decltype(y_tag)::type;
        return vector ? reinterpret_cast<const void*>(&shard_normalize<X, Y, true>)
                      : reinterpret_cast<const void*>(&shard_normalize<X, Y, false>);
    });
}

}  // namespace smx::cuda
