// softmax_cpu.cpp - the CPU backend: the reference every other backend is checked against.
//
// Each row is read three times (max, sum of exponentials, output) and accumulated in double, so the
// result is the float64 softmax of the input values, rounded once to the output dtype. Rows are split
// across threads in contiguous chunks (cpu/rows.hpp). NaN is the one special value handled explicitly:
// everything else (+inf, all -inf, -inf among finite values) falls out of IEEE double arithmetic exactly as
// in PyTorch.
#include "cpu/softmax_cpu.hpp"

#include <cmath>
#include <limits>
#include <string>

#include "core/dtype.hpp"
#include "cpu/element.hpp"
#include "cpu/rows.hpp"
#include "cpu/softmax_options_cpu.hpp"

namespace smx {
namespace {

class CpuSoftmaxPlan final : public SoftmaxPlan {
public:
    CpuSoftmaxPlan(const SoftmaxInfo& info, int max_threads) : info_(info), threads_(cpu_threads_for(info, max_threads)) {
        description_ = "cpu reference layout=" + std::string(layout_name(info.layout)) +
                       " threads=" + std::to_string(threads_);
    }

    std::size_t workspace_bytes() const override { return 0; }
    const std::string& description() const override { return description_; }

    smxStatus_t run(void*, void* y, const void* x, void*) const override {
        const RowsFn rows_fn = pick_rows_function(info_.x_dtype, info_.y_dtype);
        run_row_chunks(info_.rows, threads_, [&](std::int64_t begin, std::int64_t end) { rows_fn(info_, begin, end, y, x); });
        return SMX_STATUS_SUCCESS;
    }

private:
    template <smxDataType_t XD, smxDataType_t YD>
    static void compute_rows(const SoftmaxInfo& info, std::int64_t begin, std::int64_t end, void* y, const void* x) {
        const std::int64_t n = info.row_len;
        const std::int64_t xs = info.x.axis_stride;
        const std::int64_t ys = info.y.axis_stride;
        const bool log_mode = info.is_log();
        for (std::int64_t row = begin; row < end; ++row) {
            const std::int64_t x0 = row_offset(info, info.x, row);
            const std::int64_t y0 = row_offset(info, info.y, row);
            double max = -std::numeric_limits<double>::infinity();
            bool has_nan = false;
            for (std::int64_t j = 0; j < n; ++j) {
                const double v = Element<XD>::load(x, x0 + j * xs);
                if (std::isnan(v)) has_nan = true;
                else if (v > max) max = v;
            }
            double sum = 0.0;
            if (has_nan) {
                sum = std::numeric_limits<double>::quiet_NaN();
            } else {
                for (std::int64_t j = 0; j < n; ++j) sum += std::exp(Element<XD>::load(x, x0 + j * xs) - max);
            }
            // Read every input before the first write: with y == x (in place) a row is overwritten only here.
            const double log_sum = std::log(sum);
            for (std::int64_t j = 0; j < n; ++j) {
                const double shifted = Element<XD>::load(x, x0 + j * xs) - max;
                const double out = has_nan ? sum : (log_mode ? shifted - log_sum : std::exp(shifted) / sum);
                Element<YD>::store(y, y0 + j * ys, out);
            }
        }
    }

    using RowsFn = void (*)(const SoftmaxInfo&, std::int64_t, std::int64_t, void*, const void*);

    static RowsFn pick_rows_function(smxDataType_t x_dtype, smxDataType_t y_dtype) {
        return visit_cpu_dtype(x_dtype, [&](auto x) {
            return visit_cpu_dtype(y_dtype, [](auto y) -> RowsFn { return &compute_rows<decltype(x)::value, decltype(y)::value>; });
        });
    }

    SoftmaxInfo info_;
    int threads_;
    std::string description_;
};

}  // namespace

smxStatus_t make_cpu_softmax_plan(const SoftmaxInfo& info, int max_threads, std::unique_ptr<SoftmaxPlan>* plan) {
    if (info.options.any()) return make_cpu_softmax_options_plan(info, max_threads, plan);
    *plan = std::make_unique<CpuSoftmaxPlan>(info, std::max(1, max_threads));
    return SMX_STATUS_SUCCESS;
}

}  // namespace smx
