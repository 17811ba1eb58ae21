// spatial.cu - backward-spatial, the Spatial layout (the axis strided, `inner` contiguous in every operand;
// element (o, j, i) at o * outer_stride + j * axis_stride + i). A CTA owns a tile of W = V x P contiguous
// inner columns (V vectors of P elements, P = the pair's pack) of one outer index over a slice of the axis;
// a cluster of C CTAs (sm_90) splits a column that one CTA cannot hold. Thread t takes vector t % V at axis
// positions t / V + k * (T / V), so a warp reads 32 / V tile rows of V contiguous vectors, coalesced.
//   Pass 1: dy and y read once, per-column sums of terms (each thread's, folded across the warp's lanes of
//           one vector, then across warps in order), and, where `cached`, the slice kept in shared memory in
//           the operands' dtype: copied there with cp.async, every vector of the slice in flight at once,
//           then summed from the cache (`async_copies`; else loaded through registers a position at a time);
//   the cluster: in the push instance every CTA pushes its column sums into every peer's mailbox (slot
//           [rank][column] in dynamic shared memory after the cache, its mbarrier static; cluster.cuh); in the
//           pull instance (the kernel as it was before the mailbox) every peer reads them through distributed
//           shared memory; either way each column's CTA sums are added in rank order, so both give the same
//           bits. The plan picks the instance (performance.md#backward-spatial-push-per-dtype-pair);
//   Pass 2: dx written from the cache, or (not cached: columns too long for a cluster's shared memory) from
//           a second read of the CTA's slice.
// Traffic: dy and y read once (cached) or twice, dx written once. Vector accesses where every operand's
// base and strides keep each vector aligned (vectors_aligned, set at bind) and the vector is whole; element
// by element otherwise. Design and expectations: performance.md#backward.
#include "cuda/backward/common.cuh"
#include "cuda/common/async_copy.cuh"
#include "cuda/common/cluster.cuh"
#include "cuda/spatial/common.cuh"

namespace smx::cuda {
namespace {

// One axis position's vectors of dy and y.
template <class T, int kPack>
struct OperandPacks {
    Packed<T, kPack> dy;
    Packed<T, kPack> y;
};

// sums[k] = the sum of Gradient's terms of column k over positions first, first + step, ... < count, in
// segments of kSegmentSteps steps (as segmented_sum); packs(j) gives position j's OperandPacks.
template <class Gradient, int kPack, class C, class Packs>
__device__ __forceinline__ void add_column_terms(int first, int count, int step, C (&sums)[kPack], const Packs& packs) {
#pragma unroll
    for (int k = 0; k < kPack; ++k) sums[k] = C(0);
    for (int segment_first = first; segment_first < count; segment_first += step * kSegmentSteps) {
        const int segment_end = min(count, segment_first + step * kSegmentSteps);
        C segment[kPack];
#pragma unroll
        for (int k = 0; k < kPack; ++k) segment[k] = C(0);
#pragma unroll 4
        for (int j = segment_first; j < segment_end; j += step) {
            const auto pair = packs(j);
#pragma unroll
            for (int k = 0; k < kPack; ++k) {
                segment[k] += Gradient::term(widen_element_on_use(pair.dy, k), widen_element_on_use(pair.y, k));
            }
        }
#pragma unroll
        for (int k = 0; k < kPack; ++k) sums[k] += segment[k];
    }
}

// Copies this thread's whole vectors of one operand's slice column (positions first, first + step, ...
// < count) into its cache column with cp.async, all issued before any lands: the load phase keeps the whole
// slice in flight instead of one position's vectors per thread.
template <bool kWholeLine, class T, int kPack>
__device__ __forceinline__ void cache_column_async(Packed<T, kPack>* cache, const T* column, std::int64_t axis_stride,
                                                   int first, int count, int step, int vectors) {
    constexpr int kVectorBytes = kPack * static_cast<int>(sizeof(T));
#pragma unroll 4
    for (int j = first; j < count; j += step) {
        copy_vector_async<kVectorBytes, kWholeLine>(cache + j * vectors, column + j * axis_stride);
    }
}

// The push instance's mailbox mbarrier, padded to 16 bytes so that the static arrays placed after it (the other
// gradient mode's) stay aligned for 128-bit accesses.
struct alignas(16) SumsLandedBarrier {
    std::uint64_t mbarrier;
};

template <class T, class D, class Gradient, bool kPushSums>
__device__ __forceinline__ void backward_spatial_tiles(const BackwardSpatialParams& args) {
    using C = ComputeType<T>;
    constexpr int kPack = kPackOfPair<T, D>;
    constexpr int kWarps = kBackwardSpatialThreads / 32;
    constexpr int kMaxWidth = kBackwardSpatialMaxVectors * kPack;
    using Pack = Packed<T, kPack>;
    extern __shared__ __align__(16) unsigned char dynamic_shared[];
    __shared__ C warp_sums[kWarps][kMaxWidth];
    __shared__ C cta_sums[kMaxWidth];  // this CTA's column sums, read by its cluster peers (pulled sums)
    __shared__ C column_sums[kMaxWidth];

    const int width = args.tile_width;
    const int vectors = width / kPack;  // a power of two, at most kBackwardSpatialMaxVectors
    const int tid = threadIdx.x;
    const int lane = tid % 32;
    const int vector = tid & (vectors - 1);
    const int axis_group = tid / vectors;
    const int axis_groups = kBackwardSpatialThreads / vectors;
    const unsigned rank = cluster_rank();
    const unsigned ranks = cluster_size();
    const std::int64_t slice_begin = static_cast<std::int64_t>(rank) * args.slice_len;
    const std::int64_t remaining = args.row_len - slice_begin;
    const int count = static_cast<int>(remaining < 0 ? 0 : (remaining < args.slice_len ? remaining : args.slice_len));
    // The cache: the slice's dy, then its y, each [axis position][tile column]; a thread reads back only the
    // vectors it wrote, so no barrier separates the passes.
    Pack* dy_cache = reinterpret_cast<Pack*>(dynamic_shared) + vector;
    Pack* y_cache = dy_cache + static_cast<std::int64_t>(args.slice_len) * vectors;
    // Pushed sums (the plan pushes only where each cluster takes a single tile: a mailbox serves one exchange):
    // column k of rank r lands in mailbox[r x width + k], in dynamic shared memory after the cache. Opened now, so
    // its cluster barrier completes while pass 1 reads.
    const bool push_sums = kPushSums && ranks > 1;
    C* mailbox = reinterpret_cast<C*>(dynamic_shared + args.mailbox_offset);
    // Its mbarrier is static and declared by the push instance alone, so the pull instance's static shared memory
    // stays as it was. In this form the compiler keeps thread 0's setup of it a branch (at a run-time address after
    // the slots it ran it warp-wide, the likely cause of racecheck's reports):
    // performance.md#backward-spatial-push-per-dtype-pair.
    std::uint64_t* sums_landed = nullptr;
    if constexpr (kPushSums) {
        __shared__ SumsLandedBarrier push_sums_landed;
        sums_landed = &push_sums_landed.mbarrier;
    }
    if (push_sums) mailbox_open_bytes(sums_landed, ranks * static_cast<unsigned>(width * sizeof(C)));

    for (std::int64_t tile = blockIdx.x / ranks; tile < args.tiles; tile += gridDim.x / ranks) {
        std::int64_t outer, tile_in_outer;
        split_tile(tile, args.tiles_per_outer, args.tiles, &outer, &tile_in_outer);
        const std::int64_t column = tile_in_outer * width + vector * kPack;
        const std::int64_t columns_left = args.inner - column;
        const int valid = static_cast<int>(columns_left <= 0 ? 0 : (columns_left < kPack ? columns_left : kPack));
        const bool whole = args.vectors_aligned != 0 && valid == kPack;
        const std::int64_t in_tile = valid > 0 ? column : 0;  // a vector past inner touches nothing
        const T* dy_column = static_cast<const T*>(args.dy) + outer * args.dy_outer_stride + in_tile +
                             slice_begin * args.dy_axis_stride;
        const T* y_column = static_cast<const T*>(args.y) + outer * args.y_outer_stride + in_tile +
                            slice_begin * args.y_axis_stride;
        D* dx_column = static_cast<D*>(args.dx) + outer * args.dx_outer_stride + in_tile + slice_begin * args.dx_axis_stride;
        const auto load = [&](const T* column_start, std::int64_t axis_stride, int j) {
            return load_operand_pack<T, kPack>(column_start + j * axis_stride, valid, whole);
        };

        // Pass 1: this thread's column sums over its positions.
        C sums[kPack];
        if (args.cached != 0 && args.async_copies != 0) {
            // Every vector of the slice in flight at once, straight into the cache, then summed from there.
            if (whole) {
                if (args.whole_lines != 0) {
                    cache_column_async<true>(dy_cache, dy_column, args.dy_axis_stride, axis_group, count, axis_groups, vectors);
                    cache_column_async<true>(y_cache, y_column, args.y_axis_stride, axis_group, count, axis_groups, vectors);
                } else {
                    cache_column_async<false>(dy_cache, dy_column, args.dy_axis_stride, axis_group, count, axis_groups, vectors);
                    cache_column_async<false>(y_cache, y_column, args.y_axis_stride, axis_group, count, axis_groups, vectors);
                }
            } else {
                for (int j = axis_group; j < count; j += axis_groups) {
                    dy_cache[j * vectors] = load(dy_column, args.dy_axis_stride, j);
                    y_cache[j * vectors] = load(y_column, args.y_axis_stride, j);
                }
            }
            wait_async_copies();  // this thread's own copies: it reads back only what it copied
            add_column_terms<Gradient>(axis_group, count, axis_groups, sums, [&](int j) {
                return OperandPacks<T, kPack>{dy_cache[j * vectors], y_cache[j * vectors]};
            });
        } else {
            add_column_terms<Gradient>(axis_group, count, axis_groups, sums, [&](int j) {
                const OperandPacks<T, kPack> packs{load(dy_column, args.dy_axis_stride, j), load(y_column, args.y_axis_stride, j)};
                if (args.cached != 0) {
                    dy_cache[j * vectors] = packs.dy;
                    y_cache[j * vectors] = packs.y;
                }
                return packs;
            });
        }
        // Lanes of one vector within a warp differ by multiples of `vectors`: fold them, then the warps in order.
#pragma unroll
        for (int k = 0; k < kPack; ++k) {
            for (int offset = 16; offset >= vectors; offset /= 2) sums[k] += __shfl_xor_sync(0xffffffffu, sums[k], offset);
        }
        if (lane < vectors) {
#pragma unroll
            for (int k = 0; k < kPack; ++k) warp_sums[tid / 32][vector * kPack + k] = sums[k];
        }
        __syncthreads();
        C cta_total = C(0);  // column tid's sum over this CTA's slice (tid < width)
        if (tid < width) {
            cta_total = warp_sums[0][tid];
            for (int w = 1; w < kWarps; ++w) cta_total += warp_sums[w][tid];
            cta_sums[tid] = cta_total;
        }
        if (push_sums) {
            cluster_wait();  // every peer's mailbox is set up
            if (tid < width) {
                for (unsigned r = 0; r < ranks; ++r) mailbox_post_slot(mailbox + rank * width + tid, sums_landed, cta_total, r);
                mailbox_wait_landed(sums_landed);
                C total = mailbox[tid];
                for (unsigned r = 1; r < ranks; ++r) total += mailbox[r * width + tid];
                column_sums[tid] = total;
            }
        } else if (ranks > 1) {
            cluster_sync();  // every CTA's column sums are in its shared memory
            if (tid < width) {
                C total = read_peer(&cta_sums[tid], 0);
                for (unsigned r = 1; r < ranks; ++r) total += read_peer(&cta_sums[tid], r);
                column_sums[tid] = total;
            }
            cluster_arrive();  // done reading the peers
        } else if (tid < width) {
            column_sums[tid] = cta_sums[tid];
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < kPack; ++k) sums[k] = column_sums[vector * kPack + k];

        // Pass 2: dx from the cached slice, or from a second read of it.
#pragma unroll 4
        for (int j = axis_group; j < count; j += axis_groups) {
            const Pack dy_pack = args.cached != 0 ? dy_cache[j * vectors] : load(dy_column, args.dy_axis_stride, j);
            const Pack y_pack = args.cached != 0 ? y_cache[j * vectors] : load(y_column, args.y_axis_stride, j);
            C out[kPack];
#pragma unroll
            for (int k = 0; k < kPack; ++k) {
                out[k] = Gradient::element(widen_element_on_use(dy_pack, k), widen_element_on_use(y_pack, k), sums[k]);
            }
            store_gradient_pack<D, kPack>(dx_column + j * args.dx_axis_stride, out, valid, whole);
        }
        // Pulled sums: peers may still be reading cta_sums, so it is rewritten (next tile) or released only after
        // all arrived. Pushed sums: no peer reads this CTA's shared memory, and its mailbox is full.
        if (ranks > 1 && !push_sums) cluster_wait();
    }
}

// Pass 1's loads, the cache and the sums take registers in proportion to the pack: the mode is a
// compile-time choice branched on once, as in the Rows families. The exchange is one too, so the pull
// instance carries none of the push's code or shared memory.
template <class T, class D, bool kPushSums>
__global__ void __launch_bounds__(kBackwardSpatialThreads, 3) backward_spatial(const ParamBlock<BackwardSpatialParams> args) {
    if (args.log_mode != 0) {
        backward_spatial_tiles<T, D, LogSoftmaxGradient, kPushSums>(args);
    } else {
        backward_spatial_tiles<T, D, SoftmaxGradient, kPushSums>(args);
    }
}

}  // namespace

const void* backward_spatial_kernel(smxDataType_t value_dtype, smxDataType_t gradient_dtype, BackwardSpatialExchange exchange) {
    return visit_dtype_pair(value_dtype, gradient_dtype, [exchange](auto t_tag, auto d_tag) -> const void* {
        using T = typename decltype(t_tag)::type;
        using D = typename decltype(d_tag)::type;
        return exchange == BackwardSpatialExchange::Push ? reinterpret_cast<const void*>(&backward_spatial<T, D, true>)
                                                         : reinterpret_cast<const void*>(&backward_spatial<T, D, false>);
    });
}

}  // namespace smx::cuda
