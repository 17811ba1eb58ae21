// api_guard.hpp - the wrapper every C entry point runs its body in: no C++ exception crosses the ABI.
#pragma once

#include <exception>
#include <new>

#include "core/error.hpp"
#include "core/logging.hpp"

namespace smx {

template <typename Body>
smxStatus_t guard_api(const char* function, Body&& body) noexcept {
    try {
        const smxStatus_t status = body();
        if (status != SMX_STATUS_SUCCESS) log_debug("{} failed ({}): {}", function, static_cast<int>(status),
                                                    smxGetLastErrorMessage());
        return status;
    } catch (const std::bad_alloc&) {
        set_last_error(std::string(function) + ": out of host memory");
        return SMX_STATUS_ALLOC_FAILED;
    } catch (const std::exception& error) {
        set_last_error(std::string(function) + ": internal error: " + error.what());
        return SMX_STATUS_INTERNAL_ERROR;
    } catch (...) {
        set_last_error(std::string(function) + ": internal error: unknown exception");
        return SMX_STATUS_INTERNAL_ERROR;
    }
}

}  // namespace smx
