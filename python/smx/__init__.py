"""smx: softmax and log-softmax and their gradients, logsumexp, log-softmax gather and cross-entropy on CPU and
CUDA through libsmx's C API (ctypes, and torch.ops.smx for torch).

    import numpy as np, smx
    y = smx.softmax(np.random.rand(4, 10).astype(np.float32), dim=-1)

NumPy arrays run on the CPU; torch tensors on their own device; other CUDA arrays through
__cuda_array_interface__ (CuPy, Numba) or DLPack. See docs/python.md for the full semantics."""

import atexit
import ctypes
import operator
import sys
import threading

import numpy as np

from . import _arrays, _cache, _dtypes, _errors, _logprobs, _options, _streams
from ._errors import SmxError, SmxNotImplementedError, SmxRuntimeError, SmxTypeError, SmxValueError, check
from ._lib import LOG_CALLBACK, lib
from ._lib import path as _library_file

__version__ = "0.1.0"

__all__ = ["softmax", "log_softmax", "softmax_backward", "log_softmax_backward", "logsumexp", "log_softmax_gather",
           "cross_entropy", "plan", "version", "library_path", "set_log_level", "set_log_callback", "SmxError",
           "SmxValueError", "SmxTypeError", "SmxNotImplementedError", "SmxRuntimeError"]

_SOFTMAX, _LOG_SOFTMAX = 1, 2  # smxSoftmaxMode_t
_LOG_LEVELS = {"trace": 0, "debug": 1, "info": 2, "warn": 3, "warning": 3, "error": 4, "off": 6}
_ACCEPTED_LOG_LEVELS = f"{', '.join(_LOG_LEVELS)} or an int 0-4, 6"
_C_INT = range(-2 ** 31, 2 ** 31)


def _integer(value):
    """value as an int when it is an integer of any type (it has __index__), else None; bools are not."""
    if isinstance(value, (bool, np.bool_)):
        return None
    try:
        return operator.index(value)
    except TypeError:
        return None


def _axis(dim, ndim):
    """dim, any integer type but bool, normalized to [0, ndim) (a 0-d tensor counts as 1-d), or IndexError
    as torch raises it."""
    rank = max(ndim, 1)
    if type(dim) is not int:
        index = _integer(dim)
        if index is None:
            raise TypeError(f"dim must be an int (any integer type but bool); got {type(dim).__name__}")
        dim = index
    if not -rank <= dim < rank:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-rank}, {rank - 1}], "
                         f"but got {dim})")
    return dim % rank


def _problem(view, strides):
    """shape and strides for the C descriptor (_arrays.c_layout)."""
    return _arrays.c_layout(view.shape, strides)


def _output_dtype(view, dtype, out_view):
    code = view.dtype if dtype is None else _dtypes.from_argument(dtype)
    if out_view is not None and dtype is not None and out_view.dtype != code:
        raise TypeError(f"dtype={_dtypes.NAMES[code]} disagrees with out's dtype {_dtypes.NAMES[out_view.dtype]}")
    return code if out_view is None else out_view.dtype


def _forward(x, dim, dtype, out, stream, mode, scale=None, mask=None, causal=None, masked_rows="nan",
             batch_invariant=False):
    explicit_stream = None if stream is None else _arrays.stream_handle(stream)
    x_view = _arrays.describe(x, explicit_stream, writable=False)
    axis = _axis(dim, len(x_view.shape))
    options = None
    if not _options.unset(scale, mask, causal, masked_rows, batch_invariant):
        options = _options.prepare(x_view, scale, mask, causal, masked_rows, batch_invariant)
    y, y_view = _result(x, x_view, "x", dtype, out, x_view.stream)
    shape, x_strides = _problem(x_view, x_view.strides)
    _, y_strides = _problem(y_view, y_view.strides)
    descriptor = _cache.descriptor(x_view.device_type, x_view.device_id, mode, axis, shape, x_strides, y_strides,
                                   x_view.dtype, y_view.dtype, None if options is None else options.key)
    if options is None:
        _enqueue(lib.smxSoftmaxForward, descriptor, (x_view, y_view), (y_view.pointer, x_view.pointer))
    else:
        _enqueue(lib.smxSoftmaxForwardWithOptions, descriptor, (x_view, y_view, *options.views),
                 (y_view.pointer, x_view.pointer, options.scale_pointer, options.mask_pointer))
    if out is not None and y_view.library == "torch":
        _arrays.mark_torch_tensor_written(out)
    return y


def _backward(grad_output, output, dim, dtype, out, stream, mode):
    """The ctypes path of softmax_backward / log_softmax_backward (mode 1 / 2)."""
    explicit_stream = None if stream is None else _arrays.stream_handle(stream)
    dy_view = _arrays.describe(grad_output, explicit_stream, writable=False)
    if _arrays.library_of(output) != dy_view.library:
        raise TypeError(f"output is a {_arrays.library_of(output)} array but grad_output is a {dy_view.library} "
                        "array; smx takes both from one library")
    y_view = _arrays.describe(output, dy_view.stream, writable=False)
    if y_view.device_type != dy_view.device_type or y_view.device_id != dy_view.device_id:
        raise ValueError(f"output is on {y_view.device()} but grad_output is on {dy_view.device()}")
    if y_view.shape != dy_view.shape:
        raise ValueError(f"grad_output has shape {dy_view.shape} but output has shape {y_view.shape}")
    axis = _axis(dim, len(y_view.shape))
    dx, dx_view = _result(output, y_view, "output", dtype, out, dy_view.stream)
    shape, dy_strides = _problem(dy_view, dy_view.strides)
    _, y_strides = _problem(y_view, y_view.strides)
    _, dx_strides = _problem(dx_view, dx_view.strides)
    descriptor = _cache.backward_descriptor(y_view.device_type, y_view.device_id, mode, axis, shape, dx_strides,
                                            dy_strides, y_strides, dx_view.dtype, dy_view.dtype, y_view.dtype)
    _enqueue(lib.smxSoftmaxBackward, descriptor, (dy_view, y_view, dx_view),
             (dx_view.pointer, dy_view.pointer, y_view.pointer))
    if out is not None and dx_view.library == "torch":
        _arrays.mark_torch_tensor_written(out)
    return dx


def _result(source, source_view, source_name, dtype, out, stream):
    """(array, view) of what a call writes: `out`, checked against `source` (named `source_name` in messages),
    or a new array like source (its library, device, shape and dim order) of dtype= or source's dtype."""
    if out is None:
        result = _arrays.empty_like_layout(source, source_view, source_view.shape,
                                           _output_dtype(source_view, dtype, None))
    else:
        if _arrays.library_of(out) != source_view.library:
            raise TypeError(f"out is a {_arrays.library_of(out)} array but {source_name} is a {source_view.library} "
                            f"array; smx writes only into arrays of {source_name}'s own library")
        result = out
    view = _arrays.describe(result, stream, writable=True)
    if out is not None:
        if view.device_type != source_view.device_type or view.device_id != source_view.device_id:
            raise ValueError(f"out is on {view.device()} but {source_name} is on {source_view.device()}")
        if view.shape != source_view.shape:
            raise ValueError(f"out has shape {view.shape} but {source_name} has shape {source_view.shape}")
        _output_dtype(source_view, dtype, view)
    return result, view


def _enqueue(compute, descriptor, views, pointers):
    """compute(descriptor, workspace, bytes, *pointers, stream) on views[0]'s stream, through _streams.launch
    (the workspace the descriptor needs, interface arrays' streams ordered around the launch)."""
    stream = views[0].stream
    _streams.launch(views, descriptor,
                    lambda workspace: compute(descriptor.pointer, workspace, descriptor.workspace_bytes, *pointers,
                                              stream))


_operators = None  # smx.torch, once a torch tensor has come

# smx.torch's eager calls through its binding (softmax and log-softmax: (x, dim, dtype, out) -> out or the
# result, NotImplemented for a call that torch.ops must handle; None without the binding) and Dynamo's test for
# "tracing now", which skips them: taken from smx.torch with it (_import_operators), None until then.
_eager_softmax = _eager_log_softmax = _is_dynamo_compiling = None


def _import_operators():
    global _operators, _eager_softmax, _eager_log_softmax, _is_dynamo_compiling
    from . import torch as operators  # an import statement, which torch.compile can trace on a first call
    _operators = operators
    _is_dynamo_compiling = operators._is_dynamo_compiling  # first: another thread may see a call and use it
    _eager_softmax, _eager_log_softmax = operators._eager_softmax, operators._eager_log_softmax
    return operators


def _eager(call, x, dim, dtype, out, stream, scale, mask, causal, masked_rows, batch_invariant):
    """call(x, dim, dtype, out), smx.torch's eager softmax or log-softmax through its binding (None until a
    torch tensor has come, or without the binding), for a call with no stream and no option set, outside
    Dynamo's tracing: out or the result, libsmx's errors as smx's exceptions. NotImplemented for any other
    call, and for one the binding declines (x not a torch tensor, or arguments torch.ops must handle): the
    caller then takes its general path (docs/python.md, "Eager calls: the binding")."""
    if (call is None or stream is not None or scale is not None or mask is not None or causal is not None
            or batch_invariant is not False or type(masked_rows) is not str or masked_rows != "nan"
            or _is_dynamo_compiling()):
        return NotImplemented
    try:
        return call(x, dim, dtype, out)
    except (RuntimeError, ValueError, TypeError) as error:  # NotImplementedError is a RuntimeError
        raise _errors.translated(error) from None


def _torch_route(x):
    """smx.torch (imported on first use) when x is a torch tensor, whose calls go through torch.ops.smx;
    else None. torch itself is never imported here: whoever holds a tensor has imported it."""
    if _operators is not None:  # the common case, asked first: it costs on every call
        return _operators if isinstance(x, _operators._Tensor) else None
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(x, torch.Tensor):
        return None
    return _import_operators()


def softmax(x, dim=-1, *, dtype=None, out=None, stream=None, scale=None, mask=None, causal=None, masked_rows="nan",
            batch_invariant=False):
    """softmax of `x` along `dim`: exp(x - max) / sum(exp(x - max)), with PyTorch's semantics.

    x: a NumPy array or scalar (CPU; a scalar is a 0-d input), a torch tensor (CPU or CUDA), or a CUDA array
       exposing __cuda_array_interface__ or __dlpack__ (CuPy, Numba, ...), of float16, bfloat16, float32 or
       float64.
    dim: the axis (any integer type but bool), negative counting from the end; a 0-d x takes dim -1 or 0.
    dtype: the result's dtype (numpy/torch dtype or 'float16', 'bfloat16', 'float32', 'float64');
       any pair of them, computed in float32, or in float64 where either side is float64, rounded once.
    out: write here instead of allocating (same library, device and shape; out=x works in place).
    stream: the CUDA stream to enqueue on (int handle or stream object); default: torch's current stream
       for torch tensors, the producer's stream for __cuda_array_interface__, else the legacy default.
       A __cuda_array_interface__ stream (of x or out) other than it is ordered before and after the launch.
       CUDA calls return without waiting, like any kernel launch. Checked, then ignored, on the CPU.
    Options, fused into the same pass (docs/python.md, "Options"): y = softmax(scale * x + mask) over the kept
    elements, 0 (log-softmax: -inf) at the others, which are never read.
    scale: a float for every row, or an array of per-row factors of x's shape without `dim` (float32; other
       float dtypes are converted).
    mask: bool (True keeps) or floating (added after the scale), broadcastable to x by NumPy's
       rules, on x's device, read through its strides.
    causal: None, or an offset k: with x's last two dims (i, j) and dim the last one, j is kept when j <= i + k
       (0: SDPA's is_causal; keys - queries: aligned to the bottom right).
    masked_rows: 'nan' (PyTorch's default) or 'zero' for rows with nothing to normalize: NaN, or 0 (log: -inf).
    batch_invariant: True gives each row the same bits whatever the batch around it.
    Returns out, or a new array in x's library with x's dimension order (torch: torch.empty_like(x)'s).
    torch tensors go through torch.ops.smx.softmax (smx.torch): autograd, torch.compile, CUDA graphs."""
    y = _eager(_eager_softmax, x, dim, dtype, out, stream, scale, mask, causal, masked_rows, batch_invariant)
    if y is not NotImplemented:
        return y
    route = _torch_route(x)
    options = (scale, mask, causal, masked_rows, batch_invariant)
    if route is not None:
        if not _options.unset(*options):
            return route.softmax_with_options(x, dim, dtype, out, stream, *options)
        return route.softmax(x, dim, dtype, out, stream)
    return _forward(x, dim, dtype, out, stream, _SOFTMAX, *options)


def log_softmax(x, dim=-1, *, dtype=None, out=None, stream=None, scale=None, mask=None, causal=None,
                masked_rows="nan", batch_invariant=False):
    """log-softmax of `x` along `dim`: x - max - log(sum(exp(x - max))). Arguments as for softmax()."""
    y = _eager(_eager_log_softmax, x, dim, dtype, out, stream, scale, mask, causal, masked_rows, batch_invariant)
    if y is not NotImplemented:
        return y
    route = _torch_route(x)
    options = (scale, mask, causal, masked_rows, batch_invariant)
    if route is not None:
        if not _options.unset(*options):
            return route.log_softmax_with_options(x, dim, dtype, out, stream, *options)
        return route.log_softmax(x, dim, dtype, out, stream)
    return _forward(x, dim, dtype, out, stream, _LOG_SOFTMAX, *options)


def _torch_route_of_pair(grad_output, output):
    """smx.torch when either array is a torch tensor (the operators then check both), else None."""
    return _torch_route(output) or _torch_route(grad_output)


def softmax_backward(grad_output, output, dim=-1, *, dtype=None, out=None, stream=None):
    """The gradient of softmax's input from the gradient of its output: y * (dy - sum(dy * y)) along `dim`,
    with dy = grad_output and y = output (softmax's result), as torch._softmax_backward_data computes it.

    grad_output, output: arrays of one library, device and shape (any strides; either may broadcast), of one
       dtype (the forward's output dtype): float16, bfloat16, float32 or float64. NumPy arrays run on the CPU,
       torch tensors on their own device, CUDA arrays as for softmax().
    dim: the axis the forward reduced along, as for softmax().
    dtype: the gradient's dtype (the forward input's dtype, torch's `input_dtype`); default: output's dtype.
       Computed in float32, or in float64 where any of the three is float64, rounded once.
    out: write here instead of allocating (same library, device and shape); out=grad_output works in place,
       out sharing memory with output is refused.
    stream: as for softmax(); the launch stream is the one grad_output is read on.
    Returns out, or a new array in output's library with output's dimension order.
    torch tensors go through torch.ops.smx.softmax_backward (smx.torch): autograd, torch.compile, CUDA graphs."""
    route = _torch_route_of_pair(grad_output, output)
    if route is not None:
        return route.softmax_backward(grad_output, output, dim, dtype, out, stream)
    return _backward(grad_output, output, dim, dtype, out, stream, _SOFTMAX)


def log_softmax_backward(grad_output, output, dim=-1, *, dtype=None, out=None, stream=None):
    """The gradient of log_softmax's input: dy - exp(y) * sum(dy) along `dim`, with dy = grad_output and
    y = output (log_softmax's result), as torch._log_softmax_backward_data computes it. Arguments as for
    softmax_backward()."""
    route = _torch_route_of_pair(grad_output, output)
    if route is not None:
        return route.log_softmax_backward(grad_output, output, dim, dtype, out, stream)
    return _backward(grad_output, output, dim, dtype, out, stream, _LOG_SOFTMAX)


def logsumexp(x, dim=-1, *, keepdim=False, out=None, stream=None):
    """log(sum(exp(x))) along `dim`, as torch.logsumexp, reading x once: float32 (float64 for float64 x).

    x: as for softmax(). A row holding NaN gives NaN, else a +inf gives +inf; all -inf (or an empty axis)
    gives -inf. keepdim keeps `dim` with size 1. out: write here (x's library and device, the result's shape,
    float32 or float64 as above). stream: as for softmax()."""
    route = _torch_route(x)
    if route is not None:
        return route.logsumexp(x, dim, keepdim, out, stream)
    return _logprobs.logsumexp(x, dim, keepdim, out, stream)


def log_softmax_gather(x, index, dim=-1, *, check=False, stream=None):
    """log_softmax(x, dim).gather(dim, index) without the full log-softmax: float32 (float64 for float64 x),
    index's shape.

    index: int32 or int64, x's shape but along `dim` (any size K, repeats allowed). Indices outside
    [0, x.shape[dim]) (negative ones too, as torch.gather refuses them): on the host an IndexError before the
    call; on a GPU the result holds +inf there (no log-probability is +inf), or, with check=True, an
    IndexError after the call (which waits for the GPU). stream: as for softmax()."""
    route = _torch_route(x)
    if route is not None:
        return route.log_softmax_gather(x, index, dim, check, stream)
    return _logprobs.log_softmax_gather(x, index, dim, check, stream)


def cross_entropy(logits, target, *, dim=-1, ignore_index=-100, label_smoothing=0.0, reduction="mean",
                  inplace_backward=False, return_lse=False, weight=None, stream=None):
    """F.cross_entropy(logits, target) with class indices along `dim` (default the last; torch's own takes
    dim 1 for (N, C, ...) inputs: pass dim=1 there), reading the logits once.

    logits: any float dtype; target: int32 or int64 class indices of logits' shape without `dim`. Returns the
    loss, float32 (float64 for float64 logits): per row for reduction='none', else 0-d ('mean' divides by the
    rows whose target is not ignore_index: NaN when there are none); with return_lse, (loss, lse), lse the
    per-row logsumexp (no gradient flows through it). Torch tensors that require grad: autograd works, with
    dlogits computed in the same pass as the loss; inplace_backward=True writes them over the logits (which
    must not be needed afterwards). Targets out of range (and not ignore_index): IndexError on the host, NaN
    loss and gradient rows on a GPU. Class weights and probability targets are not supported yet
    (NotImplementedError)."""
    if weight is not None:
        raise NotImplementedError("smx.cross_entropy does not support class weights yet (weight=None only)")
    route = _torch_route(logits)
    if route is not None:
        return route.cross_entropy(logits, target, dim, ignore_index, label_smoothing, reduction, inplace_backward,
                                   return_lse, stream)
    _refuse_probability_target(target)
    loss, lse = _logprobs.cross_entropy(logits, target, dim, ignore_index, label_smoothing, reduction, return_lse,
                                        None, stream)
    return (loss, lse) if return_lse else loss


def _refuse_probability_target(target):
    dtype = getattr(target, "dtype", None)
    if dtype is not None and getattr(dtype, "kind", None) == "f":
        raise NotImplementedError("smx.cross_entropy takes class indices (int32/int64 target); probability "
                                  "targets are not supported yet")


def plan(x, dim=-1, *, dtype=None, log=False, scale=None, mask=None, causal=None, masked_rows="nan",
         batch_invariant=False):
    """The execution plan libsmx chooses for softmax(x, dim, dtype=dtype) (or log_softmax when `log`), with the
    options given (as softmax() takes them), e.g. 'cpu reference layout=rows threads=1'. Computes nothing; the
    descriptor is cached for the call that follows."""
    x_view = _arrays.describe(x, None, writable=False)
    axis = _axis(dim, len(x_view.shape))
    options = None
    if not _options.unset(scale, mask, causal, masked_rows, batch_invariant):
        options = _options.prepare(x_view, scale, mask, causal, masked_rows, batch_invariant)
    y_dtype = _output_dtype(x_view, dtype, None)
    shape, x_strides = _problem(x_view, x_view.strides)
    _, y_strides = _problem(x_view, _arrays.dense_strides_like(x_view.shape, x_view.strides))
    descriptor = _cache.descriptor(x_view.device_type, x_view.device_id, _LOG_SOFTMAX if log else _SOFTMAX, axis,
                                   shape, x_strides, y_strides, x_view.dtype, y_dtype,
                                   None if options is None else options.key)
    return descriptor.plan


def version():
    """The loaded libsmx's version as 'MAJOR.MINOR.PATCH' (smxGetVersion; may differ from __version__)."""
    number = lib.smxGetVersion()
    return f"{number // 10000}.{number // 100 % 100}.{number % 100}"


def library_path():
    """The file libsmx was loaded from."""
    return _library_file


def set_log_level(level):
    """Sets libsmx's log level: 'trace', 'debug', 'info', 'warn', 'error', 'off' or the smxLogLevel_t int.

    Raises TypeError for anything but a str or an int (bools included), ValueError for an unknown level."""
    if isinstance(level, str):
        if level.lower() not in _LOG_LEVELS:
            raise ValueError(f"unknown log level {level!r}; expected one of {_ACCEPTED_LOG_LEVELS}")
        level = _LOG_LEVELS[level.lower()]
    else:
        number = _integer(level)
        if number is None:
            raise TypeError(f"log level must be a str or an int, not {type(level).__name__}; expected one of "
                            f"{_ACCEPTED_LOG_LEVELS}")
        if number not in _C_INT:  # ctypes would pass it on cut to 32 bits
            raise ValueError(f"unknown log level {number}; expected one of {_ACCEPTED_LOG_LEVELS}")
        level = number
    check(lib.smxSetLogLevel(level))


_log_callback_lock = threading.Lock()
_log_callback = None  # the ctypes thunk libsmx calls: must stay referenced while installed
_in_log_callback = threading.local()  # .active while this thread runs the callback


def set_log_callback(callback):
    """Routes libsmx's messages to callback(level: int, message: str) (None: back to standard error).

    It may be called from any thread that calls smx. Turns logging on at 'info' unless a level was set.
    Raises TypeError, installing nothing, when callback is neither callable nor None."""
    global _log_callback
    if getattr(_in_log_callback, "active", False):
        # Refused before taking the lock: another thread may hold it while libsmx waits for this very
        # callback to return (smxSetLogCallback waits for deliveries of the callback it replaces).
        raise RuntimeError("smx.set_log_callback cannot be called from inside a log callback")
    if callback is not None and not callable(callback):  # else every later message would raise inside ctypes
        raise TypeError(f"callback must be callable as callback(level, message), or None; got "
                        f"{type(callback).__name__}")
    if callback is None:
        thunk = ctypes.cast(None, LOG_CALLBACK)
    else:
        def thunk_body(level, message, _user_data):
            _in_log_callback.active = True
            try:
                callback(level, message.decode("utf-8", "replace"))
            finally:
                _in_log_callback.active = False
        thunk = LOG_CALLBACK(thunk_body)
    with _log_callback_lock:
        check(lib.smxSetLogCallback(thunk, None))
        _log_callback = None if callback is None else thunk


def _reset_log_callback():
    """At exit: stop libsmx from calling into an interpreter that is shutting down."""
    if _log_callback is not None:
        set_log_callback(None)


def _cache_info():
    """Descriptor cache counters: CacheInfo(hits, misses, evictions, size, maxsize, handles)."""
    return _cache.cache_info()


def _cache_clear():
    """Empties the descriptor and handle caches and zeroes the counters."""
    _cache.cache_clear()


atexit.register(_reset_log_callback)  # after the cache's handler, so it runs before it (atexit is LIFO)
