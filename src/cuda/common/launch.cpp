// launch.cpp - kernel launches and the occupancy queries of the CUDA plans.
#include "cuda/common/launch.hpp"

#include <fmt/format.h>

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "cuda/common/util.hpp"

namespace smx::cuda {

smxStatus_t launch_all(const Launch* launches, int count, void* params, cudaStream_t stream) {
    void* kernel_params[] = {params};
    for (int i = 0; i < count; ++i) {
        const Launch& launch = launches[i];
        cudaError_t error;
        if (launch.cluster > 0 || launch.cooperative || launch.after_previous) {
            cudaLaunchAttribute attributes[2]{};
            unsigned count = 0;
            if (launch.cooperative) {
                attributes[count].id = cudaLaunchAttributeCooperative;
                attributes[count++].val.cooperative = 1;
            } else if (launch.cluster > 0) {
                attributes[count].id = cudaLaunchAttributeClusterDimension;
                attributes[count].val.clusterDim.x = launch.cluster;
                attributes[count].val.clusterDim.y = 1;
                attributes[count++].val.clusterDim.z = 1;
            }
            if (launch.after_previous) {
                attributes[count].id = cudaLaunchAttributeProgrammaticStreamSerialization;
                attributes[count++].val.programmaticStreamSerializationAllowed = 1;
            }
            cudaLaunchConfig_t config{};
            config.gridDim = launch.grid;
            config.blockDim = launch.block;
            config.dynamicSmemBytes = launch.shared_bytes;
            config.stream = stream;
            config.attrs = attributes;
            config.numAttrs = count;
            error = cudaLaunchKernelExC(&config, launch.kernel, kernel_params);
        } else {
            error = cudaLaunchKernel(launch.kernel, launch.grid, launch.block, kernel_params, launch.shared_bytes, stream);
        }
        // The launch call's own result: cudaPeekAtLastError would also report a stale error the caller's
        // earlier CUDA calls left behind, and smx would fail for it.
        if (error != cudaSuccess) return cuda_failure(error, "launching the softmax kernel");
    }
    return SMX_STATUS_SUCCESS;
}

smxStatus_t require_kernel(const void* kernel, smxDataType_t x_dtype, smxDataType_t y_dtype, const char* family) {
    if (kernel != nullptr) return SMX_STATUS_SUCCESS;
    return fail(SMX_STATUS_INTERNAL_ERROR, "no {} kernel instance for {} -> {}", family, dtype_name(x_dtype),
                dtype_name(y_dtype));
}

smxStatus_t blocks_per_multiprocessor(const void* kernel, int threads, std::size_t shared_bytes, int* blocks) {
    const cudaError_t error = cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks, kernel, threads, shared_bytes);
    return error == cudaSuccess ? SMX_STATUS_SUCCESS : cuda_failure(error, "the occupancy query");
}

int max_active_clusters(const void* kernel, int cluster, int threads, std::size_t shared_bytes) {
    cudaLaunchAttribute cluster_attribute{};
    cluster_attribute.id = cudaLaunchAttributeClusterDimension;
    cluster_attribute.val.clusterDim.x = static_cast<unsigned>(cluster);
    cluster_attribute.val.clusterDim.y = 1;
    cluster_attribute.val.clusterDim.z = 1;
    cudaLaunchConfig_t config{};
    config.gridDim = dim3(static_cast<unsigned>(cluster));
    config.blockDim = dim3(static_cast<unsigned>(threads));
    config.dynamicSmemBytes = shared_bytes;
    config.attrs = &cluster_attribute;
    config.numAttrs = 1;
    int active = 0;
    if (cudaOccupancyMaxActiveClusters(&active, kernel, &config) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return active;
}

smxStatus_t allow_all_dynamic_shared_memory(const DeviceLimits& limits, const void* kernel, const char* family,
                                            std::size_t* dynamic_limit) {
    *dynamic_limit = 0;
    cudaFuncAttributes attributes{};
    cudaError_t error = cudaFuncGetAttributes(&attributes, kernel);
    if (error != cudaSuccess) return cuda_failure(error, fmt::format("reading the {} kernel's attributes", family).c_str());
    const std::size_t static_bytes = attributes.sharedSizeBytes;
    if (limits.shared_memory_per_block_optin <= static_bytes) return SMX_STATUS_SUCCESS;
    *dynamic_limit = limits.shared_memory_per_block_optin - static_bytes;
    error = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(*dynamic_limit));
    if (error != cudaSuccess) {
        *dynamic_limit = 0;
        return cuda_failure(error, fmt::format("raising the {} kernel's shared memory limit", family).c_str());
    }
    return SMX_STATUS_SUCCESS;
}

smxStatus_t allow_large_clusters(const void* kernel, const char* family) {
    const cudaError_t error = cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
    if (error == cudaSuccess) return SMX_STATUS_SUCCESS;
    return cuda_failure(error, fmt::format("allowing clusters of 16 for the {} kernel", family).c_str());
}

smxStatus_t max_threads_of(const void* kernel, const char* family, int* max_threads) {
    cudaFuncAttributes attributes{};
    const cudaError_t error = cudaFuncGetAttributes(&attributes, kernel);
    if (error != cudaSuccess) return cuda_failure(error, fmt::format("reading the {} kernel's limits", family).c_str());
    *max_threads = attributes.maxThreadsPerBlock;
    return SMX_STATUS_SUCCESS;
}

}  // namespace smx::cuda
