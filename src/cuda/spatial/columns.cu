// columns.cu - the Spatial layout's columns too long to cache even across a cluster of 16 (two reads of x):
//   spatial-online  lanes along the columns, per-thread online (max, sum) over the thread's axis share,
//                   combined across lanes and warps, then a second pass re-reads x; one CTA per tile;
//   spatial-split   the same columns when tiles are too few to fill the GPU: each column cut into chunks, a
//                   CTA per (chunk, tile) in two kernels, the chunks' partial statistics through the workspace.
// Traffic: x read twice, y written once. Measurements: performance.md#spatial-split and
// performance.md#spatial-online.
#include <type_traits>

#include "cuda/common/epilogue.cuh"
#include "cuda/spatial/common.cuh"

namespace smx::cuda {
namespace {

// ---- spatial-online and spatial-split (two passes over x) -----------------------------------------
// A CTA covers W columns of one tile (W = tile_width, a power of two) in vectors of kPack adjacent columns
// (kPack = 1: one element a thread, every layout; above 1, spatial-split where x and y allow whole-vector
// accesses). V = W / kPack vectors side by side make a tile row; thread t takes vector t % V at axis
// positions t / V + k * (T / V), so a warp reads 32 / V rows of W contiguous elements.

constexpr int kSpatialUnroll = 4;  // spatial-online: axis positions per thread and loop step

// This thread's vector of one tile: the element offsets of its first column in x and y (a vector past
// inner takes column 0 and is marked invalid, so no load or store leaves the tensor; with kPack > 1 the
// plan makes inner a multiple of kPack, so a vector is valid whole or not at all).
struct ColumnPlace {
    std::int64_t x_offset;
    std::int64_t y_offset;
    bool valid;
};

template <int kPack>
__device__ __forceinline__ ColumnPlace column_place(const SpatialParams& args, std::int64_t tile) {
    std::int64_t outer, tile_in_outer;
    split_tile(tile, args.tiles_per_outer, args.tiles, &outer, &tile_in_outer);
    const int vectors = args.tile_width / kPack;
    const std::int64_t column = tile_in_outer * args.tile_width + static_cast<int>(threadIdx.x % vectors) * kPack;
    const bool valid = column < args.inner;
    const std::int64_t in_tile = valid ? column : 0;
    return {outer * args.x_outer_stride + in_tile, outer * args.y_outer_stride + in_tile, valid};
}

// One loop step's kUnroll vectors of kPack columns, x_step elements apart from x_at, through the input
// transform. A whole step (`whole`: every position inside the range) walks a pointer with no checks: the
// checked form recomputed each 64-bit address under its own predicate (performance.md#spatial-split-rules).
// Otherwise position u is loaded where in_range(u), -inf elsewhere (padding the statistics ignore).
template <int kUnroll, int kPack, class X, class Input, class InRange, class C = ComputeType<X>>
__device__ __forceinline__ void load_column_step(const X* x_at, std::int64_t x_step, bool whole, const Input& input,
                                                 const InRange& in_range, C (&values)[kUnroll][kPack]) {
    if (whole) {
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
            load_pack<X, C, kPack>(x_at, values[u]);
#pragma unroll
            for (int k = 0; k < kPack; ++k) values[u][k] = input(values[u][k]);
            x_at += x_step;
        }
    } else {
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
            if (in_range(u)) {
                load_pack<X, C, kPack>(x_at + u * x_step, values[u]);
#pragma unroll
                for (int k = 0; k < kPack; ++k) values[u][k] = input(values[u][k]);
            } else {
#pragma unroll
                for (int k = 0; k < kPack; ++k) values[u][k] = neg_inf<C>();
            }
        }
    }
}

// One column's running statistics in the scaled domain, for loops that add many small groups (the long
// column loops below): the sum holds 2^(v log2(e) - S), S = shift_of(max) log2(e) rounded, and moves to a
// new S only when the max grows, by 2^(S_old - S_new) of the two rounded shifts (one MUFU.EX2: see
// pipelined_vector_stats for why not 2^(old_max log2(e) - S_new)); the fast exp's factor comes off once, in
// stats(). add_chunk per group pays a max-with-NaN, an accurate rescale and an unbias exp instead
// (performance.md#spatial-split-rules).
// raise() keeps the largest |shift| it has taken in `widest_shift` (one register for all of a thread's
// columns, set only when a max grows): the fast exp applies if it stays under 2^24 (not for +inf or huge
// values); otherwise the caller takes the exact form. A NaN is dropped by the max and kept by the sum;
// stats() makes a NaN sum a NaN max, the invariant combine() relies on (a NaN among -inf values would
// otherwise be lost).
struct ScaledRunningStats {
    float max = neg_inf<float>();
    float scaled_shift = 0.0f;  // S (0 while the max is -inf, whose shift is 0)
    float sum = 0.0f;

    __device__ __forceinline__ void raise(float group_max, float& widest_shift) {
        const float new_max = fmaxf(max, group_max);
        if (new_max == max) return;  // also for a NaN or -inf group: nothing moves
        const float shift = shift_of(new_max);
        widest_shift = fmaxf(widest_shift, fabsf(shift));
        const float new_scaled_shift = __fmul_rn(shift, kLog2e);  // rounded: never fused into the sub below
        // A sum over only -inf values is 0 (or NaN) and stays as it is: its shift of 0 may lie far above
        // the new one.
        if (max != neg_inf<float>()) sum *= exp2_approx(scaled_shift - new_scaled_shift);
        max = new_max;
        scaled_shift = new_scaled_shift;
    }
    // A group's terms summed pairwise before they join the running sum: the long chain of additions is one a
    // group rather than one a value (the same additions, in another order), so the roundings a constant
    // padding leans one way grow kUnroll times slower (performance.md#spatial-online).
    template <int N>
    __device__ __forceinline__ void add_group(const float (&v)[N]) {
        float terms[N];
#pragma unroll
        for (int u = 0; u < N; ++u) terms[u] = exp2_approx(fmaf(v[u], kLog2e, -scaled_shift));
#pragma unroll
        for (int width = 1; width < N; width *= 2) {
#pragma unroll
            for (int u = 0; u + width < N; u += 2 * width) terms[u] += terms[u + width];
        }
        sum += terms[0];
    }
    // A partial's statistics (its sum of exp(v - partial_max)): the sum weighted by exp(partial_max - shift).
    __device__ __forceinline__ void add_weighted(float partial_max, float partial_sum) {
        sum += partial_sum * exp2_approx(fmaf(partial_max, kLog2e, -scaled_shift));
    }
    __device__ __forceinline__ Stats<float> stats() const {
        // As ShiftedExpFast::unbias: 2^-(S's rounding) turns the sum into one of exp(v - shift).
        const float total = sum * exp2_approx(-fmaf(shift_of(max), kLog2e, -scaled_shift));
        return {total != total ? total : max, total};
    }
};

// column_range_stats' fast form for float compute values (f32 and 16-bit x): the same loop of kUnroll
// positions a step and the same segments of kSegmentSteps steps (each folded into the thread's total by
// combine), each segment's statistics kept by ScaledRunningStats, for about half the instructions a loop
// step (performance.md#spatial-split-rules). Returns false where some shift left the fast exp's range:
// `stats` is then incomplete and the caller recomputes them exactly.
template <int kUnroll, int kPack, class X, class Input>
__device__ __forceinline__ bool scaled_column_range_stats(const X* x_column, std::int64_t x_axis_stride,
                                                          std::int64_t first, std::int64_t end, std::int64_t axis_step,
                                                          const Input& input, Stats<float> (&stats)[kPack]) {
    const std::int64_t x_step = axis_step * x_axis_stride;
    const std::int64_t stride = axis_step * kUnroll;
    const std::int64_t segment_span = stride * kSegmentSteps;
    float widest_shift = 0.0f;
#pragma unroll
    for (int k = 0; k < kPack; ++k) stats[k] = empty_stats<float>();
    for (std::int64_t segment_first = first; segment_first < end; segment_first += segment_span) {
        const std::int64_t segment_end = end - segment_first < segment_span ? end : segment_first + segment_span;
        ScaledRunningStats segment[kPack];
        for (std::int64_t j = segment_first; j < segment_end; j += stride) {
            float values[kUnroll][kPack];
            load_column_step<kUnroll, kPack>(x_column + j * x_axis_stride, x_step, j + (kUnroll - 1) * axis_step < end,
                                             input, [&](int u) { return j + u * axis_step < end; }, values);
#pragma unroll
            for (int k = 0; k < kPack; ++k) {
                float group_max = values[0][k];
#pragma unroll
                for (int u = 1; u < kUnroll; ++u) group_max = fmaxf(group_max, values[u][k]);
                float column[kUnroll];
#pragma unroll
                for (int u = 0; u < kUnroll; ++u) column[u] = values[u][k];
                segment[k].raise(group_max, widest_shift);
                segment[k].add_group(column);
            }
        }
        // The first segment is the total so far (no combine: most chunks are one segment).
#pragma unroll
        for (int k = 0; k < kPack; ++k) {
            stats[k] = segment_first == first ? segment[k].stats() : combine(stats[k], segment[k].stats());
        }
    }
    return fast_exp_applies(widest_shift);
}

// This thread's statistics of its kPack columns over axis positions [first, end), stepping axis_step,
// kUnroll positions in flight per loop step (addressed from the step's first: one 64-bit multiply a step).
// Float compute values take the scaled form above; the exact form below serves double, and any thread
// whose values leave the fast exp's range (it reads its range again: huge or infinite values only).
template <int kUnroll, int kPack, class X, class Input, class C = ComputeType<X>>
__device__ __forceinline__ void column_range_stats(const X* x_column, std::int64_t x_axis_stride, std::int64_t first,
                                                   std::int64_t end, std::int64_t axis_step, const Input& input,
                                                   Stats<C> (&stats)[kPack]) {
    if constexpr (std::is_same<C, float>::value) {
        if (scaled_column_range_stats<kUnroll, kPack>(x_column, x_axis_stride, first, end, axis_step, input, stats)) {
            return;
        }
    }
    const std::int64_t x_step = axis_step * x_axis_stride;
    const std::int64_t stride = axis_step * kUnroll;
    const auto add_step = [&](std::int64_t j, Stats<C>* segment) {
        C values[kUnroll][kPack];
        load_column_step<kUnroll, kPack>(x_column + j * x_axis_stride, x_step, j + (kUnroll - 1) * axis_step < end,
                                         input, [&](int u) { return j + u * axis_step < end; }, values);
#pragma unroll
        for (int k = 0; k < kPack; ++k) {
            C column[kUnroll];
#pragma unroll
            for (int u = 0; u < kUnroll; ++u) column[u] = values[u][k];
            add_chunk<kUnroll>(segment[k], column);
        }
    };
    if constexpr (kPack == 1) {
        stats[0] = segmented_stats<C>(first, end, stride, [&](std::int64_t j, Stats<C>& segment) { add_step(j, &segment); });
    } else {
        const ColumnStats<kPack, C> total = segmented_column_stats<kPack, C>(
            first, end, stride, [&](std::int64_t j, Stats<C> (&segment)[kPack]) { add_step(j, segment); });
#pragma unroll
        for (int k = 0; k < kPack; ++k) stats[k] = total.column[k];
    }
}

// Folds the statistics of every thread of a column in the CTA; every thread gets its kPack columns'. Lanes
// of one vector within a warp differ by multiples of `vectors` (V): fold them, then fold across warps in
// warp order (V <= 32: every warp covers every vector of the tile). column_partials: one entry per (warp,
// column); it may be rewritten once this returns.
template <int kPack, class C>
__device__ __forceinline__ void fold_column_stats(Stats<C> (&stats)[kPack], int vectors, Stats<C>* column_partials) {
    warp_combine_columns(stats, vectors);
    const int width = vectors * kPack;
    const int warp = threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    const int first_column = static_cast<int>(threadIdx.x % vectors) * kPack;
    if (lane < vectors) {
#pragma unroll
        for (int k = 0; k < kPack; ++k) column_partials[warp * width + first_column + k] = stats[k];
    }
    __syncthreads();
    // Across the warps max-first: the column's max over every warp's partial, then each partial's sum moved
    // to it by one fast exp (an FFMA and a MUFU.EX2 relative to the max's rounded scaled shift). A chain
    // of combine() paid a NaN-aware max and two accurate exps per warp, per column and thread: on short
    // chunks a large part of a thread's work (performance.md#spatial-split-rules). Same special values as
    // combine(): an all -inf column gives sum 0, a NaN or +inf max a NaN sum (the exact form, taken for
    // shifts outside the fast exp's range). Not fold_partials (the spatial tiles' max-first fold): its
    // accurate exps measured slower on one-element tiles, and its max drops a NaN that the write kernel's
    // exact combine() chain needs. Double keeps the chain (its exps are exact either way; the max-first form
    // spilled more of its registers).
    const int warps = static_cast<int>(blockDim.x / 32);
    if constexpr (std::is_same<C, double>::value) {
#pragma unroll
        for (int k = 0; k < kPack; ++k) stats[k] = column_partials[first_column + k];
        for (int w = 1; w < warps; ++w) {
#pragma unroll
            for (int k = 0; k < kPack; ++k) stats[k] = combine(stats[k], column_partials[w * width + first_column + k]);
        }
    } else {
#pragma unroll
        for (int k = 0; k < kPack; ++k) {
            const Stats<C>* column = column_partials + first_column + k;
            C max = column[0].max;
            for (int w = 1; w < warps; ++w) max = max_nan(max, column[w * width].max);
            C sum = C(0);
            with_shifted_exp(shift_of(max), [&](const auto& exp) {
                for (int w = 0; w < warps; ++w) sum += column[w * width].sum * exp(column[w * width].max);
                sum *= exp.unbias();
            });
            stats[k] = {max, sum};
        }
    }
    __syncthreads();
}

// Writes y over this thread's axis positions in [first, end) of its kPack columns from their statistics,
// kUnroll positions in flight per loop step, each element the output formula's (common/epilogue.cuh: a
// two-pass body's, ForwardOutput). Softmax outputs take one exp relative to the max's scaled shift and one
// multiply by a factor holding 1 / sum and the shift's rounding (ShiftedExpFast: an FFMA and a MUFU.EX2),
// where every column's max allows the fast form; otherwise (double, special values) the exact form.
template <int kUnroll, int kPack, class X, class Y, class Input, class Output, class C = ComputeType<X>>
__device__ __forceinline__ void column_range_write(const SpatialParams& args, const ColumnPlace& place,
                                                   std::int64_t first, std::int64_t end, std::int64_t axis_step,
                                                   const Stats<C> (&stats)[kPack]) {
    const X* x_column = static_cast<const X*>(args.x) + place.x_offset;
    Y* y_column = static_cast<Y*>(args.y) + place.y_offset;
    const std::int64_t x_step = axis_step * args.x_axis_stride;
    const std::int64_t y_step = axis_step * args.y_axis_stride;
    const Input input = Input::of(args);
    const Output output = Output::of(args);
    C log_sum[kPack];
    bool fast = true;
#pragma unroll
    for (int k = 0; k < kPack; ++k) {
        log_sum[k] = log_of(stats[k].sum);
        fast = fast && fast_exp_applies(stats[k].max);
    }
    with_exp_form<C>(fast, [&](auto form) {
        C factor[kPack];
#pragma unroll
        for (int k = 0; k < kPack; ++k) factor[k] = form.make(stats[k].max).unbias() * (C(1) / stats[k].sum);
        const auto outputs = [&](const C (&values)[kPack], C (&out)[kPack]) {
#pragma unroll
            for (int k = 0; k < kPack; ++k) {
                const auto exp = form.make(stats[k].max);
                out[k] = output.element_from_value(values[k], stats[k].max, log_sum[k], exp, factor[k]);
            }
        };
        for (std::int64_t j = first; j < end; j += axis_step * kUnroll) {
            const bool whole = j + (kUnroll - 1) * axis_step < end;
            const auto in_range = [&](int u) { return j + u * axis_step < end; };
            C values[kUnroll][kPack];
            load_column_step<kUnroll, kPack>(x_column + j * args.x_axis_stride, x_step, whole, input, in_range, values);
            Y* y_at = y_column + j * args.y_axis_stride;
            if (whole) {
#pragma unroll
                for (int u = 0; u < kUnroll; ++u) {
                    C out[kPack];
                    outputs(values[u], out);
                    store_pack<Y, kPack>(y_at, out);
                    y_at += y_step;
                }
            } else {
#pragma unroll
                for (int u = 0; u < kUnroll; ++u) {
                    if (in_range(u)) {
                        C out[kPack];
                        outputs(values[u], out);
                        store_pack<Y, kPack>(y_at + u * y_step, out);
                    }
                }
            }
        }
    });
}

// spatial-online: one CTA per tile (grid-stride over tiles), whole columns, one element a thread.
template <class X, class Y>
__global__ void __launch_bounds__(1024) spatial_online_softmax(const ParamBlock<SpatialParams> args) {
    using C = ComputeType<X>;
    __shared__ Stats<C> column_partials[1024];  // [warp][column in tile]
    const std::int64_t axis_first = threadIdx.x / args.tile_width;
    const std::int64_t axis_step = blockDim.x / args.tile_width;
    for (std::int64_t tile = blockIdx.x; tile < args.tiles; tile += gridDim.x) {
        const ColumnPlace place = column_place<1>(args, tile);
        const std::int64_t end = place.valid ? args.row_len : 0;  // an invalid column adds nothing
        const X* x_column = static_cast<const X*>(args.x) + place.x_offset;
        Stats<C> stats[1];
        column_range_stats<kSpatialUnroll, 1>(x_column, args.x_axis_stride, axis_first, end, axis_step,
                                              PlainInput::of(args), stats);
        fold_column_stats<1>(stats, args.tile_width, column_partials);
        if (place.valid) {
            column_range_write<kSpatialUnroll, 1, X, Y, PlainInput, ForwardOutput>(args, place, axis_first,
                                                                                  args.row_len, axis_step, stats);
        }
    }
}

// spatial-split: few tiles of long columns. Each tile's axis is cut into `chunks` chunks of slice_len
// positions, one CTA per (chunk, tile) in both kernels (grid: chunks x tiles). The statistics kernel
// writes each chunk's per-column (max, sum) to the workspace, [tile][chunk][column in tile]; the write
// kernel folds a tile's partials (every CTA of the tile in the same order: identical statistics) and
// writes its chunk, taking chunks in reverse order so that the ones read last, likeliest still in L2,
// are read again first. Traffic: x read twice, y written once, as spatial-online, but spread over the GPU.
// kPack > 1 (the vector instances): whole-vector loads of x and stores of y, which the plan takes where
// x's and y's strides and inner allow them and run() where the base pointers do.
__device__ __forceinline__ std::int64_t split_chunk_end(const SpatialParams& args, std::int64_t chunk) {
    const std::int64_t end = (chunk + 1) * args.slice_len;
    return end < args.row_len ? end : args.row_len;
}

// Two CTAs of 512 per SM at least (at most 64 registers; the f32 and 16-bit instances take 46-48). Three
// (40 registers, no spills; the plan then asks for more, shorter chunks) gained a little on some
// long-column shapes and lost more on others (performance.md#spatial-split-rules).
constexpr int kSpatialSplitMinBlocks = 2;

// Axis positions per thread and loop step: kSpatialSplitUnroll one-element steps, kSpatialSplitVectorUnroll
// vector steps (spatial/params.hpp; the plan sizes chunks in whole steps).
template <int kPack>
constexpr int kSplitUnrollOf = kPack == 1 ? kSpatialSplitUnroll : kSpatialSplitVectorUnroll;

// [warp][column in tile] partials of fold_column_stats.
template <class C>
using SplitColumnPartials = Stats<C>[kSpatialSplitThreads / 32 * kSpatialSplitMaxWidth];

template <class X, int kPack>
__global__ void __launch_bounds__(kSpatialSplitThreads, kSpatialSplitMinBlocks) spatial_split_stats(const ParamBlock<SpatialParams> args) {
    using C = ComputeType<X>;
    __shared__ SplitColumnPartials<C> column_partials;
    const int vectors = args.tile_width / kPack;
    const std::int64_t chunk = blockIdx.x;
    const std::int64_t tile = blockIdx.y;
    const std::int64_t axis_step = blockDim.x / vectors;
    const ColumnPlace place = column_place<kPack>(args, tile);
    const std::int64_t first = chunk * args.slice_len + threadIdx.x / vectors;
    const std::int64_t end = place.valid ? split_chunk_end(args, chunk) : 0;  // an invalid vector adds nothing
    const X* x_column = static_cast<const X*>(args.x) + place.x_offset;
    Stats<C> stats[kPack];
    column_range_stats<kSplitUnrollOf<kPack>, kPack>(x_column, args.x_axis_stride, first, end, axis_step,
                                                     PlainInput::of(args), stats);
    fold_column_stats<kPack>(stats, vectors, column_partials);
    if (threadIdx.x < static_cast<unsigned>(vectors)) {
        Stats<C>* partials = static_cast<Stats<C>*>(args.workspace) + (tile * args.chunks + chunk) * args.tile_width;
#pragma unroll
        for (int k = 0; k < kPack; ++k) partials[threadIdx.x * kPack + k] = stats[k];
    }
}

template <class X, class Y, int kPack>
__global__ void __launch_bounds__(kSpatialSplitThreads, kSpatialSplitMinBlocks) spatial_split_write(const ParamBlock<SpatialParams> args) {
    using C = ComputeType<X>;
    __shared__ SplitColumnPartials<C> column_partials;
    const std::int64_t chunk = gridDim.x - 1 - blockIdx.x;
    const std::int64_t tile = blockIdx.y;
    const int width = args.tile_width;
    const int vectors = width / kPack;
    const std::int64_t axis_first = threadIdx.x / vectors;
    const std::int64_t axis_step = blockDim.x / vectors;
    const ColumnPlace place = column_place<kPack>(args, tile);
    const Stats<C>* partials = static_cast<const Stats<C>*>(args.workspace) + tile * args.chunks * width +
                               static_cast<int>(threadIdx.x % vectors) * kPack;
    Stats<C> stats[kPack];
    // This thread's share of the chunks' partials (chunks/T' of them: 32 for 1048576 x 32 dim=0), folded in
    // the scaled domain for float compute values: each partial's sum weighted by one fast exp of its max,
    // where combine() paid a NaN-aware max and two accurate exps (performance.md#spatial-split-rules). The
    // exact chain for double and where a max leaves the fast exp's range.
    bool folded = false;
    if constexpr (std::is_same<C, float>::value) {
        ScaledRunningStats running[kPack];
        float widest_shift = 0.0f;
        for (std::int64_t c = axis_first; c < args.chunks; c += axis_step) {
#pragma unroll
            for (int k = 0; k < kPack; ++k) {
                const Stats<C> partial = partials[c * width + k];
                running[k].raise(partial.max, widest_shift);
                running[k].add_weighted(partial.max, partial.sum);
            }
        }
        if (fast_exp_applies(widest_shift)) {
#pragma unroll
            for (int k = 0; k < kPack; ++k) stats[k] = running[k].stats();
            folded = true;
        }
    }
    if (!folded) {
#pragma unroll
        for (int k = 0; k < kPack; ++k) stats[k] = empty_stats<C>();
        for (std::int64_t c = axis_first; c < args.chunks; c += axis_step) {
#pragma unroll
            for (int k = 0; k < kPack; ++k) stats[k] = combine(stats[k], partials[c * width + k]);
        }
    }
    fold_column_stats<kPack>(stats, vectors, column_partials);
    if (place.valid) {
        column_range_write<kSplitUnrollOf<kPack>, kPack, X, Y, PlainInput, ForwardOutput>(
            args, place, chunk * args.slice_len + axis_first, split_chunk_end(args, chunk), axis_step, stats);
    }
}

}  // namespace

const void* spatial_online_softmax_kernel(smxDataType_t x_dtype, smxDataType_t y_dtype) {
    return visit_dtype_pair(x_dtype, y_dtype, [](auto x_tag, auto y_tag) -> const void* {
        return reinterpret_cast<const void*>(
            &spatial_online_softmax<typename decltype(x_tag)::type, typename decltype(y_tag)::type>);
    });
}

// The vector instances take 16 bytes of compute values a thread: 4 columns (f32 and 16-bit x: 16 or 8 bytes
// of x), 2 for f64. (8 columns of 16-bit x, 16-byte loads, spilled at the 64 registers the launch bound
// allows.)
template <class X>
constexpr int kSplitPackOf = kSpatialSplitPackBytes / static_cast<int>(sizeof(ComputeType<X>));

const void* spatial_split_stats_kernel(smxDataType_t x_dtype, smxDataType_t y_dtype, bool vectors) {
    return visit_dtype_pair(x_dtype, y_dtype, [vectors](auto x_tag, auto) -> const void* {
        using X = typename decltype(x_tag)::type;
        return vectors ? reinterpret_cast<const void*>(&spatial_split_stats<X, kSplitPackOf<X>>)
                       : reinterpret_cast<const void*>(&spatial_split_stats<X, 1>);
    });
}

const void* spatial_split_write_kernel(smxDataType_t x_dtype, smxDataType_t y_dtype, bool vectors) {
    return visit_dtype_pair(x_dtype, y_dtype, [vectors](auto x_tag, auto y_tag) -> const void* {
        using X = typename decltype(x_tag)::type;
        using Y = typename decltype(y_tag)::type;
        return vectors ? reinterpret_cast<const void*>(&spatial_split_write<X, Y, kSplitPackOf<X>>)
                       : reinterpret_cast<const void*>(&spatial_split_write<X, Y, 1>);
    });
}

}  // namespace smx::cuda
