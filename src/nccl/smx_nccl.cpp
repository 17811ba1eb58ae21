// smx_nccl.cpp - libsmx_nccl: the vocabulary-parallel operators over an NCCL communicator (include/smx/smx_nccl.h),
// written on libsmx's public C API and NCCL alone: a descriptor holds the smx descriptors of the three steps and
// the workspace layout; a call runs statistics -> ncclAllGather -> step 3 on the caller's stream.
//
// Workspace layout (each region 256-byte aligned):
//   [local)     this rank's statistics: rows * width values, the statistics axis outermost (one contiguous block)
//   [gathered)  every rank's blocks, rank after rank: what ncclAllGather writes, read as the gathered tensor
//   [steps)     the larger of the two steps' own workspaces
#include <nccl.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "smx/smx_nccl.h"

namespace {

constexpr std::uint64_t kLiveTag = 0x736d786e63636c31ull;  // "smxnccl1"
constexpr std::uint64_t kDestroyedTag = 0xdead0b1ec7dead01ull;
constexpr std::size_t kRegionAlignment = 256;

thread_local std::string last_error;

smxStatus_t fail(smxStatus_t status, std::string message) {
    last_error = std::move(message);
    return status;
}

// A libsmx failure: its own message becomes this library's.
smxStatus_t smx_failed(smxStatus_t status, const char* step) {
    return fail(status, std::string(step) + ": " + smxGetLastErrorMessage());
}

// An NCCL failure, with NCCL's own last message.
smxStatus_t nccl_failed(ncclResult_t result, ncclComm_t comm, const char* what) {
    return fail(SMX_STATUS_EXECUTION_FAILED,
                std::string(what) + " failed: " + ncclGetErrorString(result) + " (" + ncclGetLastError(comm) + ")");
}

std::size_t round_up(std::size_t bytes) { return (bytes + kRegionAlignment - 1) / kRegionAlignment * kRegionAlignment; }

enum class Kind { Softmax, Logsumexp, CrossEntropy };

// A tensor descriptor destroyed with its owner.
struct OwnedTensor {
    smxTensorDescriptor_t desc = nullptr;
    ~OwnedTensor() { smxDestroyTensorDescriptor(desc); }
};

}  // namespace

struct smxNcclDescriptor {
    std::uint64_t tag = kLiveTag;
    Kind kind = Kind::Softmax;
    ncclComm_t comm = nullptr;
    int ranks = 1;
    ncclDataType_t nccl_dtype = ncclFloat32;
    std::size_t block_count = 0;  // values of one rank's statistics block
    std::size_t gathered_offset = 0;
    std::size_t steps_offset = 0;
    std::size_t steps_bytes = 0;
    smxShardStatisticsDescriptor_t statistics = nullptr;
    smxShardSoftmaxDescriptor_t softmax = nullptr;
    smxShardLogsumexpDescriptor_t logsumexp = nullptr;
    smxShardCrossEntropyDescriptor_t cross_entropy = nullptr;

    ~smxNcclDescriptor() {
        smxDestroyShardStatisticsDescriptor(statistics);
        smxDestroyShardSoftmaxDescriptor(softmax);
        smxDestroyShardLogsumexpDescriptor(logsumexp);
        smxDestroyShardCrossEntropyDescriptor(cross_entropy);
    }
    std::size_t workspace_bytes() const { return steps_offset + steps_bytes; }
};

namespace {

// What the descriptors are built from: the shard's shape, the statistics' dtype and layout.
struct Shard {
    int ndim = 0;
    int axis = 0;
    std::int64_t shape[SMX_MAX_DIMS] = {};
    smxDataType_t stats_dtype = SMX_DTYPE_F32;
    std::int64_t rows = 1;
};

// Reads x's descriptor; checks the handle is a CUDA one and the communicator answers.
smxStatus_t start(smxHandle_t handle, smxNcclDescriptor_t* out, ncclComm_t comm, int axis, smxTensorDescriptor_t x,
                  Kind kind, std::unique_ptr<smxNcclDescriptor>* desc, Shard* shard) {
    if (out == nullptr) return fail(SMX_STATUS_BAD_PARAM_NULL_POINTER, "desc (the output pointer) is NULL");
    *out = nullptr;
    if (comm == nullptr) return fail(SMX_STATUS_BAD_PARAM_NULL_POINTER, "comm is NULL");
    smxDeviceType_t device = SMX_DEVICE_CPU;
    smxStatus_t status = smxGetHandleDevice(handle, &device, nullptr);
    if (status != SMX_STATUS_SUCCESS) return smx_failed(status, "handle");
    if (device != SMX_DEVICE_CUDA) return fail(SMX_STATUS_BAD_PARAM_DEVICE, "the handle is not a CUDA handle");
    smxDataType_t dtype = SMX_DTYPE_F32;
    status = smxGetTensorDescriptor(x, &dtype, &shard->ndim, shard->shape, nullptr);
    if (status != SMX_STATUS_SUCCESS) return smx_failed(status, "xDesc");
    // An axis out of range is the step descriptors' to refuse; here it only has to index the shape safely.
    shard->axis = axis < 0 ? axis + shard->ndim : axis;
    if (shard->axis < 0 || shard->axis >= shard->ndim) shard->axis = 0;
    shard->stats_dtype = dtype == SMX_DTYPE_F64 ? SMX_DTYPE_F64 : SMX_DTYPE_F32;
    for (int d = 0; d < shard->ndim; ++d) {
        if (d != shard->axis) shard->rows *= shard->shape[d];
    }
    auto made = std::unique_ptr<smxNcclDescriptor>(new (std::nothrow) smxNcclDescriptor);
    if (!made) return fail(SMX_STATUS_ALLOC_FAILED, "out of host memory");
    made->kind = kind;
    made->comm = comm;
    const ncclResult_t counted = ncclCommCount(comm, &made->ranks);
    if (counted != ncclSuccess) {
        return fail(SMX_STATUS_EXECUTION_FAILED, std::string("ncclCommCount failed: ") + ncclGetErrorString(counted));
    }
    made->nccl_dtype = shard->stats_dtype == SMX_DTYPE_F64 ? ncclFloat64 : ncclFloat32;
    *desc = std::move(made);
    return SMX_STATUS_SUCCESS;
}

// A statistics tensor of the shard's shape with the axis of size `values`, the axis outermost in memory (the rows
// row-major beneath it), so each rank's block of `width` is contiguous.
smxStatus_t statistics_tensor(const Shard& shard, std::int64_t values, OwnedTensor* tensor) {
    std::int64_t shape[SMX_MAX_DIMS];
    std::int64_t strides[SMX_MAX_DIMS];
    std::int64_t running = 1;
    for (int d = shard.ndim - 1; d >= 0; --d) {
        shape[d] = d == shard.axis ? values : shard.shape[d];
        if (d == shard.axis) continue;
        strides[d] = running;
        running *= std::max<std::int64_t>(shard.shape[d], 1);
    }
    strides[shard.axis] = running;
    const smxStatus_t status = smxCreateTensorDescriptor(&tensor->desc, shard.stats_dtype, shard.ndim, shape, strides);
    return status == SMX_STATUS_SUCCESS ? status : smx_failed(status, "the statistics' tensor");
}

template <class Body>
smxStatus_t guarded(Body&& body) noexcept {
    try {
        return body();
    } catch (const std::bad_alloc&) {
        return fail(SMX_STATUS_ALLOC_FAILED, "out of host memory");
    } catch (...) {
        return fail(SMX_STATUS_INTERNAL_ERROR, "internal error: an exception in libsmx_nccl");
    }
}

// Creates a descriptor of `kind` for the shard x (with target and vocab_start for cross-entropy):
// make_step3(desc, gathered, &bytes) creates step 3's descriptor on the gathered statistics' tensor and reads its
// workspace size; then the statistics step and the workspace layout.
template <class MakeStep3>
smxStatus_t create(smxHandle_t handle, smxNcclDescriptor_t* out, ncclComm_t comm, int axis, smxTensorDescriptor_t x,
                   smxTensorDescriptor_t target, std::int64_t vocab_start, Kind kind, const MakeStep3& make_step3) {
    return guarded([&] {
        std::unique_ptr<smxNcclDescriptor> desc;
        Shard shard;
        smxStatus_t status = start(handle, out, comm, axis, x, kind, &desc, &shard);
        if (status != SMX_STATUS_SUCCESS) return status;
        const std::int64_t width =
            kind == Kind::CrossEntropy ? SMX_SHARD_CROSS_ENTROPY_STATISTICS : SMX_SHARD_SOFTMAX_STATISTICS;
        OwnedTensor local, gathered;
        if ((status = statistics_tensor(shard, width, &local)) != SMX_STATUS_SUCCESS) return status;
        if ((status = statistics_tensor(shard, width * desc->ranks, &gathered)) != SMX_STATUS_SUCCESS) return status;
        std::size_t step3 = 0;
        status = make_step3(desc.get(), gathered.desc, &step3);
        if (status != SMX_STATUS_SUCCESS) return smx_failed(status, "step 3 (normalize, logsumexp or loss)");
        status = smxCreateShardStatisticsDescriptor(handle, &desc->statistics, shard.axis, vocab_start, local.desc, x,
                                                    target);
        std::size_t step1 = 0;
        if (status == SMX_STATUS_SUCCESS) status = smxGetShardStatisticsWorkspaceSize(desc->statistics, &step1);
        if (status != SMX_STATUS_SUCCESS) return smx_failed(status, "the statistics step");
        const std::size_t value_bytes = shard.stats_dtype == SMX_DTYPE_F64 ? 8 : 4;
        desc->block_count = static_cast<std::size_t>(shard.rows * width);
        desc->gathered_offset = round_up(desc->block_count * value_bytes);
        desc->steps_offset = desc->gathered_offset + round_up(desc->block_count * value_bytes * desc->ranks);
        desc->steps_bytes = std::max(step1, step3);
        *out = desc.release();
        return SMX_STATUS_SUCCESS;
    });
}

smxStatus_t check_call(smxNcclDescriptor_t desc, Kind kind, void* workspace, std::size_t workspace_bytes) {
    if (desc == nullptr) return fail(SMX_STATUS_BAD_PARAM_NULL_POINTER, "desc is NULL");
    if (desc->tag != kLiveTag || desc->kind != kind) {
        return fail(SMX_STATUS_BAD_PARAM_OBJECT, "desc is not a live smxNcclDescriptor_t of this operator");
    }
    if (workspace_bytes < desc->workspace_bytes() || (workspace == nullptr && desc->workspace_bytes() > 0)) {
        return fail(SMX_STATUS_BAD_PARAM_WORKSPACE, "workspace of " + std::to_string(workspace_bytes) +
                                                        " bytes is smaller than the " +
                                                        std::to_string(desc->workspace_bytes()) + " this call needs");
    }
    if (reinterpret_cast<std::uintptr_t>(workspace) % kRegionAlignment != 0) {
        return fail(SMX_STATUS_BAD_PARAM_ALIGNMENT, "the workspace is not 256-byte aligned");
    }
    return SMX_STATUS_SUCCESS;
}

// Steps 1 and 2: this rank's statistics into the local block, then every rank's into the gathered one. A problem
// without rows gathers nothing (every rank has the same rows, so every rank skips it alike).
smxStatus_t gather_statistics(smxNcclDescriptor_t desc, unsigned char* workspace, const void* x, const void* target,
                              void* stream) {
    if (desc->block_count == 0) return SMX_STATUS_SUCCESS;
    void* steps = workspace + desc->steps_offset;
    const smxStatus_t status =
        smxShardStatistics(desc->statistics, steps, desc->steps_bytes, workspace, x, target, stream);
    if (status != SMX_STATUS_SUCCESS) return smx_failed(status, "the statistics step");
    const ncclResult_t gathered = ncclAllGather(workspace, workspace + desc->gathered_offset, desc->block_count,
                                                desc->nccl_dtype, desc->comm, static_cast<cudaStream_t>(stream));
    if (gathered != ncclSuccess) return nccl_failed(gathered, desc->comm, "ncclAllGather");
    return SMX_STATUS_SUCCESS;
}

smxStatus_t cuda_failed(cudaError_t error, const char* what) {
    return fail(SMX_STATUS_EXECUTION_FAILED, std::string(what) + " failed: " + cudaGetErrorString(error));
}

// Every rank's `bytes` bytes at host[rank * bytes] to every rank, through a device buffer and one ncclAllGather
// on a stream of its own; synchronizes (setup only).
smxStatus_t all_gather_bytes(ncclComm_t comm, unsigned char* host, std::size_t bytes, int rank, int ranks) {
    const std::size_t total = bytes * static_cast<std::size_t>(ranks);
    void* device = nullptr;
    cudaStream_t stream = nullptr;
    cudaError_t error = cudaMalloc(&device, total);
    if (error != cudaSuccess) return cuda_failed(error, "cudaMalloc of the handles' buffer");
    const std::unique_ptr<void, cudaError_t (*)(void*)> freed(device, cudaFree);
    if ((error = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking)) != cudaSuccess) {
        return cuda_failed(error, "cudaStreamCreate");
    }
    const std::unique_ptr<CUstream_st, cudaError_t (*)(cudaStream_t)> destroyed(stream, cudaStreamDestroy);
    auto* mine = static_cast<unsigned char*>(device) + static_cast<std::size_t>(rank) * bytes;
    if ((error = cudaMemcpy(mine, host + static_cast<std::size_t>(rank) * bytes, bytes, cudaMemcpyHostToDevice)) !=
        cudaSuccess) {
        return cuda_failed(error, "cudaMemcpy of this rank's handle");
    }
    const ncclResult_t result = ncclAllGather(mine, device, bytes, ncclUint8, comm, stream);
    if (result != ncclSuccess) return nccl_failed(result, comm, "ncclAllGather of the mailbox handles");
    if ((error = cudaStreamSynchronize(stream)) != cudaSuccess) return cuda_failed(error, "the handles' all-gather");
    if ((error = cudaMemcpy(host, device, total, cudaMemcpyDeviceToHost)) != cudaSuccess) {
        return cuda_failed(error, "cudaMemcpy of the handles");
    }
    return SMX_STATUS_SUCCESS;
}

}  // namespace

extern "C" {

SMX_API smxStatus_t smxNcclCreateSoftmaxDescriptor(smxHandle_t handle, smxNcclDescriptor_t* desc, struct ncclComm* comm,
                                                   smxSoftmaxMode_t mode, int axis, smxTensorDescriptor_t yDesc,
                                                   smxTensorDescriptor_t xDesc) {
    return create(handle, desc, comm, axis, xDesc, nullptr, 0, Kind::Softmax,
                  [&](smxNcclDescriptor* made, smxTensorDescriptor_t gathered, std::size_t* bytes) {
                      smxStatus_t status =
                          smxCreateShardSoftmaxDescriptor(handle, &made->softmax, mode, axis, yDesc, xDesc, gathered);
                      if (status == SMX_STATUS_SUCCESS) status = smxGetShardSoftmaxWorkspaceSize(made->softmax, bytes);
                      return status;
                  });
}

SMX_API smxStatus_t smxNcclCreateLogsumexpDescriptor(smxHandle_t handle, smxNcclDescriptor_t* desc,
                                                     struct ncclComm* comm, int axis, smxTensorDescriptor_t outDesc,
                                                     smxTensorDescriptor_t xDesc) {
    return create(handle, desc, comm, axis, xDesc, nullptr, 0, Kind::Logsumexp,
                  [&](smxNcclDescriptor* made, smxTensorDescriptor_t gathered, std::size_t* bytes) {
                      smxStatus_t status =
                          smxCreateShardLogsumexpDescriptor(handle, &made->logsumexp, axis, outDesc, gathered);
                      if (status == SMX_STATUS_SUCCESS) {
                          status = smxGetShardLogsumexpWorkspaceSize(made->logsumexp, bytes);
                      }
                      return status;
                  });
}

SMX_API smxStatus_t smxNcclCreateCrossEntropyDescriptor(smxHandle_t handle, smxNcclDescriptor_t* desc,
                                                        struct ncclComm* comm, int axis,
                                                        const smxCrossEntropyOptions_t* options, int64_t vocabStart,
                                                        smxTensorDescriptor_t lossDesc, smxTensorDescriptor_t lseDesc,
                                                        smxTensorDescriptor_t dlogitsDesc,
                                                        smxTensorDescriptor_t logitsDesc,
                                                        smxTensorDescriptor_t targetDesc) {
    return create(handle, desc, comm, axis, logitsDesc, targetDesc, vocabStart, Kind::CrossEntropy,
                  [&](smxNcclDescriptor* made, smxTensorDescriptor_t gathered, std::size_t* bytes) {
                      smxStatus_t status = smxCreateShardCrossEntropyDescriptor(
                          handle, &made->cross_entropy, axis, options, vocabStart, lossDesc, lseDesc, dlogitsDesc,
                          logitsDesc, targetDesc, gathered);
                      if (status == SMX_STATUS_SUCCESS) {
                          status = smxGetShardCrossEntropyWorkspaceSize(made->cross_entropy, bytes);
                      }
                      return status;
                  });
}

SMX_API smxStatus_t smxNcclGetWorkspaceSize(smxNcclDescriptor_t desc, size_t* workspaceBytes) {
    if (desc == nullptr || workspaceBytes == nullptr) {
        return fail(SMX_STATUS_BAD_PARAM_NULL_POINTER, "desc or workspaceBytes is NULL");
    }
    if (desc->tag != kLiveTag) return fail(SMX_STATUS_BAD_PARAM_OBJECT, "desc is not a live smxNcclDescriptor_t");
    *workspaceBytes = desc->workspace_bytes();
    return SMX_STATUS_SUCCESS;
}

SMX_API smxStatus_t smxNcclSoftmax(smxNcclDescriptor_t desc, void* workspace, size_t workspaceBytes, void* y,
                                   const void* x, void* stream) {
    return guarded([&] {
        smxStatus_t status = check_call(desc, Kind::Softmax, workspace, workspaceBytes);
        if (status != SMX_STATUS_SUCCESS) return status;
        auto* base = static_cast<unsigned char*>(workspace);
        if ((status = gather_statistics(desc, base, x, nullptr, stream)) != SMX_STATUS_SUCCESS) return status;
        status = smxShardSoftmax(desc->softmax, base + desc->steps_offset, desc->steps_bytes, y, x,
                                 base + desc->gathered_offset, stream);
        return status == SMX_STATUS_SUCCESS ? status : smx_failed(status, "the softmax step");
    });
}

SMX_API smxStatus_t smxNcclLogsumexp(smxNcclDescriptor_t desc, void* workspace, size_t workspaceBytes, void* out,
                                     const void* x, void* stream) {
    return guarded([&] {
        smxStatus_t status = check_call(desc, Kind::Logsumexp, workspace, workspaceBytes);
        if (status != SMX_STATUS_SUCCESS) return status;
        auto* base = static_cast<unsigned char*>(workspace);
        if ((status = gather_statistics(desc, base, x, nullptr, stream)) != SMX_STATUS_SUCCESS) return status;
        status = smxShardLogsumexp(desc->logsumexp, base + desc->steps_offset, desc->steps_bytes, out,
                                   base + desc->gathered_offset, stream);
        return status == SMX_STATUS_SUCCESS ? status : smx_failed(status, "the logsumexp step");
    });
}

SMX_API smxStatus_t smxNcclCrossEntropy(smxNcclDescriptor_t desc, void* workspace, size_t workspaceBytes, void* loss,
                                        void* lse, void* dlogits, const void* logits, const void* target,
                                        void* stream) {
    return guarded([&] {
        smxStatus_t status = check_call(desc, Kind::CrossEntropy, workspace, workspaceBytes);
        if (status != SMX_STATUS_SUCCESS) return status;
        auto* base = static_cast<unsigned char*>(workspace);
        if ((status = gather_statistics(desc, base, logits, target, stream)) != SMX_STATUS_SUCCESS) return status;
        status = smxShardCrossEntropy(desc->cross_entropy, base + desc->steps_offset, desc->steps_bytes, loss, lse,
                                      dlogits, logits, target, base + desc->gathered_offset, stream);
        return status == SMX_STATUS_SUCCESS ? status : smx_failed(status, "the cross-entropy step");
    });
}

SMX_API smxStatus_t smxNcclDestroyDescriptor(smxNcclDescriptor_t desc) {
    if (desc == nullptr) return SMX_STATUS_SUCCESS;
    if (desc->tag != kLiveTag) return fail(SMX_STATUS_BAD_PARAM_OBJECT, "desc is not a live smxNcclDescriptor_t");
    *static_cast<volatile std::uint64_t*>(&desc->tag) = kDestroyedTag;
    delete desc;
    return SMX_STATUS_SUCCESS;
}

SMX_API smxStatus_t smxNcclCreateShardPeers(smxHandle_t handle, struct ncclComm* comm, int64_t maxRows,
                                            smxShardPeers_t* peers) {
    return guarded([&] {
        if (peers == nullptr) return fail(SMX_STATUS_BAD_PARAM_NULL_POINTER, "peers (the output pointer) is NULL");
        *peers = nullptr;
        if (comm == nullptr) return fail(SMX_STATUS_BAD_PARAM_NULL_POINTER, "comm is NULL");
        int ranks = 0, rank = 0;
        ncclResult_t result = ncclCommCount(comm, &ranks);
        if (result == ncclSuccess) result = ncclCommUserRank(comm, &rank);
        if (result != ncclSuccess) return nccl_failed(result, comm, "ncclCommCount/ncclCommUserRank");
        smxShardPeers_t made = nullptr;
        smxStatus_t status = smxCreateShardPeers(handle, &made, ranks, rank, maxRows);
        if (status != SMX_STATUS_SUCCESS) return smx_failed(status, "smxCreateShardPeers");
        std::unique_ptr<smxShardPeers, decltype(&smxDestroyShardPeers)> owned(made, smxDestroyShardPeers);
        std::vector<unsigned char> handles(static_cast<std::size_t>(ranks) * SMX_SHARD_PEERS_HANDLE_BYTES);
        status = smxGetShardPeersHandle(made, handles.data() + static_cast<std::size_t>(rank) * SMX_SHARD_PEERS_HANDLE_BYTES);
        if (status != SMX_STATUS_SUCCESS) return smx_failed(status, "smxGetShardPeersHandle");
        if ((status = all_gather_bytes(comm, handles.data(), SMX_SHARD_PEERS_HANDLE_BYTES, rank, ranks)) !=
            SMX_STATUS_SUCCESS) {
            return status;
        }
        status = smxConnectShardPeers(made, handles.data());
        if (status != SMX_STATUS_SUCCESS) return smx_failed(status, "smxConnectShardPeers");
        *peers = owned.release();
        return SMX_STATUS_SUCCESS;
    });
}

SMX_API const char* smxNcclGetLastErrorMessage(void) { return last_error.c_str(); }

}  // extern "C"
