// peers_api.cpp - the C entry points of the one-read vocabulary-parallel softmax (smx.h, "Vocabulary-parallel in
// one read"): a group's mailbox (smxShardPeers_t) and the fused descriptor. They validate and hand the work to the
// CUDA backend (src/cuda/vocab_parallel/peers.cpp); a CPU handle has no peers, and a build without CUDA none.
#include <cstdint>
#include <memory>

#include "core/api_guard.hpp"
#include "core/dtype.hpp"
#include "core/enum_value.hpp"
#include "core/error.hpp"
#include "cuda/vocab_parallel/fused_params.hpp"  // plain C++: the kernel's limits
#include "ops/common/entry.hpp"
#include "ops/vocab_parallel/info.hpp"
#include "ops/vocab_parallel/peers.hpp"

struct smxShardPeers {
    SMX_OBJECT_TAG("smxShardPeers_t");
    int device_id = 0;
    std::unique_ptr<smx::PeerMailbox> mailbox;
};

struct smxFusedShardSoftmaxDescriptor {
    SMX_OBJECT_TAG("smxFusedShardSoftmaxDescriptor_t");
    smx::DescriptorDevice device;
    smx::ShardSoftmaxInfo info;
    std::unique_ptr<smx::FusedShardSoftmaxPlan> plan;
};

namespace smx {

std::int64_t fused_shard_softmax_max_row_length(smxDataType_t dtype) {
    if (dtype != SMX_DTYPE_F16 && dtype != SMX_DTYPE_BF16 && dtype != SMX_DTYPE_F32) return 0;
    return static_cast<std::int64_t>(cuda::kFusedThreads) * cuda::kFusedMaxPacksPerThread *
           (16 / static_cast<std::int64_t>(dtype_size(dtype)));
}

namespace {

// A tensor descriptor destroyed with its owner.
struct OwnedTensor {
    smxTensorDescriptor_t desc = nullptr;
    ~OwnedTensor() { smxDestroyTensorDescriptor(desc); }
};

smxStatus_t create_peers(smxHandle_t handle, smxShardPeers_t* out, int ranks, int rank, std::int64_t max_rows) {
    if (out == nullptr) return fail(SMX_STATUS_BAD_PARAM_NULL_POINTER, "peers (the output pointer) is NULL");
    *out = nullptr;
    SMX_RETURN_IF_ERROR(check_live(handle, "handle"));
    if (ranks < 1 || ranks > SMX_SHARD_PEERS_MAX_RANKS) {
        return fail(SMX_STATUS_BAD_PARAM, "ranks {} is outside [1, {}]", ranks, SMX_SHARD_PEERS_MAX_RANKS);
    }
    if (rank < 0 || rank >= ranks) return fail(SMX_STATUS_BAD_PARAM, "rank {} is outside [0, {})", rank, ranks);
    // Row indices travel as 32-bit counters in the kernel.
    if (max_rows < 0 || max_rows > INT32_MAX) {
        return fail(SMX_STATUS_BAD_PARAM, "maxRows {} is outside [0, {}]", max_rows, INT32_MAX);
    }
    if (handle->device_type != SMX_DEVICE_CUDA) {
        return fail(SMX_STATUS_BAD_PARAM_DEVICE, "a CPU handle has no peers: the fused path runs on CUDA devices");
    }
    auto peers = std::make_unique<smxShardPeers>();
    peers->device_id = handle->device_id;
#if SMX_WITH_CUDA
    SMX_RETURN_IF_ERROR(make_cuda_peer_mailbox(handle->device_id, ranks, rank, max_rows, &peers->mailbox));
#else
    return fail(SMX_STATUS_INTERNAL_ERROR, "a CUDA handle exists in a build without CUDA");
#endif
    *out = peers.release();
    return SMX_STATUS_SUCCESS;
}

// The gathered statistics' descriptor the shard-softmax info validates against: x's shape with the axis of
// 2 * ranks values (the fused kernel keeps them in the mailbox; only their count matters here).
smxStatus_t gathered_statistics(smxTensorDescriptor_t x, int axis, int ranks, OwnedTensor* stats) {
    if (x == nullptr) return fail(SMX_STATUS_BAD_PARAM_NULL_POINTER, "xDesc is NULL");
    smxDataType_t dtype = SMX_DTYPE_F32;
    int ndim = 0;
    std::int64_t shape[SMX_MAX_DIMS] = {};
    SMX_RETURN_IF_ERROR(smxGetTensorDescriptor(x, &dtype, &ndim, shape, nullptr));
    const int normalized = axis < 0 ? axis + ndim : axis;
    if (normalized >= 0 && normalized < ndim) shape[normalized] = 2 * static_cast<std::int64_t>(ranks);
    // An axis out of range keeps x's shape: the info refuses the axis itself.
    const smxDataType_t stats_dtype = dtype == SMX_DTYPE_F64 ? SMX_DTYPE_F64 : SMX_DTYPE_F32;
    return smxCreateTensorDescriptor(&stats->desc, stats_dtype, ndim, shape, nullptr);
}

smxStatus_t create_fused(smxHandle_t handle, smxFusedShardSoftmaxDescriptor_t* out, smxShardPeers_t peers,
                         int mode, int axis, smxTensorDescriptor_t y, smxTensorDescriptor_t x) {
    if (out == nullptr) return fail(SMX_STATUS_BAD_PARAM_NULL_POINTER, "desc (the output pointer) is NULL");
    *out = nullptr;
    SMX_RETURN_IF_ERROR(check_live(handle, "handle"));
    SMX_RETURN_IF_ERROR(check_live(peers, "peers"));
    if (x != nullptr) SMX_RETURN_IF_ERROR(check_live(x, "xDesc"));
    if (y != nullptr) SMX_RETURN_IF_ERROR(check_live(y, "yDesc"));
    const PeerMailbox& mailbox = *peers->mailbox;
    if (handle->device_type != SMX_DEVICE_CUDA || handle->device_id != peers->device_id) {
        return fail(SMX_STATUS_BAD_PARAM, "peers live on CUDA device {}, not on the handle's", peers->device_id);
    }
    if (!mailbox.connected()) return fail(SMX_STATUS_BAD_PARAM, "peers are not connected (smxConnectShardPeers)");
    OwnedTensor stats;
    SMX_RETURN_IF_ERROR(gathered_statistics(x, axis, mailbox.ranks(), &stats));
    auto desc = std::make_unique<smxFusedShardSoftmaxDescriptor>();
    desc->device = {handle->device_type, handle->device_id, handle->check_device_pointers};
    SMX_RETURN_IF_ERROR(make_shard_softmax_info(mode, axis, y, x, stats.desc, &desc->info));
    if (desc->info.rows > mailbox.max_rows()) {
        return fail(SMX_STATUS_BAD_PARAM, "{} rows, more than the {} the peers' mailbox holds", desc->info.rows,
                    mailbox.max_rows());
    }
#if SMX_WITH_CUDA
    SMX_RETURN_IF_ERROR(
        make_cuda_fused_shard_softmax_plan(desc->info, handle->device_id, handle->limits, mailbox, &desc->plan));
#endif
    log_debug("{} descriptor: {} | plan: {}", smxFusedShardSoftmaxDescriptor::kObjectKind, describe(desc->info),
              desc->plan->description());
    *out = desc.release();
    return SMX_STATUS_SUCCESS;
}

smxStatus_t fused_softmax(smxFusedShardSoftmaxDescriptor_t desc, void* y, const void* x, void* stream) {
    SMX_RETURN_IF_ERROR(check_live(desc, "desc"));
    const ShardSoftmaxInfo& info = desc->info;
    // A rank whose shard is empty still publishes its rows' statistics: only a problem without rows (on every
    // rank alike) launches nothing.
    if (info.rows == 0) return SMX_STATUS_SUCCESS;
    TouchedOperands operands;
    SMX_RETURN_IF_ERROR(operands.add(info.numel, {"x", x, info.x_dtype, &info.x, false, -1, false}));
    SMX_RETURN_IF_ERROR(operands.add(info.numel, {"y", y, info.y_dtype, &info.y, true, 0, info.same_layout}));
    SMX_RETURN_IF_ERROR(check_device(desc->device, operands));
    return desc->plan->run(y, x, stream);
}

}  // namespace
}  // namespace smx

extern "C" {

SMX_API smxStatus_t smxCreateShardPeers(smxHandle_t handle, smxShardPeers_t* peers, int ranks, int rank,
                                        int64_t maxRows) {
    return smx::guard_api("smxCreateShardPeers",
                          [&] { return smx::create_peers(handle, peers, ranks, rank, maxRows); });
}

SMX_API smxStatus_t smxGetShardPeersHandle(smxShardPeers_t peers, void* handle) {
    return smx::guard_api("smxGetShardPeersHandle", [&] {
        SMX_RETURN_IF_ERROR(smx::check_live(peers, "peers"));
        if (handle == nullptr) return smx::fail(SMX_STATUS_BAD_PARAM_NULL_POINTER, "handle is NULL");
        return peers->mailbox->export_handle(handle);
    });
}

SMX_API smxStatus_t smxConnectShardPeers(smxShardPeers_t peers, const void* handles) {
    return smx::guard_api("smxConnectShardPeers", [&] {
        SMX_RETURN_IF_ERROR(smx::check_live(peers, "peers"));
        if (handles == nullptr) return smx::fail(SMX_STATUS_BAD_PARAM_NULL_POINTER, "handles is NULL");
        if (peers->mailbox->connected()) return smx::fail(SMX_STATUS_BAD_PARAM, "peers are connected already");
        return peers->mailbox->connect(static_cast<const unsigned char*>(handles));
    });
}

SMX_API smxStatus_t smxGetShardPeersTimeouts(smxShardPeers_t peers, int64_t* timedOutRows) {
    return smx::guard_api("smxGetShardPeersTimeouts", [&] {
        SMX_RETURN_IF_ERROR(smx::check_live(peers, "peers"));
        if (timedOutRows == nullptr) return smx::fail(SMX_STATUS_BAD_PARAM_NULL_POINTER, "timedOutRows is NULL");
        return peers->mailbox->timed_out_rows(timedOutRows);
    });
}

SMX_API smxStatus_t smxDestroyShardPeers(smxShardPeers_t peers) { return smx::destroy_live(peers, "peers"); }

SMX_API smxStatus_t smxCreateFusedShardSoftmaxDescriptor(smxHandle_t handle, smxFusedShardSoftmaxDescriptor_t* desc,
                                                         smxShardPeers_t peers, smxSoftmaxMode_t mode, int axis,
                                                         smxTensorDescriptor_t yDesc, smxTensorDescriptor_t xDesc) {
    return smx::guard_api("smxCreateFusedShardSoftmaxDescriptor", [&] {
        return smx::create_fused(handle, desc, peers, smx::raw_enum_value(mode), axis, yDesc, xDesc);
    });
}

SMX_API smxStatus_t smxGetFusedShardSoftmaxMaxRowLength(smxDataType_t dtype, int64_t* maxRowLength) {
    return smx::guard_api("smxGetFusedShardSoftmaxMaxRowLength", [&] {
        if (maxRowLength == nullptr) return smx::fail(SMX_STATUS_BAD_PARAM_NULL_POINTER, "maxRowLength is NULL");
        *maxRowLength = smx::fused_shard_softmax_max_row_length(dtype);
        return SMX_STATUS_SUCCESS;
    });
}

SMX_API smxStatus_t smxGetFusedShardSoftmaxPlan(smxFusedShardSoftmaxDescriptor_t desc, const char** plan) {
    return smx::plan_text(desc, plan);
}

SMX_API smxStatus_t smxFusedShardSoftmax(smxFusedShardSoftmaxDescriptor_t desc, void* y, const void* x, void* stream) {
    return smx::guard_api("smxFusedShardSoftmax", [&] { return smx::fused_softmax(desc, y, x, stream); });
}

SMX_API smxStatus_t smxDestroyFusedShardSoftmaxDescriptor(smxFusedShardSoftmaxDescriptor_t desc) {
    return smx::destroy_live(desc, "desc");
}

}  // extern "C"
