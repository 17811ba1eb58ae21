// softmax_backward_cpu.cpp - the CPU backward: the reference every other backend's backward is checked against.
//
// Each row is read twice: once for its statistic, s = sum(dy * y) (log-softmax: s = sum(dy)), accumulated in
// double, then for the output, dx = y * (dy - s) (log-softmax: dx = dy - exp(y) * s), computed in double and
// rounded once to dx's dtype. No special value is handled apart: NaN and infinities propagate through IEEE
// double arithmetic as through PyTorch's formulas.
#include "cpu/softmax_backward_cpu.hpp"

#include <cmath>
#include <string>

#include "cpu/element.hpp"
#include "cpu/rows.hpp"

namespace smx {
namespace {

class CpuSoftmaxBackwardPlan final : public SoftmaxBackwardPlan {
public:
    CpuSoftmaxBackwardPlan(const SoftmaxBackwardInfo& info, int max_threads)
        : info_(info), threads_(cpu_threads_for(info, max_threads)) {
        description_ = "cpu reference backward layout=" + std::string(layout_name(info.layout)) +
                       " threads=" + std::to_string(threads_);
    }

    std::size_t workspace_bytes() const override { return 0; }
    const std::string& description() const override { return description_; }

    smxStatus_t run(void*, void* dx, const void* dy, const void* y, void*) const override {
        const RowsFn rows_fn = visit_cpu_dtype(info_.y_dtype, [&](auto y_tag) {
            return visit_cpu_dtype(info_.dx_dtype, [](auto dx_tag) -> RowsFn {
                return &compute_rows<decltype(y_tag)::value, decltype(dx_tag)::value>;
            });
        });
        run_row_chunks(info_.rows, threads_,
                       [&](std::int64_t begin, std::int64_t end) { rows_fn(info_, begin, end, dx, dy, y); });
        return SMX_STATUS_SUCCESS;
    }

private:
    using RowsFn = void (*)(const SoftmaxBackwardInfo&, std::int64_t, std::int64_t, void*, const void*, const void*);

    // YD is the dtype of dy and y (validated equal), DXD dx's.
    template <smxDataType_t YD, smxDataType_t DXD>
    static void compute_rows(const SoftmaxBackwardInfo& info, std::int64_t begin, std::int64_t end, void* dx,
                             const void* dy, const void* y) {
        const std::int64_t n = info.row_len;
        const std::int64_t dys = info.dy.axis_stride, ys = info.y.axis_stride, dxs = info.dx.axis_stride;
        const bool log_mode = info.is_log();
        for (std::int64_t row = begin; row < end; ++row) {
            const std::int64_t dy0 = row_offset(info, info.dy, row);
            const std::int64_t y0 = row_offset(info, info.y, row);
            const std::int64_t dx0 = row_offset(info, info.dx, row);
            double sum = 0.0;
            for (std::int64_t j = 0; j < n; ++j) {
                const double g = Element<YD>::load(dy, dy0 + j * dys);
                sum += log_mode ? g : g * Element<YD>::load(y, y0 + j * ys);
            }
            // Every dy of the row is in `sum` before the first write; each element's dy is read again just
            // before its dx is written, so dx == dy (in place) is safe.
            for (std::int64_t j = 0; j < n; ++j) {
                const double g = Element<YD>::load(dy, dy0 + j * dys);
                const double out = Element<YD>::load(y, y0 + j * ys);
                Element<DXD>::store(dx, dx0 + j * dxs, log_mode ? g - std::exp(out) * sum : out * (g - sum));
            }
        }
    }

    SoftmaxBackwardInfo info_;
    int threads_;
    std::string description_;
};

}  // namespace

smxStatus_t make_cpu_softmax_backward_plan(const SoftmaxBackwardInfo& info, int max_threads,
                                           std::unique_ptr<SoftmaxBackwardPlan>* plan) {
    *plan = std::make_unique<CpuSoftmaxBackwardPlan>(info, max_threads);
    return SMX_STATUS_SUCCESS;
}

}  // namespace smx
