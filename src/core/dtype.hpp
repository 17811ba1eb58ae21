// dtype.hpp - facts about smxDataType_t and exact host-side conversions for the 16-bit formats.
//
// The conversions round to nearest, ties to even, straight from double, so a double result is rounded
// once (no double rounding through float). They are the CPU backend's and the tests' only converters.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "smx/smx.h"

namespace smx {

// The element types, one entry each: the only list of them on the host (the device's is cuda/common/types.cuh's
// visit_dtype). A new dtype is a new entry here, then wherever the compiler or a test points.
struct DtypeTraits {
    smxDataType_t dtype;
    const char* name;
    std::size_t size;
    bool floating;  // a value operand (x, y, logits, results); the others are indices, class targets and masks
};
inline constexpr DtypeTraits kDtypes[] = {
    {SMX_DTYPE_F16, "f16", 2, true},
    {SMX_DTYPE_BF16, "bf16", 2, true},
    {SMX_DTYPE_F32, "f32", 4, true},
    {SMX_DTYPE_F64, "f64", 8, true},
    {SMX_DTYPE_I32, "i32", 4, false},
    {SMX_DTYPE_I64, "i64", 8, false},
    {SMX_DTYPE_BOOL, "bool", 1, false},
};

// The entry of `dtype`, or nullptr for a value that names no dtype.
inline const DtypeTraits* dtype_traits(int dtype) {
    for (const DtypeTraits& traits : kDtypes) {
        if (static_cast<int>(traits.dtype) == dtype) return &traits;
    }
    return nullptr;
}

inline bool is_valid_dtype(int dtype) { return dtype_traits(dtype) != nullptr; }

// Whether `dtype` holds values (a float format), as every operand but indices, targets and masks must.
inline bool is_floating_dtype(smxDataType_t dtype) {
    const DtypeTraits* traits = dtype_traits(dtype);
    return traits != nullptr && traits->floating;
}

// Whether `dtype` holds indices (I32, I64), as gather indices and class targets must; a bool mask does not.
inline bool is_index_dtype(smxDataType_t dtype) { return dtype == SMX_DTYPE_I32 || dtype == SMX_DTYPE_I64; }

inline std::size_t dtype_size(smxDataType_t dtype) {
    const DtypeTraits* traits = dtype_traits(dtype);
    return traits != nullptr ? traits->size : 0;
}

inline const char* dtype_name(smxDataType_t dtype) {
    const DtypeTraits* traits = dtype_traits(dtype);
    return traits != nullptr ? traits->name : "invalid";
}

// Softmax takes any pair of the floating dtypes, as PyTorch's dtype= does: computed in float where both are
// 16/32-bit, in double where either is f64, and rounded once to y's dtype.
inline bool is_supported_dtype_pair(smxDataType_t x, smxDataType_t y) { return is_floating_dtype(x) && is_floating_dtype(y); }
inline constexpr const char* kSupportedDtypePairs = "x and y each one of f16, bf16, f32, f64";

// ---- binary16 / bfloat16 <-> double, bit exact -------------------------------------------------

inline double half_bits_to_double(std::uint16_t h) {
    const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000) << 16;
    const std::uint32_t exponent = (h >> 10) & 0x1f;
    const std::uint32_t mantissa = h & 0x3ff;
    if (exponent == 0) {
        const double magnitude = static_cast<double>(mantissa) * 0x1p-24;  // subnormal: mantissa * 2^-24
        return sign != 0 ? -magnitude : magnitude;
    }
    // Normals re-biased into a float (every binary16 value is exact in float); 31 becomes the float's
    // all-ones exponent, keeping infinities and NaN payloads.
    const std::uint32_t float_exponent = exponent == 31 ? 0xff : exponent + (127 - 15);
    const std::uint32_t bits = sign | (float_exponent << 23) | (mantissa << 13);
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return static_cast<double>(f);
}

inline double bf16_bits_to_double(std::uint16_t b) {
    const std::uint32_t bits = static_cast<std::uint32_t>(b) << 16;
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return static_cast<double>(f);
}

// Rounds a double to the nearest binary16, ties to even; overflow gives +-inf, NaN stays NaN.
std::uint16_t double_to_half_bits(double value);

// Rounds a double to the nearest bfloat16, ties to even; overflow gives +-inf, NaN stays NaN.
std::uint16_t double_to_bf16_bits(double value);

// Reads element `index` (in elements, may be negative) of a tensor of `dtype` at `base` as a double.
inline double load_as_double(const void* base, smxDataType_t dtype, std::int64_t index) {
    switch (dtype) {
        case SMX_DTYPE_F16: return half_bits_to_double(static_cast<const std::uint16_t*>(base)[index]);
        case SMX_DTYPE_BF16: return bf16_bits_to_double(static_cast<const std::uint16_t*>(base)[index]);
        case SMX_DTYPE_F32: return static_cast<double>(static_cast<const float*>(base)[index]);
        case SMX_DTYPE_F64: return static_cast<const double*>(base)[index];
        case SMX_DTYPE_I32: return static_cast<double>(static_cast<const std::int32_t*>(base)[index]);
        case SMX_DTYPE_I64: return static_cast<double>(static_cast<const std::int64_t*>(base)[index]);
        case SMX_DTYPE_BOOL: return static_cast<const std::uint8_t*>(base)[index] != 0 ? 1.0 : 0.0;
    }
    return 0.0;
}

// Reads element `index` of an index tensor (I32 or I64) at `base`; 0 for any other dtype (never asked).
inline std::int64_t load_index(const void* base, smxDataType_t dtype, std::int64_t index) {
    switch (dtype) {
        case SMX_DTYPE_I32: return static_cast<const std::int32_t*>(base)[index];
        case SMX_DTYPE_I64: return static_cast<const std::int64_t*>(base)[index];
        case SMX_DTYPE_F16:
        case SMX_DTYPE_BF16:
        case SMX_DTYPE_F32:
        case SMX_DTYPE_F64:
        case SMX_DTYPE_BOOL: break;
    }
    return 0;
}

// Writes `value`, rounded once to `dtype`, to element `index` of a tensor at `base`.
inline void store_from_double(void* base, smxDataType_t dtype, std::int64_t index, double value) {
    switch (dtype) {
        case SMX_DTYPE_F16: static_cast<std::uint16_t*>(base)[index] = double_to_half_bits(value); break;
        case SMX_DTYPE_BF16: static_cast<std::uint16_t*>(base)[index] = double_to_bf16_bits(value); break;
        case SMX_DTYPE_F32: static_cast<float*>(base)[index] = static_cast<float>(value); break;
        case SMX_DTYPE_F64: static_cast<double*>(base)[index] = value; break;
        case SMX_DTYPE_I32:
        case SMX_DTYPE_I64: break;  // no operator writes indices
        case SMX_DTYPE_BOOL: static_cast<std::uint8_t*>(base)[index] = value != 0.0 ? 1 : 0; break;  // tests' masks
    }
}

}  // namespace smx
