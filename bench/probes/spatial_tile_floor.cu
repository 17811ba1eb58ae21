// spatial_tile_floor.cu - the floor of the spatial-tile structure on the layouts grid (perf-notes.md runs
// 89-91 and 93): the plan's own geometry (a CTA of 256 threads owns W contiguous inner columns over a slice
// of the axis, clusters of C CTAs along the axis, thread t on 16-byte vector t % V at axis positions t / V +
// k (256 / V)), moving bytes only, no softmax arithmetic. First table, per layout and element size (4 or 2
// bytes: only the geometry differs), in five modes:
//   smem      cp.async of the CTA's whole slice into shared memory, wait, CTA barrier, store it from shared
//             memory: the tile kernel's memory chain (plain launch, no cluster)
//   cluster   the same as a cluster launch with one cluster barrier between the load and the store
//   regs      the slice held in registers instead (up to 16 vectors per thread), one CTA barrier, plain launch
//   stream    no cache at all: each thread copies its rows 4 at a time (the access pattern's own floor)
//   memcpy    cudaMemcpyAsync of the same bytes (the copy line; every % is of it)
// Second table: stream mode at row pieces of 64-512 bytes (what the access pattern allows at other tile
// widths). Third: smem mode with each CTA's load order rotated to the step the global timer gives, so CTAs
// resident at once load the same rows together (a DRAM-locality hypothesis; it measured slower). Fourth
// (runs 91 and 93): smem mode with the loads as TMA boxes (and the stores too), plain launches, then the
// cluster mode beside its TMA form, for the layouts the plan clusters.
// Timed like smx-bench times a case (CUDA events between back-to-back launches, the stream held by a spin
// kernel, median of 30), four pairs of x and y buffers taken in turn.
// Floor: the spatial-tile plan's geometry moving bytes only, per layout.
// With -DWHOLE_LINES the smem, cluster and aligned modes' cp.async copies ask L2 for whole 128-byte lines
// (.L2::128B), as the tile kernel does for 64-byte tile rows since perf-notes run 148 (run 152).
// Output: docs/benchmarks/spatial-tile-floor-h200.txt (perf-notes runs 89-93); with -DWHOLE_LINES,
// docs/benchmarks/spatial-tile-floor-whole-lines-h200.txt (run 152).
// Built by -DSMX_BUILD_PROBES=ON as build/bench/probes/probe_spatial_tile_floor (and
// probe_spatial_tile_floor_whole_lines, -DWHOLE_LINES); alone:
//   nvcc -O3 -std=c++17 -arch=sm_90 bench/probes/spatial_tile_floor.cu -o /tmp/stf && /tmp/stf
#include <cooperative_groups.h>
#include <cuda.h>
#include <cudaTypedefs.h>

#include <cstdio>
#include <cstring>

#include "probe_timing.cuh"

namespace cg = cooperative_groups;

constexpr int kThreads = 256;
constexpr int kMaxRegRows = 16;

struct Geometry {
    const char* x;
    char* y;
    long long outer_stride, axis_stride;  // bytes
    long long axis, tiles_per_outer;
    int width_bytes, vectors, slice, cluster;
    int step_ns;  // kSmemAligned: nanoseconds per step of the rotation
};

enum Mode { kSmem = 0, kCluster = 1, kRegs = 2, kStream = 3, kSmemAligned = 4 };

__device__ __forceinline__ void copy_async_16(void* shared_target, const void* global_source) {
    const unsigned target = static_cast<unsigned>(__cvta_generic_to_shared(shared_target));
#ifdef WHOLE_LINES
    asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16;\n" ::"r"(target), "l"(global_source) : "memory");
#else
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(target), "l"(global_source) : "memory");
#endif
}

// The tile and the slice of the axis that the CTA of cluster rank `rank` owns.
struct CtaSlice {
    long long outer, tile_in_outer, slice_begin;
    int count;  // axis positions in the slice
};

__device__ CtaSlice cta_slice(const Geometry& g, unsigned rank) {
    CtaSlice c;
    const long long tile = blockIdx.x / g.cluster;
    c.outer = tile / g.tiles_per_outer;
    c.tile_in_outer = tile - c.outer * g.tiles_per_outer;
    c.slice_begin = static_cast<long long>(rank) * g.slice;
    const long long left = g.axis - c.slice_begin;
    c.count = static_cast<int>(left < g.slice ? left : g.slice);
    return c;
}

// Thread tid's share of a slice, as the tile kernel splits it: its first row of x and y, the step between
// its rows, how many it has, and where they sit in the shared-memory cache ([slice row][tile row bytes]).
struct ThreadRows {
    const char* source;
    char* target;
    long long step;
    int rows, cache_offset, cache_step;
};

__device__ ThreadRows thread_rows(const Geometry& g, const CtaSlice& c, int tid) {
    const int vector = tid & (g.vectors - 1);
    const int axis_group = tid / g.vectors;
    const int axis_groups = kThreads / g.vectors;
    const long long offset = c.outer * g.outer_stride + c.slice_begin * g.axis_stride + c.tile_in_outer * g.width_bytes + vector * 16;
    ThreadRows t;
    t.source = g.x + offset + axis_group * g.axis_stride;
    t.target = g.y + offset + axis_group * g.axis_stride;
    t.step = axis_groups * g.axis_stride;
    t.rows = c.count > axis_group ? (c.count - axis_group + axis_groups - 1) / axis_groups : 0;
    t.cache_offset = axis_group * g.width_bytes + vector * 16;
    t.cache_step = axis_groups * g.width_bytes;
    return t;
}

template <int kMode>
__global__ void __launch_bounds__(kThreads) tile_copy(const Geometry g) {
    extern __shared__ __align__(16) unsigned char cache[];
    const CtaSlice slice = cta_slice(g, kMode == kCluster ? cg::this_cluster().block_rank() : blockIdx.x % g.cluster);
    const ThreadRows t = thread_rows(g, slice, threadIdx.x);
    const char* source = t.source;
    char* target = t.target;
    const long long step = t.step;
    const int rows = t.rows;
    const int axis_groups = kThreads / g.vectors;

    if constexpr (kMode == kSmem || kMode == kCluster || kMode == kSmemAligned) {
        unsigned char* cache_row = cache + t.cache_offset;
        const int cache_step = t.cache_step;
        if constexpr (kMode == kSmemAligned) {
            // Every CTA starts at the step the clock says, so CTAs resident at once load the same rows at
            // about the same time (neighbouring tiles then read neighbouring pieces of one DRAM row together).
            __shared__ int rotation;
            if (threadIdx.x == 0) {
                unsigned long long now;
                asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
                const int max_rows = (g.slice + axis_groups - 1) / axis_groups;
                rotation = static_cast<int>((now / static_cast<unsigned long long>(g.step_ns)) % static_cast<unsigned long long>(max_rows));
            }
            __syncthreads();
            const int first = rows > 0 ? rotation % rows : 0;
            for (int i = first; i < rows; ++i) copy_async_16(cache_row + i * cache_step, source + i * step);
            for (int i = 0; i < first; ++i) copy_async_16(cache_row + i * cache_step, source + i * step);
        } else {
#pragma unroll 4
            for (int i = 0; i < rows; ++i) copy_async_16(cache_row + i * cache_step, source + i * step);
        }
        asm volatile("cp.async.wait_all;\n" ::: "memory");
        __syncthreads();  // stands in for the statistics' CTA fold
        if constexpr (kMode == kCluster) cg::this_cluster().sync();  // and for the cluster's exchange
#pragma unroll 4
        for (int i = 0; i < rows; ++i) {
            *reinterpret_cast<uint4*>(target + i * step) = *reinterpret_cast<const uint4*>(cache_row + i * cache_step);
        }
    } else if constexpr (kMode == kRegs) {
        uint4 held[kMaxRegRows];
#pragma unroll
        for (int i = 0; i < kMaxRegRows; ++i) {
            if (i < rows) held[i] = *reinterpret_cast<const uint4*>(source + i * step);
        }
        __syncthreads();
#pragma unroll
        for (int i = 0; i < kMaxRegRows; ++i) {
            if (i < rows) *reinterpret_cast<uint4*>(target + i * step) = held[i];
        }
    } else {
        for (int i = 0; i < rows; i += 4) {
            uint4 held[4];
#pragma unroll
            for (int u = 0; u < 4; ++u) {
                if (i + u < rows) held[u] = *reinterpret_cast<const uint4*>(source + (i + u) * step);
            }
#pragma unroll
            for (int u = 0; u < 4; ++u) {
                if (i + u < rows) *reinterpret_cast<uint4*>(target + (i + u) * step) = held[u];
            }
        }
    }
}

// The smem mode with the tile's loads made by the tensor memory accelerator: one thread issues box copies of
// up to 256 rows x W bytes that land in shared memory and complete on an mbarrier, instead of every thread
// issuing 16-byte cp.async copies. kTmaStore: the store from shared memory by TMA as well (one thread).
// kClustered: launched as the plan's clusters, with one cluster barrier between the load and the store (as
// the cluster mode adds to smem).
template <bool kTmaStore, bool kClustered = false>
__global__ void __launch_bounds__(kThreads) tile_copy_tma(const __grid_constant__ CUtensorMap x_map,
                                                          const __grid_constant__ CUtensorMap y_map, const Geometry g,
                                                          int box_rows) {
    extern __shared__ __align__(128) unsigned char tma_cache[];
    __shared__ __align__(8) unsigned long long landed;
    const int tid = threadIdx.x;
    const CtaSlice slice = cta_slice(g, kClustered ? cg::this_cluster().block_rank() : blockIdx.x % g.cluster);
    const long long outer = slice.outer;
    const long long slice_begin = slice.slice_begin;
    const int count = slice.count;
    const int boxes = (count + box_rows - 1) / box_rows;
    const unsigned landed_address = static_cast<unsigned>(__cvta_generic_to_shared(&landed));
    const int column = static_cast<int>(slice.tile_in_outer * g.width_bytes / 4);
    if (tid == 0) {
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(landed_address) : "memory");
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(landed_address),
                     "r"(boxes * box_rows * g.width_bytes)
                     : "memory");
        for (int b = 0; b < boxes; ++b) {
            const unsigned target = static_cast<unsigned>(__cvta_generic_to_shared(tma_cache + b * box_rows * g.width_bytes));
            asm volatile(
                "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];\n" ::"r"(target),
                "l"(reinterpret_cast<unsigned long long>(&x_map)), "r"(column), "r"(static_cast<int>(slice_begin + b * box_rows)),
                "r"(static_cast<int>(outer)), "r"(landed_address)
                : "memory");
        }
    }
    __syncthreads();  // the mbarrier is initialized before anyone waits on it
    unsigned done = 0;
    while (!done) {
        asm volatile(
            "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0;\n selp.u32 %0, 1, 0, p;\n}\n"
            : "=r"(done)
            : "r"(landed_address)
            : "memory");
    }
    if constexpr (kClustered) cg::this_cluster().sync();
    if constexpr (kTmaStore) {
        if (tid == 0) {
            for (int b = 0; b < boxes; ++b) {
                const unsigned source = static_cast<unsigned>(__cvta_generic_to_shared(tma_cache + b * box_rows * g.width_bytes));
                asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%1, %2, %3}], [%4];\n" ::"l"(
                                 reinterpret_cast<unsigned long long>(&y_map)),
                             "r"(column), "r"(static_cast<int>(slice_begin + b * box_rows)), "r"(static_cast<int>(outer)), "r"(source)
                             : "memory");
            }
            asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
            asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");  // shared memory stays valid until read
        }
    } else {
        const ThreadRows t = thread_rows(g, slice, tid);
#pragma unroll 4
        for (int i = 0; i < t.rows; ++i) {
            *reinterpret_cast<uint4*>(t.target + i * t.step) = *reinterpret_cast<const uint4*>(tma_cache + t.cache_offset + i * t.cache_step);
        }
    }
}

// x filled with its own word index, so a copy that misses or misplaces any 16 bytes shows in compare_words.
__global__ void fill_words(unsigned* x, long long words) {
    for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < words; i += static_cast<long long>(gridDim.x) * blockDim.x) {
        x[i] = static_cast<unsigned>(i * 2654435761ull);
    }
}

__global__ void compare_words(const unsigned* x, const unsigned* y, long long words, unsigned long long* mismatches) {
    unsigned long long local = 0;
    for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < words; i += static_cast<long long>(gridDim.x) * blockDim.x) {
        local += x[i] != y[i];
    }
    if (local != 0) atomicAdd(mismatches, local);
}

struct Layout {
    const char* label;
    long long outer, axis, inner;
    // The plan's choice per element size (docs/benchmarks/README.md, layouts records): tile width in
    // elements, slice, cluster.
    int width4, cluster4, slice4;
    int width2, cluster2, slice2;
};

// The geometry of `layout` at element size element_bytes, with tile rows of width_bytes, slices of `slice` axis
// positions and `cluster` CTAs per tile (x and y are set per call).
Geometry geometry_of(const Layout& layout, int element_bytes, int width_bytes, int slice, int cluster) {
    Geometry g{};
    g.axis = layout.axis;
    g.axis_stride = layout.inner * element_bytes;
    g.outer_stride = layout.axis * layout.inner * element_bytes;
    g.width_bytes = width_bytes;
    g.vectors = width_bytes / 16;
    g.slice = slice;
    g.cluster = cluster;
    g.tiles_per_outer = layout.inner * element_bytes / width_bytes;
    return g;
}

// The plan's own geometry for `layout` (docs/benchmarks/README.md, layouts records).
Geometry plan_geometry(const Layout& layout, int element_bytes) {
    const bool wide = element_bytes == 4;
    return geometry_of(layout, element_bytes, (wide ? layout.width4 : layout.width2) * element_bytes, wide ? layout.slice4 : layout.slice2,
                       wide ? layout.cluster4 : layout.cluster2);
}

int main() {
    cudaStream_t s;
    PROBE_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    const Layout layouts[] = {
        {"32x1024x1024 dim=1", 32, 1024, 1024, 16, 1, 1024, 32, 1, 1024},
        {"8192x4096 dim=0", 1, 8192, 4096, 16, 8, 1024, 32, 8, 1024},
        {"64x128x4096 dim=1", 64, 128, 4096, 64, 1, 128, 128, 1, 128},
        {"16x8x4096x64 dim=2", 128, 4096, 64, 32, 8, 512, 64, 8, 512},
        {"8192x4096 transposed", 1, 4096, 8192, 32, 8, 512, 64, 8, 512},
    };
    const size_t max_bytes = 32ll * 1024 * 1024 * 4;  // every layout is 32 Mi elements
    // Four x and four y buffers taken in turn (1 GiB in all), so no call finds its operands in the 60 MiB L2.
    constexpr int kBuffers = 4;
    char* xs[kBuffers];
    char* ys[kBuffers];
    for (int i = 0; i < kBuffers; ++i) {
        PROBE_CHECK(cudaMalloc(&xs[i], max_bytes));
        PROBE_CHECK(cudaMalloc(&ys[i], max_bytes));
        fill_words<<<1024, 256>>>(reinterpret_cast<unsigned*>(xs[i]), static_cast<long long>(max_bytes / 4));
        PROBE_CHECK(cudaGetLastError());
    }
    unsigned long long* mismatches;
    PROBE_CHECK(cudaMalloc(&mismatches, sizeof(unsigned long long)));
    PROBE_CHECK(cudaDeviceSynchronize());
    // Poisons every y, times `launch` (which leaves buffer pair 0 written last: 3 + 30 calls), then counts the
    // words of the first `bytes` of y 0 that differ from x 0: -1 marks a copy that was not exact.
    const auto poison = [&] {
        for (int i = 0; i < kBuffers; ++i) PROBE_CHECK(cudaMemsetAsync(ys[i], 0xff, max_bytes, s));
    };
    const auto wrong_words = [&](long long bytes) {
        PROBE_CHECK(cudaMemsetAsync(mismatches, 0, sizeof(unsigned long long), s));
        compare_words<<<1024, 256, 0, s>>>(reinterpret_cast<const unsigned*>(xs[0]), reinterpret_cast<const unsigned*>(ys[0]), bytes / 4,
                                          mismatches);
        PROBE_CHECK(cudaGetLastError());
        unsigned long long count = 0;
        PROBE_CHECK(cudaMemcpyAsync(&count, mismatches, sizeof(count), cudaMemcpyDeviceToHost, s));
        PROBE_CHECK(cudaStreamSynchronize(s));
        return count;
    };
    unsigned long long total_wrong = 0;
    // One launch without a cluster: `grid` CTAs of kThreads with `smem` bytes of dynamic shared memory.
    const auto launch_plain = [&](const void* kernel, unsigned grid, int smem, void** args) {
        cudaLaunchConfig_t config{};
        config.gridDim = dim3(grid);
        config.blockDim = dim3(kThreads);
        config.dynamicSmemBytes = static_cast<size_t>(smem);
        config.stream = s;
        PROBE_CHECK(cudaLaunchKernelExC(&config, kernel, args));
    };
    int current = 0;  // the buffer pair of the call being enqueued
    const auto time_each = [&](auto launch) {
        return median_us_per_call(s, 30, 3, 4000000, [&](int call) {
            current = call % kBuffers;
            launch();
        });
    };
    const void* kernels[] = {reinterpret_cast<const void*>(tile_copy<kSmem>), reinterpret_cast<const void*>(tile_copy<kCluster>),
                             reinterpret_cast<const void*>(tile_copy<kRegs>), reinterpret_cast<const void*>(tile_copy<kStream>),
                             reinterpret_cast<const void*>(tile_copy<kSmemAligned>)};
    const char* kernel_names[] = {"smem", "cluster", "regs", "stream", "smem aligned"};
    for (int mode = kSmem; mode <= kSmemAligned; ++mode) {
        const void* kernel = kernels[mode];
        const char* name = kernel_names[mode];
        PROBE_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 96 * 1024));
        PROBE_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
        cudaFuncAttributes attributes{};
        PROBE_CHECK(cudaFuncGetAttributes(&attributes, kernel));
        std::printf("%-12s kernel: %d registers, %zu bytes of local memory\n", name, attributes.numRegs, attributes.localSizeBytes);
    }
    std::printf("\n%-22s %2s %5s %2s %6s %5s | %9s %9s %9s %9s %9s | %6s %6s %6s %6s  (%% of memcpy; CTAs/SM smem)\n", "layout",
                "eb", "width", "C", "slice", "smem", "memcpy us", "smem us", "clust us", "regs us", "strm us", "smem", "clust",
                "regs", "stream");
    for (const Layout& layout : layouts) {
        for (int element_bytes : {4, 2}) {
            const long long bytes = layout.outer * layout.axis * layout.inner * element_bytes;
            const double memcpy_us = time_each([&] { PROBE_CHECK(cudaMemcpyAsync(ys[current], xs[current], bytes, cudaMemcpyDeviceToDevice, s)); });
            Geometry g = plan_geometry(layout, element_bytes);
            const int width = g.width_bytes / element_bytes;
            const int smem = g.slice * g.width_bytes;
            const unsigned grid = static_cast<unsigned>(layout.outer * g.tiles_per_outer * g.cluster);
            double micros[4] = {0, 0, 0, 0};
            int per_sm = 0;
            PROBE_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernels[kSmem], kThreads, smem));
            for (int mode = kSmem; mode <= kStream; ++mode) {
                const bool uses_cache = mode == kSmem || mode == kCluster;
                const int rows_per_thread = (g.slice + kThreads / g.vectors - 1) / (kThreads / g.vectors);
                if (mode == kCluster && g.cluster == 1) continue;
                if (mode == kRegs && rows_per_thread > kMaxRegRows) continue;
                cudaLaunchAttribute attribute{};
                attribute.id = cudaLaunchAttributeClusterDimension;
                attribute.val.clusterDim.x = static_cast<unsigned>(g.cluster);
                attribute.val.clusterDim.y = 1;
                attribute.val.clusterDim.z = 1;
                cudaLaunchConfig_t config{};
                config.gridDim = dim3(grid);
                config.blockDim = dim3(kThreads);
                config.dynamicSmemBytes = uses_cache ? static_cast<size_t>(smem) : 0;
                config.stream = s;
                config.attrs = &attribute;
                config.numAttrs = mode == kCluster ? 1 : 0;
                poison();
                micros[mode] = time_each([&] {
                    g.x = xs[current];
                    g.y = ys[current];
                    void* args[] = {&g};
                    PROBE_CHECK(cudaLaunchKernelExC(&config, kernels[mode], args));
                });
                total_wrong += wrong_words(bytes);
            }
            const auto pct = [&](double us) { return us == 0.0 ? 0.0 : 100.0 * memcpy_us / us; };
            std::printf("%-22s %2d %5d %2d %6d %5d | %9.1f %9.1f %9.1f %9.1f %9.1f | %5.1f%% %5.1f%% %5.1f%% %5.1f%%  (%d)\n",
                        layout.label, element_bytes, width, g.cluster, g.slice, smem, memcpy_us, micros[kSmem], micros[kCluster],
                        micros[kRegs], micros[kStream], pct(micros[kSmem]), pct(micros[kCluster]), pct(micros[kRegs]),
                        pct(micros[kStream]), per_sm);
        }
    }
    // The access pattern alone at other row-piece widths: stream mode, the axis split into slices of up to
    // 1024 positions (as many CTAs as the plan's clusters make), one CTA per (tile, slice), no cluster.
    std::printf("\nstream mode by row-piece width (%% of memcpy):\n%-22s", "layout");
    const int piece_widths[] = {64, 128, 256, 512};
    for (const int piece : piece_widths) std::printf(" %6d B", piece);
    std::printf("\n");
    for (const Layout& layout : layouts) {
        const long long bytes = layout.outer * layout.axis * layout.inner * 4;
        const double memcpy_us = time_each([&] { PROBE_CHECK(cudaMemcpyAsync(ys[current], xs[current], bytes, cudaMemcpyDeviceToDevice, s)); });
        std::printf("%-22s", layout.label);
        for (const int piece : piece_widths) {
            const int slice = static_cast<int>(layout.axis < 1024 ? layout.axis : 1024);
            // cluster: here the CTAs per tile of a plain launch
            Geometry g = geometry_of(layout, 4, piece, slice, static_cast<int>((layout.axis + slice - 1) / slice));
            if (g.tiles_per_outer == 0) {
                std::printf(" %8s", "-");
                continue;
            }
            const unsigned grid = static_cast<unsigned>(layout.outer * g.tiles_per_outer * g.cluster);
            poison();
            const double micros = time_each([&] {
                g.x = xs[current];
                g.y = ys[current];
                tile_copy<kStream><<<grid, kThreads, 0, s>>>(g);
                PROBE_CHECK(cudaGetLastError());
            });
            total_wrong += wrong_words(bytes);
            std::printf(" %7.1f%%", 100.0 * memcpy_us / micros);
        }
        std::printf("\n");
    }

    // smem mode with each CTA's load order rotated to the step the global timer gives (plain launch, the
    // plan's geometry for 4-byte elements): whether CTAs reading the same rows at the same time help DRAM.
    std::printf("\nsmem mode, load order aligned in time (%% of memcpy), 4-byte geometry:\n%-22s %7s", "layout", "plain");
    const int steps_ns[] = {30, 100, 300, 1000};
    for (const int step_ns : steps_ns) std::printf(" %5d ns", step_ns);
    std::printf("\n");
    for (const Layout& layout : layouts) {
        const long long bytes = layout.outer * layout.axis * layout.inner * 4;
        const double memcpy_us = time_each([&] { PROBE_CHECK(cudaMemcpyAsync(ys[current], xs[current], bytes, cudaMemcpyDeviceToDevice, s)); });
        Geometry g = plan_geometry(layout, 4);
        const int smem = g.slice * g.width_bytes;
        const unsigned grid = static_cast<unsigned>(layout.outer * g.tiles_per_outer * g.cluster);
        const auto time_mode = [&](int mode) {
            poison();
            const double micros = time_each([&] {
                g.x = xs[current];
                g.y = ys[current];
                void* args[] = {&g};
                launch_plain(kernels[mode], grid, smem, args);
            });
            total_wrong += wrong_words(bytes);
            return micros;
        };
        std::printf("%-22s %6.1f%%", layout.label, 100.0 * memcpy_us / time_mode(kSmem));
        for (const int step_ns : steps_ns) {
            g.step_ns = step_ns;
            std::printf(" %7.1f%%", 100.0 * memcpy_us / time_mode(kSmemAligned));
        }
        std::printf("\n");
    }

    // smem mode with TMA: the loads (and then also the stores) as box copies issued by one thread.
    PFN_cuTensorMapEncodeTiled_v12000 encode = nullptr;
    cudaDriverEntryPointQueryResult query{};
    PROBE_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", reinterpret_cast<void**>(&encode), 12000,
                                                 cudaEnableDefault, &query));
    if (encode == nullptr || query != cudaDriverEntryPointSuccess) {
        std::printf("cuTensorMapEncodeTiled not available\n");
        return 1;
    }
    const void* tma_kernels[] = {reinterpret_cast<const void*>(tile_copy_tma<false>), reinterpret_cast<const void*>(tile_copy_tma<true>),
                                 reinterpret_cast<const void*>(tile_copy_tma<false, true>)};
    for (const void* kernel : tma_kernels) {
        PROBE_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 96 * 1024));
        PROBE_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
    }
    std::printf("\nsmem mode with TMA box copies (%% of memcpy; plain launches, the last two columns in the plan's clusters):\n%-22s %2s %7s %9s %9s %10s %10s\n",
                "layout", "eb", "smem", "tma load", "tma both", "clust", "tma+clust");
    for (const Layout& layout : layouts) {
        for (int element_bytes : {4, 2}) {
            const long long bytes = layout.outer * layout.axis * layout.inner * element_bytes;
            const double memcpy_us = time_each([&] { PROBE_CHECK(cudaMemcpyAsync(ys[current], xs[current], bytes, cudaMemcpyDeviceToDevice, s)); });
            Geometry g = plan_geometry(layout, element_bytes);
            int box_rows = g.slice < 256 ? g.slice : 256;
            const int smem = g.slice * g.width_bytes;
            const unsigned grid = static_cast<unsigned>(layout.outer * g.tiles_per_outer * g.cluster);
            CUtensorMap x_maps[kBuffers], y_maps[kBuffers];
            for (int i = 0; i < kBuffers; ++i) {
                const cuuint64_t dims[3] = {static_cast<cuuint64_t>(layout.inner * element_bytes / 4), static_cast<cuuint64_t>(layout.axis),
                                            static_cast<cuuint64_t>(layout.outer)};
                const cuuint64_t strides[2] = {static_cast<cuuint64_t>(g.axis_stride), static_cast<cuuint64_t>(g.outer_stride)};
                const cuuint32_t box[3] = {static_cast<cuuint32_t>(g.width_bytes / 4), static_cast<cuuint32_t>(box_rows), 1};
                const cuuint32_t element_strides[3] = {1, 1, 1};
                for (int which = 0; which < 2; ++which) {
                    const CUresult result = encode(which == 0 ? &x_maps[i] : &y_maps[i], CU_TENSOR_MAP_DATA_TYPE_UINT32, 3,
                                                   which == 0 ? xs[i] : ys[i], dims, strides, box, element_strides,
                                                   CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                                                   CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
                    if (result != CUDA_SUCCESS) {
                        std::printf("cuTensorMapEncodeTiled failed: %d\n", static_cast<int>(result));
                        return 1;
                    }
                }
            }
            // clustered: a launch in the plan's clusters (kernels that sync the cluster need one).
            const auto time_launch = [&](const void* kernel, bool tma, bool clustered) {
                cudaLaunchAttribute attribute{};
                attribute.id = cudaLaunchAttributeClusterDimension;
                attribute.val.clusterDim.x = static_cast<unsigned>(g.cluster);
                attribute.val.clusterDim.y = 1;
                attribute.val.clusterDim.z = 1;
                poison();
                const double micros = time_each([&] {
                    g.x = xs[current];
                    g.y = ys[current];
                    void* tma_args[] = {&x_maps[current], &y_maps[current], &g, &box_rows};
                    void* args[] = {&g};
                    cudaLaunchConfig_t config{};
                    config.gridDim = dim3(grid);
                    config.blockDim = dim3(kThreads);
                    config.dynamicSmemBytes = static_cast<size_t>(smem);
                    config.stream = s;
                    config.attrs = &attribute;
                    config.numAttrs = clustered ? 1 : 0;
                    PROBE_CHECK(cudaLaunchKernelExC(&config, kernel, tma ? tma_args : args));
                });
                total_wrong += wrong_words(bytes);
                return micros;
            };
            const double smem_us = time_launch(kernels[kSmem], false, false);
            const double load_us = time_launch(tma_kernels[0], true, false);
            const double both_us = time_launch(tma_kernels[1], true, false);
            std::printf("%-22s %2d %6.1f%% %8.1f%% %8.1f%%", layout.label, element_bytes, 100.0 * memcpy_us / smem_us,
                        100.0 * memcpy_us / load_us, 100.0 * memcpy_us / both_us);
            if (g.cluster > 1) {
                const double cluster_us = time_launch(kernels[kCluster], false, true);
                const double tma_cluster_us = time_launch(tma_kernels[2], true, true);
                std::printf(" %9.1f%% %9.1f%%", 100.0 * memcpy_us / cluster_us, 100.0 * memcpy_us / tma_cluster_us);
            }
            std::printf("\n");
        }
    }
    std::printf("\nevery timed copy checked against x: %llu words wrong\n", total_wrong);
    return total_wrong == 0 ? 0 : 1;
}
