// softmax_backward_cpu.hpp - the CPU backend of the softmax backward: the reference implementation (double
// accumulation), threaded over rows.
#pragma once

#include <memory>

#include "ops/softmax_backward/info.hpp"
#include "ops/softmax_backward/plan.hpp"

namespace smx {

// Builds the CPU plan for a validated backward problem; run() will use at most `max_threads` threads.
smxStatus_t make_cpu_softmax_backward_plan(const SoftmaxBackwardInfo& info, int max_threads,
                                           std::unique_ptr<SoftmaxBackwardPlan>* plan);

}  // namespace smx
