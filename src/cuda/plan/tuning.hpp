// tuning.hpp - the numbers the CUDA planners decide with, one table per GPU architecture (tuning.cpp). Each
// value there carries its one-line reason and the section of docs/performance.md that measured it; the rules
// that read them live with their families. Compile-time shapes of the instances (values per thread, CTA
// sizes in launch bounds, the warp shape table) live in each family's params.hpp instead.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/device_limits.hpp"

namespace smx::cuda {

struct WarpTuning {
    int small_cta_threads;  // CTA size for shapes on 32 lanes and the narrow two-pack ones
    int cta_threads;        // CTA size for the other narrow shapes
};

struct BlockRegsTuning {
    int min_ctas_per_sm;               // "several CTAs per SM" for the default search
    double good_utilization;           // share of register slots holding elements that counts as good
    int min_threads;                   // smallest CTA of the packed (64-value) instance
    int min_threads_widened;           // smallest CTA of the 8-32-value instances
    std::int64_t min_cluster_slice;    // slices shorter than this are not worth a cluster CTA
    int packed_min_ctas_per_sm;        // 16-bit -> 16-bit packed search: CTAs per SM asked for
    double packed_good_utilization;    //   and its utilization
    int packed_pair_min_ctas_per_sm;   // a packed single CTA below this per SM runs as a pair
    int f32_min_ctas_per_sm;           // f32 x: clusters of CTAs that fit this many per SM
    int f32_fallback_min_ctas_per_sm;  // f32 x where no such cluster holds the row
    std::int64_t cluster_over_grid_min_elements;  // from this many elements a push/packed cluster beats grid-regs
};

struct GridRegsTuning {
    std::int64_t slice_bytes;          // bytes of x per CTA
    std::int64_t max_chunks_per_row;   // slices double while a row would need more CTAs than this
    std::int64_t max_slice_len;        // ... up to this many elements
    int max_threads;                   // CTA size cap
    std::int64_t wide_slice_bytes;     // "wide" slices where the normal ones do not all fit at once
    std::int64_t min_len;              // rows this long or longer may take grid-regs
    std::int64_t full_len;             // from here grid-regs may fill the device, not only half of it
};

struct SplitRowTuning {
    std::int64_t min_len;        // rows this long or longer may take split-row
    std::int64_t chunk_target;   // about row_len / chunk_target elements per chunk
    std::int64_t min_chunk;      // chunk length bounds
    std::int64_t max_chunk;
    std::int64_t max_chunks;     // chunks per row (the write kernel folds every one)
};

struct SpatialTuning {
    std::size_t tile_slice_budget;           // bytes of cached x per spatial-tile CTA
    std::int64_t spread_ctas_per_sm;         // few tiles spread over clusters until about this many CTAs per SM
    std::int64_t min_slice;                  // ... never into slices shorter than this
    int min_unclustered_vectors;             // whole columns in one CTA down to this many 16-byte vectors a row
    int narrow_vector_min_row_bytes;         // 16-bit -> f32 takes 8-byte vectors from tile rows this wide
    int whole_line_row_bytes;                // tile rows of this many bytes fetch x's whole 128-byte lines
    std::int64_t split_vectors_min_inner;    // spatial-split's vector instances only where inner is wider
    std::int64_t split_waves;                // spatial-split chunks fill the resident slots this many times
    std::int64_t split_min_steps;            // ... but no chunk under this many loop steps a thread
};

struct GeneralTuning {
    std::int64_t block_row_len;  // rows this long get a whole block, shorter ones a warp
};

// The backward families (src/cuda/backward). Not yet measured on their own: performance.md#backward says
// where each value comes from and what the H200 runs are to settle.
struct BackwardTuning {
    int warp_threads;                      // backward-warp's CTA size
    int regs_min_ctas_per_sm;              // backward-regs search: "several CTAs per SM"
    double regs_good_utilization;          //   and the share of register slots holding elements that is good
    int regs_min_threads;                  // smallest backward-regs CTA
    std::int64_t regs_min_cluster_slice;   // slices shorter than this are not worth a cluster CTA
    std::int64_t grid_min_len;             // rows this long or longer may spread over the device (backward-grid)
    std::int64_t grid_slice_bytes;         // bytes of dy per backward-grid CTA
    std::int64_t grid_max_chunks_per_row;  // slices double while a row would need more CTAs than this
    std::int64_t grid_max_slice_len;       //   up to this many elements
    int grid_max_threads;                  // backward-grid's CTA size cap
    std::int64_t split_chunk_target;       // backward-split: about row_len / chunk_target elements per chunk
    std::int64_t split_min_chunk;          //   chunk length bounds
    std::int64_t split_max_chunk;
    std::int64_t split_max_chunks;         //   chunks per row (every write CTA folds all of them)
    std::int64_t split_wide_chunk;         //   chunks this long or longer take 512 threads, shorter ones 256
    std::size_t spatial_tile_budget;       // bytes of cached dy and y per backward-spatial CTA
    int spatial_min_unclustered_vectors;   // SMX_CUDA_BACKWARD_SPATIAL_ROWS=narrow: one CTA a tile down to this many vectors
    std::int64_t spatial_min_unclustered_row_bytes;  // the rule: whole columns in one CTA down to tile rows this wide
    std::int64_t spatial_large_cluster_row_bytes;    // tile rows this narrow or narrower may take clusters of 16
    std::int64_t spatial_spread_ctas_per_sm;  // few tiles spread over clusters until about this many CTAs per SM
    std::int64_t spatial_min_slice;           //   never into slices shorter than this
    int spatial_whole_line_row_bytes;         // cached tile rows of at most this many bytes fetch whole lines
    std::int64_t general_block_row_len;    // backward-general: a block per row this long or longer, else a warp
};

// The log-probability kernels (src/cuda/logprobs). performance.md#log-probabilities says where each value comes
// from and what the first H200 runs measured.
struct LogprobsTuning {
    std::int64_t eight_lane_max_len;    // stats: rows this short take 8 lanes a row
    std::int64_t warp_max_len;          //   rows this short a warp a row, longer ones a CTA (or more)
    std::int64_t wide_cta_min_len;      //   rows this long take 512-thread CTAs, shorter ones 256
    std::int64_t fill_waves;            //   fewer rows than resident CTAs: chunks while the rows' CTAs fit this many waves
    std::int64_t min_chunk;             //   ... never into chunks shorter than this
    int regs_min_ctas_per_sm;           // ce-regs search: "several CTAs per SM"
    double regs_good_utilization;       //   and the share of register slots holding logits that is good
    int regs_min_threads;               //   smallest CTA
    std::int64_t regs_min_cluster_slice;  // slices shorter than this are not worth a cluster CTA
    int regs_packed_min_ctas_per_sm;    //   16-bit logits and dlogits: then the smallest cluster with this many
    double regs_packed_good_utilization;  //     CTAs per SM and this share full, where one exists
    int regs_f32_min_ctas_per_sm;       //   f32 logits: then the smallest cluster with this many per SM,
    int regs_f32_fallback_min_ctas_per_sm;  //   else with this many (both at regs_good_utilization)
    std::int64_t write_chunk;           // ce-write: elements of a row per CTA
    std::int64_t general_block_row_len; // general: a CTA per row this long or longer, else a warp
};

struct TuningTable {
    const char* name;  // "sm_90", for plan logs
    WarpTuning warp;
    BlockRegsTuning block_regs;
    GridRegsTuning grid_regs;
    SplitRowTuning split_row;
    SpatialTuning spatial;
    GeneralTuning general;
    BackwardTuning backward;
    LogprobsTuning logprobs;
};

// The table for the device: sm_90's where it was measured; other architectures take sm_90's numbers until
// measured (the device checks in each planner keep every choice legal there).
const TuningTable& tuning_for(const DeviceLimits& limits);

}  // namespace smx::cuda
