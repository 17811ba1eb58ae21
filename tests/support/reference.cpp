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
#include <thread>

#include "core/dtype.hpp"

namespace smx_test {

namespace {

// The [cuda] tests check tensors of up to 2^25 elements hundreds of times; these helpers spread the
// reference's per-element work over the host's cores. Every split is a function of the element count only,
// so results (and the random inputs) do not depend on the number of cores.

// Runs body(begin, end) over [0, count) in contiguous ranges of at least `grain`, on up to one thread per
// core (serially when one range covers everything). `body` must not throw.
template <class Body>
void parallel_ranges(std::int64_t count, std::int64_t grain, const Body& body) {
    const std::int64_t cores = std::max<std::int64_t>(1, std::thread::hardware_concurrency());
    const std::int64_t threads = std::min(cores, std::max<std::int64_t>(1, count / std::max<std::int64_t>(grain, 1)));
    if (threads <= 1) {
        body(std::int64_t{0}, count);
        return;
    }
    std::vector<std::thread> workers;
    workers.reserve(static_cast<std::size_t>(threads - 1));
    const std::int64_t per_thread = (count + threads - 1) / threads;
    for (std::int64_t t = 1; t < threads; ++t) {
        const std::int64_t begin = std::min(count, t * per_thread), end = std::min(count, begin + per_thread);
        workers.emplace_back([&body, begin, end] { body(begin, end); });
    }
    body(std::int64_t{0}, std::min(count, per_thread));
    for (std::thread& worker : workers) worker.join();
}

// Calls visit(i, offset) for the logical indices i in [begin, end) of `t` (row-major order of its shape),
// with offset the element offset of index i: one division per dimension at `begin`, then an odometer.
template <class Visit>
void for_each_logical(const HostTensor& t, std::int64_t begin, std::int64_t end, const Visit& visit) {
    if (begin >= end) return;
    const int ndim = t.ndim();
    std::vector<std::int64_t> index(static_cast<std::size_t>(ndim), 0);
    std::int64_t rest = begin, offset = 0;
    for (int d = ndim - 1; d >= 0; --d) {
        index[d] = rest % t.shape[d];
        rest /= t.shape[d];
        offset += index[d] * t.strides[d];
    }
    for (std::int64_t i = begin; i < end; ++i) {
        visit(i, offset);
        for (int d = ndim - 1; d >= 0; --d) {
            offset += t.strides[d];
            if (++index[d] < t.shape[d]) break;
            offset -= index[d] * t.strides[d];
            index[d] = 0;
        }
    }
}

// Logical elements per random stream in fill_random, and per range of the element-wise helpers.
constexpr std::int64_t kElementsPerBlock = std::int64_t{1} << 16;

std::int64_t block_count(std::int64_t count) { return (count + kElementsPerBlock - 1) / kElementsPerBlock; }

// Calls body(block, begin, end) for each block of kElementsPerBlock logical indices of [0, count), the
// blocks spread over the cores.
template <class Body>
void for_each_block(std::int64_t count, const Body& body) {
    parallel_ranges(block_count(count), 1, [&](std::int64_t first_block, std::int64_t end_block) {
        for (std::int64_t b = first_block; b < end_block; ++b) {
            body(b, b * kElementsPerBlock, std::min(count, (b + 1) * kElementsPerBlock));
        }
    });
}

}  // namespace

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
    std::vector<std::int64_t> offsets(static_cast<std::size_t>(t.numel()));
    for_each_logical(t, 0, t.numel(), [&](std::int64_t i, std::int64_t offset) { offsets[static_cast<std::size_t>(i)] = offset; });
    return offsets;
}

void fill_random(HostTensor& t, std::mt19937_64& rng, double scale) {
    // One generator per block of kElementsPerBlock logical elements, seeded from `rng` in block order: the
    // values depend on `rng`'s state and the shape only, and the blocks fill in parallel.
    const std::int64_t n = t.numel();
    std::vector<std::uint64_t> seeds(static_cast<std::size_t>(block_count(n)));
    for (std::uint64_t& seed : seeds) seed = rng();
    for_each_block(n, [&](std::int64_t block, std::int64_t begin, std::int64_t end) {
        std::mt19937_64 block_rng(seeds[static_cast<std::size_t>(block)]);
        std::normal_distribution<double> normal(0.0, scale);
        for_each_logical(t, begin, end, [&](std::int64_t, std::int64_t offset) {
            double v = normal(block_rng);
            if (v == 0.0) v = 0.5;  // never an exact zero
            t.set(offset, v);
        });
    });
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
    const std::int64_t rows = total / n;
    // Rows in parallel, each computed whole by one thread in index order (the sum's order is fixed).
    parallel_ranges(rows, std::max<std::int64_t>(1, kElementsPerBlock / n), [&](std::int64_t first_row, std::int64_t end_row) {
        std::vector<double> row(static_cast<std::size_t>(n)), exps(static_cast<std::size_t>(n));
        for (std::int64_t r = first_row; r < end_row; ++r) {
            // Row r's index over the other dimensions (row-major among them), as offsets into x and out.
            std::int64_t rest = r, x_base = 0, out_base = 0;
            for (int d = ndim - 1; d >= 0; --d) {
                if (d == axis) continue;
                const std::int64_t i = rest % x.shape[d];
                rest /= x.shape[d];
                x_base += i * x.strides[d];
                out_base += i * logical[d];
            }
            bool has_nan = false;
            double max = -std::numeric_limits<double>::infinity();
            for (std::int64_t j = 0; j < n; ++j) {
                const double v = x.get(x_base + j * x.strides[axis]);
                row[j] = v;
                if (std::isnan(v)) has_nan = true;
                else max = std::max(max, v);
            }
            double sum = 0.0;
            for (std::int64_t j = 0; j < n; ++j) {
                exps[j] = std::exp(row[j] - max);
                sum += exps[j];
            }
            const double log_sum = std::log(sum);
            for (std::int64_t j = 0; j < n; ++j) {
                double value;
                if (has_nan || std::isnan(sum)) value = std::numeric_limits<double>::quiet_NaN();
                else value = log_mode ? (row[j] - max) - log_sum : exps[j] / sum;
                out[static_cast<std::size_t>(out_base + j * logical[axis])] = value;
            }
        }
    });
    return out;
}

BackwardReference reference_softmax_backward(const HostTensor& dy, const HostTensor& y, int axis, bool log_mode) {
    const int ndim = y.ndim();
    if (axis < 0) axis += ndim;
    const std::int64_t n = y.shape[axis];
    const std::int64_t total = y.numel();
    BackwardReference out;
    out.dx.resize(static_cast<std::size_t>(total));
    out.scale.resize(static_cast<std::size_t>(total));
    if (total == 0) return out;
    const std::vector<std::int64_t> logical = row_major_strides(y.shape);
    const std::int64_t rows = total / n;
    parallel_ranges(rows, std::max<std::int64_t>(1, kElementsPerBlock / n), [&](std::int64_t first_row, std::int64_t end_row) {
        std::vector<double> dys(static_cast<std::size_t>(n)), ys(static_cast<std::size_t>(n));
        for (std::int64_t r = first_row; r < end_row; ++r) {
            std::int64_t rest = r, dy_base = 0, y_base = 0, out_base = 0;
            for (int d = ndim - 1; d >= 0; --d) {
                if (d == axis) continue;
                const std::int64_t i = rest % y.shape[d];
                rest /= y.shape[d];
                dy_base += i * dy.strides[d];
                y_base += i * y.strides[d];
                out_base += i * logical[d];
            }
            double sum = 0.0, abs_sum = 0.0;  // sum(dy * y) and sum|dy * y| (log-softmax: sum(dy), sum|dy|)
            for (std::int64_t j = 0; j < n; ++j) {
                dys[j] = dy.get(dy_base + j * dy.strides[axis]);
                ys[j] = y.get(y_base + j * y.strides[axis]);
                const double term = log_mode ? dys[j] : dys[j] * ys[j];
                sum += term;
                abs_sum += std::fabs(term);
            }
            for (std::int64_t j = 0; j < n; ++j) {
                const std::size_t at = static_cast<std::size_t>(out_base + j * logical[axis]);
                if (log_mode) {
                    const double e = std::exp(ys[j]);
                    out.dx[at] = dys[j] - e * sum;
                    out.scale[at] = std::fabs(dys[j]) + e * abs_sum;
                } else {
                    out.dx[at] = ys[j] * (dys[j] - sum);
                    out.scale[at] = std::fabs(ys[j]) * (std::fabs(dys[j]) + abs_sum);
                }
            }
        }
    });
    return out;
}

double relative_tolerance(smxDataType_t y_dtype) {
    switch (y_dtype) {
        case SMX_DTYPE_F64: return 1e-12;
        case SMX_DTYPE_F32: return 1e-5;
        case SMX_DTYPE_F16: return 1e-3;
        case SMX_DTYPE_BF16: return 8e-3;
        case SMX_DTYPE_I32:
        case SMX_DTYPE_I64:
        case SMX_DTYPE_BOOL: break;  // not an output dtype
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
        case SMX_DTYPE_I32:
        case SMX_DTYPE_I64:
        case SMX_DTYPE_BOOL: break;  // not an output dtype
    }
    return 0.0;
}

}  // namespace

std::string compare_to_reference(const HostTensor& y, const std::vector<double>& ref, bool log_mode) {
    return compare_to_reference(y, ref, log_mode, nullptr, 0.0);
}

std::string compare_to_reference(const HostTensor& y, const std::vector<double>& ref, bool log_mode,
                                 const std::vector<double>* input_error, double input_rtol) {
    if (y.numel() != static_cast<std::int64_t>(ref.size())) {
        return "the output has " + std::to_string(y.numel()) + " elements, the reference " + std::to_string(ref.size());
    }
    const double rtol = relative_tolerance(y.dtype);
    const double floor = underflow_slack(y.dtype);
    // Each range finds its failures and its worst element (the first of its largest error/allowed ratios);
    // the ranges' results then merge in index order, so the report is the same as a serial pass's.
    struct Worst {
        std::int64_t failures = 0;
        double ratio = 0.0;
        std::int64_t index = 0;
    };
    const std::int64_t n = static_cast<std::int64_t>(ref.size());
    std::vector<Worst> block_worst(static_cast<std::size_t>(block_count(n)));
    for_each_block(n, [&](std::int64_t block, std::int64_t begin, std::int64_t end) {
        Worst& worst = block_worst[static_cast<std::size_t>(block)];
        for_each_logical(y, begin, end, [&](std::int64_t i, std::int64_t offset) {
            const double got = y.get(offset);
            const double want = ref[static_cast<std::size_t>(i)];
            bool ok;
            double ratio = 0.0;
            if (std::isnan(want) || std::isnan(got)) {
                ok = std::isnan(want) && std::isnan(got);
                ratio = ok ? 0.0 : std::numeric_limits<double>::infinity();
            } else if (std::isinf(want) || std::isinf(got)) {
                ok = got == want;
                ratio = ok ? 0.0 : std::numeric_limits<double>::infinity();
            } else {
                // An error e in the input shifts a softmax output by a factor exp(e), a log-softmax one by e.
                const double input_slack =
                    input_error != nullptr ? input_rtol * (*input_error)[static_cast<std::size_t>(i)] : 0.0;
                const double allowed = log_mode ? rtol * (std::fabs(want) + 1.0) + input_slack
                                                : (rtol + input_slack) * std::fabs(want) + floor;
                ratio = std::fabs(got - want) / allowed;
                ok = ratio <= 1.0;
            }
            if (!ok) ++worst.failures;
            if (ratio > worst.ratio || (!ok && worst.failures == 1)) {
                worst.ratio = ratio;
                worst.index = i;
            }
        });
    });
    Worst total;
    for (const Worst& worst : block_worst) {
        if (worst.ratio > total.ratio || (total.failures == 0 && worst.failures > 0)) {
            total.ratio = worst.ratio;
            total.index = worst.index;
        }
        total.failures += worst.failures;
    }
    if (total.failures == 0) return "";
    std::int64_t worst_offset = 0;
    for_each_logical(y, total.index, total.index + 1, [&](std::int64_t, std::int64_t offset) { worst_offset = offset; });
    std::ostringstream text;
    text.precision(10);
    text << total.failures << " of " << n << " elements out of tolerance (" << dtype_name(y.dtype) << " rtol " << rtol
         << "); worst at logical index " << total.index << ": got " << y.get(worst_offset) << ", expected "
         << ref[static_cast<std::size_t>(total.index)] << " (error/allowed = " << total.ratio << ")";
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

smxStatus_t run_cpu_backward(HostTensor& dx, const HostTensor& dy, const HostTensor& y, int axis, bool log_mode) {
    Handle handle(SMX_DEVICE_CPU, 0);
    if (handle.status != SMX_STATUS_SUCCESS) return handle.status;
    TensorDesc dx_desc(dx), dy_desc(dy), y_desc(y);
    SoftmaxBackwardDesc desc(handle.handle, log_mode ? SMX_LOG_SOFTMAX : SMX_SOFTMAX, axis, dx_desc.desc, dy_desc.desc,
                             y_desc.desc);
    if (desc.status != SMX_STATUS_SUCCESS) return desc.status;
    size_t workspace_bytes = 0;
    smxStatus_t status = smxGetSoftmaxBackwardWorkspaceSize(desc.desc, &workspace_bytes);
    if (status != SMX_STATUS_SUCCESS) return status;
    std::vector<unsigned char> workspace(workspace_bytes);
    const void* dy_data = (&dx == &dy) ? dx.data() : dy.data();  // in place: one pointer for both
    return smxSoftmaxBackward(desc.desc, workspace.data(), workspace_bytes, dx.data(), dy_data, y.data(), nullptr);
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

std::string compare_backward_to_reference(const HostTensor& dx, const BackwardReference& ref, double compute_rtol) {
    if (dx.numel() != static_cast<std::int64_t>(ref.dx.size())) {
        return "dx has " + std::to_string(dx.numel()) + " elements, the reference " + std::to_string(ref.dx.size());
    }
    const double rtol = std::max(relative_tolerance(dx.dtype), compute_rtol);
    const double floor = underflow_slack(dx.dtype);
    std::int64_t failures = 0, worst_index = -1;
    double worst_ratio = 0.0, worst_got = 0.0;
    for_each_logical(dx, 0, dx.numel(), [&](std::int64_t i, std::int64_t offset) {
        const double got = dx.get(offset);
        const double want = ref.dx[static_cast<std::size_t>(i)];
        double ratio;
        if (std::isnan(want) || std::isnan(got)) {
            ratio = std::isnan(want) && std::isnan(got) ? 0.0 : std::numeric_limits<double>::infinity();
        } else if (std::isinf(want) || std::isinf(got)) {
            ratio = got == want ? 0.0 : std::numeric_limits<double>::infinity();
        } else {
            ratio = std::fabs(got - want) / (rtol * ref.scale[static_cast<std::size_t>(i)] + floor);
        }
        if (ratio > 1.0) ++failures;
        if (ratio > worst_ratio || worst_index < 0) {
            worst_ratio = ratio;
            worst_index = i;
            worst_got = got;
        }
    });
    if (failures == 0) return "";
    return std::to_string(failures) + " of " + std::to_string(dx.numel()) + " elements outside tolerance; worst: logical index " +
           std::to_string(worst_index) + " got " + std::to_string(worst_got) + " expected " +
           std::to_string(ref.dx[static_cast<std::size_t>(worst_index)]) + " (error/allowed " + std::to_string(worst_ratio) + ")";
}

}  // namespace smx_test
