// plan.hpp - what a backend hands back for a validated softmax backward problem: a ready-to-launch plan.
// Chosen once at descriptor creation; run() only launches (no validation, allocation or synchronization).
#pragma once

#include <cstddef>
#include <string>

#include "smx/smx.h"

namespace smx {

class SoftmaxBackwardPlan {
public:
    virtual ~SoftmaxBackwardPlan() = default;

    // Bytes of workspace run() needs (aligned to kWorkspaceAlignment of ops/softmax/plan.hpp).
    virtual std::size_t workspace_bytes() const = 0;

    // The chosen kernel and its parameters, e.g. "cuda backward-warp lanes=8 pack=4".
    virtual const std::string& description() const = 0;

    // Computes dx from dy and y. Pointers are already checked (non-null when there is work, aligned, legal
    // overlap). `stream` is a cudaStream_t or ignored (CPU). On failure returns the status and sets the last
    // error.
    virtual smxStatus_t run(void* workspace, void* dx, const void* dy, const void* y, void* stream) const = 0;
};

}  // namespace smx
