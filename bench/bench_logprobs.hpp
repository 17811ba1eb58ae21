// bench_logprobs.hpp - smx-bench's log-probability cases (--logprobs): logsumexp, log_softmax_gather,
// cross_entropy forward alone (loss and lse) and forward + backward (loss and dlogits), on the language-model
// shapes of issue 54. Each case is checked on sampled rows against smx's CPU backend (float64) before it is
// timed. Bytes: x read once for logsumexp and gather (the K gathered values and one output per row left out),
// the logits read once for the forward, the logits read once and dlogits written once for forward + backward.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "bench_device.hpp"
#include "bench_report.hpp"

namespace smx_bench {

struct LogprobsCase {
    std::string op;           // logsumexp, log_softmax_gather, cross_entropy_forward, cross_entropy
    std::string group;        // lastdim or decode
    std::int64_t rows = 0;
    std::int64_t classes = 0;
    smxDataType_t dtype = SMX_DTYPE_BF16;  // x / logits, and dlogits
    std::string label() const { return std::to_string(rows) + "x" + std::to_string(classes); }
};

// The cases, filtered by op names and labels ("8192x32000"); an empty filter keeps everything. Cases named in
// `labels` that are not in the table are added for every op (in bf16 and f32).
std::vector<LogprobsCase> logprobs_cases(const std::vector<std::string>& ops, const std::vector<std::string>& labels);

// The plan text the handle makes for a case (descriptors only: nothing allocated or launched).
std::string logprobs_plan(smxHandle_t handle, const LogprobsCase& c);

// Checks and times each case on `device` through `handle`, printing a row per case and returning the records.
std::vector<CaseRecord> run_logprobs_cases(BenchDevice& device, smxHandle_t handle, smxHandle_t cpu_handle,
                                           const std::vector<LogprobsCase>& cases, const RunInfo& run, bool quick,
                                           std::mt19937_64& rng);

}  // namespace smx_bench
