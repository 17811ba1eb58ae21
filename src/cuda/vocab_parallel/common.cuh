// common.cuh - what the vocabulary-parallel kernels share: where a row starts in any layout, the ranks' statistics
// of a row combined in rank order (one formula for every kernel, so every rank derives the same bits from the same
// gathered values), class indices, and a block's sum.
#pragma once

#include <cstdint>

#include "cuda/common/math.cuh"
#include "cuda/common/types.cuh"
#include "cuda/vocab_parallel/params.hpp"

namespace smx::cuda {

// Element offset of row `row`'s first element in an operand (ops/common/row_problem.hpp's row_offset).
__device__ __forceinline__ std::int64_t row_start(const RowSpace& space, const OperandStrides& strides,
                                                  std::int64_t row) {
    if (space.layout == static_cast<int>(RowLayout::Rows)) return row * strides.row;
    if (space.layout == static_cast<int>(RowLayout::Spatial)) {
        return row / space.inner * strides.row + row % space.inner;
    }
    std::int64_t offset = 0;
    for (int d = space.index_ndim - 1; d >= 0; --d) {
        offset += row % space.index_shape[d] * strides.index[d];
        row /= space.index_shape[d];
    }
    return offset;
}

__device__ __forceinline__ std::int64_t load_class(const void* target, bool is_i64, std::int64_t offset) {
    return is_i64 ? static_cast<const std::int64_t*>(target)[offset]
                  : static_cast<std::int64_t>(static_cast<const std::int32_t*>(target)[offset]);
}

// One row of gathered statistics: rank w's value k at row[(w * width + k) * stride].
template <class S>
struct GatheredStats {
    const S* row;
    std::int64_t stride;
    std::int64_t ranks;
    int width;

    __device__ __forceinline__ S at(std::int64_t rank, int k) const { return row[(rank * width + k) * stride]; }

    // Every rank's value k added in rank order.
    __device__ __forceinline__ S total(int k) const {
        S sum = 0;
        for (std::int64_t w = 0; w < ranks; ++w) sum += at(w, k);
        return sum;
    }
};

// The whole row's max M (NaN if any rank's is) and sum S of exp(x - M), combined in rank order.
template <class S>
struct CombinedStats {
    S max;
    S sum;

    __device__ __forceinline__ bool finite() const { return isfinite(max); }
    // smxLogsumexp's special values: M itself where it is NaN or infinite.
    __device__ __forceinline__ S logsumexp() const { return finite() ? max + log_of(sum) : max; }
};

template <class S>
__device__ __forceinline__ CombinedStats<S> combine_ranks(const GatheredStats<S>& stats) {
    CombinedStats<S> c{neg_inf<S>(), S(0)};
    for (std::int64_t w = 0; w < stats.ranks; ++w) {
        const S m = stats.at(w, 0);
        if (m != m || m > c.max) c.max = m;  // a NaN, once taken, is never replaced
    }
    if (!c.finite()) return c;
    // A rank without classes (max -inf, sum 0) adds 0 * exp(-inf) = 0.
    for (std::int64_t w = 0; w < stats.ranks; ++w) c.sum += stats.at(w, 1) * exp_of(stats.at(w, 0) - c.max);
    return c;
}

// The sum of every thread's `value` over the block, in a fixed tree (the same bits for the same inputs and block
// size), returned in every thread. scratch: 32 entries. kBarrierAfter false: for a caller that passes through a
// __syncthreads before its next write of scratch, so the sum is in hand one barrier sooner.
template <class T, bool kBarrierAfter = true>
__device__ __forceinline__ T block_sum(T value, T* scratch) {
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) value += __shfl_xor_sync(0xffffffffu, value, offset);
    const int warps = blockDim.x / 32;
    if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = value;
    __syncthreads();
    value = threadIdx.x % 32 < warps ? scratch[threadIdx.x % 32] : T(0);
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) value += __shfl_xor_sync(0xffffffffu, value, offset);
    if constexpr (kBarrierAfter) __syncthreads();  // scratch may be rewritten by the caller's next call
    return value;
}

}  // namespace smx::cuda
