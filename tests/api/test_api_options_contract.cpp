// The softmax options half of the C API contract (issue 53): every refusal of the options object, of the
// descriptors created with it and of the forward and backward with its data has its exact status and a message
// naming the offending value; what is allowed (NULL options, options changed or destroyed after creation,
// zero-size problems without data) works.
#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "api/api_checks.hpp"
#include "support/options_reference.hpp"
#include "support/reference.hpp"

using Catch::Matchers::Contains;
using namespace smx_test;

namespace {

struct CpuHandle : Handle {
    CpuHandle() : Handle(SMX_DEVICE_CPU, 0) { REQUIRE(status == SMX_STATUS_SUCCESS); }
};

// A live options object for the tests below.
struct Options {
    smxSoftmaxOptions_t options = nullptr;
    Options() { REQUIRE(smxCreateSoftmaxOptions(&options) == SMX_STATUS_SUCCESS); }
    ~Options() { smxDestroySoftmaxOptions(options); }
    Options(const Options&) = delete;
    Options& operator=(const Options&) = delete;
};

// A descriptor created with options (RAII); status is creation's.
struct OptionsDesc {
    smxSoftmaxDescriptor_t desc = nullptr;
    smxStatus_t status;
    OptionsDesc(smxHandle_t handle, int axis, smxTensorDescriptor_t y, smxTensorDescriptor_t x,
                smxSoftmaxOptions_t options, smxSoftmaxMode_t mode = SMX_SOFTMAX) {
        desc = reinterpret_cast<smxSoftmaxDescriptor_t>(&status);  // garbage: creation must reset it
        status = smxCreateSoftmaxDescriptorWithOptions(handle, &desc, mode, axis, y, x, options);
        if (status != SMX_STATUS_SUCCESS) CHECK(desc == nullptr);
    }
    ~OptionsDesc() { smxDestroySoftmaxDescriptor(desc); }
    OptionsDesc(const OptionsDesc&) = delete;
    OptionsDesc& operator=(const OptionsDesc&) = delete;
};

std::string plan_of(smxSoftmaxDescriptor_t desc) {
    const char* text = nullptr;
    REQUIRE(smxGetSoftmaxPlan(desc, &text) == SMX_STATUS_SUCCESS);
    return text;
}


// A backward descriptor created with options (RAII); status is creation's. dy and y take dx's descriptor.
struct BackwardOptionsDesc {
    smxSoftmaxBackwardDescriptor_t desc = nullptr;
    smxStatus_t status;
    BackwardOptionsDesc(smxHandle_t handle, int axis, smxTensorDescriptor_t tensor, smxSoftmaxOptions_t options,
                        smxSoftmaxMode_t mode = SMX_SOFTMAX) {
        desc = reinterpret_cast<smxSoftmaxBackwardDescriptor_t>(&status);  // garbage: creation must reset it
        status = smxCreateSoftmaxBackwardDescriptorWithOptions(handle, &desc, mode, axis, tensor, tensor, tensor, options);
        if (status != SMX_STATUS_SUCCESS) CHECK(desc == nullptr);
    }
    ~BackwardOptionsDesc() { smxDestroySoftmaxBackwardDescriptor(desc); }
    BackwardOptionsDesc(const BackwardOptionsDesc&) = delete;
    BackwardOptionsDesc& operator=(const BackwardOptionsDesc&) = delete;
};

std::string plan_of(smxSoftmaxBackwardDescriptor_t desc) {
    const char* text = nullptr;
    REQUIRE(smxGetSoftmaxBackwardPlan(desc, &text) == SMX_STATUS_SUCCESS);
    return text;
}

}  // namespace

// ---- the options object --------------------------------------------------------------------------------------

TEST_CASE("smxCreateSoftmaxOptions refuses NULL; destroy takes NULL and refuses other objects", "[api][options]") {
    CHECK(smxCreateSoftmaxOptions(nullptr) == SMX_STATUS_BAD_PARAM_NULL_POINTER);
    CHECK_THAT(last_error(), Contains("options (the output pointer) is NULL"));
    CHECK(smxDestroySoftmaxOptions(nullptr) == SMX_STATUS_SUCCESS);
    TensorDesc t(SMX_DTYPE_F32, {4}, {});
    CHECK(smxDestroySoftmaxOptions(reinterpret_cast<smxSoftmaxOptions_t>(t.desc)) == SMX_STATUS_BAD_PARAM_OBJECT);
    CHECK_THAT(last_error(), Contains("options is not a live smxSoftmaxOptions_t"));
}

TEST_CASE("every options setter refuses a NULL or foreign options object", "[api][options]") {
    TensorDesc t(SMX_DTYPE_F32, {4}, {});
    const auto foreign = reinterpret_cast<smxSoftmaxOptions_t>(t.desc);
    for (smxSoftmaxOptions_t options : {static_cast<smxSoftmaxOptions_t>(nullptr), foreign}) {
        const smxStatus_t expected = options == nullptr ? SMX_STATUS_BAD_PARAM_NULL_POINTER : SMX_STATUS_BAD_PARAM_OBJECT;
        CHECK(smxSetSoftmaxScale(options, 2.0) == expected);
        CHECK(smxSetSoftmaxScaleTensor(options, t.desc) == expected);
        CHECK(smxSetSoftmaxMask(options, t.desc) == expected);
        CHECK(smxSetSoftmaxCausal(options, 1, 0) == expected);
        CHECK(smxSetSoftmaxMaskedRows(options, SMX_MASKED_ROWS_ZERO) == expected);
        CHECK(smxSetSoftmaxBatchInvariant(options, 1) == expected);
    }
}

TEST_CASE("options setters refuse values they can judge alone", "[api][options]") {
    Options o;
    TensorDesc f16(SMX_DTYPE_F16, {4}, {});
    CHECK(smxSetSoftmaxScaleTensor(o.options, f16.desc) == SMX_STATUS_NOT_SUPPORTED_DTYPE_PAIR);
    CHECK_THAT(last_error(), Contains("per-row scale is f32, not f16"));
    CHECK(smxSetSoftmaxCausal(o.options, 2, 0) == SMX_STATUS_BAD_PARAM_MODE);
    CHECK_THAT(last_error(), Contains("must be 0 or 1, not 2"));
    CHECK(smxSetSoftmaxMaskedRows(o.options, static_cast<smxMaskedRows_t>(2)) == SMX_STATUS_BAD_PARAM_MODE);
    CHECK_THAT(last_error(), Contains("masked rows 2 is not an smxMaskedRows_t"));
    CHECK(smxSetSoftmaxBatchInvariant(o.options, -1) == SMX_STATUS_BAD_PARAM_MODE);
    CHECK_THAT(last_error(), Contains("not -1"));
    const auto handle_as_tensor = reinterpret_cast<smxTensorDescriptor_t>(o.options);
    CHECK(smxSetSoftmaxMask(o.options, handle_as_tensor) == SMX_STATUS_BAD_PARAM_OBJECT);
    CHECK_THAT(last_error(), Contains("maskDesc is not a live smxTensorDescriptor_t"));
    CHECK(smxSetSoftmaxScaleTensor(o.options, handle_as_tensor) == SMX_STATUS_BAD_PARAM_OBJECT);
    // Every accepted mask dtype: bool and the four floating ones; scale values of every kind.
    for (smxDataType_t dtype : {SMX_DTYPE_BOOL, SMX_DTYPE_F16, SMX_DTYPE_BF16, SMX_DTYPE_F32, SMX_DTYPE_F64}) {
        TensorDesc mask(dtype, {4}, {});
        CHECK(smxSetSoftmaxMask(o.options, mask.desc) == SMX_STATUS_SUCCESS);
    }
    for (double scale : {0.0, -1.0, 1e308, std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()}) {
        CHECK(smxSetSoftmaxScale(o.options, scale) == SMX_STATUS_SUCCESS);
    }
    CHECK(smxSetSoftmaxCausal(o.options, 1, std::numeric_limits<std::int64_t>::min()) == SMX_STATUS_SUCCESS);
    CHECK(smxSetSoftmaxMask(o.options, nullptr) == SMX_STATUS_SUCCESS);
    CHECK(smxSetSoftmaxScaleTensor(o.options, nullptr) == SMX_STATUS_SUCCESS);
}

TEST_CASE("a bool tensor is a valid descriptor but never softmax's x or y", "[api][options]") {
    CpuHandle handle;
    TensorDesc b(SMX_DTYPE_BOOL, {4, 5}, {});
    TensorDesc f(SMX_DTYPE_F32, {4, 5}, {});
    REQUIRE(b.desc != nullptr);
    smxDataType_t dtype;
    REQUIRE(smxGetTensorDescriptor(b.desc, &dtype, nullptr, nullptr, nullptr) == SMX_STATUS_SUCCESS);
    CHECK(dtype == SMX_DTYPE_BOOL);
    SoftmaxDesc bool_x(handle.handle, SMX_SOFTMAX, 1, f.desc, b.desc);
    CHECK(bool_x.status == SMX_STATUS_NOT_SUPPORTED_DTYPE_PAIR);
    CHECK_THAT(last_error(), Contains("x bool -> y f32"));
    SoftmaxDesc bool_y(handle.handle, SMX_SOFTMAX, 1, b.desc, f.desc);
    CHECK(bool_y.status == SMX_STATUS_NOT_SUPPORTED_DTYPE_PAIR);
}

// ---- smxCreateSoftmaxDescriptorWithOptions ---------------------------------------------------------------------

TEST_CASE("WithOptions and NULL options is smxCreateSoftmaxDescriptor; a foreign options object is refused",
          "[api][options]") {
    CpuHandle handle;
    TensorDesc t(SMX_DTYPE_F32, {4, 5}, {});
    OptionsDesc plain(handle.handle, 1, t.desc, t.desc, nullptr);
    REQUIRE(plain.status == SMX_STATUS_SUCCESS);
    CHECK(plan_of(plain.desc) == "cpu reference layout=rows threads=1");
    OptionsDesc foreign(handle.handle, 1, t.desc, t.desc, reinterpret_cast<smxSoftmaxOptions_t>(t.desc));
    CHECK(foreign.status == SMX_STATUS_BAD_PARAM_OBJECT);
    CHECK_THAT(last_error(), Contains("options is not a live smxSoftmaxOptions_t"));
    smxSoftmaxDescriptor_t desc = nullptr;
    Options o;
    CHECK(smxCreateSoftmaxDescriptorWithOptions(handle.handle, nullptr, SMX_SOFTMAX, 1, t.desc, t.desc, o.options) ==
          SMX_STATUS_BAD_PARAM_NULL_POINTER);
    CHECK(smxCreateSoftmaxDescriptorWithOptions(handle.handle, &desc, static_cast<smxSoftmaxMode_t>(3), 1, t.desc, t.desc,
                                                o.options) == SMX_STATUS_BAD_PARAM_MODE);
}

TEST_CASE("a mask that does not broadcast to x is refused, naming both shapes", "[api][options]") {
    CpuHandle handle;
    TensorDesc x(SMX_DTYPE_F32, {2, 3, 5}, {});
    Options o;
    struct Case {
        std::vector<std::int64_t> shape;
        smxStatus_t status;
        const char* message;
    };
    const Case cases[] = {
        {{4}, SMX_STATUS_BAD_PARAM_SHAPE, "mask shape [4] does not broadcast to x shape [2,3,5]"},
        {{2, 1}, SMX_STATUS_BAD_PARAM_SHAPE, "mask dim 0 has size 2, x's 3"},
        {{2, 1, 5, 1}, SMX_STATUS_BAD_PARAM_NDIM, "mask shape [2,1,5,1] has more dims than x shape [2,3,5]"},
        {{2, 3, 4}, SMX_STATUS_BAD_PARAM_SHAPE, "mask dim 2 has size 4, x's 5"},
    };
    for (const Case& c : cases) {
        TensorDesc mask(SMX_DTYPE_BOOL, c.shape, {});
        REQUIRE(smxSetSoftmaxMask(o.options, mask.desc) == SMX_STATUS_SUCCESS);
        OptionsDesc desc(handle.handle, -1, x.desc, x.desc, o.options);
        CHECK(desc.status == c.status);
        CHECK_THAT(last_error(), Contains(c.message));
    }
    for (const std::vector<std::int64_t> shape : {std::vector<std::int64_t>{5}, {1}, {3, 1}, {2, 1, 5}, {1, 1, 1}}) {
        TensorDesc mask(SMX_DTYPE_F16, shape, {});
        REQUIRE(smxSetSoftmaxMask(o.options, mask.desc) == SMX_STATUS_SUCCESS);
        OptionsDesc desc(handle.handle, -1, x.desc, x.desc, o.options);
        CHECK(desc.status == SMX_STATUS_SUCCESS);
    }
}

TEST_CASE("a per-row scale must have x's shape without the axis, or with the axis of size 1", "[api][options]") {
    CpuHandle handle;
    TensorDesc x(SMX_DTYPE_F32, {2, 3, 5}, {});
    Options o;
    for (const std::vector<std::int64_t> shape : {std::vector<std::int64_t>{2, 5}, {2, 1, 5}}) {
        TensorDesc scale(SMX_DTYPE_F32, shape, {});
        REQUIRE(smxSetSoftmaxScaleTensor(o.options, scale.desc) == SMX_STATUS_SUCCESS);
        OptionsDesc desc(handle.handle, 1, x.desc, x.desc, o.options);
        CHECK(desc.status == SMX_STATUS_SUCCESS);
    }
    for (const std::vector<std::int64_t> shape : {std::vector<std::int64_t>{2, 3}, {3, 5}, {2, 3, 5}, {2, 3, 1}, {10}}) {
        TensorDesc scale(SMX_DTYPE_F32, shape, {});
        REQUIRE(smxSetSoftmaxScaleTensor(o.options, scale.desc) == SMX_STATUS_SUCCESS);
        OptionsDesc desc(handle.handle, 1, x.desc, x.desc, o.options);
        CHECK(desc.status == SMX_STATUS_BAD_PARAM_SHAPE);
        CHECK_THAT(last_error(), Contains("scale shape") && Contains("one element per row of x shape [2,3,5]"));
    }
}

TEST_CASE("causal needs x of 2+ dims and the softmax along the last one", "[api][options]") {
    CpuHandle handle;
    Options o;
    REQUIRE(smxSetSoftmaxCausal(o.options, 1, 0) == SMX_STATUS_SUCCESS);
    TensorDesc one_d(SMX_DTYPE_F32, {5}, {});
    OptionsDesc flat(handle.handle, 0, one_d.desc, one_d.desc, o.options);
    CHECK(flat.status == SMX_STATUS_BAD_PARAM_NDIM);
    CHECK_THAT(last_error(), Contains("causal needs x of 2 or more dims"));
    TensorDesc x(SMX_DTYPE_F32, {3, 4, 5}, {});
    OptionsDesc middle(handle.handle, 1, x.desc, x.desc, o.options);
    CHECK(middle.status == SMX_STATUS_BAD_PARAM_AXIS);
    CHECK_THAT(last_error(), Contains("causal needs the softmax along the last dim (2), not axis 1"));
    OptionsDesc last(handle.handle, -1, x.desc, x.desc, o.options);
    CHECK(last.status == SMX_STATUS_SUCCESS);
    REQUIRE(smxSetSoftmaxCausal(o.options, 0, 0) == SMX_STATUS_SUCCESS);
    OptionsDesc removed(handle.handle, 1, x.desc, x.desc, o.options);
    CHECK(removed.status == SMX_STATUS_SUCCESS);
}

TEST_CASE("a descriptor keeps the options it was created with: the object may change or go", "[api][options]") {
    CpuHandle handle;
    HostTensor x = make_tensor(SMX_DTYPE_F32, {3, 6});
    fill_random(x, test_rng());
    HostTensor y = make_tensor(SMX_DTYPE_F32, {3, 6});
    TensorDesc x_desc(x), y_desc(y);
    smxSoftmaxOptions_t options = nullptr;
    REQUIRE(smxCreateSoftmaxOptions(&options) == SMX_STATUS_SUCCESS);
    REQUIRE(smxSetSoftmaxScale(options, 0.25) == SMX_STATUS_SUCCESS);
    REQUIRE(smxSetSoftmaxCausal(options, 1, 1) == SMX_STATUS_SUCCESS);
    OptionsDesc desc(handle.handle, 1, y_desc.desc, x_desc.desc, options);
    REQUIRE(desc.status == SMX_STATUS_SUCCESS);
    REQUIRE(smxSetSoftmaxScale(options, 4.0) == SMX_STATUS_SUCCESS);
    REQUIRE(smxDestroySoftmaxOptions(options) == SMX_STATUS_SUCCESS);
    poison(y);
    REQUIRE(smxSoftmaxForward(desc.desc, nullptr, 0, y.data(), x.data(), nullptr) == SMX_STATUS_SUCCESS);
    OptionsSpec spec;
    spec.scale = 0.25;
    spec.causal = 1;
    CHECK(compare_to_reference(y, reference_softmax_options(x, 1, false, spec).y, false) == "");
    CHECK(plan_of(desc.desc) == "cpu reference layout=rows threads=1 options=scale(0.25),causal(1)");
}

// ---- smxSoftmaxForwardWithOptions --------------------------------------------------------------------------------

TEST_CASE("the forward takes the option data the descriptor needs, and only that", "[api][options]") {
    CpuHandle handle;
    HostTensor x = make_tensor(SMX_DTYPE_F32, {3, 6});
    fill_random(x, test_rng());
    HostTensor y = make_tensor(SMX_DTYPE_F32, {3, 6});
    HostTensor scale = make_tensor(SMX_DTYPE_F32, {3});
    HostTensor mask = make_tensor(SMX_DTYPE_BOOL, {6});
    TensorDesc x_desc(x), y_desc(y), scale_desc(scale), mask_desc(mask);
    Options o;
    REQUIRE(smxSetSoftmaxMask(o.options, mask_desc.desc) == SMX_STATUS_SUCCESS);
    OptionsDesc masked(handle.handle, 1, y_desc.desc, x_desc.desc, o.options);
    REQUIRE(masked.status == SMX_STATUS_SUCCESS);
    CHECK(smxSoftmaxForward(masked.desc, nullptr, 0, y.data(), x.data(), nullptr) == SMX_STATUS_BAD_PARAM_NULL_POINTER);
    CHECK_THAT(last_error(), Contains("mask is NULL but the descriptor has a mask"));
    CHECK(smxSoftmaxForwardWithOptions(masked.desc, nullptr, 0, y.data(), x.data(), scale.data(), mask.data(), nullptr) ==
          SMX_STATUS_BAD_PARAM);
    CHECK_THAT(last_error(), Contains("scale is not NULL but the descriptor has no per-row scale"));
    CHECK(smxSoftmaxForwardWithOptions(masked.desc, nullptr, 0, y.data(), x.data(), nullptr, mask.data(), nullptr) ==
          SMX_STATUS_SUCCESS);

    REQUIRE(smxSetSoftmaxMask(o.options, nullptr) == SMX_STATUS_SUCCESS);
    REQUIRE(smxSetSoftmaxScaleTensor(o.options, scale_desc.desc) == SMX_STATUS_SUCCESS);
    OptionsDesc scaled(handle.handle, 1, y_desc.desc, x_desc.desc, o.options);
    REQUIRE(scaled.status == SMX_STATUS_SUCCESS);
    CHECK(smxSoftmaxForwardWithOptions(scaled.desc, nullptr, 0, y.data(), x.data(), nullptr, nullptr, nullptr) ==
          SMX_STATUS_BAD_PARAM_NULL_POINTER);
    CHECK_THAT(last_error(), Contains("scale is NULL but the descriptor has a per-row scale"));
    CHECK(smxSoftmaxForwardWithOptions(scaled.desc, nullptr, 0, y.data(), x.data(), scale.data(), mask.data(), nullptr) ==
          SMX_STATUS_BAD_PARAM);
    CHECK_THAT(last_error(), Contains("mask is not NULL but the descriptor has no mask"));
    // Misaligned per-row scale (f32 needs 4 bytes).
    std::vector<float> buffer(8);
    const void* misaligned = reinterpret_cast<const unsigned char*>(buffer.data()) + 1;
    CHECK(smxSoftmaxForwardWithOptions(scaled.desc, nullptr, 0, y.data(), x.data(), misaligned, nullptr, nullptr) ==
          SMX_STATUS_BAD_PARAM_ALIGNMENT);
    CHECK_THAT(last_error(), Contains("scale pointer"));

    // A descriptor whose options need no data takes both plain calls.
    REQUIRE(smxSetSoftmaxScaleTensor(o.options, nullptr) == SMX_STATUS_SUCCESS);
    REQUIRE(smxSetSoftmaxMaskedRows(o.options, SMX_MASKED_ROWS_ZERO) == SMX_STATUS_SUCCESS);
    OptionsDesc dataless(handle.handle, 1, y_desc.desc, x_desc.desc, o.options);
    REQUIRE(dataless.status == SMX_STATUS_SUCCESS);
    CHECK(smxSoftmaxForward(dataless.desc, nullptr, 0, y.data(), x.data(), nullptr) == SMX_STATUS_SUCCESS);
    CHECK(smxSoftmaxForwardWithOptions(dataless.desc, nullptr, 0, y.data(), x.data(), nullptr, nullptr, nullptr) ==
          SMX_STATUS_SUCCESS);
}

TEST_CASE("y may not overlap the mask or the per-row scale", "[api][options]") {
    CpuHandle handle;
    // One float buffer: y in its first 18 elements, x, the scale and an f32 additive mask placed to overlap y or not.
    std::vector<float> buffer(64, 0.5f);
    TensorDesc xy(SMX_DTYPE_F32, {3, 6}, {});
    TensorDesc scale_desc(SMX_DTYPE_F32, {3}, {});
    TensorDesc mask_desc(SMX_DTYPE_F32, {6}, {});
    Options o;
    REQUIRE(smxSetSoftmaxScaleTensor(o.options, scale_desc.desc) == SMX_STATUS_SUCCESS);
    REQUIRE(smxSetSoftmaxMask(o.options, mask_desc.desc) == SMX_STATUS_SUCCESS);
    OptionsDesc desc(handle.handle, 1, xy.desc, xy.desc, o.options);
    REQUIRE(desc.status == SMX_STATUS_SUCCESS);
    float* y = buffer.data();
    const float* x = buffer.data() + 20;
    CHECK(smxSoftmaxForwardWithOptions(desc.desc, nullptr, 0, y, x, buffer.data() + 40, buffer.data() + 5, nullptr) ==
          SMX_STATUS_BAD_PARAM_OVERLAP);
    CHECK_THAT(last_error(), Contains("y (bytes") && Contains("overlaps mask"));
    CHECK(smxSoftmaxForwardWithOptions(desc.desc, nullptr, 0, y, x, buffer.data() + 17, buffer.data() + 50, nullptr) ==
          SMX_STATUS_BAD_PARAM_OVERLAP);
    CHECK_THAT(last_error(), Contains("overlaps scale"));
    CHECK(smxSoftmaxForwardWithOptions(desc.desc, nullptr, 0, y, x, buffer.data() + 40, buffer.data() + 50, nullptr) ==
          SMX_STATUS_SUCCESS);
    // The mask and the scale may share memory with x and with each other: they are only read.
    CHECK(smxSoftmaxForwardWithOptions(desc.desc, nullptr, 0, y, x, x, x, nullptr) == SMX_STATUS_SUCCESS);
}

TEST_CASE("a zero-size problem with options succeeds without any pointer", "[api][options]") {
    CpuHandle handle;
    TensorDesc x(SMX_DTYPE_F32, {0, 6}, {});
    TensorDesc scale(SMX_DTYPE_F32, {0}, {});
    TensorDesc mask(SMX_DTYPE_BOOL, {6}, {});
    Options o;
    REQUIRE(smxSetSoftmaxScaleTensor(o.options, scale.desc) == SMX_STATUS_SUCCESS);
    REQUIRE(smxSetSoftmaxMask(o.options, mask.desc) == SMX_STATUS_SUCCESS);
    REQUIRE(smxSetSoftmaxCausal(o.options, 1, 0) == SMX_STATUS_SUCCESS);
    OptionsDesc desc(handle.handle, 1, x.desc, x.desc, o.options);
    REQUIRE(desc.status == SMX_STATUS_SUCCESS);
    CHECK(smxSoftmaxForwardWithOptions(desc.desc, nullptr, 0, nullptr, nullptr, nullptr, nullptr, nullptr) ==
          SMX_STATUS_SUCCESS);
    CHECK(smxSoftmaxForward(desc.desc, nullptr, 0, nullptr, nullptr, nullptr) == SMX_STATUS_SUCCESS);
}

// ---- the backward with options ------------------------------------------------------------------------------

TEST_CASE("backward WithOptions: NULL options is the plain backward; NULL or foreign objects are refused",
          "[api][options][backward]") {
    CpuHandle handle;
    TensorDesc t(SMX_DTYPE_F32, {3, 5}, {});
    BackwardOptionsDesc plain(handle.handle, 1, t.desc, nullptr);
    REQUIRE(plain.status == SMX_STATUS_SUCCESS);
    CHECK(plan_of(plain.desc) == "cpu reference backward layout=rows threads=1");
    CHECK(smxCreateSoftmaxBackwardDescriptorWithOptions(handle.handle, nullptr, SMX_SOFTMAX, 1, t.desc, t.desc, t.desc,
                                                        nullptr) == SMX_STATUS_BAD_PARAM_NULL_POINTER);
    // A tensor descriptor is not an options object.
    BackwardOptionsDesc foreign(handle.handle, 1, t.desc, reinterpret_cast<smxSoftmaxOptions_t>(t.desc));
    CHECK(foreign.status == SMX_STATUS_BAD_PARAM_OBJECT);
    CHECK_THAT(last_error(), Contains("options"));
    Options o;
    REQUIRE(smxSetSoftmaxScale(o.options, 0.5) == SMX_STATUS_SUCCESS);
    BackwardOptionsDesc bad_mode(handle.handle, 1, t.desc, o.options, static_cast<smxSoftmaxMode_t>(7));
    CHECK(bad_mode.status == SMX_STATUS_BAD_PARAM_MODE);
    BackwardOptionsDesc scaled(handle.handle, 1, t.desc, o.options, SMX_LOG_SOFTMAX);
    REQUIRE(scaled.status == SMX_STATUS_SUCCESS);
    CHECK(plan_of(scaled.desc) == "cpu reference backward layout=rows threads=1 options=scale(0.5)");
}

TEST_CASE("backward options are checked against dx's shape as the forward's are against x's", "[api][options][backward]") {
    CpuHandle handle;
    TensorDesc t(SMX_DTYPE_F32, {2, 3, 5}, {});
    Options o;
    TensorDesc wide_mask(SMX_DTYPE_BOOL, {4}, {});
    REQUIRE(smxSetSoftmaxMask(o.options, wide_mask.desc) == SMX_STATUS_SUCCESS);
    BackwardOptionsDesc mask_mismatch(handle.handle, 2, t.desc, o.options);
    CHECK(mask_mismatch.status == SMX_STATUS_BAD_PARAM_SHAPE);
    CHECK_THAT(last_error(), Contains("mask shape [4] does not broadcast to x shape [2,3,5]"));
    REQUIRE(smxSetSoftmaxMask(o.options, nullptr) == SMX_STATUS_SUCCESS);

    TensorDesc wrong_scale(SMX_DTYPE_F32, {2, 5}, {});
    REQUIRE(smxSetSoftmaxScaleTensor(o.options, wrong_scale.desc) == SMX_STATUS_SUCCESS);
    BackwardOptionsDesc scale_mismatch(handle.handle, 2, t.desc, o.options);
    CHECK(scale_mismatch.status == SMX_STATUS_BAD_PARAM_SHAPE);
    TensorDesc right_scale(SMX_DTYPE_F32, {2, 3}, {});
    REQUIRE(smxSetSoftmaxScaleTensor(o.options, right_scale.desc) == SMX_STATUS_SUCCESS);
    BackwardOptionsDesc scale_ok(handle.handle, 2, t.desc, o.options);
    CHECK(scale_ok.status == SMX_STATUS_SUCCESS);
    REQUIRE(smxSetSoftmaxScaleTensor(o.options, nullptr) == SMX_STATUS_SUCCESS);

    REQUIRE(smxSetSoftmaxCausal(o.options, 1, 0) == SMX_STATUS_SUCCESS);
    BackwardOptionsDesc middle_axis(handle.handle, 1, t.desc, o.options);
    CHECK(middle_axis.status == SMX_STATUS_BAD_PARAM_AXIS);
    CHECK_THAT(last_error(), Contains("causal needs the softmax along the last dim"));
    TensorDesc one_d(SMX_DTYPE_F32, {5}, {});
    BackwardOptionsDesc flat(handle.handle, 0, one_d.desc, o.options);
    CHECK(flat.status == SMX_STATUS_BAD_PARAM_NDIM);
}

TEST_CASE("the backward takes the option data the descriptor needs, and only that", "[api][options][backward]") {
    CpuHandle handle;
    HostTensor y = make_tensor(SMX_DTYPE_F32, {3, 6});
    fill_random(y, test_rng(), 0.3);
    HostTensor dy = make_tensor(SMX_DTYPE_F32, {3, 6});
    fill_random(dy, test_rng());
    HostTensor dx = make_tensor(SMX_DTYPE_F32, {3, 6});
    HostTensor scale = make_tensor(SMX_DTYPE_F32, {3});
    HostTensor mask = make_tensor(SMX_DTYPE_BOOL, {6});
    TensorDesc t(y), scale_desc(scale), mask_desc(mask);
    Options o;
    REQUIRE(smxSetSoftmaxMask(o.options, mask_desc.desc) == SMX_STATUS_SUCCESS);
    BackwardOptionsDesc masked(handle.handle, 1, t.desc, o.options);
    REQUIRE(masked.status == SMX_STATUS_SUCCESS);
    CHECK(smxSoftmaxBackward(masked.desc, nullptr, 0, dx.data(), dy.data(), y.data(), nullptr) ==
          SMX_STATUS_BAD_PARAM_NULL_POINTER);
    CHECK_THAT(last_error(), Contains("mask is NULL but the descriptor has a mask (smxSoftmaxBackwardWithOptions"));
    CHECK(smxSoftmaxBackwardWithOptions(masked.desc, nullptr, 0, dx.data(), dy.data(), y.data(), scale.data(),
                                        mask.data(), nullptr) == SMX_STATUS_BAD_PARAM);
    CHECK_THAT(last_error(), Contains("scale is not NULL but the descriptor has no per-row scale"));
    CHECK(smxSoftmaxBackwardWithOptions(masked.desc, nullptr, 0, dx.data(), dy.data(), y.data(), nullptr, mask.data(),
                                        nullptr) == SMX_STATUS_SUCCESS);

    REQUIRE(smxSetSoftmaxMask(o.options, nullptr) == SMX_STATUS_SUCCESS);
    REQUIRE(smxSetSoftmaxScaleTensor(o.options, scale_desc.desc) == SMX_STATUS_SUCCESS);
    BackwardOptionsDesc scaled(handle.handle, 1, t.desc, o.options);
    REQUIRE(scaled.status == SMX_STATUS_SUCCESS);
    CHECK(smxSoftmaxBackwardWithOptions(scaled.desc, nullptr, 0, dx.data(), dy.data(), y.data(), nullptr, nullptr,
                                        nullptr) == SMX_STATUS_BAD_PARAM_NULL_POINTER);
    CHECK_THAT(last_error(), Contains("scale is NULL but the descriptor has a per-row scale"));
    CHECK(smxSoftmaxBackwardWithOptions(scaled.desc, nullptr, 0, dx.data(), dy.data(), y.data(), scale.data(),
                                        mask.data(), nullptr) == SMX_STATUS_BAD_PARAM);
    CHECK_THAT(last_error(), Contains("mask is not NULL but the descriptor has no mask"));
    std::vector<float> buffer(8);
    const void* misaligned = reinterpret_cast<const unsigned char*>(buffer.data()) + 1;
    CHECK(smxSoftmaxBackwardWithOptions(scaled.desc, nullptr, 0, dx.data(), dy.data(), y.data(), misaligned, nullptr,
                                        nullptr) == SMX_STATUS_BAD_PARAM_ALIGNMENT);
    CHECK_THAT(last_error(), Contains("scale pointer"));
    // dy is checked before the options' data, as the plain call checks it.
    CHECK(smxSoftmaxBackwardWithOptions(scaled.desc, nullptr, 0, dx.data(), nullptr, y.data(), scale.data(), nullptr,
                                        nullptr) == SMX_STATUS_BAD_PARAM_NULL_POINTER);
    CHECK_THAT(last_error(), Contains("dy is NULL"));

    // Options that need no data take both calls.
    REQUIRE(smxSetSoftmaxScaleTensor(o.options, nullptr) == SMX_STATUS_SUCCESS);
    REQUIRE(smxSetSoftmaxCausal(o.options, 1, 0) == SMX_STATUS_SUCCESS);
    BackwardOptionsDesc dataless(handle.handle, 1, t.desc, o.options);
    REQUIRE(dataless.status == SMX_STATUS_SUCCESS);
    CHECK(smxSoftmaxBackward(dataless.desc, nullptr, 0, dx.data(), dy.data(), y.data(), nullptr) == SMX_STATUS_SUCCESS);
    CHECK(smxSoftmaxBackwardWithOptions(dataless.desc, nullptr, 0, dx.data(), dy.data(), y.data(), nullptr, nullptr,
                                        nullptr) == SMX_STATUS_SUCCESS);
}

TEST_CASE("dx may not overlap the mask or the per-row scale; they may overlap dy, y and each other",
          "[api][options][backward]") {
    CpuHandle handle;
    // One float buffer: dx in its first 18 elements, dy and y after it, the scale and an f32 additive mask placed
    // to overlap dx or not.
    std::vector<float> buffer(96, 0.25f);
    TensorDesc t(SMX_DTYPE_F32, {3, 6}, {});
    TensorDesc scale_desc(SMX_DTYPE_F32, {3}, {});
    TensorDesc mask_desc(SMX_DTYPE_F32, {6}, {});
    Options o;
    REQUIRE(smxSetSoftmaxScaleTensor(o.options, scale_desc.desc) == SMX_STATUS_SUCCESS);
    REQUIRE(smxSetSoftmaxMask(o.options, mask_desc.desc) == SMX_STATUS_SUCCESS);
    BackwardOptionsDesc desc(handle.handle, 1, t.desc, o.options);
    REQUIRE(desc.status == SMX_STATUS_SUCCESS);
    float* dx = buffer.data();
    const float* dy = buffer.data() + 20;
    const float* y = buffer.data() + 40;
    CHECK(smxSoftmaxBackwardWithOptions(desc.desc, nullptr, 0, dx, dy, y, buffer.data() + 60, buffer.data() + 5,
                                        nullptr) == SMX_STATUS_BAD_PARAM_OVERLAP);
    CHECK_THAT(last_error(), Contains("dx (bytes") && Contains("overlaps mask"));
    CHECK(smxSoftmaxBackwardWithOptions(desc.desc, nullptr, 0, dx, dy, y, buffer.data() + 17, buffer.data() + 70,
                                        nullptr) == SMX_STATUS_BAD_PARAM_OVERLAP);
    CHECK_THAT(last_error(), Contains("overlaps scale"));
    CHECK(smxSoftmaxBackwardWithOptions(desc.desc, nullptr, 0, dx, dy, y, buffer.data() + 60, buffer.data() + 70,
                                        nullptr) == SMX_STATUS_SUCCESS);
    CHECK(smxSoftmaxBackwardWithOptions(desc.desc, nullptr, 0, dx, dy, y, dy, y, nullptr) == SMX_STATUS_SUCCESS);
}

TEST_CASE("a zero-size backward with options succeeds without any pointer", "[api][options][backward]") {
    CpuHandle handle;
    TensorDesc t(SMX_DTYPE_F32, {0, 6}, {});
    TensorDesc scale(SMX_DTYPE_F32, {0}, {});
    TensorDesc mask(SMX_DTYPE_BOOL, {6}, {});
    Options o;
    REQUIRE(smxSetSoftmaxScaleTensor(o.options, scale.desc) == SMX_STATUS_SUCCESS);
    REQUIRE(smxSetSoftmaxMask(o.options, mask.desc) == SMX_STATUS_SUCCESS);
    REQUIRE(smxSetSoftmaxCausal(o.options, 1, 0) == SMX_STATUS_SUCCESS);
    BackwardOptionsDesc desc(handle.handle, 1, t.desc, o.options);
    REQUIRE(desc.status == SMX_STATUS_SUCCESS);
    CHECK(smxSoftmaxBackwardWithOptions(desc.desc, nullptr, 0, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr) ==
          SMX_STATUS_SUCCESS);
    CHECK(smxSoftmaxBackward(desc.desc, nullptr, 0, nullptr, nullptr, nullptr, nullptr) == SMX_STATUS_SUCCESS);
}

TEST_CASE("a bool dx, dy or y is refused: BOOL describes masks only", "[api][options][backward]") {
    CpuHandle handle;
    TensorDesc values(SMX_DTYPE_F32, {3, 5}, {});
    TensorDesc flags(SMX_DTYPE_BOOL, {3, 5}, {});
    smxSoftmaxBackwardDescriptor_t desc = nullptr;
    CHECK(smxCreateSoftmaxBackwardDescriptor(handle.handle, &desc, SMX_SOFTMAX, 1, flags.desc, values.desc, values.desc) ==
          SMX_STATUS_NOT_SUPPORTED_DTYPE_PAIR);
    CHECK_THAT(last_error(), Contains("dx is bool"));
    CHECK(smxCreateSoftmaxBackwardDescriptor(handle.handle, &desc, SMX_SOFTMAX, 1, values.desc, flags.desc, flags.desc) ==
          SMX_STATUS_NOT_SUPPORTED_DTYPE_PAIR);
    CHECK_THAT(last_error(), Contains("dy is bool"));
    CHECK(desc == nullptr);
}
