// [cuda] decode: few very long rows, spread over many CTAs by one cooperative launch (grid-regs, or
// grid-regs-steps where it takes the rows a few at a time), by two kernels (split-row) or a cluster per row
// (block-regs); SMX_CUDA_LONG_ROWS forces one where a test is about it: the issue-6 shapes, lengths and row
// counts around the dispatch boundaries (the residency limit of grid-regs included), rows up to 2^24
// elements, exactly uniform output for constant rows, special values, determinism across row counts,
// graph capture, in place and misaligned pointers.
#if SMX_TEST_WITH_CUDA

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "cuda_helpers.hpp"

using namespace smx_test;

namespace {

// Runs (rows, n) on the device and returns y on the host (no reference check).
HostTensor run_decode(smxHandle_t handle, const HostTensor& x, smxDataType_t y_dtype, bool log_mode, std::string* plan) {
    HostTensor y = make_tensor(y_dtype, x.shape);
    DeviceTensor x_device(x), y_device(y);
    x_device.upload(x);
    y_device.poison();
    const DeviceRun run = run_on_device(handle, y, y_device.data(), x, x_device.data(), 1, log_mode);
    INFO(describe_case(y, x, 1, log_mode) << " | plan: " << run.plan << " | " << run.error);
    REQUIRE(run.status == SMX_STATUS_SUCCESS);
    y_device.download(y);
    *plan = run.plan;
    return y;
}

// For rows of `row_len` constant values: the largest |y - 1/row_len| over the first `count` elements of y,
// and one ulp of 1/row_len in f32 (what the output must stay within).
struct UniformError {
    double worst;
    float ulp;
};
UniformError uniform_error(const HostTensor& y, std::int64_t row_len, std::int64_t count) {
    const float uniform = static_cast<float>(1.0 / static_cast<double>(row_len));
    UniformError error{0.0, std::nextafter(uniform, 1.0f) - uniform};
    for (std::int64_t j = 0; j < count; ++j) error.worst = std::max(error.worst, std::fabs(y.get(j) - uniform));
    return error;
}

// The most rows of `plan`'s grid-regs configuration the device holds at once.
std::int64_t grid_regs_resident_rows(const std::string& plan) {
    return plan_value(plan, "ctas_per_sm") * multiprocessor_count() / plan_value(plan, "chunks");
}

// The most rows of `row_len` that grid-regs can take on this device (0: not the length): every row's
// CTAs resident at once, and below 65536 elements at most half of what the device holds. From the plan
// of one row with grid-regs forced (CTAs per row and per SM in its text); from 65536 elements, past that
// limit, from the plan with the wide slices (64 KiB) while those fit.
std::int64_t grid_regs_capacity_rows(smxHandle_t handle, smxDataType_t x_dtype, smxDataType_t y_dtype,
                                     std::int64_t row_len) {
    if (row_len < 24576) return 0;
    const ScopedLongRowsOverride grid("grid");
    const std::string plan = plan_for_rows(handle, x_dtype, y_dtype, 1, row_len);
    if (kernel_kind(plan) != "grid-regs") return 0;
    const std::int64_t limit = grid_regs_resident_rows(plan);
    if (row_len < 65536) return limit / 2;
    const std::string wide = plan_for_rows(handle, x_dtype, y_dtype, limit + 1, row_len);
    if (kernel_kind(wide) != "grid-regs") return limit;
    INFO("wide grid-regs: " << wide);
    CHECK(plan_value(wide, "slice") > plan_value(plan, "slice"));
    return std::max(limit, grid_regs_resident_rows(wide));
}

// The most rows of `row_len` the rule gives grid-regs: its capacity, and fewer than 2^19 elements in all
// (from there the cluster wins) for f32 x whose cluster per row is a 32-value instance at 2 CTAs per SM,
// and for 16-bit x written as 16-bit whose cluster per row is the packed instance at 4 or more.
std::int64_t grid_regs_max_rows(smxHandle_t handle, smxDataType_t x_dtype, smxDataType_t y_dtype, std::int64_t row_len) {
    const std::int64_t capacity = grid_regs_capacity_rows(handle, x_dtype, y_dtype, row_len);
    const bool narrow_pair = dtype_size(x_dtype) == 2 && dtype_size(y_dtype) == 2;
    if ((x_dtype != SMX_DTYPE_F32 && !narrow_pair) || capacity == 0) return capacity;
    const ScopedLongRowsOverride cluster("cluster");
    const std::string plan = plan_for_rows(handle, x_dtype, y_dtype, 1, row_len);
    const bool block_regs = kernel_kind(plan) == "block-regs";
    const bool push_cluster = block_regs && x_dtype == SMX_DTYPE_F32 && plan_value(plan, "values") >= 32 &&
                              plan_value(plan, "ctas_per_sm") >= 2;
    const bool packed_cluster = block_regs && narrow_pair && plan_value(plan, "values") == 64 &&
                                plan_value(plan, "ctas_per_sm") >= 4;
    INFO("cluster per row: " << plan);
    if (!push_cluster && !packed_cluster) return capacity;
    const std::int64_t below_threshold = ((std::int64_t{1} << 19) - 1) / row_len;
    return std::min(capacity, below_threshold);
}

// Whether grid-regs-steps takes (rows, row_len) when forced: the plan with SMX_CUDA_LONG_ROWS=steps.
bool grid_regs_steps_fit(smxHandle_t handle, smxDataType_t x_dtype, smxDataType_t y_dtype, std::int64_t rows,
                         std::int64_t row_len) {
    const ScopedLongRowsOverride steps("steps");
    return kernel_kind(plan_for_rows(handle, x_dtype, y_dtype, rows, row_len)) == "grid-regs-steps";
}

// What the rule must pick for few long rows: grid-regs up to grid_regs_max_rows; beyond that, for rows too
// long for a cluster (> 524288) and fewer than the SMs, grid-regs-steps where one row's CTAs fit at once
// (else split-row); otherwise a cluster per row.
std::string expected_long_rows_kind(smxHandle_t handle, smxDataType_t x_dtype, smxDataType_t y_dtype,
                                    std::int64_t rows, std::int64_t row_len) {
    if (rows <= grid_regs_max_rows(handle, x_dtype, y_dtype, row_len)) return "grid-regs";
    if (row_len > 524288 && rows < multiprocessor_count()) {
        return grid_regs_steps_fit(handle, x_dtype, y_dtype, rows, row_len) ? "grid-regs-steps" : "split-row";
    }
    return "block-regs";
}

}  // namespace

TEST_CASE("cuda decode: the issue-6 shapes match the reference on the plan the rule picks", "[cuda]") {
    CudaHandle handle;
    struct Shape {
        std::int64_t rows, row_len;
    };
    const Shape shapes[] = {{1, 32000},   {1, 128256},  {8, 128256},  {64, 128256},
                            {1, 256000},  {32, 256000}, {1, 1048576}, {4, 4194304}};
    const DtypePair pairs[] = {{SMX_DTYPE_F32, SMX_DTYPE_F32}, {SMX_DTYPE_BF16, SMX_DTYPE_BF16},
                               {SMX_DTYPE_BF16, SMX_DTYPE_F32}};
    for (const Shape& shape : shapes) {
        for (const DtypePair& pair : pairs) {
            const std::string expected = expected_long_rows_kind(handle.get(), pair.x, pair.y, shape.rows, shape.row_len);
            for (bool log_mode : {false, true}) {
                const std::string plan = check_random_rows(handle.get(), pair.x, pair.y, shape.rows, shape.row_len, log_mode);
                INFO("plan: " << plan);
                CHECK(kernel_kind(plan) == expected);
            }
        }
    }
}

TEST_CASE("cuda decode: lengths and row counts around the long-row boundaries, every dtype family", "[cuda]") {
    CudaHandle handle;
    // 24575/24576: where grid-regs starts; 65535/65536: where it may fill the device; 131073: a short last
    // CTA; 524288/524289: the longest row a cluster holds in registers (16 x 1024 x 32 f32, 16 x 512 x 64
    // 16-bit); 2^23 + 64: too many CTAs for grid-regs, so split-row with its largest chunk (65536) and a
    // short last one.
    const std::int64_t lengths[] = {24575, 24576, 65535, 65536, 131073, 524288, 524289, 8388672};
    const DtypePair pairs[] = {{SMX_DTYPE_F32, SMX_DTYPE_F32}, {SMX_DTYPE_F16, SMX_DTYPE_F16},
                               {SMX_DTYPE_BF16, SMX_DTYPE_F32}, {SMX_DTYPE_F64, SMX_DTYPE_F64}};
    for (std::int64_t row_len : lengths) {
        for (const DtypePair& pair : pairs) {
            const std::string expected = expected_long_rows_kind(handle.get(), pair.x, pair.y, 3, row_len);
            for (bool log_mode : {false, true}) {
                const std::string plan = check_random_rows(handle.get(), pair.x, pair.y, 3, row_len, log_mode);
                INFO("plan: " << plan);
                if (pair.x != SMX_DTYPE_F64 || expected != "block-regs") CHECK(kernel_kind(plan) == expected);
            }
        }
    }
    for (std::int64_t rows : {63, 64, 65}) {
        check_random_rows(handle.get(), SMX_DTYPE_F32, SMX_DTYPE_F32, rows, 65537, false);
        check_random_rows(handle.get(), SMX_DTYPE_F16, SMX_DTYPE_F32, rows, 40000, true);
    }
}

TEST_CASE("cuda decode: f32 rows leave grid-regs for a cluster per row at 2^19 elements in all", "[cuda]") {
    CudaHandle handle;
    struct Case {
        std::int64_t row_len, last_grid_rows;  // last_grid_rows x row_len < 2^19 <= (last_grid_rows + 1) x row_len
    };
    for (const Case& c : {Case{65536, 7}, Case{128256, 4}, Case{131072, 3}, Case{256000, 2}}) {
        for (bool log_mode : {false, true}) {
            const std::string below = check_random_rows(handle.get(), SMX_DTYPE_F32, SMX_DTYPE_F32, c.last_grid_rows,
                                                        c.row_len, log_mode);
            const std::string at = check_random_rows(handle.get(), SMX_DTYPE_F32, SMX_DTYPE_F32, c.last_grid_rows + 1,
                                                     c.row_len, log_mode);
            INFO("row_len " << c.row_len << " | " << below << " | " << at);
            CHECK(kernel_kind(below) == "grid-regs");
            CHECK(kernel_kind(at) == "block-regs");
            CHECK(plan_value(at, "values") == 32);
        }
    }
    // bf16 x keeps grid-regs there (its cluster plans hold 64 packed values and lost).
    CHECK(kernel_kind(check_random_rows(handle.get(), SMX_DTYPE_BF16, SMX_DTYPE_F32, 5, 128256, false)) == "grid-regs");
}

TEST_CASE("cuda decode: grid-regs folds rows of up to 32, 33-64 and over 64 CTAs' partials", "[cuda]") {
    // Warp 0 takes a lane's first two partials in one trip where the instance allows (not at 16 values) and
    // any past 64 one a trip: one row of each size, on the instances of both folds, against the reference.
    CudaHandle handle;
    const ScopedLongRowsOverride grid("grid");
    struct Case {
        smxDataType_t x, y;
        std::int64_t row_len, min_chunks, max_chunks;
    };
    const Case cases[] = {
        {SMX_DTYPE_F32, SMX_DTYPE_F32, 128256, 2, 32},       // 8 values: one partial a lane
        {SMX_DTYPE_F32, SMX_DTYPE_F32, 256000, 33, 64},      // 8 values: two a lane, some lanes one
        {SMX_DTYPE_F32, SMX_DTYPE_F32, 1500000, 65, 512},    // 32 values: two a lane, then the loop
        {SMX_DTYPE_BF16, SMX_DTYPE_BF16, 1500000, 65, 512},  // 32 values, 16-bit x
        {SMX_DTYPE_BF16, SMX_DTYPE_F32, 400000, 33, 64},     // 16 values: one a trip
        {SMX_DTYPE_F64, SMX_DTYPE_F64, 100000, 33, 64},      // 8 doubles: the 16-byte load
    };
    for (const Case& c : cases) {
        for (bool log_mode : {false, true}) {
            const std::string plan = check_random_rows(handle.get(), c.x, c.y, 1, c.row_len, log_mode);
            INFO("row_len " << c.row_len << " | plan: " << plan);
            REQUIRE(kernel_kind(plan) == "grid-regs");
            CHECK(plan_value(plan, "chunks") >= c.min_chunks);
            CHECK(plan_value(plan, "chunks") <= c.max_chunks);
        }
    }
}

TEST_CASE("cuda decode: grid-regs at its row-count limit, and one row past it", "[cuda][sanitize]") {
    CudaHandle handle;
    // From 65536 elements the limit is every CTA resident at once, which the grid barrier needs: the
    // largest grid must run (a cooperative launch refuses more). Shorter rows stop at half of that.
    struct Case {
        smxDataType_t x, y;
        std::int64_t row_len;
    };
    const Case cases[] = {{SMX_DTYPE_F32, SMX_DTYPE_F32, 65536}, {SMX_DTYPE_BF16, SMX_DTYPE_F32, 200003},
                          {SMX_DTYPE_F16, SMX_DTYPE_F16, 1048576}, {SMX_DTYPE_F32, SMX_DTYPE_BF16, 32000},
                          {SMX_DTYPE_F64, SMX_DTYPE_F64, 40000}};
    for (const Case& c : cases) {
        const std::int64_t limit = grid_regs_max_rows(handle.get(), c.x, c.y, c.row_len);
        INFO(dtype_name(c.x) << " row_len " << c.row_len << " limit " << limit);
        REQUIRE(limit >= 1);
        const std::string at_limit = check_random_rows(handle.get(), c.x, c.y, limit, c.row_len, c.row_len % 2 == 1);
        CHECK(kernel_kind(at_limit) == "grid-regs");
        const std::string past_limit = check_random_rows(handle.get(), c.x, c.y, limit + 1, c.row_len, false);
        CHECK(kernel_kind(past_limit) != "grid-regs");
    }
}

TEST_CASE("cuda decode: wide grid-regs slices past the length's limit, the same rows bitwise at any count", "[cuda]") {
    CudaHandle handle;
    // 128256 f32: 32 CTAs of 4096 elements per row while they fit (16 rows on an H200), then 8 of 16384
    // (33 rows); bf16 -> f32: 16 of 8192 (24 rows), then 4 of 32768 (66 rows).
    struct Case {
        smxDataType_t x, y;
    };
    // The rule gives f32 rows of 128256 to a cluster per row from 5 rows, so f32 runs with grid-regs forced.
    const std::int64_t row_len = 128256;
    for (const Case& c : {Case{SMX_DTYPE_F32, SMX_DTYPE_F32}, Case{SMX_DTYPE_BF16, SMX_DTYPE_F32}}) {
        std::string one_plan;
        {
            const ScopedLongRowsOverride grid("grid");
            one_plan = plan_for_rows(handle.get(), c.x, c.y, 1, row_len);
        }
        REQUIRE(kernel_kind(one_plan) == "grid-regs");
        const ScopedLongRowsOverride forced(c.x == SMX_DTYPE_F32 ? "grid" : "rule");
        const std::int64_t narrow_rows = grid_regs_resident_rows(one_plan);
        const std::int64_t max_rows = grid_regs_capacity_rows(handle.get(), c.x, c.y, row_len);
        INFO(dtype_name(c.x) << " narrow limit " << narrow_rows << " wide limit " << max_rows);
        REQUIRE(max_rows > narrow_rows + 1);
        const std::int64_t fewer = narrow_rows + 1;
        HostTensor many = make_tensor(c.x, {max_rows, row_len});
        fill_random(many, test_rng());
        HostTensor few = make_tensor(c.x, {fewer, row_len});
        std::memcpy(few.data(), many.data(), static_cast<std::size_t>(fewer * row_len) * dtype_size(c.x));
        std::string plan_few, plan_many;
        const HostTensor y_few = run_decode(handle.get(), few, c.y, false, &plan_few);
        const HostTensor y_many = run_decode(handle.get(), many, c.y, false, &plan_many);
        INFO(plan_few << " | " << plan_many);
        CHECK(kernel_kind(plan_few) == "grid-regs");
        CHECK(kernel_kind(plan_many) == "grid-regs");
        CHECK(plan_value(plan_few, "slice") == plan_value(plan_many, "slice"));
        CHECK(plan_value(plan_few, "slice") > plan_value(one_plan, "slice"));
        CHECK(std::memcmp(y_few.data(), y_many.data(), y_few.storage.size()) == 0);
        CHECK(compare_to_reference(y_many, reference_softmax(many, 1, false), false) == "");
        // One row past the wide limit: a cluster per row again.
        const std::string past = plan_for_rows(handle.get(), c.x, c.y, max_rows + 1, row_len);
        CHECK(kernel_kind(past) == "block-regs");
    }
}

TEST_CASE("cuda decode: grid-regs-steps takes the rows in turns, each row bitwise as grid-regs writes it", "[cuda]") {
    CudaHandle handle;
    // 1048577 elements: 65 CTAs of 16132 (the last 16097), 4 rows a step on an H200 (264 CTAs resident), so
    // 9 rows take 3 steps and the last step has one row: its other CTAs take the step with no elements.
    const std::int64_t row_len = 1048577;
    const DtypePair pairs[] = {{SMX_DTYPE_F32, SMX_DTYPE_F32}, {SMX_DTYPE_F32, SMX_DTYPE_BF16},
                               {SMX_DTYPE_F32, SMX_DTYPE_F16}};
    for (const DtypePair& pair : pairs) {
        for (bool log_mode : {false, true}) {
            HostTensor x = make_tensor(pair.x, {9, row_len});
            fill_random(x, test_rng());
            x.set(5 * row_len + 77777, std::numeric_limits<double>::quiet_NaN());  // a NaN decides its row
            for (std::int64_t j = 0; j < row_len; ++j) x.set(8 * row_len + j, -std::numeric_limits<double>::infinity());
            HostTensor one = make_tensor(pair.x, {1, row_len});
            std::memcpy(one.data(), x.data(), static_cast<std::size_t>(row_len) * dtype_size(pair.x));
            std::string one_plan, plan;
            const HostTensor y_one = run_decode(handle.get(), one, pair.y, log_mode, &one_plan);
            HostTensor y = make_tensor(pair.y, {9, row_len});
            const std::string mismatch = check_on_device(handle.get(), y, x, 1, log_mode, &plan);  // the rule's plan
            INFO(describe_case(y, x, 1, log_mode) << " | plan: " << plan << " | one row: " << one_plan);
            CHECK(kernel_kind(one_plan) == "grid-regs");
            CHECK(kernel_kind(plan) == "grid-regs-steps");
            CHECK(plan_value(plan, "rows_per_step") * plan_value(plan, "steps") >= 9);
            CHECK(plan_value(plan, "rows_per_step") * (plan_value(plan, "steps") - 1) < 9);
            CHECK(plan_value(plan, "slice") == plan_value(one_plan, "slice"));
            CHECK(plan_value(plan, "threads") == plan_value(one_plan, "threads"));
            CHECK(mismatch == "");
            const std::size_t row_bytes = static_cast<std::size_t>(row_len) * dtype_size(pair.y);
            CHECK(std::memcmp(y.data(), y_one.data(), row_bytes) == 0);
        }
    }
    // Constant rows, one constant per row, every row of every step exactly uniform within 1 ulp.
    {
        const smxDataType_t x_dtype = SMX_DTYPE_F32;
        HostTensor x = make_tensor(x_dtype, {9, row_len});
        for (std::int64_t r = 0; r < 9; ++r) {
            for (std::int64_t j = 0; j < row_len; ++j) x.set(r * row_len + j, 0.25 * static_cast<double>(r) - 1.0);
        }
        std::string plan;
        const HostTensor y = run_decode(handle.get(), x, SMX_DTYPE_F32, false, &plan);
        const UniformError error = uniform_error(y, row_len, 9 * row_len);
        INFO(dtype_name(x_dtype) << " | plan: " << plan << " | worst |y - 1/n| " << error.worst << " ulp " << error.ulp);
        CHECK(kernel_kind(plan) == "grid-regs-steps");
        CHECK(error.worst <= error.ulp);
    }
    // 16-bit x has no grid-regs-steps: forced, the rule's plan (split-row) stands.
    const ScopedLongRowsOverride steps("steps");
    CHECK(kernel_kind(plan_for_rows(handle.get(), SMX_DTYPE_BF16, SMX_DTYPE_BF16, 9, row_len)) == "split-row");
}

TEST_CASE("cuda decode: grid-regs-steps with a short last step, odd phases and strides", "[cuda][sanitize]") {
    CudaHandle handle;
    // The rule's plan for 9 x 524289 f32: 33 CTAs of 15888 per row (too long for a cluster), 8 rows a step on
    // an H200, so 2 steps. A row stride of 524291 and x one element past a 16-byte boundary: the rows'
    // slices start at different 16-byte phases, so each step stages its packs from another offset.
    for (bool log_mode : {false, true}) {
        HostTensor x = make_tensor(SMX_DTYPE_F32, {9, 524289}, {524291, 1}, 1);
        HostTensor y = make_tensor(log_mode ? SMX_DTYPE_F32 : SMX_DTYPE_F16, {9, 524289}, {}, 3);
        fill_random(x, test_rng());
        std::string plan;
        const std::string mismatch = check_on_device(handle.get(), y, x, 1, log_mode, &plan);
        INFO(describe_case(y, x, 1, log_mode) << " | plan: " << plan);
        CHECK(kernel_kind(plan) == "grid-regs-steps");
        CHECK(plan_value(plan, "steps") >= 2);
        CHECK(mismatch == "");
    }
}

TEST_CASE("cuda decode: a plan made later for another row length leaves an earlier grid-regs-steps plan working",
          "[cuda]") {
    CudaHandle handle;
    // Each grid-regs-steps plan stages a slice whose size depends on the row length (65536 bytes for rows of
    // 4194304, 64880 for 600001 on an H200), on one kernel shared by every plan. The kernel's shared memory
    // limit must stay large enough for every plan already made, whatever plans come after.
    HostTensor x = make_tensor(SMX_DTYPE_F32, {2, 4194304});
    HostTensor y = make_tensor(SMX_DTYPE_F32, {2, 4194304});
    fill_random(x, test_rng());
    TensorDesc x_desc(x), y_desc(y);
    SoftmaxDesc first(handle.get(), SMX_SOFTMAX, 1, y_desc.desc, x_desc.desc);
    SMX_REQUIRE_OK(first.status);
    const char* first_plan = nullptr;
    SMX_REQUIRE_OK(smxGetSoftmaxPlan(first.desc, &first_plan));
    std::size_t workspace_bytes = 0;
    SMX_REQUIRE_OK(smxGetSoftmaxWorkspaceSize(first.desc, &workspace_bytes));
    DeviceBuffer workspace(workspace_bytes);
    DeviceTensor x_device(x), y_device(y);
    x_device.upload(x);
    y_device.poison();
    SMX_REQUIRE_OK(smxSoftmaxForward(first.desc, workspace.get(), workspace_bytes, y_device.data(), x_device.data(), nullptr));
    SMX_REQUIRE_CUDA(cudaDeviceSynchronize());

    // A second plan of the same kernel with a smaller staged slice, made and run in between.
    std::string second_plan;
    const std::string second_mismatch = [&] {
        HostTensor x2 = make_tensor(SMX_DTYPE_F32, {8, 600001});
        HostTensor y2 = make_tensor(SMX_DTYPE_F32, {8, 600001});
        fill_random(x2, test_rng());
        return check_on_device(handle.get(), y2, x2, 1, false, &second_plan);
    }();
    INFO("first plan: " << first_plan << " | second plan: " << second_plan);
    CHECK(kernel_kind(first_plan) == "grid-regs-steps");
    CHECK(kernel_kind(second_plan) == "grid-regs-steps");
    CHECK(plan_value(second_plan, "staged") < plan_value(first_plan, "staged"));
    CHECK(second_mismatch == "");

    // The first plan again, on the same buffers: it must still launch and match the reference.
    y_device.poison();
    const smxStatus_t again = smxSoftmaxForward(first.desc, workspace.get(), workspace_bytes, y_device.data(),
                                                x_device.data(), nullptr);
    INFO((again == SMX_STATUS_SUCCESS ? std::string() : std::string(smxGetLastErrorMessage())));
    REQUIRE(again == SMX_STATUS_SUCCESS);
    SMX_REQUIRE_CUDA(cudaDeviceSynchronize());
    y_device.download(y);
    CHECK(compare_to_reference(y, reference_softmax(x, 1, false), false) == "");
}

TEST_CASE("cuda decode: rows of 2^24 elements, and one past it (a short last chunk)", "[cuda]") {
    CudaHandle handle;
    const std::int64_t two_24 = std::int64_t{1} << 24;
    check_random_rows(handle.get(), SMX_DTYPE_F32, SMX_DTYPE_F32, 1, two_24, false);
    check_random_rows(handle.get(), SMX_DTYPE_BF16, SMX_DTYPE_BF16, 1, two_24, true);
    check_random_rows(handle.get(), SMX_DTYPE_F32, SMX_DTYPE_F32, 1, two_24 + 1, true);
    check_random_rows(handle.get(), SMX_DTYPE_F16, SMX_DTYPE_F32, 2, two_24 + 1, false);
}

TEST_CASE("cuda decode: a constant row gives exactly uniform output within 1 ulp", "[cuda]") {
    CudaHandle handle;
    // Each plan on every length it can take: a cluster per row holds 128256, grid-regs two rows of up to
    // 2^20, split-row all of them.
    for (const char* forced : {"cluster", "grid", "split"}) {
        const ScopedLongRowsOverride override_rule(forced);
        const std::string expected_kind = std::string(forced) == "cluster" ? "block-regs"
                                          : std::string(forced) == "grid"  ? "grid-regs"
                                                                           : "split-row";
        for (std::int64_t row_len : {std::int64_t{128256}, std::int64_t{1048576}, std::int64_t{1} << 24}) {
            if (expected_kind == "block-regs" && row_len > 128256) continue;
            if (expected_kind == "grid-regs" && row_len > 1048576) continue;
            for (smxDataType_t x_dtype : {SMX_DTYPE_F32, SMX_DTYPE_BF16}) {
                HostTensor x = make_tensor(x_dtype, {2, row_len});
                for (std::int64_t j = 0; j < 2 * row_len; ++j) x.set(j, j < row_len ? 0.75 : -3.5);
                std::string plan;
                const HostTensor y = run_decode(handle.get(), x, SMX_DTYPE_F32, false, &plan);
                const UniformError error = uniform_error(y, row_len, 2 * row_len);
                INFO("n " << row_len << " x " << dtype_name(x_dtype) << " | plan: " << plan << " | worst |y - 1/n| "
                          << error.worst << " ulp " << error.ulp);
                CHECK(kernel_kind(plan) == expected_kind);
                CHECK(error.worst <= error.ulp);
            }
        }
    }
}

TEST_CASE("cuda decode: special values in one chunk decide their whole row", "[cuda]") {
    CudaHandle handle;
    const std::int64_t row_len = 300001;  // fits a cluster: force the two plans that cut rows into chunks
    const double inf = std::numeric_limits<double>::infinity();
    // f32 statistics fold values chunk by chunk; 16-bit ones take a step's max with NaN dropped, then rely
    // on the exp sum to carry it (add_step), or on a check of their own where everything before the NaN and
    // beside it is -inf (row 5): both must give the reference's rows.
    const DtypePair pairs[] = {{SMX_DTYPE_F32, SMX_DTYPE_F32}, {SMX_DTYPE_BF16, SMX_DTYPE_F32},
                               {SMX_DTYPE_F16, SMX_DTYPE_F16}};
    for (const char* forced : {"split", "grid"}) {
        const ScopedLongRowsOverride override_rule(forced);
        const std::string expected_kind = std::string(forced) == "grid" ? "grid-regs" : "split-row";
        for (const DtypePair& pair : pairs) {
            for (bool log_mode : {false, true}) {
                HostTensor x = make_tensor(pair.x, {6, row_len});
                HostTensor y = make_tensor(pair.y, {6, row_len});
                fill_random(x, test_rng());
                x.set(0 * row_len + 150000, std::numeric_limits<double>::quiet_NaN());  // NaN: row of NaN
                x.set(1 * row_len + row_len - 1, inf);                                  // +inf: row of NaN
                for (std::int64_t j = 0; j < row_len; ++j) x.set(2 * row_len + j, -inf);  // all -inf: NaN
                for (std::int64_t j = 0; j < row_len; j += 3) x.set(3 * row_len + j, -inf);  // among finite: 0
                for (std::int64_t j = 0; j < 200000; ++j) x.set(4 * row_len + j, -inf);  // whole chunks of -inf
                for (std::int64_t j = 0; j < 200000; ++j) x.set(5 * row_len + j, -inf);  // and a NaN among them:
                x.set(5 * row_len + 100, std::numeric_limits<double>::quiet_NaN());       // a row of NaN
                std::string plan;
                const std::string mismatch = check_on_device(handle.get(), y, x, 1, log_mode, &plan);
                INFO(describe_case(y, x, 1, log_mode) << " | plan: " << plan);
                CHECK(kernel_kind(plan) == expected_kind);
                CHECK(mismatch == "");
            }
        }
    }
}

TEST_CASE("cuda decode: a row's output does not depend on the row count or the run", "[cuda]") {
    CudaHandle handle;
    const std::int64_t row_len = 256000;
    // Every plan splits a row by its length only.
    for (const char* forced : {"cluster", "grid", "split"}) {
        const ScopedLongRowsOverride override_rule(forced);
        const std::string expected_kind = std::string(forced) == "cluster" ? "block-regs"
                                          : std::string(forced) == "grid"  ? "grid-regs"
                                                                           : "split-row";
        for (smxDataType_t dtype : {SMX_DTYPE_F32, SMX_DTYPE_BF16}) {
            HostTensor many = make_tensor(dtype, {8, row_len});
            fill_random(many, test_rng());
            HostTensor one = make_tensor(dtype, {1, row_len});
            std::memcpy(one.data(), many.data(), static_cast<std::size_t>(row_len) * dtype_size(dtype));
            std::string plan_one, plan_many, plan_again;
            const HostTensor y_one = run_decode(handle.get(), one, dtype, true, &plan_one);
            const HostTensor y_many = run_decode(handle.get(), many, dtype, true, &plan_many);
            const HostTensor y_again = run_decode(handle.get(), many, dtype, true, &plan_again);
            INFO(plan_one << " | " << plan_many);
            CHECK(kernel_kind(plan_one) == expected_kind);
            CHECK(kernel_kind(plan_many) == expected_kind);
            const std::size_t row_bytes = static_cast<std::size_t>(row_len) * dtype_size(dtype);
            CHECK(std::memcmp(y_one.data(), y_many.data(), row_bytes) == 0);
            CHECK(std::memcmp(y_many.data(), y_again.data(), y_many.storage.size()) == 0);
        }
    }
}

TEST_CASE("cuda decode: in place, misaligned base pointer and odd row strides", "[cuda][sanitize]") {
    CudaHandle handle;
    for (const char* forced : {"split", "grid"}) {  // these rows fit a cluster: force the chunked plans
    const ScopedLongRowsOverride override_rule(forced);
    const std::string expected_kind = std::string(forced) == "grid" ? "grid-regs" : "split-row";
    for (bool log_mode : {false, true}) {
        // In place, rows whose starts have every 16-byte phase (row length not a multiple of the pack).
        HostTensor data = make_tensor(SMX_DTYPE_BF16, {3, 100003});
        fill_random(data, test_rng());
        std::string plan;
        std::string mismatch = check_in_place_on_device(handle.get(), data, 1, log_mode, &plan);
        INFO("in place bf16 [3,100003] | plan: " << plan);
        CHECK(kernel_kind(plan) == expected_kind);
        CHECK(mismatch == "");

        // Base pointers one element past a 16-byte boundary, x and y at different phases.
        HostTensor x = make_tensor(SMX_DTYPE_F32, {2, 65600}, {}, 1);
        HostTensor y = make_tensor(SMX_DTYPE_F16, {2, 65600}, {}, 3);
        fill_random(x, test_rng());
        mismatch = check_on_device(handle.get(), y, x, 1, log_mode, &plan);
        INFO(describe_case(y, x, 1, log_mode) << " | plan: " << plan);
        CHECK(kernel_kind(plan) == expected_kind);
        CHECK(mismatch == "");

        // A padded row stride, and f64.
        HostTensor padded = make_tensor(SMX_DTYPE_F64, {2, 40000}, {40007, 1});
        HostTensor padded_y = make_tensor(SMX_DTYPE_F64, {2, 40000}, {40003, 1});
        fill_random(padded, test_rng());
        mismatch = check_on_device(handle.get(), padded_y, padded, 1, log_mode, &plan);
        INFO(describe_case(padded_y, padded, 1, log_mode) << " | plan: " << plan);
        CHECK(kernel_kind(plan) == expected_kind);
        CHECK(mismatch == "");
    }
    }
}

TEST_CASE("cuda decode: the chunked plans captured in a CUDA graph replay on new data", "[cuda][sanitize]") {
    CudaHandle handle;
    // 2 x 128256 fits clusters: force split-row (two kernels) and grid-regs (a cooperative launch).
    for (const char* forced : {"split", "grid"}) {
    const ScopedLongRowsOverride override_rule(forced);
    const std::int64_t rows = 2, row_len = 128256;
    for (bool log_mode : {false, true}) {
        HostTensor x = make_tensor(SMX_DTYPE_F32, {rows, row_len});
        HostTensor y = make_tensor(SMX_DTYPE_BF16, {rows, row_len});
        TensorDesc x_desc(x), y_desc(y);
        SoftmaxDesc desc(handle.get(), log_mode ? SMX_LOG_SOFTMAX : SMX_SOFTMAX, 1, y_desc.desc, x_desc.desc);
        SMX_REQUIRE_OK(desc.status);
        std::size_t workspace_bytes = 0;
        SMX_REQUIRE_OK(smxGetSoftmaxWorkspaceSize(desc.desc, &workspace_bytes));
        CHECK(workspace_bytes > 0);
        DeviceBuffer workspace(workspace_bytes);
        DeviceTensor x_device(x), y_device(y);
        DeviceStream stream;
        cudaGraph_t graph = nullptr;
        SMX_REQUIRE_CUDA(cudaStreamBeginCapture(stream.get(), cudaStreamCaptureModeGlobal));
        const smxStatus_t forward = smxSoftmaxForward(desc.desc, workspace.get(), workspace_bytes, y_device.data(),
                                                      x_device.data(), stream.get());
        const std::string forward_error = forward == SMX_STATUS_SUCCESS ? "" : smxGetLastErrorMessage();
        const cudaError_t end = cudaStreamEndCapture(stream.get(), &graph);
        INFO(forward_error);
        REQUIRE(forward == SMX_STATUS_SUCCESS);
        SMX_REQUIRE_CUDA(end);
        cudaGraphExec_t instance = nullptr;
        const cudaError_t instantiated = cudaGraphInstantiate(&instance, graph, 0);
        cudaGraphDestroy(graph);
        SMX_REQUIRE_CUDA(instantiated);
        for (int replay = 0; replay < 2; ++replay) {
            fill_random(x, test_rng());
            x_device.upload(x);
            y_device.poison();
            const cudaError_t launched = cudaGraphLaunch(instance, stream.get());
            const cudaError_t synced = launched == cudaSuccess ? cudaStreamSynchronize(stream.get()) : launched;
            if (synced != cudaSuccess) cudaGraphExecDestroy(instance);
            SMX_REQUIRE_CUDA(synced);
            y_device.download(y);
            INFO("replay " << replay);
            CHECK(compare_to_reference(y, reference_softmax(x, 1, log_mode), log_mode) == "");
        }
        cudaGraphExecDestroy(instance);
    }
    }
}

TEST_CASE("cuda decode: workspace is rows x chunks x 2 compute values", "[cuda]") {
    CudaHandle handle;
    struct Case {
        const char* forced;
        smxDataType_t dtype;
        std::int64_t rows, row_len;
        std::size_t bytes;
    };
    // split-row chunk = clamp(pow2ceil(n / 256), 8192, 65536): 1 x 128256 -> 16 chunks; 4 x 4194304 ->
    // 16384, 256 chunks per row; 3 x 40000 -> 8192, 5 chunks (f64 partials are doubles). grid-regs: about
    // 16 KiB of x per CTA, doubled while a row needs more than 64 CTAs (to 16384 elements): 1 x 128256
    // f32 -> 32 CTAs; 2 x 1048576 bf16 -> 16384 elements, 64 per row; 3 x 40000 f64 -> 20; grid-regs-steps
    // as grid-regs, for every row: 4 x 4194304 -> 256 per row.
    // A cluster per row needs none.
    const Case cases[] = {{"split", SMX_DTYPE_F32, 1, 128256, 16 * 2 * 4},
                          {"split", SMX_DTYPE_BF16, 4, 4194304, 4 * 256 * 2 * 4},
                          {"split", SMX_DTYPE_F64, 3, 40000, 3 * 5 * 2 * 8},
                          {"grid", SMX_DTYPE_F32, 1, 128256, 32 * 2 * 4},
                          {"grid", SMX_DTYPE_BF16, 2, 1048576, 2 * 64 * 2 * 4},
                          {"grid", SMX_DTYPE_F64, 3, 40000, 3 * 20 * 2 * 8},
                          {"steps", SMX_DTYPE_F32, 4, 4194304, 4 * 256 * 2 * 4},
                          {"cluster", SMX_DTYPE_F32, 1, 128256, 0}};
    for (const Case& c : cases) {
        const ScopedLongRowsOverride override_rule(c.forced);
        TensorDesc x_desc(c.dtype, {c.rows, c.row_len}, {c.row_len, 1});
        SoftmaxDesc desc(handle.get(), SMX_SOFTMAX, 1, x_desc.desc, x_desc.desc);
        SMX_REQUIRE_OK(desc.status);
        std::size_t workspace_bytes = 0;
        SMX_REQUIRE_OK(smxGetSoftmaxWorkspaceSize(desc.desc, &workspace_bytes));
        const char* plan = nullptr;
        SMX_REQUIRE_OK(smxGetSoftmaxPlan(desc.desc, &plan));
        INFO(c.forced << " " << dtype_name(c.dtype) << " " << c.rows << " x " << c.row_len << " | plan: " << plan);
        CHECK(workspace_bytes == c.bytes);
    }
}

#endif  // SMX_TEST_WITH_CUDA
