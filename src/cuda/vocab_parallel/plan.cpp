// plan.cpp - the CUDA plans of the vocabulary-parallel operators: which kernels (params.hpp) run a problem and
// with which launch shapes, decided once from the info and the device's limits; run() binds the call's pointers
// into a copy of the parameters and launches, nothing else (no allocation, no synchronization).
#include <cuda_runtime.h>

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "cuda/backend.hpp"
#include "cuda/common/launch.hpp"
#include "cuda/common/util.hpp"
#include "cuda/vocab_parallel/geometry.hpp"
#include "cuda/vocab_parallel/params.hpp"

namespace smx {
namespace {

using cuda::Launch;
using cuda::row_space;
using cuda::strides_of;

constexpr std::int64_t kMaxGridY = 65535;  // the rows of one launch's grid.y; the kernel loops past them

smxStatus_t require(const void* kernel, const char* what, smxDataType_t x_dtype, smxDataType_t y_dtype) {
    return cuda::require_kernel(kernel, x_dtype, y_dtype, what);
}

// A CTA per row at most, no more CTAs than the device keeps resident.
smxStatus_t rows_grid(const void* kernel, int threads, std::int64_t work, const DeviceLimits& limits, unsigned* grid) {
    int blocks = 0;
    SMX_RETURN_IF_ERROR(cuda::blocks_per_multiprocessor(kernel, threads, 0, &blocks));
    *grid = cuda::persistent_grid(work, blocks, limits.multiprocessor_count);
    return SMX_STATUS_SUCCESS;
}

// One kernel launch with its parameters; run() binds pointers into a copy.
template <class Params>
struct Step {
    Params params;
    Launch launch;

    template <class Bind>
    smxStatus_t run(cudaStream_t stream, const Bind& bind) const {
        Params bound = params;
        bind(bound);
        return cuda::launch_all(&launch, 1, &bound, stream);
    }
};

// The normalize kernel's launch for a problem of `rows` rows of `row_len` elements: grid.x over chunks of a row,
// grid.y over the rows.
smxStatus_t normalize_step(const RowGeometry& g, smxDataType_t x_dtype, smxDataType_t y_dtype, bool vector,
                           cuda::NormalizeParams params, Step<cuda::NormalizeParams>* step) {
    const void* kernel = cuda::normalize_kernel(x_dtype, y_dtype, vector);
    SMX_RETURN_IF_ERROR(require(kernel, "vocab-parallel normalize", x_dtype, y_dtype));
    const std::int64_t pack =
        vector ? 16 / static_cast<std::int64_t>(std::max(dtype_size(x_dtype), dtype_size(y_dtype))) : 1;
    // A thread's packs per CTA: enough loads in flight to cover DRAM latency, and few enough CTAs per row that
    // the row's statistics are read rarely.
    params.chunk = cuda::kVocabParallelThreads * pack * cuda::kNormalizePacksPerThread;
    params.vector = vector ? 1 : 0;
    const std::int64_t chunks = cuda::ceil_div(std::max<std::int64_t>(g.row_len, 1), params.chunk);
    const auto grid_y = static_cast<unsigned>(std::min<std::int64_t>(std::max<std::int64_t>(g.rows, 1), kMaxGridY));
    step->params = params;
    step->launch = Launch{kernel, dim3(static_cast<unsigned>(chunks), grid_y), dim3(cuda::kVocabParallelThreads), 0, 0};
    return SMX_STATUS_SUCCESS;
}

std::string normalize_text(const Step<cuda::NormalizeParams>& step) {
    return fmt::format("normalize vector={} chunk={} grid={}x{}", step.params.vector, step.params.chunk,
                       step.launch.grid.x, step.launch.grid.y);
}

// ---- shard statistics -------------------------------------------------------------------------------------

class CudaShardStatisticsPlan final : public ShardStatisticsPlan {
public:
    CudaShardStatisticsPlan(int device_id, Step<cuda::StatisticsParams> step, std::string text)
        : device_id_(device_id), step_(std::move(step)), text_(std::move(text)) {}

    std::size_t workspace_bytes() const override { return 0; }
    const std::string& description() const override { return text_; }

    smxStatus_t run(void*, void* stats, const void* x, const void* target, void* stream) const override {
        cuda::ScopedDevice device(device_id_);
        SMX_RETURN_IF_ERROR(device.status());
        return step_.run(static_cast<cudaStream_t>(stream), [&](cuda::StatisticsParams& p) {
            p.x = x;
            p.stats = stats;
            p.target = target;
        });
    }

private:
    int device_id_;
    Step<cuda::StatisticsParams> step_;
    std::string text_;
};

// ---- shard softmax ----------------------------------------------------------------------------------------

class CudaShardSoftmaxPlan final : public ShardSoftmaxPlan {
public:
    CudaShardSoftmaxPlan(int device_id, Step<cuda::NormalizeParams> step, std::string text)
        : device_id_(device_id), step_(std::move(step)), text_(std::move(text)) {}

    std::size_t workspace_bytes() const override { return 0; }
    const std::string& description() const override { return text_; }

    smxStatus_t run(void*, void* y, const void* x, const void* stats, void* stream) const override {
        cuda::ScopedDevice device(device_id_);
        SMX_RETURN_IF_ERROR(device.status());
        return step_.run(static_cast<cudaStream_t>(stream), [&](cuda::NormalizeParams& p) {
            p.x = x;
            p.y = y;
            p.stats = stats;
        });
    }

private:
    int device_id_;
    Step<cuda::NormalizeParams> step_;
    std::string text_;
};

// ---- shard logsumexp --------------------------------------------------------------------------------------

smxStatus_t row_step(const RowGeometry& g, smxDataType_t stats_dtype, const DeviceLimits& limits,
                     const cuda::RowParams& params, Step<cuda::RowParams>* step) {
    const void* kernel = cuda::row_kernel(stats_dtype);
    SMX_RETURN_IF_ERROR(require(kernel, "vocab-parallel row", stats_dtype, stats_dtype));
    unsigned grid = 0;
    SMX_RETURN_IF_ERROR(rows_grid(kernel, cuda::kRowThreads, cuda::ceil_div(g.rows, cuda::kRowThreads), limits, &grid));
    step->params = params;
    step->launch = Launch{kernel, dim3(grid), dim3(cuda::kRowThreads), 0, 0};
    return SMX_STATUS_SUCCESS;
}

class CudaShardLogsumexpPlan final : public ShardLogsumexpPlan {
public:
    CudaShardLogsumexpPlan(int device_id, Step<cuda::RowParams> step, std::string text)
        : device_id_(device_id), step_(std::move(step)), text_(std::move(text)) {}

    std::size_t workspace_bytes() const override { return 0; }
    const std::string& description() const override { return text_; }

    smxStatus_t run(void*, void* out, const void* stats, void* stream) const override {
        cuda::ScopedDevice device(device_id_);
        SMX_RETURN_IF_ERROR(device.status());
        return step_.run(static_cast<cudaStream_t>(stream), [&](cuda::RowParams& p) {
            p.out = out;
            p.stats = stats;
        });
    }

private:
    int device_id_;
    Step<cuda::RowParams> step_;
    std::string text_;
};

// ---- shard cross-entropy ----------------------------------------------------------------------------------

// The workspace of a reduced loss: the count in the first 16 bytes, then one double per row.
constexpr std::size_t kRowLossesOffset = 16;

class CudaShardCrossEntropyPlan final : public ShardCrossEntropyPlan {
public:
    CudaShardCrossEntropyPlan(int device_id, const ShardCrossEntropyInfo& info, const DeviceLimits& limits)
        : device_id_(device_id), info_(info) {
        status_ = plan(limits);
    }

    smxStatus_t status() const { return status_; }
    std::size_t workspace_bytes() const override {
        return info_.reduced() ? kRowLossesOffset + static_cast<std::size_t>(info_.rows) * sizeof(double) : 0;
    }
    const std::string& description() const override { return text_; }

    smxStatus_t run(void* workspace, void* loss, void* lse, void* dlogits, const void* logits, const void* target,
                    const void* stats, void* stream) const override {
        cuda::ScopedDevice device(device_id_);
        SMX_RETURN_IF_ERROR(device.status());
        const auto s = static_cast<cudaStream_t>(stream);
        auto* count = static_cast<double*>(workspace);
        auto* row_losses = reinterpret_cast<double*>(static_cast<unsigned char*>(workspace) + kRowLossesOffset);
        const bool mean = info_.reduction == SMX_REDUCTION_MEAN;
        // The count first: a MEAN's dlogits and loss divide by it.
        if (mean) {
            SMX_RETURN_IF_ERROR(count_.run(s, [&](cuda::LossParams& p) {
                p.target = target;
                p.count = count;
            }));
        }
        if (info_.rows > 0) {
            SMX_RETURN_IF_ERROR(rows_.run(s, [&](cuda::RowParams& p) {
                p.stats = stats;
                p.target = target;
                p.out = info_.reduced() ? nullptr : loss;
                p.lse = lse;
                p.row_losses = row_losses;
            }));
        }
        if (has_dlogits_launch_) {
            SMX_RETURN_IF_ERROR(dlogits_.run(s, [&](cuda::NormalizeParams& p) {
                p.x = logits;
                p.y = dlogits;
                p.stats = stats;
                p.target = target;
                p.count = mean ? count : nullptr;
            }));
        }
        if (info_.reduced()) {
            SMX_RETURN_IF_ERROR(reduce_.run(s, [&](cuda::LossParams& p) {
                p.count = count;
                p.row_losses = row_losses;
                p.loss = loss;
            }));
        }
        return SMX_STATUS_SUCCESS;
    }

private:
    smxStatus_t plan(const DeviceLimits& limits) {
        const ShardCrossEntropyInfo& info = info_;
        const cuda::RowSpace space = row_space(info);
        const bool target_i64 = info.target_dtype == SMX_DTYPE_I64;
        std::vector<std::string> parts;

        cuda::LossParams loss_params;
        loss_params.space = space;
        loss_params.target_strides = strides_of(info, info.target);
        loss_params.ignore_index = info.ignore_index;
        loss_params.target_is_i64 = target_i64 ? 1 : 0;
        loss_params.mean = info.reduction == SMX_REDUCTION_MEAN ? 1 : 0;
        count_ = {loss_params, Launch{cuda::count_kernel(), dim3(1), dim3(cuda::kLossThreads), 0, 0}};
        if (info.reduction == SMX_REDUCTION_MEAN) parts.push_back("count");

        cuda::RowParams row_params;
        row_params.space = space;
        row_params.stats_strides = strides_of(info, info.stats);
        row_params.target_strides = loss_params.target_strides;
        row_params.out_strides = strides_of(info, info.loss);
        row_params.lse_strides = strides_of(info, info.lse);
        row_params.ranks = info.ranks;
        row_params.ignore_index = info.ignore_index;
        row_params.label_smoothing = info.label_smoothing;
        row_params.output = static_cast<int>(cuda::RowOutput::CrossEntropy);
        row_params.width = cuda::kCrossEntropyStatisticsWidth;
        row_params.target_is_i64 = loss_params.target_is_i64;
        if (info.rows > 0) {
            SMX_RETURN_IF_ERROR(row_step(info, info.stats_dtype, limits, row_params, &rows_));
            parts.push_back(fmt::format("rows grid={}", rows_.launch.grid.x));
        }

        has_dlogits_launch_ = info.has_dlogits && info.numel > 0;
        if (has_dlogits_launch_) {
            cuda::NormalizeParams params;
            params.space = space;
            params.x_strides = strides_of(info, info.logits);
            params.y_strides = strides_of(info, info.dlogits);
            params.stats_strides = row_params.stats_strides;
            params.target_strides = loss_params.target_strides;
            params.row_len = info.row_len;
            params.ranks = info.ranks;
            params.vocab_start = info.vocab_start;
            params.ignore_index = info.ignore_index;
            params.label_smoothing = info.label_smoothing;
            params.output = static_cast<int>(cuda::NormalizeOutput::Dlogits);
            params.width = cuda::kCrossEntropyStatisticsWidth;
            params.target_is_i64 = loss_params.target_is_i64;
            SMX_RETURN_IF_ERROR(normalize_step(info, info.logits_dtype, info.dlogits_dtype,
                                               info.layout == RowLayout::Rows, params, &dlogits_));
            parts.push_back("dlogits " + normalize_text(dlogits_));
        }
        if (info.reduced()) {
            const void* kernel = cuda::reduce_kernel(info.loss_dtype);
            SMX_RETURN_IF_ERROR(require(kernel, "vocab-parallel reduce", info.loss_dtype, info.loss_dtype));
            reduce_ = {loss_params, Launch{kernel, dim3(1), dim3(cuda::kLossThreads), 0, 0}};
            parts.push_back("reduce");
        }
        text_ = "cuda vocab-parallel cross-entropy |";
        for (std::size_t k = 0; k < parts.size(); ++k) text_ += (k == 0 ? " " : " + ") + parts[k];
        return SMX_STATUS_SUCCESS;
    }

    int device_id_;
    ShardCrossEntropyInfo info_;
    smxStatus_t status_ = SMX_STATUS_SUCCESS;
    std::string text_;
    Step<cuda::LossParams> count_;
    Step<cuda::RowParams> rows_;
    Step<cuda::NormalizeParams> dlogits_;
    Step<cuda::LossParams> reduce_;
    bool has_dlogits_launch_ = false;
};

}  // namespace

smxStatus_t make_cuda_shard_statistics_plan(const ShardStatisticsInfo& info, int device_id, const DeviceLimits& limits,
                                            const cuda::PlanPreferences&, std::unique_ptr<ShardStatisticsPlan>* plan) {
    cuda::ScopedDevice device(device_id);
    SMX_RETURN_IF_ERROR(device.status());
    const bool vector = info.layout == RowLayout::Rows;
    const bool cross_entropy = info.width == cuda::kCrossEntropyStatisticsWidth;
    const void* kernel = cuda::statistics_kernel(info.x_dtype, vector, cross_entropy);
    SMX_RETURN_IF_ERROR(require(kernel, "vocab-parallel statistics", info.x_dtype, info.stats_dtype));
    Step<cuda::StatisticsParams> step;
    step.params.space = row_space(info);
    step.params.x_strides = strides_of(info, info.x);
    step.params.stats_strides = strides_of(info, info.stats);
    step.params.target_strides = strides_of(info, info.target);
    step.params.row_len = info.row_len;
    step.params.vocab_start = info.vocab_start;
    step.params.width = static_cast<int>(info.width);
    step.params.target_is_i64 = info.target_dtype == SMX_DTYPE_I64 ? 1 : 0;
    // The row length alone picks the CTA size, so a shard's statistics keep one summation order on every run.
    const int threads =
        info.row_len >= cuda::kStatisticsWideRowLen ? cuda::kStatisticsMaxThreads : cuda::kVocabParallelThreads;
    unsigned grid = 0;
    SMX_RETURN_IF_ERROR(rows_grid(kernel, threads, info.rows, limits, &grid));
    step.launch = Launch{kernel, dim3(grid), dim3(static_cast<unsigned>(threads)), 0, 0};
    *plan = std::make_unique<CudaShardStatisticsPlan>(
        device_id, step,
        fmt::format("cuda vocab-parallel statistics vector={} threads={} grid={}", vector ? 1 : 0, threads, grid));
    return SMX_STATUS_SUCCESS;
}

smxStatus_t make_cuda_shard_softmax_plan(const ShardSoftmaxInfo& info, int device_id, const DeviceLimits&,
                                         const cuda::PlanPreferences&, std::unique_ptr<ShardSoftmaxPlan>* plan) {
    cuda::ScopedDevice device(device_id);
    SMX_RETURN_IF_ERROR(device.status());
    cuda::NormalizeParams params;
    params.space = row_space(info);
    params.x_strides = strides_of(info, info.x);
    params.y_strides = strides_of(info, info.y);
    params.stats_strides = strides_of(info, info.stats);
    params.row_len = info.row_len;
    params.ranks = info.ranks;
    params.output =
        static_cast<int>(info.is_log() ? cuda::NormalizeOutput::LogSoftmax : cuda::NormalizeOutput::Softmax);
    params.width = cuda::kSoftmaxStatisticsWidth;
    Step<cuda::NormalizeParams> step;
    SMX_RETURN_IF_ERROR(
        normalize_step(info, info.x_dtype, info.y_dtype, info.layout == RowLayout::Rows, params, &step));
    *plan = std::make_unique<CudaShardSoftmaxPlan>(device_id, step, "cuda vocab-parallel " + normalize_text(step));
    return SMX_STATUS_SUCCESS;
}

smxStatus_t make_cuda_shard_logsumexp_plan(const ShardLogsumexpInfo& info, int device_id, const DeviceLimits& limits,
                                           const cuda::PlanPreferences&, std::unique_ptr<ShardLogsumexpPlan>* plan) {
    cuda::ScopedDevice device(device_id);
    SMX_RETURN_IF_ERROR(device.status());
    cuda::RowParams params;
    params.space = row_space(info);
    params.stats_strides = strides_of(info, info.stats);
    params.out_strides = strides_of(info, info.out);
    params.ranks = info.ranks;
    params.output = static_cast<int>(cuda::RowOutput::Logsumexp);
    params.width = cuda::kSoftmaxStatisticsWidth;
    Step<cuda::RowParams> step;
    SMX_RETURN_IF_ERROR(row_step(info, info.stats_dtype, limits, params, &step));
    *plan = std::make_unique<CudaShardLogsumexpPlan>(
        device_id, step, fmt::format("cuda vocab-parallel logsumexp rows grid={}", step.launch.grid.x));
    return SMX_STATUS_SUCCESS;
}

smxStatus_t make_cuda_shard_cross_entropy_plan(const ShardCrossEntropyInfo& info, int device_id,
                                               const DeviceLimits& limits, const cuda::PlanPreferences&,
                                               std::unique_ptr<ShardCrossEntropyPlan>* plan) {
    cuda::ScopedDevice device(device_id);
    SMX_RETURN_IF_ERROR(device.status());
    auto made = std::make_unique<CudaShardCrossEntropyPlan>(device_id, info, limits);
    SMX_RETURN_IF_ERROR(made->status());
    *plan = std::move(made);
    return SMX_STATUS_SUCCESS;
}

}  // namespace smx
