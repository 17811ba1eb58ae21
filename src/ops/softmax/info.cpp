// info.cpp - validation of a softmax problem and its reduction to canonical rows.
#include "ops/softmax/info.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "common/dtype.hpp"
#include "core/error.hpp"
#include "core/tensor.hpp"

namespace smx {

const char* layout_name(SoftmaxLayout layout) {
    switch (layout) {
        case SoftmaxLayout::Rows: return "rows";
        case SoftmaxLayout::Spatial: return "spatial";
        case SoftmaxLayout::General: return "general";
    }
    return "?";
}

namespace {

// One non-axis dimension of the row index space, with its strides in x and y.
struct IndexDim {
    std::int64_t size;
    std::int64_t x_stride;
    std::int64_t y_stride;
};

// y must be provably free of self-overlap: ordering its dims (of size > 1) by |stride|, each stride must
// exceed the span of all smaller ones. This refuses zero strides and every real overlap; it also refuses
// a few exotic interleavings that do not overlap, which we accept as the price of a cheap exact test.
smxStatus_t check_no_self_overlap(const smxTensorDescriptor& y) {
    if (y.numel == 0) return SMX_STATUS_SUCCESS;  // nothing is written, so nothing can collide
    struct StridedDim {
        int dim;
        std::int64_t size;
        std::int64_t abs_stride;
    };
    std::vector<StridedDim> dims;
    for (int i = 0; i < y.ndim; ++i) {
        if (y.shape[i] > 1) dims.push_back({i, y.shape[i], std::llabs(y.strides[i])});
    }
    std::sort(dims.begin(), dims.end(),
              [](const StridedDim& a, const StridedDim& b) { return a.abs_stride < b.abs_stride; });
    std::int64_t span = 0;  // highest offset reachable with the dims seen so far
    for (const StridedDim& d : dims) {
        if (d.abs_stride <= span || d.abs_stride == 0) {
            if (d.abs_stride == 0) {
                return fail(SMX_STATUS_BAD_PARAM_OVERLAP,
                            "y overlaps itself: dim {} has stride 0 with size {} (an output cannot broadcast)",
                            d.dim, d.size);
            }
            return fail(SMX_STATUS_BAD_PARAM_OVERLAP,
                        "y overlaps itself: strides {} with shape {} make distinct elements share memory",
                        format_dims(y.strides, y.ndim), format_dims(y.shape, y.ndim));
        }
        span += d.abs_stride * (d.size - 1);
    }
    return SMX_STATUS_SUCCESS;
}

void offset_range(const smxTensorDescriptor& t, SoftmaxOperandLayout* layout) {
    layout->min_offset = 0;
    layout->max_offset = 0;
    if (t.numel == 0) return;
    for (int i = 0; i < t.ndim; ++i) {
        const std::int64_t extent = t.strides[i] * (t.shape[i] - 1);
        if (extent < 0) layout->min_offset += extent;
        else layout->max_offset += extent;
    }
}

// Whether outer_stride == inner_stride * inner_size; a product past int64 (huge strides) equals no stride.
bool strides_chain(std::int64_t outer_stride, std::int64_t inner_stride, std::int64_t inner_size) {
    std::int64_t product;
    return !__builtin_mul_overflow(inner_stride, inner_size, &product) && product == outer_stride;
}

// Merges neighbouring index dims (outer, inner) whose strides chain in both x and y, so a contiguous
// block of rows becomes one dimension.
std::vector<IndexDim> collapse(const std::vector<IndexDim>& dims) {
    std::vector<IndexDim> merged;
    for (const IndexDim& dim : dims) {
        if (!merged.empty()) {
            IndexDim& outer = merged.back();
            if (strides_chain(outer.x_stride, dim.x_stride, dim.size) && strides_chain(outer.y_stride, dim.y_stride, dim.size)) {
                outer = {outer.size * dim.size, dim.x_stride, dim.y_stride};
                continue;
            }
        }
        merged.push_back(dim);
    }
    return merged;
}

}  // namespace

smxStatus_t make_softmax_info(int mode, int axis, const smxTensorDescriptor* y,
                              const smxTensorDescriptor* x, SoftmaxInfo* info) {
    if (x == nullptr) return fail(SMX_STATUS_BAD_PARAM_NULL_POINTER, "xDesc is NULL");
    if (y == nullptr) return fail(SMX_STATUS_BAD_PARAM_NULL_POINTER, "yDesc is NULL");
    if (mode != SMX_SOFTMAX && mode != SMX_LOG_SOFTMAX) {
        return fail(SMX_STATUS_BAD_PARAM_MODE, "mode {} is not an smxSoftmaxMode_t (SMX_SOFTMAX=1, SMX_LOG_SOFTMAX=2)",
                    mode);
    }
    bool same_shape = x->ndim == y->ndim;
    for (int i = 0; same_shape && i < x->ndim; ++i) same_shape = x->shape[i] == y->shape[i];
    if (!same_shape) {
        return fail(SMX_STATUS_BAD_PARAM_SHAPE, "y shape {} != x shape {}", format_dims(y->shape, y->ndim),
                    format_dims(x->shape, x->ndim));
    }
    const int ndim = x->ndim;
    if (axis < -ndim || axis >= ndim) {
        return fail(SMX_STATUS_BAD_PARAM_AXIS, "axis {} out of range for a {}-d tensor (expected {}..{})", axis, ndim,
                    -ndim, ndim - 1);
    }
    if (!is_supported_dtype_pair(x->dtype, y->dtype)) {
        return fail(SMX_STATUS_NOT_SUPPORTED_DTYPE_PAIR,
                    "dtype pair x {} -> y {} is not supported: f16/bf16/f32 go to any of f16/bf16/f32, f64 only "
                    "to f64",
                    dtype_name(x->dtype), dtype_name(y->dtype));
    }
    SMX_RETURN_IF_ERROR(check_no_self_overlap(*y));

    SoftmaxInfo out;
    out.mode = static_cast<smxSoftmaxMode_t>(mode);
    out.x_dtype = x->dtype;
    out.y_dtype = y->dtype;
    out.ndim = ndim;
    out.axis = axis < 0 ? axis + ndim : axis;
    std::copy(x->shape, x->shape + ndim, out.shape);
    out.numel = x->numel;
    out.row_len = x->shape[out.axis];
    out.rows = out.row_len > 0 ? out.numel / out.row_len : 0;
    offset_range(*x, &out.x);
    offset_range(*y, &out.y);
    out.same_layout = dtype_size(x->dtype) == dtype_size(y->dtype);
    for (int i = 0; i < ndim; ++i) {
        if (x->shape[i] > 1 && x->strides[i] != y->strides[i]) out.same_layout = false;
    }
    // A row of one element has no meaningful axis stride: call it contiguous.
    out.x.axis_stride = out.row_len > 1 ? x->strides[out.axis] : 1;
    out.y.axis_stride = out.row_len > 1 ? y->strides[out.axis] : 1;

    std::vector<IndexDim> index;
    for (int i = 0; i < ndim; ++i) {
        if (i != out.axis && x->shape[i] > 1) index.push_back({x->shape[i], x->strides[i], y->strides[i]});
    }
    index = collapse(index);

    // Rows: contiguous axis, and the rows one strided sequence.
    if (out.x.axis_stride == 1 && out.y.axis_stride == 1 && index.size() <= 1) {
        out.layout = SoftmaxLayout::Rows;
        out.x.row_stride = index.empty() ? out.row_len : index[0].x_stride;
        out.y.row_stride = index.empty() ? out.row_len : index[0].y_stride;
        *info = out;
        return SMX_STATUS_SUCCESS;
    }
    // Spatial: some other dim is contiguous in both; everything else must collapse to one outer dim.
    const auto inner = std::find_if(index.begin(), index.end(),
                                    [](const IndexDim& d) { return d.x_stride == 1 && d.y_stride == 1; });
    if (inner != index.end() && index.size() <= 2) {
        out.layout = SoftmaxLayout::Spatial;
        out.inner = inner->size;
        out.outer = out.rows / out.inner;
        const auto outer = index.size() == 2 ? (inner == index.begin() ? index.begin() + 1 : index.begin()) : index.end();
        out.x.outer_stride = outer != index.end() ? outer->x_stride : 0;
        out.y.outer_stride = outer != index.end() ? outer->y_stride : 0;
        *info = out;
        return SMX_STATUS_SUCCESS;
    }
    out.layout = SoftmaxLayout::General;
    out.index_ndim = static_cast<int>(index.size());
    for (std::size_t i = 0; i < index.size(); ++i) {
        out.index_shape[i] = index[i].size;
        out.x.index_strides[i] = index[i].x_stride;
        out.y.index_strides[i] = index[i].y_stride;
    }
    *info = out;
    return SMX_STATUS_SUCCESS;
}

std::string describe(const SoftmaxInfo& info) {
    std::string text = fmt::format("{} {}->{} shape {} axis {}: {} rows={} row_len={} axis_stride x={} y={}",
                                   info.is_log() ? "log_softmax" : "softmax", dtype_name(info.x_dtype),
                                   dtype_name(info.y_dtype), format_dims(info.shape, info.ndim), info.axis,
                                   layout_name(info.layout), info.rows, info.row_len, info.x.axis_stride,
                                   info.y.axis_stride);
    switch (info.layout) {
        case SoftmaxLayout::Rows:
            text += fmt::format(" row_stride x={} y={}", info.x.row_stride, info.y.row_stride);
            break;
        case SoftmaxLayout::Spatial:
            text += fmt::format(" outer={} inner={} outer_stride x={} y={}", info.outer, info.inner,
                                info.x.outer_stride, info.y.outer_stride);
            break;
        case SoftmaxLayout::General:
            text += fmt::format(" index {} x_strides {} y_strides {}", format_dims(info.index_shape, info.index_ndim),
                                format_dims(info.x.index_strides, info.index_ndim),
                                format_dims(info.y.index_strides, info.index_ndim));
            break;
    }
    return text;
}

smxStatus_t check_forward_pointers(const SoftmaxInfo& info, const void* y, const void* x) {
    const std::size_t x_size = dtype_size(info.x_dtype);
    const std::size_t y_size = dtype_size(info.y_dtype);
    const auto x_address = reinterpret_cast<std::uintptr_t>(x);
    const auto y_address = reinterpret_cast<std::uintptr_t>(y);
    if (x_address % x_size != 0) {
        return fail(SMX_STATUS_BAD_PARAM_ALIGNMENT, "x pointer {} is not aligned to its element size ({} bytes, {})",
                    x, x_size, dtype_name(info.x_dtype));
    }
    if (y_address % y_size != 0) {
        return fail(SMX_STATUS_BAD_PARAM_ALIGNMENT, "y pointer {} is not aligned to its element size ({} bytes, {})",
                    static_cast<const void*>(y), y_size, dtype_name(info.y_dtype));
    }
    // Byte ranges [first, last] each tensor touches, in 128-bit arithmetic: a 64-bit address plus a
    // negative offset (negative strides) could otherwise wrap.
    __extension__ typedef __int128 wide;
    const auto x_first = static_cast<wide>(x_address) + static_cast<wide>(info.x.min_offset) * x_size;
    const auto x_last = static_cast<wide>(x_address) + static_cast<wide>(info.x.max_offset + 1) * x_size - 1;
    const auto y_first = static_cast<wide>(y_address) + static_cast<wide>(info.y.min_offset) * y_size;
    const auto y_last = static_cast<wide>(y_address) + static_cast<wide>(info.y.max_offset + 1) * y_size - 1;
    const bool ranges_meet = x_first <= y_last && y_first <= x_last;
    if (ranges_meet && !(x == y && info.same_layout)) {
        // Each range from its lowest byte, which lies below the pointer where strides are negative.
        return fail(SMX_STATUS_BAD_PARAM_OVERLAP,
                    "y (bytes {:#x}..+{}) overlaps x (bytes {:#x}..+{}) without being the same tensor: in-place "
                    "needs y == x with identical strides and element size",
                    static_cast<unsigned long long>(y_first), static_cast<long long>(y_last - y_first + 1),
                    static_cast<unsigned long long>(x_first), static_cast<long long>(x_last - x_first + 1));
    }
    return SMX_STATUS_SUCCESS;
}

}  // namespace smx
