// bench_options.hpp - smx-bench's softmax options cases (--options, issue 53): each option beside plain softmax
// on the same layout, dtype pair and op in the same run, on the softmax grid's layouts. Each case runs into
// poisoned outputs and is checked against smx's CPU backend (float64) with the same options before it is timed.
//
// The cases (OptionCase), on x of the layout:
//   plain             no options: the baseline every other case's "x plain" divides by (always run)
//   scale             one scale for every row, 1.25 (temperature 0.8)
//   scale_per_row     an F32 scale per row, drawn in [0.5, 2), x's shape with the axis of size 1, contiguous
//   causal            softmax along the last dim only. A 2-d (rows, cols) layout is viewed as (batch, queries,
//                     cols): where cols divides rows, square blocks (rows / cols, cols, cols) with offset 0 (SDPA's
//                     is_causal, about half the elements kept); else one block (1, rows, cols) with offset
//                     max(0, cols - rows) (aligned to the bottom right: queries at the end of a longer context);
//                     a decode layout as (rows, 1, cols) with offset cols - 1 (one query at the end of its keys:
//                     every element kept). More dims: the layout's own last two, offset 0. option_detail gives
//                     the view, the offset and the share of elements kept
//   additive_mask     a full additive mask of x's dtype and layout, one element in 16 -inf, read each call
//   bool_mask         a keep-mask along the axis broadcast over every row (x's shape with every other dim 1;
//                     [1, cols] for a 2-d x), about one element in 8 excluded
//   masked_rows_zero  SMX_MASKED_ROWS_ZERO: the checked call's row 0 is all -inf (nothing to normalize: 0, log
//                     -inf), put back before timing, so the time is the option's cost on rows it leaves as they are
//   batch_invariant   smxSetSoftmaxBatchInvariant(1)
// Bytes: x read and y written (numel each, the causal case's unread elements counted as read, so that its % of
// copy compares with plain's; the target is time relative to plain), plus the mask's and the per-row scale's own
// bytes (a broadcast mask's few elements once).
#pragma once

#include <random>
#include <string>
#include <vector>

#include "bench_case.hpp"
#include "bench_device.hpp"
#include "bench_grid.hpp"
#include "bench_report.hpp"

namespace smx_bench {

enum class OptionCase { Plain, Scale, ScalePerRow, Causal, AdditiveMask, BoolMask, MaskedRowsZero, BatchInvariant };

// The name on the command line and in the records ("scale_per_row").
const char* option_name(OptionCase option);

// The cases a --options list names: "all", or option names separated by commas. plain always runs and comes
// first. Throws std::invalid_argument naming an unknown one.
std::vector<OptionCase> parse_option_cases(const std::string& list);

// The dtype pairs the options grid runs where --dtypes names none: same-dtype f32 and bf16 and the bf16 -> f32
// upcast (logits.float() then softmax), or on the CPU f32 and bf16 -> f32.
std::vector<DtypePair> default_option_pairs(smxDeviceType_t device);

// Whether the case applies to the layout (causal needs the softmax along the last of 2 or more dims).
bool option_applies(OptionCase option, const Layout& layout);

// The plan text the handle makes for a case (descriptors only: nothing allocated or launched).
std::string option_plan(smxHandle_t handle, const Layout& layout, DtypePair dtypes, smxSoftmaxMode_t mode,
                        OptionCase option);

// Checks and times every case of `options` that applies to each layout, dtype pair and op of the grid on
// `device` through `handle`, printing a row per case and returning the records.
std::vector<CaseRecord> run_option_cases(BenchDevice& device, smxHandle_t handle, smxHandle_t cpu_handle,
                                         const std::vector<LayoutPlan>& grid, const std::vector<OptionCase>& options,
                                         const RunInfo& run, TimingChoice timing, std::mt19937_64& rng);

}  // namespace smx_bench
