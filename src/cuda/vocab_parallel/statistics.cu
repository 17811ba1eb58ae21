// statistics.cu - step 1 of the vocabulary-parallel operators: a shard's statistics per row. Shape class: any rows
// of any layout, a CTA per row (grid-stride over rows; 256 threads, 512 on rows of kStatisticsWideRowLen or more).
// Traffic: the shard read once, a few values per row written. The per-thread accumulation is the log-probability
// stats kernel's (logprobs/rows.cuh): where the axis is contiguous (the Rows layout) kStatsUnroll 16-byte packs in
// flight per thread, 16-bit maxima taken on packed pairs (a row's unaligned head and tail element by element);
// elsewhere elements along the axis stride. Its statistics keep NaN and +inf apart (a NaN's sum is NaN, a +inf's
// max is +inf), so no row is read twice. For cross-entropy also the mean logit (each element times 1 / n, so no
// partial sum overflows where the mean does not), the target's logit and the class count. Every fold has a fixed
// order for a given launch shape, and the shape depends on the row length alone: the same bits on every run.
#include "cuda/logprobs/rows.cuh"
#include "cuda/vocab_parallel/common.cuh"

namespace smx::cuda {
namespace {

template <class X, bool kVector, bool kMean>
__global__ void __launch_bounds__(kStatisticsMaxThreads) shard_statistics(const StatisticsParams p) {
    using C = ComputeType<X>;
    __shared__ RowStats<C> scratch[33];
    const X* x = static_cast<const X*>(p.x);
    C* stats = static_cast<C*>(p.stats);
    const std::int64_t n = p.row_len;
    const C inverse_n = n > 0 ? C(1) / C(n) : C(0);

    for (std::int64_t row = blockIdx.x; row < p.space.rows; row += gridDim.x) {
        const X* x_row = x + row_start(p.space, p.x_strides, row);
        RowStats<C> own;
        if constexpr (kVector) {
            own = range_stats<kMean>(x_row, n, threadIdx.x, blockDim.x, inverse_n);
        } else {
            const std::int64_t stride = p.x_strides.axis;
            own = strided_stats<C>([&](std::int64_t j) { return C(to_compute(x_row[j * stride])); }, n, threadIdx.x,
                                   blockDim.x, inverse_n, kMean);
        }
        const RowStats<C> row_stats = cta_stats(own, scratch);
        if (threadIdx.x == 0) {
            const std::int64_t out = row_start(p.space, p.stats_strides, row);
            const std::int64_t step = p.stats_strides.axis;
            // The shard's (max, sum) as combine_ranks reads them: max NaN where a NaN is, +inf where a +inf is
            // (and no NaN), -inf for none; the sum only where the max is finite, else 0.
            const bool has_nan = row_stats.sum != row_stats.sum;
            const bool ordinary = !has_nan && isfinite(row_stats.max);
            stats[out] = has_nan ? row_stats.sum : row_stats.max;
            stats[out + step] = ordinary ? row_stats.sum : C(0);
            if constexpr (kMean) {
                const std::int64_t t =
                    load_class(p.target, p.target_is_i64 != 0, row_start(p.space, p.target_strides, row));
                // t >= vocab_start >= 0 first, so the subtraction cannot overflow.
                const bool here = t >= p.vocab_start && t - p.vocab_start < n;
                stats[out + 2 * step] = here ? to_compute(x_row[(t - p.vocab_start) * p.x_strides.axis]) : C(0);
                stats[out + 3 * step] = row_stats.mean;
                stats[out + 4 * step] = C(n);
            }
        }
    }
}

template <class X, bool kVector>
const void* statistics_instance(bool cross_entropy) {
    return cross_entropy ? reinterpret_cast<const void*>(&shard_statistics<X, kVector, true>)
                         : reinterpret_cast<const void*>(&shard_statistics<X, kVector, false>);
}

}  // namespace

const void* statistics_kernel(smxDataType_t x_dtype, bool vector, bool cross_entropy) {
    return visit_dtype(x_dtype, [vector, cross_entropy](auto x_tag) -> const void* {
        using X = typename decltype(x_tag)::type;
        return vector ? statistics_instance<X, true>(cross_entropy) : statistics_instance<X, false>(cross_entropy);
    });
}

}  // namespace smx::cuda
