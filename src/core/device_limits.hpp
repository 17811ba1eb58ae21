// device_limits.hpp - what a handle knows about its device, read once at handle creation.
//
// Plain data, no CUDA types: the core and the plan choosers read it; only src/cuda fills it in.
#pragma once

#include <cstddef>
#include <string>

namespace smx {

struct DeviceLimits {
    std::string name;                       // e.g. "NVIDIA H200"; "cpu" for the host
    int compute_capability_major = 0;       // CUDA only
    int compute_capability_minor = 0;
    int multiprocessor_count = 0;           // SMs (CUDA) or hardware threads (CPU)
    int max_threads_per_block = 0;
    int max_threads_per_multiprocessor = 0;
    int warp_size = 32;
    std::size_t shared_memory_per_block = 0;        // default limit (48 KB)
    std::size_t shared_memory_per_block_optin = 0;  // opt-in limit (~227 KB on Hopper)
    std::size_t shared_memory_per_multiprocessor = 0;
    int registers_per_multiprocessor = 0;
    bool cluster_launch = false;            // thread-block clusters (sm_90+)
    bool cooperative_launch = false;        // grid-wide barriers in cooperatively launched kernels
    std::size_t l2_cache_bytes = 0;
};

}  // namespace smx
