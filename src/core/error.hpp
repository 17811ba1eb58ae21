// error.hpp - how code inside smx reports a failure: a status plus a precise message.
//
// Internal functions return smxStatus_t. Whoever detects a failure calls fail(status, fmt, args...),
// which records the message as this thread's last error and returns the status to pass upward.
#pragma once

#include <fmt/format.h>

#include <string>
#include <utility>

#include "smx/smx_status.h"

namespace smx {

// Records `message` as this thread's last error (see smxGetLastErrorMessage).
void set_last_error(std::string message);

template <typename... Args>
smxStatus_t fail(smxStatus_t status, fmt::format_string<Args...> format, Args&&... args) {
    set_last_error(fmt::format(format, std::forward<Args>(args)...));
    return status;
}

}  // namespace smx

// Returns from the enclosing function when `expr` (an smxStatus_t) is not success.
#define SMX_RETURN_IF_ERROR(expr)                                  \
    do {                                                           \
        const smxStatus_t smx_status_ = (expr);                    \
        if (smx_status_ != SMX_STATUS_SUCCESS) return smx_status_; \
    } while (0)
