// kernel.cuh - block-online and split-row: rows too long for a cluster to hold in registers, Rows layout.
// Two kernel families built from the same range helpers (online (max, sum) over x in one pass, then a
// second pass that re-reads x and writes y; traffic: x read twice, y written once, the second read often
// served by L2). Measurements: performance.md#block-online and performance.md#split-row.
//   block-online  one CTA per row (grid-stride over rows), for many long rows;
//   split-row     few very long rows: each row cut into fixed chunks (chunk length from row_len only),
//                 one CTA per (chunk, row); kernel 1 writes each chunk's (max, sum) to the workspace,
//                 kernel 2 loads its chunk's first packs, folds the row's partials meanwhile (same order
//                 in every CTA) and writes its chunk. Its options instances (the unmasked option set:
//                 RowsOptionsInput) bind each row's scale and causal window: a chunk reads x only up to the
//                 window's end and writes the excluded value past it.
// The plain instances and their getters are in kernel.cu, split-row's options instances in options.cu (each
// file compiles its own instances: the anonymous namespace below).
#pragma once

#include "cuda/common/options.cuh"
#include "cuda/common/reduce.cuh"
#include "cuda/online/params.hpp"

namespace smx::cuda {
namespace {

constexpr int kRangeUnroll = 4;  // 16-byte packs in flight per thread and loop step

// Where the pack-aligned body of x[0, count) starts and how many whole packs of kPack elements it has.
struct RangeSplit {
    std::int64_t head;   // leading elements before the first pack boundary
    std::int64_t packs;  // whole packs after the head
    std::int64_t tail;   // first element after the packs
};

template <int kPack, class X>
__device__ __forceinline__ RangeSplit split_range(const X* x, std::int64_t count) {
    constexpr std::uintptr_t kPackBytes = kPack * sizeof(X);
    const std::int64_t shift = static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(x) % kPackBytes / sizeof(X));
    const std::int64_t head = shift == 0 ? 0 : (count < kPack - shift ? count : kPack - shift);
    const std::int64_t packs = (count - head) / kPack;
    return {head, packs, head + packs * kPack};
}

// Adds one step's 16-bit packs (those with loaded[u]) to running statistics: the step's max first (one
// HMNMX2 per pair of elements; a NaN dropped there reaches the sum through its exp, or, while the running
// max is still -inf, through the check below), then one exp per element relative to the new max and one
// rescale of the running sum per step: a rescale with an accurate exp per pack slowed the statistics
// kernel. The packs stay packed and are widened at each use: widened all at once, they took the registers
// of the kernel's third CTA per SM (performance.md#split-row-chunks-and-kernels). Each element is taken through
// the input transform; an input that is not the element itself (not kRaw: a scale multiplied at the load) takes
// the step's max of the transformed values instead, which keeps NaN.
template <int kUnroll, class X, int kPack, class Input, class C = ComputeType<X>>
__device__ __forceinline__ void add_step(Stats<C>& stats, const Packed<X, kPack> (&raw)[kUnroll], const bool (&loaded)[kUnroll],
                                         const Input& input) {
    const InputValues<Input> held{input};
    C step_max = neg_inf<C>();
    if constexpr (Input::kRaw) {
        PairedMax<X> paired;
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
            if (loaded[u]) add_pairs(paired, raw[u]);
        }
        step_max = held.to_shift(paired.result());
    } else {
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
            if (!loaded[u]) continue;
#pragma unroll
            for (int k = 0; k < kPack; ++k) step_max = max_nan(step_max, input(widen_element_on_use(raw[u], k)));
        }
    }
    if (Input::kRaw && max_nan(stats.max, step_max) == neg_inf<C>()) {
        // Everything so far and every value this step kept is -inf. HMNMX2 drops NaN, and add_group returns
        // before any exp when the max is -inf, so a NaN among -inf (a masked stretch of a row) would be lost
        // here: look for one. Rare, and off the path of every step that holds a finite value.
        C nan_found = C(0);
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
            if (!loaded[u]) continue;
#pragma unroll
            for (int k = 0; k < kPack; ++k) {
                const C value = widen_element_on_use(raw[u], k);
                if (value != value) nan_found = value;
            }
        }
        if (nan_found != nan_found) stats = {nan_found, nan_found};
        return;
    }
    add_group(
        stats, step_max,
        [&](const auto& exp) {
            C sum = 0;
#pragma unroll
            for (int u = 0; u < kUnroll; ++u) {
                if (!loaded[u]) continue;
#pragma unroll
                for (int k = 0; k < kPack; ++k) sum += exp(input(widen_element_on_use(raw[u], k)));
            }
            return sum;
        },
        held);
    if (stats.sum != stats.sum) stats.max = stats.sum;  // the Stats invariant: a NaN sum makes a NaN max
}

// This thread's share of the statistics of x[0, count) through the input transform, threads striding; any
// alignment. kShortRange: a split-row chunk (a few loop steps a thread), summed in one loop; a whole row is
// summed in segments (segmented_stats), whose extra combine costs split-row's short chunks time and brings
// them nothing (performance.md#split-row-chunks-and-kernels).
template <bool kShortRange, class X, class Input, class C = ComputeType<X>>
__device__ __forceinline__ Stats<C> range_stats(const X* x, std::int64_t count, const Input& input, int tid,
                                                int threads) {
    constexpr int kPack = kPackOf<X>;
    const InputValues<Input> held{input};
    const RangeSplit split = split_range<kPack>(x, count);
    const X* body = x + split.head;
    const std::int64_t step = static_cast<std::int64_t>(threads) * kRangeUnroll;
    const auto add_step_at = [&](std::int64_t p, Stats<C>& segment) {
        // 16-bit x held packed (add_step): the max on its packed pairs where the input is x itself (or x before a
        // folded scale), else on the transformed values.
        if constexpr (sizeof(X) == 2) {
            Packed<X, kPack> raw[kRangeUnroll];
            bool loaded[kRangeUnroll];
#pragma unroll
            for (int u = 0; u < kRangeUnroll; ++u) {
                const std::int64_t pack = p + static_cast<std::int64_t>(u) * threads;
                loaded[u] = pack < split.packs;
                if (loaded[u]) raw[u] = *reinterpret_cast<const Packed<X, kPack>*>(body + pack * kPack);
            }
            add_step(segment, raw, loaded, input);
        } else {
            // f32 / f64: widened at the load, the step's values padded with -inf (for f32, add_step took
            // more registers and was no faster: performance.md#split-row-chunks-and-kernels).
            C values[kRangeUnroll * kPack];
#pragma unroll
            for (int u = 0; u < kRangeUnroll; ++u) {
                const std::int64_t pack = p + static_cast<std::int64_t>(u) * threads;
                if (pack < split.packs) {
                    load_pack(body + pack * kPack, &values[u * kPack]);
#pragma unroll
                    for (int k = 0; k < kPack; ++k) values[u * kPack + k] = input(values[u * kPack + k]);
                } else {
#pragma unroll
                    for (int k = 0; k < kPack; ++k) values[u * kPack + k] = neg_inf<C>();
                }
            }
            add_chunk<kRangeUnroll * kPack>(segment, values, held);
        }
    };
    // The unaligned head (under kPack elements, one per thread).
    const auto add_head = [&](Stats<C>& into) {
        if (tid < split.head) {
            const C value = input(to_compute(x[tid]));
            add_chunk<1>(into, &value, held);
        }
    };
    Stats<C> stats = empty_stats<C>();
    if constexpr (kShortRange) {
        add_head(stats);
        for (std::int64_t p = tid; p < split.packs; p += step) add_step_at(p, stats);
    } else {
        stats = segmented_stats<C>(tid, split.packs, step, add_step_at);
        add_head(stats);
    }
    for (std::int64_t k = split.tail + tid; k < count; k += threads) {
        const C value = input(to_compute(x[k]));
        add_chunk<1>(stats, &value, held);
    }
    return stats;
}

// The x packs of one range_write loop step for one thread. The first step's can be loaded before the
// statistics the writes need are complete: while a CTA combines them, its first loads are in flight.
template <class X, class Y>
struct WriteStep {
    static constexpr int kPack = kPackOfPair<X, Y>;  // 8 bytes of 16-bit x when y is f32 (see kPackOfPair)
    static constexpr int kUnroll = kRangeUnroll * kPackOf<X> / kPack;  // the same bytes of x in flight either way
    Packed<X, kPack> raw[kUnroll];

    // Loads the step that starts at pack p of the body of x (streaming: the last pass over x).
    __device__ __forceinline__ void load(const X* x, const RangeSplit& split, std::int64_t p, int threads) {
        const X* body = x + split.head;
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
            const std::int64_t pack = p + static_cast<std::int64_t>(u) * threads;
            if (pack < split.packs) raw[u] = load_streaming(reinterpret_cast<const Packed<X, kPack>*>(body + pack * kPack));
        }
    }
};

// This thread's first step of range_write over x[0, count).
template <class X, class Y>
__device__ __forceinline__ WriteStep<X, Y> load_first_write_step(const X* x, std::int64_t count, int tid, int threads) {
    WriteStep<X, Y> step;
    step.load(x, split_range<WriteStep<X, Y>::kPack>(x, count), tid, threads);
    return step;
}

// Writes y[0, count) from x[0, count) and the row's statistics, threads striding; any alignment
// (y's packs are stored whole when y is aligned like x, element-wise otherwise). kFirstLoaded: `first`
// holds this thread's first step (load_first_write_step); otherwise it is ignored. The last pass over
// x: packs are read and written streaming, so the x still to be re-read keeps its place in L2. Each element
// is output_formula's of the input transform's value (common/epilogue.cuh).
template <bool kFirstLoaded, class X, class Y, class C, class Input, class Output>
__device__ __forceinline__ void range_write(const X* x, Y* y, std::int64_t count, Stats<C> stats, const Input& input,
                                            const Output& output_formula, int tid, int threads,
                                            const WriteStep<X, Y>& first) {
    constexpr int kPack = WriteStep<X, Y>::kPack;
    constexpr int kUnroll = WriteStep<X, Y>::kUnroll;
    const RangeSplit split = split_range<kPack>(x, count);
    const C log_sum = output_formula.log_sum_of(stats.sum);
    InputValues<Input>{input}.with_exp(stats.max, [&](const auto& exp) {
        const C factor = exp.unbias() * reciprocal(stats.sum);
        const auto output = [&](C v) {
            return output_formula.element_from_value(input(v), stats.max, log_sum, exp, factor);
        };
        if (tid < split.head) y[tid] = StoreAs<Y>::from(output(to_compute(x[tid])));
        Y* y_body = y + split.head;
        const bool y_packs_aligned = reinterpret_cast<std::uintptr_t>(y_body) % kStoreAlignment<Y, kPack> == 0;
        const auto store = [&](std::int64_t pack, const C* values) {
            if (y_packs_aligned) {
                store_pack<Y, kPack, Access::Streaming>(y_body + pack * kPack, values);
            } else {
#pragma unroll
                for (int k = 0; k < kPack; ++k) y_body[pack * kPack + k] = StoreAs<Y>::from(values[k]);
            }
        };
        // All of a step's loads come first: x and y may alias (in place), so the compiler would not hoist
        // them itself. Two loop forms, each the one that measured best: with a preloaded first step, the
        // packs stay raw and are widened one by one as they are written (widening them all first spilled in
        // the 16-bit split-row write instances); without one, all are widened first (the other form cost
        // f32 block-online registers and time). See performance.md#split-row-chunks-and-kernels and
        // performance.md#block-online.
        for (std::int64_t p = tid; p < split.packs; p += static_cast<std::int64_t>(threads) * kUnroll) {
            if constexpr (kFirstLoaded) {
                WriteStep<X, Y> step = first;
                if (p != tid) step.load(x, split, p, threads);
#pragma unroll
                for (int u = 0; u < kUnroll; ++u) {
                    const std::int64_t pack = p + static_cast<std::int64_t>(u) * threads;
                    if (pack >= split.packs) continue;
                    C values[kPack];
#pragma unroll
                    for (int k = 0; k < kPack; ++k) values[k] = output(to_compute(step.raw[u].value[k]));
                    store(pack, values);
                }
            } else {
                const X* x_body = x + split.head;
                C values[kUnroll][kPack];
#pragma unroll
                for (int u = 0; u < kUnroll; ++u) {
                    const std::int64_t pack = p + static_cast<std::int64_t>(u) * threads;
                    if (pack >= split.packs) continue;
                    const Packed<X, kPack> raw = load_streaming(reinterpret_cast<const Packed<X, kPack>*>(x_body + pack * kPack));
#pragma unroll
                    for (int k = 0; k < kPack; ++k) values[u][k] = to_compute(raw.value[k]);
                }
#pragma unroll
                for (int u = 0; u < kUnroll; ++u) {
                    const std::int64_t pack = p + static_cast<std::int64_t>(u) * threads;
                    if (pack >= split.packs) continue;
#pragma unroll
                    for (int k = 0; k < kPack; ++k) values[u][k] = output(values[u][k]);
                    store(pack, values[u]);
                }
            }
        }
        for (std::int64_t k = split.tail + tid; k < count; k += threads) y[k] = StoreAs<Y>::from(output(to_compute(x[k])));
    });
}

template <class X, class Y>
__global__ void __launch_bounds__(512) block_online_softmax(const ParamBlock<OnlineRowsParams> args) {
    using C = ComputeType<X>;
    __shared__ Stats<C> scratch[32];
    const X* x = static_cast<const X*>(args.x);
    Y* y = static_cast<Y*>(args.y);
    for (std::int64_t row = blockIdx.x; row < args.rows; row += gridDim.x) {
        const X* x_row = x + row * args.x_row_stride;
        Stats<C> stats = range_stats<false>(x_row, args.row_len, PlainInput::of(args), threadIdx.x, blockDim.x);
        // 16-bit x: the write's first loads go out before the statistics are combined, so the combine
        // overlaps them; f32 x lost that way (more registers), so it loads them after
        // (performance.md#block-online).
        constexpr bool kPreload = sizeof(X) == 2;
        WriteStep<X, Y> first;
        if constexpr (kPreload) first = load_first_write_step<X, Y>(x_row, args.row_len, threadIdx.x, blockDim.x);
        stats = block_combine_stats(stats, scratch);
        range_write<kPreload>(x_row, y + row * args.y_row_stride, args.row_len, stats, PlainInput::of(args),
                              ForwardOutput::of(args), threadIdx.x, blockDim.x, first);
    }
}

// Elements of chunk `chunk` of a row: [chunk * slice_len, min(row_len, (chunk + 1) * slice_len)).
__device__ __forceinline__ std::int64_t chunk_count(const OnlineRowsParams& args, std::int64_t chunk) {
    const std::int64_t remaining = args.row_len - chunk * args.slice_len;
    return remaining < args.slice_len ? remaining : args.slice_len;
}

// A split-row chunk's input transform under a row's options (the unmasked set's RowsOptionsInput `Options` and
// the row it bound): z = the row's scale times x, or x itself where the launch folds its scale into the exps
// (then kRaw: 16-bit maxima on packed pairs, turned into z's units by held_max_to_shift through InputValues).
template <class Options, class Row>
struct ChunkOptionsInput {
    static constexpr bool kRaw = Options::kFoldsScale;
    static constexpr bool kFoldsScale = Options::kFoldsScale;
    const Options& options;
    const Row& row;
    template <class C>
    __device__ __forceinline__ C launch_scale() const {
        return options.template launch_scale<C>();
    }
    template <class C>
    __device__ __forceinline__ C operator()(C value) const {
        return row.scaled(value);
    }
};

// Writes `value` to y[begin, end), threads striding: elements a chunk does not read (past the causal window, or
// every element of a row with nothing to normalize).
template <class Y, class C>
__device__ __forceinline__ void fill_range(Y* y, std::int64_t begin, std::int64_t end, C value, int tid, int threads) {
    const Y stored = StoreAs<Y>::from(value);
    for (std::int64_t k = begin + tid; k < end; k += threads) y[k] = stored;
}

// Three CTAs of 512 per SM at least (40 registers): the 16-bit instances needed 45, which left two, and a
// short-lived CTA's tail of reductions then idled half of each SM's loads
// (performance.md#split-row-chunks-and-kernels). f64 keeps its registers.
template <class X>
constexpr int kSplitStatsMinBlocks = sizeof(X) == 8 ? 1 : 3;

// Input: PlainInput, or for the options instances the unmasked set's RowsOptionsInput (its scale folded into the
// exps or not, chosen by the plan): a chunk past the row's causal window reads nothing and gives the identity
// partial (max -inf, sum 0), so the write's fold of the row's partials is that of the kept elements alone.
template <class X, class Input = PlainInput>
__global__ void __launch_bounds__(512, kSplitStatsMinBlocks<X>) split_row_stats(const ParamBlock<OnlineRowsParams> args) {
    using C = ComputeType<X>;
    __shared__ Stats<C> scratch[32];
    const X* x = static_cast<const X*>(args.x);
    Stats<C>* partials = static_cast<Stats<C>*>(args.workspace);
    const std::int64_t chunk = blockIdx.x;
    const std::int64_t count = chunk_count(args, chunk);
    for (std::int64_t row = blockIdx.y; row < args.rows; row += gridDim.y) {
        const X* x_chunk = x + row * args.x_row_stride + chunk * args.slice_len;
        Stats<C> stats;
        if constexpr (Input::kPerRow) {
            const Input input = Input::of(args);
            const auto row_options = input.template bind<C>(row, args.row_len);
            const std::int64_t read_count = window_count(row_options.read_len, chunk * args.slice_len, count);
            const ChunkOptionsInput<Input, decltype(row_options)> chunk_input{input, row_options};
            stats = range_stats<true>(x_chunk, read_count, chunk_input, threadIdx.x, blockDim.x);
        } else {
            stats = range_stats<true>(x_chunk, count, PlainInput::of(args), threadIdx.x, blockDim.x);
        }
        stats = block_combine_stats(stats, scratch);
        if (threadIdx.x == 0) partials[row * args.chunks + chunk] = stats;
    }
}

// One chunk of a row with options (the write kernel's options instances): the chunk's elements inside the row's
// causal window from x, the ones past it the excluded value without being read (0, log-softmax -inf; NaN in a
// row whose sum is NaN or that has nothing to normalize), and under masked_rows zero a row with nothing to
// normalize its empty value everywhere. row_stats(row) folds the row's partials. A folded input writes softmax
// (the plan takes it for softmax alone: log-softmax's output is z itself).
template <class X, class Y, class Input, class FoldRow>
__device__ __forceinline__ void write_options_chunk(const OnlineRowsParams& args, const X* x_chunk, Y* y_chunk,
                                                    std::int64_t row, std::int64_t chunk_begin, std::int64_t count,
                                                    const FoldRow& row_stats) {
    using C = ComputeType<X>;
    const Input input = Input::of(args);
    const auto row_options = input.template bind<C>(row, args.row_len);
    const std::int64_t read_count = window_count(row_options.read_len, chunk_begin, count);
    const WriteStep<X, Y> first = load_first_write_step<X, Y>(x_chunk, read_count, threadIdx.x, blockDim.x);
    const Stats<C> stats = row_stats(row);
    const bool log = args.log_mode != 0 && !Input::kFoldsScale;
    if (input.writes_empty_row(stats.max, stats.sum != stats.sum)) {
        fill_range(y_chunk, 0, count, empty_row_value<C>(log), threadIdx.x, blockDim.x);
        return;
    }
    // The excluded elements first, so that nothing of theirs stays live through the write's loop (no thread reads
    // them, so in place too).
    const MaskedForwardOutput excluded_output{log, args.options.zero_rows != 0};
    fill_range(y_chunk, read_count, count, excluded_output.excluded(stats), threadIdx.x, blockDim.x);
    const ChunkOptionsInput<Input, decltype(row_options)> chunk_input{input, row_options};
    range_write<true>(x_chunk, y_chunk, read_count, stats, chunk_input, ForwardOutput{log}, threadIdx.x, blockDim.x, first);
}

// Two CTAs of 512 per SM at least (56-64 registers): left to itself the compiler gave the 16-bit instances
// one CTA per SM, with few warps active. bf16 -> f32 spills a little at the bound, since its first step is
// loaded before the fold, and still gains (performance.md#split-row-chunks-and-kernels). Input as
// split_row_stats'.
template <class X, class Y, class Input = PlainInput>
__global__ void __launch_bounds__(512, 2) split_row_write(const ParamBlock<OnlineRowsParams> args) {
    using C = ComputeType<X>;
    __shared__ Stats<C> scratch[32];
    const X* x = static_cast<const X*>(args.x);
    Y* y = static_cast<Y*>(args.y);
    const Stats<C>* partials = static_cast<const Stats<C>*>(args.workspace);
    // Every CTA of the row folds the same partials in the same order: identical statistics everywhere.
    const auto row_stats = [&](std::int64_t row) {
        Stats<C> stats = empty_stats<C>();
        for (std::int64_t c = threadIdx.x; c < args.chunks; c += blockDim.x) {
            stats = combine(stats, partials[row * args.chunks + c]);
        }
        return block_combine_stats(stats, scratch);
    };
    // CTAs run in the reverse order of the statistics kernel's: the chunks that kernel read last are the
    // likeliest to still be in L2 when they are read again here.
    const std::int64_t chunk = gridDim.x - 1 - blockIdx.x;
    const std::int64_t count = chunk_count(args, chunk);
    for (std::int64_t row = gridDim.y - 1 - blockIdx.y; row < args.rows; row += gridDim.y) {
        const std::int64_t offset = chunk * args.slice_len;
        const X* x_chunk = x + row * args.x_row_stride + offset;
        if constexpr (Input::kPerRow) {
            write_options_chunk<X, Y, Input>(args, x_chunk, y + row * args.y_row_stride + offset, row, offset, count,
                                             row_stats);
        } else {
            // The chunk's first loads go out before the partials are folded, so they overlap the fold.
            const WriteStep<X, Y> first = load_first_write_step<X, Y>(x_chunk, count, threadIdx.x, blockDim.x);
            const Stats<C> stats = row_stats(row);
            range_write<true>(x_chunk, y + row * args.y_row_stride + offset, count, stats, PlainInput::of(args),
                              ForwardOutput::of(args), threadIdx.x, blockDim.x, first);
        }
    }
}

}  // namespace
}  // namespace smx::cuda
