// [cuda] error paths: refusals a CUDA handle owes its caller, each with a specific last-error message.
#if SMX_TEST_WITH_CUDA

#include <algorithm>
#include <cctype>
#include <cstring>

#include "cuda_helpers.hpp"

using namespace smx_test;

namespace {

std::string lower_case(std::string text) {
    std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return text;
}

// Requires `status` to be `expected` and the last error to mention every one of `words` (case-insensitive).
void require_refusal(smxStatus_t status, smxStatus_t expected, const std::vector<std::string>& words) {
    const std::string message = smxGetLastErrorMessage();
    INFO("got " << smxGetStatusString(status) << " (" << message << "), expected " << smxGetStatusString(expected));
    REQUIRE(status == expected);
    CHECK(!message.empty());
    for (const std::string& word : words) CHECK(lower_case(message).find(lower_case(word)) != std::string::npos);
}

// A 4 x 100 f32 softmax: random x on the host and the device, y on both, and their tensor descriptors.
struct SmallCase {
    HostTensor x = make_tensor(SMX_DTYPE_F32, {4, 100});
    HostTensor y = make_tensor(SMX_DTYPE_F32, {4, 100});
    DeviceTensor x_device{x};
    DeviceTensor y_device{y};
    TensorDesc x_desc{x};
    TensorDesc y_desc{y};
    SmallCase() {
        fill_random(x, test_rng());
        x_device.upload(x);
    }
    // y_device, poisoned before `forward` runs on the device, against the float64 reference.
    template <class Forward>
    std::string run_and_compare(const Forward& forward) {
        y_device.poison();
        forward();
        SMX_REQUIRE_CUDA(cudaDeviceSynchronize());
        y_device.download(y);
        return compare_to_reference(y, reference_softmax(x, 1, false), false);
    }
};

}  // namespace

TEST_CASE("cuda errors: a host pointer given to a CUDA handle is refused as the wrong device", "[cuda]") {
    CudaHandle handle;
    SmallCase c;
    HostTensor& x = c.x;
    HostTensor& y = c.y;
    DeviceTensor& x_device = c.x_device;
    DeviceTensor& y_device = c.y_device;
    SoftmaxDesc desc(handle.get(), SMX_SOFTMAX, 1, c.y_desc.desc, c.x_desc.desc);
    REQUIRE(desc.status == SMX_STATUS_SUCCESS);
    std::size_t workspace_bytes = 0;
    SMX_REQUIRE_OK(smxGetSoftmaxWorkspaceSize(desc.desc, &workspace_bytes));
    DeviceBuffer workspace(workspace_bytes);

    require_refusal(smxSoftmaxForward(desc.desc, workspace.get(), workspace_bytes, y_device.data(), x.data(), nullptr),
                    SMX_STATUS_BAD_PARAM_DEVICE, {});
    const std::string x_message = smxGetLastErrorMessage();
    require_refusal(smxSoftmaxForward(desc.desc, workspace.get(), workspace_bytes, y.data(), x_device.data(), nullptr),
                    SMX_STATUS_BAD_PARAM_DEVICE, {});
    // Specific: the message says which operand was wrong, so the two refusals read differently.
    CHECK(x_message != smxGetLastErrorMessage());
    // The refused calls launched nothing: a valid call afterwards still computes the right answer.
    CHECK(c.run_and_compare([&] {
        SMX_REQUIRE_OK(smxSoftmaxForward(desc.desc, workspace.get(), workspace_bytes, y_device.data(), x_device.data(),
                                         nullptr));
    }) == "");
}

TEST_CASE("cuda errors: with device-pointer checks off, later descriptors skip the query and compute the same",
          "[cuda]") {
    CudaHandle handle;
    SmallCase c;
    SoftmaxDesc checked(handle.get(), SMX_SOFTMAX, 1, c.y_desc.desc, c.x_desc.desc);
    REQUIRE(checked.status == SMX_STATUS_SUCCESS);
    SMX_REQUIRE_OK(smxSetDevicePointerChecks(handle.get(), 0));
    SoftmaxDesc unchecked(handle.get(), SMX_SOFTMAX, 1, c.y_desc.desc, c.x_desc.desc);
    REQUIRE(unchecked.status == SMX_STATUS_SUCCESS);
    // The descriptor made before keeps its checks: a host x is still refused.
    require_refusal(smxSoftmaxForward(checked.desc, nullptr, 0, c.y_device.data(), c.x.data(), nullptr),
                    SMX_STATUS_BAD_PARAM_DEVICE, {});
    CHECK(c.run_and_compare([&] {
        SMX_REQUIRE_OK(smxSoftmaxForward(unchecked.desc, nullptr, 0, c.y_device.data(), c.x_device.data(), nullptr));
    }) == "");
}

TEST_CASE("cuda errors: a workspace below the queried size is refused; plans without workspace run with none",
          "[cuda]") {
    CudaHandle handle;
    // Shapes from short rows to few very long ones: the latter are where a split-row plan may need workspace.
    const std::vector<std::vector<std::int64_t>> shapes = {{64, 100}, {8, 8193}, {4, 262145}, {1, 1048583}, {2, 4194319}};
    bool some_plan_needed_workspace = false;
    for (const std::vector<std::int64_t>& shape : shapes) {
        HostTensor x = make_tensor(SMX_DTYPE_F32, shape);
        HostTensor y = make_tensor(SMX_DTYPE_F32, shape);
        fill_random(x, test_rng());
        DeviceTensor x_device(x), y_device(y);
        x_device.upload(x);
        y_device.poison();
        TensorDesc x_desc(x), y_desc(y);
        SoftmaxDesc desc(handle.get(), SMX_SOFTMAX, 1, y_desc.desc, x_desc.desc);
        REQUIRE(desc.status == SMX_STATUS_SUCCESS);
        const char* plan = nullptr;
        SMX_REQUIRE_OK(smxGetSoftmaxPlan(desc.desc, &plan));
        std::size_t workspace_bytes = 0;
        SMX_REQUIRE_OK(smxGetSoftmaxWorkspaceSize(desc.desc, &workspace_bytes));
        INFO(describe_case(y, x, 1, false) << " | plan: " << plan << " | workspace " << workspace_bytes << " B");
        if (workspace_bytes > 0) {
            some_plan_needed_workspace = true;
            DeviceBuffer workspace(workspace_bytes);
            require_refusal(smxSoftmaxForward(desc.desc, workspace.get(), workspace_bytes - 1, y_device.data(),
                                              x_device.data(), nullptr),
                            SMX_STATUS_BAD_PARAM_WORKSPACE, {"workspace", std::to_string(workspace_bytes)});
            require_refusal(smxSoftmaxForward(desc.desc, nullptr, workspace_bytes, y_device.data(), x_device.data(), nullptr),
                            SMX_STATUS_BAD_PARAM_WORKSPACE, {"workspace"});
            DeviceBuffer roomier(workspace_bytes + 16);  // room for the same size at a misaligned address
            require_refusal(smxSoftmaxForward(desc.desc, static_cast<char*>(roomier.get()) + 8, workspace_bytes,
                                              y_device.data(), x_device.data(), nullptr),
                            SMX_STATUS_BAD_PARAM_ALIGNMENT, {"workspace pointer", "16-byte aligned"});
            SMX_REQUIRE_OK(smxSoftmaxForward(desc.desc, workspace.get(), workspace_bytes, y_device.data(), x_device.data(), nullptr));
        } else {
            SMX_REQUIRE_OK(smxSoftmaxForward(desc.desc, nullptr, 0, y_device.data(), x_device.data(), nullptr));
        }
        SMX_REQUIRE_CUDA(cudaDeviceSynchronize());
        y_device.download(y);
        CHECK(compare_to_reference(y, reference_softmax(x, 1, false), false) == "");
    }
    if (!some_plan_needed_workspace) WARN("no plan among these shapes needed workspace: the too-small path was not reached");
}

TEST_CASE("cuda errors: a pointer not aligned to its element size is refused", "[cuda]") {
    CudaHandle handle;
    for (smxDataType_t dtype : {SMX_DTYPE_F16, SMX_DTYPE_F32, SMX_DTYPE_F64}) {
        const std::vector<std::int64_t> shape = {4, 64};
        TensorDesc x_desc(dtype, shape, {}), y_desc(dtype, shape, {});
        SoftmaxDesc desc(handle.get(), SMX_SOFTMAX, 1, y_desc.desc, x_desc.desc);
        REQUIRE(desc.status == SMX_STATUS_SUCCESS);
        std::size_t workspace_bytes = 0;
        SMX_REQUIRE_OK(smxGetSoftmaxWorkspaceSize(desc.desc, &workspace_bytes));
        DeviceBuffer workspace(workspace_bytes);
        const std::size_t bytes = 4 * 64 * dtype_size(dtype) + 16;
        DeviceBuffer x_buffer(bytes), y_buffer(bytes);
        auto* x_odd = static_cast<unsigned char*>(x_buffer.get()) + 1;  // one byte off: misaligned for every dtype
        auto* y_odd = static_cast<unsigned char*>(y_buffer.get()) + 1;
        INFO(dtype_name(dtype));
        require_refusal(smxSoftmaxForward(desc.desc, workspace.get(), workspace_bytes, y_buffer.get(), x_odd, nullptr),
                        SMX_STATUS_BAD_PARAM_ALIGNMENT, {"x", "align"});
        require_refusal(smxSoftmaxForward(desc.desc, workspace.get(), workspace_bytes, y_odd, x_buffer.get(), nullptr),
                        SMX_STATUS_BAD_PARAM_ALIGNMENT, {"y", "align"});
    }
}

TEST_CASE("cuda errors: an invalid device id is refused and leaves the handle NULL", "[cuda]") {
    int device_count = 0;
    SMX_REQUIRE_CUDA(cudaGetDeviceCount(&device_count));
    for (int device_id : {device_count, device_count + 100, -1}) {
        smxHandle_t handle = reinterpret_cast<smxHandle_t>(&device_count);  // any non-NULL value to overwrite
        INFO("device id " << device_id << " of " << device_count);
        require_refusal(smxCreate(&handle, SMX_DEVICE_CUDA, device_id), SMX_STATUS_BAD_PARAM_DEVICE,
                        {std::to_string(device_id)});
        CHECK(handle == nullptr);
    }
}

TEST_CASE("cuda errors: managed memory is accepted as memory of the handle's device", "[cuda]") {
    CudaHandle handle;
    HostTensor x = make_tensor(SMX_DTYPE_F32, {16, 300});
    HostTensor y = make_tensor(SMX_DTYPE_F32, {16, 300});
    fill_random(x, test_rng());
    void* x_managed = nullptr;
    void* y_managed = nullptr;
    SMX_REQUIRE_CUDA(cudaMallocManaged(&x_managed, x.storage.size()));
    struct ManagedFree {
        void* pointers[2];
        ~ManagedFree() {
            for (void* pointer : pointers) cudaFree(pointer);
        }
    } release{{x_managed, nullptr}};
    SMX_REQUIRE_CUDA(cudaMallocManaged(&y_managed, y.storage.size()));
    release.pointers[1] = y_managed;
    std::memcpy(x_managed, x.storage.data(), x.storage.size());
    std::memset(y_managed, 0xFF, y.storage.size());
    const DeviceRun run = run_on_device(handle.get(), y, y_managed, x, x_managed, 1, false);
    INFO("plan: " << run.plan << " | " << run.error);
    REQUIRE(run.status == SMX_STATUS_SUCCESS);
    std::memcpy(y.storage.data(), y_managed, y.storage.size());
    CHECK(compare_to_reference(y, reference_softmax(x, 1, false), false) == "");
}

#endif  // SMX_TEST_WITH_CUDA
