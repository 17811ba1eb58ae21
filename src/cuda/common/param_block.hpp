// param_block.hpp - the block a kernel family's parameters travel in: the family's typed struct followed by a
// reserve up to one fixed size. nvcc's register allocation and loop unswitching for these kernels depend on
// the size of the parameter block; the kernels were tuned at 360 bytes, and smaller blocks cost up to 12%
// (performance.md#parameter-blocks).
#pragma once

#include <cstddef>

namespace smx::cuda {

constexpr std::size_t kKernelParamBytes = 360;

template <class Params>
struct ParamBlock : Params {
    static_assert(sizeof(Params) <= kKernelParamBytes, "a family's parameters fit the block");
    unsigned char reserve[kKernelParamBytes - sizeof(Params)] = {};
};

}  // namespace smx::cuda
