#!/usr/bin/env bash
# ci-fuzz.sh - builds fuzz/fuzz_c_api.cpp with Clang (libFuzzer + ASan + UBSan) and fuzzes the C API for a
# bounded time, starting from the committed seed corpus fuzz/corpus/ (left unchanged: new inputs go to a
# scratch directory). Exit status: non-zero on any crash, leak, sanitizer report or out-of-memory.
# SMX_FUZZ_SECONDS (default 60) sets the time; a crashing input is saved as build-fuzz/artifacts/crash-*,
# the full fuzzer output as build-fuzz/fuzz.log.
set -euo pipefail

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${SMX_FUZZ_BUILD_DIR:-$repo_root/build-fuzz}
seconds=${SMX_FUZZ_SECONDS:-60}

cmake -S "$repo_root" -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
    -DSMX_BUILD_FUZZ=ON -DSMX_WITH_CUDA=OFF -DSMX_BUILD_TESTS=OFF -DSMX_BUILD_BENCH=OFF
cmake --build "$build_dir" -j"$(nproc)" --target smx_fuzz_c_api

new_inputs="$build_dir/corpus-new"
mkdir -p "$new_inputs" "$build_dir/artifacts"
# libFuzzer prints a line per new input (thousands in a minute): they go to a log, and the CI log gets
# the run's last lines (final statistics) or, when it fails, the last 300 (the crash or sanitizer report).
log="$build_dir/fuzz.log"
status=0
"$build_dir/fuzz/smx_fuzz_c_api" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
    -artifact_prefix="$build_dir/artifacts/" "$new_inputs" "$repo_root/fuzz/corpus" > "$log" 2>&1 || status=$?
if [ "$status" -ne 0 ]; then
    echo "ci-fuzz.sh: the fuzzer failed (exit $status); the last 300 lines of $log:"
    tail -n 300 "$log"
    exit "$status"
fi
echo "ci-fuzz.sh: $(grep -c '' "$log") lines of fuzzer output in $log; the last 15:"
tail -n 15 "$log"
