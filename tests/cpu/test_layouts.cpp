// Layouts on the CPU backend: every axis of random 1-d to 5-d tensors under contiguous, transposed, padded
// and negative strides, x and y laid out differently, in-place, and the axis sizes around the kernels'
// thresholds (warp widths, block sizes) in the rows, spatial and general layouts.
#include <catch2/catch.hpp>

#include <vector>

#include "support/layouts.hpp"
#include "support/reference.hpp"

using namespace smx_test;

namespace {

// Runs y = f(x) on the CPU and compares with the float64 reference; y is poisoned first.
void check_against_reference(HostTensor& y, const HostTensor& x, int axis, bool log_mode) {
    INFO("x " << describe(x) << ", y " << describe(y) << ", axis " << axis << (log_mode ? ", log" : ""));
    poison(y);
    REQUIRE(run_cpu(y, x, axis, log_mode) == SMX_STATUS_SUCCESS);
    CHECK(compare_to_reference(y, reference_softmax(x, axis, log_mode), log_mode) == "");
}

}  // namespace

TEST_CASE("every axis of random 1-d to 5-d tensors, for every pair of stride kinds of x and y", "[cpu][layout]") {
    auto& rng = test_rng();
    for (int ndim = 1; ndim <= 5; ++ndim) {
        for (int trial = 0; trial < 3; ++trial) {
            const std::vector<std::int64_t> shape = random_shape(ndim, rng);
            for (StrideKind x_kind : kAllStrideKinds) {
                for (StrideKind y_kind : kAllStrideKinds) {
                    INFO("x " << stride_kind_name(x_kind) << ", y " << stride_kind_name(y_kind));
                    HostTensor x = make_tensor(SMX_DTYPE_F32, shape, make_strides(shape, x_kind, rng));
                    HostTensor y = make_tensor(SMX_DTYPE_F32, shape, make_strides(shape, y_kind, rng));
                    fill_random(x, rng);
                    for (int axis = -ndim; axis < ndim; ++axis) check_against_reference(y, x, axis, axis % 2 != 0);
                }
            }
        }
    }
}

TEST_CASE("every axis in place, under every stride kind", "[cpu][layout]") {
    auto& rng = test_rng();
    for (int ndim = 1; ndim <= 5; ++ndim) {
        const std::vector<std::int64_t> shape = random_shape(ndim, rng);
        for (StrideKind kind : kAllStrideKinds) {
            const std::vector<std::int64_t> strides = make_strides(shape, kind, rng);
            for (int axis = 0; axis < ndim; ++axis) {
                for (bool log_mode : {false, true}) {
                    HostTensor x = make_tensor(SMX_DTYPE_F32, shape, strides);
                    fill_random(x, rng);
                    const std::vector<double> expected = reference_softmax(x, axis, log_mode);
                    INFO(describe(x) << " axis " << axis << (log_mode ? " log" : ""));
                    REQUIRE(run_cpu(x, x, axis, log_mode) == SMX_STATUS_SUCCESS);
                    CHECK(compare_to_reference(x, expected, log_mode) == "");
                }
            }
        }
    }
}

TEST_CASE("axis sizes around the kernels' thresholds, in rows, spatial and general layouts", "[cpu][layout]") {
    auto& rng = test_rng();
    for (std::int64_t n : {1, 2, 31, 32, 33, 1023, 1025, 2049, 4097}) {
        for (bool log_mode : {false, true}) {
            // Rows: the axis is last and contiguous.
            HostTensor rows_x = make_tensor(SMX_DTYPE_F16, {3, n});
            HostTensor rows_y = make_tensor(SMX_DTYPE_F32, {3, n});
            fill_random(rows_x, rng);
            check_against_reference(rows_y, rows_x, 1, log_mode);
            // Spatial: the axis in the middle, a contiguous inner dim after it.
            HostTensor spatial_x = make_tensor(SMX_DTYPE_F32, {2, n, 5});
            HostTensor spatial_y = make_tensor(SMX_DTYPE_BF16, {2, n, 5});
            fill_random(spatial_x, rng);
            check_against_reference(spatial_y, spatial_x, 1, log_mode);
            // General: transposed, padded, reversed axis, and y with yet another layout.
            HostTensor general_x = make_tensor(SMX_DTYPE_F32, {2, n, 3}, {-(3 * n + 7), 3, 1});
            HostTensor general_y = make_tensor(SMX_DTYPE_F32, {2, n, 3}, {1, -6, 2});
            fill_random(general_x, rng);
            check_against_reference(general_y, general_x, 1, log_mode);
        }
    }
}

TEST_CASE("many rows spread over the CPU's threads land in the right places", "[cpu][layout]") {
    // Enough elements (> 2^16 per thread) that the plan splits rows across threads, in each layout.
    auto& rng = test_rng();
    HostTensor rows_x = make_tensor(SMX_DTYPE_F32, {600, 513});
    HostTensor rows_y = make_tensor(SMX_DTYPE_F32, {600, 513});
    fill_random(rows_x, rng);
    check_against_reference(rows_y, rows_x, 1, false);
    HostTensor spatial_x = make_tensor(SMX_DTYPE_F32, {7, 65, 700});
    HostTensor spatial_y = make_tensor(SMX_DTYPE_F32, {7, 65, 700});
    fill_random(spatial_x, rng);
    check_against_reference(spatial_y, spatial_x, 1, true);
    HostTensor general_x = make_tensor(SMX_DTYPE_F32, {300, 300, 3}, make_strides({300, 300, 3}, StrideKind::Transposed, rng));
    HostTensor general_y = make_tensor(SMX_DTYPE_F32, {300, 300, 3});
    fill_random(general_x, rng);
    check_against_reference(general_y, general_x, 0, false);
}
