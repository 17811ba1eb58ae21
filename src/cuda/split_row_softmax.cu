// split_row_softmax.cu - few very long rows (decode: 1..64 rows of 32k..4M+), Rows layout, ONE cooperative
// launch over a persistent grid. Each row is cut into chunks whose length depends on row_len only; the
// (row, chunk) items are dealt round-robin to the CTAs (item = blockIdx.x + k * gridDim.x).
//   phase 1: each CTA reads its items, copies the first `cached_chunks` of them into shared memory (in
//            the x dtype) while reducing, and writes each chunk's (max, sum) to the workspace;
//   grid.sync();
//   phase 2: each CTA folds its row's partials in one fixed order (identical in every CTA, independent of
//            the grid) and writes y, from shared memory for cached chunks, re-reading x for the rest
//            (newest first, so the re-read mostly hits L2).
// Traffic: x read once and y written once when every chunk is cached; otherwise the uncached share of x
// is read twice. Deterministic: a chunk's statistics depend only on the chunk length and the thread
// count (both functions of row_len and the dtype), never on which CTA or how many rows.
#include <cooperative_groups.h>

#include "cuda/softmax_common.cuh"

namespace smx::cuda {
namespace {

// Raw 16-byte packs in flight per thread and loop step (128 bytes: enough to cover HBM latency with
// 128..512 threads per CTA and several CTAs per SM); held raw, converted on use, to save registers.
constexpr int kChunkUnroll = 8;

template <class X>
using RawPack = Packed<X, kPackOf<X>>;

// Elements before the first 16-byte boundary of x (x and its cache slot share the same 16-byte phase).
template <class X>
__device__ __forceinline__ int head_length(const X* x, int count) {
    constexpr int kPack = kPackOf<X>;
    const int shift = static_cast<int>(reinterpret_cast<std::uintptr_t>(x) % 16 / sizeof(X));
    return shift == 0 ? 0 : min(count, kPack - shift);
}

// Adds the first `valid` of U raw packs to running statistics: max over the packs, then one rescale.
// Same fold order as add_chunk over the converted values.
template <int U, class X, class C>
__device__ __forceinline__ void add_raw_packs(Stats<C>& stats, const RawPack<X> (&raw)[U], int valid) {
    constexpr int kPack = kPackOf<X>;
    C chunk_max = neg_inf<C>();
#pragma unroll
    for (int u = 0; u < U; ++u) {
        if (u < valid) {
#pragma unroll
            for (int k = 0; k < kPack; ++k) chunk_max = max_nan(chunk_max, to_compute(raw[u].value[k]));
        }
    }
    const C max = max_nan(stats.max, chunk_max);
    if (max == neg_inf<C>()) return;
    C chunk_sum = 0;
#pragma unroll
    for (int u = 0; u < U; ++u) {
        if (u < valid) {
#pragma unroll
            for (int k = 0; k < kPack; ++k) chunk_sum += exp_of(to_compute(raw[u].value[k]) - max);
        }
    }
    stats = {max, stats.sum * rescale(stats.max, max) + chunk_sum};
}

// This thread's share of the statistics of x[0, count); when `cache` is not null it also stores every
// element k at cache[k] (cache has x's 16-byte phase). The element-to-thread mapping and fold order do
// not depend on `cache`, so a cached and a streamed chunk give bit-identical statistics.
template <class X, class C = ComputeType<X>>
__device__ __forceinline__ Stats<C> chunk_stats(const X* x, int count, X* cache, int tid, int threads) {
    constexpr int kPack = kPackOf<X>;
    const int head = head_length(x, count);
    const int packs = (count - head) / kPack;
    const int tail = head + packs * kPack;
    Stats<C> stats = empty_stats<C>();
    if (tid < head) {
        const X value = x[tid];
        if (cache != nullptr) cache[tid] = value;
        const C converted = to_compute(value);
        add_chunk<1>(stats, &converted);
    }
    const RawPack<X>* body = reinterpret_cast<const RawPack<X>*>(x + head);
    RawPack<X>* cache_body = cache != nullptr ? reinterpret_cast<RawPack<X>*>(cache + head) : nullptr;
    for (int p = tid; p < packs; p += threads * kChunkUnroll) {
        RawPack<X> raw[kChunkUnroll];
        const int valid = min(kChunkUnroll, (packs - p + threads - 1) / threads);
#pragma unroll
        for (int u = 0; u < kChunkUnroll; ++u) {
            if (u < valid) raw[u] = body[p + u * threads];
        }
        if (cache_body != nullptr) {
#pragma unroll
            for (int u = 0; u < kChunkUnroll; ++u) {
                if (u < valid) cache_body[p + u * threads] = raw[u];
            }
        }
        add_raw_packs(stats, raw, valid);
    }
    for (int k = tail + tid; k < count; k += threads) {
        const X value = x[k];
        if (cache != nullptr) cache[k] = value;
        const C converted = to_compute(value);
        add_chunk<1>(stats, &converted);
    }
    return stats;
}

// Writes y[0, count) from `source` (x itself or its cache copy, same 16-byte phase) and the row's
// statistics. y's packs are stored whole when y has x's phase, element-wise otherwise.
template <class X, class Y, class C>
__device__ __forceinline__ void chunk_write(const X* source, Y* y, int count, Stats<C> stats, bool log_mode, int tid,
                                            int threads) {
    constexpr int kPack = kPackOf<X>;
    const int head = head_length(source, count);
    const int packs = (count - head) / kPack;
    const int tail = head + packs * kPack;
    const C inverse_sum = C(1) / stats.sum;
    const C log_sum = log_of(stats.sum);
    if (tid < head) {
        y[tid] = StoreAs<Y>::from(softmax_output(to_compute(source[tid]) - stats.max, inverse_sum, log_sum, log_mode));
    }
    const RawPack<X>* body = reinterpret_cast<const RawPack<X>*>(source + head);
    Y* y_body = y + head;
    const bool y_packs_aligned = reinterpret_cast<std::uintptr_t>(y_body) % kStoreAlignment<Y, kPack> == 0;
    for (int p = tid; p < packs; p += threads * kChunkUnroll) {
        RawPack<X> raw[kChunkUnroll];
        const int valid = min(kChunkUnroll, (packs - p + threads - 1) / threads);
        // All loads first: in place, x and y alias, so the compiler would not hoist them past the stores.
#pragma unroll
        for (int u = 0; u < kChunkUnroll; ++u) {
            if (u < valid) raw[u] = body[p + u * threads];
        }
#pragma unroll
        for (int u = 0; u < kChunkUnroll; ++u) {
            if (u >= valid) continue;
            C values[kPack];
#pragma unroll
            for (int k = 0; k < kPack; ++k) {
                values[k] = softmax_output(to_compute(raw[u].value[k]) - stats.max, inverse_sum, log_sum, log_mode);
            }
            const std::int64_t first = static_cast<std::int64_t>(p + u * threads) * kPack;
            if (y_packs_aligned) {
                store_pack<Y, kPack>(y_body + first, values);
            } else {
#pragma unroll
                for (int k = 0; k < kPack; ++k) y_body[first + k] = StoreAs<Y>::from(values[k]);
            }
        }
    }
    for (int k = tail + tid; k < count; k += threads) {
        y[k] = StoreAs<Y>::from(softmax_output(to_compute(source[k]) - stats.max, inverse_sum, log_sum, log_mode));
    }
}

// Where item `item` lives: its row, its offset in the row and its element count.
struct ChunkPlace {
    std::int64_t row;
    std::int64_t offset;
    int count;
};

__device__ __forceinline__ ChunkPlace chunk_place(const SoftmaxKernelArgs& args, std::int64_t item) {
    const std::int64_t row = item / args.chunks;
    const std::int64_t offset = (item - row * args.chunks) * args.slice_len;
    const std::int64_t remaining = args.row_len - offset;
    return {row, offset, static_cast<int>(remaining < args.slice_len ? remaining : args.slice_len)};
}

template <class X, class Y>
__global__ void __launch_bounds__(512) split_row_softmax(const SoftmaxKernelArgs args) {
    using C = ComputeType<X>;
    constexpr int kPack = kPackOf<X>;
    extern __shared__ __align__(16) unsigned char dynamic_shared[];
    __shared__ Stats<C> scratch[32];
    const X* x = static_cast<const X*>(args.x);
    Y* y = static_cast<Y*>(args.y);
    Stats<C>* partials = static_cast<Stats<C>*>(args.workspace);
    const std::int64_t items = args.rows * args.chunks;
    // A slot holds a chunk shifted by its 16-byte phase (< kPack elements); slice_len is a multiple of
    // 64 elements, so every slot starts 16-byte aligned.
    const std::int64_t slot_len = args.slice_len + kPack;
    const int tid = threadIdx.x;
    const int threads = blockDim.x;

    const auto cache_for = [&](int local, const X* x_chunk) -> X* {
        if (local >= args.cached_chunks) return nullptr;
        const int shift = static_cast<int>(reinterpret_cast<std::uintptr_t>(x_chunk) % 16 / sizeof(X));
        return reinterpret_cast<X*>(dynamic_shared) + local * slot_len + shift;
    };

    int local_items = 0;
    for (std::int64_t item = blockIdx.x; item < items; item += gridDim.x, ++local_items) {
        const ChunkPlace place = chunk_place(args, item);
        const X* x_chunk = x + place.row * args.x_row_stride + place.offset;
        Stats<C> stats = chunk_stats(x_chunk, place.count, cache_for(local_items, x_chunk), tid, threads);
        stats = block_combine_stats(stats, scratch);
        if (tid == 0) partials[item] = stats;
    }

    // Every partial is written and visible (grid.sync orders memory across the grid).
    cooperative_groups::this_grid().sync();

    const bool log_mode = args.log_mode != 0;
    for (int local = local_items - 1; local >= 0; --local) {
        const std::int64_t item = blockIdx.x + static_cast<std::int64_t>(local) * gridDim.x;
        const ChunkPlace place = chunk_place(args, item);
        // Same partials, same per-thread split, same tree in every CTA of the row: identical statistics.
        Stats<C> stats = empty_stats<C>();
        const Stats<C>* row_partials = partials + place.row * args.chunks;
        for (std::int64_t c = tid; c < args.chunks; c += threads) {
            // L2, not L1: other SMs wrote these during phase 1.
            const Stats<C> partial{__ldcg(&row_partials[c].max), __ldcg(&row_partials[c].sum)};
            stats = combine(stats, partial);
        }
        stats = block_combine_stats(stats, scratch);
        const X* x_chunk = x + place.row * args.x_row_stride + place.offset;
        const X* cache = cache_for(local, x_chunk);
        chunk_write(cache != nullptr ? cache : x_chunk, y + place.row * args.y_row_stride + place.offset, place.count,
                    stats, log_mode, tid, threads);
    }
}

}  // namespace

const void* split_row_softmax_kernel(smxDataType_t x_dtype, smxDataType_t y_dtype) {
    return visit_dtype_pair(x_dtype, y_dtype, [](auto x_tag, auto y_tag) -> const void* {
        return reinterpret_cast<const void*>(
            &split_row_softmax<typename decltype(x_tag)::type, typename decltype(y_tag)::type>);
    });
}

}  // namespace smx::cuda
