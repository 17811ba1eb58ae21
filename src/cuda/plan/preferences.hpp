// preferences.hpp - overrides of the CUDA planners' rules, for benchmarks that time one plan against another
// and for tests that reach a plan on shapes the rules would not give it. The default value means "the rules".
// Planners take them as a value; nothing below reads the environment.
#pragma once

namespace smx::cuda {

// The long-rows rule's replacement: cluster = block-regs clusters where they fit (else block-online); grid =
// grid-regs wherever every CTA fits at once; split = split-row for rows of split_row.min_len or more; steps =
// grid-regs-steps wherever grid-regs cannot hold every row but the steps kernel holds one.
enum class LongRowsPreference { Rule, Cluster, Grid, Split, Steps };
// Columns too long for any cluster: the rule (spatial-split where a column makes two chunks), or online.
enum class LongColumnsPreference { Rule, Online };
// How backward-spatial fills its cached tile: the rule (cp.async, whole 128-byte lines for narrow tile rows),
// cp.async fetching only the sectors asked for, or loads through registers a position at a time (the kernel
// before cp.async).
enum class BackwardSpatialCopyPreference { Rule, Sectors, Registers };
// backward-spatial's tile rows: the rule (one CTA a tile down to 64-byte rows, clusters of 16 before rows
// narrower than 64 bytes), or narrow (one CTA a tile down to 4 vectors, clusters of 8 before narrower rows).
enum class BackwardSpatialRowsPreference { Rule, Narrow };

// Where batch-invariant softmax problems run: the rule (Rows problems on the fast families' options instances
// configured from the row length alone, the rest on general-rows or the general kernel), general-rows (every
// Rows problem on the general-rows kernels, the rule before the fast families took them), the same with each
// thread's loads in order, or general (every problem on the general kernel).
enum class BatchInvariantPreference { Rule, GeneralRows, GeneralRowsInOrder, General };

// How backward-regs' cluster CTAs exchange their row sums: the rule (each pushes its sum into every peer's
// mailbox), or pull (each keeps its sum for the peers to read between two cluster barriers).
enum class BackwardExchangePreference { Rule, Pull };

struct PlanPreferences {
    int warp_threads = 0;          // 0: the rule; 64 or 128: the warp kernel's CTA size
    bool warp_offsets_64 = false;  // the warp kernel's 64-bit index body even where 32 bits suffice
    int regs_min_threads = 0;      // 0: the rule; 64 or 128: block-regs' smallest CTA for every instance
    int max_cluster = 0;           // 0: the device's limit; 1..15: clusters of at most this many CTAs (block-regs,
                                   // the log-probability rows, backward-regs, backward-spatial)
    LongRowsPreference long_rows = LongRowsPreference::Rule;
    LongColumnsPreference long_columns = LongColumnsPreference::Rule;
    BackwardSpatialCopyPreference backward_spatial_copy = BackwardSpatialCopyPreference::Rule;
    BatchInvariantPreference batch_invariant = BatchInvariantPreference::Rule;
    bool any_option_set = false;   // the fast row families' options instance of every kind (RowsOptionSet::Any)
    bool packed_options = true;    // block-regs' packed 64-value options instance (unmasked set, 16-bit x)
    BackwardSpatialRowsPreference backward_spatial_rows = BackwardSpatialRowsPreference::Rule;
    BackwardExchangePreference backward_exchange = BackwardExchangePreference::Rule;
};

// The debugging override: SMX_CUDA_WARP_THREADS, SMX_CUDA_WARP_OFFSETS, SMX_CUDA_REGS_MIN_THREADS,
// SMX_CUDA_MAX_CLUSTER, SMX_CUDA_LONG_ROWS, SMX_CUDA_LONG_COLUMNS, SMX_CUDA_BACKWARD_SPATIAL_COPY,
// SMX_CUDA_BACKWARD_SPATIAL_ROWS, SMX_CUDA_BACKWARD_EXCHANGE, SMX_CUDA_BATCH_INVARIANT and SMX_CUDA_OPTION_SET
// (docs/api.md), read here and only here, each time a descriptor is created. Values it does not know mean the
// rule.
PlanPreferences plan_preferences_from_environment();

}  // namespace smx::cuda
