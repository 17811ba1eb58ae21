// softmax_plan.cpp - the CUDA softmax plan: one function per layout decides the kernel and its launch
// shape from the SoftmaxInfo and the device limits (never from a pointer); run() only fills in the
// pointers, picks the vectorized or element-wise path from their actual alignment, and launches.
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "common/dtype.hpp"
#include "core/error.hpp"
#include "cuda/cuda_backend.hpp"
#include "cuda/cuda_util.hpp"
#include "cuda/kernel_args.hpp"

namespace smx {
namespace {

using cuda::SoftmaxKernelArgs;

// ---- dispatch thresholds (each one's reasoning next to it) ------------------------------------------

// Split-row (two kernels, a workspace, x read twice) against a cluster per row (block-regs), measured on
// the H200 for 1..16 rows of 32768..524288 elements, f32 and bf16 (docs/perf-notes.md, run 9): per-row
// clusters won every case but one, because they launch once and read x once. Split-row is kept for rows
// no cluster can hold in registers (> 524288 elements) when they are too few to fill the SMs with a CTA
// each and too many (or too long) for grid-regs to hold every row's CTAs at once.
constexpr std::int64_t kSplitRowMinLen = 32768;
// Grid-regs (a row's CTAs combine through the workspace behind a grid barrier, one cooperative launch):
// each CTA holds a slice of about 16 KiB of x in registers, doubled (to at most 16384 elements and 64 KiB)
// while a row would need more than 64 CTAs, at most 512 threads each; the split depends on the row
// length only. Taken while every row's CTAs fit on the device at once, for rows of kGridRegsMinLen
// elements or more; below kGridRegsFullLen only while they take at most half of what the device holds.
// Measured on the H200 (quick smx-bench, f32 / bf16 softmax, us, grid-regs vs a cluster per row):
// 1 x 8192-16384 lose (7.9-8.4 vs 6.3-7.9: the grid barrier costs more than one short row's CTA),
// 1 x 24576 8.1/8.4 vs 8.7/8.5, 1 x 32000 8.2/8.3 vs 9.3/9.2, 16 x 32000 9.5/9.1 vs 10.3/9.7; at the
// residency limit 64 x 32000 loses (13.7/11.3 vs 12.9/10.6) while 16 x 128256 ties (13.9 vs 13.8) and
// 8 x 256000 wins (14.1/11.3 vs 14.8/12.3). Slices (perf-notes run 35, f32 / bf16): 1 x 524288 16 ->
// 32 KiB 9.5 -> 8.7 us (f32); 1 x 1048576 16 -> 64 KiB (f32) / 32 KiB (bf16) 12.5 -> 10.4 / 9.5 -> 9.2;
// 1 x 2097152 18.3 -> 14.0 / 12.4 -> 11.0; 4 x 1048576 (16 KiB too many CTAs: split-row) 20.4 -> 17.7 /
// 17.0 -> 12.8; rows of <= 256000 keep 16 KiB (larger slices lost 0.2-2.5 us there).
constexpr std::int64_t kGridRegsSliceBytes = 16 * 1024;
constexpr std::int64_t kGridRegsMaxChunksPerRow = 64;
constexpr std::int64_t kGridRegsMaxSliceLen = 16384;
constexpr int kGridRegsMaxThreads = 512;
// Grid-regs "wide": where the rows' CTAs at the length's slice do not all fit at once (rows >= 2 of at
// least kGridRegsFullLen), slices of 64 KiB of x (16384 f32, 32768 16-bit elements: 32 / 64 values per
// thread) if those fit; another plan, chosen by the row count like the plans around it, whose split
// again depends on the row length only. H200 (run 35, us, vs the cluster per row the rule took before):
// 32 x 128256 f32 18.5 -> 16.9, bf16 14.7 -> 12.9; 64 x 128256 bf16 19.7 -> 18.2, bf16 -> f32 25.5 ->
// 22.6; 16 x 256000 f32 19.6 -> 16.4, bf16 14.4 -> 12.9; 32 x 256000 bf16 20.3 -> 18.0, bf16 -> f32 26.0
// -> 22.7. (64 x 128256 and 32 x 256000 f32 need 512 such CTAs: they do not fit.)
constexpr std::int64_t kGridRegsWideSliceBytes = 64 * 1024;
constexpr std::int64_t kGridRegsMinLen = 24576;
constexpr std::int64_t kGridRegsFullLen = 65536;
// Since block-regs clusters push their statistics (no release barriers, perf-notes run 56), a cluster
// per row beats grid-regs for f32 x once there is enough work, when the cluster plan is one of the push
// instances (32 values per thread) at 2 CTAs per SM. H200, quick smx-bench, f32 softmax, us, grid-regs vs
// a cluster per row (run 58, two samples each; run 57 for 32 rows): 8 x 65536 8.2/8.3 vs 7.9/8.2,
// 16 x 65536 9.6/9.6 vs 8.9/8.9, 8 x 128256 9.7/9.7 vs 8.8/9.0, 16 x 128256 12.1/12.2 vs 11.3/11.2,
// 32 x 128256 17.3/16.6 vs 15.0/15.3, 4 x 256000 10.1/10.0 vs 9.2/9.3, 16 x 256000 16.8/16.7 vs
// 16.2/16.5; just under 2^19 elements a tie (4 x 128256 8.4/8.2 vs 8.1/8.3), below it grid-regs wins or
// ties (1 x 128256 7.1/7.4 vs 7.3/7.3, 2 x 128256 7.3/7.6 vs 7.8/7.9, 1 x 256000 8.0/8.0 vs 8.2/8.3,
// 2 x 256000 8.8/8.4 vs 8.5/8.6).
// 16-bit x written as 16-bit joins them where its cluster plan is the packed instance at 4 or more CTAs per SM
// (kRegsPackedMinCtasPerSm; at 2 per SM it lost every case: bf16 8 x 128256 8.3 vs 9.5, 16 x 256000 13.3 vs
// 13.5): H200, run 144, quick smx-bench, bf16 softmax, us per call / graph replay, grid-regs vs clusters of 8
// or 16 x 256 threads: 8 x 128256 8.4/5.9 vs 7.9-8.1/5.4, 32 x 128256 13.2/10.9 vs 11.6/8.8, 64 x 128256
// 18.1/15.7 vs 15.2-15.7/13.1, 16 x 256000 13.2-13.3/10.8 vs 11.5/9.1, 32 x 256000 17.8/15.4 vs 15.8/13.5; run
// 145 (bf16 and f16, rule against both forced): from 2^19 elements (5 x 128256, 12 x 50257, 16 x 32768, 8 x
// 65536) the clusters equal or beat grid-regs (graph replay 4.9-5.2 vs 5.3-5.5 us); below it they tie or win
// by up to 0.5 us, and the threshold stays f32's. 16-bit x written as f32 keeps grid-regs (its clusters stay
// at 2 per SM: 64 x 128256 21.6-22.1 vs 22.6-22.9 us). Not for clusters of 1024-thread CTAs either (1 CTA per
// SM: f32 rows of 524288 lost at every count, 8 rows 17.4 vs 22.4).
constexpr std::int64_t kClusterOverGridMinElements = std::int64_t{1} << 19;
// Split-row chunks: about row_len / 256 elements (so one row alone spreads over ~256 CTAs, two waves of
// 132 SMs), at least 8192 (a CTA's fixed cost stays small: the rows that reach split-row are too many or
// too long for grid-regs, so CTAs are plenty) and at most 65536 elements, and never more than 1024 chunks
// per row (every CTA of the second kernel folds all of its row's partials).
constexpr std::int64_t kSplitChunkTarget = 256;
constexpr std::int64_t kSplitMinChunk = 8192;
constexpr std::int64_t kSplitMaxChunk = 65536;
constexpr std::int64_t kSplitMaxChunks = 1024;
// Chunk lengths are multiples of this many elements: 128 bytes even for 16-bit x, so every chunk of a
// row starts at the same 16-byte phase as the row and the vector body stays aligned.
constexpr std::int64_t kSplitChunkGranule = 64;
// Block-regs: a configuration is good when at least this many CTAs fit per SM (one CTA's loads overlap
// another's math and stores) and at least this share of its register slots hold real elements; the
// smallest cluster with a good configuration wins (each cluster CTA adds a DSMEM exchange and barrier).
constexpr int kRegsMinCtasPerSm = 2;
constexpr double kRegsGoodUtilization = 0.9;
// 16-bit x written as 16-bit, held packed (64 values a thread), loses where the rule above gives it CTAs that
// fit only 2 per SM (more than 320 threads): the smallest cluster whose packed CTAs fit 4 or more per SM with
// at least 95% of their register slots holding elements runs faster, though its cluster is larger. H200,
// perf-notes runs 137-142 (quick smx-bench, two samples, % of copy, bf16 softmax / log, 2 CTAs per SM -> the
// smaller CTAs): 8192 x 50257 clusters of 2 x 416 -> 5 x 160 threads 87.7 / 90.0 -> 92.7-93.1 / 95.1-95.4;
// 4096 x 128256 4 x 512 -> 8 x 256: 91.2 / 93.4 -> 95.7-95.9 / 96.8-97.1; 8192 x 32000 one CTA of 512 -> 2 x
// 256: 97.1 / 96.7 -> 97.2 / 97.5; 2048 x 100000 4 x 416 -> 7 x 224: 81-81.5 / 83 -> 87.1-87.7 / 90.3-90.9;
// f16 the same within a point or two. Where the packed CTAs fit 3 per SM the rule stays (4096 x 40000, 2 x
// 320: 94.5 / 95.6; clusters of 4 x 160: 92.0 / 93.9). Fuller slots mattered more than CTAs per SM: 8192 x
// 50257 at clusters of 6 x 160 (82% full, 6 per SM) 87.8%, of 8 x 128 (77%, 8 per SM) 87.9%. 16-bit x written
// as f32 (the same instance) moved -0.4 to +1.3 with 4 per SM and keeps the rule above.
constexpr int kRegsPackedValues = 64;
constexpr int kRegsPackedMinCtasPerSm = 4;
constexpr double kRegsPackedGoodUtilization = 0.95;
// A row that one packed CTA holds at fewer than 8 per SM (rows of 15565-16384 elements: 256 threads, 4 per SM)
// runs a little faster as a cluster of two CTAs of 128 threads that fit 8; a larger cluster for 8 per SM tied
// or lost (clusters of 2 -> 4 at rows of 32000, 8 -> 16 at 128256), so only a single CTA is split, in two.
// H200, perf-notes runs 215 and 221 (smx-bench full mode, % of copy, one CTA of 256 -> 2 x 128, 4096 x 16384):
// run 221, rule / pair, two samples each: f16 softmax 89.7, 89.7 / 90.0, 90.4; log 90.2, 90.4 / 90.3, 90.6;
// bf16 softmax 89.8, 89.5 / 90.1, 90.4; log 90.0, 90.1 / 90.6, 90.5; run 215 bf16 89.8-90.5 / 90.2-91.0.
// 8192 x 32000 (2 x 256 -> 4 x 128) 97.1-97.5 / 97.1-97.5; 4096 x 128256 (8 x 256 -> 16 x 128) 96.1-98.3 /
// 93.0-97.7. 16-bit x written as f32 in clusters of 128-thread CTAs (32 values, 8 per SM) lost 4-22 points
// at rows of 16384-50257 (run 221: a CTA holds half the bytes of f32 x's, for the same cluster costs).
constexpr int kRegsPackedPairMinCtasPerSm = 8;
// f32 x likewise runs faster in clusters of smaller CTAs where the rule above leaves it CTAs that fit fewer
// than 8 per SM and a cluster of CTAs that fit 8 (128 threads of 32 values) holds the row with its slots 90%
// full; where none does (rows past 16 x 128 x 32 = 65536 elements) that search's fallback is not taken (the
// search below for 4 per SM may be), as it gives CTAs that fit 1 per SM there, 1.4-1.6x slower (4096 x 128256,
// 64 x 128256, 32 x 256000). H200, perf-notes runs 215-216 (smx-bench full mode, us or % of copy, rule -> 8
// per SM): 8192 x 50257 clusters of 4 x 416 -> 13 x 128: f32 802.9 / 803.9 -> 785.5 / 785.3 us, f32 -> bf16
// 648.7 / 650.1 -> 612.9 / 619.5; 4096 x 16384 one CTA of 512 -> 4 x 128: f32 94.0-94.2 -> 95.2-95.4%, f32 ->
// bf16 96.7-96.8 -> 97.1-97.2%; 8192 x 8192 (one of 256 -> 2 x 128) and 8192 x 32000 (2 x 512 -> 8 x 128)
// within 0.4%. 16-bit x written as f32 gets more CTAs per SM only from its 64-value instance, and tied or lost
// (-1.5 points at 8192 x 8192); it keeps the rule above.
constexpr int kRegsF32MinCtasPerSm = 8;
// Where no such cluster holds an f32 row and the rule's CTAs fit fewer than 4 per SM, the smallest cluster
// of CTAs that fit 4 (256 threads x 32 values, so rows of up to 16 x 8192 = 131072) with 90% of their slots
// full, where one exists. H200, perf-notes run 223 (smx-bench full mode, two samples, clusters of 8 x 512 ->
// 16 x 256): 64 x 128256 f32 softmax 64.0 / 64.7 -> 69.2 / 68.7% of copy (24.2 -> 22.5 us), log 64.2 / 64.6
// -> 68.1 / 68.0%, f32 -> bf16 +1.2-2.2 points; 4096 x 128256 f32 99.0 -> 99.6%, f32 -> bf16 within 0.2;
// 8 x 128256 f32 9.0-9.25 -> 9.36-9.50 us, f32 -> bf16 within 0.2 us (a row's split may not depend on the
// row count, so the few-row case takes the loss). Run 224 (new / old time, f32 and f32 -> bf16 softmax):
// rows of 70000-128256 at 16-128 rows 0.86-0.98 (16 x 70000 f32 -> bf16 0.998), at 8 rows 0.98-1.02, at
// 2048 rows 0.98-1.00.
constexpr int kRegsF32FallbackMinCtasPerSm = 4;
constexpr int kRegsMinThreads = 128;
// Slices shorter than this are not worth a cluster: one CTA holds them with few threads.
constexpr std::int64_t kRegsMinClusterSlice = 1024;
// One cluster per row: rows per grid row, and the grid's y limit.
constexpr std::int64_t kRegsRowsPerGridRow = std::int64_t{1} << 20;
constexpr std::int64_t kMaxGridY = 65535;
// General layout: rows at least this long get a whole block, shorter ones a warp.
constexpr std::int64_t kGeneralBlockRowLen = 2048;
constexpr int kGeneralThreads = 256;
constexpr int kOnlineThreads = 512;

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }
std::int64_t round_up(std::int64_t a, std::int64_t b) { return ceil_div(a, b) * b; }
std::int64_t next_pow2(std::int64_t v) {
    std::int64_t p = 1;
    while (p < v) p *= 2;
    return p;
}
std::int64_t prev_pow2(std::int64_t v) {
    std::int64_t p = 1;
    while (p * 2 <= v) p *= 2;
    return p;
}

// A persistent grid: at most what the device keeps resident at once, at least 1, within gridDim.x.
unsigned persistent_grid(std::int64_t work_items, int blocks_per_sm, int sms) {
    const std::int64_t resident = static_cast<std::int64_t>(std::max(blocks_per_sm, 1)) * std::max(sms, 1);
    return static_cast<unsigned>(std::clamp<std::int64_t>(std::min(work_items, resident), 1, INT_MAX));
}

// How many clusters of `cluster` CTAs (of `threads` threads and `shared_bytes` of dynamic shared memory) the
// device can keep resident at once; 0 when it cannot place one. A cluster shape the device refuses (e.g. 16
// CTAs without the non-portable opt-in) is an answer here, not a failure, so the query's error is cleared.
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

enum class KernelFamily { Empty, Warp, BlockRegs, BlockOnline, SplitRow, Spatial, General };

struct Launch {
    const void* kernel = nullptr;
    dim3 grid;
    dim3 block;
    std::size_t shared_bytes = 0;  // dynamic shared memory
    unsigned cluster = 0;          // CTAs per cluster; 0: an ordinary launch
    bool cooperative = false;      // every CTA resident at once (grid-wide barrier inside)
};

class CudaSoftmaxPlan final : public SoftmaxPlan {
public:
    int device_id = 0;
    KernelFamily family = KernelFamily::Empty;
    SoftmaxKernelArgs args;
    std::array<Launch, 2> launches;
    int launch_count = 0;
    std::size_t x_size = 0;
    std::size_t y_size = 0;
    std::size_t workspace = 0;
    std::string text;
    // The plan for x and y bases misaligned for this one's vector accesses (whose strides the plan checked),
    // or null where this plan takes any base. Its workspace is within this plan's.
    std::shared_ptr<const CudaSoftmaxPlan> unaligned_plan;
    std::uintptr_t x_base_alignment = 1;  // bytes this plan needs of x's base where unaligned_plan is set
    std::uintptr_t y_base_alignment = 1;

    std::size_t workspace_bytes() const override { return workspace; }
    const std::string& description() const override { return text; }

    smxStatus_t run(void* workspace_pointer, void* y, const void* x, void* stream) const override {
        if (launch_count == 0) return SMX_STATUS_SUCCESS;
        if (unaligned_plan && (reinterpret_cast<std::uintptr_t>(x) % x_base_alignment != 0 ||
                               reinterpret_cast<std::uintptr_t>(y) % y_base_alignment != 0)) {
            return unaligned_plan->run(workspace_pointer, y, x, stream);
        }
        cuda::ScopedDevice device(device_id);
        SMX_RETURN_IF_ERROR(device.status());
        SoftmaxKernelArgs launch_args = args;
        launch_args.x = x;
        launch_args.y = y;
        launch_args.workspace = workspace_pointer;
        if (family == KernelFamily::Warp) {
            // Whole-pack access needs every row start aligned: the base and the row stride in bytes.
            launch_args.x_vector = reinterpret_cast<std::uintptr_t>(x) % 16 == 0 &&
                                   (args.x_row_stride * static_cast<std::int64_t>(x_size)) % 16 == 0;
            launch_args.y_vector = reinterpret_cast<std::uintptr_t>(y) % 16 == 0 &&
                                   (args.y_row_stride * static_cast<std::int64_t>(y_size)) % 16 == 0;
        }
        void* params[] = {&launch_args};
        const auto cuda_stream = static_cast<cudaStream_t>(stream);
        for (int i = 0; i < launch_count; ++i) {
            const Launch& launch = launches[i];
            cudaError_t error;
            if (launch.cluster > 0 || launch.cooperative) {
                cudaLaunchAttribute attribute{};
                if (launch.cooperative) {
                    attribute.id = cudaLaunchAttributeCooperative;
                    attribute.val.cooperative = 1;
                } else {
                    attribute.id = cudaLaunchAttributeClusterDimension;
                    attribute.val.clusterDim.x = launch.cluster;
                    attribute.val.clusterDim.y = 1;
                    attribute.val.clusterDim.z = 1;
                }
                cudaLaunchConfig_t config{};
                config.gridDim = launch.grid;
                config.blockDim = launch.block;
                config.dynamicSmemBytes = launch.shared_bytes;
                config.stream = cuda_stream;
                config.attrs = &attribute;
                config.numAttrs = 1;
                error = cudaLaunchKernelExC(&config, launch.kernel, params);
            } else {
                error = cudaLaunchKernel(launch.kernel, launch.grid, launch.block, params, launch.shared_bytes,
                                         cuda_stream);
            }
            // The launch call's own result: cudaPeekAtLastError would also report a stale error the caller's
            // earlier CUDA calls left behind, and smx would fail for it.
            if (error != cudaSuccess) return cuda::cuda_failure(error, "launching the softmax kernel");
        }
        return SMX_STATUS_SUCCESS;
    }
};

smxStatus_t require_kernel(const void* kernel, const SoftmaxInfo& info, const char* family) {
    if (kernel != nullptr) return SMX_STATUS_SUCCESS;
    return fail(SMX_STATUS_INTERNAL_ERROR, "no {} kernel instance for {} -> {}", family, dtype_name(info.x_dtype),
                dtype_name(info.y_dtype));
}

smxStatus_t blocks_per_multiprocessor(const void* kernel, int threads, std::size_t shared_bytes, int* blocks) {
    const cudaError_t error = cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks, kernel, threads, shared_bytes);
    return error == cudaSuccess ? SMX_STATUS_SUCCESS : cuda::cuda_failure(error, "the occupancy query");
}

// Raises a kernel's dynamic shared memory limit to all the device allows next to its static shared memory
// (*dynamic_limit; 0 when none is left). The limit is a property of the kernel, shared by every plan that
// launches it, so it is always set to this one value: a plan that set it to its own size would lower it
// under another plan already made for a larger size, whose launches would then fail, and plans made
// concurrently would race. Each plan passes its own size to the occupancy query and the launch.
smxStatus_t allow_all_dynamic_shared_memory(const DeviceLimits& limits, const void* kernel, const char* family,
                                            std::size_t* dynamic_limit) {
    *dynamic_limit = 0;
    cudaFuncAttributes attributes{};
    cudaError_t error = cudaFuncGetAttributes(&attributes, kernel);
    if (error != cudaSuccess) return cuda::cuda_failure(error, fmt::format("reading the {} kernel's attributes", family).c_str());
    const std::size_t static_bytes = attributes.sharedSizeBytes;
    if (limits.shared_memory_per_block_optin <= static_bytes) return SMX_STATUS_SUCCESS;
    *dynamic_limit = limits.shared_memory_per_block_optin - static_bytes;
    error = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(*dynamic_limit));
    if (error != cudaSuccess) {
        *dynamic_limit = 0;
        return cuda::cuda_failure(error, fmt::format("raising the {} kernel's shared memory limit", family).c_str());
    }
    return SMX_STATUS_SUCCESS;
}

// ---- Rows layout ------------------------------------------------------------------------------------

// CTA size of the warp kernel. Shapes on 32 lanes and the narrow two-pack ones (f32 x: rows of 17..1024;
// 16-bit x: 129..1024, and 17..32 for 16-bit y; f64: 33..1024) launch 64-thread CTAs: finer-grained refill
// of each SM. H200, % of copy, 128 -> 64 threads: up to 16 values per thread (perf-notes run 111) +0.2-1.9
// points on 1048576x128 f32 and 262144x512, ties elsewhere; 32 values, 131072x1024 (runs 112 and 114,
// three samples) 16-bit +1.0-1.6, f32 within 0.3; two-pack shapes (runs 116-117) 16-bit rows of 256
// +0.5-1.2, f32 +0.3 in median, the rest within the spread. Each of these 64-thread CTAs moves at least 2
// KiB of x. Narrow one-pack shapes keep 128: their 64-thread CTAs move 1 KiB of x each (f64 and f32 x
// written narrower, two rows per thread, 2 KiB: measured within 0.5 point either way, run 111, left at
// 128), and the block scheduler, which places at most ~1500 CTAs per microsecond on the H200, held them at
// 72-78%.
// SMX_CUDA_WARP_THREADS=64|128 replaces the rule (same instance, same per-thread work and registers: its
// launch bounds admit both), so that a benchmark can time both on any shape. Read when a plan is made.
constexpr int kWarpSmallCtaThreads = 64;
// A CTA size a benchmark knob names: 64 or 128 when the variable says exactly that, else 0 (the rule).
int thread_count_override(const char* variable) {
    const char* value = std::getenv(variable);
    if (value == nullptr) return 0;
    if (std::strcmp(value, "64") == 0) return 64;
    if (std::strcmp(value, "128") == 0) return 128;
    return 0;
}

// Whether the warp kernel indexes in 32 bits: for shapes of at most kWarpOffsets32MaxValues values per
// thread, where the row count (with more than a CTA's rows to spare past it) and the offset of every element
// of x and y from its base (row x row stride + column, either sign) are within INT_MAX. A thread then issues
// its first load after ~40 instructions instead of ~53, and executes ~150 instead of ~180 in all on 16-bit
// rows of 32 written as f32 (log-softmax, read in the SASS). H200, perf-notes runs 120-121, 32-bit against
// 64-bit, quick smx-bench, two samples each, % of copy: 16 -> 16 log 1048576x128 90.1-90.8 -> 95.9-96.5,
// softmax 95.8-96.4 -> 97.6-98.4, 16 -> 16 262144x512 +0.3-1.0, rows of 32 -1 to +2.5 (0.5 in median), the
// other pairs within 0.6; but f32 -> f32 131072x1024 (32 values) 97.1-97.6 -> 95.9-96.4 with either
// register bound: shapes of 24 and 32 values keep the 64-bit body only. SMX_CUDA_WARP_OFFSETS=64 takes the
// 64-bit body anyway (read when a plan is made), so a benchmark or a test can run it on any shape.
bool warp_offsets_fit_32_bits(const SoftmaxInfo& info, const cuda::WarpShape& shape) {
    if (shape.cols_per_lane * shape.rows_per_thread > cuda::kWarpOffsets32MaxValues) return false;
    const char* forced = std::getenv("SMX_CUDA_WARP_OFFSETS");
    if (forced != nullptr && std::strcmp(forced, "64") == 0) return false;
    constexpr std::int64_t kLimit = INT_MAX;
    constexpr std::int64_t kSpareRows = std::int64_t{1} << 16;  // > a CTA's rows: indices past the end fit too
    if (info.rows > kLimit - kSpareRows) return false;
    for (const std::int64_t stride : {info.x.row_stride, info.y.row_stride}) {
        if (stride < -kLimit || stride > kLimit) return false;
        const std::int64_t magnitude = stride < 0 ? -stride : stride;
        if (magnitude > 0 && info.rows - 1 > (kLimit - info.row_len) / magnitude) return false;
    }
    return true;
}

smxStatus_t plan_warp(const SoftmaxInfo& info, CudaSoftmaxPlan* plan) {
    cuda::WarpShape shape{};
    const int shape_index =
        cuda::choose_warp_shape(info.row_len, dtype_size(info.x_dtype), dtype_size(info.y_dtype), &shape);
    const void* kernel = cuda::warp_softmax_kernel(info.x_dtype, info.y_dtype, shape_index);
    SMX_RETURN_IF_ERROR(require_kernel(kernel, info, "warp"));
    const int wanted_threads = thread_count_override("SMX_CUDA_WARP_THREADS");
    const int pack = static_cast<int>(16 / dtype_size(info.x_dtype));
    const bool small_ctas = shape.lanes == 32 || shape.narrow_two_packs(pack);
    const int threads = wanted_threads > 0 ? wanted_threads : small_ctas ? kWarpSmallCtaThreads : cuda::kWarpKernelThreads;
    const std::int64_t rows_per_block =
        static_cast<std::int64_t>(threads / 32) * (32 / shape.lanes) * shape.rows_per_thread;
    // One pass of the grid over the rows, not a persistent grid: measured on the H200, f32 rows of 32..1024
    // went from 78-90% to 90-98% of copy (the block scheduler overlaps one block's tail with the next).
    const unsigned grid = static_cast<unsigned>(std::clamp<std::int64_t>(ceil_div(info.rows, rows_per_block), 1, INT_MAX));
    plan->family = KernelFamily::Warp;
    plan->launches[0] = {kernel, dim3(grid), dim3(threads), 0, 0};
    plan->launch_count = 1;
    plan->args.offsets_32 = warp_offsets_fit_32_bits(info, shape) ? 1 : 0;
    plan->text = fmt::format("cuda warp lanes={} cols_per_lane={} rows_per_thread={} threads={} grid={} offsets={}",
                             shape.lanes, shape.cols_per_lane, shape.rows_per_thread, threads, grid,
                             plan->args.offsets_32 != 0 ? 32 : 64);
    return SMX_STATUS_SUCCESS;
}

// A block-regs configuration: cluster size, threads, values per thread and how well they fit.
struct RegsChoice {
    bool fits = false;
    const void* kernel = nullptr;
    int cluster = 1;
    int threads = 0;
    int values = 0;               // elements of the row each thread holds in registers
    std::int64_t slice_len = 0;   // elements per CTA of the cluster
    int ctas_per_sm = 0;          // resident CTAs per SM (occupancy API)
    double utilization = 0.0;     // row_len / (cluster x threads x values): registers holding real elements
};

// Whether `a` serves the row better than `b`: several CTAs per SM first (one CTA's loads overlap another's
// math and stores), then the fewest idle register slots (to 1%), then more values per thread (more loads
// in flight per thread, fewer threads to reduce over). Equal: the one found first (the smaller cluster).
// 64 values (16-bit x held packed) widen every input at each use and recompute exp; they rank first only
// for 16-bit outputs (`packed_first`). H200, perf-notes run 38, same rows forced to 64 values against the
// rule's 32: f16/bf16 -> same 4096x16384 84 -> 90% of copy, 8192x8192 88-89 -> 90-91% (half the threads
// per row, twice the CTAs per SM); bf16 -> f32 16384 91 -> 89%, 8192 92.5 -> 90% (that instance spills).
// `min_ctas_per_sm` is what "several" means for the search at hand (RegsSearch).
bool better_regs_choice(const RegsChoice& a, const RegsChoice& b, bool packed_first, int min_ctas_per_sm) {
    if (!b.fits) return a.fits;
    if (!a.fits) return false;
    const bool a_overlaps = a.ctas_per_sm >= min_ctas_per_sm;
    const bool b_overlaps = b.ctas_per_sm >= min_ctas_per_sm;
    if (a_overlaps != b_overlaps) return a_overlaps;
    const int a_percent = static_cast<int>(a.utilization * 100.0);
    const int b_percent = static_cast<int>(b.utilization * 100.0);
    if (a_percent != b_percent) return a_percent > b_percent;
    const auto rank = [packed_first](int values) { return values == 64 ? (packed_first ? 128 : 0) : values; };
    return rank(a.values) > rank(b.values);
}

// Block-regs' smallest CTA for an instance of `values` per thread. Instances that hold their values
// widened (8-32) may run 64-thread CTAs (two warps: a shorter block reduction, and more CTAs and loads in
// flight per SM); the packed 64-value instance keeps kRegsMinThreads. H200, perf-notes run 113 (quick
// smx-bench, two samples, % of copy, 128 -> 64 threads): 65536 x 2048 now 32 values x 64 threads instead
// of 16 x 128: 16 -> 16 91-93 -> 96-97.4, f32 -> f32 96.4-96.8 -> 96.7-97.1 (compare_torch, log-softmax:
// 0.994x -> 1.002x torch eager), 16 -> f32 +0.1-0.3, f32 -> bf16 100.5-100.8 -> 100.2-100.5; with the
// packed instance at 64 threads too, 16 -> 16 16384 x 4096 took it there and lost up to 1.5 (f16 92.4 ->
// 90.9). SMX_CUDA_REGS_MIN_THREADS=64|128 sets one minimum for every instance instead (0: the rule), so
// that a benchmark can time either way; read when a plan is made.
constexpr int kRegsMinThreadsWidened = 64;
int regs_min_threads(int values, int override_threads) {
    if (override_threads > 0) return override_threads;
    return values <= 32 ? kRegsMinThreadsWidened : kRegsMinThreads;
}

// What a block-regs search accepts: at least min_ctas_per_sm CTAs per SM and at least good_utilization of
// the register slots holding elements; only_values (0: any) limits it to one instance, max_cluster (0: the
// device's and SMX_CUDA_MAX_CLUSTER's limit) to clusters of at most that many CTAs.
struct RegsSearch {
    int min_ctas_per_sm = kRegsMinCtasPerSm;
    double good_utilization = kRegsGoodUtilization;
    int only_values = 0;
    int max_cluster = 0;
};

bool is_good_regs_choice(const RegsChoice& choice, const RegsSearch& search) {
    return choice.fits && choice.ctas_per_sm >= search.min_ctas_per_sm && choice.utilization >= search.good_utilization;
}

// 16-bit x written as 16-bit: the pairs whose 64-value block-regs instance holds x packed and ranks first,
// and that the packed searches below are for.
bool packed_pair(const SoftmaxInfo& info) { return dtype_size(info.x_dtype) == 2 && dtype_size(info.y_dtype) == 2; }

// Instances of 8 and 16 values do not run in clusters where the pair has a 32-value instance (all but f64
// x): there they won on utilization alone (rows of 16385-16400: 16 values x 544 threads, 94% of the slots
// full, against 32 x 288, 89%) and ran far slower. H200, perf-notes runs 140-142 (quick smx-bench, two
// samples, % of copy, 8192 x 16400 and 8192 x 16385, before -> after): f32 77 -> 97.4-98.0, f32 -> bf16
// 70-72 -> 93.6-94.5, 16-bit -> 16-bit 53-55 -> 93.1-96.1 (one CTA of 288, packed), 16-bit -> f32 64-65 ->
// 75.6-77.9 (32 values, clusters of 2). Perf-notes run 39 had found 16-value clusters slower on the
// clustered grid rows too.
bool regs_instance_clusters(const SoftmaxInfo& info, int values) {
    return values >= 32 || cuda::block_regs_softmax_kernel(info.x_dtype, info.y_dtype, 32) == nullptr;
}

// The largest block-regs cluster a plan may take: kBlockRegsMaxCluster, or fewer where SMX_CUDA_MAX_CLUSTER
// (1-16) says so; read when a plan is made. compute-sanitizer's synccheck reports "Missing wait" at any
// mbarrier of a CTA in a cluster of more than 8, even one only that CTA arrives on and waits for (perf-notes
// runs 218-219), so the GPU suite's synccheck stage runs with 8: the plans it checks are the portable ones.
int max_regs_cluster() {
    const char* value = std::getenv("SMX_CUDA_MAX_CLUSTER");
    const int cap = value == nullptr ? 0 : std::atoi(value);
    return cap >= 1 && cap < cuda::kBlockRegsMaxCluster ? cap : cuda::kBlockRegsMaxCluster;
}

// The smallest cluster (1..16 CTAs, any integer) with a configuration the search accepts; the best
// configuration seen when none does. Clusters are checked for placement with
// cudaOccupancyMaxActiveClusters (16 needs the non-portable opt-in).
smxStatus_t search_regs_config(const SoftmaxInfo& info, const DeviceLimits& limits, const RegsSearch& search,
                               RegsChoice* choice) {
    *choice = {};
    const int min_threads_override = thread_count_override("SMX_CUDA_REGS_MIN_THREADS");
    const bool clusters = limits.cluster_launch && limits.compute_capability_major >= 9;
    const int max_cluster =
        !clusters ? 1 : search.max_cluster > 0 ? std::min(search.max_cluster, max_regs_cluster()) : max_regs_cluster();
    const int max_threads = std::min(cuda::kBlockRegsMaxThreads, std::max(limits.max_threads_per_block, kRegsMinThreads));
    const std::int64_t pack = 16 / static_cast<std::int64_t>(dtype_size(info.x_dtype));
    const bool packed_first = packed_pair(info);
    RegsChoice fallback;
    for (int cluster = 1; cluster <= max_cluster; ++cluster) {
        // Slices are whole packs, so every CTA's slice keeps the row's 16-byte phase.
        const std::int64_t slice_len = round_up(ceil_div(info.row_len, cluster), pack);
        if (cluster > 1 && slice_len < kRegsMinClusterSlice) break;  // smaller slices only add cluster cost
        if ((cluster - 1) * slice_len >= info.row_len) continue;     // the last CTA would have nothing
        RegsChoice best;
        for (int values : cuda::kBlockRegsValueCounts) {
            if (search.only_values != 0 && values != search.only_values) continue;
            if (cluster > 1 && !regs_instance_clusters(info, values)) continue;
            const void* kernel = cuda::block_regs_softmax_kernel(info.x_dtype, info.y_dtype, values);
            if (kernel == nullptr) continue;
            // The instance's own limit (its __launch_bounds__): the occupancy query does not refuse a block
            // larger than that, the launch does (seen on the H200 with the 64-value instances at 1024 threads).
            cudaFuncAttributes attributes{};
            const cudaError_t attributes_error = cudaFuncGetAttributes(&attributes, kernel);
            if (attributes_error != cudaSuccess) return cuda::cuda_failure(attributes_error, "reading the block-regs kernel's limits");
            const std::int64_t threads = std::max<std::int64_t>(round_up(ceil_div(slice_len, values), 32),
                                                                regs_min_threads(values, min_threads_override));
            if (threads > max_threads || threads > attributes.maxThreadsPerBlock) continue;
            int ctas_per_sm = 0;
            SMX_RETURN_IF_ERROR(blocks_per_multiprocessor(kernel, static_cast<int>(threads), 0, &ctas_per_sm));
            if (ctas_per_sm == 0) continue;
            if (cluster > 1) {
                // Always the same value for a kernel, so plans made concurrently never undo each other's setting.
                cudaError_t error = cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
                if (error != cudaSuccess) return cuda::cuda_failure(error, "allowing clusters of 16 for the block-regs kernel");
                if (max_active_clusters(kernel, cluster, static_cast<int>(threads), 0) == 0) continue;
            }
            const RegsChoice candidate{true,
                                       kernel,
                                       cluster,
                                       static_cast<int>(threads),
                                       values,
                                       slice_len,
                                       ctas_per_sm,
                                       static_cast<double>(info.row_len) / static_cast<double>(cluster * threads * values)};
            if (better_regs_choice(candidate, best, packed_first, search.min_ctas_per_sm)) best = candidate;
        }
        if (is_good_regs_choice(best, search)) {
            *choice = best;
            return SMX_STATUS_SUCCESS;
        }
        if (better_regs_choice(best, fallback, packed_first, search.min_ctas_per_sm)) fallback = best;
    }
    *choice = fallback;
    return SMX_STATUS_SUCCESS;
}

// Runs `search` and replaces *choice with what it finds only where the search accepts it.
smxStatus_t take_if_found(const SoftmaxInfo& info, const DeviceLimits& limits, const RegsSearch& search,
                          RegsChoice* choice) {
    RegsChoice found;
    SMX_RETURN_IF_ERROR(search_regs_config(info, limits, search, &found));
    if (is_good_regs_choice(found, search)) *choice = found;
    return SMX_STATUS_SUCCESS;
}

// Block-regs' configuration for a row: the default search; then, for f32 x given CTAs that fit fewer than
// kRegsF32MinCtasPerSm per SM, the search at that many where it finds one, else, for CTAs that fit fewer than
// kRegsF32FallbackMinCtasPerSm, the search at that many where it finds one; for 16-bit x written as 16-bit
// given packed CTAs that fit only 2 per SM, the packed search (kRegsPackedMinCtasPerSm) where it finds one,
// and given one packed CTA a row that fits fewer than kRegsPackedPairMinCtasPerSm, a pair that fits that many
// where one does.
smxStatus_t choose_regs_config(const SoftmaxInfo& info, const DeviceLimits& limits, RegsChoice* choice) {
    SMX_RETURN_IF_ERROR(search_regs_config(info, limits, RegsSearch{}, choice));
    if (info.x_dtype == SMX_DTYPE_F32 && choice->fits && choice->ctas_per_sm < kRegsF32MinCtasPerSm) {
        SMX_RETURN_IF_ERROR(take_if_found(info, limits, RegsSearch{kRegsF32MinCtasPerSm, kRegsGoodUtilization, 0}, choice));
        if (choice->ctas_per_sm >= kRegsF32FallbackMinCtasPerSm) return SMX_STATUS_SUCCESS;
        return take_if_found(info, limits, RegsSearch{kRegsF32FallbackMinCtasPerSm, kRegsGoodUtilization, 0}, choice);
    }
    const bool packed = packed_pair(info) && choice->fits && choice->values == kRegsPackedValues;
    if (packed && choice->ctas_per_sm <= kRegsMinCtasPerSm) {
        SMX_RETURN_IF_ERROR(take_if_found(
            info, limits, RegsSearch{kRegsPackedMinCtasPerSm, kRegsPackedGoodUtilization, kRegsPackedValues}, choice));
    }
    if (packed && choice->cluster == 1 && choice->ctas_per_sm < kRegsPackedPairMinCtasPerSm) {
        const RegsSearch pair{kRegsPackedPairMinCtasPerSm, kRegsPackedGoodUtilization, kRegsPackedValues, 2};
        SMX_RETURN_IF_ERROR(take_if_found(info, limits, pair, choice));
    }
    return SMX_STATUS_SUCCESS;
}

// A grid-regs configuration: the block-regs kernel with `chunks` CTAs per row combined by a grid barrier.
struct GridRegsChoice {
    bool fits = false;  // the device supports it and every row's CTAs are resident at once
    const void* kernel = nullptr;
    int threads = 0;
    int values = 0;
    std::int64_t slice_len = 0;
    std::int64_t chunks = 0;
    int ctas_per_sm = 0;
    std::int64_t resident = 0;  // CTAs the device holds at once
};

// Slices of about slice_target elements (whole 16-byte packs, so each keeps the row's phase), the fewest
// values per thread that keep a CTA within kGridRegsMaxThreads; fits when rows x chunks CTAs can all be
// resident (a cooperative launch refuses more).
// Grid-regs slice length (before rounding to even slices) for a row: from its length and dtype only.
std::int64_t grid_regs_slice_target(std::int64_t row_len, std::int64_t x_size) {
    std::int64_t slice = kGridRegsSliceBytes / x_size;
    while (ceil_div(row_len, slice) > kGridRegsMaxChunksPerRow && 2 * slice <= kGridRegsMaxSliceLen &&
           2 * slice * x_size <= kGridRegsWideSliceBytes) {
        slice *= 2;
    }
    return slice;
}

smxStatus_t choose_grid_regs(const SoftmaxInfo& info, const DeviceLimits& limits, std::int64_t slice_target,
                             GridRegsChoice* choice) {
    *choice = {};
    if (!limits.cooperative_launch) return SMX_STATUS_SUCCESS;
    const std::int64_t x_size = static_cast<std::int64_t>(dtype_size(info.x_dtype));
    const std::int64_t wanted = ceil_div(info.row_len, slice_target);
    if (wanted < 2) return SMX_STATUS_SUCCESS;
    const std::int64_t slice_len = round_up(ceil_div(info.row_len, wanted), 16 / x_size);
    const std::int64_t chunks = ceil_div(info.row_len, slice_len);  // so that every CTA has elements
    for (int values : cuda::kBlockRegsValueCounts) {
        const void* kernel = cuda::block_regs_softmax_kernel(info.x_dtype, info.y_dtype, values);
        if (kernel == nullptr) continue;
        const std::int64_t threads = std::max<std::int64_t>(round_up(ceil_div(slice_len, values), 32), kRegsMinThreads);
        if (threads > kGridRegsMaxThreads) continue;
        cudaFuncAttributes attributes{};
        const cudaError_t error = cudaFuncGetAttributes(&attributes, kernel);
        if (error != cudaSuccess) return cuda::cuda_failure(error, "reading the block-regs kernel's limits");
        if (threads > attributes.maxThreadsPerBlock) continue;
        int ctas_per_sm = 0;
        SMX_RETURN_IF_ERROR(blocks_per_multiprocessor(kernel, static_cast<int>(threads), 0, &ctas_per_sm));
        const std::int64_t resident = static_cast<std::int64_t>(ctas_per_sm) * limits.multiprocessor_count;
        *choice = {info.rows * chunks <= resident, kernel, static_cast<int>(threads), values, slice_len, chunks, ctas_per_sm,
                   resident};
        return SMX_STATUS_SUCCESS;
    }
    return SMX_STATUS_SUCCESS;
}

smxStatus_t plan_grid_regs(const SoftmaxInfo& info, const GridRegsChoice& choice, CudaSoftmaxPlan* plan) {
    const std::size_t compute_size = info.x_dtype == SMX_DTYPE_F64 ? sizeof(double) : sizeof(float);
    const std::int64_t ctas = info.rows * choice.chunks;
    plan->family = KernelFamily::BlockRegs;
    plan->args.slice_len = choice.slice_len;
    plan->args.chunks = choice.chunks;
    plan->workspace = static_cast<std::size_t>(ctas) * 2 * compute_size;
    Launch launch{choice.kernel, dim3(static_cast<unsigned>(ctas)), dim3(static_cast<unsigned>(choice.threads)), 0, 0};
    launch.cooperative = true;
    plan->launches[0] = launch;
    plan->launch_count = 1;
    plan->text = fmt::format("cuda grid-regs values={} threads={} chunks={} slice={} ctas_per_sm={} workspace={}",
                             choice.values, choice.threads, choice.chunks, choice.slice_len, choice.ctas_per_sm,
                             plan->workspace);
    return SMX_STATUS_SUCCESS;
}

// Grid-regs steps: `choice` (a grid-regs configuration of kGridRegsStepsValues values that does not fit
// every row at once) on its row-steps kernel, G = resident / chunks rows at a time. Same slices, threads
// and fold order as grid-regs, so a row comes out bitwise as grid-regs writes it. fits = false where the
// kernel has no instance, the device cannot hold one row's CTAs at once, or a row has more CTAs than a
// step folds.
struct GridRegsSteps {
    bool fits = false;
    const void* kernel = nullptr;
    std::size_t shared_bytes = 0;  // the staged slice (dynamic shared memory)
    int ctas_per_sm = 0;
    std::int64_t rows_per_step = 0;
    std::int64_t steps = 0;
};

smxStatus_t choose_grid_regs_steps(const SoftmaxInfo& info, const DeviceLimits& limits, const GridRegsChoice& choice,
                                   GridRegsSteps* steps) {
    *steps = {};
    if (choice.kernel == nullptr || choice.values != cuda::kGridRegsStepsValues) return SMX_STATUS_SUCCESS;
    const void* kernel = cuda::grid_regs_steps_kernel(info.x_dtype, info.y_dtype);
    if (kernel == nullptr || choice.chunks > cuda::kGridRegsStepsMaxChunks) return SMX_STATUS_SUCCESS;
    const std::size_t shared_bytes = cuda::grid_regs_steps_shared_bytes(info.x_dtype, info.y_dtype, choice.slice_len);
    std::size_t dynamic_limit = 0;
    SMX_RETURN_IF_ERROR(allow_all_dynamic_shared_memory(limits, kernel, "grid-regs-steps", &dynamic_limit));
    if (shared_bytes > dynamic_limit) return SMX_STATUS_SUCCESS;
    int ctas_per_sm = 0;
    SMX_RETURN_IF_ERROR(blocks_per_multiprocessor(kernel, choice.threads, shared_bytes, &ctas_per_sm));
    const std::int64_t resident = static_cast<std::int64_t>(ctas_per_sm) * limits.multiprocessor_count;
    const std::int64_t rows_per_step = std::min(info.rows, resident / choice.chunks);
    if (rows_per_step < 1) return SMX_STATUS_SUCCESS;
    *steps = {true, kernel, shared_bytes, ctas_per_sm, rows_per_step, ceil_div(info.rows, rows_per_step)};
    return SMX_STATUS_SUCCESS;
}

// Grid-regs' plan (slices, workspace for every row, a cooperative launch) on the row-steps kernel, with
// the CTAs of rows_per_step rows and the staged slice's shared memory.
smxStatus_t plan_grid_regs_steps(const SoftmaxInfo& info, const GridRegsChoice& choice, const GridRegsSteps& steps,
                                 CudaSoftmaxPlan* plan) {
    SMX_RETURN_IF_ERROR(plan_grid_regs(info, choice, plan));
    plan->args.row_steps = steps.steps;
    Launch& launch = plan->launches[0];
    launch.kernel = steps.kernel;
    launch.grid = dim3(static_cast<unsigned>(steps.rows_per_step * choice.chunks));
    launch.shared_bytes = steps.shared_bytes;
    plan->text = fmt::format("cuda grid-regs-steps values={} threads={} chunks={} slice={} rows_per_step={} steps={} "
                             "staged={} ctas_per_sm={} workspace={}",
                             choice.values, choice.threads, choice.chunks, choice.slice_len, steps.rows_per_step,
                             steps.steps, steps.shared_bytes, steps.ctas_per_sm, plan->workspace);
    return SMX_STATUS_SUCCESS;
}

smxStatus_t plan_split_row(const SoftmaxInfo& info, CudaSoftmaxPlan* plan) {
    const void* stats_kernel = cuda::split_row_stats_kernel(info.x_dtype, info.y_dtype);
    const void* write_kernel = cuda::split_row_write_kernel(info.x_dtype, info.y_dtype);
    SMX_RETURN_IF_ERROR(require_kernel(stats_kernel, info, "split-row statistics"));
    SMX_RETURN_IF_ERROR(require_kernel(write_kernel, info, "split-row write"));
    std::int64_t chunk_len = std::clamp(next_pow2(ceil_div(info.row_len, kSplitChunkTarget)), kSplitMinChunk, kSplitMaxChunk);
    chunk_len = std::max(chunk_len, round_up(ceil_div(info.row_len, kSplitMaxChunks), kSplitChunkGranule));
    const std::int64_t chunks = ceil_div(info.row_len, chunk_len);
    const int threads = chunk_len >= 16384 ? 512 : 256;
    const dim3 grid(static_cast<unsigned>(chunks), static_cast<unsigned>(std::min<std::int64_t>(info.rows, 65535)));
    const std::size_t compute_size = info.x_dtype == SMX_DTYPE_F64 ? sizeof(double) : sizeof(float);
    plan->family = KernelFamily::SplitRow;
    plan->args.slice_len = chunk_len;
    plan->args.chunks = chunks;
    plan->workspace = static_cast<std::size_t>(info.rows * chunks) * 2 * compute_size;
    plan->launches[0] = {stats_kernel, grid, dim3(threads), 0, 0};
    plan->launches[1] = {write_kernel, grid, dim3(threads), 0, 0};
    plan->launch_count = 2;
    plan->text = fmt::format("cuda split-row chunk={} chunks={} threads={} workspace={}", chunk_len, chunks, threads,
                             plan->workspace);
    return SMX_STATUS_SUCCESS;
}

// SMX_CUDA_LONG_ROWS=cluster|grid|split|steps replaces the long-rows rule below, so that a benchmark can
// time each plan on the same shapes (how the crossovers were measured; docs/cuda-kernels.md) and tests can
// reach each plan on any shape: cluster = block-regs clusters where they fit (else block-online), never
// grid-regs, grid-regs-steps or split-row; grid = grid-regs wherever every CTA fits at once (else the
// rule); split = split-row for rows of kSplitRowMinLen or more; steps = grid-regs-steps wherever grid-regs
// cannot hold every row but the steps kernel holds one (else the rule). Unset, or any other value: the
// rule. Read when a plan is made.
enum class LongRowsOverride { Rule, Cluster, Grid, Split, Steps };

LongRowsOverride long_rows_override() {
    const char* value = std::getenv("SMX_CUDA_LONG_ROWS");
    if (value == nullptr) return LongRowsOverride::Rule;
    if (std::strcmp(value, "cluster") == 0) return LongRowsOverride::Cluster;
    if (std::strcmp(value, "grid") == 0) return LongRowsOverride::Grid;
    if (std::strcmp(value, "split") == 0) return LongRowsOverride::Split;
    if (std::strcmp(value, "steps") == 0) return LongRowsOverride::Steps;
    return LongRowsOverride::Rule;
}

smxStatus_t plan_rows(const SoftmaxInfo& info, const DeviceLimits& limits, CudaSoftmaxPlan* plan) {
    plan->args.x_row_stride = info.x.row_stride;
    plan->args.y_row_stride = info.y.row_stride;
    // (a) Short rows live in registers: one read, one write, no shared memory.
    if (info.row_len <= cuda::kWarpMaxRowLen) return plan_warp(info, plan);

    // (b) Rows that a cluster of CTAs can hold in registers: one read, one write, one exp per element.
    RegsChoice regs;
    SMX_RETURN_IF_ERROR(choose_regs_config(info, limits, &regs));
    // One cluster per row: grid.x = cluster x rows_per_grid_row, grid.y covers the rest of the rows.
    const std::int64_t rows_per_grid_row = std::min<std::int64_t>(info.rows, kRegsRowsPerGridRow);
    const std::int64_t grid_rows = ceil_div(info.rows, rows_per_grid_row);
    regs.fits = regs.fits && grid_rows <= kMaxGridY;
    // (d) Few long rows: one cooperative launch spreads each row over many SMs (grid-regs) while every
    // row's CTAs fit on the device at once. Rows too long for that and for any cluster, too few to fill
    // the SMs with a CTA each, are split over many CTAs by two kernels instead (split-row).
    GridRegsChoice grid_regs;
    const std::int64_t x_size = static_cast<std::int64_t>(dtype_size(info.x_dtype));
    SMX_RETURN_IF_ERROR(choose_grid_regs(info, limits, grid_regs_slice_target(info.row_len, x_size), &grid_regs));
    if (!grid_regs.fits && info.rows > 1 && info.row_len >= kGridRegsFullLen) {
        GridRegsChoice wide;
        SMX_RETURN_IF_ERROR(choose_grid_regs(info, limits, kGridRegsWideSliceBytes / x_size, &wide));
        if (wide.fits) grid_regs = wide;
    }
    const bool grid_fills_lightly = 2 * info.rows * grid_regs.chunks <= grid_regs.resident;
    const bool push_cluster =
        info.x_dtype == SMX_DTYPE_F32 && regs.values >= 32 && regs.ctas_per_sm >= kRegsMinCtasPerSm;
    const bool packed_cluster =
        packed_pair(info) && regs.values == kRegsPackedValues && regs.ctas_per_sm >= kRegsPackedMinCtasPerSm;
    const bool cluster_outruns_grid = regs.fits && (push_cluster || packed_cluster) &&
                                      info.rows * info.row_len >= kClusterOverGridMinElements;
    bool use_grid = grid_regs.fits && info.row_len >= kGridRegsMinLen && !cluster_outruns_grid &&
                    (info.row_len >= kGridRegsFullLen || grid_fills_lightly);
    bool split = !use_grid && info.row_len >= kSplitRowMinLen && !regs.fits && info.rows < limits.multiprocessor_count;
    // (e) Rows whose CTAs do not all fit at once where one row's do: grid-regs in steps of G rows.
    GridRegsSteps steps;
    if (!grid_regs.fits) SMX_RETURN_IF_ERROR(choose_grid_regs_steps(info, limits, grid_regs, &steps));
    bool use_steps = steps.fits && split;
    switch (long_rows_override()) {
        case LongRowsOverride::Rule: break;
        case LongRowsOverride::Cluster: use_grid = split = use_steps = false; break;
        case LongRowsOverride::Grid:
            use_grid = grid_regs.fits;
            split = split && !use_grid;
            use_steps = use_steps && !use_grid;
            break;
        case LongRowsOverride::Split:
            use_grid = use_steps = false;
            split = info.row_len >= kSplitRowMinLen;
            break;
        case LongRowsOverride::Steps:
            use_steps = steps.fits;
            use_grid = use_grid && !use_steps;
            split = split && !use_grid && !use_steps;
            break;
    }
    if (use_grid) return plan_grid_regs(info, grid_regs, plan);
    if (use_steps) return plan_grid_regs_steps(info, grid_regs, steps, plan);
    if (split) return plan_split_row(info, plan);
    if (regs.fits) {
        const dim3 grid(static_cast<unsigned>(rows_per_grid_row * regs.cluster), static_cast<unsigned>(grid_rows));
        plan->family = KernelFamily::BlockRegs;
        plan->args.slice_len = regs.slice_len;
        plan->launches[0] = {regs.kernel, grid, dim3(static_cast<unsigned>(regs.threads)), 0,
                             regs.cluster > 1 ? static_cast<unsigned>(regs.cluster) : 0u};
        plan->launch_count = 1;
        plan->text = fmt::format("cuda block-regs values={} threads={} cluster={} slice={} ctas_per_sm={} grid={}x{}",
                                 regs.values, regs.threads, regs.cluster, regs.slice_len, regs.ctas_per_sm, grid.x,
                                 grid.y);
        return SMX_STATUS_SUCCESS;
    }

    // (c) Rows too long for any cluster, and enough of them to fill the device: a CTA per row, online
    // statistics then a second read of x.
    const void* online_kernel = cuda::block_online_softmax_kernel(info.x_dtype, info.y_dtype);
    SMX_RETURN_IF_ERROR(require_kernel(online_kernel, info, "block-online"));
    int blocks = 0;
    SMX_RETURN_IF_ERROR(blocks_per_multiprocessor(online_kernel, kOnlineThreads, 0, &blocks));
    const unsigned grid = persistent_grid(info.rows, blocks, limits.multiprocessor_count);
    plan->family = KernelFamily::BlockOnline;
    plan->launches[0] = {online_kernel, dim3(grid), dim3(kOnlineThreads), 0, 0};
    plan->launch_count = 1;
    plan->text = fmt::format("cuda block-online threads={} grid={}", kOnlineThreads, grid);
    return SMX_STATUS_SUCCESS;
}

// ---- Spatial and General layouts ----------------------------------------------------------------

// Spatial-tile budget: bytes of cached x per CTA. Measured on the H200, a CTA's fixed latency (load, reduce,
// cluster barrier) dominated 16-32 KB slices (40-65 % of copy): 64 KB stages ~192 KB per SM at 3 CTAs per
// SM. Past it: the opt-in limit, 1 CTA per SM.
constexpr std::size_t kSpatialSliceBudgets[] = {64 * 1024};
// Few tiles are spread over more cluster CTAs (shorter slices) until the device has about this many CTAs
// per SM, but never into slices shorter than kSpatialMinSlice axis positions (fixed costs would dominate).
constexpr std::int64_t kSpatialSpreadCtasPerSm = 2;
constexpr std::int64_t kSpatialMinSlice = 64;
// A whole column in one CTA (no cluster) is taken with tile rows down to this many 16-byte vectors (64
// bytes) before wider rows split over a cluster. H200, perf-notes runs 60-61 (quick smx-bench, softmax):
// every doubling of the cluster cost 7-15 points of copy, so 32x1024x1024 dim=1 runs unclustered at
// 64-byte rows: bf16/f16 -> f32 62.5-64.5 -> 69.0-70.0%, -> 16-bit 64-64.5 -> 64.3-66.1%, f32 80.3-80.6 ->
// 80.1-80.4%. A smaller cluster at narrower rows did not pay (16x8x4096x64 dim=2 and the transpose at
// 64 bytes and a cluster of 4, against 128 bytes and 8: 2-8 points slower; 32-byte rows 10-40 slower).
constexpr int kSpatialMinUnclusteredVectors = 4;
// 16-bit x written as f32 takes 8-byte vectors from tile rows of this many bytes (see plan_spatial).
constexpr int kSpatialNarrowVectorMinRowBytes = 128;
// Tile rows of this many bytes (half an L2 line) fetch x's whole lines where x's rows span them (see plan_spatial).
constexpr int kSpatialWholeLineRowBytes = 64;

// Spatial-split's vector instances (4 columns a thread, 2 for f64, on tiles of up to 64 columns) only where
// inner is wider than this: there the wider tiles (whole rows up to 64 columns, or 256-byte pieces of longer
// rows, against one-element threads' 32 columns) gained, while at 32 columns or fewer, where both tile
// whole rows, the vectors lost. H200, perf-notes runs 174-177 (quick smx-bench softmax, us, one element ->
// vectors): 3 x 400000 x 40 dim=1 bf16 234 -> 192, f32 -> bf16 273 -> 204, f32 237 -> 234, bf16 -> f32 208
// -> 214; 2 x 262144 x 1024 dim=1 bf16 1256 -> 1035, bf16 -> f32 1503 -> 1342, f32 1735 -> 1633; 300000 x
// 64 dim=0 0.97-1.05x; but 1048576 x 32 dim=0 0.91-0.95x and 4 x 1000000 x 16 dim=1 0.94-1.00x.
constexpr std::int64_t kSplitVectorsMinInner = 32;

// Spatial-split (columns too long for any cluster): each column cut into at least two chunks, more until
// the CTAs fill the device's resident slots this many times over (whole waves: chunks are equal, so a last
// wave partly full costs a whole one), but never into chunks of fewer than kSpatialSplitMinSteps loop
// steps a thread.
constexpr std::int64_t kSpatialSplitWaves = 2;
constexpr std::int64_t kSpatialSplitMinSteps = 8;

// A spatial-tile configuration: 16-byte vectors per tile row, cluster size, axis positions per CTA.
struct SpatialTileChoice {
    bool fits = false;
    int vectors = 0;
    int cluster = 1;
    std::int64_t slice_len = 0;
    std::size_t shared_bytes = 0;
};

// Lets a spatial-tile kernel take all the dynamic shared memory the device allows next to its static
// shared memory (*dynamic_limit; 0 when none is left) and, where clusters exist, clusters of 16.
smxStatus_t prepare_spatial_tile_kernel(const DeviceLimits& limits, const void* kernel, std::size_t* dynamic_limit) {
    SMX_RETURN_IF_ERROR(allow_all_dynamic_shared_memory(limits, kernel, "spatial-tile", dynamic_limit));
    if (*dynamic_limit == 0) return SMX_STATUS_SUCCESS;
    if (limits.cluster_launch && limits.compute_capability_major >= 9) {
        const cudaError_t error = cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
        if (error != cudaSuccess) return cuda::cuda_failure(error, "allowing clusters of 16 for the spatial-tile kernel");
    }
    return SMX_STATUS_SUCCESS;
}

// The first configuration that caches whole columns: one CTA per column tile at rows of 256 down to 64
// bytes within the per-CTA budget; else wide tile rows (256 bytes) and the smallest cluster within the
// budget, then narrower rows (down to 32 bytes), then the opt-in limit with clusters up to 16
// (non-portable) and rows down to 16 bytes. fits = false: no cluster holds a column.
smxStatus_t choose_spatial_tile(const SoftmaxInfo& info, const DeviceLimits& limits, const void* kernel,
                                SpatialTileChoice* choice) {
    *choice = {};
    std::size_t dynamic_limit = 0;
    SMX_RETURN_IF_ERROR(prepare_spatial_tile_kernel(limits, kernel, &dynamic_limit));
    if (dynamic_limit == 0) return SMX_STATUS_SUCCESS;
    const bool clusters = limits.cluster_launch && limits.compute_capability_major >= 9;
    const std::int64_t pack = 16 / static_cast<std::int64_t>(dtype_size(info.x_dtype));
    const int max_vectors =
        static_cast<int>(std::min<std::int64_t>(cuda::kSpatialMaxVectors, next_pow2(ceil_div(info.inner, pack))));

    // Whether (vectors, cluster) caches a slice within `budget` bytes and the device can place it.
    const auto try_config = [&](int vectors, int cluster, std::size_t budget, bool* placed) -> smxStatus_t {
        *placed = false;
        const std::int64_t slice_len = ceil_div(info.row_len, cluster);
        const std::size_t shared_bytes = static_cast<std::size_t>(slice_len) * static_cast<std::size_t>(vectors) * 16;
        if (shared_bytes > std::min(budget, dynamic_limit)) return SMX_STATUS_SUCCESS;
        if (cluster == 1) {
            int blocks = 0;
            SMX_RETURN_IF_ERROR(blocks_per_multiprocessor(kernel, cuda::kSpatialTileThreads, shared_bytes, &blocks));
            if (blocks == 0) return SMX_STATUS_SUCCESS;
        } else {
            if (max_active_clusters(kernel, cluster, cuda::kSpatialTileThreads, shared_bytes) == 0) return SMX_STATUS_SUCCESS;
        }
        *choice = {true, vectors, cluster, slice_len, shared_bytes};
        *placed = true;
        return SMX_STATUS_SUCCESS;
    };

    bool placed = false;
    for (int vectors = max_vectors; vectors >= std::min(max_vectors, kSpatialMinUnclusteredVectors) && !placed;
         vectors /= 2) {
        SMX_RETURN_IF_ERROR(try_config(vectors, 1, kSpatialSliceBudgets[0], &placed));
    }
    const int max_cluster = clusters ? 8 : 1;
    for (const std::size_t budget : kSpatialSliceBudgets) {
        for (int vectors = max_vectors; vectors >= std::min(max_vectors, 2) && !placed; vectors /= 2) {
            for (int cluster = 1; cluster <= max_cluster && !placed; cluster *= 2) {
                SMX_RETURN_IF_ERROR(try_config(vectors, cluster, budget, &placed));
            }
        }
        if (placed) break;
    }
    for (int vectors = max_vectors; vectors >= 1 && !placed; vectors /= 2) {
        for (int cluster = 1; cluster <= (clusters ? 16 : 1) && !placed; cluster *= 2) {
            SMX_RETURN_IF_ERROR(try_config(vectors, cluster, dynamic_limit, &placed));
        }
    }
    if (!placed) return SMX_STATUS_SUCCESS;
    // Few tiles would leave SMs idle: split each column over more CTAs while slices stay long enough.
    const std::int64_t tiles = info.outer * ceil_div(info.inner, choice->vectors * pack);
    const std::int64_t wanted_ctas = kSpatialSpreadCtasPerSm * limits.multiprocessor_count;
    while (choice->cluster < max_cluster && tiles * choice->cluster < wanted_ctas &&
           ceil_div(info.row_len, 2 * choice->cluster) >= kSpatialMinSlice) {
        const SpatialTileChoice before = *choice;
        SMX_RETURN_IF_ERROR(try_config(before.vectors, before.cluster * 2, before.shared_bytes, &placed));
        if (!placed) {
            *choice = before;
            break;
        }
    }
    return SMX_STATUS_SUCCESS;
}

// SMX_CUDA_LONG_COLUMNS=online runs columns too long for any cluster on spatial-online instead of the
// rule's spatial-split, so that a benchmark can time both on the same shapes and tests can reach both.
// Unset, or any other value (`split` included): the rule, split wherever a column is long enough for two
// chunks (it beat spatial-online from 1 to 1056 tiles, perf-notes run 173). Read when a plan is made.
bool spatial_online_forced() {
    const char* value = std::getenv("SMX_CUDA_LONG_COLUMNS");
    return value != nullptr && std::strcmp(value, "online") == 0;
}

// Columns a spatial-split thread takes at once (1 for the one-element instances) and the byte alignment
// its vector accesses need of x and y.
struct SplitPacks {
    int columns = 1;
    std::size_t x_alignment = 1;
    std::size_t y_alignment = 1;
};

// Whether spatial-split's vector instances can run these tensors given aligned bases: inner a whole number
// of vectors (so a vector is valid whole or not at all), and strides that keep every vector of x and of y
// aligned to its size. *packs: the vector.
bool split_vectors_fit(const SoftmaxInfo& info, SplitPacks* packs) {
    const auto x_size = static_cast<std::int64_t>(dtype_size(info.x_dtype));
    const auto y_size = static_cast<std::int64_t>(dtype_size(info.y_dtype));
    const std::int64_t compute_size = info.x_dtype == SMX_DTYPE_F64 ? 8 : 4;
    const std::int64_t columns = cuda::kSpatialSplitPackBytes / compute_size;
    const std::int64_t x_alignment = columns * x_size;
    const std::int64_t y_alignment = columns * y_size;
    const bool several_outer = info.outer > 1;  // a single outer index's stride is never used
    const bool fits = info.inner % columns == 0 && (info.x.axis_stride * x_size) % x_alignment == 0 &&
                      (!several_outer || (info.x.outer_stride * x_size) % x_alignment == 0) &&
                      (info.y.axis_stride * y_size) % y_alignment == 0 &&
                      (!several_outer || (info.y.outer_stride * y_size) % y_alignment == 0);
    *packs = {static_cast<int>(columns), static_cast<std::size_t>(x_alignment), static_cast<std::size_t>(y_alignment)};
    return fits;
}

// Spatial-split over tiles of `width` columns: chunks of whole loop steps (of both kernels), as many as
// fill the device's resident slots of both kernels kSpatialSplitWaves times and at least two, none under
// kSpatialSplitMinSteps steps a thread. *planned = false where the column makes one chunk only, or the
// tiles exceed the grid's y limit.
smxStatus_t plan_spatial_split(const SoftmaxInfo& info, const DeviceLimits& limits, const SplitPacks& packs, int width,
                               CudaSoftmaxPlan* plan, bool* planned) {
    *planned = false;
    const bool vectors = packs.columns > 1;
    const std::int64_t tiles_per_outer = ceil_div(info.inner, width);
    const std::int64_t tiles = info.outer * tiles_per_outer;
    if (tiles > kMaxGridY) return SMX_STATUS_SUCCESS;
    const void* stats_kernel = cuda::spatial_split_stats_kernel(info.x_dtype, info.y_dtype, vectors);
    const void* write_kernel = cuda::spatial_split_write_kernel(info.x_dtype, info.y_dtype, vectors);
    SMX_RETURN_IF_ERROR(require_kernel(stats_kernel, info, "spatial-split statistics"));
    SMX_RETURN_IF_ERROR(require_kernel(write_kernel, info, "spatial-split write"));
    int stats_blocks = 0;
    int write_blocks = 0;
    SMX_RETURN_IF_ERROR(blocks_per_multiprocessor(stats_kernel, cuda::kSpatialSplitThreads, 0, &stats_blocks));
    SMX_RETURN_IF_ERROR(blocks_per_multiprocessor(write_kernel, cuda::kSpatialSplitThreads, 0, &write_blocks));
    const std::int64_t slots =
        static_cast<std::int64_t>(limits.multiprocessor_count) * std::max(std::min(stats_blocks, write_blocks), 1);
    const int unroll = vectors ? cuda::kSpatialSplitVectorUnroll : cuda::kSpatialSplitUnroll;
    const std::int64_t axis_threads = cuda::kSpatialSplitThreads / (width / packs.columns);
    const std::int64_t step_positions = axis_threads * unroll;
    // As many chunks as wanted and the minimum chunk allows; where they would spill into a last wave under
    // half full, fewer, in whole waves. Rounding the chunk up to whole loop steps then only lowers the count.
    const std::int64_t wanted_chunks = std::max<std::int64_t>(2, kSpatialSplitWaves * slots / tiles);
    std::int64_t target_chunks =
        std::max<std::int64_t>(1, std::min(wanted_chunks, info.row_len / (step_positions * kSpatialSplitMinSteps)));
    const std::int64_t ctas = tiles * target_chunks;
    if (ctas > slots && ctas % slots != 0 && ctas % slots < slots / 2) {
        target_chunks = std::max<std::int64_t>(1, ctas / slots * slots / tiles);
    }
    const std::int64_t chunk_len = round_up(ceil_div(info.row_len, target_chunks), step_positions);
    const std::int64_t chunks = ceil_div(info.row_len, chunk_len);
    if (chunks < 2) return SMX_STATUS_SUCCESS;
    const std::size_t compute_size = info.x_dtype == SMX_DTYPE_F64 ? sizeof(double) : sizeof(float);
    const dim3 grid(static_cast<unsigned>(chunks), static_cast<unsigned>(tiles));
    plan->args.tiles_per_outer = tiles_per_outer;
    plan->args.tiles = tiles;
    plan->args.tile_width = width;
    plan->args.slice_len = chunk_len;
    plan->args.chunks = chunks;
    plan->workspace = static_cast<std::size_t>(tiles * chunks * width) * 2 * compute_size;
    plan->launches[0] = {stats_kernel, grid, dim3(cuda::kSpatialSplitThreads), 0, 0};
    plan->launches[1] = {write_kernel, grid, dim3(cuda::kSpatialSplitThreads), 0, 0};
    plan->launch_count = 2;
    plan->text = fmt::format("cuda spatial-split tile={} columns_per_thread={} axis_threads={} chunk={} chunks={} "
                             "threads={} workspace={}",
                             width, packs.columns, axis_threads, chunk_len, chunks, cuda::kSpatialSplitThreads,
                             plan->workspace);
    *planned = true;
    return SMX_STATUS_SUCCESS;
}

// Columns too long for any cluster, one element a thread: spatial-split, or spatial-online where forced
// (SMX_CUDA_LONG_COLUMNS=online), where a column is too short for two chunks, or where the tiles exceed
// the grid's y limit.
smxStatus_t plan_one_element_columns(const SoftmaxInfo& info, const DeviceLimits& limits, CudaSoftmaxPlan* plan) {
    const int width = static_cast<int>(std::min<std::int64_t>(32, next_pow2(info.inner)));
    if (!spatial_online_forced()) {
        bool planned = false;
        SMX_RETURN_IF_ERROR(plan_spatial_split(info, limits, SplitPacks{}, width, plan, &planned));
        if (planned) return SMX_STATUS_SUCCESS;
    }
    // Spatial-online: one CTA per tile, with enough threads along the axis to fill every SM when tiles are
    // few, but no more than the axis has.
    const std::int64_t tiles_per_outer = ceil_div(info.inner, width);
    const std::int64_t tiles = info.outer * tiles_per_outer;
    plan->args.tiles_per_outer = tiles_per_outer;
    plan->args.tiles = tiles;
    plan->args.tile_width = width;
    const void* kernel = cuda::spatial_online_softmax_kernel(info.x_dtype, info.y_dtype);
    SMX_RETURN_IF_ERROR(require_kernel(kernel, info, "spatial-online"));
    const std::int64_t device_threads =
        static_cast<std::int64_t>(limits.multiprocessor_count) * std::max(limits.max_threads_per_multiprocessor, 1024);
    std::int64_t threads = std::clamp<std::int64_t>(prev_pow2(std::max<std::int64_t>(device_threads / tiles, 1)), 128, 1024);
    while (threads > 32 && threads / 2 >= width * next_pow2(info.row_len)) threads /= 2;
    int blocks = 0;
    SMX_RETURN_IF_ERROR(blocks_per_multiprocessor(kernel, static_cast<int>(threads), 0, &blocks));
    const unsigned grid = persistent_grid(tiles, blocks, limits.multiprocessor_count);
    plan->launches[0] = {kernel, dim3(grid), dim3(static_cast<unsigned>(threads)), 0, 0};
    plan->text = fmt::format("cuda spatial-online tile={} axis_threads={} threads={} grid={}", width, threads / width,
                             threads, grid);
    return SMX_STATUS_SUCCESS;
}

// Columns too long for any cluster (x read twice). Where inner is wider than kSplitVectorsMinInner and the
// strides allow vector accesses, spatial-split's vector instances (tiles of up to kSpatialSplitMaxWidth
// columns), with the one-element plan kept for calls whose x or y base is misaligned for them; otherwise the
// one-element plan alone.
smxStatus_t plan_long_columns(const SoftmaxInfo& info, const DeviceLimits& limits, CudaSoftmaxPlan* plan) {
    SplitPacks packs;
    if (info.inner > kSplitVectorsMinInner && !spatial_online_forced() && split_vectors_fit(info, &packs)) {
        const CudaSoftmaxPlan base = *plan;
        const int width = static_cast<int>(std::min<std::int64_t>(cuda::kSpatialSplitMaxWidth, next_pow2(info.inner)));
        bool planned = false;
        SMX_RETURN_IF_ERROR(plan_spatial_split(info, limits, packs, width, plan, &planned));
        if (planned) {
            auto unaligned = std::make_shared<CudaSoftmaxPlan>(base);
            SMX_RETURN_IF_ERROR(plan_one_element_columns(info, limits, unaligned.get()));
            plan->workspace = std::max(plan->workspace, unaligned->workspace);
            plan->text += fmt::format("; unaligned x or y: {}", unaligned->text.substr(std::strlen("cuda ")));
            plan->x_base_alignment = packs.x_alignment;
            plan->y_base_alignment = packs.y_alignment;
            plan->unaligned_plan = std::move(unaligned);
            return SMX_STATUS_SUCCESS;
        }
        *plan = base;
    }
    return plan_one_element_columns(info, limits, plan);
}

smxStatus_t plan_spatial(const SoftmaxInfo& info, const DeviceLimits& limits, CudaSoftmaxPlan* plan) {
    plan->family = KernelFamily::Spatial;
    plan->args.x_axis_stride = info.x.axis_stride;
    plan->args.y_axis_stride = info.y.axis_stride;
    plan->args.inner = info.inner;
    plan->args.x_outer_stride = info.x.outer_stride;
    plan->args.y_outer_stride = info.y.outer_stride;
    plan->launch_count = 1;

    // (a) Whole columns cached on chip by one CTA or a cluster: x read once, y written once.
    const void* tile_kernel = cuda::spatial_tile_softmax_kernel(info.x_dtype, info.y_dtype, 16, cuda::kSpatialTileThreads);
    SMX_RETURN_IF_ERROR(require_kernel(tile_kernel, info, "spatial-tile"));
    SpatialTileChoice tile;
    SMX_RETURN_IF_ERROR(choose_spatial_tile(info, limits, tile_kernel, &tile));
    if (tile.fits) {
        const int width = tile.vectors * static_cast<int>(16 / dtype_size(info.x_dtype));
        // 16-bit x written as f32, at tile rows of 128 bytes or more: the same geometry in 8-byte vectors
        // (4 columns a thread, 16-byte f32 stores; 48 registers, so 5 CTAs per SM where shared memory allows
        // them). H200, perf-notes runs 98-99, bf16 / f16 -> f32, both modes, % of copy: 16x8x4096x64 dim=2
        // 61-62 -> 70-71, 64x128x4096 dim=1 78-80 -> 82-83, the transpose 61 -> 67; at 64-byte rows 8-byte
        // vectors lost 4-6 points (32x1024x1024, 8192x4096 dim=0), and for 16-bit -> 16-bit 1-14 everywhere.
        int vector_bytes = 16;
        if (dtype_size(info.x_dtype) == 2 && dtype_size(info.y_dtype) == 4 && tile.vectors * 16 >= kSpatialNarrowVectorMinRowBytes) {
            const void* narrow_kernel = cuda::spatial_tile_softmax_kernel(info.x_dtype, info.y_dtype, 8, cuda::kSpatialTileThreads);
            SMX_RETURN_IF_ERROR(require_kernel(narrow_kernel, info, "spatial-tile (8-byte vectors)"));
            std::size_t narrow_dynamic_limit = 0;
            SMX_RETURN_IF_ERROR(prepare_spatial_tile_kernel(limits, narrow_kernel, &narrow_dynamic_limit));
            // Same static shared memory, fewer registers: what fit the 16-byte kernel fits this one.
            if (tile.shared_bytes <= narrow_dynamic_limit) {
                tile_kernel = narrow_kernel;
                vector_bytes = 8;
            }
        }
        // Unclustered tiles take 128-thread CTAs where those let an SM hold more tiles at once: each CTA holds
        // one tile, and what an SM holds over a tile's residence (load, statistics, fold, stores) is what bounds
        // this kernel. H200, perf-notes runs 107-109: 64x128x4096 dim=1 (32 KB tiles: 5-6 CTAs of 128
        // threads per SM against 4 register-bound CTAs of 256), % of copy, 16-bit -> 16-bit 73-80 -> 80-84,
        // f32 -> bf16 80.5-82.6 -> 88.2-88.8, f32 equal; where the count ties (64 KB tiles, 3 per SM either
        // way) 128 threads lost 1-6 points, and 512-thread CTAs (2 per SM) lost 2-30 everywhere. 16-bit x
        // written as f32 ties there too (5 CTAs of 8-byte vectors either way) and keeps 256 threads, though
        // forced to 128 it measured 82-83 -> 84.5-84.9.
        int threads = cuda::kSpatialTileThreads;
        if (tile.cluster == 1) {
            const void* small_kernel =
                cuda::spatial_tile_softmax_kernel(info.x_dtype, info.y_dtype, vector_bytes, cuda::kSpatialTileSmallThreads);
            SMX_RETURN_IF_ERROR(require_kernel(small_kernel, info, "spatial-tile (128 threads)"));
            std::size_t small_dynamic_limit = 0;
            SMX_RETURN_IF_ERROR(prepare_spatial_tile_kernel(limits, small_kernel, &small_dynamic_limit));
            int large_blocks = 0;
            int small_blocks = 0;
            SMX_RETURN_IF_ERROR(blocks_per_multiprocessor(tile_kernel, threads, tile.shared_bytes, &large_blocks));
            if (tile.shared_bytes <= small_dynamic_limit) {
                SMX_RETURN_IF_ERROR(blocks_per_multiprocessor(small_kernel, cuda::kSpatialTileSmallThreads,
                                                              tile.shared_bytes, &small_blocks));
            }
            if (small_blocks > large_blocks) {
                tile_kernel = small_kernel;
                threads = cuda::kSpatialTileSmallThreads;
            }
        }
        // 64-byte tile rows are half an L2 line. Where x's contiguous rows span whole lines, the line's other
        // half is a neighbouring tile's row, read by another CTA at about the same time, and the copies ask
        // L2 to fetch the whole line from DRAM at once. H200, perf-notes run 147 (layouts quick, two samples,
        // % of copy): 8192x4096 dim=0 +1-4 points on every pair (f32 65 -> 69, bf16 55-57 -> 58-60),
        // 32x1024x1024 dim=1 16 -> 16 +2, f32 +1, 16-bit -> f32 -0.6 to +0.3; tile rows of 128 or 256 bytes,
        // whose copies ask for whole lines anyway, within -1 to +1 (so not asked for); 256-byte fetches
        // lost up to 3 points on f32 -> bf16. Narrower tile rows (16-32 bytes) are not measured and keep
        // plain copies, as do x rows under a line (the other half may be bytes no CTA reads).
        const int row_bytes = width * static_cast<int>(dtype_size(info.x_dtype));
        const bool whole_lines = vector_bytes == 16 && row_bytes == kSpatialWholeLineRowBytes &&
                                 info.inner * static_cast<std::int64_t>(dtype_size(info.x_dtype)) >= 2 * kSpatialWholeLineRowBytes;
        plan->args.x_whole_lines = whole_lines ? 1 : 0;
        const std::int64_t tiles_per_outer = ceil_div(info.inner, width);
        const std::int64_t clusters = std::min<std::int64_t>(info.outer * tiles_per_outer, INT_MAX / tile.cluster);
        const unsigned grid = static_cast<unsigned>(clusters * tile.cluster);
        plan->args.tiles_per_outer = tiles_per_outer;
        plan->args.tiles = info.outer * tiles_per_outer;
        plan->args.tile_width = width;
        plan->args.slice_len = tile.slice_len;
        plan->launches[0] = {tile_kernel, dim3(grid), dim3(static_cast<unsigned>(threads)), tile.shared_bytes,
                             tile.cluster > 1 ? static_cast<unsigned>(tile.cluster) : 0u};
        plan->text = fmt::format("cuda spatial-tile tile={} vectors={}x{}B cluster={} slice={} smem={} threads={} grid={}{}",
                                 width, tile.vectors * 16 / vector_bytes, vector_bytes, tile.cluster, tile.slice_len,
                                 tile.shared_bytes, threads, grid, whole_lines ? " lines=128B" : "");
        return SMX_STATUS_SUCCESS;
    }

    // (b) Columns too long for any cluster: statistics, then a second read of x.
    return plan_long_columns(info, limits, plan);
}

smxStatus_t plan_general(const SoftmaxInfo& info, const DeviceLimits& limits, CudaSoftmaxPlan* plan) {
    const void* kernel = cuda::general_softmax_kernel(info.x_dtype, info.y_dtype);
    SMX_RETURN_IF_ERROR(require_kernel(kernel, info, "general"));
    const int threads_per_row = info.row_len >= kGeneralBlockRowLen ? kGeneralThreads : 32;
    int blocks = 0;
    SMX_RETURN_IF_ERROR(blocks_per_multiprocessor(kernel, kGeneralThreads, 0, &blocks));
    const unsigned grid =
        persistent_grid(ceil_div(info.rows, kGeneralThreads / threads_per_row), blocks, limits.multiprocessor_count);
    plan->family = KernelFamily::General;
    plan->args.x_axis_stride = info.x.axis_stride;
    plan->args.y_axis_stride = info.y.axis_stride;
    plan->args.index_ndim = info.index_ndim;
    for (int d = 0; d < info.index_ndim; ++d) {
        plan->args.index_shape[d] = info.index_shape[d];
        plan->args.x_index_strides[d] = info.x.index_strides[d];
        plan->args.y_index_strides[d] = info.y.index_strides[d];
    }
    plan->args.threads_per_row = threads_per_row;
    plan->launches[0] = {kernel, dim3(grid), dim3(kGeneralThreads), 0, 0};
    plan->launch_count = 1;
    plan->text = fmt::format("cuda general threads_per_row={} threads={} grid={}", threads_per_row, kGeneralThreads, grid);
    return SMX_STATUS_SUCCESS;
}

}  // namespace

namespace cuda {

int choose_warp_shape(std::int64_t row_len, std::size_t x_size, std::size_t y_size, WarpShape* shape) {
    // Narrow rows (fewer than 32 lanes), H200, perf-notes run 66 (quick smx-bench, two samples, % of copy,
    // two rows per thread -> one): 16-bit x 1048576 x 32 +2-5 points (bf16 -> bf16 81.6 -> 85.4-86.8,
    // f16 -> f32 log 87.4 -> 89.1-90.0), 1048576 x 128 16 -> 16 +1-5 (f16 softmax 90.2 -> 95.5), 16 -> f32
    // +0.5; f32 -> f32 1048576 x 32 +2-4 (91.0 -> 94.3-95.4); but f32 -> bf16 1048576 x 32 -2.5 (89.6 ->
    // 87.0): f32 x written narrower keeps two. (Four rows per thread lost 6-18 points everywhere, run 65.)
    // Two packs per lane, one row per thread, on half the lanes, where the table lists such a shape and the
    // pair takes it (f32 x: rows of 17-128; 16-bit -> 16-bit: 17-32 and 129-256; 16-bit -> f32: 129-256,
    // warp_narrow_two_packs). One shuffle level and half the per-row setup fewer per element, at the same
    // registers for f32 (32) and 40 instead of 32 for 16-bit (12 CTAs per SM). H200, quick smx-bench, two
    // samples, % of copy, one pack -> two (at 64-thread CTAs): run 116, f16 / bf16 -> same, rows of 32
    // +1-4.5 (log 84.2-84.4 -> 87.1-88.3), of 256 (against 32 lanes x 2 rows) +2.5-6 (log 87.5-88.4 ->
    // 93.5-93.8), but rows of 64 -4.5 to -6 and of 128 -1 to -6 (softmax 95.9-96.6 -> 90.0-90.6; those
    // shapes are not instantiated); run 117, f32 x: f32 -> bf16
    // rows of 32 / 64 / 128 +3-8.5 (log 85.3 -> 92.9-93.4, 92.0 -> 99.2-99.3, 93.5 -> 102.3-102.5), f32 ->
    // f32 rows of 128 +0.3-1.0 (log 98.7 -> 99.3-99.7; past torch eager's 1048576x128 softmax in the same
    // process), 32 -0.7 to +1.4, 64 log +0.3-0.6 but softmax -0.4 to -0.5; run 128 (16-bit -> f32, its
    // stores paired), three samples: rows of 256 on 16 lanes against 32 lanes x 2 rows +0.4-0.7 (95.5-95.9
    // -> 96.1-96.3), rows of 32 on 2 lanes against 4 -1 to -2.5 (89.2-91.1 -> 88.1-89.3).
    const int narrow_rows = warp_narrow_rows_per_thread(x_size, y_size);
    const int pack = static_cast<int>(16 / x_size);
    const auto pick = [&](const auto& shapes) {
        int index = 0;
        const auto fits = [&](const WarpShape& s) {
            if (s.capacity() < row_len) return false;
            if (s.narrow_two_packs(pack)) return warp_narrow_two_packs(x_size, y_size, s.lanes);
            return s.lanes == 32 || s.rows_per_thread == narrow_rows;
        };
        while (index + 1 < static_cast<int>(shapes.size()) && !fits(shapes[index])) ++index;
        *shape = shapes[index];
        return index;
    };
    switch (x_size) {
        case 2: return pick(WarpShapeTable<8>::shapes);
        case 4: return pick(WarpShapeTable<4>::shapes);
        default: return pick(WarpShapeTable<2>::shapes);
    }
}

const void* warp_softmax_kernel(smxDataType_t x_dtype, smxDataType_t y_dtype, int shape_index) {
    switch (x_dtype) {
        case SMX_DTYPE_F16: return warp_softmax_kernel_f16(y_dtype, shape_index);
        case SMX_DTYPE_BF16: return warp_softmax_kernel_bf16(y_dtype, shape_index);
        case SMX_DTYPE_F32: return warp_softmax_kernel_f32(y_dtype, shape_index);
        case SMX_DTYPE_F64: return warp_softmax_kernel_f64(y_dtype, shape_index);
    }
    return nullptr;
}

}  // namespace cuda

smxStatus_t make_cuda_softmax_plan(const SoftmaxInfo& info, int device_id, const DeviceLimits& limits,
                                   std::unique_ptr<SoftmaxPlan>* plan) {
    auto candidate = std::make_unique<CudaSoftmaxPlan>();
    candidate->device_id = device_id;
    candidate->x_size = dtype_size(info.x_dtype);
    candidate->y_size = dtype_size(info.y_dtype);
    if (info.numel == 0) {
        candidate->text = "cuda none (zero-size tensor: nothing to launch)";
        *plan = std::move(candidate);
        return SMX_STATUS_SUCCESS;
    }
    cuda::ScopedDevice device(device_id);
    SMX_RETURN_IF_ERROR(device.status());
    candidate->args.rows = info.rows;
    candidate->args.row_len = info.row_len;
    candidate->args.log_mode = info.is_log() ? 1 : 0;
    switch (info.layout) {
        case SoftmaxLayout::Rows: SMX_RETURN_IF_ERROR(plan_rows(info, limits, candidate.get())); break;
        case SoftmaxLayout::Spatial: SMX_RETURN_IF_ERROR(plan_spatial(info, limits, candidate.get())); break;
        case SoftmaxLayout::General: SMX_RETURN_IF_ERROR(plan_general(info, limits, candidate.get())); break;
    }
    *plan = std::move(candidate);
    return SMX_STATUS_SUCCESS;
}

}  // namespace smx
