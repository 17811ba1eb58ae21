// The softmax and log-softmax backward on the CPU backend: every (y, dx) dtype pair, every axis of random
// strided layouts for each of dx, dy and y, broadcast inputs, in place, empty tensors, size-1 axes, special
// values, many rows over threads, all against the float64 reference; and central differences of the forward,
// which check the formula itself independently of that reference.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "support/layouts.hpp"
#include "support/reference.hpp"

using namespace smx_test;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();

const smxDataType_t kAllDtypes[] = {SMX_DTYPE_F16, SMX_DTYPE_BF16, SMX_DTYPE_F32, SMX_DTYPE_F64};

const char* mode_name(bool log_mode) { return log_mode ? "log_softmax" : "softmax"; }

// Writes into y (through its layout) what the forward gives for fresh random x: softmax (log-softmax) of
// N(0, spread) values along axis, in float64, rounded once to y's dtype. The y a backward is given in practice.
void fill_forward_output(HostTensor& y, int axis, bool log_mode, double spread = 3.0) {
    HostTensor x = make_tensor(SMX_DTYPE_F64, y.shape);
    fill_random(x, test_rng(), spread);
    const std::vector<double> values = reference_softmax(x, axis, log_mode);
    const std::vector<std::int64_t> offsets = logical_offsets(y);
    for (std::size_t i = 0; i < offsets.size(); ++i) y.set(offsets[i], values[i]);
}

// Runs the backward into a poisoned dx and compares it with the float64 reference (the CPU computes in double).
void check_against_reference(HostTensor& dx, const HostTensor& dy, const HostTensor& y, int axis, bool log_mode) {
    INFO("dx " << describe(dx) << ", dy " << describe(dy) << ", y " << describe(y) << ", axis " << axis << " "
               << mode_name(log_mode));
    poison(dx);
    REQUIRE(run_cpu_backward(dx, dy, y, axis, log_mode) == SMX_STATUS_SUCCESS);
    CHECK(compare_backward_to_reference(dx, reference_softmax_backward(dy, y, axis, log_mode), 0.0) == "");
}

// Element [row, j] of a 2-d tensor.
double at(const HostTensor& t, std::int64_t row, std::int64_t j) { return t.get(row * t.strides[0] + j * t.strides[1]); }
void put(HostTensor& t, std::int64_t row, std::int64_t j, double v) { t.set(row * t.strides[0] + j * t.strides[1], v); }

}  // namespace

TEST_CASE("backward: every (y, dx) dtype pair, dy in y's dtype, matches the float64 reference", "[cpu][backward]") {
    struct Problem {
        std::vector<std::int64_t> shape;
        std::vector<std::int64_t> dy_strides;  // empty: row-major
        int axis;
    };
    const Problem problems[] = {
        {{7, 129}, {}, -1},     // rows
        {{4, 33, 5}, {}, 1},    // spatial
        {{6, 10}, {1, -8}, 1},  // general: dy transposed and reversed
    };
    int pairs = 0;
    for (smxDataType_t y_dtype : kAllDtypes) {
        for (smxDataType_t dx_dtype : kAllDtypes) {
            ++pairs;
            for (const Problem& problem : problems) {
                for (bool log_mode : {false, true}) {
                    INFO("y " << dtype_name(y_dtype) << " -> dx " << dtype_name(dx_dtype));
                    HostTensor y = make_tensor(y_dtype, problem.shape);
                    HostTensor dy = make_tensor(y_dtype, problem.shape, problem.dy_strides);
                    HostTensor dx = make_tensor(dx_dtype, problem.shape);
                    fill_forward_output(y, problem.axis, log_mode);
                    fill_random(dy, test_rng());
                    check_against_reference(dx, dy, y, problem.axis, log_mode);
                }
            }
        }
    }
    CHECK(pairs == 16);
}

TEST_CASE("backward: every axis of random 1-d to 5-d tensors, dx, dy and y each under its own stride kind",
          "[cpu][backward]") {
    auto& rng = test_rng();
    std::uniform_int_distribution<int> kind_index(0, 4);
    const auto random_strides = [&](const std::vector<std::int64_t>& shape) {
        return make_strides(shape, kAllStrideKinds[kind_index(rng)], rng);
    };
    for (int ndim = 1; ndim <= 5; ++ndim) {
        for (int trial = 0; trial < 12; ++trial) {
            const std::vector<std::int64_t> shape = random_shape(ndim, rng);
            for (int axis = -ndim; axis < ndim; ++axis) {
                const bool log_mode = (trial + axis) % 2 != 0;
                HostTensor y = make_tensor(SMX_DTYPE_F32, shape, random_strides(shape));
                HostTensor dy = make_tensor(SMX_DTYPE_F32, shape, random_strides(shape));
                HostTensor dx = make_tensor(SMX_DTYPE_F32, shape, random_strides(shape));
                fill_forward_output(y, axis, log_mode);
                fill_random(dy, rng);
                check_against_reference(dx, dy, y, axis, log_mode);
            }
        }
    }
}

TEST_CASE("backward: a negative axis computes what axis + ndim computes", "[cpu][backward]") {
    for (bool log_mode : {false, true}) {
        for (int axis : {0, 1, 2}) {
            HostTensor y = make_tensor(SMX_DTYPE_F32, {3, 4, 5});
            HostTensor dy = make_tensor(SMX_DTYPE_F32, {3, 4, 5});
            fill_forward_output(y, axis, log_mode);
            fill_random(dy, test_rng());
            HostTensor positive = make_tensor(SMX_DTYPE_F32, y.shape), negative = make_tensor(SMX_DTYPE_F32, y.shape);
            poison(positive);
            poison(negative);
            REQUIRE(run_cpu_backward(positive, dy, y, axis, log_mode) == SMX_STATUS_SUCCESS);
            REQUIRE(run_cpu_backward(negative, dy, y, axis - 3, log_mode) == SMX_STATUS_SUCCESS);
            CHECK(compare_backward_to_reference(negative, reference_softmax_backward(dy, y, axis, log_mode), 0.0) == "");
            CHECK(positive.storage == negative.storage);
        }
    }
}

TEST_CASE("backward: axis sizes around the kernels' thresholds, in rows, spatial and general layouts",
          "[cpu][backward]") {
    for (std::int64_t n : {1, 2, 31, 32, 33, 1023, 1025, 4097}) {
        for (bool log_mode : {false, true}) {
            // Rows: bf16 dy and y to an f32 dx, the autograd case of a bf16 forward from f32 inputs.
            HostTensor rows_y = make_tensor(SMX_DTYPE_BF16, {3, n}), rows_dy = make_tensor(SMX_DTYPE_BF16, {3, n});
            HostTensor rows_dx = make_tensor(SMX_DTYPE_F32, {3, n});
            fill_forward_output(rows_y, 1, log_mode);
            fill_random(rows_dy, test_rng());
            check_against_reference(rows_dx, rows_dy, rows_y, 1, log_mode);
            // Spatial: the axis in the middle, a contiguous inner dim after it.
            HostTensor spatial_y = make_tensor(SMX_DTYPE_F32, {2, n, 5}), spatial_dy = make_tensor(SMX_DTYPE_F32, {2, n, 5});
            HostTensor spatial_dx = make_tensor(SMX_DTYPE_F16, {2, n, 5});
            fill_forward_output(spatial_y, 1, log_mode);
            fill_random(spatial_dy, test_rng());
            check_against_reference(spatial_dx, spatial_dy, spatial_y, 1, log_mode);
            // General: y transposed, padded and reversed; dy and dx each in yet another layout.
            HostTensor general_y = make_tensor(SMX_DTYPE_F32, {2, n, 3}, {-(3 * n + 7), 3, 1});
            HostTensor general_dy = make_tensor(SMX_DTYPE_F32, {2, n, 3}, {1, -6, 2});
            HostTensor general_dx = make_tensor(SMX_DTYPE_F32, {2, n, 3}, {3 * n, 1, n});
            fill_forward_output(general_y, 1, log_mode);
            fill_random(general_dy, test_rng());
            check_against_reference(general_dx, general_dy, general_y, 1, log_mode);
        }
    }
}

TEST_CASE("backward: dy and y may broadcast (zero strides) along the axis or across rows; dx transposed",
          "[cpu][backward]") {
    for (bool log_mode : {false, true}) {
        // dy one value per row (stride 0 along the axis), y one row for all rows (stride 0 across rows).
        HostTensor dy_along_axis = make_tensor(SMX_DTYPE_F32, {6, 9}, {1, 0});
        HostTensor y_across_rows = make_tensor(SMX_DTYPE_F32, {6, 9}, {0, 1});
        HostTensor y_dense = make_tensor(SMX_DTYPE_F32, {6, 9});
        HostTensor dy_across_rows = make_tensor(SMX_DTYPE_F32, {6, 9}, {0, 1});
        HostTensor dx_transposed = make_tensor(SMX_DTYPE_F32, {6, 9}, {1, 6});
        fill_random(dy_along_axis, test_rng());
        fill_random(dy_across_rows, test_rng());
        fill_forward_output(y_across_rows, 1, log_mode);
        fill_forward_output(y_dense, 1, log_mode);
        check_against_reference(dx_transposed, dy_along_axis, y_dense, 1, log_mode);
        check_against_reference(dx_transposed, dy_across_rows, y_across_rows, 1, log_mode);
        check_against_reference(dx_transposed, dy_along_axis, y_across_rows, 1, log_mode);
        // A softmax row's gradient for a constant dy is exactly zero in exact arithmetic: y * (c - c * sum(y)).
        if (!log_mode) {
            HostTensor dx = make_tensor(SMX_DTYPE_F64, {6, 9});
            REQUIRE(run_cpu_backward(dx, dy_along_axis, y_dense, 1, false) == SMX_STATUS_SUCCESS);
            for (std::int64_t offset : logical_offsets(dx)) CHECK(std::fabs(dx.get(offset)) < 1e-5);
        }
    }
}

TEST_CASE("backward: in place (dx == dy) under every stride kind, and between dtypes of one size",
          "[cpu][backward]") {
    auto& rng = test_rng();
    for (int ndim = 1; ndim <= 4; ++ndim) {
        const std::vector<std::int64_t> shape = random_shape(ndim, rng);
        for (StrideKind kind : kAllStrideKinds) {
            const std::vector<std::int64_t> strides = make_strides(shape, kind, rng);
            for (int axis = 0; axis < ndim; ++axis) {
                for (bool log_mode : {false, true}) {
                    HostTensor y = make_tensor(SMX_DTYPE_F32, shape, make_strides(shape, kind, rng));
                    HostTensor grad = make_tensor(SMX_DTYPE_F32, shape, strides);
                    fill_forward_output(y, axis, log_mode);
                    fill_random(grad, rng);
                    const BackwardReference expected = reference_softmax_backward(grad, y, axis, log_mode);
                    INFO(describe(grad) << " axis " << axis << " " << mode_name(log_mode));
                    REQUIRE(run_cpu_backward(grad, grad, y, axis, log_mode) == SMX_STATUS_SUCCESS);
                    CHECK(compare_backward_to_reference(grad, expected, 0.0) == "");
                }
            }
        }
    }
    // bf16 dy and y, f16 dx over dy's memory: in place needs equal element sizes only.
    for (bool log_mode : {false, true}) {
        HostTensor y = make_tensor(SMX_DTYPE_BF16, {5, 70});
        HostTensor grad = make_tensor(SMX_DTYPE_BF16, {5, 70});
        fill_forward_output(y, 1, log_mode);
        fill_random(grad, rng);
        const BackwardReference expected = reference_softmax_backward(grad, y, 1, log_mode);
        Handle handle(SMX_DEVICE_CPU, 0);
        TensorDesc dx_desc(SMX_DTYPE_F16, {5, 70}, {}), grad_desc(grad), y_desc(y);
        SoftmaxBackwardDesc desc(handle.handle, log_mode ? SMX_LOG_SOFTMAX : SMX_SOFTMAX, 1, dx_desc.desc,
                                 grad_desc.desc, y_desc.desc);
        REQUIRE(desc.status == SMX_STATUS_SUCCESS);
        REQUIRE(smxSoftmaxBackward(desc.desc, nullptr, 0, grad.data(), grad.data(), y.data(), nullptr) ==
                SMX_STATUS_SUCCESS);
        grad.dtype = SMX_DTYPE_F16;  // the same bytes, now read as dx
        CHECK(compare_backward_to_reference(grad, expected, 0.0) == "");
    }
}

TEST_CASE("backward: tensors with no elements succeed and write nothing", "[cpu][backward]") {
    const std::vector<std::vector<std::int64_t>> shapes = {{0}, {0, 5}, {5, 0}, {3, 0, 4}};
    for (const auto& shape : shapes) {
        for (int axis = 0; axis < static_cast<int>(shape.size()); ++axis) {
            for (bool log_mode : {false, true}) {
                HostTensor dy = make_tensor(SMX_DTYPE_F32, shape), y = make_tensor(SMX_DTYPE_F32, shape);
                HostTensor dx = make_tensor(SMX_DTYPE_F16, shape);
                poison(dx);
                const std::vector<unsigned char> poisoned = dx.storage;
                CHECK(run_cpu_backward(dx, dy, y, axis, log_mode) == SMX_STATUS_SUCCESS);
                CHECK(dx.storage == poisoned);
            }
        }
    }
}

TEST_CASE("backward: an axis of size 1 gives dx = 0 for the forward's y (1, log-softmax 0)", "[cpu][backward]") {
    const std::vector<std::vector<std::int64_t>> shapes = {{5, 1}, {1}, {4, 1, 3}};
    const int axes[] = {1, 0, 1};
    for (smxDataType_t dtype : kAllDtypes) {
        for (std::size_t s = 0; s < shapes.size(); ++s) {
            for (bool log_mode : {false, true}) {
                HostTensor y = make_tensor(dtype, shapes[s]), dy = make_tensor(dtype, shapes[s]);
                HostTensor dx = make_tensor(dtype, shapes[s]);
                fill_forward_output(y, axes[s], log_mode, 1000.0);
                fill_random(dy, test_rng(), 1000.0);
                poison(dx);
                REQUIRE(run_cpu_backward(dx, dy, y, axes[s], log_mode) == SMX_STATUS_SUCCESS);
                for (std::int64_t offset : logical_offsets(dx)) CHECK(dx.get(offset) == 0.0);
            }
        }
    }
}

TEST_CASE("backward: special values propagate as PyTorch's formulas propagate them", "[cpu][backward][semantics]") {
    constexpr std::int64_t kRows = 7, kLen = 9;
    enum Row { kFinite, kNaNInDy, kNaNInY, kPlusInfInDy, kMinusInfInDy, kBothInfsInDy, kZeroOrMinusInfY };
    for (smxDataType_t dtype : kAllDtypes) {
        for (bool log_mode : {false, true}) {
            INFO(dtype_name(dtype) << " " << mode_name(log_mode));
            HostTensor y = make_tensor(dtype, {kRows, kLen}), dy = make_tensor(dtype, {kRows, kLen});
            HostTensor dx = make_tensor(dtype, {kRows, kLen});
            fill_forward_output(y, 1, log_mode, 1.0);  // spread 1: no y underflows to 0, even in f16
            fill_random(dy, test_rng());
            put(dy, kNaNInDy, 3, kNaN);
            put(y, kNaNInY, 5, kNaN);
            put(dy, kPlusInfInDy, 2, kInf);
            put(dy, kMinusInfInDy, 6, -kInf);
            put(dy, kBothInfsInDy, 0, kInf);
            put(dy, kBothInfsInDy, 1, -kInf);
            put(y, kZeroOrMinusInfY, 4, log_mode ? -kInf : 0.0);  // softmax's y underflowed; log-softmax's -inf
            poison(dx);
            REQUIRE(run_cpu_backward(dx, dy, y, 1, log_mode) == SMX_STATUS_SUCCESS);
            CHECK(compare_backward_to_reference(dx, reference_softmax_backward(dy, y, 1, log_mode), 0.0) == "");

            for (std::int64_t j = 0; j < kLen; ++j) {
                CHECK(std::isfinite(at(dx, kFinite, j)));
                CHECK(std::isnan(at(dx, kNaNInDy, j)));        // the row's sum is NaN
                CHECK(std::isnan(at(dx, kBothInfsInDy, j)));   // inf - inf in the sum
                if (log_mode) {
                    CHECK(std::isnan(at(dx, kNaNInY, j)) == (j == 5));  // sum(dy) does not see y
                } else {
                    CHECK(std::isnan(at(dx, kNaNInY, j)));     // sum(dy * y) does
                }
                // sum = +inf (-inf): every other dx is -inf (+inf), the infinite element's own inf - inf is NaN.
                if (j == 2) CHECK(std::isnan(at(dx, kPlusInfInDy, j)));
                else CHECK(at(dx, kPlusInfInDy, j) == -kInf);
                if (j == 6) CHECK(std::isnan(at(dx, kMinusInfInDy, j)));
                else CHECK(at(dx, kMinusInfInDy, j) == kInf);
            }
            // Softmax: a zero y has a zero gradient; log-softmax: exp(-inf) = 0 leaves dx = dy there.
            CHECK(at(dx, kZeroOrMinusInfY, 4) == (log_mode ? at(dy, kZeroOrMinusInfY, 4) : 0.0));
            for (std::int64_t j = 0; j < kLen; ++j) CHECK(std::isfinite(at(dx, kZeroOrMinusInfY, j)));
        }
    }
}

TEST_CASE("backward: the gradient of sum(dy * f(x)) by central differences of the forward, in float64",
          "[cpu][backward]") {
    struct Problem {
        std::vector<std::int64_t> shape;
        int axis;
    };
    const Problem problems[] = {{{7}, 0}, {{3, 5}, 1}, {{4, 3, 2}, 1}, {{2, 3, 4}, -3}};
    constexpr double kStep = 1e-5;
    for (const Problem& problem : problems) {
        for (bool log_mode : {false, true}) {
            INFO(mode_name(log_mode) << " axis " << problem.axis << " of " << problem.shape.size() << "-d");
            HostTensor x = make_tensor(SMX_DTYPE_F64, problem.shape);
            HostTensor y = make_tensor(SMX_DTYPE_F64, problem.shape);
            HostTensor dy = make_tensor(SMX_DTYPE_F64, problem.shape);
            HostTensor dx = make_tensor(SMX_DTYPE_F64, problem.shape);
            fill_random(x, test_rng(), 1.5);
            fill_random(dy, test_rng());
            const std::vector<std::int64_t> offsets = logical_offsets(x);
            const std::vector<double> forward = reference_softmax(x, problem.axis, log_mode);
            for (std::size_t i = 0; i < offsets.size(); ++i) y.set(offsets[i], forward[i]);
            poison(dx);
            REQUIRE(run_cpu_backward(dx, dy, y, problem.axis, log_mode) == SMX_STATUS_SUCCESS);
            // The loss sum(dy * f(x)) with element i of x moved by `delta`.
            const auto loss = [&](std::size_t i, double delta) {
                HostTensor moved = x;
                moved.set(offsets[i], x.get(offsets[i]) + delta);
                const std::vector<double> f = reference_softmax(moved, problem.axis, log_mode);
                double sum = 0.0;
                for (std::size_t k = 0; k < offsets.size(); ++k) sum += dy.get(offsets[k]) * f[k];
                return sum;
            };
            for (std::size_t i = 0; i < offsets.size(); ++i) {
                const double difference = (loss(i, kStep) - loss(i, -kStep)) / (2 * kStep);
                INFO("element " << i << ": dx " << dx.get(offsets[i]) << ", central difference " << difference);
                CHECK(std::fabs(dx.get(offsets[i]) - difference) <= 1e-7 * (1.0 + std::fabs(difference)));
            }
        }
    }
}

TEST_CASE("backward: many rows spread over the CPU's threads land in the right places", "[cpu][backward]") {
    // Enough elements (> 2^16 per thread) that the plan splits rows across threads, in each layout.
    auto& rng = test_rng();
    const struct {
        std::vector<std::int64_t> shape;
        std::vector<std::int64_t> y_strides;
        int axis;
        bool log_mode;
    } problems[] = {{{600, 513}, {}, 1, false},
                    {{7, 65, 700}, {}, 1, true},
                    {{300, 300, 3}, make_strides({300, 300, 3}, StrideKind::Transposed, rng), 0, false}};
    for (const auto& problem : problems) {
        HostTensor y = make_tensor(SMX_DTYPE_F32, problem.shape, problem.y_strides);
        HostTensor dy = make_tensor(SMX_DTYPE_F32, problem.shape), dx = make_tensor(SMX_DTYPE_F32, problem.shape);
        fill_forward_output(y, problem.axis, problem.log_mode);
        fill_random(dy, rng);
        check_against_reference(dx, dy, y, problem.axis, problem.log_mode);
    }
}
