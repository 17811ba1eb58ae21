// params.hpp - the general family's face towards the plan: any strides. A warp (or for long rows the whole
// block) per row; the row's start from its collapsed multi-index. Online statistics, then a second read of x.
// Also the family every dtype pair with f64 on one side only runs on. performance.md#general. Plain C++.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cuda/common/options.hpp"
#include "cuda/common/param_block.hpp"
#include "smx/smx.h"

namespace smx::cuda {

struct GeneralParams {
    const void* x = nullptr;
    void* y = nullptr;
    std::int64_t rows = 0;
    std::int64_t row_len = 0;
    std::int64_t x_axis_stride = 1;
    std::int64_t y_axis_stride = 1;
    std::int64_t index_shape[SMX_MAX_DIMS] = {};  // collapsed row index space, outermost first
    std::int64_t x_index_strides[SMX_MAX_DIMS] = {};
    std::int64_t y_index_strides[SMX_MAX_DIMS] = {};
    int index_ndim = 0;
    int threads_per_row = 32;  // 32 (a warp per row) or blockDim.x (a block per row)
    int log_mode = 0;          // 1: log-softmax

    void bind(const void* x_pointer, void* y_pointer, void*, std::size_t, std::size_t) {
        x = x_pointer;
        y = y_pointer;
    }
};

constexpr int kGeneralThreads = 256;
constexpr int kGeneralUnroll = 4;  // elements in flight per thread and loop step (a step's chunk of values)

const void* general_softmax_kernel(smxDataType_t x_dtype, smxDataType_t y_dtype);

// The general family with options: its parameters, the options', and every pointer bound at the call.
struct GeneralOptionsParams {
    GeneralParams general;
    OptionsParams options;
};

// The general kernel with the options' input transform and masked-rows output (one instance per dtype pair;
// the option kinds are read at run time).
const void* general_softmax_options_kernel(smxDataType_t x_dtype, smxDataType_t y_dtype);

// The same order on Rows problems (x, y, the mask's rows contiguous along the axis; a row's operands at row
// times their row stride, index_ndim 1) with each thread's values held in registers: x read once. Instances
// hold kGeneralHeldSteps[i] loop steps of kGeneralUnroll values, for the pairs of the fast families' options
// instances (kRowsOptionsPair) and threads_per_row 32 or kGeneralThreads; nullptr for others. loads_ahead: a
// thread issues every load of its share before converting any (the rule); false: each element loaded,
// tested and transformed in turn, each load waiting for the one before (the structure before issue 53, kept
// for measuring). Both give the same bits.
constexpr int kGeneralHeldSteps[] = {1, 2, 4, 8, 16};
const void* general_rows_options_kernel(smxDataType_t x_dtype, smxDataType_t y_dtype, int threads_per_row,
                                        int held_steps, bool loads_ahead);

// Rows longer than the held instances take (a block each): the same order a window of kGeneralWindowSteps
// steps at a time, x read twice; loads_ahead as above (true: each window's loads in flight together). nullptr
// for pairs without instances.
constexpr int kGeneralWindowSteps = 8;
const void* general_rows_streamed_options_kernel(smxDataType_t x_dtype, smxDataType_t y_dtype, bool loads_ahead);

}  // namespace smx::cuda
