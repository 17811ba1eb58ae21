// row_problem.cpp - validation of an axis problem's operands and their reduction to canonical rows.
#include "ops/common/row_problem.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "core/tensor.hpp"

namespace smx {

const char* layout_name(RowLayout layout) {
    switch (layout) {
        case RowLayout::Rows: return "rows";
        case RowLayout::Spatial: return "spatial";
        case RowLayout::General: return "general";
    }
    return "?";
}

namespace {

// One non-axis dimension of the row index space, with its stride in each operand.
struct IndexDim {
    std::int64_t size;
    std::int64_t strides[kMaxOperands];
};

// A written operand must be provably free of self-overlap: ordering its dims (of size > 1) by |stride|, each
// stride must exceed the span of all smaller ones. This refuses zero strides and every real overlap; it also
// refuses a few exotic interleavings that do not overlap, which we accept as the price of a cheap exact test.
smxStatus_t check_no_self_overlap(const char* name, const smxTensorDescriptor& t) {
    if (t.numel == 0) return SMX_STATUS_SUCCESS;  // nothing is written, so nothing can collide
    struct StridedDim {
        int dim;
        std::int64_t size;
        std::int64_t abs_stride;
    };
    std::vector<StridedDim> dims;
    for (int i = 0; i < t.ndim; ++i) {
        if (t.shape[i] > 1) dims.push_back({i, t.shape[i], std::llabs(t.strides[i])});
    }
    std::sort(dims.begin(), dims.end(),
              [](const StridedDim& a, const StridedDim& b) { return a.abs_stride < b.abs_stride; });
    std::int64_t span = 0;  // highest offset reachable with the dims seen so far
    for (const StridedDim& d : dims) {
        if (d.abs_stride <= span || d.abs_stride == 0) {
            if (d.abs_stride == 0) {
                return fail(SMX_STATUS_BAD_PARAM_OVERLAP,
                            "{} overlaps itself: dim {} has stride 0 with size {} (an output cannot broadcast)", name,
                            d.dim, d.size);
            }
            return fail(SMX_STATUS_BAD_PARAM_OVERLAP,
                        "{} overlaps itself: strides {} with shape {} make distinct elements share memory", name,
                        format_dims(t.strides, t.ndim), format_dims(t.shape, t.ndim));
        }
        span += d.abs_stride * (d.size - 1);
    }
    return SMX_STATUS_SUCCESS;
}

void offset_range(const smxTensorDescriptor& t, OperandLayout* layout) {
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

// The stride, in operand `spec`'s own tensor, of x's dim `dim` (not the axis): a PerRow operand given
// without the axis numbers the dims after it one lower.
std::int64_t index_stride(const OperandSpec& spec, int ndim, int axis, int dim) {
    const smxTensorDescriptor& t = *spec.tensor;
    const bool axis_dropped = spec.shape == OperandShape::PerRow && t.ndim == ndim - 1;
    return t.strides[axis_dropped && dim > axis ? dim - 1 : dim];
}

// Checks a PerRow or Gathered operand's shape against x's (`first`), once the axis is known.
smxStatus_t check_operand_shape(const OperandSpec& spec, const OperandSpec& first, int axis) {
    const smxTensorDescriptor& t = *spec.tensor;
    const smxTensorDescriptor& x = *first.tensor;
    bool matches = true;
    if (spec.shape == OperandShape::PerRow && t.ndim == x.ndim - 1) {
        for (int i = 0, j = 0; i < x.ndim && matches; ++i) {
            if (i != axis) matches = t.shape[j++] == x.shape[i];
        }
    } else {
        matches = t.ndim == x.ndim;
        for (int i = 0; i < x.ndim && matches; ++i) {
            matches = i == axis ? spec.shape == OperandShape::Gathered || t.shape[i] == 1 : t.shape[i] == x.shape[i];
        }
    }
    if (matches) return SMX_STATUS_SUCCESS;
    if (spec.shape == OperandShape::Gathered) {
        return fail(SMX_STATUS_BAD_PARAM_SHAPE, "{} shape {} is not {} shape {} with axis {} of any size", spec.name,
                    format_dims(t.shape, t.ndim), first.name, format_dims(x.shape, x.ndim), axis);
    }
    std::int64_t keepdim[SMX_MAX_DIMS];
    std::int64_t dropped[SMX_MAX_DIMS];
    for (int i = 0, j = 0; i < x.ndim; ++i) {
        keepdim[i] = i == axis ? 1 : x.shape[i];
        if (i != axis) dropped[j++] = x.shape[i];
    }
    const std::string expected = x.ndim > 1 ? format_dims(dropped, x.ndim - 1) + " or " : std::string();
    return fail(SMX_STATUS_BAD_PARAM_SHAPE, "{} shape {} is not one element per row of {} shape {} along axis {} "
                "(expected {}{})", spec.name, format_dims(t.shape, t.ndim), first.name, format_dims(x.shape, x.ndim),
                axis, expected, format_dims(keepdim, x.ndim));
}

// Merges neighbouring index dims (outer, inner) whose strides chain in every operand, so a contiguous block
// of rows becomes one dimension.
std::vector<IndexDim> collapse(const std::vector<IndexDim>& dims, int count) {
    std::vector<IndexDim> merged;
    for (const IndexDim& dim : dims) {
        if (!merged.empty()) {
            IndexDim& outer = merged.back();
            bool chains = true;
            for (int k = 0; k < count && chains; ++k) chains = strides_chain(outer.strides[k], dim.strides[k], dim.size);
            if (chains) {
                outer.size *= dim.size;
                std::copy(dim.strides, dim.strides + count, outer.strides);
                continue;
            }
        }
        merged.push_back(dim);
    }
    return merged;
}

}  // namespace

smxStatus_t make_row_geometry(int axis, const OperandSpec* operands, int count, RowGeometry* geometry,
                              OperandLayout* layouts) {
    if (count < 1 || count > kMaxOperands) return fail(SMX_STATUS_INTERNAL_ERROR, "{} operands (1..{} supported)", count, kMaxOperands);
    if (operands[0].shape != OperandShape::Full) return fail(SMX_STATUS_INTERNAL_ERROR, "the first operand must be Full");
    for (int k = 0; k < count; ++k) {
        if (operands[k].tensor == nullptr) return fail(SMX_STATUS_BAD_PARAM_NULL_POINTER, "{}Desc is NULL", operands[k].name);
    }
    const smxTensorDescriptor& first = *operands[0].tensor;
    for (int k = 1; k < count; ++k) {
        if (operands[k].shape != OperandShape::Full) continue;  // checked once the axis is known
        const smxTensorDescriptor& t = *operands[k].tensor;
        bool same_shape = t.ndim == first.ndim;
        for (int i = 0; same_shape && i < first.ndim; ++i) same_shape = t.shape[i] == first.shape[i];
        if (!same_shape) {
            return fail(SMX_STATUS_BAD_PARAM_SHAPE, "{} shape {} != {} shape {}", operands[k].name,
                        format_dims(t.shape, t.ndim), operands[0].name, format_dims(first.shape, first.ndim));
        }
    }
    const int ndim = first.ndim;
    if (axis < -ndim || axis >= ndim) {
        return fail(SMX_STATUS_BAD_PARAM_AXIS, "axis {} out of range for a {}-d tensor (expected {}..{})", axis, ndim,
                    -ndim, ndim - 1);
    }
    const int normalized_axis = axis < 0 ? axis + ndim : axis;
    bool all_full = true;
    for (int k = 1; k < count; ++k) {
        if (operands[k].shape == OperandShape::Full) continue;
        all_full = false;
        SMX_RETURN_IF_ERROR(check_operand_shape(operands[k], operands[0], normalized_axis));
    }
    for (int k = 0; k < count; ++k) {
        if (operands[k].written) SMX_RETURN_IF_ERROR(check_no_self_overlap(operands[k].name, *operands[k].tensor));
    }

    RowGeometry out;
    out.ndim = ndim;
    out.axis = normalized_axis;
    std::copy(first.shape, first.shape + ndim, out.shape);
    out.numel = first.numel;
    out.row_len = first.shape[out.axis];
    out.rows = out.row_len > 0 ? out.numel / out.row_len : 0;
    if (!all_full && out.row_len == 0) {
        out.rows = 1;  // fits int64: x's descriptor bounded the product of its non-zero sizes
        for (int i = 0; i < ndim; ++i) out.rows *= i == out.axis ? 1 : first.shape[i];
    }
    bool axis_contiguous = true;
    for (int k = 0; k < count; ++k) {
        layouts[k] = OperandLayout{};
        offset_range(*operands[k].tensor, &layouts[k]);
        const OperandShape shape = operands[k].shape;
        layouts[k].axis_len = shape == OperandShape::Full       ? out.row_len
                              : shape == OperandShape::Gathered ? operands[k].tensor->shape[out.axis]
                                                                : 1;
        // A row of one element has no meaningful axis stride: call it contiguous. A per-row operand repeats
        // its one element along the axis (stride 0); only Full operands decide whether the axis is contiguous.
        layouts[k].axis_stride = shape == OperandShape::PerRow ? 0
                                 : layouts[k].axis_len > 1      ? operands[k].tensor->strides[out.axis]
                                                                : 1;
        if (shape == OperandShape::Full) axis_contiguous = axis_contiguous && layouts[k].axis_stride == 1;
    }

    std::vector<IndexDim> index;
    for (int i = 0; i < ndim; ++i) {
        if (i == out.axis || first.shape[i] <= 1) continue;
        IndexDim dim{first.shape[i], {}};
        for (int k = 0; k < count; ++k) dim.strides[k] = index_stride(operands[k], ndim, out.axis, i);
        index.push_back(dim);
    }
    index = collapse(index, count);

    // Rows: contiguous axis, and the rows one strided sequence.
    if (axis_contiguous && index.size() <= 1) {
        out.layout = RowLayout::Rows;
        for (int k = 0; k < count; ++k) layouts[k].row_stride = index.empty() ? layouts[k].axis_len : index[0].strides[k];
        *geometry = out;
        return SMX_STATUS_SUCCESS;
    }
    // Spatial: some other dim is contiguous in every operand; everything else must collapse to one outer dim.
    const auto inner = std::find_if(index.begin(), index.end(), [count](const IndexDim& d) {
        return std::all_of(d.strides, d.strides + count, [](std::int64_t s) { return s == 1; });
    });
    if (inner != index.end() && index.size() <= 2) {
        out.layout = RowLayout::Spatial;
        out.inner = inner->size;
        out.outer = out.rows / out.inner;
        const auto outer = index.size() == 2 ? (inner == index.begin() ? index.begin() + 1 : index.begin()) : index.end();
        for (int k = 0; k < count; ++k) layouts[k].outer_stride = outer != index.end() ? outer->strides[k] : 0;
        *geometry = out;
        return SMX_STATUS_SUCCESS;
    }
    out.layout = RowLayout::General;
    out.index_ndim = static_cast<int>(index.size());
    for (std::size_t i = 0; i < index.size(); ++i) {
        out.index_shape[i] = index[i].size;
        for (int k = 0; k < count; ++k) layouts[k].index_strides[i] = index[i].strides[k];
    }
    *geometry = out;
    return SMX_STATUS_SUCCESS;
}

std::string describe_geometry(const RowGeometry& geometry, const NamedLayout* operands, int count) {
    // " x=1 y=4": one value per operand, each after its name.
    const auto per_operand = [&](auto value_of) {
        std::string text;
        for (int k = 0; k < count; ++k) text += fmt::format(" {}={}", operands[k].name, value_of(*operands[k].layout));
        return text;
    };
    std::string text = fmt::format("{} rows={} row_len={} axis_stride", layout_name(geometry.layout), geometry.rows,
                                   geometry.row_len);
    text += per_operand([](const OperandLayout& l) { return l.axis_stride; });
    // Per-row and gathered operands have axes of their own length: named where any operand has one.
    for (int k = 0; k < count; ++k) {
        if (operands[k].layout->axis_len != geometry.row_len) {
            text += " axis_len" + per_operand([](const OperandLayout& l) { return l.axis_len; });
            break;
        }
    }
    switch (geometry.layout) {
        case RowLayout::Rows:
            text += " row_stride" + per_operand([](const OperandLayout& l) { return l.row_stride; });
            break;
        case RowLayout::Spatial:
            text += fmt::format(" outer={} inner={} outer_stride", geometry.outer, geometry.inner) +
                    per_operand([](const OperandLayout& l) { return l.outer_stride; });
            break;
        case RowLayout::General:
            text += " index " + format_dims(geometry.index_shape, geometry.index_ndim);
            for (int k = 0; k < count; ++k) {
                text += fmt::format(" {}_strides {}", operands[k].name,
                                    format_dims(operands[k].layout->index_strides, geometry.index_ndim));
            }
            break;
    }
    return text;
}

bool same_layout(const smxTensorDescriptor& a, const smxTensorDescriptor& b) {
    if (dtype_size(a.dtype) != dtype_size(b.dtype) || a.ndim != b.ndim) return false;
    for (int i = 0; i < a.ndim; ++i) {
        if (a.shape[i] > 1 && a.strides[i] != b.strides[i]) return false;
    }
    return true;
}

smxStatus_t check_operand_pointers(const OperandPointer* operands, int count) {
    for (int k = 0; k < count; ++k) {
        const std::size_t size = dtype_size(operands[k].dtype);
        if (reinterpret_cast<std::uintptr_t>(operands[k].pointer) % size != 0) {
            return fail(SMX_STATUS_BAD_PARAM_ALIGNMENT, "{} pointer {} is not aligned to its element size ({} bytes, {})",
                        operands[k].name, operands[k].pointer, size, dtype_name(operands[k].dtype));
        }
    }
    // Byte ranges [first, last] each tensor touches, in 128-bit arithmetic: a 64-bit address plus a negative
    // offset (negative strides) could otherwise wrap.
    __extension__ typedef __int128 wide;
    struct ByteRange {
        wide first;
        wide last;
    };
    const auto range_of = [](const OperandPointer& operand) {
        const auto address = static_cast<wide>(reinterpret_cast<std::uintptr_t>(operand.pointer));
        const auto size = static_cast<wide>(dtype_size(operand.dtype));
        return ByteRange{address + static_cast<wide>(operand.layout->min_offset) * size,
                         address + static_cast<wide>(operand.layout->max_offset + 1) * size - 1};
    };
    for (int w = 0; w < count; ++w) {
        if (!operands[w].written) continue;
        const ByteRange written = range_of(operands[w]);
        for (int o = 0; o < count; ++o) {
            if (o == w) continue;
            const ByteRange other = range_of(operands[o]);
            if (!(written.first <= other.last && other.first <= written.last)) continue;
            const bool in_place = operands[w].in_place_with == o;
            if (in_place && operands[w].pointer == operands[o].pointer && operands[w].same_layout_as_in_place) continue;
            // Each range from its lowest byte, which lies below the pointer where strides are negative.
            const std::string rule =
                in_place ? fmt::format("without being the same tensor: in-place needs {} == {} with identical strides "
                                       "and element size", operands[w].name, operands[o].name)
                         : std::string("and may not share any memory with it");
            return fail(SMX_STATUS_BAD_PARAM_OVERLAP,
                        "{} (bytes {:#x}..+{}) overlaps {} (bytes {:#x}..+{}) {}",
                        operands[w].name, static_cast<unsigned long long>(written.first),
                        static_cast<long long>(written.last - written.first + 1), operands[o].name,
                        static_cast<unsigned long long>(other.first), static_cast<long long>(other.last - other.first + 1),
                        rule);
        }
    }
    return SMX_STATUS_SUCCESS;
}

smxStatus_t TouchedOperands::add(std::int64_t elements, const OperandPointer& operand) {
    if (elements == 0) return SMX_STATUS_SUCCESS;
    if (operand.pointer == nullptr) {
        return fail(SMX_STATUS_BAD_PARAM_NULL_POINTER, "{} is NULL but the tensor has {} elements", operand.name, elements);
    }
    if (count_ == kMaxOperands) return fail(SMX_STATUS_INTERNAL_ERROR, "more than {} operands", kMaxOperands);
    operands_[count_++] = operand;
    return SMX_STATUS_SUCCESS;
}

}  // namespace smx
