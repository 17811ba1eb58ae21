// spatial_softmax.cu - Spatial layout: the axis is strided and `inner` is contiguous in x and y; element
// (o, j, i) sits at o * outer_stride + j * axis_stride + i. A CTA owns a tile of tile_width (W <= 32)
// inner columns of one outer index: thread t takes column t % W and axis positions t / W, t / W + T / W,
// ... (T threads), so each warp reads 32/W axis positions of W consecutive columns, coalesced. Per-thread
// online (max, sum), combined per column across lanes (shuffles) and warps (shared memory), then a
// second pass re-reads x and writes y. Traffic: x read twice (the second mostly from L2), y written once.
// Narrow inner (< 32) shrinks W and spends the other lanes on the axis instead of idling them.
#include "cuda/softmax_common.cuh"

namespace smx::cuda {
namespace {

constexpr int kSpatialUnroll = 4;  // axis positions in flight per thread and loop step

template <class X, class Y>
__global__ void __launch_bounds__(1024) spatial_softmax(const SoftmaxKernelArgs args) {
    using C = ComputeType<X>;
    __shared__ Stats<C> column_partials[1024];  // [warp][column in tile]
    const X* x = static_cast<const X*>(args.x);
    Y* y = static_cast<Y*>(args.y);
    const int width = args.tile_width;
    const int tid = threadIdx.x;
    const int column_in_tile = tid % width;
    const std::int64_t axis_first = tid / width;
    const std::int64_t axis_step = blockDim.x / width;
    const std::int64_t tiles = (args.rows / args.inner) * args.tiles_per_outer;
    const bool log_mode = args.log_mode != 0;

    for (std::int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        const std::int64_t outer = tile / args.tiles_per_outer;
        const std::int64_t column = (tile % args.tiles_per_outer) * width + column_in_tile;
        const bool column_valid = column < args.inner;
        const X* x_column = x + outer * args.x_outer_stride + (column_valid ? column : 0);
        Y* y_column = y + outer * args.y_outer_stride + (column_valid ? column : 0);

        Stats<C> stats = empty_stats<C>();
        if (column_valid) {
            for (std::int64_t j = axis_first; j < args.row_len; j += axis_step * kSpatialUnroll) {
                C values[kSpatialUnroll];
#pragma unroll
                for (int u = 0; u < kSpatialUnroll; ++u) {
                    const std::int64_t position = j + u * axis_step;
                    values[u] = position < args.row_len ? to_compute(x_column[position * args.x_axis_stride])
                                                        : neg_inf<C>();
                }
                add_chunk<kSpatialUnroll>(stats, values);
            }
        }
        // Lanes of one column within a warp differ by multiples of W: fold them, then fold across warps.
        stats = warp_combine_stats(stats, width);
        const int warp = tid / 32;
        const int lane = tid % 32;
        if (lane < width) column_partials[warp * width + lane] = stats;
        __syncthreads();
        stats = column_partials[column_in_tile];
        for (int w = 1; w < static_cast<int>(blockDim.x / 32); ++w) {
            stats = combine(stats, column_partials[w * width + column_in_tile]);
        }
        __syncthreads();  // column_partials is rewritten by the next tile

        if (column_valid) {
            const C inverse_sum = C(1) / stats.sum;
            const C log_sum = log_of(stats.sum);
            for (std::int64_t j = axis_first; j < args.row_len; j += axis_step * kSpatialUnroll) {
                C values[kSpatialUnroll];
#pragma unroll
                for (int u = 0; u < kSpatialUnroll; ++u) {
                    const std::int64_t position = j + u * axis_step;
                    if (position < args.row_len) values[u] = to_compute(x_column[position * args.x_axis_stride]);
                }
#pragma unroll
                for (int u = 0; u < kSpatialUnroll; ++u) {
                    const std::int64_t position = j + u * axis_step;
                    if (position < args.row_len) {
                        y_column[position * args.y_axis_stride] =
                            StoreAs<Y>::from(softmax_output(values[u] - stats.max, inverse_sum, log_sum, log_mode));
                    }
                }
            }
        }
    }
}

}  // namespace

const void* spatial_softmax_kernel(smxDataType_t x_dtype, smxDataType_t y_dtype) {
    return visit_dtype_pair(x_dtype, y_dtype, [](auto x_tag, auto y_tag) -> const void* {
        return reinterpret_cast<const void*>(
            &spatial_softmax<typename decltype(x_tag)::type, typename decltype(y_tag)::type>);
    });
}

}  // namespace smx::cuda
