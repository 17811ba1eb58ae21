// reduce.cuh - statistics across the threads of a lane group, a warp and a block (shuffles and a shared
// scratch of 32 entries); every thread ends with bitwise the same result.
#pragma once

#include "cuda/common/math.cuh"

namespace smx::cuda {
// ---- reductions ------------------------------------------------------------------------------------

template <int kWidth, class C>
__device__ __forceinline__ C group_max_skip_nan(C v) {
#pragma unroll
    for (int offset = kWidth / 2; offset > 0; offset /= 2) v = max_skip_nan(v, __shfl_xor_sync(0xffffffffu, v, offset, kWidth));
    return v;
}

template <int kWidth, class C>
__device__ __forceinline__ C group_sum(C v) {
#pragma unroll
    for (int offset = kWidth / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset, kWidth);
    return v;
}

// Combines kColumns statistics at once across lanes that differ in the bits of [first_offset, 32) (xor
// butterflies; every lane ends with bitwise the same result). The max first (one FMNMX per step), then
// each lane's sum rescaled once to it and summed (one FADD per step): one exp per lane and column, where
// folding (max, sum) pairs took two exps and a branch per step (performance.md#block-regs); every column
// moves at each step, so their shuffles overlap. fmaxf may drop a NaN max, but by the Stats invariant that
// lane's sum is NaN and reaches the total, which then makes the max NaN; +inf likewise (its sum is NaN).
template <int kColumns, class C>
__device__ __forceinline__ void warp_combine_columns(Stats<C> (&columns)[kColumns], int first_offset = 1) {
    C max[kColumns];
#pragma unroll
    for (int k = 0; k < kColumns; ++k) max[k] = columns[k].max;
    for (int offset = 16; offset >= first_offset; offset /= 2) {
#pragma unroll
        for (int k = 0; k < kColumns; ++k) max[k] = max_skip_nan(max[k], __shfl_xor_sync(0xffffffffu, max[k], offset));
    }
    C sum[kColumns];
#pragma unroll
    for (int k = 0; k < kColumns; ++k) {
        sum[k] = columns[k].sum * rescale(columns[k].max, max[k]);  // exactly 1 for equal maxima: -inf lanes add 0
    }
    for (int offset = 16; offset >= first_offset; offset /= 2) {
#pragma unroll
        for (int k = 0; k < kColumns; ++k) sum[k] += __shfl_xor_sync(0xffffffffu, sum[k], offset);
    }
#pragma unroll
    for (int k = 0; k < kColumns; ++k) {
        if (sum[k] != sum[k]) max[k] = sum[k];
        columns[k] = {max[k], sum[k]};
    }
}

// One column's statistics combined across lanes (see warp_combine_columns).
template <class C>
__device__ __forceinline__ Stats<C> warp_combine_stats(Stats<C> s, int first_offset = 1) {
    Stats<C> columns[1] = {s};
    warp_combine_columns(columns, first_offset);
    return columns[0];
}

// The block's statistics, written to *result by thread 0 and returned complete in warp 0 (scratch: 32
// entries, which *result may be one of): each warp folds its lanes, then warp 0 folds the warps'
// partials. The same tree in every block, so blocks of one row agree bitwise. Callers __syncthreads
// before reading *result from other warps.
template <class C>
__device__ __forceinline__ Stats<C> block_stats_to(Stats<C> s, Stats<C>* scratch, Stats<C>* result) {
    s = warp_combine_stats(s);
    const int warps = blockDim.x / 32;
    const int lane = threadIdx.x % 32;
    if (lane == 0) scratch[threadIdx.x / 32] = s;
    __syncthreads();
    if (threadIdx.x < 32) {
        s = warp_combine_stats(lane < warps ? scratch[lane] : empty_stats<C>());
        if (lane == 0) *result = s;  // scratch[0] included: only lane 0 read it
    }
    return s;
}

// The block's statistics in every thread (scratch: 32 entries).
template <class C>
__device__ __forceinline__ Stats<C> block_combine_stats(Stats<C> s, Stats<C>* scratch) {
    block_stats_to(s, scratch, &scratch[0]);
    __syncthreads();
    const Stats<C> result = scratch[0];
    __syncthreads();  // scratch may be rewritten by the caller's next call
    return result;
}

}  // namespace smx::cuda
