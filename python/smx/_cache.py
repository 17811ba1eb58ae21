"""Handles (one per device) and descriptors of every operator (one LRU keyed by the whole problem), shared by
all threads under one lock.

A cached descriptor is a refcounted Python object: a thread that got it keeps it alive through its
forward call even if another thread evicts it meanwhile; the C descriptor is destroyed when the last
reference goes. Each descriptor references its handle, so handles outlive their descriptors, as smx.h
requires. At exit (atexit) the cache is emptied so everything is destroyed while libsmx and the CUDA
runtime are still up."""

import atexit
import collections
import ctypes
import threading

from ._errors import check
from ._lib import lib

__all__ = ["descriptor", "backward_descriptor", "cached", "tensor_descriptor", "workspace_and_plan", "cache_info",
           "cache_clear", "CacheInfo", "MAX_DESCRIPTORS"]

MAX_DESCRIPTORS = 256

CacheInfo = collections.namedtuple("CacheInfo", "hits misses evictions size maxsize handles")


class _Handle:
    """An smxHandle_t for one (device type, device id)."""
    __slots__ = ("pointer",)

    def __init__(self, device_type, device_id):
        self.pointer = None  # set before anything can fail, for __del__
        pointer = ctypes.c_void_p()
        check(lib.smxCreate(ctypes.byref(pointer), device_type, device_id))
        self.pointer = pointer.value

    def __del__(self, _destroy=lib.smxDestroy):  # bound now: module globals may be gone at shutdown
        if self.pointer:
            _destroy(self.pointer)


def tensor_descriptor(dtype, shape, strides):
    ndim = len(shape)
    pointer = ctypes.c_void_p()
    check(lib.smxCreateTensorDescriptor(ctypes.byref(pointer), dtype, ndim, (ctypes.c_int64 * ndim)(*shape),
                                        (ctypes.c_int64 * ndim)(*strides)))
    return pointer


class Descriptor:
    """An smxSoftmaxDescriptor_t with its workspace size and plan text, read once at creation. `options`: None,
    or the softmax options as _options.key() spells them (the descriptor is then made with them)."""
    __slots__ = ("pointer", "handle", "workspace_bytes", "plan")

    def __init__(self, handle, mode, axis, shape, x_strides, y_strides, x_dtype, y_dtype, options=None):
        self.pointer = None
        self.handle = handle
        x_desc = tensor_descriptor(x_dtype, shape, x_strides)
        try:
            y_desc = tensor_descriptor(y_dtype, shape, y_strides)
            try:
                pointer = ctypes.c_void_p()
                if options is None:
                    check(lib.smxCreateSoftmaxDescriptor(handle.pointer, ctypes.byref(pointer), mode, axis, y_desc,
                                                         x_desc))
                else:
                    from ._options import options_object
                    with options_object(options) as options_pointer:
                        check(lib.smxCreateSoftmaxDescriptorWithOptions(handle.pointer, ctypes.byref(pointer), mode,
                                                                        axis, y_desc, x_desc, options_pointer))
                self.pointer = pointer.value
            finally:
                lib.smxDestroyTensorDescriptor(y_desc)
        finally:
            lib.smxDestroyTensorDescriptor(x_desc)
        self.workspace_bytes, self.plan = workspace_and_plan(self.pointer, lib.smxGetSoftmaxWorkspaceSize,
                                                              lib.smxGetSoftmaxPlan)

    def __del__(self, _destroy=lib.smxDestroySoftmaxDescriptor):
        if self.pointer:
            _destroy(self.pointer)


def workspace_and_plan(pointer, get_workspace_size, get_plan):
    """(workspace bytes, plan text) of a descriptor, through its operator's two getters."""
    workspace_bytes = ctypes.c_size_t()
    check(get_workspace_size(pointer, ctypes.byref(workspace_bytes)))
    plan = ctypes.c_char_p()
    check(get_plan(pointer, ctypes.byref(plan)))
    return workspace_bytes.value, plan.value.decode()


class BackwardDescriptor:
    """An smxSoftmaxBackwardDescriptor_t with its workspace size and plan text, read once at creation."""
    __slots__ = ("pointer", "handle", "workspace_bytes", "plan")

    def __init__(self, handle, mode, axis, shape, dx_strides, dy_strides, y_strides, dx_dtype, dy_dtype, y_dtype):
        self.pointer = None
        self.handle = handle
        tensors = []
        try:
            for dtype, strides in ((dx_dtype, dx_strides), (dy_dtype, dy_strides), (y_dtype, y_strides)):
                tensors.append(tensor_descriptor(dtype, shape, strides))
            pointer = ctypes.c_void_p()
            check(lib.smxCreateSoftmaxBackwardDescriptor(handle.pointer, ctypes.byref(pointer), mode, axis, *tensors))
            self.pointer = pointer.value
        finally:
            for tensor in tensors:
                lib.smxDestroyTensorDescriptor(tensor)
        self.workspace_bytes, self.plan = workspace_and_plan(self.pointer, lib.smxGetSoftmaxBackwardWorkspaceSize,
                                                              lib.smxGetSoftmaxBackwardPlan)

    def __del__(self, _destroy=lib.smxDestroySoftmaxBackwardDescriptor):
        if self.pointer:
            _destroy(self.pointer)


# Reentrant: a log callback that calls smx runs inside a call holding it (libsmx logs while a handle or
# descriptor is created).
_lock = threading.RLock()
_handles = {}
_descriptors = collections.OrderedDict()
_stats = {"hits": 0, "misses": 0, "evictions": 0}


def descriptor(device_type, device_id, mode, axis, shape, x_strides, y_strides, x_dtype, y_dtype, options=None):
    """The cached softmax descriptor for this exact problem, created on a miss. `axis` must be normalized to
    [0, ndim); `options` is None or _options.key()'s."""
    key = (device_type, device_id, mode, axis, shape, x_strides, y_strides, x_dtype, y_dtype, options)
    return cached(key, device_type, device_id,
                  lambda handle: Descriptor(handle, mode, axis, shape, x_strides, y_strides, x_dtype, y_dtype,
                                            options))


def backward_descriptor(device_type, device_id, mode, axis, shape, dx_strides, dy_strides, y_strides, dx_dtype,
                        dy_dtype, y_dtype):
    """The cached backward descriptor for this exact problem, in the same LRU as descriptor()'s."""
    key = ("backward", device_type, device_id, mode, axis, shape, dx_strides, dy_strides, y_strides, dx_dtype,
           dy_dtype, y_dtype)
    return cached(key, device_type, device_id,
                  lambda handle: BackwardDescriptor(handle, mode, axis, shape, dx_strides, dy_strides, y_strides,
                                                    dx_dtype, dy_dtype, y_dtype))


def handle_of(device_type, device_id):
    """The process's one smx handle for (device type, device id), created on first use."""
    with _lock:
        handle = _handles.get((device_type, device_id))
        if handle is None:
            handle = _handles[(device_type, device_id)] = _Handle(device_type, device_id)
        return handle


def cached(key, device_type, device_id, make):
    """The cached descriptor of any operator for `key` (a tuple naming the whole problem, device included,
    and different for each operator), made by make(handle) on a miss, evicting the least recently used one
    past MAX_DESCRIPTORS."""
    with _lock:
        found = _descriptors.get(key)
        if found is not None:
            _descriptors.move_to_end(key)
            _stats["hits"] += 1
            return found
        _stats["misses"] += 1
        created = make(handle_of(device_type, device_id))
        _descriptors[key] = created
        if len(_descriptors) > MAX_DESCRIPTORS:
            _descriptors.popitem(last=False)
            _stats["evictions"] += 1
        return created


def cache_info():
    """Counters of the descriptor cache (hits, misses, evictions, size, maxsize) and the handle count."""
    with _lock:
        return CacheInfo(_stats["hits"], _stats["misses"], _stats["evictions"], len(_descriptors),
                         MAX_DESCRIPTORS, len(_handles))


def cache_clear():
    """Drops every cached descriptor and handle and zeroes the counters (objects still in use by a running
    call are destroyed when that call lets go of them)."""
    with _lock:
        _descriptors.clear()
        _handles.clear()
        for name in _stats:
            _stats[name] = 0


atexit.register(cache_clear)
