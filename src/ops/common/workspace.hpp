// workspace.hpp - the workspace rules every operator's compute call applies, whatever its plan needs.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/error.hpp"

namespace smx {

// The alignment a compute call requires of a workspace pointer (CUDA plans keep 16-byte (max, sum) pairs of
// doubles there).
constexpr std::size_t kWorkspaceAlignment = 16;

// Call-time check of a workspace: at least `needed` bytes, not NULL when `needed` > 0, and aligned to
// kWorkspaceAlignment unless NULL. The alignment is checked whether or not the plan uses any, so that a call
// valid on one device or plan is valid on every other.
inline smxStatus_t check_workspace(const void* workspace, std::size_t workspace_bytes, std::size_t needed) {
    if (workspace_bytes < needed) {
        return fail(SMX_STATUS_BAD_PARAM_WORKSPACE, "workspace of {} bytes is smaller than the {} bytes this plan needs",
                    workspace_bytes, needed);
    }
    if (needed > 0 && workspace == nullptr) {
        return fail(SMX_STATUS_BAD_PARAM_WORKSPACE, "workspace is NULL but this plan needs {} bytes", needed);
    }
    if (reinterpret_cast<std::uintptr_t>(workspace) % kWorkspaceAlignment != 0) {
        return fail(SMX_STATUS_BAD_PARAM_ALIGNMENT, "workspace pointer {} is not {}-byte aligned", workspace,
                    kWorkspaceAlignment);
    }
    return SMX_STATUS_SUCCESS;
}

}  // namespace smx
