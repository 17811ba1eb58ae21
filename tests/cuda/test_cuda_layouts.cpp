// [cuda] layouts: every axis of 2-d to 5-d tensors, transposed and padded inputs, x and y with different
// non-contiguous layouts, negative strides, in-place, and pointers one element off alignment.
#if SMX_TEST_WITH_CUDA

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <numeric>
#include <random>

#include "cuda_helpers.hpp"

using namespace smx_test;

namespace {

// How to lay a shape out in memory: dims in `order` from innermost to outermost, `padding` spare
// elements after each dim's extent, and dims whose stride is `negated`.
struct LayoutRecipe {
    std::vector<int> order;
    std::vector<std::int64_t> padding;
    std::vector<bool> negated;
};

std::vector<std::int64_t> strides_for(const std::vector<std::int64_t>& shape, const LayoutRecipe& recipe) {
    std::vector<std::int64_t> strides(shape.size());
    std::int64_t running = 1;
    for (int dim : recipe.order) {
        strides[dim] = recipe.negated[dim] ? -running : running;
        running = running * std::max<std::int64_t>(shape[dim], 1) + recipe.padding[dim];
    }
    return strides;
}

LayoutRecipe row_major_recipe(int ndim) {
    LayoutRecipe recipe;
    for (int d = ndim - 1; d >= 0; --d) recipe.order.push_back(d);
    recipe.padding.assign(ndim, 0);
    recipe.negated.assign(ndim, false);
    return recipe;
}

// A random layout: dims permuted, some padded, some reversed.
LayoutRecipe random_recipe(int ndim, std::mt19937_64& rng) {
    LayoutRecipe recipe = row_major_recipe(ndim);
    std::shuffle(recipe.order.begin(), recipe.order.end(), rng);
    std::uniform_int_distribution<int> percent(0, 99);
    for (int d = 0; d < ndim; ++d) {
        recipe.padding[d] = percent(rng) < 30 ? 1 + percent(rng) % 5 : 0;
        recipe.negated[d] = percent(rng) < 20;
    }
    return recipe;
}

std::vector<std::int64_t> random_shape(int ndim, std::mt19937_64& rng) {
    std::uniform_int_distribution<int> percent(0, 99);
    std::uniform_int_distribution<std::int64_t> size(2, 9);
    std::vector<std::int64_t> shape(ndim);
    for (std::int64_t& dim : shape) dim = percent(rng) < 20 ? 1 : size(rng);
    return shape;
}

void check_case(smxHandle_t handle, HostTensor& y, HostTensor& x, int axis, bool log_mode) {
    fill_random(x, test_rng());
    std::string plan;
    const std::string mismatch = check_on_device(handle, y, x, axis, log_mode, &plan);
    INFO(describe_case(y, x, axis, log_mode) << " | plan: " << plan);
    CHECK(mismatch == "");
}

}  // namespace

TEST_CASE("cuda layouts: every axis of random 2-d to 5-d tensors with x and y in different layouts", "[cuda]") {
    CudaHandle handle;
    std::mt19937_64& rng = test_rng();
    const smxDataType_t dtypes[] = {SMX_DTYPE_F16, SMX_DTYPE_BF16, SMX_DTYPE_F32};
    std::uniform_int_distribution<int> pick_dtype(0, 2), coin(0, 1);
    for (int ndim = 2; ndim <= 5; ++ndim) {
        for (int trial = 0; trial < 12; ++trial) {
            const std::vector<std::int64_t> shape = random_shape(ndim, rng);
            for (int axis = 0; axis < ndim; ++axis) {
                // The axis also goes through its negative spelling half the time.
                const int axis_argument = coin(rng) ? axis : axis - ndim;
                const bool log_mode = coin(rng) == 1;
                const bool f64 = trial % 6 == 5;
                const smxDataType_t x_dtype = f64 ? SMX_DTYPE_F64 : dtypes[pick_dtype(rng)];
                const smxDataType_t y_dtype = f64 ? SMX_DTYPE_F64 : dtypes[pick_dtype(rng)];
                HostTensor x = make_tensor(x_dtype, shape, strides_for(shape, random_recipe(ndim, rng)), coin(rng));
                HostTensor y = make_tensor(y_dtype, shape, strides_for(shape, random_recipe(ndim, rng)), coin(rng));
                check_case(handle.get(), y, x, axis_argument, log_mode);
            }
        }
    }
}

TEST_CASE("cuda layouts: transposed, padded, negative-stride and offset operands", "[cuda]") {
    CudaHandle handle;
    for (bool log_mode : {false, true}) {
        for (std::int64_t row_len : {std::int64_t{5}, std::int64_t{100}, std::int64_t{3000}, std::int64_t{40000}}) {
            const std::int64_t rows = 7;
            const std::vector<std::int64_t> shape = {rows, row_len};
            {  // transposed x (axis strided, rows contiguous), row-major y
                HostTensor x = make_tensor(SMX_DTYPE_F32, shape, {1, rows});
                HostTensor y = make_tensor(SMX_DTYPE_F32, shape);
                check_case(handle.get(), y, x, 1, log_mode);
            }
            {  // padded rows: row stride > row length, differently padded x and y
                HostTensor x = make_tensor(SMX_DTYPE_F16, shape, {row_len + 3, 1});
                HostTensor y = make_tensor(SMX_DTYPE_F32, shape, {row_len + 8, 1});
                check_case(handle.get(), y, x, 1, log_mode);
            }
            {  // x and y both non-contiguous with different layouts
                HostTensor x = make_tensor(SMX_DTYPE_F32, shape, {2, 2 * rows + 1});  // strided axis
                HostTensor y = make_tensor(SMX_DTYPE_BF16, shape, {2 * row_len, 2});  // every other element
                check_case(handle.get(), y, x, 1, log_mode);
            }
            {  // negative strides along the axis and across rows
                HostTensor x = make_tensor(SMX_DTYPE_F32, shape, {-row_len, -1});
                HostTensor y = make_tensor(SMX_DTYPE_F32, shape, {row_len, -1});
                check_case(handle.get(), y, x, 1, log_mode);
            }
            {  // rows in reverse order (a negative row stride) over contiguous rows: the Rows layout, whose
               // warp kernel then indexes in 32 bits with negative offsets
                HostTensor x = make_tensor(SMX_DTYPE_BF16, shape, {-row_len, 1});
                HostTensor y = make_tensor(SMX_DTYPE_F32, shape, {-(row_len + 4), 1});
                check_case(handle.get(), y, x, 1, log_mode);
            }
            {  // x and y one element past an aligned address
                for (smxDataType_t dtype : {SMX_DTYPE_F16, SMX_DTYPE_F32, SMX_DTYPE_F64}) {
                    for (std::int64_t x_front : {0, 1}) {
                        for (std::int64_t y_front : {0, 1}) {
                            HostTensor x = make_tensor(dtype, shape, {}, x_front);
                            HostTensor y = make_tensor(dtype, shape, {}, y_front);
                            check_case(handle.get(), y, x, 1, log_mode);
                        }
                    }
                }
            }
            {  // axis 0 of the same data: the spatial layout, aligned and offset
                for (std::int64_t front : {0, 1}) {
                    HostTensor x = make_tensor(SMX_DTYPE_F16, {row_len, rows}, {}, front);
                    HostTensor y = make_tensor(SMX_DTYPE_F16, {row_len, rows}, {}, 1 - front);
                    check_case(handle.get(), y, x, 0, log_mode);
                }
            }
        }
    }
}

TEST_CASE("cuda layouts: in-place on contiguous, strided and negative-stride tensors", "[cuda][sanitize]") {
    CudaHandle handle;
    struct Case {
        smxDataType_t dtype;
        std::vector<std::int64_t> shape;
        std::vector<std::int64_t> strides;  // empty: row-major
        int axis;
    };
    const Case cases[] = {
        {SMX_DTYPE_F32, {100, 33}, {}, 1},           {SMX_DTYPE_F16, {9, 5000}, {}, -1},
        {SMX_DTYPE_BF16, {3, 70000}, {}, 1},         {SMX_DTYPE_F32, {6, 40, 17}, {}, 1},
        {SMX_DTYPE_F32, {40, 30}, {1, 41}, 1},       {SMX_DTYPE_F64, {12, 300}, {-300, 1}, 1},
        {SMX_DTYPE_F16, {4, 3, 5, 6}, {}, 2},        {SMX_DTYPE_F32, {8, 129}, {130, -1}, 0},
    };
    for (const Case& c : cases) {
        for (bool log_mode : {false, true}) {
            HostTensor data = make_tensor(c.dtype, c.shape, c.strides, 1);
            fill_random(data, test_rng());
            std::string plan;
            INFO("in-place " << describe_case(data, data, c.axis, log_mode));
            const std::string mismatch = check_in_place_on_device(handle.get(), data, c.axis, log_mode, &plan);
            INFO("plan: " << plan);
            CHECK(mismatch == "");
        }
    }
}

TEST_CASE("cuda layouts: a small subset of strided layouts", "[cuda][sanitize]") {
    CudaHandle handle;
    for (bool log_mode : {false, true}) {
        HostTensor transposed_x = make_tensor(SMX_DTYPE_F32, {9, 300}, {1, 9}, 1);
        HostTensor padded_y = make_tensor(SMX_DTYPE_F16, {9, 300}, {305, 1});
        check_case(handle.get(), padded_y, transposed_x, 1, log_mode);

        HostTensor spatial_x = make_tensor(SMX_DTYPE_BF16, {4, 77, 33});
        HostTensor spatial_y = make_tensor(SMX_DTYPE_F32, {4, 77, 33}, {}, 1);
        check_case(handle.get(), spatial_y, spatial_x, 1, log_mode);

        const std::vector<std::int64_t> shape = {3, 4, 5, 6};
        HostTensor general_x = make_tensor(SMX_DTYPE_F32, shape, {-1, 3 * 5 * 6 + 7, 3, 15});
        HostTensor general_y = make_tensor(SMX_DTYPE_F32, shape, {6, 18, 72, -1});
        check_case(handle.get(), general_y, general_x, 2, log_mode);
    }
}

TEST_CASE("cuda layouts: zero-size tensors succeed and write nothing", "[cuda]") {
    CudaHandle handle;
    for (const std::vector<std::int64_t>& shape : {std::vector<std::int64_t>{0, 5}, std::vector<std::int64_t>{4, 0},
                                                   std::vector<std::int64_t>{3, 0, 2}}) {
        TensorDesc x_desc(SMX_DTYPE_F32, shape, {}), y_desc(SMX_DTYPE_F32, shape, {});
        SoftmaxDesc desc(handle.get(), SMX_SOFTMAX, -1, y_desc.desc, x_desc.desc);
        REQUIRE(desc.status == SMX_STATUS_SUCCESS);
        std::size_t workspace_bytes = 1;
        SMX_REQUIRE_OK(smxGetSoftmaxWorkspaceSize(desc.desc, &workspace_bytes));
        CHECK(workspace_bytes == 0);
        // NULL data is fine: there is nothing to read or write.
        SMX_REQUIRE_OK(smxSoftmaxForward(desc.desc, nullptr, 0, nullptr, nullptr, nullptr));
        SMX_REQUIRE_CUDA(cudaDeviceSynchronize());
    }
}

namespace {

// The spatial tile kernel's cases: (outer, n, inner) along axis 1, so one test names the tile shapes it
// reaches: a whole column in one CTA, whole 256-byte tile rows, clusters of 2..16 CTAs, a partial last
// tile, inner narrower than a 16-byte vector, and a column too long for any cluster (the two-pass fallback).
enum class Clustered { Any, No, Yes };
struct SpatialCase {
    std::int64_t outer, row_len, inner;
    const char* kernel;  // the kernel kind the plan must name
    Clustered clustered = Clustered::Any;
};

// A spatial case run for each of its dtype pairs.
struct SpatialPairsCase {
    SpatialCase spatial;
    std::vector<DtypePair> pairs;
};

// Checks one case against the reference and its plan's kind (and cluster, when the case names it); returns
// the plan text for further checks.
std::string check_spatial_case(smxHandle_t handle, const SpatialCase& c, smxDataType_t x_dtype, smxDataType_t y_dtype,
                               std::int64_t x_front, std::int64_t y_front, bool log_mode) {
    const std::vector<std::int64_t> shape = {c.outer, c.row_len, c.inner};
    HostTensor x = make_tensor(x_dtype, shape, {}, x_front);
    HostTensor y = make_tensor(y_dtype, shape, {}, y_front);
    fill_random(x, test_rng());
    std::string plan;
    const std::string mismatch = check_on_device(handle, y, x, 1, log_mode, &plan);
    INFO(describe_case(y, x, 1, log_mode) << " | plan: " << plan);
    CHECK(mismatch == "");
    CHECK(kernel_kind(plan) == c.kernel);
    if (c.clustered != Clustered::Any) CHECK((plan_value(plan, "cluster") > 1) == (c.clustered == Clustered::Yes));
    return plan;
}

}  // namespace

TEST_CASE("cuda layouts: spatial tiles, clusters, partial tiles, narrow inner and the long-column fallback", "[cuda]") {
    CudaHandle handle;
    const SpatialCase cases[] = {
        {3, 1000, 64, "spatial-tile"},                   // few tiles: spread over a cluster per column tile
        {3, 2000, 64, "spatial-tile", Clustered::Yes},   // wide tile rows, a cluster per column tile
        {2, 9000, 40, "spatial-tile"},      // narrower tile rows to fit a cluster of 8
        {1, 70000, 16, "spatial-tile"},     // a cluster of up to 16 at the opt-in limit
        {5, 300, 7, "spatial-tile"},        // inner narrower than one 16-byte vector
        {2, 3, 4100, "spatial-tile"},       // a short axis, many tiles, a partial last vector
        {1, 300000, 4, "spatial-split"},    // too long for any cluster, one tile: chunks over the GPU
    };
    const DtypePair pairs[] = {{SMX_DTYPE_F32, SMX_DTYPE_F32}, {SMX_DTYPE_F16, SMX_DTYPE_F16}, {SMX_DTYPE_BF16, SMX_DTYPE_F32},
                          {SMX_DTYPE_F32, SMX_DTYPE_BF16}, {SMX_DTYPE_F64, SMX_DTYPE_F64}};
    for (const SpatialCase& c : cases) {
        for (const DtypePair& pair : pairs) {
            for (bool log_mode : {false, true}) {
                check_spatial_case(handle.get(), c, pair.x, pair.y, 0, 0, log_mode);  // 16-byte vector path
                check_spatial_case(handle.get(), c, pair.x, pair.y, 1, 0, log_mode);  // x element-wise
                check_spatial_case(handle.get(), c, pair.x, pair.y, 0, 1, log_mode);  // y element-wise
            }
        }
    }
}

TEST_CASE("cuda layouts: columns one CTA caches at 64-byte tile rows run without a cluster", "[cuda]") {
    CudaHandle handle;
    // 1000 positions x 64 bytes fill the 64 KB budget; 140 outer indices give enough tiles (2 or 4 per
    // outer index) that the plan does not spread them over clusters to fill the SMs.
    const SpatialCase unclustered{140, 1000, 64, "spatial-tile", Clustered::No};
    const DtypePair pairs[] = {{SMX_DTYPE_F32, SMX_DTYPE_F32}, {SMX_DTYPE_BF16, SMX_DTYPE_F32}, {SMX_DTYPE_F16, SMX_DTYPE_F16}};
    for (const DtypePair& pair : pairs) {
        for (bool log_mode : {false, true}) check_spatial_case(handle.get(), unclustered, pair.x, pair.y, 0, 0, log_mode);
    }
}

TEST_CASE("cuda layouts: unclustered tiles take 128-thread CTAs where those let an SM hold more tiles", "[cuda]") {
    // 128 positions x 256-byte rows are 32 KB tiles: 256-thread CTAs are register-bound at 4 per SM, 128-thread
    // ones fit 5 by shared memory, so the plan takes 128 threads; 16-bit x written as f32 (8-byte vectors, 5
    // CTAs per SM either way) ties and keeps 256. 1000 positions x 64 bytes (64 KB tiles, 3 per SM either
    // way) keep 256. Inner 520 leaves a partial last tile; the fronts put x or y on the element-wise path.
    CudaHandle handle;
    struct Case {
        SpatialCase spatial;
        bool small_for_same_width;  // whether pairs without 8-byte vectors must take 128 threads
    };
    const Case cases[] = {
        {{80, 128, 520, "spatial-tile", Clustered::No}, true},
        {{140, 1000, 64, "spatial-tile", Clustered::No}, false},
    };
    const DtypePair pairs[] = {{SMX_DTYPE_F32, SMX_DTYPE_F32}, {SMX_DTYPE_BF16, SMX_DTYPE_BF16}, {SMX_DTYPE_F16, SMX_DTYPE_F16},
                               {SMX_DTYPE_F32, SMX_DTYPE_BF16}, {SMX_DTYPE_BF16, SMX_DTYPE_F32}};
    for (const Case& c : cases) {
        for (const DtypePair& pair : pairs) {
            const bool wider_16_bit = pair.x != SMX_DTYPE_F32 && pair.y == SMX_DTYPE_F32;
            const int threads = c.small_for_same_width && !wider_16_bit ? 128 : 256;
            for (bool log_mode : {false, true}) {
                for (const auto& fronts : {std::pair<int, int>{0, 0}, {1, 0}, {0, 1}}) {
                    const std::string plan =
                        check_spatial_case(handle.get(), c.spatial, pair.x, pair.y, fronts.first, fronts.second, log_mode);
                    INFO("plan: " << plan);
                    CHECK(plan_value(plan, "threads") == threads);
                }
            }
        }
    }
}

TEST_CASE("cuda layouts: 16-bit x written as f32 takes 8-byte vectors at tile rows of 128 bytes or more", "[cuda]") {
    // The plan switches these pairs to the 8-byte-vector instance (4 columns a thread) at wide tile rows:
    // whole and partial vectors and tiles, one CTA or a cluster per column, vector and element-wise access
    // on either side. At 64-byte rows, and for every other pair, it keeps 16-byte vectors.
    CudaHandle handle;
    struct Case {
        SpatialCase spatial;
        bool narrow;  // whether bf16/f16 -> f32 must take 8-byte vectors
    };
    const Case cases[] = {
        {{140, 500, 130, "spatial-tile", Clustered::No}, true},  // 256-byte rows, a partial tile and vector
        {{3, 2000, 66, "spatial-tile", Clustered::Yes}, true},   // a cluster per column tile, partial vector
        {{2, 3, 4102, "spatial-tile"}, true},                    // a short axis, many tiles
        {{140, 1000, 32, "spatial-tile"}, false},                // 64-byte rows keep 16-byte vectors
    };
    const DtypePair pairs[] = {{SMX_DTYPE_BF16, SMX_DTYPE_F32}, {SMX_DTYPE_F16, SMX_DTYPE_F32}, {SMX_DTYPE_BF16, SMX_DTYPE_BF16}};
    for (const Case& c : cases) {
        for (const DtypePair& pair : pairs) {
            const bool narrow = c.narrow && pair.y == SMX_DTYPE_F32;
            for (bool log_mode : {false, true}) {
                for (const auto& fronts : {std::pair<int, int>{0, 0}, {1, 0}, {0, 1}}) {
                    const std::string plan =
                        check_spatial_case(handle.get(), c.spatial, pair.x, pair.y, fronts.first, fronts.second, log_mode);
                    INFO("plan: " << plan);
                    CHECK((plan.find("x8B") != std::string::npos) == narrow);
                }
            }
        }
    }
}

TEST_CASE("cuda layouts: 64-byte tile rows fetch whole L2 lines where x's rows span them", "[cuda]") {
    // The plan asks for whole 128-byte lines (`lines=128B`) exactly when a tile row is 64 bytes of 16-byte
    // vectors and x's rows (inner columns) are at least a line wide; the results must not depend on it
    // (vector and element-wise access on either side, a partial last tile, a cluster per column tile).
    CudaHandle handle;
    struct Case {
        SpatialCase spatial;
        std::vector<smxDataType_t> whole_lines_for;  // x dtypes for which the plan must ask (every pair with them)
    };
    // Four outer indices keep the tensors small (the plan spreads their few tiles over clusters, which
    // changes no tile row's width); 8192 axis positions need 64-byte rows in clusters of 8.
    const Case cases[] = {
        {{4, 1000, 64, "spatial-tile"}, {SMX_DTYPE_F32, SMX_DTYPE_BF16}},  // 64-byte rows of 256 / 128-byte x rows
        {{4, 1000, 32, "spatial-tile"}, {SMX_DTYPE_F32}},                  // 16-bit x rows are 64 bytes: no
        {{4, 1000, 72, "spatial-tile"}, {SMX_DTYPE_F32, SMX_DTYPE_BF16}},  // a partial last tile
        {{1, 8192, 256, "spatial-tile", Clustered::Yes}, {SMX_DTYPE_F32, SMX_DTYPE_BF16}},  // long columns
        {{4, 500, 130, "spatial-tile"}, {}},                               // rows of 128+ bytes: no
    };
    const DtypePair pairs[] = {{SMX_DTYPE_F32, SMX_DTYPE_F32}, {SMX_DTYPE_BF16, SMX_DTYPE_BF16}, {SMX_DTYPE_BF16, SMX_DTYPE_F32},
                               {SMX_DTYPE_F32, SMX_DTYPE_BF16}};
    for (const Case& c : cases) {
        for (const DtypePair& pair : pairs) {
            const bool expected = std::find(c.whole_lines_for.begin(), c.whole_lines_for.end(), pair.x) != c.whole_lines_for.end();
            for (bool log_mode : {false, true}) {
                for (const auto& fronts : {std::pair<int, int>{0, 0}, {1, 0}, {0, 1}}) {
                    const std::string plan =
                        check_spatial_case(handle.get(), c.spatial, pair.x, pair.y, fronts.first, fronts.second, log_mode);
                    INFO("plan: " << plan);
                    CHECK((plan.find(" lines=128B") != std::string::npos) == expected);
                    // The rule itself, from the plan's own geometry.
                    const bool row_of_64_bytes = plan_value(plan, "tile") * static_cast<std::int64_t>(dtype_size(pair.x)) == 64 &&
                                                 plan.find("x16B") != std::string::npos;
                    CHECK(expected == (row_of_64_bytes && c.spatial.inner * static_cast<std::int64_t>(dtype_size(pair.x)) >= 128));
                }
            }
        }
    }
}

TEST_CASE("cuda layouts: spatial tiles with padded outer strides, a reversed axis and in-place", "[cuda]") {
    CudaHandle handle;
    for (bool log_mode : {false, true}) {
        const std::vector<std::int64_t> shape = {3, 2500, 96};
        // x and y padded differently between outer indices; y's axis runs backwards.
        HostTensor x = make_tensor(SMX_DTYPE_BF16, shape, {2500 * 96 + 8, 96, 1});
        HostTensor y = make_tensor(SMX_DTYPE_F32, shape, {2500 * 96 + 4, -96, 1});
        check_case(handle.get(), y, x, 1, log_mode);

        for (smxDataType_t dtype : {SMX_DTYPE_F32, SMX_DTYPE_F16}) {
            HostTensor data = make_tensor(dtype, shape);
            fill_random(data, test_rng());
            std::string plan;
            const std::string mismatch = check_in_place_on_device(handle.get(), data, 1, log_mode, &plan);
            INFO("in-place " << describe_case(data, data, 1, log_mode) << " | plan: " << plan);
            CHECK(mismatch == "");
            CHECK(kernel_kind(plan) == "spatial-tile");
        }
    }
}

namespace {

// Spatial (n, 64) tensors whose columns hold special values placed so that some cluster CTAs see only
// -inf (or only a NaN) while others hold the column's finite values, including values near -200 whose
// exp relative to a slice's shift of 0 would overflow.
HostTensor special_spatial(smxDataType_t dtype, std::int64_t row_len) {
    constexpr double kInf = std::numeric_limits<double>::infinity();
    const std::int64_t columns = 64;
    HostTensor x = make_tensor(dtype, {row_len, columns});
    fill_random(x, test_rng());
    for (std::int64_t i = 0; i < columns; ++i) {
        for (std::int64_t j = 0; j < row_len; ++j) {
            const std::int64_t at = x.offset_of({j, i});
            const bool head = j < 10;  // inside the first CTA's slice
            switch (i % 8) {
                case 0: break;                                                           // ordinary column
                case 1: if (j == row_len - 1) x.set(at, kInf); break;                   // NaN column
                case 2: if (j == row_len / 2) x.set(at, std::nan("")); break;           // NaN column
                case 3: x.set(at, -kInf); break;                                        // all -inf: NaN
                case 4: if (!head) x.set(at, -kInf); break;                             // finite only at the head
                case 5: x.set(at, head ? -200.0 - static_cast<double>(j) : -kInf); break;  // far below 0
                case 6: if (!head) x.set(at, std::nan("")); break;                      // NaN outside the head
                case 7: x.set(at, head ? -kInf : x.get(at)); break;                     // -inf only at the head
            }
        }
    }
    return x;
}

}  // namespace

TEST_CASE("cuda layouts: special values along spatial columns split across a cluster", "[cuda]") {
    CudaHandle handle;
    for (const DtypePair& pair : {DtypePair{SMX_DTYPE_F32, SMX_DTYPE_F32}, DtypePair{SMX_DTYPE_F16, SMX_DTYPE_F32},
                                  DtypePair{SMX_DTYPE_BF16, SMX_DTYPE_BF16}, DtypePair{SMX_DTYPE_F64, SMX_DTYPE_F64}}) {
        for (bool log_mode : {false, true}) {
            for (std::int64_t row_len : {std::int64_t{40}, std::int64_t{3000}, std::int64_t{20000}}) {
                const HostTensor x = special_spatial(pair.x, row_len);
                HostTensor y = make_tensor(pair.y, x.shape);
                std::string plan;
                const std::string mismatch = check_on_device(handle.get(), y, x, 0, log_mode, &plan);
                INFO("special values " << describe_case(y, x, 0, log_mode) << " | plan: " << plan);
                CHECK(mismatch == "");
            }
        }
    }
}

TEST_CASE("cuda layouts: spatial columns whose max rises in every row, falls after the first, or starts at -inf", "[cuda]") {
    // A tile folds each thread's rows into (max, sum) a few rows at a time as they land, rescaling the
    // sum whenever the max grows: on a rising ramp every group of rows raises it, on a falling one never.
    // Column lengths that one CTA holds, a cluster holds, and a cluster of 16 holds.
    CudaHandle handle;
    const DtypePair pairs[] = {{SMX_DTYPE_F32, SMX_DTYPE_F32}, {SMX_DTYPE_BF16, SMX_DTYPE_BF16}, {SMX_DTYPE_F16, SMX_DTYPE_F32},
                               {SMX_DTYPE_F32, SMX_DTYPE_F16}};
    for (const DtypePair& pair : pairs) {
        for (std::int64_t row_len : {std::int64_t{700}, std::int64_t{5000}, std::int64_t{40000}}) {
            for (double slope : {+1.0, -1.0}) {
                for (bool log_mode : {false, true}) {
                    HostTensor x = make_tensor(pair.x, {row_len, 72});
                    HostTensor y = make_tensor(pair.y, x.shape);
                    fill_random(x, test_rng(), 0.5);
                    // The ramp spans 30 (e^30 between its ends), so every row still counts in the sum.
                    for (std::int64_t j = 0; j < row_len; ++j) {
                        for (std::int64_t i = 0; i < 72; ++i) {
                            const std::int64_t at = x.offset_of({j, i});
                            x.set(at, x.get(at) + slope * 30.0 * static_cast<double>(j) / static_cast<double>(row_len));
                        }
                    }
                    std::string plan;
                    const std::string mismatch = check_on_device(handle.get(), y, x, 0, log_mode, &plan);
                    INFO("ramp of slope " << slope << ": " << describe_case(y, x, 0, log_mode) << " | plan: " << plan);
                    CHECK(mismatch == "");
                    CHECK(kernel_kind(plan) == "spatial-tile");
                }
            }
            // -inf in the first half of every column, values near -300 in the second: a thread's sum over
            // only -inf rows (0, taken relative to a shift of 0) must not be moved to the new shift, where
            // the factor e^300 would overflow into 0 * inf = NaN.
            for (bool log_mode : {false, true}) {
                HostTensor x = make_tensor(pair.x, {row_len, 72});
                HostTensor y = make_tensor(pair.y, x.shape);
                fill_random(x, test_rng());
                for (std::int64_t j = 0; j < row_len; ++j) {
                    for (std::int64_t i = 0; i < 72; ++i) {
                        const std::int64_t at = x.offset_of({j, i});
                        x.set(at, j < row_len / 2 ? -std::numeric_limits<double>::infinity() : x.get(at) - 300.0);
                    }
                }
                std::string plan;
                const std::string mismatch = check_on_device(handle.get(), y, x, 0, log_mode, &plan);
                INFO("-inf then -300: " << describe_case(y, x, 0, log_mode) << " | plan: " << plan);
                CHECK(mismatch == "");
            }
        }
    }
}

TEST_CASE("cuda layouts: spatial columns far from zero, each group of 8 at its own offset", "[cuda]") {
    // A tile exponentiates a column relative to S = max log2(e) rounded to float, and must remove that
    // rounding (up to half an ulp of S: 2^-9 at |max| = 45000) from every sum it takes a log of, and use the
    // rounded S whenever it moves a running sum to a larger max. Groups of 8 columns (one thread's vector for
    // 16-bit x, two for f32 and for 16-bit x written as f32 at these tile widths) sit at offsets from 0 to
    // +-45000 on random data: an S misused anywhere puts up to ~1e-3 into f32 outputs, far over the f32
    // tolerance. (It found the f32 tiles' running sums moved by
    // 2^(old_max log2(e) - S_new), whose product an FMA left unrounded: 4.5e-5 relative errors.) Columns of
    // 700 with 140 outer indices (one CTA per tile) and of 5000 alone (tiles spread over clusters).
    CudaHandle handle;
    const double offsets[] = {0.0, 300.0, -300.0, 1000.0, -1000.0, 20000.0, -20000.0, 45000.0, -45000.0};
    const std::int64_t columns = 8 * static_cast<std::int64_t>(std::size(offsets));
    const DtypePair pairs[] = {{SMX_DTYPE_F32, SMX_DTYPE_F32}, {SMX_DTYPE_F16, SMX_DTYPE_F16}, {SMX_DTYPE_BF16, SMX_DTYPE_F32},
                               {SMX_DTYPE_F32, SMX_DTYPE_BF16}};
    struct Layout {
        std::vector<std::int64_t> shape;
        int axis;
    };
    const Layout layouts[] = {{{140, 700, columns}, 1}, {{5000, columns}, 0}};
    for (const DtypePair& pair : pairs) {
        for (const Layout& layout : layouts) {
            HostTensor x = make_tensor(pair.x, layout.shape);
            fill_random(x, test_rng());
            const std::int64_t count = x.numel();  // contiguous: the offset is the logical index
            for (std::int64_t at = 0; at < count; ++at) x.set(at, x.get(at) + offsets[(at % columns) / 8]);
            for (bool log_mode : {false, true}) {
                HostTensor y = make_tensor(pair.y, x.shape);
                std::string plan;
                const std::string mismatch = check_on_device(handle.get(), y, x, layout.axis, log_mode, &plan);
                INFO(describe_case(y, x, layout.axis, log_mode) << " | plan: " << plan);
                CHECK(mismatch == "");
                CHECK(kernel_kind(plan) == "spatial-tile");
            }
        }
    }
}

TEST_CASE("cuda layouts: long columns and strided rows padded with one constant keep f32 accuracy", "[cuda]") {
    // A random head of 2000 positions, then one constant along the rest of the axis (padded logits): every
    // loop step adds the same group sum to a thread's running sum, so its float32 roundings all lean one way
    // instead of cancelling. Summed in one running sum (before segmented_stats), half or more of these
    // outputs were out of f32's tolerance (performance.md#spatial-online, #general). Spatial-online: columns
    // too long for any cluster, 32 threads along each (8192 steps a thread; forced: the rule would split them);
    // spatial-split (the rule): the same columns in chunks of a few steps a thread whose partials the write
    // kernel folds; general: x's rows strided and y's contiguous, 256 threads along each row
    // (16384 steps).
    CudaHandle handle;
    constexpr std::int64_t kHead = 2000;
    constexpr double kPadding = -0.3;
    struct Case {
        smxDataType_t x_dtype;
        std::vector<std::int64_t> shape;
        std::vector<std::int64_t> x_strides;  // empty: contiguous
        int axis;
        const char* kernel;
    };
    const Case cases[] = {
        {SMX_DTYPE_F32, {1048576, 32}, {}, 0, "spatial-online"},
        {SMX_DTYPE_BF16, {1048576, 32}, {}, 0, "spatial-online"},
        {SMX_DTYPE_F32, {1048576, 32}, {}, 0, "spatial-split"},
        {SMX_DTYPE_BF16, {1048576, 32}, {}, 0, "spatial-split"},
        {SMX_DTYPE_F32, {2, 16777216}, {1, 2}, 1, "general"},
    };
    for (const Case& c : cases) {
        // Spatial-online runs these columns only when forced: one tile, so the rule splits them into chunks.
        const ScopedEnvironment columns("SMX_CUDA_LONG_COLUMNS", std::string(c.kernel) == "spatial-online" ? "online" : "");
        HostTensor x = make_tensor(c.x_dtype, c.shape, c.x_strides);
        fill_random(x, test_rng());
        const int other_axis = 1 - c.axis;
        for (std::int64_t j = kHead; j < c.shape[c.axis]; ++j) {
            for (std::int64_t i = 0; i < c.shape[other_axis]; ++i) {
                x.set(j * x.strides[c.axis] + i * x.strides[other_axis], kPadding);
            }
        }
        HostTensor y = make_tensor(SMX_DTYPE_F32, c.shape);
        std::string plan;
        const std::string mismatch = check_on_device(handle.get(), y, x, c.axis, false, &plan);
        INFO(describe_case(y, x, c.axis, false) << " | plan: " << plan);
        CHECK(mismatch == "");
        CHECK(kernel_kind(plan) == c.kernel);
    }
}

TEST_CASE("cuda layouts: long columns cut into chunks, partial chunks and tiles, both kernels", "[cuda]") {
    // Columns too long for any cluster: the rule splits them into chunks where the tiles are too few to
    // fill the GPU (spatial-split), and SMX_CUDA_LONG_COLUMNS forces either kernel. Shapes (outer, axis,
    // inner): one tile of 4 columns; 3 outer indices of 9 columns (tiles of 16, 7 columns idle); 40 columns
    // (split: the vector instances, 10 of a 64-column tile's 16 vectors); axis lengths that leave a partial
    // last chunk.
    CudaHandle handle;
    const SpatialPairsCase cases[] = {
        {{1, 300000, 4, "spatial-split"},
         {{SMX_DTYPE_F32, SMX_DTYPE_F32}, {SMX_DTYPE_F16, SMX_DTYPE_F16}, {SMX_DTYPE_BF16, SMX_DTYPE_F32},
          {SMX_DTYPE_F32, SMX_DTYPE_BF16}, {SMX_DTYPE_F64, SMX_DTYPE_F64}}},
        {{3, 300001, 9, "spatial-split"}, {{SMX_DTYPE_F32, SMX_DTYPE_F32}, {SMX_DTYPE_BF16, SMX_DTYPE_BF16}}},
        {{1, 250007, 40, "spatial-split"}, {{SMX_DTYPE_F16, SMX_DTYPE_F32}}},
    };
    for (const SpatialPairsCase& c : cases) {
        for (const char* forced : {"", "online", "split"}) {
            const ScopedEnvironment columns("SMX_CUDA_LONG_COLUMNS", forced);
            SpatialCase spatial = c.spatial;
            if (std::string(forced) == "online") spatial.kernel = "spatial-online";
            for (const DtypePair& pair : c.pairs) {
                for (bool log_mode : {false, true}) {
                    const std::string plan = check_spatial_case(handle.get(), spatial, pair.x, pair.y, 0, 0, log_mode);
                    if (kernel_kind(plan) == "spatial-split") {
                        INFO("plan: " << plan);
                        CHECK(plan_value(plan, "chunks") >= 2);
                    }
                }
            }
        }
    }
}

TEST_CASE("cuda layouts: long columns split in vectors, with the one-element plan for misaligned bases", "[cuda]") {
    // Where inner is wider than 32 columns, a whole number of vectors (4 columns, 2 for f64), and the strides
    // keep vectors aligned, spatial-split runs its vector instances on tiles of up to 64 columns, and falls
    // back to one element a thread for calls whose x or y base is off the vectors' alignment (fronts of one
    // element). Shapes (outer, axis, inner): 10 of 16 vectors valid (inner 40; f64: 20 of 32); 2 outer
    // indices of 9 of 16 valid vectors (inner 36); one whole 64-column tile (f16: a cluster of 16 cannot hold
    // 15001 positions x 16 bytes a CTA); inner 42, which only f64's 2-column vectors divide (f32 takes one
    // element a thread, in two tiles of 32, and has no fallback); inner 4, one element a thread (32 columns
    // or fewer).
    CudaHandle handle;
    const SpatialPairsCase cases[] = {
        {{1, 250007, 40, "spatial-split"},
         {{SMX_DTYPE_F32, SMX_DTYPE_F32}, {SMX_DTYPE_BF16, SMX_DTYPE_F32}, {SMX_DTYPE_F64, SMX_DTYPE_F64}}},
        {{2, 240001, 36, "spatial-split"}, {{SMX_DTYPE_F32, SMX_DTYPE_BF16}, {SMX_DTYPE_F16, SMX_DTYPE_F16}}},
        {{1, 240007, 64, "spatial-split"}, {{SMX_DTYPE_F16, SMX_DTYPE_F16}}},
        {{1, 240000, 42, "spatial-split"}, {{SMX_DTYPE_F32, SMX_DTYPE_F32}, {SMX_DTYPE_F64, SMX_DTYPE_F64}}},
        {{1, 300000, 4, "spatial-split"}, {{SMX_DTYPE_F32, SMX_DTYPE_F32}}},
    };
    for (const SpatialPairsCase& c : cases) {
        for (const DtypePair& pair : c.pairs) {
            const int columns = pair.x == SMX_DTYPE_F64 ? 2 : 4;
            const bool vectors = c.spatial.inner > 32 && c.spatial.inner % columns == 0;
            std::int64_t width = 1;  // the tile: inner's next power of two, at most 64 columns (32 one element a thread)
            while (width < c.spatial.inner && width < (vectors ? 64 : 32)) width *= 2;
            // Misaligned fronts for each case's first pair (the fallback's kernels are the one-element split's,
            // which the tests above cover pair by pair).
            const bool first_pair = &pair == &c.pairs.front();
            for (bool log_mode : {false, true}) {
                for (const auto& fronts : {std::pair<int, int>{0, 0}, {1, 0}, {0, 1}}) {
                    if (!first_pair && fronts.first + fronts.second > 0) continue;
                    const std::string plan =
                        check_spatial_case(handle.get(), c.spatial, pair.x, pair.y, fronts.first, fronts.second, log_mode);
                    INFO("plan: " << plan);
                    CHECK(plan_value(plan, "columns_per_thread") == (vectors ? columns : 1));
                    CHECK(plan_value(plan, "tile") == width);
                    CHECK(plan_value(plan, "chunks") >= 2);
                    // The fallback: the one-element split, named after the vector plan.
                    CHECK((plan.find("; unaligned x or y: spatial-split tile=") != std::string::npos) == vectors);
                }
            }
        }
    }
    // Strides off the vectors' alignment take the one-element plan alone: x's axis stride of 41 elements, and
    // y's outer stride of 40 x 240000 + 2.
    const std::vector<std::int64_t> shape = {2, 240000, 40};
    HostTensor x = make_tensor(SMX_DTYPE_F32, shape, {240000 * 41, 41, 1});
    HostTensor x_contiguous = make_tensor(SMX_DTYPE_F32, shape);
    HostTensor y = make_tensor(SMX_DTYPE_F32, shape);
    HostTensor y_padded = make_tensor(SMX_DTYPE_F32, shape, {240000 * 40 + 2, 40, 1});
    fill_random(x, test_rng());
    fill_random(x_contiguous, test_rng());
    for (const auto& tensors : {std::pair<HostTensor*, HostTensor*>{&x, &y}, {&x_contiguous, &y_padded}}) {
        std::string plan;
        const std::string mismatch = check_on_device(handle.get(), *tensors.second, *tensors.first, 1, false, &plan);
        INFO(describe_case(*tensors.second, *tensors.first, 1, false) << " | plan: " << plan);
        CHECK(mismatch == "");
        CHECK(kernel_kind(plan) == "spatial-split");
        CHECK(plan_value(plan, "columns_per_thread") == 1);
        CHECK(plan.find("unaligned") == std::string::npos);
    }
}

TEST_CASE("cuda layouts: long columns split into chunks with padded outer strides, a reversed axis and in-place", "[cuda]") {
    // Two outer indices of 40 columns (two tiles each, the second with 8 valid columns), x and y padded
    // differently between outer indices, y's axis running backwards; then in-place.
    CudaHandle handle;
    const std::vector<std::int64_t> shape = {2, 240007, 40};
    for (bool log_mode : {false, true}) {
        HostTensor x = make_tensor(SMX_DTYPE_BF16, shape, {240007 * 40 + 8, 40, 1});
        HostTensor y = make_tensor(SMX_DTYPE_F32, shape, {240007 * 40 + 4, -40, 1});
        fill_random(x, test_rng());
        std::string plan;
        std::string mismatch = check_on_device(handle.get(), y, x, 1, log_mode, &plan);
        INFO(describe_case(y, x, 1, log_mode) << " | plan: " << plan);
        CHECK(mismatch == "");
        CHECK(kernel_kind(plan) == "spatial-split");

        HostTensor data = make_tensor(SMX_DTYPE_F32, shape);
        fill_random(data, test_rng());
        mismatch = check_in_place_on_device(handle.get(), data, 1, log_mode, &plan);
        INFO("in-place " << describe_case(data, data, 1, log_mode) << " | plan: " << plan);
        CHECK(mismatch == "");
        CHECK(kernel_kind(plan) == "spatial-split");
    }
}

TEST_CASE("cuda layouts: a long column split into chunks", "[cuda][sanitize]") {
    // 240000 positions x 16 bytes exceed a cluster of 16 CTAs' shared memory: spatial-split, a partial last
    // chunk. One element a thread: 5 of the tile's 8 columns valid, x or y one element off alignment. Vector
    // instances: 36 columns, 9 of the tile's 16 vectors valid.
    CudaHandle handle;
    const SpatialCase column{1, 240000, 5, "spatial-split"};
    const SpatialCase vectors{1, 240000, 36, "spatial-split"};
    for (bool log_mode : {false, true}) {
        check_spatial_case(handle.get(), column, SMX_DTYPE_F32, SMX_DTYPE_BF16, 0, 1, log_mode);
        check_spatial_case(handle.get(), column, SMX_DTYPE_BF16, SMX_DTYPE_F32, 1, 0, log_mode);
        check_spatial_case(handle.get(), vectors, SMX_DTYPE_F32, SMX_DTYPE_BF16, 0, 0, log_mode);
        check_spatial_case(handle.get(), vectors, SMX_DTYPE_BF16, SMX_DTYPE_F32, 0, 0, log_mode);
    }
}

TEST_CASE("cuda layouts: a small spatial tile split across a cluster", "[cuda][sanitize]") {
    CudaHandle handle;
    for (bool log_mode : {false, true}) {
        HostTensor x = make_tensor(SMX_DTYPE_F32, {2, 1500, 72});
        HostTensor y = make_tensor(SMX_DTYPE_BF16, {2, 1500, 72}, {}, 1);
        check_case(handle.get(), y, x, 1, log_mode);
        HostTensor x16 = make_tensor(SMX_DTYPE_F16, {2, 1500, 72});
        HostTensor y16 = make_tensor(SMX_DTYPE_F16, {2, 1500, 72});
        check_case(handle.get(), y16, x16, 1, log_mode);
        HostTensor x_wider = make_tensor(SMX_DTYPE_BF16, {2, 1500, 72});  // 8-byte vectors
        HostTensor y_wider = make_tensor(SMX_DTYPE_F32, {2, 1500, 72});
        check_case(handle.get(), y_wider, x_wider, 1, log_mode);
    }
}

#endif  // SMX_TEST_WITH_CUDA
