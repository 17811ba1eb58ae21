// softmax_cpu.hpp - the CPU backend: the reference implementation (double accumulation), threaded over rows.
#pragma once

#include <memory>

#include "ops/softmax/info.hpp"
#include "ops/softmax/plan.hpp"

namespace smx {

// Builds the CPU plan for a validated problem; forward will use at most `max_threads` threads.
smxStatus_t make_cpu_softmax_plan(const SoftmaxInfo& info, int max_threads, std::unique_ptr<SoftmaxPlan>* plan);

}  // namespace smx
