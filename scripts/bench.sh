#!/usr/bin/env bash
# bench.sh - the main job: installs the build dependencies, builds smx-bench (with the CUDA backend when a
# toolkit is present, for the GPU of this machine when there is one) and runs it on the best device present.
# Arguments go to smx-bench unchanged (scripts/bench.sh --help lists them).
set -euo pipefail

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo_root"
scripts/install-deps.sh build
source scripts/cuda-env.sh

# Compile for the GPU present (compute capability 9.0 -> 90); without one, for the H100/H200 default.
cuda_arch=90
if command -v nvidia-smi >/dev/null 2>&1; then
    gpu_capability=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d ' .')
    if [[ "$gpu_capability" =~ ^[0-9]+$ ]]; then cuda_arch=$gpu_capability; fi
fi

if [ ! -f bench/CMakeLists.txt ]; then
    echo "bench.sh: bench/CMakeLists.txt is missing: this checkout has no smx-bench to build" >&2
    exit 1
fi
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="$cuda_arch" -DSMX_BUILD_BENCH=ON >/dev/null
cmake --build build -j"$(nproc)" --target smx-bench
exec build/bench/smx-bench "$@"
