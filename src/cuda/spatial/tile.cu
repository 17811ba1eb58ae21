// tile.cu - spatial-tile, the Spatial layout's fast path (the axis strided, `inner` contiguous; element
// (o, j, i) at o * outer_stride + j * axis_stride + i): a CTA owns a tile of W = V x P contiguous inner columns
// (V vectors of P elements: 16 bytes, or 8 for 16-bit x written as f32 at tile rows of 128+ bytes) of one
// outer index over a slice of the axis, and caches it in shared memory in the input dtype (cp.async, a vector
// at a time, when x's addresses allow; element-wise otherwise). A cluster of C CTAs (sm_90) splits a column
// that one CTA cannot hold: each CTA folds its slice into per-column (max, sum) partials (f32 x while the
// slice is still landing), the cluster exchanges them through distributed shared memory, and every CTA folds
// them in the same order. Traffic: x read once, y written once. Thread t handles vector t % V at axis
// positions t / V + k * (T / V): a warp touches 32 / V rows of V vectors of contiguous bytes, coalesced, and
// shared memory is read as whole vectors without bank conflicts. Measurements: performance.md#spatial-tile.
#include <type_traits>

#include "cuda/common/async_copy.cuh"
#include "cuda/common/cluster.cuh"
#include "cuda/common/epilogue.cuh"
#include "cuda/spatial/common.cuh"

namespace smx::cuda {
namespace {

// ---- column statistics ---------------------------------------------------------------------------
// The tile kernel keeps (max, sum) per column with NaN carried by the sum alone: the max skips NaN (one
// instruction instead of three), every value is exponentiated relative to a finite shift, so a NaN, or
// +inf (inf - inf), always reaches the sum, and the sum's NaN survives every merge.

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
template <int kPack, bool kWholeLine, class Input>
__device__ __forceinline__ bool pipelined_vector_stats(float* target, const float* source, int rows, int target_step,
                                                       std::int64_t source_step, const Input& input,
                                                       float (&local_max)[kPack], float (&local_sum)[kPack]) {
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
#pragma unroll
                    for (int k = 0; k < kPack; ++k) values[k] = input(values[k]);
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
        // As ShiftedExpFast: the sum was taken relative to S = shift * log2(e) rounded; 2^-(its rounding)
        // removes it.
        const float shift = shift_of(running_max[k]);
        local_sum[k] = sum[k] * exp2_approx(-fmaf(shift, kLog2e, -shift * kLog2e));
    }
    return fast;
}

// kVectorBytes: the bytes of x a thread copies and reads per access (its vector), 16 or 8. 8-byte vectors
// (16-bit x only: 4 columns) halve each thread's per-column state, so the kernel fits 48 registers and a
// fifth CTA per SM where shared memory allows (32 KB tiles); the 16-byte ones need their 64: at 48 they
// spill (performance.md#spatial-tile).
// 128-thread CTAs are bounded at 8 per SM: the same 64 registers as the 256-thread 16-byte kernel, so the
// CTAs per SM are set by the tile's shared memory alone (5-6 of 32 KB tiles with their static partials,
// against 4 register-bound CTAs of 256 threads).
template <int kVectorBytes, int kThreads>
constexpr int kSpatialTileMinCtasPerSm = kThreads == kSpatialTileSmallThreads ? 8 : (kVectorBytes == 8 ? 5 : 4);

// The kernel for one input transform and one output formula (common/epilogue.cuh); softmax takes PlainInput
// and ForwardOutput, the mode at run time. (The body stays in the kernel: moved into a function of its own,
// it compiled differently.) kThreads: kSpatialTileThreads, or kSpatialTileSmallThreads where the plan finds
// that the smaller CTAs let an SM hold more tiles at once.
template <class X, class Y, int kVectorBytes, int kThreads, class Input, class Output>
__global__ void __launch_bounds__(kThreads, kSpatialTileMinCtasPerSm<kVectorBytes, kThreads>)
    spatial_tile_softmax(const ParamBlock<SpatialParams> args) {
    using C = ComputeType<X>;
    static_assert(kVectorBytes == 16 || (kVectorBytes == 8 && sizeof(X) == 2), "16-byte vectors, or 8 for 16-bit x");
    constexpr int kPack = kVectorBytes / static_cast<int>(sizeof(X));
    constexpr int kWarps = kThreads / 32;
    constexpr int kMaxWidth = kSpatialMaxVectors * 16 / static_cast<int>(sizeof(X));  // 256 bytes of x
    constexpr std::uintptr_t kStoreAlign = kStoreAlignment<Y, kPack>;
    // Pairs whose output is wider than the input (16-bit -> f32) measured slower with three things every
    // other pair gained from, for causes not found (their loops compile alike): they keep a barrier after
    // the tile's load, the pairwise statistics merge at every fold step and their own store loop
    // (performance.md#spatial-tile).
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
    const Input input = Input::of(args);
    const Output output = Output::of(args);
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
        // f32 x folds its rows into (max, sum) while they land (pipelined_vector_stats), so a clustered
        // tile's statistics run under its load; 16-bit x lost that way (performance.md#spatial-tile). 16-bit
        // x, partial vectors, element-wise loads and shifts outside the fast exp's range take the two
        // passes below.
        bool stats_ready = false;
        if (x_vector_loads && valid == kPack) {
            const X* source = x_vector + axis_group * args.x_axis_stride;
            const std::int64_t source_step = axis_groups * args.x_axis_stride;
            const auto copy_tile = [&](auto whole_line) {
                constexpr bool kWholeLine = decltype(whole_line)::value;
                if constexpr (std::is_same<X, float>::value) {
                    stats_ready = pipelined_vector_stats<kPack, kWholeLine>(cache_rows, source, rows, kCacheRowStep,
                                                                            source_step, input, local_max, local_sum);
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

        // The two passes over this thread's share of its kPack columns: the max, then the sum of exp relative
        // to it.
        if (!stats_ready) {
            if constexpr (sizeof(X) == 2 && Input::kRaw) {
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
                    for (int k = 0; k < kPack; ++k) local_max[k] = max_skip_nan(local_max[k], input(values[k]));
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
                    for (int k = 0; k < kPack; ++k) local_sum[k] += form.make(local_shift[k])(input(values[k]));
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
        // The formula's factor without the scale of the exps: each thread's exp functor sets that (below).
        const auto publish_column = [&](Stats<C> stats) {
            column_shift[tid] = shift_of(stats.max);
            output.visit([&](auto formula) {
                column_factor[tid] = formula.row_factor(stats.sum, [] { return C(1); });
            });
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
        const auto store_pass = [&](auto outputs) {
            Y* target = y_vector + axis_group * args.y_axis_stride;
            const std::int64_t target_step = axis_groups * args.y_axis_stride;
            if (y_vector_stores && valid == kPack) {
#pragma unroll 4
                for (int i = 0; i < rows; ++i) {
                    C values[kPack];
                    load_pack<X, C, kPack>(cache_rows + i * kCacheRowStep, values);
                    outputs(values);
                    store_pack<Y, kPack>(target, values);
                    target += target_step;
                }
            } else {
                for (int i = 0; i < rows; ++i) {
                    C values[kPack];
                    load_pack<X, C, kPack>(cache_rows + i * kCacheRowStep, values);
                    outputs(values);
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
            // slower for these pairs than this loop, with one formula per loop or all of them in one lambda
            // (performance.md#spatial-tile). So they keep their own loop, choosing the formula per element.
            with_exp_form<C>(fast, [&](auto form) {
                // A formula of exps: its factor takes the functor's unbias (row_factor's scale).
                output.visit([&](auto formula) {
                    if constexpr (decltype(formula)::kUsesExp) {
#pragma unroll
                        for (int k = 0; k < kPack; ++k) factor[k] *= form.make(shift[k]).unbias();
                    }
                });
#pragma unroll 4
                for (int r = axis_group; r < count; r += axis_groups) {
                    C values[kPack];
                    load_pack<X, C, kPack>(cache_vector + r * width, values);
#pragma unroll
                    for (int k = 0; k < kPack; ++k) {
                        // The mode tested per element.
                        output.visit([&](auto formula) {
                            const auto exp = form.make(shift[k]);
                            values[k] = formula.element_from_value(input(values[k]), shift[k], factor[k], exp);
                        });
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
        } else {
            // One loop per formula: visit() branches once on a run-time mode.
            output.visit([&](auto formula) {
                if constexpr (decltype(formula)::kUsesExp) {
                    with_exp_form<C>(fast, [&](auto form) {
#pragma unroll
                        for (int k = 0; k < kPack; ++k) factor[k] *= form.make(shift[k]).unbias();
                        store_pass([&](C (&values)[kPack]) {
#pragma unroll
                            for (int k = 0; k < kPack; ++k) {
                                const auto exp = form.make(shift[k]);
                                values[k] = formula.element_from_value(input(values[k]), shift[k], factor[k], exp);
                            }
                        });
                    });
                } else {
                    store_pass([&](C (&values)[kPack]) {
#pragma unroll
                        for (int k = 0; k < kPack; ++k) {
                            values[k] = formula.element(input(values[k]), shift[k], factor[k]);
                        }
                    });
                }
            });
        }
        if (ranks > 1) cluster_wait();  // peers are done reading cta_partials: it may be rewritten or freed
    }
}

// The softmax instances: the input as it is, the mode at run time.
template <class X, class Y, int kVectorBytes, int kThreads>
const void* spatial_tile_softmax_instance() {
    return reinterpret_cast<const void*>(
        &spatial_tile_softmax<X, Y, kVectorBytes, kThreads, PlainInput, ForwardOutput>);
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
            return threads == kSmall ? spatial_tile_softmax_instance<X, Y, 16, kSmall>()
                                     : spatial_tile_softmax_instance<X, Y, 16, kLarge>();
        }
        // 8-byte vectors: instantiated for 16-bit x written as f32 only, the pairs that measured faster
        // (performance.md#spatial-tile).
        if constexpr (sizeof(X) == 2 && sizeof(Y) == 4) {
            if (vector_bytes == 8) {
                return threads == kSmall ? spatial_tile_softmax_instance<X, Y, 8, kSmall>()
                                         : spatial_tile_softmax_instance<X, Y, 8, kLarge>();
            }
        }
        return nullptr;
    });
}

}  // namespace smx::cuda
