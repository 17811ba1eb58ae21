"""The few CUDA driver API calls the binding makes itself, through ctypes on libcuda.so.1: which device
holds a pointer, and the events that order streams (_streams). libsmx does the computing; these only
answer questions and enqueue waits, never synchronize the host.

Loaded on first use, so a machine without a CUDA driver can still import smx and run on the CPU; each
function is looked up and typed on its first call, so one missing from an older driver fails only the
calls that need it."""

import ctypes
import threading

__all__ = ["call", "has", "available", "DriverError"]

_LIBRARY_NAME = "libcuda.so.1"

_P = ctypes.POINTER
# name: argument types. Every function returns a CUresult (int, 0 = CUDA_SUCCESS). The _v2 context names
# are the ones cuda.h maps cuCtxPushCurrent / cuCtxPopCurrent to; events and waits take the legacy-stream
# semantics of handle 0 (libsmx's launches do too). Optional out-pointers are typed void* (passed None).
_SIGNATURES = {
    "cuInit": [ctypes.c_uint],
    "cuGetErrorName": [ctypes.c_int, _P(ctypes.c_char_p)],
    "cuPointerGetAttribute": [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint64],
    "cuDeviceGet": [_P(ctypes.c_int), ctypes.c_int],
    "cuDevicePrimaryCtxRetain": [_P(ctypes.c_void_p), ctypes.c_int],
    "cuCtxGetCurrent": [_P(ctypes.c_void_p)],
    "cuCtxGetDevice": [_P(ctypes.c_int)],
    "cuCtxPushCurrent_v2": [ctypes.c_void_p],
    "cuCtxPopCurrent_v2": [_P(ctypes.c_void_p)],
    "cuEventCreate": [_P(ctypes.c_void_p), ctypes.c_uint],
    "cuEventDestroy_v2": [ctypes.c_void_p],
    "cuEventRecord": [ctypes.c_void_p, ctypes.c_void_p],
    "cuStreamWaitEvent": [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint],
    # (stream, status, capture id, graph, dependencies, [edge data,] dependency count): v3 since CUDA 12.3.
    "cuStreamGetCaptureInfo_v3": [ctypes.c_void_p, _P(ctypes.c_int), _P(ctypes.c_uint64)] + [ctypes.c_void_p] * 4,
    "cuStreamGetCaptureInfo_v2": [ctypes.c_void_p, _P(ctypes.c_int), _P(ctypes.c_uint64)] + [ctypes.c_void_p] * 3,
}

_lock = threading.Lock()
_library = None
_functions = {}  # name -> typed ctypes function, filled on first use


class DriverError(RuntimeError):
    """A CUDA driver call failed; `result` is its CUresult."""

    def __init__(self, message, result):
        super().__init__(message)
        self.result = result


def _load():
    """The driver library, loaded on first use (OSError where it cannot be); call with _lock held."""
    global _library
    if _library is None:
        _library = ctypes.CDLL(_LIBRARY_NAME)
    return _library


def _function(name):
    function = _functions.get(name)
    if function is None:
        with _lock:
            function = getattr(_load(), name)  # AttributeError where this driver lacks it
            function.argtypes = _SIGNATURES[name]
            function.restype = ctypes.c_int
            _functions[name] = function  # published only once typed: another thread may call it at once
    return function


def available():
    """Whether the CUDA driver library loads on this machine."""
    with _lock:
        try:
            _load()
        except OSError:
            return False
    return True


def has(name):
    """Whether the installed driver exports `name` (one of the signatures above)."""
    try:
        _function(name)
    except AttributeError:
        return False
    return True


def _error_name(result):
    name = ctypes.c_char_p()
    if _function("cuGetErrorName")(result, ctypes.byref(name)) != 0 or not name.value:
        return f"CUresult {result}"
    return name.value.decode()


def call(name, *args, what):
    """Calls driver function `name`; raises DriverError naming `what` was being done when it fails.
    `what` is a string, or a callable that makes it (formatted only on failure: the stream-ordering calls
    are on a per-call path)."""
    result = (_functions.get(name) or _function(name))(*args)
    if result != 0:
        raise DriverError(f"{what() if callable(what) else what} failed: {name} returned {_error_name(result)}",
                          result)
