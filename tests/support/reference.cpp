// reference.cpp - the tests' float64 reference and tensor helpers (see reference.hpp).
#include "support/reference.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <sstream>

#include "common/dtype.hpp"

namespace smx_test {

std::size_t dtype_size(smxDataType_t dtype) { return smx::dtype_size(dtype); }
const char* dtype_name(smxDataType_t dtype) { return smx::dtype_name(dtype); }

std::int64_t HostTensor::numel() const {
    std::int64_t n = 1;
    for (std::int64_t d : shape) n *= d;
    return n;
}

double HostTensor::get(std::int64_t element_offset) const { return smx::load_as_double(data(), dtype, element_offset); }

void HostTensor::set(std::int64_t element_offset, double value) {
    smx::store_from_double(data(), dtype, element_offset, value);
}

std::int64_t HostTensor::offset_of(const std::vector<std::int64_t>& index) const {
    std::int64_t off = 0;
    for (std::size_t d = 0; d < index.size(); ++d) off += index[d] * strides[d];
    return off;
}

std::vector<std::int64_t> row_major_strides(const std::vector<std::int64_t>& shape) {
    std::vector<std::int64_t> strides(shape.size());
    std::int64_t running = 1;
    for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
        strides[d] = running;
        running *= std::max<std::int64_t>(shape[d], 1);
    }
    return strides;
}

HostTensor make_tensor(smxDataType_t dtype, std::vector<std::int64_t> shape, std::vector<std::int64_t> strides,
                       std::int64_t extra_front) {
    HostTensor t;
    t.dtype = dtype;
    t.shape = std::move(shape);
    t.strides = strides.empty() ? row_major_strides(t.shape) : std::move(strides);
    std::int64_t lowest = 0, highest = 0;
    if (t.numel() > 0) {
        for (std::size_t d = 0; d < t.shape.size(); ++d) {
            const std::int64_t extent = t.strides[d] * (t.shape[d] - 1);
            (extent < 0 ? lowest : highest) += extent;
        }
    }
    t.offset = extra_front - lowest;
    t.storage.assign(static_cast<std::size_t>(t.offset + highest + 1) * dtype_size(dtype), 0);
    return t;
}

std::vector<std::int64_t> logical_offsets(const HostTensor& t) {
    std::vector<std::int64_t> offsets;
    const std::int64_t n = t.numel();
    if (n == 0) return offsets;
    offsets.reserve(static_cast<std::size_t>(n));
    std::vector<std::int64_t> index(t.shape.size(), 0);
    for (std::int64_t i = 0; i < n; ++i) {
        offsets.push_back(t.offset_of(index));
        for (int d = t.ndim() - 1; d >= 0; --d) {
            if (++index[d] < t.shape[d]) break;
            index[d] = 0;
        }
    }
    return offsets;
}

void fill_random(HostTensor& t, std::mt19937_64& rng, double scale) {
    std::normal_distribution<double> normal(0.0, scale);
    for (std::int64_t off : logical_offsets(t)) {
        double v = normal(rng);
        if (v == 0.0) v = 0.5;  // never an exact zero
        t.set(off, v);
    }
}

void poison(HostTensor& t) {
    // 0xFF bytes are a NaN in every one of our formats (all-ones exponent, non-zero mantissa).
    std::fill(t.storage.begin(), t.storage.end(), static_cast<unsigned char>(0xFF));
}

std::vector<double> reference_softmax(const HostTensor& x, int axis, bool log_mode) {
    const int ndim = x.ndim();
    if (axis < 0) axis += ndim;
    const std::int64_t n = x.shape[axis];
    const std::int64_t total = x.numel();
    std::vector<double> out(static_cast<std::size_t>(total));
    if (total == 0) return out;
    // Logical row-major strides of the output vector.
    const std::vector<std::int64_t> logical = row_major_strides(x.shape);
    std::vector<std::int64_t> index(ndim, 0);
    for (std::int64_t flat = 0; flat < total; ++flat) {
        // Visit each row once, at its element with index[axis] == 0.
        std::int64_t rest = flat;
        for (int d = 0; d < ndim; ++d) {
            index[d] = rest / logical[d];
            rest %= logical[d];
        }
        if (index[axis] != 0) continue;
        std::vector<double> row(static_cast<std::size_t>(n));
        for (std::int64_t j = 0; j < n; ++j) {
            index[axis] = j;
            row[j] = x.get(x.offset_of(index));
        }
        index[axis] = 0;
        bool has_nan = false;
        double max = -std::numeric_limits<double>::infinity();
        for (double v : row) {
            if (std::isnan(v)) has_nan = true;
            else max = std::max(max, v);
        }
        double sum = 0.0;
        for (double v : row) sum += std::exp(v - max);
        for (std::int64_t j = 0; j < n; ++j) {
            double value;
            if (has_nan || std::isnan(sum)) value = std::numeric_limits<double>::quiet_NaN();
            else value = log_mode ? (row[j] - max) - std::log(sum) : std::exp(row[j] - max) / sum;
            out[static_cast<std::size_t>(flat + j * logical[axis])] = value;
        }
    }
    return out;
}

double relative_tolerance(smxDataType_t y_dtype) {
    switch (y_dtype) {
        case SMX_DTYPE_F64: return 1e-12;
        case SMX_DTYPE_F32: return 1e-5;
        case SMX_DTYPE_F16: return 1e-3;
        case SMX_DTYPE_BF16: return 8e-3;
    }
    return 0.0;
}

namespace {

// The absolute slack for softmax outputs too small for their dtype: f16 keeps gradual underflow down to
// 2^-24 (its smallest subnormal), so a result rounded to f16 is within half of that; f32 and bf16 outputs
// below float32's smallest normal may be flushed to 0 (the CUDA kernels' exp does); f64 likewise below its
// own. (f16's smallest normal, 2^-14, would excuse zeroing most outputs of a long row.)
double underflow_slack(smxDataType_t dtype) {
    switch (dtype) {
        case SMX_DTYPE_F64: return std::numeric_limits<double>::min();
        case SMX_DTYPE_F32: return std::numeric_limits<float>::min();
        case SMX_DTYPE_F16: return 0x1p-24;
        case SMX_DTYPE_BF16: return 0x1p-126;
    }
    return 0.0;
}

}  // namespace

std::string compare_to_reference(const HostTensor& y, const std::vector<double>& ref, bool log_mode) {
    const std::vector<std::int64_t> offsets = logical_offsets(y);
    const double rtol = relative_tolerance(y.dtype);
    const double floor = underflow_slack(y.dtype);
    std::size_t failures = 0;
    double worst_ratio = 0.0;
    std::size_t worst = 0;
    for (std::size_t i = 0; i < offsets.size(); ++i) {
        const double got = y.get(offsets[i]);
        const double want = ref[i];
        bool ok;
        double ratio = 0.0;
        if (std::isnan(want) || std::isnan(got)) {
            ok = std::isnan(want) && std::isnan(got);
            ratio = ok ? 0.0 : std::numeric_limits<double>::infinity();
        } else if (std::isinf(want) || std::isinf(got)) {
            ok = got == want;
            ratio = ok ? 0.0 : std::numeric_limits<double>::infinity();
        } else {
            const double allowed = log_mode ? rtol * (std::fabs(want) + 1.0) : rtol * std::fabs(want) + floor;
            ratio = std::fabs(got - want) / allowed;
            ok = ratio <= 1.0;
        }
        if (!ok) ++failures;
        if (ratio > worst_ratio || (!ok && failures == 1)) {
            worst_ratio = ratio;
            worst = i;
        }
    }
    if (failures == 0) return "";
    std::ostringstream text;
    text.precision(10);
    text << failures << " of " << offsets.size() << " elements out of tolerance (" << dtype_name(y.dtype)
         << " rtol " << rtol << "); worst at logical index " << worst << ": got " << y.get(offsets[worst])
         << ", expected " << ref[worst] << " (error/allowed = " << worst_ratio << ")";
    return text.str();
}

TensorDesc::TensorDesc(const HostTensor& t) {
    smxCreateTensorDescriptor(&desc, t.dtype, t.ndim(), t.shape.data(), t.strides.data());
}

TensorDesc::TensorDesc(smxDataType_t dtype, const std::vector<std::int64_t>& shape,
                       const std::vector<std::int64_t>& strides) {
    smxCreateTensorDescriptor(&desc, dtype, static_cast<int>(shape.size()), shape.data(),
                              strides.empty() ? nullptr : strides.data());
}

smxStatus_t run_cpu(HostTensor& y, const HostTensor& x, int axis, bool log_mode) {
    Handle handle(SMX_DEVICE_CPU, 0);
    if (handle.status != SMX_STATUS_SUCCESS) return handle.status;
    TensorDesc x_desc(x), y_desc(y);
    SoftmaxDesc desc(handle.handle, log_mode ? SMX_LOG_SOFTMAX : SMX_SOFTMAX, axis, y_desc.desc, x_desc.desc);
    if (desc.status != SMX_STATUS_SUCCESS) return desc.status;
    size_t workspace_bytes = 0;
    smxStatus_t status = smxGetSoftmaxWorkspaceSize(desc.desc, &workspace_bytes);
    if (status != SMX_STATUS_SUCCESS) return status;
    std::vector<unsigned char> workspace(workspace_bytes);
    // In-place when the caller passes the same tensor object for y and x.
    const void* x_data = (&x == &y) ? y.data() : x.data();
    return smxSoftmaxForward(desc.desc, workspace.data(), workspace_bytes, y.data(), x_data, nullptr);
}

std::mt19937_64& test_rng() {
    static std::mt19937_64 rng = [] {
        std::uint64_t seed;
        if (const char* text = std::getenv("SMX_TEST_SEED")) {
            seed = std::strtoull(text, nullptr, 10);
        } else {
            seed = static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
        }
        std::fprintf(stderr, "smx tests: random seed %llu (set SMX_TEST_SEED to replay)\n",
                     static_cast<unsigned long long>(seed));
        return std::mt19937_64(seed);
    }();
    return rng;
}

}  // namespace smx_test
