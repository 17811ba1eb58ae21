// logprobs_cpu.cpp - the CPU backend of logsumexp, log-softmax gather and cross-entropy: the reference every
// other backend is checked against.
//
// Per row: one pass for the maximum (NaN noted apart, since a max would drop it), one for the sum of
// exponentials, in double; then the outputs, each rounded once to its dtype. Rows are split across threads
// (cpu/rows.hpp). A reduced cross-entropy keeps each row's loss in the workspace and adds them in row
// order on the calling thread, so the result does not depend on the thread count.
#include "cpu/logprobs_cpu.hpp"

#include <cmath>
#include <string>

#include "core/dtype.hpp"
#include "cpu/logprob_rows.hpp"
#include "cpu/rows.hpp"

namespace smx {
namespace {

class CpuLogsumexpPlan final : public LogsumexpPlan {
public:
    CpuLogsumexpPlan(const LogsumexpInfo& info, int max_threads)
        : info_(info), threads_(cpu_threads_for(info, max_threads)),
          description_(cpu_plan_text(info, threads_)) {}

    std::size_t workspace_bytes() const override { return 0; }
    const std::string& description() const override { return description_; }

    smxStatus_t run(void*, void* out, const void* x, void*) const override {
        run_row_chunks(info_.rows, threads_, [&](std::int64_t begin, std::int64_t end) {
            for (std::int64_t r = begin; r < end; ++r) {
                const Row row{x, info_.x_dtype, row_offset(info_, info_.x, r), info_.x.axis_stride, info_.row_len};
                store_from_double(out, info_.out_dtype, row_offset(info_, info_.out, r), row_stats(row).logsumexp());
            }
        });
        return SMX_STATUS_SUCCESS;
    }

private:
    LogsumexpInfo info_;
    int threads_;
    std::string description_;
};

class CpuLogSoftmaxGatherPlan final : public LogSoftmaxGatherPlan {
public:
    CpuLogSoftmaxGatherPlan(const LogSoftmaxGatherInfo& info, int max_threads)
        : info_(info), threads_(cpu_threads_for(info, max_threads, info.numel + info.rows * info.gathered)),
          description_(cpu_plan_text(info, threads_)) {}

    std::size_t workspace_bytes() const override { return 0; }
    const std::string& description() const override { return description_; }

    smxStatus_t run(void*, void* out, const void* x, const void* index, void*) const override {
        run_row_chunks(info_.rows, threads_, [&](std::int64_t begin, std::int64_t end) {
            for (std::int64_t r = begin; r < end; ++r) {
                const Row row{x, info_.x_dtype, row_offset(info_, info_.x, r), info_.x.axis_stride, info_.row_len};
                const RowStats stats = row_stats(row);
                const std::int64_t index0 = row_offset(info_, info_.index, r);
                const std::int64_t out0 = row_offset(info_, info_.out, r);
                for (std::int64_t k = 0; k < info_.gathered; ++k) {
                    const std::int64_t i = load_index(index, info_.index_dtype, index0 + k * info_.index.axis_stride);
                    // Out of range (negative included): the documented sentinel; x is never read there.
                    const double value = i >= 0 && i < info_.row_len ? stats.log_softmax(row.at(i)) : kGatherOutOfRange;
                    store_from_double(out, info_.out_dtype, out0 + k * info_.out.axis_stride, value);
                }
            }
        });
        return SMX_STATUS_SUCCESS;
    }

private:
    LogSoftmaxGatherInfo info_;
    int threads_;
    std::string description_;
};

class CpuCrossEntropyPlan final : public CrossEntropyPlan {
public:
    CpuCrossEntropyPlan(const CrossEntropyInfo& info, int max_threads)
        : info_(info), threads_(cpu_threads_for(info, max_threads)),
          description_(cpu_plan_text(info, threads_)) {}

    std::size_t workspace_bytes() const override { return cross_entropy_workspace_bytes(info_); }
    const std::string& description() const override { return description_; }

    smxStatus_t run(void* workspace, void* loss, void* lse, void* dlogits, const void* logits, const void* target,
                    void*) const override {
        run_cross_entropy(info_, threads_, workspace, loss, target, [&](std::int64_t r, double scale) {
            return compute_row(r, scale, lse, dlogits, logits, target);
        });
        return SMX_STATUS_SUCCESS;
    }

private:
    std::int64_t target_of(const void* target, std::int64_t r) const {
        return load_index(target, info_.target_dtype, row_offset(info_, info_.target, r));
    }

    // Row r's loss; writes its lse and dlogits where the info has them. Every logit of the row is read before
    // its dlogits are written (dlogits may be the logits, in place).
    double compute_row(std::int64_t r, double scale, void* lse, void* dlogits, const void* logits,
                       const void* target) const {
        const std::int64_t n = info_.row_len;
        const Row row{logits, info_.logits_dtype, row_offset(info_, info_.logits, r), info_.logits.axis_stride, n};
        const RowStats stats = row_stats(row);
        if (info_.has_lse) store_from_double(lse, info_.lse_dtype, row_offset(info_, info_.lse, r), stats.logsumexp());
        const std::int64_t t = target_of(target, r);
        const bool ignored = t == info_.ignore_index;
        // A target out of range, or a row log_softmax makes NaN: loss NaN and dlogits NaN.
        const bool valid = t >= 0 && t < n && stats.ordinary();
        const double eps = info_.label_smoothing;
        double row_loss = 0.0;
        if (!ignored) {
            row_loss = valid ? -stats.log_softmax(row.at(t)) : kNaN;
            if (valid && eps > 0.0) {
                double smooth = 0.0;  // sum over the classes of -log_softmax; +inf where a logit is -inf
                for (std::int64_t c = 0; c < n; ++c) smooth -= stats.log_softmax(row.at(c));
                row_loss = (1.0 - eps) * row_loss + eps / static_cast<double>(n) * smooth;
            }
        }
        if (info_.has_dlogits) {
            const std::int64_t d0 = row_offset(info_, info_.dlogits, r);
            for (std::int64_t c = 0; c < n; ++c) {
                double grad = ignored ? 0.0 : kNaN;
                if (!ignored && valid) {
                    const double p = std::exp(row.at(c) - stats.max) / stats.sum;
                    const double smoothed_target = (c == t ? 1.0 - eps : 0.0) + eps / static_cast<double>(n);
                    grad = scale * (p - smoothed_target);
                }
                store_from_double(dlogits, info_.dlogits_dtype, d0 + c * info_.dlogits.axis_stride, grad);
            }
        }
        return row_loss;
    }

    CrossEntropyInfo info_;
    int threads_;
    std::string description_;
};

}  // namespace

smxStatus_t make_cpu_logsumexp_plan(const LogsumexpInfo& info, int max_threads, std::unique_ptr<LogsumexpPlan>* plan) {
    *plan = std::make_unique<CpuLogsumexpPlan>(info, max_threads);
    return SMX_STATUS_SUCCESS;
}

smxStatus_t make_cpu_log_softmax_gather_plan(const LogSoftmaxGatherInfo& info, int max_threads,
                                             std::unique_ptr<LogSoftmaxGatherPlan>* plan) {
    *plan = std::make_unique<CpuLogSoftmaxGatherPlan>(info, max_threads);
    return SMX_STATUS_SUCCESS;
}

smxStatus_t make_cpu_cross_entropy_plan(const CrossEntropyInfo& info, int max_threads,
                                        std::unique_ptr<CrossEntropyPlan>* plan) {
    *plan = std::make_unique<CpuCrossEntropyPlan>(info, max_threads);
    return SMX_STATUS_SUCCESS;
}

}  // namespace smx
