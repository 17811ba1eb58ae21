// kernel.cuh - the warp family: short rows (row_len <= kWarpMaxRowLen), Rows layout: a group of kLanes threads
// (1..32, a power of two) owns a row, held in registers; several rows per warp, kRowsPerThread (1 or 2)
// rows per thread; warp-shuffle reductions over the group. The plan's grid covers every row once; where
// the shape holds at most 16 values per thread and every row offset of x and y fits in 32 bits
// (args.offsets_32), the kernel takes that one pass with 32-bit index arithmetic, else it strides over the
// rows with 64-bit indices.
// Traffic: x read once, y written once. 16-byte loads/stores where the call's pointers and row strides are
// aligned (args.x_vector / args.y_vector, set by WarpParams::bind), element-wise otherwise (same registers).
// Measurements: performance.md#warp.
#pragma once

#include <type_traits>
#include <utility>

#include "cuda/common/epilogue.cuh"
#include "cuda/common/options.cuh"
#include "cuda/common/reduce.cuh"
#include "cuda/warp/params.hpp"

namespace smx::cuda {

// Stores the kPack f32 outputs of a 16-bit x pack (32 bytes) at y_row + col, where lane ^ 1 holds the
// adjacent pack of the same row: the pair swaps halves so that the first 16-byte store of both lanes writes
// the even lane's 32 bytes and the second the odd lane's. Each store instruction of a warp then covers whole
// 32-byte sectors, not half of every sector it touches, for 4 shuffles and 8 selects a pack
// (performance.md#warp). Every lane of the warp must call it (it shuffles); `row_valid` only gates the
// stores. Where the pair's two packs are not both inside the row, or y does not allow vector stores, each
// lane stores its own pack as the unpaired path does.
template <class Y, int kPack, class C>
__device__ __forceinline__ void store_pack_paired(Y* y_row, int col, int row_len, bool row_valid, bool vector,
                                                  const C (&out)[kPack]) {
    constexpr int kHalf = kPack / 2;
    static_assert(kHalf * static_cast<int>(sizeof(Y)) == 16, "each half is one 16-byte store");
    const bool odd = (threadIdx.x & 1) != 0;
    C first[kHalf];   // the even lane's pack: its low half (even lane), its high half (odd lane)
    C second[kHalf];  // the odd lane's pack: its low half (even lane), its high half (odd lane)
#pragma unroll
    for (int k = 0; k < kHalf; ++k) {
        const C received = __shfl_xor_sync(0xffffffffu, odd ? out[k] : out[kHalf + k], 1);
        first[k] = odd ? received : out[k];
        second[k] = odd ? out[kHalf + k] : received;
    }
    if (!row_valid) return;
    const int pair_col = col & ~(2 * kPack - 1);  // the even lane's pack
    if (vector && pair_col + 2 * kPack <= row_len) {
        const int half = odd ? kHalf : 0;
        store_pack<Y, kHalf>(y_row + pair_col + half, first);
        store_pack<Y, kHalf>(y_row + pair_col + kPack + half, second);
    } else if (vector && col + kPack <= row_len) {
        store_pack<Y, kPack>(y_row + col, out);
    } else {
#pragma unroll
        for (int k = 0; k < kPack; ++k) {
            if (col + k < row_len) y_row[col + k] = StoreAs<Y>::from(out[k]);
        }
    }
}

// The kernel body for one input transform, one output formula (common/epilogue.cuh) and one index width; the
// softmax kernels instantiate it with PlainInput and SoftmaxOutput or LogSoftmaxOutput, and the __global__
// wrappers below differ only in their launch bounds. `Index` is int where the plan found every row offset (and
// the row count) within 32 bits: the 64-bit row and offset setup is a large part of a short row's
// instructions, and the grid's single pass needs no loop (performance.md#warp).
template <class X, class Y, int kLanes, int kCols, int kRowsPerThread, class Input, class Output, class Index>
__device__ __forceinline__ void warp_softmax_rows(const WarpParams& args, const Input& input) {
    using C = ComputeType<X>;
    // 16-byte packs of x even when y is wider: block-regs' 8-byte packs lost here (performance.md#warp);
    // paired stores (below) keep the wider y's stores whole-sector instead.
    constexpr int kPack = kPackOf<X>;
    static_assert(kCols % kPack == 0, "a lane holds whole packs");
    constexpr int kPacksPerLane = kCols / kPack;
    // 16-bit x written as f32 on rows shared by two lanes or more: each pack's 32 bytes of y are stored by
    // the lane and its partner together (store_pack_paired).
    constexpr bool kPairedStores = sizeof(X) == 2 && sizeof(Y) == 4 && kLanes >= 2;
    constexpr int kRowsPerWarp = (32 / kLanes) * kRowsPerThread;
    const X* x = static_cast<const X*>(args.x);
    Y* y = static_cast<Y*>(args.y);
    const int row_len = static_cast<int>(args.row_len);  // <= kWarpMaxRowLen
    const int lane = threadIdx.x % 32;
    const int group = lane / kLanes;
    const int lane_in_group = lane % kLanes;
    constexpr bool kOnePass = std::is_same_v<Index, int>;
    // Read at each use, as the 64-bit body always did: its code stayed the same when the 32-bit body came.
    const auto rows = [&] { return static_cast<Index>(args.rows); };
    const Index warps_per_block = static_cast<Index>(blockDim.x / 32);
    const Index first_warp = static_cast<Index>(blockIdx.x) * warps_per_block + static_cast<Index>(threadIdx.x / 32);
    const Index warp_step = kOnePass ? Index{0} : static_cast<Index>(gridDim.x) * warps_per_block * kRowsPerWarp;

    // The loop bound is per warp (not per group) so every lane reaches every shuffle.
    for (Index warp_row = first_warp * kRowsPerWarp; warp_row < rows(); warp_row += warp_step) {
        // A thread's rows are adjacent.
        const auto row_of = [&](int r) -> Index { return warp_row + group * kRowsPerThread + r; };
        C values[kRowsPerThread][kCols];
        C row_max[kRowsPerThread];
        bool row_has_nan[kRowsPerThread];  // options: a kept z of the row is NaN (writes_empty_row)
        bool empty_row[kRowsPerThread];    // options: the row writes masked_rows' value (writes_empty_row)
#pragma unroll
        for (int r = 0; r < kRowsPerThread; ++r) {
            const bool row_valid = row_of(r) < rows();
            const X* x_row = x + (row_valid ? row_of(r) * static_cast<Index>(args.x_row_stride) : 0);
            if constexpr (Input::kPerRow) {
                // The row's options exclude its elements from read_len on (never read, -inf like the padding)
                // and transform the others. (The plain loop below stays as it was written: merged into one
                // loop, the compiler scheduled the plain instances differently.)
                // A pack inside the row is loaded whole wherever it starts inside the window (its elements past the
                // window then set to -inf), and a pack wholly past the window is -inf without the element path:
                // testing the window instead of the row's end sent the rows of one warp, whose windows differ,
                // down both the vector and the element paths (performance.md, "options: scale folded").
                const auto row_input = input.template bind<C>(row_valid ? row_of(r) : Index{0}, row_len);
                const int read_len = static_cast<int>(row_input.read_len);
                // Whether the pack at `col` is loaded whole (16 bytes) rather than element by element.
                const auto loads_whole = [&](int col) {
                    const bool inside = Input::kLoadsStraddlingPacks ? col + kPack <= row_len && col < read_len
                                                                     : col + kPack <= read_len;
                    return row_valid && args.x_vector && inside;
                };
                // The unmasked set's shapes of several packs a lane issue every vector load of the row before
                // using any: a pack transformed (or tested against the window) right after its load made each load
                // wait for the one before, one memory round trip per pack (performance.md, "options: scale on warp
                // 1024 and f32 block-regs"). The masked sets read their mask in the transform, and 16-bit x written
                // as f32 holds twice its bytes for the paired stores: there it cost registers and spills, so they
                // load a pack as they transform it.
                constexpr bool kLoadsFirst = kUnmaskedOptions<Input> && kPacksPerLane > 1 && !(sizeof(X) == 2 && sizeof(Y) == 4);
                // 16-bit packs wait packed, widened once all are requested. f32 ones land in `values` (an array of
                // their own was put in local memory), and so do f16's at 32 values a lane, widened as they land
                // (two round trips, as plain's): held packed they spilled.
                constexpr bool kHeldPacked = kLoadsFirst && sizeof(X) == 2 && !(std::is_same_v<X, __half> && kCols == 32);
                Packed<X, kPack> raw[kHeldPacked ? kPacksPerLane : 1];
                bool whole[kPacksPerLane];  // loaded whole (kLoadsFirst)
                if constexpr (kLoadsFirst) {
#pragma unroll
                    for (int p = 0; p < kPacksPerLane; ++p) {
                        const int col = (p * kLanes + lane_in_group) * kPack;
                        whole[p] = loads_whole(col);
                        if (!whole[p]) continue;
                        if constexpr (kHeldPacked) raw[p] = *reinterpret_cast<const Packed<X, kPack>*>(x_row + col);
                        else load_pack(x_row + col, &values[r][p * kPack]);
                    }
                }
#pragma unroll
                for (int p = 0; p < kPacksPerLane; ++p) {
                    const int col = (p * kLanes + lane_in_group) * kPack;
                    C* pack = &values[r][p * kPack];
                    if (kLoadsFirst ? whole[p] : loads_whole(col)) {
                        if constexpr (kHeldPacked) widen_pack(raw[p], pack);
                        if constexpr (!kLoadsFirst) load_pack(x_row + col, pack);
                        transform_pack<kPack>(row_input, pack, col);
                        if (col + kPack > read_len) {
#pragma unroll
                            for (int k = 0; k < kPack; ++k) {
                                if (col + k >= read_len) pack[k] = neg_inf<C>();
                            }
                        }
                    } else if (Input::kLoadsStraddlingPacks && col >= read_len) {
#pragma unroll
                        for (int k = 0; k < kPack; ++k) pack[k] = neg_inf<C>();
                    } else {
#pragma unroll
                        for (int k = 0; k < kPack; ++k) {
                            pack[k] = row_valid && col + k < read_len ? row_input(to_compute(x_row[col + k]), col + k)
                                                                      : neg_inf<C>();
                        }
                    }
                }
            } else {
#pragma unroll
                for (int p = 0; p < kPacksPerLane; ++p) {
                    const int col = (p * kLanes + lane_in_group) * kPack;
                    C* pack = &values[r][p * kPack];
                    if (row_valid && args.x_vector && col + kPack <= row_len) {
                        load_pack(x_row + col, pack);
#pragma unroll
                        for (int k = 0; k < kPack; ++k) pack[k] = input(pack[k]);
                    } else {
#pragma unroll
                        for (int k = 0; k < kPack; ++k) {
                            pack[k] = row_valid && col + k < row_len ? input(to_compute(x_row[col + k])) : neg_inf<C>();
                        }
                    }
                }
            }
            // The max may drop a NaN: the sum carries it (see max_skip_nan).
            C thread_max = values[r][0];
#pragma unroll
            for (int c = 1; c < kCols; ++c) thread_max = max_skip_nan(thread_max, values[r][c]);
            // In z's units (folded inputs hold x: the scale turns their max into z's).
            row_max[r] = held_max_to_shift(input, group_max_skip_nan<kLanes>(thread_max));
            if constexpr (Input::kPerRow) {
                // Whether a kept z is NaN: masked_rows zero must tell that row from an empty one, and here the
                // sum of an all -inf row is NaN too. Only masked_rows zero asks (a uniform branch).
                row_has_nan[r] = false;
                if (input.options.zero_rows != 0) {
                    C nans = 0;
#pragma unroll
                    for (int c = 0; c < kCols; ++c) nans += values[r][c] != values[r][c] ? C(1) : C(0);
                    row_has_nan[r] = group_sum<kLanes>(nans) > C(0);
                }
                // A row with nothing to normalize under masked_rows zero (all its values -inf) takes the shift 0,
                // so its exps are 0, and the factor 0 below: the formula then writes masked_rows' value (softmax
                // 0 * 0, log-softmax (-inf - 0) - 0) with no select in every element's write.
                empty_row[r] = writes_empty_row(input, row_max[r], row_has_nan[r]);
                if (empty_row[r]) row_max[r] = C(0);
            }
        }
        // Softmax keeps each exp (the write multiplies); log-softmax keeps v. Padding is -inf and adds
        // exp(-inf) = 0; an all -inf row gives NaN, as the reference does. One exp form for all of this
        // thread's rows, so their exps interleave.
        C thread_sum[kRowsPerThread];
        C unbias[kRowsPerThread];
        bool fast = true;
#pragma unroll
        for (int r = 0; r < kRowsPerThread; ++r) fast = fast && fast_exp_applies(row_max[r]);
        with_value_exp_form<C>(input, fast, [&](auto form) {
#pragma unroll
            for (int r = 0; r < kRowsPerThread; ++r) {
                const auto exp = form.make(row_max[r]);
                thread_sum[r] = 0;
#pragma unroll
                for (int c = 0; c < kCols; ++c) {
                    const C e = exp(values[r][c]);
                    thread_sum[r] += e;
                    if constexpr (Output::kUsesExp) values[r][c] = e;
                }
                unbias[r] = Output::kUsesExp ? C(1) : exp.unbias();  // softmax's factor cancels in e / sum
            }
        });
        C row_factor[kRowsPerThread];  // what Output::element takes from the row (softmax: 1 / sum)
#pragma unroll
        for (int r = 0; r < kRowsPerThread; ++r) {
            // The sum without the fast exp's factor, and what removes it from a held exp (softmax: 1, the
            // factor cancelling between the held exps and their sum).
            const C row_sum = group_sum<kLanes>(thread_sum[r]) * unbias[r];
            row_factor[r] = Output::row_factor(row_sum, [&] { return unbias[r]; });
            if constexpr (Input::kPerRow) row_factor[r] = empty_row[r] ? C(0) : row_factor[r];
        }
        const auto write = [&](const auto& output) {
            if constexpr (kPairedStores) {
#pragma unroll
                for (int r = 0; r < kRowsPerThread; ++r) {
                    // Every lane shuffles, so an invalid row skips only its stores.
                    const bool row_valid = row_of(r) < rows();
                    Y* y_row = y + (row_valid ? row_of(r) * static_cast<Index>(args.y_row_stride) : 0);
#pragma unroll
                    for (int p = 0; p < kPacksPerLane; ++p) {
                        C out[kPack];
#pragma unroll
                        for (int k = 0; k < kPack; ++k) out[k] = output(r, values[r][p * kPack + k]);
                        store_pack_paired<Y, kPack>(y_row, (p * kLanes + lane_in_group) * kPack, row_len,
                                                    row_valid, args.y_vector != 0, out);
                    }
                }
            } else {
#pragma unroll
                for (int r = 0; r < kRowsPerThread; ++r) {
                    if (row_of(r) >= rows()) continue;
                    Y* y_row = y + row_of(r) * static_cast<Index>(args.y_row_stride);
#pragma unroll
                    for (int p = 0; p < kPacksPerLane; ++p) {
                        const int col = (p * kLanes + lane_in_group) * kPack;
                        C out[kPack];
#pragma unroll
                        for (int k = 0; k < kPack; ++k) out[k] = output(r, values[r][p * kPack + k]);
                        if (args.y_vector && col + kPack <= row_len) {
                            store_pack<Y, kPack>(y_row + col, out);
                        } else {
#pragma unroll
                            for (int k = 0; k < kPack; ++k) {
                                if (col + k < row_len) y_row[col + k] = StoreAs<Y>::from(out[k]);
                            }
                        }
                    }
                }
            }
        };
        write([&](int r, C held) -> C { return Output::element(held, row_max[r], row_factor[r]); });
        if constexpr (kOnePass) break;  // the grid covers every row once
    }
}

// The mode is a compile-time choice inside each kernel: a run-time one costs a select per element (softmax
// keeps each exp, log-softmax each value) and issues both output formulas predicated unless the write loop
// is split per mode (performance.md#warp).
// The index width is a run-time choice (a uniform branch) in the instances of at most
// kWarpOffsets32MaxValues values per thread, which hold both bodies; wider ones have the 64-bit body only.
// Input: PlainInput, or a RowsOptionsInput for the options instances.
template <class X, class Y, int kLanes, int kCols, int kRowsPerThread, class Input = PlainInput>
__device__ __forceinline__ void warp_softmax_modes(const WarpParams& args) {
    // 16-bit rows of at most 16 values a thread: their bodies are short, so the options' run-time tests are a large
    // part of them (UnmaskedForm).
    constexpr bool kFixedForm = sizeof(X) == 2 && sizeof(Y) == 2 && kCols * kRowsPerThread <= 16;
    const auto body = [&](auto index_tag) {
        using Index = typename decltype(index_tag)::type;
        if (args.log_mode != 0) {
            warp_softmax_rows<X, Y, kLanes, kCols, kRowsPerThread, Input, LogSoftmaxOutput, Index>(
                args, Input::of(args));
        } else {
            // Softmax of the unmasked set: its scale folded into the exps where the plan allows it, else (16-bit
            // rows) without a scale, or a per-row scale without a window, fixed at compile time.
            with_folded_input<Input, SoftmaxOutput>(args, [&](auto input_tag) {
                using FoldedInput = typename decltype(input_tag)::type;
                with_fixed_form_input<FoldedInput, kFixedForm>(args, [&](auto fixed_tag) {
                    using RowInput = typename decltype(fixed_tag)::type;
                    warp_softmax_rows<X, Y, kLanes, kCols, kRowsPerThread, RowInput, SoftmaxOutput, Index>(
                        args, RowInput::of(args));
                });
            });
        }
    };
    if constexpr (kCols * kRowsPerThread <= kWarpOffsets32MaxValues) {
        if (args.offsets_32 != 0) {
            body(TypeTag<int>{});
            return;
        }
    }
    body(TypeTag<std::int64_t>{});
}

// Most shapes: a launch bound of kWarpKernelThreads only, the register count left to the compiler: a stated
// minimum of CTAs per SM lets it take more registers than it would (performance.md#warp-register-bounds).
template <class X, class Y, int kLanes, int kCols, int kRowsPerThread>
__global__ void __launch_bounds__(kWarpKernelThreads) warp_softmax(const ParamBlock<WarpParams> args) {
    warp_softmax_modes<X, Y, kLanes, kCols, kRowsPerThread>(args);
}

// Shapes that state a minimum of CTAs per SM (0: none). These rows are latency-bound, so each bound trades
// registers for resident warps, at a count the body the plan runs fits without spills
// (performance.md#warp-register-bounds):
//   at most 8 values (f32, and 16-bit x at one row per thread): 16 (32 registers), a full SM of CTAs;
//   16-bit x, 16 values: 12 (40 registers), but 16 (32) for 16-bit y on 16 or 32 lanes (rows of 129-512),
//     whose 32-bit bodies fit; their 64-bit bodies spill, paid only by tensors whose offsets pass 2^31;
//   16-bit x, 32 values: 8 (64 registers);
//   f32 -> f32, 32 values: 6 (72 registers, where the per-mode bodies took 81 unbounded).
// f64 would spill at these bounds.
template <class X, class Y, int kLanes, int kCols, int kRowsPerThread>
constexpr int kWarpMinCtasPerSm = sizeof(X) <= 4 && kCols * kRowsPerThread <= 8    ? 16
                                  : sizeof(X) == 2 && sizeof(Y) == 2 && kLanes >= 16 && kCols * kRowsPerThread == 16 ? 16
                                  : sizeof(X) == 2 && kCols * kRowsPerThread == 16 ? 12
                                  : sizeof(X) == 2 && kCols * kRowsPerThread == 32 ? 8
                                  : sizeof(X) == 4 && sizeof(Y) == 4 && kCols * kRowsPerThread == 32 ? 6
                                                                                   : 0;

template <class X, class Y, int kLanes, int kCols, int kRowsPerThread, int kMinCtasPerSm>
__global__ void __launch_bounds__(kWarpKernelThreads, kMinCtasPerSm) warp_softmax_bounded(const ParamBlock<WarpParams> args) {
    warp_softmax_modes<X, Y, kLanes, kCols, kRowsPerThread>(args);
}

// The options instances (RowsOptionsInput of one RowsOptionSet): the plain kernels' shapes and launch bounds.
template <class X, class Y, int kLanes, int kCols, int kRowsPerThread, RowsOptionSet kSet>
__global__ void __launch_bounds__(kWarpKernelThreads) warp_softmax_options(const ParamBlock<WarpParams> args) {
    warp_softmax_modes<X, Y, kLanes, kCols, kRowsPerThread, RowsOptionsInput<kSet, X>>(args);
}

template <class X, class Y, int kLanes, int kCols, int kRowsPerThread, RowsOptionSet kSet, int kMinCtasPerSm>
__global__ void __launch_bounds__(kWarpKernelThreads, kMinCtasPerSm)
    warp_softmax_options_bounded(const ParamBlock<WarpParams> args) {
    warp_softmax_modes<X, Y, kLanes, kCols, kRowsPerThread, RowsOptionsInput<kSet, X>>(args);
}

// The options instances' minimum of CTAs per SM: the plain shape's, but 12 (40 registers) where the plain
// one states 16 (32) for 16 values: the options bodies spilled there (docs/cuda-kernels.md, "Option sets");
// 10 (48 registers, plain's count) for f32 x at 16 values, which plain leaves unbounded: the folded scale's
// second body took them to 56-63 unbounded, and fits 48 without spilling (docs/performance.md, "options: scale
// folded into the exp"); and 7 (72 registers, plain's count) for f32 -> f32 at 32 values, where plain's 6 let
// them take 80, two CTAs of 64 threads fewer per SM, and every set fits 72 without spilling (docs/performance.md,
// "options: scale on warp 1024 and f32 block-regs").
template <class X, class Y, int kLanes, int kCols, int kRowsPerThread>
constexpr int kWarpOptionsMinCtasPerSm = kWarpMinCtasPerSm<X, Y, kLanes, kCols, kRowsPerThread> == 16 && kCols * kRowsPerThread == 16
                                             ? 12
                                         : kWarpMinCtasPerSm<X, Y, kLanes, kCols, kRowsPerThread> == 0 && sizeof(X) == 4 &&
                                                 kCols * kRowsPerThread == 16
                                             ? 10
                                         : kWarpMinCtasPerSm<X, Y, kLanes, kCols, kRowsPerThread> == 6 ? 7
                                             : kWarpMinCtasPerSm<X, Y, kLanes, kCols, kRowsPerThread>;

// The options instance of a shape for set `set` (pairs of kRowsOptionsPair only).
template <class X, class Y, int kLanes, int kCols, int kRowsPerThread>
const void* warp_options_pointer(RowsOptionSet set) {
    constexpr int kMinCtas = kWarpOptionsMinCtasPerSm<X, Y, kLanes, kCols, kRowsPerThread>;
    const auto pointer = [](auto set_tag) -> const void* {
        constexpr RowsOptionSet kSet = decltype(set_tag)::value;
        if constexpr (kMinCtas > 0) {
            return reinterpret_cast<const void*>(&warp_softmax_options_bounded<X, Y, kLanes, kCols, kRowsPerThread, kSet, kMinCtas>);
        } else {
            return reinterpret_cast<const void*>(&warp_softmax_options<X, Y, kLanes, kCols, kRowsPerThread, kSet>);
        }
    };
    return visit_option_set(set, pointer);
}

// kOptions: the options instance of the shape for `set` (pairs of kRowsOptionsPair only).
template <class X, class Y, int kLanes, int kCols, int kRowsPerThread, bool kOptions>
const void* warp_kernel_pointer(RowsOptionSet set) {
    constexpr int kMinCtas = kWarpMinCtasPerSm<X, Y, kLanes, kCols, kRowsPerThread>;
    constexpr bool kNarrow = kLanes < 32;
    constexpr bool kTwoPacks = WarpShape{kLanes, kCols, kRowsPerThread}.narrow_two_packs(kPackOf<X>);
    if constexpr (kNarrow && !kTwoPacks && kRowsPerThread != warp_narrow_rows_per_thread(sizeof(X), sizeof(Y))) {
        return nullptr;  // a narrow shape this pair does not take (f32 x lists both row counts)
    } else if constexpr (kTwoPacks && !warp_narrow_two_packs(sizeof(X), sizeof(Y), kLanes)) {
        return nullptr;  // nor a narrow shape of two packs per lane
    } else if constexpr (kOptions && !kRowsOptionsPair<X, Y>) {
        return nullptr;
    } else if constexpr (kOptions) {
        return warp_options_pointer<X, Y, kLanes, kCols, kRowsPerThread>(set);
    } else if constexpr (kMinCtas > 0) {
        return reinterpret_cast<const void*>(&warp_softmax_bounded<X, Y, kLanes, kCols, kRowsPerThread, kMinCtas>);
    } else {
        return reinterpret_cast<const void*>(&warp_softmax<X, Y, kLanes, kCols, kRowsPerThread>);
    }
}

// The instance for shape `shape_index` of x's table, as a pointer for cudaLaunchKernel.
template <class X, class Y, bool kOptions, std::size_t... I>
const void* warp_softmax_instance(int shape_index, RowsOptionSet set, std::index_sequence<I...>) {
    constexpr auto& shapes = WarpShapeTable<kPackOf<X>>::shapes;
    const void* kernel = nullptr;
    ((shape_index == static_cast<int>(I)
          ? (kernel = warp_kernel_pointer<X, Y, shapes[I].lanes, shapes[I].cols_per_lane, shapes[I].rows_per_thread,
                                          kOptions>(set))
          : nullptr),
     ...);
    return kernel;
}

// Every y dtype for one x dtype: each instances_<x>.cu instantiates one of these, each options_<x>.cu the
// options ones (every set; `set` is unused without kOptions).
template <class X, bool kOptions = false>
const void* warp_softmax_for_x(smxDataType_t y_dtype, int shape_index, RowsOptionSet set = RowsOptionSet::Any) {
    constexpr std::size_t kShapes = WarpShapeTable<kPackOf<X>>::shapes.size();
    return visit_dtype(y_dtype, [shape_index, set](auto y_tag) -> const void* {
        using Y = typename decltype(y_tag)::type;
        if constexpr (kEveryFamilyPair<X, Y>) {
            return warp_softmax_instance<X, Y, kOptions>(shape_index, set, std::make_index_sequence<kShapes>{});
        } else {
            return nullptr;
        }
    });
}

}  // namespace smx::cuda
