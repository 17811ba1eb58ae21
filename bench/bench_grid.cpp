// bench_grid.cpp - the default grids of smx-bench and the parsing of its filters.
#include "bench_grid.hpp"

#include <algorithm>
#include <sstream>
#include <stdexcept>

#include "bench_data.hpp"

namespace smx_bench {
namespace {

std::string join_dims(const std::vector<std::int64_t>& dims) {
    std::string text;
    for (std::size_t d = 0; d < dims.size(); ++d) text += (d ? "x" : "") + std::to_string(dims[d]);
    return text;
}

Layout last_dim(Group group, std::vector<std::int64_t> shape) {
    Layout layout;
    layout.group = group;
    layout.strides = row_major_strides(shape);
    layout.shape = std::move(shape);
    layout.axis = -1;
    layout.label = join_dims(layout.shape);
    return layout;
}

Layout along(std::vector<std::int64_t> shape, int axis) {
    Layout layout = last_dim(Group::Layouts, std::move(shape));
    layout.axis = axis;
    layout.label += ":dim=" + std::to_string(axis);
    return layout;
}

// The transpose of a row-major (cols, rows) tensor: shape (rows, cols), strides (1, rows), softmax on dim -1.
Layout transposed(std::int64_t rows, std::int64_t cols) {
    Layout layout;
    layout.group = Group::Layouts;
    layout.shape = {rows, cols};
    layout.strides = {1, rows};
    layout.axis = -1;
    layout.label = join_dims(layout.shape) + ":transposed";
    return layout;
}

const std::vector<DtypePair>& main_pairs(smxDeviceType_t device) {
    static const std::vector<DtypePair> cuda = {{SMX_DTYPE_F32, SMX_DTYPE_F32},  {SMX_DTYPE_F16, SMX_DTYPE_F16},
                                                {SMX_DTYPE_BF16, SMX_DTYPE_BF16}, {SMX_DTYPE_BF16, SMX_DTYPE_F32},
                                                {SMX_DTYPE_F16, SMX_DTYPE_F32},  {SMX_DTYPE_F32, SMX_DTYPE_BF16}};
    static const std::vector<DtypePair> cpu = {{SMX_DTYPE_F32, SMX_DTYPE_F32},
                                               {SMX_DTYPE_BF16, SMX_DTYPE_BF16},
                                               {SMX_DTYPE_F16, SMX_DTYPE_F32},
                                               {SMX_DTYPE_F64, SMX_DTYPE_F64}};
    return device == SMX_DEVICE_CUDA ? cuda : cpu;
}

const std::vector<DtypePair>& decode_pairs(smxDeviceType_t device) {
    static const std::vector<DtypePair> cuda = {
        {SMX_DTYPE_F32, SMX_DTYPE_F32}, {SMX_DTYPE_BF16, SMX_DTYPE_BF16}, {SMX_DTYPE_BF16, SMX_DTYPE_F32}};
    static const std::vector<DtypePair> cpu = {{SMX_DTYPE_F32, SMX_DTYPE_F32}, {SMX_DTYPE_BF16, SMX_DTYPE_F32}};
    return device == SMX_DEVICE_CUDA ? cuda : cpu;
}

// The grid of issue 5 (last dim, layouts) and issue 6 (decode), sized for an H200-class GPU.
std::vector<Layout> cuda_layouts() {
    std::vector<Layout> layouts;
    for (auto [rows, cols] : std::vector<std::pair<std::int64_t, std::int64_t>>{
             {1048576, 32}, {1048576, 128}, {262144, 512}, {131072, 1024}, {65536, 2048}, {16384, 4096},
             {8192, 8192}, {4096, 16384}, {8192, 32000}, {8192, 50257}, {4096, 128256}}) {
        layouts.push_back(last_dim(Group::LastDim, {rows, cols}));
    }
    layouts.push_back(along({32, 1024, 1024}, 1));
    layouts.push_back(along({8192, 4096}, 0));
    layouts.push_back(along({64, 128, 4096}, 1));
    layouts.push_back(along({16, 8, 4096, 64}, 2));
    layouts.push_back(transposed(8192, 4096));
    for (auto [rows, cols] : std::vector<std::pair<std::int64_t, std::int64_t>>{
             {1, 32000}, {1, 128256}, {8, 128256}, {64, 128256}, {1, 256000}, {32, 256000}, {1, 1048576},
             {4, 4194304}}) {
        layouts.push_back(last_dim(Group::Decode, {rows, cols}));
    }
    return layouts;
}

// A few MB per tensor, so the whole CPU grid runs in well under a minute on two cores.
std::vector<Layout> cpu_layouts() {
    return {last_dim(Group::LastDim, {4096, 256}), last_dim(Group::LastDim, {1024, 1024}),
            last_dim(Group::LastDim, {64, 32000}),  along({16, 256, 256}, 1),
            along({1024, 1024}, 0),                 transposed(1024, 1024),
            last_dim(Group::Decode, {1, 128256}),   last_dim(Group::Decode, {8, 128256})};
}

// Parses "AxBxC" into dims; returns false if it is not such a shape.
bool parse_dims(const std::string& text, std::vector<std::int64_t>* dims) {
    dims->clear();
    if (text.empty() || text.back() == 'x') return false;  // getline would drop an empty last part
    std::stringstream stream(text);
    std::string part;
    while (std::getline(stream, part, 'x')) {
        if (part.empty() || part.find_first_not_of("0123456789") != std::string::npos || part.size() > 12) return false;
        dims->push_back(std::stoll(part));
    }
    return !dims->empty() && dims->size() <= SMX_MAX_DIMS;
}

// Parses a --shapes token that names no grid layout: "AxB..." (softmax over the last dim), "AxB...:dim=N"
// (over dim N of the contiguous tensor, -ndim <= N < ndim) or "RxC:transposed" (the transpose of a
// row-major (C, R) tensor, over its last dim). Returns false if the token is none of these.
bool parse_custom_layout(const std::string& token, Layout* layout) {
    const std::size_t colon = token.find(':');
    std::vector<std::int64_t> dims;
    if (!parse_dims(token.substr(0, colon), &dims)) return false;
    if (colon == std::string::npos) {
        *layout = last_dim(Group::Custom, dims);
        return true;
    }
    const std::string suffix = token.substr(colon + 1);
    if (suffix == "transposed") {
        if (dims.size() != 2) return false;
        *layout = transposed(dims[0], dims[1]);
    } else {
        const std::string prefix = "dim=";
        const std::string number = suffix.compare(0, prefix.size(), prefix) == 0 ? suffix.substr(prefix.size()) : "";
        const std::size_t digits = number.empty() || number[0] != '-' ? 0 : 1;
        if (number.size() <= digits || number.size() > digits + 2 ||
            number.find_first_not_of("0123456789", digits) != std::string::npos) {
            return false;
        }
        const int axis = std::stoi(number);
        const int ndim = static_cast<int>(dims.size());
        if (axis < -ndim || axis >= ndim) return false;
        *layout = along(dims, axis);
    }
    layout->group = Group::Custom;
    return true;
}

template <typename T>
bool contains(const std::vector<T>& items, const T& item) {
    return std::find(items.begin(), items.end(), item) != items.end();
}

}  // namespace

const char* group_name(Group group) {
    switch (group) {
        case Group::LastDim: return "lastdim";
        case Group::Layouts: return "layouts";
        case Group::Decode: return "decode";
        case Group::Custom: return "custom";
    }
    return "?";
}

const char* mode_name(smxSoftmaxMode_t mode) { return mode == SMX_LOG_SOFTMAX ? "log_softmax" : "softmax"; }

std::vector<std::int64_t> row_major_strides(const std::vector<std::int64_t>& shape) {
    std::vector<std::int64_t> strides(shape.size(), 1);
    for (int d = static_cast<int>(shape.size()) - 2; d >= 0; --d) strides[d] = strides[d + 1] * shape[d + 1];
    return strides;
}

std::int64_t Layout::numel() const {
    std::int64_t count = 1;
    for (std::int64_t dim : shape) count *= dim;
    return count;
}

std::int64_t Layout::span() const {
    if (numel() == 0) return 0;
    std::int64_t last = 0;
    for (std::size_t d = 0; d < shape.size(); ++d) last += (shape[d] - 1) * strides[d];
    return last + 1;
}

std::string Layout::shape_text() const { return join_dims(shape); }

std::vector<std::string> split_list(const std::string& list) {
    std::vector<std::string> items;
    std::stringstream stream(list);
    std::string item;
    while (std::getline(stream, item, ',')) {
        if (!item.empty()) items.push_back(item);
    }
    return items;
}

std::vector<smxSoftmaxMode_t> parse_modes(const std::string& list) {
    std::vector<smxSoftmaxMode_t> modes;
    for (const std::string& item : split_list(list)) {
        if (item == "softmax") {
            modes.push_back(SMX_SOFTMAX);
        } else if (item == "log_softmax") {
            modes.push_back(SMX_LOG_SOFTMAX);
        } else {
            throw std::invalid_argument("unknown op '" + item + "' (expected softmax or log_softmax)");
        }
    }
    return modes;
}

std::vector<DtypePair> parse_dtype_pairs(const std::string& list) {
    std::vector<DtypePair> pairs;
    for (const std::string& item : split_list(list)) {
        const std::size_t colon = item.find(':');
        DtypePair pair{};
        if (colon == std::string::npos || !parse_dtype(item.substr(0, colon), &pair.x) ||
            !parse_dtype(item.substr(colon + 1), &pair.y)) {
            throw std::invalid_argument("bad dtype pair '" + item + "' (expected X:Y with X, Y in f16, bf16, f32, f64)");
        }
        pairs.push_back(pair);
    }
    return pairs;
}

std::vector<Group> parse_groups(const std::string& name) {
    if (name == "all") return {Group::LastDim, Group::Layouts, Group::Decode};
    for (Group group : {Group::LastDim, Group::Layouts, Group::Decode}) {
        if (name == group_name(group)) return {group};
    }
    throw std::invalid_argument("unknown group '" + name + "' (expected lastdim, layouts, decode or all)");
}

std::vector<LayoutPlan> build_grid(smxDeviceType_t device, const GridFilter& filter) {
    const std::vector<smxSoftmaxMode_t> modes =
        filter.modes.empty() ? std::vector<smxSoftmaxMode_t>{SMX_SOFTMAX, SMX_LOG_SOFTMAX} : filter.modes;
    std::vector<Layout> candidates = device == SMX_DEVICE_CUDA ? cuda_layouts() : cpu_layouts();

    std::vector<Layout> chosen;
    std::vector<bool> token_used(filter.shape_tokens.size(), false);
    for (Layout& layout : candidates) {
        if (!filter.groups.empty() && !contains(filter.groups, layout.group)) continue;
        bool wanted = filter.shape_tokens.empty();
        for (std::size_t t = 0; t < filter.shape_tokens.size(); ++t) {
            if (filter.shape_tokens[t] == layout.label || filter.shape_tokens[t] == layout.shape_text()) {
                wanted = true;
                token_used[t] = true;
            }
        }
        if (wanted) chosen.push_back(std::move(layout));
    }
    for (std::size_t t = 0; t < filter.shape_tokens.size(); ++t) {
        if (token_used[t]) continue;
        Layout custom;
        if (!parse_custom_layout(filter.shape_tokens[t], &custom)) {
            throw std::invalid_argument("shape '" + filter.shape_tokens[t] +
                                        "' is neither a grid label nor a shape like 4096x4096, 64x512x512:dim=1 "
                                        "or 4096x8192:transposed");
        }
        chosen.push_back(std::move(custom));
    }

    std::vector<LayoutPlan> plans;
    for (Layout& layout : chosen) {
        LayoutPlan plan;
        plan.dtype_pairs = !filter.dtype_pairs.empty()          ? filter.dtype_pairs
                           : layout.group == Group::Decode ? decode_pairs(device)
                                                           : main_pairs(device);
        // Cases sharing an x dtype run together so the input buffers are filled once for them.
        std::stable_sort(plan.dtype_pairs.begin(), plan.dtype_pairs.end(),
                         [](const DtypePair& a, const DtypePair& b) { return a.x < b.x; });
        plan.modes = modes;
        plan.layout = std::move(layout);
        plans.push_back(std::move(plan));
    }
    return plans;
}

}  // namespace smx_bench
