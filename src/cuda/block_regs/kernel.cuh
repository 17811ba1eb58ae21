// kernel.cuh - the block-regs family (block-regs and grid-regs plans): rows longer than the warp family's,
// Rows layout. C CTAs per row, each CTA owning a slice of ceil(n / C) elements (rounded up to a 16-byte
// pack) that its threads hold in REGISTERS (16-bit inputs packed, widened on use), kValues per thread. Per
// row: every load issued first, one exp per element (kept in the registers), one (max, sum) reduction per
// CTA, combined across the row's CTAs, then the write. Traffic: x read once, y written once. Measurements:
// performance.md#block-regs and performance.md#grid-regs. The CTAs of a row combine their statistics either
//   - as a thread-block cluster (C = 1..16) through distributed shared memory (block-regs plans): each
//     CTA pushes its statistics into every peer's mailbox (cluster.cuh; 8/16-value instances: peers read
//     them between two cluster barriers), or
//   - through the workspace behind a grid-wide barrier (grid-regs plans, args.chunks = C > 0): a
//     cooperative launch whose CTAs are all resident at once, so one row can spread over every SM. Where
//     the rows' CTAs do not all fit at once but one row's do (f32 x), the launch takes G rows at a time
//     (G x C CTAs) in args.row_steps steps, one grid barrier each (grid-regs-steps, the kRowSteps
//     instances): x is still read once, each step's slice brought into shared memory by the copy engine
//     while the CTA works on the step before.
#pragma once

#include <type_traits>

#include "cuda/common/async_copy.cuh"
#include "cuda/common/bulk_copy.cuh"
#include "cuda/common/cluster.cuh"
#include "cuda/common/epilogue.cuh"
#include "cuda/common/options.cuh"
#include "cuda/common/reduce.cuh"
#include "cuda/block_regs/params.hpp"

namespace smx::cuda {

// Elements of a slice of `count` at `slice` before its first kPackBytes boundary (its "head": the body of
// whole packs starts after them).
template <int kPackBytes, class X>
__device__ __forceinline__ int slice_head(const X* slice, int count) {
    const int misalignment = static_cast<int>(reinterpret_cast<std::uintptr_t>(slice) % kPackBytes);
    return min(count, (kPackBytes - misalignment) % kPackBytes / static_cast<int>(sizeof(X)));
}

// The kernel body for one input transform and one output formula (common/epilogue.cuh): SoftmaxOutput or
// LogSoftmaxOutput (a body per mode), or ForwardOutput (the mode at run time; see block_regs_modes). The
// __global__ wrappers below differ in their launch bounds and in kRowSteps. kLoadsFirst: the instance of grid-regs'
// options rows of 16-bit x (block_regs_softmax_options_loads_first and, per-row folded at 32 values,
// block_regs_softmax_row_folded_loads_first) and the packed folded ones of one-wave clusters
// (block_regs_softmax_packed_loads_first), whose loads go first as plain's do.
template <class X, class Y, int kValues, bool kRowSteps, class Input, class Output, bool kLoadsFirst = false>
__device__ __forceinline__ void block_regs_rows(const BlockRegsParams& args) {
    using C = ComputeType<X>;
    constexpr int kPack = kPackOfPair<X, Y>;
    constexpr int kPackBytes = kPack * static_cast<int>(sizeof(X));
    static_assert(kValues % kPack == 0, "a thread holds whole packs");
    constexpr int kPacks = kValues / kPack;
    // How a thread holds its values. Up to 32 values: widened to the compute type once, and softmax keeps
    // the exp it computed for the sum. 64 values (16-bit x only): kept packed in the input dtype, two per
    // register, widened at each use and exp recomputed in the write; that costs instructions, but 64
    // widened values would not fit in registers, and long rows gain from the bytes in flight
    // (performance.md#block-regs).
    constexpr bool kPackedHold = kValues == 64;
    // Whether a formula of exps computes each exp again in the write instead of keeping it from the sum:
    // packed holds must; grid-regs steps do, since 32 kept exps live across the step loop spilled where 32
    // kept values, as log-softmax holds them, did not (performance.md#grid-regs-steps).
    constexpr bool kExpInWrite = kPackedHold || kRowSteps;
    // A run-time mode's write takes softmax's exp from `held`, which such instances do not keep.
    static_assert(!kExpInWrite || kModeFixed<Output>, "instances that recompute exps take the mode at compile time");
    __shared__ Stats<C> warp_partials[32];
    __shared__ Stats<C> exchange;  // this CTA's statistics of the row, read by its cluster peers
    __shared__ Stats<C> cluster_stats;
    __shared__ ClusterMailbox<Stats<C>, kBlockRegsMaxCluster> mailbox;  // the cluster's CTA statistics, pushed by each CTA
    __shared__ Stats<C> staged_partials[kRowSteps ? kGridRegsStepsMaxChunks : 1];  // a step's row partials, loaded at once
    // Grid-regs steps with 16-byte packs: each step's slice (its whole packs) reaches the CTA's dynamic
    // shared memory by a bulk copy issued one step ahead, so DRAM keeps reading while the CTA reduces,
    // waits at the grid barrier and writes; the threads take their packs from there.
    constexpr bool kStagedSteps = kRowSteps && kHasBulkCopy && kPackBytes == 16;
    static_assert((kPackBytes == 16) == (sizeof(X) >= sizeof(Y)), "grid_regs_steps_shared_bytes' condition");
    // The additive set's packed hold of 16-bit x and f32 x's 32 values: x in registers as plain holds it, its
    // mask packs copied into this thread's slots of dynamic shared memory (cp.async: in flight with x without
    // holding a register), so the row keeps plain's threads and cluster. The packed hold reads them at each use
    // of a value, the widened hold once, as it widens (docs/cuda-kernels.md, "Additive masks on the packed hold"
    // and "f32 additive masks staged").
    constexpr bool kStagedMask =
        kAdditiveOfXOptions<Input> && block_regs_stages_mask(kValues, RowsOptionSet::AdditiveOfX, sizeof(X), sizeof(Y));
    // Options instances hold at most kBlockRegsOptionsMaxValues widened values, or the packed hold for the
    // unmasked set (no mask to read at each use) and the additive set (its mask staged), and take row steps for
    // the unmasked set only.
    constexpr bool kOptionsHold =
        kValues <= kBlockRegsOptionsMaxValues || (kPackedHold && (kUnmaskedOptions<Input> || kStagedMask));
    // The folded instances of f32 x and of the packed hold (block_regs_softmax_options_folded,
    // block_regs_softmax_options_packed_folded) and the row-folded kernels (16-bit x at 32 values too): their kernels
    // hold no other body, so they have registers for what the options kernels could not afford (one bound a load,
    // the window tested a pack at a time).
    constexpr bool kFoldedAlone = kHeldBeforeScale<Input> && (sizeof(X) == 4 || kPackedHold || kRowScaleFolded<Input>);
    // f32 x's 8-value options bodies and the loads-first instance serve single rows (grid-regs plans), which wait on
    // every instruction before their first load: where they load x without a mask, rows without a causal window issue
    // plain's loads, and only rows with one work the window out before theirs (the shared 16-value bodies took
    // registers with it, 16-bit x's its row's indices out of the uniform registers: a cost only where several CTAs
    // share an SM, so 16-bit x's grid-regs rows take it in an instance of their own). The packed loads-first instances
    // load past a causal window too, and work it out after their loads.
    static_assert(!kLoadsFirst || (kUnmaskedOptions<Input> && !kRowSteps), "no such loads-first instance");
    constexpr bool kLoadsBeforeWindow = (kLoadsFirst || (sizeof(X) == 4 && kValues == 8)) && !kStagedSteps &&
                                        !kStagedMask && !LoadedMaskPack<Input, kPack>::kLoaded;
    // How the widen of the unmasked, keep and additive sets sets -inf past the causal window: f32 x tests every value
    // but in the folded instance and at 8 values (a branch a pack cost the options kernels' 32-value bodies stack);
    // the others test a pack's elements only in a pack that reaches past the window. Grid-regs steps and f32 x's 8
    // values and the loads-first instance first test whether the window ends inside the slice at all, a branch uniform
    // over the CTA (the shared 16-value bodies took registers with it).
    constexpr bool kWindowTestedPerValue = sizeof(X) == 4 && !kFoldedAlone && kValues != 8;
    constexpr bool kWindowTestedPerRow = kRowSteps || kLoadsFirst || (sizeof(X) == 4 && kValues == 8);
    static_assert(!Input::kPerRow || (kOptionsHold && (!kRowSteps || kUnmaskedOptions<Input>)), "no such options instance");

    // One pass without kRowSteps. With it, every CTA takes every step, since each step's grid barrier needs
    // them all; a CTA whose row of the last step is past the end takes it with no elements. Each step
    // computes its indices afresh from opaque copies of the thread and block indices, so the compiler
    // holds no loop-invariant offsets across steps: they cost registers (performance.md#grid-regs-steps).
    const int steps = kRowSteps ? static_cast<int>(args.row_steps) : 1;
#pragma unroll 1
    for (int step = 0; step < steps; ++step) {
        unsigned opaque_block = blockIdx.x;
        unsigned opaque_block_y = blockIdx.y;
        if constexpr (kRowSteps) asm volatile("" : "+r"(opaque_block), "+r"(opaque_block_y));
        const auto block_x = [&] { return kRowSteps ? opaque_block : blockIdx.x; };
        const auto block_y = [&] { return kRowSteps ? opaque_block_y : blockIdx.y; };
        // One cluster per row (a persistent loop over rows made the compiler hoist per-pack addresses out
        // of it and spill the values): grid.x = C x rows_per_grid_row, grid.y = ceil(rows / rows_per_grid_row).
        // Grid-regs: grid.x = C x rows exactly, a row's C CTAs consecutive (no CTA may leave before the
        // barrier). Grid-regs steps: grid.x = C x G, step s taking rows s x G .. s x G + G - 1.
        const bool grid_split = kRowSteps || args.chunks > 0;
        const unsigned ranks = grid_split ? static_cast<unsigned>(args.chunks) : cluster_size();
        const unsigned rank = grid_split ? block_x() % ranks : cluster_rank();
        std::int64_t step_row = static_cast<std::int64_t>(block_y()) * (gridDim.x / ranks) + block_x() / ranks;
        if constexpr (kRowSteps) step_row += static_cast<std::int64_t>(step) * (gridDim.x / ranks);
        if (!kRowSteps && step_row >= args.rows) return;  // the whole cluster shares the row, so it leaves together
        const bool active = !kRowSteps || step_row < args.rows;
        const std::int64_t row = active ? step_row : 0;
        // How a cluster's CTAs exchange their statistics: pushed into every peer's mailbox (no release
        // barriers, none at exit), or written locally and read by the peers between two cluster barriers.
        // Pushing costs the 8- and 16-value instances registers, and so CTAs per SM: they pull, with an exit
        // barrier that orders no memory (performance.md#block-regs).
        constexpr bool kPushStats = kValues >= 32;
        if constexpr (kPushStats) {
            if (!grid_split && ranks > 1) mailbox_open(mailbox, ranks);
        }
        const X* x = static_cast<const X*>(args.x);
        Y* y = static_cast<Y*>(args.y);
        const Input input = Input::of(args);
        const Output output = Output::of(args);
        const std::int64_t slice_begin = static_cast<std::int64_t>(rank) * args.slice_len;
        const std::int64_t remaining = args.row_len - slice_begin;
        const int slice_count = static_cast<int>(remaining < 0 ? 0 : (remaining < args.slice_len ? remaining : args.slice_len));
        const int count = active ? slice_count : 0;
        int tid = threadIdx.x;
        int threads = blockDim.x;
        if constexpr (kRowSteps) asm volatile("" : "+r"(tid), "+r"(threads));
        const int lane = tid % 32;
        const int warp = tid / 32;
        const X* x_slice = x + row * args.x_row_stride + slice_begin;
        Y* y_slice = y + row * args.y_row_stride + slice_begin;
        // Slices start at multiples of 16 bytes of x, so every slice has its row's 16-byte phase: peel the
        // elements before the first pack boundary (head) and after the last whole pack (tail); thread
        // t < head + tail holds one of them as its "edge" value.
        const int head = slice_head<kPackBytes>(x_slice, count);
        const int body_packs = (count - head) / kPack;
        const int tail_begin = head + body_packs * kPack;
        const bool has_edge = tid < count - body_packs * kPack;
        const int edge_index = tid < head ? tid : tail_begin + (tid - head);
        const X* x_body = x_slice + head;
        // Options (RowsOptionsInput): the row's scale, mask row and causal window, bound once per row. The
        // slice's elements from read_count on are past the causal window: packs wholly past it are not
        // loaded, and those elements hold -inf as the padding does. (The plain statements below stay as they
        // were written, in the else branches: merged with the options', the compiler scheduled the plain
        // instances differently.) The loads-first instance binds its row again after the loads (row_options).
        const auto row_at_loads = bind_fast_row<C>(input, row, args.row_len);
        // What the thread holds: z, x before the launch's scale, or x times the row's pre_factor where each row
        // folds its own scale (FoldedRowValues). The loads-first instances bind them again after the loads (values).
        const auto values_at_loads = row_held_values<C>(input, row_at_loads);
        int read_count = count;
        if constexpr (Input::kPerRow && !kLoadsBeforeWindow) {
            read_count = static_cast<int>(window_count(row_at_loads.read_len, slice_begin, count));
        }
        // The slice index (head first) of value k of pack p.
        const auto slice_index = [&](int p, int k) { return head + (p * threads + tid) * kPack + k; };
        // Packed holds with a causal window: calls exclude(p, k) for each element k of pack p past the window, one
        // test a pack (only a pack that reaches past the window tests its elements).
        const auto for_each_past_window = [&](const auto& exclude) {
#pragma unroll
            for (int p = 0; p < kPacks; ++p) {
                if (slice_index(p, kPack - 1) < read_count) continue;
#pragma unroll
                for (int k = 0; k < kPack; ++k) {
                    if (slice_index(p, k) >= read_count) exclude(p, k);
                }
            }
        };
        // Every load is issued before any value is used: kPacks 16-byte loads in flight per thread.
        Packed<X, kPack> raw[kPacks];
        // A row's own fold, then the packed hold's causal window, on the loaded packs: right after the loads, or in the
        // loads-first instances after their row's values are bound (its per-row scale read after x's loads).
        const auto fold_then_exclude = [&](const auto& row_values) {
            // A row's own fold: x times the row's pre_factor, in x's dtype (exact), before the window's -inf is set;
            // one uniform branch for all packs (a branch a pack was if-converted: a predicated multiply a value).
            if constexpr (kRowScaleFolded<Input>) {
                if (row_values.pre_factor_applies()) {
#pragma unroll
                    for (int p = 0; p < kPacks; ++p) row_values.apply_pre_factor(raw[p]);
                }
            }
            if constexpr (kPackedHold) {
                // The packed hold widens at each use, with the scale only: elements past the causal window hold
                // -inf in x's dtype (scale * -inf stays -inf for the scales the plan sends here:
                // block_regs_packed_options_apply, cluster_plan.cpp; a row's own fold set its pre_factor above, and
                // its factor is positive). Only where the window ends inside the slice (a test a row, uniform over the
                // CTA).
                if (read_count < count) {
                    const X excluded = StoreAs<X>::from(neg_inf<C>());
                    for_each_past_window([&](int p, int k) { raw[p].value[k] = excluded; });
                }
            }
        };
        // The keep and additive sets' mask packs, loaded with x's (empty for other inputs; f32 x's staged mask: each
        // taken from shared memory as its pack is widened). As words for 16-bit x and y at 32 values, whose four
        // packs' loads were serialized by the split into elements (LoadedMaskPack); 16-bit x to f32 split its
        // one-word packs all the same and took stack.
        using LoadedMask = LoadedMaskPack<Input, kPack, sizeof(X) == 2 && sizeof(Y) == 2 && kValues == 32>;
        typename LoadedMask::Pack mask_packs[kPacks];
        // The staged mask's packs, indexed as x's (pack p * threads + tid); unused without kStagedMask.
        Packed<X, kPack>* staged_mask = nullptr;
        if constexpr (kStagedMask) {
            // block_regs_mask_stage_bytes(threads, kValues, sizeof(X))
            extern __shared__ __align__(16) unsigned char mask_stage[];
            staged_mask = reinterpret_cast<Packed<X, kPack>*>(mask_stage);
        }
        if constexpr (kStagedSteps) {
            __shared__ std::uint64_t stage_landed;                        // the staged slice's bytes have landed
            extern __shared__ __align__(16) unsigned char step_stage[];  // the staged slice's packs
            // Thread 0 stages step `s`: the copy of its slice's whole packs, or an empty arrival past the rows. With
            // options, the packs that start inside the row's causal window (those the threads take below).
            const auto stage = [&](int s) {
                const std::int64_t stage_row = step_row + static_cast<std::int64_t>(s - step) * (gridDim.x / ranks);
                const X* stage_slice = x + stage_row * args.x_row_stride + slice_begin;
                const int stage_head = slice_head<kPackBytes>(stage_slice, slice_count);
                unsigned bytes = stage_row < args.rows ? static_cast<unsigned>((slice_count - stage_head) / kPack) * 16u : 0u;
                if constexpr (Input::kPerRow) {
                    if (stage_row < args.rows) {
                        const int window = static_cast<int>(window_count(input.read_len(stage_row, args.row_len), slice_begin, slice_count));
                        const unsigned window_bytes = window > stage_head ? static_cast<unsigned>((window - stage_head + kPack - 1) / kPack) * 16u : 0u;
                        bytes = window_bytes < bytes ? window_bytes : bytes;
                    }
                }
                bulk_copy_expect(&stage_landed, bytes);
                if (bytes > 0) bulk_copy_to_shared(step_stage, stage_slice + stage_head, bytes, &stage_landed);
            };
            if (step == 0) {
                if (tid == 0) {
                    bulk_barrier_init(&stage_landed);
                    stage(0);
                }
                __syncthreads();
            }
            bulk_barrier_wait(&stage_landed, static_cast<unsigned>(step) & 1u);
            const auto* packs = reinterpret_cast<const Packed<X, kPack>*>(step_stage);
#pragma unroll
            for (int p = 0; p < kPacks; ++p) {
                const int pack = p * threads + tid;
                // Options: packs past the causal window were not staged; their values become -inf in the widen. Set
                // here, so that no pack's registers carry over from the step before (that cost stack).
                if (pack < body_packs && (!Input::kPerRow || slice_index(p, 0) < read_count)) raw[p] = packs[pack];
                else if constexpr (Input::kPerRow) raw[p] = Packed<X, kPack>{};
            }
            __syncthreads();  // every thread has its packs: the stage may take the next step's
            if (tid == 0 && step + 1 < steps) {
                bulk_copy_after_reads();
                stage(step + 1);
            }
        } else if constexpr (kStagedMask) {
            // Whole-pack copies where the body's mask is aligned to them (then so is every pack's), else element
            // by element (a row stride that puts the mask at another 16-byte phase than x).
            const X* mask_body = reinterpret_cast<const X*>(row_at_loads.mask_row) + slice_begin + head;
            const bool mask_vector = reinterpret_cast<std::uintptr_t>(mask_body) % sizeof(Packed<X, kPack>) == 0;
#pragma unroll
            for (int p = 0; p < kPacks; ++p) {
                const int pack = p * threads + tid;
                if (pack < body_packs && slice_index(p, 0) < read_count) {
                    raw[p] = *reinterpret_cast<const Packed<X, kPack>*>(x_body + pack * kPack);
                    if (mask_vector) {
                        copy_vector_async<sizeof(Packed<X, kPack>)>(staged_mask + pack, mask_body + pack * kPack);
                    } else {
#pragma unroll
                        for (int k = 0; k < kPack; ++k) staged_mask[pack].value[k] = mask_body[pack * kPack + k];
                    }
                }
            }
            wait_async_copies();  // this thread's own copies: no barrier needed to read them
            if constexpr (kPackedHold) {
                // Past the causal window both x and the mask hold -inf, so z = scale * -inf + -inf = -inf whatever
                // the mask held there (+inf or NaN would otherwise give NaN); the plan sends causal rows here only
                // with a scale positive in float (block_regs_packed_options_apply, cluster_plan.cpp). The widened
                // hold sets -inf past the window as it widens.
                const X excluded = StoreAs<X>::from(neg_inf<C>());
                for_each_past_window([&](int p, int k) {
                    raw[p].value[k] = excluded;
                    staged_mask[p * threads + tid].value[k] = excluded;
                });
            }
        } else if constexpr (LoadedMask::kLoaded) {
            const auto read_mask_pack = mask_pack_reader<typename LoadedMask::Pack, typename LoadedMask::Element, kPack>(
                row_at_loads.mask_row, slice_begin + head);
#pragma unroll
            for (int p = 0; p < kPacks; ++p) {
                const int pack = p * threads + tid;
                if (pack < body_packs && slice_index(p, 0) < read_count) {
                    raw[p] = *reinterpret_cast<const Packed<X, kPack>*>(x_body + pack * kPack);
                    mask_packs[p] = read_mask_pack(pack);
                }
            }
        } else if constexpr (Input::kPerRow) {
            // The body packs that start inside the causal window (those before `window`), each behind its own tests.
            const auto load_window_packs = [&](int window) {
#pragma unroll
                for (int p = 0; p < kPacks; ++p) {
                    const int pack = p * threads + tid;
                    if (pack < body_packs && slice_index(p, 0) < window) {
                        raw[p] = *reinterpret_cast<const Packed<X, kPack>*>(x_body + pack * kPack);
                    }
                }
            };
            if constexpr (kLoadsFirst && kPackedHold) {
                // The packed loads-first instances issue plain's loads, past a causal window too (one-wave plans
                // afford the reads), and work the window out after them: the packs past it are set to -inf below.
#pragma unroll
                for (int p = 0; p < kPacks; ++p) {
                    const int pack = p * threads + tid;
                    if (pack < body_packs) raw[p] = *reinterpret_cast<const Packed<X, kPack>*>(x_body + pack * kPack);
                }
                if (input.has_window()) {
                    read_count = static_cast<int>(window_count(input.read_len(row, args.row_len), slice_begin, count));
                }
            } else if constexpr (kLoadsBeforeWindow) {
                // Without a causal window (a branch uniform over the launch) the loads are plain's.
                if (!input.has_window()) {
#pragma unroll
                    for (int p = 0; p < kPacks; ++p) {
                        const int pack = p * threads + tid;
                        if (pack < body_packs) raw[p] = *reinterpret_cast<const Packed<X, kPack>*>(x_body + pack * kPack);
                    }
                } else {
                    // From the input rather than row_options: the compiler computed the bound row's window ahead of
                    // the loads even where it was read only here.
                    read_count = static_cast<int>(window_count(input.read_len(row, args.row_len), slice_begin, count));
                    load_window_packs(read_count);
                }
            } else if constexpr (kFoldedAlone) {
                // The body packs that start inside the causal window: one test a load, as plain's.
                const int window_packs = read_count > head ? min(body_packs, (read_count - head + kPack - 1) / kPack) : 0;
#pragma unroll
                for (int p = 0; p < kPacks; ++p) {
                    const int pack = p * threads + tid;
                    if (pack < window_packs) raw[p] = *reinterpret_cast<const Packed<X, kPack>*>(x_body + pack * kPack);
                }
            } else {
                load_window_packs(read_count);
            }
            if constexpr (!kLoadsFirst) fold_then_exclude(values_at_loads);
        } else {
#pragma unroll
            for (int p = 0; p < kPacks; ++p) {
                const int pack = p * threads + tid;
                if (pack < body_packs) raw[p] = *reinterpret_cast<const Packed<X, kPack>*>(x_body + pack * kPack);
            }
        }
        // The row the widen and the write use: the loads-first instance binds it here, after x's loads were issued
        // (bound before them, its scale's conversion or per-row load went ahead of the loads); the others reuse
        // the binding above.
        const auto row_options = kLoadsFirst ? bind_fast_row<C>(input, row, args.row_len) : row_at_loads;
        const auto values = kLoadsFirst ? row_held_values<C>(input, row_options) : values_at_loads;
        if constexpr (kLoadsFirst && Input::kPerRow) fold_then_exclude(values);
        C edge;
        if constexpr (Input::kPerRow) {
            edge = has_edge && edge_index < read_count
                       ? values.held(row_options(to_compute(x_slice[edge_index]), slice_begin + edge_index))
                       : neg_inf<C>();
        } else {
            edge = has_edge ? input(to_compute(x_slice[edge_index])) : neg_inf<C>();
        }
        bool loaded[kPacks];
        C held[kPackedHold ? 1 : kValues];  // widened values (packed hold: raw is what the thread holds)
        if constexpr ((kUnmaskedOptions<Input> || LoadedMask::kLoaded) && !kPackedHold) {
            // The unmasked, keep and additive sets: the plain widen, z = mask(scale * x) with the pack's loaded or
            // staged mask (none for the unmasked set), -inf past the causal window (packs past it loaded nothing:
            // their values are all replaced). 16-bit x tests the window once a pack, its elements only in a pack that
            // reaches past it, rather than a test and a select for every element.
#pragma unroll
            for (int p = 0; p < kPacks; ++p) {
                loaded[p] = p * threads + tid < body_packs;
                widen_pack(raw[p], &held[p * kPack]);
                // A staged mask's pack comes from this thread's slot of shared memory, as the loaded one would.
                if constexpr (kStagedMask) mask_packs[p] = additive_mask_pack_of(staged_mask[p * threads + tid]);
#pragma unroll
                for (int k = 0; k < kPack; ++k) held[p * kPack + k] = mask_packs[p](row_options.scaled(held[p * kPack + k]), k);
                if ((!kWindowTestedPerRow || read_count < count) &&
                    (kWindowTestedPerValue || slice_index(p, kPack - 1) >= read_count)) {
#pragma unroll
                    for (int k = 0; k < kPack; ++k) {
                        if (slice_index(p, k) >= read_count) held[p * kPack + k] = neg_inf<C>();
                    }
                }
            }
        } else if constexpr (Input::kPerRow && !kPackedHold) {
            // The any set: z = scale * x as each pack is widened, -inf past the causal window or where a keep
            // mask excludes, plus an additive mask: the mask read a pack at a time here, so no option state per
            // value outlives this loop. A pack wholly past the window reads neither x nor mask.
            visit_mask_packs<kPack>(row_options, slice_begin + head, [&](const auto& read_mask_pack) {
#pragma unroll
                for (int p = 0; p < kPacks; ++p) {
                    const int pack = p * threads + tid;
                    loaded[p] = pack < body_packs;
                    const int first = slice_index(p, 0);
                    if (!loaded[p] || first >= read_count) {
#pragma unroll
                        for (int k = 0; k < kPack; ++k) held[p * kPack + k] = neg_inf<C>();
                        continue;
                    }
                    const auto mask = read_mask_pack(pack);
                    widen_pack(raw[p], &held[p * kPack]);
#pragma unroll
                    for (int k = 0; k < kPack; ++k) {
                        const C z = mask(row_options.scale * held[p * kPack + k], k);
                        held[p * kPack + k] = first + k < read_count ? z : neg_inf<C>();
                    }
                }
            });
        } else {
#pragma unroll
            for (int p = 0; p < kPacks; ++p) {
                loaded[p] = p * threads + tid < body_packs;
                if constexpr (!kPackedHold) {
                    widen_pack(raw[p], &held[p * kPack]);
#pragma unroll
                    for (int k = 0; k < kPack; ++k) held[p * kPack + k] = input(held[p * kPack + k]);
                }
            }
        }
        const auto value = [&](int i) -> C {
            if constexpr (kStagedMask && kPackedHold) {
                // z = scale * x + mask, the product rounded on its own as the widened bodies round it.
                const Packed<X, kPack> mask = staged_mask[(i / kPack) * threads + tid];
                return row_options.scaled(widen_element_on_use(raw[i / kPack], i % kPack)) +
                       widen_element_on_use(mask, i % kPack);
            } else if constexpr (kPackedHold && Input::kPerRow) {
                return row_options.scaled(widen_element_on_use(raw[i / kPack], i % kPack));
            } else if constexpr (kPackedHold) {
                return input(widen_element_on_use(raw[i / kPack], i % kPack));
            } else {
                return held[i];
            }
        };

        // This thread's statistics, shifted by its own max (0 when it holds only -inf, so padding adds
        // exp(-inf) = 0 rather than NaN). fmaxf may drop a NaN, but exp(NaN) puts it in the sum, and a NaN
        // sum then becomes a NaN max: the invariant combine() relies on (+inf: inf - inf = NaN likewise).
        C thread_max = edge;
#pragma unroll
        for (int p = 0; p < kPacks; ++p) {
            if (!loaded[p]) continue;
#pragma unroll
            for (int k = 0; k < kPack; ++k) thread_max = max_skip_nan(thread_max, value(p * kPack + k));
        }
        thread_max = values.to_shift(thread_max);  // in z's units (folded inputs hold x, or x times the pre_factor)
        const bool thread_all_neg_inf = thread_max == neg_inf<C>();
        const C shift = thread_all_neg_inf ? C(0) : thread_max;
        C edge_exp = 0;
        C thread_sum = 0;
        C unbias = 1;  // the fast exp's factor (see with_shifted_exp), removed from this thread's sum
        values.with_exp(shift, [&](const auto& exp) {
            edge_exp = exp(edge);
            thread_sum = edge_exp;
#pragma unroll
            for (int p = 0; p < kPacks; ++p) {
                if (!loaded[p]) continue;
#pragma unroll
                for (int k = 0; k < kPack; ++k) {
                    const C e = exp(value(p * kPack + k));
                    thread_sum += e;
                    if constexpr (!kExpInWrite) {
                        if (output.uses_exp()) held[p * kPack + k] = e;  // softmax keeps the exp; log-softmax keeps v
                    }
                }
            }
            unbias = exp.unbias();
        });
        thread_sum *= unbias;
        if (output.uses_exp()) edge = edge_exp;
        if (thread_sum != thread_sum) thread_max = thread_sum;

        // CTA statistics: in `exchange`, and complete in warp 0 (same tree in every CTA).
        Stats<C> stats = block_stats_to(Stats<C>{thread_max, thread_sum}, warp_partials, &exchange);
        Stats<C> row_stats;
        if (grid_split) {
            // Each CTA publishes its statistics, the grid barrier (a fence included) makes them visible,
            // then warp 0 of every CTA folds the row's partials in rank order: bitwise the same everywhere.
            Stats<C>* partials = static_cast<Stats<C>*>(args.workspace) + row * ranks;
            if (tid == 0 && active) partials[rank] = stats;
            cooperative_groups::this_grid().sync();
            if constexpr (kRowSteps) {
                // Up to kGridRegsStepsMaxChunks partials: one load per thread, all in flight at once, then the
                // same fold as below from shared memory (one L2 round trip instead of one per 32 partials).
                if (active) {
                    for (unsigned c = tid; c < ranks; c += threads) staged_partials[c] = load_stats_uncached(partials + c);
                }
                __syncthreads();
            }
            if (warp == 0 && active) {
                Stats<C> folded = empty_stats<C>();
                // Rows of 33-64 CTAs: each lane requests its two partials before folding either, so warp 0
                // waits on L2 once, not twice. Not in the 16-value instances, where the registers it takes
                // cost 16-bit x a CTA of 512 per SM (performance.md#grid-regs). The fold's order, and so its
                // bits, are those of one partial a trip.
                constexpr bool kTwoPerTrip = !kRowSteps && kValues != 16;
                if (kTwoPerTrip && lane < ranks) {
                    const bool has_second = lane + 32 < ranks;
                    const Stats<C> first = load_stats_uncached(partials + lane);
                    const Stats<C> second = load_stats_uncached(partials + (has_second ? lane + 32 : lane));
                    folded = combine(folded, first);
                    if (has_second) folded = combine(folded, second);
                }
                for (unsigned c = lane + (kTwoPerTrip ? 64 : 0); c < ranks; c += 32) {
                    folded = combine(folded, kRowSteps ? staged_partials[c] : load_stats_uncached(partials + c));
                }
                folded = warp_combine_stats(folded);
                if (lane == 0) cluster_stats = folded;
            }
            __syncthreads();
            row_stats = cluster_stats;
        } else if (ranks > 1) {
            // Warp 0 of every CTA folds all CTAs' statistics in rank order: bitwise the same everywhere.
            if constexpr (kPushStats) {
                cluster_wait();  // every peer's mailbox is set up
                if (warp == 0) {
                    // Every lane of warp 0 holds this CTA's statistics: lane r posts them to rank r.
                    if (lane < static_cast<int>(ranks)) mailbox_post(mailbox, stats, rank, lane);
                    mailbox_wait(mailbox);
                    stats = warp_combine_stats(lane < static_cast<int>(ranks) ? mailbox.slots[lane] : empty_stats<C>());
                    if (lane == 0) cluster_stats = stats;
                }
            } else {
                cluster_sync();
                if (warp == 0) {
                    stats = warp_combine_stats(lane < static_cast<int>(ranks) ? read_peer(&exchange, lane)
                                                                                    : empty_stats<C>());
                    if (lane == 0) cluster_stats = stats;
                }
            }
            __syncthreads();
            row_stats = cluster_stats;
        } else {
            __syncthreads();
            row_stats = exchange;
        }

        // All -inf rows have sum 0: 0 * (1 / 0) and -inf - -inf both give NaN, as the reference does.
        // The held exps (and the packed path's recomputed ones) are relative to this thread's shift and carry
        // the fast exp's factor: the scale takes them to the row's max and removes it (computed only by
        // formulas of exps; its captures by value: by reference they changed the compiled code).
        const auto scale = [thread_all_neg_inf, unbias, shift, row_max = row_stats.max] {
            return thread_all_neg_inf ? C(0) : unbias * exp_of(shift - row_max);
        };
        const auto factor = output.row_factor(row_stats.sum, scale);
        edge = output.element(edge, row_stats.max, factor);

        Y* y_body = y_slice + head;
        const bool y_packs_aligned = reinterpret_cast<std::uintptr_t>(y_body) % kStoreAlignment<Y, kPack> == 0;
        const auto write = [&](const auto& output) {
#pragma unroll
            for (int p = 0; p < kPacks; ++p) {
                if (!loaded[p]) continue;
                const int pack = p * threads + tid;
                C out[kPack];
#pragma unroll
                for (int k = 0; k < kPack; ++k) out[k] = output(p * kPack + k);
                if (y_packs_aligned) {
                    store_pack<Y, kPack>(y_body + pack * kPack, out);
                } else {
#pragma unroll
                    for (int k = 0; k < kPack; ++k) y_body[pack * kPack + k] = StoreAs<Y>::from(out[k]);
                }
            }
        };
        bool empty_row = false;  // masked_rows zero and nothing to normalize (options only; uniform per row)
        // The sum of an all -inf row is 0 here, NaN only where a kept z is NaN.
        if constexpr (Input::kPerRow) empty_row = input.writes_empty_row(row_stats.max, row_stats.sum != row_stats.sum);
        if (empty_row) {
            const C empty = empty_row_value<C>(!output.uses_exp());
            write([&](int) -> C { return empty; });
            edge = empty;
        } else if constexpr (kExpInWrite) {
            if constexpr (Output::kUsesExp) {
                // Each element's exp computed again; for 16-bit y with 1 / sum folded into it.
                // (Not for grid-regs steps: they write exactly what grid-regs writes, exp(v) x factor.)
                const auto folded = Output::folded_exp(row_stats.max, row_stats.sum);
                // A row's own factor folds here only where its multiplier is finite (FoldedRowValues).
                bool multiplier_finite = true;
                if constexpr (kRowScaleFolded<Input>) multiplier_finite = values.multiplier_finite();
                if (kPackedHold && sizeof(Y) == 2 && folded.applies() && multiplier_finite) {
                    if constexpr (kHeldBeforeScale<Input>) {
                        C folded_scale;  // the row's own factor, or the launch's scale
                        if constexpr (kRowScaleFolded<Input>) folded_scale = values.fold().factor;
                        else folded_scale = input.template launch_scale<C>();
                        const C multiplier = folded_scale * kLog2e;
                        write([&](int i) -> C { return folded.of_scaled(value(i), multiplier); });
                    } else {
                        write([&](int i) -> C { return folded(value(i)); });
                    }
                } else {
                    values.with_exp(shift, [&](const auto& exp) {
                        write([&](int i) -> C {
                            return Output::element_from_value(value(i), row_stats.max, factor, exp);
                        });
                    });
                }
            } else {
                write([&](int i) -> C { return Output::element(value(i), row_stats.max, factor); });
            }
        } else if constexpr (kValues == 32) {
            // One loop: a run-time mode is tested per element (registers; see block_regs_modes).
            write([&](int i) -> C { return output.element(value(i), row_stats.max, factor); });
        } else {
            // One loop per mode: a run-time mode branches once, into its fixed formula.
            output.visit(factor, [&](auto formula, C formula_factor) {
                write([&](int i) -> C { return formula.element(value(i), row_stats.max, formula_factor); });
            });
        }
        if (has_edge) y_slice[edge_index] = StoreAs<Y>::from(edge);
        // Pulled statistics: peers may still be reading this CTA's exchange slot, so it stays resident
        // until the whole cluster is done (their reads are complete: they used the values before arriving).
        if constexpr (!kPushStats) {
            if (!grid_split && ranks > 1) cluster_sync_unordered();
        }
    }
}

// The mode is a compile-time choice inside each kernel (a body per mode, as in the warp kernel): a run-time
// one costs an instruction per element (a select between the exp and the value) and, unless the write
// loop is split per mode, both formulas in the write. 16-bit -> f32 at 16 and 32 values lost that way (their
// per-mode bodies took more registers), so they keep the run-time mode (ForwardOutput) with the write loops
// they had: split per mode at 16 values, one loop at 32 (performance.md#block-regs).
// Input: PlainInput, or a RowsOptionsInput for the options instances; kLoadsFirst as block_regs_rows takes it.
template <class X, class Y, int kValues, bool kRowSteps = false, class Input = PlainInput, bool kLoadsFirst = false>
__device__ __forceinline__ void block_regs_modes(const BlockRegsParams& args) {
    if constexpr (sizeof(X) == 2 && sizeof(Y) == 4 && (kValues == 16 || kValues == 32)) {
        block_regs_rows<X, Y, kValues, kRowSteps, Input, ForwardOutput, kLoadsFirst>(args);
    } else if (args.log_mode != 0) {
        block_regs_rows<X, Y, kValues, kRowSteps, Input, LogSoftmaxOutput, kLoadsFirst>(args);
    } else if constexpr (sizeof(X) == 2 && kValues == 32) {
        // Softmax of the unmasked set: its scale folded into the exps where the plan allows it. 16-bit x at 32
        // values only: the second body cost the 16-value instances 9-12 registers and f32 x's 32 values more
        // stack, where these kept theirs (docs/performance.md, "options: scale folded into the exp"); f32 x at 32
        // values and the packed 64 fold in instances of their own (block_regs_softmax_options_folded and
        // block_regs_softmax_options_packed_folded).
        with_folded_input<Input, SoftmaxOutput>(args, [&](auto input_tag) {
            block_regs_rows<X, Y, kValues, kRowSteps, typename decltype(input_tag)::type, SoftmaxOutput, kLoadsFirst>(args);
        });
    } else {
        block_regs_rows<X, Y, kValues, kRowSteps, Input, SoftmaxOutput, kLoadsFirst>(args);
    }
}

// 8, 16 and 32 values per thread: up to 1024 threads (at most 64 registers), the register count otherwise
// left to the compiler. A stated minimum, even of one CTA per SM, let it take all 64 registers, so none is
// stated (performance.md#block-regs).
template <class X, class Y, int kValues>
__global__ void __launch_bounds__(1024) block_regs_softmax(const ParamBlock<BlockRegsParams> args) {
    block_regs_modes<X, Y, kValues>(args);
}

// 64 values per thread (16-bit x held packed): at most 512 threads and two such CTAs per SM (at most 64
// registers): left to itself the compiler gave the bf16 -> f32 instance more, one CTA per SM, and the plan
// then chose worse configurations (performance.md#block-regs).
template <class X, class Y>
__global__ void __launch_bounds__(512, 2) block_regs_softmax_packed(const ParamBlock<BlockRegsParams> args) {
    block_regs_modes<X, Y, 64>(args);
}

// Grid-regs steps: the 32-value instance only, which grid-regs takes for its longest slices (16384
// elements, 512 threads: rows past 524288 elements, the only ones whose CTAs can outnumber the device's),
// and f32 x only (block_regs_steps_instance).
template <class X, class Y>
__global__ void __launch_bounds__(1024) block_regs_softmax_steps(const ParamBlock<BlockRegsParams> args) {
    block_regs_modes<X, Y, kGridRegsStepsValues, true>(args);
}

// Its options instances, of the unmasked set (scale, causal window, masked rows): the same bounds. kFoldScale:
// softmax alone, with the launch's scale folded into the exps (the plan's choice: RowsOptionsParams::fold_scale),
// so no element pays a multiply; otherwise both modes, each x multiplied by the scale as it is widened.
template <class X, class Y, bool kFoldScale>
__global__ void __launch_bounds__(1024) block_regs_softmax_steps_options(const ParamBlock<BlockRegsParams> args) {
    if constexpr (kFoldScale) {
        block_regs_rows<X, Y, kGridRegsStepsValues, true, RowsOptionsInput<RowsOptionSet::Unmasked, X, true>, SoftmaxOutput>(args);
    } else {
        block_regs_modes<X, Y, kGridRegsStepsValues, true, RowsOptionsInput<RowsOptionSet::Unmasked, X>>(args);
    }
}

// The options instances (RowsOptionsInput of one RowsOptionSet), 8, 16 and 32 values
// (kBlockRegsOptionsMaxValues): the plain kernels' launch bounds, no row steps.
template <class X, class Y, int kValues, RowsOptionSet kSet>
__global__ void __launch_bounds__(1024) block_regs_softmax_options(const ParamBlock<BlockRegsParams> args) {
    block_regs_modes<X, Y, kValues, false, RowsOptionsInput<kSet, X>>(args);
}

// Grid-regs' options rows of 16-bit x in the unmasked set (scale, per-row scale, causal) at 16 values: x's loads go
// first, as plain's do (block_regs_rows' kLoadsFirst). Grid-regs runs few CTAs a launch, so the registers that costs
// (up to 64) take no CTA's place there (grid_plan.cpp checks that its CTAs all fit); block-regs' clusters keep the
// shared instance. At 32 values, with every register taken, the same split took stack (f16) and moved the folded
// and causal paths' loads later, so 32 values keep the shared instance. The options kernels' launch bounds.
template <class X, class Y, int kValues>
__global__ void __launch_bounds__(1024) block_regs_softmax_options_loads_first(const ParamBlock<BlockRegsParams> args) {
    block_regs_modes<X, Y, kValues, false, RowsOptionsInput<RowsOptionSet::Unmasked, X>, true>(args);
}

// The unmasked set's softmax with the scale folded into its exps (RowsOptionsInput's kFoldScale), alone in a
// kernel: f32 x at 32 values, whose options kernel holds the multiplying and log-softmax bodies, and there a
// third body took stack where alone it fits 64 registers (docs/performance.md, "options: scale on warp 1024 and
// f32 block-regs"). 16-bit x folds inside its options kernel (block_regs_modes).
template <class X, class Y>
__global__ void __launch_bounds__(1024) block_regs_softmax_options_folded(const ParamBlock<BlockRegsParams> args) {
    block_regs_rows<X, Y, 32, false, RowsOptionsInput<RowsOptionSet::Unmasked, X, true>, SoftmaxOutput>(args);
}

// The packed 64-value options instances (16-bit x) of the unmasked set and of the additive set (16-bit y: its mask
// staged in dynamic shared memory, block_regs_mask_stage_bytes): the plain packed kernel's launch bounds.
template <class X, class Y, RowsOptionSet kSet>
__global__ void __launch_bounds__(512, 2) block_regs_softmax_options_packed(const ParamBlock<BlockRegsParams> args) {
    block_regs_modes<X, Y, 64, false, RowsOptionsInput<kSet, X>>(args);
}

// Softmax of the unmasked set with each row's own scale folded into its exps (per-row scales), in kernels of their
// own so that the launch's fold compiles as it does without them (a third body in the 16-bit options kernels
// changed their other bodies' code): 32 values (f32 and 16-bit x) with the folded instance's bounds, 16-bit x at
// the packed 64 with the packed kernel's.
template <class X>
using RowFoldedInput = RowsOptionsInput<RowsOptionSet::Unmasked, X, true, true>;

template <class X, class Y>
__global__ void __launch_bounds__(1024) block_regs_softmax_row_folded(const ParamBlock<BlockRegsParams> args) {
    block_regs_rows<X, Y, 32, false, RowFoldedInput<X>, SoftmaxOutput>(args);
}

template <class X, class Y>
__global__ void __launch_bounds__(512, 2) block_regs_softmax_row_folded_packed(const ParamBlock<BlockRegsParams> args) {
    block_regs_rows<X, Y, 64, false, RowFoldedInput<X>, SoftmaxOutput>(args);
}

// Its softmax with the scale folded into the exps, alone in a kernel as f32 x's folded instance is: beside the
// other two bodies it took 16 bytes of stack, its row's indices in vector registers and a branch a load
// (docs/performance.md, "options: the packed instance's own cost").
template <class X, class Y>
__global__ void __launch_bounds__(512, 2) block_regs_softmax_options_packed_folded(const ParamBlock<BlockRegsParams> args) {
    block_regs_rows<X, Y, 64, false, RowsOptionsInput<RowsOptionSet::Unmasked, X, true>, SoftmaxOutput>(args);
}

// The packed hold's folded and row-folded softmax with x's loads first (block_regs_rows' kLoadsFirst), for one-wave
// cluster plans: a CTA of those waits on every instruction before its first load, which the shared instances spend
// on the causal window's load bound and the scale. Their own kernels, the packed kernels' bounds: cluster_plan.cpp
// takes them only where all the launch's clusters are resident with them.
template <class X, class Y, class Input>
__global__ void __launch_bounds__(512, 2) block_regs_softmax_packed_loads_first(const ParamBlock<BlockRegsParams> args) {
    block_regs_rows<X, Y, 64, false, Input, SoftmaxOutput, true>(args);
}

// Grid-regs' per-row folded softmax of 16-bit x at 32 values with x's loads first (block_regs_rows' kLoadsFirst): a
// single row's few CTAs wait on every instruction before their first load, which the row-folded instance spent on
// the causal window and its row's scale. The row-folded kernel's bounds; grid_plan.cpp takes it where its CTAs all fit.
template <class X, class Y>
__global__ void __launch_bounds__(1024) block_regs_softmax_row_folded_loads_first(const ParamBlock<BlockRegsParams> args) {
    block_regs_rows<X, Y, 32, false, RowFoldedInput<X>, SoftmaxOutput, true>(args);
}

// f32 x's additive set at kBlockRegsStagedF32Values values with its mask staged (block_regs_stages_mask), a kernel
// per mode: with both modes' bodies in one kernel it took stack, where each alone fits 64 registers
// (docs/cuda-kernels.md, "f32 additive masks staged"). The plain kernels' launch bounds.
template <class X, class Y, class Output>
__global__ void __launch_bounds__(1024) block_regs_softmax_options_staged(const ParamBlock<BlockRegsParams> args) {
    block_regs_rows<X, Y, kBlockRegsStagedF32Values, false, RowsOptionsInput<RowsOptionSet::AdditiveOfX, X>, Output>(args);
}

// Whether the options instance of set kSet has a 32-value form: f16 -> f32's options forms spill there
// (docs/cuda-kernels.md, "Options instances"), and so do the keep and additive sets' on f32 x, whose 32 values
// and loaded mask outgrow 64 registers (docs/cuda-kernels.md, "Masks loaded with x"). f32 x's additive set has a
// 32-value form with its mask staged instead, which its own search takes (block_regs_staged_mask_instance).
template <class X, class Y, RowsOptionSet kSet>
constexpr bool kOptionsHold32 = !(std::is_same_v<X, __half> && std::is_same_v<Y, float>) &&
                                (sizeof(X) == 2 || !LoadedMaskPack<RowsOptionsInput<kSet, X>, 4>::kLoaded);

// The options instance of `values_per_thread` for `set` (8, 16 and 32 values; 64 for the unmasked set of
// 16-bit x and the additive set of 16-bit x and y).
template <class X, class Y, RowsOptionSet kSet>
const void* block_regs_options_instance(int values_per_thread) {
    switch (values_per_thread) {
        case 8: return reinterpret_cast<const void*>(&block_regs_softmax_options<X, Y, 8, kSet>);
        case 16: return reinterpret_cast<const void*>(&block_regs_softmax_options<X, Y, 16, kSet>);
        case 32:
            if constexpr (kOptionsHold32<X, Y, kSet>) {
                return reinterpret_cast<const void*>(&block_regs_softmax_options<X, Y, 32, kSet>);
            }
            return nullptr;
        case 64:
            if constexpr (sizeof(X) == 2 && (kSet == RowsOptionSet::Unmasked ||
                                             block_regs_stages_mask(64, kSet, sizeof(X), sizeof(Y)))) {
                return reinterpret_cast<const void*>(&block_regs_softmax_options_packed<X, Y, kSet>);
            }
            return nullptr;
        default: return nullptr;
    }
}

// f32 x's additive set at kBlockRegsStagedF32Values values, its mask staged in shared memory (block_regs_stages_mask),
// for softmax or log-softmax (`log_mode`), or nullptr for other x and pairs without options instances.
template <class X, class Y>
const void* block_regs_staged_mask_instance(bool log_mode) {
    if constexpr (std::is_same_v<X, float> && kRowsOptionsPair<X, Y>) {
        static_assert(block_regs_stages_mask(kBlockRegsStagedF32Values, RowsOptionSet::AdditiveOfX, sizeof(X), sizeof(Y)));
        return log_mode ? reinterpret_cast<const void*>(&block_regs_softmax_options_staged<X, Y, LogSoftmaxOutput>)
                        : reinterpret_cast<const void*>(&block_regs_softmax_options_staged<X, Y, SoftmaxOutput>);
    }
    return nullptr;
}

// The plain kernel of `values_per_thread`, or with kOptions its options instance for `set` (pairs of
// kRowsOptionsPair, 8, 16 and 32 values, 64 for the unmasked set of 16-bit x and the additive set of 16-bit x
// and y).
template <class X, class Y, bool kOptions = false>
const void* block_regs_instance(int values_per_thread, RowsOptionSet set = RowsOptionSet::Any) {
    if constexpr (kOptions && !kRowsOptionsPair<X, Y>) {
        return nullptr;
    } else if constexpr (kOptions) {
        return visit_option_set(set, [values_per_thread](auto set_tag) -> const void* {
            constexpr RowsOptionSet kSet = decltype(set_tag)::value;
            // f32 x plans keep masks on the any set (regs_option_set_for): no keep instances to compile for it.
            if constexpr (kSet == RowsOptionSet::Keep && std::is_same_v<X, float>) {
                return nullptr;
            } else {
                return block_regs_options_instance<X, Y, kSet>(values_per_thread);
            }
        });
    } else {
        switch (values_per_thread) {
            case 8: return reinterpret_cast<const void*>(&block_regs_softmax<X, Y, 8>);
            case 16: return reinterpret_cast<const void*>(&block_regs_softmax<X, Y, 16>);
            case 32:
                // 32 doubles would take every register a thread of a 1024-thread CTA may have.
                if constexpr (!std::is_same_v<X, double>) return reinterpret_cast<const void*>(&block_regs_softmax<X, Y, 32>);
                return nullptr;
            case 64:
                // Only packed 16-bit inputs fit 64 values per thread in registers.
                if constexpr (sizeof(X) == 2) return reinterpret_cast<const void*>(&block_regs_softmax_packed<X, Y>);
                return nullptr;
            default: return nullptr;
        }
    }
}

// The folded softmax instance of `values_per_thread` (f32 x at 32 values, 16-bit x at 64), or nullptr.
template <class X, class Y>
const void* block_regs_folded_instance(int values_per_thread) {
    if constexpr (std::is_same_v<X, float> && kRowsOptionsPair<X, Y>) {
        if (values_per_thread == 32) return reinterpret_cast<const void*>(&block_regs_softmax_options_folded<X, Y>);
    } else if constexpr (sizeof(X) == 2 && kRowsOptionsPair<X, Y>) {
        if (values_per_thread == 64) return reinterpret_cast<const void*>(&block_regs_softmax_options_packed_folded<X, Y>);
    }
    return nullptr;
}

// The loads-first instance of `values_per_thread` (16-bit x of kRowsOptionsPair at 16 values), or nullptr.
template <class X, class Y>
const void* block_regs_loads_first_instance(int values_per_thread) {
    if constexpr (sizeof(X) == 2 && kRowsOptionsPair<X, Y>) {
        if (values_per_thread == 16) return reinterpret_cast<const void*>(&block_regs_softmax_options_loads_first<X, Y, 16>);
    }
    return nullptr;
}

// The packed loads-first instance of the folded softmax (`row_folded`: of the per-row folded one), 16-bit x and y of
// kRowsOptionsPair at the packed 64 values only (16-bit x to f32, which ranks the packed hold last, took stack with
// it), or nullptr.
template <class X, class Y>
const void* block_regs_packed_loads_first_instance(int values_per_thread, bool row_folded) {
    if constexpr (sizeof(X) == 2 && sizeof(Y) == 2 && kRowsOptionsPair<X, Y>) {
        if (values_per_thread != 64) return nullptr;
        return row_folded ? reinterpret_cast<const void*>(&block_regs_softmax_packed_loads_first<X, Y, RowFoldedInput<X>>)
                          : reinterpret_cast<const void*>(
                                &block_regs_softmax_packed_loads_first<X, Y, RowsOptionsInput<RowsOptionSet::Unmasked, X, true>>);
    }
    return nullptr;
}

// Grid-regs' loads-first instance of the per-row folded softmax (16-bit x and y of kRowsOptionsPair at 32 values: bf16
// to f32 took stack with it), or nullptr.
template <class X, class Y>
const void* block_regs_row_folded_loads_first_instance(int values_per_thread) {
    if constexpr (sizeof(X) == 2 && sizeof(Y) == 2 && kRowsOptionsPair<X, Y>) {
        if (values_per_thread == 32) return reinterpret_cast<const void*>(&block_regs_softmax_row_folded_loads_first<X, Y>);
    }
    return nullptr;
}

// The per-row folded instance of `values_per_thread` (32 values, and 16-bit x at 64), or nullptr. 16-bit x at 32
// values folds since its loads are issued before the row's scale is read (performance.md, "options: per-row scale
// and causal on 16-bit rows (branch rowscale16)").
template <class X, class Y>
const void* block_regs_row_folded_instance(int values_per_thread) {
    if constexpr (kRowsOptionsPair<X, Y>) {
        if (values_per_thread == 32) return reinterpret_cast<const void*>(&block_regs_softmax_row_folded<X, Y>);
    }
    if constexpr (kRowsOptionsPair<X, Y> && sizeof(X) == 2) {
        if (values_per_thread == 64) return reinterpret_cast<const void*>(&block_regs_softmax_row_folded_packed<X, Y>);
    }
    return nullptr;
}

// f32 x only: 16-bit x's steps move half the bytes for the same fixed costs, and lost to split-row whether
// staged or not (performance.md#grid-regs-steps). kOptions: the unmasked set's instance, for the pairs of
// kRowsOptionsPair, with the scale folded into softmax's exps where `fold`.
template <class X, class Y, bool kOptions = false>
const void* block_regs_steps_instance(bool fold = false) {
    if constexpr (!std::is_same_v<X, float>) {
        return nullptr;
    } else if constexpr (kOptions) {
        if constexpr (kRowsOptionsPair<X, Y>) {
            return fold ? reinterpret_cast<const void*>(&block_regs_softmax_steps_options<X, Y, true>)
                        : reinterpret_cast<const void*>(&block_regs_softmax_steps_options<X, Y, false>);
        }
        return nullptr;
    } else {
        return reinterpret_cast<const void*>(&block_regs_softmax_steps<X, Y>);
    }
}

}  // namespace smx::cuda
