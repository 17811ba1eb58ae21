// info.hpp - a softmax problem, validated once and reduced to the canonical form every backend runs.
//
// Any N-d strided (x, y) pair and an axis become rows of length `row_len`: element j of a row sits at
// `axis_stride * j` from the row's start, and the rows are enumerated by a collapsed index space.
// Three physical layouts are told apart because each has its own fast kernel:
//   Rows     the axis is contiguous in x and y (stride 1) and the rows form one strided sequence;
//   Spatial  the axis is strided, but one other dimension is contiguous in x and y ("inner"), so lanes
//            can run along it coalesced while looping over the axis; all else collapses to one "outer";
//   General  anything else: each row's start comes from a multi-index, elements by the axis strides.
#pragma once

#include <cstdint>
#include <string>

#include "smx/smx.h"

namespace smx {

enum class SoftmaxLayout { Rows, Spatial, General };

const char* layout_name(SoftmaxLayout layout);

// Where one tensor's elements sit, relative to its data pointer, in elements.
struct SoftmaxOperandLayout {
    std::int64_t axis_stride = 1;      // between consecutive elements of a row
    std::int64_t row_stride = 0;       // Rows: between consecutive rows
    std::int64_t outer_stride = 0;     // Spatial: between consecutive outer indices
    std::int64_t index_strides[SMX_MAX_DIMS] = {};  // General: per collapsed index dim
    std::int64_t min_offset = 0;       // lowest and highest element offset the tensor touches
    std::int64_t max_offset = 0;
};

struct SoftmaxInfo {
    smxSoftmaxMode_t mode = SMX_SOFTMAX;
    smxDataType_t x_dtype = SMX_DTYPE_F32;
    smxDataType_t y_dtype = SMX_DTYPE_F32;
    int ndim = 0;                      // of the original tensors
    int axis = 0;                      // normalized to [0, ndim)
    std::int64_t shape[SMX_MAX_DIMS] = {};  // the original shape, for logs and messages
    std::int64_t numel = 0;            // 0: nothing to do
    std::int64_t row_len = 0;          // n, the axis' size
    std::int64_t rows = 0;             // numel / row_len (0 when numel == 0)

    SoftmaxLayout layout = SoftmaxLayout::General;
    // Spatial: rows == outer * inner; row r = (o, i) starts at o * outer_stride + i (inner stride is 1).
    std::int64_t outer = 1;
    std::int64_t inner = 1;
    // General: rows enumerated row-major over index_shape (outermost first); index_ndim may be 0.
    int index_ndim = 0;
    std::int64_t index_shape[SMX_MAX_DIMS] = {};

    SoftmaxOperandLayout x;
    SoftmaxOperandLayout y;
    // x and y have identical strides and element size: y == x is a legal in-place call.
    bool same_layout = false;

    bool is_log() const { return mode == SMX_LOG_SOFTMAX; }
};

// Validates (mode, axis, y, x) and fills `info`. `mode` is the raw value a caller passed. On failure returns the status and sets the last error.
smxStatus_t make_softmax_info(int mode, int axis, const smxTensorDescriptor* y,
                              const smxTensorDescriptor* x, SoftmaxInfo* info);

// One line for logs: "softmax f16->f32 shape [8,1024] axis 1: Rows rows=8 row_len=1024 ...".
std::string describe(const SoftmaxInfo& info);

// Forward-time check of the actual pointers: in-place must have the same layout; any other byte-range
// overlap of x and y is refused. Pointers must be aligned to their element size.
smxStatus_t check_forward_pointers(const SoftmaxInfo& info, const void* y, const void* x);

}  // namespace smx
