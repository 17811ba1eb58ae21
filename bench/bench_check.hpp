// bench_check.hpp - the correctness check every case passes before it is timed: y against smx's CPU
// backend computing in float64 on the same inputs, over the whole tensor or, for big ones, sampled rows.
#pragma once

#include <cstdint>
#include <random>
#include <string>

#include "bench_device.hpp"
#include "bench_grid.hpp"

namespace smx_bench {

// Tensors with more elements than this are checked on sampled rows (first, last, and random ones).
constexpr std::int64_t full_check_max_elements = std::int64_t{1} << 26;
// Random rows checked, besides the first and the last, when sampling.
constexpr int sampled_random_rows = 64;

struct CheckResult {
    bool passed = false;
    double max_error_ratio = 0.0;  // worst |y - ref| / allowed error; over 1 fails; infinite for NaN
    std::int64_t rows_checked = 0;
    bool sampled = false;          // false: every row was checked
    std::string detail;            // the worst element ("row 5 col 17: got ..., expected ...")
};

// Relative tolerance per output dtype: f32 1e-5, f16 1e-3, bf16 8e-3, f64 1e-12.
double relative_tolerance(smxDataType_t y_dtype);

// Reads x and y (on `device`, laid out as `layout`) back and compares y with the float64 result of the
// CPU backend (through `cpu_handle`) on the same x. Allowed error per element: softmax
// rtol * |ref| + smallest normal of y's dtype; log-softmax rtol * (|ref| + 1). Throws BenchError if an
// smx call or a copy fails.
CheckResult check_against_reference(BenchDevice& device, smxHandle_t cpu_handle, const Layout& layout,
                                    DtypePair dtypes, smxSoftmaxMode_t mode, const void* x, const void* y,
                                    std::mt19937_64& rng);

// The backward's check: reads dy, y (dtypes.y, the forward's output dtype) and dx (dtypes.x, the forward's
// input dtype) back and compares dx with the formulas in float64 on the same dy and y:
//   softmax:     dx = y * (dy - sum(dy * y))        log-softmax: dx = dy - exp(y) * sum(dy)
// Allowed error per element: rtol * scale + smallest normal of dx's dtype, where rtol is dx's (float32's where
// that is larger and no operand is f64: what the kernels compute in) and the scale is what rounding errors
// grow with: softmax |y| * (|dy| + sum|dy * y|), log-softmax |dy| + exp(y) * sum|dy|.
CheckResult check_backward_against_reference(BenchDevice& device, const Layout& layout, DtypePair dtypes,
                                             smxSoftmaxMode_t mode, const void* dy, const void* y, const void* dx,
                                             std::mt19937_64& rng);

}  // namespace smx_bench
