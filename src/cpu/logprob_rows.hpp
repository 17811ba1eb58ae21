// logprob_rows.hpp - what the CPU log-probability operators (logprobs_cpu, vocab_parallel_cpu) share: a row of
// an operand as the backend reads it, the (max, sum of exponentials) statistics a row reduces to in double, the
// plan text, and the loop that turns per-row cross-entropy losses into the loss.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>

#include "core/dtype.hpp"
#include "cpu/rows.hpp"
#include "ops/logprobs/info.hpp"
#include "smx/smx.h"

namespace smx {

inline constexpr double kInf = std::numeric_limits<double>::infinity();
inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// One row of x as the backend reads it: its dtype, first element and axis stride.
struct Row {
    const void* base;
    smxDataType_t dtype;
    std::int64_t start;
    std::int64_t stride;
    std::int64_t length;

    double at(std::int64_t j) const { return load_as_double(base, dtype, start + j * stride); }
};

// A row's statistics: `max` of its non-NaN values (-inf for an empty or all -inf row) and, where the row is
// ordinary (no NaN, finite max), `sum` of exp(x - max), which is then >= 1.
struct RowStats {
    double max = -kInf;
    double sum = 0.0;
    bool has_nan = false;

    bool ordinary() const { return !has_nan && std::isfinite(max); }
    // torch.logsumexp's special values: NaN wins, then +inf, and an empty or all -inf row is -inf.
    double logsumexp() const { return has_nan ? kNaN : ordinary() ? max + std::log(sum) : max; }
    // log_softmax of an element whose value is `value`: NaN for every element of a row that is not ordinary.
    double log_softmax(double value) const { return ordinary() ? (value - max) - std::log(sum) : kNaN; }
};

inline RowStats row_stats(const Row& row) {
    RowStats stats;
    for (std::int64_t j = 0; j < row.length; ++j) {
        const double v = row.at(j);
        if (std::isnan(v)) stats.has_nan = true;
        else if (v > stats.max) stats.max = v;
    }
    if (stats.ordinary()) {
        for (std::int64_t j = 0; j < row.length; ++j) stats.sum += std::exp(row.at(j) - stats.max);
    }
    return stats;
}

inline std::string cpu_plan_text(const RowGeometry& geometry, int threads) {
    return "cpu reference layout=" + std::string(layout_name(geometry.layout)) + " threads=" + std::to_string(threads);
}

// The workspace a CPU cross-entropy plan needs: a reduced loss keeps each row's loss there, to add them in row
// order whatever the threads.
inline std::size_t cross_entropy_workspace_bytes(const CrossEntropyInfo& info) {
    return info.reduced() ? static_cast<std::size_t>(info.rows) * sizeof(double) : 0;
}

// Runs a cross-entropy over `threads` threads: counts the targets that are not ignored first (a MEAN scales
// each row's dlogits by 1 / count), then row_loss(r, scale) per row, which writes the row's other outputs and
// returns its loss; the losses go to `loss` per row, or are added in row order and written reduced.
template <class RowLoss>
void run_cross_entropy(const CrossEntropyInfo& info, int threads, void* workspace, void* loss, const void* target,
                       const RowLoss& row_loss) {
    std::int64_t counted = 0;
    for (std::int64_t r = 0; r < info.rows; ++r) {
        counted += load_index(target, info.target_dtype, row_offset(info, info.target, r)) != info.ignore_index;
    }
    const double scale = info.reduction == SMX_REDUCTION_MEAN && counted > 0 ? 1.0 / static_cast<double>(counted) : 1.0;
    auto* row_losses = static_cast<double*>(workspace);
    run_row_chunks(info.rows, threads, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t r = begin; r < end; ++r) {
            const double value = row_loss(r, scale);
            if (info.reduced()) row_losses[r] = value;
            else store_from_double(loss, info.loss_dtype, row_offset(info, info.loss, r), value);
        }
    });
    if (info.reduced()) {
        double total = 0.0;
        for (std::int64_t r = 0; r < info.rows; ++r) total += row_losses[r];
        // A mean over no counted rows is 0 / 0, NaN, as in PyTorch.
        if (info.reduction == SMX_REDUCTION_MEAN) total /= static_cast<double>(counted);
        store_from_double(loss, info.loss_dtype, 0, total);
    }
}

}  // namespace smx
