// [cuda] special values: +inf, NaN, all -inf, -inf among finite values, huge magnitudes and constant
// rows, next to ordinary rows, in short and long rows, contiguous and strided axes, and size-1 axes.
#if SMX_TEST_WITH_CUDA

#include <cmath>
#include <limits>
#include <random>
#include <string>

#include "cuda_helpers.hpp"

using namespace smx_test;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// A magnitude near the top of a dtype's range: exp(x) without subtracting the max would overflow.
double huge_value(smxDataType_t dtype) {
    switch (dtype) {
        case SMX_DTYPE_F16: return 6.0e4;
        case SMX_DTYPE_BF16:
        case SMX_DTYPE_F32: return 3.0e38;
        case SMX_DTYPE_F64: return 1.0e308;
    }
    return 0.0;
}

// Offsets on both sides of where the CUDA kernels' exp changes form (|max| < 2^24: one FFMA and ex2 with a
// rounded max * log2(e), whose rounding is corrected; above: the exact form). f16 never leaves the first.
double offset_inside_fast_exp(smxDataType_t dtype) { return dtype == SMX_DTYPE_F16 ? 3.0e4 : 1.0e6; }
double offset_beyond_fast_exp(smxDataType_t dtype) { return dtype == SMX_DTYPE_F16 ? 6.0e4 : 1.0e8; }

// What each row holds; rows cycle through these so ordinary rows sit next to special ones.
enum class RowKind {
    Random,           // control: must not be disturbed by its neighbours
    PlusInf,          // one +inf: NaN row
    NaN,              // one NaN: NaN row
    AllMinusInf,      // NaN row
    SomeMinusInf,     // about half -inf: those give 0 (log: -inf)
    OneFinite,        // all -inf but one: 1 there (log: 0), 0 elsewhere (log: -inf)
    BothInfinities,   // +inf and -inf: NaN row
    HugePositive,     // near the dtype's max: overflows unless the max is subtracted first
    HugeNegative,     // near the dtype's lowest
    Constant,         // every element equal: 1/n each
    LargeOffset,      // ordinary values plus 1e6 (f16: 3e4): the max * log2(e) rounding must not show
    BeyondFastExp,    // ordinary values plus 1e8 (f16: 6e4): past the fast exp's range
    Count
};

// Writes row `row` (logical index `row` of the non-axis positions) through `offset_of_element(j)`.
template <typename OffsetOf>
void fill_row(HostTensor& x, RowKind kind, std::int64_t row_len, OffsetOf offset_of_element, std::mt19937_64& rng) {
    std::uniform_int_distribution<std::int64_t> position(0, row_len - 1);
    std::normal_distribution<double> normal(0.0, 3.0);
    std::uniform_int_distribution<int> coin(0, 1);
    const std::int64_t chosen = position(rng);
    const std::int64_t other = (chosen + 1 + position(rng) % std::max<std::int64_t>(row_len - 1, 1)) % row_len;
    const double huge = huge_value(x.dtype);
    const double constant = normal(rng);
    for (std::int64_t j = 0; j < row_len; ++j) {
        double value = normal(rng);
        switch (kind) {
            case RowKind::Random: break;
            case RowKind::PlusInf: if (j == chosen) value = kInf; break;
            case RowKind::NaN: if (j == chosen) value = kNaN; break;
            case RowKind::AllMinusInf: value = -kInf; break;
            case RowKind::SomeMinusInf: if (coin(rng) && j != chosen) value = -kInf; break;
            case RowKind::OneFinite: if (j != chosen) value = -kInf; break;
            case RowKind::BothInfinities:
                if (j == chosen) value = kInf;
                if (j == other && other != chosen) value = -kInf;
                break;
            case RowKind::HugePositive: value = huge * (1.0 - 1e-3 * std::fabs(value)); break;
            case RowKind::HugeNegative: value = -huge * (1.0 - 1e-3 * std::fabs(value)); break;
            case RowKind::Constant: value = constant; break;
            case RowKind::LargeOffset: value += offset_inside_fast_exp(x.dtype); break;
            case RowKind::BeyondFastExp: value += offset_beyond_fast_exp(x.dtype); break;
            case RowKind::Count: break;
        }
        x.set(offset_of_element(j), value);
    }
}

constexpr std::int64_t kRowKinds = static_cast<std::int64_t>(RowKind::Count);

// Rows layout: shape (rows, n), axis 1; every row kind appears, then again in a second cycle.
HostTensor special_rows(smxDataType_t dtype, std::int64_t rows, std::int64_t row_len) {
    HostTensor x = make_tensor(dtype, {rows, row_len});
    for (std::int64_t r = 0; r < rows; ++r) {
        fill_row(x, static_cast<RowKind>(r % kRowKinds), row_len,
                 [&](std::int64_t j) { return r * x.strides[0] + j * x.strides[1]; }, test_rng());
    }
    return x;
}

// Spatial layout: shape (n, rows), axis 0: the same row kinds, each along a strided axis.
HostTensor special_columns(smxDataType_t dtype, std::int64_t rows, std::int64_t row_len) {
    HostTensor x = make_tensor(dtype, {row_len, rows});
    for (std::int64_t r = 0; r < rows; ++r) {
        fill_row(x, static_cast<RowKind>(r % kRowKinds), row_len,
                 [&](std::int64_t j) { return j * x.strides[0] + r * x.strides[1]; }, test_rng());
    }
    return x;
}

const DtypePair kSpecialPairs[] = {{SMX_DTYPE_F32, SMX_DTYPE_F32},
                                   {SMX_DTYPE_F16, SMX_DTYPE_F16},
                                   {SMX_DTYPE_BF16, SMX_DTYPE_F32},
                                   {SMX_DTYPE_F64, SMX_DTYPE_F64}};

void check_special(smxHandle_t handle, const HostTensor& x, smxDataType_t y_dtype, int axis, bool log_mode) {
    HostTensor y = make_tensor(y_dtype, x.shape);
    std::string plan;
    const std::string mismatch = check_on_device(handle, y, x, axis, log_mode, &plan);
    INFO("special values: " << describe_case(y, x, axis, log_mode) << " | plan: " << plan);
    CHECK(mismatch == "");
}

void check_special_rows(smxHandle_t handle, std::int64_t rows, const std::vector<std::int64_t>& row_lengths,
                        bool with_columns) {
    for (const DtypePair& pair : kSpecialPairs) {
        for (bool log_mode : {false, true}) {
            for (std::int64_t row_len : row_lengths) {
                check_special(handle, special_rows(pair.x, rows, row_len), pair.y, 1, log_mode);
                if (with_columns) check_special(handle, special_columns(pair.x, rows, row_len), pair.y, 0, log_mode);
            }
        }
    }
}

// x's columns (axis 0) on spatial-split, as the rule picks for columns this long, and forced onto
// spatial-online, each in both modes against the reference; `what` leads each failure's message.
void check_columns_split_and_online(smxHandle_t handle, const HostTensor& x, smxDataType_t y_dtype,
                                    const std::string& what) {
    for (const char* forced : {"", "online"}) {
        const ScopedEnvironment columns("SMX_CUDA_LONG_COLUMNS", forced);
        for (bool log_mode : {false, true}) {
            HostTensor y = make_tensor(y_dtype, x.shape);
            std::string plan;
            const std::string mismatch = check_on_device(handle, y, x, 0, log_mode, &plan);
            INFO(what << ": " << describe_case(y, x, 0, log_mode) << " | plan: " << plan);
            CHECK(mismatch == "");
            CHECK(kernel_kind(plan) == (std::string(forced) == "online" ? "spatial-online" : "spatial-split"));
        }
    }
}

}  // namespace

TEST_CASE("cuda special values: short, medium and long rows and columns in both modes", "[cuda]") {
    CudaHandle handle;
    // Two cycles of row kinds plus one, so each kind also sits at an odd position (rows per warp > 1).
    check_special_rows(handle.get(), 2 * kRowKinds + 1, {2, 16, 31, 700, 5000, 50000}, true);
    // Few very long rows: the shape where a row may be split across blocks.
    check_special_rows(handle.get(), kRowKinds, {262145}, false);
}

TEST_CASE("cuda special values: columns too long for a cluster, split into chunks or not", "[cuda]") {
    // One column per row kind along a 300001-long axis: one tile, so the rule splits every column into
    // chunks whose partial statistics meet in the workspace (-inf stretches, a lone finite value or a NaN
    // in one chunk only); forced, spatial-online takes them whole. Split, the 12 kinds take the one-element
    // instances; three cycles of them (36 columns) the vector instances, kinds mixed in a thread's vector.
    // Each input serves both kernels and both modes (building it is most of this test's host time).
    CudaHandle handle;
    for (const DtypePair& pair : kSpecialPairs) {
        for (const std::int64_t column_count : {kRowKinds, 3 * kRowKinds}) {
            const HostTensor x = special_columns(pair.x, column_count, 300001);
            check_columns_split_and_online(handle.get(), x, pair.y, "special values");
        }
    }
}

TEST_CASE("cuda special values: a NaN among -inf values of a split column makes the column NaN", "[cuda]") {
    // Column 0 of (300001, columns) holds -inf everywhere but a NaN at one position (the other columns
    // random). The NaN's chunk sees no finite value: its running max stays -inf and only the sum carries
    // the NaN, which must still reach every output of the column once the chunks' statistics are combined.
    // 12 columns take spatial-split's one-element instances, 36 its vectors (the NaN column in a vector
    // with finite columns); forced, spatial-online. Each input serves both kernels and both modes.
    CudaHandle handle;
    for (const DtypePair& pair : kSpecialPairs) {
        for (const std::int64_t column_count : {std::int64_t{12}, std::int64_t{36}}) {
            const std::int64_t row_len = 300001;
            HostTensor x = make_tensor(pair.x, {row_len, column_count});
            fill_random(x, test_rng());
            const std::int64_t nan_at = std::uniform_int_distribution<std::int64_t>(0, row_len - 1)(test_rng());
            for (std::int64_t j = 0; j < row_len; ++j) x.set(j * x.strides[0], j == nan_at ? kNaN : -kInf);
            check_columns_split_and_online(handle.get(), x, pair.y, "NaN among -inf at " + std::to_string(nan_at));
        }
    }
}

TEST_CASE("cuda special values: a short and a long row length", "[cuda][sanitize]") {
    CudaHandle handle;
    check_special_rows(handle.get(), kRowKinds, {16, 50000}, false);
}

TEST_CASE("cuda special values: a size-1 axis gives 1 (log: 0), and NaN for non-finite inputs", "[cuda][sanitize]") {
    CudaHandle handle;
    const double inputs[] = {0.5, -7.0, 3.0e4, -3.0e4, kInf, -kInf, kNaN};
    const std::int64_t count = sizeof(inputs) / sizeof(inputs[0]);
    for (const DtypePair& pair : kSpecialPairs) {
        for (bool log_mode : {false, true}) {
            // (count, 1) along axis 1 and (3, 1, count) along axis 1: a unit axis with stride 1 and with a
            // larger stride.
            HostTensor column = make_tensor(pair.x, {count, 1});
            HostTensor middle = make_tensor(pair.x, {3, 1, count});
            for (std::int64_t i = 0; i < count; ++i) {
                column.set(column.offset_of({i, 0}), inputs[i]);
                for (std::int64_t k = 0; k < 3; ++k) middle.set(middle.offset_of({k, 0, i}), inputs[(i + k) % count]);
            }
            check_special(handle.get(), column, pair.y, 1, log_mode);
            check_special(handle.get(), middle, pair.y, 1, log_mode);
        }
    }
}

#endif  // SMX_TEST_WITH_CUDA
