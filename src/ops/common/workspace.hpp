// workspace.hpp - the workspace rules every compute call shares: at least the plan's size, non-NULL where that
// size is not 0, and aligned (CUDA plans keep 16-byte (max, sum) pairs of doubles there).
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/error.hpp"

namespace smx {

// The alignment every compute call requires of a workspace pointer.
constexpr std::size_t kWorkspaceAlignment = 16;

// SMX_STATUS_BAD_PARAM_WORKSPACE for fewer than `needed` bytes or a NULL workspace that must hold some;
// SMX_STATUS_BAD_PARAM_ALIGNMENT for a misaligned one, checked whether or not the plan uses it, so that a call
// valid on one device or plan is on every other.
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
