// smx_torch.cpp - the CPU, CUDA and Autograd kernels of torch.ops.smx.* (softmax, log_softmax and their
// backward operators; logsumexp, log_softmax_gather and cross_entropy), built by smx/torch.py on first use
// against the installed torch (torch.utils.cpp_extension.load) and loaded with torch.ops.load_library.
//
// The schemas, fake kernels and error translation live in smx/torch.py; this file holds what runs per call.
// It calls libsmx through function pointers handed over by the ctypes binding (smx_torch_bind), so it uses
// the very libsmx smx/_lib.py loaded, and it needs no CUDA headers: the current stream comes from c10's
// device guard interface. Descriptors are cached per problem, as the ctypes binding caches them.
//
// Built with SMX_TORCH_PYTHON (where the Python headers are), it is also a Python module whose functions
// call the same operators through the dispatcher's unboxed entry, as torch's own bindings call theirs:
// smx.softmax takes them in eager mode (end of file).

#include <ATen/EmptyTensor.h>
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/aminmax.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/GradMode.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/core/WrapDimMinimal.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

#ifdef SMX_TORCH_PYTHON
#include <ATen/PythonTorchFunctionTLS.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>
#endif

#include <array>
#include <cstdint>
#include <cstring>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace {

// ------------------------------------------------------------------------------------------------------
// libsmx's C API (include/smx/smx.h), declared here as the ctypes binding declares it: the package ships
// without the headers, and the ABI these signatures describe is stable.

using Status = int;
enum : int { kDeviceCpu = 1, kDeviceCuda = 2 };                       // smxDeviceType_t
enum : int { kF16 = 1, kBF16 = 2, kF32 = 3, kF64 = 4 };                // smxDataType_t
enum : int { kSoftmax = 1, kLogSoftmax = 2 };                          // smxSoftmaxMode_t
constexpr int kBackwardOperation = 10;  // cache keys: 1, 2 the forward modes; 11, 12 the backward ones
constexpr int kMaxDims = 8;                                            // SMX_MAX_DIMS
constexpr std::size_t kWorkspaceAlignment = 256;                       // the binding's, above smx.h's 16

struct Api {
    const char* (*smxGetStatusString)(Status) = nullptr;
    const char* (*smxGetLastErrorMessage)() = nullptr;
    Status (*smxCreate)(void**, int, int) = nullptr;
    Status (*smxDestroy)(void*) = nullptr;
    Status (*smxCreateTensorDescriptor)(void**, int, int, const int64_t*, const int64_t*) = nullptr;
    Status (*smxDestroyTensorDescriptor)(void*) = nullptr;
    Status (*smxCreateSoftmaxDescriptor)(void*, void**, int, int, void*, void*) = nullptr;
    Status (*smxGetSoftmaxWorkspaceSize)(void*, std::size_t*) = nullptr;
    Status (*smxSoftmaxForward)(void*, void*, std::size_t, void*, const void*, void*) = nullptr;
    Status (*smxDestroySoftmaxDescriptor)(void*) = nullptr;
    Status (*smxSetDevicePointerChecks)(void*, int) = nullptr;
    Status (*smxCreateSoftmaxBackwardDescriptor)(void*, void**, int, int, void*, void*, void*) = nullptr;
    Status (*smxGetSoftmaxBackwardWorkspaceSize)(void*, std::size_t*) = nullptr;
    Status (*smxSoftmaxBackward)(void*, void*, std::size_t, void*, const void*, const void*, void*) = nullptr;
    Status (*smxDestroySoftmaxBackwardDescriptor)(void*) = nullptr;
};

Api api;
bool api_bound = false;

// Raises the torch exception of a failed libsmx call's category (the ctypes binding's SmxError classes,
// smx/_errors.py); smx/torch.py turns it back into that class from the "[NAME] (smx status N)" tail.
[[noreturn]] void raise_status(Status status, const std::string& detail) {
    const char* name = api.smxGetStatusString(status);
    // Numbers through std::to_string, not a stream: on the H200's image a stream's number formatting crashed
    // (SIGSEGV in basic_ostream::_M_insert<long>) once CuPy's and torch's libraries shared the process.
    const std::string message = (detail.empty() ? std::string(name) : detail) + " [" + name + "] (smx status " +
                                std::to_string(status) + ")";
    if (status >= 2000 && status < 3000) TORCH_CHECK_VALUE(false, message);
    if (status == 3003) TORCH_CHECK_TYPE(false, message);
    if (status >= 3000 && status < 4000) TORCH_CHECK_NOT_IMPLEMENTED(false, message);
    TORCH_CHECK(false, message);
}

std::string last_error() {
    const char* message = api.smxGetLastErrorMessage();
    return message ? message : "";
}

void check(Status status) {
    if (status != 0) raise_status(status, last_error());
}

// ------------------------------------------------------------------------------------------------------
// Handles (one per device) and descriptors (an LRU keyed by the whole problem), shared by all threads.

struct Handle {
    void* pointer = nullptr;
    ~Handle() {
        if (pointer) api.smxDestroy(pointer);
    }
};

// A descriptor of any smx operation: its destroy function comes with it, so one cache serves them all.
struct Descriptor {
    void* pointer = nullptr;
    std::size_t workspace_bytes = 0;
    Status (*destroy)(void*) = nullptr;
    std::shared_ptr<Handle> handle;  // destroyed after the descriptor, as smx.h requires
    ~Descriptor() {
        if (pointer) destroy(pointer);
    }
};

// Everything that decides a descriptor, as integers: operation, device, axis, dtypes, shape, strides.
struct ProblemKey {
    std::array<int64_t, 8 + 4 * kMaxDims> words{};
    std::size_t size = 0;
    void add(int64_t word) { words[size++] = word; }
    bool operator==(const ProblemKey& other) const {
        if (size != other.size) return false;
        for (std::size_t i = 0; i < size; ++i)
            if (words[i] != other.words[i]) return false;
        return true;
    }
};

struct ProblemKeyHash {
    std::size_t operator()(const ProblemKey& key) const {
        uint64_t hash = 1469598103934665603ull;  // FNV-1a over the words
        for (std::size_t i = 0; i < key.size; ++i) {
            hash ^= static_cast<uint64_t>(key.words[i]);
            hash *= 1099511628211ull;
        }
        return static_cast<std::size_t>(hash);
    }
};

constexpr std::size_t kMaxDescriptors = 256;  // as the ctypes binding's cache (smx/_cache.py)

class Cache {
public:
    std::shared_ptr<Descriptor> find(const ProblemKey& key) {
        std::lock_guard<std::mutex> lock(mutex_);
        auto found = index_.find(key);
        if (found == index_.end()) {
            ++misses_;
            return nullptr;
        }
        ++hits_;
        order_.splice(order_.begin(), order_, found->second);
        return found->second->second;
    }

    // Inserts a descriptor made outside the lock; a racing thread's entry for the same key wins.
    std::shared_ptr<Descriptor> insert(const ProblemKey& key, std::shared_ptr<Descriptor> made) {
        std::shared_ptr<Descriptor> evicted;  // destroyed after the lock is released
        std::lock_guard<std::mutex> lock(mutex_);
        auto found = index_.find(key);
        if (found != index_.end()) return found->second->second;
        order_.emplace_front(key, made);
        index_.emplace(key, order_.begin());
        if (order_.size() > kMaxDescriptors) {
            evicted = std::move(order_.back().second);
            index_.erase(order_.back().first);
            order_.pop_back();
        }
        return made;
    }

    // Created outside the lock too: libsmx logs while creating, and a log callback may call smx again.
    std::shared_ptr<Handle> handle(int device_type, int device_index) {
        const int64_t slot = device_type * 1024 + device_index;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            auto found = handles_.find(slot);
            if (found != handles_.end()) return found->second;
        }
        auto made = std::make_shared<Handle>();
        check(api.smxCreate(&made->pointer, device_type, device_index));
        // Every tensor reaching a CUDA handle is already one of torch's on that device (the operators check
        // the device), so libsmx's per-call pointer queries would only repeat it, at ~1 us each.
        if (device_type == kDeviceCuda) check(api.smxSetDevicePointerChecks(made->pointer, 0));
        std::lock_guard<std::mutex> lock(mutex_);
        return handles_.emplace(slot, std::move(made)).first->second;
    }

    std::array<int64_t, 4> info() {
        std::lock_guard<std::mutex> lock(mutex_);
        return {hits_, misses_, static_cast<int64_t>(order_.size()), static_cast<int64_t>(handles_.size())};
    }

    // Drops everything; descriptors a running call still holds are destroyed when it lets go of them.
    void clear() {
        std::list<std::pair<ProblemKey, std::shared_ptr<Descriptor>>> order;
        std::unordered_map<int64_t, std::shared_ptr<Handle>> handles;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            order.swap(order_);
            handles.swap(handles_);
            index_.clear();
            hits_ = misses_ = 0;
        }
    }

private:
    std::mutex mutex_;
    std::list<std::pair<ProblemKey, std::shared_ptr<Descriptor>>> order_;  // most recently used first
    std::unordered_map<ProblemKey, decltype(order_)::iterator, ProblemKeyHash> index_;
    std::unordered_map<int64_t, std::shared_ptr<Handle>> handles_;
    int64_t hits_ = 0, misses_ = 0;
};

// Never destroyed: at process exit libsmx or the CUDA runtime may be gone before static destructors run;
// smx/torch.py empties it at interpreter exit instead (smx_torch_release).
Cache& cache = *new Cache();

// ------------------------------------------------------------------------------------------------------
// Tensors as libsmx sees them.

int dtype_code(at::ScalarType type) {
    switch (type) {
        case at::kHalf: return kF16;
        case at::kBFloat16: return kBF16;
        case at::kFloat: return kF32;
        case at::kDouble: return kF64;
        default: return 0;
    }
}

// A dtype as Python spells it (torch.int64 -> "int64"), so messages read as the fake kernels' do.
std::string dtype_name(at::ScalarType type) {
    switch (type) {
        case at::kHalf: return "float16";
        case at::kBFloat16: return "bfloat16";
        case at::kFloat: return "float32";
        case at::kDouble: return "float64";
        case at::kByte: return "uint8";
        case at::kChar: return "int8";
        case at::kShort: return "int16";
        case at::kInt: return "int32";
        case at::kLong: return "int64";
        case at::kBool: return "bool";
        case at::kComplexHalf: return "complex32";
        case at::kComplexFloat: return "complex64";
        case at::kComplexDouble: return "complex128";
        default: return c10::toString(type);
    }
}

void check_dtype(at::ScalarType type) {
    TORCH_CHECK_TYPE(dtype_code(type) != 0, "smx supports float16, bfloat16, float32 and float64; got dtype ",
                     dtype_name(type));
}

void check_input(const at::Tensor& x) {
    TORCH_CHECK_TYPE(x.layout() == at::kStrided, "smx needs a strided (dense) tensor; got layout ", x.layout());
    check_dtype(x.scalar_type());
}

// As the ctypes binding names devices: "cpu:0", "cuda:1".
std::string device_name(const at::Device& device) {
    return std::string(device.is_cpu() ? "cpu" : c10::DeviceTypeName(device.type(), true)) + ":" +
           std::to_string(device.is_cpu() ? 0 : device.index());
}

std::string shape_text(at::IntArrayRef shape) {  // as Python prints a tuple
    std::string text = "(";
    for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
    text += shape.size() == 1 ? ",)" : ")";
    return text;
}

// What libsmx would refuse, refused before a Layout (kMaxDims entries) is filled from the tensor.
void check_ndim(const at::Tensor& t) {
    if (t.dim() > kMaxDims) {
        raise_status(2003, "ndim " + std::to_string(t.dim()) + " out of range: a tensor has 1 to " +
                               std::to_string(kMaxDims) + " dimensions");  // SMX_STATUS_BAD_PARAM_NDIM
    }
}

// Shape and strides for a descriptor: a 0-d tensor is one element along one axis; a tensor with no
// elements gets row-major strides (any are valid there; these keep one cache entry per empty shape). More
// than kMaxDims dims are refused as libsmx refuses them (check_ndim).
struct Layout {
    int ndim = 0;
    std::array<int64_t, kMaxDims> shape{}, strides{};
};

Layout layout_of(const at::Tensor& t) {
    check_ndim(t);  // before the kMaxDims entries are filled
    Layout layout;
    if (t.dim() == 0) {
        layout.ndim = 1;
        layout.shape[0] = layout.strides[0] = 1;
        return layout;
    }
    layout.ndim = static_cast<int>(t.dim());
    const bool empty = t.numel() == 0;
    int64_t step = 1;
    for (int i = layout.ndim - 1; i >= 0; --i) {
        layout.shape[i] = t.size(i);
        layout.strides[i] = empty ? step : t.stride(i);
        step *= std::max<int64_t>(t.size(i), 1);
    }
    return layout;
}

// libsmx's device type and index for a tensor's device; refuses devices other than CPU and CUDA.
std::pair<int, int> smx_device(const at::Device& device) {
    if (device.is_cpu()) return {kDeviceCpu, 0};
    TORCH_CHECK_TYPE(device.is_cuda(), "smx runs on CPU and CUDA devices; this tensor is on ", device_name(device));
    return {kDeviceCuda, device.index()};
}

// torch's current stream on a CUDA device, as a cudaStream_t; nullptr on the CPU.
void* current_stream(const at::Device& device) {
    if (!device.is_cuda()) return nullptr;
    const c10::impl::DeviceGuardImplInterface* cuda = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA);
    return cuda->getStreamNativeHandle(cuda->getStream(device));
}

// The allocator torch's factory functions use on a device (the kernels run on CPU and CUDA only): the CPU one,
// or the CUDA one as torch's first CUDA allocation fixed it (a pluggable allocator can only be swapped in
// before that; c10::GetAllocator would still name the native one), read once from a tensor at::empty made.
c10::Allocator* allocator_of(const at::Device& device) {
    if (device.is_cpu()) return c10::GetAllocator(c10::DeviceType::CPU);
    TORCH_INTERNAL_ASSERT(device.is_cuda(), "smx's kernels run on CPU and CUDA tensors only");
    static c10::Allocator* const cuda_allocator =
        at::empty({0}, at::TensorOptions(device).dtype(at::kByte)).storage().allocator();
    return cuda_allocator;
}

// A tensor made as torch's own kernels make their outputs (at::detail::empty_strided_cpu and _cuda): straight
// from the device's allocator (on a GPU the caching one, ordered on the current stream), without a call
// through the dispatcher. Its contents are undefined.
at::Tensor empty_strided_on(const at::Device& device, at::IntArrayRef sizes, at::IntArrayRef strides,
                            at::ScalarType dtype) {
    const c10::DeviceGuard on_device(device);  // the CUDA allocator serves the current device
    const c10::DispatchKeySet backend(c10::computeDispatchKey(dtype, at::kStrided, device));
    return at::detail::empty_strided_generic(sizes, strides, allocator_of(device), backend, dtype);
}

// `bytes` of workspace on `device` from torch's allocator there (as empty_strided_on), aligned for libsmx;
// none when `bytes` is 0. `owner` keeps it for the call.
void* allocate_workspace(std::size_t bytes, const at::Device& device, c10::DataPtr* owner) {
    if (bytes == 0) return nullptr;
    const c10::DeviceGuard on_device(device);
    *owner = allocator_of(device)->allocate(bytes + kWorkspaceAlignment - 1);
    const auto address = reinterpret_cast<uintptr_t>(owner->get());
    return reinterpret_cast<void*>((address + kWorkspaceAlignment - 1) / kWorkspaceAlignment * kWorkspaceAlignment);
}

std::shared_ptr<Descriptor> make_softmax_descriptor(const std::shared_ptr<Handle>& handle, int mode, int axis,
                                                    const Layout& x, int x_dtype, const Layout& y, int y_dtype) {
    void* x_desc = nullptr;
    void* y_desc = nullptr;
    auto destroy_tensor_descriptors = [&] {
        api.smxDestroyTensorDescriptor(y_desc);
        api.smxDestroyTensorDescriptor(x_desc);
    };
    auto made = std::make_shared<Descriptor>();
    made->destroy = api.smxDestroySoftmaxDescriptor;
    made->handle = handle;
    Status status = api.smxCreateTensorDescriptor(&x_desc, x_dtype, x.ndim, x.shape.data(), x.strides.data());
    if (status == 0)
        status = api.smxCreateTensorDescriptor(&y_desc, y_dtype, y.ndim, y.shape.data(), y.strides.data());
    if (status == 0)
        status = api.smxCreateSoftmaxDescriptor(handle->pointer, &made->pointer, mode, axis, y_desc, x_desc);
    if (status == 0) status = api.smxGetSoftmaxWorkspaceSize(made->pointer, &made->workspace_bytes);
    if (status != 0) {
        const std::string detail = last_error();  // read before the cleanup calls, which may reset it
        destroy_tensor_descriptors();
        raise_status(status, detail);
    }
    destroy_tensor_descriptors();
    return made;
}

// y = softmax(x) or log-softmax along dim, on x's device and (CUDA) torch's current stream there.
void run_softmax(int mode, const at::Tensor& x, int64_t dim, const at::Tensor& y) {
    TORCH_CHECK(api_bound, "smx's torch extension is not bound to libsmx (import smx.torch binds it)");
    const int axis = static_cast<int>(c10::maybe_wrap_dim(dim, x.dim()));
    const auto [device_type, device_index] = smx_device(x.device());
    const int x_dtype = dtype_code(x.scalar_type()), y_dtype = dtype_code(y.scalar_type());
    const Layout x_layout = layout_of(x), y_layout = layout_of(y);

    ProblemKey key;
    key.add(mode);  // 1 and 2: the softmax family; other operations take other numbers
    key.add(device_type * 1024 + device_index);
    key.add(axis);
    key.add(x_dtype * 16 + y_dtype);
    key.add(x_layout.ndim);
    for (int i = 0; i < x_layout.ndim; ++i) {
        key.add(x_layout.shape[i]);
        key.add(x_layout.strides[i]);
        key.add(y_layout.strides[i]);
    }
    std::shared_ptr<Descriptor> descriptor = cache.find(key);
    if (!descriptor) {
        auto handle = cache.handle(device_type, device_index);
        descriptor = make_softmax_descriptor(handle, mode, axis, x_layout, x_dtype, y_layout, y_dtype);
        descriptor = cache.insert(key, std::move(descriptor));
    }
    c10::DataPtr workspace;
    void* workspace_pointer = allocate_workspace(descriptor->workspace_bytes, x.device(), &workspace);
    check(api.smxSoftmaxForward(descriptor->pointer, workspace_pointer, descriptor->workspace_bytes, y.data_ptr(),
                                x.const_data_ptr(), current_stream(x.device())));
}

std::shared_ptr<Descriptor> make_softmax_backward_descriptor(const std::shared_ptr<Handle>& handle, int mode, int axis,
                                                             const std::array<const Layout*, 3>& layouts,
                                                             const std::array<int, 3>& dtypes) {
    std::array<void*, 3> tensors{};  // dx, dy, y
    auto made = std::make_shared<Descriptor>();
    made->destroy = api.smxDestroySoftmaxBackwardDescriptor;
    made->handle = handle;
    Status status = 0;
    for (std::size_t i = 0; i < tensors.size() && status == 0; ++i) {
        status = api.smxCreateTensorDescriptor(&tensors[i], dtypes[i], layouts[i]->ndim, layouts[i]->shape.data(),
                                               layouts[i]->strides.data());
    }
    if (status == 0) {
        status = api.smxCreateSoftmaxBackwardDescriptor(handle->pointer, &made->pointer, mode, axis, tensors[0],
                                                        tensors[1], tensors[2]);
    }
    if (status == 0) status = api.smxGetSoftmaxBackwardWorkspaceSize(made->pointer, &made->workspace_bytes);
    const std::string detail = status != 0 ? last_error() : std::string();  // before the cleanup calls reset it
    for (void* tensor : tensors) api.smxDestroyTensorDescriptor(tensor);
    if (status != 0) raise_status(status, detail);
    return made;
}

// dx = the softmax (mode 1) or log-softmax (2) backward of (dy, y) along dim, on y's device and (CUDA) torch's
// current stream there. The tensors are checked to share y's device (check_backward_inputs).
void run_softmax_backward(int mode, const at::Tensor& dy, const at::Tensor& y, int64_t dim, const at::Tensor& dx) {
    TORCH_CHECK(api_bound, "smx's torch extension is not bound to libsmx (import smx.torch binds it)");
    const int axis = static_cast<int>(c10::maybe_wrap_dim(dim, y.dim()));
    const auto [device_type, device_index] = smx_device(y.device());
    const std::array<int, 3> dtypes = {dtype_code(dx.scalar_type()), dtype_code(dy.scalar_type()),
                                       dtype_code(y.scalar_type())};
    const Layout dx_layout = layout_of(dx), dy_layout = layout_of(dy), y_layout = layout_of(y);

    ProblemKey key;
    key.add(kBackwardOperation + mode);
    key.add(device_type * 1024 + device_index);
    key.add(axis);
    key.add(dtypes[0] * 256 + dtypes[1] * 16 + dtypes[2]);
    key.add(y_layout.ndim);
    for (int i = 0; i < y_layout.ndim; ++i) {
        key.add(y_layout.shape[i]);
        key.add(dx_layout.strides[i]);
        key.add(dy_layout.strides[i]);
        key.add(y_layout.strides[i]);
    }
    std::shared_ptr<Descriptor> descriptor = cache.find(key);
    if (!descriptor) {
        descriptor = make_softmax_backward_descriptor(cache.handle(device_type, device_index), mode, axis,
                                                      {&dx_layout, &dy_layout, &y_layout}, dtypes);
        descriptor = cache.insert(key, std::move(descriptor));
    }
    c10::DataPtr workspace;
    void* workspace_pointer = allocate_workspace(descriptor->workspace_bytes, y.device(), &workspace);
    check(api.smxSoftmaxBackward(descriptor->pointer, workspace_pointer, descriptor->workspace_bytes, dx.data_ptr(),
                                 dy.const_data_ptr(), y.const_data_ptr(), current_stream(y.device())));
}

at::ScalarType result_dtype(const at::Tensor& x, std::optional<at::ScalarType> dtype) {
    const at::ScalarType type = dtype.value_or(x.scalar_type());
    check_dtype(type);
    return type;
}

// ------------------------------------------------------------------------------------------------------
// Kernels. Mode is smxSoftmaxMode_t; the CPU and CUDA kernels are the same code.

// What the backward operators check before libsmx (as their fake kernels in smx/torch.py check it).
void check_backward_inputs(const at::Tensor& grad_output, const at::Tensor& output) {
    check_input(grad_output);
    check_input(output);
    TORCH_CHECK_TYPE(grad_output.scalar_type() == output.scalar_type(), "grad_output is ",
                     dtype_name(grad_output.scalar_type()), " but output is ", dtype_name(output.scalar_type()),
                     "; smx needs both in the forward's output dtype");
    TORCH_CHECK_VALUE(grad_output.device() == output.device(), "grad_output is on ", device_name(grad_output.device()),
                      " but output is on ", device_name(output.device()));
    TORCH_CHECK_VALUE(grad_output.sizes() == output.sizes(), "grad_output has shape ", shape_text(grad_output.sizes()),
                      " but output has shape ", shape_text(output.sizes()));
}

// out= of an operator whose result takes the device and shape of `input` (named `input_name` in messages).
void check_out(const at::Tensor& input, const char* input_name, std::optional<at::ScalarType> dtype,
               const at::Tensor& out) {
    TORCH_CHECK_VALUE(out.device() == input.device(), "out is on ", device_name(out.device()), " but ", input_name,
                      " is on ", device_name(input.device()));
    TORCH_CHECK_VALUE(out.sizes() == input.sizes(), "out has shape ", shape_text(out.sizes()), " but ", input_name,
                      " has shape ", shape_text(input.sizes()));
    TORCH_CHECK_TYPE(out.layout() == at::kStrided, "smx needs a strided (dense) out; got layout ", out.layout());
    check_dtype(out.scalar_type());
    TORCH_CHECK_TYPE(!dtype.has_value() || *dtype == out.scalar_type(), "dtype=", dtype_name(*dtype),
                     " disagrees with out's dtype ", dtype_name(out.scalar_type()));
}

template <int Mode>
at::Tensor softmax_kernel(const at::Tensor& x, int64_t dim, std::optional<at::ScalarType> dtype) {
    check_input(x);
    // torch.empty_like's layout, as the fake kernel (smx/torch.py) makes it: x's strides when x is dense,
    // allocated as torch's own softmax allocates its output, without a dispatcher call.
    const at::ScalarType y_dtype = result_dtype(x, dtype);
    at::Tensor y = x.is_non_overlapping_and_dense() ? empty_strided_on(x.device(), x.sizes(), x.strides(), y_dtype)
                                                    : at::empty_like(x, x.options().dtype(y_dtype));
    run_softmax(Mode, x, dim, y);
    return y;
}

template <int Mode>
void softmax_out_kernel(const at::Tensor& x, int64_t dim, std::optional<at::ScalarType> dtype, const at::Tensor& out) {
    check_input(x);
    check_out(x, "x", dtype, out);
    run_softmax(Mode, x, dim, out);
}

template <int Mode>
at::Tensor softmax_backward_kernel(const at::Tensor& grad_output, const at::Tensor& output, int64_t dim,
                                   std::optional<at::ScalarType> dtype) {
    check_backward_inputs(grad_output, output);
    // The forward output's layout (torch.empty_like), where x's gradient goes, as the fake kernel makes it.
    at::Tensor grad_input = at::empty_like(output, output.options().dtype(result_dtype(output, dtype)));
    run_softmax_backward(Mode, grad_output, output, dim, grad_input);
    return grad_input;
}

template <int Mode>
void softmax_backward_out_kernel(const at::Tensor& grad_output, const at::Tensor& output, int64_t dim,
                                 std::optional<at::ScalarType> dtype, const at::Tensor& grad_input) {
    check_backward_inputs(grad_output, output);
    check_out(output, "output", dtype, grad_input);
    run_softmax_backward(Mode, grad_output, output, dim, grad_input);
}

constexpr const char* kOperatorName[] = {"", "smx::softmax", "smx::log_softmax"};
constexpr const char* kBackwardOperatorName[] = {"", "smx::softmax_backward", "smx::log_softmax_backward"};

template <int Mode>
const c10::TypedOperatorHandle<at::Tensor(const at::Tensor&, int64_t, std::optional<at::ScalarType>)>& functional_op() {
    static const auto op = c10::Dispatcher::singleton()
                               .findSchemaOrThrow(kOperatorName[Mode], "")
                               .typed<at::Tensor(const at::Tensor&, int64_t, std::optional<at::ScalarType>)>();
    return op;
}

template <int Mode>
const c10::TypedOperatorHandle<void(const at::Tensor&, int64_t, std::optional<at::ScalarType>, const at::Tensor&)>&
out_op() {
    static const auto op =
        c10::Dispatcher::singleton()
            .findSchemaOrThrow(kOperatorName[Mode], "out")
            .typed<void(const at::Tensor&, int64_t, std::optional<at::ScalarType>, const at::Tensor&)>();
    return op;
}

using BackwardSignature = at::Tensor(const at::Tensor&, const at::Tensor&, int64_t, std::optional<at::ScalarType>);
using BackwardOutSignature =
    void(const at::Tensor&, const at::Tensor&, int64_t, std::optional<at::ScalarType>, const at::Tensor&);

template <int Mode>
const c10::TypedOperatorHandle<BackwardSignature>& backward_op() {
    static const auto op =
        c10::Dispatcher::singleton().findSchemaOrThrow(kBackwardOperatorName[Mode], "").typed<BackwardSignature>();
    return op;
}

template <int Mode>
const c10::TypedOperatorHandle<BackwardOutSignature>& backward_out_op() {
    static const auto op =
        c10::Dispatcher::singleton().findSchemaOrThrow(kBackwardOperatorName[Mode], "out").typed<BackwardOutSignature>();
    return op;
}

// The gradient of softmax (Mode 1) or log-softmax (2) with respect to its input, in x's dtype, given y = the
// forward's output and grad = dL/dy in y's dtype: the smx backward operator, through the dispatcher, so its
// own autograd formula records it when a double backward is asked for (its twin: _input_gradient in
// smx/torch.py).
at::Tensor input_gradient(int mode, const at::Tensor& grad, const at::Tensor& y, int64_t dim, at::ScalarType x_dtype) {
    return mode == kSoftmax ? backward_op<kSoftmax>().call(grad, y, dim, x_dtype)
                            : backward_op<kLogSoftmax>().call(grad, y, dim, x_dtype);
}

template <int Mode>
struct SoftmaxFunction : public torch::autograd::Function<SoftmaxFunction<Mode>> {
    static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, int64_t dim,
                              std::optional<at::ScalarType> dtype) {
        at::Tensor y;
        {
            at::AutoDispatchBelowADInplaceOrView below_autograd;
            y = functional_op<Mode>().call(x, dim, dtype);
        }
        ctx->save_for_backward({y});
        ctx->saved_data["dim"] = c10::maybe_wrap_dim(dim, x.dim());
        ctx->saved_data["x_dtype"] = static_cast<int64_t>(x.scalar_type());
        return y;
    }

    static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                   torch::autograd::variable_list grads) {
        const at::Tensor y = ctx->get_saved_variables()[0];
        const int64_t dim = ctx->saved_data["dim"].toInt();
        const auto x_dtype = static_cast<at::ScalarType>(ctx->saved_data["x_dtype"].toInt());
        // Written straight in x's dtype (dtype= may have given y another one), computed in float32 or float64.
        return {input_gradient(Mode, grads[0], y, dim, x_dtype), at::Tensor(), at::Tensor()};
    }
};

// The Autograd kernels take the dispatch keys the dispatcher found for the call (its first argument) and, with
// no graph to record, go on to the next kernel with them (redispatch), as torch's own autograd kernels do,
// instead of finding them again from the arguments; the guard covers what that kernel calls in turn.
constexpr c10::DispatchKeySet kBelowAutograd = c10::after_ADInplaceOrView_keyset;

template <int Mode>
at::Tensor softmax_autograd(c10::DispatchKeySet keys, const at::Tensor& x, int64_t dim,
                            std::optional<at::ScalarType> dtype) {
    if (c10::GradMode::is_enabled() && x.requires_grad()) return SoftmaxFunction<Mode>::apply(x, dim, dtype);
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return functional_op<Mode>().redispatch(keys & kBelowAutograd, x, dim, dtype);
}

template <int Mode>
void softmax_out_autograd(c10::DispatchKeySet keys, const at::Tensor& x, int64_t dim,
                          std::optional<at::ScalarType> dtype, const at::Tensor& out) {
    TORCH_CHECK(!(c10::GradMode::is_enabled() && (x.requires_grad() || out.requires_grad())), kOperatorName[Mode],
                " with out= does not support automatic differentiation, but x or out requires grad; call it "
                "without out=");
    {
        at::AutoDispatchBelowADInplaceOrView below_autograd;
        out_op<Mode>().redispatch(keys & kBelowAutograd, x, dim, dtype, out);
    }
    // Written as an in-place torch op writes: a backward that needs out's old values then refuses. Inference
    // tensors have no version counter (smx writes them, as the ctypes binding does).
    if (!out.is_inference()) torch::autograd::impl::bump_version(out);
}

// The backward operator as a function of (grad_output, output), so that double backward works: the gradients
// of grad_input = y * (g - sum(g * y)) (softmax) or g - exp(y) * sum(g) (log-softmax) with respect to g and y.
// Its twin is _gradients_of_backward in smx/torch.py.
template <int Mode>
struct SoftmaxBackwardFunction : public torch::autograd::Function<SoftmaxBackwardFunction<Mode>> {
    static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& grad_output,
                              const at::Tensor& output, int64_t dim, std::optional<at::ScalarType> dtype) {
        at::Tensor grad_input;
        {
            at::AutoDispatchBelowADInplaceOrView below_autograd;
            grad_input = backward_op<Mode>().call(grad_output, output, dim, dtype);
        }
        ctx->save_for_backward({grad_output, output});
        ctx->saved_data["dim"] = c10::maybe_wrap_dim(dim, output.dim());
        return grad_input;
    }

    static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                   torch::autograd::variable_list grads) {
        const torch::autograd::variable_list saved = ctx->get_saved_variables();
        const at::Tensor& g = saved[0];
        const at::Tensor& y = saved[1];
        const int64_t dim = ctx->saved_data["dim"].toInt();
        const at::Tensor grad = grads[0].to(y.scalar_type());
        at::Tensor by_g, by_y;
        if (Mode == kSoftmax) {
            by_g = backward_op<kSoftmax>().call(grad, y, dim, y.scalar_type());
            by_y = grad.mul(g.sub(g.mul(y).sum(dim, true))).sub(g.mul(grad.mul(y).sum(dim, true)));
        } else {
            const at::Tensor exp_y = y.exp();
            by_g = grad.sub(grad.mul(exp_y).sum(dim, true));
            by_y = grad.mul(exp_y).mul(g.sum(dim, true)).neg();
        }
        return {by_g, by_y, at::Tensor(), at::Tensor()};
    }
};

template <int Mode>
at::Tensor softmax_backward_autograd(c10::DispatchKeySet keys, const at::Tensor& grad_output, const at::Tensor& output,
                                     int64_t dim, std::optional<at::ScalarType> dtype) {
    if (c10::GradMode::is_enabled() && (grad_output.requires_grad() || output.requires_grad())) {
        return SoftmaxBackwardFunction<Mode>::apply(grad_output, output, dim, dtype);
    }
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return backward_op<Mode>().redispatch(keys & kBelowAutograd, grad_output, output, dim, dtype);
}

template <int Mode>
void softmax_backward_out_autograd(c10::DispatchKeySet keys, const at::Tensor& grad_output, const at::Tensor& output,
                                   int64_t dim, std::optional<at::ScalarType> dtype, const at::Tensor& grad_input) {
    TORCH_CHECK(!(c10::GradMode::is_enabled() &&
                  (grad_output.requires_grad() || output.requires_grad() || grad_input.requires_grad())),
                kBackwardOperatorName[Mode], " with out= does not support automatic differentiation, but an input or "
                "out requires grad; call it without out=");
    {
        at::AutoDispatchBelowADInplaceOrView below_autograd;
        backward_out_op<Mode>().redispatch(keys & kBelowAutograd, grad_output, output, dim, dtype, grad_input);
    }
    if (!grad_input.is_inference()) torch::autograd::impl::bump_version(grad_input);
}

// ------------------------------------------------------------------------------------------------------
// Log-probabilities: logsumexp, log_softmax_gather, cross_entropy (smx/torch.py holds their schemas, fake
// kernels and autograd). Bound apart from the softmax entry points (smx_torch_bind_logprobs).

enum : int { kI32 = 5, kI64 = 6 };  // smxDataType_t's index types

struct CrossEntropyOptions {  // smxCrossEntropyOptions_t
    std::size_t size;
    int reduction;
    int64_t ignore_index;
    double label_smoothing;
};

struct LogprobsApi {
    Status (*smxCreateLogsumexpDescriptor)(void*, void**, int, void*, void*) = nullptr;
    Status (*smxGetLogsumexpWorkspaceSize)(void*, std::size_t*) = nullptr;
    Status (*smxLogsumexp)(void*, void*, std::size_t, void*, const void*, void*) = nullptr;
    Status (*smxDestroyLogsumexpDescriptor)(void*) = nullptr;
    Status (*smxCreateLogSoftmaxGatherDescriptor)(void*, void**, int, void*, void*, void*) = nullptr;
    Status (*smxGetLogSoftmaxGatherWorkspaceSize)(void*, std::size_t*) = nullptr;
    Status (*smxLogSoftmaxGather)(void*, void*, std::size_t, void*, const void*, const void*, void*) = nullptr;
    Status (*smxDestroyLogSoftmaxGatherDescriptor)(void*) = nullptr;
    Status (*smxCreateCrossEntropyDescriptor)(void*, void**, int, const CrossEntropyOptions*, void*, void*, void*,
                                              void*, void*) = nullptr;
    Status (*smxGetCrossEntropyWorkspaceSize)(void*, std::size_t*) = nullptr;
    Status (*smxCrossEntropy)(void*, void*, std::size_t, void*, void*, void*, const void*, const void*,
                              void*) = nullptr;
    Status (*smxDestroyCrossEntropyDescriptor)(void*) = nullptr;
};

LogprobsApi logprobs_api;
bool logprobs_bound = false;

// Points `function` at libsmx's entry point `name` (found by the ctypes binding's lookup); false if none.
template <class Function>
bool bind_entry(Function& function, void* (*lookup)(const char*), const char* name) {
    function = reinterpret_cast<Function>(lookup(name));
    return function != nullptr;
}

// Operation numbers in the descriptor cache's keys (softmax takes its modes, 1 and 2).
enum : int64_t { kKeyLogsumexp = 101, kKeyGather = 102, kKeyCrossEntropy = 103 };

int index_code(const at::Tensor& t) {
    return t.scalar_type() == at::kInt ? kI32 : t.scalar_type() == at::kLong ? kI64 : 0;
}

int statistics_code(const at::Tensor& x) { return x.scalar_type() == at::kDouble ? kF64 : kF32; }

at::ScalarType statistics_type(const at::Tensor& x) { return x.scalar_type() == at::kDouble ? at::kDouble : at::kFloat; }

void check_index_tensor(const at::Tensor& x, const at::Tensor& index, const char* name) {
    TORCH_CHECK_TYPE(index_code(index) != 0, "smx takes int32 and int64 indices; got dtype ",
                     dtype_name(index.scalar_type()), " for ", name);
    TORCH_CHECK_VALUE(index.device() == x.device(), name, " is on ", device_name(index.device()), " but x is on ",
                      device_name(x.device()));
    TORCH_CHECK_TYPE(index.layout() == at::kStrided, "smx needs a strided (dense) tensor; got layout ", index.layout());
}

// x's shape without `axis` (0-d x: 0-d rows), or with it of size 1 where `keepdim`.
std::vector<int64_t> per_row_shape(const at::Tensor& x, int64_t axis, bool keepdim) {
    std::vector<int64_t> shape;
    for (int64_t d = 0; d < x.dim(); ++d) {
        if (d != axis) shape.push_back(x.size(d));
        else if (keepdim) shape.push_back(1);
    }
    return shape;
}

// On the host, indices outside [0, size) (but `skip`) are torch's IndexError before any work.
void check_host_bounds(const at::Tensor& index, int64_t size, int64_t axis, const char* what,
                       std::optional<int64_t> skip) {
    if (!index.device().is_cpu() || index.numel() == 0) return;
    const at::Tensor kept = skip ? index.masked_select(index != *skip) : index;
    if (kept.numel() == 0) return;
    const auto [low, high] = at::aminmax(kept);
    const int64_t bad_low = low.item<int64_t>(), bad_high = high.item<int64_t>();
    const int64_t bad = bad_low < 0 ? bad_low : bad_high;
    TORCH_CHECK_INDEX(bad_low >= 0 && bad_high < size, what, " " + std::to_string(bad) + " is out of bounds for dimension " +
                      std::to_string(axis) + " with size " + std::to_string(size));
}

// Tensor descriptors made for one descriptor's creation, destroyed with it.
struct TensorDescriptors {
    std::array<void*, 5> made{};
    int count = 0;
    Status status = 0;
    void* add(int dtype, const Layout& layout) {
        void* desc = nullptr;
        if (status == 0) status = api.smxCreateTensorDescriptor(&desc, dtype, layout.ndim, layout.shape.data(),
                                                                layout.strides.data());
        return made[count++] = desc;
    }
    ~TensorDescriptors() {
        for (int i = 0; i < count; ++i) api.smxDestroyTensorDescriptor(made[i]);
    }
};

// The cached descriptor for `key`, else create(handle, &pointer) then its workspace query.
template <class Create>
std::shared_ptr<Descriptor> logprobs_descriptor(const at::Tensor& x, ProblemKey& key, Status (*destroy)(void*),
                                                Status (*workspace_size)(void*, std::size_t*), const Create& create) {
    TORCH_CHECK(logprobs_bound, "smx's torch extension is not bound to libsmx (import smx.torch binds it)");
    const auto [device_type, device_index] = smx_device(x.device());
    key.words[1] = device_type * 1024 + device_index;
    std::shared_ptr<Descriptor> descriptor = cache.find(key);
    if (descriptor) return descriptor;
    auto made = std::make_shared<Descriptor>();
    made->destroy = destroy;
    made->handle = cache.handle(device_type, device_index);
    Status status = create(made->handle->pointer, &made->pointer);
    if (status == 0) status = workspace_size(made->pointer, &made->workspace_bytes);
    if (status != 0) raise_status(status, last_error());
    return cache.insert(key, std::move(made));
}

ProblemKey start_key(int64_t operation, int64_t axis, int64_t dtypes, const at::Tensor& x) {
    ProblemKey key;
    key.add(operation);
    key.add(0);  // the device, filled by logprobs_descriptor
    key.add(axis);
    key.add(dtypes);
    key.add(x.dim());
    return key;
}

void run_logsumexp(const at::Tensor& x, int64_t dim, const at::Tensor& out) {
    check_input(x);
    check_ndim(x);
    const int axis = static_cast<int>(c10::maybe_wrap_dim(dim, x.dim()));
    const Layout x_layout = layout_of(x), out_layout = layout_of(out);
    const int x_dtype = dtype_code(x.scalar_type()), out_dtype = dtype_code(out.scalar_type());
    ProblemKey key = start_key(kKeyLogsumexp, axis, x_dtype * 16 + out_dtype, x);
    for (int i = 0; i < x_layout.ndim; ++i) {
        key.add(x_layout.shape[i]);
        key.add(x_layout.strides[i]);
    }
    key.add(out_layout.ndim);
    for (int i = 0; i < out_layout.ndim; ++i) key.add(out_layout.strides[i]);
    const auto descriptor = logprobs_descriptor(
        x, key, logprobs_api.smxDestroyLogsumexpDescriptor, logprobs_api.smxGetLogsumexpWorkspaceSize,
        [&](void* handle, void** made) {
            TensorDescriptors tensors;
            void* out_desc = tensors.add(out_dtype, out_layout);
            void* x_desc = tensors.add(x_dtype, x_layout);
            return tensors.status ? tensors.status
                                  : logprobs_api.smxCreateLogsumexpDescriptor(handle, made, axis, out_desc, x_desc);
        });
    c10::DataPtr workspace;
    void* workspace_pointer = allocate_workspace(descriptor->workspace_bytes, x.device(), &workspace);
    check(logprobs_api.smxLogsumexp(descriptor->pointer, workspace_pointer, descriptor->workspace_bytes,
                                    out.data_ptr(), x.const_data_ptr(), current_stream(x.device())));
}

at::Tensor logsumexp_kernel(const at::Tensor& x, int64_t dim, bool keepdim) {
    check_input(x);
    const int64_t axis = c10::maybe_wrap_dim(dim, x.dim());
    at::Tensor out = at::empty(per_row_shape(x, axis, keepdim), x.options().dtype(statistics_type(x)));
    run_logsumexp(x, dim, out);
    return out;
}

void logsumexp_out_kernel(const at::Tensor& x, int64_t dim, bool keepdim, const at::Tensor& out) {
    check_input(x);
    const int64_t axis = c10::maybe_wrap_dim(dim, x.dim());
    const std::vector<int64_t> shape = per_row_shape(x, axis, keepdim);
    TORCH_CHECK_VALUE(out.device() == x.device(), "out is on ", device_name(out.device()), " but x is on ",
                      device_name(x.device()));
    TORCH_CHECK_VALUE(out.sizes() == at::IntArrayRef(shape), "out has shape ", shape_text(out.sizes()),
                      " but must have shape ", shape_text(shape));
    TORCH_CHECK_TYPE(out.scalar_type() == statistics_type(x), "out has dtype ", dtype_name(out.scalar_type()),
                     " but must be ", dtype_name(statistics_type(x)));
    run_logsumexp(x, dim, out);
}

at::Tensor log_softmax_gather_kernel(const at::Tensor& x, const at::Tensor& index, int64_t dim) {
    check_input(x);
    check_index_tensor(x, index, "index");
    check_ndim(x);
    check_ndim(index);
    const int axis = static_cast<int>(c10::maybe_wrap_dim(dim, x.dim()));
    check_host_bounds(index, x.dim() ? x.size(axis) : 1, axis, "index", std::nullopt);
    at::Tensor out = at::empty(index.sizes(), x.options().dtype(statistics_type(x)));
    const Layout x_layout = layout_of(x), index_layout = layout_of(index), out_layout = layout_of(out);
    const int x_dtype = dtype_code(x.scalar_type()), index_dtype = index_code(index);
    ProblemKey key = start_key(kKeyGather, axis, x_dtype * 16 + index_dtype, x);
    TORCH_CHECK_VALUE(index_layout.ndim == x_layout.ndim, "index has " + std::to_string(index.dim()) + " dims but x has " + std::to_string(x.dim()));
    for (int i = 0; i < x_layout.ndim; ++i) {
        key.add(x_layout.shape[i]);
        key.add(index_layout.shape[i]);
        key.add(x_layout.strides[i]);
        key.add(index_layout.strides[i]);
    }
    const auto descriptor = logprobs_descriptor(
        x, key, logprobs_api.smxDestroyLogSoftmaxGatherDescriptor, logprobs_api.smxGetLogSoftmaxGatherWorkspaceSize,
        [&](void* handle, void** made) {
            TensorDescriptors tensors;
            void* out_desc = tensors.add(statistics_code(x), out_layout);
            void* x_desc = tensors.add(x_dtype, x_layout);
            void* index_desc = tensors.add(index_dtype, index_layout);
            return tensors.status ? tensors.status
                                  : logprobs_api.smxCreateLogSoftmaxGatherDescriptor(handle, made, axis, out_desc,
                                                                                     x_desc, index_desc);
        });
    c10::DataPtr workspace;
    void* workspace_pointer = allocate_workspace(descriptor->workspace_bytes, x.device(), &workspace);
    check(logprobs_api.smxLogSoftmaxGather(descriptor->pointer, workspace_pointer, descriptor->workspace_bytes,
                                           out.data_ptr(), x.const_data_ptr(), index.const_data_ptr(),
                                           current_stream(x.device())));
    return out;
}

int reduction_code(c10::string_view reduction) {
    if (reduction == "none") return 0;
    if (reduction == "sum") return 1;
    TORCH_CHECK_VALUE(reduction == "mean", std::string(reduction),
                      " is not a valid value for reduction (expected 'none', 'sum' or 'mean')");
    return 2;
}

// loss (per row or 0-d) and lse, and dlogits into `dlogits` when defined (it may be the logits, in place).
std::tuple<at::Tensor, at::Tensor> run_cross_entropy(const at::Tensor& logits, const at::Tensor& target, int64_t dim,
                                                     int64_t ignore_index, double label_smoothing,
                                                     c10::string_view reduction, const at::Tensor& dlogits) {
    check_input(logits);
    check_index_tensor(logits, target, "target");
    check_ndim(logits);
    check_ndim(target);
    const int axis = static_cast<int>(c10::maybe_wrap_dim(dim, logits.dim()));
    const int reduction_value = reduction_code(reduction);
    TORCH_CHECK_VALUE(label_smoothing >= 0.0 && label_smoothing <= 1.0,
                      "label_smoothing must be between 0.0 and 1.0. Got: " + std::to_string(label_smoothing));
    check_host_bounds(target, logits.dim() ? logits.size(axis) : 1, axis, "Target", ignore_index);
    const auto rows = per_row_shape(logits, axis, false);
    const auto options = logits.options().dtype(statistics_type(logits));
    at::Tensor loss = reduction_value == 0 ? at::empty(rows, options) : at::empty({}, options);
    at::Tensor lse = at::empty(rows, options);
    const bool has_dlogits = dlogits.defined();
    const Layout logits_layout = layout_of(logits), target_layout = layout_of(target);
    const Layout loss_layout = layout_of(loss), lse_layout = layout_of(lse);
    const Layout dlogits_layout = has_dlogits ? layout_of(dlogits) : Layout{};
    const int logits_dtype = dtype_code(logits.scalar_type()), target_dtype = index_code(target);
    const int dlogits_dtype = has_dlogits ? dtype_code(dlogits.scalar_type()) : 0;
    ProblemKey key = start_key(kKeyCrossEntropy, axis, (logits_dtype * 16 + target_dtype) * 16 + dlogits_dtype, logits);
    key.add(reduction_value);
    key.add(ignore_index);
    int64_t smoothing_bits;
    std::memcpy(&smoothing_bits, &label_smoothing, sizeof smoothing_bits);
    key.add(smoothing_bits);
    for (int i = 0; i < logits_layout.ndim; ++i) {
        key.add(logits_layout.shape[i]);
        key.add(logits_layout.strides[i]);
        key.add(has_dlogits ? dlogits_layout.strides[i] : 0);
        key.add(i < target_layout.ndim ? target_layout.strides[i] : 0);
    }
    const CrossEntropyOptions settings{sizeof(CrossEntropyOptions), reduction_value, ignore_index, label_smoothing};
    const auto descriptor = logprobs_descriptor(
        logits, key, logprobs_api.smxDestroyCrossEntropyDescriptor, logprobs_api.smxGetCrossEntropyWorkspaceSize,
        [&](void* handle, void** made) {
            TensorDescriptors tensors;
            void* loss_desc = tensors.add(statistics_code(logits), loss_layout);
            void* lse_desc = tensors.add(statistics_code(logits), lse_layout);
            void* dlogits_desc = has_dlogits ? tensors.add(dlogits_dtype, dlogits_layout) : nullptr;
            void* logits_desc = tensors.add(logits_dtype, logits_layout);
            void* target_desc = tensors.add(target_dtype, target_layout);
            return tensors.status ? tensors.status
                                  : logprobs_api.smxCreateCrossEntropyDescriptor(handle, made, axis, &settings, loss_desc,
                                                                                 lse_desc, dlogits_desc, logits_desc,
                                                                                 target_desc);
        });
    c10::DataPtr workspace;
    void* workspace_pointer = allocate_workspace(descriptor->workspace_bytes, logits.device(), &workspace);
    check(logprobs_api.smxCrossEntropy(descriptor->pointer, workspace_pointer, descriptor->workspace_bytes,
                                       loss.data_ptr(), lse.data_ptr(), has_dlogits ? dlogits.data_ptr() : nullptr,
                                       logits.const_data_ptr(), target.const_data_ptr(),
                                       current_stream(logits.device())));
    return {loss, lse};
}

std::tuple<at::Tensor, at::Tensor> cross_entropy_kernel(const at::Tensor& logits, const at::Tensor& target,
                                                        int64_t dim, int64_t ignore_index, double label_smoothing,
                                                        c10::string_view reduction) {
    return run_cross_entropy(logits, target, dim, ignore_index, label_smoothing, reduction, at::Tensor());
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> cross_entropy_with_grad_kernel(
    const at::Tensor& logits, const at::Tensor& target, int64_t dim, int64_t ignore_index, double label_smoothing,
    c10::string_view reduction) {
    check_input(logits);
    at::Tensor dlogits = at::empty_like(logits);  // the fake kernel's layout (smx/torch.py)
    auto [loss, lse] = run_cross_entropy(logits, target, dim, ignore_index, label_smoothing, reduction, dlogits);
    return {loss, lse, dlogits};
}

std::tuple<at::Tensor, at::Tensor> cross_entropy_with_grad_inplace_kernel(
    const at::Tensor& logits, const at::Tensor& target, int64_t dim, int64_t ignore_index, double label_smoothing,
    c10::string_view reduction) {
    return run_cross_entropy(logits, target, dim, ignore_index, label_smoothing, reduction, logits);
}

// The same kernels serve CPU and CUDA tensors: libsmx's handle is the device's.
void register_logprobs_kernels(torch::Library& m) {
    m.impl("logsumexp", TORCH_FN(logsumexp_kernel));
    m.impl("logsumexp.out", TORCH_FN(logsumexp_out_kernel));
    m.impl("log_softmax_gather", TORCH_FN(log_softmax_gather_kernel));
    m.impl("cross_entropy", TORCH_FN(cross_entropy_kernel));
    m.impl("cross_entropy_with_grad", TORCH_FN(cross_entropy_with_grad_kernel));
    m.impl("cross_entropy_with_grad_", TORCH_FN(cross_entropy_with_grad_inplace_kernel));
}

}  // namespace

TORCH_LIBRARY_IMPL(smx, CPU, m) {
    m.impl("softmax", TORCH_FN(softmax_kernel<kSoftmax>));
    m.impl("softmax.out", TORCH_FN(softmax_out_kernel<kSoftmax>));
    m.impl("log_softmax", TORCH_FN(softmax_kernel<kLogSoftmax>));
    m.impl("log_softmax.out", TORCH_FN(softmax_out_kernel<kLogSoftmax>));
    m.impl("softmax_backward", TORCH_FN(softmax_backward_kernel<kSoftmax>));
    m.impl("softmax_backward.out", TORCH_FN(softmax_backward_out_kernel<kSoftmax>));
    m.impl("log_softmax_backward", TORCH_FN(softmax_backward_kernel<kLogSoftmax>));
    m.impl("log_softmax_backward.out", TORCH_FN(softmax_backward_out_kernel<kLogSoftmax>));
}

TORCH_LIBRARY_IMPL(smx, CUDA, m) {
    m.impl("softmax", TORCH_FN(softmax_kernel<kSoftmax>));
    m.impl("softmax.out", TORCH_FN(softmax_out_kernel<kSoftmax>));
    m.impl("log_softmax", TORCH_FN(softmax_kernel<kLogSoftmax>));
    m.impl("log_softmax.out", TORCH_FN(softmax_out_kernel<kLogSoftmax>));
    m.impl("softmax_backward", TORCH_FN(softmax_backward_kernel<kSoftmax>));
    m.impl("softmax_backward.out", TORCH_FN(softmax_backward_out_kernel<kSoftmax>));
    m.impl("log_softmax_backward", TORCH_FN(softmax_backward_kernel<kLogSoftmax>));
    m.impl("log_softmax_backward.out", TORCH_FN(softmax_backward_out_kernel<kLogSoftmax>));
}

TORCH_LIBRARY_IMPL(smx, Autograd, m) {
    m.impl("softmax", TORCH_FN(softmax_autograd<kSoftmax>));
    m.impl("softmax.out", TORCH_FN(softmax_out_autograd<kSoftmax>));
    m.impl("log_softmax", TORCH_FN(softmax_autograd<kLogSoftmax>));
    m.impl("log_softmax.out", TORCH_FN(softmax_out_autograd<kLogSoftmax>));
    m.impl("softmax_backward", TORCH_FN(softmax_backward_autograd<kSoftmax>));
    m.impl("softmax_backward.out", TORCH_FN(softmax_backward_out_autograd<kSoftmax>));
    m.impl("log_softmax_backward", TORCH_FN(softmax_backward_autograd<kLogSoftmax>));
    m.impl("log_softmax_backward.out", TORCH_FN(softmax_backward_out_autograd<kLogSoftmax>));
}

// ------------------------------------------------------------------------------------------------------
// Called by smx/torch.py through ctypes.

extern "C" {

// Binds the libsmx entry points: lookup(name) returns the address of the function the ctypes binding
// loaded. Returns 0, or the 1-based index of the first name it could not resolve.
__attribute__((visibility("default"))) int smx_torch_bind(void* (*lookup)(const char*)) {
    Api bound;
    int index = 0;
    auto resolve = [&](auto& function, const char* name) { return ++index, bind_entry(function, lookup, name); };
    if (!(resolve(bound.smxGetStatusString, "smxGetStatusString") &&
          resolve(bound.smxGetLastErrorMessage, "smxGetLastErrorMessage") && resolve(bound.smxCreate, "smxCreate") &&
          resolve(bound.smxDestroy, "smxDestroy") &&
          resolve(bound.smxCreateTensorDescriptor, "smxCreateTensorDescriptor") &&
          resolve(bound.smxDestroyTensorDescriptor, "smxDestroyTensorDescriptor") &&
          resolve(bound.smxCreateSoftmaxDescriptor, "smxCreateSoftmaxDescriptor") &&
          resolve(bound.smxGetSoftmaxWorkspaceSize, "smxGetSoftmaxWorkspaceSize") &&
          resolve(bound.smxSoftmaxForward, "smxSoftmaxForward") &&
          resolve(bound.smxDestroySoftmaxDescriptor, "smxDestroySoftmaxDescriptor") &&
          resolve(bound.smxSetDevicePointerChecks, "smxSetDevicePointerChecks") &&
          resolve(bound.smxCreateSoftmaxBackwardDescriptor, "smxCreateSoftmaxBackwardDescriptor") &&
          resolve(bound.smxGetSoftmaxBackwardWorkspaceSize, "smxGetSoftmaxBackwardWorkspaceSize") &&
          resolve(bound.smxSoftmaxBackward, "smxSoftmaxBackward") &&
          resolve(bound.smxDestroySoftmaxBackwardDescriptor, "smxDestroySoftmaxBackwardDescriptor")))
        return index;
    cache.clear();  // descriptors of a previously bound library go with it
    api = bound;
    api_bound = true;
    return 0;
}

// hits, misses, descriptors cached, handles: the descriptor cache's counters.
__attribute__((visibility("default"))) void smx_torch_cache_info(int64_t* counters) {
    const auto info = cache.info();
    for (int i = 0; i < 4; ++i) counters[i] = info[i];
}

// Destroys every cached descriptor and handle (at interpreter exit, while libsmx is still loaded).
__attribute__((visibility("default"))) void smx_torch_release() { cache.clear(); }

}  // extern "C"

TORCH_LIBRARY_IMPL(smx, CPU, m) { register_logprobs_kernels(m); }

TORCH_LIBRARY_IMPL(smx, CUDA, m) { register_logprobs_kernels(m); }

extern "C" {

// Binds the log-probability entry points as smx_torch_bind binds softmax's; call it after that one. Returns
// 0, or 100 + the 1-based index of the first name it could not resolve.
__attribute__((visibility("default"))) int smx_torch_bind_logprobs(void* (*lookup)(const char*)) {
    LogprobsApi bound;
    int index = 100;
    auto resolve = [&](auto& function, const char* name) { return ++index, bind_entry(function, lookup, name); };
    if (!(resolve(bound.smxCreateLogsumexpDescriptor, "smxCreateLogsumexpDescriptor") &&
          resolve(bound.smxGetLogsumexpWorkspaceSize, "smxGetLogsumexpWorkspaceSize") &&
          resolve(bound.smxLogsumexp, "smxLogsumexp") &&
          resolve(bound.smxDestroyLogsumexpDescriptor, "smxDestroyLogsumexpDescriptor") &&
          resolve(bound.smxCreateLogSoftmaxGatherDescriptor, "smxCreateLogSoftmaxGatherDescriptor") &&
          resolve(bound.smxGetLogSoftmaxGatherWorkspaceSize, "smxGetLogSoftmaxGatherWorkspaceSize") &&
          resolve(bound.smxLogSoftmaxGather, "smxLogSoftmaxGather") &&
          resolve(bound.smxDestroyLogSoftmaxGatherDescriptor, "smxDestroyLogSoftmaxGatherDescriptor") &&
          resolve(bound.smxCreateCrossEntropyDescriptor, "smxCreateCrossEntropyDescriptor") &&
          resolve(bound.smxGetCrossEntropyWorkspaceSize, "smxGetCrossEntropyWorkspaceSize") &&
          resolve(bound.smxCrossEntropy, "smxCrossEntropy") &&
          resolve(bound.smxDestroyCrossEntropyDescriptor, "smxDestroyCrossEntropyDescriptor")))
        return index;
    logprobs_api = bound;
    logprobs_bound = true;
    return 0;
}

}  // extern "C"

#ifdef SMX_TORCH_PYTHON
// ------------------------------------------------------------------------------------------------------
// The Python binding of the eager calls. torch.ops.smx.softmax called from Python takes the dispatcher's
// boxed path (each argument matched against the schema into a stack, the result boxed back); these call the
// same operators unboxed, as torch's generated bindings call theirs, so autograd, dispatch modes, functorch
// and the profiler see the same operator calls. Plain CPython fast calls, not pybind11, whose argument
// matching costs more per call. smx.softmax (and smx/torch.py's _run) try them first outside Dynamo's tracing
// (which must see the torch.ops call); they decline, with NotImplemented, the calls torch.ops must handle.

namespace {

// Whether a call's arguments are what the operator's schema takes as torch.ops would pass them on, with no
// Python handling to apply first: x (and out) exactly torch.Tensor (or nn.Parameter, which torch's own
// bindings treat alike), dim exactly an int, dtype None or a torch.dtype, and no __torch_function__ mode
// active. Anything else (a subclass's __torch_function__, a mode, a NumPy integer dim, a dtype name) is
// torch.ops' to handle.
bool takes_directly(PyObject* x, PyObject* dim, PyObject* dtype, PyObject* out) {
    return THPVariable_CheckExact(x) && PyLong_CheckExact(dim) && (dtype == Py_None || THPDtype_Check(dtype)) &&
           (out == Py_None || THPVariable_CheckExact(out)) && !at::impl::torch_function_mode_enabled();
}

// eager_call<Mode>(x, dim, dtype, out): the operator called unboxed (the .out overload where out is not None);
// returns out, or the new result. NotImplemented, computing nothing, where takes_directly refuses the
// arguments: the caller then goes through torch.ops.
template <int Mode>
PyObject* eager_call(PyObject* /*module*/, PyObject* const* args, Py_ssize_t count) {
    HANDLE_TH_ERRORS
    if (count != 4) {
        PyErr_SetString(PyExc_TypeError, "expected 4 arguments: (x, dim, dtype, out)");
        return nullptr;
    }
    PyObject* const out = args[3];
    if (!takes_directly(args[0], args[1], args[2], out)) Py_RETURN_NOTIMPLEMENTED;
    const int64_t dim = PyLong_AsLongLong(args[1]);
    if (dim == -1 && PyErr_Occurred()) return nullptr;
    std::optional<at::ScalarType> dtype;
    if (args[2] != Py_None) dtype = reinterpret_cast<THPDtype*>(args[2])->scalar_type;
    const at::Tensor& x = THPVariable_Unpack(args[0]);
    if (out != Py_None) {
        {
            pybind11::gil_scoped_release release;  // as torch's bindings do: other threads run meanwhile
            out_op<Mode>().call(x, dim, dtype, THPVariable_Unpack(out));
        }
        Py_INCREF(out);
        return out;
    }
    at::Tensor y;
    {
        pybind11::gil_scoped_release release;
        y = functional_op<Mode>().call(x, dim, dtype);
    }
    return THPVariable_Wrap(std::move(y));
    END_HANDLE_TH_ERRORS
}

template <PyObject* (*Function)(PyObject*, PyObject* const*, Py_ssize_t)>
PyMethodDef fast_call(const char* name, const char* doc) {
    return {name, reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(Function)), METH_FASTCALL, doc};
}

PyMethodDef eager_functions[] = {
    fast_call<eager_call<kSoftmax>>("softmax", "softmax(x, dim, dtype, out) -> out or y: smx::softmax(.out), "
                                               "unboxed; NotImplemented for what torch.ops must handle"),
    fast_call<eager_call<kLogSoftmax>>("log_softmax", "log_softmax(x, dim, dtype, out): as softmax, for "
                                                      "smx::log_softmax(.out)"),
    {nullptr, nullptr, 0, nullptr}};

#define SMX_CONCAT_(a, b) a##b
#define SMX_CONCAT(a, b) SMX_CONCAT_(a, b)
#define SMX_STRING_(a) #a
#define SMX_STRING(a) SMX_STRING_(a)

PyModuleDef eager_module = {PyModuleDef_HEAD_INIT, SMX_STRING(TORCH_EXTENSION_NAME),
                            "smx's eager calls of torch.ops.smx (smx/torch.py)", -1, eager_functions,
                            nullptr, nullptr, nullptr, nullptr};

}  // namespace

// The module's entry point, named after it as Python's import looks it up (cpp_extension defines the name).
PyMODINIT_FUNC SMX_CONCAT(PyInit_, TORCH_EXTENSION_NAME)() { return PyModule_Create(&eager_module); }
#endif  // SMX_TORCH_PYTHON
