// kernel.cu - the general family: General layout (any strides): a group of threads_per_row threads (a warp, or the
// whole block for long rows) per row. The row's start comes from its collapsed multi-index (a 64-bit
// divmod chain over index_ndim <= 7 dims); elements sit axis_stride apart. Online (max, sum) in one pass,
// then a second pass re-reads x and writes y. Traffic: x read twice, y written once; uncoalesced unless
// the strides happen to be friendly: slower, but right for every layout, and every dtype pair (computed in
// double where either side is f64). Long rows are summed in segments (segmented_stats) for accuracy:
// performance.md#general.
#include "cuda/common/epilogue.cuh"
#include "cuda/common/options.cuh"
#include "cuda/common/reduce.cuh"
#include "cuda/general/params.hpp"

namespace smx::cuda {
namespace {

// The body for one input transform and one output formula (common/epilogue.cuh; with the options' row input
// and excluded-element rule, common/options.cuh).
template <class X, class Y, class Input, class Output>
__device__ __forceinline__ void general_rows(const GeneralParams& args, const Input& input, const Output& output) {
    using C = PairComputeType<X, Y>;  // double for pairs with f64 on either side
    __shared__ Stats<C> scratch[32];
    const X* x = static_cast<const X*>(args.x);
    Y* y = static_cast<Y*>(args.y);
    const int group_size = args.threads_per_row;  // 32, or blockDim.x
    const bool whole_block = group_size == static_cast<int>(blockDim.x);
    const int rows_per_block = blockDim.x / group_size;
    const int group = threadIdx.x / group_size;
    const int lane = threadIdx.x % group_size;

    // The loop bound is per block so every thread reaches every barrier and shuffle.
    for (std::int64_t block_row = static_cast<std::int64_t>(blockIdx.x) * rows_per_block; block_row < args.rows;
         block_row += static_cast<std::int64_t>(gridDim.x) * rows_per_block) {
        const std::int64_t row = block_row + group;
        const bool row_valid = row < args.rows;
        std::int64_t x_offset = 0;
        std::int64_t y_offset = 0;
        std::int64_t rest = row_valid ? row : 0;
        for (int d = args.index_ndim - 1; d >= 0; --d) {
            const std::int64_t index = rest % args.index_shape[d];
            rest /= args.index_shape[d];
            x_offset += index * args.x_index_strides[d];
            y_offset += index * args.y_index_strides[d];
        }
        const X* x_row = x + x_offset;
        Y* y_row = y + y_offset;
        const auto row_input = bind_row(input, row_valid ? row : 0);

        const std::int64_t row_end = row_valid ? args.row_len : 0;  // an invalid row adds nothing
        const std::int64_t step = static_cast<std::int64_t>(group_size) * kGeneralUnroll;
        Stats<C> stats = segmented_stats<C>(lane, row_end, step, [&](std::int64_t j, Stats<C>& segment) {
            C values[kGeneralUnroll];
#pragma unroll
            for (int u = 0; u < kGeneralUnroll; ++u) {
                const std::int64_t position = j + static_cast<std::int64_t>(u) * group_size;
                // An excluded element (options) is never read: it adds nothing, as padding does.
                values[u] = position < args.row_len && row_input.kept(position)
                                ? row_input(C(to_compute(x_row[position * args.x_axis_stride])), position)
                                : neg_inf<C>();
            }
            add_chunk<kGeneralUnroll>(segment, values);
        });
        stats = whole_block ? block_combine_stats(stats, scratch) : warp_combine_stats(stats);
        if (!row_valid) continue;

        const C inverse_sum = C(1) / stats.sum;
        const C log_sum = log_of(stats.sum);
        for (std::int64_t j = lane; j < args.row_len; j += group_size) {
            if constexpr (std::decay_t<decltype(row_input)>::kMayExclude) {
                if (!row_input.kept(j)) {
                    y_row[j * args.y_axis_stride] = StoreAs<Y>::from(output.excluded(stats));
                    continue;
                }
            }
            const C value = row_input(C(to_compute(x_row[j * args.x_axis_stride])), j);
            y_row[j * args.y_axis_stride] = StoreAs<Y>::from(output.element_from_value(value, stats.max, inverse_sum, log_sum));
        }
    }
}

template <class X, class Y>
__global__ void __launch_bounds__(256) general_softmax(const ParamBlock<GeneralParams> args) {
    general_rows<X, Y>(args, PlainInput::of(args), ForwardOutput::of(args));
}

// With options: scale, mask and causal in the input, masked rows in the output (common/options.cuh).
template <class X, class Y>
__global__ void __launch_bounds__(256) general_softmax_options(const GeneralOptionsParams args) {
    using C = PairComputeType<X, Y>;
    const GeneralParams& general = args.general;
    general_rows<X, Y>(general, OptionsInput<C>{args.options, general.index_ndim, general.index_shape, general.row_len},
                       MaskedForwardOutput{general.log_mode != 0, args.options.zero_rows != 0});
}

}  // namespace

const void* general_softmax_options_kernel(smxDataType_t x_dtype, smxDataType_t y_dtype) {
    return visit_any_dtype_pair(x_dtype, y_dtype, [](auto x_tag, auto y_tag) -> const void* {
        return reinterpret_cast<const void*>(
            &general_softmax_options<typename decltype(x_tag)::type, typename decltype(y_tag)::type>);
    });
}

const void* general_softmax_kernel(smxDataType_t x_dtype, smxDataType_t y_dtype) {
    return visit_any_dtype_pair(x_dtype, y_dtype, [](auto x_tag, auto y_tag) -> const void* {
        return reinterpret_cast<const void*>(
            &general_softmax<typename decltype(x_tag)::type, typename decltype(y_tag)::type>);
    });
}

}  // namespace smx::cuda
