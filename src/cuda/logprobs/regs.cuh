// regs.cuh - ce-regs: cross-entropy with dlogits in one pass, for rows a cluster of 1..16 CTAs holds in
// REGISTERS (Rows layout). Each CTA owns a slice of ceil(n / C) logits (whole 16-byte packs), kValues per
// thread, 16-bit logits held packed and widened at each use. Per row: every load issued first (the target's
// logit too, by rank 0 and by the CTA whose slice holds it), the thread's (max, sum of exp, mean), the CTA's, the
// cluster's through distributed shared memory (float statistics pushed into every peer's mailbox, double ones
// pulled; folded in rank order in every CTA), the loss and lse written by rank 0, then each thread writes the
// dlogits of the logits it holds, and the one that holds the target writes its dlogit again. Every logit of the
// row is read before its CTA joins the exchange and every dlogit written after the CTA has all its peers'
// statistics, so dlogits may be the logits (in place). Traffic: logits read once, dlogits written once.
// performance.md#log-probabilities.
#pragma once

#include <type_traits>

#include "cuda/logprobs/rows.cuh"

namespace smx::cuda {

template <class X, class D, int kValues>
__device__ __forceinline__ void ce_regs_row(const LogprobsRowsParams& args) {
    using C = ComputeType<X>;
    constexpr int kPack = kPackOfPair<X, D>;  // 16 bytes of the wider of logits and dlogits
    constexpr int kPackBytes = kPack * static_cast<int>(sizeof(X));
    static_assert(kValues % kPack == 0, "a thread holds whole packs");
    constexpr int kPacks = kValues / kPack;
    __shared__ RowStats<C> scratch[33];
    __shared__ RowStats<C> exchange;
    __shared__ RowStats<C> cluster_result;
    __shared__ C target_logit;
    // Float statistics are pushed to the cluster's peers; double ones (24 bytes) are pulled.
    constexpr bool kPushStats = std::is_same_v<C, float>;
    __shared__ RowStatsMailbox mailbox;

    const unsigned ranks = static_cast<unsigned>(args.chunks);
    const unsigned rank = blockIdx.x % ranks;
    const std::int64_t row = static_cast<std::int64_t>(blockIdx.y) * args.rows_per_grid_row + blockIdx.x / ranks;
    if (row >= args.rows) return;  // the whole cluster shares the row, so it leaves together
    if (kPushStats && ranks > 1) mailbox_open(mailbox, ranks);
    const int tid = threadIdx.x;
    const int threads = blockDim.x;
    const std::int64_t n = args.row_len;
    const std::int64_t slice_begin = static_cast<std::int64_t>(rank) * args.slice_len;
    const std::int64_t remaining = n - slice_begin;
    const int count = static_cast<int>(remaining < 0 ? 0 : (remaining < args.slice_len ? remaining : args.slice_len));
    const X* x_row = static_cast<const X*>(args.operand.x) + row * args.x_row_stride;
    const X* x_slice = x_row + slice_begin;
    D* d_slice = static_cast<D*>(args.operand.dlogits) + row * args.dlogits_row_stride + slice_begin;
    const std::int64_t t = load_index(args.operand.index, row * args.index_row_stride, args.index_64 != 0);

    // Slices start on whole packs, so every slice has its row's phase: the elements before the first pack
    // boundary (head) and after the last whole pack (tail) are held one per thread as the "edge" value.
    const int misalignment = static_cast<int>(reinterpret_cast<std::uintptr_t>(x_slice) % kPackBytes);
    const int head = min(count, (kPackBytes - misalignment) % kPackBytes / static_cast<int>(sizeof(X)));
    const int body_packs = (count - head) / kPack;
    const int tail_begin = head + body_packs * kPack;
    const bool has_edge = tid < count - body_packs * kPack;
    const int edge_index = tid < head ? tid : tail_begin + (tid - head);
    const auto* x_body = reinterpret_cast<const Packed<X, kPack>*>(x_slice + head);

    Packed<X, kPack> raw[kPacks];
    bool loaded[kPacks];
#pragma unroll
    for (int p = 0; p < kPacks; ++p) {
        const int pack = p * threads + tid;
        loaded[p] = pack < body_packs;
        if (loaded[p]) raw[p] = x_body[pack];
    }
    const C edge = has_edge ? C(to_compute(x_slice[edge_index])) : neg_inf<C>();
    // The target's logit, for the loss (rank 0) and for its dlogit (the CTA whose slice holds it): read now, with
    // the rest of the row, and kept in shared memory before the barriers (so it is read before any CTA writes
    // dlogits over it in place).
    const std::int64_t target_in_slice = t - slice_begin;
    const bool slice_holds_target = target_in_slice >= 0 && target_in_slice < count;
    if (tid == 0 && (rank == 0 || slice_holds_target)) target_logit = t >= 0 && t < n ? C(to_compute(x_row[t])) : C(0);
    // Read with the row, not after the exchange, where every thread would wait on it before its first store.
    const C scale = gradient_scale<C>(args.operand.workspace, args.reduction);
    // 16-bit logits stay packed, widened at each use.
    const auto value = [&](int p, int k) -> C { return widen_element_on_use(raw[p], k); };

    // This thread's statistics: its max (NaN dropped), its sum of exps relative to it, its mean where asked.
    const C thread_max = max_skip_nan(packs_max(raw, loaded), edge);
    RowStats<C> stats{thread_max, C(0), C(0)};
    with_shifted_exp(exp_shift(thread_max), [&](const auto& exp) {
        C sum = exp(edge);
#pragma unroll
        for (int p = 0; p < kPacks; ++p) {
            if (!loaded[p]) continue;
#pragma unroll
            for (int k = 0; k < kPack; ++k) sum += exp(value(p, k));
        }
        stats.sum = sum * exp.unbias();
    });
    const C eps = static_cast<C>(args.label_smoothing);
    if (eps > C(0)) {
        const C inv_n = C(1) / static_cast<C>(n);
        C mean = has_edge ? edge * inv_n : C(0);
#pragma unroll
        for (int p = 0; p < kPacks; ++p) {
            if (!loaded[p]) continue;
#pragma unroll
            for (int k = 0; k < kPack; ++k) mean = fused(value(p, k), inv_n, mean);
        }
        stats.mean = mean;
    }

    stats = cta_stats<C, OneRescale>(stats, scratch);
    if (ranks > 1) {
        if constexpr (kPushStats) {
            stats = pushed_cluster_row_stats<OneRescale>(stats, mailbox, &cluster_result, rank, ranks);
        } else {
            stats = cluster_row_stats<C, OneRescale>(stats, &exchange, &cluster_result, ranks);
        }
    }
    const RowResult<C> result = row_result(stats);
    const bool ignored = t == args.ignore_index;
    const bool valid = !ignored && t >= 0 && t < n && result.ordinary;
    if (rank == 0 && tid == 0) {
        const CrossEntropyRow<C> ce = cross_entropy_row(result, stats.mean, t, n, args.ignore_index, eps, target_logit);
        if (args.reduction == SMX_REDUCTION_NONE) {
            static_cast<C*>(args.operand.out)[row * args.out_row_stride] = ce.loss;
        } else {
            workspace_row_losses<C>(args.operand.workspace)[row] = {ce.loss, ce.ignored ? C(0) : C(1)};
        }
        if (args.operand.lse != nullptr) static_cast<C*>(args.operand.lse)[row * args.lse_row_stride] = result.lse;
    }

    D* d_body = d_slice + head;
    const bool d_packs_aligned = reinterpret_cast<std::uintptr_t>(d_body) % kStoreAlignment<D, kPack> == 0;
    const auto store = [&](int pack, const C (&values)[kPack]) {
        if (d_packs_aligned) {
            store_pack<D, kPack>(d_body + pack * kPack, values);
        } else {
#pragma unroll
            for (int k = 0; k < kPack; ++k) d_body[pack * kPack + k] = StoreAs<D>::from(values[k]);
        }
    };
    if (!valid) {  // 0 in an ignored row, NaN in an invalid one
        const C constant = ignored ? C(0) : nan_of<C>();
        C values[kPack];
#pragma unroll
        for (int k = 0; k < kPack; ++k) values[k] = constant;
#pragma unroll
        for (int p = 0; p < kPacks; ++p) {
            if (loaded[p]) store(p * threads + tid, values);
        }
        if (has_edge) d_slice[edge_index] = StoreAs<D>::from(constant);
    } else {
        // The thread that holds the target (as its edge value or in one of its packs) writes the target's dlogit
        // again after its own stores, so no thread tests the target per pack.
        const int target_index = static_cast<int>(target_in_slice);  // meaningful where slice_holds_target
        bool holds_target = false;
        if (slice_holds_target) {
            if (target_index < head || target_index >= tail_begin) {
                holds_target = has_edge && edge_index == target_index;
            } else {
                const int target_pack = (target_index - head) / kPack;
                if constexpr (std::is_same_v<C, double>) {
                    // Each of its pack indices compared: the remainder's registers spilled double rows' loop at 8 values.
#pragma unroll
                    for (int p = 0; p < kPacks; ++p) holds_target |= p * threads + tid == target_pack;
                } else {
                    holds_target = static_cast<unsigned>(target_pack) % static_cast<unsigned>(threads) == static_cast<unsigned>(tid);
                }
            }
        }
        with_shifted_exp(result.lse, [&](const auto& exp) {
            const GradientRow<C> g = gradient_row(true, false, t, n, eps, scale, exp.unbias());
#pragma unroll
            for (int p = 0; p < kPacks; ++p) {
                if (!loaded[p]) continue;
                C values[kPack];
#pragma unroll
                for (int k = 0; k < kPack; ++k) values[k] = g.element(value(p, k), exp);
                store(p * threads + tid, values);
            }
            if (has_edge) d_slice[edge_index] = StoreAs<D>::from(g.element(edge, exp));
            // The same formula on the same logit as the store above, less the target's term; a thread's stores to one
            // address take effect in program order, so this one is what stays.
            if (holds_target) d_slice[target_index] = StoreAs<D>::from(g.element(target_logit, exp) - g.target_adjust);
        });
    }
    if (!kPushStats && ranks > 1) cluster_wait();  // peers may still be reading `exchange`
}

// 8 to 32 values per thread: up to 1024 threads, the register count left to the compiler.
template <class X, class D, int kValues>
__global__ void __launch_bounds__(kCeRegsMaxThreads) ce_regs(const ParamBlock<LogprobsRowsParams> args) {
    begin_dependent_kernel();
    ce_regs_row<X, D, kValues>(args);
}

// 64 values (16-bit logits, held packed): at most 512 threads, two CTAs per SM at least (at most 64 registers).
template <class X, class D>
__global__ void __launch_bounds__(512, 2) ce_regs_packed(const ParamBlock<LogprobsRowsParams> args) {
    begin_dependent_kernel();
    ce_regs_row<X, D, 64>(args);
}

template <class X, class D>
const void* ce_regs_instance(int values_per_thread) {
    switch (values_per_thread) {
        case 8: return reinterpret_cast<const void*>(&ce_regs<X, D, 8>);
        case 16: return reinterpret_cast<const void*>(&ce_regs<X, D, 16>);
        case 32:
            // 32 doubles would take every register a thread of a 1024-thread CTA may have.
            if constexpr (!std::is_same_v<X, double>) return reinterpret_cast<const void*>(&ce_regs<X, D, 32>);
            return nullptr;
        case 64:
            if constexpr (sizeof(X) == 2) return reinterpret_cast<const void*>(&ce_regs_packed<X, D>);
            return nullptr;
        default: return nullptr;
    }
}

// The instances of one logits dtype, for each dlogits dtype of a fast pair (one file per logits dtype: they
// compile in parallel).
template <class X>
const void* ce_regs_for_logits(smxDataType_t dlogits_dtype, int values_per_thread) {
    return visit_dtype(dlogits_dtype, [values_per_thread](auto d_tag) -> const void* {
        using D = typename decltype(d_tag)::type;
        if constexpr (kFastDlogitsPair<X, D>) {
            return ce_regs_instance<X, D>(values_per_thread);
        } else {
            return nullptr;
        }
    });
}

}  // namespace smx::cuda
