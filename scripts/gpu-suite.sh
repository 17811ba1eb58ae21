#!/usr/bin/env bash
# gpu-suite.sh - builds smx with CUDA and runs every GPU check on this machine, one verdict per stage.
#
# Stages (each logs to OUT_DIR/<stage>.log and ends with one line
#   STAGE <name>: PASS|FAIL (<seconds>s, <summary>)):
#   build       configure (SMX_WITH_CUDA=ON) and build
#   ctest       every CTest test but smx_cuda_tests, then smx_tests "[cuda]" directly, once (Catch2's
#               counts and durations; exit 77, no usable CUDA device, is a failure here)
#   memcheck, racecheck, initcheck, synccheck
#               compute-sanitizer with that tool over smx_tests "[cuda][sanitize]"
# A failing stage does not stop the run; the exit status is non-zero when any stage failed.
#
# Settings, as environment variables or KEY=VALUE arguments:
#   BUILD_DIR         build directory (default build-gpu)
#   CUDA_ARCH         CMAKE_CUDA_ARCHITECTURES (default 90)
#   OUT_DIR           where the logs go (default BUILD_DIR/logs)
#   EXTRA_CMAKE_ARGS  more configure arguments, e.g. -DCMAKE_PREFIX_PATH=/opt/deps/usr
#   JOBS              parallel build jobs (default: the number of cores)
#   STAGES            the stages to run, in that order (default: all six, in the order above), e.g.
#                     STAGES="build ctest" then STAGES="memcheck racecheck initcheck synccheck" to split
#                     the suite over two sessions on the same build directory
set -euo pipefail

usage() {
    sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'
}

for argument in "$@"; do
    case "$argument" in
        BUILD_DIR=* | CUDA_ARCH=* | OUT_DIR=* | EXTRA_CMAKE_ARGS=* | JOBS=* | STAGES=*) export "${argument?}" ;;  # KEY=VALUE
        -h | --help) usage; exit 0 ;;
        *) echo "gpu-suite.sh: unknown argument '$argument' (see --help)" >&2; exit 2 ;;
    esac
done

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO_ROOT"
BUILD_DIR=${BUILD_DIR:-build-gpu}
CUDA_ARCH=${CUDA_ARCH:-90}
OUT_DIR=${OUT_DIR:-$BUILD_DIR/logs}
EXTRA_CMAKE_ARGS=${EXTRA_CMAKE_ARGS:-}
JOBS=${JOBS:-$(nproc)}
STAGES=${STAGES:-build ctest memcheck racecheck initcheck synccheck}
for stage in $STAGES; do
    case "$stage" in
        build | ctest | memcheck | racecheck | initcheck | synccheck) ;;
        *) echo "gpu-suite.sh: unknown stage '$stage' in STAGES (see --help)" >&2; exit 2 ;;
    esac
done
mkdir -p "$OUT_DIR"
TEST_BINARY="$BUILD_DIR/tests/smx_tests"

# compute-sanitizer: on PATH, else next to nvcc, else in the default toolkit location.
find_sanitizer() {
    if command -v compute-sanitizer > /dev/null; then command -v compute-sanitizer; return; fi
    local nvcc_path
    nvcc_path=$(command -v nvcc || true)
    for candidate in "${nvcc_path%/nvcc}/compute-sanitizer" "${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer"; do
        if [[ -x "$candidate" ]]; then echo "$candidate"; return; fi
    done
}
SANITIZER=$(find_sanitizer || true)

VERDICTS=()

# run_stage NAME SUMMARY_FUNCTION COMMAND...: runs COMMAND with its output in OUT_DIR/NAME.log, then
# appends the verdict line (SUMMARY_FUNCTION LOG EXIT_STATUS prints the summary) to the log and VERDICTS.
run_stage() {
    local name=$1 summarize=$2
    shift 2
    local log="$OUT_DIR/$name.log" started=$SECONDS status=0
    echo "== stage $name: $*" | tee "$log"
    "$@" >> "$log" 2>&1 || status=$?
    local verdict=PASS
    [[ $status -eq 0 ]] || verdict=FAIL
    local line
    line="STAGE $name: $verdict ($((SECONDS - started))s, $("$summarize" "$log" "$status"))"
    echo "$line" | tee -a "$log"
    VERDICTS+=("$line")
}

# The last line of LOG matching PATTERN, or FALLBACK.
last_match() {
    local log=$1 pattern=$2 fallback=$3 found
    found=$(grep -E "$pattern" "$log" | tail -n 1 || true)
    echo "${found:-$fallback}"
}

catch2_summary() {
    last_match "$1" '^(All tests passed|test cases:)|^SKIPPED' "no Catch2 summary (exit status $2)"
}

# ---- stage commands ------------------------------------------------------------------------------

configure_and_build() {
    local extra=()
    read -r -a extra <<< "$EXTRA_CMAKE_ARGS"
    cmake -S . -B "$BUILD_DIR" -DSMX_WITH_CUDA=ON -DSMX_BUILD_TESTS=ON -DCMAKE_CUDA_ARCHITECTURES="$CUDA_ARCH" \
        "${extra[@]}" || return 1
    cmake --build "$BUILD_DIR" --parallel "$JOBS"
}

summarize_build() {
    local warnings
    warnings=$(grep -c 'warning' "$1" || true)
    if [[ $2 -eq 0 ]]; then
        echo "CUDA_ARCH=$CUDA_ARCH, $warnings warning lines"
    else
        last_match "$1" 'error|Error' "exit status $2"
    fi
}

require_test_binary() {
    if [[ ! -x "$TEST_BINARY" ]]; then
        echo "$TEST_BINARY is missing: the build stage failed"
        return 1
    fi
}

# Stage commands run where errexit is off (the caller tests their status), so each failure returns itself.
# The [cuda] tests are CTest's smx_cuda_tests; they run once, directly, where Catch2 prints its counts and
# each case's duration. They exit 77 when no CUDA device is usable: CTest would call that skipped, but on a
# GPU machine it is a failure.
run_ctest_and_cuda_tests() {
    require_test_binary || return 1
    local status=0 cuda_status=0
    ctest --test-dir "$BUILD_DIR" --output-on-failure -E '^smx_cuda_tests$' || status=1
    echo "== smx_tests \"[cuda]\" directly"
    "$TEST_BINARY" "[cuda]" --durations yes || cuda_status=$?
    if [[ $cuda_status -eq 77 ]]; then
        echo "the [cuda] tests found no usable CUDA device (exit 77)"
        status=1
    elif [[ $cuda_status -ne 0 ]]; then
        status=1
    fi
    return $status
}

summarize_ctest() {
    echo "$(last_match "$1" 'tests passed' 'no CTest summary'); [cuda]: $(catch2_summary "$1" "$2")"
}

run_sanitizer() {
    local tool=$1
    shift
    require_test_binary || return 1
    if [[ -z "$SANITIZER" ]]; then
        echo "compute-sanitizer not found (PATH, next to nvcc, or \$CUDA_HOME/bin)"
        return 1
    fi
    # synccheck reports a missing wait at every mbarrier of a cluster past 8 CTAs, even a CTA-local one
    # (perf-notes runs 218-219): under it the plans keep to the portable cluster sizes.
    local cap=()
    if [[ $tool == synccheck ]]; then cap=(env SMX_CUDA_MAX_CLUSTER=8); fi
    "${cap[@]}" "$SANITIZER" --tool "$tool" --error-exitcode=1 "$@" "$TEST_BINARY" "[cuda][sanitize]"
}

summarize_sanitizer() {
    if ! grep -qE 'ERROR SUMMARY|RACECHECK SUMMARY' "$1"; then
        echo "no ERROR SUMMARY: $(tail -n 1 "$1")"  # the sanitizer never ran; its last line says why
        return
    fi
    local errors
    errors=$(last_match "$1" 'ERROR SUMMARY|RACECHECK SUMMARY' '' | sed 's/^=* *//')
    echo "$errors; $(catch2_summary "$1" "$2")"
}

# ---- the run -------------------------------------------------------------------------------------

for stage in $STAGES; do
    case "$stage" in
        build) run_stage build summarize_build configure_and_build ;;
        ctest) run_stage ctest summarize_ctest run_ctest_and_cuda_tests ;;
        memcheck) run_stage memcheck summarize_sanitizer run_sanitizer memcheck --leak-check full ;;
        *) run_stage "$stage" summarize_sanitizer run_sanitizer "$stage" ;;  # racecheck, initcheck, synccheck
    esac
done

gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2> /dev/null | paste -sd ',' - || true)
# SMX_COMMIT names the commit where the tree has no .git (e.g. a copy sent to a GPU machine).
commit=${SMX_COMMIT:-$(git rev-parse HEAD 2> /dev/null || echo unknown)}
if [[ -z "${SMX_COMMIT:-}" && -n "$(git status --porcelain --untracked-files=no 2> /dev/null)" ]]; then commit="$commit (with local changes)"; fi
{
    echo "==== smx GPU suite summary ===="
    printf '%s\n' "${VERDICTS[@]}"
    echo "commit: $commit"
    echo "date:   $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo "gpu:    ${gpu_name:-unknown (nvidia-smi not found)}"
    echo "logs:   $OUT_DIR"
} | tee "$OUT_DIR/summary.txt"

for line in "${VERDICTS[@]}"; do
    [[ $line == *": PASS ("* ]] || exit 1
done
