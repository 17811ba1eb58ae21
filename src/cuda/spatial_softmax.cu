// spatial_softmax.cu - Spatial layout: the axis is strided and `inner` is contiguous in x and y; element
// (o, j, i) sits at o * outer_stride + j * axis_stride + i. Two kernels:
//
// spatial-tile (the fast path): a CTA owns a tile of W = V x P contiguous inner columns (V vectors of P
// elements: 16 bytes, or 8 for 16-bit x written as f32 at tile rows of 128+ bytes) of one outer index over
// a slice of the axis, and caches it in shared memory in the input dtype (cp.async, a vector at a time,
// when x's addresses allow; element-wise otherwise). A cluster of C
// CTAs (sm_90) splits a column that one CTA cannot hold: each CTA folds its slice into per-column
// (max, sum) partials (f32 x while the slice is still landing), the cluster exchanges them through
// distributed shared memory, and every CTA folds them in the same order. Traffic: x read once, y written
// once. Thread t handles vector t % V at axis positions t / V + k * (T / V): a warp touches 32 / V rows of
// V vectors of contiguous bytes, coalesced, and shared memory is read as whole vectors without bank
// conflicts.
//
// spatial-online (fallback for columns too long to cache even across a cluster of 16): lanes along the
// columns, per-thread online (max, sum) over the thread's axis share, combined across lanes and warps,
// then a second pass re-reads x. Traffic: x read twice, y written once. One CTA per tile.
//
// spatial-split (the same columns when tiles are too few to fill the GPU): each column cut into chunks,
// a CTA per (chunk, tile) in two kernels, the chunks' partial statistics passed through the workspace.

#include <type_traits>

#include "cuda/cluster.cuh"
#include "cuda/softmax_common.cuh"

namespace smx::cuda {
namespace {

// kWholeLine: on an L2 miss, fetch the source's whole 128-byte line from DRAM (the .L2::128B prefetch size)
// rather than only the sectors asked for. The plan asks for it where a tile row is 64 bytes, half a line,
// and the line's other half is a neighbouring tile's row that another CTA reads at about the same time:
// DRAM then serves the line in one access (see plan_spatial).
template <bool kWholeLine = false>
__device__ __forceinline__ void copy_16_bytes_async(void* shared_target, const void* global_source) {
    const unsigned shared_address = static_cast<unsigned>(__cvta_generic_to_shared(shared_target));
    const std::size_t global_address = __cvta_generic_to_global(global_source);
    if constexpr (kWholeLine) {
        asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16;\n" ::"r"(shared_address), "l"(global_address) : "memory");
    } else {
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(shared_address), "l"(global_address) : "memory");
    }
}

// An 8- or 16-byte async copy. cp.async.cg (L2 only) takes 16 bytes; 8-byte copies go through L1 (.ca).
template <int kBytes, bool kWholeLine = false>
__device__ __forceinline__ void copy_vector_async(void* shared_target, const void* global_source) {
    if constexpr (kBytes == 16) {
        copy_16_bytes_async<kWholeLine>(shared_target, global_source);
    } else {
        static_assert(kBytes == 8 && !kWholeLine, "8 or 16 bytes; 8-byte vectors serve tile rows of whole lines");
        const unsigned shared_address = static_cast<unsigned>(__cvta_generic_to_shared(shared_target));
        const std::size_t global_address = __cvta_generic_to_global(global_source);
        asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"(shared_address), "l"(global_address) : "memory");
    }
}

__device__ __forceinline__ void wait_async_copies() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }

// Closes this thread's current group of cp.async copies (an empty group is allowed and completes at once).
__device__ __forceinline__ void commit_async_copies() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

// Waits until at most `pending` of this thread's newest copy groups are still in flight, so every older
// group has landed. wait_group takes an immediate: counts above 7 wait for all but the newest 7, which
// covers every older group too.
__device__ __forceinline__ void wait_async_copies_but(int pending) {
    switch (pending) {
        case 0: asm volatile("cp.async.wait_group 0;\n" ::: "memory"); break;
        case 1: asm volatile("cp.async.wait_group 1;\n" ::: "memory"); break;
        case 2: asm volatile("cp.async.wait_group 2;\n" ::: "memory"); break;
        case 3: asm volatile("cp.async.wait_group 3;\n" ::: "memory"); break;
        case 4: asm volatile("cp.async.wait_group 4;\n" ::: "memory"); break;
        case 5: asm volatile("cp.async.wait_group 5;\n" ::: "memory"); break;
        case 6: asm volatile("cp.async.wait_group 6;\n" ::: "memory"); break;
        default: asm volatile("cp.async.wait_group 7;\n" ::: "memory"); break;
    }
}

// tile = outer * tiles_per_outer + tile_in_outer. In 32 bits whenever the tile count allows (always, in
// practice): a 64-bit division is a long software routine, a 32-bit one a few instructions.
__device__ __forceinline__ void split_tile(std::int64_t tile, std::int64_t tiles_per_outer, std::int64_t tiles,
                                           std::int64_t* outer, std::int64_t* tile_in_outer) {
    if (tiles <= 0xffffffffll) {
        const unsigned narrow_tile = static_cast<unsigned>(tile);
        const unsigned per_outer = static_cast<unsigned>(tiles_per_outer);
        const unsigned narrow_outer = narrow_tile / per_outer;
        *outer = narrow_outer;
        *tile_in_outer = narrow_tile - narrow_outer * per_outer;
    } else {
        *outer = tile / tiles_per_outer;
        *tile_in_outer = tile - *outer * tiles_per_outer;
    }
}

// ---- column statistics ---------------------------------------------------------------------------
// The tile kernel keeps (max, sum) per column with NaN carried by the sum alone: the max skips NaN (one
// instruction instead of three), every value is exponentiated relative to a finite shift, so a NaN, or
// +inf (inf - inf), always reaches the sum, and the sum's NaN survives every merge.

// The value subtracted before exp: the max, or 0 when every value is -inf (avoids -inf - -inf = NaN).
template <class C>
__device__ __forceinline__ C shift_of(C max) {
    return max == neg_inf<C>() ? C(0) : max;
}

template <class C>
__device__ __forceinline__ Stats<C> merge_column_stats(Stats<C> a, Stats<C> b) {
    const C max = max_skip_nan(a.max, b.max);
    if (max == neg_inf<C>()) return {max, a.sum + b.sum};  // 0, or NaN if either saw a NaN
    return {max, a.sum * exp_of(a.max - max) + b.sum * exp_of(b.max - max)};
}

// warp_combine_columns' fold over `count` partials (one column of every warp) in shared memory, in a
// fixed order.
template <class C>
__device__ __forceinline__ Stats<C> fold_partials(const Stats<C>* partials, int count, int stride) {
    C max = partials[0].max;
    for (int i = 1; i < count; ++i) max = max_skip_nan(max, partials[i * stride].max);
    C sum = C(0);
    for (int i = 0; i < count; ++i) sum += partials[i * stride].sum * rescale(partials[i * stride].max, max);
    return {max, sum};
}

// Rows a thread copies per cp.async group in pipelined_vector_stats: its statistics advance one group at a
// time while the later groups are still in flight.
constexpr int kStatsChunkRows = 4;

// One thread's share of an f32 tile, x read once: copies its `rows` 16-byte vectors (4 columns) to shared
// memory, all issued up front in groups of kStatsChunkRows rows, and folds each group into per-column
// (max, sum) as soon as it has landed, so the statistics run under the tile's load instead of after it
// (the tile's only serial phase without memory traffic; each thread reads back only what it copied
// itself, so no barrier is needed). The sum is kept relative to the running max and rescaled when the
// max grows (one exp per column and group, none when it stays). Outputs as the two-pass form gives them:
// the max and the sum of exp(v - shift_of(max)). Returns false when some shift was outside the fast exp's
// range (huge or infinite values): every copy has landed by then and the caller recomputes the statistics
// with the two passes. (16-bit x measured slower this way and keeps the two passes: see the caller.)
template <int kPack, bool kWholeLine>
__device__ __forceinline__ bool pipelined_vector_stats(float* target, const float* source, int rows, int target_step,
                                                       std::int64_t source_step, float (&local_max)[kPack],
                                                       float (&local_sum)[kPack]) {
    const int chunks = (rows + kStatsChunkRows - 1) / kStatsChunkRows;
    {
        float* copy_target = target;
        const float* copy_source = source;
        for (int chunk = 0; chunk < chunks; ++chunk) {
#pragma unroll
            for (int j = 0; j < kStatsChunkRows; ++j) {
                if (chunk * kStatsChunkRows + j < rows) {
                    copy_16_bytes_async<kWholeLine>(copy_target, copy_source);
                    copy_target += target_step;
                    copy_source += source_step;
                }
            }
            commit_async_copies();
        }
    }
    // S = shift * log2(e), rounded: exp(v - shift) ~ 2^(v * log2(e) - S). The sum holds terms taken against
    // the current S, kept from group to group (0 while the max is -inf, whose shift is 0).
    float running_max[kPack], sum[kPack], scaled_shift[kPack];
#pragma unroll
    for (int k = 0; k < kPack; ++k) {
        running_max[k] = neg_inf<float>();
        sum[k] = 0.0f;
        scaled_shift[k] = 0.0f;
    }
    bool fast = true;
    const float* chunk_rows = target;
    for (int chunk = 0; chunk < chunks; ++chunk, chunk_rows += kStatsChunkRows * target_step) {
        wait_async_copies_but(chunks - 1 - chunk);
        const int first = chunk * kStatsChunkRows;
        // Calls visit(values) for each row of this group (the last group may be short).
        const auto for_group_rows = [&](auto&& visit) {
#pragma unroll
            for (int j = 0; j < kStatsChunkRows; ++j) {
                if (first + j < rows) {
                    float values[kPack];
                    load_pack(chunk_rows + j * target_step, values);
                    visit(values);
                }
            }
        };
        float chunk_max[kPack];
#pragma unroll
        for (int k = 0; k < kPack; ++k) chunk_max[k] = neg_inf<float>();
        for_group_rows([&](const float (&values)[kPack]) {
#pragma unroll
            for (int k = 0; k < kPack; ++k) chunk_max[k] = max_skip_nan(chunk_max[k], values[k]);
        });
#pragma unroll
        for (int k = 0; k < kPack; ++k) {
            const float old_max = running_max[k];
            running_max[k] = max_skip_nan(old_max, chunk_max[k]);
            const float shift = shift_of(running_max[k]);
            fast = fast && fast_exp_applies(shift);
            const float new_scaled_shift = __fmul_rn(shift, kLog2e);  // rounded: never fused into the sub below
            // The sum so far moves to the new shift when the max grows: times 2^(S_old - S_new), the two
            // rounded shifts its terms were and will be taken against (a factor <= 1). Not
            // 2^(old_max * log2(e) - S_new): contracted into an FMA, that product goes unrounded and misses
            // S_old by up to half its ulp (2^-9 at |max| = 45000: 1.4e-3 of the sum so far). A sum over only
            // -inf values is 0 (or NaN) and stays as it is: its shift of 0 may lie far above the new one.
            if (old_max != running_max[k] && old_max != neg_inf<float>()) {
                sum[k] *= exp2_approx(scaled_shift[k] - new_scaled_shift);
            }
            scaled_shift[k] = new_scaled_shift;
        }
        for_group_rows([&](const float (&values)[kPack]) {
#pragma unroll
            for (int k = 0; k < kPack; ++k) sum[k] += exp2_approx(fmaf(values[k], kLog2e, -scaled_shift[k]));
        });
    }
#pragma unroll
    for (int k = 0; k < kPack; ++k) {
        local_max[k] = running_max[k];
        // As ShiftedExpFast: the sum was taken relative to S = shift * log2(e) rounded; 2^-(its rounding) removes it.
        const float shift = shift_of(running_max[k]);
        local_sum[k] = sum[k] * exp2_approx(-fmaf(shift, kLog2e, -shift * kLog2e));
    }
    return fast;
}

// kVectorBytes: the bytes of x a thread copies and reads per access (its vector), 16 or 8. 8-byte vectors
// (16-bit x only: 4 columns) halve each thread's per-column state, so the kernel fits 48 registers and a
// fifth CTA per SM where shared memory allows (32 KB tiles); the 16-byte ones need their 64 (at 48 they
// spill and lost 5-15 points, perf-notes run 58).
// 128-thread CTAs are bounded at 8 per SM: the same 64 registers as the 256-thread 16-byte kernel, so the
// CTAs per SM are set by the tile's shared memory alone (5-6 of 32 KB tiles with their static partials,
// against 4 register-bound CTAs of 256 threads).
template <int kVectorBytes, int kThreads>
constexpr int kSpatialTileMinCtasPerSm = kThreads == kSpatialTileSmallThreads ? 8 : (kVectorBytes == 8 ? 5 : 4);

// kThreads: kSpatialTileThreads, or kSpatialTileSmallThreads where the plan finds that the smaller CTAs let
// an SM hold more tiles at once.
template <class X, class Y, int kVectorBytes, int kThreads>
__global__ void __launch_bounds__(kThreads, kSpatialTileMinCtasPerSm<kVectorBytes, kThreads>)
    spatial_tile_softmax(const SoftmaxKernelArgs args) {
    using C = ComputeType<X>;
    static_assert(kVectorBytes == 16 || (kVectorBytes == 8 && sizeof(X) == 2), "16-byte vectors, or 8 for 16-bit x");
    constexpr int kPack = kVectorBytes / static_cast<int>(sizeof(X));
    constexpr int kWarps = kThreads / 32;
    constexpr int kMaxWidth = kSpatialMaxVectors * 16 / static_cast<int>(sizeof(X));  // 256 bytes of x
    constexpr std::uintptr_t kStoreAlign = kStoreAlignment<Y, kPack>;
    // Pairs whose output is wider than the input (16-bit -> f32) measured slower with three things every
    // other pair gained from, for causes not found (their loops compile alike): they keep a barrier after
    // the tile's load (1-3 points of copy, perf-notes runs 75-76), the pairwise statistics merge at every
    // fold step (1-4 points, run 74) and their own store loop (10-20%, runs 27-30).
    constexpr bool kWiderOutput = sizeof(Y) > sizeof(X);
    // A thread's consecutive cache rows lie (T / V) rows of W = V * P elements apart: T * P elements whatever V
    // is. A compile-time step lets the unrolled loops address shared memory by immediate offsets.
    constexpr int kCacheRowStep = kThreads * kPack;
    extern __shared__ __align__(16) unsigned char dynamic_shared[];
    __shared__ Stats<C> warp_partials[kWarps][kMaxWidth];
    __shared__ Stats<C> cta_partials[kMaxWidth];  // this CTA's per-column stats, read by its cluster peers
    // The whole column's shift (its max, or 0) and factor (1 / sum, or log(sum) for log-softmax), computed
    // once per column rather than by each of the column's axis_groups threads.
    __shared__ C column_shift[kMaxWidth];
    __shared__ C column_factor[kMaxWidth];

    const X* x = static_cast<const X*>(args.x);
    Y* y = static_cast<Y*>(args.y);
    X* cache = reinterpret_cast<X*>(dynamic_shared);  // [slice row][tile column]
    const bool log_mode = args.log_mode != 0;
    const int width = args.tile_width;
    const int vectors = width / kPack;  // a power of two, at most 256 bytes of x in all
    const int tid = threadIdx.x;
    const int lane = tid % 32;
    const int vector = tid & (vectors - 1);
    const int axis_group = tid / vectors;
    const int axis_groups = kThreads / vectors;
    const unsigned rank = cluster_rank();
    const unsigned ranks = cluster_size();
    const std::int64_t slice_begin = static_cast<std::int64_t>(rank) * args.slice_len;
    const std::int64_t remaining = args.row_len - slice_begin;
    const int count = static_cast<int>(remaining < 0 ? 0 : (remaining < args.slice_len ? remaining : args.slice_len));
    const std::int64_t tiles = args.tiles;
    // Every vector of x starts 16-byte aligned (and every y vector store-aligned) iff base and strides are.
    const bool x_vector_loads = reinterpret_cast<std::uintptr_t>(x) % kVectorBytes == 0 &&
                           (args.x_axis_stride * static_cast<std::int64_t>(sizeof(X))) % kVectorBytes == 0 &&
                           (args.x_outer_stride * static_cast<std::int64_t>(sizeof(X))) % kVectorBytes == 0;
    const bool y_vector_stores = reinterpret_cast<std::uintptr_t>(y) % kStoreAlign == 0 &&
                           (args.y_axis_stride * static_cast<std::int64_t>(sizeof(Y))) % kStoreAlign == 0 &&
                           (args.y_outer_stride * static_cast<std::int64_t>(sizeof(Y))) % kStoreAlign == 0;

    for (std::int64_t tile = blockIdx.x / ranks; tile < tiles; tile += gridDim.x / ranks) {
        std::int64_t outer, tile_in_outer;
        split_tile(tile, args.tiles_per_outer, tiles, &outer, &tile_in_outer);
        const std::int64_t column = tile_in_outer * width + vector * kPack;  // this thread's first
        const std::int64_t columns_left = args.inner - column;
        const int valid = static_cast<int>(columns_left < 0 ? 0 : (columns_left < kPack ? columns_left : kPack));
        const X* x_vector = x + outer * args.x_outer_stride + slice_begin * args.x_axis_stride + column;
        Y* y_vector = y + outer * args.y_outer_stride + slice_begin * args.y_axis_stride + column;
        X* cache_vector = cache + vector * kPack;
        X* cache_rows = cache_vector + axis_group * width;  // this thread's first cache row
        // Axis positions axis_group, axis_group + axis_groups, ... below count. The loops below count them
        // rather than test each position, so an unrolled loop tests once per 4 rows.
        const int rows = count > axis_group ? (count - axis_group + axis_groups - 1) / axis_groups : 0;

        // Each thread reads back only the cache rows it wrote itself (the same vector and axis positions in
        // every pass), so the cache needs no barrier; this one keeps the previous tile's per-column statistics
        // (warp_partials, column_shift, column_factor) until every thread has read them.
        __syncthreads();
        C local_max[kPack];
        C local_sum[kPack];
        // f32 x folds its rows into (max, sum) while they land (pipelined_vector_stats). 16-bit x, partial
        // vectors, element-wise loads and shifts outside the fast exp's range take the two passes below.
        // H200, perf-notes runs 74-75: f32 x +1-4 points of copy on the clustered layouts (16x8x4096x64
        // dim=2 softmax 75 -> 79.5%, 8192x4096 dim=0 61.5 -> 64%), within a point elsewhere except f32 ->
        // bf16 64x128x4096 dim=1 softmax (-1); 16-bit x lost 1-4 points pipelined (-> f32: 10-13).
        bool stats_ready = false;
        if (x_vector_loads && valid == kPack) {
            const X* source = x_vector + axis_group * args.x_axis_stride;
            const std::int64_t source_step = axis_groups * args.x_axis_stride;
            const auto copy_tile = [&](auto whole_line) {
                constexpr bool kWholeLine = decltype(whole_line)::value;
                if constexpr (std::is_same<X, float>::value) {
                    stats_ready = pipelined_vector_stats<kPack, kWholeLine>(cache_rows, source, rows, kCacheRowStep,
                                                                            source_step, local_max, local_sum);
                } else {
#pragma unroll 4
                    for (int i = 0; i < rows; ++i) {
                        copy_vector_async<kVectorBytes, kWholeLine>(cache_rows + i * kCacheRowStep, source);
                        source += source_step;
                    }
                }
            };
            // Whole-line fetches for 64-byte tile rows where the plan found the line's other half in x
            // (copy_16_bytes_async); 8-byte vectors only serve rows of whole lines.
            if constexpr (kVectorBytes == 16) {
                if (args.x_whole_lines != 0) {
                    copy_tile(std::true_type{});
                } else {
                    copy_tile(std::false_type{});
                }
            } else {
                copy_tile(std::false_type{});
            }
        } else {
            for (int r = axis_group; r < count; r += axis_groups) {
#pragma unroll
                for (int k = 0; k < kPack; ++k) cache_vector[r * width + k] = k < valid ? x_vector[r * args.x_axis_stride + k] : X{};
            }
        }
        wait_async_copies();
        if constexpr (kWiderOutput) __syncthreads();  // no thread reads another's cache rows (see kWiderOutput)

        // The two passes: this thread's share of its kPack columns, the max, then the sum of exp relative to it.
        if (!stats_ready) {
            if constexpr (sizeof(X) == 2) {
                // Two columns per HMNMX2, on the cached 16-bit values as they are (no widening).
                PairedMax<X> paired[kPack / 2];
#pragma unroll 4
                for (int i = 0; i < rows; ++i) {
                    const Packed<X, kPack> pack = *reinterpret_cast<const Packed<X, kPack>*>(cache_rows + i * kCacheRowStep);
#pragma unroll
                    for (int k = 0; k < kPack / 2; ++k) paired[k].add(pair_of(pack, k));
                }
#pragma unroll
                for (int k = 0; k < kPack / 2; ++k) {
                    local_max[2 * k] = paired[k].low();
                    local_max[2 * k + 1] = paired[k].high();
                }
            } else {
#pragma unroll
                for (int k = 0; k < kPack; ++k) local_max[k] = neg_inf<C>();
#pragma unroll 4
                for (int i = 0; i < rows; ++i) {
                    C values[kPack];
                    load_pack<X, C, kPack>(cache_rows + i * kCacheRowStep, values);
#pragma unroll
                    for (int k = 0; k < kPack; ++k) local_max[k] = max_skip_nan(local_max[k], values[k]);
                }
            }
            C local_shift[kPack];
            bool local_fast = true;
#pragma unroll
            for (int k = 0; k < kPack; ++k) {
                local_shift[k] = shift_of(local_max[k]);
                local_sum[k] = C(0);
                local_fast = local_fast && fast_exp_applies(local_shift[k]);
            }
            with_exp_form<C>(local_fast, [&](auto form) {
#pragma unroll 4
                for (int i = 0; i < rows; ++i) {
                    C values[kPack];
                    load_pack<X, C, kPack>(cache_rows + i * kCacheRowStep, values);
#pragma unroll
                    for (int k = 0; k < kPack; ++k) local_sum[k] += form.make(local_shift[k])(values[k]);
                }
#pragma unroll
                for (int k = 0; k < kPack; ++k) local_sum[k] *= form.make(local_shift[k]).unbias();
            });
        }

        // Fold lanes of the same vector (they differ in the lane bits >= log2(V)), then the warps.
        if constexpr (kWiderOutput) {
#pragma unroll
            for (int k = 0; k < kPack; ++k) {
                Stats<C> stats{local_max[k], local_sum[k]};
                for (int offset = 16; offset >= vectors; offset /= 2) {
                    const Stats<C> other{__shfl_xor_sync(0xffffffffu, stats.max, offset),
                                         __shfl_xor_sync(0xffffffffu, stats.sum, offset)};
                    stats = merge_column_stats(stats, other);
                }
                if (lane < vectors) warp_partials[tid / 32][vector * kPack + k] = stats;
            }
        } else {
            Stats<C> lane_folded[kPack];
#pragma unroll
            for (int k = 0; k < kPack; ++k) lane_folded[k] = {local_max[k], local_sum[k]};
            warp_combine_columns(lane_folded, vectors);
            if (lane < vectors) {
#pragma unroll
                for (int k = 0; k < kPack; ++k) warp_partials[tid / 32][vector * kPack + k] = lane_folded[k];
            }
        }
        __syncthreads();
        const auto publish_column = [&](Stats<C> stats) {
            column_shift[tid] = shift_of(stats.max);
            if (log_mode) {
                column_factor[tid] = log_of(stats.sum);
            } else {
                column_factor[tid] = reciprocal(stats.sum);
            }
        };
        if (tid < width) {
            Stats<C> stats;
            if constexpr (kWiderOutput) {
                stats = warp_partials[0][tid];
                for (int w = 1; w < kWarps; ++w) stats = merge_column_stats(stats, warp_partials[w][tid]);
            } else {
                stats = fold_partials(&warp_partials[0][tid], kWarps, kMaxWidth);
            }
            if (ranks > 1) {
                cta_partials[tid] = stats;
            } else {
                publish_column(stats);
            }
        }
        if (ranks > 1) {
            cluster_sync();
            // Every CTA folds the ranks in the same order: identical statistics across the cluster.
            if (tid < width) {
                Stats<C> stats = read_peer(cta_partials + tid, 0);
                for (unsigned r = 1; r < ranks; ++r) stats = merge_column_stats(stats, read_peer(cta_partials + tid, r));
                publish_column(stats);
            }
            cluster_arrive();
        }
        __syncthreads();

        // factor: log(sum) for log-softmax, else 1 / sum (times the fast exp's factor, in the loop below).
        C shift[kPack], factor[kPack];
        bool fast = true;
#pragma unroll
        for (int k = 0; k < kPack; ++k) {
            shift[k] = column_shift[vector * kPack + k];
            factor[k] = column_factor[vector * kPack + k];
            fast = fast && fast_exp_applies(shift[k]);
        }
        // The store pass, one loop per output formula (a branch inside the loop would issue every formula's
        // instructions predicated) and per store width, walking y by pointer increments and the cache by the
        // compile-time kCacheRowStep.
        const auto store_pass = [&](auto output) {
            Y* target = y_vector + axis_group * args.y_axis_stride;
            const std::int64_t target_step = axis_groups * args.y_axis_stride;
            if (y_vector_stores && valid == kPack) {
#pragma unroll 4
                for (int i = 0; i < rows; ++i) {
                    C values[kPack];
                    load_pack<X, C, kPack>(cache_rows + i * kCacheRowStep, values);
                    output(values);
                    store_pack<Y, kPack>(target, values);
                    target += target_step;
                }
            } else {
                for (int i = 0; i < rows; ++i) {
                    C values[kPack];
                    load_pack<X, C, kPack>(cache_rows + i * kCacheRowStep, values);
                    output(values);
#pragma unroll
                    for (int k = 0; k < kPack; ++k) {
                        if (k < valid) target[k] = StoreAs<Y>::from(values[k]);
                    }
                    target += target_step;
                }
            }
        };
        if constexpr (kWiderOutput) {
            // store_pass's loop shape (pointer walks, whole and partial vectors in separate loops) measured
            // 10-20 % slower for these pairs than this loop, with one formula per loop (run 27) or all of
            // them in one lambda (run 30). So they keep their own loop, choosing the formula per element.
            with_exp_form<C>(fast, [&](auto form) {
                if (!log_mode) {
#pragma unroll
                    for (int k = 0; k < kPack; ++k) factor[k] *= form.make(shift[k]).unbias();
                }
#pragma unroll 4
                for (int r = axis_group; r < count; r += axis_groups) {
                    C values[kPack];
                    load_pack<X, C, kPack>(cache_vector + r * width, values);
#pragma unroll
                    for (int k = 0; k < kPack; ++k) {
                        if (log_mode) {
                            values[k] = (values[k] - shift[k]) - factor[k];
                        } else {
                            values[k] = form.make(shift[k])(values[k]) * factor[k];
                        }
                    }
                    Y* target = y_vector + r * args.y_axis_stride;
                    if (y_vector_stores && valid == kPack) {
                        store_pack<Y, kPack>(target, values);
                    } else {
#pragma unroll
                        for (int k = 0; k < kPack; ++k) {
                            if (k < valid) target[k] = StoreAs<Y>::from(values[k]);
                        }
                    }
                }
            });
        } else if (log_mode) {
            store_pass([&](C (&values)[kPack]) {
#pragma unroll
                for (int k = 0; k < kPack; ++k) values[k] = (values[k] - shift[k]) - factor[k];
            });
        } else {
            with_exp_form<C>(fast, [&](auto form) {
#pragma unroll
                for (int k = 0; k < kPack; ++k) factor[k] *= form.make(shift[k]).unbias();
                store_pass([&](C (&values)[kPack]) {
#pragma unroll
                    for (int k = 0; k < kPack; ++k) values[k] = form.make(shift[k])(values[k]) * factor[k];
                });
            });
        }
        if (ranks > 1) cluster_wait();  // peers are done reading cta_partials: it may be rewritten or freed
    }
}

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
__device__ __forceinline__ ColumnPlace column_place(const SoftmaxKernelArgs& args, std::int64_t tile) {
    std::int64_t outer, tile_in_outer;
    split_tile(tile, args.tiles_per_outer, args.tiles, &outer, &tile_in_outer);
    const int vectors = args.tile_width / kPack;
    const std::int64_t column = tile_in_outer * args.tile_width + static_cast<int>(threadIdx.x % vectors) * kPack;
    const bool valid = column < args.inner;
    const std::int64_t in_tile = valid ? column : 0;
    return {outer * args.x_outer_stride + in_tile, outer * args.y_outer_stride + in_tile, valid};
}

// One loop step's kUnroll vectors of kPack columns, x_step elements apart from x_at. A whole step (`whole`:
// every position inside the range) walks a pointer with no checks: the checked form recomputed each 64-bit
// address under its own predicate (~17 instructions a load, SASS). Otherwise position u is loaded where
// in_range(u), -inf elsewhere (padding the statistics ignore).
template <int kUnroll, int kPack, class X, class InRange, class C = ComputeType<X>>
__device__ __forceinline__ void load_column_step(const X* x_at, std::int64_t x_step, bool whole, const InRange& in_range,
                                                 C (&values)[kUnroll][kPack]) {
    if (whole) {
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
            load_pack<X, C, kPack>(x_at, values[u]);
            x_at += x_step;
        }
    } else {
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
            if (in_range(u)) {
                load_pack<X, C, kPack>(x_at + u * x_step, values[u]);
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
// stats(). add_chunk per group pays a max-with-NaN, an accurate rescale and an unbias exp instead.
// raise() keeps the largest |shift| it has taken in `widest_shift` (one register for all of a thread's
// columns, set only when a max grows): the fast exp applies if it stays under 2^24 (not for +inf or huge
// values); otherwise the caller takes the exact form. A NaN is dropped by the max and kept by the sum; stats() makes a NaN sum a NaN max, the
// invariant combine() relies on (a NaN among -inf values would otherwise be lost).
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
        // A sum over only -inf values is 0 (or NaN) and stays as it is: its shift of 0 may lie far above the new one.
        if (max != neg_inf<float>()) sum *= exp2_approx(scaled_shift - new_scaled_shift);
        max = new_max;
        scaled_shift = new_scaled_shift;
    }
    __device__ __forceinline__ void add(float v) { sum += exp2_approx(fmaf(v, kLog2e, -scaled_shift)); }
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
// combine), each segment's statistics kept by ScaledRunningStats. Returns false where some shift left the
// fast exp's range: `stats` is then incomplete and the caller recomputes them exactly. H200 (perf-notes run
// 183): spatial-split's statistics kernel 12-16% shorter, its cases 0.99-1.08x (16-bit gains most).
template <int kUnroll, int kPack, class X>
__device__ __forceinline__ bool scaled_column_range_stats(const X* x_column, std::int64_t x_axis_stride,
                                                          std::int64_t first, std::int64_t end, std::int64_t axis_step,
                                                          Stats<float> (&stats)[kPack]) {
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
                                             [&](int u) { return j + u * axis_step < end; }, values);
#pragma unroll
            for (int k = 0; k < kPack; ++k) {
                float group_max = values[0][k];
#pragma unroll
                for (int u = 1; u < kUnroll; ++u) group_max = fmaxf(group_max, values[u][k]);
                segment[k].raise(group_max, widest_shift);
#pragma unroll
                for (int u = 0; u < kUnroll; ++u) segment[k].add(values[u][k]);
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
template <int kUnroll, int kPack, class X, class C = ComputeType<X>>
__device__ __forceinline__ void column_range_stats(const X* x_column, std::int64_t x_axis_stride, std::int64_t first,
                                                   std::int64_t end, std::int64_t axis_step, Stats<C> (&stats)[kPack]) {
    if constexpr (std::is_same<C, float>::value) {
        if (scaled_column_range_stats<kUnroll, kPack>(x_column, x_axis_stride, first, end, axis_step, stats)) return;
    }
    const std::int64_t x_step = axis_step * x_axis_stride;
    const std::int64_t stride = axis_step * kUnroll;
    const auto add_step = [&](std::int64_t j, Stats<C>* segment) {
        C values[kUnroll][kPack];
        load_column_step<kUnroll, kPack>(x_column + j * x_axis_stride, x_step, j + (kUnroll - 1) * axis_step < end,
                                         [&](int u) { return j + u * axis_step < end; }, values);
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
    // chunks a large part of a thread's work (H200, perf-notes runs 183-184: one-element tiles 4-9% faster
    // with this fold, vector tiles about 1%). Same special values as combine(): an all -inf column gives sum
    // 0, a NaN or +inf max a NaN sum (the exact form, taken for shifts outside the fast exp's range). Not
    // fold_partials (the spatial tiles' max-first fold): its accurate exps measured 0.98x on one-element
    // tiles (run 188), and its max drops a NaN that the write kernel's exact combine() chain needs.
    // Double keeps the chain (its exps are exact either way; the max-first form spilled more of its registers).
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
// kUnroll positions in flight per loop step. Softmax outputs take one exp relative to the max's scaled
// shift and one multiply by a factor holding 1 / sum and the shift's rounding (ShiftedExpFast: an FFMA
// and a MUFU.EX2), where every column's max allows the fast form; otherwise (double, special values) the
// exact form.
template <int kUnroll, int kPack, class X, class Y, class C = ComputeType<X>>
__device__ __forceinline__ void column_range_write(const SoftmaxKernelArgs& args, const ColumnPlace& place,
                                                   std::int64_t first, std::int64_t end, std::int64_t axis_step,
                                                   const Stats<C> (&stats)[kPack]) {
    const X* x_column = static_cast<const X*>(args.x) + place.x_offset;
    Y* y_column = static_cast<Y*>(args.y) + place.y_offset;
    const std::int64_t x_step = axis_step * args.x_axis_stride;
    const std::int64_t y_step = axis_step * args.y_axis_stride;
    const bool log_mode = args.log_mode != 0;
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
                out[k] = log_mode ? values[k] - stats[k].max - log_sum[k] : form.make(stats[k].max)(values[k]) * factor[k];
            }
        };
        for (std::int64_t j = first; j < end; j += axis_step * kUnroll) {
            const bool whole = j + (kUnroll - 1) * axis_step < end;
            const auto in_range = [&](int u) { return j + u * axis_step < end; };
            C values[kUnroll][kPack];
            load_column_step<kUnroll, kPack>(x_column + j * args.x_axis_stride, x_step, whole, in_range, values);
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
__global__ void __launch_bounds__(1024) spatial_online_softmax(const SoftmaxKernelArgs args) {
    using C = ComputeType<X>;
    __shared__ Stats<C> column_partials[1024];  // [warp][column in tile]
    const std::int64_t axis_first = threadIdx.x / args.tile_width;
    const std::int64_t axis_step = blockDim.x / args.tile_width;
    for (std::int64_t tile = blockIdx.x; tile < args.tiles; tile += gridDim.x) {
        const ColumnPlace place = column_place<1>(args, tile);
        const std::int64_t end = place.valid ? args.row_len : 0;  // an invalid column adds nothing
        const X* x_column = static_cast<const X*>(args.x) + place.x_offset;
        Stats<C> stats[1];
        column_range_stats<kSpatialUnroll, 1>(x_column, args.x_axis_stride, axis_first, end, axis_step, stats);
        fold_column_stats<1>(stats, args.tile_width, column_partials);
        if (place.valid) column_range_write<kSpatialUnroll, 1, X, Y>(args, place, axis_first, args.row_len, axis_step, stats);
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
__device__ __forceinline__ std::int64_t split_chunk_end(const SoftmaxKernelArgs& args, std::int64_t chunk) {
    const std::int64_t end = (chunk + 1) * args.slice_len;
    return end < args.row_len ? end : args.row_len;
}

// Two CTAs of 512 per SM at least (at most 64 registers; the f32 and 16-bit instances take 46-48). Three
// (40 registers, no spills; the plan then asks for more, shorter chunks) were up to 7% faster on four
// long-column shapes and 8-15% slower on 1048576 x 32 dim=0 (H200, perf-notes run 171).
constexpr int kSpatialSplitMinBlocks = 2;

// Axis positions per thread and loop step: kSpatialSplitUnroll one-element steps, kSpatialSplitVectorUnroll
// vector steps (kernel_args.hpp; the plan sizes chunks in whole steps).
template <int kPack>
constexpr int kSplitUnrollOf = kPack == 1 ? kSpatialSplitUnroll : kSpatialSplitVectorUnroll;

// [warp][column in tile] partials of fold_column_stats.
template <class C>
using SplitColumnPartials = Stats<C>[kSpatialSplitThreads / 32 * kSpatialSplitMaxWidth];

template <class X, int kPack>
__global__ void __launch_bounds__(kSpatialSplitThreads, kSpatialSplitMinBlocks) spatial_split_stats(const SoftmaxKernelArgs args) {
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
    column_range_stats<kSplitUnrollOf<kPack>, kPack>(x_column, args.x_axis_stride, first, end, axis_step, stats);
    fold_column_stats<kPack>(stats, vectors, column_partials);
    if (threadIdx.x < static_cast<unsigned>(vectors)) {
        Stats<C>* partials = static_cast<Stats<C>*>(args.workspace) + (tile * args.chunks + chunk) * args.tile_width;
#pragma unroll
        for (int k = 0; k < kPack; ++k) partials[threadIdx.x * kPack + k] = stats[k];
    }
}

template <class X, class Y, int kPack>
__global__ void __launch_bounds__(kSpatialSplitThreads, kSpatialSplitMinBlocks) spatial_split_write(const SoftmaxKernelArgs args) {
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
    // where combine() paid a NaN-aware max and two accurate exps. The exact chain for double and where a
    // max leaves the fast exp's range.
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
        column_range_write<kSplitUnrollOf<kPack>, kPack, X, Y>(args, place, chunk * args.slice_len + axis_first,
                                                                 split_chunk_end(args, chunk), axis_step, stats);
    }
}

}  // namespace

const void* spatial_tile_softmax_kernel(smxDataType_t x_dtype, smxDataType_t y_dtype, int vector_bytes, int threads) {
    return visit_dtype_pair(x_dtype, y_dtype, [vector_bytes, threads](auto x_tag, auto y_tag) -> const void* {
        using X = typename decltype(x_tag)::type;
        using Y = typename decltype(y_tag)::type;
        constexpr int kSmall = kSpatialTileSmallThreads;
        constexpr int kLarge = kSpatialTileThreads;
        if (threads != kSmall && threads != kLarge) return nullptr;
        if (vector_bytes == 16) {
            return threads == kSmall ? reinterpret_cast<const void*>(&spatial_tile_softmax<X, Y, 16, kSmall>)
                                     : reinterpret_cast<const void*>(&spatial_tile_softmax<X, Y, 16, kLarge>);
        }
        // 8-byte vectors: instantiated for 16-bit x written as f32 only (the pairs that measured faster).
        if constexpr (sizeof(X) == 2 && sizeof(Y) == 4) {
            if (vector_bytes == 8) {
                return threads == kSmall ? reinterpret_cast<const void*>(&spatial_tile_softmax<X, Y, 8, kSmall>)
                                         : reinterpret_cast<const void*>(&spatial_tile_softmax<X, Y, 8, kLarge>);
            }
        }
        return nullptr;
    });
}

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
