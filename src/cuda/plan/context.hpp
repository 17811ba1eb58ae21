// context.hpp - what every family planner decides from besides the problem: the device's limits, the tuning
// table of its architecture and the caller's plan preferences; and how a planner packages its choice.
#pragma once

#include <initializer_list>
#include <memory>
#include <string>
#include <utility>

#include "core/device_limits.hpp"
#include <fmt/format.h>

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "cuda/common/launch.hpp"
#include "cuda/common/options.hpp"
#include "cuda/plan/preferences.hpp"
#include "cuda/plan/tuning.hpp"
#include "ops/softmax/info.hpp"

namespace smx::cuda {

struct PlanContext {
    const DeviceLimits& limits;
    const TuningTable& tuning;
    const PlanPreferences& preferences;
};

// The option set of a Rows problem's options instances (rows_option_set, with the preferences' override).
inline RowsOptionSet rows_option_set_for(const SoftmaxInfo& info, const PlanContext& context) {
    return rows_option_set(info.options, info.x_dtype, context.preferences.any_option_set);
}

// One cluster per row: rows per grid row, and the grid's y limit.
constexpr std::int64_t kRowsPerGridRow = std::int64_t{1} << 20;
constexpr std::int64_t kMaxGridY = 65535;

// The family plan of `params` launched as `launches` (at most two), needing `workspace` bytes.
template <class Params>
FamilyPlan make_family_plan(const SoftmaxInfo& info, const Params& params, std::initializer_list<Launch> launches,
                            std::size_t workspace, std::string text) {
    auto call = std::make_unique<FamilyCall<Params>>();
    static_cast<Params&>(call->params) = params;
    call->launch_count = 0;
    for (const Launch& launch : launches) call->launches[call->launch_count++] = launch;
    call->x_size = dtype_size(info.x_dtype);
    call->y_size = dtype_size(info.y_dtype);
    FamilyPlan plan;
    plan.call = std::move(call);
    plan.workspace = workspace;
    plan.text = std::move(text);
    return plan;
}

// A Rows-layout family's parameters with the fields they all share filled in from the problem.
template <class Params>
Params rows_params(const SoftmaxInfo& info) {
    Params params;
    params.rows = info.rows;
    params.row_len = info.row_len;
    params.x_row_stride = info.x.row_stride;
    params.y_row_stride = info.y.row_stride;
    params.log_mode = info.is_log() ? 1 : 0;
    if constexpr (kCarriesOptions<Params>) {
        if (info.options.any()) params.options = rows_options_params(info, info.options);
    }
    return params;
}

// Bytes of one (max, sum) partial in the workspace: doubles for f64 compute, floats otherwise.
inline std::size_t stats_bytes(const SoftmaxInfo& info) {
    return 2 * (info.x_dtype == SMX_DTYPE_F64 ? sizeof(double) : sizeof(float));
}

}  // namespace smx::cuda
