// bench_check.hpp - the correctness check every case passes before it is timed: y against smx's CPU
// backend computing in float64 on the same inputs, over the whole tensor or, for big ones, sampled rows.
#pragma once

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

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

// y = softmax(x) (or log-softmax) in float64 on the CPU backend for `rows` dense rows of `row_len`, created with
// `options` (NULL: none) whose tensor options describe (rows, row_len) problems, their data at `scale` and
// `mask` (NULL where unset). Throws BenchError if an smx call fails.
std::vector<double> reference_softmax(smxHandle_t cpu_handle, smxSoftmaxMode_t mode, const std::vector<double>& x,
                                      std::int64_t rows, std::int64_t row_len, smxSoftmaxOptions_t options = nullptr,
                                      const void* scale = nullptr, const void* mask = nullptr);

// Another tensor laid out as x whose checked rows a reference needs (a full mask), read as float64.
struct RowTensor {
    const void* data;
    smxDataType_t dtype;
};

// One batch of checked rows as a reference sees it: their row numbers (row-major over x's dims but the axis),
// x's values row after row, and the same rows of each RowTensor the check was given, in its order.
struct CheckedRows {
    const std::vector<std::int64_t>& rows;
    std::int64_t row_len;
    const std::vector<double>& x;
    const std::vector<std::vector<double>>& extra;
};

// y's float64 reference for a batch of checked rows, row after row.
using RowReference = std::function<std::vector<double>(const CheckedRows& batch)>;

// check_against_reference with the reference given: compares y with reference(batch) on the checked rows, with
// the same tolerances; `extra` tensors are read on the same rows for it.
CheckResult check_against(BenchDevice& device, const Layout& layout, DtypePair dtypes, smxSoftmaxMode_t mode,
                          const void* x, const void* y, const std::vector<RowTensor>& extra,
                          const RowReference& reference, std::mt19937_64& rng);

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
