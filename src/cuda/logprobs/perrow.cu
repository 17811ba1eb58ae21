// perrow.cu - cross-entropy's per-row kernels, one CTA each, any layout of the per-row operands:
//   count   the rows a MEAN divides by (targets that are not ignore_index), as the gradient's scale 1 / count,
//           into the workspace before the kernels that scale dlogits by it;
//   finish  the reduction of the per-row losses (SUM, MEAN) in one fixed order (each thread a strided share in
//           double, then a fixed tree), and the scatter of the loss and lse the general kernel left compact.
// Traffic: one target, or one loss and count, per row. performance.md#log-probabilities.
#include "cuda/logprobs/rows.cuh"

namespace smx::cuda {
namespace {

// The block's sum of one value per thread (kPerRowThreads threads), complete in thread 0: warp butterflies, then
// warp 0 over the warps' sums. Exact for integers; for doubles, the same order on every run.
template <class T>
__device__ __forceinline__ T block_sum(T value, T* scratch) {
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) value += __shfl_xor_sync(0xffffffffu, value, offset);
    const int lane = threadIdx.x % 32;
    if (lane == 0) scratch[threadIdx.x / 32] = value;
    __syncthreads();
    value = lane < static_cast<int>(blockDim.x / 32) ? scratch[lane] : T(0);
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) value += __shfl_xor_sync(0xffffffffu, value, offset);
    return value;
}

// block_sum of two doubles at once: each through block_sum's tree (the same bits), behind one barrier.
__device__ __forceinline__ void block_sum_pair(double& a, double& b, double2* scratch) {
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) {
        a += __shfl_xor_sync(0xffffffffu, a, offset);
        b += __shfl_xor_sync(0xffffffffu, b, offset);
    }
    const int lane = threadIdx.x % 32;
    if (lane == 0) scratch[threadIdx.x / 32] = make_double2(a, b);
    __syncthreads();
    const double2 warp = lane < static_cast<int>(blockDim.x / 32) ? scratch[lane] : make_double2(0.0, 0.0);
    a = warp.x;
    b = warp.y;
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) {
        a += __shfl_xor_sync(0xffffffffu, a, offset);
        b += __shfl_xor_sync(0xffffffffu, b, offset);
    }
}

// Rows a thread loads before it adds any: a share of up to kRowsInFlight x blockDim.x rows in one round trip.
constexpr int kRowsInFlight = 8;

// Hands add() load(row) for this thread's strided share of the rows, in row order, kRowsInFlight loads at a time.
template <class Load, class Add>
__device__ __forceinline__ void for_strided_rows(std::int64_t rows, const Load& load, const Add& add) {
    using Value = decltype(load(std::int64_t{0}));
    const std::int64_t threads = blockDim.x;
    for (std::int64_t first = threadIdx.x; first < rows; first += kRowsInFlight * threads) {
        Value batch[kRowsInFlight];
#pragma unroll
        for (int k = 0; k < kRowsInFlight; ++k) {
            if (first + k * threads < rows) batch[k] = load(first + k * threads);
        }
#pragma unroll
        for (int k = 0; k < kRowsInFlight; ++k) {
            if (first + k * threads < rows) add(batch[k]);
        }
    }
}

__global__ void __launch_bounds__(kPerRowThreads) ce_count(const ParamBlock<LogprobsPerRowParams> args) {
    begin_dependent_kernel();
    __shared__ long long scratch[32];
    long long counted = 0;
    for_strided_rows(
        args.rows,
        [&](std::int64_t row) { return load_index(args.operand.index, space_offset(args.space, args.ndim, 0, row), args.index_64 != 0); },
        [&](std::int64_t t) { counted += t != args.ignore_index ? 1 : 0; });
    counted = block_sum(counted, scratch);
    // The gradient's scale rather than the count, in both statistics types, so no gradient thread divides or
    // converts (params.hpp, the workspace).
    if (threadIdx.x == 0) {
        const double scale = counted > 0 ? 1.0 / static_cast<double>(counted) : 1.0;
        auto* region = static_cast<unsigned char*>(args.operand.workspace);
        *reinterpret_cast<double*>(region) = scale;
        *reinterpret_cast<float*>(region + sizeof(double)) = static_cast<float>(scale);
    }
}

template <class S>
__global__ void __launch_bounds__(kPerRowThreads) ce_finish(const ParamBlock<LogprobsPerRowParams> args) {
    begin_dependent_kernel();
    __shared__ double2 scratch[32];
    const RowLoss<S>* row_losses = workspace_row_losses<S>(args.operand.workspace);
    if (args.scatter_lse != 0) {
        const S* row_lse = workspace_row_lse<S>(args.operand.workspace, args.rows);
        S* lse = static_cast<S*>(args.operand.lse);
        for (std::int64_t row = threadIdx.x; row < args.rows; row += blockDim.x) {
            lse[space_offset(args.space, args.ndim, 1, row)] = row_lse[row];
        }
    }
    S* loss = static_cast<S*>(args.operand.out);
    if (args.reduction == SMX_REDUCTION_NONE) {
        if (args.scatter_loss == 0) return;
        for (std::int64_t row = threadIdx.x; row < args.rows; row += blockDim.x) {
            loss[space_offset(args.space, args.ndim, 2, row)] = row_losses[row].loss;
        }
        return;
    }
    double total = 0.0;
    double counted = 0.0;  // exact: an integer below 2^53
    for_strided_rows(
        args.rows, [&](std::int64_t row) { return row_losses[row]; },
        [&](const RowLoss<S>& row) {
            total += static_cast<double>(row.loss);
            counted += static_cast<double>(row.counted);
        });
    block_sum_pair(total, counted, scratch);
    // A mean over no counted row is 0 / 0: NaN, as in PyTorch.
    if (threadIdx.x == 0) loss[0] = static_cast<S>(args.reduction == SMX_REDUCTION_SUM ? total : total / counted);
}

}  // namespace

const void* ce_count_kernel() { return reinterpret_cast<const void*>(&ce_count); }

const void* ce_finish_kernel(smxDataType_t statistics_dtype) {
    return statistics_dtype == SMX_DTYPE_F64 ? reinterpret_cast<const void*>(&ce_finish<double>)
                                             : reinterpret_cast<const void*>(&ce_finish<float>);
}

}  // namespace smx::cuda
