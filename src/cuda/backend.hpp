// backend.hpp - the CUDA backend's face towards the operators. Plain C++: no CUDA types cross it, so the
// core compiles without the CUDA toolkit. Only built when SMX_WITH_CUDA is on.
#pragma once

#include <memory>

#include "core/device_limits.hpp"
#include "cuda/plan/preferences.hpp"
#include "ops/logprobs/info.hpp"
#include "ops/logprobs/plan.hpp"
#include "ops/softmax/info.hpp"
#include "ops/softmax/plan.hpp"
#include "ops/softmax_backward/info.hpp"
#include "ops/softmax_backward/plan.hpp"
#include "ops/vocab_parallel/info.hpp"
#include "ops/vocab_parallel/peers.hpp"
#include "ops/vocab_parallel/plan.hpp"

namespace smx {

// Checks that CUDA device `device_id` exists and reads its limits once.
// Fails with SMX_STATUS_NOT_SUPPORTED_DEVICE_ABSENT (no driver or no device) or
// SMX_STATUS_BAD_PARAM_DEVICE (id out of range).
smxStatus_t cuda_query_device(int device_id, DeviceLimits* limits);

// Chooses the kernel family and its launch shape for a validated problem on that device.
smxStatus_t make_cuda_softmax_plan(const SoftmaxInfo& info, int device_id, const DeviceLimits& limits,
                                   const cuda::PlanPreferences& preferences, std::unique_ptr<SoftmaxPlan>* plan);

// Chooses the backward kernels for a validated backward problem on that device (src/cuda/backward/).
smxStatus_t make_cuda_softmax_backward_plan(const SoftmaxBackwardInfo& info, int device_id, const DeviceLimits& limits,
                                            const cuda::PlanPreferences& preferences,
                                            std::unique_ptr<SoftmaxBackwardPlan>* plan);

// The log-probability operators' plans (src/cuda/logprobs/): the same contract as make_cuda_softmax_plan, with
// run() bound by ops/logprobs/plan.hpp.
smxStatus_t make_cuda_logsumexp_plan(const LogsumexpInfo& info, int device_id, const DeviceLimits& limits,
                                     const cuda::PlanPreferences& preferences, std::unique_ptr<LogsumexpPlan>* plan);
smxStatus_t make_cuda_log_softmax_gather_plan(const LogSoftmaxGatherInfo& info, int device_id,
                                              const DeviceLimits& limits, const cuda::PlanPreferences& preferences,
                                              std::unique_ptr<LogSoftmaxGatherPlan>* plan);
smxStatus_t make_cuda_cross_entropy_plan(const CrossEntropyInfo& info, int device_id, const DeviceLimits& limits,
                                         const cuda::PlanPreferences& preferences,
                                         std::unique_ptr<CrossEntropyPlan>* plan);

// The vocabulary-parallel operators' plans (src/cuda/vocab_parallel/): the same contract, with run() bound by
// ops/vocab_parallel/plan.hpp.
smxStatus_t make_cuda_shard_statistics_plan(const ShardStatisticsInfo& info, int device_id, const DeviceLimits& limits,
                                            const cuda::PlanPreferences& preferences,
                                            std::unique_ptr<ShardStatisticsPlan>* plan);
smxStatus_t make_cuda_shard_softmax_plan(const ShardSoftmaxInfo& info, int device_id, const DeviceLimits& limits,
                                         const cuda::PlanPreferences& preferences,
                                         std::unique_ptr<ShardSoftmaxPlan>* plan);
smxStatus_t make_cuda_shard_logsumexp_plan(const ShardLogsumexpInfo& info, int device_id, const DeviceLimits& limits,
                                           const cuda::PlanPreferences& preferences,
                                           std::unique_ptr<ShardLogsumexpPlan>* plan);
smxStatus_t make_cuda_shard_cross_entropy_plan(const ShardCrossEntropyInfo& info, int device_id,
                                               const DeviceLimits& limits, const cuda::PlanPreferences& preferences,
                                               std::unique_ptr<ShardCrossEntropyPlan>* plan);

// The one-read vocabulary-parallel softmax (src/cuda/vocab_parallel/peers.cpp): a rank's mailbox on device_id
// (allocated, cleared, the device synchronized), and the fused kernel's plan on a connected one. The plan fails
// with SMX_STATUS_NOT_SUPPORTED where the kernel cannot hold the rows (ops/vocab_parallel/peers.hpp's
// fused_shard_softmax_max_row_length).
smxStatus_t make_cuda_peer_mailbox(int device_id, int ranks, int rank, std::int64_t max_rows,
                                   std::unique_ptr<PeerMailbox>* mailbox);
smxStatus_t make_cuda_fused_shard_softmax_plan(const ShardSoftmaxInfo& info, int device_id,
                                               const DeviceLimits& limits, const PeerMailbox& mailbox,
                                               std::unique_ptr<FusedShardSoftmaxPlan>* plan);

// Call-time check that each operand of `operands` whose pointer is not NULL is memory the device `device_id`
// can address (device or managed memory of that device, or mapped host memory), naming it by its
// OperandPointer name; refuses plain host pointers and other devices' memory.
smxStatus_t cuda_check_operand_pointers(int device_id, const OperandPointer* operands, int count);

}  // namespace smx
