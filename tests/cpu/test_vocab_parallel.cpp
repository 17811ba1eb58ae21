// The vocabulary-parallel operators on the CPU backend, as W ranks run them (support/vocab_parallel_runner.hpp),
// against the float64 references of the whole rows: every dtype, every layout kind, 1 to 4 ranks (uneven shards,
// a rank without classes), special rows, targets at the shards' edges, ignored rows and targets out of range.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "support/logprobs_reference.hpp"
#include "support/vocab_parallel_runner.hpp"

using namespace smx_test;

namespace {

const smxDataType_t kFloatTypes[] = {SMX_DTYPE_F16, SMX_DTYPE_BF16, SMX_DTYPE_F32, SMX_DTYPE_F64};

struct Problem {
    std::vector<std::int64_t> shape;
    std::vector<std::int64_t> strides;
    int axis;
};

// Rows, a batch of rows, spatial, general, a size-1 axis and a 1-d tensor, as the log-probability tests take.
const Problem kProblems[] = {
    {{16, 129}, {}, 1},
    {{3, 5, 33}, {}, 2},
    {{4, 33, 5}, {}, 1},
    {{3, 10, 4}, {1, 12, 3}, 1},
    {{5, 1}, {}, 1},
    {{19}, {}, 0},
};

// The rank counts and shardings each problem runs with: one rank, two, three with the middle one empty, four.
std::vector<Sharding> shardings(std::int64_t n, int axis) {
    return {split_axis(n, axis, 1), split_axis(n, axis, 2), split_axis(n, axis, 3, 1), split_axis(n, axis, 4)};
}

std::string describe(const Sharding& sharding) {
    std::string text = std::to_string(sharding.ranks()) + " ranks:";
    for (std::int64_t length : sharding.lengths) text += " " + std::to_string(length);
    return text;
}

HostTensor random_x(smxDataType_t dtype, const Problem& problem, bool special) {
    HostTensor x = make_tensor(dtype, problem.shape, problem.strides);
    fill_random(x, test_rng());
    if (special) set_special_rows(x, problem.axis);
    return x;
}

}  // namespace

TEST_CASE("sharded softmax and log-softmax equal the reference on the whole rows for every dtype pair, layout, rank "
          "count and special row",
          "[cpu][vocab_parallel]") {
    HostBackend backend;
    for (smxDataType_t x_dtype : kFloatTypes) {
        for (const Problem& problem : kProblems) {
            for (const Sharding& sharding : shardings(problem.shape[problem.axis], problem.axis)) {
                for (bool log_mode : {false, true}) {
                    // y in x's dtype, or another: mixed pairs, f64 on one side only included
                    const smxDataType_t y_dtype = log_mode ? kFloatTypes[(x_dtype + sharding.ranks()) % 4] : x_dtype;
                    INFO(dtype_name(x_dtype) << "->" << dtype_name(y_dtype) << " " << problem.shape.size() << "-d axis "
                                             << problem.axis << " " << describe(sharding) << " log " << log_mode);
                    CHECK(check_sharded_softmax(backend, random_x(x_dtype, problem, true), sharding, log_mode,
                                                y_dtype) == "");
                }
            }
        }
    }
}

TEST_CASE("a shard's softmax statistics are its (max, sum of exp(x - max)), with NaN, +inf and empty rows marked",
          "[cpu][vocab_parallel]") {
    HostBackend backend;
    HostTensor x = make_tensor(SMX_DTYPE_F32, {4, 3});
    const double rows[4][3] = {
        {1.0, 2.0, 3.0}, {1.0, NAN, 3.0}, {-INFINITY, INFINITY, 0.0}, {-INFINITY, -INFINITY, -INFINITY}};
    for (int r = 0; r < 4; ++r) {
        for (int j = 0; j < 3; ++j) x.set(r * 3 + j, rows[r][j]);
    }
    HostTensor stats = make_gathered_statistics(SMX_DTYPE_F32, x.shape, 1, 1, SMX_SHARD_SOFTMAX_STATISTICS);
    poison(stats);
    REQUIRE(run_shard_statistics(backend.handle(), backend.workspace(), split_axis(3, 1, 1), {&stats, stats.data()},
                                 {&x, x.data()}, nullptr) == SMX_STATUS_SUCCESS);
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
    HostBackend backend;
    for (smxDataType_t x_dtype : kFloatTypes) {
        for (const Problem& problem : kProblems) {
            for (const Sharding& sharding : shardings(problem.shape[problem.axis], problem.axis)) {
                INFO(dtype_name(x_dtype) << " " << problem.shape.size() << "-d axis " << problem.axis << " "
                                         << describe(sharding));
                CHECK(check_sharded_logsumexp(backend, random_x(x_dtype, problem, true), sharding,
                                              sharding.ranks() % 2 == 0) == "");
            }
        }
    }
}

TEST_CASE("sharded cross-entropy equals the reference on the whole rows: every reduction, label smoothing, "
          "ignore_index, dtype, layout and rank count; every rank's loss the same bits",
          "[cpu][vocab_parallel]") {
    HostBackend backend;
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
                        // Special rows make a reduced loss NaN: they are checked per row, the sums on ordinary rows.
                        const bool special = reduction == SMX_REDUCTION_NONE;
                        HostTensor target = make_per_row_tensor(eps == 1.0 ? SMX_DTYPE_I32 : SMX_DTYPE_I64,
                                                                problem.shape, problem.axis,
                                                                reduction == SMX_REDUCTION_MEAN);
                        fill_shard_targets(target, sharding, n, ignore_index);
                        CHECK(check_sharded_cross_entropy(backend, random_x(dtype, problem, special), target, sharding,
                                                          cross_entropy_options(reduction, ignore_index, eps),
                                                          dlogits_dtype, false) == "");
                    }
                }
            }
        }
    }
}

TEST_CASE("sharded cross-entropy writes dlogits over the logits in place", "[cpu][vocab_parallel]") {
    HostBackend backend;
    const Problem problem{{12, 37}, {}, 1};
    const Sharding sharding = split_axis(37, 1, 3);
    for (smxDataType_t dtype : kFloatTypes) {
        INFO(dtype_name(dtype));
        const double eps = 0.2;
        HostTensor target = make_per_row_tensor(SMX_DTYPE_I64, problem.shape, 1);
        fill_shard_targets(target, sharding, 37, -100);
        CHECK(check_sharded_cross_entropy(backend, random_x(dtype, problem, true),
                                          target, sharding, cross_entropy_options(SMX_REDUCTION_NONE, -100, eps), dtype,
                                          true) == "");
    }
}

TEST_CASE("sharded cross-entropy: targets outside the vocabulary give NaN rows, every row ignored a mean of NaN",
          "[cpu][vocab_parallel]") {
    HostBackend backend;
    const Problem problem{{6, 20}, {}, 1};
    const Sharding sharding = split_axis(20, 1, 2);
    for (const auto& [reduction, every_row_ignored] :
         {std::pair{SMX_REDUCTION_NONE, false}, {SMX_REDUCTION_MEAN, true}, {SMX_REDUCTION_SUM, true}}) {
        INFO("reduction " << reduction << " every row ignored " << every_row_ignored);
        HostTensor target = make_per_row_tensor(SMX_DTYPE_I64, problem.shape, 1);
        const std::int64_t targets[6] = {20, -1, 5, 19, -100, 1000};  // 20 and 1000 past V; -1 below it
        for (int r = 0; r < 6; ++r) set_index(target, r, every_row_ignored ? -100 : targets[r]);
        CHECK(check_sharded_cross_entropy(backend, random_x(SMX_DTYPE_F32, problem, false), target, sharding,
                                          cross_entropy_options(reduction, -100, 0.1), SMX_DTYPE_F32, false) == "");
    }
}
