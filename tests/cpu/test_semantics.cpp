// The documented semantics on the CPU backend, checked directly (not only against the reference):
// special values, size-1 axes, shift invariance, normalization, log/plain consistency, huge magnitudes.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "support/reference.hpp"

using namespace smx_test;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();

const smxDataType_t kAllDtypes[] = {SMX_DTYPE_F32, SMX_DTYPE_F64, SMX_DTYPE_F16, SMX_DTYPE_BF16};

// "f16->f32": names a dtype pair in test output.
std::string pair_name(smxDataType_t x, smxDataType_t y) { return std::string(dtype_name(x)) + "->" + dtype_name(y); }

// Element [row, j] of a row-major 2-d tensor.
double at(const HostTensor& t, std::int64_t row, std::int64_t j) { return t.get(row * t.strides[0] + j * t.strides[1]); }
void put(HostTensor& t, std::int64_t row, std::int64_t j, double v) { t.set(row * t.strides[0] + j * t.strides[1], v); }

// The smallest positive normal of a dtype: below it an output may flush towards 0.
double smallest_normal(smxDataType_t dtype) {
    switch (dtype) {
        case SMX_DTYPE_F16: return 0x1p-14;
        case SMX_DTYPE_BF16:
        case SMX_DTYPE_F32: return 0x1p-126;
        case SMX_DTYPE_F64: return std::numeric_limits<double>::min();
    }
    return 0.0;
}

// The reference rounded to the output dtype, for results whose exact value lies beyond the dtype's range.
std::vector<double> rounded_to(smxDataType_t dtype, const std::vector<double>& values) {
    HostTensor holder = make_tensor(dtype, {static_cast<std::int64_t>(values.size())});
    std::vector<double> rounded;
    for (std::size_t i = 0; i < values.size(); ++i) {
        holder.set(static_cast<std::int64_t>(i), values[i]);
        rounded.push_back(holder.get(static_cast<std::int64_t>(i)));
    }
    return rounded;
}

}  // namespace

TEST_CASE("special values: +inf or NaN poisons only its own row; all -inf gives NaN; -inf alone gives 0",
          "[cpu][semantics]") {
    constexpr std::int64_t kRows = 7, kLen = 9;
    enum Row { kPlusInf, kNaNRow, kAllMinusInf, kOneMinusInf, kFinite, kBothInfs, kManyMinusInf };
    for (smxDataType_t dtype : kAllDtypes) {
        for (bool log_mode : {false, true}) {
            INFO(pair_name(dtype, dtype) << (log_mode ? " log_softmax" : " softmax"));
            HostTensor x = make_tensor(dtype, {kRows, kLen});
            HostTensor y = make_tensor(dtype, {kRows, kLen});
            fill_random(x, test_rng());
            put(x, kPlusInf, 4, kInf);
            put(x, kNaNRow, 0, kNaN);
            for (std::int64_t j = 0; j < kLen; ++j) put(x, kAllMinusInf, j, -kInf);
            put(x, kOneMinusInf, 2, -kInf);
            put(x, kBothInfs, 1, kInf);
            put(x, kBothInfs, 7, -kInf);
            for (std::int64_t j = 0; j < kLen - 1; ++j) put(x, kManyMinusInf, j, -kInf);  // one finite survivor
            poison(y);
            REQUIRE(run_cpu(y, x, 1, log_mode) == SMX_STATUS_SUCCESS);

            for (Row nan_row : {kPlusInf, kNaNRow, kAllMinusInf, kBothInfs}) {
                for (std::int64_t j = 0; j < kLen; ++j) CHECK(std::isnan(at(y, nan_row, j)));
            }
            CHECK(at(y, kOneMinusInf, 2) == (log_mode ? -kInf : 0.0));
            for (std::int64_t j = 0; j < kLen - 1; ++j) CHECK(at(y, kManyMinusInf, j) == (log_mode ? -kInf : 0.0));
            CHECK(at(y, kManyMinusInf, kLen - 1) == (log_mode ? 0.0 : 1.0));
            for (std::int64_t j = 0; j < kLen; ++j) {
                if (j != 2) CHECK(std::isfinite(at(y, kOneMinusInf, j)));
                CHECK(std::isfinite(at(y, kFinite, j)));
            }
            CHECK(compare_to_reference(y, reference_softmax(x, 1, log_mode), log_mode) == "");
        }
    }
}

TEST_CASE("an axis of size 1 gives exactly 1 (log-softmax: 0) whatever the finite input", "[cpu][semantics]") {
    const std::vector<std::vector<std::int64_t>> shapes = {{5, 1}, {1}, {4, 1, 3}};
    const int axes[] = {1, 0, 1};
    for (smxDataType_t dtype : kAllDtypes) {
        for (std::size_t s = 0; s < shapes.size(); ++s) {
            for (bool log_mode : {false, true}) {
                HostTensor x = make_tensor(dtype, shapes[s]);
                HostTensor y = make_tensor(dtype, shapes[s]);
                fill_random(x, test_rng(), 1000.0);
                poison(y);
                REQUIRE(run_cpu(y, x, axes[s], log_mode) == SMX_STATUS_SUCCESS);
                for (std::int64_t offset : logical_offsets(y)) CHECK(y.get(offset) == (log_mode ? 0.0 : 1.0));
            }
        }
    }
}

TEST_CASE("shift invariance: f32 softmax of x + 1e4 equals softmax of x within tolerance", "[cpu][semantics]") {
    // Inputs are multiples of 1/64 below 8 in magnitude, so x + 1e4 is exact in f32 and only the library's
    // arithmetic can differ.
    HostTensor x = make_tensor(SMX_DTYPE_F32, {6, 77});
    HostTensor shifted = make_tensor(SMX_DTYPE_F32, x.shape);
    std::uniform_int_distribution<int> sixty_fourths(-511, 511);
    for (std::int64_t offset : logical_offsets(x)) {
        const double value = (sixty_fourths(test_rng()) | 1) / 64.0;  // odd: never zero
        x.set(offset, value);
        shifted.set(offset, value + 1e4);
        REQUIRE(shifted.get(offset) == value + 1e4);
    }
    for (bool log_mode : {false, true}) {
        HostTensor y = make_tensor(SMX_DTYPE_F32, x.shape);
        HostTensor y_shifted = make_tensor(SMX_DTYPE_F32, x.shape);
        poison(y);
        poison(y_shifted);
        REQUIRE(run_cpu(y, x, 1, log_mode) == SMX_STATUS_SUCCESS);
        REQUIRE(run_cpu(y_shifted, shifted, 1, log_mode) == SMX_STATUS_SUCCESS);
        std::vector<double> unshifted_result;
        for (std::int64_t offset : logical_offsets(y)) unshifted_result.push_back(y.get(offset));
        CHECK(compare_to_reference(y_shifted, unshifted_result, log_mode) == "");
    }
}

TEST_CASE("every softmax row sums to 1 within the output dtype's tolerance", "[cpu][semantics]") {
    for (smxDataType_t x_dtype : kAllDtypes) {
        for (smxDataType_t y_dtype : kAllDtypes) {
            if ((x_dtype == SMX_DTYPE_F64) != (y_dtype == SMX_DTYPE_F64)) continue;
            INFO(pair_name(x_dtype, y_dtype));
            HostTensor x = make_tensor(x_dtype, {9, 300});
            HostTensor y = make_tensor(y_dtype, x.shape);
            fill_random(x, test_rng(), 4.0);
            poison(y);
            REQUIRE(run_cpu(y, x, 1, false) == SMX_STATUS_SUCCESS);
            for (std::int64_t row = 0; row < 9; ++row) {
                double sum = 0.0;
                for (std::int64_t j = 0; j < 300; ++j) sum += at(y, row, j);
                // Each element is within rtol of its true value, so the sum is within rtol of 1.
                CHECK(std::fabs(sum - 1.0) <= relative_tolerance(y_dtype));
            }
        }
    }
}

TEST_CASE("exp(log_softmax(x)) equals softmax(x) within the output dtype's tolerance", "[cpu][semantics]") {
    for (smxDataType_t dtype : kAllDtypes) {
        INFO(dtype_name(dtype));
        HostTensor x = make_tensor(dtype, {5, 3, 41});
        fill_random(x, test_rng());
        for (int axis : {0, 1, 2}) {
            HostTensor plain = make_tensor(dtype, x.shape);
            HostTensor logs = make_tensor(dtype, x.shape);
            poison(plain);
            poison(logs);
            REQUIRE(run_cpu(plain, x, axis, false) == SMX_STATUS_SUCCESS);
            REQUIRE(run_cpu(logs, x, axis, true) == SMX_STATUS_SUCCESS);
            const double rtol = relative_tolerance(dtype);
            for (std::int64_t offset : logical_offsets(x)) {
                const double log_value = logs.get(offset);
                // log_softmax is good to rtol * (|l| + 1) absolute, which exp turns into that much relative.
                const double allowed =
                    2 * rtol * (std::fabs(log_value) + 1.0) * plain.get(offset) + smallest_normal(dtype);
                CHECK(std::fabs(std::exp(log_value) - plain.get(offset)) <= allowed);
            }
        }
    }
}

TEST_CASE("huge magnitudes do not overflow: the row maximum is subtracted first", "[cpu][semantics]") {
    struct Case {
        smxDataType_t dtype;
        double magnitude;
    };
    for (const Case c : {Case{SMX_DTYPE_F32, 1e30}, Case{SMX_DTYPE_F16, 60000.0}, Case{SMX_DTYPE_BF16, 1e38},
                         Case{SMX_DTYPE_F64, 1e300}}) {
        INFO(dtype_name(c.dtype) << " +-" << c.magnitude);
        HostTensor x = make_tensor(c.dtype, {4, 16});
        std::uniform_real_distribution<double> fraction(0.5, 1.0);
        std::bernoulli_distribution negative(0.5);
        for (std::int64_t offset : logical_offsets(x)) {
            x.set(offset, (negative(test_rng()) ? -1 : 1) * c.magnitude * fraction(test_rng()));
        }
        put(x, 0, 3, c.magnitude);   // the extremes themselves
        put(x, 0, 5, -c.magnitude);
        put(x, 1, 0, c.magnitude);   // a tie for the maximum, all else far below: both get 1/2
        put(x, 1, 1, c.magnitude);
        for (std::int64_t j = 2; j < 16; ++j) put(x, 1, j, -c.magnitude * fraction(test_rng()));
        for (bool log_mode : {false, true}) {
            HostTensor y = make_tensor(c.dtype, x.shape);
            poison(y);
            REQUIRE(run_cpu(y, x, 1, log_mode) == SMX_STATUS_SUCCESS);
            for (std::int64_t offset : logical_offsets(y)) {
                CHECK_FALSE(std::isnan(y.get(offset)));
                if (!log_mode) CHECK(std::isfinite(y.get(offset)));
            }
            CHECK(at(y, 1, 0) == Approx(log_mode ? -std::log(2.0) : 0.5).epsilon(relative_tolerance(c.dtype)));
            // A log-softmax of -2 * 60000 is beyond f16's range: the correctly rounded answer there is -inf.
            CHECK(compare_to_reference(y, rounded_to(c.dtype, reference_softmax(x, 1, log_mode)), log_mode) == "");
        }
    }
}
