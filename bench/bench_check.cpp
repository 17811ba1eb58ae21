// bench_check.cpp - gathers rows of x and y to the host and compares y with a float64 reference.
#include "bench_check.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <set>
#include <vector>

#include "bench_data.hpp"

namespace smx_bench {
namespace {

// Rows are compared in batches of about this many elements, to bound host memory.
constexpr std::int64_t batch_elements = std::int64_t{1} << 22;

// The geometry of "rows" along the softmax axis of a layout.
struct RowGeometry {
    int axis = 0;
    std::int64_t row_len = 0;     // elements along the axis
    std::int64_t rows = 0;        // product of the other dims
    std::int64_t axis_stride = 0; // elements between consecutive entries of a row

    explicit RowGeometry(const Layout& layout) {
        const int ndim = static_cast<int>(layout.shape.size());
        axis = layout.axis < 0 ? layout.axis + ndim : layout.axis;
        row_len = layout.shape[axis];
        axis_stride = layout.strides[axis];
        rows = row_len > 0 ? layout.numel() / row_len : 0;
    }

    // Element offset of row `row`'s first entry; rows are numbered row-major over the other dims.
    std::int64_t row_offset(const Layout& layout, std::int64_t row) const {
        std::int64_t offset = 0;
        for (int d = static_cast<int>(layout.shape.size()) - 1; d >= 0; --d) {
            if (d == axis) continue;
            offset += (row % layout.shape[d]) * layout.strides[d];
            row /= layout.shape[d];
        }
        return offset;
    }
};

std::vector<std::int64_t> choose_rows(std::int64_t rows, bool sample, std::mt19937_64& rng) {
    std::vector<std::int64_t> chosen;
    if (!sample || rows <= sampled_random_rows + 2) {
        for (std::int64_t row = 0; row < rows; ++row) chosen.push_back(row);
        return chosen;
    }
    std::set<std::int64_t> picked = {0, rows - 1};
    std::uniform_int_distribution<std::int64_t> any_row(0, rows - 1);
    while (static_cast<int>(picked.size()) < sampled_random_rows + 2) picked.insert(any_row(rng));
    return {picked.begin(), picked.end()};
}

// Copies one row of a tensor (dtype `dtype`) to `host_row`, from the device or from a host copy of it.
void fetch_row(BenchDevice& device, const void* device_data, const std::vector<unsigned char>* host_copy,
               smxDataType_t dtype, std::int64_t offset, const RowGeometry& geometry, unsigned char* host_row) {
    const std::size_t element_bytes = dtype_size(dtype);
    const std::int64_t stride_bytes = geometry.axis_stride * static_cast<std::int64_t>(element_bytes);
    if (host_copy != nullptr) {
        const unsigned char* source = host_copy->data() + offset * element_bytes;
        for (std::int64_t k = 0; k < geometry.row_len; ++k) {
            std::copy_n(source + k * stride_bytes, element_bytes, host_row + k * element_bytes);
        }
    } else if (geometry.axis_stride == 1) {
        device.copy_to_host(host_row, static_cast<const unsigned char*>(device_data) + offset * element_bytes,
                            geometry.row_len * element_bytes);
    } else {
        device.gather_to_host(host_row, static_cast<const unsigned char*>(device_data) + offset * element_bytes,
                              element_bytes, stride_bytes, geometry.row_len);
    }
}

// y = softmax(x) in float64 on the CPU backend, for `rows` dense rows of `row_len`.
std::vector<double> cpu_reference(smxHandle_t cpu_handle, smxSoftmaxMode_t mode, const std::vector<double>& x,
                                  std::int64_t rows, std::int64_t row_len) {
    const std::int64_t shape[2] = {rows, row_len};
    smxTensorDescriptor_t tensor = nullptr;
    check_smx(smxCreateTensorDescriptor(&tensor, SMX_DTYPE_F64, 2, shape, nullptr), "reference tensor descriptor");
    smxSoftmaxDescriptor_t softmax = nullptr;
    const smxStatus_t created = smxCreateSoftmaxDescriptor(cpu_handle, &softmax, mode, 1, tensor, tensor);
    smxDestroyTensorDescriptor(tensor);
    check_smx(created, "reference softmax descriptor");
    std::vector<double> y(x.size());
    size_t workspace_bytes = 0;
    smxStatus_t status = smxGetSoftmaxWorkspaceSize(softmax, &workspace_bytes);
    std::vector<unsigned char> workspace(workspace_bytes);
    if (status == SMX_STATUS_SUCCESS) {
        status = smxSoftmaxForward(softmax, workspace.data(), workspace_bytes, y.data(), x.data(), nullptr);
    }
    smxDestroySoftmaxDescriptor(softmax);
    check_smx(status, "reference softmax on the CPU backend");
    return y;
}

}  // namespace

double relative_tolerance(smxDataType_t y_dtype) {
    switch (y_dtype) {
        case SMX_DTYPE_F16: return 1e-3;
        case SMX_DTYPE_BF16: return 8e-3;
        case SMX_DTYPE_F32: return 1e-5;
        case SMX_DTYPE_F64: return 1e-12;
    }
    return 0.0;
}

CheckResult check_against_reference(BenchDevice& device, smxHandle_t cpu_handle, const Layout& layout,
                                    DtypePair dtypes, smxSoftmaxMode_t mode, const void* x, const void* y,
                                    std::mt19937_64& rng) {
    CheckResult result;
    const RowGeometry geometry(layout);
    if (geometry.rows == 0 || geometry.row_len == 0) {
        result.passed = true;
        return result;
    }
    result.sampled = layout.numel() > full_check_max_elements && geometry.rows > sampled_random_rows + 2;
    const std::vector<std::int64_t> rows = choose_rows(geometry.rows, result.sampled, rng);

    // Checking everything: two bulk copies beat one copy per row.
    std::vector<unsigned char> x_host, y_host;
    if (!result.sampled) {
        x_host.resize(layout.span() * dtype_size(dtypes.x));
        y_host.resize(layout.span() * dtype_size(dtypes.y));
        device.copy_to_host(x_host.data(), x, x_host.size());
        device.copy_to_host(y_host.data(), y, y_host.size());
    }

    const double rtol = relative_tolerance(dtypes.y);
    const double slack = underflow_slack(dtypes.y);
    const bool log_mode = mode == SMX_LOG_SOFTMAX;
    const std::int64_t rows_per_batch = std::max<std::int64_t>(1, batch_elements / geometry.row_len);
    std::vector<unsigned char> x_rows, y_rows;
    for (std::size_t first = 0; first < rows.size(); first += rows_per_batch) {
        const std::int64_t batch_rows = std::min<std::int64_t>(rows_per_batch, rows.size() - first);
        const std::int64_t batch_size = batch_rows * geometry.row_len;
        x_rows.resize(batch_size * dtype_size(dtypes.x));
        y_rows.resize(batch_size * dtype_size(dtypes.y));
        for (std::int64_t r = 0; r < batch_rows; ++r) {
            const std::int64_t offset = geometry.row_offset(layout, rows[first + r]);
            fetch_row(device, x, result.sampled ? nullptr : &x_host, dtypes.x, offset, geometry,
                      x_rows.data() + r * geometry.row_len * dtype_size(dtypes.x));
            fetch_row(device, y, result.sampled ? nullptr : &y_host, dtypes.y, offset, geometry,
                      y_rows.data() + r * geometry.row_len * dtype_size(dtypes.y));
        }
        std::vector<double> x_values(batch_size);
        for (std::int64_t i = 0; i < batch_size; ++i) x_values[i] = load_as_double(x_rows.data(), dtypes.x, i);
        const std::vector<double> reference = cpu_reference(cpu_handle, mode, x_values, batch_rows, geometry.row_len);

        for (std::int64_t i = 0; i < batch_size; ++i) {
            const double expected = reference[i];
            const double got = load_as_double(y_rows.data(), dtypes.y, i);
            double ratio;
            if (std::isnan(expected) || std::isinf(expected)) {
                ratio = (got == expected || (std::isnan(got) && std::isnan(expected))) ? 0.0 : HUGE_VAL;
            } else if (!std::isfinite(got)) {
                ratio = HUGE_VAL;  // NaN here is an unwritten (poisoned) or wrong output
            } else {
                const double allowed = log_mode ? rtol * (std::fabs(expected) + 1.0) : rtol * std::fabs(expected) + slack;
                ratio = std::fabs(got - expected) / allowed;
            }
            if (ratio > result.max_error_ratio || result.detail.empty()) {
                result.max_error_ratio = ratio;
                char text[160];
                std::snprintf(text, sizeof text, "row %lld col %lld: got %.9g, expected %.9g",
                              static_cast<long long>(rows[first + i / geometry.row_len]),
                              static_cast<long long>(i % geometry.row_len), got, expected);
                result.detail = text;
            }
        }
    }
    result.rows_checked = static_cast<std::int64_t>(rows.size());
    result.passed = result.max_error_ratio <= 1.0;
    return result;
}

}  // namespace smx_bench
