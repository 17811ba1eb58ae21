// vocab_parallel_runner.cpp - W ranks of the vocabulary-parallel operators in one process (vocab_parallel_runner.hpp).
#include "support/vocab_parallel_runner.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

#include "support/logprobs_reference.hpp"

namespace smx_test {
namespace {

// A descriptor destroyed with its destroy function when the scope ends.
template <class Desc, smxStatus_t (*Destroy)(Desc)>
struct Owned {
    Desc desc = nullptr;
    ~Owned() { Destroy(desc); }
};

// Elements [start, start + length) of an operand along `axis`: a descriptor and the pointer of its element 0.
struct View {
    std::unique_ptr<TensorDesc> desc;
    void* data;
};

View view_of(const Operand& operand, int axis, std::int64_t start, std::int64_t length) {
    const HostTensor& t = *operand.layout;
    std::vector<std::int64_t> shape = t.shape;
    shape[axis] = length;
    auto* bytes = static_cast<unsigned char*>(operand.data);
    return {std::make_unique<TensorDesc>(t.dtype, shape, t.strides),
            bytes + start * t.strides[axis] * static_cast<std::int64_t>(dtype_size(t.dtype))};
}

int normalized(int axis, int ndim) { return axis < 0 ? axis + ndim : axis; }

smxDataType_t statistics_dtype(smxDataType_t x) { return x == SMX_DTYPE_F64 ? SMX_DTYPE_F64 : SMX_DTYPE_F32; }

// Results derived from the statistics carry their dtype's precision, whatever the output's dtype.
double statistics_rtol(smxDataType_t x) { return relative_tolerance(statistics_dtype(x)); }

// The softmax (or log-softmax) reference with the error scales compare_to_reference uses (|y|, or |y| + 1 for
// log), as a ScaledReference: compare_to_scaled_reference then also takes a value past the output dtype's range
// as its infinity, as rounding it once does.
ScaledReference softmax_reference(const HostTensor& x, int axis, bool log_mode) {
    ScaledReference ref;
    ref.dx = reference_softmax(x, axis, log_mode);
    for (double value : ref.dx) ref.scale.push_back(std::fabs(value) + (log_mode ? 1.0 : 0.0));
    return ref;
}

std::string failed(const char* step, smxStatus_t status) {
    return std::string(step) + " failed: " + smxGetStatusString(status) + ": " + smxGetLastErrorMessage();
}

// A non-empty description of a check's first failure, prefixed with what was compared.
std::string first_failure(std::initializer_list<std::pair<const char*, std::string>> results) {
    for (const auto& [what, result] : results) {
        if (!result.empty()) return std::string(what) + ": " + result;
    }
    return "";
}

bool same_bits(const HostTensor& a, const HostTensor& b) {
    return a.storage.size() == b.storage.size() && std::memcmp(a.storage.data(), b.storage.data(), a.storage.size()) == 0;
}

}  // namespace

HostBackend::HostBackend() {
    if (handle_.status != SMX_STATUS_SUCCESS) throw std::runtime_error(failed("smxCreate(CPU)", handle_.status));
}

Sharding split_axis(std::int64_t n, int axis, int ranks, int empty_rank) {
    Sharding sharding;
    sharding.axis = axis;
    const int holders = empty_rank >= 0 ? ranks - 1 : ranks;
    std::int64_t start = 0;
    for (int w = 0, k = 0; w < ranks; ++w) {
        std::int64_t length = 0;
        if (w != empty_rank) {
            length = n / holders + (k < n % holders ? 1 : 0);
            ++k;
        }
        sharding.starts.push_back(start);
        sharding.lengths.push_back(length);
        start += length;
    }
    return sharding;
}

HostTensor make_gathered_statistics(smxDataType_t dtype, const std::vector<std::int64_t>& x_shape, int axis, int ranks,
                                    std::int64_t width) {
    axis = normalized(axis, static_cast<int>(x_shape.size()));
    std::vector<std::int64_t> shape = x_shape;
    shape[axis] = ranks * width;
    std::vector<std::int64_t> strides(shape.size());
    std::int64_t running = 1;
    for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
        if (d == axis) continue;
        strides[d] = running;
        running *= std::max<std::int64_t>(shape[d], 1);
    }
    strides[axis] = running;  // the row count: one rank's block of statistics is contiguous
    return make_tensor(dtype, shape, strides);
}

void fill_shard_targets(HostTensor& target, const Sharding& sharding, std::int64_t n, std::int64_t ignore_index) {
    fill_indices(target, test_rng(), 0, n - 1);
    const std::vector<std::int64_t> offsets = logical_offsets(target);
    for (std::size_t r = 2; r < offsets.size(); r += 3) set_index(target, offsets[r], ignore_index);
    std::size_t r = 0;
    for (int w = 0; w < sharding.ranks() && r + 1 < offsets.size(); ++w) {
        if (sharding.lengths[w] == 0) continue;
        set_index(target, offsets[r++], sharding.starts[w]);
        set_index(target, offsets[r++], sharding.starts[w] + sharding.lengths[w] - 1);
    }
}

void* HostWorkspaceSource::get(std::size_t bytes) {
    if (bytes == 0) return nullptr;
    blocks_.emplace_back((bytes + 15) / 16 * 2);
    return blocks_.back().data();
}

smxStatus_t run_shard_statistics(smxHandle_t handle, WorkspaceSource& workspace, const Sharding& sharding,
                                 const Operand& stats, const Operand& x, const Operand* target, void* stream) {
    const std::int64_t width = target != nullptr ? SMX_SHARD_CROSS_ENTROPY_STATISTICS : SMX_SHARD_SOFTMAX_STATISTICS;
    std::unique_ptr<TensorDesc> target_desc;
    if (target != nullptr) target_desc = std::make_unique<TensorDesc>(*target->layout);
    for (int w = 0; w < sharding.ranks(); ++w) {
        const View x_view = view_of(x, sharding.axis, sharding.starts[w], sharding.lengths[w]);
        const View stats_view = view_of(stats, sharding.axis, w * width, width);
        Owned<smxShardStatisticsDescriptor_t, smxDestroyShardStatisticsDescriptor> desc;
        smxStatus_t status = smxCreateShardStatisticsDescriptor(handle, &desc.desc, sharding.axis, sharding.starts[w],
                                                                stats_view.desc->desc, x_view.desc->desc,
                                                                target_desc ? target_desc->desc : nullptr);
        std::size_t bytes = 0;
        if (status == SMX_STATUS_SUCCESS) status = smxGetShardStatisticsWorkspaceSize(desc.desc, &bytes);
        if (status == SMX_STATUS_SUCCESS) {
            status = smxShardStatistics(desc.desc, workspace.get(bytes), bytes, stats_view.data, x_view.data,
                                        target != nullptr ? target->data : nullptr, stream);
        }
        if (status != SMX_STATUS_SUCCESS) return status;
    }
    return SMX_STATUS_SUCCESS;
}

smxStatus_t run_shard_softmax(smxHandle_t handle, WorkspaceSource& workspace, const Sharding& sharding, bool log_mode,
                              const Operand& y, const Operand& x, const Operand& stats, void* stream) {
    const TensorDesc stats_desc(*stats.layout);
    for (int w = 0; w < sharding.ranks(); ++w) {
        const View x_view = view_of(x, sharding.axis, sharding.starts[w], sharding.lengths[w]);
        const View y_view = view_of(y, sharding.axis, sharding.starts[w], sharding.lengths[w]);
        Owned<smxShardSoftmaxDescriptor_t, smxDestroyShardSoftmaxDescriptor> desc;
        smxStatus_t status =
            smxCreateShardSoftmaxDescriptor(handle, &desc.desc, log_mode ? SMX_LOG_SOFTMAX : SMX_SOFTMAX, sharding.axis,
                                            y_view.desc->desc, x_view.desc->desc, stats_desc.desc);
        std::size_t bytes = 0;
        if (status == SMX_STATUS_SUCCESS) status = smxGetShardSoftmaxWorkspaceSize(desc.desc, &bytes);
        if (status == SMX_STATUS_SUCCESS) {
            status =
                smxShardSoftmax(desc.desc, workspace.get(bytes), bytes, y_view.data, x_view.data, stats.data, stream);
        }
        if (status != SMX_STATUS_SUCCESS) return status;
    }
    return SMX_STATUS_SUCCESS;
}

smxStatus_t run_shard_logsumexp(smxHandle_t handle, WorkspaceSource& workspace, int axis, const Operand& out,
                                const Operand& stats, void* stream) {
    const TensorDesc stats_desc(*stats.layout), out_desc(*out.layout);
    Owned<smxShardLogsumexpDescriptor_t, smxDestroyShardLogsumexpDescriptor> desc;
    smxStatus_t status = smxCreateShardLogsumexpDescriptor(handle, &desc.desc, axis, out_desc.desc, stats_desc.desc);
    std::size_t bytes = 0;
    if (status == SMX_STATUS_SUCCESS) status = smxGetShardLogsumexpWorkspaceSize(desc.desc, &bytes);
    if (status != SMX_STATUS_SUCCESS) return status;
    return smxShardLogsumexp(desc.desc, workspace.get(bytes), bytes, out.data, stats.data, stream);
}

smxStatus_t run_shard_cross_entropy(smxHandle_t handle, WorkspaceSource& workspace, const Sharding& sharding,
                                    const smxCrossEntropyOptions_t& options, const std::vector<Operand>& losses,
                                    const std::vector<Operand>& lses, const Operand& dlogits, const Operand& logits,
                                    const Operand& target, const Operand& stats, void* stream) {
    const TensorDesc stats_desc(*stats.layout), target_desc(*target.layout);
    for (int w = 0; w < sharding.ranks(); ++w) {
        const View logits_view = view_of(logits, sharding.axis, sharding.starts[w], sharding.lengths[w]);
        View dlogits_view{nullptr, nullptr};
        if (dlogits.data != nullptr)
            dlogits_view = view_of(dlogits, sharding.axis, sharding.starts[w], sharding.lengths[w]);
        const TensorDesc loss_desc(*losses[w].layout);
        std::unique_ptr<TensorDesc> lse_desc;
        if (!lses.empty()) lse_desc = std::make_unique<TensorDesc>(*lses[w].layout);
        Owned<smxShardCrossEntropyDescriptor_t, smxDestroyShardCrossEntropyDescriptor> desc;
        smxStatus_t status = smxCreateShardCrossEntropyDescriptor(
            handle, &desc.desc, sharding.axis, &options, sharding.starts[w], loss_desc.desc,
            lse_desc ? lse_desc->desc : nullptr, dlogits_view.desc ? dlogits_view.desc->desc : nullptr,
            logits_view.desc->desc, target_desc.desc, stats_desc.desc);
        std::size_t bytes = 0;
        if (status == SMX_STATUS_SUCCESS) status = smxGetShardCrossEntropyWorkspaceSize(desc.desc, &bytes);
        if (status == SMX_STATUS_SUCCESS) {
            status = smxShardCrossEntropy(desc.desc, workspace.get(bytes), bytes, losses[w].data,
                                          lses.empty() ? nullptr : lses[w].data, dlogits_view.data, logits_view.data,
                                          target.data, stats.data, stream);
        }
        if (status != SMX_STATUS_SUCCESS) return status;
    }
    return SMX_STATUS_SUCCESS;
}

std::string check_sharded_softmax(ShardBackend& backend, const HostTensor& x_in, const Sharding& sharding, bool log_mode,
                                  smxDataType_t y_dtype) {
    HostTensor x = x_in;
    HostTensor stats = make_gathered_statistics(statistics_dtype(x.dtype), x.shape, sharding.axis, sharding.ranks(),
                                                SMX_SHARD_SOFTMAX_STATISTICS);
    HostTensor y = make_tensor(y_dtype, x.shape);
    poison(stats);
    poison(y);
    const Operand x_at{&x, backend.place(x)}, stats_at{&stats, backend.place(stats)}, y_at{&y, backend.place(y)};
    smxStatus_t status = run_shard_statistics(backend.handle(), backend.workspace(), sharding, stats_at, x_at, nullptr);
    if (status != SMX_STATUS_SUCCESS) return failed("statistics", status);
    status = run_shard_softmax(backend.handle(), backend.workspace(), sharding, log_mode, y_at, x_at, stats_at);
    if (status != SMX_STATUS_SUCCESS) return failed("softmax", status);
    backend.fetch(y);
    return compare_to_scaled_reference(y, softmax_reference(x, sharding.axis, log_mode), statistics_rtol(x.dtype));
}

std::string check_sharded_logsumexp(ShardBackend& backend, const HostTensor& x_in, const Sharding& sharding,
                                    bool keepdim) {
    HostTensor x = x_in;
    const smxDataType_t dtype = statistics_dtype(x.dtype);
    HostTensor stats =
        make_gathered_statistics(dtype, x.shape, sharding.axis, sharding.ranks(), SMX_SHARD_SOFTMAX_STATISTICS);
    HostTensor out = make_per_row_tensor(dtype, x.shape, sharding.axis, keepdim, keepdim ? 2 : -1);
    poison(stats);
    poison(out);
    const Operand x_at{&x, backend.place(x)}, stats_at{&stats, backend.place(stats)}, out_at{&out, backend.place(out)};
    smxStatus_t status = run_shard_statistics(backend.handle(), backend.workspace(), sharding, stats_at, x_at, nullptr);
    if (status != SMX_STATUS_SUCCESS) return failed("statistics", status);
    status = run_shard_logsumexp(backend.handle(), backend.workspace(), sharding.axis, out_at, stats_at);
    if (status != SMX_STATUS_SUCCESS) return failed("logsumexp", status);
    backend.fetch(out);
    return compare_to_scaled_reference(out, reference_logsumexp(x, sharding.axis));
}

std::string check_sharded_cross_entropy(ShardBackend& backend, const HostTensor& logits_in, const HostTensor& target_in,
                                        const Sharding& sharding, const smxCrossEntropyOptions_t& options,
                                        smxDataType_t dlogits_dtype, bool in_place) {
    HostTensor logits = logits_in, target = target_in;
    const CrossEntropyReference ref = reference_cross_entropy(logits, target, sharding.axis, options);
    const smxDataType_t dtype = statistics_dtype(logits.dtype);
    HostTensor stats = make_gathered_statistics(dtype, logits.shape, sharding.axis, sharding.ranks(),
                                                SMX_SHARD_CROSS_ENTROPY_STATISTICS);
    HostTensor dlogits = make_tensor(dlogits_dtype, logits.shape);
    std::vector<HostTensor> losses, lses;
    for (int w = 0; w < sharding.ranks(); ++w) {
        losses.push_back(options.reduction == SMX_REDUCTION_NONE
                             ? make_per_row_tensor(dtype, logits.shape, sharding.axis)
                             : make_tensor(dtype, {1}));
        lses.push_back(make_per_row_tensor(dtype, logits.shape, sharding.axis, true, 2));
        poison(losses.back());
        poison(lses.back());
    }
    poison(stats);
    poison(dlogits);
    std::vector<Operand> loss_at, lse_at;
    for (int w = 0; w < sharding.ranks(); ++w) {
        loss_at.push_back({&losses[w], backend.place(losses[w])});
        lse_at.push_back({&lses[w], backend.place(lses[w])});
    }
    const Operand logits_at{&logits, backend.place(logits)}, target_at{&target, backend.place(target)};
    const Operand stats_at{&stats, backend.place(stats)};
    const Operand dlogits_at = in_place ? logits_at : Operand{&dlogits, backend.place(dlogits)};
    smxStatus_t status =
        run_shard_statistics(backend.handle(), backend.workspace(), sharding, stats_at, logits_at, &target_at);
    if (status != SMX_STATUS_SUCCESS) return failed("statistics", status);
    status = run_shard_cross_entropy(backend.handle(), backend.workspace(), sharding, options, loss_at, lse_at,
                                     dlogits_at, logits_at, target_at, stats_at);
    if (status != SMX_STATUS_SUCCESS) return failed("cross-entropy", status);
    HostTensor& gradient = in_place ? logits : dlogits;
    backend.fetch(gradient);
    for (int w = 0; w < sharding.ranks(); ++w) {
        backend.fetch(losses[w]);
        backend.fetch(lses[w]);
        if (!same_bits(losses[w], losses[0]) || !same_bits(lses[w], lses[0])) {
            return "rank " + std::to_string(w) + "'s loss or lse differs from rank 0's";
        }
    }
    return first_failure({{"dlogits", compare_to_scaled_reference(gradient, ref.dlogits, statistics_rtol(logits.dtype))},
                          {"loss", compare_to_scaled_reference(losses[0], ref.loss)},
                          {"lse", compare_to_scaled_reference(lses[0], ref.lse)}});
}

}  // namespace smx_test
