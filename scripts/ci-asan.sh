#!/usr/bin/env bash
# ci-asan.sh - the CPU tests under AddressSanitizer + UndefinedBehaviorSanitizer (GCC), with leak detection.
# Uses its own build directory (build-asan/, or $SMX_ASAN_BUILD_DIR) so the normal build is untouched.
# Exit status: non-zero when the build fails or any test (or any sanitizer report) fails.
set -euo pipefail

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${SMX_ASAN_BUILD_DIR:-$repo_root/build-asan}
jobs=$(nproc)

cmake -S "$repo_root" -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_COMPILER=gcc -DCMAKE_CXX_COMPILER=g++ \
    -DSMX_SANITIZE=ON -DSMX_WITH_CUDA=OFF -DSMX_BUILD_BENCH=OFF -DSMX_BUILD_TESTS=ON
cmake --build "$build_dir" -j"$jobs"

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:strict_string_checks=1:detect_stack_use_after_return=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
# Without CUDA the [cuda] tests only report Skipped; everything else runs instrumented.
ctest --test-dir "$build_dir" --output-on-failure -j"$jobs"
