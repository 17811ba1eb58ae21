// rows_kernel.cu - the general family's batch-invariant order on Rows problems, with each thread's values
// held in registers. The row's thread group, the elements each thread takes (lane, lane + group, ...), the
// steps of kGeneralUnroll values, the running statistics' formulas and the group's combine are general_rows'
// (kernel.cu), so a row's bits are those the general kernel gives it in any layout. What differs is how x is
// reached: the row starts at row times its row stride (no divmod chain), the whole share of x is loaded
// before any of it is used and kept for the output, so x is read once (general_rows reads it twice).
// Traffic: read |x|, write |y|. Rows needing more than the largest instance's steps a thread take the
// streamed kernel below: the same order a window of steps at a time, x read twice.
#include "cuda/common/options.cuh"
#include "cuda/common/reduce.cuh"
#include "cuda/general/params.hpp"

namespace smx::cuda {
namespace {

// z of the row's element at `position` (32- or 64-bit), -inf where excluded or at or past row_end (never read).
template <class C, class X, class Position>
__device__ __forceinline__ C row_value(const X* x_row, const OptionsRowInput<C>& row_input, Position position,
                                       Position row_end) {
    return position < row_end && row_input.kept(position) ? row_input(C(to_compute(x_row[position])), position)
                                                          : neg_inf<C>();
}

// z of kSteps steps of a thread's values, the element of step s and unroll slot u at first + s * kGroupSize *
// kGeneralUnroll + u * kGroupSize (-inf where excluded or at or past row_end). kLoadsAhead: every raw x load is
// issued before any is converted, so the thread's loads are in flight together; with row_value per element
// the kept test and the transform branch around each load, and each load's use right after it made every
// load wait for the one before (issue 53). Either way each z is the same arithmetic on the same x.
template <bool kLoadsAhead, int kSteps, int kGroupSize, class C, class X, class Position>
__device__ __forceinline__ void load_steps(const X* x_row, const OptionsRowInput<C>& row_input, Position first,
                                           Position row_end, C (&values)[kSteps][kGeneralUnroll]) {
    constexpr Position kStep = kGroupSize * kGeneralUnroll;
    if constexpr (kLoadsAhead) {
        // Past the causal window nothing is kept, so nothing there is read; a boolean mask's excluded elements
        // are (inside the row), as one predicate per load keeps the loads free of branches.
        const std::int64_t window_end = row_input.last_kept + 1;
        const Position read_end = window_end < row_end ? static_cast<Position>(window_end) : row_end;
        X raw[kSteps][kGeneralUnroll];
#pragma unroll
        for (int s = 0; s < kSteps; ++s) {
#pragma unroll
            for (int u = 0; u < kGeneralUnroll; ++u) {
                const Position position = first + s * kStep + u * kGroupSize;
                raw[s][u] = position < read_end ? x_row[position] : X();
            }
        }
#pragma unroll
        for (int s = 0; s < kSteps; ++s) {
#pragma unroll
            for (int u = 0; u < kGeneralUnroll; ++u) {
                const Position position = first + s * kStep + u * kGroupSize;
                values[s][u] = position < row_end && row_input.kept(position)
                                   ? row_input(C(to_compute(raw[s][u])), position)
                                   : neg_inf<C>();
            }
        }
    } else {
#pragma unroll
        for (int s = 0; s < kSteps; ++s) {
#pragma unroll
            for (int u = 0; u < kGeneralUnroll; ++u) {
                values[s][u] = row_value(x_row, row_input, first + s * kStep + u * kGroupSize, row_end);
            }
        }
    }
}

// A row's output once its statistics are known: general_rows' formulas, the factor of the other mode skipped.
template <class C>
struct RowOutput {
    const MaskedForwardOutput& output;
    Stats<C> stats;
    C inverse_sum;
    C log_sum;

    __device__ __forceinline__ RowOutput(const MaskedForwardOutput& formulas, Stats<C> row_stats)
        : output(formulas), stats(row_stats), inverse_sum(formulas.log ? C(0) : C(1) / row_stats.sum),
          log_sum(formulas.log ? log_of(row_stats.sum) : C(0)) {}

    // Writes y at `position` from z held there.
    template <class Y, class Position>
    __device__ __forceinline__ void write(Y* y_row, const OptionsRowInput<C>& row_input, Position position, C value) const {
        y_row[position] = StoreAs<Y>::from(row_input.kept(position)
                                               ? output.element_from_value(value, stats.max, inverse_sum, log_sum)
                                               : output.excluded(stats));
    }
};

// kGroupSize: the threads of a row (32, or the whole block of kGeneralThreads), fixed at compile time so that
// every held value's offset in the row is an immediate. kLoadsAhead: load_steps'.
template <class X, class Y, int kGroupSize, int kHeldSteps, bool kLoadsAhead>
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

        // Every load first (padding and elements past the causal window are never read), then the steps in order.
        C values[kHeldSteps][kGeneralUnroll];
        load_steps<kLoadsAhead, kHeldSteps, kGroupSize>(x_row, row_input, lane, row_end, values);
        Stats<C> stats = empty_stats<C>();
#pragma unroll
        for (int s = 0; s < kHeldSteps; ++s) {
            if (lane + s * kStep < row_end) add_chunk<kGeneralUnroll>(stats, values[s]);
        }
        stats = kWholeBlock ? block_combine_stats(stats, scratch) : warp_combine_stats(stats);
        if (!row_valid) continue;

        const RowOutput<C> row_output(output, stats);
#pragma unroll
        for (int s = 0; s < kHeldSteps; ++s) {
#pragma unroll
            for (int u = 0; u < kGeneralUnroll; ++u) {
                const int position = lane + s * kStep + u * kGroupSize;
                if (position < row_end) row_output.write(y_row, row_input, position, values[s][u]);
            }
        }
    }
}

// Rows past the held instances, on a block each: the same order with the share taken a window of
// kGeneralWindowSteps steps at a time, the window's loads issued together before its steps (general_rows
// has one step's loads in flight), and the segments of segmented_stats closed every kSegmentSteps steps as
// there. x is read twice, as general_rows does, the second time a window at a time too. kLoadsAhead:
// load_steps'.
template <class X, class Y, bool kLoadsAhead>
__global__ void __launch_bounds__(kGeneralThreads) general_rows_streamed_options(const GeneralOptionsParams args) {
    static_assert(kSegmentSteps % kGeneralWindowSteps == 0, "segments end at window ends");
    using C = PairComputeType<X, Y>;
    __shared__ Stats<C> scratch[32];
    const GeneralParams& general = args.general;
    const OptionsInput<C> input{args.options, general.index_ndim, general.index_shape, general.row_len};
    const MaskedForwardOutput output{general.log_mode != 0, args.options.zero_rows != 0};
    constexpr std::int64_t kStep = kGeneralThreads * kGeneralUnroll;
    constexpr std::int64_t kWindow = kStep * kGeneralWindowSteps;
    const int lane = threadIdx.x;

    for (std::int64_t row = blockIdx.x; row < general.rows; row += gridDim.x) {
        const X* x_row = static_cast<const X*>(general.x) + row * general.x_index_strides[0];
        Y* y_row = static_cast<Y*>(general.y) + row * general.y_index_strides[0];
        const OptionsRowInput<C> row_input = bind_rows_row(input, row);
        const std::int64_t row_end = general.row_len;

        Stats<C> total = empty_stats<C>();
        Stats<C> segment = empty_stats<C>();
        bool first_segment = true;  // segmented_stats' first segment is the total itself, no combine
        int segment_steps = 0;
        for (std::int64_t first = lane; first < row_end; first += kWindow) {
            C values[kGeneralWindowSteps][kGeneralUnroll];
            load_steps<kLoadsAhead, kGeneralWindowSteps, kGeneralThreads>(x_row, row_input, first, row_end, values);
#pragma unroll
            for (int s = 0; s < kGeneralWindowSteps; ++s) {
                if (first + s * kStep < row_end) add_chunk<kGeneralUnroll>(segment, values[s]);
            }
            segment_steps += kGeneralWindowSteps;
            if (segment_steps == kSegmentSteps) {
                total = first_segment ? segment : combine(total, segment);
                first_segment = false;
                segment = empty_stats<C>();
                segment_steps = 0;
            }
        }
        if (first_segment || segment_steps > 0) total = first_segment ? segment : combine(total, segment);

        const RowOutput<C> row_output(output, block_combine_stats(total, scratch));
        for (std::int64_t first = lane; first < row_end; first += kWindow) {
            C values[kGeneralWindowSteps][kGeneralUnroll];
            load_steps<kLoadsAhead, kGeneralWindowSteps, kGeneralThreads>(x_row, row_input, first, row_end, values);
#pragma unroll
            for (int s = 0; s < kGeneralWindowSteps; ++s) {
#pragma unroll
                for (int u = 0; u < kGeneralUnroll; ++u) {
                    const std::int64_t position = first + s * kStep + u * kGeneralThreads;
                    if (position < row_end) row_output.write(y_row, row_input, position, values[s][u]);
                }
            }
        }
    }
}

template <class X, class Y, int kGroupSize, bool kLoadsAhead>
const void* held_instance(int held_steps) {
    switch (held_steps) {
        case 1: return reinterpret_cast<const void*>(&general_rows_options<X, Y, kGroupSize, 1, kLoadsAhead>);
        case 2: return reinterpret_cast<const void*>(&general_rows_options<X, Y, kGroupSize, 2, kLoadsAhead>);
        case 4: return reinterpret_cast<const void*>(&general_rows_options<X, Y, kGroupSize, 4, kLoadsAhead>);
        case 8: return reinterpret_cast<const void*>(&general_rows_options<X, Y, kGroupSize, 8, kLoadsAhead>);
        case 16: return reinterpret_cast<const void*>(&general_rows_options<X, Y, kGroupSize, 16, kLoadsAhead>);
        default: return nullptr;
    }
}

template <class X, class Y, int kGroupSize>
const void* held_instance(int held_steps, bool loads_ahead) {
    return loads_ahead ? held_instance<X, Y, kGroupSize, true>(held_steps)
                       : held_instance<X, Y, kGroupSize, false>(held_steps);
}

}  // namespace

const void* general_rows_streamed_options_kernel(smxDataType_t x_dtype, smxDataType_t y_dtype, bool loads_ahead) {
    return visit_any_dtype_pair(x_dtype, y_dtype, [&](auto x_tag, auto y_tag) -> const void* {
        using X = typename decltype(x_tag)::type;
        using Y = typename decltype(y_tag)::type;
        if constexpr (kRowsOptionsPair<X, Y>) {
            return loads_ahead ? reinterpret_cast<const void*>(&general_rows_streamed_options<X, Y, true>)
                               : reinterpret_cast<const void*>(&general_rows_streamed_options<X, Y, false>);
        } else {
            return nullptr;
        }
    });
}

const void* general_rows_options_kernel(smxDataType_t x_dtype, smxDataType_t y_dtype, int threads_per_row,
                                        int held_steps, bool loads_ahead) {
    return visit_any_dtype_pair(x_dtype, y_dtype, [&](auto x_tag, auto y_tag) -> const void* {
        using X = typename decltype(x_tag)::type;
        using Y = typename decltype(y_tag)::type;
        if constexpr (kRowsOptionsPair<X, Y>) {
            // A block's row has 2048+ elements (general.block_row_len): at least 2 steps.
            if (threads_per_row == 32) return held_instance<X, Y, 32>(held_steps, loads_ahead);
            if (threads_per_row == kGeneralThreads && held_steps > 1) {
                return held_instance<X, Y, kGeneralThreads>(held_steps, loads_ahead);
            }
            return nullptr;
        } else {
            return nullptr;
        }
    });
}

}  // namespace smx::cuda
