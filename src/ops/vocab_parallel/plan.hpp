// plan.hpp - what a backend hands back for a validated vocabulary-parallel problem (ops/vocab_parallel/info.hpp):
// a ready-to-launch plan per operator, chosen once at descriptor creation; run() only launches (no validation,
// no allocation, and on CUDA no synchronization, so a call can be captured in a CUDA graph). run() may assume
// what ops/logprobs/plan.hpp says of every run().
//
// What every run() must do beyond the formulas (docs/distributed.md):
//   - combine the ranks' statistics of a row in rank order with the one formula of its backend, so every rank,
//     reading the same gathered values, gets the same bits for everything derived from them (lse, loss);
//   - read x only inside each row: a target outside the shard is never dereferenced;
//   - as for cross-entropy: a reduced loss is written even for zero rows, in an order fixed by the shape alone.
#pragma once

#include <cstddef>
#include <string>

#include "ops/common/workspace.hpp"  // kWorkspaceAlignment
#include "smx/smx.h"

namespace smx {

class ShardStatisticsPlan {
public:
    virtual ~ShardStatisticsPlan() = default;
    virtual std::size_t workspace_bytes() const = 0;
    virtual const std::string& description() const = 0;
    // stats[r, :] = (max, sum of exp(x - max)) of the shard's row r (and, with a target, its target's logit or
    // 0, and sum(x) / V); target is NULL where the info has none.
    virtual smxStatus_t run(void* workspace, void* stats, const void* x, const void* target, void* stream) const = 0;
};

class ShardSoftmaxPlan {
public:
    virtual ~ShardSoftmaxPlan() = default;
    virtual std::size_t workspace_bytes() const = 0;
    virtual const std::string& description() const = 0;
    // y = exp(x - M) / S (log: x - M - log S) with (M, S) the row's combined statistics; y may equal x (in place).
    virtual smxStatus_t run(void* workspace, void* y, const void* x, const void* stats, void* stream) const = 0;
};

class ShardLogsumexpPlan {
public:
    virtual ~ShardLogsumexpPlan() = default;
    virtual std::size_t workspace_bytes() const = 0;
    virtual const std::string& description() const = 0;
    // out[r] = M + log S of the row's combined statistics (M where M is not finite).
    virtual smxStatus_t run(void* workspace, void* out, const void* stats, void* stream) const = 0;
};

class ShardCrossEntropyPlan {
public:
    virtual ~ShardCrossEntropyPlan() = default;
    // A reduced loss keeps its per-row losses (and on CUDA the count) here.
    virtual std::size_t workspace_bytes() const = 0;
    virtual const std::string& description() const = 0;
    // The loss (per row or reduced), and lse and the shard's dlogits where the info has them (NULL where not).
    // dlogits may equal logits (in place, same layout).
    virtual smxStatus_t run(void* workspace, void* loss, void* lse, void* dlogits, const void* logits,
                            const void* target, const void* stats, void* stream) const = 0;
};

}  // namespace smx
