// plan.hpp - the log-probability kernels' planners. Each choose step decides a configuration and whether it fits
// (from the occupancy API and the tuning table); each add step appends its launches, parameters, workspace and
// plan text to a LogprobsCall. The operators' decision trees (plan/logprobs_plan.cpp) put them together.
#pragma once

#include <cstdint>

#include "cuda/logprobs/call.hpp"
#include "cuda/logprobs/params.hpp"
#include "cuda/plan/context.hpp"

namespace smx::cuda {

// What the Rows planners need to know of a problem, whichever operator it is.
struct RowsProblem {
    std::int64_t rows = 0;
    std::int64_t row_len = 0;
    smxDataType_t x_dtype = SMX_DTYPE_F32;
    smxDataType_t dlogits_dtype = SMX_DTYPE_F32;  // cross-entropy with dlogits; x's dtype otherwise
};

// How the stats kernel covers the rows: lane groups of 8 or 32 (short rows), or CTAs: one per row, a cluster per
// row (chunks > 1, !split), or CTAs per chunk with partials folded by the combine kernel (chunks > 1, split).
struct StatsChoice {
    const void* kernel = nullptr;
    int group_threads = 32;      // threads per row group: 8, 32 or `threads` (a CTA)
    int threads = 256;           // CTA size
    std::int64_t chunks = 1;
    std::int64_t slice_len = 0;  // elements per chunk
    bool split = false;
    int ctas_per_sm = 0;
};

// with_mean: cross-entropy with label smoothing (the kernel also sums x / n); cross_entropy: the op is
// cross-entropy (its own instance, logprobs_stats_kernel).
smxStatus_t choose_stats(const RowsProblem& problem, bool with_mean, bool cross_entropy, const PlanContext& context,
                         StatsChoice* choice);

// Appends the stats launch (and the combine launch of a split) running `params` (the problem's fields, op and
// outputs filled in; the launch fields are set here) and their workspace.
smxStatus_t add_stats(const RowsProblem& problem, const StatsChoice& choice, LogprobsRowsParams params,
                      LogprobsCall* call);

// ce-regs: a cluster of CTAs holding each row in registers.
struct CeRegsChoice {
    bool fits = false;
    const void* kernel = nullptr;
    int cluster = 1;
    int threads = 0;
    int values = 0;               // logits each thread holds
    std::int64_t slice_len = 0;   // logits per CTA of the cluster
    int ctas_per_sm = 0;
    double utilization = 0.0;     // row_len / (cluster x threads x values)
};

// The smallest cluster (1..16) with a configuration of several CTAs per SM and good utilization, else the best one
// seen; fits = false where no cluster holds the row (or the pair has no instance).
smxStatus_t choose_ce_regs(const RowsProblem& problem, const PlanContext& context, CeRegsChoice* choice);
void add_ce_regs(const RowsProblem& problem, const CeRegsChoice& choice, LogprobsRowsParams params, LogprobsCall* call);

// ce-write after a stats pass that left every row's lse in the workspace: chunks of tuning.write_chunk logits, a CTA
// each.
smxStatus_t add_ce_write(const RowsProblem& problem, LogprobsRowsParams params, const PlanContext& context,
                         LogprobsCall* call);

// The general kernel over `rows` rows of `row_len` with `params` (index space, op, pointers' roles filled in).
smxStatus_t add_general(LogprobsGeneralParams params, smxDataType_t x_dtype, smxDataType_t dlogits_dtype,
                        const PlanContext& context, LogprobsCall* call);

// Cross-entropy's per-row kernels (one CTA each): the MEAN count before the kernels that scale dlogits, and the
// reduction / scatter after them.
void add_ce_count(const LogprobsPerRowParams& params, LogprobsCall* call);
void add_ce_finish(const LogprobsPerRowParams& params, smxDataType_t statistics_dtype, LogprobsCall* call);

}  // namespace smx::cuda
