// Every dtype pair on the CPU backend (all sixteen among f16/bf16/f32/f64, as PyTorch's dtype= takes them), in
// both modes and three layouts, against the float64 reference with the output dtype's tolerance.
#include <catch2/catch.hpp>

#include <vector>

#include "support/reference.hpp"

using namespace smx_test;

TEST_CASE("every supported dtype pair matches the float64 reference within the output's tolerance", "[cpu][dtype]") {
    const smxDataType_t dtypes[] = {SMX_DTYPE_F16, SMX_DTYPE_BF16, SMX_DTYPE_F32, SMX_DTYPE_F64};
    std::vector<std::pair<smxDataType_t, smxDataType_t>> pairs;
    for (smxDataType_t x : dtypes) {
        for (smxDataType_t y : dtypes) pairs.emplace_back(x, y);
    }
    REQUIRE(pairs.size() == 16);

    struct Problem {
        std::vector<std::int64_t> shape;
        std::vector<std::int64_t> x_strides;  // empty: row-major
        int axis;
    };
    const Problem problems[] = {
        {{7, 129}, {}, -1},            // rows
        {{4, 33, 5}, {}, 1},           // spatial
        {{6, 10}, {1, -8}, 1},         // general: transposed and reversed
    };
    for (const auto& [x_dtype, y_dtype] : pairs) {
        for (const Problem& problem : problems) {
            for (bool log_mode : {false, true}) {
                INFO(dtype_name(x_dtype) << "->" << dtype_name(y_dtype) << " axis " << problem.axis
                                         << (log_mode ? " log" : ""));
                HostTensor x = make_tensor(x_dtype, problem.shape, problem.x_strides);
                HostTensor y = make_tensor(y_dtype, problem.shape);
                fill_random(x, test_rng());
                poison(y);
                REQUIRE(run_cpu(y, x, problem.axis, log_mode) == SMX_STATUS_SUCCESS);
                CHECK(compare_to_reference(y, reference_softmax(x, problem.axis, log_mode), log_mode) == "");
            }
        }
    }
}
