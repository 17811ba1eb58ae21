// The softmax-descriptor and forward half of the C API contract: every refusal has its exact status and a
// last-error message that names the offending value; what is allowed (broadcast x, in-place, zero-size,
// NULL workspace for a zero-byte plan) works and computes the right values.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "api/api_checks.hpp"
#include "support/reference.hpp"

using Catch::Matchers::Contains;
using namespace smx_test;

namespace {

// A CPU handle for the tests below; REQUIREs that it exists.
struct CpuHandle : Handle {
    CpuHandle() : Handle(SMX_DEVICE_CPU, 0) { REQUIRE(status == SMX_STATUS_SUCCESS); }
};

// Creates a softmax descriptor over row-major tensors of the given shapes and dtypes; returns its status.
smxStatus_t try_create(smxHandle_t handle, smxSoftmaxMode_t mode, int axis, smxDataType_t y_dtype,
                       const std::vector<std::int64_t>& y_shape, const std::vector<std::int64_t>& y_strides,
                       smxDataType_t x_dtype, const std::vector<std::int64_t>& x_shape,
                       const std::vector<std::int64_t>& x_strides) {
    TensorDesc x(x_dtype, x_shape, x_strides);
    TensorDesc y(y_dtype, y_shape, y_strides);
    REQUIRE(x.desc != nullptr);
    REQUIRE(y.desc != nullptr);
    SoftmaxDesc desc(handle, mode, axis, y.desc, x.desc);
    if (desc.status == SMX_STATUS_SUCCESS) REQUIRE(desc.desc != nullptr);
    else CHECK(desc.desc == nullptr);
    return desc.status;
}

smxStatus_t try_create(smxHandle_t handle, int axis, const std::vector<std::int64_t>& shape) {
    return try_create(handle, SMX_SOFTMAX, axis, SMX_DTYPE_F32, shape, {}, SMX_DTYPE_F32, shape, {});
}

}  // namespace

// ---- smxCreateSoftmaxDescriptor ----------------------------------------------------------------------

TEST_CASE("smxCreateSoftmaxDescriptor refuses each NULL pointer argument and names it", "[api]") {
    CpuHandle handle;
    TensorDesc t(SMX_DTYPE_F32, {4, 5}, {});
    smxSoftmaxDescriptor_t desc = nullptr;
    CHECK(smxCreateSoftmaxDescriptor(handle.handle, nullptr, SMX_SOFTMAX, 1, t.desc, t.desc) ==
          SMX_STATUS_BAD_PARAM_NULL_POINTER);
    CHECK_THAT(last_error(), Contains("desc (the output pointer) is NULL"));
    CHECK(smxCreateSoftmaxDescriptor(nullptr, &desc, SMX_SOFTMAX, 1, t.desc, t.desc) ==
          SMX_STATUS_BAD_PARAM_NULL_POINTER);
    CHECK_THAT(last_error(), Contains("handle is NULL"));
    CHECK(smxCreateSoftmaxDescriptor(handle.handle, &desc, SMX_SOFTMAX, 1, t.desc, nullptr) ==
          SMX_STATUS_BAD_PARAM_NULL_POINTER);
    CHECK_THAT(last_error(), Contains("xDesc is NULL"));
    CHECK(smxCreateSoftmaxDescriptor(handle.handle, &desc, SMX_SOFTMAX, 1, nullptr, t.desc) ==
          SMX_STATUS_BAD_PARAM_NULL_POINTER);
    CHECK_THAT(last_error(), Contains("yDesc is NULL"));
    CHECK(desc == nullptr);
}

TEST_CASE("smxCreateSoftmaxDescriptor refuses a mode that is not an smxSoftmaxMode_t", "[api]") {
    CpuHandle handle;
    for (int mode : {0, 3}) {
        CHECK(try_create(handle.handle, static_cast<smxSoftmaxMode_t>(mode), 1, SMX_DTYPE_F32, {4, 5}, {},
                         SMX_DTYPE_F32, {4, 5}, {}) == SMX_STATUS_BAD_PARAM_MODE);
        CHECK_THAT(last_error(), Contains("mode " + std::to_string(mode)));
    }
}

TEST_CASE("smxCreateSoftmaxDescriptor refuses y and x of different shapes, showing both", "[api]") {
    CpuHandle handle;
    CHECK(try_create(handle.handle, SMX_SOFTMAX, 1, SMX_DTYPE_F32, {4, 5}, {}, SMX_DTYPE_F32, {4, 6}, {}) ==
          SMX_STATUS_BAD_PARAM_SHAPE);
    CHECK_THAT(last_error(), Contains("y shape [4,5] != x shape [4,6]"));
    CHECK(try_create(handle.handle, SMX_SOFTMAX, 0, SMX_DTYPE_F32, {20}, {}, SMX_DTYPE_F32, {4, 5}, {}) ==
          SMX_STATUS_BAD_PARAM_SHAPE);
    CHECK_THAT(last_error(), Contains("y shape [20] != x shape [4,5]"));
}

TEST_CASE("smxCreateSoftmaxDescriptor refuses an axis outside [-ndim, ndim) on either side", "[api]") {
    CpuHandle handle;
    CHECK(try_create(handle.handle, 2, {4, 5}) == SMX_STATUS_BAD_PARAM_AXIS);
    CHECK_THAT(last_error(), Contains("axis 2") && Contains("2-d"));
    CHECK(try_create(handle.handle, 3, {4, 5}) == SMX_STATUS_BAD_PARAM_AXIS);
    CHECK_THAT(last_error(), Contains("axis 3 out of range for a 2-d tensor"));
    CHECK(try_create(handle.handle, -3, {4, 5}) == SMX_STATUS_BAD_PARAM_AXIS);
    CHECK_THAT(last_error(), Contains("axis -3") && Contains("2-d") && Contains("-2..1"));
    for (int axis : {-2, -1, 0, 1}) CHECK(try_create(handle.handle, axis, {4, 5}) == SMX_STATUS_SUCCESS);
}

TEST_CASE("a negative axis counts from the end: axis -k computes the same as axis ndim-k", "[api]") {
    HostTensor x = make_tensor(SMX_DTYPE_F32, {3, 4, 5});
    fill_random(x, test_rng());
    for (int axis : {0, 1, 2}) {
        HostTensor y_positive = make_tensor(SMX_DTYPE_F32, x.shape);
        HostTensor y_negative = make_tensor(SMX_DTYPE_F32, x.shape);
        poison(y_positive);
        poison(y_negative);
        REQUIRE(run_cpu(y_positive, x, axis, false) == SMX_STATUS_SUCCESS);
        REQUIRE(run_cpu(y_negative, x, axis - 3, false) == SMX_STATUS_SUCCESS);
        CHECK(compare_to_reference(y_negative, reference_softmax(x, axis, false), false) == "");
        CHECK(y_positive.storage == y_negative.storage);
    }
}

TEST_CASE("smxCreateSoftmaxDescriptor accepts f64 paired with any other dtype, as PyTorch's dtype= does", "[api]") {
    CpuHandle handle;
    for (smxDataType_t other : {SMX_DTYPE_F16, SMX_DTYPE_BF16, SMX_DTYPE_F32}) {
        INFO(dtype_name(other));
        CHECK(try_create(handle.handle, SMX_SOFTMAX, 1, other, {4, 5}, {}, SMX_DTYPE_F64, {4, 5}, {}) ==
              SMX_STATUS_SUCCESS);
        CHECK(try_create(handle.handle, SMX_LOG_SOFTMAX, 1, SMX_DTYPE_F64, {4, 5}, {}, other, {4, 5}, {}) ==
              SMX_STATUS_SUCCESS);
    }
}

TEST_CASE("smxCreateSoftmaxDescriptor refuses y with a zero stride (an output cannot broadcast)", "[api]") {
    CpuHandle handle;
    CHECK(try_create(handle.handle, SMX_SOFTMAX, 1, SMX_DTYPE_F32, {4, 5}, {0, 1}, SMX_DTYPE_F32, {4, 5}, {}) ==
          SMX_STATUS_BAD_PARAM_OVERLAP);
    CHECK_THAT(last_error(), Contains("dim 0 has stride 0 with size 4"));
}

TEST_CASE("smxCreateSoftmaxDescriptor refuses y whose strides make elements share memory", "[api]") {
    CpuHandle handle;
    // Rows 3 elements apart but 5 long: row 1 starts inside row 0.
    CHECK(try_create(handle.handle, SMX_SOFTMAX, 1, SMX_DTYPE_F32, {4, 5}, {3, 1}, SMX_DTYPE_F32, {4, 5}, {}) ==
          SMX_STATUS_BAD_PARAM_OVERLAP);
    CHECK_THAT(last_error(), Contains("y overlaps itself") && Contains("[3,1]") && Contains("[4,5]"));
    // Equal strides on two dims of size > 1.
    CHECK(try_create(handle.handle, SMX_SOFTMAX, 0, SMX_DTYPE_F32, {2, 2}, {1, 1}, SMX_DTYPE_F32, {2, 2}, {}) ==
          SMX_STATUS_BAD_PARAM_OVERLAP);
    CHECK_THAT(last_error(), Contains("y overlaps itself"));
}

TEST_CASE("the self-overlap test for y is conservative: a colliding-free interleaving is still refused", "[api]") {
    CpuHandle handle;
    // Offsets 2i + 3j (i < 3, j < 2) are 0,3,2,5,4,7: all distinct, but stride 3 does not clear the span 4
    // of the stride-2 dim, which is the cheap exact test's one refusal of a legal layout (docs/api.md).
    CHECK(try_create(handle.handle, SMX_SOFTMAX, 1, SMX_DTYPE_F32, {3, 2}, {2, 3}, SMX_DTYPE_F32, {3, 2}, {}) ==
          SMX_STATUS_BAD_PARAM_OVERLAP);
    // Size-1 dims never step, so their stride (even 0) is irrelevant.
    CHECK(try_create(handle.handle, SMX_SOFTMAX, 1, SMX_DTYPE_F32, {1, 5}, {0, 1}, SMX_DTYPE_F32, {1, 5}, {}) ==
          SMX_STATUS_SUCCESS);
}

TEST_CASE("x may broadcast (zero stride): every broadcast row gets the same softmax", "[api]") {
    HostTensor x = make_tensor(SMX_DTYPE_F32, {6, 9}, {0, 1});
    fill_random(x, test_rng());
    HostTensor y = make_tensor(SMX_DTYPE_F32, {6, 9});
    for (bool log_mode : {false, true}) {
        poison(y);
        REQUIRE(run_cpu(y, x, 1, log_mode) == SMX_STATUS_SUCCESS);
        CHECK(compare_to_reference(y, reference_softmax(x, 1, log_mode), log_mode) == "");
    }
    // Broadcast along the softmax axis: a row of 9 equal values gives 1/9 each.
    HostTensor x_along_axis = make_tensor(SMX_DTYPE_F32, {6, 9}, {1, 0});
    fill_random(x_along_axis, test_rng());
    poison(y);
    REQUIRE(run_cpu(y, x_along_axis, 1, false) == SMX_STATUS_SUCCESS);
    for (std::int64_t offset : logical_offsets(y)) CHECK(y.get(offset) == Approx(1.0 / 9).epsilon(1e-6));
}

TEST_CASE("the softmax descriptor stays valid after its tensor descriptors are destroyed", "[api]") {
    CpuHandle handle;
    HostTensor x = make_tensor(SMX_DTYPE_F32, {5, 7});
    HostTensor y = make_tensor(SMX_DTYPE_F32, {5, 7});
    fill_random(x, test_rng());
    poison(y);
    smxSoftmaxDescriptor_t desc = nullptr;
    {
        std::vector<std::int64_t> shape = x.shape;
        std::vector<std::int64_t> strides = x.strides;
        smxTensorDescriptor_t x_desc = nullptr, y_desc = nullptr;
        REQUIRE(smxCreateTensorDescriptor(&x_desc, SMX_DTYPE_F32, 2, shape.data(), strides.data()) == SMX_STATUS_SUCCESS);
        REQUIRE(smxCreateTensorDescriptor(&y_desc, SMX_DTYPE_F32, 2, shape.data(), nullptr) == SMX_STATUS_SUCCESS);
        std::fill(shape.begin(), shape.end(), 1000);  // the caller's arrays change before the softmax descriptor
        std::fill(strides.begin(), strides.end(), 0);
        REQUIRE(smxCreateSoftmaxDescriptor(handle.handle, &desc, SMX_LOG_SOFTMAX, -1, y_desc, x_desc) ==
                SMX_STATUS_SUCCESS);
        smxDestroyTensorDescriptor(x_desc);
        smxDestroyTensorDescriptor(y_desc);
    }
    CHECK(smxSoftmaxForward(desc, nullptr, 0, y.data(), x.data(), nullptr) == SMX_STATUS_SUCCESS);
    CHECK(compare_to_reference(y, reference_softmax(x, -1, true), true) == "");
    smxDestroySoftmaxDescriptor(desc);
}

// ---- workspace and plan queries ---------------------------------------------------------------------

TEST_CASE("the CPU plan needs no workspace: the query says 0 and forward takes NULL/0", "[api]") {
    CpuHandle handle;
    HostTensor x = make_tensor(SMX_DTYPE_F16, {3, 40});
    HostTensor y = make_tensor(SMX_DTYPE_F32, {3, 40});
    fill_random(x, test_rng());
    poison(y);
    TensorDesc x_desc(x), y_desc(y);
    SoftmaxDesc desc(handle.handle, SMX_SOFTMAX, 1, y_desc.desc, x_desc.desc);
    REQUIRE(desc.status == SMX_STATUS_SUCCESS);
    size_t bytes = 12345;
    CHECK(smxGetSoftmaxWorkspaceSize(desc.desc, &bytes) == SMX_STATUS_SUCCESS);
    CHECK(bytes == 0);
    CHECK(smxSoftmaxForward(desc.desc, nullptr, 0, y.data(), x.data(), nullptr) == SMX_STATUS_SUCCESS);
    CHECK(compare_to_reference(y, reference_softmax(x, 1, false), false) == "");
}

TEST_CASE("the workspace and plan queries refuse NULL arguments", "[api]") {
    CpuHandle handle;
    TensorDesc t(SMX_DTYPE_F32, {4, 5}, {});
    SoftmaxDesc desc(handle.handle, SMX_SOFTMAX, 1, t.desc, t.desc);
    REQUIRE(desc.status == SMX_STATUS_SUCCESS);
    size_t bytes = 0;
    const char* plan = nullptr;
    CHECK(smxGetSoftmaxWorkspaceSize(nullptr, &bytes) == SMX_STATUS_BAD_PARAM_NULL_POINTER);
    CHECK_THAT(last_error(), Contains("desc is NULL"));
    CHECK(smxGetSoftmaxWorkspaceSize(desc.desc, nullptr) == SMX_STATUS_BAD_PARAM_NULL_POINTER);
    CHECK_THAT(last_error(), Contains("workspaceBytes is NULL"));
    CHECK(smxGetSoftmaxPlan(nullptr, &plan) == SMX_STATUS_BAD_PARAM_NULL_POINTER);
    CHECK_THAT(last_error(), Contains("desc is NULL"));
    CHECK(smxGetSoftmaxPlan(desc.desc, nullptr) == SMX_STATUS_BAD_PARAM_NULL_POINTER);
    CHECK_THAT(last_error(), Contains("plan is NULL"));
}

TEST_CASE("the plan text names the CPU backend and the problem's layout", "[api]") {
    CpuHandle handle;
    TensorDesc rows(SMX_DTYPE_F32, {4, 5}, {});
    TensorDesc transposed(SMX_DTYPE_F32, {4, 5}, {1, 4});
    const struct {
        smxTensorDescriptor_t x;
        int axis;
        const char* layout;
    } cases[] = {{rows.desc, 1, "rows"}, {rows.desc, 0, "spatial"}, {transposed.desc, 1, "general"}};
    for (const auto& c : cases) {
        SoftmaxDesc desc(handle.handle, SMX_SOFTMAX, c.axis, rows.desc, c.x);
        REQUIRE(desc.status == SMX_STATUS_SUCCESS);
        const char* plan = nullptr;
        REQUIRE(smxGetSoftmaxPlan(desc.desc, &plan) == SMX_STATUS_SUCCESS);
        REQUIRE(plan != nullptr);
        CHECK_THAT(std::string(plan), Contains("cpu") && Contains(std::string("layout=") + c.layout));
    }
}

// ---- smxSoftmaxForward ------------------------------------------------------------------------------

TEST_CASE("smxSoftmaxForward refuses a NULL descriptor, x or y when there are elements", "[api]") {
    CpuHandle handle;
    TensorDesc t(SMX_DTYPE_F32, {4, 5}, {});
    SoftmaxDesc desc(handle.handle, SMX_SOFTMAX, 1, t.desc, t.desc);
    REQUIRE(desc.status == SMX_STATUS_SUCCESS);
    std::vector<float> x(20, 1.5f), y(20, -7.0f);
    CHECK(smxSoftmaxForward(nullptr, nullptr, 0, y.data(), x.data(), nullptr) == SMX_STATUS_BAD_PARAM_NULL_POINTER);
    CHECK_THAT(last_error(), Contains("desc is NULL"));
    CHECK(smxSoftmaxForward(desc.desc, nullptr, 0, y.data(), nullptr, nullptr) == SMX_STATUS_BAD_PARAM_NULL_POINTER);
    CHECK_THAT(last_error(), Contains("x is NULL") && Contains("20 elements"));
    CHECK(smxSoftmaxForward(desc.desc, nullptr, 0, nullptr, x.data(), nullptr) == SMX_STATUS_BAD_PARAM_NULL_POINTER);
    CHECK_THAT(last_error(), Contains("y is NULL") && Contains("20 elements"));
    CHECK(y == std::vector<float>(20, -7.0f));  // a refused call writes nothing
}

TEST_CASE("zero-size tensors succeed with NULL data pointers and write nothing", "[api]") {
    CpuHandle handle;
    const std::vector<std::vector<std::int64_t>> shapes = {{0}, {0, 5}, {5, 0}, {3, 0, 4}, {2, 3, 0}};
    for (const auto& shape : shapes) {
        for (int axis = 0; axis < static_cast<int>(shape.size()); ++axis) {
            for (smxSoftmaxMode_t mode : {SMX_SOFTMAX, SMX_LOG_SOFTMAX}) {
                TensorDesc x(SMX_DTYPE_BF16, shape, {}), y(SMX_DTYPE_F32, shape, {});
                SoftmaxDesc desc(handle.handle, mode, axis, y.desc, x.desc);
                REQUIRE(desc.status == SMX_STATUS_SUCCESS);
                size_t bytes = 1;
                CHECK(smxGetSoftmaxWorkspaceSize(desc.desc, &bytes) == SMX_STATUS_SUCCESS);
                CHECK(bytes == 0);
                CHECK(smxSoftmaxForward(desc.desc, nullptr, 0, nullptr, nullptr, nullptr) == SMX_STATUS_SUCCESS);
            }
        }
    }
}

TEST_CASE("smxSoftmaxForward refuses y partially overlapping x", "[api]") {
    CpuHandle handle;
    TensorDesc t(SMX_DTYPE_F32, {4, 5}, {});
    SoftmaxDesc desc(handle.handle, SMX_SOFTMAX, 1, t.desc, t.desc);
    REQUIRE(desc.status == SMX_STATUS_SUCCESS);
    std::vector<float> buffer(40, 0.25f);
    for (std::size_t shift : {std::size_t{1}, std::size_t{19}}) {
        CHECK(smxSoftmaxForward(desc.desc, nullptr, 0, buffer.data() + shift, buffer.data(), nullptr) ==
              SMX_STATUS_BAD_PARAM_OVERLAP);
        CHECK_THAT(last_error(), Contains("overlaps x") && Contains("in-place needs y == x"));
        CHECK(smxSoftmaxForward(desc.desc, nullptr, 0, buffer.data(), buffer.data() + shift, nullptr) ==
              SMX_STATUS_BAD_PARAM_OVERLAP);
    }
    // Adjacent but disjoint is fine.
    CHECK(smxSoftmaxForward(desc.desc, nullptr, 0, buffer.data() + 20, buffer.data(), nullptr) == SMX_STATUS_SUCCESS);
}

TEST_CASE("the overlap message gives each tensor's byte range from its lowest byte, negative strides too", "[api]") {
    CpuHandle handle;
    TensorDesc x(SMX_DTYPE_F32, {4}, {}), y(SMX_DTYPE_F32, {4}, {-1});
    SoftmaxDesc desc(handle.handle, SMX_SOFTMAX, 0, y.desc, x.desc);
    REQUIRE(desc.status == SMX_STATUS_SUCCESS);
    alignas(16) float buffer[8] = {};
    // y starts at buffer[3] and walks down: its bytes are buffer[0..3], as are x's.
    CHECK(smxSoftmaxForward(desc.desc, nullptr, 0, buffer + 3, buffer, nullptr) == SMX_STATUS_BAD_PARAM_OVERLAP);
    char lowest[64];
    std::snprintf(lowest, sizeof lowest, "%#llx..+16",
                  static_cast<unsigned long long>(reinterpret_cast<std::uintptr_t>(buffer)));
    CHECK_THAT(last_error(), Contains(std::string("y (bytes ") + lowest) && Contains(std::string("x (bytes ") + lowest));
}

TEST_CASE("a zero-size y may have any strides, zero ones included: nothing is written", "[api]") {
    CpuHandle handle;
    TensorDesc x(SMX_DTYPE_F32, {0, 4, 6}, {}), y(SMX_DTYPE_F32, {0, 4, 6}, {24, 0, 1});
    SoftmaxDesc desc(handle.handle, SMX_SOFTMAX, 1, y.desc, x.desc);
    CHECK(desc.status == SMX_STATUS_SUCCESS);
    CHECK(smxSoftmaxForward(desc.desc, nullptr, 0, nullptr, nullptr, nullptr) == SMX_STATUS_SUCCESS);
}

TEST_CASE("in-place with the same layout is accepted and computes the right values", "[api]") {
    for (smxDataType_t dtype : {SMX_DTYPE_F32, SMX_DTYPE_F16, SMX_DTYPE_F64}) {
        for (bool log_mode : {false, true}) {
            // A transposed, padded layout so every row is strided (the General path reads before it writes too).
            for (const std::vector<std::int64_t>& strides : {std::vector<std::int64_t>{}, std::vector<std::int64_t>{1, 13}}) {
                HostTensor x = make_tensor(dtype, {11, 6}, strides);
                fill_random(x, test_rng());
                const std::vector<double> expected = reference_softmax(x, 1, log_mode);
                REQUIRE(run_cpu(x, x, 1, log_mode) == SMX_STATUS_SUCCESS);  // same object: y == x
                CHECK(compare_to_reference(x, expected, log_mode) == "");
            }
        }
    }
}

TEST_CASE("in-place is refused when the dtypes differ in size or the strides differ", "[api]") {
    CpuHandle handle;
    std::vector<float> buffer(64, 0.5f);
    SECTION("f32 x, f16 y at the same address") {
        TensorDesc x(SMX_DTYPE_F32, {4, 5}, {}), y(SMX_DTYPE_F16, {4, 5}, {});
        SoftmaxDesc desc(handle.handle, SMX_SOFTMAX, 1, y.desc, x.desc);
        REQUIRE(desc.status == SMX_STATUS_SUCCESS);
        CHECK(smxSoftmaxForward(desc.desc, nullptr, 0, buffer.data(), buffer.data(), nullptr) ==
              SMX_STATUS_BAD_PARAM_OVERLAP);
        CHECK_THAT(last_error(), Contains("identical strides and element size"));
    }
    SECTION("same dtype, transposed y at the same address") {
        TensorDesc x(SMX_DTYPE_F32, {4, 5}, {}), y(SMX_DTYPE_F32, {4, 5}, {1, 4});
        SoftmaxDesc desc(handle.handle, SMX_SOFTMAX, 1, y.desc, x.desc);
        REQUIRE(desc.status == SMX_STATUS_SUCCESS);
        CHECK(smxSoftmaxForward(desc.desc, nullptr, 0, buffer.data(), buffer.data(), nullptr) ==
              SMX_STATUS_BAD_PARAM_OVERLAP);
    }
}

TEST_CASE("smxSoftmaxForward refuses x or y not aligned to its element size", "[api]") {
    CpuHandle handle;
    TensorDesc x(SMX_DTYPE_F32, {2, 3}, {}), y(SMX_DTYPE_F64, {2, 3}, {});
    TensorDesc x64(SMX_DTYPE_F64, {2, 3}, {});
    SoftmaxDesc desc(handle.handle, SMX_SOFTMAX, 1, x.desc, x.desc);
    SoftmaxDesc desc64(handle.handle, SMX_SOFTMAX, 1, y.desc, x64.desc);
    REQUIRE(desc.status == SMX_STATUS_SUCCESS);
    REQUIRE(desc64.status == SMX_STATUS_SUCCESS);
    alignas(16) unsigned char x_bytes[128] = {};
    alignas(16) unsigned char y_bytes[128] = {};
    CHECK(smxSoftmaxForward(desc.desc, nullptr, 0, y_bytes, x_bytes + 1, nullptr) == SMX_STATUS_BAD_PARAM_ALIGNMENT);
    CHECK_THAT(last_error(), Contains("x pointer") && Contains("4 bytes, f32"));
    CHECK(smxSoftmaxForward(desc.desc, nullptr, 0, y_bytes + 2, x_bytes, nullptr) == SMX_STATUS_BAD_PARAM_ALIGNMENT);
    CHECK_THAT(last_error(), Contains("y pointer") && Contains("4 bytes, f32"));
    CHECK(smxSoftmaxForward(desc64.desc, nullptr, 0, y_bytes + 4, x_bytes, nullptr) == SMX_STATUS_BAD_PARAM_ALIGNMENT);
    CHECK_THAT(last_error(), Contains("y pointer") && Contains("8 bytes, f64"));
}

TEST_CASE("smxSoftmaxForward refuses a workspace not aligned to 16 bytes, even one the plan does not use", "[api]") {
    CpuHandle handle;
    TensorDesc x(SMX_DTYPE_F32, {2, 3}, {});
    SoftmaxDesc desc(handle.handle, SMX_SOFTMAX, 1, x.desc, x.desc);
    REQUIRE(desc.status == SMX_STATUS_SUCCESS);
    std::size_t workspace_bytes = 1;
    REQUIRE(smxGetSoftmaxWorkspaceSize(desc.desc, &workspace_bytes) == SMX_STATUS_SUCCESS);
    REQUIRE(workspace_bytes == 0);  // the CPU plan uses none
    alignas(16) unsigned char workspace[64] = {};
    std::vector<float> x_values = {1, 2, 3, 4, 5, 6}, y_values(6, -1.0f);
    for (int offset : {1, 4, 8}) {
        CHECK(smxSoftmaxForward(desc.desc, workspace + offset, 32, y_values.data(), x_values.data(), nullptr) ==
              SMX_STATUS_BAD_PARAM_ALIGNMENT);
        CHECK_THAT(last_error(), Contains("workspace pointer") && Contains("16-byte aligned"));
    }
    CHECK(y_values == std::vector<float>(6, -1.0f));  // refused before anything is written
    CHECK(smxSoftmaxForward(desc.desc, workspace + 16, 32, y_values.data(), x_values.data(), nullptr) ==
          SMX_STATUS_SUCCESS);
    CHECK(smxSoftmaxForward(desc.desc, nullptr, 0, y_values.data(), x_values.data(), nullptr) == SMX_STATUS_SUCCESS);
}
