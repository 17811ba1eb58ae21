/* smx_nccl.h - vocabulary-parallel softmax, log-softmax, logsumexp and cross-entropy over an NCCL communicator:
 * libsmx_nccl, a small library beside libsmx (which itself never depends on NCCL), built where NCCL is found.
 *
 * Each of the communicator's ranks holds a shard of every row along the axis (its slice of the vocabulary; rank
 * r's slice comes after rank r - 1's) on its own GPU. One call runs smx.h's three vocabulary-parallel steps:
 * this rank's statistics (smxShardStatistics), ONE ncclAllGather of them (a few floats per row and rank), and
 * this rank's part of the result (smxShardSoftmax, smxShardLogsumexp or smxShardCrossEntropy). Usage, on every
 * rank, with the same shapes but for the axis:
 *   smxNcclCreateSoftmaxDescriptor(handle, &desc, comm, SMX_SOFTMAX, -1, yShardDesc, xShardDesc);
 *   smxNcclGetWorkspaceSize(desc, &bytes);                   // the statistics' buffers and the steps' workspaces
 *   smxNcclSoftmax(desc, workspace, bytes, y, x, stream);    // enqueues; no allocation, no synchronization
 * Every rank derives the whole-row statistics (logsumexp, the loss) from the same gathered values with the same
 * formula, so they are the same bits on every rank. Calls enqueue NCCL work: as for any NCCL collective, every
 * rank must make the same calls in the same order, and a call may be captured in a CUDA graph where NCCL allows.
 * docs/distributed.md says how it works; docs/api.md gives the full contract. */
#ifndef SMX_NCCL_H
#define SMX_NCCL_H

#include "smx.h"

SMX_EXTERN_C_BEGIN

/* NCCL's communicator type (ncclComm_t is `struct ncclComm*`): named here so this header needs neither nccl.h
 * nor the CUDA headers. */
struct ncclComm;

/** A vocabulary-parallel problem over one communicator: its kind (softmax, logsumexp or cross-entropy), the smx
 *  descriptors of its steps and the layout of its workspace. Read-only after creation. */
typedef struct smxNcclDescriptor* smxNcclDescriptor_t;

/** Creates a descriptor for this rank's shard of softmax or log-softmax of the whole rows (smxShardSoftmax's
 *  formulas and special values). handle: a CUDA handle on the device comm runs on. comm: an initialized
 *  communicator (ncclComm_t); it must outlive the descriptor. mode, axis, yDesc, xDesc: as for
 *  smxCreateSoftmaxDescriptor, describing this rank's shard (its axis may be of size 0).
 *  Fails as smxCreateShardSoftmaxDescriptor, with SMX_STATUS_BAD_PARAM_NULL_POINTER (comm NULL),
 *  SMX_STATUS_BAD_PARAM_DEVICE (a CPU handle), SMX_STATUS_EXECUTION_FAILED (an NCCL query failed).
 *  smxNcclGetLastErrorMessage says why. */
SMX_API smxStatus_t smxNcclCreateSoftmaxDescriptor(smxHandle_t handle, smxNcclDescriptor_t* desc, struct ncclComm* comm,
                                                   smxSoftmaxMode_t mode, int axis, smxTensorDescriptor_t yDesc,
                                                   smxTensorDescriptor_t xDesc);

/** Creates a descriptor for logsumexp of the whole rows (out: the shard's shape without the axis or with it of
 *  size 1, F32, F64 for F64 x; the same bits on every rank). Fails as smxNcclCreateSoftmaxDescriptor. */
SMX_API smxStatus_t smxNcclCreateLogsumexpDescriptor(smxHandle_t handle, smxNcclDescriptor_t* desc,
                                                     struct ncclComm* comm, int axis, smxTensorDescriptor_t outDesc,
                                                     smxTensorDescriptor_t xDesc);

/** Creates a descriptor for cross-entropy of the whole rows: the loss (and lse) the same bits on every rank, and
 *  this rank's dlogits. Arguments as for smxCreateShardCrossEntropyDescriptor (logitsDesc this rank's shard,
 *  holding classes [vocabStart, vocabStart + n); targets the same global class indices on every rank), less the
 *  statistics, which the descriptor keeps in its workspace. Fails as smxCreateShardCrossEntropyDescriptor and
 *  smxNcclCreateSoftmaxDescriptor. */
SMX_API smxStatus_t smxNcclCreateCrossEntropyDescriptor(smxHandle_t handle, smxNcclDescriptor_t* desc,
                                                        struct ncclComm* comm, int axis,
                                                        const smxCrossEntropyOptions_t* options, int64_t vocabStart,
                                                        smxTensorDescriptor_t lossDesc, smxTensorDescriptor_t lseDesc,
                                                        smxTensorDescriptor_t dlogitsDesc,
                                                        smxTensorDescriptor_t logitsDesc,
                                                        smxTensorDescriptor_t targetDesc);

/** The device workspace, in bytes, a call with this descriptor needs: this rank's statistics, every rank's, and
 *  the steps' own workspaces. 256-byte aligned (cudaMalloc's alignment). */
SMX_API smxStatus_t smxNcclGetWorkspaceSize(smxNcclDescriptor_t desc, size_t* workspaceBytes);

/** Runs the softmax or log-softmax (a descriptor of smxNcclCreateSoftmaxDescriptor) on `stream` (a cudaStream_t):
 *  statistics, ncclAllGather on comm, normalize. Pointers as for smxShardSoftmax. Fails with
 *  SMX_STATUS_BAD_PARAM_OBJECT (another kind of descriptor), SMX_STATUS_BAD_PARAM_WORKSPACE,
 *  SMX_STATUS_BAD_PARAM_ALIGNMENT (a workspace not 256-byte aligned), what the steps fail with, and
 *  SMX_STATUS_EXECUTION_FAILED (ncclAllGather failed; NCCL's text in smxNcclGetLastErrorMessage). */
SMX_API smxStatus_t smxNcclSoftmax(smxNcclDescriptor_t desc, void* workspace, size_t workspaceBytes, void* y,
                                   const void* x, void* stream);

/** Runs the logsumexp (a descriptor of smxNcclCreateLogsumexpDescriptor); fails as smxNcclSoftmax. */
SMX_API smxStatus_t smxNcclLogsumexp(smxNcclDescriptor_t desc, void* workspace, size_t workspaceBytes, void* out,
                                     const void* x, void* stream);

/** Runs the cross-entropy (a descriptor of smxNcclCreateCrossEntropyDescriptor); lse and dlogits are ignored
 *  where the descriptor has none. Fails as smxNcclSoftmax. */
SMX_API smxStatus_t smxNcclCrossEntropy(smxNcclDescriptor_t desc, void* workspace, size_t workspaceBytes, void* loss,
                                        void* lse, void* dlogits, const void* logits, const void* target,
                                        void* stream);

/** Destroys a descriptor (not the communicator). NULL is a no-op. */
SMX_API smxStatus_t smxNcclDestroyDescriptor(smxNcclDescriptor_t desc);

/** Sets up this rank's side of the one-read softmax's group over `comm` (smx.h, "Vocabulary-parallel in one
 *  read"): smxCreateShardPeers with comm's rank count and this rank's number, one ncclAllGather of the mailbox
 *  handles, smxConnectShardPeers. A setup call, collective over comm: it allocates and synchronizes the device.
 *  Fails as smxCreateShardPeers and smxConnectShardPeers (SMX_STATUS_EXECUTION_FAILED where the ranks are not
 *  GPUs of one node with peer access: use smxNcclSoftmax then), and with SMX_STATUS_EXECUTION_FAILED where NCCL
 *  or CUDA failed. */
SMX_API smxStatus_t smxNcclCreateShardPeers(smxHandle_t handle, struct ncclComm* comm, int64_t maxRows,
                                            smxShardPeers_t* peers);

/** Why the calling thread's last failed smxNccl* call failed: libsmx's own message where a step failed, NCCL's
 *  text where NCCL did. Never NULL; valid until the thread's next smxNccl* call. */
SMX_API const char* smxNcclGetLastErrorMessage(void);

SMX_EXTERN_C_END

#endif /* SMX_NCCL_H */
