// [cuda] the backward with the forward's options on the GPU (backward-general with the options' exclusion, scale
// and masked-rows rule): random options on random layouts and dtype combinations, rows of a block each, against
// the float64 options backward reference the CPU backward is tested against, fed the forward's own y; excluded
// dy and y never read; masked rows zero; in place; batch invariance bit for bit across row counts; plans
// without options unchanged; host option pointers refused.
#if SMX_TEST_WITH_CUDA

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "cuda_helpers.hpp"
#include "support/layouts.hpp"
#include "support/options_reference.hpp"

using namespace smx_test;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Runs the backward with options on the device into a poisoned dx (downloaded into `dx`); dy, y and the option
// tensors are uploaded. In place (dx == dy on the device) when `in_place`: dy's layout must then be dx's.
// Returns the smx status; `plan` receives the plan text.
smxStatus_t run_backward_options_on_device(smxHandle_t handle, HostTensor& dx, const HostTensor& dy, const HostTensor& y,
                                           int axis, bool log_mode, const OptionsSpec& spec, std::string* plan = nullptr,
                                           bool in_place = false) {
    SoftmaxOptionsObject options(spec);
    SMX_REQUIRE_OK(options.status);
    TensorDesc dx_desc(dx), dy_desc(dy), y_desc(y);
    smxSoftmaxBackwardDescriptor_t desc = nullptr;
    const smxStatus_t created = smxCreateSoftmaxBackwardDescriptorWithOptions(
        handle, &desc, log_mode ? SMX_LOG_SOFTMAX : SMX_SOFTMAX, axis, dx_desc.desc, dy_desc.desc, y_desc.desc,
        options.options);
    if (created != SMX_STATUS_SUCCESS) return created;
    const char* text = nullptr;
    SMX_REQUIRE_OK(smxGetSoftmaxBackwardPlan(desc, &text));
    if (plan != nullptr) *plan = text;
    size_t workspace_bytes = 0;
    SMX_REQUIRE_OK(smxGetSoftmaxBackwardWorkspaceSize(desc, &workspace_bytes));
    DeviceBuffer workspace(workspace_bytes);
    DeviceTensor dy_device(dy), y_device(y), dx_device(dx);
    dy_device.upload(dy);
    y_device.upload(y);
    dx_device.poison();
    DeviceTensor scale_device(spec.scale_tensor != nullptr ? *spec.scale_tensor : y);
    DeviceTensor mask_device(spec.mask != nullptr ? *spec.mask : y);
    if (spec.scale_tensor != nullptr) scale_device.upload(*spec.scale_tensor);
    if (spec.mask != nullptr) mask_device.upload(*spec.mask);
    void* dx_pointer = in_place ? dy_device.data() : dx_device.data();
    const smxStatus_t status = smxSoftmaxBackwardWithOptions(
        desc, workspace.get(), workspace_bytes, dx_pointer, dy_device.data(), y_device.data(),
        spec.scale_tensor != nullptr ? scale_device.data() : nullptr, spec.mask != nullptr ? mask_device.data() : nullptr,
        nullptr);
    smxDestroySoftmaxBackwardDescriptor(desc);
    if (status != SMX_STATUS_SUCCESS) return status;
    SMX_REQUIRE_CUDA(cudaStreamSynchronize(nullptr));
    SMX_REQUIRE_CUDA(cudaGetLastError());
    (in_place ? dy_device : dx_device).download(dx);
    return SMX_STATUS_SUCCESS;
}

// The device's dx against the float64 options backward reference; "" when it matches. The kernels compute in
// float32, or float64 where any operand is F64.
std::string check_backward_options_on_device(smxHandle_t handle, HostTensor& dx, const HostTensor& dy,
                                             const HostTensor& y, int axis, bool log_mode, const OptionsSpec& spec,
                                             std::string* plan) {
    const smxStatus_t status = run_backward_options_on_device(handle, dx, dy, y, axis, log_mode, spec, plan);
    if (status != SMX_STATUS_SUCCESS) return std::string("smx failed: ") + smxGetStatusString(status) + ": " + smxGetLastErrorMessage();
    const bool f64 = dy.dtype == SMX_DTYPE_F64 || dx.dtype == SMX_DTYPE_F64;
    return compare_backward_to_reference(dx, reference_softmax_backward_options(dy, y, axis, log_mode, spec),
                                         relative_tolerance(f64 ? SMX_DTYPE_F64 : SMX_DTYPE_F32));
}

// The forward's y for x under `spec` (the CPU reference backend), and a random dy of its shape in `kind`.
void forward_and_gradient(HostTensor& y, const HostTensor& x, int axis, bool log_mode, const OptionsSpec& spec,
                          HostTensor* dy, StrideKind kind) {
    REQUIRE(run_cpu_options(y, x, axis, log_mode, spec) == SMX_STATUS_SUCCESS);
    *dy = make_tensor(y.dtype, y.shape, make_strides(y.shape, kind, test_rng()));
    fill_random(*dy, test_rng());
}

}  // namespace

TEST_CASE("cuda backward options: random options, layouts and dtypes against the float64 reference",
          "[cuda][options][backward]") {
    CudaHandle handle;
    for (int trial = 0; trial < 100; ++trial) {
        RandomOptionsCase c;
        make_random_options_case(trial, 9, test_rng(), &c);  // rows of up to 54
        if (trial % 4 == 0) add_special_rows(c.x);
        for (bool log_mode : {false, true}) {
            HostTensor dy;
            forward_and_gradient(c.y, c.x, c.axis, log_mode, c.spec, &dy, kAllStrideKinds[(trial / 3) % 5]);
            HostTensor dx = make_tensor(c.x.dtype, c.x.shape, c.x.strides);
            std::string plan;
            const std::string mismatch =
                check_backward_options_on_device(handle.get(), dx, dy, c.y, c.axis, log_mode, c.spec, &plan);
            INFO(describe_case(c.y, c.x, c.axis, log_mode) << describe_spec(c.spec) << " dy " << describe(dy)
                                                           << " | plan: " << plan);
            CHECK(mismatch == "");
            // The random spec may set nothing: then the plain plan, of any family, without the options' text.
            if (has_effective_option(c.spec)) {
                CHECK(plan.rfind("cuda backward-general ", 0) == 0);
                CHECK(plan.find(" options=") != std::string::npos);
            } else {
                CHECK(plan.find(" options=") == std::string::npos);
            }
        }
    }
}

TEST_CASE("cuda backward options: rows of a block each (5000 elements), keep-mask, per-row scale, masked rows zero",
          "[cuda][options][backward]") {
    CudaHandle handle;
    const std::int64_t n = 5000;
    for (smxDataType_t dtype : {SMX_DTYPE_BF16, SMX_DTYPE_F32, SMX_DTYPE_F64}) {
        HostTensor x = make_tensor(dtype, {2, 3, n});
        fill_random(x, test_rng());
        add_special_rows(x);
        HostTensor scale = make_tensor(SMX_DTYPE_F32, {2, 3});
        fill_random(scale, test_rng(), 1.0);
        HostTensor keep = random_keep_mask({3, n}, test_rng(), 0.5);
        for (std::int64_t j = 0; j < n; ++j) keep.set(keep.offset_of({1, j}), 0.0);  // query 1: nothing kept
        OptionsSpec spec;
        spec.scale_tensor = &scale;
        spec.mask = &keep;
        spec.causal = n - 3 - 2;  // the window ends near each row's end
        spec.zero_rows = true;
        for (bool log_mode : {false, true}) {
            HostTensor y = make_tensor(dtype, {2, 3, n});
            HostTensor dy;
            forward_and_gradient(y, x, 2, log_mode, spec, &dy, StrideKind::Contiguous);
            HostTensor dx = make_tensor(dtype, {2, 3, n});
            std::string plan;
            const std::string mismatch = check_backward_options_on_device(handle.get(), dx, dy, y, 2, log_mode, spec, &plan);
            INFO(describe_case(y, x, 2, log_mode) << " | plan: " << plan);
            CHECK(mismatch == "");
            CHECK(plan.find("threads_per_row=256") != std::string::npos);
        }
    }
}

TEST_CASE("cuda backward options: excluded dy and y are never read; masked rows zero give 0, in place too",
          "[cuda][options][backward][sanitize]") {
    CudaHandle handle;
    HostTensor x = make_tensor(SMX_DTYPE_F16, {6, 40});
    fill_random(x, test_rng());
    HostTensor keep = random_keep_mask({6, 40}, test_rng(), 0.6);
    for (std::int64_t j = 0; j < 40; ++j) keep.set(keep.offset_of({4, j}), 0.0);  // row 4: nothing kept
    for (bool zero_rows : {false, true}) {
        for (bool log_mode : {false, true}) {
            OptionsSpec spec;
            spec.mask = &keep;
            spec.causal = 30;
            spec.scale = 0.5;
            spec.zero_rows = zero_rows;
            HostTensor y = make_tensor(SMX_DTYPE_F16, {6, 40});
            HostTensor dy;
            forward_and_gradient(y, x, 1, log_mode, spec, &dy, StrideKind::Contiguous);
            // NaN in dy and y wherever the forward excluded the element: they must not reach dx.
            for (std::int64_t i = 0; i < 6; ++i) {
                for (std::int64_t j = 0; j < 40; ++j) {
                    if (j <= i + 30 && keep.get(keep.offset_of({i, j})) != 0.0) continue;
                    dy.set(dy.offset_of({i, j}), kNaN);
                    y.set(y.offset_of({i, j}), kNaN);
                }
            }
            HostTensor dx = make_tensor(SMX_DTYPE_F16, {6, 40});
            std::string plan;
            INFO((log_mode ? "log_softmax" : "softmax") << (zero_rows ? " zero rows" : " NaN rows"));
            CHECK(check_backward_options_on_device(handle.get(), dx, dy, y, 1, log_mode, spec, &plan) == "");
            for (std::int64_t j = 0; j < 40; ++j) CHECK(dx.get(dx.offset_of({4, j})) == 0.0);
            HostTensor in_place = dy;
            REQUIRE(run_backward_options_on_device(handle.get(), in_place, dy, y, 1, log_mode, spec, nullptr, true) ==
                    SMX_STATUS_SUCCESS);
            CHECK(std::memcmp(in_place.data(), dx.data(), 6 * 40 * sizeof(std::uint16_t)) == 0);
        }
    }
}

TEST_CASE("cuda backward options: batch invariance, a row's dx the same bits for 1, 7, 64 and 4096 rows",
          "[cuda][options][backward]") {
    CudaHandle handle;
    for (std::int64_t n : {std::int64_t{300}, std::int64_t{3000}}) {
        const std::int64_t most = 4096;
        HostTensor y = make_tensor(SMX_DTYPE_F32, {most, n});
        HostTensor x = make_tensor(SMX_DTYPE_F32, {most, n});
        fill_random(x, test_rng());
        OptionsSpec spec;
        spec.batch_invariant = true;
        HostTensor dy;
        forward_and_gradient(y, x, 1, false, spec, &dy, StrideKind::Contiguous);
        std::vector<unsigned char> first_row;
        for (std::int64_t rows : {most, std::int64_t{64}, std::int64_t{7}, std::int64_t{1}}) {
            // The first `rows` rows of the same dy and y, as tensors of their own.
            HostTensor dy_rows = make_tensor(SMX_DTYPE_F32, {rows, n});
            HostTensor y_rows = make_tensor(SMX_DTYPE_F32, {rows, n});
            std::memcpy(dy_rows.data(), dy.data(), static_cast<std::size_t>(rows * n) * sizeof(float));
            std::memcpy(y_rows.data(), y.data(), static_cast<std::size_t>(rows * n) * sizeof(float));
            HostTensor dx = make_tensor(SMX_DTYPE_F32, {rows, n});
            REQUIRE(run_backward_options_on_device(handle.get(), dx, dy_rows, y_rows, 1, false, spec) == SMX_STATUS_SUCCESS);
            const auto* bytes = static_cast<const unsigned char*>(dx.data());
            if (first_row.empty()) first_row.assign(bytes, bytes + n * sizeof(float));
            INFO("row length " << n << ", " << rows << " rows");
            CHECK(std::memcmp(first_row.data(), bytes, first_row.size()) == 0);
        }
    }
}

TEST_CASE("cuda backward options: no options keep the plain plan; a host mask or scale pointer is refused",
          "[cuda][options][backward]") {
    CudaHandle handle;
    TensorDesc t(SMX_DTYPE_F32, {8, 100}, {});
    smxSoftmaxBackwardDescriptor_t plain = nullptr;
    REQUIRE(smxCreateSoftmaxBackwardDescriptor(handle.get(), &plain, SMX_SOFTMAX, 1, t.desc, t.desc, t.desc) ==
            SMX_STATUS_SUCCESS);
    smxSoftmaxBackwardDescriptor_t unset = nullptr;
    SoftmaxOptionsObject none(OptionsSpec{});
    REQUIRE(smxCreateSoftmaxBackwardDescriptorWithOptions(handle.get(), &unset, SMX_SOFTMAX, 1, t.desc, t.desc, t.desc,
                                                          none.options) == SMX_STATUS_SUCCESS);
    const char* plain_text = nullptr;
    const char* unset_text = nullptr;
    REQUIRE(smxGetSoftmaxBackwardPlan(plain, &plain_text) == SMX_STATUS_SUCCESS);
    REQUIRE(smxGetSoftmaxBackwardPlan(unset, &unset_text) == SMX_STATUS_SUCCESS);
    CHECK(std::string(plain_text) == unset_text);
    CHECK(std::string(plain_text).find("backward-general") == std::string::npos);
    smxDestroySoftmaxBackwardDescriptor(plain);
    smxDestroySoftmaxBackwardDescriptor(unset);

    HostTensor host_mask = make_tensor(SMX_DTYPE_BOOL, {100});
    HostTensor host_scale = make_tensor(SMX_DTYPE_F32, {8});
    OptionsSpec spec;
    spec.mask = &host_mask;
    spec.scale_tensor = &host_scale;
    SoftmaxOptionsObject options(spec);
    REQUIRE(options.status == SMX_STATUS_SUCCESS);
    smxSoftmaxBackwardDescriptor_t desc = nullptr;
    REQUIRE(smxCreateSoftmaxBackwardDescriptorWithOptions(handle.get(), &desc, SMX_SOFTMAX, 1, t.desc, t.desc, t.desc,
                                                          options.options) == SMX_STATUS_SUCCESS);
    DeviceBuffer dx(8 * 100 * sizeof(float)), dy(8 * 100 * sizeof(float)), y(8 * 100 * sizeof(float));
    DeviceBuffer mask(100), scale(8 * sizeof(float));
    CHECK(smxSoftmaxBackwardWithOptions(desc, nullptr, 0, dx.get(), dy.get(), y.get(), scale.get(), host_mask.data(),
                                        nullptr) == SMX_STATUS_BAD_PARAM_DEVICE);
    CHECK(std::string(smxGetLastErrorMessage()).find("mask") != std::string::npos);
    CHECK(smxSoftmaxBackwardWithOptions(desc, nullptr, 0, dx.get(), dy.get(), y.get(), host_scale.data(), mask.get(),
                                        nullptr) == SMX_STATUS_BAD_PARAM_DEVICE);
    CHECK(std::string(smxGetLastErrorMessage()).find("scale") != std::string::npos);
    smxDestroySoftmaxBackwardDescriptor(desc);
}

#endif  // SMX_TEST_WITH_CUDA
