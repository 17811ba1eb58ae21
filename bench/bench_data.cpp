// bench_data.cpp - dtype conversions and the parallel random fill used by smx-bench.
#include "bench_data.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <thread>
#include <vector>

namespace smx_bench {
namespace {

std::uint32_t float_bits(float value) {
    std::uint32_t bits;
    std::memcpy(&bits, &value, sizeof bits);
    return bits;
}

float float_from_bits(std::uint32_t bits) {
    float value;
    std::memcpy(&value, &bits, sizeof value);
    return value;
}

float bf16_to_float(std::uint16_t bits) { return float_from_bits(static_cast<std::uint32_t>(bits) << 16); }

std::uint16_t float_to_bf16(float value) {
    const std::uint32_t bits = float_bits(value);
    if (std::isnan(value)) return static_cast<std::uint16_t>((bits >> 16) | 0x0040u);  // keep it a quiet NaN
    const std::uint32_t rounding = 0x7FFFu + ((bits >> 16) & 1u);                       // ties to even
    return static_cast<std::uint16_t>((bits + rounding) >> 16);
}

float f16_to_float(std::uint16_t bits) {
    const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
    const int exponent = (bits >> 10) & 0x1F;
    const std::uint32_t mantissa = bits & 0x3FFu;
    if (exponent == 0x1F) return float_from_bits(sign | 0x7F800000u | (mantissa << 13));
    if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24, exact in float
        const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
        return sign ? -magnitude : magnitude;
    }
    return float_from_bits(sign | (static_cast<std::uint32_t>(exponent - 15 + 127) << 23) | (mantissa << 13));
}

// Rounds a double to binary16, ties to even, with subnormals, overflow to infinity and NaN kept.
std::uint16_t double_to_f16(double value) {
    const std::uint16_t sign = std::signbit(value) ? 0x8000u : 0u;
    const double magnitude = std::fabs(value);
    if (std::isnan(value)) return static_cast<std::uint16_t>(sign | 0x7E00u);
    if (magnitude >= 65520.0) return static_cast<std::uint16_t>(sign | 0x7C00u);  // rounds past the largest
    if (magnitude < std::ldexp(1.0, -14)) {                                        // subnormal range: step 2^-24
        const double steps = std::nearbyint(magnitude * std::ldexp(1.0, 24));        // default mode: ties to even
        return static_cast<std::uint16_t>(sign | static_cast<std::uint16_t>(steps));
    }
    int exponent;
    const double fraction = std::frexp(magnitude, &exponent);  // magnitude = fraction * 2^exponent, fraction in [0.5, 1)
    double significand = std::nearbyint(fraction * 2048.0);    // 11 significant bits
    if (significand == 2048.0) {                                // rounding carried into the next binade
        significand = 1024.0;
        ++exponent;
    }
    const int biased = exponent - 1 + 15;
    return static_cast<std::uint16_t>(sign | (biased << 10) | (static_cast<int>(significand) - 1024));
}

// splitmix64: a stateless mix, so any element's random bits come straight from its index.
std::uint64_t mix64(std::uint64_t z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// A cheap approximately normal draw (Irwin-Hall sum of four 16-bit uniforms), standard deviation 3.
double pseudo_normal(std::uint64_t bits) {
    double sum = 0.0;
    for (int part = 0; part < 4; ++part) sum += (static_cast<double>((bits >> (16 * part)) & 0xFFFFu) + 0.5) / 65536.0;
    const double standard = (sum - 2.0) * std::sqrt(3.0);  // four U(0,1) have variance 1/3
    return 3.0 * standard;
}

void fill_range(void* data, smxDataType_t dtype, std::int64_t begin, std::int64_t end, std::uint64_t seed,
                std::int64_t first_index) {
    const std::uint64_t stream = mix64(seed);
    for (std::int64_t i = begin; i < end; ++i) {
        double value = pseudo_normal(mix64(stream ^ static_cast<std::uint64_t>(first_index + i)));
        store_from_double(data, dtype, i, value);
        if (load_as_double(data, dtype, i) == 0.0) store_from_double(data, dtype, i, 0.5);  // never a zero
    }
}

}  // namespace

std::size_t dtype_size(smxDataType_t dtype) {
    switch (dtype) {
        case SMX_DTYPE_F16:
        case SMX_DTYPE_BF16: return 2;
        case SMX_DTYPE_F32:
        case SMX_DTYPE_I32: return 4;
        case SMX_DTYPE_F64:
        case SMX_DTYPE_I64: return 8;
        case SMX_DTYPE_BOOL: return 1;
    }
    return 0;
}

const char* dtype_name(smxDataType_t dtype) {
    switch (dtype) {
        case SMX_DTYPE_F16: return "f16";
        case SMX_DTYPE_BF16: return "bf16";
        case SMX_DTYPE_F32: return "f32";
        case SMX_DTYPE_F64: return "f64";
        case SMX_DTYPE_I32: return "i32";
        case SMX_DTYPE_I64: return "i64";
        case SMX_DTYPE_BOOL: return "bool";
    }
    return "?";
}

bool parse_dtype(const std::string& name, smxDataType_t* dtype) {
    for (smxDataType_t candidate : {SMX_DTYPE_F16, SMX_DTYPE_BF16, SMX_DTYPE_F32, SMX_DTYPE_F64}) {
        if (name == dtype_name(candidate)) {
            *dtype = candidate;
            return true;
        }
    }
    return false;
}

double load_as_double(const void* data, smxDataType_t dtype, std::int64_t index) {
    switch (dtype) {
        case SMX_DTYPE_F16: return f16_to_float(static_cast<const std::uint16_t*>(data)[index]);
        case SMX_DTYPE_BF16: return bf16_to_float(static_cast<const std::uint16_t*>(data)[index]);
        case SMX_DTYPE_F32: return static_cast<const float*>(data)[index];
        case SMX_DTYPE_F64: return static_cast<const double*>(data)[index];
        case SMX_DTYPE_I32: return static_cast<const std::int32_t*>(data)[index];
        case SMX_DTYPE_I64: return static_cast<double>(static_cast<const std::int64_t*>(data)[index]);
        case SMX_DTYPE_BOOL: break;  // masks: smx-bench times no options
    }
    return std::numeric_limits<double>::quiet_NaN();
}

void store_from_double(void* data, smxDataType_t dtype, std::int64_t index, double value) {
    switch (dtype) {
        case SMX_DTYPE_F16: static_cast<std::uint16_t*>(data)[index] = double_to_f16(value); break;
        // double -> float -> bf16 may round twice: harmless, only inputs are stored and checks read them back
        case SMX_DTYPE_BF16: static_cast<std::uint16_t*>(data)[index] = float_to_bf16(static_cast<float>(value)); break;
        case SMX_DTYPE_F32: static_cast<float*>(data)[index] = static_cast<float>(value); break;
        case SMX_DTYPE_F64: static_cast<double*>(data)[index] = value; break;
        case SMX_DTYPE_I32: static_cast<std::int32_t*>(data)[index] = static_cast<std::int32_t>(value); break;
        case SMX_DTYPE_I64: static_cast<std::int64_t*>(data)[index] = static_cast<std::int64_t>(value); break;
        case SMX_DTYPE_BOOL: break;  // masks: smx-bench times no options
    }
}

double underflow_slack(smxDataType_t dtype) {
    switch (dtype) {
        case SMX_DTYPE_F16: return std::ldexp(1.0, -24);
        case SMX_DTYPE_BF16:
        case SMX_DTYPE_F32: return static_cast<double>(std::numeric_limits<float>::min());
        case SMX_DTYPE_F64: return std::numeric_limits<double>::min();
        case SMX_DTYPE_I32:
        case SMX_DTYPE_I64: return 0.0;  // integers do not underflow
        case SMX_DTYPE_BOOL: break;  // masks: smx-bench times no options
    }
    return 0.0;
}

void fill_random(void* data, smxDataType_t dtype, std::int64_t count, std::uint64_t seed, std::int64_t first_index) {
    constexpr std::int64_t min_per_thread = 1 << 20;  // below this, starting a thread costs more than it saves
    const unsigned hardware = std::max(1u, std::thread::hardware_concurrency());
    const std::int64_t threads = std::clamp<std::int64_t>(count / min_per_thread, 1, hardware);
    const std::int64_t per_thread = (count + threads - 1) / threads;
    std::vector<std::thread> workers;
    for (std::int64_t t = 1; t < threads; ++t) {
        const std::int64_t begin = t * per_thread;
        const std::int64_t end = std::min(count, begin + per_thread);
        if (begin < end) workers.emplace_back(fill_range, data, dtype, begin, end, seed, first_index);
    }
    fill_range(data, dtype, 0, std::min(count, per_thread), seed, first_index);
    for (std::thread& worker : workers) worker.join();
}

}  // namespace smx_bench
