// common.cuh - what the backward kernels share on the device: a block's sum, sums of long loops in
// segments, and the access to a pack of one operand with its element-wise fallback. The gradient formulas
// themselves (SoftmaxGradient, LogSoftmaxGradient, GradientOutput) are in common/epilogue.cuh.
#pragma once

#include <cstdint>

#include "cuda/backward/params.hpp"
#include "cuda/common/epilogue.cuh"
#include "cuda/common/reduce.cuh"

namespace smx::cuda {

// The sum of every thread's `v` over the block, in every thread (scratch: 32 entries). Each warp folds its
// lanes by a butterfly, then every thread adds the warps' sums in warp order: the same tree in every CTA,
// so the CTAs of one row agree bitwise.
template <class C>
__device__ __forceinline__ C block_sum(C v, C* scratch) {
    v = group_sum<32>(v);
    if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = v;
    __syncthreads();
    const int warps = static_cast<int>(blockDim.x / 32);
    C total = scratch[0];
    for (int w = 1; w < warps; ++w) total += scratch[w];
    __syncthreads();  // scratch may be rewritten by the caller's next call
    return total;
}

// A thread's sum over a strided loop, j = first, first + stride, ... < end, in two levels: step(j) returns
// loop step j's sum, which joins a segment of kSegmentSteps steps that then joins the total. Added straight
// into one float, a long loop's roundings grow with its step count; this way no sum takes more than
// kSegmentSteps + steps / kSegmentSteps additions (math.cuh's segmented_stats does the same for (max, sum)).
template <class C, class Step>
__device__ __forceinline__ C segmented_sum(std::int64_t first, std::int64_t end, std::int64_t stride, const Step& step) {
    const std::int64_t segment_span = stride * kSegmentSteps;
    C total = C(0);
    for (std::int64_t segment_first = first; segment_first < end; segment_first += segment_span) {
        const std::int64_t segment_end = end - segment_first < segment_span ? end : segment_first + segment_span;
        C segment = C(0);
        for (std::int64_t j = segment_first; j < segment_end; j += stride) segment += step(j);
        total += segment;
    }
    return total;
}

// A zero of an operand's dtype: padding, whose terms add nothing to a row's sum.
template <class T>
__device__ __forceinline__ T zero_of() {
    return StoreAs<T>::from(ComputeType<T>(0));
}

// The kPack elements of `source` from `count` on as one pack: one vector load where `whole` (the caller
// knows the pack aligned and inside the range), else element by element, zeros past `count`.
template <class T, int kPack>
__device__ __forceinline__ Packed<T, kPack> load_operand_pack(const T* source, int count, bool whole) {
    if (whole) return *reinterpret_cast<const Packed<T, kPack>*>(source);
    Packed<T, kPack> pack;
    if constexpr (sizeof(T) == 2) {
        // 16-bit elements assembled into the pack's 32-bit words: element-wise __half stores into the pack
        // kept each half in a register of its own, spilling the instances that hold 32 of them. The words are
        // joined by an asm PRMT, which stays one word: joined by `low | high << 16`, f16's elements (widened
        // from 16-bit halves of the word) were again held a register each, on the vector path too.
        Words<kPack / 2> words;
        const auto* bits = reinterpret_cast<const unsigned short*>(source);
#pragma unroll
        for (int w = 0; w < kPack / 2; ++w) {
            const std::uint32_t low = 2 * w < count ? bits[2 * w] : 0u;
            const std::uint32_t high = 2 * w + 1 < count ? bits[2 * w + 1] : 0u;
            asm volatile("prmt.b32 %0, %1, %2, 0x5410;" : "=r"(words.word[w]) : "r"(low), "r"(high));
        }
        pack = *reinterpret_cast<const Packed<T, kPack>*>(&words);
    } else {
#pragma unroll
        for (int k = 0; k < kPack; ++k) pack.value[k] = k < count ? source[k] : zero_of<T>();
    }
    return pack;
}

// Stores the first min(count, kPack) of `values` at `target` as D: whole packs where `whole`, else
// element by element.
template <class D, int kPack, class C>
__device__ __forceinline__ void store_gradient_pack(D* target, const C (&values)[kPack], int count, bool whole) {
    if (whole) {
        store_pack<D, kPack>(target, values);
        return;
    }
#pragma unroll
    for (int k = 0; k < kPack; ++k) {
        if (k < count) target[k] = StoreAs<D>::from(values[k]);
    }
}

// Elements of a range of `count` at `start` before its first kPackBytes boundary: the head a body of whole
// packs starts after.
template <int kPackBytes, class T>
__device__ __forceinline__ int head_before_packs(const T* start, int count) {
    const int misalignment = static_cast<int>(reinterpret_cast<std::uintptr_t>(start) % kPackBytes);
    return min(count, (kPackBytes - misalignment) % kPackBytes / static_cast<int>(sizeof(T)));
}

}  // namespace smx::cuda
