// split.cu - backward-split: rows too long for registers, Rows layout, any row count. Each row is cut into
// chunks of slice_len elements (a multiple of 64, so every chunk keeps the row's phase), a CTA per
// (chunk, row), in two kernels:
//   sums   each CTA writes its chunk's sum of terms to the workspace (partials[row * chunks + chunk]);
//   write  each CTA folds its row's partials (the same order in every CTA: one sum for the whole row) and
//          reads its chunk again to write dx, in the reverse order of the sums kernel's CTAs, so the chunks
//          read last are the likeliest still in L2; the last reads and dx's stores are evict-first.
// Traffic: dy and y read twice (the second read partly from L2), dx written once. With same_phase the
// operands are read in head-peeled packs, element by element otherwise. Design: performance.md#backward.
#include "cuda/backward/common.cuh"

namespace smx::cuda {
namespace {

constexpr int kSplitUnroll = 4;  // packs of each operand in flight per thread and loop step

// Elements of chunk `chunk` of a row.
__device__ __forceinline__ std::int64_t split_chunk_count(const BackwardRowsParams& args, std::int64_t chunk) {
    const std::int64_t remaining = args.row_len - chunk * args.slice_len;
    return remaining < args.slice_len ? remaining : args.slice_len;
}

// Where the packs of a chunk start and end (with same_phase every operand's chunk has the same split).
struct ChunkSplit {
    std::int64_t head;   // elements before the first whole pack
    std::int64_t packs;  // whole packs after the head
    std::int64_t tail;   // first element after the packs
};

template <int kPack, class T>
__device__ __forceinline__ ChunkSplit split_chunk(const T* dy_chunk, std::int64_t count, bool vector) {
    if (!vector) return {0, 0, 0};  // every element through the tail loop
    constexpr int kPackBytes = kPack * static_cast<int>(sizeof(T));
    const std::int64_t head = head_before_packs<kPackBytes>(dy_chunk, count < kPack ? static_cast<int>(count) : kPack);
    const std::int64_t packs = (count - head) / kPack;
    return {head, packs, head + packs * kPack};
}

// Loads one loop step's packs of dy and y: packs p, p + threads, ... below `packs`, all issued before any is
// used; streaming (evict-first) for the last read of them.
template <Access kAccess, int kPack, class T>
__device__ __forceinline__ void load_split_step(const T* dy_body, const T* y_body, std::int64_t p, std::int64_t packs,
                                                int threads, Packed<T, kPack> (&dy_packs)[kSplitUnroll],
                                                Packed<T, kPack> (&y_packs)[kSplitUnroll]) {
    const auto load = [](const T* source) {
        const auto* pack = reinterpret_cast<const Packed<T, kPack>*>(source);
        if constexpr (kAccess == Access::Streaming) {
            return load_streaming(pack);
        } else {
            return *pack;
        }
    };
#pragma unroll
    for (int u = 0; u < kSplitUnroll; ++u) {
        const std::int64_t pack = p + static_cast<std::int64_t>(u) * threads;
        if (pack < packs) {
            dy_packs[u] = load(dy_body + pack * kPack);
            y_packs[u] = load(y_body + pack * kPack);
        }
    }
}

// This thread's sum of the terms of one chunk: head elements, kSplitUnroll packs a loop step (summed in
// segments), then the tail.
template <class Gradient, int kPack, class T, class C = ComputeType<T>>
__device__ __forceinline__ C chunk_sum(const T* dy, const T* y, std::int64_t count, bool vector) {
    const int tid = threadIdx.x;
    const int threads = blockDim.x;
    const ChunkSplit split = split_chunk<kPack>(dy, count, vector);
    const T* dy_body = dy + split.head;
    const T* y_body = y + split.head;
    C sum = segmented_sum<C>(tid, split.packs, static_cast<std::int64_t>(threads) * kSplitUnroll, [&](std::int64_t p) {
        Packed<T, kPack> dy_packs[kSplitUnroll];
        Packed<T, kPack> y_packs[kSplitUnroll];
        load_split_step<Access::Normal>(dy_body, y_body, p, split.packs, threads, dy_packs, y_packs);
        C step = C(0);
#pragma unroll
        for (int u = 0; u < kSplitUnroll; ++u) {
            if (p + static_cast<std::int64_t>(u) * threads >= split.packs) continue;
#pragma unroll
            for (int k = 0; k < kPack; ++k) {
                step += Gradient::term(widen_element_on_use(dy_packs[u], k), widen_element_on_use(y_packs[u], k));
            }
        }
        return step;
    });
    if (tid < split.head) sum += Gradient::term(to_compute(dy[tid]), to_compute(y[tid]));
    sum += segmented_sum<C>(split.tail + tid, count, threads,
                            [&](std::int64_t k) { return Gradient::term(to_compute(dy[k]), to_compute(y[k])); });
    return sum;
}

// Writes one chunk of dx from its dy, y and the row's sum; the last read of dy and y and dx's stores
// streaming (evict-first), so the chunks still to be read again keep their place in L2.
template <class Gradient, int kPack, class T, class D, class C>
__device__ __forceinline__ void chunk_write(const T* dy, const T* y, D* dx, std::int64_t count, C sum, bool vector) {
    const int tid = threadIdx.x;
    const int threads = blockDim.x;
    const ChunkSplit split = split_chunk<kPack>(dy, count, vector);
    const auto element = [&](std::int64_t k) {
        dx[k] = StoreAs<D>::from(Gradient::element(to_compute(dy[k]), to_compute(y[k]), sum));
    };
    if (tid < split.head) element(tid);
    const T* dy_body = dy + split.head;
    const T* y_body = y + split.head;
    D* dx_body = dx + split.head;
    for (std::int64_t p = tid; p < split.packs; p += static_cast<std::int64_t>(threads) * kSplitUnroll) {
        // All of a step's loads first: dx may be dy (in place), so the compiler would not hoist them itself.
        Packed<T, kPack> dy_packs[kSplitUnroll];
        Packed<T, kPack> y_packs[kSplitUnroll];
        load_split_step<Access::Streaming>(dy_body, y_body, p, split.packs, threads, dy_packs, y_packs);
#pragma unroll
        for (int u = 0; u < kSplitUnroll; ++u) {
            const std::int64_t pack = p + static_cast<std::int64_t>(u) * threads;
            if (pack >= split.packs) continue;
            C out[kPack];
#pragma unroll
            for (int k = 0; k < kPack; ++k) {
                out[k] = Gradient::element(widen_element_on_use(dy_packs[u], k), widen_element_on_use(y_packs[u], k), sum);
            }
            store_pack<D, kPack, Access::Streaming>(dx_body + pack * kPack, out);
        }
    }
    for (std::int64_t k = split.tail + tid; k < count; k += threads) element(k);
}

template <class T, int kPack, class Gradient>
__device__ __forceinline__ void split_sums_rows(const BackwardRowsParams& args) {
    using C = ComputeType<T>;
    __shared__ C warp_sums[32];
    const std::int64_t chunk = blockIdx.x;
    const std::int64_t count = split_chunk_count(args, chunk);
    const std::int64_t offset = chunk * args.slice_len;
    C* partials = static_cast<C*>(args.workspace);
    for (std::int64_t row = blockIdx.y; row < args.rows; row += gridDim.y) {
        const T* dy = static_cast<const T*>(args.dy) + row * args.dy_row_stride + offset;
        const T* y = static_cast<const T*>(args.y) + row * args.y_row_stride + offset;
        const C sum = block_sum(chunk_sum<Gradient, kPack>(dy, y, count, args.same_phase != 0), warp_sums);
        if (threadIdx.x == 0) partials[row * args.chunks + chunk] = sum;
    }
}

template <class T, class D, class Gradient>
__device__ __forceinline__ void split_write_rows(const BackwardRowsParams& args) {
    using C = ComputeType<T>;
    constexpr int kPack = kPackOfPair<T, D>;
    __shared__ C warp_sums[32];
    const std::int64_t chunk = gridDim.x - 1 - blockIdx.x;
    const std::int64_t count = split_chunk_count(args, chunk);
    const std::int64_t offset = chunk * args.slice_len;
    const C* partials = static_cast<const C*>(args.workspace);
    for (std::int64_t row = gridDim.y - 1 - blockIdx.y; row < args.rows; row += gridDim.y) {
        // Every CTA of the row folds the same partials in the same order: one sum for the whole row.
        C folded = C(0);
        for (std::int64_t c = threadIdx.x; c < args.chunks; c += blockDim.x) folded += partials[row * args.chunks + c];
        const C sum = block_sum(folded, warp_sums);
        chunk_write<Gradient, kPack>(static_cast<const T*>(args.dy) + row * args.dy_row_stride + offset,
                                     static_cast<const T*>(args.y) + row * args.y_row_stride + offset,
                                     static_cast<D*>(args.dx) + row * args.dx_row_stride + offset, count, sum,
                                     args.same_phase != 0);
    }
}

// kPack: the pair's pack (the head peel must agree with the write kernel's); one instance serves every
// dx dtype of that pack.
template <class T, int kPack>
__global__ void __launch_bounds__(512) backward_split_sums(const ParamBlock<BackwardRowsParams> args) {
    if (args.log_mode != 0) {
        split_sums_rows<T, kPack, LogSoftmaxGradient>(args);
    } else {
        split_sums_rows<T, kPack, SoftmaxGradient>(args);
    }
}

template <class T, class D>
__global__ void __launch_bounds__(512) backward_split_write(const ParamBlock<BackwardRowsParams> args) {
    if (args.log_mode != 0) {
        split_write_rows<T, D, LogSoftmaxGradient>(args);
    } else {
        split_write_rows<T, D, SoftmaxGradient>(args);
    }
}

}  // namespace

const void* backward_split_sums_kernel(smxDataType_t value_dtype, smxDataType_t gradient_dtype) {
    return visit_dtype_pair(value_dtype, gradient_dtype, [](auto t_tag, auto d_tag) -> const void* {
        using T = typename decltype(t_tag)::type;
        using D = typename decltype(d_tag)::type;
        return reinterpret_cast<const void*>(&backward_split_sums<T, kPackOfPair<T, D>>);
    });
}

const void* backward_split_write_kernel(smxDataType_t value_dtype, smxDataType_t gradient_dtype) {
    return visit_dtype_pair(value_dtype, gradient_dtype, [](auto t_tag, auto d_tag) -> const void* {
        return reinterpret_cast<const void*>(
            &backward_split_write<typename decltype(t_tag)::type, typename decltype(d_tag)::type>);
    });
}

}  // namespace smx::cuda
