// options_f32.cu - the warp kernel's options instances for x = f32 (RowsOptionsInput, every RowsOptionSet; a file
// of its own so that it compiles in parallel with the plain instances).
#include "cuda/warp/kernel.cuh"

namespace smx::cuda {

const void* warp_softmax_options_kernel_f32(smxDataType_t y_dtype, int shape_index, RowsOptionSet set) {
    return warp_softmax_for_x<float, true>(y_dtype, shape_index, set);
}

}  // namespace smx::cuda
