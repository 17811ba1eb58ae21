// warp_f16.cu - backward-warp's instances for dy and y in f16 (one file per dtype builds in parallel).
#include "cuda/backward/warp.cuh"

namespace smx::cuda {

const void* backward_warp_kernel_f16(smxDataType_t gradient_dtype, int shape_index) {
    return backward_warp_for_value<__half>(gradient_dtype, shape_index);
}

}  // namespace smx::cuda
