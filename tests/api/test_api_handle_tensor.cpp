// The handle and tensor-descriptor half of the C API contract: every refusal has its exact status and a
// last-error message that names the offending value; descriptors own copies of what they were given.
#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <vector>

#include "api/api_checks.hpp"
#include "smx/smx.h"

using Catch::Matchers::Contains;
using smx_test::last_error;

namespace {

// A non-null value the library must overwrite with NULL when creation fails.
template <typename T>
T garbage_pointer() {
    return reinterpret_cast<T>(static_cast<std::uintptr_t>(0xdeadbeef));
}

}  // namespace

// ---- handle ----------------------------------------------------------------------------------------

TEST_CASE("smxCreate makes a CPU handle on device 0 and reports it back", "[api]") {
    smxHandle_t handle = nullptr;
    REQUIRE(smxCreate(&handle, SMX_DEVICE_CPU, 0) == SMX_STATUS_SUCCESS);
    REQUIRE(handle != nullptr);
    smxDeviceType_t type = SMX_DEVICE_CUDA;
    int id = -1;
    CHECK(smxGetHandleDevice(handle, &type, &id) == SMX_STATUS_SUCCESS);
    CHECK(type == SMX_DEVICE_CPU);
    CHECK(id == 0);
    CHECK(smxGetHandleDevice(handle, nullptr, nullptr) == SMX_STATUS_SUCCESS);  // either output may be NULL
    CHECK(smxDestroy(handle) == SMX_STATUS_SUCCESS);
}

TEST_CASE("smxSetDevicePointerChecks takes 0 or 1 on a live handle; on a CPU handle it changes nothing", "[api]") {
    smxHandle_t handle = nullptr;
    REQUIRE(smxCreate(&handle, SMX_DEVICE_CPU, 0) == SMX_STATUS_SUCCESS);
    CHECK(smxSetDevicePointerChecks(handle, 0) == SMX_STATUS_SUCCESS);
    CHECK(smxSetDevicePointerChecks(handle, 1) == SMX_STATUS_SUCCESS);
    for (int bad : {2, -1, 255}) {
        CHECK(smxSetDevicePointerChecks(handle, bad) == SMX_STATUS_BAD_PARAM_MODE);
        CHECK_THAT(last_error(), Contains("takes 0 or 1"));
    }
    CHECK(smxSetDevicePointerChecks(nullptr, 0) != SMX_STATUS_SUCCESS);
    CHECK(smxDestroy(handle) == SMX_STATUS_SUCCESS);
}

TEST_CASE("smxCreate refuses a NULL output pointer", "[api]") {
    CHECK(smxCreate(nullptr, SMX_DEVICE_CPU, 0) == SMX_STATUS_BAD_PARAM_NULL_POINTER);
    CHECK_THAT(last_error(), Contains("handle") && Contains("NULL"));
}

TEST_CASE("smxCreate refuses a CPU device id other than 0 and leaves the handle NULL", "[api]") {
    for (int id : {1, -1, 7}) {
        smxHandle_t handle = garbage_pointer<smxHandle_t>();
        CHECK(smxCreate(&handle, SMX_DEVICE_CPU, id) == SMX_STATUS_BAD_PARAM_DEVICE);
        CHECK(handle == nullptr);
        CHECK_THAT(last_error(), Contains("CPU device id " + std::to_string(id)));
    }
}

TEST_CASE("smxCreate refuses a device type that is not an smxDeviceType_t", "[api]") {
    smxHandle_t handle = garbage_pointer<smxHandle_t>();
    CHECK(smxCreate(&handle, static_cast<smxDeviceType_t>(7), 0) == SMX_STATUS_BAD_PARAM_DEVICE);
    CHECK(handle == nullptr);
    CHECK_THAT(last_error(), Contains("device type 7"));
}

TEST_CASE("smxCreate on CUDA without a usable CUDA device says which 3000s case it is", "[api]") {
    smxHandle_t handle = garbage_pointer<smxHandle_t>();
    const smxStatus_t status = smxCreate(&handle, SMX_DEVICE_CUDA, 0);
    if (status == SMX_STATUS_SUCCESS) {
        smxDestroy(handle);
        SUCCEED("this machine has a CUDA device; the [cuda] tests cover it");
        return;
    }
    CHECK(handle == nullptr);
    CHECK(SMX_STATUS_CATEGORY(status) == SMX_STATUS_NOT_SUPPORTED);
    // SMX_TEST_WITH_CUDA says only that the toolkit exists, not that libsmx was built with it: accept either.
    CHECK((status == SMX_STATUS_NOT_SUPPORTED_BACKEND_NOT_BUILT || status == SMX_STATUS_NOT_SUPPORTED_DEVICE_ABSENT));
    if (status == SMX_STATUS_NOT_SUPPORTED_BACKEND_NOT_BUILT) {
        CHECK_THAT(last_error(), Contains("built without the CUDA backend") && Contains("SMX_WITH_CUDA"));
    } else {
        CHECK_THAT(last_error(), Contains("CUDA"));
    }
}

TEST_CASE("smxGetHandleDevice refuses a NULL handle", "[api]") {
    smxDeviceType_t type;
    int id;
    CHECK(smxGetHandleDevice(nullptr, &type, &id) == SMX_STATUS_BAD_PARAM_NULL_POINTER);
    CHECK_THAT(last_error(), Contains("handle is NULL"));
}

TEST_CASE("destroying NULL is a no-op for every destroy function", "[api]") {
    CHECK(smxDestroy(nullptr) == SMX_STATUS_SUCCESS);
    CHECK(smxDestroyTensorDescriptor(nullptr) == SMX_STATUS_SUCCESS);
    CHECK(smxDestroySoftmaxDescriptor(nullptr) == SMX_STATUS_SUCCESS);
}

// ---- tensor descriptor -----------------------------------------------------------------------------

TEST_CASE("smxCreateTensorDescriptor refuses NULL desc and NULL shape", "[api]") {
    const std::int64_t shape[2] = {4, 5};
    CHECK(smxCreateTensorDescriptor(nullptr, SMX_DTYPE_F32, 2, shape, nullptr) == SMX_STATUS_BAD_PARAM_NULL_POINTER);
    CHECK_THAT(last_error(), Contains("desc") && Contains("NULL"));
    smxTensorDescriptor_t desc = garbage_pointer<smxTensorDescriptor_t>();
    CHECK(smxCreateTensorDescriptor(&desc, SMX_DTYPE_F32, 2, nullptr, nullptr) == SMX_STATUS_BAD_PARAM_NULL_POINTER);
    CHECK(desc == nullptr);
    CHECK_THAT(last_error(), Contains("shape is NULL"));
}

TEST_CASE("smxCreateTensorDescriptor refuses a dtype that is not an smxDataType_t", "[api]") {
    const std::int64_t shape[1] = {4};
    for (int dtype : {0, 8, 1000, -1}) {
        smxTensorDescriptor_t desc = garbage_pointer<smxTensorDescriptor_t>();
        CHECK(smxCreateTensorDescriptor(&desc, static_cast<smxDataType_t>(dtype), 1, shape, nullptr) ==
              SMX_STATUS_BAD_PARAM_DTYPE);
        CHECK(desc == nullptr);
        CHECK_THAT(last_error(), Contains("dtype " + std::to_string(dtype)));
    }
}

TEST_CASE("smxCreateTensorDescriptor refuses ndim 0 and ndim above SMX_MAX_DIMS", "[api]") {
    const std::int64_t shape[SMX_MAX_DIMS + 1] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    for (int ndim : {0, SMX_MAX_DIMS + 1, -2}) {
        smxTensorDescriptor_t desc = garbage_pointer<smxTensorDescriptor_t>();
        CHECK(smxCreateTensorDescriptor(&desc, SMX_DTYPE_F32, ndim, shape, nullptr) == SMX_STATUS_BAD_PARAM_NDIM);
        CHECK(desc == nullptr);
        CHECK_THAT(last_error(), Contains("ndim " + std::to_string(ndim)) && Contains("1 to 8"));
    }
    smxTensorDescriptor_t desc = nullptr;
    CHECK(smxCreateTensorDescriptor(&desc, SMX_DTYPE_F32, SMX_MAX_DIMS, shape, nullptr) == SMX_STATUS_SUCCESS);
    smxDestroyTensorDescriptor(desc);
}

TEST_CASE("smxCreateTensorDescriptor refuses a negative dim and names it", "[api]") {
    const std::int64_t shape[3] = {4, -3, 5};
    smxTensorDescriptor_t desc = garbage_pointer<smxTensorDescriptor_t>();
    CHECK(smxCreateTensorDescriptor(&desc, SMX_DTYPE_F32, 3, shape, nullptr) == SMX_STATUS_BAD_PARAM_SHAPE);
    CHECK(desc == nullptr);
    CHECK_THAT(last_error(), Contains("[4,-3,5]") && Contains("-3 in dim 1"));
}

TEST_CASE("smxCreateTensorDescriptor refuses a shape whose sizes multiply past int64, wherever a 0 sits", "[api]") {
    // An empty tensor is no exception: its row-major strides are products of the other sizes.
    const std::int64_t big = std::int64_t{1} << 32;
    for (const std::vector<std::int64_t>& shape : {std::vector<std::int64_t>{big, big, 2},
                                                   std::vector<std::int64_t>{0, big, big, 2},
                                                   std::vector<std::int64_t>{big, big, 2, 0}}) {
        smxTensorDescriptor_t desc = nullptr;
        CHECK(smxCreateTensorDescriptor(&desc, SMX_DTYPE_F32, static_cast<int>(shape.size()), shape.data(), nullptr) ==
              SMX_STATUS_BAD_PARAM_SHAPE);
        CHECK(desc == nullptr);
        CHECK_THAT(last_error(), Contains("overflows int64") && Contains("4294967296,4294967296"));
    }
}

TEST_CASE("smxCreateTensorDescriptor refuses strides whose span overflows int64", "[api]") {
    smxTensorDescriptor_t desc = nullptr;
    SECTION("one huge stride times its dim") {
        const std::int64_t shape[2] = {3, 4};
        const std::int64_t strides[2] = {std::numeric_limits<std::int64_t>::max() / 2, 1};
        CHECK(smxCreateTensorDescriptor(&desc, SMX_DTYPE_F32, 2, shape, strides) == SMX_STATUS_BAD_PARAM_STRIDES);
        CHECK_THAT(last_error(), Contains("reach beyond int64"));
    }
    SECTION("two large strides whose extents add past int64") {
        const std::int64_t big = std::int64_t{1} << 62;
        const std::int64_t shape[2] = {2, 2};
        const std::int64_t strides[2] = {big, -big};
        CHECK(smxCreateTensorDescriptor(&desc, SMX_DTYPE_F32, 2, shape, strides) == SMX_STATUS_BAD_PARAM_STRIDES);
        CHECK_THAT(last_error(), Contains("reach beyond int64"));
    }
    SECTION("an element span that fits int64 elements but not int64 bytes") {
        const std::int64_t shape[1] = {2};
        const std::int64_t strides[1] = {std::int64_t{1} << 61};
        CHECK(smxCreateTensorDescriptor(&desc, SMX_DTYPE_F64, 1, shape, strides) == SMX_STATUS_BAD_PARAM_STRIDES);
        CHECK_THAT(last_error(), Contains("bytes"));
    }
    SECTION("INT64_MIN, whose magnitude is not an int64") {
        const std::int64_t shape[1] = {2};
        const std::int64_t strides[1] = {std::numeric_limits<std::int64_t>::min()};
        CHECK(smxCreateTensorDescriptor(&desc, SMX_DTYPE_F32, 1, shape, strides) == SMX_STATUS_BAD_PARAM_STRIDES);
        CHECK_THAT(last_error(), Contains("of dim 0"));
    }
    CHECK(desc == nullptr);
}

TEST_CASE("smxCreateTensorDescriptor refuses a row-major tensor of more bytes than int64 can address", "[api]") {
    // 2^61 f64 elements count fine in int64 but take 2^64 bytes: the same limit explicit strides get.
    const std::int64_t shape[1] = {std::int64_t{1} << 61};
    const std::int64_t strides[1] = {1};
    smxTensorDescriptor_t desc = nullptr;
    CHECK(smxCreateTensorDescriptor(&desc, SMX_DTYPE_F64, 1, shape, strides) == SMX_STATUS_BAD_PARAM_STRIDES);
    CHECK_THAT(last_error(), Contains("bytes"));
    CHECK(smxCreateTensorDescriptor(&desc, SMX_DTYPE_F64, 1, shape, nullptr) == SMX_STATUS_BAD_PARAM_SHAPE);
    CHECK_THAT(last_error(), Contains("shape [2305843009213693952] of f64 holds more bytes than int64"));
    CHECK(desc == nullptr);
    // Half as many f32 elements fit.
    const std::int64_t fits[1] = {std::int64_t{1} << 60};
    CHECK(smxCreateTensorDescriptor(&desc, SMX_DTYPE_F32, 1, fits, nullptr) == SMX_STATUS_SUCCESS);
    smxDestroyTensorDescriptor(desc);
}

TEST_CASE("smxCreateTensorDescriptor accepts an empty tensor whatever its other sizes", "[api]") {
    const std::int64_t big = std::int64_t{1} << 40;
    for (const std::vector<std::int64_t>& shape : {std::vector<std::int64_t>{0, big}, std::vector<std::int64_t>{big, 0},
                                                   std::vector<std::int64_t>{0}}) {
        smxTensorDescriptor_t desc = nullptr;
        CHECK(smxCreateTensorDescriptor(&desc, SMX_DTYPE_F64, static_cast<int>(shape.size()), shape.data(), nullptr) ==
              SMX_STATUS_SUCCESS);
        smxDestroyTensorDescriptor(desc);
    }
}

TEST_CASE("smxGetTensorDescriptor returns what was given, with row-major strides filled in", "[api]") {
    const std::int64_t shape[4] = {2, 1, 3, 5};
    smxTensorDescriptor_t desc = nullptr;
    REQUIRE(smxCreateTensorDescriptor(&desc, SMX_DTYPE_BF16, 4, shape, nullptr) == SMX_STATUS_SUCCESS);
    smxDataType_t dtype = SMX_DTYPE_F32;
    int ndim = 0;
    std::int64_t got_shape[SMX_MAX_DIMS] = {};
    std::int64_t got_strides[SMX_MAX_DIMS] = {};
    CHECK(smxGetTensorDescriptor(desc, &dtype, &ndim, got_shape, got_strides) == SMX_STATUS_SUCCESS);
    CHECK(dtype == SMX_DTYPE_BF16);
    REQUIRE(ndim == 4);
    CHECK(std::vector<std::int64_t>(got_shape, got_shape + 4) == std::vector<std::int64_t>{2, 1, 3, 5});
    // Stepping dim i moves past everything inside it; a size-1 dim repeats its inner neighbour's stride.
    CHECK(std::vector<std::int64_t>(got_strides, got_strides + 4) == std::vector<std::int64_t>{15, 15, 5, 1});
    CHECK(smxGetTensorDescriptor(desc, nullptr, nullptr, nullptr, nullptr) == SMX_STATUS_SUCCESS);
    smxDestroyTensorDescriptor(desc);

    const std::int64_t strides[2] = {-7, 3};
    REQUIRE(smxCreateTensorDescriptor(&desc, SMX_DTYPE_F64, 2, shape, strides) == SMX_STATUS_SUCCESS);
    CHECK(smxGetTensorDescriptor(desc, &dtype, &ndim, got_shape, got_strides) == SMX_STATUS_SUCCESS);
    CHECK(dtype == SMX_DTYPE_F64);
    CHECK(ndim == 2);
    CHECK(got_strides[0] == -7);
    CHECK(got_strides[1] == 3);
    smxDestroyTensorDescriptor(desc);
}

TEST_CASE("smxGetTensorDescriptor refuses a NULL descriptor", "[api]") {
    int ndim = 0;
    CHECK(smxGetTensorDescriptor(nullptr, nullptr, &ndim, nullptr, nullptr) == SMX_STATUS_BAD_PARAM_NULL_POINTER);
    CHECK_THAT(last_error(), Contains("desc is NULL"));
}

TEST_CASE("a tensor descriptor keeps its own copy of shape and strides", "[api]") {
    std::vector<std::int64_t> shape = {3, 4};
    std::vector<std::int64_t> strides = {1, 3};
    smxTensorDescriptor_t desc = nullptr;
    REQUIRE(smxCreateTensorDescriptor(&desc, SMX_DTYPE_F32, 2, shape.data(), strides.data()) == SMX_STATUS_SUCCESS);
    shape.assign(shape.size(), -99);  // scribble, then free
    strides.assign(strides.size(), -99);
    shape.clear();
    shape.shrink_to_fit();
    strides.clear();
    strides.shrink_to_fit();
    std::int64_t got_shape[SMX_MAX_DIMS] = {};
    std::int64_t got_strides[SMX_MAX_DIMS] = {};
    CHECK(smxGetTensorDescriptor(desc, nullptr, nullptr, got_shape, got_strides) == SMX_STATUS_SUCCESS);
    CHECK(got_shape[0] == 3);
    CHECK(got_shape[1] == 4);
    CHECK(got_strides[0] == 1);
    CHECK(got_strides[1] == 3);
    smxDestroyTensorDescriptor(desc);
}
