// pdl_launch.cu - what a single decode row's time per call is made of, launch and grid barrier apart. A
// 1 x 128256 f32 row's bytes (513 KB in, 513 KB out) moved the way grid-regs moves them (32 CTAs of 512
// threads, 16 KiB of x each, loads then stores), with nothing, cooperative_groups' grid sync, or a counter
// barrier between the loads and the stores, and an empty kernel. Launched plainly, with the cooperative
// attribute, and with programmatic dependent launch (PDL: cudaLaunchAttributeProgrammaticStreamSerialization,
// griddepcontrol.wait before a kernel touches memory, then griddepcontrol.launch_dependents to let the next
// kernel start). Timed three ways:
//   events  a CUDA event between consecutive calls, the stream held until all are enqueued (as smx-bench)
//   burst   100 calls between two events, time / 100 (back-to-back launches, one stream)
//   graph   the same 100 calls captured in a CUDA graph, one replay timed, time / 100
// x and y rotated through 1 GiB each. The counter barrier under a plain launch is measured, not usable: only
// a cooperative launch guarantees that every CTA of the grid is resident, so a library spinning on a barrier
// without one can hang when other work holds the SMs.
// Floor: what a call costs in launch, event and grid barrier, apart from its bytes.
// Output: docs/benchmarks/pdl-launch-h200.txt (perf-notes runs 136, 196).
// Built by -DSMX_BUILD_PROBES=ON as build/bench/probes/probe_pdl_launch; alone:
//   nvcc -O3 -std=c++17 -arch=sm_90 bench/probes/pdl_launch.cu -o /tmp/pdl && /tmp/pdl
#include <cooperative_groups.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "probe_timing.cuh"

namespace cg = cooperative_groups;

constexpr int kThreads = 512;
constexpr int kUnits = 2;  // 16-byte units per thread: 512 x 2 x 16 B = 16 KiB a CTA

enum class Barrier { kNone, kGridSync, kCounter };

// A grid barrier by hand: every CTA counts itself in; the last to arrive resets the count and moves the
// generation on, which the others spin on. `words` holds the count then the generation, both zero at first.
__device__ void counter_barrier(unsigned* words) {
    __syncthreads();
    if (threadIdx.x == 0) {
        volatile unsigned* generation = words + 1;
        const unsigned seen = *generation;  // read before arriving: it cannot move until this CTA arrives
        __threadfence();
        if (atomicAdd(words, 1u) == gridDim.x - 1) {
            atomicExch(words, 0u);
            __threadfence();
            atomicAdd(words + 1, 1u);
        } else {
            while (*generation == seen) {
            }
        }
        __threadfence();
    }
    __syncthreads();
}

// kPdl: wait for the previous kernel's memory before the first access, then let the next kernel launch.
template <bool kPdl, Barrier kBarrier>
__global__ void __launch_bounds__(kThreads) slice_copy(const float4* x, float4* y, long long units, float* sink,
                                                       unsigned* barrier_words) {
    if (kPdl) {
        asm volatile("griddepcontrol.wait;" ::: "memory");
        asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
    }
    float4 held[kUnits];
    const float sum = load_slice<kThreads, kUnits>(x, units, held);
    __syncthreads();
    if (kBarrier == Barrier::kGridSync) cg::this_grid().sync();
    if (kBarrier == Barrier::kCounter) counter_barrier(barrier_words);
    if (sum == 1234567.f) sink[0] = sum;
    store_slice<kThreads, kUnits>(y, units, held, 1.f);
}

// The copy's signature, so that one launcher serves both.
template <bool kPdl>
__global__ void empty_kernel(const float4*, float4*, long long, float*, unsigned*) {
    if (kPdl) {
        asm volatile("griddepcontrol.wait;" ::: "memory");
        asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
    }
}

// Median over 7 samples of the microseconds between two events around enqueue(sample), divided by `calls`;
// a spin first holds the stream so that the host's enqueue rate stays out of the time.
template <class Enqueue>
double median_us_between_events(cudaStream_t s, int calls, Enqueue enqueue) {
    cudaEvent_t e0, e1;
    PROBE_CHECK(cudaEventCreate(&e0));
    PROBE_CHECK(cudaEventCreate(&e1));
    std::vector<float> samples;
    for (int sample = 0; sample < 7; ++sample) {
        probe_spin<<<1, 1, 0, s>>>(20000000);
        PROBE_CHECK(cudaEventRecord(e0, s));
        enqueue(sample);
        PROBE_CHECK(cudaEventRecord(e1, s));
        PROBE_CHECK(cudaStreamSynchronize(s));
        float ms = 0.f;
        PROBE_CHECK(cudaEventElapsedTime(&ms, e0, e1));
        samples.push_back(ms * 1000.f / calls);
    }
    PROBE_CHECK(cudaEventDestroy(e0));
    PROBE_CHECK(cudaEventDestroy(e1));
    std::sort(samples.begin(), samples.end());
    return samples[samples.size() / 2];
}

// us per call over `calls` back-to-back launches between two events (after a warm-up of 10).
template <class Launch>
double burst_us(cudaStream_t s, int calls, Launch launch) {
    for (int i = 0; i < 10; ++i) launch(i);
    return median_us_between_events(s, calls, [&](int sample) {
        for (int i = 0; i < calls; ++i) launch(10 + sample * calls + i);
    });
}

// us per call of a graph holding `calls` launches, one replay per sample; -1 where instantiation fails.
template <class Launch>
double graph_us(cudaStream_t s, int calls, Launch launch) {
    cudaGraph_t graph;
    PROBE_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < calls; ++i) launch(i);
    PROBE_CHECK(cudaStreamEndCapture(s, &graph));
    cudaGraphExec_t exec;
    if (cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess) {
        cudaGetLastError();
        cudaGraphDestroy(graph);
        return -1.0;
    }
    PROBE_CHECK(cudaGraphLaunch(exec, s));  // warm-up
    PROBE_CHECK(cudaStreamSynchronize(s));
    const double us = median_us_between_events(s, calls, [&](int) { PROBE_CHECK(cudaGraphLaunch(exec, s)); });
    PROBE_CHECK(cudaGraphExecDestroy(exec));
    PROBE_CHECK(cudaGraphDestroy(graph));
    return us;
}

int main() {
    cudaStream_t s;
    PROBE_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    float* sink;
    PROBE_CHECK(cudaMalloc(&sink, 64));
    unsigned* barrier_words;
    PROBE_CHECK(cudaMalloc(&barrier_words, 2 * sizeof(unsigned)));
    PROBE_CHECK(cudaMemset(barrier_words, 0, 2 * sizeof(unsigned)));
    const auto time_each = [&](auto launch) { return median_us_per_call(s, 200, 10, 20000000, launch); };
    GibBuffers buffers;
    allocate_and_time_gib_copy(&buffers, s, time_each);

    const long long cols = 128256;
    const size_t bytes = cols * sizeof(float);
    const long long units = static_cast<long long>(bytes / 16);
    const int ctas = static_cast<int>((units + kThreads * kUnits - 1) / (kThreads * kUnits));
    const int slots = static_cast<int>(GibBuffers::kBytes / bytes);
    const auto x_of = [&](int i) { return reinterpret_cast<const float4*>(buffers.a + (i % slots) * bytes); };
    const auto y_of = [&](int i) { return reinterpret_cast<float4*>(buffers.b + (i % slots) * bytes); };
    std::printf("1 x %lld f32: %zu bytes in and out, %d CTAs of %d threads\n", cols, bytes, ctas, kThreads);
    std::printf("%-30s %8s %8s %8s   (us per call)\n", "kernel", "events", "burst", "graph");

    const auto run = [&](const char* name, auto kernel, int grid, bool pdl, bool cooperative) {
        cudaLaunchAttribute attributes[2];
        int count = 0;
        if (pdl) {
            attributes[count].id = cudaLaunchAttributeProgrammaticStreamSerialization;
            attributes[count].val.programmaticStreamSerializationAllowed = 1;
            ++count;
        }
        if (cooperative) {
            attributes[count].id = cudaLaunchAttributeCooperative;
            attributes[count].val.cooperative = 1;
            ++count;
        }
        cudaLaunchConfig_t config{};
        config.gridDim = grid;
        config.blockDim = kThreads;
        config.stream = s;
        config.attrs = attributes;
        config.numAttrs = count;
        // A trial launch first: a combination the driver refuses is reported, not timed.
        const cudaError_t trial = cudaLaunchKernelEx(&config, kernel, x_of(0), y_of(0), units, sink, barrier_words);
        const cudaError_t done = cudaStreamSynchronize(s);
        if (trial != cudaSuccess || done != cudaSuccess) {
            std::printf("%-30s refused: %s\n", name, cudaGetErrorString(trial != cudaSuccess ? trial : done));
            cudaGetLastError();
            return;
        }
        const auto launch = [&](int i) { PROBE_CHECK(cudaLaunchKernelEx(&config, kernel, x_of(i), y_of(i), units, sink, barrier_words)); };
        const double events = time_each(launch);
        const double burst = burst_us(s, 100, launch);
        const double graph = graph_us(s, 100, launch);
        std::printf("%-30s %8.2f %8.2f %8.2f\n", name, events, burst, graph);
    };
    for (int rep = 0; rep < 2; ++rep) {
        run("copy, plain", slice_copy<false, Barrier::kNone>, ctas, false, false);
        run("copy, PDL", slice_copy<true, Barrier::kNone>, ctas, true, false);
        run("copy, cooperative", slice_copy<false, Barrier::kNone>, ctas, false, true);
        run("copy + grid sync, cooperative", slice_copy<false, Barrier::kGridSync>, ctas, false, true);
        run("copy + grid sync, coop + PDL", slice_copy<true, Barrier::kGridSync>, ctas, true, true);
        run("copy + counter, cooperative", slice_copy<false, Barrier::kCounter>, ctas, false, true);
        run("copy + counter, plain", slice_copy<false, Barrier::kCounter>, ctas, false, false);
        run("empty, plain", empty_kernel<false>, ctas, false, false);
        run("empty, PDL", empty_kernel<true>, ctas, true, false);
    }
    return 0;
}
