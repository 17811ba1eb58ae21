// bench_logprobs.cpp - smx-bench's log-probability cases (bench_logprobs.hpp).
#include "bench_logprobs.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <vector>

#include "bench_check.hpp"
#include "bench_data.hpp"
#include "bench_stats.hpp"

namespace smx_bench {
namespace {

// Issue 54's shapes: the vocabularies of Llama 3 (128256), Qwen 2 (151936), Gemma (256000) and a 32000 one; the
// decode rows are those whose bytes fill the device, plus one lone row for the launch floor.
const LogprobsCase kCases[] = {
    {"logsumexp", "lastdim", 8192, 151936, SMX_DTYPE_BF16},
    {"logsumexp", "lastdim", 16384, 128256, SMX_DTYPE_BF16},
    {"logsumexp", "lastdim", 8192, 32000, SMX_DTYPE_BF16},
    {"logsumexp", "lastdim", 4096, 151936, SMX_DTYPE_F32},
    {"logsumexp", "decode", 256, 151936, SMX_DTYPE_BF16},
    {"logsumexp", "decode", 64, 128256, SMX_DTYPE_BF16},
    {"logsumexp", "decode", 32, 256000, SMX_DTYPE_F32},
    {"logsumexp", "decode", 1, 128256, SMX_DTYPE_BF16},
    {"log_softmax_gather", "lastdim", 8192, 151936, SMX_DTYPE_BF16},
    {"log_softmax_gather", "lastdim", 16384, 128256, SMX_DTYPE_BF16},
    {"log_softmax_gather", "lastdim", 8192, 32000, SMX_DTYPE_BF16},
    {"log_softmax_gather", "lastdim", 4096, 151936, SMX_DTYPE_F32},
    {"log_softmax_gather", "decode", 256, 151936, SMX_DTYPE_BF16},
    {"log_softmax_gather", "decode", 64, 128256, SMX_DTYPE_BF16},
    {"log_softmax_gather", "decode", 32, 256000, SMX_DTYPE_F32},
    {"log_softmax_gather", "decode", 1, 128256, SMX_DTYPE_BF16},
    {"cross_entropy_forward", "lastdim", 8192, 32000, SMX_DTYPE_BF16},
    {"cross_entropy_forward", "lastdim", 16384, 128256, SMX_DTYPE_BF16},
    {"cross_entropy_forward", "lastdim", 4096, 151936, SMX_DTYPE_F32},
    {"cross_entropy", "lastdim", 8192, 32000, SMX_DTYPE_BF16},
    {"cross_entropy", "lastdim", 16384, 128256, SMX_DTYPE_BF16},
    {"cross_entropy", "lastdim", 4096, 151936, SMX_DTYPE_F32},
};
const char* const kOps[] = {"logsumexp", "log_softmax_gather", "cross_entropy_forward", "cross_entropy"};

constexpr std::int64_t kGathered = 1;       // log_softmax_gather: one index a row, the sampled token's
constexpr std::int64_t kIgnoreEvery = 16;   // cross-entropy: every 16th row's target is ignore_index
constexpr std::int64_t kIgnoreIndex = -100;

smxDataType_t statistics_dtype(smxDataType_t x) { return x == SMX_DTYPE_F64 ? SMX_DTYPE_F64 : SMX_DTYPE_F32; }

bool is_cross_entropy(const LogprobsCase& c) { return c.op.rfind("cross_entropy", 0) == 0; }
bool with_gradient(const LogprobsCase& c) { return c.op == "cross_entropy"; }

// Tensor descriptors destroyed at the end of the scope.
struct Tensors {
    std::vector<smxTensorDescriptor_t> owned;
    smxTensorDescriptor_t make(smxDataType_t dtype, std::vector<std::int64_t> shape) {
        smxTensorDescriptor_t tensor = nullptr;
        check_smx(smxCreateTensorDescriptor(&tensor, dtype, static_cast<int>(shape.size()), shape.data(), nullptr),
                  "tensor descriptor");
        owned.push_back(tensor);
        return tensor;
    }
    ~Tensors() {
        for (smxTensorDescriptor_t tensor : owned) smxDestroyTensorDescriptor(tensor);
    }
};

// One operator descriptor of a case: created, queried and run through the C API.
class LogprobsDescriptor {
public:
    LogprobsDescriptor(smxHandle_t handle, const LogprobsCase& c, smxLossReduction_t reduction, bool dlogits, bool lse) {
        try {
            create(handle, c, reduction, dlogits, lse);
        } catch (...) {  // no destructor runs for a half-made object
            release();
            throw;
        }
    }
    ~LogprobsDescriptor() { release(); }
    LogprobsDescriptor(const LogprobsDescriptor&) = delete;
    LogprobsDescriptor& operator=(const LogprobsDescriptor&) = delete;

    const char* plan() const { return plan_; }
    std::size_t workspace() const { return workspace_; }

    // out: logsumexp's out, gather's out or the loss; index: gather's index or the target.
    void run(void* workspace, void* out, void* lse, void* dlogits, const void* x, const void* index, void* stream) const {
        if (logsumexp_ != nullptr) {
            check_smx(smxLogsumexp(logsumexp_, workspace, workspace_, out, x, stream), "smxLogsumexp");
        } else if (gather_ != nullptr) {
            check_smx(smxLogSoftmaxGather(gather_, workspace, workspace_, out, x, index, stream), "smxLogSoftmaxGather");
        } else {
            check_smx(smxCrossEntropy(cross_entropy_, workspace, workspace_, out, lse, dlogits, x, index, stream),
                      "smxCrossEntropy");
        }
    }

private:
    void create(smxHandle_t handle, const LogprobsCase& c, smxLossReduction_t reduction, bool dlogits, bool lse) {
        const smxTensorDescriptor_t x = tensors_.make(c.dtype, {c.rows, c.classes});
        const smxDataType_t stats = statistics_dtype(c.dtype);
        if (c.op == "logsumexp") {
            check_smx(smxCreateLogsumexpDescriptor(handle, &logsumexp_, 1, tensors_.make(stats, {c.rows}), x),
                      "smxCreateLogsumexpDescriptor");
            check_smx(smxGetLogsumexpPlan(logsumexp_, &plan_), "smxGetLogsumexpPlan");
            check_smx(smxGetLogsumexpWorkspaceSize(logsumexp_, &workspace_), "smxGetLogsumexpWorkspaceSize");
        } else if (c.op == "log_softmax_gather") {
            check_smx(smxCreateLogSoftmaxGatherDescriptor(handle, &gather_, 1, tensors_.make(stats, {c.rows, kGathered}), x,
                                                          tensors_.make(SMX_DTYPE_I64, {c.rows, kGathered})),
                      "smxCreateLogSoftmaxGatherDescriptor");
            check_smx(smxGetLogSoftmaxGatherPlan(gather_, &plan_), "smxGetLogSoftmaxGatherPlan");
            check_smx(smxGetLogSoftmaxGatherWorkspaceSize(gather_, &workspace_), "smxGetLogSoftmaxGatherWorkspaceSize");
        } else {
            smxCrossEntropyOptions_t options = SMX_CROSS_ENTROPY_OPTIONS_INIT;
            options.reduction = reduction;
            options.ignoreIndex = kIgnoreIndex;
            const std::vector<std::int64_t> loss_shape = reduction == SMX_REDUCTION_NONE ? std::vector<std::int64_t>{c.rows}
                                                                                         : std::vector<std::int64_t>{1};
            check_smx(smxCreateCrossEntropyDescriptor(handle, &cross_entropy_, 1, &options, tensors_.make(stats, loss_shape),
                                                      lse ? tensors_.make(stats, {c.rows}) : nullptr,
                                                      dlogits ? tensors_.make(c.dtype, {c.rows, c.classes}) : nullptr, x,
                                                      tensors_.make(SMX_DTYPE_I64, {c.rows})),
                      "smxCreateCrossEntropyDescriptor");
            check_smx(smxGetCrossEntropyPlan(cross_entropy_, &plan_), "smxGetCrossEntropyPlan");
            check_smx(smxGetCrossEntropyWorkspaceSize(cross_entropy_, &workspace_), "smxGetCrossEntropyWorkspaceSize");
        }
    }
    void release() {
        smxDestroyLogsumexpDescriptor(logsumexp_);
        smxDestroyLogSoftmaxGatherDescriptor(gather_);
        smxDestroyCrossEntropyDescriptor(cross_entropy_);
        logsumexp_ = nullptr;
        gather_ = nullptr;
        cross_entropy_ = nullptr;
    }

    Tensors tensors_;
    smxLogsumexpDescriptor_t logsumexp_ = nullptr;
    smxLogSoftmaxGatherDescriptor_t gather_ = nullptr;
    smxCrossEntropyDescriptor_t cross_entropy_ = nullptr;
    const char* plan_ = nullptr;
    std::size_t workspace_ = 0;
};

// `count` buffers of one tensor, each on a 256-byte boundary of one allocation.
class Slots {
public:
    Slots(BenchDevice& device, std::size_t bytes, int count)
        : slot_bytes_((bytes + 255) / 256 * 256), count_(count), memory_(device, slot_bytes_ * count) {}
    void* slot(int call) const { return static_cast<unsigned char*>(memory_.data()) + slot_bytes_ * (call % count_); }
    std::size_t bytes() const { return slot_bytes_ * count_; }

private:
    std::size_t slot_bytes_;
    int count_;
    DeviceBuffer memory_;
};

// Sampled rows: the first, the last and random ones (every row of a small tensor).
std::vector<std::int64_t> sample_rows(std::int64_t rows, std::mt19937_64& rng) {
    std::set<std::int64_t> picked = {0, rows - 1};
    std::uniform_int_distribution<std::int64_t> any_row(0, rows - 1);
    const std::int64_t wanted = std::min<std::int64_t>(rows, 16);
    while (static_cast<std::int64_t>(picked.size()) < wanted) picked.insert(any_row(rng));
    return {picked.begin(), picked.end()};
}

// Rows `rows` of a (.., classes) tensor of `dtype` on the device, as float64 on the host.
std::vector<double> fetch_rows(BenchDevice& device, const void* data, smxDataType_t dtype, std::int64_t classes,
                               const std::vector<std::int64_t>& rows) {
    const std::size_t row_bytes = static_cast<std::size_t>(classes) * dtype_size(dtype);
    std::vector<unsigned char> row(row_bytes);
    std::vector<double> values;
    values.reserve(rows.size() * classes);
    for (std::int64_t r : rows) {
        device.copy_to_host(row.data(), static_cast<const unsigned char*>(data) + r * row_bytes, row_bytes);
        for (std::int64_t c = 0; c < classes; ++c) values.push_back(load_as_double(row.data(), dtype, c));
    }
    return values;
}

// float64 results of the CPU backend on `k` rows of `classes` (the sampled rows, gathered densely).
struct CpuRows {
    std::vector<double> lse;      // per row
    std::vector<double> out;      // logsumexp: lse; gather: k x K; cross-entropy: per-row loss
    std::vector<double> dlogits;  // cross-entropy: k x classes, unscaled (SUM's)
};

CpuRows cpu_rows(smxHandle_t cpu, const LogprobsCase& c, const std::vector<double>& x, std::vector<std::int64_t> index) {
    const std::int64_t k = static_cast<std::int64_t>(x.size()) / c.classes;
    Tensors tensors;
    const smxTensorDescriptor_t x_desc = tensors.make(SMX_DTYPE_F64, {k, c.classes});
    const smxTensorDescriptor_t per_row = tensors.make(SMX_DTYPE_F64, {k});
    CpuRows result;
    result.lse.resize(k);
    smxLogsumexpDescriptor_t logsumexp = nullptr;
    check_smx(smxCreateLogsumexpDescriptor(cpu, &logsumexp, 1, per_row, x_desc), "CPU logsumexp descriptor");
    const smxStatus_t lse_status = smxLogsumexp(logsumexp, nullptr, 0, result.lse.data(), x.data(), nullptr);
    smxDestroyLogsumexpDescriptor(logsumexp);
    check_smx(lse_status, "CPU logsumexp");
    if (c.op == "logsumexp") {
        result.out = result.lse;
    } else if (c.op == "log_softmax_gather") {
        result.out.resize(k * kGathered);
        smxLogSoftmaxGatherDescriptor_t gather = nullptr;
        check_smx(smxCreateLogSoftmaxGatherDescriptor(cpu, &gather, 1, tensors.make(SMX_DTYPE_F64, {k, kGathered}), x_desc,
                                                      tensors.make(SMX_DTYPE_I64, {k, kGathered})),
                  "CPU gather descriptor");
        const smxStatus_t status = smxLogSoftmaxGather(gather, nullptr, 0, result.out.data(), x.data(), index.data(), nullptr);
        smxDestroyLogSoftmaxGatherDescriptor(gather);
        check_smx(status, "CPU log_softmax_gather");
    } else {
        result.out.resize(k);
        result.dlogits.resize(x.size());
        smxCrossEntropyOptions_t options = SMX_CROSS_ENTROPY_OPTIONS_INIT;
        options.reduction = SMX_REDUCTION_NONE;
        options.ignoreIndex = kIgnoreIndex;
        smxCrossEntropyDescriptor_t ce = nullptr;
        check_smx(smxCreateCrossEntropyDescriptor(cpu, &ce, 1, &options, per_row, nullptr,
                                                  tensors.make(SMX_DTYPE_F64, {k, c.classes}), x_desc,
                                                  tensors.make(SMX_DTYPE_I64, {k})),
                  "CPU cross-entropy descriptor");
        const smxStatus_t status = smxCrossEntropy(ce, nullptr, 0, result.out.data(), nullptr, result.dlogits.data(),
                                                   x.data(), index.data(), nullptr);
        smxDestroyCrossEntropyDescriptor(ce);
        check_smx(status, "CPU cross_entropy");
    }
    return result;
}

// Tracks the worst |got - expected| / allowed over a case's checked values.
struct Worst {
    double ratio = 0.0;
    std::string detail;
    void add(double got, double expected, double allowed, const char* what, std::int64_t row, std::int64_t col) {
        double ratio_here;
        if (!std::isfinite(expected)) {
            ratio_here = (got == expected || (std::isnan(got) && std::isnan(expected))) ? 0.0 : HUGE_VAL;
        } else {
            ratio_here = std::isfinite(got) ? std::fabs(got - expected) / allowed : HUGE_VAL;
        }
        if (ratio_here > ratio || detail.empty()) {
            ratio = ratio_here;
            char text[160];
            std::snprintf(text, sizeof text, "%s row %lld col %lld: got %.9g, expected %.9g", what,
                          static_cast<long long>(row), static_cast<long long>(col), got, expected);
            detail = text;
        }
    }
};

class LogprobsBench {
public:
    LogprobsBench(BenchDevice& device, smxHandle_t handle, smxHandle_t cpu, const RunInfo& run, bool quick,
                  std::mt19937_64& rng)
        : device_(device), handle_(handle), cpu_(cpu), run_(run), quick_(quick), rng_(rng) {}

    CaseRecord run_case(const LogprobsCase& c) {
        CaseRecord record;
        record.op = c.op;
        record.group = c.group;
        record.label = c.label();
        record.x_dtype = c.dtype;
        record.y_dtype = with_gradient(c) ? c.dtype : statistics_dtype(c.dtype);
        record.shape = {c.rows, c.classes};
        record.strides = {c.classes, 1};
        record.dim = 1;
        const std::int64_t x_bytes = c.rows * c.classes * static_cast<std::int64_t>(dtype_size(c.dtype));
        record.bytes = with_gradient(c) ? 2 * x_bytes : x_bytes;
        try {
            measure(c, record);
        } catch (const std::exception& error) {  // BenchError, or memory running out
            record.error = error.what();
            record.check_passed = false;
        }
        return record;
    }

private:
    void measure(const LogprobsCase& c, CaseRecord& record) {
        const smxLossReduction_t reduction = is_cross_entropy(c) ? SMX_REDUCTION_MEAN : SMX_REDUCTION_NONE;
        const LogprobsDescriptor descriptor(handle_, c, reduction, with_gradient(c), c.op == "cross_entropy_forward");
        record.plan = descriptor.plan();
        const std::size_t x_bytes = static_cast<std::size_t>(c.rows * c.classes) * dtype_size(c.dtype);
        const int buffers = std::max(1, static_cast<int>(std::ceil(4.0 * device_.cache_bytes() / std::max<double>(x_bytes, 1.0))));
        record.buffers = buffers;
        Slots x(device_, x_bytes, buffers);
        Slots dlogits(device_, with_gradient(c) ? x_bytes : 0, buffers);
        const std::size_t stat_size = dtype_size(statistics_dtype(c.dtype));
        const std::int64_t out_count = c.op == "log_softmax_gather" ? c.rows * kGathered : is_cross_entropy(c) ? 1 : c.rows;
        DeviceBuffer out(device_, static_cast<std::size_t>(out_count) * stat_size);
        DeviceBuffer lse(device_, c.op == "cross_entropy_forward" ? static_cast<std::size_t>(c.rows) * stat_size : 0);
        const DeviceBuffer workspace(device_, descriptor.workspace());

        // Inputs: fresh random logits in every slot; indices (targets) in [0, classes), some ignored.
        constexpr std::int64_t chunk = std::int64_t{1} << 24;
        std::vector<unsigned char> host(static_cast<std::size_t>(std::min(c.rows * c.classes, chunk)) * dtype_size(c.dtype));
        const std::uint64_t seed = rng_();
        std::int64_t generated = 0;
        for (int slot = 0; slot < buffers; ++slot) {
            for (std::int64_t first = 0; first < c.rows * c.classes; first += chunk) {
                const std::int64_t count = std::min(chunk, c.rows * c.classes - first);
                fill_random(host.data(), c.dtype, count, seed, generated);
                device_.copy_to_device(static_cast<unsigned char*>(x.slot(slot)) + first * dtype_size(c.dtype), host.data(),
                                       count * dtype_size(c.dtype));
                generated += count;
            }
        }
        const std::int64_t index_count = c.op == "log_softmax_gather" ? c.rows * kGathered : c.rows;
        std::vector<std::int64_t> indices(index_count);
        std::uniform_int_distribution<std::int64_t> any_class(0, c.classes - 1);
        for (std::int64_t i = 0; i < index_count; ++i) {
            indices[i] = is_cross_entropy(c) && i % kIgnoreEvery == kIgnoreEvery - 1 ? kIgnoreIndex : any_class(rng_);
        }
        DeviceBuffer index(device_, indices.size() * sizeof(std::int64_t));
        device_.copy_to_device(index.data(), indices.data(), indices.size() * sizeof(std::int64_t));

        const auto call = [&](int slot) {
            descriptor.run(workspace.data(), out.data(), lse.data(), with_gradient(c) ? dlogits.slot(slot) : nullptr, x.slot(slot),
                           index.data(), device_.stream());
        };
        // Correct first: one call into poisoned outputs (and workspace), checked on sampled rows.
        device_.poison(out.data(), out.bytes());
        if (lse.bytes() > 0) device_.poison(lse.data(), lse.bytes());
        if (dlogits.bytes() > 0) device_.poison(dlogits.slot(0), dlogits.bytes());
        if (workspace.bytes() > 0) device_.poison(workspace.data(), workspace.bytes());
        call(0);
        device_.synchronize();
        check(c, x.slot(0), indices, out.data(), lse.data(), dlogits.slot(0), record);
        if (!record.check_passed) return;

        const double expected_us = static_cast<double>(record.bytes) / run_.copy_bytes_per_s * 1e6;
        const int calls = quick_ ? 10 : static_cast<int>(std::clamp(50000.0 / std::max(expected_us, 1.0), 10.0, 50.0));
        const int warmup = quick_ ? 2 : 5;
        for (int i = 0; i < warmup; ++i) call(1 + i);
        device_.synchronize();
        const TimingSummary summary = summarize(device_.time_each([&](int i) { call(1 + warmup + i); }, calls));
        record.calls = calls;
        record.smx_us = summary.median_us;
        record.smx_min_us = summary.min_us;
        record.smx_p90_us = summary.p90_us;
    }

    // Sampled rows against the CPU backend; a reduced loss against the mean of the per-row losses of an unreduced
    // run of the same inputs (whose sampled rows are checked too).
    void check(const LogprobsCase& c, const void* x, const std::vector<std::int64_t>& indices, const void* out,
               const void* lse, const void* dlogits, CaseRecord& record) {
        const std::vector<std::int64_t> rows = sample_rows(c.rows, rng_);
        const std::vector<double> x_rows = fetch_rows(device_, x, c.dtype, c.classes, rows);
        const std::int64_t per_row = c.op == "log_softmax_gather" ? kGathered : 1;
        std::vector<std::int64_t> row_indices;
        for (std::int64_t r : rows) {
            for (std::int64_t k = 0; k < per_row; ++k) row_indices.push_back(indices[r * per_row + k]);
        }
        const CpuRows ref = cpu_rows(cpu_, c, x_rows, row_indices);
        const smxDataType_t stats = statistics_dtype(c.dtype);
        const double rtol = relative_tolerance(stats);
        Worst worst;
        std::vector<double> got_per_row;  // the device's per-row values of the sampled rows
        if (!is_cross_entropy(c)) {
            got_per_row = fetch_rows(device_, out, stats, per_row, rows);
            for (std::size_t i = 0; i < got_per_row.size(); ++i) {
                const double lse_ref = ref.lse[i / per_row];
                worst.add(got_per_row[i], ref.out[i], rtol * (std::fabs(ref.out[i]) + std::fabs(lse_ref) + 1.0), "out",
                          rows[i / per_row], static_cast<std::int64_t>(i % per_row));
            }
        } else {
            check_cross_entropy(c, x, indices, rows, x_rows, ref, out, lse, dlogits, worst);
        }
        record.rows_checked = static_cast<std::int64_t>(rows.size());
        record.check_sampled = static_cast<std::int64_t>(rows.size()) < c.rows;
        if (std::isfinite(worst.ratio)) record.max_err_ratio = worst.ratio;
        record.check_passed = worst.ratio <= 1.0;
        if (!record.check_passed) record.error = "check: " + worst.detail;
    }

    void check_cross_entropy(const LogprobsCase& c, const void* x, const std::vector<std::int64_t>& targets,
                             const std::vector<std::int64_t>& rows, const std::vector<double>& x_rows, const CpuRows& ref,
                             const void* loss, const void* lse, const void* dlogits, Worst& worst) {
        const smxDataType_t stats = statistics_dtype(c.dtype);
        const double rtol = relative_tolerance(stats);
        std::int64_t counted = 0;
        for (std::int64_t t : targets) counted += t != kIgnoreIndex;
        const double scale = counted > 0 ? 1.0 / static_cast<double>(counted) : 1.0;
        // The per-row losses of the same inputs, unreduced, on the device: their sampled rows against the CPU, their
        // mean against the reduced loss.
        const LogprobsDescriptor unreduced(handle_, c, SMX_REDUCTION_NONE, false, false);
        DeviceBuffer row_losses(device_, static_cast<std::size_t>(c.rows) * dtype_size(stats));
        const DeviceBuffer workspace(device_, unreduced.workspace());
        DeviceBuffer target_copy(device_, targets.size() * sizeof(std::int64_t));
        device_.copy_to_device(target_copy.data(), targets.data(), targets.size() * sizeof(std::int64_t));
        unreduced.run(workspace.data(), row_losses.data(), nullptr, nullptr, x, target_copy.data(), device_.stream());
        device_.synchronize();
        std::vector<double> losses(static_cast<std::size_t>(c.rows));
        {
            std::vector<unsigned char> host(static_cast<std::size_t>(c.rows) * dtype_size(stats));
            device_.copy_to_host(host.data(), row_losses.data(), host.size());
            for (std::int64_t r = 0; r < c.rows; ++r) losses[r] = load_as_double(host.data(), stats, r);
        }
        double total = 0.0, total_scale = 0.0;
        for (std::int64_t r = 0; r < c.rows; ++r) {
            total += losses[r];
            total_scale += std::fabs(losses[r]) + 1.0;
        }
        std::vector<unsigned char> reduced(dtype_size(stats));
        device_.copy_to_host(reduced.data(), loss, reduced.size());
        worst.add(load_as_double(reduced.data(), stats, 0), total * scale, rtol * total_scale * scale + 1e-30, "loss", -1, 0);
        for (std::size_t i = 0; i < rows.size(); ++i) {
            const double lse_ref = ref.lse[i];
            worst.add(losses[rows[i]], ref.out[i], rtol * (std::fabs(ref.out[i]) + std::fabs(lse_ref) + 1.0), "row loss",
                      rows[i], 0);
        }
        if (c.op == "cross_entropy_forward") {
            const std::vector<double> got = fetch_rows(device_, lse, stats, 1, rows);
            for (std::size_t i = 0; i < rows.size(); ++i) {
                worst.add(got[i], ref.lse[i], rtol * (std::fabs(ref.lse[i]) + 1.0), "lse", rows[i], 0);
            }
            return;
        }
        const std::vector<double> got = fetch_rows(device_, dlogits, c.dtype, c.classes, rows);
        const double grad_rtol = relative_tolerance(c.dtype);
        for (std::size_t i = 0; i < rows.size(); ++i) {
            for (std::int64_t col = 0; col < c.classes; ++col) {
                const std::size_t at = i * c.classes + col;
                const double expected = scale * ref.dlogits[at];
                const double p = std::exp(x_rows[at] - ref.lse[i]);
                const double allowed =
                    grad_rtol * (std::fabs(expected) + scale * p * (std::fabs(x_rows[at]) + std::fabs(ref.lse[i]) + 1.0)) +
                    scale * underflow_slack(c.dtype);
                worst.add(got[at], expected, allowed, "dlogits", rows[i], col);
            }
        }
    }

    BenchDevice& device_;
    smxHandle_t handle_;
    smxHandle_t cpu_;
    const RunInfo& run_;
    bool quick_;
    std::mt19937_64& rng_;
};

}  // namespace

std::vector<LogprobsCase> logprobs_cases(const std::vector<std::string>& ops, const std::vector<std::string>& labels) {
    const auto wanted = [](const std::vector<std::string>& filter, const std::string& name) {
        return filter.empty() || std::find(filter.begin(), filter.end(), name) != filter.end();
    };
    std::vector<LogprobsCase> cases;
    for (const LogprobsCase& c : kCases) {
        if (wanted(ops, c.op) && wanted(labels, c.label())) cases.push_back(c);
    }
    // Labels of no table case: RxC shapes of every selected op, in bf16 and f32.
    for (const std::string& label : labels) {
        const bool known = std::any_of(std::begin(kCases), std::end(kCases), [&](const LogprobsCase& c) { return c.label() == label; });
        if (known) continue;
        long long rows = 0, classes = 0;
        char tail = 0;
        if (std::sscanf(label.c_str(), "%lldx%lld%c", &rows, &classes, &tail) != 2 || rows < 1 || classes < 1) {
            throw std::invalid_argument("logprobs shape '" + label + "' is not RxC");
        }
        for (const char* op : kOps) {
            if (!wanted(ops, op)) continue;
            for (smxDataType_t dtype : {SMX_DTYPE_BF16, SMX_DTYPE_F32}) cases.push_back({op, "custom", rows, classes, dtype});
        }
    }
    return cases;
}

std::string logprobs_plan(smxHandle_t handle, const LogprobsCase& c) {
    const LogprobsDescriptor descriptor(handle, c, is_cross_entropy(c) ? SMX_REDUCTION_MEAN : SMX_REDUCTION_NONE,
                                        with_gradient(c), c.op == "cross_entropy_forward");
    return descriptor.plan();
}

std::vector<CaseRecord> run_logprobs_cases(BenchDevice& device, smxHandle_t handle, smxHandle_t cpu_handle,
                                           const std::vector<LogprobsCase>& cases, const RunInfo& run, bool quick,
                                           std::mt19937_64& rng) {
    const TablePrinter table(device.type() == SMX_DEVICE_CUDA, false);
    table.print_header();
    LogprobsBench bench(device, handle, cpu_handle, run, quick, rng);
    std::vector<CaseRecord> records;
    for (const LogprobsCase& c : cases) {
        std::fprintf(stderr, "[%zu/%zu] %s %s %s\n", records.size() + 1, cases.size(), c.op.c_str(), dtype_name(c.dtype),
                     c.label().c_str());
        records.push_back(bench.run_case(c));
        table.print_row(records.back(), run);
    }
    return records;
}

}  // namespace smx_bench
