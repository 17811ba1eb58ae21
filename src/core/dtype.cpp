#include "core/dtype.hpp"

#include <cstring>

namespace smx {

namespace {

// Rounds a double to a binary format with kMantissaBits stored mantissa bits and exponent bias kBias
// (binary16: 10 and 15; bfloat16: 7 and 127), ties to even, on the integer bits of the double: the
// 53-bit significand is shifted right onto the target's unit (2^(e - kMantissaBits) for a normal result,
// the fixed subnormal unit below the smallest normal) and the bits shifted out decide the rounding.
// Adding the round-up to the packed (exponent, mantissa) pattern carries correctly from a full mantissa
// into the next exponent, from the largest subnormal into the smallest normal, and from the largest
// finite value into infinity. Overflow gives +-inf, NaN gives `nan_bits`.
template <int kMantissaBits, int kBias>
std::uint16_t round_double_to_bits(double value, std::uint16_t nan_bits) {
    constexpr int kDoubleMantissaBits = 52;
    constexpr std::uint64_t kDoubleMantissaMask = (std::uint64_t{1} << kDoubleMantissaBits) - 1;
    constexpr int kMinNormalExponent = 1 - kBias;
    constexpr int kMaxExponent = kBias;
    constexpr std::uint16_t kInfinity = static_cast<std::uint16_t>((2 * kBias + 1) << kMantissaBits);
    std::uint64_t bits;
    std::memcpy(&bits, &value, sizeof bits);
    const auto sign = static_cast<std::uint16_t>((bits >> 48) & 0x8000);
    const std::uint64_t magnitude = bits & ~(std::uint64_t{1} << 63);
    if (magnitude >= std::uint64_t{0x7ff} << kDoubleMantissaBits) {  // infinity or NaN
        return magnitude == std::uint64_t{0x7ff} << kDoubleMantissaBits ? static_cast<std::uint16_t>(sign | kInfinity)
                                                                        : nan_bits;
    }
    const int raw_exponent = static_cast<int>(magnitude >> kDoubleMantissaBits);
    // value = significand x 2^(exponent - 52); double subnormals have no implicit bit.
    std::uint64_t significand = magnitude & kDoubleMantissaMask;
    int exponent = -1022;
    if (raw_exponent != 0) {
        significand |= std::uint64_t{1} << kDoubleMantissaBits;
        exponent = raw_exponent - 1023;
    }
    if (exponent > kMaxExponent) return static_cast<std::uint16_t>(sign | kInfinity);
    const bool subnormal = exponent < kMinNormalExponent;
    const int shift = (kDoubleMantissaBits - kMantissaBits) + (subnormal ? kMinNormalExponent - exponent : 0);
    if (shift >= 64) return sign;  // under 2^-11 of the smallest subnormal: rounds to zero
    const std::uint64_t units = significand >> shift;
    const std::uint64_t rest = significand & ((std::uint64_t{1} << shift) - 1);
    const std::uint64_t half_unit = std::uint64_t{1} << (shift - 1);
    // A normal result's units include the implicit bit: (exponent + bias - 1) << m plus it is the pattern.
    std::uint64_t pattern = subnormal ? units : (static_cast<std::uint64_t>(exponent + kBias - 1) << kMantissaBits) + units;
    // Bitwise, not short-circuit: the outcome is data-dependent (a coin flip on random data), and a
    // mispredicted branch cost more than the whole conversion (perf, CPU softmax with f16 output).
    const bool round_up = (rest > half_unit) | ((rest == half_unit) & ((units & 1) != 0));
    pattern += round_up ? 1 : 0;
    return static_cast<std::uint16_t>(sign | pattern);
}

}  // namespace

std::uint16_t double_to_half_bits(double value) { return round_double_to_bits<10, 15>(value, 0x7e00); }

std::uint16_t double_to_bf16_bits(double value) { return round_double_to_bits<7, 127>(value, 0x7fc0); }

}  // namespace smx
