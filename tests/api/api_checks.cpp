// api_checks.cpp - the standard-error capture behind StderrCapture: fd 2 is pointed at a temporary file.
#include "api/api_checks.hpp"

#include <unistd.h>

#include <stdexcept>

namespace smx_test {

StderrCapture::StderrCapture() {
    std::fflush(stderr);
    file_ = std::tmpfile();
    if (file_ == nullptr) throw std::runtime_error("StderrCapture: tmpfile() failed");
    saved_fd_ = dup(STDERR_FILENO);
    if (saved_fd_ < 0 || dup2(fileno(file_), STDERR_FILENO) < 0) throw std::runtime_error("StderrCapture: dup failed");
}

std::string StderrCapture::text() {
    if (saved_fd_ >= 0) {
        std::fflush(stderr);
        dup2(saved_fd_, STDERR_FILENO);
        close(saved_fd_);
        saved_fd_ = -1;
        std::rewind(file_);
        char chunk[4096];
        std::size_t got;
        while ((got = std::fread(chunk, 1, sizeof chunk, file_)) > 0) captured_.append(chunk, got);
        std::fclose(file_);
        file_ = nullptr;
    }
    return captured_;
}

StderrCapture::~StderrCapture() { text(); }

}  // namespace smx_test
