// row_problem.hpp - what every operator that reduces along one axis shares: its operands (tensors of one
// shape, each with its own strides and dtype), validated once and reduced to canonical rows.
//
// Any N-d strided operands and an axis become rows of length `row_len`: element j of a row sits at
// `axis_stride * j` from the row's start in each operand, and the rows are enumerated by a collapsed index
// space. Three physical layouts are told apart because each has its own fast kernels:
//   Rows     the axis is contiguous in every operand (stride 1) and the rows form one strided sequence;
//   Spatial  the axis is strided, but one other dimension is contiguous in every operand ("inner"), so
//            lanes can run along it coalesced while looping over the axis; all else collapses to one "outer";
//   General  anything else: each row's start comes from a multi-index, elements by the axis strides.
// Softmax (x -> y), its backward (dy, y -> dx) and any later operator along an axis describe their tensors
// as a list of operands and get the same analysis, overlap rules and pointer checks.
//
// Operands need not all have x's shape (OperandShape): a per-row operand (logsumexp's out, a class target)
// is read as a tensor of x's shape whose axis has stride 0, and a gathered one (gather's index and out) as
// one whose axis has its own length K. Every operand's non-axis dims go through the one index-space
// analysis, so a collapsed row index r names the same row in all of them: row r's x elements, its per-row
// element and its K gathered elements are found from each operand's own row start and axis stride.
#pragma once

#include <cstdint>
#include <string>

#include "smx/smx.h"

namespace smx {

enum class RowLayout { Rows, Spatial, General };

// The most operands one problem may have.
inline constexpr int kMaxOperands = 8;

const char* layout_name(RowLayout layout);

// How an operand's shape relates to the problem's shape, the first operand's ("x").
enum class OperandShape {
    Full,      // x's shape: rows of row_len elements (x, y, dlogits)
    PerRow,    // one element per row: x's shape without the axis, or with the axis of size 1 (lse, target)
    Gathered,  // x's shape but for the axis, of its own size K >= 0 (gather's index and out)
};

// Where one operand's elements sit, relative to its data pointer, in elements.
struct OperandLayout {
    std::int64_t axis_len = 0;         // elements of a row in this operand: row_len, 1 (PerRow) or K (Gathered)
    std::int64_t axis_stride = 1;      // between consecutive elements of a row (1 where axis_len <= 1; PerRow 0)
    std::int64_t row_stride = 0;       // Rows: between consecutive rows
    std::int64_t outer_stride = 0;     // Spatial: between consecutive outer indices
    std::int64_t index_strides[SMX_MAX_DIMS] = {};  // General: per collapsed index dim
    std::int64_t min_offset = 0;       // lowest and highest element offset the tensor touches
    std::int64_t max_offset = 0;
};

// What every operand of a problem shares: the original shape and axis, and the canonical rows.
struct RowGeometry {
    int ndim = 0;                      // of the original tensors
    int axis = 0;                      // normalized to [0, ndim)
    std::int64_t shape[SMX_MAX_DIMS] = {};  // the original shape, for logs and messages
    std::int64_t numel = 0;            // of x; 0: nothing to read (there may still be rows to write)
    std::int64_t row_len = 0;          // n, the axis' size
    // The product of the sizes but the axis'. Where every operand is Full it is 0 when numel is 0 (nothing
    // to write); with PerRow or Gathered operands it counts rows even when row_len is 0 (logsumexp of an
    // empty axis still writes -inf per row).
    std::int64_t rows = 0;

    RowLayout layout = RowLayout::General;
    // Spatial: rows == outer * inner; row r = (o, i) starts at o * outer_stride + i (inner stride is 1).
    std::int64_t outer = 1;
    std::int64_t inner = 1;
    // General: rows enumerated row-major over index_shape (outermost first); index_ndim may be 0.
    int index_ndim = 0;
    std::int64_t index_shape[SMX_MAX_DIMS] = {};
};

// One tensor of a problem as the caller passed it: its name in messages ("x", "dy"), whether the operator
// writes it (written operands must not overlap themselves), and how its shape relates to x's.
struct OperandSpec {
    const char* name;
    const smxTensorDescriptor* tensor;
    bool written;
    OperandShape shape = OperandShape::Full;
};

// Checks every operand (non-NULL, its shape against the first's as its OperandShape says, written ones free
// of self-overlap) and the axis, then fills the shared geometry and each operand's layout (layouts[i] for
// operands[i]). The first operand must be Full. The layout (Rows / Spatial / General) is named from every
// operand's index strides, and from the axis strides of the Full operands only: a gathered operand keeps its
// own axis stride whatever the layout. With Full operands only, the result is what it always was. On failure
// returns the status and sets the last error. Dtypes are the operator's business: this checks none.
smxStatus_t make_row_geometry(int axis, const OperandSpec* operands, int count, RowGeometry* geometry,
                              OperandLayout* layouts);

// One operand's layout and its name, for describe_geometry.
struct NamedLayout {
    const char* name;
    const OperandLayout* layout;
};

// The geometry part of a problem's log line, each stride given per operand in the order passed:
// "rows rows=8 row_len=1024 axis_stride x=1 y=1 row_stride x=1024 y=1024" (with " axis_len x=1024 out=1"
// after the axis strides where an operand is per-row or gathered).
std::string describe_geometry(const RowGeometry& geometry, const NamedLayout* operands, int count);

// Whether two tensors of one shape place every element at the same offset with the same element size:
// what makes passing one pointer for both (in place) legal.
bool same_layout(const smxTensorDescriptor& a, const smxTensorDescriptor& b);

// One operand's pointer at call time, with what the checks need to know of it.
struct OperandPointer {
    const char* name;
    const void* pointer;
    smxDataType_t dtype;
    const OperandLayout* layout;
    bool written;
    // For a written operand: the index of the one operand it may be in place with (same pointer, same
    // layout), or -1 for none.
    int in_place_with;
    bool same_layout_as_in_place;  // same_layout() of the two descriptors, from the descriptor's creation
};

// Call-time checks of the actual pointers: each aligned to its element size; a written operand's bytes meet
// no other operand's, except the one it may be in place with, when the pointers are equal and the layouts
// the same. `numel` > 0 (pointers of empty problems are never checked).
smxStatus_t check_operand_pointers(const OperandPointer* operands, int count);

// The operands a call touches (those with elements), collected for check_operand_pointers and the device's
// pointer check. An operand without elements is left out: its pointer may be anything, NULL included.
class TouchedOperands {
public:
    // Adds `operand` if `elements` > 0, refusing a NULL pointer by name (SMX_STATUS_BAD_PARAM_NULL_POINTER).
    // A written operand's in_place_with counts among the operands added before it.
    smxStatus_t add(std::int64_t elements, const OperandPointer& operand);
    // check_operand_pointers over the operands added.
    smxStatus_t check() const { return check_operand_pointers(operands_, count_); }
    const OperandPointer* data() const { return operands_; }
    int size() const { return count_; }

private:
    OperandPointer operands_[kMaxOperands] = {};
    int count_ = 0;
};

}  // namespace smx
