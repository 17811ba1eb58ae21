// online_softmax.cu - rows too long to cache in shared memory, Rows layout. Two kernel families built
// from the same range helpers (online (max, sum) over x in one pass, then a second pass that re-reads x
// and writes y; traffic: x read twice, y written once, the second read often served by L2):
//   block-online  one CTA per row (grid-stride over rows), for many long rows;
//   split-row     few very long rows: each row cut into fixed chunks (chunk length from row_len only),
//                 one CTA per (chunk, row); kernel 1 writes each chunk's (max, sum) to the workspace,
//                 kernel 2 folds the row's partials (same order in every CTA) and writes its chunk.
#include "cuda/softmax_common.cuh"

namespace smx::cuda {
namespace {

constexpr int kRangeUnroll = 4;  // 16-byte packs in flight per thread and loop step

// Where the pack-aligned body of x[0, count) starts and how many whole packs of kPack elements it has.
struct RangeSplit {
    std::int64_t head;   // leading elements before the first pack boundary
    std::int64_t packs;  // whole packs after the head
    std::int64_t tail;   // first element after the packs
};

template <int kPack, class X>
__device__ __forceinline__ RangeSplit split_range(const X* x, std::int64_t count) {
    constexpr std::uintptr_t kPackBytes = kPack * sizeof(X);
    const std::int64_t shift = static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(x) % kPackBytes / sizeof(X));
    const std::int64_t head = shift == 0 ? 0 : (count < kPack - shift ? count : kPack - shift);
    const std::int64_t packs = (count - head) / kPack;
    return {head, packs, head + packs * kPack};
}

// This thread's share of the statistics of x[0, count), threads striding; any alignment.
template <class X, class C = ComputeType<X>>
__device__ __forceinline__ Stats<C> range_stats(const X* x, std::int64_t count, int tid, int threads) {
    constexpr int kPack = kPackOf<X>;
    const RangeSplit split = split_range<kPack>(x, count);
    Stats<C> stats = empty_stats<C>();
    if (tid < split.head) {
        const C value = to_compute(x[tid]);
        add_chunk<1>(stats, &value);
    }
    const X* body = x + split.head;
    for (std::int64_t p = tid; p < split.packs; p += static_cast<std::int64_t>(threads) * kRangeUnroll) {
        if constexpr (sizeof(X) == 2) {
            // 16-bit x: the packs stay packed until used, one pack's statistics at a time. Widening all 32
            // values first took 58 registers (2 CTAs of 512 per SM; bf16 4 x 4194304's statistics kernel
            // read at 1.3 TB/s), for a little more rescaling here.
            Packed<X, kPack> raw[kRangeUnroll];
#pragma unroll
            for (int u = 0; u < kRangeUnroll; ++u) {
                const std::int64_t pack = p + static_cast<std::int64_t>(u) * threads;
                if (pack < split.packs) raw[u] = *reinterpret_cast<const Packed<X, kPack>*>(body + pack * kPack);
            }
#pragma unroll
            for (int u = 0; u < kRangeUnroll; ++u) {
                if (p + static_cast<std::int64_t>(u) * threads >= split.packs) continue;
                C values[kPack];
#pragma unroll
                for (int k = 0; k < kPack; ++k) values[k] = widen_on_use(raw[u].value[k]);
                add_chunk<kPack>(stats, values);
            }
        } else {
            C values[kRangeUnroll * kPack];
#pragma unroll
            for (int u = 0; u < kRangeUnroll; ++u) {
                const std::int64_t pack = p + static_cast<std::int64_t>(u) * threads;
                if (pack < split.packs) {
                    load_pack(body + pack * kPack, &values[u * kPack]);
                } else {
#pragma unroll
                    for (int k = 0; k < kPack; ++k) values[u * kPack + k] = neg_inf<C>();
                }
            }
            add_chunk<kRangeUnroll * kPack>(stats, values);
        }
    }
    for (std::int64_t k = split.tail + tid; k < count; k += threads) {
        const C value = to_compute(x[k]);
        add_chunk<1>(stats, &value);
    }
    return stats;
}

// Writes y[0, count) from x[0, count) and the row's statistics, threads striding; any alignment
// (y's packs are stored whole when y is aligned like x, element-wise otherwise). The last pass over x:
// packs are read and written streaming, so the x still to be re-read keeps its place in L2.
template <class X, class Y, class C>
__device__ __forceinline__ void range_write(const X* x, Y* y, std::int64_t count, Stats<C> stats, bool log_mode,
                                            int tid, int threads) {
    constexpr int kPack = kPackOfPair<X, Y>;  // 8 bytes of 16-bit x when y is f32 (see kPackOfPair)
    constexpr int kUnroll = kRangeUnroll * kPackOf<X> / kPack;  // the same bytes of x in flight either way
    const RangeSplit split = split_range<kPack>(x, count);
    const C log_sum = log_mode ? log_of(stats.sum) : C(0);
    with_shifted_exp(stats.max, [&](const auto& exp) {
        const C factor = exp.unbias() * reciprocal(stats.sum);
        const auto output = [&](C v) { return log_mode ? (v - stats.max) - log_sum : exp(v) * factor; };
        if (tid < split.head) y[tid] = StoreAs<Y>::from(output(to_compute(x[tid])));
        const X* x_body = x + split.head;
        Y* y_body = y + split.head;
        const bool y_packs_aligned = reinterpret_cast<std::uintptr_t>(y_body) % kStoreAlignment<Y, kPack> == 0;
        for (std::int64_t p = tid; p < split.packs; p += static_cast<std::int64_t>(threads) * kUnroll) {
            C values[kUnroll][kPack];
            // All loads first: x and y may alias (in place), so the compiler would not hoist them itself.
#pragma unroll
            for (int u = 0; u < kUnroll; ++u) {
                const std::int64_t pack = p + static_cast<std::int64_t>(u) * threads;
                if (pack >= split.packs) continue;
                const Packed<X, kPack> raw = load_streaming(reinterpret_cast<const Packed<X, kPack>*>(x_body + pack * kPack));
#pragma unroll
                for (int k = 0; k < kPack; ++k) values[u][k] = to_compute(raw.value[k]);
            }
#pragma unroll
            for (int u = 0; u < kUnroll; ++u) {
                const std::int64_t pack = p + static_cast<std::int64_t>(u) * threads;
                if (pack >= split.packs) continue;
#pragma unroll
                for (int k = 0; k < kPack; ++k) values[u][k] = output(values[u][k]);
                if (y_packs_aligned) {
                    store_pack<Y, kPack, Access::Streaming>(y_body + pack * kPack, values[u]);
                } else {
#pragma unroll
                    for (int k = 0; k < kPack; ++k) y_body[pack * kPack + k] = StoreAs<Y>::from(values[u][k]);
                }
            }
        }
        for (std::int64_t k = split.tail + tid; k < count; k += threads) y[k] = StoreAs<Y>::from(output(to_compute(x[k])));
    });
}

template <class X, class Y>
__global__ void __launch_bounds__(512) block_online_softmax(const SoftmaxKernelArgs args) {
    using C = ComputeType<X>;
    __shared__ Stats<C> scratch[32];
    const X* x = static_cast<const X*>(args.x);
    Y* y = static_cast<Y*>(args.y);
    for (std::int64_t row = blockIdx.x; row < args.rows; row += gridDim.x) {
        const X* x_row = x + row * args.x_row_stride;
        Stats<C> stats = range_stats(x_row, args.row_len, threadIdx.x, blockDim.x);
        stats = block_combine_stats(stats, scratch);
        range_write(x_row, y + row * args.y_row_stride, args.row_len, stats, args.log_mode != 0, threadIdx.x,
                    blockDim.x);
    }
}

// Elements of chunk `chunk` of a row: [chunk * slice_len, min(row_len, (chunk + 1) * slice_len)).
__device__ __forceinline__ std::int64_t chunk_count(const SoftmaxKernelArgs& args, std::int64_t chunk) {
    const std::int64_t remaining = args.row_len - chunk * args.slice_len;
    return remaining < args.slice_len ? remaining : args.slice_len;
}

// Three CTAs of 512 per SM at least (40 registers): the 16-bit instances needed 45, which left two, and a
// short-lived CTA's tail of reductions then idled half of each SM's loads. f64 keeps its registers.
template <class X>
constexpr int kSplitStatsMinBlocks = sizeof(X) == 8 ? 1 : 3;

template <class X>
__global__ void __launch_bounds__(512, kSplitStatsMinBlocks<X>) split_row_stats(const SoftmaxKernelArgs args) {
    using C = ComputeType<X>;
    __shared__ Stats<C> scratch[32];
    const X* x = static_cast<const X*>(args.x);
    Stats<C>* partials = static_cast<Stats<C>*>(args.workspace);
    const std::int64_t chunk = blockIdx.x;
    const std::int64_t count = chunk_count(args, chunk);
    for (std::int64_t row = blockIdx.y; row < args.rows; row += gridDim.y) {
        const X* x_chunk = x + row * args.x_row_stride + chunk * args.slice_len;
        Stats<C> stats = range_stats(x_chunk, count, threadIdx.x, blockDim.x);
        stats = block_combine_stats(stats, scratch);
        if (threadIdx.x == 0) partials[row * args.chunks + chunk] = stats;
    }
}

// Two CTAs of 512 per SM at least (56-64 registers, no spills): left to itself the compiler gave the
// 16-bit instances 84-93 registers, one CTA per SM (ncu, run 36: 24% of warps active). Measured A/B
// (run 37, 4 x 4194304 .. 1 x 16777216): 16-bit -> f32 2-4% faster, the rest unchanged within noise.
template <class X, class Y>
__global__ void __launch_bounds__(512, 2) split_row_write(const SoftmaxKernelArgs args) {
    using C = ComputeType<X>;
    __shared__ Stats<C> scratch[32];
    const X* x = static_cast<const X*>(args.x);
    Y* y = static_cast<Y*>(args.y);
    const Stats<C>* partials = static_cast<const Stats<C>*>(args.workspace);
    // CTAs run in the reverse order of the statistics kernel's: the chunks that kernel read last are the
    // likeliest to still be in L2 when they are read again here.
    const std::int64_t chunk = gridDim.x - 1 - blockIdx.x;
    const std::int64_t count = chunk_count(args, chunk);
    for (std::int64_t row = gridDim.y - 1 - blockIdx.y; row < args.rows; row += gridDim.y) {
        // Every CTA of the row folds the same partials in the same order: identical statistics everywhere.
        Stats<C> stats = empty_stats<C>();
        for (std::int64_t c = threadIdx.x; c < args.chunks; c += blockDim.x) {
            stats = combine(stats, partials[row * args.chunks + c]);
        }
        stats = block_combine_stats(stats, scratch);
        const std::int64_t offset = chunk * args.slice_len;
        range_write(x + row * args.x_row_stride + offset, y + row * args.y_row_stride + offset, count, stats,
                    args.log_mode != 0, threadIdx.x, blockDim.x);
    }
}


}  // namespace

const void* block_online_softmax_kernel(smxDataType_t x_dtype, smxDataType_t y_dtype) {
    return visit_dtype_pair(x_dtype, y_dtype, [](auto x_tag, auto y_tag) -> const void* {
        return reinterpret_cast<const void*>(
            &block_online_softmax<typename decltype(x_tag)::type, typename decltype(y_tag)::type>);
    });
}

const void* split_row_stats_kernel(smxDataType_t x_dtype, smxDataType_t y_dtype) {
    // The statistics do not depend on y: one instance per x dtype.
    return visit_dtype_pair(x_dtype, y_dtype, [](auto x_tag, auto) -> const void* {
        return reinterpret_cast<const void*>(&split_row_stats<typename decltype(x_tag)::type>);
    });
}

const void* split_row_write_kernel(smxDataType_t x_dtype, smxDataType_t y_dtype) {
    return visit_dtype_pair(x_dtype, y_dtype, [](auto x_tag, auto y_tag) -> const void* {
        return reinterpret_cast<const void*>(
            &split_row_write<typename decltype(x_tag)::type, typename decltype(y_tag)::type>);
    });
}

}  // namespace smx::cuda
