// general.cu - backward-general: any strides (General layout), and every dtype combination with f64 on some
// side but not all (computed in double) whatever the layout. A group of threads_per_row threads (a warp, or
// the whole block for long rows) per row; the row's start in each operand from its collapsed multi-index (a
// 64-bit divmod chain over index_ndim <= 7 dims), elements axis_stride apart. Pass 1 sums the row's terms
// (in segments), pass 2 reads dy and y again and writes dx. Traffic: dy and y read twice (the second mostly
// from L2: a group's row was just read), dx written once, uncoalesced unless the strides happen to be
// friendly: slower, but right for every layout. Design: performance.md#backward.
//
// With the forward's options (backward_general_options): the row binds its options as the forward's general
// body does (common/options.cuh); the sums run over the kept elements, dx is the row's scale times the formula
// there and 0 at excluded elements, which are never read, and with masked rows zero a row whose forward had
// nothing to normalize (every kept y 0, log-softmax -inf) gets 0.
#include "cuda/backward/common.cuh"
#include "cuda/common/options.cuh"

namespace smx::cuda {
namespace {

// Elements in flight per thread and loop step of pass 1.
constexpr int kGeneralUnroll = 4;

// The body for one input: PlainInput (every element kept, no scale) or the options' OptionsInput.
// `zero_rows`: masked rows zero (options only).
template <class T, class D, class Input>
__device__ __forceinline__ void backward_general_rows(const BackwardGeneralParams& args, const Input& input,
                                                      bool zero_rows) {
    using C = PairComputeType<T, D>;  // double where either side is f64
    // Only the options' row input excludes elements, so it alone scales and has masked rows.
    constexpr bool kOptions = decltype(bind_row(input, 0))::kMayExclude;
    __shared__ C warp_sums[32];
    const GradientOutput gradient{args.log_mode != 0};
    [[maybe_unused]] const C empty_y = args.log_mode != 0 ? neg_inf<C>() : C(0);  // the forward's y in a masked row
    const T* dy = static_cast<const T*>(args.dy);
    const T* y = static_cast<const T*>(args.y);
    D* dx = static_cast<D*>(args.dx);
    const int group_size = args.threads_per_row;  // 32, or blockDim.x
    const bool whole_block = group_size == static_cast<int>(blockDim.x);
    const int rows_per_block = blockDim.x / group_size;
    const int group = threadIdx.x / group_size;
    const int lane = threadIdx.x % group_size;
    const auto value = [](const T* source, std::int64_t at) { return C(to_compute(source[at])); };

    // The loop bound is per block so every thread reaches every barrier and shuffle.
    for (std::int64_t block_row = static_cast<std::int64_t>(blockIdx.x) * rows_per_block; block_row < args.rows;
         block_row += static_cast<std::int64_t>(gridDim.x) * rows_per_block) {
        const std::int64_t row = block_row + group;
        const bool row_valid = row < args.rows;
        std::int64_t dy_offset = 0, y_offset = 0, dx_offset = 0;
        std::int64_t rest = row_valid ? row : 0;
        for (int d = args.index_ndim - 1; d >= 0; --d) {
            const std::int64_t index = rest % args.index_shape[d];
            rest /= args.index_shape[d];
            dy_offset += index * args.dy_index_strides[d];
            y_offset += index * args.y_index_strides[d];
            dx_offset += index * args.dx_index_strides[d];
        }
        const T* dy_row = dy + dy_offset;
        const T* y_row = y + y_offset;
        D* dx_row = dx + dx_offset;
        const auto row_input = bind_row(input, row_valid ? row : 0);

        const std::int64_t row_end = row_valid ? args.row_len : 0;  // an invalid row adds nothing
        const std::int64_t step = static_cast<std::int64_t>(group_size) * kGeneralUnroll;
        [[maybe_unused]] int normalized = 0;  // options: some kept y differs from empty_y
        C sum = segmented_sum<C>(lane, row_end, step, [&](std::int64_t j) {
            C terms = C(0);
#pragma unroll
            for (int u = 0; u < kGeneralUnroll; ++u) {
                const std::int64_t at = j + static_cast<std::int64_t>(u) * group_size;
                // An excluded element (options) is never read: it adds nothing, as padding does.
                if (at < row_end && row_input.kept(at)) {
                    const C y_value = value(y_row, at * args.y_axis_stride);
                    terms += gradient.term(value(dy_row, at * args.dy_axis_stride), y_value);
                    if constexpr (kOptions) normalized |= y_value != empty_y;
                }
            }
            return terms;
        });
        sum = whole_block ? block_sum(sum, warp_sums) : group_sum<32>(sum);
        if constexpr (kOptions) normalized = whole_block ? __syncthreads_or(normalized) : __any_sync(0xffffffffu, normalized);
        if (!row_valid) continue;
        const bool zero_row = kOptions && zero_rows && normalized == 0;
        for (std::int64_t j = lane; j < args.row_len; j += group_size) {
            C out = C(0);
            if (!zero_row && row_input.kept(j)) {
                out = gradient.element(value(dy_row, j * args.dy_axis_stride), value(y_row, j * args.y_axis_stride), sum);
                if constexpr (kOptions) out *= row_input.scale;
            }
            dx_row[j * args.dx_axis_stride] = StoreAs<D>::from(out);
        }
    }
}

template <class T, class D>
__global__ void __launch_bounds__(kBackwardGeneralThreads) backward_general(const ParamBlock<BackwardGeneralParams> args) {
    backward_general_rows<T, D>(args, PlainInput{}, false);
}

// With the forward's options: exclusion, scale and masked rows (common/options.cuh binds each row's).
template <class T, class D>
__global__ void __launch_bounds__(kBackwardGeneralThreads) backward_general_options(const BackwardGeneralOptionsParams args) {
    using C = PairComputeType<T, D>;
    const BackwardGeneralParams& general = args.general;
    backward_general_rows<T, D>(general, OptionsInput<C>{args.options, general.index_ndim, general.index_shape, general.row_len},
                                args.options.zero_rows != 0);
}

}  // namespace

const void* backward_general_kernel(smxDataType_t value_dtype, smxDataType_t gradient_dtype) {
    return visit_any_dtype_pair(value_dtype, gradient_dtype, [](auto t_tag, auto d_tag) -> const void* {
        return reinterpret_cast<const void*>(
            &backward_general<typename decltype(t_tag)::type, typename decltype(d_tag)::type>);
    });
}

const void* backward_general_options_kernel(smxDataType_t value_dtype, smxDataType_t gradient_dtype) {
    return visit_any_dtype_pair(value_dtype, gradient_dtype, [](auto t_tag, auto d_tag) -> const void* {
        return reinterpret_cast<const void*>(
            &backward_general_options<typename decltype(t_tag)::type, typename decltype(d_tag)::type>);
    });
}

}  // namespace smx::cuda
