// logprobs_reference.cpp - the float64 references of the log-probability operators (logprobs_reference.hpp).
#include "support/logprobs_reference.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>

namespace smx_test {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Row r's multi-index over x's dims but the axis (row-major among them); the axis' entry is 0.
std::vector<std::int64_t> row_index(const std::vector<std::int64_t>& x_shape, int axis, std::int64_t r) {
    std::vector<std::int64_t> index(x_shape.size(), 0);
    for (int d = static_cast<int>(x_shape.size()) - 1; d >= 0; --d) {
        if (d == axis) continue;
        index[d] = r % x_shape[d];
        r /= x_shape[d];
    }
    return index;
}

// The row-major multi-index of logical element e of a shape.
std::vector<std::int64_t> logical_index(const std::vector<std::int64_t>& shape, std::int64_t e) {
    std::vector<std::int64_t> index(shape.size(), 0);
    for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
        index[d] = e % shape[d];
        e /= shape[d];
    }
    return index;
}

// The row number of a multi-index of x's shape (its axis entry ignored).
std::int64_t row_of(const std::vector<std::int64_t>& x_shape, int axis, const std::vector<std::int64_t>& index) {
    std::int64_t r = 0;
    for (std::size_t d = 0; d < x_shape.size(); ++d) {
        if (static_cast<int>(d) != axis) r = r * x_shape[d] + index[d];
    }
    return r;
}

// The logical (row-major) position of a multi-index of `shape`.
std::int64_t logical_position(const std::vector<std::int64_t>& shape, const std::vector<std::int64_t>& index) {
    std::int64_t position = 0;
    for (std::size_t d = 0; d < shape.size(); ++d) position = position * shape[d] + index[d];
    return position;
}

int normalized(int axis, int ndim) { return axis < 0 ? axis + ndim : axis; }

}  // namespace

std::string compare_to_scaled_reference(const HostTensor& out, ScaledReference ref, double compute_rtol) {
    HostTensor rounded = make_tensor(out.dtype, {1});
    for (double& value : ref.dx) {
        if (!std::isfinite(value)) continue;
        rounded.set(0, value);
        if (std::isinf(rounded.get(0))) value = rounded.get(0);
    }
    return compare_backward_to_reference(out, ref, compute_rtol);
}

std::vector<std::int64_t> column_major_strides(const std::vector<std::int64_t>& shape) {
    std::vector<std::int64_t> strides(shape.size());
    std::int64_t running = 1;
    for (std::size_t d = 0; d < shape.size(); ++d) {
        strides[d] = running;
        running *= std::max<std::int64_t>(shape[d], 1);
    }
    return strides;
}

std::int64_t get_index(const HostTensor& t, std::int64_t element_offset) {
    if (t.dtype == SMX_DTYPE_I32) return static_cast<const std::int32_t*>(t.data())[element_offset];
    return static_cast<const std::int64_t*>(t.data())[element_offset];
}

void set_index(HostTensor& t, std::int64_t element_offset, std::int64_t value) {
    if (t.dtype == SMX_DTYPE_I32) static_cast<std::int32_t*>(t.data())[element_offset] = static_cast<std::int32_t>(value);
    else static_cast<std::int64_t*>(t.data())[element_offset] = value;
}

void fill_indices(HostTensor& t, std::mt19937_64& rng, std::int64_t low, std::int64_t high) {
    std::uniform_int_distribution<std::int64_t> uniform(low, high);
    for (std::int64_t offset : logical_offsets(t)) set_index(t, offset, uniform(rng));
}

std::int64_t row_count(const std::vector<std::int64_t>& x_shape, int axis) {
    axis = normalized(axis, static_cast<int>(x_shape.size()));
    std::int64_t rows = 1;
    for (std::size_t d = 0; d < x_shape.size(); ++d) rows *= static_cast<int>(d) == axis ? 1 : x_shape[d];
    return rows;
}

std::int64_t per_row_offset(const HostTensor& t, const std::vector<std::int64_t>& x_shape, int axis, std::int64_t r) {
    axis = normalized(axis, static_cast<int>(x_shape.size()));
    const std::vector<std::int64_t> index = row_index(x_shape, axis, r);
    const bool keepdim = t.ndim() == static_cast<int>(x_shape.size());
    std::int64_t offset = 0;
    for (int d = 0; d < static_cast<int>(x_shape.size()); ++d) {
        if (d == axis) continue;
        offset += index[d] * t.strides[keepdim || d < axis ? d : d - 1];
    }
    return offset;
}

std::vector<std::int64_t> row_offsets(const HostTensor& x, int axis, std::int64_t r) {
    axis = normalized(axis, x.ndim());
    std::vector<std::int64_t> index = row_index(x.shape, axis, r);
    std::vector<std::int64_t> offsets;
    for (index[axis] = 0; index[axis] < x.shape[axis]; ++index[axis]) offsets.push_back(x.offset_of(index));
    return offsets;
}

HostTensor make_per_row_tensor(smxDataType_t dtype, const std::vector<std::int64_t>& x_shape, int axis, bool keepdim,
                               std::int64_t stride_factor) {
    axis = normalized(axis, static_cast<int>(x_shape.size()));
    std::vector<std::int64_t> shape = x_shape;
    if (keepdim || x_shape.size() == 1) shape[axis] = 1;
    else shape.erase(shape.begin() + axis);
    std::vector<std::int64_t> strides = row_major_strides(shape);
    for (std::int64_t& stride : strides) stride *= stride_factor;
    return make_tensor(dtype, shape, strides);
}

int set_special_rows(HostTensor& x, int axis) {
    const double huge = x.dtype == SMX_DTYPE_F16 ? 6.0e4 : x.dtype == SMX_DTYPE_F64 ? 1.0e308 : 3.0e38;
    const double tiny = x.dtype == SMX_DTYPE_F16 ? 1.0e-7 : x.dtype == SMX_DTYPE_F64 ? 1.0e-300 : 1.0e-37;
    constexpr int kKinds = 7;
    const std::int64_t rows = row_count(x.shape, axis);
    for (std::int64_t r = 1; r < rows; r += 2) {  // even rows stay ordinary random rows
        const std::vector<std::int64_t> offsets = row_offsets(x, axis, r);
        const std::int64_t n = static_cast<std::int64_t>(offsets.size());
        if (n == 0) continue;
        const auto set = [&](std::int64_t j, double v) { x.set(offsets[static_cast<std::size_t>(j)], v); };
        switch ((r / 2) % kKinds) {
            case 0: set(n / 2, kNaN); break;
            case 1: set(n / 3, kInf); break;
            case 2: for (std::int64_t j = 0; j < n; ++j) set(j, -kInf); break;
            case 3: for (std::int64_t j = 0; j < n; j += 3) set(j, -kInf); break;
            case 4:
                for (std::int64_t j = 0; j < n; ++j) set(j, (j % 2 == 0 ? 1.0 : -1.0) * huge * (1.0 - 1e-3 * (j % 7)));
                break;
            case 5:
                for (std::int64_t j = 0; j < n; ++j) set(j, tiny * x.get(offsets[static_cast<std::size_t>(j)]));
                break;
            case 6:  // -inf everywhere but one finite element: the row's log-probabilities are 0 and -inf
                for (std::int64_t j = 0; j < n; ++j) set(j, j == n - 1 ? 1.5 : -kInf);
                break;
        }
    }
    return kKinds;
}

ScaledReference reference_logsumexp(const HostTensor& x, int axis) {
    axis = normalized(axis, x.ndim());
    const std::int64_t rows = row_count(x.shape, axis);
    const std::int64_t n = x.shape[axis];
    ScaledReference out;
    for (std::int64_t r = 0; r < rows; ++r) {
        std::vector<std::int64_t> index = row_index(x.shape, axis, r);
        std::vector<double> row;
        for (index[axis] = 0; index[axis] < n; ++index[axis]) row.push_back(x.get(x.offset_of(index)));
        const bool has_nan = std::any_of(row.begin(), row.end(), [](double v) { return std::isnan(v); });
        const bool has_plus_inf = std::any_of(row.begin(), row.end(), [](double v) { return v == kInf; });
        double max = -kInf;
        for (double v : row) max = std::isnan(v) ? max : std::max(max, v);
        double value;
        if (has_nan) value = kNaN;
        else if (has_plus_inf) value = kInf;
        else if (max == -kInf) value = -kInf;  // the log of an empty sum, or of exp(-inf)s
        else {
            double sum = 0.0;
            for (double v : row) sum += std::exp(v - max);
            value = max + std::log(sum);
        }
        out.dx.push_back(value);
        out.scale.push_back(std::fabs(value) + 1.0);
    }
    return out;
}

ScaledReference reference_log_softmax_gather(const HostTensor& x, const HostTensor& index, int axis) {
    axis = normalized(axis, x.ndim());
    const std::int64_t n = x.shape[axis];
    const std::vector<double> logp = reference_softmax(x, axis, true);
    const ScaledReference lse = reference_logsumexp(x, axis);
    const std::vector<std::int64_t> offsets = logical_offsets(index);
    ScaledReference out;
    for (std::int64_t e = 0; e < index.numel(); ++e) {
        std::vector<std::int64_t> at = logical_index(index.shape, e);
        const std::int64_t r = row_of(x.shape, axis, at);
        const std::int64_t i = get_index(index, offsets[static_cast<std::size_t>(e)]);
        double value = kInf;  // the sentinel of an index out of range
        if (i >= 0 && i < n) {
            at[axis] = i;
            value = logp[static_cast<std::size_t>(logical_position(x.shape, at))];
        }
        out.dx.push_back(value);
        out.scale.push_back(std::fabs(value) + std::fabs(lse.dx[static_cast<std::size_t>(r)]) + 1.0);
    }
    return out;
}

CrossEntropyReference reference_cross_entropy(const HostTensor& logits, const HostTensor& target, int axis,
                                              const smxCrossEntropyOptions_t& options) {
    axis = normalized(axis, logits.ndim());
    const std::int64_t n = logits.shape[axis];
    const std::int64_t rows = row_count(logits.shape, axis);
    const double eps = options.labelSmoothing;
    const std::vector<double> logp = reference_softmax(logits, axis, true);
    CrossEntropyReference out;
    out.lse = reference_logsumexp(logits, axis);
    out.dlogits.dx.assign(logp.size(), 0.0);
    out.dlogits.scale.assign(logp.size(), 0.0);

    std::vector<std::int64_t> targets;
    std::int64_t counted = 0;
    for (std::int64_t r = 0; r < rows; ++r) {
        targets.push_back(get_index(target, per_row_offset(target, logits.shape, axis, r)));
        counted += targets.back() != options.ignoreIndex;
    }
    const bool mean = options.reduction == SMX_REDUCTION_MEAN;
    const double grad_scale = mean && counted > 0 ? 1.0 / static_cast<double>(counted) : 1.0;

    ScaledReference per_row;
    for (std::int64_t r = 0; r < rows; ++r) {
        const std::int64_t t = targets[static_cast<std::size_t>(r)];
        std::vector<std::int64_t> at = row_index(logits.shape, axis, r);
        const auto logp_at = [&](std::int64_t c) {
            at[axis] = c;
            return logp[static_cast<std::size_t>(logical_position(logits.shape, at))];
        };
        const auto element = [&](std::int64_t c) {
            at[axis] = c;
            return static_cast<std::size_t>(logical_position(logits.shape, at));
        };
        const double lse = out.lse.dx[static_cast<std::size_t>(r)];
        double largest = 0.0;  // the largest finite |logit| of the row, for the error scale
        for (std::int64_t c = 0; c < n; ++c) {
            at[axis] = c;
            const double v = logits.get(logits.offset_of(at));
            if (std::isfinite(v)) largest = std::max(largest, std::fabs(v));
        }
        double loss = 0.0;
        if (t == options.ignoreIndex) {
            per_row.dx.push_back(0.0);
            per_row.scale.push_back(1.0);
            continue;  // dlogits stay 0
        }
        const bool in_range = t >= 0 && t < n;
        loss = in_range ? -logp_at(t) : kNaN;
        if (in_range && eps > 0.0) {
            double smooth = 0.0;
            for (std::int64_t c = 0; c < n; ++c) smooth -= logp_at(c);
            loss = (1.0 - eps) * loss + eps / static_cast<double>(n) * smooth;
        }
        per_row.dx.push_back(loss);
        per_row.scale.push_back(std::fabs(loss) + std::fabs(lse) + largest + 1.0);
        const bool row_nan = !in_range || std::isnan(logp_at(0));
        for (std::int64_t c = 0; c < n; ++c) {
            const double p = std::exp(logp_at(c));
            const double smoothed = (c == t ? 1.0 - eps : 0.0) + eps / static_cast<double>(n);
            at[axis] = c;
            const double v = logits.get(logits.offset_of(at));
            out.dlogits.dx[element(c)] = row_nan ? kNaN : grad_scale * (p - smoothed);
            out.dlogits.scale[element(c)] = grad_scale * (p * (std::fabs(v) + std::fabs(lse) + 1.0) + smoothed);
        }
    }
    if (options.reduction == SMX_REDUCTION_NONE) {
        out.loss = per_row;
        return out;
    }
    double total = 0.0, total_scale = 0.0;
    for (std::size_t r = 0; r < per_row.dx.size(); ++r) {
        total += per_row.dx[r];
        total_scale += per_row.scale[r];
    }
    if (mean) {
        total /= static_cast<double>(counted);  // no row counted: 0 / 0, NaN
        total_scale /= std::max<double>(1.0, static_cast<double>(counted));
    }
    out.loss.dx = {total};
    out.loss.scale = {total_scale + 1.0};
    return out;
}

smxCrossEntropyOptions_t cross_entropy_options(smxLossReduction_t reduction, std::int64_t ignore_index,
                                               double label_smoothing) {
    smxCrossEntropyOptions_t options = SMX_CROSS_ENTROPY_OPTIONS_INIT;
    options.reduction = reduction;
    options.ignoreIndex = ignore_index;
    options.labelSmoothing = label_smoothing;
    return options;
}

namespace {

// A descriptor destroyed with its destroy function when the scope ends.
template <class Desc, smxStatus_t (*Destroy)(Desc)>
struct Owned {
    Desc desc = nullptr;
    ~Owned() { Destroy(desc); }
};

// A workspace of `bytes`, 16-byte aligned as the API requires.
struct Workspace {
    std::vector<double> storage;
    explicit Workspace(std::size_t bytes) : storage((bytes + 15) / 16 * 2) {}
    void* data() { return storage.empty() ? nullptr : storage.data(); }
};

}  // namespace

smxStatus_t run_cpu_logsumexp(HostTensor& out, const HostTensor& x, int axis) {
    Handle handle(SMX_DEVICE_CPU, 0);
    if (handle.status != SMX_STATUS_SUCCESS) return handle.status;
    TensorDesc x_desc(x), out_desc(out);
    Owned<smxLogsumexpDescriptor_t, smxDestroyLogsumexpDescriptor> desc;
    smxStatus_t status = smxCreateLogsumexpDescriptor(handle.handle, &desc.desc, axis, out_desc.desc, x_desc.desc);
    std::size_t bytes = 0;
    if (status == SMX_STATUS_SUCCESS) status = smxGetLogsumexpWorkspaceSize(desc.desc, &bytes);
    if (status != SMX_STATUS_SUCCESS) return status;
    Workspace workspace(bytes);
    return smxLogsumexp(desc.desc, workspace.data(), bytes, out.data(), x.data(), nullptr);
}

smxStatus_t run_cpu_log_softmax_gather(HostTensor& out, const HostTensor& x, const HostTensor& index, int axis) {
    Handle handle(SMX_DEVICE_CPU, 0);
    if (handle.status != SMX_STATUS_SUCCESS) return handle.status;
    TensorDesc x_desc(x), index_desc(index), out_desc(out);
    Owned<smxLogSoftmaxGatherDescriptor_t, smxDestroyLogSoftmaxGatherDescriptor> desc;
    smxStatus_t status = smxCreateLogSoftmaxGatherDescriptor(handle.handle, &desc.desc, axis, out_desc.desc,
                                                             x_desc.desc, index_desc.desc);
    std::size_t bytes = 0;
    if (status == SMX_STATUS_SUCCESS) status = smxGetLogSoftmaxGatherWorkspaceSize(desc.desc, &bytes);
    if (status != SMX_STATUS_SUCCESS) return status;
    Workspace workspace(bytes);
    return smxLogSoftmaxGather(desc.desc, workspace.data(), bytes, out.data(), x.data(), index.data(), nullptr);
}

smxStatus_t run_cpu_cross_entropy(HostTensor& loss, HostTensor* lse, HostTensor* dlogits, const HostTensor& logits,
                                  const HostTensor& target, int axis, const smxCrossEntropyOptions_t& options) {
    Handle handle(SMX_DEVICE_CPU, 0);
    if (handle.status != SMX_STATUS_SUCCESS) return handle.status;
    TensorDesc logits_desc(logits), target_desc(target), loss_desc(loss);
    std::unique_ptr<TensorDesc> lse_desc, dlogits_desc;
    if (lse != nullptr) lse_desc = std::make_unique<TensorDesc>(*lse);
    if (dlogits != nullptr) dlogits_desc = std::make_unique<TensorDesc>(*dlogits);
    Owned<smxCrossEntropyDescriptor_t, smxDestroyCrossEntropyDescriptor> desc;
    smxStatus_t status = smxCreateCrossEntropyDescriptor(
        handle.handle, &desc.desc, axis, &options, loss_desc.desc, lse_desc ? lse_desc->desc : nullptr,
        dlogits_desc ? dlogits_desc->desc : nullptr, logits_desc.desc, target_desc.desc);
    std::size_t bytes = 0;
    if (status == SMX_STATUS_SUCCESS) status = smxGetCrossEntropyWorkspaceSize(desc.desc, &bytes);
    if (status != SMX_STATUS_SUCCESS) return status;
    Workspace workspace(bytes);
    // In place when the caller passes the logits object itself as dlogits.
    const void* logits_data = dlogits == &logits ? dlogits->data() : logits.data();
    return smxCrossEntropy(desc.desc, workspace.data(), bytes, loss.data(), lse != nullptr ? lse->data() : nullptr,
                           dlogits != nullptr ? dlogits->data() : nullptr, logits_data, target.data(), nullptr);
}

}  // namespace smx_test
