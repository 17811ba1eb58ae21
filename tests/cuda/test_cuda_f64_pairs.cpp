// [cuda] dtype pairs with f64 on one side only (f16/bf16/f32 -> f64 and back, as PyTorch's dtype= takes them):
// computed in double on the general family for every layout, against the float64 reference, with special rows.
#if SMX_TEST_WITH_CUDA

#include <limits>
#include <random>
#include <string>
#include <vector>

#include "cuda_helpers.hpp"

using namespace smx_test;

namespace {

const DtypePair kMixedF64Pairs[] = {{SMX_DTYPE_F16, SMX_DTYPE_F64}, {SMX_DTYPE_BF16, SMX_DTYPE_F64},
                                    {SMX_DTYPE_F32, SMX_DTYPE_F64}, {SMX_DTYPE_F64, SMX_DTYPE_F16},
                                    {SMX_DTYPE_F64, SMX_DTYPE_BF16}, {SMX_DTYPE_F64, SMX_DTYPE_F32}};

struct Problem {
    std::vector<std::int64_t> shape;
    std::vector<std::int64_t> x_strides;  // empty: row-major
    int axis;
};

// Random values, then along the axis from element 0: an all -inf row, a row with one NaN, one with +inf.
HostTensor input_with_special_rows(smxDataType_t dtype, const Problem& problem) {
    HostTensor x = make_tensor(dtype, problem.shape, problem.x_strides);
    fill_random(x, test_rng());
    const int axis = problem.axis < 0 ? problem.axis + static_cast<int>(problem.shape.size()) : problem.axis;
    const std::int64_t row_len = problem.shape[axis];
    const std::int64_t axis_stride = x.strides[axis];
    const std::int64_t row_step = axis == 0 ? x.strides[1] : x.strides[0];  // rows 0, 1, 2 along another dim
    for (std::int64_t j = 0; j < row_len; ++j) x.set(j * axis_stride, -std::numeric_limits<double>::infinity());
    x.set(row_step + (row_len / 2) * axis_stride, std::numeric_limits<double>::quiet_NaN());
    x.set(2 * row_step + (row_len - 1) * axis_stride, std::numeric_limits<double>::infinity());
    return x;
}

}  // namespace

TEST_CASE("cuda f64 pairs: one-sided f64 pairs match the reference on rows, spatial and general layouts",
          "[cuda][sanitize]") {
    CudaHandle handle;
    const Problem problems[] = {
        {{7, 129}, {}, -1},       // rows, a warp per row
        {{3, 5000}, {}, 1},       // rows, a block per row
        {{40, 33, 5}, {}, 1},     // spatial
        {{6, 10}, {1, -8}, 1},    // general: transposed and reversed
    };
    for (const DtypePair& pair : kMixedF64Pairs) {
        for (const Problem& problem : problems) {
            const HostTensor x = input_with_special_rows(pair.x, problem);
            for (bool log_mode : {false, true}) {
                HostTensor y = make_tensor(pair.y, x.shape);
                std::string plan;
                const std::string mismatch = check_on_device(handle.get(), y, x, problem.axis, log_mode, &plan);
                INFO(describe_case(y, x, problem.axis, log_mode) << " | plan: " << plan);
                CHECK(mismatch == "");
                CHECK(kernel_kind(plan) == "general");
            }
        }
    }
}

#endif  // SMX_TEST_WITH_CUDA
