// logprobs_cpu.hpp - the CPU backend of the log-probability operators: the float64 reference, threaded over rows.
#pragma once

#include <memory>

#include "ops/logprobs/info.hpp"
#include "ops/logprobs/plan.hpp"

namespace smx {

// Build the CPU plans for validated problems; a call uses at most `max_threads` threads.
smxStatus_t make_cpu_logsumexp_plan(const LogsumexpInfo& info, int max_threads, std::unique_ptr<LogsumexpPlan>* plan);
smxStatus_t make_cpu_log_softmax_gather_plan(const LogSoftmaxGatherInfo& info, int max_threads,
                                             std::unique_ptr<LogSoftmaxGatherPlan>* plan);
smxStatus_t make_cpu_cross_entropy_plan(const CrossEntropyInfo& info, int max_threads,
                                        std::unique_ptr<CrossEntropyPlan>* plan);

}  // namespace smx
