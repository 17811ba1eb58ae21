// preferences.cpp - the one place the CUDA backend reads its debugging environment variables.
#include "cuda/plan/preferences.hpp"

#include <cstdlib>
#include <cstring>

#include "cuda/block_regs/params.hpp"

namespace smx::cuda {
namespace {

bool variable_is(const char* name, const char* value) {
    const char* set = std::getenv(name);
    return set != nullptr && std::strcmp(set, value) == 0;
}

// 64 or 128 when the variable says exactly that, else 0 (the rule).
int thread_count(const char* name) {
    if (variable_is(name, "64")) return 64;
    if (variable_is(name, "128")) return 128;
    return 0;
}

}  // namespace

PlanPreferences plan_preferences_from_environment() {
    PlanPreferences preferences;
    preferences.warp_threads = thread_count("SMX_CUDA_WARP_THREADS");
    preferences.warp_offsets_64 = variable_is("SMX_CUDA_WARP_OFFSETS", "64");
    preferences.regs_min_threads = thread_count("SMX_CUDA_REGS_MIN_THREADS");
    const char* cluster = std::getenv("SMX_CUDA_MAX_CLUSTER");
    const int cap = cluster == nullptr ? 0 : std::atoi(cluster);
    preferences.max_cluster = cap >= 1 && cap < kBlockRegsMaxCluster ? cap : 0;
    if (variable_is("SMX_CUDA_LONG_ROWS", "cluster")) preferences.long_rows = LongRowsPreference::Cluster;
    if (variable_is("SMX_CUDA_LONG_ROWS", "grid")) preferences.long_rows = LongRowsPreference::Grid;
    if (variable_is("SMX_CUDA_LONG_ROWS", "split")) preferences.long_rows = LongRowsPreference::Split;
    if (variable_is("SMX_CUDA_LONG_ROWS", "steps")) preferences.long_rows = LongRowsPreference::Steps;
    if (variable_is("SMX_CUDA_LONG_COLUMNS", "online")) preferences.long_columns = LongColumnsPreference::Online;
    if (variable_is("SMX_CUDA_BACKWARD_SPATIAL_COPY", "sectors")) {
        preferences.backward_spatial_copy = BackwardSpatialCopyPreference::Sectors;
    }
    if (variable_is("SMX_CUDA_BACKWARD_SPATIAL_COPY", "registers")) {
        preferences.backward_spatial_copy = BackwardSpatialCopyPreference::Registers;
    }
    if (variable_is("SMX_CUDA_BATCH_INVARIANT", "general-rows")) {
        preferences.batch_invariant = BatchInvariantPreference::GeneralRows;
    }
    if (variable_is("SMX_CUDA_BATCH_INVARIANT", "in-order")) {
        preferences.batch_invariant = BatchInvariantPreference::GeneralRowsInOrder;
    }
    if (variable_is("SMX_CUDA_BATCH_INVARIANT", "general")) preferences.batch_invariant = BatchInvariantPreference::General;
    preferences.any_option_set = variable_is("SMX_CUDA_OPTION_SET", "any");
    preferences.packed_options = !variable_is("SMX_CUDA_OPTION_SET", "unpacked");
    if (variable_is("SMX_CUDA_BACKWARD_SPATIAL_ROWS", "narrow")) {
        preferences.backward_spatial_rows = BackwardSpatialRowsPreference::Narrow;
    }
    if (variable_is("SMX_CUDA_BACKWARD_EXCHANGE", "pull")) preferences.backward_exchange = BackwardExchangePreference::Pull;
    return preferences;
}

}  // namespace smx::cuda
