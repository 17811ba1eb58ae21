// plan.hpp - what a backend hands back for a validated softmax problem: a ready-to-launch plan.
//
// A plan is chosen once, at descriptor creation, from the SoftmaxInfo and the device's limits. run()
// only launches: it never re-validates, never allocates, and (CUDA) never synchronizes.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "ops/common/workspace.hpp"  // kWorkspaceAlignment
#include "smx/smx.h"

namespace smx {

class SoftmaxPlan {
public:
    virtual ~SoftmaxPlan() = default;

    // Bytes of workspace run() needs; the descriptor reports exactly this.
    virtual std::size_t workspace_bytes() const = 0;

    // The chosen kernel and its parameters, e.g. "cuda warp rows_per_warp=2 lanes=8 pack=4".
    virtual const std::string& description() const = 0;

    // Computes y from x. Pointers are already checked (non-null when there is work, aligned, legal overlap)
    // and the workspace holds at least workspace_bytes(), aligned to kWorkspaceAlignment. `stream` is a cudaStream_t or ignored (CPU).
    // On failure returns the status and sets the last error.
    virtual smxStatus_t run(void* workspace, void* y, const void* x, void* stream) const = 0;
};

}  // namespace smx
