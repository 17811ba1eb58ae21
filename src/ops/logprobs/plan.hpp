// plan.hpp - what a backend hands back for a validated log-probability problem (ops/logprobs/info.hpp): a
// ready-to-launch plan per operator. Chosen once at descriptor creation; run() only launches: no validation,
// no allocation, and (CUDA) no synchronization, so a call can be captured in a CUDA graph.
//
// What every run() may assume: the pointers were checked (non-null where the call touches them, aligned to
// their element size, no illegal overlap, device memory where checks are on); the workspace holds at least
// workspace_bytes(), aligned to kWorkspaceAlignment (ops/common/workspace.hpp), with no initial value; `stream` is
// a cudaStream_t or ignored (CPU). On failure run() returns the status and sets the last error.
//
// What every run() must do beyond the formulas (docs/api.md, "Log-probabilities"):
//   - read x only inside each row: an index or target outside [0, row_len) is never dereferenced;
//   - write every element of every output it has, also for rows == 0 or row_len == 0 where that leaves
//     something to write (logsumexp -inf per row, a reduced loss: SUM 0, MEAN NaN);
//   - reduce (SUM, MEAN) in an order fixed by the shape alone, so repeated calls give the same bits.
#pragma once

#include <cstddef>
#include <string>

#include "ops/common/workspace.hpp"  // kWorkspaceAlignment
#include "smx/smx.h"

namespace smx {

class LogsumexpPlan {
public:
    virtual ~LogsumexpPlan() = default;
    virtual std::size_t workspace_bytes() const = 0;
    // The chosen kernel and its parameters, e.g. "cpu reference layout=rows threads=4".
    virtual const std::string& description() const = 0;
    // out[r] = logsumexp(x row r), rounded once to out's dtype.
    virtual smxStatus_t run(void* workspace, void* out, const void* x, void* stream) const = 0;
};

class LogSoftmaxGatherPlan {
public:
    virtual ~LogSoftmaxGatherPlan() = default;
    virtual std::size_t workspace_bytes() const = 0;
    virtual const std::string& description() const = 0;
    // out[r, k] = x[r, index[r, k]] - logsumexp(x row r), or kGatherOutOfRange (+inf) for an index outside
    // [0, row_len).
    virtual smxStatus_t run(void* workspace, void* out, const void* x, const void* index, void* stream) const = 0;
};

class CrossEntropyPlan {
public:
    virtual ~CrossEntropyPlan() = default;
    // A reduced loss on CUDA keeps its per-row losses here, and a MEAN with dlogits the gradient's scale (1 / the
    // count of counted rows).
    virtual std::size_t workspace_bytes() const = 0;
    virtual const std::string& description() const = 0;
    // The loss (per row, or reduced), and lse and dlogits where the info has them (their pointers are NULL
    // where it has not). dlogits may equal logits (in place, same layout): no logit, the target's included,
    // may be read after its dlogits element is written.
    virtual smxStatus_t run(void* workspace, void* loss, void* lse, void* dlogits, const void* logits,
                            const void* target, void* stream) const = 0;
};

}  // namespace smx
