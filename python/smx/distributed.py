"""Softmax, log-softmax, logsumexp and cross-entropy of rows split across the ranks of a torch.distributed process
group along `dim` (vocabulary parallelism: each rank holds logits[..., its slice of the classes]), with autograd.

    import torch.distributed as dist, smx.distributed
    y_shard = smx.distributed.softmax(x_shard, dim=-1)                 # this rank's slice of softmax(x)
    loss = smx.distributed.cross_entropy(logits_shard, target, vocab_start=rank * shard_size)

Each call runs libsmx's three steps (docs/distributed.md): this rank's per-row statistics (smxShardStatistics), ONE
all-gather of them over the group (a few floats per row), then this rank's part of the result from every rank's
statistics combined in rank order (smxShardSoftmax, smxShardLogsumexp, smxShardCrossEntropy). Every rank combines the
same gathered values the same way, so the statistics (logsumexp, the loss) are the same bits on every rank.
softmax and log_softmax read the shard once instead where every rank of the group is a CUDA device of one node
with peer access (libsmx's fused path: the statistics exchanged inside the kernel through NVLink, docs/distributed.md
"Phase 2") and the shard's rows are short enough for it to be expected faster (`use_fused`: "auto" by default,
True wherever it can, False never; SMX_DISTRIBUTED_FUSED=1 or 0 in the environment at import).
Backends: NCCL for CUDA tensors, gloo for CPU ones (any backend with all_gather_into_tensor and all_reduce). Shards
are laid out rank after rank along `dim` (rank 0 holds the first classes) and may differ in size; every rank passes
the same shapes but for `dim`, and for cross_entropy the same targets (global class indices). Needs torch."""

import ctypes
import math
import os

import torch
import torch.distributed as dist

from . import _arrays, _cache, _dtypes, _logprobs, _streams
from ._errors import SmxError, check
from ._lib import CrossEntropyOptions, lib

__all__ = ["softmax", "log_softmax", "logsumexp", "cross_entropy"]

_SOFTMAX, _LOG_SOFTMAX = 1, 2  # smxSoftmaxMode_t
# Statistics per row and rank: smx.h's SMX_SHARD_SOFTMAX_STATISTICS and SMX_SHARD_CROSS_ENTROPY_STATISTICS.
_SOFTMAX_STATISTICS, _CROSS_ENTROPY_STATISTICS = 2, 5


def _axis(x, dim):
    from . import _axis as normalize  # the package's dim rules (any integer but bool, torch's IndexError)
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"smx.distributed takes torch tensors; got {type(x).__module__}.{type(x).__qualname__}")
    if x.dim() == 0:
        raise ValueError("smx.distributed needs a shard with at least one dimension (the one split across ranks)")
    return normalize(dim, x.dim())


def _view(tensor, writable=False, index=False):
    return _arrays.describe(tensor, None, writable=writable, index=index)


def _statistics(x, axis, width, ranks=1):
    """(view, block): a new statistics tensor of x's shape with `axis` of size ranks * width, laid out with that
    axis outermost, and the contiguous (ranks * width, rows...) tensor it views. One rank's statistics are then
    one contiguous block, and all_gather_into_tensor of the blocks is the gathered tensor."""
    rows = _logprobs.per_row_shape(tuple(x.shape), axis)
    dtype = torch.float64 if x.dtype == torch.float64 else torch.float32
    block = torch.empty((ranks * width,) + rows, dtype=dtype, device=x.device)
    return block.movedim(0, axis), block


def _run(kind, lead, axis, views, tensors, call, arguments=(), key_extra=(), leading=()):
    """Creates (or finds) the descriptor of `kind` for these tensors and runs call(descriptor, workspace)."""
    descriptor = _logprobs.descriptor_of(lead, kind, axis, arguments, tensors, key_extra, leading)
    _streams.launch(views, descriptor, lambda workspace: call(descriptor, workspace))


def _gathered_statistics(x, axis, group, target=None, vocab_start=0):
    """Step 1 and 2: this rank's statistics of x, then every rank's, gathered (x's shape with `axis` of size
    ranks * width, rank w's at [w * width, (w + 1) * width))."""
    width = _SOFTMAX_STATISTICS if target is None else _CROSS_ENTROPY_STATISTICS
    local, block = _statistics(x, axis, width)
    x_view, local_view = _view(x), _view(local, writable=True)
    tensors = [(local_view.dtype, local_view), (x_view.dtype, x_view), None]
    views = [x_view, local_view]
    target_view = None
    if target is not None:
        target_view = _view(target, index=True)
        tensors[2] = (target_view.dtype, target_view)
        views.append(target_view)
    _run("ShardStatistics", x_view, axis, views, tensors,
         lambda d, workspace: lib.smxShardStatistics(d.pointer, workspace, d.workspace_bytes, local_view.pointer,
                                                     x_view.pointer, target_view and target_view.pointer,
                                                     x_view.stream),
         arguments=(ctypes.c_int64(vocab_start),), key_extra=(vocab_start,))
    ranks = dist.get_world_size(group)
    gathered, gathered_block = _statistics(x, axis, width, ranks)
    dist.all_gather_into_tensor(gathered_block, block, group=group)
    return gathered


def _normalize(x, axis, gathered, mode, dtype):
    """Step 3 of softmax: this rank's shard of y from its x and the gathered statistics."""
    y = torch.empty_like(x, dtype=dtype or x.dtype)
    x_view, y_view, stats_view = _view(x), _view(y, writable=True), _view(gathered)
    _run("ShardSoftmax", x_view, axis, [x_view, stats_view, y_view],
         [(y_view.dtype, y_view), (x_view.dtype, x_view), (stats_view.dtype, stats_view)],
         lambda d, workspace: lib.smxShardSoftmax(d.pointer, workspace, d.workspace_bytes, y_view.pointer,
                                                  x_view.pointer, stats_view.pointer, x_view.stream),
         leading=(mode,))
    return y


# ---- the one-read path (smxShardPeers_t, smxFusedShardSoftmax) ------------------------------------------------

#: When softmax and log_softmax take the fused path (where every rank of the group can): "auto" only where it is
#: expected faster than the three steps (_fused_expected_faster), True wherever it can, False never. The
#: environment's SMX_DISTRIBUTED_FUSED at import: 0 for False, 1 for True, unset (or anything else) for "auto".
use_fused = {"0": False, "1": True}.get(os.environ.get("SMX_DISTRIBUTED_FUSED"), "auto")
#: softmax and log_softmax calls by path since import: "fused" or "three_step" (for tests and benchmarks).
path_counts = {"fused": 0, "three_step": 0}

_HANDLE_BYTES = 64  # smx.h's SMX_SHARD_PEERS_HANDLE_BYTES
_FUSED_DTYPES = {torch.float16: 1, torch.bfloat16: 2, torch.float32: 3}  # the fused kernel's, as smxDataType_t
# The fused kernel (src/cuda/vocab_parallel/fused_params.hpp, fused.cu): kFusedThreads threads a CTA; two CTAs per
# SM where a thread holds at most 8 packs of 16 bytes of a contiguous row of whole packs.
_FUSED_THREADS, _FUSED_TWO_CTA_PACKS = 512, 8


def _fused_expected_faster(x, y, axis):
    """Whether the fused kernel runs x -> y at two CTAs per SM (contiguous x and y, rows of whole 16-byte packs
    along the last axis, at most 512 x 8 packs): there one CTA streams its row while the other waits for its peers.
    At one CTA per SM nothing hides the wait, and it measured slower than the three steps (docs/distributed.md)."""
    pack = 16 // x.element_size()
    row_len = x.shape[axis]
    return (axis == x.dim() - 1 and x.is_contiguous() and y.is_contiguous() and row_len % pack == 0 and
            row_len <= _FUSED_THREADS * _FUSED_TWO_CTA_PACKS * pack)


class _FusedDescriptor:
    """An smxFusedShardSoftmaxDescriptor_t (no workspace); destroyed by its _Peers, before the peers."""
    __slots__ = ("pointer", "workspace_bytes")

    def __init__(self, handle, peers, mode, axis, x_view, y_view):
        self.pointer, self.workspace_bytes = None, 0
        made = [_cache.tensor_descriptor(v.dtype, *_arrays.c_layout(v.shape, v.strides)) for v in (y_view, x_view)]
        try:
            pointer = ctypes.c_void_p()
            check(lib.smxCreateFusedShardSoftmaxDescriptor(handle.pointer, ctypes.byref(pointer), peers, mode, axis,
                                                           *made))
            self.pointer = pointer.value
        finally:
            for desc in made:
                lib.smxDestroyTensorDescriptor(desc)


class _Peers:
    """This rank's smxShardPeers_t of one (group, device), connected to every rank's (`connected`), with the
    fused descriptors made on it. Setup is collective: every rank of the group makes one at the same call."""

    def __init__(self, group, device, rows):
        self.pointer, self.rows, self.descriptors, self.connected = None, rows, {}, False
        self.handle = _cache.handle_of(_arrays.CUDA, device.index)
        try:
            pointer = ctypes.c_void_p()
            check(lib.smxCreateShardPeers(self.handle.pointer, ctypes.byref(pointer), dist.get_world_size(group),
                                          dist.get_rank(group), rows))
            self.pointer = pointer.value
            mine = (ctypes.c_ubyte * _HANDLE_BYTES)()
            check(lib.smxGetShardPeersHandle(self.pointer, mine))
            mine = bytes(mine)
        except SmxError:
            mine = None  # the other ranks still gather, so this rank answers with nothing
        everyone = [None] * dist.get_world_size(group)
        dist.all_gather_object(everyone, mine, group=group)
        if all(h is not None for h in everyone):
            self.connected = lib.smxConnectShardPeers(self.pointer, b"".join(everyone)) == 0

    def close(self):
        for descriptor in self.descriptors.values():
            lib.smxDestroyFusedShardSoftmaxDescriptor(descriptor.pointer)
        self.descriptors = {}
        if self.pointer:
            lib.smxDestroyShardPeers(self.pointer)
            self.pointer = None


_peers = {}     # (group, device index) -> _Peers, or None where a setup failed on some rank (three steps then)
_refused = set()  # problems that some rank of their group cannot run fused


def _every_rank_agrees(flag, group, device):
    """True where `flag` holds on every rank of the group (one all-reduce; setup only)."""
    agreed = torch.tensor([1 if flag else 0], dtype=torch.int32, device=device)
    dist.all_reduce(agreed, op=dist.ReduceOp.MIN, group=group)
    return bool(agreed.item())


def _peers_for(group, device, rows):
    """The group's connected peers on `device` with room for `rows` rows, set up (collectively) where there are
    none or too few rows; None where the group cannot have them. Every rank reaches the same answer: the rows and
    the previous setups are the same on every rank."""
    key = (group, device.index)
    if key in _peers:
        peers = _peers[key]
        if peers is None or peers.rows >= rows:
            return peers
        peers.close()
    with torch.cuda.device(device):
        peers = _Peers(group, device, rows)
        if not _every_rank_agrees(peers.connected, group, device):
            peers.close()
            peers = None
    _peers[key] = peers
    return peers


def _fused_descriptor(x, y, axis, group, mode):
    """The fused descriptor of this problem where every rank of the group runs it fused, else None. Its first
    call per problem is collective (two all-reduces and perhaps the peers' setup), so every rank must make the
    same calls, as for any collective."""
    if not use_fused or x.device.type != "cuda":
        return None
    group = group if group is not None else dist.group.WORLD
    automatic = use_fused == "auto"
    key = (group, x.device.index, tuple(x.shape), tuple(x.stride()), x.dtype, tuple(y.stride()), y.dtype, mode, axis,
           automatic)
    peers = _peers.get((group, x.device.index))
    if peers is not None and key in peers.descriptors:
        return peers.descriptors[key]
    if key in _refused:
        return None
    limit = ctypes.c_int64(0)
    code = _FUSED_DTYPES.get(x.dtype)
    check(lib.smxGetFusedShardSoftmaxMaxRowLength(code or 0, ctypes.byref(limit)))
    possible = (dist.get_backend(group) == "nccl" and code is not None and y.dtype == x.dtype and
                x.shape[axis] <= limit.value and (not automatic or _fused_expected_faster(x, y, axis)))
    descriptor = None
    if _every_rank_agrees(possible, group, x.device):
        peers = _peers_for(group, x.device, math.prod(s for d, s in enumerate(x.shape) if d != axis))
        if peers is not None:
            try:
                descriptor = _FusedDescriptor(peers.handle, peers.pointer, mode, axis, _view(x), _view(y))
            except SmxError:
                descriptor = None
        if _every_rank_agrees(descriptor is not None, group, x.device):
            peers.descriptors[key] = descriptor
            return descriptor
        if descriptor is not None:
            lib.smxDestroyFusedShardSoftmaxDescriptor(descriptor.pointer)
    _refused.add(key)
    return None


def _softmax_forward(x, axis, group, mode, dtype):
    """This rank's shard of y: fused where the group runs it so, else the three steps."""
    if dtype is None or dtype == x.dtype:
        y = torch.empty_like(x)
        descriptor = _fused_descriptor(x, y, axis, group, mode)
        if descriptor is not None:
            path_counts["fused"] += 1
            x_view, y_view = _view(x), _view(y, writable=True)
            _streams.launch([x_view, y_view], descriptor,
                            lambda _: lib.smxFusedShardSoftmax(descriptor.pointer, y_view.pointer, x_view.pointer,
                                                               x_view.stream))
            return y
    path_counts["three_step"] += 1
    return _normalize(x, axis, _gathered_statistics(x, axis, group), mode, dtype)


def _compute_dtype(dtype):
    return torch.float64 if dtype == torch.float64 else torch.float32


class _Softmax(torch.autograd.Function):
    """softmax or log-softmax over the whole rows. The backward needs one sum per row over the whole row too
    (softmax: sum(dy * y); log-softmax: sum(dy)): one all-reduce of a value per row (docs/distributed.md)."""

    @staticmethod
    def forward(ctx, x, axis, group, mode, dtype):
        y = _softmax_forward(x, axis, group, mode, dtype)
        ctx.save_for_backward(y)
        ctx.axis, ctx.group, ctx.mode, ctx.x_dtype = axis, group, mode, x.dtype
        return y

    @staticmethod
    def backward(ctx, dy):
        (y,) = ctx.saved_tensors
        compute = _compute_dtype(y.dtype)
        dy, y = dy.to(compute), y.to(compute)
        if ctx.mode == _SOFTMAX:
            row_sum = (dy * y).sum(ctx.axis, keepdim=True)
            dist.all_reduce(row_sum, group=ctx.group)
            dx = y * (dy - row_sum)
        else:
            row_sum = dy.sum(ctx.axis, keepdim=True)
            dist.all_reduce(row_sum, group=ctx.group)
            dx = dy - torch.exp(y) * row_sum
        return dx.to(ctx.x_dtype), None, None, None, None


def _dtype_argument(dtype):
    if dtype is None or isinstance(dtype, torch.dtype):
        return dtype
    return _dtypes.to_torch(_dtypes.from_argument(dtype))


def softmax(x_shard, dim=-1, group=None, *, dtype=None):
    """This rank's shard of softmax(x, dim), x being every rank's x_shard concatenated along `dim` in rank order:
    exp(x - max) / sum(exp(x - max)) with the max and sum of the whole rows, PyTorch's special values included (a
    row holding NaN or +inf anywhere, or all -inf, is NaN on every rank).

    x_shard: a torch tensor (float16, bfloat16, float32, float64; CPU with gloo, CUDA with NCCL), any strides.
    dim: the split dimension. group: the process group (None: the default one). dtype: the result's dtype (any
    of the four; default x's). Autograd: the backward all-reduces sum(dy * y) per row once."""
    axis = _axis(x_shard, dim)
    return _Softmax.apply(x_shard, axis, group, _SOFTMAX, _dtype_argument(dtype))


def log_softmax(x_shard, dim=-1, group=None, *, dtype=None):
    """This rank's shard of log_softmax(x, dim): x - max - log(sum(exp(x - max))) over the whole rows. Arguments
    as for softmax(); the backward all-reduces sum(dy) per row once."""
    axis = _axis(x_shard, dim)
    return _Softmax.apply(x_shard, axis, group, _LOG_SOFTMAX, _dtype_argument(dtype))


class _Logsumexp(torch.autograd.Function):
    """logsumexp over the whole rows; its gradient exp(x - lse) needs nothing from the other ranks."""

    @staticmethod
    def forward(ctx, x, axis, group, keepdim):
        gathered = _gathered_statistics(x, axis, group)
        stats_view = _view(gathered)
        out = torch.empty(_logprobs.per_row_shape(tuple(x.shape), axis, keepdim), dtype=gathered.dtype,
                          device=x.device)
        out_view = _view(out, writable=True)
        _run("ShardLogsumexp", stats_view, axis, [stats_view, out_view],
             [(out_view.dtype, out_view), (stats_view.dtype, stats_view)],
             lambda d, workspace: lib.smxShardLogsumexp(d.pointer, workspace, d.workspace_bytes, out_view.pointer,
                                                        stats_view.pointer, stats_view.stream))
        ctx.save_for_backward(x, out)
        ctx.axis, ctx.keepdim = axis, keepdim
        return out

    @staticmethod
    def backward(ctx, grad):
        x, out = ctx.saved_tensors
        if not ctx.keepdim:
            out, grad = out.unsqueeze(ctx.axis), grad.unsqueeze(ctx.axis)
        return (grad * torch.exp(x.to(out.dtype) - out)).to(x.dtype), None, None, None


def logsumexp(x_shard, dim=-1, group=None, *, keepdim=False):
    """log(sum(exp(x))) of the whole rows (x: every rank's x_shard along `dim`), the same bits on every rank:
    float32 (float64 for float64 x), x's shape without `dim` (keepdim: with it of size 1). Special values as
    torch.logsumexp. Arguments as for softmax(); the backward needs no collective."""
    axis = _axis(x_shard, dim)
    return _Logsumexp.apply(x_shard, axis, group, bool(keepdim))


def _check_target(logits, target, axis):
    if not isinstance(target, torch.Tensor):
        raise TypeError(f"target must be a torch tensor; got {type(target).__name__}")
    if target.is_floating_point():
        raise NotImplementedError("smx.distributed.cross_entropy takes class indices (int32/int64 target); "
                                  "probability targets are not supported")
    if target.device != logits.device:
        raise ValueError(f"target is on {target.device} but logits_shard is on {logits.device}")
    _logprobs.check_target_shape(tuple(logits.shape), tuple(target.shape), axis)


def _shard_cross_entropy(logits, target, axis, gathered, vocab_start, options, reduction_code, want_grad):
    """Step 3 of cross-entropy: (loss, lse, dlogits or None) of this rank from the gathered statistics."""
    rows = _logprobs.per_row_shape(tuple(logits.shape), axis)
    loss = torch.empty(rows if reduction_code == 0 else (), dtype=gathered.dtype, device=logits.device)
    lse = torch.empty(rows, dtype=gathered.dtype, device=logits.device)
    dlogits = torch.empty_like(logits) if want_grad else None
    logits_view, target_view, stats_view = _view(logits), _view(target, index=True), _view(gathered)
    loss_view, lse_view = _view(loss, writable=True), _view(lse, writable=True)
    dlogits_view = _view(dlogits, writable=True) if want_grad else None
    tensors = [(loss_view.dtype, loss_view), (lse_view.dtype, lse_view),
               None if dlogits_view is None else (dlogits_view.dtype, dlogits_view), (logits_view.dtype, logits_view),
               (target_view.dtype, target_view), (stats_view.dtype, stats_view)]
    views = [v for v in (logits_view, target_view, stats_view, loss_view, lse_view, dlogits_view) if v is not None]
    _run("ShardCrossEntropy", logits_view, axis, views, tensors,
         lambda d, workspace: lib.smxShardCrossEntropy(
             d.pointer, workspace, d.workspace_bytes, loss_view.pointer, lse_view.pointer,
             dlogits_view and dlogits_view.pointer, logits_view.pointer, target_view.pointer, stats_view.pointer,
             logits_view.stream),
         arguments=(ctypes.byref(options), ctypes.c_int64(vocab_start)),
         key_extra=(reduction_code, options.ignoreIndex, options.labelSmoothing, vocab_start))
    return loss, lse, dlogits


class _CrossEntropy(torch.autograd.Function):
    """The loss with this shard's dlogits computed in the same pass (for a grad_output of 1): the backward only
    scales them, with no collective."""

    @staticmethod
    def forward(ctx, logits, target, axis, vocab_start, group, options, reduction_code):
        gathered = _gathered_statistics(logits, axis, group, target, vocab_start)
        want_grad = ctx.needs_input_grad[0]
        loss, lse, dlogits = _shard_cross_entropy(logits, target, axis, gathered, vocab_start, options,
                                                  reduction_code, want_grad)
        if want_grad:
            ctx.save_for_backward(dlogits)
        ctx.axis, ctx.reduced = axis, reduction_code != 0
        return loss

    @staticmethod
    def backward(ctx, grad_loss):
        (dlogits,) = ctx.saved_tensors
        scale = grad_loss if ctx.reduced else grad_loss.unsqueeze(ctx.axis)
        return (dlogits * scale).to(dlogits.dtype), None, None, None, None, None, None


def cross_entropy(logits_shard, target, vocab_start, group=None, ignore_index=-100, label_smoothing=0.0,
                  reduction="mean", *, dim=-1):
    """F.cross_entropy(logits, target) of the whole rows, logits being every rank's logits_shard along `dim` (the
    classes; default the last) in rank order, this rank's holding classes [vocab_start, vocab_start + its size).

    target: int32 or int64 global class indices, logits' shape without `dim`, the same on every rank.
    ignore_index, label_smoothing, reduction: as torch's ('mean' divides by the rows not ignored: NaN for none).
    The vocabulary size is the shards' sizes added, learnt from the same all-gather. Returns the loss, float32
    (float64 for float64 logits), the same bits on every rank. Autograd: this rank's dlogits come from the
    forward pass (logits read once); the backward scales them by grad_output, with no collective. A target
    outside [0, vocabulary size) that is not ignore_index gives NaN in its row (no host check: that would wait for
    the device)."""
    axis = _axis(logits_shard, dim)
    _check_target(logits_shard, target, axis)
    reduction_code = _logprobs.check_reduction(reduction)
    label_smoothing = _logprobs.check_label_smoothing(label_smoothing)
    ignore_index = _logprobs.check_integer("ignore_index", ignore_index)
    vocab_start = _logprobs.check_integer("vocab_start", vocab_start)
    if vocab_start < 0:
        raise ValueError(f"vocab_start must be >= 0; got {vocab_start}")
    options = CrossEntropyOptions(reduction_code, ignore_index, label_smoothing)
    return _CrossEntropy.apply(logits_shard, target, axis, vocab_start, group, options, reduction_code)
