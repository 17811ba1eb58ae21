// params.hpp - the block-regs family's face towards the plan: its parameter struct, instance getters and the
// constants its instances are compiled with. Plain C++: no CUDA types.
// The family: rows held in REGISTERS by one CTA or by C CTAs per row, whose statistics meet either in a
// thread-block cluster (DSMEM; "block-regs") or through the workspace behind a grid barrier of a cooperative
// launch ("grid-regs", optionally in row steps). x read once, y written once.
// Measurements: performance.md#block-regs and performance.md#grid-regs.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "cuda/common/options.hpp"
#include "cuda/common/param_block.hpp"
#include "smx/smx.h"

namespace smx::cuda {

struct BlockRegsParams {
    const void* x = nullptr;
    void* y = nullptr;
    void* workspace = nullptr;     // grid-regs: (max, sum) partials of every CTA
    std::int64_t rows = 0;
    std::int64_t row_len = 0;
    std::int64_t x_row_stride = 0;
    std::int64_t y_row_stride = 0;
    std::int64_t slice_len = 0;    // elements per CTA of a row
    std::int64_t chunks = 0;       // > 0: grid-regs with this many CTAs per row; 0: a cluster per row
    std::int64_t row_steps = 1;    // grid-regs steps: rows each group of `chunks` CTAs takes in turn
    int log_mode = 0;              // 1: log-softmax
    RowsOptionsParams options;     // read by the options instances only (last: the plain ones' offsets stay)

    void bind(const void* x_pointer, void* y_pointer, void* workspace_pointer, std::size_t, std::size_t) {
        x = x_pointer;
        y = y_pointer;
        workspace = workspace_pointer;
    }
};

// Values per thread the kernel is instantiated with, ascending (f64: 8 and 16 only; 64: 16-bit x only, held
// packed two to a register).
constexpr std::array<int, 4> kBlockRegsValueCounts{{8, 16, 32, 64}};
constexpr int kBlockRegsMaxThreads = 1024;
// Options instances exist up to this many values per thread, widened. The packed 64-value hold (16-bit x) has
// options instances for the unmasked set, which reads no mask, and for the additive set of 16-bit y, whose mask
// waits in shared memory (block_regs_stages_mask; docs/cuda-kernels.md, "Additive masks on the packed hold").
constexpr int kBlockRegsOptionsMaxValues = 32;
// Values per thread of the packed hold.
constexpr int kBlockRegsPackedValues = 64;
// Values per thread of f32 x's additive instance whose mask waits in shared memory (block_regs_stages_mask).
constexpr int kBlockRegsStagedF32Values = 32;

// Whether the block-regs options instance of `values` per thread for `set` and an x and y of x_size and y_size
// bytes stages its mask in dynamic shared memory: x held in registers as plain holds it, its mask copied into
// shared memory with it instead of into registers. The additive set's packed hold of 16-bit x and y reads the
// mask there at each use of a value; f32 x's 32 widened values read it once, as they are widened
// (docs/cuda-kernels.md, "Additive masks on the packed hold" and "f32 additive masks staged").
constexpr bool block_regs_stages_mask(int values, RowsOptionSet set, std::size_t x_size, std::size_t y_size) {
    if (set != RowsOptionSet::AdditiveOfX) return false;
    const bool packed_16_bit = values == kBlockRegsPackedValues && x_size == 2 && y_size == 2;
    const bool widened_f32 = values == kBlockRegsStagedF32Values && x_size == 4;
    return packed_16_bit || widened_f32;
}

// Dynamic shared memory of such an instance's CTA of `threads` at `values` per thread: its slice's mask, an
// element of x's x_size bytes for each value.
constexpr std::size_t block_regs_mask_stage_bytes(int threads, int values, std::size_t x_size) {
    return static_cast<std::size_t>(threads) * static_cast<std::size_t>(values) * x_size;
}
constexpr int kBlockRegsMaxCluster = 16;  // above 8 needs cudaFuncAttributeNonPortableClusterSizeAllowed

// nullptr also when `values_per_thread` has no instance for x_dtype.
const void* block_regs_softmax_kernel(smxDataType_t x_dtype, smxDataType_t y_dtype, int values_per_thread);
// The options instance (RowsOptionsInput) of the same for option set `set`, for block-regs and grid-regs plans;
// nullptr also for pairs without options instances (kRowsOptionsPair).
const void* block_regs_softmax_options_kernel(smxDataType_t x_dtype, smxDataType_t y_dtype, int values_per_thread,
                                              RowsOptionSet set);
// f32 x's additive set at kBlockRegsStagedF32Values values per thread, its mask staged in dynamic shared memory
// (block_regs_stages_mask), for softmax or log-softmax (`log_mode`: a kernel per mode) and the block-regs search
// that asks for it alone (block_regs_softmax_options_kernel has no 32-value additive instance for f32 x); nullptr
// for other x and for pairs without options instances.
const void* block_regs_staged_mask_kernel(smxDataType_t x_dtype, smxDataType_t y_dtype, bool log_mode);
// The unmasked set's softmax with its scale folded into the exps, in a kernel of its own (f32 x at 32 values,
// 16-bit x at the packed 64; nullptr for other pairs and value counts, which fold inside their options instance
// or not at all). For softmax only, with options whose scale folds (rows_scale_folds).
const void* block_regs_softmax_folded_kernel(smxDataType_t x_dtype, smxDataType_t y_dtype, int values_per_thread);
// The unmasked set's softmax with each row's own scale folded into its exps, for per-row scales (f32 x at 32
// values, 16-bit x at 64; nullptr for other pairs and value counts, which multiply in their options instance).
const void* block_regs_softmax_row_folded_kernel(smxDataType_t x_dtype, smxDataType_t y_dtype, int values_per_thread);
// Grid-regs' instance of the unmasked set for 16-bit x at 16 values, in place of the options instance: x's loads go
// first, for registers the shared instance has no room for (nullptr for other pairs and value counts).
const void* grid_regs_loads_first_options_kernel(smxDataType_t x_dtype, smxDataType_t y_dtype, int values_per_thread);
// The packed hold's folded softmax (`row_folded`: its per-row folded one) with x's loads issued first, for cluster
// plans whose clusters are all resident at once (16-bit x and y at 64 values; nullptr for other pairs and counts).
const void* block_regs_packed_loads_first_kernel(smxDataType_t x_dtype, smxDataType_t y_dtype, int values_per_thread,
                                                bool row_folded);
// Grid-regs' per-row folded softmax of 16-bit x and y at 32 values with x's loads first, in place of the row-folded
// instance where its CTAs all fit (nullptr for other pairs and value counts).
const void* grid_regs_row_folded_loads_first_kernel(smxDataType_t x_dtype, smxDataType_t y_dtype, int values_per_thread);

// The kernel as grid-regs with row steps (params.row_steps), instantiated at kGridRegsStepsValues values per
// thread for f32 x only (nullptr for other x). A step's CTAs fold at most kGridRegsStepsMaxChunks partials.
constexpr int kGridRegsStepsValues = 32;
constexpr int kGridRegsStepsMaxChunks = 512;
const void* grid_regs_steps_kernel(smxDataType_t x_dtype, smxDataType_t y_dtype);
// Its options instances of the unmasked option set (scale, causal window, masked rows), for the pairs of
// kRowsOptionsPair with f32 x (nullptr for others): `fold` takes the softmax instance with the launch's scale
// folded into the exps (RowsOptionsParams::fold_scale), else the one that multiplies, for both modes.
const void* grid_regs_steps_options_kernel(smxDataType_t x_dtype, smxDataType_t y_dtype, bool fold);
// Dynamic shared memory the row-steps kernel needs for slices of `slice_len` elements: the slice staged by a
// bulk copy one step ahead where x's packs are 16 bytes (x at least as wide as y), else 0.
std::size_t grid_regs_steps_shared_bytes(smxDataType_t x_dtype, smxDataType_t y_dtype, std::int64_t slice_len);

}  // namespace smx::cuda
