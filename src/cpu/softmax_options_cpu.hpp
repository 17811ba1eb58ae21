// softmax_options_cpu.hpp - the CPU reference plan of softmax problems with options (ops/softmax/options.hpp).
#pragma once

#include <memory>

#include "ops/softmax/info.hpp"
#include "ops/softmax/plan.hpp"

namespace smx {

// The CPU plan of a validated problem with options; forward uses at most `max_threads` threads.
smxStatus_t make_cpu_softmax_options_plan(const SoftmaxInfo& info, int max_threads, std::unique_ptr<SoftmaxPlan>* plan);

}  // namespace smx
