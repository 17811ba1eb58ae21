// Objects that are not what the argument takes: one kind cast to another, and (tagged [freed_memory])
// objects already destroyed. Each is refused with SMX_STATUS_BAD_PARAM_OBJECT and a message naming the
// argument and the kind it takes, and nothing is written or freed.
//
// The [freed_memory] tests hand freed objects back on purpose, as the careless caller does: the library
// then reads freed memory (undefined behaviour that the tags make detectable as long as nothing reused
// it, which these tests ensure). ASan rightly reports those reads, so its build leaves them out
// (tests/CMakeLists.txt); the plain ctest runs them.
#include <catch2/catch.hpp>

#include <string>

#include "api/api_checks.hpp"
#include "support/reference.hpp"

using Catch::Matchers::Contains;
using namespace smx_test;

namespace {

// The message check_live gives for `argument`, which takes an object of C type `kind`.
std::string not_live(const std::string& argument, const std::string& kind) {
    return argument + " is not a live " + kind + " (destroyed, or another kind of object)";
}

// A CPU handle, a (3, 17) f32 tensor descriptor and a softmax descriptor over it: one object of each kind.
struct OneOfEachKind {
    Handle handle{SMX_DEVICE_CPU, 0};
    TensorDesc tensor{SMX_DTYPE_F32, {3, 17}, {}};
    SoftmaxDesc softmax{handle.handle, SMX_SOFTMAX, 1, tensor.desc, tensor.desc};
    HostTensor x = make_tensor(SMX_DTYPE_F32, {3, 17});
    HostTensor y = make_tensor(SMX_DTYPE_F32, {3, 17});

    OneOfEachKind() {
        REQUIRE(handle.status == SMX_STATUS_SUCCESS);
        REQUIRE(softmax.status == SMX_STATUS_SUCCESS);
        fill_random(x, test_rng());
        poison(y);
    }
    smxSoftmaxDescriptor_t handle_as_softmax() const { return reinterpret_cast<smxSoftmaxDescriptor_t>(handle.handle); }
    smxSoftmaxDescriptor_t tensor_as_softmax() const { return reinterpret_cast<smxSoftmaxDescriptor_t>(tensor.desc); }
    smxHandle_t softmax_as_handle() const { return reinterpret_cast<smxHandle_t>(softmax.desc); }
    smxTensorDescriptor_t handle_as_tensor() const { return reinterpret_cast<smxTensorDescriptor_t>(handle.handle); }
    // Whether y still holds only the poison it was given.
    bool y_untouched() const {
        HostTensor poisoned = make_tensor(SMX_DTYPE_F32, {3, 17});
        poison(poisoned);
        return y.storage == poisoned.storage;
    }
};

}  // namespace

TEST_CASE("forward and the softmax getters refuse a handle or tensor descriptor cast to a softmax descriptor",
          "[api]") {
    OneOfEachKind objects;
    for (smxSoftmaxDescriptor_t wrong : {objects.handle_as_softmax(), objects.tensor_as_softmax()}) {
        CHECK(smxSoftmaxForward(wrong, nullptr, 0, objects.y.data(), objects.x.data(), nullptr) ==
              SMX_STATUS_BAD_PARAM_OBJECT);
        CHECK(last_error() == not_live("desc", "smxSoftmaxDescriptor_t"));
        CHECK(objects.y_untouched());
        std::size_t bytes = 99;
        CHECK(smxGetSoftmaxWorkspaceSize(wrong, &bytes) == SMX_STATUS_BAD_PARAM_OBJECT);
        CHECK(bytes == 99);
        const char* plan = nullptr;
        CHECK(smxGetSoftmaxPlan(wrong, &plan) == SMX_STATUS_BAD_PARAM_OBJECT);
        CHECK(plan == nullptr);
    }
}

TEST_CASE("every entry point taking a handle or tensor descriptor refuses another kind cast to it", "[api]") {
    OneOfEachKind objects;
    int id = -1;
    CHECK(smxGetHandleDevice(objects.softmax_as_handle(), nullptr, &id) == SMX_STATUS_BAD_PARAM_OBJECT);
    CHECK(last_error() == not_live("handle", "smxHandle_t"));
    CHECK(id == -1);
    int ndim = -1;
    CHECK(smxGetTensorDescriptor(objects.handle_as_tensor(), nullptr, &ndim, nullptr, nullptr) ==
          SMX_STATUS_BAD_PARAM_OBJECT);
    CHECK(last_error() == not_live("desc", "smxTensorDescriptor_t"));
    CHECK(ndim == -1);

    smxSoftmaxDescriptor_t created = nullptr;
    const smxTensorDescriptor_t tensor = objects.tensor.desc;
    CHECK(smxCreateSoftmaxDescriptor(objects.softmax_as_handle(), &created, SMX_SOFTMAX, 1, tensor, tensor) ==
          SMX_STATUS_BAD_PARAM_OBJECT);
    CHECK(last_error() == not_live("handle", "smxHandle_t"));
    CHECK(smxCreateSoftmaxDescriptor(objects.handle.handle, &created, SMX_SOFTMAX, 1, tensor,
                                     objects.handle_as_tensor()) == SMX_STATUS_BAD_PARAM_OBJECT);
    CHECK(last_error() == not_live("xDesc", "smxTensorDescriptor_t"));
    CHECK(smxCreateSoftmaxDescriptor(objects.handle.handle, &created, SMX_SOFTMAX, 1, objects.handle_as_tensor(),
                                     tensor) == SMX_STATUS_BAD_PARAM_OBJECT);
    CHECK(last_error() == not_live("yDesc", "smxTensorDescriptor_t"));
    CHECK(created == nullptr);
}

TEST_CASE("a destroy function given another kind of object refuses it and frees nothing", "[api]") {
    OneOfEachKind objects;
    CHECK(smxDestroySoftmaxDescriptor(objects.handle_as_softmax()) == SMX_STATUS_BAD_PARAM_OBJECT);
    CHECK(last_error() == not_live("desc", "smxSoftmaxDescriptor_t"));
    CHECK(smxDestroyTensorDescriptor(objects.handle_as_tensor()) == SMX_STATUS_BAD_PARAM_OBJECT);
    CHECK(last_error() == not_live("desc", "smxTensorDescriptor_t"));
    CHECK(smxDestroy(objects.softmax_as_handle()) == SMX_STATUS_BAD_PARAM_OBJECT);
    CHECK(last_error() == not_live("handle", "smxHandle_t"));
    // Every object is still alive and usable (and the guards destroy each once, which ASan would check).
    CHECK(smxGetHandleDevice(objects.handle.handle, nullptr, nullptr) == SMX_STATUS_SUCCESS);
    CHECK(smxSoftmaxForward(objects.softmax.desc, nullptr, 0, objects.y.data(), objects.x.data(), nullptr) ==
          SMX_STATUS_SUCCESS);
    CHECK(compare_to_reference(objects.y, reference_softmax(objects.x, 1, false), false) == "");
}

TEST_CASE("destroying an object twice refuses the second call", "[api][freed_memory]") {
    smxHandle_t handle = nullptr;
    REQUIRE(smxCreate(&handle, SMX_DEVICE_CPU, 0) == SMX_STATUS_SUCCESS);
    const std::int64_t shape[2] = {3, 17};
    smxTensorDescriptor_t tensor = nullptr;
    REQUIRE(smxCreateTensorDescriptor(&tensor, SMX_DTYPE_F32, 2, shape, nullptr) == SMX_STATUS_SUCCESS);
    smxSoftmaxDescriptor_t softmax = nullptr;
    REQUIRE(smxCreateSoftmaxDescriptor(handle, &softmax, SMX_SOFTMAX, 1, tensor, tensor) == SMX_STATUS_SUCCESS);

    REQUIRE(smxDestroySoftmaxDescriptor(softmax) == SMX_STATUS_SUCCESS);
    const smxStatus_t softmax_again = smxDestroySoftmaxDescriptor(softmax);
    const std::string softmax_error = last_error();
    REQUIRE(smxDestroyTensorDescriptor(tensor) == SMX_STATUS_SUCCESS);
    const smxStatus_t tensor_again = smxDestroyTensorDescriptor(tensor);
    const std::string tensor_error = last_error();
    REQUIRE(smxDestroy(handle) == SMX_STATUS_SUCCESS);
    const smxStatus_t handle_again = smxDestroy(handle);
    const std::string handle_error = last_error();

    CHECK(softmax_again == SMX_STATUS_BAD_PARAM_OBJECT);
    CHECK(softmax_error == not_live("desc", "smxSoftmaxDescriptor_t"));
    CHECK(tensor_again == SMX_STATUS_BAD_PARAM_OBJECT);
    CHECK(tensor_error == not_live("desc", "smxTensorDescriptor_t"));
    CHECK(handle_again == SMX_STATUS_BAD_PARAM_OBJECT);
    CHECK(handle_error == not_live("handle", "smxHandle_t"));
}

TEST_CASE("a destroyed softmax descriptor is refused by forward and the getters, not run", "[api][freed_memory]") {
    OneOfEachKind objects;
    smxSoftmaxDescriptor_t destroyed = nullptr;
    REQUIRE(smxCreateSoftmaxDescriptor(objects.handle.handle, &destroyed, SMX_LOG_SOFTMAX, 1, objects.tensor.desc,
                                       objects.tensor.desc) == SMX_STATUS_SUCCESS);
    REQUIRE(smxDestroySoftmaxDescriptor(destroyed) == SMX_STATUS_SUCCESS);
    // Nothing is allocated from here to the calls, so nothing can have reused the descriptor's memory.
    const smxStatus_t forward = smxSoftmaxForward(destroyed, nullptr, 0, objects.y.data(), objects.x.data(), nullptr);
    const std::string forward_error = last_error();
    std::size_t bytes = 99;
    const smxStatus_t workspace = smxGetSoftmaxWorkspaceSize(destroyed, &bytes);
    const char* plan = nullptr;
    const smxStatus_t plan_status = smxGetSoftmaxPlan(destroyed, &plan);

    CHECK(forward == SMX_STATUS_BAD_PARAM_OBJECT);
    CHECK(forward_error == not_live("desc", "smxSoftmaxDescriptor_t"));
    CHECK(objects.y_untouched());
    CHECK(workspace == SMX_STATUS_BAD_PARAM_OBJECT);
    CHECK(bytes == 99);
    CHECK(plan_status == SMX_STATUS_BAD_PARAM_OBJECT);
    CHECK(plan == nullptr);
}

TEST_CASE("a softmax descriptor is not made from a destroyed handle or tensor descriptor", "[api][freed_memory]") {
    const std::int64_t shape[2] = {3, 17};
    smxTensorDescriptor_t tensor = nullptr;
    REQUIRE(smxCreateTensorDescriptor(&tensor, SMX_DTYPE_F32, 2, shape, nullptr) == SMX_STATUS_SUCCESS);
    smxHandle_t handle = nullptr;
    REQUIRE(smxCreate(&handle, SMX_DEVICE_CPU, 0) == SMX_STATUS_SUCCESS);
    REQUIRE(smxDestroy(handle) == SMX_STATUS_SUCCESS);
    smxSoftmaxDescriptor_t created = nullptr;
    const smxStatus_t from_destroyed_handle =
        smxCreateSoftmaxDescriptor(handle, &created, SMX_SOFTMAX, 1, tensor, tensor);
    const std::string handle_error = last_error();
    CHECK(from_destroyed_handle == SMX_STATUS_BAD_PARAM_OBJECT);
    CHECK(handle_error == not_live("handle", "smxHandle_t"));
    CHECK(created == nullptr);

    Handle live(SMX_DEVICE_CPU, 0);
    REQUIRE(live.status == SMX_STATUS_SUCCESS);
    REQUIRE(smxDestroyTensorDescriptor(tensor) == SMX_STATUS_SUCCESS);
    const smxStatus_t from_destroyed_tensor =
        smxCreateSoftmaxDescriptor(live.handle, &created, SMX_SOFTMAX, 1, tensor, tensor);
    const std::string tensor_error = last_error();
    CHECK(from_destroyed_tensor == SMX_STATUS_BAD_PARAM_OBJECT);
    CHECK(tensor_error == not_live("xDesc", "smxTensorDescriptor_t"));
    CHECK(created == nullptr);
}
