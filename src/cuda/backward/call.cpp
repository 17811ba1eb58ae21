// call.cpp - the backward families' host helpers: the parameters bound to a call's pointers (the alignment
// facts only the pointers decide) and the pieces every backward planner shares.
#include "cuda/backward/call.hpp"

#include <cstdint>

namespace smx::cuda {
namespace {

bool aligned(const void* pointer, std::int64_t bytes) {
    return reinterpret_cast<std::uintptr_t>(pointer) % static_cast<std::uintptr_t>(bytes) == 0;
}

}  // namespace

void BackwardRowsParams::bind(const BackwardPointers& pointers, const BackwardSizes& sizes) {
    dy = pointers.dy;
    y = pointers.y;
    dx = pointers.dx;
    workspace = pointers.workspace;
    const auto value_size = static_cast<std::int64_t>(sizes.value);
    const auto gradient_size = static_cast<std::int64_t>(sizes.gradient);
    const std::int64_t value_pack_bytes = pack * value_size;
    const std::int64_t gradient_pack_bytes = pack * gradient_size;
    // A row starts on a whole pack when the base does and the row stride is whole packs (a single row's
    // stride is never used).
    const auto rows_aligned = [&](const void* base, std::int64_t stride, std::int64_t pack_bytes, std::int64_t size) {
        return aligned(base, pack_bytes) && (rows <= 1 || (stride * size) % pack_bytes == 0);
    };
    dy_rows_aligned = rows_aligned(dy, dy_row_stride, value_pack_bytes, value_size);
    y_rows_aligned = rows_aligned(y, y_row_stride, value_pack_bytes, value_size);
    dx_rows_aligned = rows_aligned(dx, dx_row_stride, gradient_pack_bytes, gradient_size);
    // Bases at one element phase within a pack (a view offset alike in all three, or no offset) and row
    // strides equal modulo the pack: every row then sits at the same element phase in all three operands,
    // so one head peel aligns them all.
    const auto element_phase = [&](const void* base, std::int64_t size) {
        const auto address = static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(base) % static_cast<std::uintptr_t>(pack * size));
        return address % size == 0 ? address / size : -1;  // -1: not on an element boundary
    };
    const std::int64_t dy_phase = element_phase(dy, value_size);
    const bool same_bases = dy_phase >= 0 && element_phase(y, value_size) == dy_phase &&
                            element_phase(dx, gradient_size) == dy_phase;
    const bool same_strides = rows <= 1 || ((dy_row_stride - y_row_stride) % pack == 0 && (dy_row_stride - dx_row_stride) % pack == 0);
    same_phase = same_bases && same_strides;
}

void BackwardSpatialParams::bind(const BackwardPointers& pointers, const BackwardSizes& sizes) {
    dy = pointers.dy;
    y = pointers.y;
    dx = pointers.dx;
    const auto value_size = static_cast<std::int64_t>(sizes.value);
    const auto gradient_size = static_cast<std::int64_t>(sizes.gradient);
    // Every vector starts at a column that is a multiple of the pack: aligned iff the base and the strides
    // (in bytes) are multiples of the vector's bytes (a single outer index's stride is never used).
    const bool several_outer = tiles > tiles_per_outer;
    const auto vectors_of = [&](const void* base, std::int64_t axis_stride, std::int64_t outer_stride, std::int64_t size) {
        const std::int64_t bytes = pack * size;
        return aligned(base, bytes) && (axis_stride * size) % bytes == 0 &&
               (!several_outer || (outer_stride * size) % bytes == 0);
    };
    vectors_aligned = vectors_of(dy, dy_axis_stride, dy_outer_stride, value_size) &&
                      vectors_of(y, y_axis_stride, y_outer_stride, value_size) &&
                      vectors_of(dx, dx_axis_stride, dx_outer_stride, gradient_size);
}

void BackwardGeneralParams::bind(const BackwardPointers& pointers, const BackwardSizes&) {
    dy = pointers.dy;
    y = pointers.y;
    dx = pointers.dx;
}

BackwardRowsParams backward_rows_params(const SoftmaxBackwardInfo& info) {
    BackwardRowsParams params;
    params.rows = info.rows;
    params.row_len = info.row_len;
    params.dy_row_stride = info.dy.row_stride;
    params.y_row_stride = info.y.row_stride;
    params.dx_row_stride = info.dx.row_stride;
    params.pack = backward_pack(info);
    params.log_mode = info.is_log() ? 1 : 0;
    return params;
}

smxStatus_t require_backward_kernel(const void* kernel, const SoftmaxBackwardInfo& info, const char* family) {
    return require_kernel(kernel, info.dy_dtype, info.dx_dtype, family);
}

}  // namespace smx::cuda
