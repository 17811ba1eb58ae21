// regs.cu - backward-regs and backward-grid: rows longer than backward-warp's, Rows layout. C CTAs per row,
// each owning a slice of slice_len elements (whole packs, so every slice keeps the row's phase) that its
// threads hold in REGISTERS: kValues elements of dy and of y per thread, in their own dtype (16-bit values
// two to a register, widened at each use). Per row: every load issued first, the thread's sum of terms,
// float y turned into its weights (kWeightsEarly), the CTA's sum (block_sum), the row's from its CTAs'
// sums, then dx written from the held values. Traffic: dy
// and y read once, dx written once. The CTAs of a row meet
//   - as a thread-block cluster (C = 1..16) through distributed shared memory (backward-regs): each CTA
//     pushes its sum into every peer's mailbox (cluster.cuh; the kPushSums instances), or, behind
//     SMX_CUDA_BACKWARD_EXCHANGE=pull, keeps it in its own shared memory for the peers to read between two
//     cluster barriers; either way every CTA folds the sums in rank order, so both give the same bits, or
//   - through the workspace behind a grid-wide barrier (backward-grid, args.chunks = C > 0): a cooperative
//     launch whose CTAs are all resident at once, so a few long rows spread over every SM.
// Design and expectations: performance.md#backward.
#include <cooperative_groups.h>

#include "cuda/backward/common.cuh"
#include "cuda/common/cluster.cuh"

namespace smx::cuda {
namespace {

// Whether a body takes y's weights before the row's sum is known, in y's own registers: for y held in its
// compute type (f32, f64). 16-bit y would need a float register per element instead of half of one.
template <class T>
constexpr bool kWeightsEarly = sizeof(T) >= 4;

// The body for one gradient formula (common/epilogue.cuh). kPushSums: a cluster's CTAs push their sums.
template <class T, class D, int kValues, bool kPushSums, class Gradient>
__device__ __forceinline__ void backward_regs_rows(const BackwardRowsParams& args) {
    using C = ComputeType<T>;
    constexpr int kPack = kPackOfPair<T, D>;
    constexpr int kPackBytes = kPack * static_cast<int>(sizeof(T));
    static_assert(kValues % kPack == 0, "a thread holds whole packs");
    constexpr int kPacks = kValues / kPack;
    __shared__ C warp_sums[32];
    __shared__ C cta_sum;  // this CTA's sum of the row's terms, read by its cluster peers (pulled sums)
    __shared__ ClusterMailbox<C, kBackwardRegsMaxCluster> mailbox;  // the cluster's CTA sums, pushed by each CTA
    __shared__ C row_sum;

    const bool grid_split = args.chunks > 0;
    const unsigned ranks = grid_split ? static_cast<unsigned>(args.chunks) : cluster_size();
    const unsigned rank = grid_split ? blockIdx.x % ranks : cluster_rank();
    // A cluster per row: grid.x = C x rows_per_grid_row, grid.y covers the rest. Grid form: grid.x = C x rows,
    // a row's C CTAs consecutive (none may leave before the grid barrier).
    const std::int64_t row = static_cast<std::int64_t>(blockIdx.y) * (gridDim.x / ranks) + blockIdx.x / ranks;
    if (row >= args.rows) return;  // the whole cluster shares the row, so it leaves together
    // Pushed sums: the mailbox is set up now, so its cluster barrier completes while the loads are in flight.
    const bool push_sums = kPushSums && !grid_split && ranks > 1;
    if (push_sums) mailbox_open(mailbox, ranks);
    const std::int64_t slice_begin = static_cast<std::int64_t>(rank) * args.slice_len;
    const std::int64_t remaining = args.row_len - slice_begin;
    const int count = static_cast<int>(remaining < 0 ? 0 : (remaining < args.slice_len ? remaining : args.slice_len));
    const T* dy_slice = static_cast<const T*>(args.dy) + row * args.dy_row_stride + slice_begin;
    const T* y_slice = static_cast<const T*>(args.y) + row * args.y_row_stride + slice_begin;
    D* dx_slice = static_cast<D*>(args.dx) + row * args.dx_row_stride + slice_begin;
    const int tid = threadIdx.x;
    const int threads = blockDim.x;
    // With same_phase every operand's slice has one head before its first whole pack: peel it and the tail
    // after the last whole pack (thread t < head + tail holds one of them as its "edge" element). Without it,
    // every pack is read and written element by element.
    const bool vector = args.same_phase != 0;
    const int head = vector ? head_before_packs<kPackBytes>(dy_slice, count) : 0;
    const int body_packs = (count - head) / kPack;
    const int tail_begin = head + body_packs * kPack;
    const bool has_edge = tid < count - body_packs * kPack;
    const int edge_index = tid < head ? tid : tail_begin + (tid - head);

    // Every load is issued before any value is used. 16-bit packs with vector access take a loop of their
    // own: with the choice made per pack, the compiler joined a pack's vector and element-wise forms by
    // half-word moves that read each vector load's registers at once, so every load waited for the one
    // before it (performance.md#backward-16-bit-dy-and-y). Wider packs join in whole registers. The two
    // loops stay apart on purpose: one loop with a run-time `whole` brings the join back.
    Packed<T, kPack> dy_held[kPacks];
    Packed<T, kPack> y_held[kPacks];
    bool loaded[kPacks];
    if (sizeof(T) == 2 && vector) {
#pragma unroll
        for (int p = 0; p < kPacks; ++p) {
            const int pack = p * threads + tid;
            loaded[p] = pack < body_packs;
            if (loaded[p]) {
                dy_held[p] = load_operand_pack<T, kPack>(dy_slice + head + pack * kPack, kPack, true);
                y_held[p] = load_operand_pack<T, kPack>(y_slice + head + pack * kPack, kPack, true);
            }
        }
    } else {
#pragma unroll
        for (int p = 0; p < kPacks; ++p) {
            const int pack = p * threads + tid;
            loaded[p] = pack < body_packs;
            if (loaded[p]) {
                dy_held[p] = load_operand_pack<T, kPack>(dy_slice + head + pack * kPack, kPack, vector);
                y_held[p] = load_operand_pack<T, kPack>(y_slice + head + pack * kPack, kPack, vector);
            }
            // 16-bit element-wise packs one at a time: all in flight, their halves took a register each.
            if (sizeof(T) == 2) asm volatile("" ::: "memory");
        }
    }
    const C edge_dy = has_edge ? to_compute(dy_slice[edge_index]) : C(0);
    const C edge_y = has_edge ? to_compute(y_slice[edge_index]) : C(0);

    C partial = Gradient::term(edge_dy, edge_y);  // 0 without an edge element
#pragma unroll
    for (int p = 0; p < kPacks; ++p) {
        if (!loaded[p]) continue;
#pragma unroll
        for (int k = 0; k < kPack; ++k) {
            partial += Gradient::term(widen_element_on_use(dy_held[p], k), widen_element_on_use(y_held[p], k));
        }
    }
    // Float y is held as floats: its weights (log-softmax's exp(y)) are taken now, while the block waits for
    // the sum, rather than in the write loop, whose per-element work delays the stores.
    // The edge element's weight in every case: its write below takes element_of_weight whatever y's dtype.
    const C edge_weight = Gradient::weight(edge_y);
    if constexpr (kWeightsEarly<T>) {
#pragma unroll
        for (int p = 0; p < kPacks; ++p) {
#pragma unroll
            for (int k = 0; k < kPack; ++k) y_held[p].value[k] = Gradient::weight(y_held[p].value[k]);
        }
    }
    const C block_total = block_sum(partial, warp_sums);

    // The row's sum: every CTA of the row folds the same values in the same order, so all agree bitwise.
    C sum = block_total;
    if (grid_split) {
        C* partials = static_cast<C*>(args.workspace) + row * ranks;
        if (tid == 0) partials[rank] = block_total;
        cooperative_groups::this_grid().sync();  // a fence included: every CTA's partial is visible after it
        if (tid < 32) {
            // From L2 (ld.global.cg): other SMs wrote them during this launch, and L1 is not coherent with them.
            C folded = C(0);
            for (unsigned c = tid; c < ranks; c += 32) folded += __ldcg(partials + c);
            folded = group_sum<32>(folded);
            if (tid == 0) row_sum = folded;
        }
        __syncthreads();
        sum = row_sum;
    } else if (push_sums) {
        cluster_wait();  // every peer's mailbox is set up
        if (tid < 32) {
            // Lane r posts this CTA's sum to rank r, then the lanes fold the slots as the pull folds the peers.
            if (tid < static_cast<int>(ranks)) mailbox_post(mailbox, block_total, rank, static_cast<unsigned>(tid));
            mailbox_wait(mailbox);
            const C folded = group_sum<32>(tid < static_cast<int>(ranks) ? mailbox.slots[tid] : C(0));
            if (tid == 0) row_sum = folded;
        }
        __syncthreads();
        sum = row_sum;
    } else if (ranks > 1) {
        if (tid == 0) cta_sum = block_total;
        cluster_sync();  // every CTA's sum is in its shared memory
        if (tid < 32) {
            C folded = tid < static_cast<int>(ranks) ? read_peer(&cta_sum, static_cast<unsigned>(tid)) : C(0);
            folded = group_sum<32>(folded);
            if (tid == 0) row_sum = folded;
        }
        __syncthreads();
        sum = row_sum;
        cluster_arrive();  // done reading the peers (before any store, so the release costs nothing to wait for)
    }

#pragma unroll
    for (int p = 0; p < kPacks; ++p) {
        if (!loaded[p]) continue;
        const int pack = p * threads + tid;
        C out[kPack];
#pragma unroll
        for (int k = 0; k < kPack; ++k) {
            const C dy = widen_element_on_use(dy_held[p], k);
            if constexpr (kWeightsEarly<T>) {
                out[k] = Gradient::element_of_weight(dy, y_held[p].value[k], sum);
            } else {
                out[k] = Gradient::element(dy, widen_element_on_use(y_held[p], k), sum);
            }
        }
        store_gradient_pack<D, kPack>(dx_slice + head + pack * kPack, out, kPack, vector);
    }
    if (has_edge) dx_slice[edge_index] = StoreAs<D>::from(Gradient::element_of_weight(edge_dy, edge_weight, sum));
    // Pulled sums: peers may still be reading cta_sum, so this CTA's shared memory stays until every one has
    // arrived. Pushed sums need no such wait: no peer reads this CTA's shared memory, and its mailbox is full.
    if (!grid_split && ranks > 1 && !push_sums) cluster_wait();
}

// Threads a CTA may have: 1024 while a thread's held values take fewer than 32 registers and are not doubles
// (a thread then fits the 64 registers of a full CTA), else kBackwardRegsWideThreads (f32 at 16 and 32 values,
// 16-bit at 32, f64).
template <class T, int kValues>
constexpr int kBackwardRegsThreadsOf = sizeof(T) < 8 && kValues * 2 * static_cast<int>(sizeof(T)) / 4 < 32
                                           ? kBackwardRegsMaxThreads
                                           : kBackwardRegsWideThreads;

// CTAs of the largest size an SM must hold at once: 2 for 16-bit dy and y at up to 16 values (32 registers;
// left free, their vector loads all in flight took 42 at 16 values, one 1024-thread CTA per SM), else 1.
// Pushing instances: 2 wherever the pulling one has 2 at its largest CTA, since left free the push took
// more registers than the pull (f32 at 8 values 52 instead of 32: one 928-thread CTA per SM instead of two).
template <class T, int kValues, bool kPushSums>
constexpr int kBackwardRegsMinCtasOf = (sizeof(T) == 2 && kValues <= 16) ||
                                               (kPushSums && sizeof(T) < 8 && (sizeof(T) == 2 || kValues <= 16))
                                           ? 2
                                           : 0;

template <class T, class D, int kValues, bool kPushSums>
__global__ void __launch_bounds__(kBackwardRegsThreadsOf<T, kValues>, kBackwardRegsMinCtasOf<T, kValues, kPushSums>)
    backward_regs(const ParamBlock<BackwardRowsParams> args) {
    if (args.log_mode != 0) {
        backward_regs_rows<T, D, kValues, kPushSums, LogSoftmaxGradient>(args);
    } else {
        backward_regs_rows<T, D, kValues, kPushSums, SoftmaxGradient>(args);
    }
}

template <class T, class D, bool kPushSums>
const void* backward_regs_instance(int values) {
    switch (values) {
        case 8: return reinterpret_cast<const void*>(&backward_regs<T, D, 8, kPushSums>);
        case 16: return reinterpret_cast<const void*>(&backward_regs<T, D, 16, kPushSums>);
        case 32:
            // 32 doubles of each operand would take 128 registers before anything else.
            if constexpr (sizeof(T) < 8) return reinterpret_cast<const void*>(&backward_regs<T, D, 32, kPushSums>);
            return nullptr;
        default: return nullptr;
    }
}

}  // namespace

const void* backward_regs_kernel(smxDataType_t value_dtype, smxDataType_t gradient_dtype, int values,
                                 BackwardRegsExchange exchange) {
    return visit_dtype_pair(value_dtype, gradient_dtype, [values, exchange](auto t_tag, auto d_tag) -> const void* {
        using T = typename decltype(t_tag)::type;
        using D = typename decltype(d_tag)::type;
        return exchange == BackwardRegsExchange::Push ? backward_regs_instance<T, D, true>(values)
                                                      : backward_regs_instance<T, D, false>(values);
    });
}

}  // namespace smx::cuda
