// softmax_cpu.cpp - the CPU backend: the reference every other backend is checked against.
//
// Each row is read three times (max, sum of exponentials, output) and accumulated in double, so the
// result is the float64 softmax of the input values, rounded once to the output dtype. Rows are split
// across threads in contiguous chunks. NaN is the one special value handled explicitly: everything else
// (+inf, all -inf, -inf among finite values) falls out of IEEE double arithmetic exactly as in PyTorch.
#include "cpu/softmax_cpu.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <new>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "core/dtype.hpp"
#include "core/error.hpp"

namespace smx {
namespace {

// Every thread gets at least this many elements, so small problems stay on the calling thread.
constexpr std::int64_t kMinElementsPerThread = 1 << 16;

// Element reader/writer for one dtype, resolved at compile time so the row loops stay tight.
template <smxDataType_t D>
struct Element {
    static double load(const void* base, std::int64_t index) { return load_as_double(base, D, index); }
    static void store(void* base, std::int64_t index, double value) { store_from_double(base, D, index, value); }
};

// Joins every joinable thread of `threads` when it goes out of scope, on every path out of the scope.
struct JoinAll {
    std::vector<std::thread>& threads;
    ~JoinAll() {
        for (std::thread& thread : threads) {
            if (thread.joinable()) thread.join();
        }
    }
};

class CpuSoftmaxPlan final : public SoftmaxPlan {
public:
    CpuSoftmaxPlan(const SoftmaxInfo& info, int max_threads) : info_(info) {
        const std::int64_t by_size = std::max<std::int64_t>(1, info.numel / kMinElementsPerThread);
        threads_ = static_cast<int>(std::min<std::int64_t>({max_threads, by_size, std::max<std::int64_t>(1, info.rows)}));
        description_ = "cpu reference layout=" + std::string(layout_name(info.layout)) +
                       " threads=" + std::to_string(threads_);
    }

    std::size_t workspace_bytes() const override { return 0; }
    const std::string& description() const override { return description_; }

    smxStatus_t run(void*, void* y, const void* x, void*) const override {
        using RowsFn = void (*)(const SoftmaxInfo&, std::int64_t, std::int64_t, void*, const void*);
        const RowsFn rows_fn = pick_rows_function(info_.x_dtype, info_.y_dtype);
        if (threads_ <= 1) {
            rows_fn(info_, 0, info_.rows, y, x);
            return SMX_STATUS_SUCCESS;
        }
        std::vector<std::thread> workers;
        const JoinAll join_on_exit{workers};  // a joinable std::thread destroyed unjoined calls std::terminate
        const std::int64_t chunk = (info_.rows + threads_ - 1) / threads_;
        std::int64_t handed_out = std::min(info_.rows, chunk);  // rows [0, handed_out) have an owner
        try {
            workers.reserve(threads_ - 1);  // up front: a failure in the loop is then a thread start's own
            for (int t = 1; t < threads_ && handed_out < info_.rows; ++t) {
                const std::int64_t end = std::min(info_.rows, handed_out + chunk);
                workers.emplace_back(rows_fn, std::cref(info_), handed_out, end, y, x);
                handed_out = end;
            }
        } catch (const std::bad_alloc&) {
            // No memory for a thread's state: as below, this thread computes the rows nobody took.
        } catch (const std::system_error&) {
            // The system refused a thread: this thread computes the rows nobody took.
        }
        rows_fn(info_, 0, std::min(info_.rows, chunk), y, x);
        if (handed_out < info_.rows) rows_fn(info_, handed_out, info_.rows, y, x);
        return SMX_STATUS_SUCCESS;
    }

private:
    // Element offsets of row `row`'s first element in x and y.
    static void row_start(const SoftmaxInfo& info, std::int64_t row, std::int64_t* x_offset, std::int64_t* y_offset) {
        switch (info.layout) {
            case RowLayout::Rows:
                *x_offset = row * info.x.row_stride;
                *y_offset = row * info.y.row_stride;
                return;
            case RowLayout::Spatial: {
                const std::int64_t outer = row / info.inner;
                const std::int64_t inner = row % info.inner;
                *x_offset = outer * info.x.outer_stride + inner;
                *y_offset = outer * info.y.outer_stride + inner;
                return;
            }
            case RowLayout::General: {
                std::int64_t rest = row;
                *x_offset = 0;
                *y_offset = 0;
                for (int d = info.index_ndim - 1; d >= 0; --d) {
                    const std::int64_t i = rest % info.index_shape[d];
                    rest /= info.index_shape[d];
                    *x_offset += i * info.x.index_strides[d];
                    *y_offset += i * info.y.index_strides[d];
                }
                return;
            }
        }
    }

    template <smxDataType_t XD, smxDataType_t YD>
    static void compute_rows(const SoftmaxInfo& info, std::int64_t begin, std::int64_t end, void* y, const void* x) {
        const std::int64_t n = info.row_len;
        const std::int64_t xs = info.x.axis_stride;
        const std::int64_t ys = info.y.axis_stride;
        const bool log_mode = info.is_log();
        for (std::int64_t row = begin; row < end; ++row) {
            std::int64_t x0 = 0, y0 = 0;
            row_start(info, row, &x0, &y0);
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

    template <smxDataType_t XD>
    static RowsFn pick_for_output(smxDataType_t y_dtype) {
        switch (y_dtype) {
            case SMX_DTYPE_F16: return &compute_rows<XD, SMX_DTYPE_F16>;
            case SMX_DTYPE_BF16: return &compute_rows<XD, SMX_DTYPE_BF16>;
            case SMX_DTYPE_F32: return &compute_rows<XD, SMX_DTYPE_F32>;
            case SMX_DTYPE_F64: return &compute_rows<XD, SMX_DTYPE_F64>;
            case SMX_DTYPE_I32:
            case SMX_DTYPE_I64: break;  // refused by the softmax info
        }
        return nullptr;
    }

    static RowsFn pick_rows_function(smxDataType_t x_dtype, smxDataType_t y_dtype) {
        switch (x_dtype) {
            case SMX_DTYPE_F16: return pick_for_output<SMX_DTYPE_F16>(y_dtype);
            case SMX_DTYPE_BF16: return pick_for_output<SMX_DTYPE_BF16>(y_dtype);
            case SMX_DTYPE_F32: return pick_for_output<SMX_DTYPE_F32>(y_dtype);
            case SMX_DTYPE_F64: return pick_for_output<SMX_DTYPE_F64>(y_dtype);
            case SMX_DTYPE_I32:
            case SMX_DTYPE_I64: break;  // refused by the softmax info
        }
        return nullptr;
    }

    SoftmaxInfo info_;
    int threads_ = 1;
    std::string description_;
};

}  // namespace

smxStatus_t make_cpu_softmax_plan(const SoftmaxInfo& info, int max_threads, std::unique_ptr<SoftmaxPlan>* plan) {
    *plan = std::make_unique<CpuSoftmaxPlan>(info, std::max(1, max_threads));
    return SMX_STATUS_SUCCESS;
}

}  // namespace smx
