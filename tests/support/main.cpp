// main.cpp - the Catch2 runner for every C++ test binary.
//
// GPU tests carry the [cuda] tag. When the test spec asks for [cuda] tests and this machine has no usable
// CUDA device (or the library was built without CUDA), the runner prints why and exits 77, which CTest
// reports as "Skipped" (SKIP_RETURN_CODE): not passed, not failed.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstring>
#include <string>

#include "smx/smx.h"

namespace {

constexpr int kSkipExitCode = 77;

bool asks_for_cuda_tests(int argc, char** argv) {
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        if (arg.find("[cuda]") != std::string::npos && arg.find("~[cuda]") == std::string::npos) return true;
    }
    return false;
}

}  // namespace

int main(int argc, char** argv) {
    if (asks_for_cuda_tests(argc, argv)) {
        smxHandle_t handle = nullptr;
        const smxStatus_t status = smxCreate(&handle, SMX_DEVICE_CUDA, 0);
        if (status != SMX_STATUS_SUCCESS) {
            std::printf("SKIPPED: [cuda] tests need a CUDA device: %s (%s)\n", smxGetStatusString(status),
                        smxGetLastErrorMessage());
            return kSkipExitCode;
        }
        smxDestroy(handle);
    }
    return Catch::Session().run(argc, argv);
}
