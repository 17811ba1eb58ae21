// block_smem_softmax.cu - medium/long rows, Rows layout: a thread-block cluster of C CTAs (C = 1 is the
// classic block-smem kernel) per row. Each CTA copies its slice of the row into shared memory in the INPUT
// dtype (cp.async, 16 bytes at a time after a peeled unaligned head), block-reduces max then sum, combines
// the per-CTA partials across the cluster through distributed shared memory, then writes y from shared
// memory. Traffic: x read once, y written once. Clusters iterate over rows (persistent grid).
#include <cooperative_groups.h>

#include "cuda/softmax_common.cuh"

namespace smx::cuda {
namespace {

__device__ __forceinline__ void copy_16_bytes_async(void* shared_target, const void* global_source) {
    const unsigned shared_address = static_cast<unsigned>(__cvta_generic_to_shared(shared_target));
    const std::size_t global_address = __cvta_generic_to_global(global_source);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(shared_address), "l"(global_address) : "memory");
}

__device__ __forceinline__ void wait_async_copies() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }

// This CTA's rank in its cluster and the cluster size (1 and 0 without cluster support).
struct ClusterPlace {
    unsigned rank;
    unsigned size;
};

__device__ __forceinline__ ClusterPlace cluster_place() {
#if __CUDA_ARCH__ >= 900
    const cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();
    return {cluster.block_rank(), cluster.num_blocks()};
#else
    return {0u, 1u};
#endif
}

__device__ __forceinline__ void cluster_barrier() {
#if __CUDA_ARCH__ >= 900
    cooperative_groups::this_cluster().sync();
#else
    __syncthreads();
#endif
}

// Slot `slot` of CTA `rank`'s exchange array (distributed shared memory on sm_90).
template <class C>
__device__ __forceinline__ C read_peer_slot(C* exchange, int slot, unsigned rank) {
#if __CUDA_ARCH__ >= 900
    return *cooperative_groups::this_cluster().map_shared_rank(exchange + slot, rank);
#else
    return exchange[slot];
#endif
}

template <class X, class Y>
__global__ void __launch_bounds__(1024) block_smem_softmax(const SoftmaxKernelArgs args) {
    using C = ComputeType<X>;
    constexpr int kPack = kPackOf<X>;
    extern __shared__ __align__(16) unsigned char dynamic_shared[];
    __shared__ C warp_scratch[32];
    __shared__ C exchange[2];  // this CTA's max and sum for the row, read by its cluster peers

    const X* x = static_cast<const X*>(args.x);
    Y* y = static_cast<Y*>(args.y);
    const bool log_mode = args.log_mode != 0;
    const ClusterPlace place = cluster_place();
    const std::int64_t first_cluster = blockIdx.x / place.size;
    const std::int64_t cluster_count = gridDim.x / place.size;
    const std::int64_t slice_begin = static_cast<std::int64_t>(place.rank) * args.slice_len;
    const std::int64_t remaining = args.row_len - slice_begin;
    const int count = static_cast<int>(remaining < 0 ? 0 : (remaining < args.slice_len ? remaining : args.slice_len));
    const int tid = threadIdx.x;
    const int threads = blockDim.x;

    for (std::int64_t row = first_cluster; row < args.rows; row += cluster_count) {
        const X* x_slice = x + row * args.x_row_stride + slice_begin;
        // Element k of the slice lives at cache[k]; cache = base + shift makes 16-byte-aligned global
        // addresses land on 16-byte-aligned shared addresses, so the body copies in 16-byte units.
        const int shift = static_cast<int>(reinterpret_cast<std::uintptr_t>(x_slice) % 16 / sizeof(X));
        const int head = shift == 0 ? 0 : min(count, kPack - shift);
        const int body_packs = (count - head) / kPack;
        const int tail_begin = head + body_packs * kPack;
        X* cache = reinterpret_cast<X*>(dynamic_shared) + shift;

        __syncthreads();  // the previous row's writers are done reading the cache
        for (int k = tid; k < head; k += threads) cache[k] = x_slice[k];
        for (int p = tid; p < body_packs; p += threads) {
            copy_16_bytes_async(cache + head + p * kPack, x_slice + head + p * kPack);
        }
        for (int k = tail_begin + tid; k < count; k += threads) cache[k] = x_slice[k];
        wait_async_copies();
        __syncthreads();

        C thread_max = neg_inf<C>();
        for (int k = tid; k < head; k += threads) thread_max = max_nan(thread_max, to_compute(cache[k]));
        for (int p = tid; p < body_packs; p += threads) {
            C values[kPack];
            load_pack(cache + head + p * kPack, values);
#pragma unroll
            for (int k = 0; k < kPack; ++k) thread_max = max_nan(thread_max, values[k]);
        }
        for (int k = tail_begin + tid; k < count; k += threads) thread_max = max_nan(thread_max, to_compute(cache[k]));
        C row_max = block_max(thread_max, warp_scratch);
        if (place.size > 1) {
            if (tid == 0) exchange[0] = row_max;
            cluster_barrier();
            row_max = read_peer_slot(exchange, 0, 0);
            for (unsigned r = 1; r < place.size; ++r) row_max = max_nan(row_max, read_peer_slot(exchange, 0, r));
        }

        // An all -inf row makes exp(NaN) here and NaN outputs, as the reference does.
        C thread_sum = 0;
        for (int k = tid; k < head; k += threads) thread_sum += exp_of(to_compute(cache[k]) - row_max);
        for (int p = tid; p < body_packs; p += threads) {
            C values[kPack];
            load_pack(cache + head + p * kPack, values);
#pragma unroll
            for (int k = 0; k < kPack; ++k) thread_sum += exp_of(values[k] - row_max);
        }
        for (int k = tail_begin + tid; k < count; k += threads) thread_sum += exp_of(to_compute(cache[k]) - row_max);
        C row_sum = block_sum(thread_sum, warp_scratch);
        if (place.size > 1) {
            if (tid == 0) exchange[1] = row_sum;
            cluster_barrier();
            row_sum = read_peer_slot(exchange, 1, 0);
            for (unsigned r = 1; r < place.size; ++r) row_sum += read_peer_slot(exchange, 1, r);
        }

        const C inverse_sum = C(1) / row_sum;
        const C log_sum = log_of(row_sum);
        Y* y_slice = y + row * args.y_row_stride + slice_begin;
        const bool y_packs_aligned =
            reinterpret_cast<std::uintptr_t>(y_slice + head) % kStoreAlignment<Y, kPack> == 0;
        for (int k = tid; k < head; k += threads) {
            y_slice[k] = StoreAs<Y>::from(softmax_output(to_compute(cache[k]) - row_max, inverse_sum, log_sum, log_mode));
        }
        for (int p = tid; p < body_packs; p += threads) {
            const int first = head + p * kPack;
            C values[kPack];
            load_pack(cache + first, values);
#pragma unroll
            for (int k = 0; k < kPack; ++k) values[k] = softmax_output(values[k] - row_max, inverse_sum, log_sum, log_mode);
            if (y_packs_aligned) {
                store_pack<Y, kPack>(y_slice + first, values);
            } else {
#pragma unroll
                for (int k = 0; k < kPack; ++k) y_slice[first + k] = StoreAs<Y>::from(values[k]);
            }
        }
        for (int k = tail_begin + tid; k < count; k += threads) {
            y_slice[k] = StoreAs<Y>::from(softmax_output(to_compute(cache[k]) - row_max, inverse_sum, log_sum, log_mode));
        }
    }
    // Peers may still be reading this CTA's exchange slots: stay resident until the whole cluster is done.
    if (place.size > 1) cluster_barrier();
}

}  // namespace

const void* block_smem_softmax_kernel(smxDataType_t x_dtype, smxDataType_t y_dtype) {
    return visit_dtype_pair(x_dtype, y_dtype, [](auto x_tag, auto y_tag) -> const void* {
        return reinterpret_cast<const void*>(
            &block_smem_softmax<typename decltype(x_tag)::type, typename decltype(y_tag)::type>);
    });
}

}  // namespace smx::cuda
