// regs_bf16.cu - ce-regs' instances for bf16 logits (one file per logits dtype builds in parallel).
#include "cuda/logprobs/regs.cuh"

namespace smx::cuda {

const void* ce_regs_kernel_bf16(smxDataType_t dlogits_dtype, int values_per_thread) {
    return ce_regs_for_logits<__nv_bfloat16>(dlogits_dtype, values_per_thread);
}

}  // namespace smx::cuda
