// statistics.cu - step 1 of the vocabulary-parallel operators: a shard's statistics per row. Shape class: any rows
// of any layout, a CTA per row (grid-stride over rows). Traffic: the shard read once, a few values per row
// written. Where the axis is contiguous (the Rows layout) a thread loads 16-byte packs (a row's unaligned head
// and tail element by element); elsewhere elements one by one along the axis stride. Online (max, sum of exp)
// per thread (add_chunk), combined over the block; for cross-entropy also the mean logit (each element times
// 1 / n, so no partial sum overflows where the mean does not), the target's logit and the class count.
#include "cuda/common/reduce.cuh"
#include "cuda/vocab_parallel/common.cuh"

namespace smx::cuda {
namespace {

constexpr int kScalarUnroll = 4;  // elements in flight per thread and loop step on the strided path

template <class X, bool kVector>
__global__ void __launch_bounds__(kVocabParallelThreads) shard_statistics(const StatisticsParams p) {
    using C = ComputeType<X>;
    constexpr int kPack = kPackOf<X>;
    __shared__ Stats<C> scratch[32];
    __shared__ C sum_scratch[32];
    const X* x = static_cast<const X*>(p.x);
    C* stats = static_cast<C*>(p.stats);
    const std::int64_t n = p.row_len;
    const C inverse_n = n > 0 ? C(1) / C(n) : C(0);

    for (std::int64_t row = blockIdx.x; row < p.space.rows; row += gridDim.x) {
        const X* x_row = x + row_start(p.space, p.x_strides, row);
        Stats<C> running = empty_stats<C>();
        C scaled_sum = 0;  // sum of x / n over this thread's elements
        const auto take = [&](C v) {
            add_chunk<1>(running, &v);
            scaled_sum = fma(v, inverse_n, scaled_sum);
        };
        if constexpr (kVector) {
            // Elements before the first 16-byte boundary, the packs, then the elements after the last pack.
            const auto address = reinterpret_cast<std::uintptr_t>(x_row) / sizeof(X);
            const auto to_boundary = static_cast<std::int64_t>((kPack - address % kPack) % kPack);
            const std::int64_t head = to_boundary < n ? to_boundary : n;
            const std::int64_t packs = (n - head) / kPack;
            const std::int64_t tail = head + packs * kPack;
            if (threadIdx.x < head) take(to_compute(x_row[threadIdx.x]));
            const X* aligned = x_row + head;
            for (std::int64_t k = threadIdx.x; k < packs; k += blockDim.x) {
                C values[kPack];
                load_pack<X, C, kPack>(aligned + k * kPack, values);
                add_chunk<kPack>(running, values);
#pragma unroll
                for (int e = 0; e < kPack; ++e) scaled_sum = fma(values[e], inverse_n, scaled_sum);
            }
            if (tail + threadIdx.x < n) take(to_compute(x_row[tail + threadIdx.x]));
        } else {
            const std::int64_t stride = p.x_strides.axis;
            const std::int64_t step = static_cast<std::int64_t>(blockDim.x) * kScalarUnroll;
            running = segmented_stats<C>(threadIdx.x, n, step, [&](std::int64_t j, Stats<C>& segment) {
                C values[kScalarUnroll];
#pragma unroll
                for (int u = 0; u < kScalarUnroll; ++u) {
                    const std::int64_t position = j + static_cast<std::int64_t>(u) * blockDim.x;
                    values[u] = position < n ? to_compute(x_row[position * stride]) : neg_inf<C>();
                    if (position < n) scaled_sum = fma(values[u], inverse_n, scaled_sum);
                }
                add_chunk<kScalarUnroll>(segment, values);
            });
        }
        const Stats<C> row_stats = block_combine_stats(running, scratch);
        const C mean = block_sum(scaled_sum, sum_scratch);
        // A NaN or +inf makes the sum NaN (and the max with it): tell them apart only then, by a second read.
        bool has_nan = false;
        if (row_stats.sum != row_stats.sum) {
            bool seen = false;
            for (std::int64_t j = threadIdx.x; j < n; j += blockDim.x) {
                const C v = to_compute(x_row[j * p.x_strides.axis]);
                seen = seen || v != v;
            }
            has_nan = __syncthreads_or(seen) != 0;
        }
        if (threadIdx.x == 0) {
            const std::int64_t out = row_start(p.space, p.stats_strides, row);
            const std::int64_t step = p.stats_strides.axis;
            const bool ordinary = row_stats.sum == row_stats.sum && row_stats.max != neg_inf<C>();
            const C max = has_nan ? row_stats.sum  // the NaN
                          : row_stats.sum != row_stats.sum ? -neg_inf<C>()  // +inf and no NaN
                                                           : row_stats.max;
            stats[out] = max;
            stats[out + step] = ordinary ? row_stats.sum : C(0);
            if (p.width == kCrossEntropyStatisticsWidth) {
                const std::int64_t t =
                    load_class(p.target, p.target_is_i64 != 0, row_start(p.space, p.target_strides, row));
                // t >= vocab_start >= 0 first, so the subtraction cannot overflow.
                const bool here = t >= p.vocab_start && t - p.vocab_start < n;
                stats[out + 2 * step] = here ? to_compute(x_row[(t - p.vocab_start) * p.x_strides.axis]) : C(0);
                stats[out + 3 * step] = mean;
                stats[out + 4 * step] = C(n);
            }
        }
    }
}

}  // namespace

const void* statistics_kernel(smxDataType_t x_dtype, bool vector) {
    return visit_dtype(x_dtype, [vector](auto x_tag) -> const void* {
        using X = typename decltype(x_tag)::type;
        return vector ? reinterpret_cast<const void*>(&shard_statistics<X, true>)
                      : reinterpret_cast<const void*>(&shard_statistics<X, false>);
    });
}

}  // namespace smx::cuda
