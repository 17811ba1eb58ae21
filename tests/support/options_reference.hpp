// options_reference.hpp - the float64 reference of softmax with options (scale, mask, causal, masked rows),
// written from the documented semantics with plain multi-index loops (no row geometry, no broadcast
// descriptor), and what the CPU and CUDA tests need around it: an options spec, RAII options objects, a run
// on any handle, and a comparison whose tolerance covers the rounding of z = scale * x + mask.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "smx/smx.h"
#include "support/reference.hpp"

namespace smx_test {

// The options of one test case. Tensors are read through their own shapes and strides: `scale_tensor` has x's
// shape without the axis (or with the axis of size 1), F32; `mask` any shape broadcastable to x's (BOOL keeps,
// floating adds).
struct OptionsSpec {
    std::optional<double> scale;             // a scalar scale
    const HostTensor* scale_tensor = nullptr;
    const HostTensor* mask = nullptr;
    std::optional<std::int64_t> causal;      // the offset k: j <= i + k kept
    bool zero_rows = false;                  // SMX_MASKED_ROWS_ZERO
    bool batch_invariant = false;
};

// Whether the spec sets an option that takes effect (smx.h: a scalar scale of exactly 1 is no option); a plan's
// text names " options=" exactly then.
bool has_effective_option(const OptionsSpec& spec);

// The spec in words for test messages (" scale 0.370000 zero rows"); empty for none.
std::string describe_spec(const OptionsSpec& spec);

// The reference over x's logical elements (row-major order of its shape): y and, per element, the magnitude of
// the z values its rounding depends on (|z_j| plus the row's largest kept |z|, each as |scale * x| + |mask|).
// A backend computing z in float32 may stray by a few ulp of that: compare with
// compare_to_reference(y, ref.y, log_mode, &ref.z_magnitude, compute_rtol).
struct OptionsReference {
    std::vector<double> y;
    std::vector<double> z_magnitude;
};
OptionsReference reference_softmax_options(const HostTensor& x, int axis, bool log_mode, const OptionsSpec& spec);

// The float64 reference of the backward of softmax with options over y's logical elements (smx.h,
// smxCreateSoftmaxBackwardDescriptorWithOptions): the plain formula with its sums over the kept elements (keep-mask
// and causal), times the row's scale, 0 at excluded elements and, with zero_rows, in rows whose kept y are all 0
// (log: -inf). `scale` is each element's error scale, the plain formula's (reference.hpp) times |scale|.
BackwardReference reference_softmax_backward_options(const HostTensor& dy, const HostTensor& y, int axis, bool log_mode,
                                                     const OptionsSpec& spec);

// Replaces each finite value that rounds to an infinity in `dtype` by that infinity, as a backend's output must
// (a log-softmax of -1e5 is -inf in f16).
void round_overflow(smxDataType_t dtype, std::vector<double>& values);

// The compute_rtol of z for a backend computing the pair (x, y) in float32 (4 ulp: the scale's rounding to
// float, the product, the sum, the max's own), or in float64 where either is F64 (4 ulp of double).
double options_compute_rtol(smxDataType_t x_dtype, smxDataType_t y_dtype);

// A keep-mask (BOOL) of `shape` (strides as given, else row-major) keeping each element with probability `keep`;
// kept elements hold 1, 2 or 255 (any nonzero byte keeps).
HostTensor random_keep_mask(const std::vector<std::int64_t>& shape, std::mt19937_64& rng, double keep,
                            std::vector<std::int64_t> strides = {});

// An additive mask of a floating `dtype`: N(0, 2) values, a quarter of them -inf.
HostTensor random_additive_mask(smxDataType_t dtype, const std::vector<std::int64_t>& shape, std::mt19937_64& rng,
                                std::vector<std::int64_t> strides = {});

// Special rows along the last axis, viewing x as (rows, n) in its logical order, when it has 5 rows or more: a
// NaN in row 0, a +inf in row 1, row 2 all -inf, a -inf in row 3, row 4 of +-6e4.
void add_special_rows(HostTensor& x);

// A random problem with random options: 1-d to 4-d, random layouts of x and y (stride kinds chosen by
// `trial`), the last dim's size times `row_len_factor`; a per-row or scalar scale, a broadcast keep or additive
// mask in its own layout, causal (axis the last) and the flags, each at random. `spec` points into the case.
struct RandomOptionsCase {
    HostTensor x, y, scale, mask;
    int axis = 0;
    OptionsSpec spec;
    RandomOptionsCase() = default;
    RandomOptionsCase(const RandomOptionsCase&) = delete;
    RandomOptionsCase& operator=(const RandomOptionsCase&) = delete;
};
void make_random_options_case(int trial, std::int64_t row_len_factor, std::mt19937_64& rng, RandomOptionsCase* out);

// An options object built from a spec (RAII); status is the first failing setter's.
struct SoftmaxOptionsObject {
    smxSoftmaxOptions_t options = nullptr;
    smxStatus_t status = SMX_STATUS_SUCCESS;
    explicit SoftmaxOptionsObject(const OptionsSpec& spec);
    ~SoftmaxOptionsObject() { smxDestroySoftmaxOptions(options); }
    SoftmaxOptionsObject(const SoftmaxOptionsObject&) = delete;
    SoftmaxOptionsObject& operator=(const SoftmaxOptionsObject&) = delete;
};

// Runs softmax with options on the CPU backend (threads: the handle's default). Returns the first failing
// call's status; `plan`, when given, receives the plan text.
smxStatus_t run_cpu_options(HostTensor& y, const HostTensor& x, int axis, bool log_mode, const OptionsSpec& spec,
                            std::string* plan = nullptr);

// Runs the backward with options on the CPU backend (dx == dy in place when they are one object); as
// run_cpu_options.
smxStatus_t run_cpu_backward_options(HostTensor& dx, const HostTensor& dy, const HostTensor& y, int axis, bool log_mode,
                                     const OptionsSpec& spec, std::string* plan = nullptr);

}  // namespace smx_test
