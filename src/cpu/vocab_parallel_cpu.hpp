// vocab_parallel_cpu.hpp - the CPU backend of the vocabulary-parallel operators: the float64 reference, threaded
// over rows.
#pragma once

#include <memory>

#include "ops/vocab_parallel/info.hpp"
#include "ops/vocab_parallel/plan.hpp"

namespace smx {

// Build the CPU plans for validated problems; a call uses at most `max_threads` threads.
smxStatus_t make_cpu_shard_statistics_plan(const ShardStatisticsInfo& info, int max_threads,
                                           std::unique_ptr<ShardStatisticsPlan>* plan);
smxStatus_t make_cpu_shard_softmax_plan(const ShardSoftmaxInfo& info, int max_threads,
                                        std::unique_ptr<ShardSoftmaxPlan>* plan);
smxStatus_t make_cpu_shard_logsumexp_plan(const ShardLogsumexpInfo& info, int max_threads,
                                          std::unique_ptr<ShardLogsumexpPlan>* plan);
smxStatus_t make_cpu_shard_cross_entropy_plan(const ShardCrossEntropyInfo& info, int max_threads,
                                              std::unique_ptr<ShardCrossEntropyPlan>* plan);

}  // namespace smx
