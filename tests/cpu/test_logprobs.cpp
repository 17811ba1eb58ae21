// logsumexp, log-softmax gather and cross-entropy on the CPU backend against the float64 references of
// support/logprobs_reference.hpp: every dtype, every layout kind (rows, spatial, general; per-row operands with
// and without the axis, strided and reversed), special rows, and the edges (K = 0, empty axis, size-1 axis,
// out-of-range indices and targets, every row ignored, zero rows, in place).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "support/environment.hpp"
#include "support/logprobs_reference.hpp"

using namespace smx_test;

namespace {

const smxDataType_t kFloatTypes[] = {SMX_DTYPE_F16, SMX_DTYPE_BF16, SMX_DTYPE_F32, SMX_DTYPE_F64};
const smxDataType_t kIndexTypes[] = {SMX_DTYPE_I32, SMX_DTYPE_I64};

smxDataType_t statistics_dtype(smxDataType_t x) { return x == SMX_DTYPE_F64 ? SMX_DTYPE_F64 : SMX_DTYPE_F32; }

// A problem along an axis: x's shape and strides (empty: row-major), the axis, and the layout it should be.
struct Problem {
    std::vector<std::int64_t> shape;
    std::vector<std::int64_t> strides;
    int axis;
    const char* layout;
};

// One of each layout kind, a batch of rows, a size-1 axis and a 1-d tensor; each with enough rows for
// set_special_rows to reach every kind where it has rows to spare.
const Problem kProblems[] = {
    {{16, 129}, {}, -1, "rows"},
    {{3, 5, 33}, {}, 2, "rows"},
    {{4, 33, 5}, {}, 1, "spatial"},
    {{15, 10}, {1, -16}, 1, "spatial"},  // transposed and reversed: spatial beside a contiguous per-row operand
    {{3, 10, 4}, {1, 12, 3}, 1, "general"},
    {{5, 1}, {}, 1, "rows"},
    {{19}, {}, 0, "rows"},
};

std::string plan_of_logsumexp(const HostTensor& out, const HostTensor& x, int axis) {
    Handle handle(SMX_DEVICE_CPU, 0);
    TensorDesc x_desc(x), out_desc(out);
    smxLogsumexpDescriptor_t desc = nullptr;
    REQUIRE(smxCreateLogsumexpDescriptor(handle.handle, &desc, axis, out_desc.desc, x_desc.desc) == SMX_STATUS_SUCCESS);
    const char* plan = nullptr;
    REQUIRE(smxGetLogsumexpPlan(desc, &plan) == SMX_STATUS_SUCCESS);
    const std::string text = plan;
    smxDestroyLogsumexpDescriptor(desc);
    return text;
}

// Targets in [0, n) with every third row `ignore_index`.
void fill_targets(HostTensor& target, std::int64_t n, std::int64_t ignore_index) {
    fill_indices(target, test_rng(), 0, n - 1);
    const std::vector<std::int64_t> offsets = logical_offsets(target);
    for (std::size_t r = 2; r < offsets.size(); r += 3) set_index(target, offsets[r], ignore_index);
}

}  // namespace

// ---- logsumexp ------------------------------------------------------------------------------------------

TEST_CASE("logsumexp matches the float64 reference for every dtype, layout and special row", "[cpu][logprobs]") {
    for (smxDataType_t dtype : kFloatTypes) {
        for (const Problem& problem : kProblems) {
            for (const auto& [keepdim, stride_factor] : {std::pair{false, 1}, {true, 2}, {false, -1}}) {
                INFO(dtype_name(dtype) << " shape " << problem.shape.size() << "-d axis " << problem.axis << " keepdim "
                                       << keepdim << " out stride x" << stride_factor);
                HostTensor x = make_tensor(dtype, problem.shape, problem.strides);
                fill_random(x, test_rng());
                set_special_rows(x, problem.axis);
                HostTensor out = make_per_row_tensor(statistics_dtype(dtype), problem.shape, problem.axis, keepdim,
                                                     stride_factor);
                poison(out);
                REQUIRE(run_cpu_logsumexp(out, x, problem.axis) == SMX_STATUS_SUCCESS);
                CHECK(compare_to_scaled_reference(out, reference_logsumexp(x, problem.axis)) == "");
            }
        }
    }
}

TEST_CASE("logsumexp names the layout of x and its per-row output in the plan", "[cpu][logprobs]") {
    for (const Problem& problem : kProblems) {
        const HostTensor x = make_tensor(SMX_DTYPE_F32, problem.shape, problem.strides);
        const HostTensor out = make_per_row_tensor(SMX_DTYPE_F32, problem.shape, problem.axis);
        CHECK(plan_of_logsumexp(out, x, problem.axis).find(std::string("layout=") + problem.layout) != std::string::npos);
    }
}

TEST_CASE("logsumexp of an empty axis is -inf per row, and of a size-1 axis the element", "[cpu][logprobs]") {
    HostTensor x = make_tensor(SMX_DTYPE_F32, {4, 0});
    HostTensor out = make_per_row_tensor(SMX_DTYPE_F32, {4, 0}, 1);
    poison(out);
    REQUIRE(run_cpu_logsumexp(out, x, 1) == SMX_STATUS_SUCCESS);
    for (std::int64_t offset : logical_offsets(out)) CHECK(out.get(offset) == -std::numeric_limits<double>::infinity());

    HostTensor column = make_tensor(SMX_DTYPE_BF16, {6, 1});
    fill_random(column, test_rng());
    HostTensor single = make_per_row_tensor(SMX_DTYPE_F32, {6, 1}, 1);
    poison(single);
    REQUIRE(run_cpu_logsumexp(single, column, 1) == SMX_STATUS_SUCCESS);
    for (std::int64_t r = 0; r < 6; ++r) CHECK(single.get(r) == column.get(r));
}

// ---- log_softmax_gather ---------------------------------------------------------------------------------

TEST_CASE("log_softmax_gather matches the reference for every dtype, index dtype, layout and special row",
          "[cpu][logprobs]") {
    for (smxDataType_t dtype : kFloatTypes) {
        for (smxDataType_t index_dtype : kIndexTypes) {
            for (const Problem& problem : kProblems) {
                const int axis = problem.axis < 0 ? problem.axis + static_cast<int>(problem.shape.size()) : problem.axis;
                const std::int64_t n = problem.shape[axis];
                for (std::int64_t k : {std::int64_t{1}, std::int64_t{3}, n + 2}) {  // K beyond n repeats indices
                    INFO(dtype_name(dtype) << " " << dtype_name(index_dtype) << " " << problem.shape.size()
                                           << "-d axis " << axis << " K " << k);
                    HostTensor x = make_tensor(dtype, problem.shape, problem.strides);
                    fill_random(x, test_rng());
                    set_special_rows(x, axis);
                    std::vector<std::int64_t> gathered_shape = problem.shape;
                    gathered_shape[axis] = k;
                    HostTensor index = make_tensor(index_dtype, gathered_shape);
                    fill_indices(index, test_rng(), 0, n - 1);
                    // out column-major: strides of its own, not index's
                    HostTensor out = make_tensor(statistics_dtype(dtype), gathered_shape,
                                                 column_major_strides(gathered_shape));
                    poison(out);
                    REQUIRE(run_cpu_log_softmax_gather(out, x, index, axis) == SMX_STATUS_SUCCESS);
                    CHECK(compare_to_scaled_reference(out, reference_log_softmax_gather(x, index, axis)) == "");
                }
            }
        }
    }
}

TEST_CASE("log_softmax_gather writes +inf for each index outside [0, n), negative ones included", "[cpu][logprobs]") {
    const std::int64_t n = 9;
    HostTensor x = make_tensor(SMX_DTYPE_F32, {4, n});
    fill_random(x, test_rng());
    set_special_rows(x, 1);  // +inf wins even in a NaN row
    HostTensor index = make_tensor(SMX_DTYPE_I64, {4, 6});
    const std::int64_t values[6] = {-1, n, 0, n - 1, INT64_MIN, INT64_MAX};
    for (std::int64_t r = 0; r < 4; ++r) {
        for (std::int64_t k = 0; k < 6; ++k) set_index(index, r * 6 + k, values[k]);
    }
    HostTensor out = make_tensor(SMX_DTYPE_F32, {4, 6});
    poison(out);
    REQUIRE(run_cpu_log_softmax_gather(out, x, index, 1) == SMX_STATUS_SUCCESS);
    const ScaledReference ref = reference_log_softmax_gather(x, index, 1);
    CHECK(compare_to_scaled_reference(out, ref) == "");
    const double inf = std::numeric_limits<double>::infinity();
    for (std::int64_t r = 0; r < 4; ++r) {
        for (std::int64_t k : {0, 1, 4, 5}) CHECK(out.get(r * 6 + k) == inf);
        CHECK(out.get(r * 6 + 2) != inf);
    }

    // An i32 index out of range, and an empty axis where every index is.
    HostTensor empty_x = make_tensor(SMX_DTYPE_F16, {3, 0});
    HostTensor index32 = make_tensor(SMX_DTYPE_I32, {3, 2});
    fill_indices(index32, test_rng(), -3, 3);
    HostTensor all_out = make_tensor(SMX_DTYPE_F32, {3, 2});
    poison(all_out);
    REQUIRE(run_cpu_log_softmax_gather(all_out, empty_x, index32, 1) == SMX_STATUS_SUCCESS);
    for (std::int64_t offset : logical_offsets(all_out)) CHECK(all_out.get(offset) == inf);
}

TEST_CASE("log_softmax_gather with K = 0 succeeds and touches nothing", "[cpu][logprobs]") {
    HostTensor x = make_tensor(SMX_DTYPE_F32, {5, 7});
    fill_random(x, test_rng());
    HostTensor index = make_tensor(SMX_DTYPE_I64, {5, 0});
    HostTensor out = make_tensor(SMX_DTYPE_F32, {5, 0});
    CHECK(run_cpu_log_softmax_gather(out, x, index, 1) == SMX_STATUS_SUCCESS);
}

// ---- cross_entropy --------------------------------------------------------------------------------------

TEST_CASE("cross_entropy matches the reference: every reduction, label smoothing, ignore_index, dtype and layout",
          "[cpu][logprobs]") {
    const smxLossReduction_t reductions[] = {SMX_REDUCTION_NONE, SMX_REDUCTION_SUM, SMX_REDUCTION_MEAN};
    for (smxDataType_t dtype : kFloatTypes) {
        for (const Problem& problem : kProblems) {
            for (smxLossReduction_t reduction : reductions) {
                for (double eps : {0.0, 0.1, 1.0}) {
                    const int axis = problem.axis < 0 ? problem.axis + static_cast<int>(problem.shape.size()) : problem.axis;
                    const std::int64_t n = problem.shape[axis];
                    const std::int64_t ignore_index = eps == 0.1 ? 3 : -100;  // an ignored class inside [0, n) too
                    const smxDataType_t target_dtype = reduction == SMX_REDUCTION_SUM ? SMX_DTYPE_I32 : SMX_DTYPE_I64;
                    // dlogits in each dtype in turn, strided like the logits or row-major
                    const smxDataType_t dlogits_dtype = kFloatTypes[(reduction + static_cast<int>(eps * 10)) % 4];
                    INFO(dtype_name(dtype) << " " << problem.shape.size() << "-d axis " << axis << " reduction "
                                           << reduction << " eps " << eps << " dlogits " << dtype_name(dlogits_dtype));
                    HostTensor logits = make_tensor(dtype, problem.shape, problem.strides);
                    fill_random(logits, test_rng());
                    set_special_rows(logits, axis);
                    const bool keepdim = reduction == SMX_REDUCTION_MEAN;
                    HostTensor target = make_per_row_tensor(target_dtype, problem.shape, axis, keepdim);
                    fill_targets(target, n, ignore_index);
                    const smxCrossEntropyOptions_t options = cross_entropy_options(reduction, ignore_index, eps);
                    HostTensor loss = reduction == SMX_REDUCTION_NONE
                                          ? make_per_row_tensor(statistics_dtype(dtype), problem.shape, axis, false, -1)
                                          : make_tensor(statistics_dtype(dtype), {1, 1});
                    HostTensor lse = make_per_row_tensor(statistics_dtype(dtype), problem.shape, axis, true, 2);
                    const std::vector<std::int64_t> row_major;
                    HostTensor dlogits = make_tensor(dlogits_dtype, problem.shape, eps == 1.0 ? problem.strides : row_major);
                    poison(loss);
                    poison(lse);
                    poison(dlogits);
                    REQUIRE(run_cpu_cross_entropy(loss, &lse, &dlogits, logits, target, axis, options) ==
                            SMX_STATUS_SUCCESS);
                    const CrossEntropyReference ref = reference_cross_entropy(logits, target, axis, options);
                    CHECK(compare_to_scaled_reference(loss, ref.loss) == "");
                    CHECK(compare_to_scaled_reference(lse, ref.lse) == "");
                    CHECK(compare_to_scaled_reference(dlogits, ref.dlogits) == "");
                }
            }
        }
    }
}

TEST_CASE("cross_entropy without lse and dlogits computes the loss alone", "[cpu][logprobs]") {
    HostTensor logits = make_tensor(SMX_DTYPE_BF16, {9, 40});
    fill_random(logits, test_rng());
    HostTensor target = make_per_row_tensor(SMX_DTYPE_I64, {9, 40}, 1);
    fill_targets(target, 40, -100);
    for (smxLossReduction_t reduction : {SMX_REDUCTION_NONE, SMX_REDUCTION_MEAN}) {
        const smxCrossEntropyOptions_t options = cross_entropy_options(reduction, -100, 0.05);
        HostTensor loss = make_tensor(SMX_DTYPE_F32, reduction == SMX_REDUCTION_NONE ? std::vector<std::int64_t>{9}
                                                                                      : std::vector<std::int64_t>{1});
        poison(loss);
        REQUIRE(run_cpu_cross_entropy(loss, nullptr, nullptr, logits, target, 1, options) == SMX_STATUS_SUCCESS);
        CHECK(compare_to_scaled_reference(loss, reference_cross_entropy(logits, target, 1, options).loss) == "");
    }
}

TEST_CASE("cross_entropy writes dlogits over the logits in place", "[cpu][logprobs]") {
    for (smxDataType_t dtype : kFloatTypes) {
        for (const Problem& problem : kProblems) {
            INFO(dtype_name(dtype) << " " << problem.shape.size() << "-d axis " << problem.axis);
            HostTensor logits = make_tensor(dtype, problem.shape, problem.strides);
            fill_random(logits, test_rng());
            set_special_rows(logits, problem.axis);
            const int axis = problem.axis < 0 ? problem.axis + static_cast<int>(problem.shape.size()) : problem.axis;
            HostTensor target = make_per_row_tensor(SMX_DTYPE_I64, problem.shape, axis);
            fill_targets(target, problem.shape[axis], -100);
            const smxCrossEntropyOptions_t options = cross_entropy_options(SMX_REDUCTION_MEAN, -100, 0.2);
            const CrossEntropyReference ref = reference_cross_entropy(logits, target, axis, options);
            HostTensor loss = make_tensor(statistics_dtype(dtype), {1});
            poison(loss);
            REQUIRE(run_cpu_cross_entropy(loss, nullptr, &logits, logits, target, axis, options) == SMX_STATUS_SUCCESS);
            CHECK(compare_to_scaled_reference(loss, ref.loss) == "");
            CHECK(compare_to_scaled_reference(logits, ref.dlogits) == "");
        }
    }
}

TEST_CASE("cross_entropy with every row ignored: mean NaN, sum 0, per-row 0, dlogits 0", "[cpu][logprobs]") {
    HostTensor logits = make_tensor(SMX_DTYPE_F32, {6, 11});
    fill_random(logits, test_rng());
    set_special_rows(logits, 1);  // an ignored NaN row is still 0
    HostTensor target = make_per_row_tensor(SMX_DTYPE_I32, {6, 11}, 1);
    for (std::int64_t r = 0; r < 6; ++r) set_index(target, r, -7);
    for (smxLossReduction_t reduction : {SMX_REDUCTION_NONE, SMX_REDUCTION_SUM, SMX_REDUCTION_MEAN}) {
        for (double eps : {0.0, 0.5}) {
            INFO("reduction " << reduction << " eps " << eps);
            const smxCrossEntropyOptions_t options = cross_entropy_options(reduction, -7, eps);
            HostTensor loss = make_tensor(SMX_DTYPE_F32, {reduction == SMX_REDUCTION_NONE ? 6 : 1});
            HostTensor dlogits = make_tensor(SMX_DTYPE_F32, {6, 11});
            poison(loss);
            poison(dlogits);
            REQUIRE(run_cpu_cross_entropy(loss, nullptr, &dlogits, logits, target, 1, options) == SMX_STATUS_SUCCESS);
            for (std::int64_t offset : logical_offsets(dlogits)) REQUIRE(dlogits.get(offset) == 0.0);
            if (reduction == SMX_REDUCTION_MEAN) CHECK(std::isnan(loss.get(0)));
            else for (std::int64_t offset : logical_offsets(loss)) CHECK(loss.get(offset) == 0.0);
        }
    }
}

TEST_CASE("cross_entropy gives a target out of range loss NaN and dlogits NaN in its row only", "[cpu][logprobs]") {
    HostTensor logits = make_tensor(SMX_DTYPE_F64, {5, 8});
    fill_random(logits, test_rng());
    HostTensor target = make_per_row_tensor(SMX_DTYPE_I64, {5, 8}, 1);
    const std::int64_t targets[5] = {0, 8, 7, -1, -100};
    for (std::int64_t r = 0; r < 5; ++r) set_index(target, r, targets[r]);
    for (smxLossReduction_t reduction : {SMX_REDUCTION_NONE, SMX_REDUCTION_MEAN}) {
        const smxCrossEntropyOptions_t options = cross_entropy_options(reduction, -100, 0.1);
        HostTensor loss = make_tensor(SMX_DTYPE_F64, {reduction == SMX_REDUCTION_NONE ? 5 : 1});
        HostTensor dlogits = make_tensor(SMX_DTYPE_F32, {5, 8});
        poison(loss);
        poison(dlogits);
        REQUIRE(run_cpu_cross_entropy(loss, nullptr, &dlogits, logits, target, 1, options) == SMX_STATUS_SUCCESS);
        const CrossEntropyReference ref = reference_cross_entropy(logits, target, 1, options);
        CHECK(compare_to_scaled_reference(loss, ref.loss) == "");
        CHECK(compare_to_scaled_reference(dlogits, ref.dlogits) == "");
        for (std::int64_t c = 0; c < 8; ++c) {
            CHECK(std::isnan(dlogits.get(8 + c)));
            CHECK(std::isnan(dlogits.get(24 + c)));
            CHECK(std::isfinite(dlogits.get(c)));
            CHECK(dlogits.get(32 + c) == 0.0);
        }
        if (reduction == SMX_REDUCTION_NONE) {
            CHECK(std::isnan(loss.get(1)));
            CHECK(std::isfinite(loss.get(0)));
            CHECK(loss.get(4) == 0.0);
        } else {
            CHECK(std::isnan(loss.get(0)));
        }
    }
}

TEST_CASE("cross_entropy of zero rows writes a reduced loss: sum 0, mean NaN", "[cpu][logprobs]") {
    HostTensor logits = make_tensor(SMX_DTYPE_F32, {0, 5});
    HostTensor target = make_tensor(SMX_DTYPE_I64, {0});
    for (smxLossReduction_t reduction : {SMX_REDUCTION_SUM, SMX_REDUCTION_MEAN}) {
        HostTensor loss = make_tensor(SMX_DTYPE_F32, {1});
        poison(loss);
        REQUIRE(run_cpu_cross_entropy(loss, nullptr, nullptr, logits, target, 1, cross_entropy_options(reduction)) ==
                SMX_STATUS_SUCCESS);
        if (reduction == SMX_REDUCTION_SUM) CHECK(loss.get(0) == 0.0);
        else CHECK(std::isnan(loss.get(0)));
    }
    // No classes: every target is out of range (NaN) or ignored (0); lse -inf.
    HostTensor no_classes = make_tensor(SMX_DTYPE_F32, {2, 0});
    HostTensor two_targets = make_tensor(SMX_DTYPE_I64, {2});
    set_index(two_targets, 0, 0);
    set_index(two_targets, 1, -100);
    HostTensor loss = make_tensor(SMX_DTYPE_F32, {2});
    HostTensor lse = make_tensor(SMX_DTYPE_F32, {2});
    poison(loss);
    poison(lse);
    REQUIRE(run_cpu_cross_entropy(loss, &lse, nullptr, no_classes, two_targets, 1,
                                  cross_entropy_options(SMX_REDUCTION_NONE)) == SMX_STATUS_SUCCESS);
    CHECK(std::isnan(loss.get(0)));
    CHECK(loss.get(1) == 0.0);
    CHECK(lse.get(0) == -std::numeric_limits<double>::infinity());
}

TEST_CASE("a reduced cross_entropy gives the same bits whatever the CPU thread count", "[cpu][logprobs]") {
    // 64 rows of 4096: a thread per row is allowed, so the handles below split the rows differently.
    HostTensor logits = make_tensor(SMX_DTYPE_F32, {64, 4096});
    fill_random(logits, test_rng(), 10.0);
    HostTensor target = make_per_row_tensor(SMX_DTYPE_I64, {64, 4096}, 1);
    fill_targets(target, 4096, -100);
    std::vector<float> results;
    for (const char* threads : {"1", "3", "64"}) {
        const ScopedEnvironment environment("SMX_CPU_THREADS", threads);
        for (smxLossReduction_t reduction : {SMX_REDUCTION_SUM, SMX_REDUCTION_MEAN}) {
            HostTensor loss = make_tensor(SMX_DTYPE_F32, {1});
            REQUIRE(run_cpu_cross_entropy(loss, nullptr, nullptr, logits, target, 1,
                                          cross_entropy_options(reduction, -100, 0.1)) == SMX_STATUS_SUCCESS);
            results.push_back(static_cast<float>(loss.get(0)));
        }
    }
    for (std::size_t i = 2; i < results.size(); ++i) {
        CHECK(std::memcmp(&results[i], &results[i % 2], sizeof(float)) == 0);
    }
}
