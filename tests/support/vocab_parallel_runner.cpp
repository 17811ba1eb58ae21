// vocab_parallel_runner.cpp - W ranks of the vocabulary-parallel operators in one process (vocab_parallel_runner.hpp).
#include "support/vocab_parallel_runner.hpp"

#include <memory>

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

}  // namespace

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

}  // namespace smx_test
