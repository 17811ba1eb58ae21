// tensor.cpp - tensor descriptors: validated once here, copied, then read-only.
#include "core/tensor.hpp"

#include <cstdlib>
#include <new>

#include "core/dtype.hpp"
#include "core/api_guard.hpp"
#include "core/enum_value.hpp"
#include "core/error.hpp"

namespace smx {

std::string format_dims(const std::int64_t* dims, int ndim) {
    std::string text = "[";
    for (int i = 0; i < ndim; ++i) {
        if (i > 0) text += ',';
        text += std::to_string(dims[i]);
    }
    return text + "]";
}

namespace {

smxStatus_t validate_and_fill(smxTensorDescriptor* out, int dtype_value, int ndim, const std::int64_t* shape,
                              const std::int64_t* strides) {
    if (!is_valid_dtype(dtype_value)) {
        return fail(SMX_STATUS_BAD_PARAM_DTYPE,
                    "dtype {} is not an smxDataType_t (F16=1, BF16=2, F32=3, F64=4, I32=5, I64=6, BOOL=7)",
                    dtype_value);
    }
    const auto dtype = static_cast<smxDataType_t>(dtype_value);
    if (ndim < 1 || ndim > SMX_MAX_DIMS) {
        return fail(SMX_STATUS_BAD_PARAM_NDIM, "ndim {} out of range: a tensor has 1 to {} dimensions", ndim,
                    SMX_MAX_DIMS);
    }
    // The product of the non-zero sizes must fit int64 even when a zero size makes the tensor empty: it
    // bounds the row-major strides, and the answer must not depend on where the zero sits.
    std::int64_t nonzero_product = 1;
    bool empty = false;
    for (int i = 0; i < ndim; ++i) {
        if (shape[i] < 0) {
            return fail(SMX_STATUS_BAD_PARAM_SHAPE, "shape {} has a negative size {} in dim {}",
                        format_dims(shape, ndim), shape[i], i);
        }
        if (shape[i] == 0) {
            empty = true;
        } else if (__builtin_mul_overflow(nonzero_product, shape[i], &nonzero_product)) {
            return fail(SMX_STATUS_BAD_PARAM_SHAPE, "shape {} is too large: the product of its sizes overflows int64",
                        format_dims(shape, ndim));
        }
    }
    const std::int64_t numel = empty ? 0 : nonzero_product;
    const std::int64_t element_bytes = static_cast<std::int64_t>(dtype_size(dtype));
    std::int64_t span_bytes;
    if (strides == nullptr && __builtin_mul_overflow(numel, element_bytes, &span_bytes)) {
        return fail(SMX_STATUS_BAD_PARAM_SHAPE, "shape {} of {} holds more bytes than int64 can address",
                    format_dims(shape, ndim), dtype_name(dtype));
    }
    out->dtype = dtype;
    out->ndim = ndim;
    out->numel = numel;
    for (int i = 0; i < ndim; ++i) out->shape[i] = shape[i];
    if (strides == nullptr) {
        // Row-major; with an empty tensor the products can be 0, which is harmless.
        std::int64_t running = 1;
        for (int i = ndim - 1; i >= 0; --i) {
            out->strides[i] = running;
            if (shape[i] > 1) running *= shape[i];  // cannot overflow: bounded by nonzero_product
        }
        return SMX_STATUS_SUCCESS;
    }
    // The span sum(|stride| * (size - 1)) must fit int64 so every element offset is representable,
    // and a byte offset too (times the element size).
    std::int64_t span = 0;
    for (int i = 0; i < ndim; ++i) {
        out->strides[i] = strides[i];
        if (shape[i] <= 1) continue;
        if (strides[i] == INT64_MIN) {
            return fail(SMX_STATUS_BAD_PARAM_STRIDES, "stride {} of dim {} is out of range", strides[i], i);
        }
        std::int64_t extent;
        if (__builtin_mul_overflow(std::llabs(strides[i]), shape[i] - 1, &extent) ||
            __builtin_add_overflow(span, extent, &span)) {
            return fail(SMX_STATUS_BAD_PARAM_STRIDES, "strides {} with shape {} reach beyond int64 offsets",
                        format_dims(strides, ndim), format_dims(shape, ndim));
        }
    }
    if (numel > 0 && __builtin_mul_overflow(span + 1, element_bytes, &span_bytes)) {
        return fail(SMX_STATUS_BAD_PARAM_STRIDES, "strides {} with shape {} span more bytes than int64 can address",
                    format_dims(strides, ndim), format_dims(shape, ndim));
    }
    return SMX_STATUS_SUCCESS;
}

}  // namespace
}  // namespace smx

extern "C" {

SMX_API smxStatus_t smxCreateTensorDescriptor(smxTensorDescriptor_t* desc, smxDataType_t dtype, int ndim,
                                              const int64_t* shape, const int64_t* strides) {
    const int dtype_value = smx::raw_enum_value(dtype);
    return smx::guard_api("smxCreateTensorDescriptor", [&]() -> smxStatus_t {
        if (desc == nullptr) return smx::fail(SMX_STATUS_BAD_PARAM_NULL_POINTER, "desc (the output pointer) is NULL");
        *desc = nullptr;
        if (shape == nullptr) return smx::fail(SMX_STATUS_BAD_PARAM_NULL_POINTER, "shape is NULL");
        smxTensorDescriptor candidate{};
        SMX_RETURN_IF_ERROR(smx::validate_and_fill(&candidate, dtype_value, ndim, shape, strides));
        *desc = new smxTensorDescriptor(candidate);
        return SMX_STATUS_SUCCESS;
    });
}

SMX_API smxStatus_t smxGetTensorDescriptor(smxTensorDescriptor_t desc, smxDataType_t* dtype, int* ndim,
                                           int64_t* shape, int64_t* strides) {
    return smx::guard_api("smxGetTensorDescriptor", [&]() -> smxStatus_t {
        SMX_RETURN_IF_ERROR(smx::check_live(desc, "desc"));
        if (dtype != nullptr) *dtype = desc->dtype;
        if (ndim != nullptr) *ndim = desc->ndim;
        for (int i = 0; i < desc->ndim; ++i) {
            if (shape != nullptr) shape[i] = desc->shape[i];
            if (strides != nullptr) strides[i] = desc->strides[i];
        }
        return SMX_STATUS_SUCCESS;
    });
}

SMX_API smxStatus_t smxDestroyTensorDescriptor(smxTensorDescriptor_t desc) { return smx::destroy_live(desc, "desc"); }

}  // extern "C"
