// The CUDA options' row-to-query division by a multiply (cuda/common/options.hpp: FastDivisor), checked on the
// host against the division it replaces: every divisor up to 4096 and powers of two, 2^k +- 1 and random ones
// up to 2^31 - 1, each at the numerators around its multiples, the ends of the range and random ones below 2^31.
// Plain C++, so it runs in every build; the kernels run the same constexpr functions.
#include <catch2/catch.hpp>

#include <cstdint>
#include <random>
#include <vector>

#include "cuda/common/options.hpp"
#include "support/reference.hpp"

namespace {

constexpr std::uint32_t kNumeratorEnd = std::uint32_t{1} << 31;  // numerators are row indices below 2^31

// The first numerator whose quotient differs from n / d, or kNumeratorEnd where all of `numerators` match.
std::uint32_t first_wrong_quotient(std::uint32_t divisor, const std::vector<std::uint32_t>& numerators) {
    const smx::cuda::FastDivisor fast = smx::cuda::make_fast_divisor(divisor);
    for (const std::uint32_t n : numerators) {
        if (smx::cuda::fast_quotient(n, fast) != n / divisor) return n;
    }
    return kNumeratorEnd;
}

// Numerators that test a divisor hardest: either side of its first and last multiples below 2^31, the ends of
// the range, and random ones.
std::vector<std::uint32_t> numerators_for(std::uint32_t divisor, std::mt19937_64& rng) {
    std::vector<std::uint32_t> numerators = {0, 1, kNumeratorEnd - 1, kNumeratorEnd - 2};
    const std::uint32_t last_multiple = (kNumeratorEnd - 1) / divisor * divisor;
    for (std::uint32_t k = 1; k <= 4; ++k) {
        for (const std::uint64_t multiple : {std::uint64_t{k} * divisor, std::uint64_t{last_multiple} - (k - 1) * divisor}) {
            for (const std::int64_t delta : {-1, 0, 1}) {
                const std::int64_t n = static_cast<std::int64_t>(multiple) + delta;
                if (n >= 0 && n < kNumeratorEnd) numerators.push_back(static_cast<std::uint32_t>(n));
            }
        }
    }
    std::uniform_int_distribution<std::uint32_t> any(0, kNumeratorEnd - 1);
    for (int i = 0; i < 64; ++i) numerators.push_back(any(rng));
    return numerators;
}

}  // namespace

TEST_CASE("fast divisor: quotients of row indices below 2^31 match the division", "[cpu][options]") {
    std::mt19937_64& rng = smx_test::test_rng();
    std::vector<std::uint32_t> divisors;
    for (std::uint32_t d = 1; d <= 4096; ++d) divisors.push_back(d);
    for (int k = 12; k <= 31; ++k) {
        const std::uint32_t power = std::uint32_t{1} << k;
        divisors.push_back(power - 1);
        if (k < 31) divisors.push_back(power);
        if (k < 31) divisors.push_back(power + 1);
    }
    std::uniform_int_distribution<std::uint32_t> any_divisor(1, kNumeratorEnd - 1);
    for (int i = 0; i < 256; ++i) divisors.push_back(any_divisor(rng));
    for (const std::uint32_t divisor : divisors) {
        INFO("divisor " << divisor);
        CHECK(first_wrong_quotient(divisor, numerators_for(divisor, rng)) == kNumeratorEnd);
    }
}
