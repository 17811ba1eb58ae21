// [cuda] contiguous rows: every plan class through row lengths around dispatch boundaries, every dtype
// pair, long rows summing to 1, and bitwise determinism.
#if SMX_TEST_WITH_CUDA

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>
#include <memory>
#include <set>

#include "cuda_helpers.hpp"

using namespace smx_test;

namespace {

// Row lengths at and around the sizes where a dispatcher is likely to switch kernel, pack width or
// threads per row: powers of two, warp and block multiples, shared-memory limits, vocabulary sizes.
const std::vector<std::int64_t> kBoundaryRowLengths = {
    1,    2,    3,    7,    8,    31,   32,    33,    63,    64,    65,    127,   128,    129,
    255,  256,  257,  511,  512,  513,  1023,  1024,  1025,  2047,  2048,  2049,  4095,   4096,
    4097, 8191, 8193, 16383, 16385, 32000, 32769, 50257, 65537, 100003, 131073, 262145, 524289};

// Runs one (rows, n) case, checks it, and records its plan text.
void check_rows_case(smxHandle_t handle, smxDataType_t x_dtype, smxDataType_t y_dtype, std::int64_t rows,
                     std::int64_t row_len, bool log_mode, std::set<std::string>* plans) {
    const std::string plan = check_random_rows(handle, x_dtype, y_dtype, rows, row_len, log_mode);
    INFO("plan: " << plan);
    CHECK(kernel_kind(plan) != "");
    if (plans != nullptr) plans->insert(plan);
}

}  // namespace

TEST_CASE("cuda rows: row lengths around dispatch boundaries match the reference and use several kernels",
          "[cuda]") {
    CudaHandle handle;
    const std::int64_t many_rows_budget = std::int64_t{1} << 20;  // elements per "many rows" case
    const std::int64_t busy_rows = 2 * multiprocessor_count();  // long rows with every SM busy
    std::set<std::string> plans;
    for (std::int64_t row_len : kBoundaryRowLengths) {
        // Few rows (the decode shape, where long rows may be split across blocks) in both modes and two
        // element sizes (pack widths differ), then many rows.
        for (bool log_mode : {false, true}) {
            check_rows_case(handle.get(), SMX_DTYPE_F32, SMX_DTYPE_F32, 3, row_len, log_mode, &plans);
            check_rows_case(handle.get(), SMX_DTYPE_F16, SMX_DTYPE_F16, 3, row_len, log_mode, &plans);
        }
        const std::int64_t many_rows = std::max<std::int64_t>(2, many_rows_budget / row_len);
        check_rows_case(handle.get(), SMX_DTYPE_F32, SMX_DTYPE_F32, many_rows, row_len, false, &plans);
        check_rows_case(handle.get(), SMX_DTYPE_BF16, SMX_DTYPE_BF16, many_rows + 1, row_len, true, &plans);
    }
    // Long rows, many of them: the block-per-row regime rather than the split-row one.
    for (std::int64_t row_len : {std::int64_t{8193}, std::int64_t{32769}, std::int64_t{50257}}) {
        check_rows_case(handle.get(), SMX_DTYPE_F32, SMX_DTYPE_F32, busy_rows, row_len, false, &plans);
    }

    std::set<std::string> kinds;
    bool saw_multi_cta_cluster = false;
    std::string seen;
    for (const std::string& plan : plans) {
        kinds.insert(kernel_kind(plan));
        if (plan.find("cluster=1 ") == std::string::npos && plan.find("cluster=") != std::string::npos) {
            saw_multi_cta_cluster = true;
        }
        seen += "\n  " + plan;
    }
    INFO("distinct plans seen:" << seen);
    // Each contiguous-row class this sweep is built to reach (block-online needs rows too long for any
    // cluster in large numbers and has its own test below).
    CHECK(kinds.count("warp") == 1);
    CHECK(kinds.count("block-regs") == 1);
    CHECK(kinds.count("grid-regs") == 1);  // few long rows (split-row has its own tests: test_cuda_decode)
    CHECK(saw_multi_cta_cluster);
}

TEST_CASE("cuda rows: every dtype pair in both modes matches the reference", "[cuda]") {
    CudaHandle handle;
    struct Shape {
        std::int64_t rows, row_len;
    };
    // 7, 16 and 32 columns: 16-bit x on one, two and four lanes per row, row counts that end in a partial
    // warp.
    const Shape shapes[] = {{33, 7}, {35, 16}, {29, 32}, {37, 1000}, {3, 50000}, {2, 131073}};
    const smxDataType_t float_types[] = {SMX_DTYPE_F16, SMX_DTYPE_BF16, SMX_DTYPE_F32};
    for (const Shape& shape : shapes) {
        for (bool log_mode : {false, true}) {
            for (smxDataType_t x_dtype : float_types) {
                for (smxDataType_t y_dtype : float_types) {
                    check_rows_case(handle.get(), x_dtype, y_dtype, shape.rows, shape.row_len, log_mode, nullptr);
                }
            }
            check_rows_case(handle.get(), SMX_DTYPE_F64, SMX_DTYPE_F64, shape.rows, shape.row_len, log_mode, nullptr);
        }
    }
}

TEST_CASE("cuda rows: narrow warp rows take one row per thread, two for f32 x written narrower and f64, or two packs",
          "[cuda]") {
    CudaHandle handle;
    // Row lengths on 1, 2, 4, 8 and 16 lanes (16-bit x: 8 per lane, f32: 4, f64: 2) and one on 32 lanes, with
    // row counts that leave the last CTA and warp partly empty. f32 x rows of 17..128, 16-bit -> 16-bit
    // rows of 17..32 and 129..256 and 16-bit -> f32 rows of 129..256 take two packs per lane instead (one
    // row per thread on half the lanes).
    const std::int64_t row_lengths[] = {5, 8, 9, 16, 30, 64, 100, 200, 256};
    const smxDataType_t float_types[] = {SMX_DTYPE_F16, SMX_DTYPE_BF16, SMX_DTYPE_F32};
    const auto two_packs = [](smxDataType_t x_dtype, smxDataType_t y_dtype, std::int64_t row_len) {
        if (x_dtype == SMX_DTYPE_F32) return row_len > 16 && row_len <= 128;
        if (dtype_size(x_dtype) != 2) return false;
        const bool sixteen_bit_y = dtype_size(y_dtype) == 2;
        return (sixteen_bit_y && row_len > 16 && row_len <= 32) || (row_len > 128 && row_len <= 256);
    };
    const auto expected_rows_per_thread = [&](smxDataType_t x_dtype, smxDataType_t y_dtype, std::int64_t row_len) {
        const int per_lane = x_dtype == SMX_DTYPE_F64 ? 2 : x_dtype == SMX_DTYPE_F32 ? 4 : 8;
        if (two_packs(x_dtype, y_dtype, row_len)) return 1;
        if (row_len > 16 * per_lane) return row_len <= 32 * per_lane ? 2 : 1;  // 32 lanes
        if (x_dtype == SMX_DTYPE_F64 || (x_dtype == SMX_DTYPE_F32 && y_dtype != SMX_DTYPE_F32)) return 2;
        return 1;
    };
    const auto check_pair = [&](smxDataType_t x_dtype, smxDataType_t y_dtype) {
        for (std::int64_t row_len : row_lengths) {
            const std::int64_t rows = 3001 + row_len;
            const std::string plan = check_random_rows(handle.get(), x_dtype, y_dtype, rows, row_len, row_len % 2 == 0);
            INFO("plan: " << plan);
            REQUIRE(kernel_kind(plan) == "warp");
            CHECK(plan_value(plan, "rows_per_thread") == expected_rows_per_thread(x_dtype, y_dtype, row_len));
            CHECK(plan_value(plan, "offsets") == 32);  // a few thousand contiguous rows: 32-bit indexing
            if (plan_value(plan, "lanes") < 32) {
                const int pack = 16 / static_cast<int>(dtype_size(x_dtype));
                const int packs = two_packs(x_dtype, y_dtype, row_len) ? 2 : 1;
                CHECK(plan_value(plan, "cols_per_lane") == packs * pack);
            }
        }
    };
    for (smxDataType_t x_dtype : float_types) {
        for (smxDataType_t y_dtype : float_types) check_pair(x_dtype, y_dtype);
    }
    check_pair(SMX_DTYPE_F64, SMX_DTYPE_F64);
}

TEST_CASE("cuda rows: warp shapes on 32 lanes or of two packs per lane launch 64-thread CTAs, the rest 128",
          "[cuda]") {
    CudaHandle handle;
    struct Case {
        smxDataType_t x_dtype, y_dtype;
        std::int64_t row_len;
        int threads;
    };
    const Case cases[] = {
        {SMX_DTYPE_BF16, SMX_DTYPE_F32, 32, 128},   {SMX_DTYPE_BF16, SMX_DTYPE_BF16, 128, 128},  // narrow
        {SMX_DTYPE_BF16, SMX_DTYPE_BF16, 32, 64},   {SMX_DTYPE_F16, SMX_DTYPE_F16, 200, 64},     // two packs
        {SMX_DTYPE_F16, SMX_DTYPE_F32, 200, 64},    {SMX_DTYPE_BF16, SMX_DTYPE_BF16, 512, 64},   // 8, 16 values
        {SMX_DTYPE_F16, SMX_DTYPE_F16, 1000, 64},   {SMX_DTYPE_F32, SMX_DTYPE_F32, 16, 128},     // 32 values; narrow
        {SMX_DTYPE_F32, SMX_DTYPE_BF16, 16, 128},   {SMX_DTYPE_F32, SMX_DTYPE_F32, 32, 64},      // narrow; two packs
        {SMX_DTYPE_F32, SMX_DTYPE_BF16, 128, 64},   {SMX_DTYPE_F32, SMX_DTYPE_BF16, 512, 64},    // two packs; 16
        {SMX_DTYPE_F32, SMX_DTYPE_F32, 700, 64},    {SMX_DTYPE_F64, SMX_DTYPE_F64, 64, 64},      // 24; 2 x 2 rows
        {SMX_DTYPE_F64, SMX_DTYPE_F64, 1024, 64},   {SMX_DTYPE_BF16, SMX_DTYPE_F32, 1024, 64},   // 32 values
    };
    for (const Case& c : cases) {
        // A last CTA and warp partly empty; both modes against the reference at the rule's CTA size.
        const std::int64_t rows = 1001;
        const std::string plan = check_random_rows(handle.get(), c.x_dtype, c.y_dtype, rows, c.row_len, c.row_len % 2 == 0);
        INFO("plan: " << plan);
        REQUIRE(kernel_kind(plan) == "warp");
        CHECK(plan_value(plan, "threads") == c.threads);
        CHECK(plan_value(plan, "grid") * plan_value(plan, "threads") / 32 * 32 / plan_value(plan, "lanes") *
                  plan_value(plan, "rows_per_thread") >= rows);
    }
}

TEST_CASE("cuda rows: 16-bit x written as f32 by lane pairs: whole pairs, a pair cut by the row's end, unaligned y",
          "[cuda][sanitize]") {
    // The warp kernel stores a 16-bit x pack's 32 bytes of f32 y with its partner lane (store_pack_paired).
    // Row lengths where every pair is whole (32, 128, and 200 on two packs a lane), where the row ends inside
    // a pair's second pack (28, 76) or inside or at the end of its first (20, 1000); a partial last warp; then
    // y or x off their 16-byte alignment or with an odd row stride (y: each lane stores its own elements).
    // The contiguous rows run in both index widths: SMX_CUDA_WARP_OFFSETS=64 takes the 64-bit body, which
    // shapes of up to 16 values a thread otherwise reach only past 2^31 elements.
    CudaHandle handle;
    for (bool force_64_bits : {false, true}) {
        std::unique_ptr<ScopedEnvironment> index_width;
        if (force_64_bits) index_width = std::make_unique<ScopedEnvironment>("SMX_CUDA_WARP_OFFSETS", "64");
        for (smxDataType_t x_dtype : {SMX_DTYPE_BF16, SMX_DTYPE_F16}) {
            for (std::int64_t row_len : {20, 28, 32, 76, 128, 200, 1000}) {
                for (bool log_mode : {false, true}) {
                    const std::string plan =
                        check_random_rows(handle.get(), x_dtype, SMX_DTYPE_F32, 517, row_len, log_mode);
                    INFO("plan: " << plan);
                    REQUIRE(kernel_kind(plan) == "warp");
                    const bool wide_shape = plan_value(plan, "cols_per_lane") > 16;  // the 64-bit body only
                    CHECK(plan_value(plan, "offsets") == (force_64_bits || wide_shape ? 64 : 32));
                }
            }
        }
    }
    struct Layout {
        std::int64_t x_front, y_front, x_stride, y_stride;
    };
    const Layout layouts[] = {{0, 1, 64, 64}, {1, 0, 64, 64}, {0, 0, 64, 67}, {3, 0, 65, 64}};
    for (const Layout& layout : layouts) {
        for (bool log_mode : {false, true}) {
            HostTensor x = make_tensor(SMX_DTYPE_BF16, {131, 64}, {layout.x_stride, 1}, layout.x_front);
            HostTensor y = make_tensor(SMX_DTYPE_F32, {131, 64}, {layout.y_stride, 1}, layout.y_front);
            fill_random(x, test_rng());
            std::string plan;
            const std::string mismatch = check_on_device(handle.get(), y, x, 1, log_mode, &plan);
            INFO(describe_case(y, x, 1, log_mode) << " | plan: " << plan);
            CHECK(kernel_kind(plan) == "warp");
            CHECK(mismatch == "");
        }
    }
}

TEST_CASE("cuda rows: block-regs instances of up to 32 values take CTAs from 64 threads, the packed one from 128",
          "[cuda]") {
    CudaHandle handle;
    struct Case {
        smxDataType_t x_dtype, y_dtype;
        std::int64_t row_len;
        int values, threads;
    };
    // Rows of 2048 take 32 values x 64 threads; shorter ones the CTA that wastes fewest register slots
    // (1500: 96 threads of 16 values); 16-bit rows of 4096 would take the packed instance at 64 threads
    // if it were allowed them, and keep 32 values x 128; f64 has no 32-value instance.
    const Case cases[] = {
        {SMX_DTYPE_F32, SMX_DTYPE_F32, 2048, 32, 64},    {SMX_DTYPE_BF16, SMX_DTYPE_BF16, 2048, 32, 64},
        {SMX_DTYPE_F16, SMX_DTYPE_F32, 2047, 32, 64},    {SMX_DTYPE_F32, SMX_DTYPE_BF16, 1500, 16, 96},
        {SMX_DTYPE_F16, SMX_DTYPE_F16, 4096, 32, 128},   {SMX_DTYPE_F32, SMX_DTYPE_F32, 4096, 32, 128},
        {SMX_DTYPE_F64, SMX_DTYPE_F64, 1500, 16, 96},
    };
    for (const Case& c : cases) {
        // 67 rows, both modes across the cases, odd lengths misaligned after the first row.
        const std::string plan = check_random_rows(handle.get(), c.x_dtype, c.y_dtype, 67, c.row_len, c.row_len % 2 == 1);
        INFO("plan: " << plan);
        REQUIRE(kernel_kind(plan) == "block-regs");
        CHECK(plan_value(plan, "values") == c.values);
        CHECK(plan_value(plan, "threads") == c.threads);
        CHECK(plan_value(plan, "cluster") == 1);
    }
}

TEST_CASE("cuda rows: 8- and 16-value instances never run in clusters where a 32-value one exists", "[cuda]") {
    CudaHandle handle;
    // Enough rows that no few-long-rows plan takes them. Rows of 16400 once took 16 values x 544 threads in
    // clusters of 2 for every pair, far slower (performance.md#block-regs); f64 has no 32-value instance and
    // may still cluster 16.
    const std::int64_t rows = 2 * multiprocessor_count() + 1;
    const smxDataType_t pairs[][2] = {{SMX_DTYPE_F32, SMX_DTYPE_F32},
                                      {SMX_DTYPE_F32, SMX_DTYPE_BF16},
                                      {SMX_DTYPE_BF16, SMX_DTYPE_F32},
                                      {SMX_DTYPE_F16, SMX_DTYPE_F16},
                                      {SMX_DTYPE_F64, SMX_DTYPE_F64}};
    for (const auto& pair : pairs) {
        const std::string plan = check_random_rows(handle.get(), pair[0], pair[1], rows, 16400, true);
        INFO("plan: " << plan);
        REQUIRE(kernel_kind(plan) == "block-regs");
        if (pair[0] != SMX_DTYPE_F64) CHECK((plan_value(plan, "cluster") == 1 || plan_value(plan, "values") >= 32));
    }
}

namespace {

// A rows case for the block-regs plan rules below.
struct BlockRegsRows {
    smxDataType_t x_dtype, y_dtype;
    std::int64_t row_len;
    bool log_mode;
};

// Checks the case against the reference with enough rows that no few-long-rows plan takes it, and returns its
// plan, which must be block-regs'.
std::string block_regs_plan(smxHandle_t handle, const BlockRegsRows& c) {
    const std::int64_t rows = 2 * multiprocessor_count() + 1;
    const std::string plan = check_random_rows(handle, c.x_dtype, c.y_dtype, rows, c.row_len, c.log_mode);
    INFO("plan: " << plan);
    REQUIRE(kernel_kind(plan) == "block-regs");
    return plan;
}

}  // namespace

TEST_CASE("cuda rows: packed 16-bit -> 16-bit rows leave clusters of CTAs that fit 2 per SM for 4 or more",
          "[cuda]") {
    CudaHandle handle;
    // 16 -> 16 rows whose packed CTAs would fit 2 per SM take smaller CTAs in a larger cluster
    // (performance.md#block-regs-packed-clusters-of-4-ctas-per-sm).
    const BlockRegsRows packed[] = {{SMX_DTYPE_BF16, SMX_DTYPE_BF16, 50257, false},
                                    {SMX_DTYPE_F16, SMX_DTYPE_F16, 128256, true},
                                    {SMX_DTYPE_BF16, SMX_DTYPE_BF16, 32000, true}};
    for (const BlockRegsRows& c : packed) {
        const std::string plan = block_regs_plan(handle.get(), c);
        INFO("plan: " << plan);
        CHECK(plan_value(plan, "values") == 64);
        CHECK(plan_value(plan, "ctas_per_sm") >= 4);
        CHECK(plan_value(plan, "cluster") > 1);
    }
    // 16-bit x written as f32 (the same instance) keeps them.
    const std::string plan = block_regs_plan(handle.get(), {SMX_DTYPE_BF16, SMX_DTYPE_F32, 50257, false});
    INFO("plan: " << plan);
    CHECK(plan_value(plan, "values") == 64);
    CHECK(plan_value(plan, "ctas_per_sm") == 2);
}

TEST_CASE("cuda rows: a packed 16-bit -> 16-bit row one CTA holds at 4 per SM splits into a pair that fits 8",
          "[cuda]") {
    CudaHandle handle;
    // Rows of 15565-16384 elements: one CTA of 256 threads (4 per SM) -> two of 128 (8 per SM)
    // (performance.md#block-regs-a-packed-pair-at-8-per-sm). 16383 leaves every row after the first off its
    // 16-byte phase.
    const BlockRegsRows pairs[] = {{SMX_DTYPE_BF16, SMX_DTYPE_BF16, 16384, false},
                                   {SMX_DTYPE_F16, SMX_DTYPE_F16, 16383, true},
                                   {SMX_DTYPE_BF16, SMX_DTYPE_BF16, 15600, true}};
    for (const BlockRegsRows& c : pairs) {
        const std::string plan = block_regs_plan(handle.get(), c);
        INFO("plan: " << plan);
        CHECK(plan_value(plan, "values") == 64);
        CHECK(plan_value(plan, "threads") == 128);
        CHECK(plan_value(plan, "cluster") == 2);
        CHECK(plan_value(plan, "ctas_per_sm") >= 8);
    }
    // A pair of 128-thread CTAs would be under 95% full at 14336 (one packed CTA of 224): the one CTA stays;
    // so does a row of 8192, whose one CTA of 128 fits 8 already. (At 15000 the rule's one CTA is the
    // 32-value instance's, 480 threads, which fills its slots better; this rule does not see it.)
    const BlockRegsRows singles[] = {{SMX_DTYPE_BF16, SMX_DTYPE_BF16, 14336, false},
                                     {SMX_DTYPE_F16, SMX_DTYPE_F16, 8192, true}};
    for (const BlockRegsRows& c : singles) {
        const std::string plan = block_regs_plan(handle.get(), c);
        INFO("plan: " << plan);
        CHECK(plan_value(plan, "values") == 64);
        CHECK(plan_value(plan, "cluster") == 1);
    }
}

TEST_CASE("cuda rows: f32 rows whose CTAs would fit fewer than 8 per SM take clusters of smaller ones",
          "[cuda]") {
    CudaHandle handle;
    // One CTA of 512 (rows of 16384) or clusters of 4 x 416 (50257, misaligned after the first row) fit 2 per
    // SM; clusters of 4 or 13 CTAs of 128 threads x 32 values fit 8 with their slots over 90% full
    // (performance.md#block-regs-f32-clusters-of-8-per-sm-ctas).
    const BlockRegsRows smaller[] = {{SMX_DTYPE_F32, SMX_DTYPE_F32, 16384, false},
                                     {SMX_DTYPE_F32, SMX_DTYPE_F32, 50257, true},
                                     {SMX_DTYPE_F32, SMX_DTYPE_BF16, 50257, false},
                                     {SMX_DTYPE_F32, SMX_DTYPE_F16, 16384, true}};
    for (const BlockRegsRows& c : smaller) {
        const std::string plan = block_regs_plan(handle.get(), c);
        INFO("plan: " << plan);
        CHECK(plan_value(plan, "values") == 32);
        CHECK(plan_value(plan, "threads") == 128);
        CHECK(plan_value(plan, "ctas_per_sm") >= 8);
        CHECK(plan_value(plan, "cluster") > 1);
    }
    // 16-bit x written as f32 keeps its one CTA of 512 at rows of 16384 (more CTAs per SM only by its
    // 64-value instance, which lost, or by 32-value CTAs in clusters, which lost more).
    const std::string widened = block_regs_plan(handle.get(), {SMX_DTYPE_BF16, SMX_DTYPE_F32, 16384, true});
    INFO("plan: " << widened);
    CHECK(plan_value(widened, "values") == 32);
    CHECK(plan_value(widened, "cluster") == 1);
}

TEST_CASE("cuda rows: f32 rows no cluster of 8-per-SM CTAs holds take CTAs that fit 4 where a cluster of them does",
          "[cuda]") {
    CudaHandle handle;
    // Past 16 x 128 x 32 = 65536 elements no cluster of 128-thread CTAs holds the row (the search at 8 per SM
    // would fall back to CTAs that fit 1, far slower); up to 16 x 256 x 32 = 131072 a cluster of 256-thread
    // CTAs that fit 4 does, and is faster (performance.md#block-regs-f32-clusters-of-4-per-sm-ctas).
    const BlockRegsRows fours[] = {{SMX_DTYPE_F32, SMX_DTYPE_F32, 128256, false},
                                   {SMX_DTYPE_F32, SMX_DTYPE_BF16, 100001, true}};
    for (const BlockRegsRows& c : fours) {
        const std::string plan = block_regs_plan(handle.get(), c);
        INFO("plan: " << plan);
        CHECK(plan_value(plan, "values") == 32);
        CHECK(plan_value(plan, "threads") == 256);
        CHECK(plan_value(plan, "ctas_per_sm") >= 4);
        CHECK(plan_value(plan, "cluster") > 8);
    }
    // Past 131072 none does: the rule's CTAs of 512, 2 per SM, stay.
    const std::string longer = block_regs_plan(handle.get(), {SMX_DTYPE_F32, SMX_DTYPE_F32, 140000, false});
    INFO("plan: " << longer);
    CHECK(plan_value(longer, "threads") == 512);
    CHECK(plan_value(longer, "ctas_per_sm") >= 2);
    CHECK(plan_value(longer, "ctas_per_sm") < 4);
}

TEST_CASE("cuda rows: SMX_CUDA_MAX_CLUSTER keeps block-regs clusters within the portable 8", "[cuda]") {
    CudaHandle handle;
    // The GPU suite's synccheck stage sets it (the tool mis-tracks mbarriers past 8 CTAs): f32 rows that
    // would take 13 or 16 CTAs of 128 threads, or 16 of 256, take clusters of at most 8 larger ones.
    const ScopedEnvironment cap("SMX_CUDA_MAX_CLUSTER", "8");
    for (std::int64_t row_len : {std::int64_t{50257}, std::int64_t{65536}, std::int64_t{128256}}) {
        const std::string plan = block_regs_plan(handle.get(), {SMX_DTYPE_F32, SMX_DTYPE_F32, row_len, false});
        INFO("plan: " << plan);
        CHECK(plan_value(plan, "cluster") > 1);
        CHECK(plan_value(plan, "cluster") <= 8);
    }
}

TEST_CASE("cuda rows: a representative subset of plan classes and dtype pairs", "[cuda][sanitize]") {
    CudaHandle handle;
    struct Case {
        smxDataType_t x_dtype, y_dtype;
        std::int64_t rows, row_len;
    };
    const Case cases[] = {
        {SMX_DTYPE_F32, SMX_DTYPE_F32, 67, 1},      {SMX_DTYPE_F32, SMX_DTYPE_F32, 129, 7},
        {SMX_DTYPE_F16, SMX_DTYPE_F32, 65, 33},     {SMX_DTYPE_F32, SMX_DTYPE_F32, 33, 1025},
        {SMX_DTYPE_BF16, SMX_DTYPE_BF16, 9, 4097},  {SMX_DTYPE_F32, SMX_DTYPE_F16, 5, 32769},
        {SMX_DTYPE_F32, SMX_DTYPE_F32, 2, 262145},  {SMX_DTYPE_F64, SMX_DTYPE_F64, 5, 3001},
        {SMX_DTYPE_F32, SMX_DTYPE_F32, 129, 300},   // warp on 32 lanes: 64-thread CTAs
        {SMX_DTYPE_F16, SMX_DTYPE_F16, 33, 30},     {SMX_DTYPE_BF16, SMX_DTYPE_BF16, 65, 200},  // two packs
        {SMX_DTYPE_F32, SMX_DTYPE_BF16, 129, 100},  // f32 x, two packs on 16 lanes
        {SMX_DTYPE_BF16, SMX_DTYPE_BF16, 65, 2047}, // block-regs, 64-thread CTAs
    };
    for (const Case& c : cases) {
        for (bool log_mode : {false, true}) {
            check_rows_case(handle.get(), c.x_dtype, c.y_dtype, c.rows, c.row_len, log_mode, nullptr);
        }
    }
}

TEST_CASE("cuda rows: softmax rows of 100k+ elements sum to 1", "[cuda]") {
    CudaHandle handle;
    for (smxDataType_t y_dtype : {SMX_DTYPE_F32, SMX_DTYPE_F16, SMX_DTYPE_BF16}) {
        for (std::int64_t row_len : {std::int64_t{100003}, std::int64_t{131073}, std::int64_t{1048583}}) {
            const std::int64_t rows = 3;
            HostTensor x = make_tensor(SMX_DTYPE_F32, {rows, row_len});
            HostTensor y = make_tensor(y_dtype, {rows, row_len});
            fill_random(x, test_rng());
            DeviceTensor x_device(x), y_device(y);
            x_device.upload(x);
            y_device.poison();
            const DeviceRun run = run_on_device(handle.get(), y, y_device.data(), x, x_device.data(), 1, false);
            INFO(describe_case(y, x, 1, false) << " | plan: " << run.plan << " | " << run.error);
            REQUIRE(run.status == SMX_STATUS_SUCCESS);
            y_device.download(y);
            // Target: the sum of the exact reference rounded once to y's dtype, i.e. what a perfect kernel
            // writes. (With 16-bit outputs that is not 1: most outputs of a 1M-element row sit below the
            // subnormal step and round with a systematic bias, e.g. 0.9972 for f16 at N(0, 3) inputs.)
            // Bound: float32 computation moves each output by ~1e-6 relative before the final rounding,
            // so their sum moves by ~1e-6; 2e-5 leaves room without hiding a wrong row (1/n = 1e-6 mass).
            // That ~1e-6 may also tip an output across a rounding midpoint of y's dtype: for the largest
            // outputs of these rows (N(0, 3) inputs: up to ~0.06) one such step in f16 is 2^-15 = 3.05e-5
            // (seen once on the H200), so two steps of the largest output's ulp are allowed on top.
            const std::vector<double> ref = reference_softmax(x, 1, false);
            HostTensor rounded = make_tensor(y_dtype, {row_len});
            const int y_fraction_bits = y_dtype == SMX_DTYPE_F32 ? 23 : (y_dtype == SMX_DTYPE_F16 ? 10 : 7);
            for (std::int64_t r = 0; r < rows; ++r) {
                double sum = 0.0, target = 0.0, largest = 0.0;
                for (std::int64_t j = 0; j < row_len; ++j) {
                    sum += y.get(r * row_len + j);
                    rounded.set(j, ref[static_cast<std::size_t>(r * row_len + j)]);
                    target += rounded.get(j);
                    largest = std::max(largest, rounded.get(j));
                }
                const double largest_ulp = std::ldexp(1.0, std::ilogb(largest) - y_fraction_bits);
                const double bound = 2e-5 + 2.0 * largest_ulp;
                INFO("row " << r << " sums to " << sum << ", correctly rounded reference " << target << ", bound "
                              << bound);
                CHECK(std::fabs(sum - target) <= bound);
                if (y_dtype == SMX_DTYPE_F32) CHECK(std::fabs(sum - 1.0) <= 2e-5);
            }
        }
    }
}

TEST_CASE("cuda rows: 16-bit rows at the largest cluster sizes launch and match the reference", "[cuda]") {
    CudaHandle handle;
    // Enough rows that a per-row plan with a 16-CTA cluster takes them: 2^20 elements once planned 1024
    // threads for the 64-value instance, which launches with at most 512, and failed to launch (it now
    // goes to another plan); 2^19 is exactly 16 CTAs x 512 threads x 64 values.
    const std::int64_t rows = multiprocessor_count() / 8 + 1;
    for (std::int64_t row_len : {std::int64_t{1} << 20, std::int64_t{1} << 19}) {
        for (smxDataType_t x_dtype : {SMX_DTYPE_BF16, SMX_DTYPE_F16}) {
            std::set<std::string> plans;
            check_rows_case(handle.get(), x_dtype, SMX_DTYPE_F32, rows, row_len, false, &plans);
            check_rows_case(handle.get(), x_dtype, x_dtype, rows, row_len, true, &plans);
        }
    }
}

TEST_CASE("cuda rows: many rows too long for any cluster use block-online and match on sampled rows",
          "[cuda]") {
    CudaHandle handle;
    // 2^20 + 1 floats (4 MiB) exceed what a cluster of 16 CTAs can cache (16 x 227 KB), and one row per SM
    // keeps the split-row plan away: the one-CTA-per-row online kernel must take it.
    // 16-bit x also loads its first write step before the block combines the statistics. Row 1 starts with
    // a masked stretch (-inf) holding one NaN: a row of NaN, though the threads that meet the NaN have seen
    // nothing but -inf before it.
    const std::int64_t rows = multiprocessor_count();
    const std::int64_t row_len = (std::int64_t{1} << 20) + 1;
    const DtypePair pairs[] = {{SMX_DTYPE_F32, SMX_DTYPE_F32}, {SMX_DTYPE_BF16, SMX_DTYPE_BF16},
                               {SMX_DTYPE_F16, SMX_DTYPE_F32}};
    for (const DtypePair& pair : pairs) {
        for (bool log_mode : {false, true}) {
            HostTensor x = make_tensor(pair.x, {rows, row_len});
            HostTensor y = make_tensor(pair.y, {rows, row_len});
            fill_random(x, test_rng());
            for (std::int64_t j = 0; j < 70000; ++j) x.set(row_len + j, -std::numeric_limits<double>::infinity());
            x.set(row_len + 100, std::numeric_limits<double>::quiet_NaN());
            DeviceTensor x_device(x), y_device(y);
            x_device.upload(x);
            y_device.poison();
            const DeviceRun run = run_on_device(handle.get(), y, y_device.data(), x, x_device.data(), 1, log_mode);
            INFO(describe_case(y, x, 1, log_mode) << " | plan: " << run.plan << " | " << run.error);
            REQUIRE(run.status == SMX_STATUS_SUCCESS);
            CHECK(kernel_kind(run.plan) == "block-online");
            y_device.download(y);
            for (std::int64_t row : {std::int64_t{0}, std::int64_t{1}, rows / 2, rows - 1}) {
                HostTensor x_row = make_tensor(pair.x, {row_len});
                HostTensor y_row = make_tensor(pair.y, {row_len});
                for (std::int64_t j = 0; j < row_len; ++j) {
                    x_row.set(j, x.get(row * row_len + j));
                    y_row.set(j, y.get(row * row_len + j));
                }
                INFO("row " << row);
                CHECK(compare_to_reference(y_row, reference_softmax(x_row, 0, log_mode), log_mode) == "");
            }
        }
    }
}

TEST_CASE("cuda rows: the same input twice gives bitwise the same output", "[cuda]") {
    CudaHandle handle;
    struct Case {
        smxDataType_t x_dtype, y_dtype;
        std::vector<std::int64_t> shape;
        int axis;
    };
    const Case cases[] = {
        {SMX_DTYPE_F32, SMX_DTYPE_F32, {4096, 32}, 1},    {SMX_DTYPE_F16, SMX_DTYPE_F32, {512, 1000}, 1},
        {SMX_DTYPE_F32, SMX_DTYPE_F32, {64, 8193}, 1},    {SMX_DTYPE_BF16, SMX_DTYPE_BF16, {8, 50257}, 1},
        {SMX_DTYPE_F32, SMX_DTYPE_F32, {2, 262145}, 1},   {SMX_DTYPE_F32, SMX_DTYPE_F32, {1, 1048583}, 1},
        {SMX_DTYPE_F16, SMX_DTYPE_F16, {16, 300, 33}, 1}, {SMX_DTYPE_F64, SMX_DTYPE_F64, {16, 4097}, 1},
    };
    for (const Case& c : cases) {
        for (bool log_mode : {false, true}) {
            HostTensor x = make_tensor(c.x_dtype, c.shape);
            HostTensor first = make_tensor(c.y_dtype, c.shape);
            HostTensor second = make_tensor(c.y_dtype, c.shape);
            fill_random(x, test_rng());
            DeviceTensor x_device(x), y_device(first);
            x_device.upload(x);
            std::string plan;
            for (HostTensor* y : {&first, &second}) {
                y_device.poison();
                const DeviceRun run = run_on_device(handle.get(), *y, y_device.data(), x, x_device.data(), c.axis, log_mode);
                INFO(describe_case(*y, x, c.axis, log_mode) << " | " << run.error);
                REQUIRE(run.status == SMX_STATUS_SUCCESS);
                plan = run.plan;
                y_device.download(*y);
            }
            INFO(describe_case(first, x, c.axis, log_mode) << " | plan: " << plan);
            CHECK(compare_to_reference(first, reference_softmax(x, c.axis, log_mode), log_mode) == "");
            CHECK(std::memcmp(first.storage.data(), second.storage.data(), first.storage.size()) == 0);
        }
    }
}

// ---- block-regs: rows held in registers, split over a cluster ------------------------------------------

namespace {

// Enough rows that the split-row plan stays away (rows x cluster >= SMs) for every length below.
std::int64_t block_regs_rows() { return multiprocessor_count() + 3; }

// Checks the rows of x (axis 1) in both modes, each into a fresh y of y_dtype, against the reference;
// returns the two plans (softmax, then log-softmax) for the caller's expectations.
std::vector<std::string> check_rows_both_modes(smxHandle_t handle, const HostTensor& x, smxDataType_t y_dtype) {
    std::vector<std::string> plans;
    for (bool log_mode : {false, true}) {
        HostTensor y = make_tensor(y_dtype, x.shape);
        std::string plan;
        const std::string mismatch = check_on_device(handle, y, x, 1, log_mode, &plan);
        INFO(describe_case(y, x, 1, log_mode) << " | plan: " << plan);
        CHECK(mismatch == "");
        plans.push_back(plan);
    }
    return plans;
}

// Runs one case that the block-regs kernel must take; checks the result and the plan's kind.
void check_block_regs_case(smxHandle_t handle, smxDataType_t x_dtype, smxDataType_t y_dtype, std::int64_t rows,
                           std::int64_t row_len, bool log_mode) {
    const std::string plan = check_random_rows(handle, x_dtype, y_dtype, rows, row_len, log_mode);
    INFO("plan: " << plan);
    CHECK(kernel_kind(plan) == "block-regs");
}

}  // namespace

TEST_CASE("cuda rows: block-regs matches the reference for every dtype pair, one CTA and clusters", "[cuda]") {
    CudaHandle handle;
    const std::int64_t rows = block_regs_rows();
    // 1025: the first length past the warp kernel; 3001 and 50257: odd lengths, so every row starts at a
    // different 16-byte phase (peeled head and tail); 20000 and 50257: clusters for every element size.
    const std::int64_t row_lengths[] = {1025, 3001, 20000, 50257};
    const smxDataType_t float_types[] = {SMX_DTYPE_F16, SMX_DTYPE_BF16, SMX_DTYPE_F32};
    for (std::int64_t row_len : row_lengths) {
        for (bool log_mode : {false, true}) {
            for (smxDataType_t x_dtype : float_types) {
                for (smxDataType_t y_dtype : float_types) {
                    check_block_regs_case(handle.get(), x_dtype, y_dtype, rows, row_len, log_mode);
                }
            }
        }
        check_block_regs_case(handle.get(), SMX_DTYPE_F64, SMX_DTYPE_F64, rows, row_len, false);
    }
}

TEST_CASE("cuda rows: block-regs in place and with the longest rows a cluster holds", "[cuda]") {
    CudaHandle handle;
    const std::int64_t rows = block_regs_rows();
    for (std::int64_t row_len : {std::int64_t{4097}, std::int64_t{50257}}) {
        for (bool log_mode : {false, true}) {
            HostTensor x_then_y = make_tensor(SMX_DTYPE_F16, {rows, row_len});
            fill_random(x_then_y, test_rng());
            std::string plan;
            const std::string mismatch = check_in_place_on_device(handle.get(), x_then_y, 1, log_mode, &plan);
            INFO("in place f16 [" << rows << "," << row_len << "] log " << log_mode << " | plan: " << plan);
            CHECK(mismatch == "");
            CHECK(kernel_kind(plan) == "block-regs");
        }
    }
    // 128256 (a vocabulary) and 2^19 = 16 CTAs x 1024 threads x 32 values: the largest row it takes.
    check_block_regs_case(handle.get(), SMX_DTYPE_BF16, SMX_DTYPE_BF16, rows, 128256, false);
    check_block_regs_case(handle.get(), SMX_DTYPE_F32, SMX_DTYPE_F32, 9, std::int64_t{1} << 19, true);
}

TEST_CASE("cuda rows: block-regs special values inside one CTA's slice and across the cluster", "[cuda][sanitize]") {
    CudaHandle handle;
    const double inf = std::numeric_limits<double>::infinity();
    const double nan = std::numeric_limits<double>::quiet_NaN();
    const std::int64_t rows = block_regs_rows();
    const std::int64_t row_len = 20001;  // clusters of 2+ CTAs, odd: misaligned rows
    for (const DtypePair pair : {DtypePair{SMX_DTYPE_F32, SMX_DTYPE_F32}, DtypePair{SMX_DTYPE_F16, SMX_DTYPE_F16},
                                 DtypePair{SMX_DTYPE_BF16, SMX_DTYPE_F32}, DtypePair{SMX_DTYPE_F32, SMX_DTYPE_BF16}}) {
        HostTensor x = make_tensor(pair.x, {rows, row_len});
        fill_random(x, test_rng());
        for (std::int64_t r = 0; r < rows; ++r) {
            const auto put = [&](std::int64_t j, double value) { x.set(r * row_len + j, value); };
            switch (r % 8) {
                case 1: put(row_len - 3, nan); break;                                   // NaN in the last CTA's tail
                case 2: put(7, inf); break;                                             // +inf in the head
                case 3: for (std::int64_t j = 0; j < row_len; ++j) put(j, -inf); break; // all -inf: NaN
                case 4: for (std::int64_t j = 0; j < row_len / 2; ++j) put(j, -inf); break;  // whole CTAs of -inf
                case 5:  // a NaN among -inf only (a plain max would drop it)
                    for (std::int64_t j = 0; j < row_len; ++j) put(j, -inf);
                    put(row_len / 2 + 5, nan);
                    break;
                case 6: put(100, inf); put(101, -inf); break;
                case 7: put(row_len / 3, 3.0e4); put(row_len / 3 + 1, -3.0e4); break;  // huge range
                default: break;
            }
        }
        for (const std::string& plan : check_rows_both_modes(handle.get(), x, pair.y)) {
            INFO("plan: " << plan);
            CHECK(kernel_kind(plan) == "block-regs");
        }
    }
}

TEST_CASE("cuda rows: packed 16-bit rows fold 1/sum into the exp only while the row's scale allows it",
          "[cuda]") {
    // 16-bit x written to 16-bit y in rows of 8192 take the 64-value (packed) instance, whose softmax
    // writes 2^(v log2(e) - T), T = max log2(e) + log2(sum), while |T| < 2^10 and the two-step exp and
    // multiply beyond (FoldedSoftmaxExp). Rows shifted by -1000..1000 put T on both sides of the bound in
    // both directions (log2(sum) <= 13 here, so |T| crosses 2^10 near max = +701 and -719); both forms
    // must match the reference, in both modes. Rows at +-(45500..58900), each at its own level, have
    // 2^16 <= |T| < 2^17, where a fold errs by up to 2.7e-3 (half an ulp of T in the exponent). Their one
    // large element's softmax is 1 (the rest sit 2000 below), so the relative tolerance, not the floor
    // for tiny outputs, is what an error must exceed: after rounding to f16 about half of these rows
    // would be off by 1.5-2 ulps of 1 (over f16's 1e-3). With ~19 of them for each pair with f16 y, a
    // bound set too loose fails (verified with the bound removed: performance.md#block-regs).
    CudaHandle handle;
    const std::int64_t rows = block_regs_rows();
    const std::int64_t row_len = 8192;
    const double offsets[] = {0.0, 300.0, -300.0, 690.0, 700.0, 705.0, 710.0, 720.0, 1000.0, -710.0, -725.0, -1000.0};
    const std::int64_t kinds = static_cast<std::int64_t>(std::size(offsets)) + 2;  // the last two: +-(45500 + 100 r)
    for (const DtypePair pair : {DtypePair{SMX_DTYPE_F16, SMX_DTYPE_F16}, DtypePair{SMX_DTYPE_BF16, SMX_DTYPE_BF16},
                                 DtypePair{SMX_DTYPE_BF16, SMX_DTYPE_F16}}) {
        HostTensor x = make_tensor(pair.x, {rows, row_len});
        fill_random(x, test_rng());
        for (std::int64_t r = 0; r < rows; ++r) {
            const std::int64_t kind = r % kinds;
            if (kind < kinds - 2) {
                for (std::int64_t j = 0; j < row_len; ++j) x.set(r * row_len + j, x.get(r * row_len + j) + offsets[kind]);
            } else {
                const double level = (kind == kinds - 2 ? 1.0 : -1.0) * (45500.0 + 100.0 * static_cast<double>(r));
                for (std::int64_t j = 0; j < row_len; ++j) x.set(r * row_len + j, level - 2000.0);
                x.set(r * row_len + (r * 37) % row_len, level);
            }
        }
        for (const std::string& plan : check_rows_both_modes(handle.get(), x, pair.y)) {
            INFO("plan: " << plan);
            CHECK(plan.find("block-regs values=64 ") != std::string::npos);
        }
    }
}

#endif  // SMX_TEST_WITH_CUDA
