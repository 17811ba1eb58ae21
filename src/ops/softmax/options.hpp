// options.hpp - softmax options (issue 53): what a caller sets on an smxSoftmaxOptions_t, and the form they
// take in a validated problem (SoftmaxInfo::options), where a per-row scale and a mask are operands of the row
// problem like x and y.
//
// Semantics, per row along the axis (docs/api.md, "Softmax options"): with s the scale and a the additive mask,
// z_j = s * x_j + a_j over the kept elements (keep-mask true, inside the causal window); y is the softmax or
// log-softmax of z over them, 0 (log: -inf) at the others, which are never read. A row whose every kept z is
// -inf, or with nothing kept, gives NaN, or with MaskedRows zero 0 (log: -inf).
#pragma once

#include <cstdint>
#include <string>

#include "core/object_tag.hpp"
#include "core/tensor.hpp"
#include "ops/common/row_problem.hpp"
#include "smx/smx.h"

// The object behind smxSoftmaxOptions_t.
struct smxSoftmaxOptions;

namespace smx {

// The options as set, before they meet an x: the setters validate what they can alone.
struct SoftmaxOptionSettings {
    double scale = 1.0;               // used when !has_scale_tensor
    bool has_scale_tensor = false;
    smxTensorDescriptor scale_tensor{};  // a copy of the caller's descriptor
    bool has_mask = false;
    smxTensorDescriptor mask_tensor{};
    bool causal = false;
    std::int64_t causal_offset = 0;
    smxMaskedRows_t masked_rows = SMX_MASKED_ROWS_NAN;
    bool batch_invariant = false;
};

}  // namespace smx

struct smxSoftmaxOptions {
    SMX_OBJECT_TAG("smxSoftmaxOptions_t");
    smx::SoftmaxOptionSettings settings;
};

namespace smx {

enum class ScaleKind {
    None,    // scale 1 (unset, or set to 1.0): nothing to multiply
    Scalar,  // SoftmaxOptions::scale for every row
    PerRow,  // an F32 operand, one factor per row
};

enum class MaskKind {
    None,
    Keep,      // BOOL: a zero byte excludes the element
    Additive,  // floating: added to the scaled x (IEEE: a -inf gives 0, log -inf, at a finite x)
};

// The options of a validated problem. A default-constructed value is "no options": the problem, its plans and
// their texts are exactly those of a descriptor created without options.
struct SoftmaxOptions {
    ScaleKind scale_kind = ScaleKind::None;
    double scale = 1.0;                          // Scalar
    OperandLayout scale_layout;                  // PerRow: an F32 operand with axis stride 0
    MaskKind mask_kind = MaskKind::None;
    smxDataType_t mask_dtype = SMX_DTYPE_BOOL;   // Keep: BOOL; Additive: a floating dtype
    OperandLayout mask_layout;                   // broadcast to x's shape: zero strides where it repeats
    bool causal = false;
    std::int64_t causal_offset = 0;              // element j of query row i is kept when j <= i + offset
    // Row r's query index i is (r / causal_row_divisor) % causal_queries in the problem's canonical row order
    // (rows as the layout enumerates them; docs/design.md, "Softmax options").
    std::int64_t causal_queries = 1;
    std::int64_t causal_row_divisor = 1;
    smxMaskedRows_t masked_rows = SMX_MASKED_ROWS_NAN;
    bool batch_invariant = false;

    // Whether any option changes what is computed or how it is planned.
    bool any() const {
        return scale_kind != ScaleKind::None || mask_kind != MaskKind::None || causal ||
               masked_rows != SMX_MASKED_ROWS_NAN || batch_invariant;
    }
    // Whether an element can be excluded (keep-mask or causal): such elements are not read.
    bool excludes() const { return mask_kind == MaskKind::Keep || causal; }
    bool needs_scale_data() const { return scale_kind == ScaleKind::PerRow; }
    bool needs_mask_data() const { return mask_kind != MaskKind::None; }
};

// `mask` broadcast to x's shape by NumPy's rules (dims aligned at the end; a size 1 repeats with stride 0): a
// descriptor of x's shape reading the mask's own memory, never a copy. Refuses a mask of more dims than x
// (SMX_STATUS_BAD_PARAM_NDIM) or with a size that is neither x's nor 1 (SMX_STATUS_BAD_PARAM_SHAPE).
smxStatus_t broadcast_mask(const smxTensorDescriptor& mask, const smxTensorDescriptor& x, smxTensorDescriptor* out);

// The option operands of one problem while it is validated: the mask broadcast to x's shape and the per-row
// scale join its operand list (make_row_geometry) after its own operands. The forward's x-shaped operand is x,
// the backward's dx. Must outlive the operand list, which points into it.
struct OptionOperands {
    const SoftmaxOptionSettings* settings = nullptr;  // NULL: no option changes the problem
    smxTensorDescriptor mask{};
    int mask_index = -1;
    int scale_index = -1;
};

// Appends the mask and the per-row scale of `settings` (NULL, or nothing that changes the problem: none) to
// operands[0, *count), checked against `x` (the mask broadcast to x's shape). On failure returns the status and
// sets the last error.
smxStatus_t add_option_operands(const SoftmaxOptionSettings* settings, const smxTensorDescriptor& x,
                                OptionOperands* option_operands, OperandSpec* operands, int* count);

// The validated options of a problem whose geometry make_row_geometry filled from operands[0, count) (with
// `layouts`): the operands' layouts, and causal's checks and row mapping. Leaves `options` as it is when the
// problem has none.
smxStatus_t make_options(const OptionOperands& option_operands, const RowGeometry& geometry,
                         const OperandSpec* operands, const OperandLayout* layouts, int count, SoftmaxOptions* options);

// Call-time checks of the options' data: `scale` and `mask` non-NULL exactly where `options` has those operands
// (`call` names the compute call that takes them, for the message), then appended to operands[0, *count) as
// read operands for check_operand_pointers.
smxStatus_t add_option_pointers(const SoftmaxOptions& options, const void* scale, const void* mask, const char* call,
                                OperandPointer* operands, int* count);

// " options=scale,mask(bool),causal(-1),masked_rows=zero,batch_invariant" for plan texts and logs; empty for
// none, so the texts of problems without options are unchanged.
std::string describe(const SoftmaxOptions& options);

}  // namespace smx
