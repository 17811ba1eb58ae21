/* smx.h - softmax-family operators on CPU and CUDA devices behind a stable C ABI.
 *
 * Usage, in four calls after the descriptors exist:
 *   smxCreate(&handle, SMX_DEVICE_CUDA, 0);
 *   smxCreateTensorDescriptor(&xDesc, SMX_DTYPE_F32, 2, shape, NULL);     // NULL strides: row-major
 *   smxCreateSoftmaxDescriptor(handle, &desc, SMX_SOFTMAX, -1, yDesc, xDesc);
 *   smxGetSoftmaxWorkspaceSize(desc, &bytes);
 *   smxSoftmaxForward(desc, workspace, bytes, y, x, stream);               // launches only
 * The gradient has the same shape: smxCreateSoftmaxBackwardDescriptor, smxGetSoftmaxBackwardWorkspaceSize,
 * smxSoftmaxBackward(bwd, workspace, bytes, dx, dy, y, stream).
 *
 * Every function returns an smxStatus_t (see smx_status.h); outputs come back through pointer arguments.
 * Descriptor creation validates everything and chooses the execution plan, so forward only launches.
 * Thread safety: distinct handles and descriptors may be used from distinct threads at once; one
 * descriptor may be used by several threads at once for its compute calls (it is read-only after creation).
 * Objects: every function taking a handle or descriptor refuses NULL (SMX_STATUS_BAD_PARAM_NULL_POINTER)
 * and, with SMX_STATUS_BAD_PARAM_OBJECT, an object of another kind cast to it, or one already destroyed
 * where its memory still shows it (the common case; using a destroyed object stays undefined behaviour).
 * docs/api.md gives the full semantics. */
#ifndef SMX_H
#define SMX_H

#include <stddef.h>
#include <stdint.h>

#include "smx_export.h"
#include "smx_status.h"
#include "smx_version.h"

SMX_EXTERN_C_BEGIN

/** The most dimensions a tensor descriptor may have. */
#define SMX_MAX_DIMS 8

/* ------------------------------------------------------------------------------------------------ */
/* Handle                                                                                           */
/* ------------------------------------------------------------------------------------------------ */

/** Where a handle computes. */
typedef enum smxDeviceType_t {
    SMX_DEVICE_CPU = 1,  /**< the host's cores; the reference backend, always built */
    SMX_DEVICE_CUDA = 2  /**< an NVIDIA GPU; needs a library built with CUDA */
} smxDeviceType_t;

/** A handle binds smx to one device and caches that device's limits. */
typedef struct smxHandle* smxHandle_t;

/** Creates a handle on device `deviceId` of type `deviceType`.
 *  CPU: deviceId must be 0. CUDA: deviceId is the CUDA runtime's ordinal; the device's properties
 *  (max threads per block, SM count, opt-in shared memory, cluster support, L2 size) are read once here.
 *  Fails with SMX_STATUS_BAD_PARAM_NULL_POINTER (handle NULL), SMX_STATUS_BAD_PARAM_DEVICE (unknown
 *  type, or id out of range), SMX_STATUS_NOT_SUPPORTED_BACKEND_NOT_BUILT (CUDA asked of a CPU-only build),
 *  SMX_STATUS_NOT_SUPPORTED_DEVICE_ABSENT (no CUDA device or driver). On failure *handle is set to NULL. */
SMX_API smxStatus_t smxCreate(smxHandle_t* handle, smxDeviceType_t deviceType, int deviceId);

/** Destroys a handle. NULL is a no-op. Descriptors created from it must be destroyed first.
 *  Fails with SMX_STATUS_BAD_PARAM_OBJECT, freeing nothing, for what is not a live handle. */
SMX_API smxStatus_t smxDestroy(smxHandle_t handle);

/** Reports the device type and id a handle was created with. Either output may be NULL. */
SMX_API smxStatus_t smxGetHandleDevice(smxHandle_t handle, smxDeviceType_t* deviceType, int* deviceId);

/** Whether the compute calls of descriptors created from this handle afterwards check, on a CUDA handle,
 *  that their data pointers are memory of the handle's device (cudaPointerGetAttributes per pointer, about a
 *  microsecond each): 1 (the default) checks and refuses others with SMX_STATUS_BAD_PARAM_DEVICE; 0 skips
 *  the check, for callers that already know their pointers (a framework binding): a host or other-device
 *  pointer then faults in the kernel. Every other check stays. No effect on CPU handles (accepted).
 *  Fails with SMX_STATUS_BAD_PARAM_OBJECT for what is not a live handle, SMX_STATUS_BAD_PARAM_MODE for an
 *  `enabled` other than 0 or 1.*/
SMX_API smxStatus_t smxSetDevicePointerChecks(smxHandle_t handle, int enabled);

/* ------------------------------------------------------------------------------------------------ */
/* Tensor descriptor                                                                                */
/* ------------------------------------------------------------------------------------------------ */

/** Element types. */
typedef enum smxDataType_t {
    SMX_DTYPE_F16 = 1,   /**< IEEE binary16 */
    SMX_DTYPE_BF16 = 2,  /**< bfloat16 (the top half of a binary32) */
    SMX_DTYPE_F32 = 3,   /**< IEEE binary32 */
    SMX_DTYPE_F64 = 4,   /**< IEEE binary64 */
    SMX_DTYPE_I32 = 5,   /**< int32_t: indices and class targets only; every floating operand refuses it */
    SMX_DTYPE_I64 = 6,   /**< int64_t: indices and class targets only; every floating operand refuses it */
    SMX_DTYPE_BOOL = 7   /**< one byte per element, 0 false, anything else true: softmax keep-masks only */
} smxDataType_t;

/** Describes a strided N-d tensor: dtype, shape and strides. It holds no data pointer. */
typedef struct smxTensorDescriptor* smxTensorDescriptor_t;

/** Creates a tensor descriptor.
 *  ndim is 1..SMX_MAX_DIMS; shape[i] >= 0 (0 gives an empty tensor); strides[i] are in elements and may
 *  be negative or zero (zero broadcasts an input); strides NULL means row-major (C-contiguous).
 *  The descriptor copies shape and strides: the caller may free its arrays right after the call.
 *  Fails with SMX_STATUS_BAD_PARAM_NULL_POINTER (desc or shape NULL), _DTYPE, _NDIM, _SHAPE (a negative
 *  dim, sizes whose product (ignoring zeros) overflows int64, or with NULL strides a byte size that
 *  overflows int64), _STRIDES (the span of the strides, in elements or in bytes, overflows int64). */
SMX_API smxStatus_t smxCreateTensorDescriptor(smxTensorDescriptor_t* desc, smxDataType_t dtype, int ndim,
                                              const int64_t* shape, const int64_t* strides);

/** Reads a tensor descriptor back. Any output may be NULL; shape and strides, when given, must hold
 *  SMX_MAX_DIMS entries (the first ndim are written). Strides come back explicit, never NULL-as-row-major. */
SMX_API smxStatus_t smxGetTensorDescriptor(smxTensorDescriptor_t desc, smxDataType_t* dtype, int* ndim,
                                           int64_t* shape, int64_t* strides);

/** Destroys a tensor descriptor. NULL is a no-op. Softmax descriptors built from it stay valid.
 *  Fails with SMX_STATUS_BAD_PARAM_OBJECT, freeing nothing, for what is not a live tensor descriptor. */
SMX_API smxStatus_t smxDestroyTensorDescriptor(smxTensorDescriptor_t desc);

/* ------------------------------------------------------------------------------------------------ */
/* Softmax                                                                                          */
/* ------------------------------------------------------------------------------------------------ */

/** What a softmax descriptor computes along its axis. */
typedef enum smxSoftmaxMode_t {
    SMX_SOFTMAX = 1,     /**< y = exp(x - max) / sum(exp(x - max)) */
    SMX_LOG_SOFTMAX = 2  /**< y = x - max - log(sum(exp(x - max))) */
} smxSoftmaxMode_t;

/** A validated softmax problem with its chosen execution plan. Read-only after creation. */
typedef struct smxSoftmaxDescriptor* smxSoftmaxDescriptor_t;

/** Creates a softmax descriptor: validates the problem and chooses the plan for the handle's device.
 *  axis is in [-ndim, ndim) (negative counts from the end). x and y must have the same shape; their
 *  strides may differ. Supported dtype pairs: any of F16/BF16/F32 to any of F16/BF16/F32 (mixed precision
 *  computes in float32), and F64 to F64 (computes in float64).
 *  The descriptor copies what it needs from xDesc and yDesc, which may be destroyed right after.
 *  Fails with SMX_STATUS_BAD_PARAM_NULL_POINTER, _MODE, _SHAPE (x and y shapes differ), _AXIS,
 *  _OVERLAP (y's strides make distinct elements share memory, e.g. a zero stride),
 *  SMX_STATUS_NOT_SUPPORTED_DTYPE_PAIR, or SMX_STATUS_ALLOC_FAILED. */
SMX_API smxStatus_t smxCreateSoftmaxDescriptor(smxHandle_t handle, smxSoftmaxDescriptor_t* desc,
                                               smxSoftmaxMode_t mode, int axis,
                                               smxTensorDescriptor_t yDesc, smxTensorDescriptor_t xDesc);

/** The workspace, in bytes, that smxSoftmaxForward needs with this descriptor (often 0).
 *  Workspace is device memory on a CUDA handle, host memory on a CPU handle; it needs no initial value and
 *  must be aligned to 16 bytes (cudaMalloc's 256 is plenty); a misaligned one gives
 *  SMX_STATUS_BAD_PARAM_ALIGNMENT, even where the size is 0 (NULL is always accepted then). */
SMX_API smxStatus_t smxGetSoftmaxWorkspaceSize(smxSoftmaxDescriptor_t desc, size_t* workspaceBytes);

/** The chosen plan as text, e.g. "cuda warp rows_per_warp=2 lanes=8 pack=4" or
 *  "cpu reference layout=rows threads=16".
 *  The string belongs to the descriptor and lives until it is destroyed. */
SMX_API smxStatus_t smxGetSoftmaxPlan(smxSoftmaxDescriptor_t desc, const char** plan);

/** Computes y = softmax(x) (or log-softmax) along the descriptor's axis.
 *  y and x point at element [0, ..., 0] of their tensors (device memory for a CUDA handle, host memory for
 *  a CPU handle), each aligned to its element size. In-place (y == x with identical strides and element
 *  size) is allowed; any other overlap of y with x is refused with SMX_STATUS_BAD_PARAM_OVERLAP.
 *  CUDA: enqueues on `stream` (a cudaStream_t; NULL is the default stream) and returns without waiting;
 *  it never synchronizes or allocates, so it may be captured in a CUDA graph. CPU: `stream` is ignored and
 *  the call returns when y is written; a worker thread that cannot be started leaves its rows to the
 *  calling thread rather than failing the call. Tensors with zero elements succeed and do nothing.
 *  Semantics follow PyTorch: a row holding +inf or NaN gives NaN for the whole row; a row of all -inf
 *  gives NaN; -inf among finite values gives 0 (log: -inf); an axis of size 1 gives 1 (log: 0).
 *  Fails with SMX_STATUS_BAD_PARAM_NULL_POINTER (desc, or x/y with elements to compute, or a descriptor whose
 *  options need data: smxSoftmaxForwardWithOptions), _WORKSPACE (workspaceBytes below the queried size),
 *  _OVERLAP, _ALIGNMENT, _DEVICE (CUDA: x or y is not memory of the handle's device),
 *  SMX_STATUS_EXECUTION_FAILED (a CUDA launch failed). */
SMX_API smxStatus_t smxSoftmaxForward(smxSoftmaxDescriptor_t desc, void* workspace, size_t workspaceBytes,
                                      void* y, const void* x, void* stream);

/** Destroys a softmax descriptor. NULL is a no-op. Work already enqueued with it is unaffected.
 *  Fails with SMX_STATUS_BAD_PARAM_OBJECT, freeing nothing, for what is not a live softmax descriptor. */
SMX_API smxStatus_t smxDestroySoftmaxDescriptor(smxSoftmaxDescriptor_t desc);

/* ------------------------------------------------------------------------------------------------ */
/* Softmax options: scale, mask, causal, masked rows, batch invariance                             */
/* ------------------------------------------------------------------------------------------------ */
/* Options fused into the softmax's own pass (docs/api.md, "Softmax options", gives every rule). Per row,
 * along the axis, with s the scale and a the additive mask (1 and 0 where unset):
 *     z_j = s * x_j + a_j      for the kept elements j (keep-mask true, inside the causal window)
 *     y   = softmax(z) or log_softmax(z) over the kept elements; excluded elements give 0 (log: -inf)
 * in IEEE arithmetic (an additive -inf gives 0, log -inf, where x is finite; NaN where x is NaN or +-inf, as
 * x + mask does in PyTorch). An excluded element is not read: a NaN or +inf there does not reach the row. A
 * row whose kept z include a NaN or +inf is NaN everywhere (as masked_fill then softmax makes it); a row
 * whose every kept z is -inf (or with nothing kept) gives NaN, as PyTorch does, or, with
 * SMX_MASKED_ROWS_ZERO, 0 (log: -inf).
 * Options live in an options object, set one by one; a descriptor created with it copies them, so the object
 * may be changed or destroyed afterwards. Tensor options (a per-row scale, a mask) are described here and
 * their data passed at each compute call. */

/** What a row with nothing left to normalize gives: no element kept (keep-mask, causal), or every kept
 *  element's scaled and masked value -inf. */
typedef enum smxMaskedRows_t {
    SMX_MASKED_ROWS_NAN = 0, /**< NaN, as PyTorch's softmax (the default) */
    SMX_MASKED_ROWS_ZERO = 1 /**< softmax 0, log-softmax -inf, as PyTorch's _safe_softmax and oneDNN's inf_as_zero */
} smxMaskedRows_t;

/** A set of softmax options, read when a descriptor is created with it. Not thread-safe while being set. */
typedef struct smxSoftmaxOptions* smxSoftmaxOptions_t;

/** Creates an options object holding the defaults: scale 1, no mask, not causal, SMX_MASKED_ROWS_NAN, not
 *  batch-invariant (a descriptor created with it computes what smxCreateSoftmaxDescriptor's would).
 *  Fails with SMX_STATUS_BAD_PARAM_NULL_POINTER (options NULL) or SMX_STATUS_ALLOC_FAILED; on failure
 *  *options is set to NULL. */
SMX_API smxStatus_t smxCreateSoftmaxOptions(smxSoftmaxOptions_t* options);

/** Destroys an options object. NULL is a no-op. Descriptors created with it are unaffected.
 *  Fails with SMX_STATUS_BAD_PARAM_OBJECT, freeing nothing, for what is not a live options object. */
SMX_API smxStatus_t smxDestroySoftmaxOptions(smxSoftmaxOptions_t options);

/** Sets one scale for every row: z = scale * x. Any double, NaN and infinities included (they act as IEEE
 *  arithmetic says: scale 0 makes every finite row uniform, 0 * inf is NaN); computed in the descriptor's
 *  compute type (float32, or float64 where x or y is F64), so a scale beyond float32's range is infinite
 *  there. Replaces a per-row scale set before. Fails with SMX_STATUS_BAD_PARAM_NULL_POINTER or _OBJECT. */
SMX_API smxStatus_t smxSetSoftmaxScale(smxSoftmaxOptions_t options, double scale);

/** Sets a scale per row: z = scale[row] * x, the scale's data passed at each compute call.
 *  scaleDesc: F32, x's shape without the axis (or with the axis of size 1; a 1-d x takes shape [1]), any
 *  strides (zero strides broadcast one factor over several rows); checked against x when a descriptor is
 *  created. The object copies the descriptor (scaleDesc may be destroyed right after). NULL removes the
 *  scale (scale 1). Replaces a scalar scale set before.
 *  Fails with SMX_STATUS_BAD_PARAM_NULL_POINTER (options NULL), _OBJECT (options or scaleDesc not live),
 *  SMX_STATUS_NOT_SUPPORTED_DTYPE_PAIR (scaleDesc is not F32). */
SMX_API smxStatus_t smxSetSoftmaxScaleTensor(smxSoftmaxOptions_t options, smxTensorDescriptor_t scaleDesc);

/** Sets a mask, its data passed at each compute call. Its dtype says what it is:
 *   SMX_DTYPE_BOOL: a keep-mask (nonzero keeps the element; a zero byte excludes it, unread);
 *   F16, BF16, F32, F64: an additive mask, z = scale * x + mask (a -inf makes the element 0, log -inf).
 *  maskDesc is broadcast to x's shape by NumPy's rules (its dims align with x's last ones; each of its sizes
 *  is x's or 1; fewer dims than x are fine) and read through its strides (zero strides welcome); checked
 *  against x when a descriptor is created. The object copies the descriptor. NULL removes the mask.
 *  Fails with SMX_STATUS_BAD_PARAM_NULL_POINTER (options NULL), _OBJECT, SMX_STATUS_NOT_SUPPORTED_DTYPE_PAIR
 *  (a dtype that is neither BOOL nor floating). */
SMX_API smxStatus_t smxSetSoftmaxMask(smxSoftmaxOptions_t options, smxTensorDescriptor_t maskDesc);

/** Sets a causal window: with x's last two dims (i, j) and the softmax along the last one, element j of row
 *  i is kept when j <= i + offset (offset 0 is PyTorch SDPA's is_causal; keys - queries aligns the window to
 *  the bottom right; a row whose window is empty has nothing kept). enabled 0 removes it. A descriptor
 *  needs x of 2 or more dims and the axis the last one. Combines with a mask: an element is kept when both
 *  keep it. Fails with SMX_STATUS_BAD_PARAM_NULL_POINTER, _OBJECT, _MODE (enabled other than 0 or 1). */
SMX_API smxStatus_t smxSetSoftmaxCausal(smxSoftmaxOptions_t options, int enabled, int64_t offset);

/** Sets what a row with nothing left to normalize gives (smxMaskedRows_t); SMX_MASKED_ROWS_NAN by default.
 *  Fails with SMX_STATUS_BAD_PARAM_NULL_POINTER, _OBJECT, _MODE (not an smxMaskedRows_t). */
SMX_API smxStatus_t smxSetSoftmaxMaskedRows(smxSoftmaxOptions_t options, smxMaskedRows_t maskedRows);

/** enabled 1: a row's result is the same bits whatever the number of rows, the row's position among them and
 *  the plan the other rows would get: it depends only on the row's values (and its scale and mask values), its
 *  length, the dtypes, the mode, which options are set and the layout (whether x, y and the mask are contiguous
 *  along the axis; on CUDA also the row's start address modulo 16 bytes, which every row of a contiguous
 *  tensor from an aligned allocation shares), because the plan is chosen from those alone. The same row in a
 *  transposed x may give other bits (docs/api.md says why, and what it costs). 0 (the default): the fastest
 *  plan for each shape, whose results agree with one another within the documented tolerances, not bit for
 *  bit. Fails with SMX_STATUS_BAD_PARAM_NULL_POINTER, _OBJECT, _MODE (enabled other than 0 or 1). */
SMX_API smxStatus_t smxSetSoftmaxBatchInvariant(smxSoftmaxOptions_t options, int enabled);

/** smxCreateSoftmaxDescriptor with options (NULL: none, exactly smxCreateSoftmaxDescriptor). The options are
 *  copied; `options` may be changed or destroyed right after. Beyond smxCreateSoftmaxDescriptor's checks,
 *  fails with SMX_STATUS_BAD_PARAM_OBJECT (options not live), _SHAPE (a per-row scale not of x's shape
 *  without the axis; a mask not broadcastable to x), _NDIM (causal with a 1-d x, or a mask of more dims than
 *  x), _AXIS (causal along another axis than the last). */
SMX_API smxStatus_t smxCreateSoftmaxDescriptorWithOptions(smxHandle_t handle, smxSoftmaxDescriptor_t* desc,
                                                          smxSoftmaxMode_t mode, int axis,
                                                          smxTensorDescriptor_t yDesc, smxTensorDescriptor_t xDesc,
                                                          smxSoftmaxOptions_t options);

/** smxSoftmaxForward with the data of the descriptor's tensor options: `scale` (the per-row factors) and
 *  `mask`, each pointing at element [0, ..., 0] of its tensor (memory of the handle's device, aligned to its
 *  element size), and NULL where the descriptor has no such option (smxSoftmaxForward is this call with both
 *  NULL, and refuses a descriptor that needs either). y may not overlap them. Checks as smxSoftmaxForward,
 *  and fails with SMX_STATUS_BAD_PARAM_NULL_POINTER (a pointer the descriptor needs is NULL), SMX_STATUS_BAD_PARAM
 *  (a pointer given for an option the descriptor does not have), _ALIGNMENT, _OVERLAP, _DEVICE. */
SMX_API smxStatus_t smxSoftmaxForwardWithOptions(smxSoftmaxDescriptor_t desc, void* workspace, size_t workspaceBytes,
                                                 void* y, const void* x, const void* scale, const void* mask,
                                                 void* stream);

/* ------------------------------------------------------------------------------------------------ */
/* Softmax backward                                                                                 */
/* ------------------------------------------------------------------------------------------------ */

/** A validated softmax or log-softmax backward problem with its chosen plan. Read-only after creation. */
typedef struct smxSoftmaxBackwardDescriptor* smxSoftmaxBackwardDescriptor_t;

/** Creates a backward descriptor: dx, the gradient of the forward's input, from dy (the gradient of its output)
 *  and y (its output), along `axis`:
 *    SMX_SOFTMAX:     dx = y * (dy - sum(dy * y))
 *    SMX_LOG_SOFTMAX: dx = dy - exp(y) * sum(dy)
 *  axis is in [-ndim, ndim) (negative counts from the end). dx, dy and y must have the same shape; their
 *  strides may differ, and dy and y may broadcast (zero strides). dy and y must share one dtype (the forward's
 *  output dtype); dx may be any of F16/BF16/F32/F64 (the forward's input dtype). Computed in float32, or in
 *  float64 where any of the three is F64, and rounded once to dx's dtype.
 *  The descriptor copies what it needs from the tensor descriptors, which may be destroyed right after.
 *  Fails with SMX_STATUS_BAD_PARAM_NULL_POINTER, _OBJECT, _MODE, _SHAPE (the three shapes differ), _AXIS,
 *  _OVERLAP (dx's strides make distinct elements share memory, e.g. a zero stride),
 *  SMX_STATUS_NOT_SUPPORTED_DTYPE_PAIR (dy's dtype is not y's), or SMX_STATUS_ALLOC_FAILED. On failure *desc
 *  is set to NULL. */
SMX_API smxStatus_t smxCreateSoftmaxBackwardDescriptor(smxHandle_t handle, smxSoftmaxBackwardDescriptor_t* desc,
                                                       smxSoftmaxMode_t mode, int axis, smxTensorDescriptor_t dxDesc,
                                                       smxTensorDescriptor_t dyDesc, smxTensorDescriptor_t yDesc);

/** The workspace, in bytes, that smxSoftmaxBackward needs with this descriptor (often 0); same rules as
 *  smxGetSoftmaxWorkspaceSize (device memory on a CUDA handle, host memory on a CPU one, no initial value,
 *  16-byte aligned). */
SMX_API smxStatus_t smxGetSoftmaxBackwardWorkspaceSize(smxSoftmaxBackwardDescriptor_t desc, size_t* workspaceBytes);

/** The chosen backward plan as text, e.g. "cpu reference backward layout=rows threads=4"; the string belongs
 *  to the descriptor and lives until it is destroyed. */
SMX_API smxStatus_t smxGetSoftmaxBackwardPlan(smxSoftmaxBackwardDescriptor_t desc, const char** plan);

/** Computes dx from dy and y along the descriptor's axis.
 *  dx, dy and y point at element [0, ..., 0] of their tensors (device memory for a CUDA handle, host memory
 *  for a CPU handle), each aligned to its element size. In place, dx == dy with identical strides and element
 *  size, is allowed; dx may meet dy in no other way, and may not share any memory with y (dx == y included),
 *  all refused with SMX_STATUS_BAD_PARAM_OVERLAP.
 *  CUDA: enqueues on `stream` (a cudaStream_t; NULL is the default stream) and returns without waiting; it
 *  never synchronizes or allocates, so it may be captured in a CUDA graph. CPU: `stream` is ignored and the
 *  call returns when dx is written; a worker thread that cannot be started leaves its rows to the calling
 *  thread rather than failing the call. Tensors with zero elements succeed and do nothing.
 *  Special values follow PyTorch, whose formulas these are, evaluated in IEEE arithmetic (docs/api.md lists
 *  the cases): a NaN in a row's dy (softmax: or y) makes the whole row's dx NaN; log-softmax: a NaN in y gives
 *  NaN at that element only, and y = -inf gives dx = dy there (for a finite sum(dy)). With the forward's y
 *  of an axis of size 1 (softmax 1, log-softmax 0), dx is 0.
 *  Fails with SMX_STATUS_BAD_PARAM_NULL_POINTER (desc, or dx/dy/y with elements to compute), _OBJECT,
 *  _WORKSPACE (workspaceBytes below the queried size), _ALIGNMENT, _OVERLAP, _DEVICE (CUDA: dx, dy or y is not
 *  memory of the handle's device), SMX_STATUS_EXECUTION_FAILED (a CUDA launch failed). */
SMX_API smxStatus_t smxSoftmaxBackward(smxSoftmaxBackwardDescriptor_t desc, void* workspace, size_t workspaceBytes,
                                       void* dx, const void* dy, const void* y, void* stream);

/** Destroys a backward descriptor. NULL is a no-op. Work already enqueued with it is unaffected.
 *  Fails with SMX_STATUS_BAD_PARAM_OBJECT, freeing nothing, for what is not a live backward descriptor. */
SMX_API smxStatus_t smxDestroySoftmaxBackwardDescriptor(smxSoftmaxBackwardDescriptor_t desc);

/** smxCreateSoftmaxBackwardDescriptor for the forward made with `options` (NULL: none): dx is the gradient
 *  with respect to x of that forward. With the forward's kept set K of a row and g_j the plain formula's
 *  gradient over K (the sums taken over K only: softmax dy_j - sum_K(dy * y), times y_j; log-softmax
 *  dy_j - exp(y_j) * sum_K(dy)):
 *      dx_j = s * g_j  for j in K,      dx_j = 0  for excluded j (keep-mask false, outside the causal window);
 *  with SMX_MASKED_ROWS_ZERO a row whose forward had nothing to normalize (every y 0, log: -inf) gets dx = 0.
 *  Excluded elements of dy and y are not read. batch_invariant applies as in the forward. The options'
 *  shapes are checked against dx's (x's) shape, as the forward checks them against x.
 *  Fails as smxCreateSoftmaxBackwardDescriptor and as smxCreateSoftmaxDescriptorWithOptions. */
SMX_API smxStatus_t smxCreateSoftmaxBackwardDescriptorWithOptions(smxHandle_t handle,
                                                                  smxSoftmaxBackwardDescriptor_t* desc,
                                                                  smxSoftmaxMode_t mode, int axis,
                                                                  smxTensorDescriptor_t dxDesc,
                                                                  smxTensorDescriptor_t dyDesc,
                                                                  smxTensorDescriptor_t yDesc,
                                                                  smxSoftmaxOptions_t options);

/** smxSoftmaxBackward with the data of the descriptor's tensor options (`scale`, `mask`: as for
 *  smxSoftmaxForwardWithOptions, NULL where the descriptor has no such option). dx may not overlap them. An
 *  additive mask's data is checked but not read: it leaves the kept set, hence the gradient, as it is.
 *  Fails as smxSoftmaxBackward, and with SMX_STATUS_BAD_PARAM_NULL_POINTER (data the descriptor needs is NULL,
 *  checked after dy, y, dx and the workspace), SMX_STATUS_BAD_PARAM (data it has no option for),
 *  _ALIGNMENT, _OVERLAP (dx meets the scale or the mask), _DEVICE (CUDA: the data is not device memory). */
SMX_API smxStatus_t smxSoftmaxBackwardWithOptions(smxSoftmaxBackwardDescriptor_t desc, void* workspace,
                                                  size_t workspaceBytes, void* dx, const void* dy, const void* y,
                                                  const void* scale, const void* mask, void* stream);

/* ------------------------------------------------------------------------------------------------ */
/* Log-probabilities: logsumexp, log-softmax gathered at indices, cross-entropy                     */
/* ------------------------------------------------------------------------------------------------ */
/* Shared rules of the three operators below (docs/api.md, "Log-probabilities", says more):
 *  - x (logits) has any floating dtype (F16, BF16, F32, F64) and any strides; `axis` is in [-ndim, ndim).
 *  - A per-row tensor (logsumexp's out, cross-entropy's target, lse and unreduced loss) has x's shape
 *    without the axis, or x's shape with the axis of size 1 ("keepdim"); a 1-d x takes shape [1].
 *  - Results are float32, float64 where x is F64 (a "statistics dtype"); other dtypes are refused with
 *    SMX_STATUS_NOT_SUPPORTED_DTYPE_PAIR, as is an integer dtype where a floating one is needed and the
 *    reverse.
 *  - Written tensors must not overlap themselves nor any other operand (only dlogits may be logits, in
 *    place), and data pointers must be aligned to their element size, as for softmax.
 *  - The compute calls only launch (CUDA: enqueue on `stream`, never synchronize or allocate, so they may be
 *    captured in a CUDA graph); an index or target out of range is never read through: it gives the
 *    documented value instead of a fault. */

/** A validated logsumexp problem with its chosen plan. Read-only after creation. */
typedef struct smxLogsumexpDescriptor* smxLogsumexpDescriptor_t;

/** Creates a logsumexp descriptor: out = log(sum(exp(x))) along `axis`, computed as
 *  max + log(sum(exp(x - max))) so no finite input overflows.
 *  out: x's shape without the axis or with the axis of size 1; F32 (F64 for an F64 x); any strides free of
 *  self-overlap. The descriptor copies what it needs: outDesc and xDesc may be destroyed right after.
 *  Fails with SMX_STATUS_BAD_PARAM_NULL_POINTER, _OBJECT, _AXIS, _SHAPE (out's shape is not x's without the
 *  axis), _OVERLAP (out overlaps itself), SMX_STATUS_NOT_SUPPORTED_DTYPE_PAIR, SMX_STATUS_ALLOC_FAILED. */
SMX_API smxStatus_t smxCreateLogsumexpDescriptor(smxHandle_t handle, smxLogsumexpDescriptor_t* desc, int axis,
                                                 smxTensorDescriptor_t outDesc, smxTensorDescriptor_t xDesc);

/** The workspace, in bytes, that smxLogsumexp needs with this descriptor (often 0); same rules as
 *  smxGetSoftmaxWorkspaceSize (host memory for a CPU handle, device memory for CUDA, 16-byte aligned). */
SMX_API smxStatus_t smxGetLogsumexpWorkspaceSize(smxLogsumexpDescriptor_t desc, size_t* workspaceBytes);

/** The chosen plan as text; the string belongs to the descriptor and lives until it is destroyed. */
SMX_API smxStatus_t smxGetLogsumexpPlan(smxLogsumexpDescriptor_t desc, const char** plan);

/** Computes out = logsumexp(x) along the descriptor's axis. Pointers as for smxSoftmaxForward (element
 *  [0, ..., 0], memory of the handle's device, aligned to the element size); out may not overlap x.
 *  Per row, as torch.logsumexp: a NaN gives NaN; a +inf (and no NaN) gives +inf; all -inf gives -inf; an
 *  axis of size 0 gives -inf (the log of an empty sum). Nothing to write (out empty) succeeds at once.
 *  Fails with SMX_STATUS_BAD_PARAM_NULL_POINTER (desc, or out/x with elements to read or write),
 *  _OBJECT, _WORKSPACE, _ALIGNMENT, _OVERLAP, _DEVICE, SMX_STATUS_EXECUTION_FAILED. */
SMX_API smxStatus_t smxLogsumexp(smxLogsumexpDescriptor_t desc, void* workspace, size_t workspaceBytes, void* out,
                                 const void* x, void* stream);

/** Destroys a logsumexp descriptor. NULL is a no-op; anything but a live one is SMX_STATUS_BAD_PARAM_OBJECT. */
SMX_API smxStatus_t smxDestroyLogsumexpDescriptor(smxLogsumexpDescriptor_t desc);

/** A validated log-softmax-gather problem with its chosen plan. Read-only after creation. */
typedef struct smxLogSoftmaxGatherDescriptor* smxLogSoftmaxGatherDescriptor_t;

/** Creates a descriptor for out = log_softmax(x, axis) gathered at `index` along the axis, without writing
 *  the full log-softmax: out[..., k, ...] = x[..., index[..., k, ...], ...] - logsumexp(x[..., :, ...]).
 *  index: I32 or I64, x's shape with the axis of any size K >= 0 (K = 0: nothing to do); out: index's
 *  shape, F32 (F64 for an F64 x), free of self-overlap. Strides of all three are free.
 *  Fails with SMX_STATUS_BAD_PARAM_NULL_POINTER, _OBJECT, _AXIS, _SHAPE, _OVERLAP,
 *  SMX_STATUS_NOT_SUPPORTED_DTYPE_PAIR, SMX_STATUS_ALLOC_FAILED. */
SMX_API smxStatus_t smxCreateLogSoftmaxGatherDescriptor(smxHandle_t handle, smxLogSoftmaxGatherDescriptor_t* desc,
                                                        int axis, smxTensorDescriptor_t outDesc,
                                                        smxTensorDescriptor_t xDesc, smxTensorDescriptor_t indexDesc);

/** The workspace, in bytes, that smxLogSoftmaxGather needs (often 0); same rules as for softmax. */
SMX_API smxStatus_t smxGetLogSoftmaxGatherWorkspaceSize(smxLogSoftmaxGatherDescriptor_t desc,
                                                        size_t* workspaceBytes);

/** The chosen plan as text; the string lives until the descriptor is destroyed. */
SMX_API smxStatus_t smxGetLogSoftmaxGatherPlan(smxLogSoftmaxGatherDescriptor_t desc, const char** plan);

/** Computes out. An index outside [0, n) (n the axis size; negative ones too, as torch.gather refuses them)
 *  writes +inf, which no log-probability can be (they are <= 0 or NaN): x is never read outside its row.
 *  Special rows follow log_softmax's (softmax section): a NaN or +inf in the row gives NaN, all -inf NaN,
 *  -inf among finite values -inf at that element. out may not overlap x or index.
 *  Fails with SMX_STATUS_BAD_PARAM_NULL_POINTER (desc, or a pointer of a tensor with elements to touch),
 *  _OBJECT, _WORKSPACE, _ALIGNMENT, _OVERLAP, _DEVICE, SMX_STATUS_EXECUTION_FAILED. */
SMX_API smxStatus_t smxLogSoftmaxGather(smxLogSoftmaxGatherDescriptor_t desc, void* workspace, size_t workspaceBytes,
                                        void* out, const void* x, const void* index, void* stream);

/** Destroys a log-softmax-gather descriptor. NULL is a no-op; anything but a live one is
 *  SMX_STATUS_BAD_PARAM_OBJECT. */
SMX_API smxStatus_t smxDestroyLogSoftmaxGatherDescriptor(smxLogSoftmaxGatherDescriptor_t desc);

/** How per-row losses become the loss, as PyTorch's `reduction=`. */
typedef enum smxLossReduction_t {
    SMX_REDUCTION_NONE = 0,  /**< one loss per row (0 for an ignored row) */
    SMX_REDUCTION_SUM = 1,   /**< their sum (0 for no rows) */
    SMX_REDUCTION_MEAN = 2   /**< their sum over the count of rows whose target is not ignoreIndex (NaN for none) */
} smxLossReduction_t;

/** Cross-entropy options. Set `size` to sizeof(smxCrossEntropyOptions_t) (SMX_CROSS_ENTROPY_OPTIONS_INIT
 *  does): later versions append fields, and a library reads only the `size` bytes its caller knew of,
 *  taking defaults for the rest; bytes it does not know of must be zero. */
typedef struct smxCrossEntropyOptions_t {
    size_t size;                   /**< sizeof(smxCrossEntropyOptions_t) as the caller compiled it */
    smxLossReduction_t reduction;  /**< default SMX_REDUCTION_MEAN */
    int64_t ignoreIndex;           /**< rows with this target have loss 0, dlogits 0, and no count; default -100 */
    double labelSmoothing;         /**< epsilon in [0, 1]: the target is (1 - eps) one-hot + eps / classes; default 0 */
} smxCrossEntropyOptions_t;

/** The default options, for initializing an smxCrossEntropyOptions_t. */
#define SMX_CROSS_ENTROPY_OPTIONS_INIT {sizeof(smxCrossEntropyOptions_t), SMX_REDUCTION_MEAN, -100, 0.0}

/** A validated cross-entropy problem with its chosen plan. Read-only after creation. */
typedef struct smxCrossEntropyDescriptor* smxCrossEntropyDescriptor_t;

/** Creates a cross-entropy descriptor: PyTorch's F.cross_entropy with class indices, classes along `axis`.
 *  Per row i with target t = target[i] and C classes (the axis size), lse = logsumexp(logits[i, :]):
 *    loss_i = (1 - eps) * (lse - logits[i, t]) + eps / C * sum_c (lse - logits[i, c])   (eps > 0 only)
 *  and, when asked for, the gradient of the loss (grad_output 1) w.r.t. the logits, in the same pass:
 *    dlogits[i, c] = scale * (softmax(logits[i, :])[c] - (1 - eps) * [c == t] - eps / C)
 *  with scale 1 (NONE, SUM) or 1 / count (MEAN); rows whose target is ignoreIndex get loss 0, dlogits 0.
 *  A target outside [0, C) that is not ignoreIndex gives that row loss NaN and dlogits NaN (and counts).
 *  options: NULL for the defaults, else a filled smxCrossEntropyOptions_t (read during this call only).
 *  logitsDesc: any floating dtype, any strides. targetDesc: I32 or I64, per-row shape.
 *  lossDesc: F32 (F64 for F64 logits); per-row shape for SMX_REDUCTION_NONE, else one element (every size 1).
 *  lseDesc: NULL (not computed) or per-row, F32 (F64). dlogitsDesc: NULL (not computed) or logits' shape,
 *  any floating dtype, free of self-overlap; it may be the logits buffer itself at the call (in place) when
 *  its strides and element size are the logits'.
 *  Fails with SMX_STATUS_BAD_PARAM_NULL_POINTER, _OBJECT, _AXIS, _SHAPE, _OVERLAP, _MODE (a reduction that is
 *  not an smxLossReduction_t), SMX_STATUS_BAD_PARAM (options->size smaller than the first version's, or
 *  labelSmoothing outside [0, 1] or NaN), SMX_STATUS_NOT_SUPPORTED (options bytes this library does not know
 *  of are not zero), SMX_STATUS_NOT_SUPPORTED_DTYPE_PAIR, SMX_STATUS_ALLOC_FAILED. */
SMX_API smxStatus_t smxCreateCrossEntropyDescriptor(smxHandle_t handle, smxCrossEntropyDescriptor_t* desc, int axis,
                                                    const smxCrossEntropyOptions_t* options,
                                                    smxTensorDescriptor_t lossDesc, smxTensorDescriptor_t lseDesc,
                                                    smxTensorDescriptor_t dlogitsDesc,
                                                    smxTensorDescriptor_t logitsDesc,
                                                    smxTensorDescriptor_t targetDesc);

/** The workspace, in bytes, that smxCrossEntropy needs (the CUDA plans of a reduced loss keep per-row
 *  partials there); same rules as for softmax. */
SMX_API smxStatus_t smxGetCrossEntropyWorkspaceSize(smxCrossEntropyDescriptor_t desc, size_t* workspaceBytes);

/** The chosen plan as text; the string lives until the descriptor is destroyed. */
SMX_API smxStatus_t smxGetCrossEntropyPlan(smxCrossEntropyDescriptor_t desc, const char** plan);

/** Computes the loss, and lse and dlogits where the descriptor has them (their pointers are ignored where it
 *  has not). The loss and dlogits of a row follow log_softmax's special values (a NaN or +inf among the
 *  logits: NaN; all -inf: NaN), lse follows smxLogsumexp's; an ignored row is loss 0 and dlogits 0 whatever
 *  its logits. A MEAN reduction counts the targets in the same call (no host round trip), and SUM and MEAN
 *  add the per-row losses in a fixed order, so a result is the same bits on every run. A reduced loss is
 *  written even with zero rows (SUM 0, MEAN NaN).
 *  Fails with SMX_STATUS_BAD_PARAM_NULL_POINTER (desc, or a pointer the call needs), _OBJECT, _WORKSPACE,
 *  _ALIGNMENT, _OVERLAP, _DEVICE, SMX_STATUS_EXECUTION_FAILED. */
SMX_API smxStatus_t smxCrossEntropy(smxCrossEntropyDescriptor_t desc, void* workspace, size_t workspaceBytes,
                                    void* loss, void* lse, void* dlogits, const void* logits, const void* target,
                                    void* stream);

/** Destroys a cross-entropy descriptor. NULL is a no-op; anything but a live one is
 *  SMX_STATUS_BAD_PARAM_OBJECT. */
SMX_API smxStatus_t smxDestroyCrossEntropyDescriptor(smxCrossEntropyDescriptor_t desc);

/* ------------------------------------------------------------------------------------------------ */
/* Vocabulary-parallel: softmax, logsumexp and cross-entropy of rows split across ranks             */
/* ------------------------------------------------------------------------------------------------ */
/* When each of W ranks (GPUs, processes) holds a slice of every row along the axis (its shard of the
 * vocabulary, rank after rank), the whole-row operators run in three steps (docs/distributed.md):
 *   1. smxShardStatistics: each rank reduces its shard to a few statistics per row;
 *   2. the caller gathers every rank's statistics to every rank (one all-gather: NCCL, MPI, ...);
 *   3. smxShardSoftmax, smxShardLogsumexp or smxShardCrossEntropy: each rank combines the W ranks' statistics
 *      of a row, in rank order, into the whole row's, and computes its shard's part of the result.
 * Every rank combines the same gathered values with the same formula, so the whole-row statistics (logsumexp,
 * the loss) are the same bits on every rank of one device type. The results equal the single-device operators'
 * on the whole rows (to rounding), special values included. The smx_nccl library (smx_nccl.h) runs all three
 * steps over an NCCL communicator.
 *
 * Statistics lie along the axis: a shard's are `width` values per row (stats: x's shape with the axis of size
 * width), the gathered ones width * W (rank w's at axis positions [w * width, (w + 1) * width)). They are f32
 * (f64 for f64 x), and their strides are free: laid out with the statistics axis outermost (for a 2-d x of
 * [rows, n]: stats of shape [rows, width] with strides {1, rows}), one rank's block is rows * width contiguous
 * values and an all-gather of the blocks is the gathered tensor, strides {1, rows}, with no copy. */

/** Softmax statistics: per row of the shard (max, sum(exp(x - max))), max -inf and sum 0 for an empty or
 *  all -inf shard row, max NaN (sum 0) where it holds a NaN, max +inf (sum 0) where it holds +inf and no NaN. */
#define SMX_SHARD_SOFTMAX_STATISTICS 2
/** Cross-entropy statistics: the softmax statistics, then the logit of the row's target where the target is a
 *  class of this shard (else 0), the shard's mean logit (0 without classes; label smoothing needs it) and its
 *  class count n, from which every rank learns the vocabulary's size (the class counts added). */
#define SMX_SHARD_CROSS_ENTROPY_STATISTICS 5

/** A validated shard-statistics problem with its chosen plan. Read-only after creation. */
typedef struct smxShardStatisticsDescriptor* smxShardStatisticsDescriptor_t;

/** Creates a descriptor for step 1: a shard's statistics along `axis`.
 *  xDesc: the shard (any floating dtype, any strides; an axis of size 0 is a rank without classes).
 *  targetDesc: NULL for softmax statistics (statsDesc's axis of size SMX_SHARD_SOFTMAX_STATISTICS), or the
 *  cross-entropy targets (I32 or I64, per-row shape as for smxCreateCrossEntropyDescriptor, every rank the same
 *  global class indices) for cross-entropy statistics (axis of size SMX_SHARD_CROSS_ENTROPY_STATISTICS); then the
 *  shard holds the vocabulary's classes [vocabStart, vocabStart + n) (ignored without a target).
 *  statsDesc: x's shape with the axis of the statistics' width, F32 (F64 for F64 x), free of self-overlap.
 *  Fails with SMX_STATUS_BAD_PARAM_NULL_POINTER, _OBJECT, _AXIS, _SHAPE, _OVERLAP, SMX_STATUS_BAD_PARAM (with a
 *  target: vocabStart < 0, or F32 statistics of a shard of more than 2^24 classes, a count F32 cannot hold),
 *  SMX_STATUS_NOT_SUPPORTED_DTYPE_PAIR, SMX_STATUS_ALLOC_FAILED. */
SMX_API smxStatus_t smxCreateShardStatisticsDescriptor(smxHandle_t handle, smxShardStatisticsDescriptor_t* desc,
                                                       int axis, int64_t vocabStart, smxTensorDescriptor_t statsDesc,
                                                       smxTensorDescriptor_t xDesc, smxTensorDescriptor_t targetDesc);

/** The workspace, in bytes, that smxShardStatistics needs (often 0); same rules as for softmax. */
SMX_API smxStatus_t smxGetShardStatisticsWorkspaceSize(smxShardStatisticsDescriptor_t desc, size_t* workspaceBytes);

/** The chosen plan as text; the string lives until the descriptor is destroyed. */
SMX_API smxStatus_t smxGetShardStatisticsPlan(smxShardStatisticsDescriptor_t desc, const char** plan);

/** Computes the shard's statistics (target: ignored, may be NULL, for softmax statistics). A target outside the
 *  shard (another rank's class, ignoreIndex, or no class at all) is never read through: it contributes 0.
 *  stats may not overlap x or target. Pointers as for smxSoftmaxForward; nothing to write succeeds at once.
 *  Fails with SMX_STATUS_BAD_PARAM_NULL_POINTER, _OBJECT, _WORKSPACE, _ALIGNMENT, _OVERLAP, _DEVICE,
 *  SMX_STATUS_EXECUTION_FAILED. */
SMX_API smxStatus_t smxShardStatistics(smxShardStatisticsDescriptor_t desc, void* workspace, size_t workspaceBytes,
                                       void* stats, const void* x, const void* target, void* stream);

/** Destroys a shard-statistics descriptor. NULL is a no-op; anything but a live one is SMX_STATUS_BAD_PARAM_OBJECT. */
SMX_API smxStatus_t smxDestroyShardStatisticsDescriptor(smxShardStatisticsDescriptor_t desc);

/** A validated shard-softmax problem with its chosen plan. Read-only after creation. */
typedef struct smxShardSoftmaxDescriptor* smxShardSoftmaxDescriptor_t;

/** Creates a descriptor for step 3 of softmax or log-softmax: the shard's part of the whole rows' result.
 *  With (M, S) a row's combined statistics (M the largest rank max, S = sum over ranks of sum_w * exp(max_w - M)):
 *    SMX_SOFTMAX:     y = exp(x - M) / S          SMX_LOG_SOFTMAX: y = (x - M) - log(S)
 *  and y is NaN in every element of a row whose M is not finite (the whole row held a NaN or +inf, or was all
 *  -inf), as smxSoftmaxForward gives on the whole row.
 *  xDesc, yDesc: the shard and its result, any dtype pair smxCreateSoftmaxDescriptor accepts, strides free.
 *  statsDesc: the gathered softmax statistics of W >= 1 ranks (x's shape with the axis of size
 *  2 * W), F32 (F64 for F64 x). W = 1 takes the whole row's (max, sum) as they are.
 *  Fails as smxCreateSoftmaxDescriptor, and with SMX_STATUS_BAD_PARAM_SHAPE where stats' axis is not a
 *  positive multiple of SMX_SHARD_SOFTMAX_STATISTICS. */
SMX_API smxStatus_t smxCreateShardSoftmaxDescriptor(smxHandle_t handle, smxShardSoftmaxDescriptor_t* desc,
                                                    smxSoftmaxMode_t mode, int axis, smxTensorDescriptor_t yDesc,
                                                    smxTensorDescriptor_t xDesc, smxTensorDescriptor_t statsDesc);

/** The workspace, in bytes, that smxShardSoftmax needs (often 0); same rules as for softmax. */
SMX_API smxStatus_t smxGetShardSoftmaxWorkspaceSize(smxShardSoftmaxDescriptor_t desc, size_t* workspaceBytes);

/** The chosen plan as text; the string lives until the descriptor is destroyed. */
SMX_API smxStatus_t smxGetShardSoftmaxPlan(smxShardSoftmaxDescriptor_t desc, const char** plan);

/** Computes y. In place (y == x, same strides and element size) is allowed; y may not otherwise overlap x, nor
 *  stats. Pointers and streams as for smxSoftmaxForward; zero elements succeed and do nothing.
 *  Fails with SMX_STATUS_BAD_PARAM_NULL_POINTER, _OBJECT, _WORKSPACE, _ALIGNMENT, _OVERLAP, _DEVICE,
 *  SMX_STATUS_EXECUTION_FAILED. */
SMX_API smxStatus_t smxShardSoftmax(smxShardSoftmaxDescriptor_t desc, void* workspace, size_t workspaceBytes, void* y,
                                    const void* x, const void* stats, void* stream);

/** Destroys a shard-softmax descriptor. NULL is a no-op; anything but a live one is SMX_STATUS_BAD_PARAM_OBJECT. */
SMX_API smxStatus_t smxDestroyShardSoftmaxDescriptor(smxShardSoftmaxDescriptor_t desc);

/** A validated shard-logsumexp problem with its chosen plan. Read-only after creation. */
typedef struct smxShardLogsumexpDescriptor* smxShardLogsumexpDescriptor_t;

/** Creates a descriptor for step 3 of logsumexp: out = M + log(S) per row from the gathered softmax statistics
 *  (as smxShardSoftmax combines them), as smxLogsumexp gives on the whole row: NaN where a rank's max is NaN,
 *  else +inf where one is +inf, -inf where every rank's is -inf.
 *  statsDesc: the gathered statistics (any shape, 2 * W values along `axis`), F32 or F64, any strides.
 *  outDesc: stats' shape without the axis or with it of size 1, stats' dtype, free of self-overlap.
 *  Fails with SMX_STATUS_BAD_PARAM_NULL_POINTER, _OBJECT, _AXIS, _SHAPE, _OVERLAP,
 *  SMX_STATUS_NOT_SUPPORTED_DTYPE_PAIR, SMX_STATUS_ALLOC_FAILED. */
SMX_API smxStatus_t smxCreateShardLogsumexpDescriptor(smxHandle_t handle, smxShardLogsumexpDescriptor_t* desc,
                                                      int axis, smxTensorDescriptor_t outDesc,
                                                      smxTensorDescriptor_t statsDesc);

/** The workspace, in bytes, that smxShardLogsumexp needs (often 0); same rules as for softmax. */
SMX_API smxStatus_t smxGetShardLogsumexpWorkspaceSize(smxShardLogsumexpDescriptor_t desc, size_t* workspaceBytes);

/** The chosen plan as text; the string lives until the descriptor is destroyed. */
SMX_API smxStatus_t smxGetShardLogsumexpPlan(smxShardLogsumexpDescriptor_t desc, const char** plan);

/** Computes out; it may not overlap stats. Fails with SMX_STATUS_BAD_PARAM_NULL_POINTER, _OBJECT, _WORKSPACE,
 *  _ALIGNMENT, _OVERLAP, _DEVICE, SMX_STATUS_EXECUTION_FAILED. */
SMX_API smxStatus_t smxShardLogsumexp(smxShardLogsumexpDescriptor_t desc, void* workspace, size_t workspaceBytes,
                                      void* out, const void* stats, void* stream);

/** Destroys a shard-logsumexp descriptor. NULL is a no-op; anything but a live one is SMX_STATUS_BAD_PARAM_OBJECT. */
SMX_API smxStatus_t smxDestroyShardLogsumexpDescriptor(smxShardLogsumexpDescriptor_t desc);

/** A validated shard cross-entropy problem with its chosen plan. Read-only after creation. */
typedef struct smxShardCrossEntropyDescriptor* smxShardCrossEntropyDescriptor_t;

/** Creates a descriptor for step 3 of cross-entropy: smxCrossEntropy's loss (and lse) of the whole rows, and
 *  the gradient of the loss w.r.t. this shard's logits, from the gathered cross-entropy statistics. With
 *  (M, S) combined as for smxShardSoftmax, lse = M + log S, V the ranks' class counts added, x_t the target's
 *  logit (the ranks' third values added) and mean the row's mean logit (the ranks' means weighted by their
 *  counts), per row of target t:
 *    loss = (1 - eps) * (lse - x_t) + eps / V * ((lse - mean) * V)    (in double: +inf where the sum over the
 *                                                                       classes of lse - x overflows)
 *    dlogits[c] = scale * (exp(x[c] - M) / S - (1 - eps) * [vocabStart + c == t] - eps / V)
 *  which are smxCrossEntropy's formulas with C = V; ignored rows, targets outside [0, V), special values, the
 *  reductions and the MEAN count (from the targets: the same on every rank) as there.
 *  Arguments as for smxCreateCrossEntropyDescriptor, with logits the shard (its axis may be of size 0), plus
 *  vocabStart (>= 0) as for smxCreateShardStatisticsDescriptor, and statsDesc the gathered cross-entropy
 *  statistics of W >= 1 ranks (logits' shape with the axis of size 5 * W), F32 (F64 for F64 logits).
 *  The ranks' shards must tile the vocabulary [0, V) in rank order, each class in one rank's shard.
 *  Fails as smxCreateCrossEntropyDescriptor, with SMX_STATUS_BAD_PARAM for vocabStart < 0, and
 *  SMX_STATUS_BAD_PARAM_SHAPE where stats' axis is not a positive multiple of SMX_SHARD_CROSS_ENTROPY_STATISTICS. */
SMX_API smxStatus_t smxCreateShardCrossEntropyDescriptor(smxHandle_t handle, smxShardCrossEntropyDescriptor_t* desc,
                                                         int axis, const smxCrossEntropyOptions_t* options,
                                                         int64_t vocabStart, smxTensorDescriptor_t lossDesc,
                                                         smxTensorDescriptor_t lseDesc,
                                                         smxTensorDescriptor_t dlogitsDesc,
                                                         smxTensorDescriptor_t logitsDesc,
                                                         smxTensorDescriptor_t targetDesc,
                                                         smxTensorDescriptor_t statsDesc);

/** The workspace, in bytes, that smxShardCrossEntropy needs (a reduced loss keeps per-row partials there). */
SMX_API smxStatus_t smxGetShardCrossEntropyWorkspaceSize(smxShardCrossEntropyDescriptor_t desc,
                                                         size_t* workspaceBytes);

/** The chosen plan as text; the string lives until the descriptor is destroyed. */
SMX_API smxStatus_t smxGetShardCrossEntropyPlan(smxShardCrossEntropyDescriptor_t desc, const char** plan);

/** Computes the loss, and lse and dlogits where the descriptor has them, as smxCrossEntropy does; stats is read
 *  only. The loss and lse are the same bits on every rank. Fails as smxCrossEntropy. */
SMX_API smxStatus_t smxShardCrossEntropy(smxShardCrossEntropyDescriptor_t desc, void* workspace, size_t workspaceBytes,
                                         void* loss, void* lse, void* dlogits, const void* logits, const void* target,
                                         const void* stats, void* stream);

/** Destroys a shard cross-entropy descriptor. NULL is a no-op; anything but a live one is
 *  SMX_STATUS_BAD_PARAM_OBJECT. */
SMX_API smxStatus_t smxDestroyShardCrossEntropyDescriptor(smxShardCrossEntropyDescriptor_t desc);

/* ------------------------------------------------------------------------------------------------ */
/* Vocabulary-parallel in one read: the statistics exchanged inside the kernel, over NVLink         */
/* ------------------------------------------------------------------------------------------------ */
/* The three steps above read each shard twice (statistics, then normalize). On GPUs of one node with peer
 * access, one kernel per rank can read each row once: it holds the row on chip, stores its (max, sum) into
 * every rank's mailbox for that row through peer-mapped memory, waits for every rank's, combines them in rank
 * order (the same bits on every rank) and writes y from the held row (docs/distributed.md, "Phase 2").
 * Setup, once per (group of ranks, device), on every rank:
 *   smxCreateShardPeers(handle, &peers, ranks, rank, maxRows);     // allocates this rank's mailbox
 *   smxGetShardPeersHandle(peers, mine);                          // SMX_SHARD_PEERS_HANDLE_BYTES bytes
 *   ... exchange the handles (an all-gather: NCCL, torch.distributed's all_gather_object, MPI) ...
 *   smxConnectShardPeers(peers, all);                             // maps every other rank's mailbox
 * then per problem smxCreateFusedShardSoftmaxDescriptor, and per call smxFusedShardSoftmax (launch-only).
 * Every rank runs one process (CUDA IPC handles do not open in the process that made them). */

/** The bytes of one rank's mailbox handle (a cudaIpcMemHandle_t). */
#define SMX_SHARD_PEERS_HANDLE_BYTES 64

/** The most ranks a group may have. */
#define SMX_SHARD_PEERS_MAX_RANKS 8

/** One rank's side of a group of ranks that exchange row statistics through each other's mailboxes: its
 *  mailbox (device memory), the other ranks' mailboxes mapped into this process, the row counter and the call
 *  counter of its kernel. One per (group, device); used by one stream at a time. */
typedef struct smxShardPeers* smxShardPeers_t;

/** Creates this rank's side of a group of `ranks` ranks (1 to SMX_SHARD_PEERS_MAX_RANKS), this one `rank`
 *  (0-based: rank r holds the shard after rank r - 1's), for problems of at most `maxRows` rows (>= 0).
 *  Allocates the mailbox on the handle's device and synchronizes that device (a setup call, not for a hot
 *  loop). Fails with SMX_STATUS_BAD_PARAM_NULL_POINTER, _OBJECT (handle), SMX_STATUS_BAD_PARAM_DEVICE (a CPU
 *  handle: peers are CUDA devices), SMX_STATUS_BAD_PARAM (ranks, rank or maxRows out of range),
 *  SMX_STATUS_ALLOC_FAILED, SMX_STATUS_EXECUTION_FAILED. */
SMX_API smxStatus_t smxCreateShardPeers(smxHandle_t handle, smxShardPeers_t* peers, int ranks, int rank,
                                        int64_t maxRows);

/** Writes this rank's mailbox handle (SMX_SHARD_PEERS_HANDLE_BYTES bytes) to `handle`, for the other ranks'
 *  smxConnectShardPeers. Fails with SMX_STATUS_BAD_PARAM_NULL_POINTER, _OBJECT, SMX_STATUS_EXECUTION_FAILED. */
SMX_API smxStatus_t smxGetShardPeersHandle(smxShardPeers_t peers, void* handle);

/** Maps every other rank's mailbox: `handles` holds ranks * SMX_SHARD_PEERS_HANDLE_BYTES bytes, rank 0's
 *  handle first (what an all-gather of smxGetShardPeersHandle gives; this rank's own is not read). Enables
 *  peer access; synchronizes. Call once, on every rank, before any fused call. Fails with
 *  SMX_STATUS_BAD_PARAM_NULL_POINTER, _OBJECT, SMX_STATUS_BAD_PARAM (connected already),
 *  SMX_STATUS_EXECUTION_FAILED (a handle did not open: another node, no peer access between the devices, or
 *  a handle of this same process). */
SMX_API smxStatus_t smxConnectShardPeers(smxShardPeers_t peers, const void* handles);

/** The rows whose wait for a peer's statistics ran out since the group was created (a peer that never
 *  called, or called with another problem). Such a row's y is NaN, and every later call's rows are NaN
 *  without waiting: the group is broken and should be destroyed. Synchronizes the device (a check for tests
 *  and error paths, not for a hot loop). Fails with SMX_STATUS_BAD_PARAM_NULL_POINTER, _OBJECT,
 *  SMX_STATUS_EXECUTION_FAILED. */
SMX_API smxStatus_t smxGetShardPeersTimeouts(smxShardPeers_t peers, int64_t* timedOutRows);

/** Unmaps the peers' mailboxes and frees this rank's; synchronizes the device first. Every descriptor made
 *  on it must be destroyed before. NULL is a no-op; anything but a live one is SMX_STATUS_BAD_PARAM_OBJECT. */
SMX_API smxStatus_t smxDestroyShardPeers(smxShardPeers_t peers);

/** A validated fused shard-softmax problem with its chosen plan, on one connected smxShardPeers_t. */
typedef struct smxFusedShardSoftmaxDescriptor* smxFusedShardSoftmaxDescriptor_t;

/** Creates a descriptor for softmax or log-softmax of the whole rows in one read of this rank's shard:
 *  smxShardSoftmax's formulas and special values, with the statistics of the group's ranks exchanged inside
 *  the kernel. peers: connected, on the handle's device; it must outlive the descriptor. mode, axis, yDesc,
 *  xDesc: as for smxCreateSoftmaxDescriptor, this rank's shard (its axis may be of size 0); every rank must
 *  create the same rows (its own shard width).
 *  Fails as smxCreateSoftmaxDescriptor, with SMX_STATUS_BAD_PARAM (peers not connected, more rows than its
 *  maxRows, or on another device), and SMX_STATUS_NOT_SUPPORTED where the kernel cannot hold a row on chip
 *  (rows longer than smxGetFusedShardSoftmaxMaxRowLength) or the dtype pair is not one of F16, BF16 or F32
 *  to itself: run the three steps then. */
SMX_API smxStatus_t smxCreateFusedShardSoftmaxDescriptor(smxHandle_t handle, smxFusedShardSoftmaxDescriptor_t* desc,
                                                         smxShardPeers_t peers, smxSoftmaxMode_t mode, int axis,
                                                         smxTensorDescriptor_t yDesc, smxTensorDescriptor_t xDesc);

/** The longest shard row the fused kernel holds on chip for x of `dtype` (0 for a dtype it does not take). */
SMX_API smxStatus_t smxGetFusedShardSoftmaxMaxRowLength(smxDataType_t dtype, int64_t* maxRowLength);

/** The chosen plan as text; the string lives until the descriptor is destroyed. */
SMX_API smxStatus_t smxGetFusedShardSoftmaxPlan(smxFusedShardSoftmaxDescriptor_t desc, const char** plan);

/** Computes this rank's y on `stream`: launches only (no allocation, no synchronization), so it can be captured
 *  in a CUDA graph. Like a collective, every rank of the group must make the same calls in the same order, and
 *  calls on one smxShardPeers_t must not overlap (one stream at a time). In place (y == x, same layout) is
 *  allowed. A rank that does not call leaves the others waiting until the wait runs out
 *  (smxGetShardPeersTimeouts). Fails with SMX_STATUS_BAD_PARAM_NULL_POINTER, _OBJECT, _ALIGNMENT, _OVERLAP,
 *  _DEVICE, SMX_STATUS_EXECUTION_FAILED. */
SMX_API smxStatus_t smxFusedShardSoftmax(smxFusedShardSoftmaxDescriptor_t desc, void* y, const void* x, void* stream);

/** Destroys a fused shard-softmax descriptor. NULL is a no-op; anything but a live one is
 *  SMX_STATUS_BAD_PARAM_OBJECT. */
SMX_API smxStatus_t smxDestroyFusedShardSoftmaxDescriptor(smxFusedShardSoftmaxDescriptor_t desc);

/* ------------------------------------------------------------------------------------------------ */
/* Logging                                                                                          */
/* ------------------------------------------------------------------------------------------------ */

/** Message levels, most verbose first. SMX_LOG_OFF silences everything. */
typedef enum smxLogLevel_t {
    SMX_LOG_TRACE = 0,
    SMX_LOG_DEBUG = 1,
    SMX_LOG_INFO = 2,
    SMX_LOG_WARN = 3,
    SMX_LOG_ERROR = 4,
    SMX_LOG_OFF = 6
} smxLogLevel_t;

/** Receives each message at or above the current level. `message` lives only during the call.
 *  It may be called from any thread that calls smx, on several at once, so it must be thread-safe. It may
 *  call smx itself: messages raised by those calls on its thread are not delivered (no recursion), and
 *  they leave the last-error message its caller will read unchanged; only smxSetLogCallback is refused
 *  there (SMX_STATUS_NOT_SUPPORTED). It must not throw (a C++ callback): smx catches and discards anything
 *  it throws, so only that message is lost; the call that logged it returns as if nothing happened. */
typedef void (*smxLogCallback_t)(smxLogLevel_t level, const char* message, void* userData);

/** Sets the level below which messages are dropped. The library is silent by default (SMX_LOG_OFF),
 *  unless the environment variable SMX_LOG_LEVEL (trace, debug, info, warn, error, off) says otherwise
 *  when the library first logs. Fails with SMX_STATUS_BAD_PARAM for an unknown level. */
SMX_API smxStatus_t smxSetLogLevel(smxLogLevel_t level);

/** Routes messages to `callback` (with `userData`) instead of standard error; NULL restores standard
 *  error. Installing a callback turns logging on at SMX_LOG_INFO unless a level was chosen already
 *  (by smxSetLogLevel or SMX_LOG_LEVEL); descriptor creation logs its problem and plan at SMX_LOG_DEBUG.
 *  Returns once no thread is still running the callback it replaced, which is never called again: what
 *  that callback uses may be freed then. Fails with SMX_STATUS_NOT_SUPPORTED when called from inside
 *  the callback. */
SMX_API smxStatus_t smxSetLogCallback(smxLogCallback_t callback, void* userData);

SMX_EXTERN_C_END

#endif /* SMX_H */
