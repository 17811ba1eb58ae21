// logging.hpp - smx's internal log, routed through spdlog to stderr or the user's callback.
//
// Silent until SMX_LOG_LEVEL, smxSetLogLevel or smxSetLogCallback turns it on. Callers write
//   smx::log_debug("plan {}", text);
// and pay one atomic load when logging is off.
#pragma once

#include <fmt/format.h>

#include <string>
#include <utility>

#include "smx/smx.h"

namespace smx {

// True when a message of `level` would be delivered now.
bool log_enabled(smxLogLevel_t level);

// Delivers an already formatted message (only called when log_enabled(level)).
void log_message(smxLogLevel_t level, const std::string& message);

// Never throws: a message that cannot be made (no memory) is dropped, so logging never changes a result.
template <typename... Args>
void log_at(smxLogLevel_t level, fmt::format_string<Args...> format, Args&&... args) noexcept {
    try {
        if (log_enabled(level)) log_message(level, fmt::format(format, std::forward<Args>(args)...));
    } catch (...) {
    }
}

template <typename... Args>
void log_debug(fmt::format_string<Args...> format, Args&&... args) noexcept {
    log_at(SMX_LOG_DEBUG, format, std::forward<Args>(args)...);
}

template <typename... Args>
void log_info(fmt::format_string<Args...> format, Args&&... args) noexcept {
    log_at(SMX_LOG_INFO, format, std::forward<Args>(args)...);
}

template <typename... Args>
void log_warn(fmt::format_string<Args...> format, Args&&... args) noexcept {
    log_at(SMX_LOG_WARN, format, std::forward<Args>(args)...);
}

}  // namespace smx
