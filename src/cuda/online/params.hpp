// params.hpp - the two-pass row families' face towards the plan (Rows layout, rows too long for registers):
//   block-online  one CTA per row (grid-stride over rows): online (max, sum), then a second read of x;
//   split-row     few very long rows cut into chunks, a CTA per (chunk, row), in two kernels whose chunk
//                 statistics pass through the workspace.
// Traffic: x read twice (the second often from L2), y written once. Measurements: performance.md#block-online,
// performance.md#split-row. split-row also has options instances (the unmasked set). Plain C++: no CUDA types.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cuda/common/options.hpp"
#include "cuda/common/param_block.hpp"
#include "smx/smx.h"

namespace smx::cuda {

struct OnlineRowsParams {
    const void* x = nullptr;
    void* y = nullptr;
    void* workspace = nullptr;     // split-row: (max, sum) per chunk of every row
    std::int64_t rows = 0;
    std::int64_t row_len = 0;
    std::int64_t x_row_stride = 0;
    std::int64_t y_row_stride = 0;
    std::int64_t slice_len = 0;    // split-row: elements per chunk
    std::int64_t chunks = 0;       // split-row: chunks per row
    int log_mode = 0;              // 1: log-softmax
    RowsOptionsParams options;     // read by split-row's options instances only (last: the plain ones' offsets stay)

    void bind(const void* x_pointer, void* y_pointer, void* workspace_pointer, std::size_t, std::size_t) {
        x = x_pointer;
        y = y_pointer;
        workspace = workspace_pointer;
    }
};

constexpr int kOnlineThreads = 512;  // block-online's CTA

const void* block_online_softmax_kernel(smxDataType_t x_dtype, smxDataType_t y_dtype);
const void* split_row_stats_kernel(smxDataType_t x_dtype, smxDataType_t y_dtype);
const void* split_row_write_kernel(smxDataType_t x_dtype, smxDataType_t y_dtype);
// split-row's options instances of the unmasked option set (scale, causal window, masked rows) for the pairs of
// kRowsOptionsPair (nullptr for others): `fold` takes the instance with the launch's scale folded into the exps
// (RowsOptionsParams::fold_scale), which for the write kernel writes softmax only.
const void* split_row_stats_options_kernel(smxDataType_t x_dtype, smxDataType_t y_dtype, bool fold);
const void* split_row_write_options_kernel(smxDataType_t x_dtype, smxDataType_t y_dtype, bool fold);

}  // namespace smx::cuda
