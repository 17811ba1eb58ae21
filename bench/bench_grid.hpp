// bench_grid.hpp - what smx-bench measures: the default grids (per device) and the command-line filters.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "smx/smx.h"

namespace smx_bench {

// The groups of the grid: softmax over a contiguous last dim, other layouts, and decode-sized problems.
enum class Group { LastDim, Layouts, Decode, Custom };

const char* group_name(Group group);

// One tensor layout to benchmark: x and y share shape and strides (y is laid out like x, as
// torch.empty_like would make it).
struct Layout {
    Group group = Group::LastDim;
    std::vector<std::int64_t> shape;
    std::vector<std::int64_t> strides;  // in elements, explicit (never empty)
    int axis = -1;                      // as given to smx (may be negative)
    std::string label;                  // "8192x50257", "32x1024x1024:dim=1", "8192x4096:transposed"

    std::int64_t numel() const;
    // Elements from the lowest to the highest addressed element, inclusive (strides are non-negative).
    std::int64_t span() const;
    // The shape alone, "AxBxC": a --shapes token matches either this or the label.
    std::string shape_text() const;
};

// An (x dtype, y dtype) pair.
struct DtypePair {
    smxDataType_t x;
    smxDataType_t y;
};

// What the command line selected.
struct GridFilter {
    std::vector<smxSoftmaxMode_t> modes;      // empty: both
    std::vector<DtypePair> dtype_pairs;       // empty: each group's default pairs
    std::vector<std::string> shape_tokens;    // empty: every layout of the selected groups
    std::vector<Group> groups;                // empty: every group
};

// A layout with the dtype pairs and modes to run on it, in the order they run: input buffers are filled
// once per (layout, x dtype), so cases sharing them are adjacent.
struct LayoutPlan {
    Layout layout;
    std::vector<DtypePair> dtype_pairs;
    std::vector<smxSoftmaxMode_t> modes;
};

// Builds the selected grid for a device. Shape tokens that name no grid layout become extra layouts (group
// Custom): "AxB..." over the last dim, "AxB...:dim=N" over dim N, "RxC:transposed" the transpose of a
// row-major (C, R) tensor over its last dim. Throws std::invalid_argument for a malformed token.
std::vector<LayoutPlan> build_grid(smxDeviceType_t device, const GridFilter& filter);

// Command-line parsing helpers; each throws std::invalid_argument with a message naming the bad token.
std::vector<smxSoftmaxMode_t> parse_modes(const std::string& list);
std::vector<DtypePair> parse_dtype_pairs(const std::string& list);
std::vector<Group> parse_groups(const std::string& name);
std::vector<std::string> split_list(const std::string& list);

const char* mode_name(smxSoftmaxMode_t mode);

// The strides, in elements, of a contiguous row-major tensor of `shape`.
std::vector<std::int64_t> row_major_strides(const std::vector<std::int64_t>& shape);

}  // namespace smx_bench
