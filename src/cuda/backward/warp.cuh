// warp.cuh - backward-warp: short rows (row_len <= kBackwardWarpMaxRowLen), Rows layout. A group of kLanes
// threads (1..32) owns a row, each lane holding kPacks packs of dy and of y in registers in their own dtype
// (16-bit values two to a register, widened at each use); the row's sum by shuffles within the group, then
// dx written from the held values. 32 / kLanes rows per warp, a grid covering every row (a grid-stride loop
// past gridDim.x's limit). Traffic: dy and y read once, dx written once; 8- or 16-byte accesses where an
// operand's base and row stride keep every row's packs aligned (its *_rows_aligned, set at bind), element
// by element otherwise (same registers). Design and expectations: performance.md#backward.
#pragma once

#include <type_traits>
#include <utility>

#include "cuda/backward/common.cuh"

namespace smx::cuda {

// The body for one gradient formula (common/epilogue.cuh); the kernel below picks the mode once.
template <class T, class D, int kLanes, int kPacks, class Gradient>
__device__ __forceinline__ void backward_warp_rows(const BackwardRowsParams& args) {
    using C = ComputeType<T>;
    constexpr int kPack = kPackOfPair<T, D>;
    constexpr int kRowsPerWarp = 32 / kLanes;
    const T* dy = static_cast<const T*>(args.dy);
    const T* y = static_cast<const T*>(args.y);
    D* dx = static_cast<D*>(args.dx);
    const int row_len = static_cast<int>(args.row_len);  // <= kBackwardWarpMaxRowLen
    const int lane = threadIdx.x % 32;
    const int lane_in_group = lane % kLanes;
    const std::int64_t warps_per_block = blockDim.x / 32;
    const std::int64_t first_warp_row =
        (static_cast<std::int64_t>(blockIdx.x) * warps_per_block + threadIdx.x / 32) * kRowsPerWarp;
    const std::int64_t warp_step = static_cast<std::int64_t>(gridDim.x) * warps_per_block * kRowsPerWarp;

    // 16-bit dy and y whose every pack is whole or past the row take a loop of vector loads of their own:
    // with the choice made per pack, the compiler joined a pack's vector and element-wise forms by
    // half-word moves that read each vector load's registers at once, so every load waited for the one
    // before it (performance.md#backward-16-bit-dy-and-y). Wider packs join in whole registers.
    const bool whole_packs =
        sizeof(T) == 2 && args.dy_rows_aligned != 0 && args.y_rows_aligned != 0 && row_len % kPack == 0;
    // The loop bound is per warp (not per group) so every lane reaches every shuffle.
    for (std::int64_t warp_row = first_warp_row; warp_row < args.rows; warp_row += warp_step) {
        const std::int64_t row = warp_row + lane / kLanes;
        const bool row_valid = row < args.rows;
        const std::int64_t r = row_valid ? row : 0;
        const T* dy_row = dy + r * args.dy_row_stride;
        const T* y_row = y + r * args.y_row_stride;
        Packed<T, kPack> dy_held[kPacks];
        Packed<T, kPack> y_held[kPacks];
        if (whole_packs) {
#pragma unroll
            for (int p = 0; p < kPacks; ++p) {
                const int col = (p * kLanes + lane_in_group) * kPack;
                if (row_valid && col < row_len) {  // packs past the row are left out of the sum below
                    dy_held[p] = load_operand_pack<T, kPack>(dy_row + col, kPack, true);
                    y_held[p] = load_operand_pack<T, kPack>(y_row + col, kPack, true);
                }
            }
        } else {
#pragma unroll
            for (int p = 0; p < kPacks; ++p) {
                const int col = (p * kLanes + lane_in_group) * kPack;
                const int count = row_valid ? row_len - col : 0;  // elements of this pack inside the row
                dy_held[p] = load_operand_pack<T, kPack>(dy_row + col, count, args.dy_rows_aligned && count >= kPack);
                y_held[p] = load_operand_pack<T, kPack>(y_row + col, count, args.y_rows_aligned && count >= kPack);
            }
        }
        // Padding is zero in dy and y: its terms add nothing.
        C partial = C(0);
#pragma unroll
        for (int p = 0; p < kPacks; ++p) {
            if (whole_packs && !(row_valid && (p * kLanes + lane_in_group) * kPack < row_len)) continue;
#pragma unroll
            for (int k = 0; k < kPack; ++k) {
                partial += Gradient::term(widen_element_on_use(dy_held[p], k), widen_element_on_use(y_held[p], k));
            }
        }
        const C sum = group_sum<kLanes>(partial);
        if (!row_valid) continue;
        D* dx_row = dx + row * args.dx_row_stride;
#pragma unroll
        for (int p = 0; p < kPacks; ++p) {
            const int col = (p * kLanes + lane_in_group) * kPack;
            if (col >= row_len) continue;
            C out[kPack];
#pragma unroll
            for (int k = 0; k < kPack; ++k) {
                out[k] = Gradient::element(widen_element_on_use(dy_held[p], k), widen_element_on_use(y_held[p], k), sum);
            }
            const int count = row_len - col;
            store_gradient_pack<D, kPack>(dx_row + col, out, count, args.dx_rows_aligned && count >= kPack);
        }
    }
}

// The mode is a compile-time choice inside each kernel, branched on once: the formulas differ in every
// element (a product in the sum and the write, or an exp in the write).
template <class T, class D, int kLanes, int kPacks>
__global__ void __launch_bounds__(kBackwardWarpThreads) backward_warp(const ParamBlock<BackwardRowsParams> args) {
    if (args.log_mode != 0) {
        backward_warp_rows<T, D, kLanes, kPacks, LogSoftmaxGradient>(args);
    } else {
        backward_warp_rows<T, D, kLanes, kPacks, SoftmaxGradient>(args);
    }
}

// The instance for shape `shape_index` of kBackwardWarpShapes, or nullptr where a lane would hold more than
// kBackwardWarpMaxValues elements of an operand.
template <class T, class D, std::size_t... I>
const void* backward_warp_instance(int shape_index, std::index_sequence<I...>) {
    constexpr int kPack = kPackOfPair<T, D>;
    const void* kernel = nullptr;
    const auto pick = [&](auto shape_tag) {
        constexpr BackwardWarpShape kShape = kBackwardWarpShapes[decltype(shape_tag)::value];
        if constexpr (kShape.packs * kPack <= kBackwardWarpMaxValues) {
            kernel = reinterpret_cast<const void*>(&backward_warp<T, D, kShape.lanes, kShape.packs>);
        }
    };
    ((shape_index == static_cast<int>(I) ? pick(std::integral_constant<std::size_t, I>{}) : void()), ...);
    return kernel;
}

// Every dx dtype for one dy dtype: each warp_<dtype>.cu instantiates one of these.
template <class T>
const void* backward_warp_for_value(smxDataType_t gradient_dtype, int shape_index) {
    return visit_dtype(gradient_dtype, [shape_index](auto d_tag) -> const void* {
        using D = typename decltype(d_tag)::type;
        if constexpr (kEveryFamilyPair<T, D>) {
            return backward_warp_instance<T, D>(shape_index, std::make_index_sequence<kBackwardWarpShapes.size()>{});
        } else {
            return nullptr;
        }
    });
}

}  // namespace smx::cuda
