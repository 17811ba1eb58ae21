// [cuda][large] tensors of more than 2^31 elements, where any 32-bit offset arithmetic breaks.
// The input is a 64 MB random block copied over and over (fast to fill); results are checked on sampled
// rows against the float64 reference for those rows only. Skipped, with a warning, when the device has
// too little free memory.
#if SMX_TEST_WITH_CUDA

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "cuda_helpers.hpp"

using namespace smx_test;

namespace {

constexpr std::size_t kMinimumFreeBytes = std::size_t{10} << 30;
constexpr std::int64_t kTwoToThe31 = std::int64_t{1} << 31;
// 64 MB of f16, less 7 elements: odd, so the block's phase differs from row to row and a kernel that
// read the wrong row would read different data.
constexpr std::int64_t kBlockElements = (std::int64_t{1} << 25) - 7;

// Whether the device can hold `bytes` more; warns and returns false otherwise.
bool device_has_room(std::size_t bytes) {
    std::size_t free_bytes = 0, total_bytes = 0;
    SMX_REQUIRE_CUDA(cudaMemGetInfo(&free_bytes, &total_bytes));
    const std::size_t needed = std::max(kMinimumFreeBytes, bytes + (std::size_t{1} << 30));
    if (free_bytes < needed) {
        WARN("skipped: " << (free_bytes >> 20) << " MiB free on the device, " << (needed >> 20) << " MiB needed");
        return false;
    }
    return true;
}

// Fills `count` f16 elements at `device` with `block` repeated: one upload, then device-to-device copies.
void fill_with_block(void* device, std::int64_t count, const HostTensor& block) {
    const std::size_t element = dtype_size(block.dtype);
    const std::int64_t first = std::min(count, kBlockElements);
    SMX_REQUIRE_CUDA(cudaMemcpy(device, block.data(), first * element, cudaMemcpyHostToDevice));
    for (std::int64_t start = kBlockElements; start < count; start += kBlockElements) {
        const std::int64_t length = std::min(kBlockElements, count - start);
        SMX_REQUIRE_CUDA(cudaMemcpy(static_cast<unsigned char*>(device) + start * element, device, length * element,
                                    cudaMemcpyDeviceToDevice));
    }
}

// Copies `count` elements starting at element `first` of a device tensor into host tensor `host` at
// its element `host_first`.
void download_elements(HostTensor& host, std::int64_t host_first, const void* device, std::int64_t first,
                       std::int64_t count) {
    const std::size_t element = dtype_size(host.dtype);
    SMX_REQUIRE_CUDA(cudaMemcpy(static_cast<unsigned char*>(host.data()) + host_first * element,
                                static_cast<const unsigned char*>(device) + first * element, count * element,
                                cudaMemcpyDeviceToHost));
}

HostTensor random_block() {
    HostTensor block = make_tensor(SMX_DTYPE_F16, {kBlockElements});
    fill_random(block, test_rng());
    return block;
}

// Runs forward once on a (rows, row_len) f16 tensor held at x/y on the device; returns the plan text.
std::string run_large(smxHandle_t handle, std::int64_t rows, std::int64_t row_len, bool log_mode, void* y, const void* x) {
    TensorDesc x_desc(SMX_DTYPE_F16, {rows, row_len}, {}), y_desc(SMX_DTYPE_F16, {rows, row_len}, {});
    SoftmaxDesc desc(handle, log_mode ? SMX_LOG_SOFTMAX : SMX_SOFTMAX, 1, y_desc.desc, x_desc.desc);
    INFO(smxGetLastErrorMessage());
    REQUIRE(desc.status == SMX_STATUS_SUCCESS);
    const char* plan = nullptr;
    SMX_REQUIRE_OK(smxGetSoftmaxPlan(desc.desc, &plan));
    std::size_t workspace_bytes = 0;
    SMX_REQUIRE_OK(smxGetSoftmaxWorkspaceSize(desc.desc, &workspace_bytes));
    DeviceBuffer workspace(workspace_bytes);
    INFO("shape [" << rows << "," << row_len << "] f16 " << (log_mode ? "log-softmax" : "softmax") << " | plan: " << plan);
    SMX_REQUIRE_OK(smxSoftmaxForward(desc.desc, workspace.get(), workspace_bytes, y, x, nullptr));
    SMX_REQUIRE_CUDA(cudaDeviceSynchronize());
    return plan;
}

}  // namespace

TEST_CASE("cuda large: 1100000000 x 2 f16 along the last axis, rows sampled past element 2^31", "[cuda][large]") {
    const std::int64_t rows = 1100000000, row_len = 2;
    const std::int64_t numel = rows * row_len;
    REQUIRE(numel > kTwoToThe31);
    const std::size_t tensor_bytes = static_cast<std::size_t>(numel) * 2;
    if (!device_has_room(2 * tensor_bytes)) return;
    CudaHandle handle;
    DeviceBuffer x(tensor_bytes), y(tensor_bytes);
    fill_with_block(x.get(), numel, random_block());

    // First and last rows, the rows around element 2^31, and random rows: half anywhere, half past 2^31.
    const std::int64_t boundary_row = kTwoToThe31 / row_len;
    std::vector<std::int64_t> sampled = {0, 1, boundary_row - 1, boundary_row, boundary_row + 1, rows - 1};
    std::uniform_int_distribution<std::int64_t> anywhere(0, rows - 1), past_boundary(boundary_row, rows - 1);
    for (int i = 0; i < 500; ++i) {
        sampled.push_back(anywhere(test_rng()));
        sampled.push_back(past_boundary(test_rng()));
    }
    const std::int64_t count = static_cast<std::int64_t>(sampled.size());
    HostTensor x_rows = make_tensor(SMX_DTYPE_F16, {count, row_len});
    for (std::int64_t i = 0; i < count; ++i) download_elements(x_rows, i * row_len, x.get(), sampled[i] * row_len, row_len);

    for (bool log_mode : {false, true}) {
        SMX_REQUIRE_CUDA(cudaMemset(y.get(), 0xFF, tensor_bytes));
        const std::string plan = run_large(handle.get(), rows, row_len, log_mode, y.get(), x.get());
        HostTensor y_rows = make_tensor(SMX_DTYPE_F16, {count, row_len});
        for (std::int64_t i = 0; i < count; ++i) download_elements(y_rows, i * row_len, y.get(), sampled[i] * row_len, row_len);
        INFO((log_mode ? "log-softmax" : "softmax") << " over " << count << " sampled rows | plan: " << plan);
        // The warp kernel, on its 64-bit body: these row offsets pass INT_MAX.
        CHECK(kernel_kind(plan) == "warp");
        CHECK(plan_value(plan, "offsets") == 64);
        CHECK(compare_to_reference(y_rows, reference_softmax(x_rows, 1, log_mode), log_mode) == "");
    }
}

TEST_CASE("cuda large: 3 x 2^30 f16 along the last axis, elements sampled in every row", "[cuda][large]") {
    const std::int64_t rows = 3, row_len = std::int64_t{1} << 30;
    const std::int64_t numel = rows * row_len;
    const std::size_t tensor_bytes = static_cast<std::size_t>(numel) * 2;
    if (!device_has_room(2 * tensor_bytes)) return;
    CudaHandle handle;
    const HostTensor block = random_block();
    DeviceBuffer x(tensor_bytes), y(tensor_bytes);
    fill_with_block(x.get(), numel, block);

    // Each row covers the whole block row_len / B times plus a short tail, so its max is the block's
    // and its sum of exp follows from the block's sum and the tail: the float64 reference for these rows
    // without reading 2^30 elements back.
    double block_max = -std::numeric_limits<double>::infinity();
    for (std::int64_t i = 0; i < kBlockElements; ++i) block_max = std::max(block_max, block.get(i));
    double block_sum = 0.0;
    for (std::int64_t i = 0; i < kBlockElements; ++i) block_sum += std::exp(block.get(i) - block_max);
    const std::int64_t full_cycles = row_len / kBlockElements, tail = row_len % kBlockElements;
    REQUIRE(full_cycles >= 1);
    std::vector<double> row_sum(rows);
    for (std::int64_t r = 0; r < rows; ++r) {
        const std::int64_t phase = (r * row_len) % kBlockElements;
        row_sum[r] = full_cycles * block_sum;
        for (std::int64_t k = 0; k < tail; ++k) row_sum[r] += std::exp(block.get((phase + k) % kBlockElements) - block_max);
    }

    // Sampled positions in each row: both ends and random ones; row 2 lies wholly past element 2^31.
    std::vector<std::int64_t> sampled;  // flat element indices
    std::uniform_int_distribution<std::int64_t> position(0, row_len - 1);
    for (std::int64_t r = 0; r < rows; ++r) {
        for (std::int64_t j : {std::int64_t{0}, std::int64_t{1}, row_len - 2, row_len - 1}) sampled.push_back(r * row_len + j);
        for (int i = 0; i < 330; ++i) sampled.push_back(r * row_len + position(test_rng()));
    }
    const std::int64_t count = static_cast<std::int64_t>(sampled.size());
    HostTensor x_samples = make_tensor(SMX_DTYPE_F16, {count});
    for (std::int64_t i = 0; i < count; ++i) download_elements(x_samples, i, x.get(), sampled[i], 1);
    for (std::int64_t i = 0; i < count; ++i) {
        // The device holds what the reference assumes: the block, repeated.
        INFO("x element " << sampled[i]);
        REQUIRE(x_samples.get(i) == block.get(sampled[i] % kBlockElements));
    }

    for (bool log_mode : {false, true}) {
        SMX_REQUIRE_CUDA(cudaMemset(y.get(), 0xFF, tensor_bytes));
        run_large(handle.get(), rows, row_len, log_mode, y.get(), x.get());
        HostTensor y_samples = make_tensor(SMX_DTYPE_F16, {count});
        std::vector<double> expected(count);
        for (std::int64_t i = 0; i < count; ++i) {
            download_elements(y_samples, i, y.get(), sampled[i], 1);
            const double sum = row_sum[sampled[i] / row_len];
            const double shifted = x_samples.get(i) - block_max;
            expected[i] = log_mode ? shifted - std::log(sum) : std::exp(shifted) / sum;
        }
        INFO((log_mode ? "log-softmax" : "softmax") << " over " << count << " sampled elements");
        CHECK(compare_to_reference(y_samples, expected, log_mode) == "");
    }
}

#endif  // SMX_TEST_WITH_CUDA
