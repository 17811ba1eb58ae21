// options_bf16.cu - the warp kernel's options instances for x = bf16 (RowsOptionsInput, every RowsOptionSet; a file
// of its own so that it compiles in parallel with the plain instances).
#include "cuda/warp/kernel.cuh"

namespace smx::cuda {

const void* warp_softmax_options_kernel_bf16(smxDataType_t y_dtype, int shape_index, RowsOptionSet set) {
    return warp_softmax_for_x<__nv_bfloat16, true>(y_dtype, shape_index, set);
}

}  // namespace smx::cuda
