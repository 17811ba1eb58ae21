// bench_device_nocuda.cpp - the CUDA entry points of bench_device.hpp for an smx-bench built without
// the CUDA runtime: they say so instead of measuring.
#include "bench_device.hpp"

namespace smx_bench {

bool cuda_device_support_built() { return false; }

std::unique_ptr<BenchDevice> make_cuda_device(int) {
    throw BenchError("this smx-bench was built without the CUDA runtime (SMX_WITH_CUDA=OFF): it can only measure the CPU");
}

}  // namespace smx_bench
