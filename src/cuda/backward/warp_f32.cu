// warp_f32.cu - backward-warp's instances for dy and y in f32 (one file per dtype builds in parallel).
#include "cuda/backward/warp.cuh"

namespace smx::cuda {

const void* backward_warp_kernel_f32(smxDataType_t gradient_dtype, int shape_index) {
    return backward_warp_for_value<float>(gradient_dtype, shape_index);
}

}  // namespace smx::cuda
