// options_reference.cpp - the float64 reference of softmax with options (see options_reference.hpp).
#include "support/options_reference.hpp"

#include <cmath>
#include <limits>

#include "support/layouts.hpp"

namespace smx_test {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The element offset in `t` of x's multi-index `index` under NumPy broadcasting (t's dims aligned with x's
// last ones; a size-1 dim of t repeats).
std::int64_t broadcast_offset(const HostTensor& t, const std::vector<std::int64_t>& index) {
    const int lead = static_cast<int>(index.size()) - t.ndim();
    std::int64_t offset = 0;
    for (int d = 0; d < t.ndim(); ++d) {
        if (t.shape[d] != 1) offset += index[lead + d] * t.strides[d];
    }
    return offset;
}

// The element offset of row `index`'s factor in a per-row tensor: x's shape without the axis, or with it of
// size 1.
std::int64_t per_row_offset(const HostTensor& t, const std::vector<std::int64_t>& index, int axis) {
    std::int64_t offset = 0;
    const bool keepdim = t.ndim() == static_cast<int>(index.size());
    for (int d = 0, k = 0; d < static_cast<int>(index.size()); ++d) {
        if (d == axis) {
            if (keepdim) ++k;
            continue;
        }
        offset += index[d] * t.strides[k++];
    }
    return offset;
}

// Row r's multi-index over the dims other than `axis` (row-major), its axis entry 0.
void row_index(const std::vector<std::int64_t>& shape, int axis, std::int64_t r, std::vector<std::int64_t>& index) {
    for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
        if (d == axis) continue;
        index[d] = r % shape[d];
        r /= shape[d];
    }
    index[axis] = 0;
}

// The scale of the row holding `index`.
double row_scale(const OptionsSpec& spec, const std::vector<std::int64_t>& index, int axis) {
    if (spec.scale_tensor != nullptr) return spec.scale_tensor->get(per_row_offset(*spec.scale_tensor, index, axis));
    return spec.scale.value_or(1.0);
}

// Whether the element at `index` is kept: inside the causal window and, with a keep-mask, true there.
bool kept_at(const OptionsSpec& spec, const std::vector<std::int64_t>& index) {
    const int ndim = static_cast<int>(index.size());
    // The axis is the last dim; 128-bit so an offset near the int64 limits cannot overflow.
    if (spec.causal && static_cast<__int128>(index[ndim - 1]) > static_cast<__int128>(index[ndim - 2]) + *spec.causal) {
        return false;
    }
    if (spec.mask == nullptr || spec.mask->dtype != SMX_DTYPE_BOOL) return true;
    return spec.mask->get(broadcast_offset(*spec.mask, index)) != 0.0;
}

}  // namespace

OptionsReference reference_softmax_options(const HostTensor& x, int axis, bool log_mode, const OptionsSpec& spec) {
    const int ndim = x.ndim();
    if (axis < 0) axis += ndim;
    const std::int64_t n = x.shape[axis];
    const std::int64_t total = x.numel();
    OptionsReference out;
    out.y.resize(static_cast<std::size_t>(total));
    out.z_magnitude.resize(static_cast<std::size_t>(total));
    if (total == 0) return out;
    const std::vector<std::int64_t> logical = row_major_strides(x.shape);
    const double excluded_value = log_mode ? -kInf : 0.0;
    const bool additive = spec.mask != nullptr && spec.mask->dtype != SMX_DTYPE_BOOL;
    std::vector<std::int64_t> index(static_cast<std::size_t>(ndim));
    std::vector<double> z(static_cast<std::size_t>(n)), magnitude(static_cast<std::size_t>(n));
    std::vector<char> kept(static_cast<std::size_t>(n));
    for (std::int64_t r = 0; r < total / n; ++r) {
        row_index(x.shape, axis, r, index);  // the axis entry set per element below
        const double scale = row_scale(spec, index, axis);

        double max = -kInf, max_magnitude = 0.0;
        bool has_nan = false;
        for (std::int64_t j = 0; j < n; ++j) {
            index[axis] = j;
            kept[j] = kept_at(spec, index);
            if (!kept[j]) continue;  // an excluded element is not read
            const double scaled = scale * x.get(x.offset_of(index));
            const double added = additive ? spec.mask->get(broadcast_offset(*spec.mask, index)) : 0.0;
            z[j] = scaled + added;
            // Infinite z give exact special values; only finite ones carry rounding.
            magnitude[j] = std::isfinite(z[j]) ? std::fabs(scaled) + std::fabs(added) : 0.0;
            if (std::isnan(z[j])) has_nan = true;
            else max = std::max(max, z[j]);
            max_magnitude = std::max(max_magnitude, magnitude[j]);
        }
        double sum = has_nan ? kNaN : 0.0;
        for (std::int64_t j = 0; j < n && !has_nan && max != -kInf; ++j) {
            if (kept[j]) sum += std::exp(z[j] - max);  // a kept +inf gives inf - inf: NaN
        }
        const bool nothing_to_normalize = !has_nan && max == -kInf;
        for (std::int64_t j = 0; j < n; ++j) {
            index[axis] = j;
            std::int64_t at = 0;
            for (int d = 0; d < ndim; ++d) at += index[d] * logical[d];
            double value;
            if (std::isnan(sum)) value = kNaN;  // the whole row, excluded elements too, as masked_fill + softmax
            else if (nothing_to_normalize) value = spec.zero_rows ? excluded_value : kNaN;
            else if (!kept[j]) value = excluded_value;
            else value = log_mode ? (z[j] - max) - std::log(sum) : std::exp(z[j] - max) / sum;
            out.y[static_cast<std::size_t>(at)] = value;
            out.z_magnitude[static_cast<std::size_t>(at)] = (kept[j] ? magnitude[j] : 0.0) + max_magnitude;
        }
    }
    return out;
}

BackwardReference reference_softmax_backward_options(const HostTensor& dy, const HostTensor& y, int axis, bool log_mode,
                                                     const OptionsSpec& spec) {
    const int ndim = y.ndim();
    if (axis < 0) axis += ndim;
    const std::int64_t n = y.shape[axis];
    const std::int64_t total = y.numel();
    BackwardReference out;
    out.dx.resize(static_cast<std::size_t>(total));
    out.scale.resize(static_cast<std::size_t>(total));
    if (total == 0) return out;
    const std::vector<std::int64_t> logical = row_major_strides(y.shape);
    const double empty_y = log_mode ? -kInf : 0.0;  // the forward's output in a row with nothing to normalize
    std::vector<std::int64_t> index(static_cast<std::size_t>(ndim));
    std::vector<double> dys(static_cast<std::size_t>(n)), ys(static_cast<std::size_t>(n));
    std::vector<char> kept(static_cast<std::size_t>(n));
    for (std::int64_t r = 0; r < total / n; ++r) {
        row_index(y.shape, axis, r, index);
        const double scale = row_scale(spec, index, axis);
        double sum = 0.0, abs_sum = 0.0;  // over the kept elements: sum(dy * y) and sum|dy * y| (log: of dy)
        bool normalized = false;
        for (std::int64_t j = 0; j < n; ++j) {
            index[axis] = j;
            kept[j] = kept_at(spec, index);
            if (!kept[j]) continue;  // an excluded element is not read
            dys[j] = dy.get(dy.offset_of(index));
            ys[j] = y.get(y.offset_of(index));
            const double term = log_mode ? dys[j] : dys[j] * ys[j];
            sum += term;
            abs_sum += std::fabs(term);
            normalized = normalized || ys[j] != empty_y;
        }
        const bool zero_row = spec.zero_rows && !normalized;
        for (std::int64_t j = 0; j < n; ++j) {
            index[axis] = j;
            std::int64_t at = 0;
            for (int d = 0; d < ndim; ++d) at += index[d] * logical[d];
            double value = 0.0, error_scale = 0.0;
            if (kept[j] && !zero_row) {
                if (log_mode) {
                    const double e = std::exp(ys[j]);
                    value = dys[j] - e * sum;
                    error_scale = std::fabs(dys[j]) + e * abs_sum;
                } else {
                    value = ys[j] * (dys[j] - sum);
                    error_scale = std::fabs(ys[j]) * (std::fabs(dys[j]) + abs_sum);
                }
                value *= scale;
                error_scale *= std::fabs(scale);
            }
            out.dx[static_cast<std::size_t>(at)] = value;
            out.scale[static_cast<std::size_t>(at)] = error_scale;
        }
    }
    return out;
}

void round_overflow(smxDataType_t dtype, std::vector<double>& values) {
    HostTensor one = make_tensor(dtype, {1});
    for (double& value : values) {
        if (!std::isfinite(value)) continue;
        one.set(0, value);
        if (std::isinf(one.get(0))) value = one.get(0);
    }
}

HostTensor random_keep_mask(const std::vector<std::int64_t>& shape, std::mt19937_64& rng, double keep,
                            std::vector<std::int64_t> strides) {
    HostTensor mask = make_tensor(SMX_DTYPE_BOOL, shape, std::move(strides));
    std::bernoulli_distribution kept(keep);
    std::uniform_int_distribution<int> byte(0, 2);
    const unsigned char true_bytes[] = {1, 2, 255};
    for (std::int64_t offset : logical_offsets(mask)) {
        static_cast<unsigned char*>(mask.data())[offset] = kept(rng) ? true_bytes[byte(rng)] : 0;
    }
    return mask;
}

HostTensor random_additive_mask(smxDataType_t dtype, const std::vector<std::int64_t>& shape, std::mt19937_64& rng,
                                std::vector<std::int64_t> strides) {
    HostTensor mask = make_tensor(dtype, shape, std::move(strides));
    fill_random(mask, rng, 2.0);
    std::bernoulli_distribution excluded(0.25);
    for (std::int64_t offset : logical_offsets(mask)) {
        if (excluded(rng)) mask.set(offset, -kInf);
    }
    return mask;
}

void add_special_rows(HostTensor& x) {
    const std::vector<std::int64_t> offsets = logical_offsets(x);
    const std::int64_t n = x.shape.back();
    if (n == 0 || x.numel() / n < 5) return;
    const auto at = [&](std::int64_t row, std::int64_t j) { return offsets[static_cast<std::size_t>(row * n + j)]; };
    x.set(at(0, n / 2), kNaN);
    x.set(at(1, n - 1), kInf);
    for (std::int64_t j = 0; j < n; ++j) x.set(at(2, j), -kInf);
    x.set(at(3, 0), -kInf);
    for (std::int64_t j = 0; j < n; ++j) x.set(at(4, j), j % 2 ? 6e4 : -6e4);
}

void make_random_options_case(int trial, std::int64_t row_len_factor, std::mt19937_64& rng, RandomOptionsCase* out) {
    constexpr smxDataType_t kFloating[] = {SMX_DTYPE_F16, SMX_DTYPE_BF16, SMX_DTYPE_F32, SMX_DTYPE_F64};
    std::bernoulli_distribution coin(0.5);
    std::uniform_int_distribution<int> dtype_of(0, 3);
    const int ndim = std::uniform_int_distribution<int>(1, 4)(rng);
    std::vector<std::int64_t> shape = random_shape(ndim, rng);
    shape.back() *= row_len_factor;
    const bool causal = ndim >= 2 && coin(rng);
    out->axis = causal ? ndim - 1 : std::uniform_int_distribution<int>(0, ndim - 1)(rng);
    const StrideKind x_kind = kAllStrideKinds[trial % 5];
    const StrideKind y_kind = kAllStrideKinds[(trial / 5) % 5];
    out->x = make_tensor(kFloating[dtype_of(rng)], shape, make_strides(shape, x_kind, rng));
    fill_random(out->x, rng);
    out->y = make_tensor(kFloating[dtype_of(rng)], shape, make_strides(shape, y_kind, rng));
    out->spec = OptionsSpec{};
    if (coin(rng)) {
        std::vector<std::int64_t> scale_shape;
        for (int d = 0; d < ndim; ++d) {
            if (d != out->axis) scale_shape.push_back(shape[d]);
        }
        if (scale_shape.empty()) scale_shape.push_back(1);
        out->scale = make_tensor(SMX_DTYPE_F32, scale_shape, make_strides(scale_shape, x_kind, rng));
        fill_random(out->scale, rng, 2.0);
        out->spec.scale_tensor = &out->scale;
    } else if (coin(rng)) {
        out->spec.scale = -0.8;
    }
    if (coin(rng)) {
        // Broadcastable: the trailing dims of x, some of them of size 1, in a layout of their own.
        std::vector<std::int64_t> mask_shape(shape.begin() + std::uniform_int_distribution<int>(0, ndim - 1)(rng),
                                             shape.end());
        for (auto& size : mask_shape) {
            if (coin(rng)) size = 1;
        }
        const std::vector<std::int64_t> strides = make_strides(mask_shape, y_kind, rng);
        out->mask = coin(rng) ? random_keep_mask(mask_shape, rng, 0.6, strides)
                              : random_additive_mask(kFloating[dtype_of(rng)], mask_shape, rng, strides);
        out->spec.mask = &out->mask;
    }
    if (causal) out->spec.causal = std::uniform_int_distribution<std::int64_t>(-3, 3)(rng);
    out->spec.zero_rows = coin(rng);
    out->spec.batch_invariant = coin(rng);
}

bool has_effective_option(const OptionsSpec& spec) {
    return (spec.scale && *spec.scale != 1.0) || spec.scale_tensor != nullptr || spec.mask != nullptr || spec.causal ||
           spec.zero_rows || spec.batch_invariant;
}

std::string describe_spec(const OptionsSpec& spec) {
    std::string text;
    if (spec.scale) text += " scale " + std::to_string(*spec.scale);
    if (spec.scale_tensor) text += " per-row scale " + describe(*spec.scale_tensor);
    if (spec.mask) text += " mask " + describe(*spec.mask);
    if (spec.causal) text += " causal " + std::to_string(*spec.causal);
    if (spec.zero_rows) text += " zero rows";
    if (spec.batch_invariant) text += " batch invariant";
    return text;
}

double options_compute_rtol(smxDataType_t x_dtype, smxDataType_t y_dtype) {
    const bool double_compute = x_dtype == SMX_DTYPE_F64 || y_dtype == SMX_DTYPE_F64;
    return 4.0 * (double_compute ? std::numeric_limits<double>::epsilon() : std::numeric_limits<float>::epsilon());
}

SoftmaxOptionsObject::SoftmaxOptionsObject(const OptionsSpec& spec) {
    status = smxCreateSoftmaxOptions(&options);
    const auto then = [this](smxStatus_t next) {
        if (status == SMX_STATUS_SUCCESS) status = next;
    };
    if (spec.scale) then(smxSetSoftmaxScale(options, *spec.scale));
    if (spec.scale_tensor != nullptr) {
        TensorDesc scale_desc(*spec.scale_tensor);
        then(smxSetSoftmaxScaleTensor(options, scale_desc.desc));
    }
    if (spec.mask != nullptr) {
        TensorDesc mask_desc(*spec.mask);
        then(smxSetSoftmaxMask(options, mask_desc.desc));
    }
    if (spec.causal) then(smxSetSoftmaxCausal(options, 1, *spec.causal));
    if (spec.zero_rows) then(smxSetSoftmaxMaskedRows(options, SMX_MASKED_ROWS_ZERO));
    if (spec.batch_invariant) then(smxSetSoftmaxBatchInvariant(options, 1));
}

smxStatus_t run_cpu_options(HostTensor& y, const HostTensor& x, int axis, bool log_mode, const OptionsSpec& spec,
                            std::string* plan) {
    Handle handle(SMX_DEVICE_CPU, 0);
    if (handle.status != SMX_STATUS_SUCCESS) return handle.status;
    SoftmaxOptionsObject options(spec);
    if (options.status != SMX_STATUS_SUCCESS) return options.status;
    TensorDesc x_desc(x), y_desc(y);
    smxSoftmaxDescriptor_t desc = nullptr;
    smxStatus_t status = smxCreateSoftmaxDescriptorWithOptions(handle.handle, &desc, log_mode ? SMX_LOG_SOFTMAX : SMX_SOFTMAX,
                                                               axis, y_desc.desc, x_desc.desc, options.options);
    if (status != SMX_STATUS_SUCCESS) return status;
    const char* text = nullptr;
    if (plan != nullptr && smxGetSoftmaxPlan(desc, &text) == SMX_STATUS_SUCCESS) *plan = text;
    // In-place when the caller passes the same tensor object for y and x.
    const void* x_data = (&x == &y) ? y.data() : x.data();
    status = smxSoftmaxForwardWithOptions(desc, nullptr, 0, y.data(), x_data,
                                          spec.scale_tensor != nullptr ? spec.scale_tensor->data() : nullptr,
                                          spec.mask != nullptr ? spec.mask->data() : nullptr, nullptr);
    smxDestroySoftmaxDescriptor(desc);
    return status;
}

smxStatus_t run_cpu_backward_options(HostTensor& dx, const HostTensor& dy, const HostTensor& y, int axis, bool log_mode,
                                     const OptionsSpec& spec, std::string* plan) {
    Handle handle(SMX_DEVICE_CPU, 0);
    if (handle.status != SMX_STATUS_SUCCESS) return handle.status;
    SoftmaxOptionsObject options(spec);
    if (options.status != SMX_STATUS_SUCCESS) return options.status;
    TensorDesc dx_desc(dx), dy_desc(dy), y_desc(y);
    smxSoftmaxBackwardDescriptor_t desc = nullptr;
    smxStatus_t status = smxCreateSoftmaxBackwardDescriptorWithOptions(
        handle.handle, &desc, log_mode ? SMX_LOG_SOFTMAX : SMX_SOFTMAX, axis, dx_desc.desc, dy_desc.desc, y_desc.desc,
        options.options);
    if (status != SMX_STATUS_SUCCESS) return status;
    const char* text = nullptr;
    if (plan != nullptr && smxGetSoftmaxBackwardPlan(desc, &text) == SMX_STATUS_SUCCESS) *plan = text;
    const void* dy_data = (&dx == &dy) ? dx.data() : dy.data();  // in place: one pointer for both
    status = smxSoftmaxBackwardWithOptions(desc, nullptr, 0, dx.data(), dy_data, y.data(),
                                           spec.scale_tensor != nullptr ? spec.scale_tensor->data() : nullptr,
                                           spec.mask != nullptr ? spec.mask->data() : nullptr, nullptr);
    smxDestroySoftmaxBackwardDescriptor(desc);
    return status;
}

}  // namespace smx_test
