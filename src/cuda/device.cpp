// device.cpp - the CUDA backend's device facts: the handle's device limits, read once, and the
// forward-time check that data pointers are memory the handle's device can address.
#include <cuda_runtime.h>

#include <string>

#include "core/error.hpp"
#include "cuda/backend.hpp"
#include "cuda/common/util.hpp"

namespace smx {
namespace {

// The device's marketing name through the driver's cuDeviceGetName, fetched as an entry point so that
// libsmx does not link libcuda. For logs only: a driver that cannot give it leaves "CUDA device".
std::string device_name(int device_id) {
    using GetName = int (*)(char* name, int length, int device);  // CUresult cuDeviceGetName(char*, int, CUdevice)
    void* entry = nullptr;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    char name[256] = {};
    if (cudaGetDriverEntryPointByVersion("cuDeviceGetName", &entry, 12000, cudaEnableDefault, &found) == cudaSuccess &&
        found == cudaDriverEntryPointSuccess && entry != nullptr) {
        if (reinterpret_cast<GetName>(entry)(name, static_cast<int>(sizeof name) - 1, device_id) != 0) name[0] = '\0';
    } else {
        (void)cudaGetLastError();
    }
    return name[0] != '\0' ? std::string(name) : std::string("CUDA device");
}

}  // namespace

smxStatus_t cuda_query_device(int device_id, DeviceLimits* limits) {
    int device_count = 0;
    const cudaError_t count_error = cudaGetDeviceCount(&device_count);
    if (count_error != cudaSuccess) {
        (void)cudaGetLastError();
        return fail(SMX_STATUS_NOT_SUPPORTED_DEVICE_ABSENT, "no usable CUDA device: {} ({})",
                    cudaGetErrorName(count_error), cudaGetErrorString(count_error));
    }
    if (device_count == 0) return fail(SMX_STATUS_NOT_SUPPORTED_DEVICE_ABSENT, "no CUDA device present");
    if (device_id < 0 || device_id >= device_count) {
        return fail(SMX_STATUS_BAD_PARAM_DEVICE, "CUDA device id {} out of range: {} device(s) present", device_id,
                    device_count);
    }
    DeviceLimits read;
    int value = 0;
    // One attribute at a time: far cheaper than cudaGetDeviceProperties, which fills ~100 fields.
    const auto attribute = [&](cudaDeviceAttr attr, const char* name) -> smxStatus_t {
        const cudaError_t error = cudaDeviceGetAttribute(&value, attr, device_id);
        if (error != cudaSuccess) {
            (void)cudaGetLastError();
            return fail(SMX_STATUS_EXECUTION_FAILED, "reading {} of CUDA device {} failed: {} ({})", name, device_id,
                        cudaGetErrorName(error), cudaGetErrorString(error));
        }
        return SMX_STATUS_SUCCESS;
    };
    SMX_RETURN_IF_ERROR(attribute(cudaDevAttrComputeCapabilityMajor, "the compute capability"));
    read.compute_capability_major = value;
    SMX_RETURN_IF_ERROR(attribute(cudaDevAttrComputeCapabilityMinor, "the compute capability"));
    read.compute_capability_minor = value;
    SMX_RETURN_IF_ERROR(attribute(cudaDevAttrMultiProcessorCount, "the multiprocessor count"));
    read.multiprocessor_count = value;
    SMX_RETURN_IF_ERROR(attribute(cudaDevAttrMaxThreadsPerBlock, "the max threads per block"));
    read.max_threads_per_block = value;
    SMX_RETURN_IF_ERROR(attribute(cudaDevAttrMaxThreadsPerMultiProcessor, "the max threads per multiprocessor"));
    read.max_threads_per_multiprocessor = value;
    SMX_RETURN_IF_ERROR(attribute(cudaDevAttrWarpSize, "the warp size"));
    read.warp_size = value;
    SMX_RETURN_IF_ERROR(attribute(cudaDevAttrMaxSharedMemoryPerBlock, "the shared memory per block"));
    read.shared_memory_per_block = static_cast<std::size_t>(value);
    SMX_RETURN_IF_ERROR(attribute(cudaDevAttrMaxSharedMemoryPerBlockOptin, "the opt-in shared memory per block"));
    read.shared_memory_per_block_optin = static_cast<std::size_t>(value);
    SMX_RETURN_IF_ERROR(attribute(cudaDevAttrMaxSharedMemoryPerMultiprocessor, "the shared memory per multiprocessor"));
    read.shared_memory_per_multiprocessor = static_cast<std::size_t>(value);
    SMX_RETURN_IF_ERROR(attribute(cudaDevAttrMaxRegistersPerMultiprocessor, "the registers per multiprocessor"));
    read.registers_per_multiprocessor = value;
    SMX_RETURN_IF_ERROR(attribute(cudaDevAttrClusterLaunch, "cluster launch support"));
    read.cluster_launch = value != 0;
    SMX_RETURN_IF_ERROR(attribute(cudaDevAttrCooperativeLaunch, "cooperative launch support"));
    read.cooperative_launch = value != 0;
    SMX_RETURN_IF_ERROR(attribute(cudaDevAttrL2CacheSize, "the L2 cache size"));
    read.l2_cache_bytes = static_cast<std::size_t>(value);

    read.name = device_name(device_id);
    *limits = read;
    return SMX_STATUS_SUCCESS;
}

namespace {

smxStatus_t check_one_pointer(int device_id, const void* pointer, const char* which) {
    cudaPointerAttributes attributes{};
    const cudaError_t error = cudaPointerGetAttributes(&attributes, pointer);
    if (error != cudaSuccess) {
        (void)cudaGetLastError();  // a failed query leaves an error behind that the caller must not inherit
        return fail(SMX_STATUS_BAD_PARAM_DEVICE, "{} pointer {} could not be identified as CUDA-addressable memory: {} ({})",
                    which, pointer, cudaGetErrorName(error), cudaGetErrorString(error));
    }
    switch (attributes.type) {
        case cudaMemoryTypeManaged:
            return SMX_STATUS_SUCCESS;
        case cudaMemoryTypeDevice:
            if (attributes.device != device_id) {
                return fail(SMX_STATUS_BAD_PARAM_DEVICE,
                            "{} pointer {} is memory of CUDA device {}, but the handle is on CUDA device {}", which,
                            pointer, attributes.device, device_id);
            }
            return SMX_STATUS_SUCCESS;
        case cudaMemoryTypeHost:
            if (attributes.devicePointer == nullptr) {
                return fail(SMX_STATUS_BAD_PARAM_DEVICE,
                            "{} pointer {} is page-locked host memory not mapped into CUDA device {}'s address space",
                            which, pointer, device_id);
            }
            return SMX_STATUS_SUCCESS;
        case cudaMemoryTypeUnregistered:
        default:
            return fail(SMX_STATUS_BAD_PARAM_DEVICE,
                        "{} pointer {} is plain host memory; the handle is on CUDA device {}: pass device, managed "
                        "or mapped host memory",
                        which, pointer, device_id);
    }
}

}  // namespace

smxStatus_t cuda_check_operand_pointers(int device_id, const OperandPointer* operands, int count) {
    for (int k = 0; k < count; ++k) {
        if (operands[k].pointer == nullptr) continue;
        SMX_RETURN_IF_ERROR(check_one_pointer(device_id, operands[k].pointer, operands[k].name));
    }
    return SMX_STATUS_SUCCESS;
}

}  // namespace smx
