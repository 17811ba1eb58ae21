// softmax_options_cpu.cpp - the CPU reference of softmax with options (scale, mask, causal, masked rows): per
// row, which elements are kept, z = scale * x + additive mask over them, then the plain three passes in double.
//
// Excluded elements (keep-mask false, outside the causal window) are never read. A row whose normalization is
// NaN (a NaN among the kept z, or a +inf) is NaN everywhere, as PyTorch's masked_fill + softmax makes it; a row
// with nothing to normalize (nothing kept, or every kept z -inf) is NaN, or with masked_rows zero 0 (log: -inf).
// Every row is computed on its own in one order, so the result never depends on the other rows: the CPU is
// batch-invariant as it stands.
#include "cpu/softmax_options_cpu.hpp"

#include <cmath>
#include <limits>
#include <string>

#include "core/dtype.hpp"
#include "cpu/element.hpp"
#include "cpu/options.hpp"
#include "cpu/rows.hpp"

namespace smx {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

template <smxDataType_t XD, smxDataType_t YD>
void compute_rows(const SoftmaxInfo& info, std::int64_t begin, std::int64_t end, void* y, const void* x,
                  const void* scale, const void* mask) {
    const SoftmaxOptions& options = info.options;
    const std::int64_t n = info.row_len;
    const bool log_mode = info.is_log();
    const double excluded_value = log_mode ? -kInf : 0.0;
    for (std::int64_t row = begin; row < end; ++row) {
        const RowOptions r = bind_row_options(info, options, row, scale, mask);
        const std::int64_t x0 = row_offset(info, info.x, row);
        const auto z = [&](std::int64_t j) { return r.z(Element<XD>::load(x, x0 + j * info.x.axis_stride), j); };
        const std::int64_t y0 = row_offset(info, info.y, row);

        double max = -kInf;
        bool has_nan = false;
        for (std::int64_t j = 0; j < n; ++j) {
            if (!r.kept(j)) continue;
            const double v = z(j);
            if (std::isnan(v)) has_nan = true;
            else if (v > max) max = v;
        }
        double sum = 0.0;
        if (has_nan) {
            sum = kNaN;
        } else if (max != -kInf) {
            for (std::int64_t j = 0; j < n; ++j) {
                if (r.kept(j)) sum += std::exp(z(j) - max);  // a kept +inf makes this NaN
            }
        }
        // Nothing to normalize: no element kept, or every kept z is -inf.
        const bool empty = !has_nan && max == -kInf;
        const double empty_value = options.masked_rows == SMX_MASKED_ROWS_ZERO ? excluded_value : kNaN;
        // Read every input before the first write: with y == x (in place) a row is overwritten only here.
        const double log_sum = std::log(sum);
        for (std::int64_t j = 0; j < n; ++j) {
            double out;
            if (std::isnan(sum)) out = kNaN;
            else if (empty) out = empty_value;
            else if (!r.kept(j)) out = excluded_value;
            else {
                const double shifted = z(j) - max;
                out = log_mode ? shifted - log_sum : std::exp(shifted) / sum;
            }
            Element<YD>::store(y, y0 + j * info.y.axis_stride, out);
        }
    }
}

using RowsFn = void (*)(const SoftmaxInfo&, std::int64_t, std::int64_t, void*, const void*, const void*,
                        const void*);

RowsFn pick_rows_function(smxDataType_t x_dtype, smxDataType_t y_dtype) {
    return visit_cpu_dtype(x_dtype, [&](auto x) {
        return visit_cpu_dtype(y_dtype, [](auto y) -> RowsFn { return &compute_rows<decltype(x)::value, decltype(y)::value>; });
    });
}

class CpuSoftmaxOptionsPlan final : public SoftmaxPlan {
public:
    CpuSoftmaxOptionsPlan(const SoftmaxInfo& info, int max_threads)
        : info_(info), threads_(cpu_threads_for(info, max_threads)) {
        description_ = "cpu reference layout=" + std::string(layout_name(info.layout)) +
                       " threads=" + std::to_string(threads_) + describe(info.options);
    }

    std::size_t workspace_bytes() const override { return 0; }
    const std::string& description() const override { return description_; }

    smxStatus_t run(void* workspace, void* y, const void* x, void* stream) const override {
        return run_with_options(workspace, y, x, nullptr, nullptr, stream);
    }

    smxStatus_t run_with_options(void*, void* y, const void* x, const void* scale, const void* mask,
                                 void*) const override {
        const RowsFn rows_fn = pick_rows_function(info_.x_dtype, info_.y_dtype);
        run_row_chunks(info_.rows, threads_,
                       [&](std::int64_t begin, std::int64_t end) { rows_fn(info_, begin, end, y, x, scale, mask); });
        return SMX_STATUS_SUCCESS;
    }

private:
    SoftmaxInfo info_;
    int threads_;
    std::string description_;
};

}  // namespace

smxStatus_t make_cpu_softmax_options_plan(const SoftmaxInfo& info, int max_threads, std::unique_ptr<SoftmaxPlan>* plan) {
    *plan = std::make_unique<CpuSoftmaxOptionsPlan>(info, std::max(1, max_threads));
    return SMX_STATUS_SUCCESS;
}

}  // namespace smx
