// Softmax options on the CPU backend (issue 53) against the float64 options reference: every option alone and
// combined, every dtype pair, broadcast masks read through their strides, per-row scales of 0 and huge, rows
// with nothing kept under both masked-rows modes, NaN and infinities in kept and excluded places, causal
// windows, layouts, in place and threads; and checks that do not go through the options reference at all
// (masked_fill-then-softmax equivalence, uniform rows at scale 0, the exact values of empty rows).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
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
constexpr smxDataType_t kFloating[] = {SMX_DTYPE_F16, SMX_DTYPE_BF16, SMX_DTYPE_F32, SMX_DTYPE_F64};

// The CPU computes in double, as the reference does: z's rounding is the reference's own.
constexpr double kCpuComputeRtol = 4 * std::numeric_limits<double>::epsilon();

// x's shape without `axis`: the shape of a per-row scale.
std::vector<std::int64_t> per_row_shape(const std::vector<std::int64_t>& shape, int axis) {
    std::vector<std::int64_t> out;
    for (int d = 0; d < static_cast<int>(shape.size()); ++d) {
        if (d != axis) out.push_back(shape[d]);
    }
    if (out.empty()) out.push_back(1);
    return out;
}

// Runs the CPU with options into a poisoned y and compares with the reference.
void check_options(HostTensor& y, const HostTensor& x, int axis, bool log_mode, const OptionsSpec& spec) {
    INFO("x " << describe(x) << ", y " << describe(y) << ", axis " << axis << (log_mode ? ", log" : "")
              << (spec.mask ? ", mask " + describe(*spec.mask) : std::string())
              << (spec.scale_tensor ? ", scale " + describe(*spec.scale_tensor) : std::string())
              << (spec.scale ? ", scale " + std::to_string(*spec.scale) : std::string())
              << (spec.causal ? ", causal " + std::to_string(*spec.causal) : std::string())
              << (spec.zero_rows ? ", zero rows" : ""));
    poison(y);
    std::string plan;
    REQUIRE(run_cpu_options(y, x, axis, log_mode, spec, &plan) == SMX_STATUS_SUCCESS);
    INFO("plan " << plan);
    OptionsReference ref = reference_softmax_options(x, axis, log_mode, spec);
    round_overflow(y.dtype, ref.y);
    const std::string failure = compare_to_reference(y, ref.y, log_mode, &ref.z_magnitude, kCpuComputeRtol);
    CHECK(failure == "");
}

}  // namespace

TEST_CASE("each option alone matches the reference for every dtype pair and mode", "[cpu][options]") {
    auto& rng = test_rng();
    for (smxDataType_t x_dtype : kFloating) {
        for (smxDataType_t y_dtype : kFloating) {
            for (bool log_mode : {false, true}) {
                const std::vector<std::int64_t> shape = {3, 5, 37};
                HostTensor x = make_tensor(x_dtype, shape);
                fill_random(x, rng);
                add_special_rows(x);
                HostTensor y = make_tensor(y_dtype, shape);
                HostTensor scale = make_tensor(SMX_DTYPE_F32, {3, 5});
                fill_random(scale, rng, 2.0);
                const HostTensor keep = random_keep_mask(shape, rng, 0.7);
                OptionsSpec spec;
                spec.scale = 0.37;
                check_options(y, x, -1, log_mode, spec);
                spec = {};
                spec.scale_tensor = &scale;
                check_options(y, x, -1, log_mode, spec);
                spec = {};
                spec.mask = &keep;
                check_options(y, x, -1, log_mode, spec);
                for (smxDataType_t mask_dtype : kFloating) {
                    const HostTensor additive = random_additive_mask(mask_dtype, shape, rng);
                    spec = {};
                    spec.mask = &additive;
                    check_options(y, x, -1, log_mode, spec);
                }
                spec = {};
                spec.causal = 0;
                check_options(y, x, -1, log_mode, spec);
                spec = {};
                spec.zero_rows = true;
                check_options(y, x, -1, log_mode, spec);
                spec = {};
                spec.batch_invariant = true;
                check_options(y, x, -1, log_mode, spec);
            }
        }
    }
}

TEST_CASE("options combined, on every axis of random layouts of x and y", "[cpu][options][layout]") {
    for (int trial = 0; trial < 120; ++trial) {
        RandomOptionsCase c;
        make_random_options_case(trial, 1, test_rng(), &c);
        for (bool log_mode : {false, true}) check_options(c.y, c.x, c.axis, log_mode, c.spec);
    }
}

TEST_CASE("broadcast masks: size-1 dims, fewer dims, explicit zero and negative strides, transposed",
          "[cpu][options]") {
    auto& rng = test_rng();
    const std::vector<std::int64_t> shape = {2, 3, 4, 29};
    HostTensor x = make_tensor(SMX_DTYPE_F32, shape);
    fill_random(x, rng);
    HostTensor y = make_tensor(SMX_DTYPE_F32, shape);
    const std::vector<std::vector<std::int64_t>> mask_shapes = {
        {29}, {1, 29}, {4, 29}, {3, 1, 29}, {2, 1, 1, 29}, {2, 3, 4, 1}, {1, 1, 1, 1}, {3, 4, 29}, {2, 3, 4, 29}};
    for (const auto& mask_shape : mask_shapes) {
        for (bool keep : {true, false}) {
            const HostTensor mask =
                keep ? random_keep_mask(mask_shape, rng, 0.7) : random_additive_mask(SMX_DTYPE_BF16, mask_shape, rng);
            OptionsSpec spec;
            spec.mask = &mask;
            check_options(y, x, -1, false, spec);
            check_options(y, x, -1, true, spec);
        }
    }
    // A mask of x's full shape described with zero strides (one row of 29 repeated), and walked backwards.
    HostTensor row = random_keep_mask({29}, rng, 0.7);
    HostTensor repeated = row;
    repeated.shape = shape;
    repeated.strides = {0, 0, 0, 1};
    OptionsSpec spec;
    spec.mask = &repeated;
    check_options(y, x, -1, false, spec);
    HostTensor backwards = make_tensor(SMX_DTYPE_F16, {4, 29}, {-29, -1});
    fill_random(backwards, rng);
    spec.mask = &backwards;
    check_options(y, x, -1, true, spec);
    // Transposed: the mask's axis strided, another of its dims contiguous.
    HostTensor transposed = random_additive_mask(SMX_DTYPE_F32, {4, 29}, rng, {1, 4});
    spec.mask = &transposed;
    check_options(y, x, -1, false, spec);
    // Along a non-last axis, with a mask broadcast along that axis.
    const HostTensor along_axis = random_keep_mask({2, 1, 4, 29}, rng, 0.7);
    spec.mask = &along_axis;
    check_options(y, x, 1, false, spec);
}

TEST_CASE("per-row scales of 0, huge, negative and non-finite; keepdim and strided scale tensors",
          "[cpu][options]") {
    auto& rng = test_rng();
    const std::vector<std::int64_t> shape = {6, 41};
    HostTensor x = make_tensor(SMX_DTYPE_BF16, shape);
    fill_random(x, rng);
    HostTensor y = make_tensor(SMX_DTYPE_F32, shape);
    HostTensor scale = make_tensor(SMX_DTYPE_F32, {6});
    const double factors[] = {0.0, 1e30, -2.5, kInf, kNaN, 1e-30};
    for (int r = 0; r < 6; ++r) scale.set(r, factors[r]);
    OptionsSpec spec;
    spec.scale_tensor = &scale;
    check_options(y, x, 1, false, spec);
    check_options(y, x, 1, true, spec);
    // Keepdim shape [6, 1], and a strided view (every other element of a buffer, walked backwards).
    HostTensor keepdim = make_tensor(SMX_DTYPE_F32, {6, 1});
    fill_random(keepdim, rng);
    spec.scale_tensor = &keepdim;
    check_options(y, x, 1, false, spec);
    HostTensor strided = make_tensor(SMX_DTYPE_F32, {6}, {-2});
    fill_random(strided, rng);
    spec.scale_tensor = &strided;
    check_options(y, x, -1, true, spec);
    // One factor for every row: shape [6] with stride 0.
    HostTensor one = make_tensor(SMX_DTYPE_F32, {6}, {0});
    one.set(0, 3.0);
    spec.scale_tensor = &one;
    check_options(y, x, -1, false, spec);
}

TEST_CASE("scale 0 makes every finite row uniform over its kept elements (checked without the reference)",
          "[cpu][options]") {
    auto& rng = test_rng();
    HostTensor x = make_tensor(SMX_DTYPE_F32, {4, 10});
    fill_random(x, rng);
    HostTensor y = make_tensor(SMX_DTYPE_F64, {4, 10});
    HostTensor mask = make_tensor(SMX_DTYPE_BOOL, {10});
    for (int j = 0; j < 10; ++j) mask.set(j, j % 3 != 0);  // keeps 6 of 10
    OptionsSpec spec;
    spec.scale = 0.0;
    spec.mask = &mask;
    poison(y);
    REQUIRE(run_cpu_options(y, x, 1, false, spec) == SMX_STATUS_SUCCESS);
    for (int r = 0; r < 4; ++r) {
        for (int j = 0; j < 10; ++j) CHECK(y.get(r * 10 + j) == (j % 3 != 0 ? 1.0 / 6.0 : 0.0));
    }
}

TEST_CASE("a keep-mask equals the plain softmax of x with its excluded elements set to -inf", "[cpu][options]") {
    auto& rng = test_rng();
    for (bool log_mode : {false, true}) {
        HostTensor x = make_tensor(SMX_DTYPE_F32, {5, 33});
        fill_random(x, rng);
        HostTensor mask = random_keep_mask({5, 33}, rng, 0.5);
        for (int r = 0; r < 5; ++r) mask.set(r * 33 + r, 1.0);  // at least one kept per row
        HostTensor filled = x;
        for (int i = 0; i < 5 * 33; ++i) {
            if (mask.get(i) == 0.0) filled.set(i, -kInf);
        }
        HostTensor y = make_tensor(SMX_DTYPE_F32, {5, 33});
        OptionsSpec spec;
        spec.mask = &mask;
        poison(y);
        REQUIRE(run_cpu_options(y, x, 1, log_mode, spec) == SMX_STATUS_SUCCESS);
        CHECK(compare_to_reference(y, reference_softmax(filled, 1, log_mode), log_mode) == "");
    }
}

TEST_CASE("rows with nothing to normalize: NaN by default, 0 (log: -inf) with masked_rows zero", "[cpu][options]") {
    auto& rng = test_rng();
    // Row 0: nothing kept by the mask; row 1: its kept elements all -inf in x; row 2: its kept elements -inf by
    // the additive part; row 3: an ordinary row.
    HostTensor x = make_tensor(SMX_DTYPE_F16, {4, 8});
    fill_random(x, rng);
    HostTensor keep = make_tensor(SMX_DTYPE_BOOL, {4, 8});
    for (int i = 0; i < 32; ++i) keep.set(i, i >= 8 && i % 2 == 0);
    for (int j = 0; j < 8; j += 2) x.set(8 + j, -kInf);
    x.set(1, kNaN);  // an excluded NaN in the empty row 0: not read
    HostTensor additive = make_tensor(SMX_DTYPE_F32, {4, 8});
    fill_random(additive, rng);
    for (int j = 0; j < 8; ++j) additive.set(16 + j, -kInf);
    for (bool zero_rows : {false, true}) {
        for (bool log_mode : {false, true}) {
            OptionsSpec spec;
            spec.mask = &keep;
            spec.zero_rows = zero_rows;
            HostTensor y = make_tensor(SMX_DTYPE_F32, {4, 8});
            check_options(y, x, 1, log_mode, spec);
            const double empty = zero_rows ? (log_mode ? -kInf : 0.0) : kNaN;
            for (int j = 0; j < 16; ++j) {
                INFO("element " << j);
                if (std::isnan(empty)) CHECK(std::isnan(y.get(j)));
                else CHECK(y.get(j) == empty);
            }
            spec.mask = &additive;
            check_options(y, x, 1, log_mode, spec);
            for (int j = 16; j < 24; ++j) {
                if (std::isnan(empty)) CHECK(std::isnan(y.get(j)));
                else CHECK(y.get(j) == empty);
            }
        }
    }
}

TEST_CASE("NaN and infinities: excluded ones are not read; a kept NaN or +inf makes the whole row NaN",
          "[cpu][options]") {
    auto& rng = test_rng();
    HostTensor x = make_tensor(SMX_DTYPE_F32, {4, 6});
    fill_random(x, rng);
    HostTensor keep = make_tensor(SMX_DTYPE_BOOL, {6});
    for (int j = 0; j < 6; ++j) keep.set(j, j != 2);
    x.set(0 * 6 + 2, kNaN);   // excluded: row 0 is finite
    x.set(1 * 6 + 2, kInf);   // excluded: row 1 is finite
    x.set(2 * 6 + 3, kNaN);   // kept: row 2 is NaN, its excluded element too
    x.set(3 * 6 + 4, -kInf);  // kept -inf: 0 there
    for (bool log_mode : {false, true}) {
        HostTensor y = make_tensor(SMX_DTYPE_F32, {4, 6});
        OptionsSpec spec;
        spec.mask = &keep;
        check_options(y, x, 1, log_mode, spec);
        for (int j = 0; j < 6; ++j) {
            CHECK(std::isfinite(y.get(0 * 6 + j)) == (log_mode ? j != 2 : true));
            CHECK(std::isfinite(y.get(1 * 6 + j)) == (log_mode ? j != 2 : true));
            CHECK(std::isnan(y.get(2 * 6 + j)));
        }
        CHECK(y.get(3 * 6 + 4) == (log_mode ? -kInf : 0.0));
    }
}

TEST_CASE("causal windows: k = 0, negative, keys - queries, beyond the row, with batch dims", "[cpu][options]") {
    auto& rng = test_rng();
    const std::int64_t queries = 7, keys = 11;
    const std::int64_t offsets[] = {0, -2, keys - queries, -queries - 3, keys + 5,
                                    std::numeric_limits<std::int64_t>::max(), std::numeric_limits<std::int64_t>::min()};
    for (std::int64_t k : offsets) {
        for (bool zero_rows : {false, true}) {
            HostTensor x = make_tensor(SMX_DTYPE_BF16, {2, 3, queries, keys});
            fill_random(x, rng);
            HostTensor y = make_tensor(SMX_DTYPE_BF16, {2, 3, queries, keys});
            OptionsSpec spec;
            spec.causal = k;
            spec.zero_rows = zero_rows;
            check_options(y, x, -1, false, spec);
            check_options(y, x, 3, true, spec);
        }
    }
}

TEST_CASE("causal windows find each row's query in every layout, the spatial one with its contiguous dim first "
          "included",
          "[cpu][options][layout]") {
    auto& rng = test_rng();
    const std::int64_t batch = 3, queries = 5, keys = 6;
    // Strides (1, batch * keys, batch): the batch dim is the contiguous one, the axis strided: a spatial layout
    // whose inner dim (batch) comes before the outer one (queries).
    const std::vector<std::vector<std::int64_t>> layouts = {
        {queries * keys, keys, 1}, {1, batch * keys, batch}, {keys, batch * keys, 1}, {1, batch, batch * queries}};
    for (const auto& strides : layouts) {
        HostTensor x = make_tensor(SMX_DTYPE_F32, {batch, queries, keys}, strides);
        fill_random(x, rng);
        HostTensor y = make_tensor(SMX_DTYPE_F32, {batch, queries, keys}, strides);
        OptionsSpec spec;
        spec.causal = -1;
        check_options(y, x, -1, false, spec);
        const HostTensor keep = random_keep_mask({queries, keys}, rng, 0.8, {1, queries});
        spec.mask = &keep;
        check_options(y, x, -1, true, spec);
    }
}

TEST_CASE("options in place (y == x), and over many rows spread across threads", "[cpu][options]") {
    auto& rng = test_rng();
    HostTensor x = make_tensor(SMX_DTYPE_F32, {256, 4, 333});
    fill_random(x, rng);
    const HostTensor original = x;
    const HostTensor keep = random_keep_mask({4, 333}, rng, 0.7);
    HostTensor scale = make_tensor(SMX_DTYPE_F32, {256, 4});
    fill_random(scale, rng, 1.0);
    OptionsSpec spec;
    spec.mask = &keep;
    spec.scale_tensor = &scale;
    spec.causal = 100;
    REQUIRE(run_cpu_options(x, x, -1, false, spec) == SMX_STATUS_SUCCESS);
    const OptionsReference ref = reference_softmax_options(original, -1, false, spec);
    CHECK(compare_to_reference(x, ref.y, false, &ref.z_magnitude, kCpuComputeRtol) == "");
    HostTensor y = make_tensor(SMX_DTYPE_F16, {256, 4, 333});
    check_options(y, original, -1, true, spec);
}

TEST_CASE("plans: no options and a scale of 1 keep the plain plan; options name themselves", "[cpu][options]") {
    HostTensor x = make_tensor(SMX_DTYPE_F32, {3, 17});
    fill_random(x, test_rng());
    HostTensor y = make_tensor(SMX_DTYPE_F32, {3, 17});
    std::string plan;
    OptionsSpec spec;
    REQUIRE(run_cpu_options(y, x, 1, false, spec, &plan) == SMX_STATUS_SUCCESS);
    CHECK(plan == "cpu reference layout=rows threads=1");
    spec.scale = 1.0;
    REQUIRE(run_cpu_options(y, x, 1, false, spec, &plan) == SMX_STATUS_SUCCESS);
    CHECK(plan == "cpu reference layout=rows threads=1");
    spec.scale = 0.5;
    spec.causal = 2;
    spec.zero_rows = true;
    spec.batch_invariant = true;
    REQUIRE(run_cpu_options(y, x, 1, false, spec, &plan) == SMX_STATUS_SUCCESS);
    CHECK(plan == "cpu reference layout=rows threads=1 options=scale(0.5),causal(2),masked_rows=zero,batch_invariant");
}
