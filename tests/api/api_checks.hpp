// api_checks.hpp - small helpers the API-contract tests share: the last error as a std::string, an RAII
// guard that puts the process-wide logging state back to its defaults, and a capture of standard error.
#pragma once

#include <cstdio>
#include <string>

#include "smx/smx.h"

namespace smx_test {

// The calling thread's last error, copied (the library's buffer is overwritten by the next failure).
inline std::string last_error() { return smxGetLastErrorMessage(); }

// Restores silent logging to standard error on scope exit, so one test's logging cannot leak into another.
struct LogDefaultsGuard {
    LogDefaultsGuard() = default;
    ~LogDefaultsGuard() {
        smxSetLogCallback(nullptr, nullptr);
        smxSetLogLevel(SMX_LOG_OFF);
    }
    LogDefaultsGuard(const LogDefaultsGuard&) = delete;
    LogDefaultsGuard& operator=(const LogDefaultsGuard&) = delete;
};

}  // namespace smx_test

namespace smx_test {

// Captures what is written to file descriptor 2 (standard error) between construction and text(), so a
// test can check the library prints nothing, or exactly what it should, without a callback.
class StderrCapture {
public:
    StderrCapture();
    ~StderrCapture();
    // Stops capturing (once) and returns everything written meanwhile.
    std::string text();
    StderrCapture(const StderrCapture&) = delete;
    StderrCapture& operator=(const StderrCapture&) = delete;

private:
    int saved_fd_ = -1;
    std::FILE* file_ = nullptr;
    std::string captured_;
};

}  // namespace smx_test
