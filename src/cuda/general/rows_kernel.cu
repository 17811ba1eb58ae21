// rows_kernel.cu - the general family's batch-invariant order on Rows problems, with each thread's values
// held in registers. The row's thread group, the elements each thread takes (lane, lane + group, ...), the
// steps of kGeneralUnroll values, the running statistics' formulas and the group's combine are general_rows'
// (kernel.cu), so a row's bits are those the general kernel gives it in any layout. What differs is how x is
// reached: the row starts at row times its row stride (no divmod chain), the whole share of x is loaded
// before any of it is used and kept for the output, so x is read once (general_rows reads it twice).
// Traffic: read |x|, write |y|. Rows needing more than kHeldSteps steps a thread take general_rows.
#include "cuda/common/options.cuh"
#include "cuda/common/reduce.cuh"
#include "cuda/general/params.hpp"

namespace smx::cuda {
namespace {

// kGroupSize: the threads of a row (32, or the whole block of kGeneralThreads), fixed at compile time so that
// every held value's offset in the row is an immediate.
template <class X, class Y, int kGroupSize, int kHeldSteps>
__global__ void __launch_bounds__(kGeneralThreads) general_rows_options(const GeneralOptionsParams args) {
    // One segment of segmented_stats: the general kernel's sums then take the same additions.
    static_assert(kHeldSteps <= kSegmentSteps, "held steps within one segment");
    using C = PairComputeType<X, Y>;
    __shared__ Stats<C> scratch[32];
    const GeneralParams& general = args.general;
    const OptionsInput<C> input{args.options, general.index_ndim, general.index_shape, general.row_len};
    const MaskedForwardOutput output{general.log_mode != 0, args.options.zero_rows != 0};
    const X* x = static_cast<const X*>(general.x);
    Y* y = static_cast<Y*>(general.y);
    constexpr bool kWholeBlock = kGroupSize == kGeneralThreads;
    constexpr int kRowsPerBlock = kGeneralThreads / kGroupSize;
    // Positions in 32 bits: the held instances take rows of at most kHeldSteps steps of the block's threads.
    constexpr int kStep = kGroupSize * kGeneralUnroll;
    const int group = threadIdx.x / kGroupSize;
    const int lane = threadIdx.x % kGroupSize;

    // The loop bound is per block so every thread reaches every barrier and shuffle.
    for (std::int64_t block_row = static_cast<std::int64_t>(blockIdx.x) * kRowsPerBlock; block_row < general.rows;
         block_row += static_cast<std::int64_t>(gridDim.x) * kRowsPerBlock) {
        const std::int64_t row = block_row + group;
        const bool row_valid = row < general.rows;
        const std::int64_t bound_row = row_valid ? row : 0;
        const X* x_row = x + bound_row * general.x_index_strides[0];
        Y* y_row = y + bound_row * general.y_index_strides[0];
        const OptionsRowInput<C> row_input = bind_rows_row(input, bound_row);
        const int row_end = row_valid ? static_cast<int>(general.row_len) : 0;  // an invalid row adds nothing

        // Every load first (excluded and padding elements are never read), then the steps in order.
        C values[kHeldSteps][kGeneralUnroll];
#pragma unroll
        for (int s = 0; s < kHeldSteps; ++s) {
#pragma unroll
            for (int u = 0; u < kGeneralUnroll; ++u) {
                const int position = lane + s * kStep + u * kGroupSize;
                values[s][u] = position < row_end && row_input.kept(position)
                                   ? row_input(C(to_compute(x_row[position])), position)
                                   : neg_inf<C>();
            }
        }
        Stats<C> stats = empty_stats<C>();
#pragma unroll
        for (int s = 0; s < kHeldSteps; ++s) {
            if (lane + s * kStep < row_end) add_chunk<kGeneralUnroll>(stats, values[s]);
        }
        stats = kWholeBlock ? block_combine_stats(stats, scratch) : warp_combine_stats(stats);
        if (!row_valid) continue;

        // Each is used by one mode only: the other's per-row cost is skipped.
        const C inverse_sum = output.log ? C(0) : C(1) / stats.sum;
        const C log_sum = output.log ? log_of(stats.sum) : C(0);
#pragma unroll
        for (int s = 0; s < kHeldSteps; ++s) {
#pragma unroll
            for (int u = 0; u < kGeneralUnroll; ++u) {
                const int position = lane + s * kStep + u * kGroupSize;
                if (position >= row_end) continue;
                y_row[position] = StoreAs<Y>::from(row_input.kept(position)
                                                       ? output.element_from_value(values[s][u], stats.max, inverse_sum, log_sum)
                                                       : output.excluded(stats));
            }
        }
    }
}

template <class X, class Y, int kGroupSize>
const void* held_instance(int held_steps) {
    switch (held_steps) {
        case 1: return reinterpret_cast<const void*>(&general_rows_options<X, Y, kGroupSize, 1>);
        case 2: return reinterpret_cast<const void*>(&general_rows_options<X, Y, kGroupSize, 2>);
        case 4: return reinterpret_cast<const void*>(&general_rows_options<X, Y, kGroupSize, 4>);
        case 8: return reinterpret_cast<const void*>(&general_rows_options<X, Y, kGroupSize, 8>);
        case 16: return reinterpret_cast<const void*>(&general_rows_options<X, Y, kGroupSize, 16>);
        default: return nullptr;
    }
}

}  // namespace

const void* general_rows_options_kernel(smxDataType_t x_dtype, smxDataType_t y_dtype, int threads_per_row,
                                        int held_steps) {
    return visit_any_dtype_pair(x_dtype, y_dtype, [&](auto x_tag, auto y_tag) -> const void* {
        using X = typename decltype(x_tag)::type;
        using Y = typename decltype(y_tag)::type;
        if constexpr (kRowsOptionsPair<X, Y>) {
            // A block's row has 2048+ elements (general.block_row_len): at least 2 steps.
            if (threads_per_row == 32) return held_instance<X, Y, 32>(held_steps);
            if (threads_per_row == kGeneralThreads && held_steps > 1) return held_instance<X, Y, kGeneralThreads>(held_steps);
            return nullptr;
        } else {
            return nullptr;
        }
    });
}

}  // namespace smx::cuda
