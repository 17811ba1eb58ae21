// kernel.cu - the block-regs family's plain instances and their getters (the body: kernel.cuh; the options
// instances: options.cu, which compiles in parallel).
#include "core/dtype.hpp"
#include "cuda/block_regs/kernel.cuh"

namespace smx::cuda {

const void* block_regs_softmax_kernel(smxDataType_t x_dtype, smxDataType_t y_dtype, int values_per_thread) {
    return visit_dtype_pair(x_dtype, y_dtype, [values_per_thread](auto x_tag, auto y_tag) -> const void* {
        return block_regs_instance<typename decltype(x_tag)::type, typename decltype(y_tag)::type>(values_per_thread);
    });
}

std::size_t grid_regs_steps_shared_bytes(smxDataType_t x_dtype, smxDataType_t y_dtype, std::int64_t slice_len) {
    // kStagedSteps' condition: x's packs are 16 bytes, i.e. x at least as wide as y (asserted there).
    const std::size_t x_size = dtype_size(x_dtype);
    if (x_size < dtype_size(y_dtype)) return 0;
    return (static_cast<std::size_t>(slice_len) * x_size + 15) / 16 * 16;
}

const void* grid_regs_steps_kernel(smxDataType_t x_dtype, smxDataType_t y_dtype) {
    return visit_dtype_pair(x_dtype, y_dtype, [](auto x_tag, auto y_tag) -> const void* {
        return block_regs_steps_instance<typename decltype(x_tag)::type, typename decltype(y_tag)::type>();
    });
}

}  // namespace smx::cuda
