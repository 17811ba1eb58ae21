// cuda_helpers.cpp - the [cuda] tests' device plumbing (see cuda_helpers.hpp).
#include "cuda_helpers.hpp"

#if SMX_TEST_WITH_CUDA

#include <sstream>
#include <utility>

namespace smx_test {

DeviceBuffer::DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
    // cudaMalloc(0) may hand back NULL; one byte keeps every buffer a real device address.
    SMX_REQUIRE_CUDA(cudaMalloc(&pointer_, bytes == 0 ? 1 : bytes));
}

DeviceBuffer::~DeviceBuffer() {
    if (pointer_ != nullptr) cudaFree(pointer_);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : pointer_(std::exchange(other.pointer_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
        if (pointer_ != nullptr) cudaFree(pointer_);
        pointer_ = std::exchange(other.pointer_, nullptr);
        bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
}

DeviceTensor::DeviceTensor(const HostTensor& host)
    : buffer_(host.storage.size()), first_element_byte_(static_cast<std::size_t>(host.offset) * dtype_size(host.dtype)) {}

void* DeviceTensor::data() const { return static_cast<unsigned char*>(buffer_.get()) + first_element_byte_; }

void DeviceTensor::upload(const HostTensor& host) {
    REQUIRE(host.storage.size() == buffer_.bytes());
    SMX_REQUIRE_CUDA(cudaMemcpy(buffer_.get(), host.storage.data(), host.storage.size(), cudaMemcpyHostToDevice));
}

void DeviceTensor::download(HostTensor& host) const {
    REQUIRE(host.storage.size() == buffer_.bytes());
    SMX_REQUIRE_CUDA(cudaMemcpy(host.storage.data(), buffer_.get(), host.storage.size(), cudaMemcpyDeviceToHost));
}

void DeviceTensor::poison() {
    SMX_REQUIRE_CUDA(cudaMemset(buffer_.get(), 0xFF, buffer_.bytes()));
    SMX_REQUIRE_CUDA(cudaDeviceSynchronize());
}

DeviceStream::DeviceStream() { SMX_REQUIRE_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }

DeviceStream::~DeviceStream() {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

CudaHandle::CudaHandle() {
    INFO("smxCreate(CUDA, 0): " << smxGetStatusString(handle_.status) << ": " << smxGetLastErrorMessage());
    REQUIRE(handle_.status == SMX_STATUS_SUCCESS);
}

DeviceRun run_on_device(smxHandle_t handle, const HostTensor& y, void* y_device, const HostTensor& x,
                        const void* x_device, int axis, bool log_mode, cudaStream_t stream) {
    DeviceRun result;
    TensorDesc x_desc(x), y_desc(y);
    REQUIRE(x_desc.desc != nullptr);
    REQUIRE(y_desc.desc != nullptr);
    SoftmaxDesc desc(handle, log_mode ? SMX_LOG_SOFTMAX : SMX_SOFTMAX, axis, y_desc.desc, x_desc.desc);
    if (desc.status != SMX_STATUS_SUCCESS) {
        result.status = desc.status;
        result.error = smxGetLastErrorMessage();
        return result;
    }
    const char* plan = nullptr;
    SMX_REQUIRE_OK(smxGetSoftmaxPlan(desc.desc, &plan));
    REQUIRE(plan != nullptr);
    result.plan = plan;
    SMX_REQUIRE_OK(smxGetSoftmaxWorkspaceSize(desc.desc, &result.workspace_bytes));
    DeviceBuffer workspace(result.workspace_bytes);
    result.status = smxSoftmaxForward(desc.desc, workspace.get(), result.workspace_bytes, y_device, x_device, stream);
    if (result.status != SMX_STATUS_SUCCESS) {
        result.error = smxGetLastErrorMessage();
        return result;
    }
    SMX_REQUIRE_CUDA(cudaStreamSynchronize(stream));
    SMX_REQUIRE_CUDA(cudaGetLastError());
    return result;
}

namespace {

std::string failure_text(const DeviceRun& run) {
    return std::string("smx failed: ") + smxGetStatusString(run.status) + ": " + run.error;
}

}  // namespace

std::string check_on_device(smxHandle_t handle, HostTensor& y, const HostTensor& x, int axis, bool log_mode,
                            std::string* plan) {
    DeviceTensor x_device(x), y_device(y);
    x_device.upload(x);
    y_device.poison();
    const DeviceRun run = run_on_device(handle, y, y_device.data(), x, x_device.data(), axis, log_mode);
    if (plan != nullptr) *plan = run.plan;
    if (run.status != SMX_STATUS_SUCCESS) return failure_text(run);
    y_device.download(y);
    return compare_to_reference(y, reference_softmax(x, axis, log_mode), log_mode);
}

std::string check_in_place_on_device(smxHandle_t handle, HostTensor& x_then_y, int axis, bool log_mode,
                                     std::string* plan) {
    const std::vector<double> expected = reference_softmax(x_then_y, axis, log_mode);
    DeviceTensor data(x_then_y);
    data.upload(x_then_y);
    const DeviceRun run = run_on_device(handle, x_then_y, data.data(), x_then_y, data.data(), axis, log_mode);
    if (plan != nullptr) *plan = run.plan;
    if (run.status != SMX_STATUS_SUCCESS) return failure_text(run);
    poison(x_then_y);  // what comes back must be the device's output, not the host's input
    data.download(x_then_y);
    return compare_to_reference(x_then_y, expected, log_mode);
}

std::string check_random_rows(smxHandle_t handle, smxDataType_t x_dtype, smxDataType_t y_dtype, std::int64_t rows,
                              std::int64_t row_len, bool log_mode) {
    HostTensor x = make_tensor(x_dtype, {rows, row_len});
    HostTensor y = make_tensor(y_dtype, {rows, row_len});
    fill_random(x, test_rng());
    std::string plan;
    const std::string mismatch = check_on_device(handle, y, x, 1, log_mode, &plan);
    INFO(describe_case(y, x, 1, log_mode) << " | plan: " << plan);
    CHECK(mismatch == "");
    return plan;
}

std::string kernel_kind(const std::string& plan) {
    const std::string prefix = "cuda ";
    if (plan.compare(0, prefix.size(), prefix) != 0) return "";
    const std::size_t end = plan.find(' ', prefix.size());
    return plan.substr(prefix.size(), end == std::string::npos ? std::string::npos : end - prefix.size());
}

std::string plan_for_rows(smxHandle_t handle, smxDataType_t x_dtype, smxDataType_t y_dtype, std::int64_t rows,
                          std::int64_t row_len) {
    TensorDesc x_desc(x_dtype, {rows, row_len}, {row_len, 1});
    TensorDesc y_desc(y_dtype, {rows, row_len}, {row_len, 1});
    SoftmaxDesc desc(handle, SMX_SOFTMAX, 1, y_desc.desc, x_desc.desc);
    SMX_REQUIRE_OK(desc.status);
    const char* plan = nullptr;
    SMX_REQUIRE_OK(smxGetSoftmaxPlan(desc.desc, &plan));
    return plan;
}

std::int64_t plan_value(const std::string& plan, const std::string& key) {
    const std::string needle = " " + key + "=";
    const std::size_t at = plan.find(needle);
    if (at == std::string::npos) return -1;
    return std::stoll(plan.substr(at + needle.size()));
}

namespace {

std::string join(const std::vector<std::int64_t>& values) {
    std::ostringstream text;
    text << '[';
    for (std::size_t i = 0; i < values.size(); ++i) text << (i ? "," : "") << values[i];
    text << ']';
    return text.str();
}

}  // namespace

std::string describe_case(const HostTensor& y, const HostTensor& x, int axis, bool log_mode) {
    std::ostringstream text;
    text << dtype_name(x.dtype) << "->" << dtype_name(y.dtype) << (log_mode ? " log-softmax" : " softmax")
         << " shape " << join(x.shape) << " x strides " << join(x.strides) << " (front " << x.offset << ")"
         << " y strides " << join(y.strides) << " (front " << y.offset << ") axis " << axis;
    return text.str();
}

int multiprocessor_count() {
    int device = 0, count = 0;
    SMX_REQUIRE_CUDA(cudaGetDevice(&device));
    SMX_REQUIRE_CUDA(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device));
    return count;
}

}  // namespace smx_test

#endif  // SMX_TEST_WITH_CUDA
