// Which scalar scales the CUDA options instances fold into softmax's exp (cuda/common/options.hpp:
// scalar_scale_folds), checked on the host: the decision must follow the float the kernels multiply by, not the
// double the caller set, on both sides of each bound. Plain C++, so it runs in every build.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

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
