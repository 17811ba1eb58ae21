// Which scalar scales the CUDA options instances fold into softmax's exp (cuda/common/options.hpp:
// scalar_scale_folds), checked on the host: the decision must follow the float the kernels multiply by, not the
// double the caller set, on both sides of each bound. Plain C++, so it runs in every build.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "cuda/common/options.hpp"

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr float kFloatInf = std::numeric_limits<float>::infinity();

}  // namespace

TEST_CASE("scale fold: a scalar folds where its float is in (0, 2^64], whatever its double", "[cpu][options]") {
    // Positive in float, float's smallest subnormal included (1e-40 is subnormal there, 0x1.8p-150 rounds up to
    // 2^-149), and 2^64 itself, also reached by a double above it that rounds to it in float.
    const double folded[] = {0.37, 1.0, 3.0, 1e-30, 1e-40, 0x1p-149, 0x1.8p-150, 0x1p64, 0x1p64 * (1.0 + 0x1p-30)};
    for (const double scale : folded) {
        INFO("scale " << scale << " (float " << static_cast<float>(scale) << ")");
        CHECK(smx::cuda::scalar_scale_folds(scale));
    }
    // 0 in float, positive doubles among them (1e-50 would put 0 * -inf into a causal window's exps; 2^-150 is a
    // tie rounded to even, 0); negative; past 2^64 in float (its next float up); infinite in float only (1e39);
    // infinite; not a number.
    const double above_fold_max = static_cast<double>(std::nextafter(0x1p64f, kFloatInf));
    const double kept[] = {0.0,  -0.0, 1e-50, 0x1p-151, 0x1p-150, -1e-50, -2.5, above_fold_max, 0x1p64 * 1.5,
                           1e30, 1e39, kInf,  -kInf,    std::numeric_limits<double>::quiet_NaN()};
    for (const double scale : kept) {
        INFO("scale " << scale << " (float " << static_cast<float>(scale) << ")");
        CHECK_FALSE(smx::cuda::scalar_scale_folds(scale));
    }
}

namespace {

// Equal as the kernels' results compare: bit for bit, any NaN equal to any NaN.
bool same_float(float a, float b) {
    if (a != a || b != b) return a != a && b != b;
    return std::memcmp(&a, &b, sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("scale fold: a row's scale folds as factor * (pre_factor * x), s * x bit for bit, whatever s",
          "[cpu][options]") {
    constexpr float kFloatNaN = std::numeric_limits<float>::quiet_NaN();
    constexpr float kFloatMax = std::numeric_limits<float>::max();
    const float scales[] = {1.25f, 0.37f, 1.0f, 0x1p64f, 1e30f, kFloatMax, kFloatInf, 1e-40f, 0.0f, -0.0f,
                            -1.25f, -1e-40f, -1e30f, -kFloatInf, kFloatNaN};
    std::mt19937 generator(53);
    std::uniform_real_distribution<float> uniform(-8.0f, 8.0f);
    std::vector<float> xs = {0.0f, -0.0f, 1.0f, -1.0f, 1e-40f, -1e-40f, kFloatMax, -kFloatMax, kFloatInf, -kFloatInf, kFloatNaN};
    for (int i = 0; i < 200; ++i) xs.push_back(std::ldexp(uniform(generator), static_cast<int>(i % 40) - 20));
    for (const float scale : scales) {
        const smx::cuda::RowScaleFold<float> fold = smx::cuda::row_scale_fold(scale);
        INFO("scale " << scale << ": factor " << fold.factor << ", pre_factor " << fold.pre_factor);
        // The factor keeps a window's -inf (positive or +inf); pre_factor * x is exact in any dtype.
        CHECK(fold.factor > 0.0f);
        CHECK((fold.pre_factor == 1.0f || fold.pre_factor == -1.0f || fold.pre_factor == 0.0f || fold.pre_factor != fold.pre_factor));
        for (const float x : xs) {
            const float held = fold.pre_factor * x;
            INFO("x " << x);
            CHECK(same_float(fold.factor * held, scale * x));
        }
        // The row's shift: factor * (the max of the held values, a window's -inf set after the pre_factor, NaN
        // skipped as the kernels' max does) is the max of z.
        for (int row = 0; row < 20; ++row) {
            float z_max = -kFloatInf;
            float held_max = -kFloatInf;
            for (int j = 0; j < 64; ++j) {
                const float x = std::ldexp(uniform(generator), row - 10);
                const bool in_window = j < 40 + row;
                const float held = in_window ? fold.pre_factor * x : -kFloatInf;
                const float z = in_window ? scale * x : -kFloatInf;
                held_max = std::fmax(held_max, held);
                z_max = std::fmax(z_max, z);
            }
            // Equal as values: the max of a row of +-0 may be either zero, and a shift of either gives the same exps.
            const float shift = fold.factor * held_max;
            CHECK((shift == z_max || (shift != shift && z_max != z_max)));
        }
    }
}
