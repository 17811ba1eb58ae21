// layouts.hpp - random strided layouts for the CPU tests: the stride kinds every operand is tried under, random
// small shapes, and a tensor's layout as text for failure messages.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "support/reference.hpp"

namespace smx_test {

enum class StrideKind { Contiguous, Transposed, Padded, Negative, TransposedPaddedNegative };

inline constexpr StrideKind kAllStrideKinds[] = {StrideKind::Contiguous, StrideKind::Transposed, StrideKind::Padded,
                                                 StrideKind::Negative, StrideKind::TransposedPaddedNegative};

const char* stride_kind_name(StrideKind kind);

// Strides (in elements, never overlapping) of one layout kind for `shape`, randomised where the kind allows:
// transposed = row-major over a random permutation of the dims; padded = each dim's stride skips 1..3
// extra elements; negative = some dims walk backwards.
std::vector<std::int64_t> make_strides(const std::vector<std::int64_t>& shape, StrideKind kind, std::mt19937_64& rng);

// A random shape of `ndim` dims of size 1..6, about one in four of size 1.
std::vector<std::int64_t> random_shape(int ndim, std::mt19937_64& rng);

// "f32 shape [2,3] strides [3,1]".
std::string describe(const HostTensor& t);

}  // namespace smx_test
