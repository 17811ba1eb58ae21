"""logsumexp, log-softmax gather and cross-entropy through libsmx's C API (ctypes): what smx.logsumexp,
smx.log_softmax_gather and smx.cross_entropy run for NumPy arrays and CUDA arrays other than torch's, and what
torch.ops.smx's Python kernels call. Checks that need no data live here too, shared with smx.torch's fake
kernels."""

import ctypes
import operator
import sys

import numpy as np

from . import _arrays, _cache, _dtypes, _streams
from ._errors import check
from ._lib import CrossEntropyOptions, lib

__all__ = ["REDUCTIONS", "per_row_shape", "statistics_dtype", "check_reduction", "check_label_smoothing",
           "check_target_shape", "check_gathered_shape", "logsumexp", "log_softmax_gather", "cross_entropy",
           "index_bounds_error", "descriptor_of"]

#: smxLossReduction_t by PyTorch's name.
REDUCTIONS = {"none": 0, "sum": 1, "mean": 2}


def per_row_shape(shape, axis, keepdim=False):
    """x's shape without `axis` (with it of size 1 where `keepdim`); a 0-d x has 0-d rows."""
    if not shape:
        return ()
    return tuple(shape[:axis]) + ((1,) if keepdim else ()) + tuple(shape[axis + 1:])


def statistics_dtype(code):
    """The dtype of logsumexp, gathered log-probabilities and losses: float64 for float64 x, else float32."""
    return _dtypes.F64 if code == _dtypes.F64 else _dtypes.F32


def check_reduction(reduction):
    """The smxLossReduction_t of a reduction name, or ValueError as torch words it."""
    if reduction not in REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction (expected 'none', 'sum' or 'mean')")
    return REDUCTIONS[reduction]


def check_label_smoothing(label_smoothing):
    if not isinstance(label_smoothing, (int, float, np.floating, np.integer)) or isinstance(label_smoothing, bool):
        raise TypeError(f"label_smoothing must be a float; got {type(label_smoothing).__name__}")
    if not 0.0 <= float(label_smoothing) <= 1.0:
        raise ValueError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    return float(label_smoothing)


def check_integer(name, value):
    """value as an int when it is an integer of any type but bool, else TypeError naming it."""
    if not isinstance(value, (bool, np.bool_)):
        try:
            return operator.index(value)
        except TypeError:
            pass
    raise TypeError(f"{name} must be an int; got {type(value).__name__}")


def check_target_shape(logits_shape, target_shape, axis):
    """ValueError unless target has logits' shape without the class axis."""
    expected = per_row_shape(tuple(logits_shape), axis)
    if tuple(target_shape) != expected:
        raise ValueError(f"target has shape {tuple(target_shape)}, but logits of shape {tuple(logits_shape)} with "
                         f"classes along dim {axis} take a target of shape {expected}")


def check_gathered_shape(x_shape, index_shape, axis):
    """ValueError unless index has x's shape but along `axis` (0-d x: a 0-d index)."""
    x_shape, index_shape = tuple(x_shape), tuple(index_shape)
    if len(index_shape) != len(x_shape) or per_row_shape(index_shape, axis) != per_row_shape(x_shape, axis):
        raise ValueError(f"index has shape {index_shape}, but x of shape {x_shape} takes an index of its shape "
                         f"but along dim {axis}")


def index_bounds_error(low, high, size, axis, what):
    """The IndexError for indices in [low, high] of which some fall outside [0, size), or None."""
    bad = low if low < 0 else high if high >= size else None
    if bad is None:
        return None
    return IndexError(f"{what} {bad} is out of bounds for dimension {axis} with size {size}")


def _check_host_bounds(obj, view, size, axis, what, skip=None):
    """IndexError for values of a host integer array (NumPy, or a CPU array offering DLPack) outside
    [0, size) but `skip`; device arrays are not read (the call marks those values instead)."""
    if view.device_type != _arrays.CPU:
        return
    values = np.asarray(obj) if isinstance(obj, (np.ndarray, np.generic)) else np.from_dlpack(obj)
    if skip is not None:
        values = values[values != skip]
    error = values.size and index_bounds_error(int(values.min()), int(values.max()), size, axis, what)
    if error:
        raise error


class _Descriptor:
    """A descriptor of one log-probability operator (`kind`: 'Logsumexp', 'LogSoftmaxGather',
    'CrossEntropy', and smx.distributed's 'Shard...' kinds), with its workspace size and plan text read once
    at creation. `tensors` are (dtype, shape, strides) or None, passed to the create call after `arguments`;
    `leading` goes before the axis (a softmax mode)."""
    __slots__ = ("pointer", "handle", "workspace_bytes", "plan", "_destroy")

    def __init__(self, handle, kind, axis, arguments, tensors, leading=()):
        self.pointer = None
        self.handle = handle
        self._destroy = getattr(lib, f"smxDestroy{kind}Descriptor")
        made = []
        try:
            for spec in tensors:
                made.append(None if spec is None else _cache.tensor_descriptor(*spec))
            pointer = ctypes.c_void_p()
            create = getattr(lib, f"smxCreate{kind}Descriptor")
            check(create(handle.pointer, ctypes.byref(pointer), *leading, axis, *arguments, *made))
            self.pointer = pointer.value
        finally:
            for desc in made:
                if desc is not None:
                    lib.smxDestroyTensorDescriptor(desc)
        self.workspace_bytes, self.plan = _cache.workspace_and_plan(
            self.pointer, getattr(lib, f"smxGet{kind}WorkspaceSize"), getattr(lib, f"smxGet{kind}Plan"))

    def __del__(self):
        if self.pointer:
            self._destroy(self.pointer)


def descriptor_of(lead, kind, axis, arguments, tensors, key_extra=(), leading=()):
    """The cached descriptor of `kind` on lead's device for these tensors ((dtype, view) or None). `key_extra`
    must hold every value of `arguments` and `leading` that the tensors do not determine."""
    specs = tuple(None if t is None else (t[0],) + _arrays.c_layout(t[1].shape, t[1].strides) for t in tensors)
    key = (kind, lead.device_type, lead.device_id, axis, specs) + tuple(leading) + tuple(key_extra)
    return _cache.cached(key, lead.device_type, lead.device_id,
                         lambda handle: _Descriptor(handle, kind, axis, arguments, specs, leading))


def _same_device(view, lead, name):
    if view.device_type != lead.device_type or view.device_id != lead.device_id:
        raise ValueError(f"{name} is on {view.device()} but x is on {lead.device()}")


def _result(obj, lead, shape, code, out, name="out"):
    """(array, view): `out` checked against the shape and dtype a result must have, or a new one."""
    if out is None:
        result = _arrays.empty(obj, lead, shape, code)
    elif _arrays.library_of(out) != lead.library:
        raise TypeError(f"{name} is a {_arrays.library_of(out)} array but x is a {lead.library} array; smx "
                        "writes only into arrays of x's own library")
    else:
        result = out
    view = _arrays.describe(result, lead.stream, writable=True)
    _same_device(view, lead, name)
    if view.shape != tuple(shape):
        raise ValueError(f"{name} has shape {view.shape} but must have shape {tuple(shape)}")
    if view.dtype != code:
        raise TypeError(f"{name} has dtype {_dtypes.NAMES[view.dtype]} but must be {_dtypes.NAMES[code]}")
    return result, view


def _explicit_stream(stream):
    return None if stream is None else _arrays.stream_handle(stream)


def _axis(dim, ndim):
    from . import _axis as normalize  # the package's own dim rules (any integer but bool, torch's IndexError)
    return normalize(dim, ndim)


def logsumexp(x, dim, keepdim, out, stream):
    """log(sum(exp(x))) along dim: float32 (float64 for float64 x), per row (keepdim: axis kept, size 1)."""
    x_view = _arrays.describe(x, _explicit_stream(stream), writable=False)
    axis = _axis(dim, len(x_view.shape))
    code = statistics_dtype(x_view.dtype)
    result, out_view = _result(x, x_view, per_row_shape(x_view.shape, axis, keepdim), code, out)
    descriptor = descriptor_of(x_view, "Logsumexp", axis, (), [(code, out_view), (x_view.dtype, x_view)])
    _streams.launch([x_view, out_view], descriptor,
           lambda workspace: lib.smxLogsumexp(descriptor.pointer, workspace, descriptor.workspace_bytes,
                                              out_view.pointer, x_view.pointer, x_view.stream))
    if out is not None and out_view.library == "torch":
        _arrays.mark_torch_tensor_written(out)
    return result


def _any_out_of_range(result, view):
    """Whether a gather result holds +inf, the mark of an index out of range (synchronizes on a GPU)."""
    if view.library == "numpy":
        return bool(np.isposinf(result).any())
    if view.library == "torch":
        return bool(sys.modules["torch"].isposinf(result).any())
    return bool(sys.modules["cupy"].isposinf(result).any())


def _values_and_indices(x, index, dim, stream, name):
    """(x's view, index's view, the axis, its size): x floating, `index` (named `name`) int32/int64 on x's
    device, read on x's launch stream."""
    x_view = _arrays.describe(x, _explicit_stream(stream), writable=False)
    index_view = _arrays.describe(index, x_view.stream, writable=False, index=True)
    _same_device(index_view, x_view, name)
    axis = _axis(dim, len(x_view.shape))
    return x_view, index_view, axis, x_view.shape[axis] if x_view.shape else 1


def log_softmax_gather(x, index, dim, check_bounds, stream):
    """log_softmax(x, dim) at `index` (x's shape but along dim), float32 (float64 for float64 x), without the
    full log-softmax. Host indices are checked before the call (IndexError); device ones write +inf where out
    of range, or raise after the call with check_bounds (which waits for the GPU)."""
    x_view, index_view, axis, size = _values_and_indices(x, index, dim, stream, "index")
    check_gathered_shape(x_view.shape, index_view.shape, axis)
    _check_host_bounds(index, index_view, size, axis, "index")
    code = statistics_dtype(x_view.dtype)
    result, out_view = _result(x, x_view, index_view.shape, code, None)
    descriptor = descriptor_of(x_view, "LogSoftmaxGather", axis, (),
                             [(code, out_view), (x_view.dtype, x_view), (index_view.dtype, index_view)])
    _streams.launch([x_view, index_view, out_view], descriptor,
           lambda workspace: lib.smxLogSoftmaxGather(descriptor.pointer, workspace, descriptor.workspace_bytes,
                                                     out_view.pointer, x_view.pointer, index_view.pointer,
                                                     x_view.stream))
    if check_bounds and index_view.device_type != _arrays.CPU and _any_out_of_range(result, out_view):
        raise IndexError(f"an index is out of bounds for dimension {axis} with size {size} (check=True)")
    return result


def cross_entropy(logits, target, dim, ignore_index, label_smoothing, reduction, want_lse, dlogits, stream):
    """F.cross_entropy with class indices along dim: (loss, lse or None). The loss is float32 (float64 for
    float64 logits): per row for reduction 'none', else 0-d. `dlogits`: None, an array of logits' shape to
    receive the gradient of the loss (for a grad_output of 1), or `logits` itself (in place). Host targets out
    of range (and not ignore_index) raise IndexError before the call; device ones give NaN."""
    reduction_code = check_reduction(reduction)
    label_smoothing = check_label_smoothing(label_smoothing)
    ignore_index = check_integer("ignore_index", ignore_index)
    logits_view, target_view, axis, classes = _values_and_indices(logits, target, dim, stream, "target")
    check_target_shape(logits_view.shape, target_view.shape, axis)
    _check_host_bounds(target, target_view, classes, axis, "Target", skip=ignore_index)
    code = statistics_dtype(logits_view.dtype)
    rows_shape = per_row_shape(logits_view.shape, axis)
    loss, loss_view = _result(logits, logits_view, rows_shape if reduction_code == 0 else (), code, None)
    lse, lse_view = _result(logits, logits_view, rows_shape, code, None) if want_lse else (None, None)
    dlogits_view = None
    if dlogits is not None:
        dlogits_view = _arrays.describe(dlogits, logits_view.stream, writable=True)
        _same_device(dlogits_view, logits_view, "dlogits")
    options = CrossEntropyOptions(reduction_code, ignore_index, label_smoothing)
    tensors = [(code, loss_view), None if lse_view is None else (code, lse_view),
               None if dlogits_view is None else (dlogits_view.dtype, dlogits_view),
               (logits_view.dtype, logits_view), (target_view.dtype, target_view)]
    descriptor = descriptor_of(logits_view, "CrossEntropy", axis, (ctypes.byref(options),), tensors,
                             key_extra=(reduction_code, ignore_index, label_smoothing))
    views = [v for v in (logits_view, target_view, loss_view, lse_view, dlogits_view) if v is not None]
    _streams.launch(views, descriptor,
           lambda workspace: lib.smxCrossEntropy(descriptor.pointer, workspace, descriptor.workspace_bytes,
                                                 loss_view.pointer, lse_view and lse_view.pointer,
                                                 dlogits_view and dlogits_view.pointer, logits_view.pointer,
                                                 target_view.pointer, logits_view.stream))
    if dlogits is not None and dlogits_view.library == "torch":
        _arrays.mark_torch_tensor_written(dlogits)
    return loss, lse
