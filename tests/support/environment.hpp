// environment.hpp - setting an environment variable for one scope, for tests of the knobs libsmx reads
// (SMX_CPU_THREADS at smxCreate, the SMX_CUDA_* plan overrides at descriptor creation).
#pragma once

#include <string>

namespace smx_test {

// Sets the environment variable `name` to `value` for the guard's lifetime and restores its previous value
// (or its absence) after. Plans read their knobs when a descriptor is created, so a test can run a plan
// the rule would not choose for its shape.
class ScopedEnvironment {
public:
    ScopedEnvironment(const char* name, const char* value);
    ~ScopedEnvironment();
    ScopedEnvironment(const ScopedEnvironment&) = delete;
    ScopedEnvironment& operator=(const ScopedEnvironment&) = delete;

private:
    std::string name_;
    bool had_value_ = false;
    std::string previous_;
};

}  // namespace smx_test
