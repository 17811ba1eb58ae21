// environment.cpp - ScopedEnvironment (setenv/unsetenv, POSIX).
#include "support/environment.hpp"

#include <cstdlib>

namespace smx_test {

ScopedEnvironment::ScopedEnvironment(const char* name, const char* value) : name_(name) {
    const char* previous = std::getenv(name);
    had_value_ = previous != nullptr;
    if (had_value_) previous_ = previous;
    setenv(name, value, 1);
}

ScopedEnvironment::~ScopedEnvironment() {
    if (had_value_) {
        setenv(name_.c_str(), previous_.c_str(), 1);
    } else {
        unsetenv(name_.c_str());
    }
}

}  // namespace smx_test
