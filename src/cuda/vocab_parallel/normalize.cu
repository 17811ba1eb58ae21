// normalize.cu - step 3 of softmax and log-softmax, and the shard's dlogits of cross-entropy: an element-wise pass
// with one formula per row, made once per row from the ranks' statistics combined in rank order (a handful of
// loads from L2). Shape class: any rows of any layout; grid.x covers a row in chunks, grid.y the rows (looping
// past 65535). Traffic: x read once, y written once, the row's statistics (ranks * width values) per CTA.
// The vector kernel (Rows layout) moves 16-byte packs of the wider dtype, each thread loading all its packs of the
// chunk (x's streaming) before the row's formula and the stores (evict-first): a row's elements before x's first
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

// A contiguous row split at x's 16-byte pack boundary: `head` elements before it, `packs` whole packs of kPack,
// the elements from `tail` on after them. y_aligned: y's packs start aligned too (else the row goes element by
// element, strided_elements).
struct PackedRow {
    std::int64_t head;
    std::int64_t packs;
    std::int64_t tail;
    bool y_aligned;
};

template <int kPack, class X, class Y>
__device__ __forceinline__ PackedRow packed_row(std::int64_t n, const X* x_row, const Y* y_row) {
    const auto x_address = reinterpret_cast<std::uintptr_t>(x_row) / sizeof(X);
    const auto to_boundary = static_cast<std::int64_t>((kPack - x_address % kPack) % kPack);
    const std::int64_t head = to_boundary < n ? to_boundary : n;
    const std::int64_t packs = (n - head) / kPack;
    const bool y_aligned = reinterpret_cast<std::uintptr_t>(y_row + head) % kStoreAlignment<Y, kPack> == 0;
    return {head, packs, head + packs * kPack, y_aligned};
}

// This thread's packs of its CTA's chunk of a contiguous row (chunk c of grid.x covers the packs
// [c * packs_per_chunk, (c + 1) * packs_per_chunk) from x's first pack boundary on), all loaded before any is
// stored: kNormalizePacksPerThread loads in flight. Streaming: x is read and y written for the last time here.
template <class X, class Y>
struct ChunkPacks {
    static constexpr int kPack = kPackOfPair<X, Y>;
    static constexpr int kCount = kNormalizePacksPerThread;
    // Evict-first accesses move 8- or 16-byte units only; narrower packs (a 16-bit side of a pair with f64) do not
    // stream.
    static constexpr bool kStreamLoads = kPack * sizeof(X) >= 8;
    static constexpr Access kStoreAccess = kPack * sizeof(Y) >= 8 ? Access::Streaming : Access::Normal;
    Packed<X, kPack> raw[kCount];
    std::int64_t first;  // this thread's first pack; the others follow blockDim.x apart
    std::int64_t end;    // the chunk's end, in packs

    __device__ __forceinline__ void load(const NormalizeParams& p, const PackedRow& row, const X* x_row) {
        const std::int64_t packs_per_chunk = p.chunk / kPack;
        const std::int64_t chunk_first = static_cast<std::int64_t>(blockIdx.x) * packs_per_chunk;
        first = chunk_first + threadIdx.x;
        end = chunk_first + packs_per_chunk < row.packs ? chunk_first + packs_per_chunk : row.packs;
        const auto* body = reinterpret_cast<const Packed<X, kPack>*>(x_row + row.head);
#pragma unroll
        for (int u = 0; u < kCount; ++u) {
            const std::int64_t k = first + static_cast<std::int64_t>(u) * blockDim.x;
            if (k < end) {
                if constexpr (kStreamLoads) {
                    raw[u] = load_streaming(body + k);
                } else {
                    raw[u] = body[k];
                }
            }
        }
    }

    // Stores value(v, j) for each loaded element v of column j.
    template <class Value>
    __device__ __forceinline__ void store(const PackedRow& row, Y* y_row, const Value& value) const {
        using C = PairComputeType<X, Y>;
#pragma unroll
        for (int u = 0; u < kCount; ++u) {
            const std::int64_t k = first + static_cast<std::int64_t>(u) * blockDim.x;
            if (k >= end) continue;
            const std::int64_t j = row.head + k * kPack;
            C values[kPack];
            widen_pack(raw[u], values);
#pragma unroll
            for (int e = 0; e < kPack; ++e) values[e] = value(values[e], j + e);
            store_pack<Y, kPack, kStoreAccess>(y_row + j, values);
        }
    }
};

// The elements of a packed row outside its packs, taken by chunk 0's CTA.
template <class X, class Y, class Value>
__device__ __forceinline__ void row_edges(const NormalizeParams& p, const PackedRow& row, const X* x_row, Y* y_row,
                                          const Value& value) {
    using C = PairComputeType<X, Y>;
    if (blockIdx.x != 0) return;
    const std::int64_t edges = row.head + (p.row_len - row.tail);
    for (std::int64_t e = threadIdx.x; e < edges; e += blockDim.x) {
        const std::int64_t j = e < row.head ? e : row.tail + (e - row.head);
        y_row[j] = StoreAs<Y>::from(value(C(to_compute(x_row[j])), j));
    }
}

template <class X, class Y, bool kVector>
__global__ void __launch_bounds__(kVocabParallelThreads) shard_normalize(const NormalizeParams p) {
    using C = PairComputeType<X, Y>;
    using S = ComputeType<X>;  // the statistics' dtype: double for f64 x, else float
    constexpr int kPack = kPackOfPair<X, Y>;
    const X* x = static_cast<const X*>(p.x);
    Y* y = static_cast<Y*>(p.y);
    for (std::int64_t row = blockIdx.y; row < p.space.rows; row += gridDim.y) {
        const X* x_row = x + row_start(p.space, p.x_strides, row);
        Y* y_row = y + row_start(p.space, p.y_strides, row);
        PackedRow packed{};
        ChunkPacks<X, Y> chunk;
        if constexpr (kVector) {
            packed = packed_row<kPack>(p.row_len, x_row, y_row);
            // x's packs first: their DRAM reads overlap the statistics' L2 reads the formula makes.
            if (packed.y_aligned) chunk.load(p, packed, x_row);
        }
        const RowFormula<C> f = row_formula<S, C>(p, row);
        const auto run = [&](const auto& value) {
            if constexpr (kVector) {
                if (packed.y_aligned) {
                    chunk.store(packed, y_row, value);
                    row_edges(p, packed, x_row, y_row, value);
                    return;
                }
            }
            strided_elements(p, x_row, y_row, value);
        };
        // One loop per kind of formula: none branches per element but on the target's column.
        switch (f.kind) {
            case RowFormula<C>::Exp:
                // exp(v - max) relative to one shift: an FFMA and an ex2 per element where the max allows.
                with_shifted_exp(f.max, [&](const auto& exp) {
                    const C a = f.a * exp.unbias();
                    run([&](C v, std::int64_t j) {
                        const C shifted = a * exp(v) + f.b;
                        return j == f.target_column ? shifted + f.d : shifted;
                    });
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
