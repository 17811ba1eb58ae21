// types.cuh - the device side of the dtype table: compute types, 16-byte packs, the load/store conversions
// (any input dtype to the compute type, the compute type to any output dtype, rounded to nearest once) and the
// dtype-pair visitor that hands out kernel instances. Host-side dtype facts live in core/dtype.hpp.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "smx/smx.h"

namespace smx::cuda {
// ---- types ---------------------------------------------------------------------------------------

// float for every 16/32-bit input, double for f64. The families' pairs (kEveryFamilyPair) have f64 on both
// sides or neither; the general family's mixed pairs compute in PairComputeType.
template <class X>
struct ComputeTypeOf {
    using type = float;
};
template <>
struct ComputeTypeOf<double> {
    using type = double;
};
template <class X>
using ComputeType = typename ComputeTypeOf<X>::type;

// Elements of T in one 16-byte access.
template <class T>
constexpr int kPackOf = 16 / static_cast<int>(sizeof(T));

// Elements a thread moves per vector access for the pair (X, Y): 16 bytes of the wider of the two. With
// 16-byte packs of a 16-bit x, a thread would write 32 bytes of f32 y per pack as two 16-byte stores, and
// each store instruction of a warp would cover only half of every 32-byte sector it touches, which keeps L2
// busy while DRAM waits (performance.md#block-regs); 8-byte loads of x and 16-byte stores of y keep both
// sides of a warp's accesses contiguous.
template <class X, class Y>
constexpr int kPackOfPair = 16 / static_cast<int>(sizeof(X) > sizeof(Y) ? sizeof(X) : sizeof(Y));

// N elements of T accessed as one aligned unit (N * sizeof(T) <= 16).
template <class T, int N>
struct alignas(sizeof(T) * N) Packed {
    T value[N];
};

// ---- conversions ---------------------------------------------------------------------------------

__device__ __forceinline__ float to_compute(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_compute(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_compute(float v) { return v; }
__device__ __forceinline__ double to_compute(double v) { return v; }

template <class Y>
struct StoreAs;
template <>
struct StoreAs<__half> {
    static __device__ __forceinline__ __half from(float v) { return __float2half_rn(v); }
    static __device__ __forceinline__ __half from(double v) { return __double2half(v); }  // one rounding
};
template <>
struct StoreAs<__nv_bfloat16> {
    static __device__ __forceinline__ __nv_bfloat16 from(float v) { return __float2bfloat16_rn(v); }
    static __device__ __forceinline__ __nv_bfloat16 from(double v) { return __double2bfloat16(v); }  // one rounding
};
template <>
struct StoreAs<float> {
    static __device__ __forceinline__ float from(float v) { return v; }
    static __device__ __forceinline__ float from(double v) { return static_cast<float>(v); }
};
template <>
struct StoreAs<double> {
    static __device__ __forceinline__ double from(double v) { return v; }
};

// How a pack access treats the caches. Streaming (ld/st.global.cs, evict-first in L1 and L2) is for data
// a kernel touches for the last time while other data it will read again still sits in L2: split-row's
// second pass re-reads x that the first pass left in L2, and its own x and y would otherwise push it out.
enum class Access { Normal, Streaming };

// One aligned 8- or 16-byte unit (a Packed; every pack of a supported dtype pair is one of these), read
// streaming or written with the given cache treatment, as one access.
template <class P>
__device__ __forceinline__ P load_streaming(const P* source) {
    static_assert(sizeof(P) == 16 || sizeof(P) == 8, "a unit is 8 or 16 bytes");
    using Raw = std::conditional_t<sizeof(P) == 16, uint4, uint2>;
    P unit;
    *reinterpret_cast<Raw*>(&unit) = __ldcs(reinterpret_cast<const Raw*>(source));
    return unit;
}

template <Access kAccess, class P>
__device__ __forceinline__ void store_unit(P* target, const P& unit) {
    if constexpr (kAccess == Access::Normal) {
        *target = unit;
    } else {
        static_assert(sizeof(P) == 16 || sizeof(P) == 8, "a unit is 8 or 16 bytes");
        using Raw = std::conditional_t<sizeof(P) == 16, uint4, uint2>;
        __stcs(reinterpret_cast<Raw*>(target), *reinterpret_cast<const Raw*>(&unit));
    }
}

// 16-bit x values two to a 32-bit word (element 2k in the low half, 2k + 1 in the high half, as in
// memory). A bf16 value is the high half of its float, so each half widens in one instruction from the
// word: the low one shifted up, the high one with the low half cleared. Converting a bf16 taken out of
// the word costs two for the high half (PRMT to extract it, then the shift).
template <int kWords>
struct alignas(4 * kWords) Words {
    std::uint32_t word[kWords];
};

// The words of a pack of a 16-bit dtype.
template <class X, int kPack>
__device__ __forceinline__ Words<kPack / 2> words_of(const Packed<X, kPack>& pack) {
    static_assert(sizeof(X) == 2 && kPack % 2 == 0, "whole pairs of a 16-bit dtype");
    static_assert(sizeof(Words<kPack / 2>) == sizeof(pack) && alignof(Words<kPack / 2>) == alignof(Packed<X, kPack>));
    return *reinterpret_cast<const Words<kPack / 2>*>(&pack);
}

// Widens the kPack elements of a pack of x into compute-type registers (bf16 from its words).
template <class X, int kPack, class C>
__device__ __forceinline__ void widen_pack(const Packed<X, kPack>& pack, C* values) {
    if constexpr (std::is_same_v<X, __nv_bfloat16> && kPack % 2 == 0) {
        const auto words = words_of(pack);
#pragma unroll
        for (int k = 0; k < kPack; ++k) {
            const std::uint32_t word = words.word[k / 2];
            values[k] = __uint_as_float(k % 2 == 0 ? word << 16 : word & 0xffff0000u);
        }
    } else {
#pragma unroll
        for (int k = 0; k < kPack; ++k) values[k] = to_compute(pack.value[k]);
    }
}

// Element k of a pack of x that a kernel holds in registers in its own dtype, widened where it is used:
// a plain conversion lets the compiler widen every held value once and keep the floats, which doubles the
// registers of 16-bit rows (e.g. 128 instead of ~64 for 64 values a thread); this one is asm volatile,
// which the compiler can neither hoist nor share between uses, so the inputs stay packed until each use,
// at one instruction per use.
template <class X, int kPack>
__device__ __forceinline__ ComputeType<X> widen_element_on_use(const Packed<X, kPack>& pack, int k) {
    if constexpr (sizeof(X) == 2 && kPack % 2 == 0) {
        const std::uint32_t word = words_of(pack).word[k / 2];
        float widened;
        if constexpr (std::is_same_v<X, __nv_bfloat16>) {
            std::uint32_t bits;
            if (k % 2 == 0) {
                asm volatile("shl.b32 %0, %1, 16;" : "=r"(bits) : "r"(word));
            } else {
                asm volatile("and.b32 %0, %1, 0xffff0000;" : "=r"(bits) : "r"(word));
            }
            widened = __uint_as_float(bits);
        } else {  // f16: one HADD2.F32, which reads either half of the word
            if (k % 2 == 0) {
                asm volatile("{ .reg .b16 lo, hi; mov.b32 {lo, hi}, %1; cvt.f32.f16 %0, lo; }" : "=f"(widened) : "r"(word));
            } else {
                asm volatile("{ .reg .b16 lo, hi; mov.b32 {lo, hi}, %1; cvt.f32.f16 %0, hi; }" : "=f"(widened) : "r"(word));
            }
        }
        return widened;
    } else {
        return to_compute(pack.value[k]);
    }
}

// Loads kPack elements of x (aligned to their size, 16 bytes by default) into compute-type registers.
template <class X, class C, int kPack = kPackOf<X>>
__device__ __forceinline__ void load_pack(const X* source, C* values) {
    const Packed<X, kPack> pack = *reinterpret_cast<const Packed<X, kPack>*>(source);
    widen_pack(pack, values);
}

// Two floats to two 16-bit outputs with one conversion instruction (F2FP ... PACK_AB), each rounded to
// nearest; element-wise conversions cost one instruction per element plus the packing.
__device__ __forceinline__ void convert_pair(float a, float b, __half* out) {
    const __half2 pair = __floats2half2_rn(a, b);
    out[0] = __low2half(pair);
    out[1] = __high2half(pair);
}
__device__ __forceinline__ void convert_pair(float a, float b, __nv_bfloat16* out) {
    const __nv_bfloat162 pair = __floats2bfloat162_rn(a, b);
    out[0] = __low2bfloat16(pair);
    out[1] = __high2bfloat16(pair);
}

// Stores N outputs as aligned chunks of at most 16 bytes; `target` must be aligned to min(16, N*sizeof(Y)).
template <class Y, int N, Access kAccess = Access::Normal, class C>
__device__ __forceinline__ void store_pack(Y* target, const C* values) {
    constexpr int kBytes = N * static_cast<int>(sizeof(Y));
    constexpr int kChunk = (kBytes < 16 ? kBytes : 16) / static_cast<int>(sizeof(Y));
    constexpr bool kPairs = sizeof(Y) == 2 && std::is_same_v<C, float> && kChunk % 2 == 0;
#pragma unroll
    for (int c = 0; c < N / kChunk; ++c) {
        Packed<Y, kChunk> pack;
        if constexpr (kPairs) {
#pragma unroll
            for (int k = 0; k < kChunk; k += 2) convert_pair(values[c * kChunk + k], values[c * kChunk + k + 1], &pack.value[k]);
        } else {
#pragma unroll
            for (int k = 0; k < kChunk; ++k) pack.value[k] = StoreAs<Y>::from(values[c * kChunk + k]);
        }
        store_unit<kAccess>(reinterpret_cast<Packed<Y, kChunk>*>(target + c * kChunk), pack);
    }
}

// Byte alignment a full-pack store of N elements of Y needs.
template <class Y, int N>
constexpr std::uintptr_t kStoreAlignment = N * sizeof(Y) < 16 ? N * sizeof(Y) : 16;

// ---- the dtype list and its visitors ---------------------------------------------------------------

template <class T>
struct TypeTag {
    using type = T;
};

// The device type of every smxDataType_t (core/dtype.hpp's list): calls visit(TypeTag<T>) and returns what it
// returns, or nullptr for a value that names no dtype.
template <class Visitor>
const void* visit_dtype(smxDataType_t dtype, Visitor&& visit) {
    switch (dtype) {
        case SMX_DTYPE_F16: return visit(TypeTag<__half>{});
        case SMX_DTYPE_BF16: return visit(TypeTag<__nv_bfloat16>{});
        case SMX_DTYPE_F32: return visit(TypeTag<float>{});
        case SMX_DTYPE_F64: return visit(TypeTag<double>{});
        case SMX_DTYPE_I32:
        case SMX_DTYPE_I64:
        case SMX_DTYPE_BOOL: break;  // indices and masks, not values: no kernel computes on them
    }
    return nullptr;
}

// The pairs every kernel family is instantiated for: any of f16/bf16/f32 to any of them (computed in float), or
// f64 -> f64. Pairs with f64 on one side only run on the general family alone (visit_any_dtype_pair).
template <class X, class Y>
constexpr bool kEveryFamilyPair = std::is_same_v<X, double> == std::is_same_v<Y, double>;

// The pairs the fast row families have options instances for: those of the lastdim and decode benchmark grids
// (f32 -> f32/bf16, 16-bit -> itself or f32). Each instance doubles a shape's compile time, so the other pairs'
// options run on the general family.
template <class X, class Y>
constexpr bool kRowsOptionsPair = (std::is_same_v<X, float> && !std::is_same_v<Y, __half> && !std::is_same_v<Y, double>) ||
                                  (sizeof(X) == 2 && (std::is_same_v<Y, X> || std::is_same_v<Y, float>));

// The compute type of a pair: double where either side is f64, float otherwise.
template <class X, class Y>
using PairComputeType = std::conditional_t<std::is_same_v<X, double> || std::is_same_v<Y, double>, double, float>;

// Calls visit(TypeTag<X>, TypeTag<Y>) for a pair of kEveryFamilyPair; nullptr for any other pair.
template <class Visitor>
const void* visit_dtype_pair(smxDataType_t x_dtype, smxDataType_t y_dtype, Visitor visit) {
    return visit_dtype(x_dtype, [&](auto x_tag) -> const void* {
        return visit_dtype(y_dtype, [&](auto y_tag) -> const void* {
            using X = typename decltype(x_tag)::type;
            using Y = typename decltype(y_tag)::type;
            if constexpr (kEveryFamilyPair<X, Y>) {
                return visit(x_tag, y_tag);
            } else {
                return nullptr;
            }
        });
    });
}

// Calls visit(TypeTag<X>, TypeTag<Y>) for every pair of dtypes.
template <class Visitor>
const void* visit_any_dtype_pair(smxDataType_t x_dtype, smxDataType_t y_dtype, Visitor visit) {
    return visit_dtype(x_dtype, [&](auto x_tag) -> const void* {
        return visit_dtype(y_dtype, [&](auto y_tag) -> const void* { return visit(x_tag, y_tag); });
    });
}

}  // namespace smx::cuda
