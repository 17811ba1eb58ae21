// block_regs_softmax.cu - rows of 1025..524288 elements, Rows layout: C CTAs per row, each CTA owning a
// slice of ceil(n / C) elements (rounded up to a 16-byte pack) that its threads hold in REGISTERS (16-bit
// inputs packed, widened on use), kValues per thread. Per row: every load issued first, one exp per element
// (kept in the registers), one (max, sum) reduction per CTA, combined across the row's CTAs, then the
// write. Traffic: x read once, y written once. The CTAs of a row combine their statistics either
//   - as a thread-block cluster (C = 1..16) through distributed shared memory (block-regs plans): each
//     CTA pushes its statistics into every peer's mailbox (cluster.cuh; 8/16-value instances: peers read
//     them between two cluster barriers), or
//   - through the workspace behind a grid-wide barrier (grid-regs plans, args.chunks = C > 0): a
//     cooperative launch whose CTAs are all resident at once, so one row can spread over every SM.
#include <type_traits>

#include "cuda/cluster.cuh"
#include "cuda/softmax_common.cuh"

namespace smx::cuda {
namespace {

// Whether a body serves one mode, chosen at compile time, or both (args.log_mode read at run time).
enum class ModeChoice { kSoftmax, kLogSoftmax, kRunTime };

// The kernel body; the __global__ wrappers below differ only in their launch bounds.
template <class X, class Y, int kValues, ModeChoice kMode>
__device__ __forceinline__ void block_regs_rows(const SoftmaxKernelArgs& args) {
    using C = ComputeType<X>;
    constexpr int kPack = kPackOfPair<X, Y>;
    constexpr int kPackBytes = kPack * static_cast<int>(sizeof(X));
    static_assert(kValues % kPack == 0, "a thread holds whole packs");
    constexpr int kPacks = kValues / kPack;
    // How a thread holds its values. Up to 32 values: widened to the compute type once, and softmax keeps
    // the exp it computed for the sum. 64 values (16-bit x only): kept packed in the input dtype, two per
    // register, widened at each use and exp recomputed in the write; that costs instructions, but 64
    // widened values would not fit in registers, and rows of 32000+ elements gained from the bytes in
    // flight (H200: 8192x32000 f16->f32 60% -> 81%).
    constexpr bool kPackedHold = kValues == 64;
    __shared__ Stats<C> warp_partials[32];
    __shared__ Stats<C> exchange;  // this CTA's statistics of the row, read by its cluster peers
    __shared__ Stats<C> cluster_stats;
    __shared__ ClusterMailbox<Stats<C>, kBlockRegsMaxCluster> mailbox;  // the cluster's CTA statistics, pushed by each CTA

    // One cluster per row (a persistent loop over rows made the compiler hoist per-pack addresses out of
    // it and spill the values): grid.x = C x rows_per_grid_row, grid.y = ceil(rows / rows_per_grid_row).
    // Grid-regs: grid.x = C x rows exactly, a row's C CTAs consecutive (no CTA may leave before the barrier).
    const bool grid_split = args.chunks > 0;
    const unsigned ranks = grid_split ? static_cast<unsigned>(args.chunks) : cluster_size();
    const unsigned rank = grid_split ? blockIdx.x % ranks : cluster_rank();
    const std::int64_t row = static_cast<std::int64_t>(blockIdx.y) * (gridDim.x / ranks) + blockIdx.x / ranks;
    if (row >= args.rows) return;  // the whole cluster shares the row, so it leaves together
    // How a cluster's CTAs exchange their statistics: pushed into every peer's mailbox (no release
    // barriers, none at exit), or written locally and read by the peers between two cluster barriers.
    // Pushing raised the registers of the 8- and 16-value instances by 6-10 (which cost them CTAs per SM),
    // so they pull, with an exit barrier that orders no memory.
    constexpr bool kPushStats = kValues >= 32;
    if constexpr (kPushStats) {
        if (!grid_split && ranks > 1) mailbox_open(mailbox, ranks);
    }
    const X* x = static_cast<const X*>(args.x);
    Y* y = static_cast<Y*>(args.y);
    // A constant unless kMode is kRunTime: the compiler then drops the other mode's code.
    const bool log_mode = kMode == ModeChoice::kRunTime ? args.log_mode != 0 : kMode == ModeChoice::kLogSoftmax;
    const std::int64_t slice_begin = static_cast<std::int64_t>(rank) * args.slice_len;
    const std::int64_t remaining = args.row_len - slice_begin;
    const int count = static_cast<int>(remaining < 0 ? 0 : (remaining < args.slice_len ? remaining : args.slice_len));
    const int tid = threadIdx.x;
    const int threads = blockDim.x;
    const int lane = tid % 32;
    const int warp = tid / 32;

    {
        const X* x_slice = x + row * args.x_row_stride + slice_begin;
        Y* y_slice = y + row * args.y_row_stride + slice_begin;
        // Slices start at multiples of 16 bytes of x, so every slice has its row's 16-byte phase: peel the
        // elements before the first pack boundary (head) and after the last whole pack (tail); thread
        // t < head + tail holds one of them as its "edge" value.
        const int misalignment = static_cast<int>(reinterpret_cast<std::uintptr_t>(x_slice) % kPackBytes);
        const int head = min(count, (kPackBytes - misalignment) % kPackBytes / static_cast<int>(sizeof(X)));
        const int body_packs = (count - head) / kPack;
        const int tail_begin = head + body_packs * kPack;
        const bool has_edge = tid < count - body_packs * kPack;
        const int edge_index = tid < head ? tid : tail_begin + (tid - head);
        const X* x_body = x_slice + head;

        // Every load is issued before any value is used: kPacks 16-byte loads in flight per thread.
        Packed<X, kPack> raw[kPacks];
#pragma unroll
        for (int p = 0; p < kPacks; ++p) {
            const int pack = p * threads + tid;
            if (pack < body_packs) raw[p] = *reinterpret_cast<const Packed<X, kPack>*>(x_body + pack * kPack);
        }
        C edge = has_edge ? to_compute(x_slice[edge_index]) : neg_inf<C>();
        bool loaded[kPacks];
        C held[kPackedHold ? 1 : kValues];  // widened values (packed hold: raw is what the thread holds)
#pragma unroll
        for (int p = 0; p < kPacks; ++p) {
            loaded[p] = p * threads + tid < body_packs;
            if constexpr (!kPackedHold) widen_pack(raw[p], &held[p * kPack]);
        }
        const auto value = [&](int i) -> C {
            if constexpr (kPackedHold) {
                return widen_element_on_use(raw[i / kPack], i % kPack);
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
        const bool thread_all_neg_inf = thread_max == neg_inf<C>();
        const C shift = thread_all_neg_inf ? C(0) : thread_max;
        C edge_exp = 0;
        C thread_sum = 0;
        C unbias = 1;  // the fast exp's factor (see with_shifted_exp), removed from this thread's sum
        with_shifted_exp(shift, [&](const auto& exp) {
            edge_exp = exp(edge);
            thread_sum = edge_exp;
#pragma unroll
            for (int p = 0; p < kPacks; ++p) {
                if (!loaded[p]) continue;
#pragma unroll
                for (int k = 0; k < kPack; ++k) {
                    const C e = exp(value(p * kPack + k));
                    thread_sum += e;
                    if constexpr (!kPackedHold) {
                        if (!log_mode) held[p * kPack + k] = e;  // softmax keeps the exp; log-softmax keeps v
                    }
                }
            }
            unbias = exp.unbias();
        });
        thread_sum *= unbias;
        if (!log_mode) edge = edge_exp;
        if (thread_sum != thread_sum) thread_max = thread_sum;

        // CTA statistics: in `exchange`, and complete in warp 0 (same tree in every CTA).
        Stats<C> stats = block_stats_to(Stats<C>{thread_max, thread_sum}, warp_partials, &exchange);
        Stats<C> row_stats;
        if (grid_split) {
            // Each CTA publishes its statistics, the grid barrier (a fence included) makes them visible,
            // then warp 0 of every CTA folds the row's partials in rank order: bitwise the same everywhere.
            Stats<C>* partials = static_cast<Stats<C>*>(args.workspace) + row * ranks;
            if (tid == 0) partials[rank] = stats;
            cooperative_groups::this_grid().sync();
            if (warp == 0) {
                Stats<C> folded = empty_stats<C>();
                for (unsigned c = lane; c < ranks; c += 32) folded = combine(folded, load_stats_uncached(partials + c));
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
        const C log_sum = log_mode ? log_of(row_stats.sum) : C(0);
        // The held exps (and the packed path's recomputed ones) carry the fast exp's factor: unbias it.
        const C factor =
            log_mode ? C(0)
                     : (thread_all_neg_inf ? C(0) : unbias * exp_of(shift - row_stats.max)) * reciprocal(row_stats.sum);
        edge = log_mode ? (edge - row_stats.max) - log_sum : edge * factor;

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
        if constexpr (kMode == ModeChoice::kSoftmax && kPackedHold) {
            // Packed: each element's exp is computed again; for 16-bit y with 1 / sum folded into it.
            const FoldedSoftmaxExp folded(row_stats.max, row_stats.sum);
            if (sizeof(Y) == 2 && folded.applies()) {
                write([&](int i) -> C { return folded(value(i)); });
            } else {
                with_shifted_exp(shift, [&](const auto& exp) { write([&](int i) -> C { return exp(value(i)) * factor; }); });
            }
        } else if constexpr (kPackedHold) {
            static_assert(kMode == ModeChoice::kLogSoftmax, "packed instances take the mode at compile time");
            write([&](int i) -> C { return (value(i) - row_stats.max) - log_sum; });
        } else if constexpr (kMode == ModeChoice::kRunTime && kValues == 32) {
            // Both formulas in one loop, the mode tested per element (registers; see block_regs_modes).
            write([&](int i) -> C { return log_mode ? (value(i) - row_stats.max) - log_sum : held[i] * factor; });
        } else if (log_mode) {
            write([&](int i) -> C { return (value(i) - row_stats.max) - log_sum; });
        } else {
            write([&](int i) -> C { return held[i] * factor; });  // held is the exp already
        }
        if (has_edge) y_slice[edge_index] = StoreAs<Y>::from(edge);
    }
    // Pulled statistics: peers may still be reading this CTA's exchange slot, so it stays resident until
    // the whole cluster is done (their reads are complete: they used the values before arriving).
    if constexpr (!kPushStats) {
        if (!grid_split && ranks > 1) cluster_sync_unordered();
    }
}

// The mode is a compile-time choice inside each kernel (a body per mode, as in the warp kernel): a run-time
// one costs an instruction per element (a select between the exp and the value) and, unless the write
// loop is split per mode, both formulas in the write. Measured A/B against the run-time mode (perf-notes
// run 70): 16-bit -> 16-bit up to +7 points of copy (65536 x 2048 f16 85 -> 92%), but 16-bit -> f32 at
// 16 and 32 values lost 1-2 points (bf16 -> f32 at 16 values took 54 registers instead of 39): those keep
// the run-time mode, with the write loops they had (split per mode at 16 values, one loop at 32: run 29).
template <class X, class Y, int kValues>
__device__ __forceinline__ void block_regs_modes(const SoftmaxKernelArgs& args) {
    if constexpr (sizeof(X) == 2 && sizeof(Y) == 4 && (kValues == 16 || kValues == 32)) {
        block_regs_rows<X, Y, kValues, ModeChoice::kRunTime>(args);
    } else if (args.log_mode != 0) {
        block_regs_rows<X, Y, kValues, ModeChoice::kLogSoftmax>(args);
    } else {
        block_regs_rows<X, Y, kValues, ModeChoice::kSoftmax>(args);
    }
}

// 8, 16 and 32 values per thread: up to 1024 threads (at most 64 registers), the register count otherwise
// left to the compiler. Stating a minimum of one CTA per SM is not the same: it let the compiler take all
// 64 registers (16 values: 38-40 -> 48-56), so none is stated.
template <class X, class Y, int kValues>
__global__ void __launch_bounds__(1024) block_regs_softmax(const SoftmaxKernelArgs args) {
    block_regs_modes<X, Y, kValues>(args);
}

// 64 values per thread (16-bit x held packed): at most 512 threads and two such CTAs per SM (at most 64
// registers): left to itself the compiler gave the bf16 -> f32 instance 74 registers, one CTA per SM, and
// the plan then chose worse configurations (8192 x 32000 bf16 -> f32: 87 -> 70% of copy).
template <class X, class Y>
__global__ void __launch_bounds__(512, 2) block_regs_softmax_packed(const SoftmaxKernelArgs args) {
    block_regs_modes<X, Y, 64>(args);
}

template <class X, class Y>
const void* block_regs_instance(int values_per_thread) {
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

}  // namespace

const void* block_regs_softmax_kernel(smxDataType_t x_dtype, smxDataType_t y_dtype, int values_per_thread) {
    return visit_dtype_pair(x_dtype, y_dtype, [values_per_thread](auto x_tag, auto y_tag) -> const void* {
        return block_regs_instance<typename decltype(x_tag)::type, typename decltype(y_tag)::type>(values_per_thread);
    });
}

}  // namespace smx::cuda
