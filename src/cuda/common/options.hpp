// options.hpp - the softmax options (ops/softmax/options.hpp) as a kernel reads them, and how a planner fills
// them from a validated problem. Plain C++ (kernels include it: no host library headers); the device side is
// options.cuh.
#pragma once

#include <cstdint>

#include "smx/smx.h"

namespace smx {
struct RowGeometry;
struct SoftmaxOptions;
}  // namespace smx

namespace smx::cuda {

// The options of one problem. The per-row scale and the mask are located like x and y: a row's start from its
// index in the problem's rows laid out as an index space (describe_index_space, cuda/general/plan.hpp), with each
// operand's own strides.
struct OptionsParams {
    const float* scale = nullptr;           // per-row factors (scale_kind 2)
    const void* mask = nullptr;
    double scalar_scale = 1.0;              // scale_kind 1
    std::int64_t mask_axis_stride = 0;
    std::int64_t scale_index_strides[SMX_MAX_DIMS] = {};
    std::int64_t mask_index_strides[SMX_MAX_DIMS] = {};
    // Causal: row r's query is (r / causal_row_divisor) % causal_queries; element j is kept when
    // j <= query + causal_offset (the offset clamped to [-queries, row_len] so the sum cannot overflow).
    std::int64_t causal_offset = 0;
    std::int64_t causal_queries = 1;
    std::int64_t causal_row_divisor = 1;
    int scale_kind = 0;                     // 0 none, 1 scalar, 2 per row
    int mask_kind = 0;                      // 0 none, 1 keep (bool), 2 additive
    int mask_dtype = 0;                     // an smxDataType_t: the additive mask's element type
    int causal = 0;
    int zero_rows = 0;                      // masked rows give 0 (log: -inf) instead of NaN
};

// The options of a problem (the forward's or the backward's) with the pointers left empty (bound at the call).
OptionsParams options_params(const RowGeometry& geometry, const SoftmaxOptions& options);

// n / d for 0 <= n < 2^31 by a multiply and a shift instead of a division (d fixed per launch, 1 <= d < 2^31):
// with l = ceil(log2 d) and magic = floor(2^32 (2^l - d) / d) + 1, n / d = (umulhi(n, magic) + n) >> l
// (Granlund and Montgomery's round-up method; the sum stays below 2^32 because n does below 2^31).
struct FastDivisor {
    std::uint32_t magic = 1;
    int shift = 0;
};
constexpr FastDivisor make_fast_divisor(std::uint32_t divisor) {
    int shift = 0;
    while ((std::uint64_t{1} << shift) < divisor) ++shift;
    const std::uint64_t magic = (std::uint64_t{1} << 32) * ((std::uint64_t{1} << shift) - divisor) / divisor + 1;
    return {static_cast<std::uint32_t>(magic), shift};
}
constexpr std::uint32_t fast_quotient(std::uint32_t n, FastDivisor divisor) {
    const auto high = static_cast<std::uint32_t>((static_cast<std::uint64_t>(n) * divisor.magic) >> 32);
    return (high + n) >> divisor.shift;
}

// Elements of the range [begin, begin + count) of a row that lie inside its causal window, the row's first
// read_len elements: 0 for a range wholly past it (the fast families' slices and chunks read no element past it).
constexpr std::int64_t window_count(std::int64_t read_len, std::int64_t begin, std::int64_t count) {
    const std::int64_t inside = read_len - begin;
    return inside < 0 ? 0 : (inside < count ? inside : count);
}

// The options of a Rows-layout problem as the fast row families read them (warp, block-regs, grid-regs): the
// per-row scale and the mask are operands of the rows' layout, so row r's start in each is r times its row
// stride and a mask row is contiguous along the axis. Row r's causal query is r % causal_queries (Rows: the
// divisor is 1). A plain problem's instances never read it; kinds as OptionsParams'.
struct RowsOptionsParams {
    const float* scale = nullptr;  // per-row factors (scale_kind 2)
    const void* mask = nullptr;
    double scalar_scale = 1.0;     // scale_kind 1
    std::int64_t scale_row_stride = 0;
    std::int64_t mask_row_stride = 0;
    std::int64_t causal_offset = 0;  // clamped as OptionsParams' is
    std::int64_t causal_queries = 1;
    int scale_kind = 0;
    int mask_kind = 0;
    int mask_dtype = 0;
    int causal = 0;
    int zero_rows = 0;
    // Row r's causal query as r - q * queries, q = fast_quotient(r, causal_divisor), where every row index is
    // below 2^31 (causal_fast_query), instead of a 64-bit remainder per row (a division sequence, a call where
    // the operands pass 32 bits): short rows pay it once a row, a row being a few elements a thread.
    FastDivisor causal_divisor;
    int causal_fast_query = 0;
    // The unmasked set's softmax folds the scale into the exp's multiplier (rows_scale_folds): no scale or a
    // scalar one, positive and moderate. Others multiply each x by the scale as it is loaded (block-regs' per-row
    // fold is an instance of its own, not this flag: block_regs_softmax_row_folded_kernel).
    int fold_scale = 0;

    void bind(const void* scale_pointer, const void* mask_pointer) {
        scale = static_cast<const float*>(scale_pointer);
        mask = mask_pointer;
    }
};

// The mask forms an options instance of the fast row families is compiled for: each leaves out the code of
// the forms it cannot meet, so an unmasked instance is the plain body plus the per-row scale and causal
// window (decided per row, no code per form). Chosen at plan time (rows_option_set); Any reads every mask kind
// and additive dtype, choosing per launch, as the single options instance did before the sets
// (docs/cuda-kernels.md, "Option sets").
enum class RowsOptionSet : int {
    Unmasked = 0,     // scale and causal only
    Keep = 1,         // a boolean mask, with scale and causal
    AdditiveOfX = 2,  // an additive mask of x's dtype, with scale and causal
    Any = 3,          // every option, the mask's kind and dtype read at run time
};
constexpr int kRowsOptionSets = 4;

// The set of a problem's options on the fast row families (x_dtype: the problem's x), or Any where force_any
// (the debugging override SMX_CUDA_OPTION_SET=any, preferences.hpp).
RowsOptionSet rows_option_set(const SoftmaxOptions& options, smxDataType_t x_dtype, bool force_any);
// The set's name in plan texts ("unmasked", "keep", "additive", "any").
const char* option_set_name(RowsOptionSet set);

// Whether a problem's options can run on the fast row families: Rows layout, the mask contiguous along the
// axis and causal rows in row order. Others take the general family.
bool rows_options_apply(const RowGeometry& geometry, const SoftmaxOptions& options);

// Whether a problem's scale folds into the exp on the fast row families: none (causal, masked_rows) or a scalar
// that scalar_scale_folds takes. A fold needs max(s x) = s max(x) (s > 0), s x NaN only where x is (s finite,
// not 0) and s log2(e) finite; per-row scales keep the multiply (rows of a warp differ). The decision reads
// the options alone, never the row count, so batch-invariant rows fold alike in every batch.
bool rows_scale_folds(const SoftmaxOptions& options);

// Whether a scalar scale folds: its float, the value the kernels multiply by, lies in (0, kFoldedScaleMax]. The
// double is not what they use: 1e-50 is positive there but 0 in float, and a fold would then multiply the causal
// window's -inf by 0; a double just past 2^64 may round to it.
constexpr float kFoldedScaleMax = 0x1p64f;
inline bool scalar_scale_folds(double scale) {
    const float kernel_scale = static_cast<float>(scale);
    return kernel_scale > 0.0f && kernel_scale <= kFoldedScaleMax;
}

// How one row's scale s folds into softmax's exps whatever its value (block-regs' per-row fold): z = factor *
// (pre_factor * x), which is s * x rounded once, bit for bit. pre_factor * x is exact in any dtype (pre_factor is
// 1, -1, or s itself where s is 0 or NaN, giving 0 or NaN), and factor is positive or +inf, so max(z) = factor *
// max(pre_factor * x) (the rounding is monotonic) and the -inf of a causal window set after the pre_factor stays
// -inf. The fast exp takes factor * log2(e) as its multiplier only where factor <= kFoldedScaleMax; larger
// factors take the exact form.
template <class C>
struct RowScaleFold {
    C factor;
    C pre_factor;
};
// Selects rather than branches: a branch on the row's loaded scale made the kernels wait for that load before
// issuing x's (performance.md, "options: per-row scale folded (branch rowfold2)").
template <class C>
constexpr RowScaleFold<C> row_scale_fold(C scale) {
    const bool positive = scale > C(0);
    const bool negative = scale < C(0);
    // 0 of either sign, or NaN: factor 1 and pre_factor * x is z itself.
    return {positive ? scale : (negative ? -scale : C(1)), positive ? C(1) : (negative ? C(-1) : scale)};
}

// The Rows-layout options of a problem that rows_options_apply takes, pointers left empty (bound at the call).
RowsOptionsParams rows_options_params(const RowGeometry& geometry, const SoftmaxOptions& options);

}  // namespace smx::cuda
