"""The few CUDA driver API calls the binding makes itself, through ctypes on libcuda.so.1: which device
holds a pointer, and the events that order streams (_streams). libsmx does the computing; these only
answer questions and enqueue waits, never synchronize the host.

Loaded on first use, so a machine without a CUDA driver can still import smx and run on the CPU."""

import ctypes
import threading

__all__ = ["call", "DriverError"]

_P = ctypes.POINTER
# name: argument types. Every function returns a CUresult (int, 0 = CUDA_SUCCESS). The _v2 names are the
# ones cuda.h maps cuCtxPushCurrent / cuCtxPopCurrent to; events and waits take the legacy-stream
# semantics of handle 0 (libsmx's launches do too).
_SIGNATURES = {
    "cuInit": [ctypes.c_uint],
    "cuGetErrorName": [ctypes.c_int, _P(ctypes.c_char_p)],
    "cuPointerGetAttribute": [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint64],
    "cuDeviceGet": [_P(ctypes.c_int), ctypes.c_int],
    "cuDevicePrimaryCtxRetain": [_P(ctypes.c_void_p), ctypes.c_int],
    "cuCtxPushCurrent_v2": [ctypes.c_void_p],
    "cuCtxPopCurrent_v2": [_P(ctypes.c_void_p)],
    "cuCtxGetCurrent": [_P(ctypes.c_void_p)],
    "cuEventCreate": [_P(ctypes.c_void_p), ctypes.c_uint],
    "cuEventRecord": [ctypes.c_void_p, ctypes.c_void_p],
    "cuStreamWaitEvent": [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint],
    "cuStreamIsCapturing": [ctypes.c_void_p, _P(ctypes.c_int)],
}

_load_lock = threading.Lock()
_library = None


class DriverError(RuntimeError):
    """A CUDA driver call failed; `result` is its CUresult."""

    def __init__(self, message, result):
        super().__init__(message)
        self.result = result


def _driver():
    global _library
    if _library is None:
        with _load_lock:
            if _library is None:
                library = ctypes.CDLL("libcuda.so.1")
                for name, argtypes in _SIGNATURES.items():
                    function = getattr(library, name)
                    function.argtypes = argtypes
                    function.restype = ctypes.c_int
                # Published only once every signature is set: another thread may call it at once.
                _library = library
    return _library


def _error_name(result):
    name = ctypes.c_char_p()
    if _driver().cuGetErrorName(result, ctypes.byref(name)) != 0 or not name.value:
        return f"CUresult {result}"
    return name.value.decode()


def call(name, *args, what):
    """Calls driver function `name`; raises DriverError naming `what` was being done when it fails.
    `what` is a string, or a callable that makes it (formatted only on failure: the stream-ordering calls
    are on a per-call path)."""
    result = getattr(_library or _driver(), name)(*args)
    if result != 0:
        raise DriverError(f"{what() if callable(what) else what} failed: {name} returned {_error_name(result)}",
                          result)
