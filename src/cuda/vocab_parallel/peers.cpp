// peers.cpp - the CUDA side of the one-read vocabulary-parallel softmax: a rank's mailbox (one allocation: the
// control block, then the slots), the other ranks' mailboxes mapped through CUDA IPC, and the fused kernel's
// plan (fused.cu) on them. Setup allocates and synchronizes; run() binds pointers and launches two kernels
// (the begin kernel, then the fused one), nothing else, so a call can be captured in a CUDA graph.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "cuda/backend.hpp"
#include "cuda/common/launch.hpp"
#include "cuda/common/util.hpp"
#include "cuda/vocab_parallel/fused_params.hpp"
#include "cuda/vocab_parallel/geometry.hpp"

namespace smx {
namespace {

static_assert(sizeof(cudaIpcMemHandle_t) == SMX_SHARD_PEERS_HANDLE_BYTES, "the handle size smx.h promises");

class CudaPeerMailbox final : public PeerMailbox {
public:
    CudaPeerMailbox(int device_id, int ranks, int rank, std::int64_t max_rows)
        : device_id_(device_id), ranks_(ranks), rank_(rank), max_rows_(max_rows) {}

    ~CudaPeerMailbox() override {
        cuda::ScopedDevice device(device_id_);
        // No kernel of ours may still be writing into a mailbox we unmap or free.
        (void)cudaDeviceSynchronize();
        for (int w = 0; w < ranks_; ++w) {
            if (w != rank_ && opened_[w] != nullptr) (void)cudaIpcCloseMemHandle(opened_[w]);
        }
        if (own_ != nullptr) (void)cudaFree(own_);
    }

    smxStatus_t allocate() {
        cuda::ScopedDevice device(device_id_);
        SMX_RETURN_IF_ERROR(device.status());
        const std::size_t bytes = cuda::mailbox_bytes(max_rows_, ranks_);
        cudaError_t error = cudaMalloc(&own_, bytes);
        if (error != cudaSuccess) {
            own_ = nullptr;
            (void)cudaGetLastError();
            return fail(SMX_STATUS_ALLOC_FAILED, "cudaMalloc of the {}-byte mailbox failed: {}", bytes,
                        cudaGetErrorString(error));
        }
        // Epoch 0 everywhere: no slot holds a call's epoch (calls count from 1).
        if ((error = cudaMemset(own_, 0, bytes)) != cudaSuccess) return cuda::cuda_failure(error, "clearing the mailbox");
        if ((error = cudaDeviceSynchronize()) != cudaSuccess) return cuda::cuda_failure(error, "the mailbox's setup");
        slots_[rank_] = slots_of(own_);
        return SMX_STATUS_SUCCESS;
    }

    int ranks() const override { return ranks_; }
    int rank() const override { return rank_; }
    std::int64_t max_rows() const override { return max_rows_; }
    bool connected() const override { return connected_; }
    int device_id() const { return device_id_; }
    cuda::MailboxSlot* const* slots() const { return slots_; }
    cuda::FusedControl* control() const { return static_cast<cuda::FusedControl*>(own_); }

    smxStatus_t export_handle(void* handle) const override {
        cuda::ScopedDevice device(device_id_);
        SMX_RETURN_IF_ERROR(device.status());
        cudaIpcMemHandle_t ipc;
        const cudaError_t error = cudaIpcGetMemHandle(&ipc, own_);
        if (error != cudaSuccess) return cuda::cuda_failure(error, "cudaIpcGetMemHandle of the mailbox");
        std::memcpy(handle, &ipc, sizeof(ipc));
        return SMX_STATUS_SUCCESS;
    }

    smxStatus_t connect(const unsigned char* handles) override {
        cuda::ScopedDevice device(device_id_);
        SMX_RETURN_IF_ERROR(device.status());
        for (int w = 0; w < ranks_; ++w) {
            if (w == rank_) continue;
            cudaIpcMemHandle_t ipc;
            std::memcpy(&ipc, handles + static_cast<std::size_t>(w) * sizeof(ipc), sizeof(ipc));
            const cudaError_t error = cudaIpcOpenMemHandle(&opened_[w], ipc, cudaIpcMemLazyEnablePeerAccess);
            if (error != cudaSuccess) {
                opened_[w] = nullptr;
                return cuda::cuda_failure(error, fmt::format("opening rank {}'s mailbox (cudaIpcOpenMemHandle)", w).c_str());
            }
            slots_[w] = slots_of(opened_[w]);
        }
        const cudaError_t error = cudaDeviceSynchronize();
        if (error != cudaSuccess) return cuda::cuda_failure(error, "connecting the mailboxes");
        connected_ = true;
        return SMX_STATUS_SUCCESS;
    }

    smxStatus_t timed_out_rows(std::int64_t* rows) const override {
        cuda::ScopedDevice device(device_id_);
        SMX_RETURN_IF_ERROR(device.status());
        cuda::FusedControl control{};
        const cudaError_t error = cudaMemcpy(&control, own_, sizeof(control), cudaMemcpyDeviceToHost);
        if (error != cudaSuccess) return cuda::cuda_failure(error, "reading the mailbox's control block");
        *rows = static_cast<std::int64_t>(control.timed_out_rows);
        return SMX_STATUS_SUCCESS;
    }

private:
    static cuda::MailboxSlot* slots_of(void* allocation) {
        return reinterpret_cast<cuda::MailboxSlot*>(static_cast<unsigned char*>(allocation) + cuda::kMailboxSlotsOffset);
    }

    int device_id_;
    int ranks_;
    int rank_;
    std::int64_t max_rows_;
    void* own_ = nullptr;
    void* opened_[SMX_SHARD_PEERS_MAX_RANKS] = {};
    cuda::MailboxSlot* slots_[SMX_SHARD_PEERS_MAX_RANKS] = {};
    bool connected_ = false;
};

class CudaFusedShardSoftmaxPlan final : public FusedShardSoftmaxPlan {
public:
    // launches: the begin kernel, the element-wise fused kernel, and the 16-byte one (kernel nullptr where the
    // layout does not allow it).
    CudaFusedShardSoftmaxPlan(int device_id, const cuda::FusedParams& params, const cuda::Launch (&launches)[3],
                              std::string text)
        : device_id_(device_id), params_(params), launches_{launches[0], launches[1], launches[2]},
          text_(std::move(text)) {}

    const std::string& description() const override { return text_; }

    smxStatus_t run(void* y, const void* x, void* stream) const override {
        cuda::ScopedDevice device(device_id_);
        SMX_RETURN_IF_ERROR(device.status());
        cuda::FusedParams bound = params_;
        bound.x = x;
        bound.y = y;
        // The layout allowed 16-byte packs at planning; the pointers must be 16-byte aligned as well.
        const bool aligned = (reinterpret_cast<std::uintptr_t>(x) | reinterpret_cast<std::uintptr_t>(y)) % 16 == 0;
        const cuda::Launch launches[2] = {launches_[0],
                                          aligned && launches_[2].kernel != nullptr ? launches_[2] : launches_[1]};
        return cuda::launch_all(launches, 2, &bound, static_cast<cudaStream_t>(stream));
    }

private:
    int device_id_;
    cuda::FusedParams params_;
    cuda::Launch launches_[3];
    std::string text_;
};

// The fused kernel's launch: as many CTAs as the device keeps resident, no more than the rows.
smxStatus_t fused_launch(const void* kernel, std::int64_t rows, const DeviceLimits& limits, cuda::Launch* launch) {
    int blocks = 0;
    SMX_RETURN_IF_ERROR(cuda::blocks_per_multiprocessor(kernel, cuda::kFusedThreads, 0, &blocks));
    const unsigned grid = cuda::persistent_grid(std::max<std::int64_t>(rows, 1), blocks, limits.multiprocessor_count);
    *launch = {kernel, dim3(grid), dim3(cuda::kFusedThreads), 0, 0};
    return SMX_STATUS_SUCCESS;
}

// The fewest packs per thread (a power of two up to kFusedMaxPacksPerThread) that hold a row; 0 where none does.
int packs_for(std::int64_t row_len, int pack) {
    for (int packs = 1; packs <= cuda::kFusedMaxPacksPerThread; packs *= 2) {
        if (row_len <= static_cast<std::int64_t>(cuda::kFusedThreads) * packs * pack) return packs;
    }
    return 0;
}

}  // namespace

smxStatus_t make_cuda_peer_mailbox(int device_id, int ranks, int rank, std::int64_t max_rows,
                                   std::unique_ptr<PeerMailbox>* mailbox) {
    auto made = std::make_unique<CudaPeerMailbox>(device_id, ranks, rank, max_rows);
    SMX_RETURN_IF_ERROR(made->allocate());
    *mailbox = std::move(made);
    return SMX_STATUS_SUCCESS;
}

smxStatus_t make_cuda_fused_shard_softmax_plan(const ShardSoftmaxInfo& info, int device_id,
                                               const DeviceLimits& limits, const PeerMailbox& mailbox,
                                               std::unique_ptr<FusedShardSoftmaxPlan>* plan) {
    const auto* peers = dynamic_cast<const CudaPeerMailbox*>(&mailbox);
    if (peers == nullptr || peers->device_id() != device_id) {
        return fail(SMX_STATUS_BAD_PARAM, "peers is not a group on the handle's device {}", device_id);
    }
    const std::int64_t max_len = fused_shard_softmax_max_row_length(info.x_dtype);
    if (info.x_dtype != info.y_dtype || info.row_len > max_len) {
        return fail(SMX_STATUS_NOT_SUPPORTED,
                    "the fused kernel holds rows of at most {} elements of F16, BF16 or F32 into the same dtype; "
                    "this is {} -> {} with rows of {}: run the three steps",
                    max_len, dtype_name(info.x_dtype), dtype_name(info.y_dtype), info.row_len);
    }
    cuda::ScopedDevice device(device_id);
    SMX_RETURN_IF_ERROR(device.status());
    const int pack = 16 / static_cast<int>(dtype_size(info.x_dtype));
    const int packs = packs_for(info.row_len, pack);
    const void* kernel = cuda::fused_softmax_kernel(info.x_dtype, packs, false);
    SMX_RETURN_IF_ERROR(cuda::require_kernel(kernel, info.x_dtype, info.y_dtype, "fused vocab-parallel softmax"));

    cuda::FusedParams params;
    params.space = cuda::row_space(info);
    params.x_strides = cuda::strides_of(info, info.x);
    params.y_strides = cuda::strides_of(info, info.y);
    params.row_len = info.row_len;
    std::copy(peers->slots(), peers->slots() + SMX_SHARD_PEERS_MAX_RANKS, params.mailboxes);
    params.control = peers->control();
    params.max_rows = peers->max_rows();
    params.ranks = peers->ranks();
    params.rank = peers->rank();
    params.log = info.is_log() ? 1 : 0;
    const auto element = static_cast<std::int64_t>(dtype_size(info.x_dtype));
    const bool packed_rows = info.layout == RowLayout::Rows && info.x.axis_stride == 1 && info.y.axis_stride == 1 &&
                             info.row_len % pack == 0 && (info.x.row_stride * element) % 16 == 0 &&
                             (info.y.row_stride * element) % 16 == 0;

    cuda::Launch launches[3] = {{cuda::fused_begin_kernel(), dim3(1), dim3(1), 0, 0}, {}, {}};
    SMX_RETURN_IF_ERROR(fused_launch(kernel, info.rows, limits, &launches[1]));
    if (packed_rows) {
        SMX_RETURN_IF_ERROR(
            fused_launch(cuda::fused_softmax_kernel(info.x_dtype, packs, true), info.rows, limits, &launches[2]));
    }
    const cuda::Launch& main = packed_rows ? launches[2] : launches[1];
    const std::string text = fmt::format("cuda vocab-parallel fused packs={} vector={} grid={} ranks={} rank={}", packs,
                                         packed_rows ? 1 : 0, main.grid.x, params.ranks, params.rank);
    *plan = std::make_unique<CudaFusedShardSoftmaxPlan>(device_id, params, launches, text);
    return SMX_STATUS_SUCCESS;
}

}  // namespace smx
