// rows.cu - the per-row steps of the vocabulary-parallel operators, none of which reads x.
//   row      a thread per row, any layout: the row's statistics combined over the ranks, then its logsumexp, or
//            its cross-entropy loss (and lse), in the statistics' dtype. Traffic: ranks * width values per row.
//   count    one CTA: the rows whose target is not ignore_index (a MEAN's divisor), exact in a double.
//   reduce   one CTA of a fixed size: the per-row losses added in double in a fixed order (a strided sum per
//            thread, then a fixed tree), so the reduced loss is the same bits on every run and every rank.
#include "cuda/vocab_parallel/common.cuh"

namespace smx::cuda {
namespace {

template <class S>
__global__ void __launch_bounds__(kRowThreads) shard_rows(const RowParams p) {
    const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
    for (std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; row < p.space.rows;
         row += step) {
        const GatheredStats<S> gathered{static_cast<const S*>(p.stats) + row_start(p.space, p.stats_strides, row),
                                        p.stats_strides.axis, p.ranks, p.width};
        const CombinedStats<S> c = combine_ranks(gathered);
        if (p.output == static_cast<int>(RowOutput::Logsumexp)) {
            static_cast<S*>(p.out)[row_start(p.space, p.out_strides, row)] = c.logsumexp();
            continue;
        }
        if (p.lse != nullptr) static_cast<S*>(p.lse)[row_start(p.space, p.lse_strides, row)] = c.logsumexp();
        const std::int64_t t = load_class(p.target, p.target_is_i64 != 0, row_start(p.space, p.target_strides, row));
        const S classes = gathered.total(4);
        // The loss in double, as the reference forms it: the smoothing sum below overflows where its own does.
        double loss = 0;  // an ignored row's
        if (t != p.ignore_index) {
            // A target outside the vocabulary, or a row whose log-softmax is NaN: NaN.
            const bool valid = t >= 0 && static_cast<S>(t) < classes && c.finite();
            const double max = c.max, log_sum = log_of(c.sum), count = classes;
            loss = valid ? (max - static_cast<double>(gathered.total(2))) + log_sum : 0.0 / 0.0;
            const double eps = p.label_smoothing;
            if (valid && eps > 0) {
                double mean = 0;  // the ranks' means weighted by their share of the classes (weights <= 1)
                for (std::int64_t w = 0; w < gathered.ranks; ++w) {
                    mean += static_cast<double>(gathered.at(w, 4)) / count * static_cast<double>(gathered.at(w, 3));
                }
                // eps / V times the sum over the classes of lse - x, that sum formed as (lse - mean) * V: +inf
                // where smxCrossEntropy's sum overflows (huge f64 logits), not the finite eps * (lse - mean).
                const double smooth = ((max - mean) + log_sum) * count;
                loss = (1.0 - eps) * loss + eps / count * smooth;
            }
        }
        if (p.out != nullptr) {
            static_cast<S*>(p.out)[row_start(p.space, p.out_strides, row)] = static_cast<S>(loss);
        } else {
            p.row_losses[row] = loss;
        }
    }
}

__global__ void __launch_bounds__(kLossThreads) shard_count(const LossParams p) {
    __shared__ unsigned long long scratch[32];
    unsigned long long counted = 0;
    for (std::int64_t row = threadIdx.x; row < p.space.rows; row += blockDim.x) {
        const std::int64_t t = load_class(p.target, p.target_is_i64 != 0, row_start(p.space, p.target_strides, row));
        counted += t != p.ignore_index ? 1 : 0;
    }
    counted = block_sum(counted, scratch);
    if (threadIdx.x == 0) *p.count = static_cast<double>(counted);
}

template <class S>
__global__ void __launch_bounds__(kLossThreads) shard_reduce(const LossParams p) {
    __shared__ double scratch[32];
    double sum = 0;
    for (std::int64_t row = threadIdx.x; row < p.space.rows; row += blockDim.x) sum += p.row_losses[row];
    sum = block_sum(sum, scratch);
    if (threadIdx.x == 0) {
        // A mean over no counted rows is 0 / 0, NaN, as in PyTorch.
        static_cast<S*>(p.loss)[0] = static_cast<S>(p.mean != 0 ? sum / *p.count : sum);
    }
}

}  // namespace

const void* row_kernel(smxDataType_t stats_dtype) {
    if (stats_dtype == SMX_DTYPE_F64) return reinterpret_cast<const void*>(&shard_rows<double>);
    if (stats_dtype == SMX_DTYPE_F32) return reinterpret_cast<const void*>(&shard_rows<float>);
    return nullptr;
}

const void* count_kernel() { return reinterpret_cast<const void*>(&shard_count); }

const void* reduce_kernel(smxDataType_t loss_dtype) {
    if (loss_dtype == SMX_DTYPE_F64) return reinterpret_cast<const void*>(&shard_reduce<double>);
    if (loss_dtype == SMX_DTYPE_F32) return reinterpret_cast<const void*>(&shard_reduce<float>);
    return nullptr;
}

}  // namespace smx::cuda
