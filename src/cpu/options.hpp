// options.hpp - one row's softmax options on the CPU (ops/softmax/options.hpp): which elements the forward
// keeps, the row's scale and z = scale * x + additive mask, shared by the forward's and the backward's
// reference loops.
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/dtype.hpp"
#include "cpu/rows.hpp"
#include "ops/softmax/options.hpp"

namespace smx {

// The options bound to one row of a problem.
struct RowOptions {
    const SoftmaxOptions& options;
    const void* mask;
    std::int64_t mask0;      // the row's mask start
    std::int64_t last_kept;  // the causal window's last kept j (row_len - 1 without causal; < 0: none)
    double scale;            // the row's factor (1 without a scale)

    bool kept(std::int64_t j) const {
        if (j > last_kept) return false;
        if (options.mask_kind != MaskKind::Keep) return true;
        return load_as_double(mask, SMX_DTYPE_BOOL, mask0 + j * options.mask_layout.axis_stride) != 0.0;
    }

    // z_j of a kept element whose input is `x`.
    double z(double x, std::int64_t j) const {
        const double scaled = options.scale_kind == ScaleKind::None ? x : scale * x;
        if (options.mask_kind != MaskKind::Additive) return scaled;
        return scaled + load_as_double(mask, options.mask_dtype, mask0 + j * options.mask_layout.axis_stride);
    }
};

// Row `row`'s options; `scale` and `mask` are the call's option data (NULL where the problem has none).
inline RowOptions bind_row_options(const RowGeometry& geometry, const SoftmaxOptions& options, std::int64_t row,
                                   const void* scale, const void* mask) {
    RowOptions bound{options, mask, 0, geometry.row_len - 1, options.scale};
    if (options.needs_mask_data()) bound.mask0 = row_offset(geometry, options.mask_layout, row);
    if (options.scale_kind == ScaleKind::PerRow) {
        bound.scale = load_as_double(scale, SMX_DTYPE_F32, row_offset(geometry, options.scale_layout, row));
    }
    if (options.causal) {
        // The window j <= i + offset, saturated to [-1, row_len - 1].
        const std::int64_t query = (row / options.causal_row_divisor) % options.causal_queries;
        std::int64_t last;
        if (__builtin_add_overflow(query, options.causal_offset, &last)) {
            last = options.causal_offset > 0 ? geometry.row_len : -1;
        }
        bound.last_kept = std::max<std::int64_t>(-1, std::min(last, geometry.row_len - 1));
    }
    return bound;
}

}  // namespace smx
