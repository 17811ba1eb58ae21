"""What smx needs from an array object, read without copying: device, pointer, shape, element strides,
dtype; plus allocating results and workspaces in the array's own library.

Sources, cheapest first: NumPy arrays and scalars (CPU), torch.Tensor (read directly when torch is imported),
objects with __cuda_array_interface__ (CuPy, Numba, ...), objects with __dlpack__."""

import ctypes
import sys

import numpy as np

from . import _dlpack, _driver, _dtypes

__all__ = ["View", "describe", "stream_handle", "library_of", "empty_like_layout", "empty", "c_layout",
           "dense_strides_like", "workspace", "CPU", "CUDA"]

CPU, CUDA = 1, 2  # smxDeviceType_t
_WORKSPACE_ALIGNMENT = 256  # smxGetSoftmaxWorkspaceSize's contract


class View:
    """One array as smx sees it. `stream` is the CUDA stream smx launches on (0 on the CPU);
    `producer_stream` the stream a __cuda_array_interface__ names as the one its producer may still be
    working on (None for every other source: see _streams); `keepalive` holds whatever keeps `pointer`
    valid (a DLPack capsule) until the call returns."""
    __slots__ = ("library", "device_type", "device_id", "pointer", "shape", "strides", "dtype", "read_only",
                 "stream", "producer_stream", "keepalive")

    def device(self):
        return f"{'cpu' if self.device_type == CPU else 'cuda'}:{self.device_id}"


def library_of(obj):
    """The top-level package that defines obj's type ('numpy', 'torch', 'cupy', 'jax', ...)."""
    return type(obj).__module__.partition(".")[0]


def stream_handle(stream):
    """A stream argument as a cudaStream_t integer: an int, or an object with .cuda_stream (PyTorch),
    __cuda_stream__ (the CUDA stream protocol), .ptr (CuPy) or .handle (Numba)."""
    if isinstance(stream, bool):
        raise TypeError(f"stream={stream!r} is a bool, not a CUDA stream handle")
    if isinstance(stream, int):
        if stream < 0:
            raise ValueError(f"stream={stream} is not a CUDA stream handle")
        return stream
    for attribute in ("cuda_stream", "ptr"):
        value = getattr(stream, attribute, None)
        if isinstance(value, int):
            return value
    protocol = getattr(stream, "__cuda_stream__", None)
    if protocol is not None:
        return int(protocol()[1])
    handle = getattr(stream, "handle", None)
    if handle is not None:
        return int(getattr(handle, "value", handle) or 0)
    raise TypeError(f"stream={stream!r} is neither an int handle nor a stream object "
                    "(.cuda_stream, __cuda_stream__, .ptr or .handle)")


def _element_strides(byte_strides, shape, itemsize):
    strides = []
    for byte_stride, size in zip(byte_strides, shape):
        elements, remainder = divmod(byte_stride, itemsize)
        if remainder:
            if size > 1:
                raise ValueError(f"byte strides {tuple(byte_strides)} are not multiples of the element size "
                                 f"({itemsize} bytes); smx needs element-aligned strides")
            elements = 0  # a dim of size 0 or 1 never steps, so its stride is irrelevant
        strides.append(elements)
    return tuple(strides)


class _ArrayInterfaceStruct(ctypes.Structure):
    """NumPy's PyArrayInterface (the __array_struct__ capsule): its data pointer is read faster than
    __array_interface__, which builds a dict on every access."""
    _fields_ = [("two", ctypes.c_int), ("nd", ctypes.c_int), ("typekind", ctypes.c_char), ("itemsize", ctypes.c_int),
                ("flags", ctypes.c_int), ("shape", ctypes.c_void_p), ("strides", ctypes.c_void_p),
                ("data", ctypes.c_void_p), ("descr", ctypes.c_void_p)]


_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def _numpy_data_pointer(array):
    # The capsule owns the struct and frees it when collected: hold it while the struct is read (a
    # temporary capsule dies as soon as PyCapsule_GetPointer returns, leaving .data read from freed memory).
    capsule = array.__array_struct__
    return _ArrayInterfaceStruct.from_address(_capsule_pointer(capsule, None)).data or 0


def _from_numpy(array, view, allow_bool=False):
    if type(array) is not np.ndarray and isinstance(array, np.ma.MaskedArray):
        raise TypeError("masked arrays (numpy.ma.MaskedArray) are not supported: smx would ignore the mask; "
                        "pass .filled(value) or .data")
    view.library = "numpy"
    view.device_type, view.device_id, view.stream = CPU, 0, 0
    view.dtype = _dtypes.from_numpy(array.dtype, allow_bool)
    view.shape = array.shape
    view.strides = _element_strides(array.strides, array.shape, array.itemsize)
    view.pointer = _numpy_data_pointer(array)
    view.read_only = not array.flags.writeable


def _from_numpy_scalar(scalar, view, allow_bool=False):
    """A NumPy scalar (np.float32(3.0)) as the 0-d array it converts to, held by the view for the call.
    Read-only: a scalar is immutable, so what smx wrote to its copy would be lost."""
    array = np.asarray(scalar)
    _from_numpy(array, view, allow_bool)
    view.keepalive = array
    view.read_only = True


def _current_torch_stream(torch, device):
    """The handle of torch's current stream on `device`, a torch.device of a CUDA tensor that exists (so
    torch's CUDA state is initialized): torch's raw accessor where it has one (what torch.compile's
    generated code calls; ~0.3 us against ~3 us for torch.cuda.current_stream(device).cuda_stream)."""
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return raw(device.index)
    return torch.cuda.current_stream(device).cuda_stream


def _from_torch(tensor, stream, view, torch, allow_bool=False):
    if tensor.layout != torch.strided:
        raise TypeError(f"smx needs a strided (dense) tensor; got layout {tensor.layout}")
    device = tensor.device
    if device.type == "cpu":
        view.device_type, view.device_id, view.stream = CPU, 0, 0
    elif device.type == "cuda":
        view.device_type, view.device_id = CUDA, device.index if device.index is not None else 0
        view.stream = stream if stream is not None else _current_torch_stream(torch, device)
    else:
        raise TypeError(f"smx runs on CPU and CUDA devices; this tensor is on {device}")
    view.library = "torch"
    view.dtype = _dtypes.from_torch(tensor.dtype, allow_bool)
    view.shape = tuple(tensor.shape)
    view.strides = tuple(tensor.stride())
    view.pointer = tensor.data_ptr()
    view.read_only = False


def _cuda_device_of_pointer(pointer):
    """The ordinal of the CUDA device that owns `pointer`, asked of the CUDA driver; 0 without a driver."""
    if not _driver.available():
        # No driver, so no device holds it: libsmx's handle for device 0 then says why (3001 or 3002).
        return 0
    ordinal = ctypes.c_int(-1)
    attribute_device_ordinal = 9  # CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
    try:
        _driver.call("cuPointerGetAttribute", ctypes.byref(ordinal), attribute_device_ordinal, pointer,
                     what=f"asking which device holds pointer {pointer:#x}")
    except _driver.DriverError as error:
        raise ValueError(f"the CUDA driver cannot tell which device holds pointer {pointer:#x} ({error})") from None
    return ordinal.value


def _from_cuda_array_interface(obj, interface, stream, view, allow_bool=False):
    """Fills `view` from __cuda_array_interface__; False when its dtype needs DLPack (bfloat16)."""
    code = _dtypes.from_typestr(interface["typestr"], allow_bool)
    if code is None:
        return False
    if interface.get("mask") is not None:
        raise TypeError("masked arrays (__cuda_array_interface__ with a mask) are not supported")
    view.library = library_of(obj)
    view.device_type = CUDA
    view.dtype = code
    view.shape = tuple(interface["shape"])
    view.pointer, view.read_only = interface["data"]
    byte_strides = interface.get("strides")
    itemsize = 1 if code == _dtypes.BOOL else _dtypes.ITEMSIZE[code]
    if byte_strides is None:
        view.strides = dense_strides_like(view.shape, None)
    else:
        view.strides = _element_strides(byte_strides, view.shape, itemsize)
    if hasattr(obj, "__dlpack_device__"):
        view.device_id = int(obj.__dlpack_device__()[1])
    elif isinstance(getattr(getattr(obj, "device", None), "id", None), int):
        view.device_id = obj.device.id
    else:
        view.device_id = _cuda_device_of_pointer(view.pointer) if view.pointer else 0
    # The interface's stream is the one the data is ready on: launch there unless told otherwise (then the
    # launch is ordered after that stream's work, and it after the launch: _streams).
    view.producer_stream = interface.get("stream")
    view.stream = stream if stream is not None else (view.producer_stream or 0)
    return True


def _from_dlpack(obj, stream, writable, view, allow_bool=False):
    device_type, device_id = obj.__dlpack_device__()
    if device_type == _dlpack.DEVICE_CPU:
        view.device_type, view.stream, consumer_stream = CPU, 0, None
    elif device_type in (_dlpack.DEVICE_CUDA, _dlpack.DEVICE_CUDA_MANAGED):
        view.device_type = CUDA
        view.stream = stream if stream is not None else 0
        consumer_stream = view.stream or 1  # DLPack spells the legacy default stream 1 (0 is ambiguous)
    else:
        raise TypeError(f"smx runs on CPU and CUDA devices; this {type(obj).__name__} is on "
                        f"{_dlpack.device_name(device_type, device_id)}")
    capsule = _dlpack.export(obj, consumer_stream, writable)
    parsed = _dlpack.parse(capsule, allow_bool)
    if writable and parsed.copied:
        raise ValueError(f"out= ({type(obj).__name__}) was exported as a copy; writes would be lost")
    view.library = library_of(obj)
    view.device_id = device_id if view.device_type == CUDA else 0
    view.pointer, view.shape, view.strides = parsed.pointer, parsed.shape, parsed.strides
    view.dtype, view.read_only = parsed.dtype, parsed.read_only
    view.keepalive = capsule


def describe(obj, stream, writable, index=False, allow_bool=False):
    """The View of `obj`. `stream` is the caller's explicit stream handle or None (then: the current torch
    stream for torch tensors, the producer's stream for __cuda_array_interface__, else the legacy default).
    `writable` marks an output, which must be writable memory of the object itself. `index` marks an operand
    of indices (int32, int64); every other operand is floating, except that `allow_bool` lets a bool array
    through (a mask)."""
    view = View()
    view.keepalive = None
    view.producer_stream = None
    if isinstance(obj, np.ndarray):
        _from_numpy(obj, view, allow_bool)
    elif isinstance(obj, np.generic):
        _from_numpy_scalar(obj, view, allow_bool)
    else:
        torch = sys.modules.get("torch")
        if torch is not None and isinstance(obj, torch.Tensor):
            _from_torch(obj, stream, view, torch, allow_bool)
        else:
            try:
                interface = getattr(obj, "__cuda_array_interface__", None)
            except Exception:  # JAX raises (not AttributeError) for CPU and bfloat16 buffers: try DLPack
                interface = None
            if interface is None or not _from_cuda_array_interface(obj, interface, stream, view, allow_bool):
                if hasattr(obj, "__dlpack__"):
                    _from_dlpack(obj, stream, writable, view, allow_bool)
                elif interface is not None:
                    raise TypeError(f"__cuda_array_interface__ typestr {interface['typestr']!r} names no dtype "
                                    "smx reads (bfloat16 arrays must also offer __dlpack__)")
                else:
                    raise TypeError(f"smx takes NumPy arrays, torch tensors, or arrays with "
                                    f"__cuda_array_interface__ or __dlpack__; got {type(obj).__module__}."
                                    f"{type(obj).__qualname__}")
    if view.dtype != _dtypes.BOOL:
        _dtypes.check_kind(view.dtype, index)
    if writable and view.read_only:
        raise ValueError(f"out= is read-only ({type(obj).__name__})")
    return view


_increment_version = None  # torch.autograd.graph.increment_version, looked up on first use


def mark_torch_tensor_written(tensor):
    """Bumps the version counter of a torch tensor smx wrote through its pointer, as any in-place torch
    op does: autograd then refuses a backward that needs the values it held before (instead of computing
    a wrong gradient). Inference tensors have no version counter."""
    global _increment_version
    if _increment_version is None:
        torch = sys.modules["torch"]
        # A no-op stand-in where this torch has no such function.
        _increment_version = getattr(getattr(torch.autograd, "graph", None), "increment_version", None) or (
            lambda _tensor: None)
    if not tensor.is_inference():
        _increment_version(tensor)


def _dim_order(strides):
    """Dims from outermost to innermost by |stride| (ties keep their order), i.e. the memory order."""
    magnitudes = [abs(stride) for stride in strides]
    if all(outer >= inner for outer, inner in zip(magnitudes, magnitudes[1:])):
        return list(range(len(strides)))  # already in memory order (row-major): the common case, no sort
    return sorted(range(len(strides)), key=lambda dim: -magnitudes[dim])


def c_layout(shape, strides):
    """shape and strides for a C tensor descriptor: a 0-d array becomes a 1-element 1-d tensor, and an array
    with no elements gets row-major strides (NumPy gives such arrays zero strides; libsmx accepts any strides
    there, and row-major ones keep the descriptor caches to one entry per empty shape)."""
    if not shape:
        return (1,), (1,)
    if 0 in shape:
        return shape, dense_strides_like(shape, None)
    return shape, strides


def dense_strides_like(shape, strides):
    """Element strides of a dense tensor of `shape` whose dims lie in memory in the order of `strides`
    (row-major when strides is None): what empty_like_layout allocates."""
    order = range(len(shape)) if strides is None else _dim_order(strides)
    result = [0] * len(shape)
    step = 1
    for dim in reversed(list(order)):
        result[dim] = step
        step *= max(shape[dim], 1)
    return tuple(result)


def empty_like_layout(obj, view, shape, code):
    """A new array of `shape` and dtype `code` in obj's library, on its device, with obj's dim order (so
    a transposed input gives a transposed, dense output, as numpy's order='K' and torch.empty_like do)."""
    order = _dim_order(view.strides)
    inverse = [0] * len(order)
    for position, dim in enumerate(order):
        inverse[dim] = position
    ordered_shape = tuple(shape[dim] for dim in order)
    library = view.library
    if library == "numpy":
        return np.empty(ordered_shape, _dtypes.to_numpy(code)).transpose(inverse)
    if library == "torch":
        torch = sys.modules["torch"]
        result = torch.empty(ordered_shape, dtype=_dtypes.to_torch(code), device=obj.device)
        if order != list(range(len(order))):  # permute only a result that is not row-major (~2 us a call)
            result = result.permute(inverse)
        if view.device_type == CUDA and view.stream != _current_torch_stream(torch, obj.device):
            # Allocated on the current stream, written on view.stream: if the caller drops the result
            # before the kernel runs, the allocator must not hand its block to the current stream's next
            # allocation while smx still writes it.
            result.record_stream(_torch_stream(torch, view))
        return result
    if library == "cupy":
        cupy = sys.modules["cupy"]
        # From the pool of the stream smx writes it on (as the workspace), for the same reason.
        with cupy.cuda.Device(view.device_id), _cupy_stream(cupy, view):
            return cupy.empty(ordered_shape, _dtypes.to_numpy(code)).transpose(inverse)
    raise TypeError(f"smx cannot allocate a result in {library} ({type(obj).__qualname__}); "
                    "pass out= (an array of the same shape on the same device)")


def empty(obj, view, shape, code):
    """A new row-major array of `shape` and dtype `code` in obj's library, on view's device (view: obj's)."""
    row_major = View()
    for name in View.__slots__:
        setattr(row_major, name, getattr(view, name, None))
    row_major.strides = dense_strides_like(shape, None)
    return empty_like_layout(obj, row_major, shape, code)


def workspace(view, nbytes):
    """(owner, pointer) of `nbytes` of scratch memory on view's device, 256-byte aligned, for one call on
    view.stream. CUDA memory comes from torch's or CuPy's stream-ordered pool, tied to that stream, so it
    is not reused before the launch that uses it has run."""
    padded = nbytes + _WORKSPACE_ALIGNMENT - 1
    if view.device_type == CPU:
        owner = np.empty(padded, np.uint8)
        address = owner.__array_interface__["data"][0]
    else:
        owner, address = _cuda_workspace(view, padded)
    return owner, (address + _WORKSPACE_ALIGNMENT - 1) // _WORKSPACE_ALIGNMENT * _WORKSPACE_ALIGNMENT


def _torch_stream(torch, view):
    """view.stream (a CUDA launch stream) as a torch stream object of view's device."""
    device = torch.device("cuda", view.device_id)
    if view.stream in (0, 1):  # 1: the legacy default stream's explicit handle
        return torch.cuda.default_stream(device)
    return torch.cuda.ExternalStream(view.stream, device=device)


def _cupy_stream(cupy, view):
    """view.stream as a CuPy stream object (enter it to allocate from its pool)."""
    return cupy.cuda.Stream.null if view.stream in (0, 1) else cupy.cuda.ExternalStream(view.stream)


def _cuda_workspace(view, nbytes):
    torch, cupy = sys.modules.get("torch"), sys.modules.get("cupy")
    if view.library == "torch" or (view.library != "cupy" and torch is not None and torch.cuda.is_available()):
        device = torch.device("cuda", view.device_id)
        if view.stream == torch.cuda.current_stream(device).cuda_stream:
            owner = torch.empty(nbytes, dtype=torch.uint8, device=device)
        else:
            with torch.cuda.stream(_torch_stream(torch, view)):
                owner = torch.empty(nbytes, dtype=torch.uint8, device=device)
        return owner, owner.data_ptr()
    if cupy is not None:
        with cupy.cuda.Device(view.device_id), _cupy_stream(cupy, view):
            owner = cupy.empty(nbytes, np.uint8)
        return owner, owner.data.ptr
    raise RuntimeError(f"this problem needs {nbytes} bytes of CUDA workspace and smx allocates it through "
                       "torch or cupy; import one of them")
