// common.cuh - what the Spatial-layout kernels share: their parameters and the split of a tile index.
#pragma once

#include <cstdint>

#include "cuda/common/reduce.cuh"
#include "cuda/spatial/params.hpp"

namespace smx::cuda {

// tile = outer * tiles_per_outer + tile_in_outer. In 32 bits whenever the tile count allows (always, in
// practice): a 64-bit division is a long software routine, a 32-bit one a few instructions.
__device__ __forceinline__ void split_tile(std::int64_t tile, std::int64_t tiles_per_outer, std::int64_t tiles,
                                           std::int64_t* outer, std::int64_t* tile_in_outer) {
    if (tiles <= 0xffffffffll) {
        const unsigned narrow_tile = static_cast<unsigned>(tile);
        const unsigned per_outer = static_cast<unsigned>(tiles_per_outer);
        const unsigned narrow_outer = narrow_tile / per_outer;
        *outer = narrow_outer;
        *tile_in_outer = narrow_tile - narrow_outer * per_outer;
    } else {
        *outer = tile / tiles_per_outer;
        *tile_in_outer = tile - *outer * tiles_per_outer;
    }
}

// The value subtracted before exp: the max, or 0 when every value is -inf (avoids -inf - -inf = NaN).
template <class C>
__device__ __forceinline__ C shift_of(C max) {
    return max == neg_inf<C>() ? C(0) : max;
}

}  // namespace smx::cuda
