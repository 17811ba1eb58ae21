// general.cu - the log-probability operators on any layout (Spatial and General, and Rows with a dlogits dtype
// ce-regs has no instance for): a warp per row, or the whole CTA for long rows, each row found from its
// multi-index in every operand slot. Statistics in one strided pass, then the row's result; cross-entropy with
// dlogits reads the row again to write them. Cross-entropy leaves its loss and lse compact in the workspace
// (one per row), for the per-row kernel to reduce or scatter: the parameter block holds three operands' strides,
// not five. Traffic: x read once (twice with dlogits), uncoalesced where the axis is strided: right for every
// layout, not fast (performance.md#log-probabilities).
#include "cuda/logprobs/rows.cuh"

namespace smx::cuda {
namespace {

template <class X, class D>
__global__ void __launch_bounds__(kGeneralThreads) logprobs_general(const ParamBlock<LogprobsGeneralParams> args) {
    begin_dependent_kernel();
    using C = PairComputeType<X, D>;  // double where either side is f64
    using S = ComputeType<X>;         // the statistics dtype the results are stored in
    __shared__ RowStats<C> scratch[33];
    __shared__ C target_logit_sink;
    const X* x = static_cast<const X*>(args.operand.x);
    const int group_size = args.threads_per_row;  // 32, or blockDim.x
    const bool whole_block = group_size == static_cast<int>(blockDim.x);
    const int groups = blockDim.x / group_size;
    const int group = threadIdx.x / group_size;
    const int lane = threadIdx.x % group_size;
    const IndexSpace& space = args.space;
    const int ndim = args.ndim;
    const RowOp op = static_cast<RowOp>(args.op);
    const bool index_64 = args.index_64 != 0;
    const std::int64_t n = args.row_len;
    const C eps = static_cast<C>(args.label_smoothing);
    const bool with_mean = op == RowOp::CrossEntropy && eps > C(0);
    const C inv_n = n > 0 ? C(1) / static_cast<C>(n) : C(0);

    // The loop bound is per block so every thread reaches every barrier and shuffle.
    for (std::int64_t block_row = static_cast<std::int64_t>(blockIdx.x) * groups; block_row < args.rows;
         block_row += static_cast<std::int64_t>(gridDim.x) * groups) {
        const std::int64_t row = block_row + group;
        const bool valid = row < args.rows;
        const std::int64_t x_offset = valid ? space_offset(space, ndim, 0, row) : 0;
        const auto value_at = [&](std::int64_t j) { return C(to_compute(x[x_offset + j * space.axis_stride[0]])); };

        // Cross-entropy: the target and its logit first, the logit kept where the group's barrier or shuffle
        // below orders it before any dlogit is written (in place, dlogits may be the logits).
        std::int64_t t = 0;
        C target_logit = 0;
        if (op == RowOp::CrossEntropy && valid) {
            t = load_index(args.operand.index, space_offset(space, ndim, 2, row), index_64);
            if (lane == 0 && t >= 0 && t < n) target_logit = value_at(t);
        }
        RowStats<C> stats = strided_stats(value_at, valid ? n : 0, lane, group_size, inv_n, with_mean);
        if (whole_block) {
            // Stored (volatile: never read back) so the load completes before the barriers in cta_stats.
            if (threadIdx.x == 0) *static_cast<volatile C*>(&target_logit_sink) = target_logit;
            stats = cta_stats(stats, scratch);
        } else {
            stats = lane_group_stats(stats, 32);
            target_logit = __shfl_sync(0xffffffffu, target_logit, 0);  // lane 0's load completes before the shuffle
        }
        if (!valid) continue;
        const RowResult<C> result = row_result(stats);

        switch (op) {
            case RowOp::Logsumexp:
                if (lane == 0) static_cast<S*>(args.operand.out)[space_offset(space, ndim, 1, row)] = static_cast<S>(result.lse);
                break;
            case RowOp::Gather: {
                const std::int64_t index_offset = space_offset(space, ndim, 1, row);
                const std::int64_t out_offset = space_offset(space, ndim, 2, row);
                for (std::int64_t k = lane; k < args.gathered; k += group_size) {
                    const std::int64_t i = load_index(args.operand.index, index_offset + k * space.axis_stride[1], index_64);
                    static_cast<S*>(args.operand.out)[out_offset + k * space.axis_stride[2]] =
                        static_cast<S>(gathered_log_prob(result, i, n, value_at));
                }
                break;
            }
            case RowOp::CrossEntropy: {
                const CrossEntropyRow<C> ce = cross_entropy_row(result, stats.mean, t, n, args.ignore_index, eps, target_logit);
                if (lane == 0) {
                    workspace_row_losses<S>(args.operand.workspace)[row] = {static_cast<S>(ce.loss), ce.ignored ? S(0) : S(1)};
                    workspace_row_lse<S>(args.operand.workspace, args.rows)[row] = static_cast<S>(result.lse);
                }
                if (args.operand.dlogits == nullptr) break;
                D* d = static_cast<D*>(args.operand.dlogits) + space_offset(space, ndim, 1, row);
                const std::int64_t d_axis_stride = space.axis_stride[1];
                if (!ce.valid) {
                    const D constant = StoreAs<D>::from(ce.ignored ? C(0) : nan_of<C>());
                    for (std::int64_t j = lane; j < n; j += group_size) d[j * d_axis_stride] = constant;
                    break;
                }
                const C scale = gradient_scale<C>(args.operand.workspace, args.reduction);
                with_shifted_exp(result.lse, [&](const auto& exp) {
                    const GradientRow<C> g = gradient_row(true, false, t, n, eps, scale, exp.unbias());
                    for (std::int64_t j = lane; j < n; j += group_size) {
                        C value = g.element(value_at(j), exp);
                        if (j == t) value -= g.target_adjust;
                        d[j * d_axis_stride] = StoreAs<D>::from(value);
                    }
                });
                break;
            }
        }
    }
}

}  // namespace

const void* logprobs_general_kernel(smxDataType_t x_dtype, smxDataType_t dlogits_dtype) {
    return visit_any_dtype_pair(x_dtype, dlogits_dtype, [](auto x_tag, auto d_tag) -> const void* {
        return reinterpret_cast<const void*>(
            &logprobs_general<typename decltype(x_tag)::type, typename decltype(d_tag)::type>);
    });
}

}  // namespace smx::cuda
