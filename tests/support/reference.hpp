// reference.hpp - what every test compares against: a plain float64 softmax over an N-d strided tensor,
// written independently of the library (multi-index loops, no layout reduction), plus the helpers that
// make checks honest: fresh random inputs, poisoned outputs, per-dtype relative tolerances.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "smx/smx.h"

namespace smx_test {

std::size_t dtype_size(smxDataType_t dtype);
const char* dtype_name(smxDataType_t dtype);

// A host tensor: its own bytes plus shape and strides (in elements). `offset` elements of padding come
// before element [0,...,0] so negative strides and misaligned starts can be tested.
struct HostTensor {
    smxDataType_t dtype = SMX_DTYPE_F32;
    std::vector<std::int64_t> shape;
    std::vector<std::int64_t> strides;
    std::int64_t offset = 0;              // element index of [0,...,0] inside `storage`
    std::vector<unsigned char> storage;   // raw bytes

    std::int64_t numel() const;
    int ndim() const { return static_cast<int>(shape.size()); }
    void* data() { return storage.data() + offset * dtype_size(dtype); }
    const void* data() const { return storage.data() + offset * dtype_size(dtype); }
    double get(std::int64_t element_offset) const;             // relative to data()
    void set(std::int64_t element_offset, double value);       // rounds to dtype, ties to even
    // Element offset (relative to data()) of a multi-index.
    std::int64_t offset_of(const std::vector<std::int64_t>& index) const;
};

// Row-major strides for a shape.
std::vector<std::int64_t> row_major_strides(const std::vector<std::int64_t>& shape);

// Allocates storage big enough for `strides` (any sign) over `shape`, plus `extra_front` spare elements
// before the first element (to test pointers offset by one element).
HostTensor make_tensor(smxDataType_t dtype, std::vector<std::int64_t> shape, std::vector<std::int64_t> strides = {},
                       std::int64_t extra_front = 0);

// Fills every element reachable through the layout with N(0, scale) values, rounded to the dtype. Never
// zeros: fresh random data each call. The values come from one generator per 65536 logical elements, each
// seeded by a draw from `rng` in order, so they depend on `rng`'s state and the shape only (not on the
// host's core count, over which the blocks are filled).
void fill_random(HostTensor& t, std::mt19937_64& rng, double scale = 3.0);

// Fills every byte of the storage with a NaN pattern, so an element the library fails to write shows.
void poison(HostTensor& t);

// The float64 reference: y_ref[i] over x's logical elements (row-major order of the shape). Rows are
// computed in parallel, each whole by one thread in index order, so the result does not depend on the
// host's core count.
// Semantics as documented: NaN/+inf in a row -> NaN row; all -inf -> NaN; size-1 axis -> 1 (log 0).
std::vector<double> reference_softmax(const HostTensor& x, int axis, bool log_mode);

// The float64 backward reference along `axis`, over the logical elements (row-major order of the shape):
//   softmax:     dx = y * (dy - sum(dy * y))        log-softmax: dx = dy - exp(y) * sum(dy)
// computed with IEEE double arithmetic throughout (NaN and infinities propagate as PyTorch's float formulas
// do). `scale` is each element's error scale, the magnitude its rounding errors are relative to:
//   softmax: |y| * (|dy| + sum|dy * y|)            log-softmax: |dy| + exp(y) * sum|dy|
struct BackwardReference {
    std::vector<double> dx;
    std::vector<double> scale;
};
BackwardReference reference_softmax_backward(const HostTensor& dy, const HostTensor& y, int axis, bool log_mode);

// Compares dx (read through its layout) with the backward reference: |dx - ref| <= rtol(dx's dtype, or
// `compute_rtol` where that is larger) * scale + the smallest normal of dx's dtype; NaN must match NaN and
// infinities must match. Returns "" on success, else a description of the worst element.
std::string compare_backward_to_reference(const HostTensor& dx, const BackwardReference& ref, double compute_rtol);

// Relative tolerance for an output dtype (f64 1e-12, f32 1e-5, f16 1e-3, bf16 8e-3).
double relative_tolerance(smxDataType_t y_dtype);

// Compares y (read through its layout) with the reference, element by element:
//   softmax:     |y - ref| <= rtol * |ref| + smallest normal of y's dtype (outputs that underflow)
//   log-softmax: |y - ref| <= rtol * (|ref| + 1) (log(sum) with sum >= 1 carries an absolute rounding of
//                one ulp of 1, so the error scale is |ref| + 1)
// NaN must match NaN exactly, infinities must match. Returns "" on success, else a description of the
// worst element (index, got, expected).
std::string compare_to_reference(const HostTensor& y, const std::vector<double>& ref, bool log_mode);

// The same where the backend's inputs to the exponentials carry their own rounding: element i may also stray by
// input_rtol * (*input_error)[i] (log-softmax, absolute) or that times |ref| (softmax, relative).
std::string compare_to_reference(const HostTensor& y, const std::vector<double>& ref, bool log_mode,
                                 const std::vector<double>* input_error, double input_rtol);

// All logical indices of a shape in row-major order, as element offsets of `t`.
std::vector<std::int64_t> logical_offsets(const HostTensor& t);

// RAII wrappers so a failed REQUIRE never leaks.
struct TensorDesc {
    smxTensorDescriptor_t desc = nullptr;
    explicit TensorDesc(const HostTensor& t);
    TensorDesc(smxDataType_t dtype, const std::vector<std::int64_t>& shape, const std::vector<std::int64_t>& strides);
    ~TensorDesc() { smxDestroyTensorDescriptor(desc); }
    TensorDesc(const TensorDesc&) = delete;
    TensorDesc& operator=(const TensorDesc&) = delete;
};

struct Handle {
    smxHandle_t handle = nullptr;
    smxStatus_t status = SMX_STATUS_SUCCESS;
    Handle(smxDeviceType_t type, int id) { status = smxCreate(&handle, type, id); }
    ~Handle() { smxDestroy(handle); }
    Handle(const Handle&) = delete;
    Handle& operator=(const Handle&) = delete;
};

struct SoftmaxDesc {
    smxSoftmaxDescriptor_t desc = nullptr;
    smxStatus_t status = SMX_STATUS_SUCCESS;
    SoftmaxDesc(smxHandle_t handle, smxSoftmaxMode_t mode, int axis, smxTensorDescriptor_t y, smxTensorDescriptor_t x) {
        status = smxCreateSoftmaxDescriptor(handle, &desc, mode, axis, y, x);
    }
    ~SoftmaxDesc() { smxDestroySoftmaxDescriptor(desc); }
    SoftmaxDesc(const SoftmaxDesc&) = delete;
    SoftmaxDesc& operator=(const SoftmaxDesc&) = delete;
};

struct SoftmaxBackwardDesc {
    smxSoftmaxBackwardDescriptor_t desc = nullptr;
    smxStatus_t status = SMX_STATUS_SUCCESS;
    SoftmaxBackwardDesc(smxHandle_t handle, smxSoftmaxMode_t mode, int axis, smxTensorDescriptor_t dx,
                        smxTensorDescriptor_t dy, smxTensorDescriptor_t y) {
        status = smxCreateSoftmaxBackwardDescriptor(handle, &desc, mode, axis, dx, dy, y);
    }
    ~SoftmaxBackwardDesc() { smxDestroySoftmaxBackwardDescriptor(desc); }
    SoftmaxBackwardDesc(const SoftmaxBackwardDesc&) = delete;
    SoftmaxBackwardDesc& operator=(const SoftmaxBackwardDesc&) = delete;
};

// Runs softmax on the CPU backend: y = f(x) along axis. Returns the status of the first failing call.
smxStatus_t run_cpu(HostTensor& y, const HostTensor& x, int axis, bool log_mode);

// Runs the backward on the CPU backend: dx from dy and y along axis; in place (dx == dy) when `dx` and `dy` are
// the same object. Returns the status of the first failing call.
smxStatus_t run_cpu_backward(HostTensor& dx, const HostTensor& dy, const HostTensor& y, int axis, bool log_mode);

// The random generator every test uses: seeded from SMX_TEST_SEED if set, else from the clock, and the
// seed is printed once so a failure can be replayed.
std::mt19937_64& test_rng();

}  // namespace smx_test
