// logprobs_reference.hpp - the float64 references of logsumexp, log-softmax gather and cross-entropy, written
// from their formulas over multi-indices (the log-probabilities from reference_softmax's log mode, never from
// the library), each value with the error scale a tolerance is relative to; plus index tensors for tests.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "support/reference.hpp"

namespace smx_test {

// Values in the logical (row-major) order of an output, each with its error scale: a backend's result r of
// reference value v passes when |r - v| <= rtol * scale (compare_backward_to_reference; NaN and infinities
// must match exactly).
using ScaledReference = BackwardReference;

// compare_backward_to_reference (rtol of out's dtype, or `compute_rtol` where larger) after rounding each
// finite reference value that lies beyond out's dtype's range to it (+-inf), as rounding the result once does.
std::string compare_to_scaled_reference(const HostTensor& out, ScaledReference ref, double compute_rtol = 0.0);

// Column-major strides for a shape: every dim's order reversed against row-major, a layout of its own.
std::vector<std::int64_t> column_major_strides(const std::vector<std::int64_t>& shape);

// Reads and writes element `element_offset` (relative to data()) of an I32/I64 tensor.
std::int64_t get_index(const HostTensor& t, std::int64_t element_offset);
void set_index(HostTensor& t, std::int64_t element_offset, std::int64_t value);

// Fills every element of an index tensor with uniform integers in [low, high].
void fill_indices(HostTensor& t, std::mt19937_64& rng, std::int64_t low, std::int64_t high);

// The offset of row r's element in a per-row tensor `t` of x's rows along `axis` (x's shape without the axis,
// or with it of size 1), rows numbered row-major over x's other dims.
std::int64_t per_row_offset(const HostTensor& t, const std::vector<std::int64_t>& x_shape, int axis, std::int64_t r);

// The number of rows of x along `axis`: the product of its other sizes.
std::int64_t row_count(const std::vector<std::int64_t>& x_shape, int axis);

// The element offsets of row r's elements of x along `axis`, in axis order.
std::vector<std::int64_t> row_offsets(const HostTensor& x, int axis, std::int64_t r);

// A per-row tensor of x's rows along `axis`: x's shape without the axis (or, with `keepdim`, with it of size
// 1), row-major strides times `stride_factor` (2: every other element; -1: reversed).
HostTensor make_per_row_tensor(smxDataType_t dtype, const std::vector<std::int64_t>& x_shape, int axis,
                               bool keepdim = false, std::int64_t stride_factor = 1);

// Overwrites rows of x with the special rows the operators must get right, cycling through them with an
// ordinary random row between any two: one NaN, one +inf, all -inf, some -inf, values near the dtype's largest
// (both signs), values near its smallest, one finite value among -inf. Returns how many kinds there are: x
// meets every one where it has twice that many rows.
int set_special_rows(HostTensor& x, int axis);

// logsumexp per row (rows in the order above): NaN if a NaN, else +inf if a +inf, else -inf for an empty or all
// -inf row, else max + log(sum(exp(x - max))). Scale |value| + 1.
ScaledReference reference_logsumexp(const HostTensor& x, int axis);

// Over index's logical elements: log_softmax(x)[index] along the axis, +inf for an index outside [0, n).
// Scale |value| + |logsumexp of the row| + 1 (x[i] - lse cancels where both are large).
ScaledReference reference_log_softmax_gather(const HostTensor& x, const HostTensor& index, int axis);

// F.cross_entropy with class indices, as PyTorch composes it (docs/api.md, "Cross-entropy"): per row
// loss = (1 - eps) * -logp[t] + eps / C * sum_c -logp[c], 0 where t == ignore_index, NaN where t is out of
// range; reduced by sum or by the mean over rows not ignored. dlogits = scale * (exp(logp) - (1 - eps) *
// onehot(t) - eps / C), 0 in ignored rows, NaN in rows whose loss is NaN for an out-of-range target or a row
// log_softmax makes NaN.
struct CrossEntropyReference {
    ScaledReference loss;     // per row, or the one reduced value
    ScaledReference lse;      // per row
    ScaledReference dlogits;  // over logits' logical elements
};
CrossEntropyReference reference_cross_entropy(const HostTensor& logits, const HostTensor& target, int axis,
                                              const smxCrossEntropyOptions_t& options);

// ---- running the CPU backend ------------------------------------------------------------------------------

// Each runs one call on a new CPU handle with a workspace of the queried size, returning the first failing
// status. run_cpu_cross_entropy: lse and dlogits may be NULL (not asked for); dlogits == &logits runs in place.
smxStatus_t run_cpu_logsumexp(HostTensor& out, const HostTensor& x, int axis);
smxStatus_t run_cpu_log_softmax_gather(HostTensor& out, const HostTensor& x, const HostTensor& index, int axis);
smxStatus_t run_cpu_cross_entropy(HostTensor& loss, HostTensor* lse, HostTensor* dlogits, const HostTensor& logits,
                                  const HostTensor& target, int axis, const smxCrossEntropyOptions_t& options);

// Options with the given fields and the right size.
smxCrossEntropyOptions_t cross_entropy_options(smxLossReduction_t reduction, std::int64_t ignore_index = -100,
                                               double label_smoothing = 0.0);

}  // namespace smx_test
