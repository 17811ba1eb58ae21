// Unit tests of the host conversions in src/core/dtype.cpp (linked into the tests directly): exhaustive
// round trips of both 16-bit formats, ties to even at every midpoint, overflow, subnormals, NaN, and
// cross-checks of double -> f16 / bf16 against a plain frexp / nearbyint rounding, of double -> f16
// against GCC's _Float16 and of float -> bf16 against integer rounding.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>

#include "core/dtype.hpp"
#include "support/reference.hpp"

using smx::bf16_bits_to_double;
using smx::double_to_bf16_bits;
using smx::double_to_half_bits;
using smx::half_bits_to_double;

namespace {

bool is_half_nan(std::uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x03ff) != 0; }
bool is_bf16_nan(std::uint16_t b) { return (b & 0x7f80) == 0x7f80 && (b & 0x007f) != 0; }

// The format-specific pieces the midpoint tests need.
struct Format {
    const char* name;
    std::uint16_t largest_finite;  // positive bit pattern
    std::uint16_t infinity;
    double overflow_threshold;     // the midpoint between the largest finite and the next power of two
    double (*to_double)(std::uint16_t);
    std::uint16_t (*from_double)(double);
};

const Format kHalf{"f16", 0x7bff, 0x7c00, 65520.0, half_bits_to_double, double_to_half_bits};
const Format kBf16{"bf16", 0x7f7f, 0x7f80, 0x1.ffp127, bf16_bits_to_double, double_to_bf16_bits};

// Every exactly representable value converts back to its own bits; NaNs stay NaN.
void check_round_trip(const Format& format, bool (*is_nan)(std::uint16_t)) {
    int mismatches = 0;
    for (std::uint32_t bits = 0; bits <= 0xffff; ++bits) {
        const auto pattern = static_cast<std::uint16_t>(bits);
        const double value = format.to_double(pattern);
        const std::uint16_t back = format.from_double(value);
        const bool ok = is_nan(pattern) ? std::isnan(value) && is_nan(back) : back == pattern;
        if (!ok && ++mismatches <= 5) FAIL_CHECK(format.name << " pattern " << bits << " came back as " << back);
    }
    CHECK(mismatches == 0);
}

// Between each pair of neighbours (a, b) the exact midpoint goes to the one with an even last bit, and the
// doubles either side of it go to the nearer neighbour; the same for negatives.
void check_midpoints(const Format& format) {
    int mismatches = 0;
    auto expect = [&](double input, std::uint16_t want) {
        const std::uint16_t got = format.from_double(input);
        if (got != want && ++mismatches <= 5) {
            FAIL_CHECK(format.name << " " << input << " gave " << got << ", expected " << want);
        }
    };
    for (std::uint16_t low = 0; low < format.largest_finite; ++low) {
        const std::uint16_t high = low + 1;
        const double mid = (format.to_double(low) + format.to_double(high)) / 2;  // exact in double
        const std::uint16_t even = (low & 1) == 0 ? low : high;
        for (double sign : {1.0, -1.0}) {
            const std::uint16_t sign_bit = sign < 0 ? 0x8000 : 0;
            expect(sign * mid, even | sign_bit);
            expect(sign * std::nextafter(mid, 0.0), low | sign_bit);
            expect(sign * std::nextafter(mid, 1e300), high | sign_bit);
        }
    }
    // Above the largest finite value the "next" value is infinity, whose pattern is even.
    expect(format.overflow_threshold, format.infinity);
    expect(std::nextafter(format.overflow_threshold, 0.0), format.largest_finite);
    expect(-format.overflow_threshold, format.infinity | 0x8000);
    CHECK(mismatches == 0);
}

}  // namespace

TEST_CASE("f16: all 65536 bit patterns survive double and back; NaN stays NaN", "[dtype]") {
    check_round_trip(kHalf, is_half_nan);
}

TEST_CASE("bf16: all 65536 bit patterns survive double and back; NaN stays NaN", "[dtype]") {
    check_round_trip(kBf16, is_bf16_nan);
}

TEST_CASE("f16: every midpoint rounds to even, its neighbours to the nearer value", "[dtype]") {
    check_midpoints(kHalf);
}

TEST_CASE("bf16: every midpoint rounds to even, its neighbours to the nearer value", "[dtype]") {
    check_midpoints(kBf16);
}

TEST_CASE("f16 and bf16 decode known patterns to their documented values", "[dtype]") {
    CHECK(half_bits_to_double(0x3c00) == 1.0);
    CHECK(half_bits_to_double(0xc000) == -2.0);
    CHECK(half_bits_to_double(0x7bff) == 65504.0);
    CHECK(half_bits_to_double(0x0400) == 0x1p-14);  // smallest normal
    CHECK(half_bits_to_double(0x0001) == 0x1p-24);  // smallest subnormal
    CHECK(half_bits_to_double(0x7c00) == std::numeric_limits<double>::infinity());
    CHECK(std::signbit(half_bits_to_double(0x8000)));
    CHECK(bf16_bits_to_double(0x3f80) == 1.0);
    CHECK(bf16_bits_to_double(0x7f7f) == 0x1.fep127);
    CHECK(bf16_bits_to_double(0x0001) == 0x1p-133);
}

TEST_CASE("values beyond the range become infinities of the right sign", "[dtype]") {
    for (double big : {65536.0, 1e5, 1e300, std::numeric_limits<double>::max()}) {
        CHECK(double_to_half_bits(big) == 0x7c00);
        CHECK(double_to_half_bits(-big) == 0xfc00);
    }
    for (double big : {0x1p128, 1e39, 1e300}) {
        CHECK(double_to_bf16_bits(big) == 0x7f80);
        CHECK(double_to_bf16_bits(-big) == 0xff80);
    }
    CHECK(double_to_half_bits(65519.0) == 0x7bff);
    CHECK(double_to_half_bits(std::numeric_limits<double>::infinity()) == 0x7c00);
    CHECK(double_to_bf16_bits(-std::numeric_limits<double>::infinity()) == 0xff80);
}

TEST_CASE("subnormal results round on the fixed subnormal grid, and tiny values to signed zero", "[dtype]") {
    CHECK(double_to_half_bits(0x1p-24) == 0x0001);
    CHECK(double_to_half_bits(0x1p-25) == 0x0000);                   // tie between 0 and 1 unit: even is 0
    CHECK(double_to_half_bits(0x1.000001p-25) == 0x0001);
    CHECK(double_to_half_bits(0x3p-25) == 0x0002);                   // tie between 1 and 2 units: even is 2
    CHECK(double_to_half_bits(0x3ffp-24) == 0x03ff);                 // largest subnormal
    CHECK(double_to_half_bits(0x7ffp-25) == 0x0400);                 // rounds up into the smallest normal
    CHECK(double_to_half_bits(1e-300) == 0x0000);
    CHECK(double_to_half_bits(-1e-300) == 0x8000);
    CHECK(double_to_half_bits(std::numeric_limits<double>::denorm_min()) == 0x0000);
    CHECK(double_to_bf16_bits(0x1p-133) == 0x0001);
    CHECK(double_to_bf16_bits(0x1p-134) == 0x0000);
    CHECK(double_to_bf16_bits(-0x1.8p-133) == 0x8002);
    CHECK(double_to_bf16_bits(-1e-300) == 0x8000);
    CHECK(double_to_half_bits(-0.0) == 0x8000);
    CHECK(double_to_bf16_bits(-0.0) == 0x8000);
}

TEST_CASE("NaN inputs of either sign and any payload give NaN", "[dtype]") {
    std::uint64_t payload_bits = 0x7ff0000000000001ull;  // a signalling NaN with payload 1
    double signalling;
    std::memcpy(&signalling, &payload_bits, sizeof signalling);
    for (double nan : {std::numeric_limits<double>::quiet_NaN(), -std::numeric_limits<double>::quiet_NaN(), signalling}) {
        CHECK(is_half_nan(double_to_half_bits(nan)));
        CHECK(is_bf16_nan(double_to_bf16_bits(nan)));
    }
}

namespace {

// The conversions written the plain way, as an independent oracle for the integer version in dtype.cpp:
// scale the magnitude by a power of two so the target's unit (2^(e - m) for normals, the fixed subnormal
// unit below them) becomes 1, round with nearbyint (ties to even), then rebuild the bit pattern.
std::uint16_t plain_round(double value, int mantissa_bits, int min_normal_exponent, int subnormal_unit_exponent,
                          double overflow_at, std::uint16_t infinity, std::uint16_t nan_bits, int bias) {
    const std::uint16_t sign = std::signbit(value) ? 0x8000 : 0;
    if (std::isnan(value)) return nan_bits;
    const double magnitude = std::fabs(value);
    if (std::isinf(magnitude)) return sign | infinity;
    if (magnitude == 0.0) return sign;
    int exponent;
    std::frexp(magnitude, &exponent);  // magnitude = f x 2^exponent, f in [0.5, 1)
    const int unit_exponent =
        exponent - 1 >= min_normal_exponent ? exponent - 1 - mantissa_bits : subnormal_unit_exponent;
    const double units = std::nearbyint(std::ldexp(magnitude, -unit_exponent));
    const double rounded = std::ldexp(units, unit_exponent);
    if (rounded >= overflow_at) return sign | infinity;
    if (rounded < std::ldexp(1.0, min_normal_exponent)) return sign | static_cast<std::uint16_t>(units);
    int rounded_exponent;
    const double fraction = std::frexp(rounded, &rounded_exponent);  // rounding may carry into the next binade
    const auto mantissa = static_cast<std::uint16_t>(std::ldexp(fraction, mantissa_bits + 1)) &
                          static_cast<std::uint16_t>((1u << mantissa_bits) - 1);
    return sign | static_cast<std::uint16_t>((rounded_exponent - 1 + bias) << mantissa_bits) | mantissa;
}

std::uint16_t plain_half(double value) { return plain_round(value, 10, -14, -24, 65536.0, 0x7c00, 0x7e00, 15); }
std::uint16_t plain_bf16(double value) { return plain_round(value, 7, -126, -133, 0x1p128, 0x7f80, 0x7fc0, 127); }

// A random double: random sign and 52-bit mantissa, binary exponent uniform in [low, high] (double
// subnormals when below -1022, infinities past 1023).
double random_double(std::mt19937_64& rng, int low, int high) {
    const int exponent = std::uniform_int_distribution<int>(low, high)(rng);
    const std::uint64_t mantissa = rng() & ((std::uint64_t{1} << 52) - 1);
    double value = std::ldexp(1.0 + std::ldexp(static_cast<double>(mantissa), -52), exponent);
    if (exponent < -1022) value = std::ldexp(static_cast<double>(mantissa), -1074);  // a double subnormal
    return (rng() & 1) ? -value : value;
}

}  // namespace

TEST_CASE("double -> f16 / bf16 agree with the plain frexp / nearbyint rounding on random doubles", "[dtype]") {
    std::mt19937_64& rng = smx_test::test_rng();
    struct Range {
        int low, high;
    };
    int mismatches = 0;
    // Each format's subnormals, normals and overflow densely, then the whole double range.
    for (const Range range : {Range{-30, 17}, Range{-140, 130}, Range{-1080, 1024}}) {
        for (int i = 0; i < 300000; ++i) {
            const double value = random_double(rng, range.low, range.high);
            const std::uint16_t half = double_to_half_bits(value), half_plain = plain_half(value);
            const std::uint16_t bf16 = double_to_bf16_bits(value), bf16_plain = plain_bf16(value);
            if ((half != half_plain || bf16 != bf16_plain) && ++mismatches <= 5) {
                FAIL_CHECK("double " << value << ": f16 " << half << " vs plain " << half_plain << ", bf16 " << bf16
                                     << " vs plain " << bf16_plain);
            }
        }
    }
    CHECK(mismatches == 0);
}

#if defined(__FLT16_MAX__)
TEST_CASE("double -> f16 agrees with GCC's _Float16 conversion on a million random doubles", "[dtype]") {
    // Random sign, binary exponent from deep subnormal to past overflow, random 52-bit mantissa.
    std::mt19937_64& rng = smx_test::test_rng();
    std::uniform_int_distribution<int> exponent(-30, 17);
    std::uniform_int_distribution<std::uint64_t> mantissa(0, (std::uint64_t{1} << 52) - 1);
    int mismatches = 0;
    for (int i = 0; i < 1000000; ++i) {
        const double value = std::ldexp(1.0 + std::ldexp(static_cast<double>(mantissa(rng)), -52), exponent(rng)) *
                             ((rng() & 1) ? -1.0 : 1.0);
        const _Float16 gcc = static_cast<_Float16>(value);
        std::uint16_t gcc_bits;
        std::memcpy(&gcc_bits, &gcc, sizeof gcc_bits);
        const std::uint16_t ours = double_to_half_bits(value);
        if (ours != gcc_bits && ++mismatches <= 5) {
            FAIL_CHECK("double " << value << ": smx " << ours << ", _Float16 " << gcc_bits);
        }
    }
    CHECK(mismatches == 0);
}
#endif

TEST_CASE("float -> bf16 agrees with integer round-to-nearest-even on a million random floats", "[dtype]") {
    // Every float is exact in double, so smx's one rounding must equal the classic rounding of the float bits.
    std::mt19937_64& rng = smx_test::test_rng();
    int mismatches = 0;
    for (int i = 0; i < 1000000; ++i) {
        const auto bits = static_cast<std::uint32_t>(rng());
        float value;
        std::memcpy(&value, &bits, sizeof value);
        if (std::isnan(value)) continue;
        const auto expected = static_cast<std::uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
        const std::uint16_t ours = double_to_bf16_bits(static_cast<double>(value));
        if (ours != expected && ++mismatches <= 5) {
            FAIL_CHECK("float bits " << bits << ": smx " << ours << ", expected " << expected);
        }
    }
    CHECK(mismatches == 0);
}
