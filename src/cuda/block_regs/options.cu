// options.cu - the block-regs family's options instances (RowsOptionsInput, every RowsOptionSet) for the pairs of
// kRowsOptionsPair: block-regs and grid-regs plans of problems with options (Rows layout); f32 x's additive
// instance with its mask staged; grid-regs-steps' instances of the unmasked set; grid-regs' loads-first instances
// of 16-bit x; the per-row folded instances.
#include "cuda/block_regs/kernel.cuh"

namespace smx::cuda {

const void* block_regs_softmax_options_kernel(smxDataType_t x_dtype, smxDataType_t y_dtype, int values_per_thread,
                                              RowsOptionSet set) {
    return visit_dtype_pair(x_dtype, y_dtype, [values_per_thread, set](auto x_tag, auto y_tag) -> const void* {
        return block_regs_instance<typename decltype(x_tag)::type, typename decltype(y_tag)::type, true>(values_per_thread,
                                                                                                       set);
    });
}

const void* block_regs_staged_mask_kernel(smxDataType_t x_dtype, smxDataType_t y_dtype, bool log_mode) {
    return visit_dtype_pair(x_dtype, y_dtype, [log_mode](auto x_tag, auto y_tag) -> const void* {
        return block_regs_staged_mask_instance<typename decltype(x_tag)::type, typename decltype(y_tag)::type>(log_mode);
    });
}

const void* grid_regs_steps_options_kernel(smxDataType_t x_dtype, smxDataType_t y_dtype, bool fold) {
    return visit_dtype_pair(x_dtype, y_dtype, [fold](auto x_tag, auto y_tag) -> const void* {
        return block_regs_steps_instance<typename decltype(x_tag)::type, typename decltype(y_tag)::type, true>(fold);
    });
}

const void* block_regs_softmax_folded_kernel(smxDataType_t x_dtype, smxDataType_t y_dtype, int values_per_thread) {
    return visit_dtype_pair(x_dtype, y_dtype, [values_per_thread](auto x_tag, auto y_tag) -> const void* {
        return block_regs_folded_instance<typename decltype(x_tag)::type, typename decltype(y_tag)::type>(values_per_thread);
    });
}

const void* grid_regs_loads_first_options_kernel(smxDataType_t x_dtype, smxDataType_t y_dtype, int values_per_thread) {
    return visit_dtype_pair(x_dtype, y_dtype, [values_per_thread](auto x_tag, auto y_tag) -> const void* {
        return block_regs_loads_first_instance<typename decltype(x_tag)::type, typename decltype(y_tag)::type>(
            values_per_thread);
    });
}

const void* block_regs_packed_loads_first_kernel(smxDataType_t x_dtype, smxDataType_t y_dtype, int values_per_thread,
                                                bool row_folded) {
    return visit_dtype_pair(x_dtype, y_dtype, [values_per_thread, row_folded](auto x_tag, auto y_tag) -> const void* {
        return block_regs_packed_loads_first_instance<typename decltype(x_tag)::type, typename decltype(y_tag)::type>(
            values_per_thread, row_folded);
    });
}

const void* grid_regs_row_folded_loads_first_kernel(smxDataType_t x_dtype, smxDataType_t y_dtype, int values_per_thread) {
    return visit_dtype_pair(x_dtype, y_dtype, [values_per_thread](auto x_tag, auto y_tag) -> const void* {
        return block_regs_row_folded_loads_first_instance<typename decltype(x_tag)::type, typename decltype(y_tag)::type>(
            values_per_thread);
    });
}

const void* block_regs_softmax_row_folded_kernel(smxDataType_t x_dtype, smxDataType_t y_dtype, int values_per_thread) {
    return visit_dtype_pair(x_dtype, y_dtype, [values_per_thread](auto x_tag, auto y_tag) -> const void* {
        return block_regs_row_folded_instance<typename decltype(x_tag)::type, typename decltype(y_tag)::type>(
            values_per_thread);
    });
}

}  // namespace smx::cuda
