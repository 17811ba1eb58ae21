// The softmax backward's half of the C API contract: every refusal of smxCreateSoftmaxBackwardDescriptor,
// the getters and smxSoftmaxBackward has its exact status and a last-error message that names the offending
// value, and a refused call writes nothing; what is allowed (broadcast dy and y, in place with dy, zero-size
// tensors, NULL workspace for a zero-byte plan) works.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "api/api_checks.hpp"
#include "support/reference.hpp"

using Catch::Matchers::Contains;
using namespace smx_test;

namespace {

struct CpuHandle : Handle {
    CpuHandle() : Handle(SMX_DEVICE_CPU, 0) { REQUIRE(status == SMX_STATUS_SUCCESS); }
};

// One operand of try_create: dtype, shape, strides (empty: row-major).
struct Operand {
    smxDataType_t dtype;
    std::vector<std::int64_t> shape;
    std::vector<std::int64_t> strides;
};

// Creates a backward descriptor over the given operands; returns its status (and checks *desc on failure).
smxStatus_t try_create(smxHandle_t handle, smxSoftmaxMode_t mode, int axis, const Operand& dx, const Operand& dy,
                       const Operand& y) {
    TensorDesc dx_desc(dx.dtype, dx.shape, dx.strides), dy_desc(dy.dtype, dy.shape, dy.strides);
    TensorDesc y_desc(y.dtype, y.shape, y.strides);
    REQUIRE(dx_desc.desc != nullptr);
    REQUIRE(dy_desc.desc != nullptr);
    REQUIRE(y_desc.desc != nullptr);
    SoftmaxBackwardDesc desc(handle, mode, axis, dx_desc.desc, dy_desc.desc, y_desc.desc);
    if (desc.status == SMX_STATUS_SUCCESS) REQUIRE(desc.desc != nullptr);
    else CHECK(desc.desc == nullptr);
    return desc.status;
}

// Row-major f32 operands of one shape.
smxStatus_t try_create(smxHandle_t handle, int axis, const std::vector<std::int64_t>& shape) {
    const Operand t{SMX_DTYPE_F32, shape, {}};
    return try_create(handle, SMX_SOFTMAX, axis, t, t, t);
}

// A CPU backward descriptor over row-major (4, 5) tensors of the given dtypes.
struct FourByFive {
    CpuHandle handle;
    TensorDesc dx, dy, y;
    SoftmaxBackwardDesc desc;
    explicit FourByFive(smxDataType_t dx_dtype = SMX_DTYPE_F32, smxDataType_t y_dtype = SMX_DTYPE_F32,
                        smxSoftmaxMode_t mode = SMX_SOFTMAX)
        : dx(dx_dtype, {4, 5}, {}), dy(y_dtype, {4, 5}, {}), y(y_dtype, {4, 5}, {}),
          desc(handle.handle, mode, 1, dx.desc, dy.desc, y.desc) {
        REQUIRE(desc.status == SMX_STATUS_SUCCESS);
    }
};

std::string not_live(const std::string& argument, const std::string& kind) {
    return argument + " is not a live " + kind + " (destroyed, or another kind of object)";
}

}  // namespace

// ---- smxCreateSoftmaxBackwardDescriptor --------------------------------------------------------------

TEST_CASE("smxCreateSoftmaxBackwardDescriptor refuses each NULL pointer argument and names it", "[api][backward]") {
    CpuHandle handle;
    TensorDesc t(SMX_DTYPE_F32, {4, 5}, {});
    smxSoftmaxBackwardDescriptor_t desc = nullptr;
    CHECK(smxCreateSoftmaxBackwardDescriptor(handle.handle, nullptr, SMX_SOFTMAX, 1, t.desc, t.desc, t.desc) ==
          SMX_STATUS_BAD_PARAM_NULL_POINTER);
    CHECK_THAT(last_error(), Contains("desc (the output pointer) is NULL"));
    CHECK(smxCreateSoftmaxBackwardDescriptor(nullptr, &desc, SMX_SOFTMAX, 1, t.desc, t.desc, t.desc) ==
          SMX_STATUS_BAD_PARAM_NULL_POINTER);
    CHECK_THAT(last_error(), Contains("handle is NULL"));
    CHECK(smxCreateSoftmaxBackwardDescriptor(handle.handle, &desc, SMX_SOFTMAX, 1, nullptr, t.desc, t.desc) ==
          SMX_STATUS_BAD_PARAM_NULL_POINTER);
    CHECK_THAT(last_error(), Contains("dxDesc is NULL"));
    CHECK(smxCreateSoftmaxBackwardDescriptor(handle.handle, &desc, SMX_SOFTMAX, 1, t.desc, nullptr, t.desc) ==
          SMX_STATUS_BAD_PARAM_NULL_POINTER);
    CHECK_THAT(last_error(), Contains("dyDesc is NULL"));
    CHECK(smxCreateSoftmaxBackwardDescriptor(handle.handle, &desc, SMX_SOFTMAX, 1, t.desc, t.desc, nullptr) ==
          SMX_STATUS_BAD_PARAM_NULL_POINTER);
    CHECK_THAT(last_error(), Contains("yDesc is NULL"));
    CHECK(desc == nullptr);
}

TEST_CASE("smxCreateSoftmaxBackwardDescriptor refuses a handle or tensor descriptor of another kind",
          "[api][backward]") {
    CpuHandle handle;
    TensorDesc t(SMX_DTYPE_F32, {4, 5}, {});
    const auto handle_as_tensor = reinterpret_cast<smxTensorDescriptor_t>(handle.handle);
    const auto tensor_as_handle = reinterpret_cast<smxHandle_t>(t.desc);
    smxSoftmaxBackwardDescriptor_t desc = nullptr;
    CHECK(smxCreateSoftmaxBackwardDescriptor(tensor_as_handle, &desc, SMX_SOFTMAX, 1, t.desc, t.desc, t.desc) ==
          SMX_STATUS_BAD_PARAM_OBJECT);
    CHECK(last_error() == not_live("handle", "smxHandle_t"));
    CHECK(smxCreateSoftmaxBackwardDescriptor(handle.handle, &desc, SMX_SOFTMAX, 1, handle_as_tensor, t.desc, t.desc) ==
          SMX_STATUS_BAD_PARAM_OBJECT);
    CHECK(last_error() == not_live("dxDesc", "smxTensorDescriptor_t"));
    CHECK(smxCreateSoftmaxBackwardDescriptor(handle.handle, &desc, SMX_SOFTMAX, 1, t.desc, handle_as_tensor, t.desc) ==
          SMX_STATUS_BAD_PARAM_OBJECT);
    CHECK(last_error() == not_live("dyDesc", "smxTensorDescriptor_t"));
    CHECK(smxCreateSoftmaxBackwardDescriptor(handle.handle, &desc, SMX_SOFTMAX, 1, t.desc, t.desc, handle_as_tensor) ==
          SMX_STATUS_BAD_PARAM_OBJECT);
    CHECK(last_error() == not_live("yDesc", "smxTensorDescriptor_t"));
    CHECK(desc == nullptr);
}

TEST_CASE("smxCreateSoftmaxBackwardDescriptor refuses a mode that is not an smxSoftmaxMode_t", "[api][backward]") {
    CpuHandle handle;
    const Operand t{SMX_DTYPE_F32, {4, 5}, {}};
    for (int mode : {0, 3, -1}) {
        CHECK(try_create(handle.handle, static_cast<smxSoftmaxMode_t>(mode), 1, t, t, t) == SMX_STATUS_BAD_PARAM_MODE);
        CHECK_THAT(last_error(), Contains("mode " + std::to_string(mode)));
    }
}

TEST_CASE("smxCreateSoftmaxBackwardDescriptor refuses dx, dy and y of different shapes, showing both", "[api][backward]") {
    CpuHandle handle;
    const Operand four_by_five{SMX_DTYPE_F32, {4, 5}, {}}, four_by_six{SMX_DTYPE_F32, {4, 6}, {}};
    const Operand twenty{SMX_DTYPE_F32, {20}, {}};
    CHECK(try_create(handle.handle, SMX_SOFTMAX, 1, four_by_six, four_by_five, four_by_five) ==
          SMX_STATUS_BAD_PARAM_SHAPE);
    CHECK_THAT(last_error(), Contains("dx shape [4,6] != dy shape [4,5]"));
    CHECK(try_create(handle.handle, SMX_SOFTMAX, 1, four_by_five, four_by_five, four_by_six) ==
          SMX_STATUS_BAD_PARAM_SHAPE);
    CHECK_THAT(last_error(), Contains("y shape [4,6] != dy shape [4,5]"));
    CHECK(try_create(handle.handle, SMX_LOG_SOFTMAX, 0, four_by_five, twenty, four_by_five) ==
          SMX_STATUS_BAD_PARAM_SHAPE);
    CHECK_THAT(last_error(), Contains("y shape [4,5] != dy shape [20]"));
}

TEST_CASE("smxCreateSoftmaxBackwardDescriptor refuses an axis outside [-ndim, ndim)", "[api][backward]") {
    CpuHandle handle;
    CHECK(try_create(handle.handle, 2, {4, 5}) == SMX_STATUS_BAD_PARAM_AXIS);
    CHECK_THAT(last_error(), Contains("axis 2 out of range for a 2-d tensor"));
    CHECK(try_create(handle.handle, -3, {4, 5}) == SMX_STATUS_BAD_PARAM_AXIS);
    CHECK_THAT(last_error(), Contains("axis -3") && Contains("-2..1"));
    for (int axis : {-2, -1, 0, 1}) CHECK(try_create(handle.handle, axis, {4, 5}) == SMX_STATUS_SUCCESS);
}

TEST_CASE("smxCreateSoftmaxBackwardDescriptor: dy and y must share a dtype, dx may be any", "[api][backward]") {
    CpuHandle handle;
    const smxDataType_t dtypes[] = {SMX_DTYPE_F16, SMX_DTYPE_BF16, SMX_DTYPE_F32, SMX_DTYPE_F64};
    for (smxDataType_t dy_dtype : dtypes) {
        for (smxDataType_t y_dtype : dtypes) {
            for (smxDataType_t dx_dtype : dtypes) {
                INFO("dy " << dtype_name(dy_dtype) << ", y " << dtype_name(y_dtype) << ", dx " << dtype_name(dx_dtype));
                const smxStatus_t status = try_create(handle.handle, SMX_SOFTMAX, 1, {dx_dtype, {4, 5}, {}},
                                                      {dy_dtype, {4, 5}, {}}, {y_dtype, {4, 5}, {}});
                if (dy_dtype == y_dtype) {
                    CHECK(status == SMX_STATUS_SUCCESS);
                } else {
                    CHECK(status == SMX_STATUS_NOT_SUPPORTED_DTYPE_PAIR);
                    CHECK_THAT(last_error(), Contains(std::string("dy is ") + dtype_name(dy_dtype) + " but y is " +
                                                      dtype_name(y_dtype)));
                }
            }
        }
    }
}

TEST_CASE("smxCreateSoftmaxBackwardDescriptor refuses a dx that overlaps itself; dy and y may broadcast",
          "[api][backward]") {
    CpuHandle handle;
    const Operand dense{SMX_DTYPE_F32, {4, 5}, {}}, broadcast{SMX_DTYPE_F32, {4, 5}, {0, 1}};
    CHECK(try_create(handle.handle, SMX_SOFTMAX, 1, broadcast, dense, dense) == SMX_STATUS_BAD_PARAM_OVERLAP);
    CHECK_THAT(last_error(), Contains("dx overlaps itself") && Contains("dim 0 has stride 0 with size 4"));
    CHECK(try_create(handle.handle, SMX_SOFTMAX, 1, {SMX_DTYPE_F32, {4, 5}, {3, 1}}, dense, dense) ==
          SMX_STATUS_BAD_PARAM_OVERLAP);
    CHECK_THAT(last_error(), Contains("dx overlaps itself") && Contains("[3,1]"));
    CHECK(try_create(handle.handle, SMX_SOFTMAX, 1, dense, broadcast, broadcast) == SMX_STATUS_SUCCESS);
    CHECK(try_create(handle.handle, SMX_LOG_SOFTMAX, 1, dense, {SMX_DTYPE_F32, {4, 5}, {1, 0}}, dense) ==
          SMX_STATUS_SUCCESS);
}

TEST_CASE("the backward descriptor stays valid after its tensor descriptors are destroyed", "[api][backward]") {
    CpuHandle handle;
    HostTensor y = make_tensor(SMX_DTYPE_F32, {5, 7}), dy = make_tensor(SMX_DTYPE_F32, {5, 7});
    HostTensor dx = make_tensor(SMX_DTYPE_F64, {5, 7});
    fill_random(y, test_rng(), 0.2);
    fill_random(dy, test_rng());
    poison(dx);
    smxSoftmaxBackwardDescriptor_t desc = nullptr;
    {
        TensorDesc dx_desc(dx), dy_desc(dy), y_desc(y);
        REQUIRE(smxCreateSoftmaxBackwardDescriptor(handle.handle, &desc, SMX_LOG_SOFTMAX, -1, dx_desc.desc,
                                                   dy_desc.desc, y_desc.desc) == SMX_STATUS_SUCCESS);
    }
    CHECK(smxSoftmaxBackward(desc, nullptr, 0, dx.data(), dy.data(), y.data(), nullptr) == SMX_STATUS_SUCCESS);
    CHECK(compare_backward_to_reference(dx, reference_softmax_backward(dy, y, -1, true), 0.0) == "");
    CHECK(smxDestroySoftmaxBackwardDescriptor(desc) == SMX_STATUS_SUCCESS);
}

// ---- workspace and plan queries ---------------------------------------------------------------------

TEST_CASE("the backward's queries: no workspace on the CPU, the plan names the CPU and the layout, NULLs refused",
          "[api][backward]") {
    CpuHandle handle;
    TensorDesc rows(SMX_DTYPE_F32, {4, 5}, {}), transposed(SMX_DTYPE_F32, {4, 5}, {1, 4});
    const struct {
        smxTensorDescriptor_t dy;
        int axis;
        const char* layout;
    } cases[] = {{rows.desc, 1, "rows"}, {rows.desc, 0, "spatial"}, {transposed.desc, 1, "general"}};
    for (const auto& c : cases) {
        SoftmaxBackwardDesc desc(handle.handle, SMX_SOFTMAX, c.axis, rows.desc, c.dy, rows.desc);
        REQUIRE(desc.status == SMX_STATUS_SUCCESS);
        std::size_t bytes = 12345;
        CHECK(smxGetSoftmaxBackwardWorkspaceSize(desc.desc, &bytes) == SMX_STATUS_SUCCESS);
        CHECK(bytes == 0);
        const char* plan = nullptr;
        REQUIRE(smxGetSoftmaxBackwardPlan(desc.desc, &plan) == SMX_STATUS_SUCCESS);
        REQUIRE(plan != nullptr);
        CHECK_THAT(std::string(plan), Contains("cpu reference backward") && Contains(std::string("layout=") + c.layout));
    }
    SoftmaxBackwardDesc desc(handle.handle, SMX_SOFTMAX, 1, rows.desc, rows.desc, rows.desc);
    std::size_t bytes = 0;
    const char* plan = nullptr;
    CHECK(smxGetSoftmaxBackwardWorkspaceSize(nullptr, &bytes) == SMX_STATUS_BAD_PARAM_NULL_POINTER);
    CHECK_THAT(last_error(), Contains("desc is NULL"));
    CHECK(smxGetSoftmaxBackwardWorkspaceSize(desc.desc, nullptr) == SMX_STATUS_BAD_PARAM_NULL_POINTER);
    CHECK_THAT(last_error(), Contains("workspaceBytes is NULL"));
    CHECK(smxGetSoftmaxBackwardPlan(nullptr, &plan) == SMX_STATUS_BAD_PARAM_NULL_POINTER);
    CHECK_THAT(last_error(), Contains("desc is NULL"));
    CHECK(smxGetSoftmaxBackwardPlan(desc.desc, nullptr) == SMX_STATUS_BAD_PARAM_NULL_POINTER);
    CHECK_THAT(last_error(), Contains("plan is NULL"));
}

// ---- smxSoftmaxBackward -----------------------------------------------------------------------------

TEST_CASE("smxSoftmaxBackward refuses a NULL descriptor, dy, y or dx when there are elements", "[api][backward]") {
    FourByFive problem;
    std::vector<float> dy(20, 1.5f), y(20, 0.05f), dx(20, -7.0f);
    CHECK(smxSoftmaxBackward(nullptr, nullptr, 0, dx.data(), dy.data(), y.data(), nullptr) ==
          SMX_STATUS_BAD_PARAM_NULL_POINTER);
    CHECK_THAT(last_error(), Contains("desc is NULL"));
    CHECK(smxSoftmaxBackward(problem.desc.desc, nullptr, 0, dx.data(), nullptr, y.data(), nullptr) ==
          SMX_STATUS_BAD_PARAM_NULL_POINTER);
    CHECK_THAT(last_error(), Contains("dy is NULL") && Contains("20 elements"));
    CHECK(smxSoftmaxBackward(problem.desc.desc, nullptr, 0, dx.data(), dy.data(), nullptr, nullptr) ==
          SMX_STATUS_BAD_PARAM_NULL_POINTER);
    CHECK_THAT(last_error(), Contains("y is NULL") && Contains("20 elements"));
    CHECK(smxSoftmaxBackward(problem.desc.desc, nullptr, 0, nullptr, dy.data(), y.data(), nullptr) ==
          SMX_STATUS_BAD_PARAM_NULL_POINTER);
    CHECK_THAT(last_error(), Contains("dx is NULL") && Contains("20 elements"));
    CHECK(dx == std::vector<float>(20, -7.0f));  // a refused call writes nothing
}

TEST_CASE("smxSoftmaxBackward and its getters refuse objects of another kind, a forward descriptor included",
          "[api][backward]") {
    FourByFive problem;
    TensorDesc x(SMX_DTYPE_F32, {4, 5}, {});
    SoftmaxDesc forward(problem.handle.handle, SMX_SOFTMAX, 1, x.desc, x.desc);
    REQUIRE(forward.status == SMX_STATUS_SUCCESS);
    std::vector<float> dy(20, 1.5f), y(20, 0.05f), dx(20, -7.0f);
    for (smxSoftmaxBackwardDescriptor_t wrong : {reinterpret_cast<smxSoftmaxBackwardDescriptor_t>(forward.desc),
                                                 reinterpret_cast<smxSoftmaxBackwardDescriptor_t>(problem.handle.handle),
                                                 reinterpret_cast<smxSoftmaxBackwardDescriptor_t>(x.desc)}) {
        CHECK(smxSoftmaxBackward(wrong, nullptr, 0, dx.data(), dy.data(), y.data(), nullptr) == SMX_STATUS_BAD_PARAM_OBJECT);
        CHECK(last_error() == not_live("desc", "smxSoftmaxBackwardDescriptor_t"));
        std::size_t bytes = 99;
        CHECK(smxGetSoftmaxBackwardWorkspaceSize(wrong, &bytes) == SMX_STATUS_BAD_PARAM_OBJECT);
        CHECK(bytes == 99);
        const char* plan = nullptr;
        CHECK(smxGetSoftmaxBackwardPlan(wrong, &plan) == SMX_STATUS_BAD_PARAM_OBJECT);
        CHECK(plan == nullptr);
        CHECK(smxDestroySoftmaxBackwardDescriptor(wrong) == SMX_STATUS_BAD_PARAM_OBJECT);
    }
    CHECK(dx == std::vector<float>(20, -7.0f));
    // A backward descriptor is no forward descriptor either, and everything above is still alive.
    const auto backward_as_forward = reinterpret_cast<smxSoftmaxDescriptor_t>(problem.desc.desc);
    CHECK(smxSoftmaxForward(backward_as_forward, nullptr, 0, dx.data(), y.data(), nullptr) == SMX_STATUS_BAD_PARAM_OBJECT);
    CHECK(last_error() == not_live("desc", "smxSoftmaxDescriptor_t"));
    CHECK(smxSoftmaxBackward(problem.desc.desc, nullptr, 0, dx.data(), dy.data(), y.data(), nullptr) == SMX_STATUS_SUCCESS);
    CHECK(smxDestroySoftmaxBackwardDescriptor(nullptr) == SMX_STATUS_SUCCESS);
}

TEST_CASE("a destroyed backward descriptor is refused by the backward, the getters and a second destroy",
          "[api][backward][freed_memory]") {
    CpuHandle handle;
    TensorDesc t(SMX_DTYPE_F32, {4, 5}, {});
    smxSoftmaxBackwardDescriptor_t destroyed = nullptr;
    REQUIRE(smxCreateSoftmaxBackwardDescriptor(handle.handle, &destroyed, SMX_SOFTMAX, 1, t.desc, t.desc, t.desc) ==
            SMX_STATUS_SUCCESS);
    std::vector<float> dy(20, 1.5f), y(20, 0.05f), dx(20, -7.0f);
    REQUIRE(smxDestroySoftmaxBackwardDescriptor(destroyed) == SMX_STATUS_SUCCESS);
    // Nothing is allocated from here to the calls, so nothing can have reused the descriptor's memory.
    const smxStatus_t backward = smxSoftmaxBackward(destroyed, nullptr, 0, dx.data(), dy.data(), y.data(), nullptr);
    const std::string backward_error = last_error();
    std::size_t bytes = 99;
    const smxStatus_t workspace = smxGetSoftmaxBackwardWorkspaceSize(destroyed, &bytes);
    const smxStatus_t again = smxDestroySoftmaxBackwardDescriptor(destroyed);
    CHECK(backward == SMX_STATUS_BAD_PARAM_OBJECT);
    CHECK(backward_error == not_live("desc", "smxSoftmaxBackwardDescriptor_t"));
    CHECK(dx == std::vector<float>(20, -7.0f));
    CHECK(workspace == SMX_STATUS_BAD_PARAM_OBJECT);
    CHECK(bytes == 99);
    CHECK(again == SMX_STATUS_BAD_PARAM_OBJECT);
}

TEST_CASE("smxSoftmaxBackward with zero-size tensors succeeds with NULL pointers", "[api][backward]") {
    CpuHandle handle;
    for (const std::vector<std::int64_t>& shape : {std::vector<std::int64_t>{0}, {0, 5}, {5, 0}, {3, 0, 4}}) {
        for (int axis = 0; axis < static_cast<int>(shape.size()); ++axis) {
            TensorDesc dx(SMX_DTYPE_F16, shape, {}), grad(SMX_DTYPE_F32, shape, {});
            SoftmaxBackwardDesc desc(handle.handle, SMX_LOG_SOFTMAX, axis, dx.desc, grad.desc, grad.desc);
            REQUIRE(desc.status == SMX_STATUS_SUCCESS);
            CHECK(smxSoftmaxBackward(desc.desc, nullptr, 0, nullptr, nullptr, nullptr, nullptr) == SMX_STATUS_SUCCESS);
        }
    }
    // A zero-size dx may have any strides, zero ones included: nothing is written.
    TensorDesc dx(SMX_DTYPE_F32, {0, 4, 6}, {24, 0, 1}), grad(SMX_DTYPE_F32, {0, 4, 6}, {});
    SoftmaxBackwardDesc desc(handle.handle, SMX_SOFTMAX, 1, dx.desc, grad.desc, grad.desc);
    CHECK(desc.status == SMX_STATUS_SUCCESS);
}

TEST_CASE("smxSoftmaxBackward refuses dx sharing any memory with y, dx == y included", "[api][backward]") {
    FourByFive problem;
    std::vector<float> buffer(60, 0.05f), dy(20, 1.5f);
    // dx == y with the same layout, as in place with dy would be legal: y must survive the call.
    CHECK(smxSoftmaxBackward(problem.desc.desc, nullptr, 0, buffer.data(), dy.data(), buffer.data(), nullptr) ==
          SMX_STATUS_BAD_PARAM_OVERLAP);
    CHECK_THAT(last_error(), Contains("dx (bytes") && Contains("overlaps y (bytes") &&
                                 Contains("may not share any memory with it"));
    for (std::size_t shift : {std::size_t{1}, std::size_t{19}}) {
        CHECK(smxSoftmaxBackward(problem.desc.desc, nullptr, 0, buffer.data() + shift, dy.data(), buffer.data(),
                                 nullptr) == SMX_STATUS_BAD_PARAM_OVERLAP);
        CHECK(smxSoftmaxBackward(problem.desc.desc, nullptr, 0, buffer.data(), dy.data(), buffer.data() + shift,
                                 nullptr) == SMX_STATUS_BAD_PARAM_OVERLAP);
    }
    CHECK(buffer == std::vector<float>(60, 0.05f));  // nothing written
    // Adjacent but disjoint is fine.
    CHECK(smxSoftmaxBackward(problem.desc.desc, nullptr, 0, buffer.data() + 20, dy.data(), buffer.data(), nullptr) ==
          SMX_STATUS_SUCCESS);
}

TEST_CASE("smxSoftmaxBackward allows dx == dy with the same layout, and refuses any other overlap with dy",
          "[api][backward]") {
    std::vector<float> y(20, 0.05f);
    SECTION("partial overlap") {
        FourByFive problem;
        std::vector<float> buffer(40, 0.5f);
        for (std::size_t shift : {std::size_t{1}, std::size_t{19}}) {
            CHECK(smxSoftmaxBackward(problem.desc.desc, nullptr, 0, buffer.data() + shift, buffer.data(), y.data(),
                                     nullptr) == SMX_STATUS_BAD_PARAM_OVERLAP);
            CHECK_THAT(last_error(), Contains("overlaps dy") && Contains("in-place needs dx == dy"));
        }
        CHECK(smxSoftmaxBackward(problem.desc.desc, nullptr, 0, buffer.data(), buffer.data(), y.data(), nullptr) ==
              SMX_STATUS_SUCCESS);
    }
    SECTION("another element size at the same address") {
        FourByFive problem(SMX_DTYPE_F64);
        std::vector<double> buffer(20, 0.5);
        CHECK(smxSoftmaxBackward(problem.desc.desc, nullptr, 0, buffer.data(), buffer.data(), y.data(), nullptr) ==
              SMX_STATUS_BAD_PARAM_OVERLAP);
        CHECK_THAT(last_error(), Contains("identical strides and element size"));
    }
    SECTION("transposed dx at dy's address") {
        CpuHandle handle;
        TensorDesc dx(SMX_DTYPE_F32, {4, 5}, {1, 4}), grad(SMX_DTYPE_F32, {4, 5}, {});
        SoftmaxBackwardDesc desc(handle.handle, SMX_SOFTMAX, 1, dx.desc, grad.desc, grad.desc);
        REQUIRE(desc.status == SMX_STATUS_SUCCESS);
        std::vector<float> buffer(20, 0.5f);
        CHECK(smxSoftmaxBackward(desc.desc, nullptr, 0, buffer.data(), buffer.data(), y.data(), nullptr) ==
              SMX_STATUS_BAD_PARAM_OVERLAP);
    }
}

TEST_CASE("dy and y may share memory: they are only read", "[api][backward]") {
    FourByFive problem(SMX_DTYPE_F32, SMX_DTYPE_F32, SMX_LOG_SOFTMAX);
    HostTensor both = make_tensor(SMX_DTYPE_F32, {4, 5});
    HostTensor dx = make_tensor(SMX_DTYPE_F32, {4, 5});
    fill_random(both, test_rng(), 0.5);
    poison(dx);
    CHECK(smxSoftmaxBackward(problem.desc.desc, nullptr, 0, dx.data(), both.data(), both.data(), nullptr) ==
          SMX_STATUS_SUCCESS);
    CHECK(compare_backward_to_reference(dx, reference_softmax_backward(both, both, 1, true), 0.0) == "");
}

TEST_CASE("smxSoftmaxBackward refuses dy, y or dx not aligned to its element size", "[api][backward]") {
    FourByFive problem(SMX_DTYPE_F64, SMX_DTYPE_F32);
    alignas(16) unsigned char dy[128] = {}, y[128] = {}, dx[256] = {};
    CHECK(smxSoftmaxBackward(problem.desc.desc, nullptr, 0, dx, dy + 2, y, nullptr) == SMX_STATUS_BAD_PARAM_ALIGNMENT);
    CHECK_THAT(last_error(), Contains("dy pointer") && Contains("4 bytes, f32"));
    CHECK(smxSoftmaxBackward(problem.desc.desc, nullptr, 0, dx, dy, y + 1, nullptr) == SMX_STATUS_BAD_PARAM_ALIGNMENT);
    CHECK_THAT(last_error(), Contains("y pointer") && Contains("4 bytes, f32"));
    CHECK(smxSoftmaxBackward(problem.desc.desc, nullptr, 0, dx + 4, dy, y, nullptr) == SMX_STATUS_BAD_PARAM_ALIGNMENT);
    CHECK_THAT(last_error(), Contains("dx pointer") && Contains("8 bytes, f64"));
}

TEST_CASE("smxSoftmaxBackward refuses a workspace not aligned to 16 bytes, even one the plan does not use",
          "[api][backward]") {
    FourByFive problem;
    alignas(16) unsigned char workspace[64] = {};
    std::vector<float> dy(20, 1.5f), y(20, 0.05f), dx(20, -7.0f);
    for (int offset : {1, 4, 8}) {
        CHECK(smxSoftmaxBackward(problem.desc.desc, workspace + offset, 32, dx.data(), dy.data(), y.data(), nullptr) ==
              SMX_STATUS_BAD_PARAM_ALIGNMENT);
        CHECK_THAT(last_error(), Contains("workspace pointer") && Contains("16-byte aligned"));
    }
    CHECK(dx == std::vector<float>(20, -7.0f));
    CHECK(smxSoftmaxBackward(problem.desc.desc, workspace + 16, 32, dx.data(), dy.data(), y.data(), nullptr) ==
          SMX_STATUS_SUCCESS);
    CHECK(smxSoftmaxBackward(problem.desc.desc, nullptr, 0, dx.data(), dy.data(), y.data(), nullptr) == SMX_STATUS_SUCCESS);
}

TEST_CASE("at SMX_LOG_DEBUG the backward descriptor's problem and plan are logged, and a refused call",
          "[api][backward][logging]") {
    LogDefaultsGuard restore;
    std::vector<std::string> messages;
    const auto collect = [](smxLogLevel_t level, const char* message, void* user_data) {
        if (level == SMX_LOG_DEBUG) static_cast<std::vector<std::string>*>(user_data)->push_back(message);
    };
    REQUIRE(smxSetLogLevel(SMX_LOG_DEBUG) == SMX_STATUS_SUCCESS);
    REQUIRE(smxSetLogCallback(collect, &messages) == SMX_STATUS_SUCCESS);
    {
        FourByFive problem(SMX_DTYPE_F16, SMX_DTYPE_BF16, SMX_LOG_SOFTMAX);
        alignas(16) unsigned char dy[64] = {}, y[64] = {}, dx[64] = {};
        smxSoftmaxBackward(problem.desc.desc, nullptr, 0, dx, dy + 1, y, nullptr);  // dy misaligned for bf16
    }
    REQUIRE(smxSetLogCallback(nullptr, nullptr) == SMX_STATUS_SUCCESS);
    const auto logged = [&](const std::string& text) {
        int count = 0;
        for (const std::string& message : messages) count += message.find(text) != std::string::npos;
        return count;
    };
    CHECK(logged("softmax backward descriptor: log_softmax backward (dy bf16, y bf16)->dx f16 shape [4,5] axis 1: "
                 "rows rows=4 row_len=5 axis_stride dy=1 y=1 dx=1 row_stride dy=5 y=5 dx=5 | plan: cpu reference "
                 "backward layout=rows threads=1 | workspace 0 B") == 1);
    CHECK(logged("smxSoftmaxBackward failed (2011): dy pointer") == 1);
}
