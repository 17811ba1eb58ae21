#include "common/dtype.hpp"

#include <cmath>

namespace smx {

namespace {

// Rounds |value| (finite, non-negative) to an integer number of units of 2^`unit_exp`, ties to even.
double round_to_unit(double magnitude, int unit_exp) {
    const double scaled = std::ldexp(magnitude, -unit_exp);  // exact: a power-of-two scale
    return std::nearbyint(scaled);                           // default rounding mode: ties to even
}

}  // namespace

std::uint16_t double_to_half_bits(double value) {
    const std::uint16_t sign = std::signbit(value) ? 0x8000 : 0;
    if (std::isnan(value)) return 0x7e00;
    const double magnitude = std::fabs(value);
    if (std::isinf(magnitude)) return sign | 0x7c00;
    if (magnitude == 0.0) return sign;
    int exponent;
    std::frexp(magnitude, &exponent);  // magnitude = m * 2^exponent, m in [0.5, 1)
    // binary16 normals have 11 significant bits; below 2^-14 the unit is fixed at 2^-24 (subnormals).
    const int unit_exp = exponent - 1 >= -14 ? exponent - 11 : -24;
    const double units = round_to_unit(magnitude, unit_exp);
    const double rounded = std::ldexp(units, unit_exp);
    if (rounded >= 65536.0) return sign | 0x7c00;  // 65520 and up round to inf
    if (rounded < 0x1p-14) return sign | static_cast<std::uint16_t>(units);  // subnormal (or zero)
    int r_exp;
    const double r_m = std::frexp(rounded, &r_exp);  // rounding may have carried into the next binade
    const auto mantissa = static_cast<std::uint16_t>(std::ldexp(r_m, 11)) & 0x3ff;
    return sign | static_cast<std::uint16_t>((r_exp - 1 + 15) << 10) | mantissa;
}

std::uint16_t double_to_bf16_bits(double value) {
    const std::uint16_t sign = std::signbit(value) ? 0x8000 : 0;
    if (std::isnan(value)) return 0x7fc0;
    const double magnitude = std::fabs(value);
    if (std::isinf(magnitude)) return sign | 0x7f80;
    if (magnitude == 0.0) return sign;
    int exponent;
    std::frexp(magnitude, &exponent);
    // bfloat16 normals have 8 significant bits, the smallest normal is 2^-126, subnormal unit 2^-133.
    const int unit_exp = exponent - 1 >= -126 ? exponent - 8 : -133;
    const double units = round_to_unit(magnitude, unit_exp);
    const double rounded = std::ldexp(units, unit_exp);
    if (rounded >= 0x1p128) return sign | 0x7f80;
    if (rounded < 0x1p-126) return sign | static_cast<std::uint16_t>(units);
    int r_exp;
    const double r_m = std::frexp(rounded, &r_exp);
    const auto mantissa = static_cast<std::uint16_t>(std::ldexp(r_m, 8)) & 0x7f;
    return sign | static_cast<std::uint16_t>((r_exp - 1 + 127) << 7) | mantissa;
}

}  // namespace smx
