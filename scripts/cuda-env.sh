# cuda-env.sh - sourced by bench.sh and test.sh: puts a CUDA toolkit installed in its default place on PATH
# so CMake's CUDA detection (SMX_WITH_CUDA's default) finds nvcc even when the shell's PATH lacks it.
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
    export PATH="/usr/local/cuda/bin:$PATH"
fi
