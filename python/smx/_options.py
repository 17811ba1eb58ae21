"""The softmax options of smx.softmax / smx.log_softmax (scale, mask, causal, masked_rows, batch_invariant) for
the ctypes binding: checking the keywords, describing the per-row scale and the mask, the descriptor cache's
key for them, and the smxSoftmaxOptions_t made from that key. docs/python.md describes each option."""

import contextlib
import ctypes
import numbers
import sys

import numpy as np

from . import _arrays, _dtypes
from ._cache import tensor_descriptor
from ._errors import check
from ._lib import lib

__all__ = ["Prepared", "unset", "prepare", "options_object", "MASKED_ROWS"]

MASKED_ROWS = {"nan": 0, "zero": 1}  # smxMaskedRows_t


class Prepared:
    """Options ready for one call: `key` (hashable; the descriptor cache's, read by options_object), the data
    pointers of the per-row scale and the mask (None where unset), their views (for stream ordering) and
    whatever keeps converted copies alive through the call."""
    __slots__ = ("key", "scale_pointer", "mask_pointer", "views", "keepalive")


def unset(scale, mask, causal, masked_rows, batch_invariant):
    """Whether every option keyword has its default (identity tests: arrays are not compared by value)."""
    return (scale is None and mask is None and causal is None and batch_invariant is False and
            type(masked_rows) is str and masked_rows == "nan")


def _is_scalar(value):
    """A Python or NumPy real number (not a bool): a scale for every row."""
    return isinstance(value, (numbers.Real, np.floating, np.integer)) and not isinstance(value, (bool, np.bool_))


def _shape_and_strides(view):
    """A 0-d array as one element of shape (1,): the C API's tensors have 1 to 8 dims."""
    return ((1,), (1,)) if not view.shape else (view.shape, view.strides)


def _check_device(view, x_view, name):
    if view.device_type != x_view.device_type or view.device_id != x_view.device_id:
        raise ValueError(f"{name} is on {view.device()} but x is on {x_view.device()}")


def _float32_scale(scale):
    """A per-row scale as float32 in its own library (a copy where it is another float dtype)."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(scale, torch.Tensor):
        if not scale.is_floating_point():
            raise TypeError(f"a per-row scale is a floating array; got dtype {str(scale.dtype).replace('torch.', '')}")
        return scale if scale.dtype == torch.float32 else scale.to(torch.float32)
    if isinstance(scale, np.ndarray):
        if scale.dtype.kind != "f" and scale.dtype != _dtypes._ml_dtypes_bfloat16():
            raise TypeError(f"a per-row scale is a floating array; got dtype {scale.dtype.name}")
        return scale if scale.dtype == np.float32 else scale.astype(np.float32)
    return scale  # other libraries: described as they are, and refused below unless float32


def prepare(x_view, scale, mask, causal, masked_rows, batch_invariant):
    """The options of one call on x (already described), or None when they change nothing (scale None or 1,
    no mask, causal None, masked_rows 'nan', batch_invariant False): then the call is a plain softmax."""
    if type(masked_rows) is not str or masked_rows not in MASKED_ROWS:
        raise ValueError(f"masked_rows must be 'nan' or 'zero'; got {masked_rows!r}")
    if not isinstance(batch_invariant, (bool, np.bool_)):
        raise TypeError(f"batch_invariant must be a bool; got {type(batch_invariant).__name__}")
    if causal is not None:
        if isinstance(causal, (bool, np.bool_)):
            raise TypeError("causal must be None or an int offset (True is not an offset: causal=0 is is_causal)")
        try:
            causal = int(causal.__index__())
        except (AttributeError, TypeError):
            raise TypeError(f"causal must be None or an int offset; got {type(causal).__name__}") from None
        if not -2 ** 63 <= causal < 2 ** 63:
            raise ValueError(f"causal offset {causal} does not fit int64")
    prepared = Prepared()
    prepared.scale_pointer = prepared.mask_pointer = None
    prepared.views, prepared.keepalive = [], []
    scale_key = tensor_key = mask_key = None
    if scale is not None:
        if _is_scalar(scale):
            scale_key = float(scale) if float(scale) != 1.0 else None
        else:
            converted = _float32_scale(scale)
            prepared.keepalive.append(converted)
            view = _arrays.describe(converted, x_view.stream, writable=False)
            _check_device(view, x_view, "scale")
            if view.dtype != _dtypes.F32:
                raise TypeError(f"a per-row scale is float32; got {_dtypes.NAMES[view.dtype]}")
            tensor_key = _shape_and_strides(view)
            prepared.scale_pointer = view.pointer
            prepared.views.append(view)
            prepared.keepalive.append(view.keepalive)
    if mask is not None:
        view = _arrays.describe(mask, x_view.stream, writable=False, allow_bool=True)
        _check_device(view, x_view, "mask")
        mask_key = (view.dtype,) + _shape_and_strides(view)
        prepared.mask_pointer = view.pointer
        prepared.views.append(view)
        prepared.keepalive.append(view.keepalive)
    prepared.key = (scale_key, tensor_key, mask_key, causal, masked_rows == "zero", bool(batch_invariant))
    if prepared.key == (None, None, None, None, False, False):
        return None
    return prepared


@contextlib.contextmanager
def options_object(key):
    """An smxSoftmaxOptions_t holding prepare()'s key, destroyed on exit."""
    scale, scale_tensor, mask, causal, zero_rows, batch_invariant = key
    pointer = ctypes.c_void_p()
    check(lib.smxCreateSoftmaxOptions(ctypes.byref(pointer)))
    try:
        if scale is not None:
            check(lib.smxSetSoftmaxScale(pointer, scale))
        for setter, dtype_shape_strides in ((lib.smxSetSoftmaxScaleTensor, None if scale_tensor is None else
                                             (_dtypes.F32,) + scale_tensor), (lib.smxSetSoftmaxMask, mask)):
            if dtype_shape_strides is not None:
                tensor = tensor_descriptor(*dtype_shape_strides)
                try:
                    check(setter(pointer, tensor))
                finally:
                    lib.smxDestroyTensorDescriptor(tensor)
        if causal is not None:
            check(lib.smxSetSoftmaxCausal(pointer, 1, causal))
        if zero_rows:
            check(lib.smxSetSoftmaxMaskedRows(pointer, MASKED_ROWS["zero"]))
        if batch_invariant:
            check(lib.smxSetSoftmaxBatchInvariant(pointer, 1))
        yield pointer
    finally:
        lib.smxDestroySoftmaxOptions(pointer)
