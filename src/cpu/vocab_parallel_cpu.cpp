// vocab_parallel_cpu.cpp - the CPU backend of the vocabulary-parallel operators: the reference every other
// backend is checked against.
//
// A shard's row reduces to (max, sum of exp(x - max)) in double (cpu/logprob_rows.hpp), rounded once to the
// statistics dtype. The gathered statistics of a row combine in rank order, in double: M the largest max (NaN
// if any is NaN), S = sum of sum_w * exp(max_w - M); every output is then rounded once to its dtype.
#include "cpu/vocab_parallel_cpu.hpp"

#include <cmath>
#include <string>

#include "core/dtype.hpp"
#include "cpu/logprob_rows.hpp"
#include "cpu/rows.hpp"

namespace smx {
namespace {

// A row's statistics combined over the ranks: the whole row's max M and sum S of exp(x - M).
struct Combined {
    double max = -kInf;
    double sum = 0.0;

    bool finite() const { return std::isfinite(max); }
    // smxLogsumexp's special values: M itself where it is NaN or infinite.
    double logsumexp() const { return finite() ? max + std::log(sum) : max; }
};

// The gathered statistics of one row: rank w's value k sits at start + (w * width + k) * stride.
struct GatheredRow {
    const void* base;
    smxDataType_t dtype;
    std::int64_t start;
    std::int64_t stride;
    std::int64_t ranks;
    std::int64_t width;

    double at(std::int64_t rank, std::int64_t k) const {
        return load_as_double(base, dtype, start + (rank * width + k) * stride);
    }

    // Every rank's value k added in rank order (the target logit, the class count).
    double total(std::int64_t k) const {
        double sum = 0.0;
        for (std::int64_t w = 0; w < ranks; ++w) sum += at(w, k);
        return sum;
    }

    // The whole row's mean logit: the ranks' means weighted by their share of the `classes` (weights <= 1, so
    // no term overflows where the means do not).
    double mean(double classes) const {
        double sum = 0.0;
        for (std::int64_t w = 0; w < ranks; ++w) sum += at(w, 4) / classes * at(w, 3);
        return sum;
    }

    Combined combine() const {
        Combined c;
        for (std::int64_t w = 0; w < ranks; ++w) {
            const double m = at(w, 0);
            if (std::isnan(m) || m > c.max) c.max = m;  // a NaN, once taken, is never replaced
        }
        if (!c.finite()) return c;
        for (std::int64_t w = 0; w < ranks; ++w) c.sum += at(w, 1) * std::exp(at(w, 0) - c.max);
        return c;
    }
};

class CpuShardStatisticsPlan final : public ShardStatisticsPlan {
public:
    CpuShardStatisticsPlan(const ShardStatisticsInfo& info, int max_threads)
        : info_(info), threads_(cpu_threads_for(info, max_threads)),
          description_(cpu_plan_text(info, threads_)) {}

    std::size_t workspace_bytes() const override { return 0; }
    const std::string& description() const override { return description_; }

    smxStatus_t run(void*, void* stats, const void* x, const void* target, void*) const override {
        const std::int64_t n = info_.row_len;
        run_row_chunks(info_.rows, threads_, [&](std::int64_t begin, std::int64_t end) {
            for (std::int64_t r = begin; r < end; ++r) {
                const Row row{x, info_.x_dtype, row_offset(info_, info_.x, r), info_.x.axis_stride, n};
                const RowStats s = row_stats(row);
                const std::int64_t out0 = row_offset(info_, info_.stats, r);
                const auto store = [&](std::int64_t k, double value) {
                    store_from_double(stats, info_.stats_dtype, out0 + k * info_.stats.axis_stride, value);
                };
                store(0, s.has_nan ? kNaN : s.max);
                store(1, s.ordinary() ? s.sum : 0.0);
                if (!info_.has_target) continue;
                const std::int64_t t = load_index(target, info_.target_dtype, row_offset(info_, info_.target, r));
                // t >= vocab_start >= 0 first, so the subtraction cannot overflow.
                const bool here = t >= info_.vocab_start && t - info_.vocab_start < n;
                store(2, here ? row.at(t - info_.vocab_start) : 0.0);
                // Each term divided first: a sum of the logits themselves could overflow where their mean cannot.
                double mean = 0.0;
                for (std::int64_t j = 0; j < n; ++j) mean += row.at(j) / static_cast<double>(n);
                store(3, mean);
                store(4, static_cast<double>(n));
            }
        });
        return SMX_STATUS_SUCCESS;
    }

private:
    ShardStatisticsInfo info_;
    int threads_;
    std::string description_;
};

class CpuShardSoftmaxPlan final : public ShardSoftmaxPlan {
public:
    CpuShardSoftmaxPlan(const ShardSoftmaxInfo& info, int max_threads)
        : info_(info), threads_(cpu_threads_for(info, max_threads)),
          description_(cpu_plan_text(info, threads_)) {}

    std::size_t workspace_bytes() const override { return 0; }
    const std::string& description() const override { return description_; }

    smxStatus_t run(void*, void* y, const void* x, const void* stats, void*) const override {
        run_row_chunks(info_.rows, threads_, [&](std::int64_t begin, std::int64_t end) {
            for (std::int64_t r = begin; r < end; ++r) {
                const GatheredRow gathered{stats, info_.stats_dtype, row_offset(info_, info_.stats, r),
                                           info_.stats.axis_stride, info_.ranks, kSoftmaxStatistics};
                const Combined c = gathered.combine();
                const double log_sum = std::log(c.sum);
                const Row row{x, info_.x_dtype, row_offset(info_, info_.x, r), info_.x.axis_stride, info_.row_len};
                const std::int64_t y0 = row_offset(info_, info_.y, r);
                for (std::int64_t j = 0; j < info_.row_len; ++j) {
                    const double shifted = row.at(j) - c.max;
                    const double value = !c.finite()    ? kNaN
                                         : info_.is_log() ? shifted - log_sum
                                                          : std::exp(shifted) / c.sum;
                    store_from_double(y, info_.y_dtype, y0 + j * info_.y.axis_stride, value);
                }
            }
        });
        return SMX_STATUS_SUCCESS;
    }

private:
    ShardSoftmaxInfo info_;
    int threads_;
    std::string description_;
};

class CpuShardLogsumexpPlan final : public ShardLogsumexpPlan {
public:
    CpuShardLogsumexpPlan(const ShardLogsumexpInfo& info, int max_threads)
        : info_(info), threads_(cpu_threads_for(info, max_threads)),
          description_(cpu_plan_text(info, threads_)) {}

    std::size_t workspace_bytes() const override { return 0; }
    const std::string& description() const override { return description_; }

    smxStatus_t run(void*, void* out, const void* stats, void*) const override {
        run_row_chunks(info_.rows, threads_, [&](std::int64_t begin, std::int64_t end) {
            for (std::int64_t r = begin; r < end; ++r) {
                const GatheredRow gathered{stats, info_.stats_dtype, row_offset(info_, info_.stats, r),
                                           info_.stats.axis_stride, info_.ranks, kSoftmaxStatistics};
                store_from_double(out, info_.stats_dtype, row_offset(info_, info_.out, r),
                                  gathered.combine().logsumexp());
            }
        });
        return SMX_STATUS_SUCCESS;
    }

private:
    ShardLogsumexpInfo info_;
    int threads_;
    std::string description_;
};

class CpuShardCrossEntropyPlan final : public ShardCrossEntropyPlan {
public:
    CpuShardCrossEntropyPlan(const ShardCrossEntropyInfo& info, int max_threads)
        : info_(info), threads_(cpu_threads_for(info, max_threads, info.numel + info.rows * info.stats.axis_len)),
          description_(cpu_plan_text(info, threads_)) {}

    std::size_t workspace_bytes() const override { return cross_entropy_workspace_bytes(info_); }
    const std::string& description() const override { return description_; }

    smxStatus_t run(void* workspace, void* loss, void* lse, void* dlogits, const void* logits, const void* target,
                    const void* stats, void*) const override {
        run_cross_entropy(info_, threads_, workspace, loss, target, [&](std::int64_t r, double scale) {
            return compute_row(r, scale, lse, dlogits, logits, target, stats);
        });
        return SMX_STATUS_SUCCESS;
    }

private:
    // Row r's loss from its gathered statistics; writes its lse and the shard's dlogits where the info has them.
    // Each logit is read before its own dlogits element is written, and no other after (in place is safe).
    double compute_row(std::int64_t r, double scale, void* lse, void* dlogits, const void* logits, const void* target,
                       const void* stats) const {
        const GatheredRow gathered{stats, info_.stats_dtype, row_offset(info_, info_.stats, r),
                                   info_.stats.axis_stride, info_.ranks, kCrossEntropyStatistics};
        const Combined c = gathered.combine();
        if (info_.has_lse) store_from_double(lse, info_.lse_dtype, row_offset(info_, info_.lse, r), c.logsumexp());
        const std::int64_t t = load_index(target, info_.target_dtype, row_offset(info_, info_.target, r));
        const bool ignored = t == info_.ignore_index;
        const double classes = gathered.total(4);
        // A target outside the vocabulary, or a row whose log-softmax is NaN: loss NaN and dlogits NaN.
        const bool valid = t >= 0 && static_cast<double>(t) < classes && c.finite();
        const double eps = info_.label_smoothing;
        const double log_sum = std::log(c.sum);
        double row_loss = 0.0;
        if (!ignored) {
            row_loss = valid ? (c.max - gathered.total(2)) + log_sum : kNaN;
            if (valid && eps > 0.0) {
                // eps / V times the sum over the classes of lse - x, that sum formed as (lse - mean) * V: +inf
                // where smxCrossEntropy's own sum overflows (huge f64 logits), not the finite eps * (lse - mean).
                const double smooth = ((c.max - gathered.mean(classes)) + log_sum) * classes;
                row_loss = (1.0 - eps) * row_loss + eps / classes * smooth;
            }
        }
        if (info_.has_dlogits) {
            const std::int64_t n = info_.row_len;
            const Row row{logits, info_.logits_dtype, row_offset(info_, info_.logits, r), info_.logits.axis_stride, n};
            const std::int64_t d0 = row_offset(info_, info_.dlogits, r);
            const double uniform = eps / classes;
            for (std::int64_t j = 0; j < n; ++j) {
                double grad = ignored ? 0.0 : kNaN;
                if (!ignored && valid) {
                    const double p = std::exp(row.at(j) - c.max) / c.sum;
                    const bool is_target = info_.vocab_start + j == t;
                    grad = scale * (p - (is_target ? 1.0 - eps : 0.0) - uniform);
                }
                store_from_double(dlogits, info_.dlogits_dtype, d0 + j * info_.dlogits.axis_stride, grad);
            }
        }
        return row_loss;
    }

    ShardCrossEntropyInfo info_;
    int threads_;
    std::string description_;
};

}  // namespace

smxStatus_t make_cpu_shard_statistics_plan(const ShardStatisticsInfo& info, int max_threads,
                                           std::unique_ptr<ShardStatisticsPlan>* plan) {
    *plan = std::make_unique<CpuShardStatisticsPlan>(info, max_threads);
    return SMX_STATUS_SUCCESS;
}

smxStatus_t make_cpu_shard_softmax_plan(const ShardSoftmaxInfo& info, int max_threads,
                                        std::unique_ptr<ShardSoftmaxPlan>* plan) {
    *plan = std::make_unique<CpuShardSoftmaxPlan>(info, max_threads);
    return SMX_STATUS_SUCCESS;
}

smxStatus_t make_cpu_shard_logsumexp_plan(const ShardLogsumexpInfo& info, int max_threads,
                                          std::unique_ptr<ShardLogsumexpPlan>* plan) {
    *plan = std::make_unique<CpuShardLogsumexpPlan>(info, max_threads);
    return SMX_STATUS_SUCCESS;
}

smxStatus_t make_cpu_shard_cross_entropy_plan(const ShardCrossEntropyInfo& info, int max_threads,
                                              std::unique_ptr<ShardCrossEntropyPlan>* plan) {
    *plan = std::make_unique<CpuShardCrossEntropyPlan>(info, max_threads);
    return SMX_STATUS_SUCCESS;
}

}  // namespace smx
