"""Reads a DLPack capsule (from ``obj.__dlpack__()``) with ctypes, without consuming it.

Lifetime: the capsule owns the DLManagedTensor, whose manager keeps the producer's memory alive. We read
the struct through PyCapsule_GetPointer and never rename the capsule, so it stays unconsumed: when the
last reference to it goes, the producer's capsule destructor calls the deleter, as the protocol requires.
Callers keep the capsule referenced until the smx call that uses the pointer has returned (for CUDA, the
launch is enqueued; the memory then stays valid as long as the producer's array does, as with any
library working on that array)."""

import ctypes

from . import _dtypes

__all__ = ["export", "parse", "DEVICE_CPU", "DEVICE_CUDA", "DEVICE_CUDA_MANAGED", "device_name"]

# DLDeviceType values.
DEVICE_CPU, DEVICE_CUDA, DEVICE_CUDA_HOST, DEVICE_CUDA_MANAGED = 1, 2, 3, 13
_DEVICE_NAMES = {1: "cpu", 2: "cuda", 3: "cuda_host", 4: "opencl", 7: "vulkan", 8: "metal", 9: "vpi", 10: "rocm",
                 11: "rocm_host", 12: "ext_dev", 13: "cuda_managed", 14: "oneapi", 15: "webgpu", 16: "hexagon",
                 17: "maia"}

_FLAG_READ_ONLY = 1 << 0  # DLPACK_FLAG_BITMASK_READ_ONLY
_FLAG_IS_COPIED = 1 << 1  # DLPACK_FLAG_BITMASK_IS_COPIED


def device_name(device_type, device_id):
    """A device as text, e.g. 'cuda:1' or 'rocm:0'."""
    return f"{_DEVICE_NAMES.get(device_type, f'dlpack_device{device_type}')}:{device_id}"


class _Device(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _Device), ("ndim", ctypes.c_int32), ("dtype", _DataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class _ManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _Tensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


class _Version(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class _ManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("version", _Version), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p),
                ("flags", ctypes.c_uint64), ("dl_tensor", _Tensor)]


_capsule_get_name = ctypes.pythonapi.PyCapsule_GetName
_capsule_get_name.restype = ctypes.c_char_p
_capsule_get_name.argtypes = [ctypes.py_object]
_capsule_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_get_pointer.restype = ctypes.c_void_p
_capsule_get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def export(obj, stream, writable):
    """Calls obj.__dlpack__, asking for a versioned capsule (it can say read-only) and falling back to the
    legacy protocol for older producers. `stream` is the consumer's stream (None on the CPU); an output
    (`writable`) must be the producer's own memory, never a copy."""
    kwargs = {"stream": stream, "max_version": (1, 0)}
    if writable:
        kwargs["copy"] = False
    try:
        return obj.__dlpack__(**kwargs)
    except TypeError:  # a producer that predates DLPack 1.0's keywords
        return obj.__dlpack__(stream=stream)


class Parsed:
    """What a capsule describes: pointer to element [0, ...], shape, element strides, dtype code, device."""
    __slots__ = ("pointer", "shape", "strides", "dtype", "device_type", "device_id", "read_only", "copied")


def parse(capsule, allow_bool=False):
    """Reads a 'dltensor' or 'dltensor_versioned' capsule; TypeError for an unsupported dtype (bool only where
    `allow_bool`: a mask)."""
    name = _capsule_get_name(capsule)
    if name == b"dltensor_versioned":
        managed = _ManagedTensorVersioned.from_address(_capsule_get_pointer(capsule, name))
        if managed.version.major != 1:
            raise TypeError(f"DLPack version {managed.version.major}.{managed.version.minor} is not supported "
                            "(smx reads 1.x)")
        flags = managed.flags
    elif name == b"dltensor":
        managed = _ManagedTensor.from_address(_capsule_get_pointer(capsule, name))
        flags = 0
    else:
        raise ValueError(f"not an unconsumed DLPack capsule (its name is {name!r}); pass each capsule once")
    tensor = managed.dl_tensor
    parsed = Parsed()
    parsed.dtype = _dtypes.from_dlpack(tensor.dtype.code, tensor.dtype.bits, tensor.dtype.lanes, allow_bool)
    parsed.device_type = tensor.device.device_type
    parsed.device_id = tensor.device.device_id
    ndim = tensor.ndim
    parsed.shape = tuple(tensor.shape[i] for i in range(ndim))
    if tensor.strides:
        parsed.strides = tuple(tensor.strides[i] for i in range(ndim))
    else:  # NULL strides: compact row-major
        strides, step = [], 1
        for size in reversed(parsed.shape):
            strides.append(step)
            step *= size
        parsed.strides = tuple(reversed(strides))
    parsed.pointer = (tensor.data or 0) + tensor.byte_offset
    parsed.read_only = bool(flags & _FLAG_READ_ONLY)
    parsed.copied = bool(flags & _FLAG_IS_COPIED)
    return parsed
