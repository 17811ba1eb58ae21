// The backward of softmax with options on the CPU (issue 53 on issue 52's backward): random options on random
// layouts and dtypes against the float64 options backward reference, fed the forward's own y; and checks that
// do not lean on that reference: central differences of the forward with options, excluded elements never
// read, masked rows zero, in place, and the plain backward unchanged without options.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "support/layouts.hpp"
#include "support/options_reference.hpp"
#include "support/reference.hpp"

using namespace smx_test;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// dy of y's shape and dtype, random, in a layout of `kind`.
HostTensor random_gradient(const HostTensor& y, StrideKind kind, std::mt19937_64& rng) {
    HostTensor dy = make_tensor(y.dtype, y.shape, make_strides(y.shape, kind, rng));
    fill_random(dy, rng);
    return dy;
}

std::string mode_name(bool log_mode) { return log_mode ? "log_softmax" : "softmax"; }

}  // namespace

TEST_CASE("backward with options: random options, layouts and dtypes against the float64 reference", "[cpu][options][backward]") {
    auto& rng = test_rng();
    for (int trial = 0; trial < 80; ++trial) {
        for (bool log_mode : {false, true}) {
            RandomOptionsCase c;
            make_random_options_case(trial, 1 + trial % 3, rng, &c);
            if (trial % 4 == 0) add_special_rows(c.x);
            // y is the forward's own output, as autograd saves it.
            REQUIRE(run_cpu_options(c.y, c.x, c.axis, log_mode, c.spec) == SMX_STATUS_SUCCESS);
            const HostTensor dy = random_gradient(c.y, kAllStrideKinds[(trial / 3) % 5], rng);
            HostTensor dx = make_tensor(c.x.dtype, c.x.shape, c.x.strides);
            poison(dx);
            std::string plan;
            REQUIRE(run_cpu_backward_options(dx, dy, c.y, c.axis, log_mode, c.spec, &plan) == SMX_STATUS_SUCCESS);
            const BackwardReference ref = reference_softmax_backward_options(dy, c.y, c.axis, log_mode, c.spec);
            INFO(mode_name(log_mode) << " x " << describe(c.x) << " dy " << describe(dy) << " axis " << c.axis
                                     << " plan " << plan);
            CHECK(compare_backward_to_reference(dx, ref, 0.0) == "");
        }
    }
}

TEST_CASE("backward with options equals central differences of the forward with options", "[cpu][options][backward]") {
    auto& rng = test_rng();
    const std::vector<std::int64_t> shape = {2, 4, 7};
    HostTensor x = make_tensor(SMX_DTYPE_F64, shape);
    fill_random(x, rng, 1.0);
    HostTensor scale = make_tensor(SMX_DTYPE_F32, {2, 4});
    fill_random(scale, rng, 1.0);
    HostTensor keep = random_keep_mask({4, 7}, rng, 0.7);
    for (std::int64_t j = 0; j < 7; ++j) keep.set(keep.offset_of({3, j}), 0.0);  // query 3: nothing kept
    // Finite: at a kept -inf the log-softmax gradient is dy (PyTorch's), which no difference of -inf outputs shows.
    HostTensor additive = make_tensor(SMX_DTYPE_F64, {7});
    fill_random(additive, rng, 2.0);
    HostTensor weights = make_tensor(SMX_DTYPE_F64, shape);
    fill_random(weights, rng);

    OptionsSpec keep_spec;
    keep_spec.scale_tensor = &scale;
    keep_spec.mask = &keep;
    keep_spec.causal = 1;
    keep_spec.zero_rows = true;
    OptionsSpec additive_spec;
    additive_spec.scale = -0.8;
    additive_spec.mask = &additive;
    additive_spec.causal = 0;
    for (const OptionsSpec* spec : {&keep_spec, &additive_spec}) {
        for (bool log_mode : {false, true}) {
            // L(x) = sum(weights * f(x)): dL/dx is the backward of dy = weights.
            const auto loss = [&](const HostTensor& at) {
                HostTensor y = make_tensor(SMX_DTYPE_F64, shape);
                REQUIRE(run_cpu_options(y, at, 2, log_mode, *spec) == SMX_STATUS_SUCCESS);
                double total = 0.0;
                for (std::int64_t i = 0; i < y.numel(); ++i) {
                    // Masked rows and excluded log-softmax outputs are constants (-inf): they carry no gradient.
                    if (std::isfinite(y.get(i))) total += weights.get(i) * y.get(i);
                }
                return total;
            };
            HostTensor y = make_tensor(SMX_DTYPE_F64, shape);
            REQUIRE(run_cpu_options(y, x, 2, log_mode, *spec) == SMX_STATUS_SUCCESS);
            HostTensor dx = make_tensor(SMX_DTYPE_F64, shape);
            poison(dx);
            REQUIRE(run_cpu_backward_options(dx, weights, y, 2, log_mode, *spec) == SMX_STATUS_SUCCESS);
            const double h = 1e-6;
            for (std::int64_t i = 0; i < x.numel(); ++i) {
                HostTensor up = x, down = x;
                up.set(i, x.get(i) + h);
                down.set(i, x.get(i) - h);
                const double numeric = (loss(up) - loss(down)) / (2 * h);
                INFO(mode_name(log_mode) << " element " << i);
                CHECK(dx.get(i) == Approx(numeric).margin(1e-7).epsilon(1e-6));
            }
        }
    }
}

TEST_CASE("backward with options never reads excluded dy or y, and writes 0 there", "[cpu][options][backward]") {
    auto& rng = test_rng();
    HostTensor x = make_tensor(SMX_DTYPE_F32, {5, 8});
    fill_random(x, rng);
    HostTensor keep = random_keep_mask({8}, rng, 0.6);
    OptionsSpec spec;
    spec.mask = &keep;
    spec.causal = 2;
    spec.scale = 1.5;
    for (bool log_mode : {false, true}) {
        HostTensor y = make_tensor(SMX_DTYPE_F32, {5, 8});
        REQUIRE(run_cpu_options(y, x, 1, log_mode, spec) == SMX_STATUS_SUCCESS);
        HostTensor dy = make_tensor(SMX_DTYPE_F32, {5, 8});
        fill_random(dy, rng);
        HostTensor clean = make_tensor(SMX_DTYPE_F32, {5, 8});
        REQUIRE(run_cpu_backward_options(clean, dy, y, 1, log_mode, spec) == SMX_STATUS_SUCCESS);
        // NaN in dy and y wherever the forward excluded the element: the result must not change.
        std::int64_t excluded = 0;
        for (std::int64_t i = 0; i < 5; ++i) {
            for (std::int64_t j = 0; j < 8; ++j) {
                const bool kept = j <= i + 2 && keep.get(keep.offset_of({j})) != 0.0;
                if (kept) continue;
                ++excluded;
                dy.set(dy.offset_of({i, j}), kNaN);
                y.set(y.offset_of({i, j}), kNaN);
            }
        }
        REQUIRE(excluded > 0);
        HostTensor dx = make_tensor(SMX_DTYPE_F32, {5, 8});
        poison(dx);
        REQUIRE(run_cpu_backward_options(dx, dy, y, 1, log_mode, spec) == SMX_STATUS_SUCCESS);
        for (std::int64_t i = 0; i < 5; ++i) {
            for (std::int64_t j = 0; j < 8; ++j) {
                const double got = dx.get(dx.offset_of({i, j}));
                INFO(mode_name(log_mode) << " row " << i << " element " << j);
                CHECK(got == clean.get(clean.offset_of({i, j})));
                if (std::isnan(dy.get(dy.offset_of({i, j})))) CHECK(got == 0.0);
            }
        }
    }
}

TEST_CASE("masked rows zero: a row whose forward had nothing to normalize gets dx = 0; NaN rows stay NaN",
          "[cpu][options][backward]") {
    auto& rng = test_rng();
    HostTensor x = make_tensor(SMX_DTYPE_F32, {3, 6});
    fill_random(x, rng);
    // An additive mask all -inf on row 1: every kept z is -inf there (nothing excluded, nothing to normalize).
    HostTensor mask = make_tensor(SMX_DTYPE_F32, {3, 6});
    fill_random(mask, rng, 1.0);
    for (std::int64_t j = 0; j < 6; ++j) mask.set(mask.offset_of({1, j}), -kInf);
    for (bool zero_rows : {false, true}) {
        for (bool log_mode : {false, true}) {
            OptionsSpec spec;
            spec.mask = &mask;
            spec.zero_rows = zero_rows;
            HostTensor y = make_tensor(SMX_DTYPE_F32, {3, 6});
            REQUIRE(run_cpu_options(y, x, 1, log_mode, spec) == SMX_STATUS_SUCCESS);
            HostTensor dy = make_tensor(SMX_DTYPE_F32, {3, 6});
            fill_random(dy, rng);
            HostTensor dx = make_tensor(SMX_DTYPE_F32, {3, 6});
            poison(dx);
            REQUIRE(run_cpu_backward_options(dx, dy, y, 1, log_mode, spec) == SMX_STATUS_SUCCESS);
            for (std::int64_t j = 0; j < 6; ++j) {
                const double got = dx.get(dx.offset_of({1, j}));
                INFO(mode_name(log_mode) << (zero_rows ? " zero rows" : " NaN rows") << " element " << j);
                if (zero_rows) CHECK(got == 0.0);  // without the rule log-softmax's formula would give dy here
                else CHECK(std::isnan(got));      // y is NaN: the formula propagates it
            }
            CHECK(compare_backward_to_reference(dx, reference_softmax_backward_options(dy, y, 1, log_mode, spec), 0.0) == "");
        }
    }
}

TEST_CASE("backward with options in place (dx == dy), and over many rows across threads", "[cpu][options][backward]") {
    auto& rng = test_rng();
    for (const std::vector<std::int64_t>& shape : {std::vector<std::int64_t>{4, 9}, std::vector<std::int64_t>{512, 33}}) {
        HostTensor x = make_tensor(SMX_DTYPE_F32, shape);
        fill_random(x, rng);
        HostTensor scale = make_tensor(SMX_DTYPE_F32, {shape[0]});
        fill_random(scale, rng, 1.0);
        HostTensor keep = random_keep_mask({shape[1]}, rng, 0.5);
        OptionsSpec spec;
        spec.scale_tensor = &scale;
        spec.mask = &keep;
        spec.zero_rows = true;
        for (bool log_mode : {false, true}) {
            HostTensor y = make_tensor(SMX_DTYPE_F32, shape);
            REQUIRE(run_cpu_options(y, x, 1, log_mode, spec) == SMX_STATUS_SUCCESS);
            HostTensor dy = make_tensor(SMX_DTYPE_F32, shape);
            fill_random(dy, rng);
            const BackwardReference ref = reference_softmax_backward_options(dy, y, 1, log_mode, spec);
            REQUIRE(run_cpu_backward_options(dy, dy, y, 1, log_mode, spec) == SMX_STATUS_SUCCESS);
            INFO(mode_name(log_mode) << " shape " << describe(x));
            CHECK(compare_backward_to_reference(dy, ref, 0.0) == "");
        }
    }
}

TEST_CASE("backward without options: WithOptions with NULL or empty options is the plain backward, bit for bit",
          "[cpu][options][backward]") {
    auto& rng = test_rng();
    HostTensor y = make_tensor(SMX_DTYPE_F32, {6, 10});
    fill_random(y, rng, 0.3);
    HostTensor dy = make_tensor(SMX_DTYPE_F32, {6, 10});
    fill_random(dy, rng);
    for (bool log_mode : {false, true}) {
        HostTensor plain = make_tensor(SMX_DTYPE_F32, {6, 10});
        REQUIRE(run_cpu_backward(plain, dy, y, 1, log_mode) == SMX_STATUS_SUCCESS);
        OptionsSpec unit_scale;
        unit_scale.scale = 1.0;  // a scale of exactly 1 is no option
        for (const OptionsSpec& spec : {OptionsSpec{}, unit_scale}) {
            HostTensor dx = make_tensor(SMX_DTYPE_F32, {6, 10});
            poison(dx);
            std::string plan;
            REQUIRE(run_cpu_backward_options(dx, dy, y, 1, log_mode, spec, &plan) == SMX_STATUS_SUCCESS);
            CHECK(plan == "cpu reference backward layout=rows threads=1");
            CHECK(std::memcmp(dx.data(), plain.data(), 60 * sizeof(float)) == 0);
        }
        OptionsSpec scaled;
        scaled.scale = 2.0;
        scaled.causal = -1;
        std::string plan;
        HostTensor dx = make_tensor(SMX_DTYPE_F32, {6, 10});
        REQUIRE(run_cpu_backward_options(dx, dy, y, 1, log_mode, scaled, &plan) == SMX_STATUS_SUCCESS);
        CHECK(plan == "cpu reference backward layout=rows threads=1 options=scale(2),causal(-1)");
    }
}
