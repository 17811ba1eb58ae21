// plan.hpp - what a backend hands back for a validated softmax backward problem: a ready-to-launch plan.
// Chosen once at descriptor creation; run() only launches (no validation, allocation or synchronization).
#pragma once

#include <cstddef>
#include <string>

#include "core/error.hpp"
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

    // The same for a problem with options (SoftmaxBackwardInfo::options.any()): `scale` and `mask` are the data
    // of its per-row scale and mask operands, NULL where it has none, already checked like dy. Only the plans of
    // problems with options are called here; the others keep this refusal.
    virtual smxStatus_t run_with_options(void* /*workspace*/, void* /*dx*/, const void* /*dy*/, const void* /*y*/,
                                         const void* /*scale*/, const void* /*mask*/, void* /*stream*/) const {
        return fail(SMX_STATUS_INTERNAL_ERROR, "this plan was not made for a problem with options");
    }
};

}  // namespace smx
