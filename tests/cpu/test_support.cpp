// The tests' own support code: every other test trusts fill_random, reference_softmax and
// compare_to_reference, which split their work over the host's cores, so their index arithmetic is checked
// here against plain loops, on tensors large enough to be split (more than 65536 elements).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>

#include "support/reference.hpp"

using namespace smx_test;

namespace {

// A 3-d tensor with a negative stride, padding between rows and one spare element in front: (5, 300, 61)
// with strides chosen by hand, so element offsets are not a simple function of the logical index.
HostTensor awkward_tensor(smxDataType_t dtype) {
    const std::int64_t inner = 61, axis = 300;
    return make_tensor(dtype, {5, axis, inner}, {(axis * (inner + 3)) + 7, -(inner + 3), 1}, 1);
}

// The logical element i of a shape (row-major) as a multi-index.
std::vector<std::int64_t> index_of(const std::vector<std::int64_t>& shape, std::int64_t i) {
    std::vector<std::int64_t> index(shape.size());
    for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
        index[d] = i % shape[d];
        i /= shape[d];
    }
    return index;
}

}  // namespace

TEST_CASE("support: fill_random reaches every logical element, no padding byte, and replays from its seed",
          "[cpu][support]") {
    HostTensor first = awkward_tensor(SMX_DTYPE_F32);
    HostTensor second = awkward_tensor(SMX_DTYPE_F32);
    std::mt19937_64 rng_a(12345), rng_b(12345);
    fill_random(first, rng_a);
    fill_random(second, rng_b);
    CHECK(first.storage == second.storage);  // same seed and shape: the same bytes

    // Every logical element is written (non-zero), every other element of the storage left at zero.
    std::vector<bool> logical(first.storage.size() / sizeof(float), false);
    std::int64_t logical_zero = 0;
    for (std::int64_t i = 0; i < first.numel(); ++i) {
        const std::int64_t offset = first.offset_of(index_of(first.shape, i));
        logical[static_cast<std::size_t>(first.offset + offset)] = true;
        if (first.get(offset) == 0.0) ++logical_zero;
    }
    CHECK(logical_zero == 0);
    std::int64_t untouched_nonzero = 0;
    for (std::size_t e = 0; e < logical.size(); ++e) {
        float value;
        std::memcpy(&value, first.storage.data() + e * sizeof(float), sizeof value);
        if (!logical[e] && value != 0.0f) ++untouched_nonzero;
    }
    CHECK(untouched_nonzero == 0);

    fill_random(second, rng_b);  // the generator moved on: new values
    CHECK(first.storage != second.storage);
}

TEST_CASE("support: reference_softmax matches plain loops on every axis of a strided tensor", "[cpu][support]") {
    HostTensor x = awkward_tensor(SMX_DTYPE_BF16);
    fill_random(x, test_rng());
    x.set(x.offset_of({2, 17, 40}), std::numeric_limits<double>::quiet_NaN());  // one NaN: NaN along each axis through it
    for (int axis = 0; axis < 3; ++axis) {
        for (bool log_mode : {false, true}) {
            const std::vector<double> ref = reference_softmax(x, axis, log_mode);
            REQUIRE(static_cast<std::int64_t>(ref.size()) == x.numel());
            std::int64_t mismatches = 0;
            for (std::int64_t i = 0; i < x.numel(); ++i) {
                std::vector<std::int64_t> index = index_of(x.shape, i);
                const double v = x.get(x.offset_of(index));
                double max = -std::numeric_limits<double>::infinity(), sum = 0.0;
                bool nan = false;
                for (std::int64_t j = 0; j < x.shape[axis]; ++j) {
                    index[axis] = j;
                    const double u = x.get(x.offset_of(index));
                    nan = nan || std::isnan(u);
                    if (!std::isnan(u)) max = std::max(max, u);
                }
                for (std::int64_t j = 0; j < x.shape[axis]; ++j) {
                    index[axis] = j;
                    sum += std::exp(x.get(x.offset_of(index)) - max);
                }
                const double want = nan ? std::numeric_limits<double>::quiet_NaN()
                                        : log_mode ? (v - max) - std::log(sum) : std::exp(v - max) / sum;
                const double got = ref[static_cast<std::size_t>(i)];
                // The same operations in the same order: bitwise equal, NaN where the plain loop has NaN.
                if (!(std::isnan(want) ? std::isnan(got) : got == want)) ++mismatches;
            }
            INFO("axis " << axis << (log_mode ? " log-softmax" : " softmax"));
            CHECK(mismatches == 0);
        }
    }
}

TEST_CASE("support: compare_to_reference counts every failure and names the first of the worst", "[cpu][support]") {
    HostTensor y = awkward_tensor(SMX_DTYPE_F32);
    fill_random(y, test_rng());
    // Three wrong elements, far apart (in different ranges of the split): two equally wrong (the same value
    // and the same error, so their error/allowed ratios are bitwise equal), and a smaller error before both.
    const std::int64_t small_error_at = 1000, worst_at = 40000, equal_worst_at = 90000;
    y.set(y.offset_of(index_of(y.shape, worst_at)), 1.5);
    y.set(y.offset_of(index_of(y.shape, equal_worst_at)), 1.5);
    std::vector<double> ref(static_cast<std::size_t>(y.numel()));
    for (std::int64_t i = 0; i < y.numel(); ++i) ref[static_cast<std::size_t>(i)] = y.get(y.offset_of(index_of(y.shape, i)));
    REQUIRE(compare_to_reference(y, ref, false) == "");

    auto scale = [&](std::int64_t i, double factor) {
        ref[static_cast<std::size_t>(i)] = y.get(y.offset_of(index_of(y.shape, i))) * factor;
    };
    scale(small_error_at, 1.001);
    scale(worst_at, 2.0);
    scale(equal_worst_at, 2.0);
    const std::string report = compare_to_reference(y, ref, false);
    INFO(report);
    CHECK(report.rfind("3 of " + std::to_string(y.numel()) + " elements out of tolerance", 0) == 0);
    CHECK(report.find("worst at logical index " + std::to_string(worst_at) + ":") != std::string::npos);

    // An output whose element count differs from the reference's is reported, not read past its end.
    ref.pop_back();
    CHECK(compare_to_reference(y, ref, false).find("elements, the reference") != std::string::npos);
}
