// layouts.cpp - random strided layouts for the CPU tests (see layouts.hpp).
#include "support/layouts.hpp"

#include <algorithm>
#include <numeric>
#include <sstream>

namespace smx_test {

const char* stride_kind_name(StrideKind kind) {
    switch (kind) {
        case StrideKind::Contiguous: return "contiguous";
        case StrideKind::Transposed: return "transposed";
        case StrideKind::Padded: return "padded";
        case StrideKind::Negative: return "negative";
        case StrideKind::TransposedPaddedNegative: return "transposed+padded+negative";
    }
    return "?";
}

std::vector<std::int64_t> make_strides(const std::vector<std::int64_t>& shape, StrideKind kind, std::mt19937_64& rng) {
    const int ndim = static_cast<int>(shape.size());
    std::vector<int> order(ndim);  // order[0] is the outermost dim in memory
    std::iota(order.begin(), order.end(), 0);
    const bool transposed = kind == StrideKind::Transposed || kind == StrideKind::TransposedPaddedNegative;
    const bool padded = kind == StrideKind::Padded || kind == StrideKind::TransposedPaddedNegative;
    const bool negative = kind == StrideKind::Negative || kind == StrideKind::TransposedPaddedNegative;
    if (transposed) std::shuffle(order.begin(), order.end(), rng);
    std::uniform_int_distribution<std::int64_t> padding(1, 3);
    std::bernoulli_distribution flip(0.5);
    std::vector<std::int64_t> strides(ndim);
    std::int64_t running = 1;
    for (int k = ndim - 1; k >= 0; --k) {
        const int dim = order[k];
        strides[dim] = running;
        running *= shape[dim] + (padded ? padding(rng) : 0);
    }
    if (negative) {
        bool any = false;
        for (auto& stride : strides) {
            if (flip(rng)) {
                stride = -stride;
                any = true;
            }
        }
        if (!any) strides[0] = -strides[0];
    }
    return strides;
}

std::string describe(const HostTensor& t) {
    std::ostringstream text;
    text << dtype_name(t.dtype) << " shape [";
    for (std::size_t i = 0; i < t.shape.size(); ++i) text << (i ? "," : "") << t.shape[i];
    text << "] strides [";
    for (std::size_t i = 0; i < t.strides.size(); ++i) text << (i ? "," : "") << t.strides[i];
    return text.str() + "]";
}

std::vector<std::int64_t> random_shape(int ndim, std::mt19937_64& rng) {
    std::uniform_int_distribution<std::int64_t> size(2, 6);
    std::bernoulli_distribution unit(0.25);
    std::vector<std::int64_t> shape(ndim);
    for (auto& s : shape) s = unit(rng) ? 1 : size(rng);
    return shape;
}

}  // namespace smx_test
