// kernel.cu - block-online's and split-row's plain instances and their getters (the kernels: kernel.cuh; split-row's
// options instances: options.cu, which compiles in parallel).
#include "cuda/online/kernel.cuh"

namespace smx::cuda {

const void* block_online_softmax_kernel(smxDataType_t x_dtype, smxDataType_t y_dtype) {
    return visit_dtype_pair(x_dtype, y_dtype, [](auto x_tag, auto y_tag) -> const void* {
        return reinterpret_cast<const void*>(
            &block_online_softmax<typename decltype(x_tag)::type, typename decltype(y_tag)::type>);
    });
}

const void* split_row_stats_kernel(smxDataType_t x_dtype, smxDataType_t y_dtype) {
    // The statistics do not depend on y: one instance per x dtype.
    return visit_dtype_pair(x_dtype, y_dtype, [](auto x_tag, auto) -> const void* {
        return reinterpret_cast<const void*>(&split_row_stats<typename decltype(x_tag)::type>);
    });
}

const void* split_row_write_kernel(smxDataType_t x_dtype, smxDataType_t y_dtype) {
    return visit_dtype_pair(x_dtype, y_dtype, [](auto x_tag, auto y_tag) -> const void* {
        return reinterpret_cast<const void*>(
            &split_row_write<typename decltype(x_tag)::type, typename decltype(y_tag)::type>);
    });
}

}  // namespace smx::cuda
