// softmax_backward_cpu.cpp - the CPU backward: the reference every other backend's backward is checked against.
//
// Each row is read twice: once for its statistic, s = sum(dy * y) (log-softmax: s = sum(dy)), accumulated in
// double, then for the output, dx = y * (dy - s) (log-softmax: dx = dy - exp(y) * s), computed in double and
// rounded once to dx's dtype. No special value is handled apart: NaN and infinities propagate through IEEE
// double arithmetic as through PyTorch's formulas.
//
// With the forward's options (ops/softmax/options.hpp) the sums run over the elements the forward kept, dx is
// the row's scale times the formula there and 0 at the excluded elements, which are never read; with masked
// rows zero, a row whose forward had nothing to normalize (every kept y 0, log-softmax -inf) gets 0.
#include "cpu/softmax_backward_cpu.hpp"

#include <cmath>
#include <limits>
#include <string>

#include "cpu/element.hpp"
#include "cpu/options.hpp"
#include "cpu/rows.hpp"

namespace smx {
namespace {

class CpuSoftmaxBackwardPlan final : public SoftmaxBackwardPlan {
public:
    CpuSoftmaxBackwardPlan(const SoftmaxBackwardInfo& info, int max_threads)
        : info_(info), threads_(cpu_threads_for(info, max_threads)) {
        description_ = "cpu reference backward layout=" + std::string(layout_name(info.layout)) +
                       " threads=" + std::to_string(threads_) + describe(info.options);
    }

    std::size_t workspace_bytes() const override { return 0; }
    const std::string& description() const override { return description_; }

    smxStatus_t run(void* workspace, void* dx, const void* dy, const void* y, void* stream) const override {
        return run_with_options(workspace, dx, dy, y, nullptr, nullptr, stream);
    }

    smxStatus_t run_with_options(void*, void* dx, const void* dy, const void* y, const void* scale, const void* mask,
                                 void*) const override {
        const bool with_options = info_.options.any();
        const RowsFn rows_fn = visit_cpu_dtype(info_.y_dtype, [&](auto y_tag) {
            return visit_cpu_dtype(info_.dx_dtype, [&](auto dx_tag) -> RowsFn {
                constexpr smxDataType_t YD = decltype(y_tag)::value, DXD = decltype(dx_tag)::value;
                return with_options ? &compute_rows_with_options<YD, DXD> : &compute_rows<YD, DXD>;
            });
        });
        run_row_chunks(info_.rows, threads_, [&](std::int64_t begin, std::int64_t end) {
            rows_fn(info_, begin, end, dx, dy, y, scale, mask);
        });
        return SMX_STATUS_SUCCESS;
    }

private:
    using RowsFn = void (*)(const SoftmaxBackwardInfo&, std::int64_t, std::int64_t, void*, const void*, const void*,
                            const void*, const void*);

    // YD is the dtype of dy and y (validated equal), DXD dx's.
    template <smxDataType_t YD, smxDataType_t DXD>
    static void compute_rows(const SoftmaxBackwardInfo& info, std::int64_t begin, std::int64_t end, void* dx,
                             const void* dy, const void* y, const void*, const void*) {
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

    // The same with the options: `scale` and `mask` are the call's option data (NULL where the problem has none).
    template <smxDataType_t YD, smxDataType_t DXD>
    static void compute_rows_with_options(const SoftmaxBackwardInfo& info, std::int64_t begin, std::int64_t end,
                                          void* dx, const void* dy, const void* y, const void* scale,
                                          const void* mask) {
        const std::int64_t n = info.row_len;
        const std::int64_t dys = info.dy.axis_stride, ys = info.y.axis_stride, dxs = info.dx.axis_stride;
        const bool log_mode = info.is_log();
        // What the forward wrote in a row with nothing to normalize under masked rows zero.
        const double empty_y = log_mode ? -std::numeric_limits<double>::infinity() : 0.0;
        for (std::int64_t row = begin; row < end; ++row) {
            const RowOptions r = bind_row_options(info, info.options, row, scale, mask);
            const std::int64_t dy0 = row_offset(info, info.dy, row);
            const std::int64_t y0 = row_offset(info, info.y, row);
            const std::int64_t dx0 = row_offset(info, info.dx, row);
            double sum = 0.0;
            bool normalized = false;  // some kept y differs from empty_y
            for (std::int64_t j = 0; j < n; ++j) {
                if (!r.kept(j)) continue;  // excluded elements are not read
                const double g = Element<YD>::load(dy, dy0 + j * dys);
                const double out = Element<YD>::load(y, y0 + j * ys);
                sum += log_mode ? g : g * out;
                normalized = normalized || out != empty_y;
            }
            const bool zero_row = info.options.masked_rows == SMX_MASKED_ROWS_ZERO && !normalized;
            // As in compute_rows, each dy is read again just before its dx is written (in place is safe).
            for (std::int64_t j = 0; j < n; ++j) {
                double value = 0.0;
                if (!zero_row && r.kept(j)) {
                    const double g = Element<YD>::load(dy, dy0 + j * dys);
                    const double out = Element<YD>::load(y, y0 + j * ys);
                    value = r.scale * (log_mode ? g - std::exp(out) * sum : out * (g - sum));
                }
                Element<DXD>::store(dx, dx0 + j * dxs, value);
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
