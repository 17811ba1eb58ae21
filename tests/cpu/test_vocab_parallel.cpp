// The vocabulary-parallel operators on the CPU backend, as W ranks run them (support/vocab_parallel_runner.hpp),
// against the float64 references of the whole rows: every dtype, every layout kind, 1 to 4 ranks (uneven shards,
// a rank without classes), special rows, targets at the shards' edges, ignored rows and targets out of range.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "support/logprobs_reference.hpp"
#include "support/vocab_parallel_runner.hpp"

using namespace smx_test;

namespace {

const smxDataType_t kFloatTypes[] = {SMX_DTYPE_F16, SMX_DTYPE_BF16, SMX_DTYPE_F32, SMX_DTYPE_F64};

smxDataType_t statistics_dtype(smxDataType_t x) { return x == SMX_DTYPE_F64 ? SMX_DTYPE_F64 : SMX_DTYPE_F32; }

// Results derived from the statistics carry their dtype's precision (f32 for every x but f64), whatever the
// output's dtype: the tolerance of an f64 output of f32 statistics is f32's.
double statistics_rtol(smxDataType_t x) { return relative_tolerance(statistics_dtype(x)); }

// The softmax (or log-softmax) reference with the error scales compare_to_reference uses (|y|, or |y| + 1 for
// log), as a ScaledReference: compare_to_scaled_reference then also takes a value past the output dtype's range
// as its infinity, as rounding it once does.
ScaledReference softmax_reference(const HostTensor& x, int axis, bool log_mode) {
    ScaledReference ref;
    ref.dx = reference_softmax(x, axis, log_mode);
    for (double value : ref.dx) ref.scale.push_back(std::fabs(value) + (log_mode ? 1.0 : 0.0));
    return ref;
}

struct Problem {
    std::vector<std::int64_t> shape;
    std::vector<std::int64_t> strides;
    int axis;
};

// Rows, a batch of rows, spatial, general, a size-1 axis and a 1-d tensor, as the log-probability tests take.
const Problem kProblems[] = {
    {{16, 129}, {}, 1},          {{3, 5, 33}, {}, 2}, {{4, 33, 5}, {}, 1},
    {{3, 10, 4}, {1, 12, 3}, 1}, {{5, 1}, {}, 1},     {{19}, {}, 0},
};

// The rank counts and shardings each problem runs with: one rank, two, three with the middle one empty, four.
std::vector<Sharding> shardings(std::int64_t n, int axis) {
    return {split_axis(n, axis, 1), split_axis(n, axis, 2), split_axis(n, axis, 3, 1), split_axis(n, axis, 4)};
}

// Targets in [0, n) with every third row `ignore_index`, and the first rows at the shards' first and last classes.
void fill_targets(HostTensor& target, const Sharding& sharding, std::int64_t n, std::int64_t ignore_index) {
    fill_indices(target, test_rng(), 0, n - 1);
    const std::vector<std::int64_t> offsets = logical_offsets(target);
    for (std::size_t r = 2; r < offsets.size(); r += 3) set_index(target, offsets[r], ignore_index);
    std::size_t r = 0;
    for (int w = 0; w < sharding.ranks() && r + 1 < offsets.size(); ++w) {
        if (sharding.lengths[w] == 0) continue;
        set_index(target, offsets[r++], sharding.starts[w]);
        set_index(target, offsets[r++], sharding.starts[w] + sharding.lengths[w] - 1);
    }
}

// f64 logits near 1e308 (a special row) make the reference's sum of -log-probabilities overflow to +inf with label
// smoothing, where the shards' mean logit keeps the loss finite (and right): those rows are left out there.
bool huge_f64_with_smoothing(smxDataType_t dtype, double eps) { return dtype == SMX_DTYPE_F64 && eps > 0.0; }

std::string describe(const Sharding& sharding) {
    std::string text = std::to_string(sharding.ranks()) + " ranks:";
    for (std::int64_t length : sharding.lengths) text += " " + std::to_string(length);
    return text;
}

// Every element's bits of two tensors of one layout are equal.
bool same_bits(const HostTensor& a, const HostTensor& b) {
    return a.storage.size() == b.storage.size() &&
           std::memcmp(a.storage.data(), b.storage.data(), a.storage.size()) == 0;
}

}  // namespace

TEST_CASE(
    "sharded softmax and log-softmax equal the reference on the whole rows for every dtype pair, layout, rank "
    "count and special row",
    "[cpu][vocab_parallel]") {
    Handle handle(SMX_DEVICE_CPU, 0);
    REQUIRE(handle.status == SMX_STATUS_SUCCESS);
    for (smxDataType_t x_dtype : kFloatTypes) {
        for (const Problem& problem : kProblems) {
            for (const Sharding& sharding : shardings(problem.shape[problem.axis], problem.axis)) {
                for (bool log_mode : {false, true}) {
                    // y in x's dtype, or the next one over: mixed pairs, f64 on one side only included
                    const smxDataType_t y_dtype = log_mode ? kFloatTypes[(x_dtype + sharding.ranks()) % 4] : x_dtype;
                    INFO(dtype_name(x_dtype) << "->" << dtype_name(y_dtype) << " " << problem.shape.size() << "-d axis "
                                             << problem.axis << " " << describe(sharding) << " log " << log_mode);
                    HostTensor x = make_tensor(x_dtype, problem.shape, problem.strides);
                    fill_random(x, test_rng());
                    set_special_rows(x, problem.axis);
                    HostTensor stats = make_gathered_statistics(statistics_dtype(x_dtype), problem.shape, problem.axis,
                                                                sharding.ranks(), SMX_SHARD_SOFTMAX_STATISTICS);
                    HostTensor y = make_tensor(y_dtype, problem.shape);
                    poison(stats);
                    poison(y);
                    HostWorkspaceSource workspace;
                    REQUIRE(run_shard_statistics(handle.handle, workspace, sharding, {&stats, stats.data()},
                                                 {&x, x.data()}, nullptr) == SMX_STATUS_SUCCESS);
                    REQUIRE(run_shard_softmax(handle.handle, workspace, sharding, log_mode, {&y, y.data()},
                                              {&x, x.data()}, {&stats, stats.data()}) == SMX_STATUS_SUCCESS);
                    CHECK(compare_to_scaled_reference(y, softmax_reference(x, problem.axis, log_mode),
                                                      statistics_rtol(x_dtype)) == "");
                }
            }
        }
    }
}

TEST_CASE("a shard's softmax statistics are its (max, sum of exp(x - max)), with NaN, +inf and empty rows marked",
          "[cpu][vocab_parallel]") {
    Handle handle(SMX_DEVICE_CPU, 0);
    HostTensor x = make_tensor(SMX_DTYPE_F32, {4, 3});
    const double rows[4][3] = {
        {1.0, 2.0, 3.0}, {1.0, NAN, 3.0}, {-INFINITY, INFINITY, 0.0}, {-INFINITY, -INFINITY, -INFINITY}};
    for (int r = 0; r < 4; ++r) {
        for (int j = 0; j < 3; ++j) x.set(r * 3 + j, rows[r][j]);
    }
    HostTensor stats = make_gathered_statistics(SMX_DTYPE_F32, x.shape, 1, 1, SMX_SHARD_SOFTMAX_STATISTICS);
    poison(stats);
    HostWorkspaceSource workspace;
    REQUIRE(run_shard_statistics(handle.handle, workspace, split_axis(3, 1, 1), {&stats, stats.data()}, {&x, x.data()},
                                 nullptr) == SMX_STATUS_SUCCESS);
    const auto at = [&](int r, int k) { return stats.get(r * stats.strides[0] + k * stats.strides[1]); };
    CHECK(at(0, 0) == 3.0);
    CHECK(at(0, 1) == Approx(std::exp(-2.0) + std::exp(-1.0) + 1.0).epsilon(1e-6));
    CHECK(std::isnan(at(1, 0)));
    CHECK(at(1, 1) == 0.0);
    CHECK(at(2, 0) == INFINITY);
    CHECK(at(2, 1) == 0.0);
    CHECK(at(3, 0) == -INFINITY);
    CHECK(at(3, 1) == 0.0);
}

TEST_CASE("sharded logsumexp equals the reference on the whole rows", "[cpu][vocab_parallel]") {
    Handle handle(SMX_DEVICE_CPU, 0);
    for (smxDataType_t x_dtype : kFloatTypes) {
        for (const Problem& problem : kProblems) {
            for (const Sharding& sharding : shardings(problem.shape[problem.axis], problem.axis)) {
                INFO(dtype_name(x_dtype) << " " << problem.shape.size() << "-d axis " << problem.axis << " "
                                         << describe(sharding));
                HostTensor x = make_tensor(x_dtype, problem.shape, problem.strides);
                fill_random(x, test_rng());
                set_special_rows(x, problem.axis);
                const smxDataType_t dtype = statistics_dtype(x_dtype);
                HostTensor stats = make_gathered_statistics(dtype, problem.shape, problem.axis, sharding.ranks(),
                                                            SMX_SHARD_SOFTMAX_STATISTICS);
                HostTensor out = make_per_row_tensor(dtype, problem.shape, problem.axis, sharding.ranks() % 2 == 0, -1);
                poison(stats);
                poison(out);
                HostWorkspaceSource workspace;
                REQUIRE(run_shard_statistics(handle.handle, workspace, sharding, {&stats, stats.data()}, {&x, x.data()},
                                             nullptr) == SMX_STATUS_SUCCESS);
                REQUIRE(run_shard_logsumexp(handle.handle, workspace, problem.axis, {&out, out.data()},
                                            {&stats, stats.data()}) == SMX_STATUS_SUCCESS);
                CHECK(compare_to_scaled_reference(out, reference_logsumexp(x, problem.axis)) == "");
            }
        }
    }
}

TEST_CASE(
    "sharded cross-entropy equals the reference on the whole rows: every reduction, label smoothing, "
    "ignore_index, dtype, layout and rank count; every rank's loss the same bits",
    "[cpu][vocab_parallel]") {
    Handle handle(SMX_DEVICE_CPU, 0);
    const smxLossReduction_t reductions[] = {SMX_REDUCTION_NONE, SMX_REDUCTION_SUM, SMX_REDUCTION_MEAN};
    for (smxDataType_t dtype : kFloatTypes) {
        for (const Problem& problem : kProblems) {
            const std::int64_t n = problem.shape[problem.axis];
            for (const Sharding& sharding : shardings(n, problem.axis)) {
                for (smxLossReduction_t reduction : reductions) {
                    for (double eps : {0.0, 0.1, 1.0}) {
                        const std::int64_t ignore_index = eps == 0.1 ? 0 : -100;  // an ignored class inside [0, n) too
                        const smxDataType_t dlogits_dtype = kFloatTypes[(reduction + sharding.ranks()) % 4];
                        INFO(dtype_name(dtype) << " " << problem.shape.size() << "-d axis " << problem.axis << " "
                                               << describe(sharding) << " reduction " << reduction << " eps " << eps
                                               << " dlogits " << dtype_name(dlogits_dtype));
                        HostTensor logits = make_tensor(dtype, problem.shape, problem.strides);
                        fill_random(logits, test_rng());
                        // Special rows make a reduced loss NaN: they are checked per row, the sums on ordinary rows.
                        if (reduction == SMX_REDUCTION_NONE && !huge_f64_with_smoothing(dtype, eps)) {
                            set_special_rows(logits, problem.axis);
                        }
                        HostTensor target =
                            make_per_row_tensor(eps == 1.0 ? SMX_DTYPE_I32 : SMX_DTYPE_I64, problem.shape, problem.axis,
                                                reduction == SMX_REDUCTION_MEAN);
                        fill_targets(target, sharding, n, ignore_index);
                        const smxCrossEntropyOptions_t options = cross_entropy_options(reduction, ignore_index, eps);
                        const smxDataType_t stats_dtype = statistics_dtype(dtype);
                        HostTensor stats =
                            make_gathered_statistics(stats_dtype, problem.shape, problem.axis, sharding.ranks(),
                                                     SMX_SHARD_CROSS_ENTROPY_STATISTICS);
                        HostTensor dlogits = make_tensor(dlogits_dtype, problem.shape);
                        std::vector<HostTensor> losses, lses;
                        for (int w = 0; w < sharding.ranks(); ++w) {
                            losses.push_back(reduction == SMX_REDUCTION_NONE
                                                 ? make_per_row_tensor(stats_dtype, problem.shape, problem.axis)
                                                 : make_tensor(stats_dtype, {1}));
                            lses.push_back(make_per_row_tensor(stats_dtype, problem.shape, problem.axis, true, 2));
                            poison(losses.back());
                            poison(lses.back());
                        }
                        std::vector<Operand> loss_operands, lse_operands;
                        for (int w = 0; w < sharding.ranks(); ++w) {
                            loss_operands.push_back({&losses[w], losses[w].data()});
                            lse_operands.push_back({&lses[w], lses[w].data()});
                        }
                        poison(stats);
                        poison(dlogits);
                        HostWorkspaceSource workspace;
                        const Operand target_operand{&target, target.data()};
                        REQUIRE(run_shard_statistics(handle.handle, workspace, sharding, {&stats, stats.data()},
                                                     {&logits, logits.data()}, &target_operand) == SMX_STATUS_SUCCESS);
                        REQUIRE(run_shard_cross_entropy(handle.handle, workspace, sharding, options, loss_operands,
                                                        lse_operands, {&dlogits, dlogits.data()},
                                                        {&logits, logits.data()}, target_operand,
                                                        {&stats, stats.data()}) == SMX_STATUS_SUCCESS);
                        const CrossEntropyReference ref =
                            reference_cross_entropy(logits, target, problem.axis, options);
                        CHECK(compare_to_scaled_reference(dlogits, ref.dlogits, statistics_rtol(dtype)) == "");
                        CHECK(compare_to_scaled_reference(losses[0], ref.loss) == "");
                        CHECK(compare_to_scaled_reference(lses[0], ref.lse) == "");
                        for (int w = 1; w < sharding.ranks(); ++w) {
                            CHECK(same_bits(losses[w], losses[0]));
                            CHECK(same_bits(lses[w], lses[0]));
                        }
                    }
                }
            }
        }
    }
}

TEST_CASE("sharded cross-entropy writes dlogits over the logits in place", "[cpu][vocab_parallel]") {
    Handle handle(SMX_DEVICE_CPU, 0);
    for (smxDataType_t dtype : kFloatTypes) {
        const std::vector<std::int64_t> shape{12, 37};
        const Sharding sharding = split_axis(37, 1, 3);
        HostTensor logits = make_tensor(dtype, shape);
        const double eps = 0.2;
        fill_random(logits, test_rng());
        if (!huge_f64_with_smoothing(dtype, eps)) set_special_rows(logits, 1);
        HostTensor target = make_per_row_tensor(SMX_DTYPE_I64, shape, 1);
        fill_targets(target, sharding, 37, -100);
        const smxCrossEntropyOptions_t options = cross_entropy_options(SMX_REDUCTION_NONE, -100, eps);
        const CrossEntropyReference ref = reference_cross_entropy(logits, target, 1, options);
        HostTensor stats =
            make_gathered_statistics(statistics_dtype(dtype), shape, 1, 3, SMX_SHARD_CROSS_ENTROPY_STATISTICS);
        std::vector<HostTensor> losses(3, make_per_row_tensor(statistics_dtype(dtype), shape, 1));
        std::vector<Operand> loss_operands;
        for (HostTensor& loss : losses) loss_operands.push_back({&loss, loss.data()});
        HostWorkspaceSource workspace;
        const Operand target_operand{&target, target.data()};
        const Operand logits_operand{&logits, logits.data()};
        REQUIRE(run_shard_statistics(handle.handle, workspace, sharding, {&stats, stats.data()}, logits_operand,
                                     &target_operand) == SMX_STATUS_SUCCESS);
        REQUIRE(run_shard_cross_entropy(handle.handle, workspace, sharding, options, loss_operands, {}, logits_operand,
                                        logits_operand, target_operand, {&stats, stats.data()}) == SMX_STATUS_SUCCESS);
        CHECK(compare_to_scaled_reference(losses[2], ref.loss) == "");
        CHECK(compare_to_scaled_reference(logits, ref.dlogits) == "");
    }
}

TEST_CASE("sharded cross-entropy: targets outside the vocabulary give NaN rows, every row ignored a mean of NaN",
          "[cpu][vocab_parallel]") {
    Handle handle(SMX_DEVICE_CPU, 0);
    const std::vector<std::int64_t> shape{6, 20};
    const Sharding sharding = split_axis(20, 1, 2);
    for (const auto& [reduction, every_row_ignored] :
         {std::pair{SMX_REDUCTION_NONE, false}, {SMX_REDUCTION_MEAN, true}, {SMX_REDUCTION_SUM, true}}) {
        INFO("reduction " << reduction << " every row ignored " << every_row_ignored);
        HostTensor logits = make_tensor(SMX_DTYPE_F32, shape);
        fill_random(logits, test_rng());
        HostTensor target = make_per_row_tensor(SMX_DTYPE_I64, shape, 1);
        const std::int64_t targets[6] = {20, -1, 5, 19, -100, 1000};  // 20 and 1000 past V; -1 below it
        for (int r = 0; r < 6; ++r) set_index(target, r, every_row_ignored ? -100 : targets[r]);
        const smxCrossEntropyOptions_t options = cross_entropy_options(reduction, -100, 0.1);
        HostTensor stats = make_gathered_statistics(SMX_DTYPE_F32, shape, 1, 2, SMX_SHARD_CROSS_ENTROPY_STATISTICS);
        HostTensor dlogits = make_tensor(SMX_DTYPE_F32, shape);
        std::vector<HostTensor> losses(2, reduction == SMX_REDUCTION_NONE ? make_per_row_tensor(SMX_DTYPE_F32, shape, 1)
                                                                          : make_tensor(SMX_DTYPE_F32, {1}));
        std::vector<Operand> loss_operands;
        for (HostTensor& loss : losses) {
            poison(loss);
            loss_operands.push_back({&loss, loss.data()});
        }
        poison(dlogits);
        HostWorkspaceSource workspace;
        const Operand target_operand{&target, target.data()};
        REQUIRE(run_shard_statistics(handle.handle, workspace, sharding, {&stats, stats.data()},
                                     {&logits, logits.data()}, &target_operand) == SMX_STATUS_SUCCESS);
        REQUIRE(run_shard_cross_entropy(handle.handle, workspace, sharding, options, loss_operands, {},
                                        {&dlogits, dlogits.data()}, {&logits, logits.data()}, target_operand,
                                        {&stats, stats.data()}) == SMX_STATUS_SUCCESS);
        const CrossEntropyReference ref = reference_cross_entropy(logits, target, 1, options);
        CHECK(compare_to_scaled_reference(losses[1], ref.loss) == "");
        CHECK(compare_to_scaled_reference(dlogits, ref.dlogits) == "");
        if (reduction == SMX_REDUCTION_MEAN) CHECK(std::isnan(losses[0].get(0)));
        if (reduction == SMX_REDUCTION_SUM) CHECK(losses[0].get(0) == 0.0);
    }
}
