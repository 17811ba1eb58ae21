// tuning.cpp - the tuning tables: one value per line, its reason, and where it was measured (docs/performance.md).
#include "cuda/plan/tuning.hpp"

namespace smx::cuda {
namespace {

constexpr TuningTable kSm90{
    "sm_90",
    WarpTuning{
        64,   // small_cta_threads: finer refill of each SM where a CTA still moves >= 2 KiB (#warp, CTA size)
        128,  // cta_threads: 64-thread CTAs of 1 KiB left the block scheduler the bottleneck (#warp)
    },
    BlockRegsTuning{
        2,     // min_ctas_per_sm: one CTA's loads overlap another's math and stores (#block-regs, search)
        0.9,   // good_utilization: idle register slots cost more than a larger cluster (#block-regs, search)
        128,   // min_threads: the packed instance lost at 64 threads (#block-regs, CTA size)
        64,    // min_threads_widened: shorter block reduction, more CTAs in flight (#block-regs, CTA size)
        1024,  // min_cluster_slice: one CTA holds shorter slices with few threads (#block-regs, search)
        4,     // packed_min_ctas_per_sm: 2 per SM lost to smaller CTAs in larger clusters (#block-regs, packed)
        0.95,  // packed_good_utilization: fuller slots mattered more than CTAs per SM (#block-regs, packed)
        8,     // packed_pair_min_ctas_per_sm: rows of ~16384 run faster as two 128-thread CTAs (#block-regs, pairs)
        8,     // f32_min_ctas_per_sm: clusters of 128-thread CTAs beat larger CTAs (#block-regs, f32 clusters)
        4,     // f32_fallback_min_ctas_per_sm: rows past 65536 in 256-thread CTAs (#block-regs, f32 clusters)
        std::int64_t{1} << 19,  // cluster_over_grid_min_elements: push/packed clusters win from 2^19 (#grid-regs)
    },
    GridRegsTuning{
        16 * 1024,  // slice_bytes: ~16 KiB of x per CTA; larger slices lost on rows <= 256000 (#grid-regs, slices)
        64,         // max_chunks_per_row: longer rows double their slices instead (#grid-regs, slices)
        16384,      // max_slice_len (#grid-regs, slices)
        512,        // max_threads (#grid-regs, slices)
        64 * 1024,  // wide_slice_bytes: rows that do not all fit at 16 KiB (#grid-regs, wide slices)
        24576,      // min_len: shorter rows lose to one cluster, the grid barrier costs more (#grid-regs)
        65536,      // full_len: below it grid-regs only while it takes at most half the device (#grid-regs)
    },
    SplitRowTuning{
        32768,  // min_len: clusters win below (#split-row)
        256,    // chunk_target: a lone row spreads over ~256 CTAs, two waves of 132 SMs (#split-row)
        8192,   // min_chunk: a CTA's fixed cost stays small (#split-row)
        65536,  // max_chunk (#split-row)
        1024,   // max_chunks: every write CTA folds all of its row's partials (#split-row)
    },
    SpatialTuning{
        64 * 1024,  // tile_slice_budget: 16-32 KB slices were latency-bound (#spatial-tile, budget)
        2,          // spread_ctas_per_sm (#spatial-tile, spreading few tiles)
        64,         // min_slice (#spatial-tile, spreading few tiles)
        4,          // min_unclustered_vectors: each cluster doubling cost 7-15 points (#spatial-tile, clusters)
        128,        // narrow_vector_min_row_bytes: 8-byte vectors lost on 64-byte rows (#spatial-tile, vectors)
        64,         // whole_line_row_bytes: half-line rows gain from whole-line fetches (#spatial-tile, lines)
        32,         // split_vectors_min_inner: vectors lost where both tile whole rows (#spatial-split, vectors)
        2,          // split_waves (#spatial-split, chunks)
        8,          // split_min_steps (#spatial-split, chunks)
    },
    GeneralTuning{
        2048,  // block_row_len: a warp per shorter row, a block per longer one (#general)
    },
    // Backward: the forward's values where the traffic pattern is the same, adjusted where dy and y together
    // are twice the forward's bytes per element; none measured for the backward yet (#backward).
    BackwardTuning{
        128,        // warp_threads: the forward warp kernel's larger CTA (#warp)
        2,          // regs_min_ctas_per_sm: one CTA's loads overlap another's math and stores (#block-regs)
        0.9,        // regs_good_utilization: as the forward's search (#block-regs)
        64,         // regs_min_threads: as the forward's widened instances (#block-regs)
        1024,       // regs_min_cluster_slice: as the forward (#block-regs)
        24576,      // grid_min_len: the forward grid-regs' crossover with a cluster per row (#grid-regs)
        16 * 1024,  // grid_slice_bytes: the forward's 16 KiB of x per CTA, here of dy (+ as much of y) (#grid-regs)
        64,         // grid_max_chunks_per_row (#grid-regs)
        16384,      // grid_max_slice_len (#grid-regs)
        512,        // grid_max_threads (#grid-regs)
        256,        // split_chunk_target: a lone row over ~256 CTAs, as split-row (#split-row)
        8192,       // split_min_chunk (#split-row)
        65536,      // split_max_chunk (#split-row)
        1024,       // split_max_chunks (#split-row)
        16384,      // split_wide_chunk: split-row's 512-thread CTAs from this chunk length (#split-row)
        96 * 1024,  // spatial_tile_budget: two CTAs per SM with their static shared memory (#backward)
        4,          // spatial_min_unclustered_vectors: as spatial-tile (#spatial-tile)
        64,         // spatial_min_unclustered_row_bytes: spatial-tile's 64-byte rows, for 8-byte vectors too (#backward-layouts)
        64,         // spatial_large_cluster_row_bytes: clusters of 16 before 32-byte rows (#backward-layouts)
        2,          // spatial_spread_ctas_per_sm: as spatial-tile (#spatial-tile)
        64,         // spatial_min_slice: as spatial-tile (#spatial-tile)
        64,         // spatial_whole_line_row_bytes: spatial-tile's 64-byte rows, here also 32 (#backward-layouts)
        2048,       // general_block_row_len: as the forward general family (#general)
    },
    // Each value taken from the forward family with the same traffic; wide_cta_min_len, fill_waves and the
    // denser ce-regs searches moved by the first H200 runs (#log-probabilities-first-h200-runs).
    LogprobsTuning{
        128,    // eight_lane_max_len: one or two 16-byte packs a lane, as the warp family's narrow shapes
        2048,   // warp_max_len: a warp streams a row of up to 2048 as the general family does
        65536,  // wide_cta_min_len: 256-thread CTAs on rows of 32000 overlap more rows' fixed costs (#log-probabilities)
        1,      // fill_waves: one wave; chunks in a second wave waited for the first (#log-probabilities)
        4096,   // min_chunk: half of split-row's min_chunk; a cluster CTA's fixed cost is smaller
        2,      // regs_min_ctas_per_sm: block-regs' min_ctas_per_sm (#block-regs, search)
        0.9,    // regs_good_utilization: block-regs' good_utilization (#block-regs, search)
        64,     // regs_min_threads: block-regs' min_threads_widened (#block-regs, CTA size)
        1024,   // regs_min_cluster_slice: block-regs' min_cluster_slice (#block-regs, search)
        4,      // regs_packed_min_ctas_per_sm: block-regs' packed clusters of 4+ CTAs per SM (#block-regs)
        0.95,   // regs_packed_good_utilization: as block-regs' packed_good_utilization (#block-regs)
        8,      // regs_f32_min_ctas_per_sm: block-regs' f32 clusters of 8-per-SM CTAs (#block-regs)
        4,      // regs_f32_fallback_min_ctas_per_sm: block-regs' f32 clusters of 4-per-SM CTAs (#block-regs)
        32768,  // write_chunk: within split-row's chunk bounds (#split-row)
        2048,   // general_block_row_len: the general family's block_row_len (#general)
    },
};

}  // namespace

const TuningTable& tuning_for(const DeviceLimits&) {
    // Only sm_90 has been measured; every other architecture takes its numbers until it is.
    return kSm90;
}

}  // namespace smx::cuda
