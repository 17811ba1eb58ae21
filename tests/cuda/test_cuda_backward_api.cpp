// [cuda] the backward's entry point on a CUDA handle: the checks smxSoftmaxBackward makes before it launches
// (which operand is not memory of the handle's device, alignment, overlap), and that a refused call leaves
// the next valid one computing the right answer. The kernels themselves are tested in the backward's own
// [cuda] files.
#if SMX_TEST_WITH_CUDA

#include <string>

#include "cuda_helpers.hpp"

using Catch::Matchers::Contains;
using namespace smx_test;

namespace {

// A 4 x 100 f32 softmax backward: dy and y (the forward's output of random x) on the host and the device,
// dx on both, and their tensor descriptors.
struct SmallBackward {
    HostTensor dy = make_tensor(SMX_DTYPE_F32, {4, 100});
    HostTensor y = make_tensor(SMX_DTYPE_F32, {4, 100});
    HostTensor dx = make_tensor(SMX_DTYPE_F32, {4, 100});
    DeviceTensor dy_device{dy};
    DeviceTensor y_device{y};
    DeviceTensor dx_device{dx};
    TensorDesc desc_of_all{dx};  // one row-major f32 (4, 100) layout serves dx, dy and y

    SmallBackward() {
        HostTensor x = make_tensor(SMX_DTYPE_F64, {4, 100});
        fill_random(x, test_rng());
        const std::vector<double> forward = reference_softmax(x, 1, false);
        const std::vector<std::int64_t> offsets = logical_offsets(y);
        for (std::size_t i = 0; i < offsets.size(); ++i) y.set(offsets[i], forward[i]);
        fill_random(dy, test_rng());
        dy_device.upload(dy);
        y_device.upload(y);
    }
    // dx_device, poisoned before `backward` runs on the device, against the float64 reference.
    template <class Backward>
    std::string run_and_compare(const Backward& backward) {
        dx_device.poison();
        backward();
        SMX_REQUIRE_CUDA(cudaDeviceSynchronize());
        dx_device.download(dx);
        return compare_backward_to_reference(dx, reference_softmax_backward(dy, y, 1, false), 0.0);
    }
};

}  // namespace

TEST_CASE("cuda backward: a host pointer for dy, y or dx is refused as the wrong device, naming it", "[cuda]") {
    CudaHandle handle;
    SmallBackward c;
    SoftmaxBackwardDesc desc(handle.get(), SMX_SOFTMAX, 1, c.desc_of_all.desc, c.desc_of_all.desc, c.desc_of_all.desc);
    REQUIRE(desc.status == SMX_STATUS_SUCCESS);
    std::size_t workspace_bytes = 0;
    SMX_REQUIRE_OK(smxGetSoftmaxBackwardWorkspaceSize(desc.desc, &workspace_bytes));
    DeviceBuffer workspace(workspace_bytes);
    const auto backward = [&](void* dx, const void* dy, const void* y) {
        return smxSoftmaxBackward(desc.desc, workspace.get(), workspace_bytes, dx, dy, y, nullptr);
    };
    CHECK(backward(c.dx_device.data(), c.dy.data(), c.y_device.data()) == SMX_STATUS_BAD_PARAM_DEVICE);
    CHECK_THAT(smxGetLastErrorMessage(), Contains("dy pointer"));
    CHECK(backward(c.dx_device.data(), c.dy_device.data(), c.y.data()) == SMX_STATUS_BAD_PARAM_DEVICE);
    CHECK_THAT(smxGetLastErrorMessage(), Contains("y pointer") && !Contains("dy pointer"));
    CHECK(backward(c.dx.data(), c.dy_device.data(), c.y_device.data()) == SMX_STATUS_BAD_PARAM_DEVICE);
    CHECK_THAT(smxGetLastErrorMessage(), Contains("dx pointer"));
    // The refused calls launched nothing: a valid call afterwards computes the right answer.
    CHECK(c.run_and_compare([&] { SMX_REQUIRE_OK(backward(c.dx_device.data(), c.dy_device.data(), c.y_device.data())); }) ==
          "");
}

TEST_CASE("cuda backward: with device-pointer checks off, later descriptors skip the query and compute the same",
          "[cuda]") {
    CudaHandle handle;
    SmallBackward c;
    const smxTensorDescriptor_t t = c.desc_of_all.desc;
    SoftmaxBackwardDesc checked(handle.get(), SMX_SOFTMAX, 1, t, t, t);
    REQUIRE(checked.status == SMX_STATUS_SUCCESS);
    SMX_REQUIRE_OK(smxSetDevicePointerChecks(handle.get(), 0));
    SoftmaxBackwardDesc unchecked(handle.get(), SMX_SOFTMAX, 1, t, t, t);
    REQUIRE(unchecked.status == SMX_STATUS_SUCCESS);
    std::size_t workspace_bytes = 0;
    SMX_REQUIRE_OK(smxGetSoftmaxBackwardWorkspaceSize(unchecked.desc, &workspace_bytes));
    DeviceBuffer workspace(workspace_bytes);
    // The descriptor made before keeps its checks: a host dy is still refused.
    CHECK(smxSoftmaxBackward(checked.desc, workspace.get(), workspace_bytes, c.dx_device.data(), c.dy.data(),
                             c.y_device.data(), nullptr) == SMX_STATUS_BAD_PARAM_DEVICE);
    CHECK(c.run_and_compare([&] {
        SMX_REQUIRE_OK(smxSoftmaxBackward(unchecked.desc, workspace.get(), workspace_bytes, c.dx_device.data(),
                                          c.dy_device.data(), c.y_device.data(), nullptr));
    }) == "");
}

TEST_CASE("cuda backward: misaligned device pointers and dx over y are refused before any launch", "[cuda]") {
    CudaHandle handle;
    SmallBackward c;
    const smxTensorDescriptor_t t = c.desc_of_all.desc;
    SoftmaxBackwardDesc desc(handle.get(), SMX_LOG_SOFTMAX, 1, t, t, t);
    REQUIRE(desc.status == SMX_STATUS_SUCCESS);
    std::size_t workspace_bytes = 0;
    SMX_REQUIRE_OK(smxGetSoftmaxBackwardWorkspaceSize(desc.desc, &workspace_bytes));
    DeviceBuffer workspace(workspace_bytes), spare(4 * 100 * sizeof(float) + 16);
    auto* odd = static_cast<unsigned char*>(spare.get()) + 2;  // misaligned for f32
    CHECK(smxSoftmaxBackward(desc.desc, workspace.get(), workspace_bytes, odd, c.dy_device.data(), c.y_device.data(),
                             nullptr) == SMX_STATUS_BAD_PARAM_ALIGNMENT);
    CHECK_THAT(smxGetLastErrorMessage(), Contains("dx pointer"));
    CHECK(smxSoftmaxBackward(desc.desc, workspace.get(), workspace_bytes, c.y_device.data(), c.dy_device.data(),
                             c.y_device.data(), nullptr) == SMX_STATUS_BAD_PARAM_OVERLAP);
    CHECK_THAT(smxGetLastErrorMessage(), Contains("may not share any memory"));
}

#endif  // SMX_TEST_WITH_CUDA
