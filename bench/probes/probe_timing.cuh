// probe_timing.cuh - what the probes in this folder share: a checked CUDA call, timing "like smx-bench
// times a case" (the stream held by a spin kernel until every call is enqueued, a CUDA event between
// consecutive calls, the median per call), and a CTA's slice of a row held in registers as grid-regs holds
// it. Header-only, so each probe still builds with one nvcc command.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define PROBE_CHECK(call)                                                                     \
    do {                                                                                      \
        const cudaError_t probe_error_ = (call);                                              \
        if (probe_error_ != cudaSuccess) {                                                    \
            std::printf("ERR %s line %d: %s\n", #call, __LINE__, cudaGetErrorString(probe_error_)); \
            std::exit(1);                                                                     \
        }                                                                                     \
    } while (0)

__global__ void probe_spin(long long cycles) {
    const long long start = clock64();
    while (clock64() - start < cycles) {
    }
}

// A CTA's slice of a row the way grid-regs holds it: CTAs of kThreads threads take consecutive slices of
// kThreads x kUnits 16-byte units, thread t the units t, t + kThreads, ... of its CTA's. load_slice fills
// `held` and returns the sum of the units' first floats, which waits for every load, as softmax's statistics
// do, and gives the caller a value its stores can depend on.
template <int kThreads, int kUnits>
__device__ __forceinline__ float load_slice(const float4* x, long long units, float4 (&held)[kUnits]) {
    const long long begin = static_cast<long long>(blockIdx.x) * kThreads * kUnits + threadIdx.x;
#pragma unroll
    for (int k = 0; k < kUnits; ++k) {
        if (begin + static_cast<long long>(k) * kThreads < units) held[k] = x[begin + k * kThreads];
    }
    float sum = 0.f;
#pragma unroll
    for (int k = 0; k < kUnits; ++k) {
        if (begin + static_cast<long long>(k) * kThreads < units) sum += held[k].x;
    }
    return sum;
}

// Stores what load_slice held, each unit's first float times `scale`.
template <int kThreads, int kUnits>
__device__ __forceinline__ void store_slice(float4* y, long long units, const float4 (&held)[kUnits], float scale) {
    const long long begin = static_cast<long long>(blockIdx.x) * kThreads * kUnits + threadIdx.x;
#pragma unroll
    for (int k = 0; k < kUnits; ++k) {
        if (begin + static_cast<long long>(k) * kThreads < units) {
            float4 value = held[k];
            value.x *= scale;
            y[begin + k * kThreads] = value;
        }
    }
}

// Median microseconds per call of launch(i) (i counts every call, warm-up included, so a probe can rotate
// buffers by it): `warmup` calls first, then `calls` timed ones behind a spin of `spin_cycles` (long enough
// for the host to enqueue them all).
template <class Launch>
double median_us_per_call(cudaStream_t stream, int calls, int warmup, long long spin_cycles, Launch launch) {
    for (int i = 0; i < warmup; ++i) launch(i);
    PROBE_CHECK(cudaStreamSynchronize(stream));
    PROBE_CHECK(cudaGetLastError());
    std::vector<cudaEvent_t> events(calls + 1);
    for (auto& event : events) PROBE_CHECK(cudaEventCreate(&event));
    probe_spin<<<1, 1, 0, stream>>>(spin_cycles);
    PROBE_CHECK(cudaEventRecord(events[0], stream));
    for (int i = 0; i < calls; ++i) {
        launch(warmup + i);
        PROBE_CHECK(cudaEventRecord(events[i + 1], stream));
    }
    PROBE_CHECK(cudaStreamSynchronize(stream));
    PROBE_CHECK(cudaGetLastError());
    std::vector<float> micros(calls);
    for (int i = 0; i < calls; ++i) {
        PROBE_CHECK(cudaEventElapsedTime(&micros[i], events[i], events[i + 1]));
        micros[i] *= 1000.f;
    }
    for (auto& event : events) PROBE_CHECK(cudaEventDestroy(event));
    std::sort(micros.begin(), micros.end());
    return micros[calls / 2];
}

// Two 1 GiB device buffers, filled, that probes rotate their inputs and outputs through, and the benchmark's
// copy bandwidth measured between them: a device-to-device cudaMemcpy of 1 GiB, bytes read + written.
struct GibBuffers {
    static constexpr size_t kBytes = size_t{1} << 30;
    char* a = nullptr;
    char* b = nullptr;
};

// Allocates and fills the buffers, times the memcpy with time_each (a median_us_per_call wrapper), prints the
// rate and returns it in TB/s.
template <class TimeEach>
double allocate_and_time_gib_copy(GibBuffers* buffers, cudaStream_t stream, TimeEach time_each) {
    PROBE_CHECK(cudaMalloc(&buffers->a, GibBuffers::kBytes));
    PROBE_CHECK(cudaMalloc(&buffers->b, GibBuffers::kBytes));
    PROBE_CHECK(cudaMemset(buffers->a, 0x3c, GibBuffers::kBytes));
    PROBE_CHECK(cudaMemset(buffers->b, 0x3c, GibBuffers::kBytes));
    char* a = buffers->a;
    char* b = buffers->b;
    const double micros = time_each([&](int i) {
        PROBE_CHECK(cudaMemcpyAsync(i % 2 ? a : b, i % 2 ? b : a, GibBuffers::kBytes, cudaMemcpyDeviceToDevice, stream));
    });
    const double tbps = 2.0 * GibBuffers::kBytes / (micros * 1e-6) / 1e12;
    std::printf("memcpy 1 GiB: %.1f us, %.3f TB/s (read + write)\n", micros, tbps);
    return tbps;
}
