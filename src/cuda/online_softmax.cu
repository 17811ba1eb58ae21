// online_softmax.cu - block-online: rows too long to cache in shared memory, many of them, Rows layout.
// One CTA per row (grid-stride over rows): online (max, sum) over x in one pass, then a second pass that
// re-reads x and writes y (traffic: x read twice, y written once, the second read often served by L2).
// Few very long rows go to split_row_softmax.cu instead.
#include "cuda/softmax_common.cuh"

namespace smx::cuda {
namespace {

constexpr int kRangeUnroll = 4;  // 16-byte packs in flight per thread and loop step

// Where the 16-byte-aligned body of x[0, count) starts and how many whole packs it has.
template <class X>
struct RangeSplit {
    std::int64_t head;   // leading elements before the first 16-byte boundary
    std::int64_t packs;  // whole packs after the head
    std::int64_t tail;   // first element after the packs
};

template <class X>
__device__ __forceinline__ RangeSplit<X> split_range(const X* x, std::int64_t count) {
    constexpr int kPack = kPackOf<X>;
    const std::int64_t shift = static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(x) % 16 / sizeof(X));
    const std::int64_t head = shift == 0 ? 0 : (count < kPack - shift ? count : kPack - shift);
    const std::int64_t packs = (count - head) / kPack;
    return {head, packs, head + packs * kPack};
}

// This thread's share of the statistics of x[0, count), threads striding; any alignment.
template <class X, class C = ComputeType<X>>
__device__ __forceinline__ Stats<C> range_stats(const X* x, std::int64_t count, int tid, int threads) {
    constexpr int kPack = kPackOf<X>;
    const RangeSplit<X> split = split_range(x, count);
    Stats<C> stats = empty_stats<C>();
    if (tid < split.head) {
        const C value = to_compute(x[tid]);
        add_chunk<1>(stats, &value);
    }
    const X* body = x + split.head;
    for (std::int64_t p = tid; p < split.packs; p += static_cast<std::int64_t>(threads) * kRangeUnroll) {
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
    for (std::int64_t k = split.tail + tid; k < count; k += threads) {
        const C value = to_compute(x[k]);
        add_chunk<1>(stats, &value);
    }
    return stats;
}

// Writes y[0, count) from x[0, count) and the row's statistics, threads striding; any alignment
// (y's packs are stored whole when y is aligned like x, element-wise otherwise).
template <class X, class Y, class C>
__device__ __forceinline__ void range_write(const X* x, Y* y, std::int64_t count, Stats<C> stats, bool log_mode,
                                            int tid, int threads) {
    constexpr int kPack = kPackOf<X>;
    const RangeSplit<X> split = split_range(x, count);
    const C inverse_sum = C(1) / stats.sum;
    const C log_sum = log_of(stats.sum);
    if (tid < split.head) {
        y[tid] = StoreAs<Y>::from(softmax_output(to_compute(x[tid]) - stats.max, inverse_sum, log_sum, log_mode));
    }
    const X* x_body = x + split.head;
    Y* y_body = y + split.head;
    const bool y_packs_aligned = reinterpret_cast<std::uintptr_t>(y_body) % kStoreAlignment<Y, kPack> == 0;
    for (std::int64_t p = tid; p < split.packs; p += static_cast<std::int64_t>(threads) * kRangeUnroll) {
        C values[kRangeUnroll][kPack];
        // All loads first: x and y may alias (in place), so the compiler would not hoist them itself.
#pragma unroll
        for (int u = 0; u < kRangeUnroll; ++u) {
            const std::int64_t pack = p + static_cast<std::int64_t>(u) * threads;
            if (pack < split.packs) load_pack(x_body + pack * kPack, values[u]);
        }
#pragma unroll
        for (int u = 0; u < kRangeUnroll; ++u) {
            const std::int64_t pack = p + static_cast<std::int64_t>(u) * threads;
            if (pack >= split.packs) continue;
#pragma unroll
            for (int k = 0; k < kPack; ++k) {
                values[u][k] = softmax_output(values[u][k] - stats.max, inverse_sum, log_sum, log_mode);
            }
            if (y_packs_aligned) {
                store_pack<Y, kPack>(y_body + pack * kPack, values[u]);
            } else {
#pragma unroll
                for (int k = 0; k < kPack; ++k) y_body[pack * kPack + k] = StoreAs<Y>::from(values[u][k]);
            }
        }
    }
    for (std::int64_t k = split.tail + tid; k < count; k += threads) {
        y[k] = StoreAs<Y>::from(softmax_output(to_compute(x[k]) - stats.max, inverse_sum, log_sum, log_mode));
    }
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

}  // namespace

const void* block_online_softmax_kernel(smxDataType_t x_dtype, smxDataType_t y_dtype) {
    return visit_dtype_pair(x_dtype, y_dtype, [](auto x_tag, auto y_tag) -> const void* {
        return reinterpret_cast<const void*>(
            &block_online_softmax<typename decltype(x_tag)::type, typename decltype(y_tag)::type>);
    });
}

}  // namespace smx::cuda
