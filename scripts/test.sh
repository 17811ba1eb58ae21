#!/usr/bin/env bash
# test.sh - every test, from a fresh clone: installs dependencies, configures build/ (the CUDA backend too
# when nvcc exists, for sm_90, so CI compiles and links it even without a GPU), builds, runs ctest, the
# ASan/UBSan tests (scripts/ci-asan.sh), the fuzzer (scripts/ci-fuzz.sh) and the Python tests.
# Each stage runs even after an earlier one failed, unless it needs that one's output. The last line
# names every stage with its result; the exit status is non-zero when any stage failed.
set -uo pipefail

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo_root"
jobs=$(nproc)
started=$SECONDS
results=()
failed=0

# run_stage NAME COMMAND...: runs one stage and records "NAME ok" or "NAME FAILED".
run_stage() {
    local name=$1
    shift
    echo "=== test.sh: $name"
    if "$@"; then
        results+=("$name ok")
    else
        results+=("$name FAILED")
        failed=1
    fi
}

skip_stage() {
    echo "=== test.sh: $1 skipped: $2"
    results+=("$1 skipped ($2)")
}

run_python_tests() {
    SMX_LIBRARY="$repo_root/build/src/libsmx.so" python3 -m pytest -q python/tests
}

run_stage deps scripts/install-deps.sh test
source scripts/cuda-env.sh
# Explicit rather than cached: a build/ left from an earlier CPU-only configure must not hide the CUDA backend.
if command -v nvcc >/dev/null 2>&1; then with_cuda=ON; else with_cuda=OFF; fi
# The floor probes build with the CUDA backend (compiled, never run here), so they cannot rot.
run_stage configure cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DSMX_WITH_CUDA=$with_cuda \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DSMX_BUILD_TESTS=ON -DSMX_BUILD_BENCH=ON -DSMX_BUILD_PROBES=$with_cuda
build_ok=0
if [ $failed -eq 0 ]; then
    run_stage build cmake --build build -j"$jobs" && [ $failed -eq 0 ] && build_ok=1
else
    skip_stage build "configure failed"
fi
if [ $build_ok -eq 1 ]; then
    run_stage ctest ctest --test-dir build --output-on-failure -j"$jobs"
else
    skip_stage ctest "no build"
fi
run_stage asan scripts/ci-asan.sh
run_stage fuzz scripts/ci-fuzz.sh
if [ ! -d python/tests ]; then
    skip_stage python "python/tests is absent"
elif [ $build_ok -eq 1 ]; then
    run_stage python run_python_tests
else
    skip_stage python "no build"
fi

elapsed=$((SECONDS - started))
summary=$(IFS=,; echo "${results[*]}")
if [ $failed -eq 0 ]; then verdict=PASSED; else verdict=FAILED; fi
echo "test.sh: ${summary//,/ | } -- $verdict in $((elapsed / 60))m$((elapsed % 60))s"
exit $failed
