// write.cu - ce-write: the second pass of cross-entropy with dlogits for rows too long for a cluster to hold in
// registers (Rows layout). One CTA per (row, chunk), taking them in the reverse order of the stats pass that came
// before, so the chunks that pass read last, the likeliest still in L2, are read first; each CTA reads the row's
// lse (left in the workspace by the stats pass), its target and the MEAN count, reads its chunk of logits again
// and writes its dlogits. Traffic: logits read a second time (partly from L2), dlogits written once.
// performance.md#log-probabilities.
#include "cuda/logprobs/rows.cuh"

namespace smx::cuda {
namespace {

template <class X, class D>
__global__ void __launch_bounds__(kWriteThreads) ce_write(const ParamBlock<LogprobsRowsParams> args) {
    begin_dependent_kernel();
    using C = ComputeType<X>;
    constexpr int kPack = kPackOfPair<X, D>;  // 16 bytes of the wider of the two
    using Pack = Packed<X, kPack>;
    const std::int64_t chunks = args.chunks;
    const std::int64_t rows_per_grid_row = gridDim.x / chunks;
    const std::int64_t block = gridDim.x - 1 - blockIdx.x;
    const std::int64_t row = static_cast<std::int64_t>(gridDim.y - 1 - blockIdx.y) * rows_per_grid_row + block / chunks;
    const std::int64_t chunk = block % chunks;
    if (row >= args.rows) return;
    const std::int64_t begin = chunk * args.slice_len;
    const std::int64_t remaining = args.row_len - begin;
    const std::int64_t count = remaining < args.slice_len ? remaining : args.slice_len;
    const X* x = static_cast<const X*>(args.operand.x) + row * args.x_row_stride + begin;
    D* d = static_cast<D*>(args.operand.dlogits) + row * args.dlogits_row_stride + begin;

    const std::int64_t t = load_index(args.operand.index, row * args.index_row_stride, args.index_64 != 0);
    const C lse = workspace_row_lse<C>(args.operand.workspace, args.rows)[row];
    const bool ignored = t == args.ignore_index;
    const bool valid = !ignored && t >= 0 && t < args.row_len && ::isfinite(lse);
    const C eps = static_cast<C>(args.label_smoothing);

    // x's packs and d's: x split at its 16-byte phase; d stored whole where it then is aligned too.
    const std::int64_t shift = static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(x) % (kPack * sizeof(X)) / sizeof(X));
    const std::int64_t head = shift == 0 ? 0 : (count < kPack - shift ? count : kPack - shift);
    const std::int64_t packs = (count - head) / kPack;
    const std::int64_t tail = head + packs * kPack;
    const Pack* x_body = reinterpret_cast<const Pack*>(x + head);
    D* d_body = d + head;
    const bool d_packs_aligned = reinterpret_cast<std::uintptr_t>(d_body) % kStoreAlignment<D, kPack> == 0;
    const auto store = [&](std::int64_t pack, const C (&values)[kPack]) {
        if (d_packs_aligned) {
            store_pack<D, kPack>(d_body + pack * kPack, values);
        } else {
#pragma unroll
            for (int k = 0; k < kPack; ++k) d_body[pack * kPack + k] = StoreAs<D>::from(values[k]);
        }
    };
    const int tid = threadIdx.x;
    const int threads = blockDim.x;
    const std::int64_t edges = head + (count - tail);

    if (!valid) {  // 0 in an ignored row, NaN in an invalid one; the logits are not read
        const C constant = ignored ? C(0) : nan_of<C>();
        C values[kPack];
#pragma unroll
        for (int k = 0; k < kPack; ++k) values[k] = constant;
        for (std::int64_t p = tid; p < packs; p += threads) store(p, values);
        for (std::int64_t e = tid; e < edges; e += threads) d[e < head ? e : tail + (e - head)] = StoreAs<D>::from(constant);
        return;
    }
    const C scale = gradient_scale<C>(args.operand.workspace, args.reduction);
    with_shifted_exp(lse, [&](const auto& exp) {
        const GradientRow<C> g = gradient_row(true, false, t, args.row_len, eps, scale, exp.unbias());
        constexpr int kUnroll = 2;  // packs in flight per thread: each loaded before any is written (x may be d)
        for (std::int64_t p = tid; p < packs; p += static_cast<std::int64_t>(threads) * kUnroll) {
            Pack raw[kUnroll];
#pragma unroll
            for (int u = 0; u < kUnroll; ++u) {
                const std::int64_t pack = p + static_cast<std::int64_t>(u) * threads;
                if (pack < packs) raw[u] = load_streaming(x_body + pack);
            }
#pragma unroll
            for (int u = 0; u < kUnroll; ++u) {
                const std::int64_t pack = p + static_cast<std::int64_t>(u) * threads;
                if (pack >= packs) continue;
                C values[kPack];
#pragma unroll
                for (int k = 0; k < kPack; ++k) values[k] = g.element(C(to_compute(raw[u].value[k])), exp);
                adjust_target(values, begin + head + pack * kPack, g);
                store(pack, values);
            }
        }
        for (std::int64_t e = tid; e < edges; e += threads) {
            const std::int64_t j = e < head ? e : tail + (e - head);
            C value = g.element(C(to_compute(x[j])), exp);
            if (begin + j == t) value -= g.target_adjust;
            d[j] = StoreAs<D>::from(value);
        }
    });
}

}  // namespace

const void* ce_write_kernel(smxDataType_t x_dtype, smxDataType_t dlogits_dtype) {
    return visit_any_dtype_pair(x_dtype, dlogits_dtype, [](auto x_tag, auto d_tag) -> const void* {
        using X = typename decltype(x_tag)::type;
        using D = typename decltype(d_tag)::type;
        if constexpr (kFastDlogitsPair<X, D>) {
            return reinterpret_cast<const void*>(&ce_write<X, D>);
        } else {
            return nullptr;
        }
    });
}

}  // namespace smx::cuda
