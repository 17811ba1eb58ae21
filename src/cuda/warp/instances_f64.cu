// instances_f64.cu - the warp kernel's instances for x = f64 (one file per x dtype builds in parallel).
#include "cuda/warp/kernel.cuh"

namespace smx::cuda {

const void* warp_softmax_kernel_f64(smxDataType_t y_dtype, int shape_index) {
    return warp_softmax_for_x<double>(y_dtype, shape_index);
}

}  // namespace smx::cuda
