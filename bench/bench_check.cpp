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

// One tensor whose rows are checked: its device data and dtype, and a host copy of all of it where every
// row is checked (two bulk copies beat one copy per row).
struct RowSource {
    RowSource(const void* data, smxDataType_t type) : device_data(data), dtype(type) {}
    const void* device_data;
    smxDataType_t dtype;
    std::vector<unsigned char> host;
};

// The rows a check reads (all, or sampled for big tensors), in batches of about batch_elements, each read
// densely into doubles; fills the result's rows_checked and sampled.
class RowReader {
public:
    RowReader(BenchDevice& device, const Layout& layout, std::mt19937_64& rng, CheckResult& result)
        : device_(device), layout_(layout), geometry_(layout) {
        result.sampled = layout.numel() > full_check_max_elements && geometry_.rows > sampled_random_rows + 2;
        sampled_ = result.sampled;
        if (geometry_.rows > 0 && geometry_.row_len > 0) rows_ = choose_rows(geometry_.rows, sampled_, rng);
        result.rows_checked = static_cast<std::int64_t>(rows_.size());
    }

    std::int64_t row_len() const { return geometry_.row_len; }

    void prepare(RowSource& source) const {
        if (sampled_ || rows_.empty()) return;
        source.host.resize(layout_.span() * dtype_size(source.dtype));
        device_.copy_to_host(source.host.data(), source.device_data, source.host.size());
    }

    // Calls check(batch's row numbers) for each batch of rows.
    template <class Check>
    void for_each_batch(const Check& check) const {
        const std::int64_t rows_per_batch = std::max<std::int64_t>(1, batch_elements / std::max<std::int64_t>(row_len(), 1));
        for (std::size_t first = 0; first < rows_.size(); first += rows_per_batch) {
            const std::size_t end = std::min(rows_.size(), first + static_cast<std::size_t>(rows_per_batch));
            check(std::vector<std::int64_t>(rows_.begin() + first, rows_.begin() + end));
        }
    }

    // The batch's rows of `source`, row after row, as doubles.
    std::vector<double> read(const RowSource& source, const std::vector<std::int64_t>& batch_rows) const {
        const std::size_t element_bytes = dtype_size(source.dtype);
        std::vector<unsigned char> bytes(batch_rows.size() * geometry_.row_len * element_bytes);
        for (std::size_t r = 0; r < batch_rows.size(); ++r) {
            fetch_row(device_, source.device_data, sampled_ ? nullptr : &source.host, source.dtype,
                      geometry_.row_offset(layout_, batch_rows[r]), geometry_,
                      bytes.data() + r * geometry_.row_len * element_bytes);
        }
        std::vector<double> values(batch_rows.size() * geometry_.row_len);
        for (std::size_t i = 0; i < values.size(); ++i) values[i] = load_as_double(bytes.data(), source.dtype, i);
        return values;
    }

private:
    BenchDevice& device_;
    const Layout& layout_;
    RowGeometry geometry_;
    bool sampled_ = false;
    std::vector<std::int64_t> rows_;
};

// The worst element of a check: the largest ratio of error to allowed error (infinite for a NaN or infinity
// that the reference does not have, or the reverse), kept in the result with its text; passed while <= 1.
class WorstElement {
public:
    explicit WorstElement(CheckResult& result) : result_(result) { result_.passed = true; }

    void add(double got, double expected, double allowed, std::int64_t row, std::int64_t col) {
        double ratio;
        if (std::isnan(expected) || std::isinf(expected)) {
            ratio = (got == expected || (std::isnan(got) && std::isnan(expected))) ? 0.0 : HUGE_VAL;
        } else if (!std::isfinite(got)) {
            ratio = HUGE_VAL;  // NaN here is an unwritten (poisoned) or wrong output
        } else {
            ratio = std::fabs(got - expected) / allowed;
        }
        if (ratio > result_.max_error_ratio || result_.detail.empty()) {
            result_.max_error_ratio = ratio;
            char text[160];
            std::snprintf(text, sizeof text, "row %lld col %lld: got %.9g, expected %.9g", static_cast<long long>(row),
                          static_cast<long long>(col), got, expected);
            result_.detail = text;
        }
        result_.passed = result_.max_error_ratio <= 1.0;
    }

private:
    CheckResult& result_;
};

}  // namespace

double relative_tolerance(smxDataType_t y_dtype) {
    switch (y_dtype) {
        case SMX_DTYPE_F16: return 1e-3;
        case SMX_DTYPE_BF16: return 8e-3;
        case SMX_DTYPE_F32: return 1e-5;
        case SMX_DTYPE_F64: return 1e-12;
        case SMX_DTYPE_I32:
        case SMX_DTYPE_I64: return 0.0;  // indices are exact
        case SMX_DTYPE_BOOL: break;  // not an output dtype
    }
    return 0.0;
}

std::vector<double> reference_softmax(smxHandle_t cpu_handle, smxSoftmaxMode_t mode, const std::vector<double>& x,
                                      std::int64_t rows, std::int64_t row_len, smxSoftmaxOptions_t options,
                                      const void* scale, const void* mask) {
    const std::int64_t shape[2] = {rows, row_len};
    smxTensorDescriptor_t tensor = nullptr;
    check_smx(smxCreateTensorDescriptor(&tensor, SMX_DTYPE_F64, 2, shape, nullptr), "reference tensor descriptor");
    smxSoftmaxDescriptor_t softmax = nullptr;
    const smxStatus_t created =
        smxCreateSoftmaxDescriptorWithOptions(cpu_handle, &softmax, mode, 1, tensor, tensor, options);
    smxDestroyTensorDescriptor(tensor);
    check_smx(created, "reference softmax descriptor");
    std::vector<double> y(x.size());
    size_t workspace_bytes = 0;
    smxStatus_t status = smxGetSoftmaxWorkspaceSize(softmax, &workspace_bytes);
    std::vector<unsigned char> workspace(workspace_bytes);
    if (status == SMX_STATUS_SUCCESS) {
        status = smxSoftmaxForwardWithOptions(softmax, workspace.data(), workspace_bytes, y.data(), x.data(), scale,
                                              mask, nullptr);
    }
    smxDestroySoftmaxDescriptor(softmax);
    check_smx(status, "reference softmax on the CPU backend");
    return y;
}

CheckResult check_against(BenchDevice& device, const Layout& layout, DtypePair dtypes, smxSoftmaxMode_t mode,
                          const void* x, const void* y, const std::vector<RowTensor>& extra,
                          const RowReference& reference, std::mt19937_64& rng) {
    CheckResult result;
    RowReader reader(device, layout, rng, result);
    RowSource x_rows(x, dtypes.x), y_rows(y, dtypes.y);
    std::vector<RowSource> extra_rows;
    for (const RowTensor& tensor : extra) extra_rows.emplace_back(tensor.data, tensor.dtype);
    reader.prepare(x_rows);
    reader.prepare(y_rows);
    for (RowSource& source : extra_rows) reader.prepare(source);
    const double rtol = relative_tolerance(dtypes.y);
    const double slack = underflow_slack(dtypes.y);
    const bool log_mode = mode == SMX_LOG_SOFTMAX;
    WorstElement worst(result);
    reader.for_each_batch([&](const std::vector<std::int64_t>& batch_rows) {
        const std::vector<double> x_values = reader.read(x_rows, batch_rows);
        const std::vector<double> y_values = reader.read(y_rows, batch_rows);
        std::vector<std::vector<double>> extra_values;
        for (const RowSource& source : extra_rows) extra_values.push_back(reader.read(source, batch_rows));
        const std::vector<double> expected_values = reference({batch_rows, reader.row_len(), x_values, extra_values});
        for (std::size_t i = 0; i < expected_values.size(); ++i) {
            const double expected = expected_values[i];
            const double allowed = log_mode ? rtol * (std::fabs(expected) + 1.0) : rtol * std::fabs(expected) + slack;
            worst.add(y_values[i], expected, allowed, batch_rows[i / reader.row_len()], i % reader.row_len());
        }
    });
    return result;
}

CheckResult check_against_reference(BenchDevice& device, smxHandle_t cpu_handle, const Layout& layout,
                                    DtypePair dtypes, smxSoftmaxMode_t mode, const void* x, const void* y,
                                    std::mt19937_64& rng) {
    return check_against(device, layout, dtypes, mode, x, y, {}, [&](const CheckedRows& batch) {
        return reference_softmax(cpu_handle, mode, batch.x, static_cast<std::int64_t>(batch.rows.size()),
                                 batch.row_len);
    }, rng);
}

CheckResult check_backward_against_reference(BenchDevice& device, const Layout& layout, DtypePair dtypes,
                                             smxSoftmaxMode_t mode, const void* dy, const void* y, const void* dx,
                                             std::mt19937_64& rng) {
    CheckResult result;
    RowReader reader(device, layout, rng, result);
    RowSource dy_rows(dy, dtypes.y), y_rows(y, dtypes.y), dx_rows(dx, dtypes.x);
    reader.prepare(dy_rows);
    reader.prepare(y_rows);
    reader.prepare(dx_rows);
    // dx's own rounding, or what the kernels compute in where that is coarser (float32 unless f64 is involved).
    const bool f64 = dtypes.x == SMX_DTYPE_F64 || dtypes.y == SMX_DTYPE_F64;
    const double rtol = std::max(relative_tolerance(dtypes.x), relative_tolerance(f64 ? SMX_DTYPE_F64 : SMX_DTYPE_F32));
    const double slack = underflow_slack(dtypes.x);
    const bool log_mode = mode == SMX_LOG_SOFTMAX;
    const std::int64_t n = reader.row_len();
    WorstElement worst(result);
    reader.for_each_batch([&](const std::vector<std::int64_t>& batch_rows) {
        const std::vector<double> dy_values = reader.read(dy_rows, batch_rows);
        const std::vector<double> y_values = reader.read(y_rows, batch_rows);
        const std::vector<double> dx_values = reader.read(dx_rows, batch_rows);
        for (std::size_t r = 0; r < batch_rows.size(); ++r) {
            const double* row_dy = &dy_values[r * n];
            const double* row_y = &y_values[r * n];
            // softmax: sum(dy * y); log-softmax: sum(dy); and the sum of the terms' magnitudes, the error scale.
            double sum = 0.0, magnitude = 0.0;
            for (std::int64_t j = 0; j < n; ++j) {
                const double term = log_mode ? row_dy[j] : row_dy[j] * row_y[j];
                sum += term;
                magnitude += std::fabs(term);
            }
            for (std::int64_t j = 0; j < n; ++j) {
                const double weight = log_mode ? std::exp(row_y[j]) : 0.0;
                const double expected = log_mode ? row_dy[j] - weight * sum : row_y[j] * (row_dy[j] - sum);
                const double scale = log_mode ? std::fabs(row_dy[j]) + weight * magnitude
                                              : std::fabs(row_y[j]) * (std::fabs(row_dy[j]) + magnitude);
                worst.add(dx_values[r * n + j], expected, rtol * scale + slack, batch_rows[r], j);
            }
        }
    });
    return result;
}

}  // namespace smx_bench
