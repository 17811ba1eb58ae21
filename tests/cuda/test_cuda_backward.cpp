// [cuda] softmax and log-softmax backward: every backward family (warp, regs, grid, split, spatial, general) and
// the plan boundaries between them, every dtype combination of the fast families and mixes with f64, layouts
// (padded, strided axes, transposed, negative and zero strides), in place dx == dy, pointers one element off
// alignment, special values, empty tensors, backward-regs' pushed and pulled cluster sums (the same bits), and
// results independent of the stream and of other plans. Every case runs through the public C API into a
// poisoned dx and is compared with the float64 reference.
#if SMX_TEST_WITH_CUDA

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <set>
#include <vector>

#include "cuda_helpers.hpp"
#include "support/layouts.hpp"

using namespace smx_test;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();

// The dtypes of the fast families (dy/y and dx each); f64 runs on them only with f64 everywhere.
const smxDataType_t kFastDtypes[] = {SMX_DTYPE_F16, SMX_DTYPE_BF16, SMX_DTYPE_F32};

const char* mode_name(bool log_mode) { return log_mode ? "log_softmax" : "softmax"; }

// Writes into y (through its layout) the forward's output for fresh random x along `axis`: softmax (log-softmax)
// of N(0, 3) values in float64, rounded once to y's dtype: the y a backward is given in practice.
void fill_forward_output(HostTensor& y, int axis, bool log_mode) {
    HostTensor x = make_tensor(SMX_DTYPE_F64, y.shape);
    fill_random(x, test_rng());
    const std::vector<double> values = reference_softmax(x, axis, log_mode);
    const std::vector<std::int64_t> offsets = logical_offsets(y);
    for (std::size_t i = 0; i < offsets.size(); ++i) y.set(offsets[i], values[i]);
}

// One backward problem: its tensors (each with its own layout), axis and mode.
struct BackwardCase {
    HostTensor dy, y, dx;
    int axis = -1;
    bool log_mode = false;
};

// Layout of one operand: strides (empty: row-major) and spare elements before element [0, ...] (1 puts the
// base one element off every vector alignment).
struct OperandLayoutSpec {
    std::vector<std::int64_t> strides;
    std::int64_t front = 0;
};

// A case on fresh data: y the forward's output, dy N(0, 1).
BackwardCase make_case(smxDataType_t value_dtype, smxDataType_t gradient_dtype, const std::vector<std::int64_t>& shape,
                       int axis, bool log_mode, const OperandLayoutSpec& dy_layout = {},
                       const OperandLayoutSpec& y_layout = {}, const OperandLayoutSpec& dx_layout = {}) {
    BackwardCase c{make_tensor(value_dtype, shape, dy_layout.strides, dy_layout.front),
                   make_tensor(value_dtype, shape, y_layout.strides, y_layout.front),
                   make_tensor(gradient_dtype, shape, dx_layout.strides, dx_layout.front), axis, log_mode};
    fill_forward_output(c.y, axis, log_mode);
    fill_random(c.dy, test_rng(), 1.0);
    return c;
}

// A contiguous (rows, row_len) case over the last axis.
BackwardCase make_rows_case(smxDataType_t value_dtype, smxDataType_t gradient_dtype, std::int64_t rows,
                            std::int64_t row_len, bool log_mode) {
    return make_case(value_dtype, gradient_dtype, {rows, row_len}, 1, log_mode);
}

std::string describe(const BackwardCase& c) {
    return std::string(mode_name(c.log_mode)) + " axis " + std::to_string(c.axis) + " dy " + describe(c.dy) +
           (c.dy.offset != 0 ? " (front " + std::to_string(c.dy.offset) + ")" : "") + ", y " + describe(c.y) +
           (c.y.offset != 0 ? " (front " + std::to_string(c.y.offset) + ")" : "") + ", dx " + describe(c.dx) +
           (c.dx.offset != 0 ? " (front " + std::to_string(c.dx.offset) + ")" : "");
}

// The tolerance of what the kernels compute in: float32 unless some operand is f64 (then float64).
double compute_tolerance(const BackwardCase& c) {
    const bool f64 = c.dy.dtype == SMX_DTYPE_F64 || c.dx.dtype == SMX_DTYPE_F64;
    return relative_tolerance(f64 ? SMX_DTYPE_F64 : SMX_DTYPE_F32);
}

// What one device run gave.
struct BackwardOutcome {
    std::string plan;
    std::string mismatch;  // "" when every element matched the reference
    std::size_t workspace_bytes = 0;
};

// Runs the backward on the device with dx poisoned (in place: dx is dy's storage, so c.dx must have dy's layout
// and element size), downloads dx into c.dx and compares it with the float64 reference. The workspace is
// poisoned too, so a kernel that read a partial before it was written would show.
BackwardOutcome run_backward(smxHandle_t handle, BackwardCase& c, bool in_place = false, cudaStream_t stream = nullptr) {
    BackwardOutcome outcome;
    const BackwardReference reference = reference_softmax_backward(c.dy, c.y, c.axis, c.log_mode);
    DeviceTensor dy_device(c.dy), y_device(c.y);
    dy_device.upload(c.dy);
    y_device.upload(c.y);
    std::optional<DeviceTensor> dx_device;
    if (!in_place) {
        dx_device.emplace(c.dx);
        dx_device->poison();
    }
    void* dx_pointer = in_place ? dy_device.data() : dx_device->data();
    TensorDesc dx_desc(c.dx), dy_desc(c.dy), y_desc(c.y);
    SoftmaxBackwardDesc desc(handle, c.log_mode ? SMX_LOG_SOFTMAX : SMX_SOFTMAX, c.axis, dx_desc.desc, dy_desc.desc,
                             y_desc.desc);
    if (desc.status != SMX_STATUS_SUCCESS) {
        outcome.mismatch = std::string("descriptor: ") + smxGetStatusString(desc.status) + ": " + smxGetLastErrorMessage();
        return outcome;
    }
    const char* plan = nullptr;
    SMX_REQUIRE_OK(smxGetSoftmaxBackwardPlan(desc.desc, &plan));
    outcome.plan = plan;
    SMX_REQUIRE_OK(smxGetSoftmaxBackwardWorkspaceSize(desc.desc, &outcome.workspace_bytes));
    DeviceBuffer workspace(outcome.workspace_bytes);
    SMX_REQUIRE_CUDA(cudaMemset(workspace.get(), 0xFF, workspace.bytes()));
    SMX_REQUIRE_CUDA(cudaDeviceSynchronize());
    const smxStatus_t status = smxSoftmaxBackward(desc.desc, workspace.get(), outcome.workspace_bytes, dx_pointer,
                                                  dy_device.data(), y_device.data(), stream);
    if (status != SMX_STATUS_SUCCESS) {
        outcome.mismatch = std::string("backward: ") + smxGetStatusString(status) + ": " + smxGetLastErrorMessage();
        return outcome;
    }
    SMX_REQUIRE_CUDA(cudaStreamSynchronize(stream));
    SMX_REQUIRE_CUDA(cudaGetLastError());
    poison(c.dx);  // what is compared must be what the device wrote
    if (in_place) {
        dy_device.download(c.dx);
    } else {
        dx_device->download(c.dx);
    }
    outcome.mismatch = compare_backward_to_reference(c.dx, reference, compute_tolerance(c));
    return outcome;
}

// Runs a case, CHECKs it against the reference and returns its plan text.
std::string check_backward(smxHandle_t handle, BackwardCase& c, bool in_place = false) {
    const BackwardOutcome outcome = run_backward(handle, c, in_place);
    INFO(describe(c) << (in_place ? " in place" : "") << " | plan: " << outcome.plan);
    CHECK(outcome.mismatch == "");
    return outcome.plan;
}

// Element [i, j] of a 2-d tensor, with j along `axis` (1: i is the row; 0: i is the column).
std::int64_t offset_2d(const HostTensor& t, int axis, std::int64_t i, std::int64_t j) {
    return axis == 1 ? i * t.strides[0] + j * t.strides[1] : j * t.strides[0] + i * t.strides[1];
}

// Special values in the first rows of a 2-d case (each row along `axis`), which the kernels must carry exactly
// as IEEE arithmetic on the formulas does:
//   0: a NaN in dy (softmax: the whole row NaN, through the sum; log-softmax too)
//   1: a NaN in y (softmax: the row NaN; log-softmax: that element only)
//   2: +inf in dy (the sum infinite: inf - inf = NaN at that element, -inf or NaN elsewhere)
//   3: y = -inf (log-softmax, exp(y) = 0) or 0 (softmax) at every third element
//   4: every y -inf (log-softmax: dx = dy) or 0 (softmax: dx = 0)
//   5: large dy (1e30, inf in f16) and 6: tiny dy (1e-30)
constexpr std::int64_t kSpecialRows = 7;
void add_special_rows(BackwardCase& c) {
    const int axis = c.axis < 0 ? c.axis + 2 : c.axis;
    const std::int64_t n = c.dy.shape[axis];
    const double masked = c.log_mode ? -kInf : 0.0;
    c.dy.set(offset_2d(c.dy, axis, 0, n / 2), kNaN);
    c.y.set(offset_2d(c.y, axis, 1, n - 1), kNaN);
    c.dy.set(offset_2d(c.dy, axis, 2, n / 3), kInf);
    for (std::int64_t j = 0; j < n; ++j) {
        if (j % 3 == 0) c.y.set(offset_2d(c.y, axis, 3, j), masked);
        c.y.set(offset_2d(c.y, axis, 4, j), masked);
        if (j % 5 == 0) c.dy.set(offset_2d(c.dy, axis, 5, j), 1e30);
        c.dy.set(offset_2d(c.dy, axis, 6, j), 1e-30);
    }
}

// The plan with SMX_CUDA_LONG_ROWS set to `value` for its creation.
std::string check_backward_with_long_rows(smxHandle_t handle, BackwardCase& c, const char* value, bool in_place = false) {
    ScopedLongRowsOverride override_rule(value);
    return check_backward(handle, c, in_place);
}

bool identical_storage(const HostTensor& a, const HostTensor& b) {
    return a.storage.size() == b.storage.size() && std::memcmp(a.storage.data(), b.storage.data(), a.storage.size()) == 0;
}

}  // namespace

TEST_CASE("cuda backward: row lengths up to 1024 take backward-warp, the smallest shape that holds the row",
          "[cuda][backward]") {
    CudaHandle handle;
    // Whole packs past the row's end as well (24, 40, 520, 1000: 16-bit dy and y load only the row's packs).
    const std::int64_t row_lengths[] = {1,   2,   3,   4,   5,   7,   8,   9,   15,  16,   17,   24,  31,
                                        32,  33,  40,  63,  64,  65,  127, 128, 129, 255,  256,  257, 511,
                                        512, 513, 520, 1000, 1023, 1024};
    struct Pair {
        smxDataType_t value, gradient;
        int pack;  // 16 bytes of the wider of the two
    };
    const Pair pairs[] = {{SMX_DTYPE_F32, SMX_DTYPE_F32, 4},
                          {SMX_DTYPE_BF16, SMX_DTYPE_BF16, 8},
                          {SMX_DTYPE_F16, SMX_DTYPE_F32, 4},
                          {SMX_DTYPE_F32, SMX_DTYPE_BF16, 4},
                          {SMX_DTYPE_F64, SMX_DTYPE_F64, 2}};
    for (const Pair& pair : pairs) {
        for (std::int64_t row_len : row_lengths) {
            // A row count that leaves the last warp and CTA partly empty.
            BackwardCase c = make_rows_case(pair.value, pair.gradient, 301 + row_len % 7, row_len, row_len % 2 == 1);
            const std::string plan = check_backward(handle.get(), c);
            INFO("plan: " << plan);
            REQUIRE(kernel_kind(plan) == "backward-warp");
            CHECK(plan_value(plan, "pack") == pair.pack);
            const std::int64_t capacity = plan_value(plan, "lanes") * plan_value(plan, "packs") * plan_value(plan, "pack");
            std::int64_t smallest = pair.pack;
            while (smallest < row_len) smallest *= 2;
            CHECK(capacity == smallest);
        }
    }
}

TEST_CASE("cuda backward: rows around the plan boundaries match the reference and reach every rows family",
          "[cuda][backward]") {
    CudaHandle handle;
    std::set<std::string> kinds;
    bool saw_cluster = false;
    std::string seen;
    const auto run = [&](smxDataType_t value, smxDataType_t gradient, std::int64_t rows, std::int64_t row_len, bool log_mode) {
        BackwardCase c = make_rows_case(value, gradient, rows, row_len, log_mode);
        const std::string plan = check_backward(handle.get(), c);
        kinds.insert(kernel_kind(plan));
        if (kernel_kind(plan) == "backward-regs" && plan_value(plan, "cluster") > 1) saw_cluster = true;
        seen += "\n  " + std::to_string(rows) + " x " + std::to_string(row_len) + ": " + plan;
        return plan;
    };
    // Around the warp limit, the grid form's minimum length (24576) and the longest rows a cluster holds
    // (f32: 16 x 512 x 32 = 262144), few rows and many, both modes.
    const std::int64_t row_lengths[] = {1025, 1031, 2047, 2049, 4097, 8191, 16385, 24575, 24577, 32769, 65537, 131073,
                                        262143, 262145};
    for (std::int64_t row_len : row_lengths) {
        for (bool log_mode : {false, true}) {
            run(SMX_DTYPE_F32, SMX_DTYPE_F32, 3, row_len, log_mode);
            run(SMX_DTYPE_BF16, SMX_DTYPE_BF16, 1, row_len, !log_mode);
        }
        // Many rows: 4M elements in all.
        run(SMX_DTYPE_F16, SMX_DTYPE_F32, (std::int64_t{1} << 22) / row_len, row_len, row_len % 2 == 0);
    }
    // The first rows past 1024 are never warp rows; 3 rows of 24575 stay on a cluster, 3 of 24577 spread over the
    // device (their clusters would fill 12 SMs).
    CHECK(kernel_kind(run(SMX_DTYPE_F32, SMX_DTYPE_F32, 5, 1025, false)) == "backward-regs");
    CHECK(kernel_kind(run(SMX_DTYPE_F32, SMX_DTYPE_F32, 3, 24575, false)) == "backward-regs");
    CHECK(kernel_kind(run(SMX_DTYPE_F32, SMX_DTYPE_F32, 3, 24577, true)) == "backward-grid");
    // Decode shapes: a single row of 1M (the grid form), rows too many for every CTA at once (split), and the
    // 64 x 128256 shape whose clusters fill the device.
    CHECK(kernel_kind(run(SMX_DTYPE_F32, SMX_DTYPE_F32, 1, 1048576, false)) == "backward-grid");
    CHECK(kernel_kind(run(SMX_DTYPE_BF16, SMX_DTYPE_BF16, 9, 1048577, true)) == "backward-split");
    CHECK(kernel_kind(run(SMX_DTYPE_F32, SMX_DTYPE_BF16, 1, 4194304, false)) == "backward-split");
    CHECK(kernel_kind(run(SMX_DTYPE_F32, SMX_DTYPE_F32, 64, 128256, true)) == "backward-regs");
    CHECK(kernel_kind(run(SMX_DTYPE_BF16, SMX_DTYPE_BF16, 8, 128256, false)) == "backward-grid");
    {
        // Many rows too long for a cluster: with clusters capped at 2 CTAs, 200 rows of 40000 f32 fit neither a
        // cluster nor the grid form at once.
        ScopedEnvironment max_cluster("SMX_CUDA_MAX_CLUSTER", "2");
        CHECK(kernel_kind(run(SMX_DTYPE_F32, SMX_DTYPE_F32, 200, 40000, false)) == "backward-split");
    }
    INFO("plans seen:" << seen);
    CHECK(kinds.count("backward-regs") == 1);
    CHECK(kinds.count("backward-grid") == 1);
    CHECK(kinds.count("backward-split") == 1);
    CHECK(saw_cluster);
}

TEST_CASE("cuda backward: 16-bit dy and y run 32 values per thread in a cluster (8192 x 50257-like rows)",
          "[cuda][backward]") {
    CudaHandle handle;
    // 50257 elements need 4 CTAs; at 16 values a thread the slots would be fuller (800 threads) and win the search
    // on utilization alone. 3 rows with the cluster form forced (too few rows would pick the grid form).
    for (smxDataType_t value : {SMX_DTYPE_BF16, SMX_DTYPE_F16}) {
        for (smxDataType_t gradient : {value, SMX_DTYPE_F32}) {
            for (bool log_mode : {false, true}) {
                BackwardCase c = make_rows_case(value, gradient, 3, 50257, log_mode);
                const std::string plan = check_backward_with_long_rows(handle.get(), c, "cluster");
                INFO("plan: " << plan);
                CHECK(kernel_kind(plan) == "backward-regs");
                CHECK(plan_value(plan, "cluster") > 1);
                CHECK(plan_value(plan, "values") == 32);
            }
        }
    }
}

TEST_CASE("cuda backward: every dtype pair of the fast families in both modes, each rows family and spatial",
          "[cuda][backward]") {
    CudaHandle handle;
    struct Family {
        const char* long_rows;  // SMX_CUDA_LONG_ROWS for the plan, or nullptr for the rule
        std::vector<std::int64_t> shape;
        int axis;
        const char* kind;
    };
    const Family families[] = {
        {nullptr, {37, 1000}, 1, "backward-warp"},
        {nullptr, {29, 5000}, 1, "backward-regs"},
        {"cluster", {5, 70001}, 1, "backward-regs"},
        {"grid", {2, 50001}, 1, "backward-grid"},
        {"split", {3, 70003}, 1, "backward-split"},
        {nullptr, {3, 257, 41}, 1, "backward-spatial"},
    };
    const auto check_pair = [&](smxDataType_t value, smxDataType_t gradient) {
        for (const Family& family : families) {
            for (bool log_mode : {false, true}) {
                BackwardCase c = make_case(value, gradient, family.shape, family.axis, log_mode);
                const std::string plan = family.long_rows != nullptr
                                             ? check_backward_with_long_rows(handle.get(), c, family.long_rows)
                                             : check_backward(handle.get(), c);
                INFO("plan: " << plan);
                CHECK(kernel_kind(plan) == family.kind);
            }
        }
    };
    for (smxDataType_t value : kFastDtypes) {
        for (smxDataType_t gradient : kFastDtypes) check_pair(value, gradient);
    }
    check_pair(SMX_DTYPE_F64, SMX_DTYPE_F64);
}

TEST_CASE("cuda backward: dtype combinations with f64 on some side but not all run on backward-general in double",
          "[cuda][backward]") {
    CudaHandle handle;
    struct Pair {
        smxDataType_t value, gradient;
    };
    const Pair pairs[] = {{SMX_DTYPE_F32, SMX_DTYPE_F64}, {SMX_DTYPE_F64, SMX_DTYPE_F16}, {SMX_DTYPE_F64, SMX_DTYPE_BF16},
                          {SMX_DTYPE_BF16, SMX_DTYPE_F64}, {SMX_DTYPE_F64, SMX_DTYPE_F32}, {SMX_DTYPE_F16, SMX_DTYPE_F64}};
    for (const Pair& pair : pairs) {
        for (bool log_mode : {false, true}) {
            // Rows (warp and block per row), Spatial and General layouts.
            BackwardCase rows = make_rows_case(pair.value, pair.gradient, 33, 700, log_mode);
            BackwardCase long_rows = make_rows_case(pair.value, pair.gradient, 3, 9000, log_mode);
            BackwardCase spatial = make_case(pair.value, pair.gradient, {4, 100, 9}, 1, log_mode);
            BackwardCase general = make_case(pair.value, pair.gradient, {20, 300}, 1, log_mode, {{1, 20}});
            for (BackwardCase* c : {&rows, &long_rows, &spatial, &general}) {
                const std::string plan = check_backward(handle.get(), *c);
                INFO("plan: " << plan);
                CHECK(kernel_kind(plan) == "backward-general");
            }
        }
    }
}

TEST_CASE("cuda backward: padded rows, different row strides per operand, negative and zero strides",
          "[cuda][backward]") {
    CudaHandle handle;
    for (std::int64_t row_len : {300, 1000, 6000, 40001}) {
        const std::int64_t rows = 9;
        struct Layouts {
            OperandLayoutSpec dy, y, dx;
            const char* what;
        };
        const Layouts layouts[] = {
            {{{row_len + 8, 1}}, {{row_len + 8, 1}}, {{row_len + 8, 1}}, "padded alike (one phase)"},
            {{{row_len + 3, 1}}, {{row_len + 8, 1}}, {{row_len + 1, 1}}, "padded by different amounts"},
            {{{-row_len, 1}}, {{row_len, 1}}, {{-row_len - 4, 1}}, "negative row strides"},
            {{{0, 1}}, {{0, 1}}, {}, "dy and y broadcast over the rows (row stride 0)"},
        };
        for (const Layouts& layout : layouts) {
            for (bool log_mode : {false, true}) {
                BackwardCase c = make_case(SMX_DTYPE_F32, SMX_DTYPE_BF16, {rows, row_len}, 1, log_mode, layout.dy,
                                           layout.y, layout.dx);
                INFO(layout.what);
                const std::string plan = row_len > 20000 ? check_backward_with_long_rows(handle.get(), c, "split")
                                                         : check_backward(handle.get(), c);
                const std::string kind = kernel_kind(plan);
                CHECK((kind == "backward-warp" || kind == "backward-regs" || kind == "backward-split"));
            }
        }
    }
    // Along the axis: a negative axis stride and a y broadcast along it (stride 0) are General layouts.
    for (bool log_mode : {false, true}) {
        BackwardCase reversed = make_case(SMX_DTYPE_BF16, SMX_DTYPE_F32, {7, 500}, 1, log_mode, {{500, -1}});
        CHECK(kernel_kind(check_backward(handle.get(), reversed)) == "backward-general");
        BackwardCase broadcast = make_case(SMX_DTYPE_F32, SMX_DTYPE_F32, {7, 500}, 1, log_mode, {}, {{1, 0}});
        CHECK(kernel_kind(check_backward(handle.get(), broadcast)) == "backward-general");
    }
}

TEST_CASE("cuda backward: strided axes take backward-spatial, cached on chip where the columns fit, else read twice",
          "[cuda][backward]") {
    CudaHandle handle;
    struct Spatial {
        std::vector<std::int64_t> shape;
        int axis;
        OperandLayoutSpec dy, y, dx;
        int cached;  // expected plan value, -1: either
        const char* what;
    };
    const Spatial cases[] = {
        {{4, 300, 40}, 1, {}, {}, {}, 1, "one CTA a tile"},
        {{2, 5000, 24}, 1, {}, {}, {}, 1, "a cluster a tile"},
        {{3, 600000, 5}, 1, {}, {}, {}, 0, "columns too long to cache even across 16 CTAs: read twice"},
        {{8192, 64}, 0, {}, {}, {}, -1, "the first axis of a matrix"},
        {{64, 3000}, 1, {{1, 64}}, {{1, 64}}, {{1, 64}}, -1, "a transposed matrix over its last dim"},
        {{5, 200, 33}, 1, {}, {}, {}, 1, "inner 33: the last vector partly outside"},
        {{5, 200, 36}, 1, {{-7200, 36, 1}}, {{7300, 36, 1}}, {{7200, 36, 1}}, -1, "negative and padded outer strides"},
        {{5, 200, 36}, 1, {{7200, 37, 1}}, {}, {}, -1, "dy's axis stride breaks vector alignment"},
        {{6, 100, 40}, 1, {{0, 40, 1}}, {{0, 40, 1}}, {}, -1, "dy and y broadcast over the outer dim"},
    };
    const smxDataType_t pairs[][2] = {{SMX_DTYPE_F32, SMX_DTYPE_F32}, {SMX_DTYPE_BF16, SMX_DTYPE_BF16}, {SMX_DTYPE_F16, SMX_DTYPE_F32}};
    for (const Spatial& s : cases) {
        for (const auto& pair : pairs) {
            for (bool log_mode : {false, true}) {
                BackwardCase c = make_case(pair[0], pair[1], s.shape, s.axis, log_mode, s.dy, s.y, s.dx);
                INFO(s.what);
                const std::string plan = check_backward(handle.get(), c);
                INFO("plan: " << plan);
                REQUIRE(kernel_kind(plan) == "backward-spatial");
                if (s.cached >= 0) CHECK(plan_value(plan, "cached") == s.cached);
                // The rule fills every cached tile by cp.async.
                CHECK((plan.find(" copies=async") != std::string::npos) == (plan_value(plan, "cached") == 1));
            }
        }
    }
}

// Whether a backward-spatial plan fetches whole 128-byte lines: cached tiles by cp.async whose rows are at most
// 64 bytes of dy while dy's rows (inner) hold at least one more such tile row.
bool expect_whole_lines(const std::string& plan, smxDataType_t value_dtype, std::int64_t inner) {
    const std::int64_t row_bytes = plan_value(plan, "tile") * static_cast<std::int64_t>(dtype_size(value_dtype));
    return plan.find(" copies=async") != std::string::npos && row_bytes <= 64 &&
           inner * static_cast<std::int64_t>(dtype_size(value_dtype)) >= 2 * row_bytes;
}

TEST_CASE("cuda backward: backward-spatial fills its cache by cp.async, whole lines on narrow tile rows; "
          "SMX_CUDA_BACKWARD_SPATIAL_COPY=sectors|registers",
          "[cuda][backward]") {
    CudaHandle handle;
    struct Tiles {
        std::vector<std::int64_t> shape;
        int axis;
        const char* what;
    };
    const Tiles cases[] = {
        {{8192, 256}, 0, "the first axis of a matrix: 64-byte tile rows in clusters of 16"},
        {{2, 4096, 128}, 1, "a middle axis: 64-byte tile rows in clusters of 8"},
        {{64, 128, 256}, 1, "a short middle axis: 256-byte tile rows, one CTA a tile"},
        {{3, 700, 40}, 1, "inner 40: whole vectors, the last tile partly outside"},
        {{3, 700, 70}, 1, "inner 70: rows off the vector alignment, copied through registers"},
    };
    const smxDataType_t pairs[][2] = {{SMX_DTYPE_F32, SMX_DTYPE_F32}, {SMX_DTYPE_BF16, SMX_DTYPE_BF16},
                                      {SMX_DTYPE_F16, SMX_DTYPE_F32}, {SMX_DTYPE_F32, SMX_DTYPE_BF16}};
    for (const Tiles& t : cases) {
        for (const auto& pair : pairs) {
            for (bool log_mode : {false, true}) {
                INFO(t.what);
                const std::int64_t inner = t.shape.back();
                {
                    BackwardCase c = make_case(pair[0], pair[1], t.shape, t.axis, log_mode);
                    const std::string plan = check_backward(handle.get(), c);
                    INFO("plan: " << plan);
                    REQUIRE(kernel_kind(plan) == "backward-spatial");
                    CHECK(plan_value(plan, "cached") == 1);
                    CHECK(plan.find(" copies=async") != std::string::npos);
                    CHECK((plan.find(" lines=128B") != std::string::npos) == expect_whole_lines(plan, pair[0], inner));
                }
                {
                    ScopedEnvironment sectors("SMX_CUDA_BACKWARD_SPATIAL_COPY", "sectors");
                    BackwardCase c = make_case(pair[0], pair[1], t.shape, t.axis, log_mode);
                    const std::string plan = check_backward(handle.get(), c);
                    INFO("plan: " << plan);
                    CHECK(plan.find(" copies=async") != std::string::npos);
                    CHECK(plan.find(" lines=128B") == std::string::npos);
                }
                {
                    ScopedEnvironment registers("SMX_CUDA_BACKWARD_SPATIAL_COPY", "registers");
                    BackwardCase c = make_case(pair[0], pair[1], t.shape, t.axis, log_mode);
                    const std::string plan = check_backward(handle.get(), c);
                    INFO("plan: " << plan);
                    CHECK(plan_value(plan, "cached") == 1);
                    CHECK(plan.find(" copies=async") == std::string::npos);
                }
            }
        }
    }
    // Both narrow-row shapes fetch whole lines under the rule (f32 and bf16 dy alike).
    for (const Tiles& t : {cases[0], cases[1]}) {
        BackwardCase c = make_case(SMX_DTYPE_F32, SMX_DTYPE_F32, t.shape, t.axis, false);
        const std::string plan = check_backward(handle.get(), c);
        INFO(t.what << " | plan: " << plan);
        CHECK(plan.find(" lines=128B") != std::string::npos);
    }
}

TEST_CASE("cuda backward: backward-spatial's cp.async fill, 8- and 16-byte vectors, whole lines and partial tiles",
          "[cuda][backward][sanitize]") {
    CudaHandle handle;
    const smxDataType_t pairs[][2] = {{SMX_DTYPE_F32, SMX_DTYPE_F32}, {SMX_DTYPE_BF16, SMX_DTYPE_BF16}, {SMX_DTYPE_F16, SMX_DTYPE_F32}};
    for (const auto& pair : pairs) {
        for (const auto& [shape, axis] : {std::pair<std::vector<std::int64_t>, int>{{8192, 256}, 0}, {{3, 700, 40}, 1}}) {
            BackwardCase c = make_case(pair[0], pair[1], shape, axis, false);
            const std::string plan = check_backward(handle.get(), c);
            INFO("plan: " << plan);
            CHECK(plan.find(" copies=async") != std::string::npos);
        }
    }
}

TEST_CASE("cuda backward: general layouts (transposed operands, every axis of random strided tensors)",
          "[cuda][backward]") {
    CudaHandle handle;
    std::mt19937_64& rng = test_rng();
    for (bool log_mode : {false, true}) {
        // dy transposed against a contiguous y and dx: a warp per row, then a block per row.
        for (std::int64_t row_len : {70, 5000}) {
            BackwardCase c = make_case(SMX_DTYPE_BF16, SMX_DTYPE_BF16, {50, row_len}, 1, log_mode, {{1, 50}});
            const std::string plan = check_backward(handle.get(), c);
            CHECK(kernel_kind(plan) == "backward-general");
            CHECK(plan_value(plan, "threads_per_row") == (row_len >= 2048 ? 256 : 32));
        }
    }
    // Random shapes and layouts: whatever family the layouts lead to, the result matches.
    std::uniform_int_distribution<int> pick(0, 2), coin(0, 1);
    for (int ndim = 2; ndim <= 4; ++ndim) {
        for (int trial = 0; trial < 8; ++trial) {
            const std::vector<std::int64_t> shape = random_shape(ndim, rng);
            const int axis = std::uniform_int_distribution<int>(-ndim, ndim - 1)(rng);
            OperandLayoutSpec dy{make_strides(shape, kAllStrideKinds[pick(rng) + 1], rng)};
            OperandLayoutSpec y{make_strides(shape, kAllStrideKinds[pick(rng)], rng)};
            OperandLayoutSpec dx{make_strides(shape, kAllStrideKinds[pick(rng) + 2], rng)};
            BackwardCase c = make_case(kFastDtypes[pick(rng)], kFastDtypes[pick(rng)], shape, axis, coin(rng) == 1, dy, y, dx);
            check_backward(handle.get(), c);
        }
    }
}

TEST_CASE("cuda backward: in place (dx == dy) in every family", "[cuda][backward][sanitize]") {
    CudaHandle handle;
    struct InPlace {
        std::vector<std::int64_t> shape;
        int axis;
        const char* long_rows;
        const char* kind;
    };
    const InPlace cases[] = {
        {{41, 300}, 1, nullptr, "backward-warp"},         {{9, 3000}, 1, nullptr, "backward-regs"},
        {{3, 30001}, 1, "cluster", "backward-regs"},      {{2, 30001}, 1, "grid", "backward-grid"},
        {{3, 30001}, 1, "split", "backward-split"},       {{3, 100, 40}, 1, nullptr, "backward-spatial"},
        {{2, 120000, 3}, 1, nullptr, "backward-spatial"}, {{30, 40}, 1, nullptr, "backward-general"},
    };
    // Same element size on both sides (what in place requires): one dtype, and bf16 over f16.
    const smxDataType_t pairs[][2] = {{SMX_DTYPE_F32, SMX_DTYPE_F32}, {SMX_DTYPE_BF16, SMX_DTYPE_F16}};
    for (const InPlace& in_place : cases) {
        for (const auto& pair : pairs) {
            for (bool log_mode : {false, true}) {
                // The general case: dy and dx transposed alike against a contiguous y.
                const bool general = std::string(in_place.kind) == "backward-general";
                const OperandLayoutSpec transposed{general ? std::vector<std::int64_t>{1, 30} : std::vector<std::int64_t>{}};
                BackwardCase c = make_case(pair[0], pair[1], in_place.shape, in_place.axis, log_mode, transposed, {}, transposed);
                const std::string plan = in_place.long_rows != nullptr
                                             ? check_backward_with_long_rows(handle.get(), c, in_place.long_rows, true)
                                             : check_backward(handle.get(), c, true);
                INFO("plan: " << plan);
                CHECK(kernel_kind(plan) == in_place.kind);
            }
        }
    }
}

TEST_CASE("cuda backward: pointers one element off alignment take the element-wise paths", "[cuda][backward][sanitize]") {
    CudaHandle handle;
    struct Shape {
        std::vector<std::int64_t> shape;
        int axis;
        const char* long_rows;
    };
    const Shape shapes[] = {{{33, 200}, 1, nullptr},  {{7, 3001}, 1, nullptr},  {{2, 30001}, 1, "grid"},
                            {{2, 30001}, 1, "split"}, {{3, 90, 40}, 1, nullptr}};
    // Each operand off in turn, then all three (one phase again: a head peel before the vector body).
    const std::int64_t fronts[][3] = {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}, {1, 1, 1}};
    for (const Shape& shape : shapes) {
        for (const auto& front : fronts) {
            for (bool log_mode : {false, true}) {
                BackwardCase c = make_case(SMX_DTYPE_BF16, SMX_DTYPE_F32, shape.shape, shape.axis, log_mode, {{}, front[0]},
                                           {{}, front[1]}, {{}, front[2]});
                if (shape.long_rows != nullptr) {
                    check_backward_with_long_rows(handle.get(), c, shape.long_rows);
                } else {
                    check_backward(handle.get(), c);
                }
            }
        }
    }
}

TEST_CASE("cuda backward: bases offset alike by 1-7 elements peel one head for all three operands",
          "[cuda][backward][sanitize]") {
    CudaHandle handle;
    struct Rows {
        std::vector<std::int64_t> shape;  // odd row lengths put every other row at another phase
        const char* long_rows;
    };
    const Rows row_sets[] = {{{5, 3001}, nullptr}, {{4, 3000}, nullptr}, {{3, 30001}, "cluster"}, {{2, 30000}, "cluster"}};
    const smxDataType_t dtypes[] = {SMX_DTYPE_BF16, SMX_DTYPE_F16, SMX_DTYPE_F32};
    for (const Rows& rows : row_sets) {
        for (smxDataType_t dtype : dtypes) {
            for (std::int64_t front = 1; front <= 7; ++front) {
                const bool log_mode = front % 2 == 0;
                const bool in_place = front % 3 == 0;
                const OperandLayoutSpec offset{{}, front};
                BackwardCase c = make_case(dtype, dtype, rows.shape, 1, log_mode, offset, offset, offset);
                const std::string plan = rows.long_rows != nullptr
                                             ? check_backward_with_long_rows(handle.get(), c, rows.long_rows, in_place)
                                             : check_backward(handle.get(), c, in_place);
                INFO("plan: " << plan);
                CHECK(kernel_kind(plan) == "backward-regs");
                CHECK((plan_value(plan, "cluster") > 1) == (rows.long_rows != nullptr));
            }
        }
    }
}

TEST_CASE("cuda backward: special values reach dx as the formulas give them, in every family",
          "[cuda][backward][sanitize]") {
    CudaHandle handle;
    struct Family {
        std::vector<std::int64_t> shape;
        int axis;
        OperandLayoutSpec dy;
        const char* long_rows;
        const char* kind;
    };
    const Family families[] = {
        {{kSpecialRows + 4, 100}, 1, {}, nullptr, "backward-warp"},
        {{kSpecialRows + 2, 3000}, 1, {}, nullptr, "backward-regs"},
        {{kSpecialRows, 30000}, 1, {}, "grid", "backward-grid"},
        {{kSpecialRows, 30000}, 1, {}, "split", "backward-split"},
        {{300, kSpecialRows + 3}, 0, {}, nullptr, "backward-spatial"},
        {{kSpecialRows + 1, 500}, 1, {{1, kSpecialRows + 1}}, nullptr, "backward-general"},
    };
    for (const Family& family : families) {
        for (smxDataType_t value : {SMX_DTYPE_F32, SMX_DTYPE_F16, SMX_DTYPE_BF16}) {
            for (bool log_mode : {false, true}) {
                BackwardCase c = make_case(value, value == SMX_DTYPE_F32 ? SMX_DTYPE_BF16 : SMX_DTYPE_F32, family.shape,
                                           family.axis, log_mode, family.dy);
                add_special_rows(c);
                const std::string plan = family.long_rows != nullptr
                                             ? check_backward_with_long_rows(handle.get(), c, family.long_rows)
                                             : check_backward(handle.get(), c);
                INFO("plan: " << plan);
                CHECK(kernel_kind(plan) == family.kind);
            }
        }
    }
}

TEST_CASE("cuda backward: empty tensors plan nothing and touch no pointer", "[cuda][backward][sanitize]") {
    CudaHandle handle;
    const std::vector<std::int64_t> shapes[] = {{0, 5}, {5, 0}, {3, 0, 4}};
    for (const auto& shape : shapes) {
        for (int axis : {0, -1}) {
            TensorDesc dy(SMX_DTYPE_F32, shape, row_major_strides(shape));
            TensorDesc y(SMX_DTYPE_F32, shape, row_major_strides(shape));
            TensorDesc dx(SMX_DTYPE_BF16, shape, row_major_strides(shape));
            SoftmaxBackwardDesc desc(handle.get(), SMX_SOFTMAX, axis, dx.desc, dy.desc, y.desc);
            SMX_REQUIRE_OK(desc.status);
            const char* plan = nullptr;
            SMX_REQUIRE_OK(smxGetSoftmaxBackwardPlan(desc.desc, &plan));
            CHECK(std::string(plan).rfind("cuda none", 0) == 0);
            std::size_t workspace = 1;
            SMX_REQUIRE_OK(smxGetSoftmaxBackwardWorkspaceSize(desc.desc, &workspace));
            CHECK(workspace == 0);
            SMX_REQUIRE_OK(smxSoftmaxBackward(desc.desc, nullptr, 0, nullptr, nullptr, nullptr, nullptr));
        }
    }
}

TEST_CASE("cuda backward: results do not depend on the stream, on other descriptors' plans or on the run",
          "[cuda][backward]") {
    CudaHandle handle;
    DeviceStream stream;
    struct Problem {
        std::int64_t rows, row_len;
        const char* long_rows;
    };
    // Rows whose sums meet across CTAs (cluster, grid barrier, workspace) must come out bitwise the same.
    const Problem problems[] = {{37, 900, nullptr}, {5, 70001, "cluster"}, {2, 50001, "grid"}, {3, 70003, "split"}};
    for (const Problem& problem : problems) {
        for (bool log_mode : {false, true}) {
            BackwardCase c = make_rows_case(SMX_DTYPE_F32, SMX_DTYPE_F32, problem.rows, problem.row_len, log_mode);
            std::unique_ptr<ScopedLongRowsOverride> rule;
            if (problem.long_rows != nullptr) rule = std::make_unique<ScopedLongRowsOverride>(problem.long_rows);
            const BackwardOutcome first = run_backward(handle.get(), c);
            INFO(describe(c) << " | plan: " << first.plan);
            REQUIRE(first.mismatch == "");
            const HostTensor first_dx = c.dx;
            // Another descriptor, of another family, planned and run in between.
            BackwardCase other = make_case(SMX_DTYPE_BF16, SMX_DTYPE_F32, {3, 257, 41}, 1, !log_mode);
            CHECK(run_backward(handle.get(), other).mismatch == "");
            const BackwardOutcome on_stream = run_backward(handle.get(), c, false, stream.get());
            CHECK(on_stream.mismatch == "");
            CHECK(on_stream.plan == first.plan);
            CHECK(identical_storage(c.dx, first_dx));
        }
    }
}

namespace {

// Rows of f32 dy and y that need a cluster of exactly `cluster` CTAs: one CTA holds at most 512 threads x 32
// values, so the rows end half way into the last CTA's share.
constexpr std::int64_t kF32RegsCtaCapacity = 512 * 32;
std::int64_t rows_needing_cluster(int cluster) { return (cluster - 1) * kF32RegsCtaCapacity + kF32RegsCtaCapacity / 2 + 1; }

// Runs `c` as planned (the rule, whose cluster exchanges its sums as `rule_exchange` says: "push" or "pull"),
// then with SMX_CUDA_BACKWARD_EXCHANGE=pull, each against the reference. Both add each sum's CTA parts in rank
// order, so their dx must be bitwise the same. Returns the rule's plan, and the pulled one in `pulled_plan`.
std::string check_rule_exchange_against_pull(smxHandle_t handle, BackwardCase& c, const std::string& rule_exchange,
                                             std::string* pulled_plan = nullptr) {
    const std::string planned = check_backward(handle, c);
    INFO("planned: " << planned);
    CHECK(plan_value(planned, "cluster") > 1);
    CHECK(planned.find(" exchange=" + rule_exchange) != std::string::npos);
    const HostTensor planned_dx = c.dx;
    ScopedEnvironment pull("SMX_CUDA_BACKWARD_EXCHANGE", "pull");
    const std::string pulled = check_backward(handle, c);
    INFO("pulled plan: " << pulled);
    CHECK(kernel_kind(pulled) == kernel_kind(planned));
    CHECK(pulled.find(" exchange=pull") != std::string::npos);
    CHECK(plan_value(pulled, "cluster") == plan_value(planned, "cluster"));
    CHECK(identical_storage(c.dx, planned_dx));
    if (pulled_plan != nullptr) *pulled_plan = pulled;
    return planned;
}

// check_rule_exchange_against_pull where the rule pushes.
std::string check_push_against_pull(smxHandle_t handle, BackwardCase& c) {
    return check_rule_exchange_against_pull(handle, c, "push");
}

// check_push_against_pull on backward-regs' cluster form, clusters capped at `max_cluster` where it is under 16.
std::string check_regs_push_against_pull(smxHandle_t handle, BackwardCase& c, int max_cluster) {
    ScopedLongRowsOverride cluster_rule("cluster");
    const std::string cap = std::to_string(max_cluster);
    std::unique_ptr<ScopedEnvironment> cluster_cap;
    if (max_cluster < 16) cluster_cap = std::make_unique<ScopedEnvironment>("SMX_CUDA_MAX_CLUSTER", cap.c_str());
    const std::string plan = check_push_against_pull(handle, c);
    INFO("plan: " << plan);
    CHECK(kernel_kind(plan) == "backward-regs");
    return plan;
}

}  // namespace

TEST_CASE("cuda backward: clusters of 2..16 CTAs push their sums; SMX_CUDA_BACKWARD_EXCHANGE=pull gives the same bits",
          "[cuda][backward]") {
    CudaHandle handle;
    // f32 dy and y at every cluster size, both modes in turn.
    for (int cluster = 2; cluster <= 16; ++cluster) {
        BackwardCase c = make_rows_case(SMX_DTYPE_F32, SMX_DTYPE_F32, 3, rows_needing_cluster(cluster), cluster % 2 == 0);
        const std::string plan = check_regs_push_against_pull(handle.get(), c, cluster);
        CHECK(plan_value(plan, "cluster") == cluster);
    }
    // The other pairs' instances (16-bit dy and y, f32 dy with 16-bit dx, f64), special rows included.
    const smxDataType_t pairs[][2] = {{SMX_DTYPE_BF16, SMX_DTYPE_BF16},
                                      {SMX_DTYPE_F16, SMX_DTYPE_F32},
                                      {SMX_DTYPE_F32, SMX_DTYPE_BF16},
                                      {SMX_DTYPE_F64, SMX_DTYPE_F64}};
    for (const auto& pair : pairs) {
        for (bool log_mode : {false, true}) {
            BackwardCase c = make_rows_case(pair[0], pair[1], kSpecialRows + 2, 70001, log_mode);
            // Not for f64: a special row of 70001 equal terms leaves the reference's own sequential sum ~n/2 ulps
            // off, past f64's tolerance where dx cancels (H200 run F2); the pairs below 64 bits keep them.
            if (pair[0] != SMX_DTYPE_F64) add_special_rows(c);
            check_regs_push_against_pull(handle.get(), c, 16);
        }
    }
}

TEST_CASE("cuda backward: backward-spatial clusters push their column sums except 16-bit dy and y with 16-bit dx; "
          "SMX_CUDA_BACKWARD_EXCHANGE=pull gives the same bits",
          "[cuda][backward]") {
    CudaHandle handle;
    struct Spatial {
        std::vector<std::int64_t> shape;
        int axis;
        smxDataType_t value_dtype;
        smxDataType_t gradient_dtype;
        int cached;  // 0: columns too long for any cluster's cache, spread over a cluster read twice
        const char* rule_exchange;  // the rule pushes, but not for 16-bit dy and y with 16-bit dx
    };
    const Spatial cases[] = {
        {{8192, 256}, 0, SMX_DTYPE_F32, SMX_DTYPE_F32, 1, "push"},      // 16 CTAs, 16 columns each
        {{8192, 256}, 0, SMX_DTYPE_BF16, SMX_DTYPE_BF16, 1, "pull"},    // 16 CTAs, 32 columns
        {{8192, 256}, 0, SMX_DTYPE_F16, SMX_DTYPE_BF16, 1, "pull"},
        {{17, 1024, 256}, 1, SMX_DTYPE_F16, SMX_DTYPE_F32, 1, "push"},  // 4 CTAs, 64 columns
        {{1, 300000, 8}, 1, SMX_DTYPE_F32, SMX_DTYPE_BF16, 0, "push"},  // one tile: the mailbox alone in shared memory
        {{1, 3000000, 8}, 1, SMX_DTYPE_BF16, SMX_DTYPE_F16, 0, "pull"},
        {{2, 100000, 6}, 1, SMX_DTYPE_F64, SMX_DTYPE_F64, 1, "push"},   // double sums, cached by a cluster of 16 (H200)
    };
    for (const Spatial& s : cases) {
        for (bool log_mode : {false, true}) {
            BackwardCase c = make_case(s.value_dtype, s.gradient_dtype, s.shape, s.axis, log_mode);
            std::string pulled;
            const std::string plan = check_rule_exchange_against_pull(handle.get(), c, s.rule_exchange, &pulled);
            INFO("plan: " << plan);
            CHECK(kernel_kind(plan) == "backward-spatial");
            CHECK(plan_value(plan, "cached") == s.cached);
            // The pull instance's budget holds no mailbox (per rank a sum per column; its mbarrier is static).
            const std::int64_t sum_bytes = s.value_dtype == SMX_DTYPE_F64 ? 8 : 4;
            const std::int64_t mailbox_bytes =
                std::string(s.rule_exchange) == "push" ? plan_value(plan, "cluster") * plan_value(plan, "tile") * sum_bytes : 0;
            CHECK(plan_value(pulled, "smem") + mailbox_bytes == plan_value(plan, "smem"));
        }
    }
}

TEST_CASE("cuda backward: pushed and pulled clusters under the sanitizers", "[cuda][backward][sanitize]") {
    CudaHandle handle;
    // backward-regs clusters of 2 and 4 CTAs, few rows, so racecheck sees every mailbox handshake quickly.
    for (int cluster : {2, 4}) {
        for (smxDataType_t value : {SMX_DTYPE_F32, SMX_DTYPE_BF16}) {
            BackwardCase c = make_rows_case(value, value, 2, rows_needing_cluster(cluster), cluster == 4);
            const std::string plan = check_regs_push_against_pull(handle.get(), c, cluster);
            CHECK(plan_value(plan, "cluster") == cluster);
        }
    }
    // backward-spatial: columns of 2048 cached by a cluster (2 tiles), and one tile of long columns over a cluster
    // (f32: read twice, the mailbox alone in shared memory; bf16: cached); clusters of at most 8 (synccheck's
    // portable sizes).
    ScopedEnvironment portable("SMX_CUDA_MAX_CLUSTER", "8");
    const std::pair<std::vector<std::int64_t>, int> spatial[] = {{{2048, 64}, 0}, {{1, 40000, 8}, 1}};
    for (const auto& [shape, axis] : spatial) {
        for (smxDataType_t value : {SMX_DTYPE_F32, SMX_DTYPE_BF16}) {
            BackwardCase c = make_case(value, SMX_DTYPE_F32, shape, axis, axis == 1);
            const std::string plan = check_push_against_pull(handle.get(), c);
            INFO("plan: " << plan);
            CHECK(kernel_kind(plan) == "backward-spatial");
        }
    }
}

// backward-spatial's row rule: one CTA a tile down to 64-byte rows (counted in bytes, so 16-bit dy with f32 dx
// keeps 64-byte rows), clusters of 16 before rows under 64 bytes; SMX_CUDA_BACKWARD_SPATIAL_ROWS=narrow: the
// old search (4 vectors unclustered, clusters of 8 before narrower rows).
TEST_CASE("cuda backward: backward-spatial tile rows of 64 bytes or more, clusters of 16 before narrower rows; "
          "SMX_CUDA_BACKWARD_SPATIAL_ROWS=narrow",
          "[cuda][backward]") {
    CudaHandle handle;
    struct Rows {
        std::vector<std::int64_t> shape;
        int axis;
        smxDataType_t value_dtype;
        smxDataType_t gradient_dtype;
        int rule_row_bytes;
        int rule_cluster;
        int narrow_row_bytes;
        int narrow_cluster;
        const char* what;
    };
    const Rows cases[] = {
        {{17, 1024, 256}, 1, SMX_DTYPE_BF16, SMX_DTYPE_F32, 128, 4, 32, 1,
         "16-bit dy, f32 dx, columns of 1024 (17 x 16 tiles: no spread on 132 SMs): 128-byte rows in clusters of 4, not 32-byte rows alone"},
        {{17, 1024, 256}, 1, SMX_DTYPE_F16, SMX_DTYPE_F32, 128, 4, 32, 1, "the same with f16"},
        {{8192, 256}, 0, SMX_DTYPE_F16, SMX_DTYPE_F16, 64, 16, 32, 8, "columns of 8192: 64-byte rows in clusters of 16"},
        {{8192, 256}, 0, SMX_DTYPE_F32, SMX_DTYPE_F32, 64, 16, 32, 8, "the same in f32"},
        {{8192, 256}, 0, SMX_DTYPE_BF16, SMX_DTYPE_F32, 64, 16, 32, 8, "the same with 8-byte vectors"},
        {{2, 4096, 128}, 1, SMX_DTYPE_F16, SMX_DTYPE_F16, 64, 8, 64, 8, "64-byte rows fit clusters of 8: unchanged"},
    };
    for (const Rows& r : cases) {
        for (bool log_mode : {false, true}) {
            INFO(r.what << (log_mode ? " (log)" : ""));
            // One plan against the float64 reference, its rows and cluster as expected, marked narrow or not.
            const auto check_rows = [&](int row_bytes, int cluster, bool narrow) {
                BackwardCase c = make_case(r.value_dtype, r.gradient_dtype, r.shape, r.axis, log_mode);
                const std::string plan = check_backward(handle.get(), c);
                INFO("plan: " << plan);
                REQUIRE(kernel_kind(plan) == "backward-spatial");
                CHECK(plan_value(plan, "cached") == 1);
                CHECK(plan_value(plan, "tile") * static_cast<std::int64_t>(dtype_size(r.value_dtype)) == row_bytes);
                CHECK(plan_value(plan, "cluster") == cluster);
                CHECK((plan.find(" rows=narrow") != std::string::npos) == narrow);
            };
            check_rows(r.rule_row_bytes, r.rule_cluster, false);
            ScopedEnvironment narrow_rows("SMX_CUDA_BACKWARD_SPATIAL_ROWS", "narrow");
            check_rows(r.narrow_row_bytes, r.narrow_cluster, true);
        }
    }
}

#endif  // SMX_TEST_WITH_CUDA
