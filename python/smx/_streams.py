"""Stream ordering for arrays read through __cuda_array_interface__, as version 3 of the interface asks of
a consumer (https://numba.readthedocs.io/en/stable/cuda/cuda_array_interface.html, "Synchronization").

An interface array may name a `stream`: its producer may still have work on the data there. smx launches
on that stream by default, which orders everything. When it launches elsewhere (`stream=` given, or an
`out=` whose interface names another stream than x's), the interface's stream and the launch stream are
ordered both ways with events, on the device, without blocking the host:

    record E on the interface stream; the launch stream waits for E      (smx reads after the producer)
    smx's kernel on the launch stream
    record E on the launch stream; the interface stream waits for E      (the producer's later work on
                                                                          that stream runs after smx)

`SMX_CUDA_ARRAY_INTERFACE_SYNC=0` in the environment when smx is imported turns this off (the interface's
option for users who order the streams themselves), as NUMBA_CUDA_ARRAY_INTERFACE_SYNC=0 does for Numba.

Inside a CUDA graph capture both streams must belong to the capture: an event cannot join a captured
stream to one outside it, so that case is refused before anything is enqueued."""

import ctypes
import os
import threading

from . import _driver

__all__ = ["foreign_streams", "wait_for", "release", "SYNC"]

# Read once, at import: the interface's "configuration option" to ignore producers' streams.
SYNC = os.environ.get("SMX_CUDA_ARRAY_INTERFACE_SYNC", "1").strip() != "0"

_LEGACY = 1  # the legacy default stream's explicit handle (CU_STREAM_LEGACY); handle 0 means it too
_EVENT_DISABLE_TIMING = 0x2  # CU_EVENT_DISABLE_TIMING: the cheapest kind to record and wait on
_CAPTURE_STATUS_NONE = 0  # CU_STREAM_CAPTURE_STATUS_NONE

# One event per device, re-recorded for every pair of streams ordered. A wait takes the event's latest
# record at the time of the call, so a record and its wait must not interleave with another thread's:
# the lock holds them together.
_lock = threading.Lock()
_device_state = {}  # device ordinal -> (primary context, event)


def _same_stream(a, b):
    return (a or _LEGACY) == (b or _LEGACY)


def foreign_streams(launch_stream, views):
    """The streams that `views` (x and y) name through __cuda_array_interface__ other than launch_stream,
    each once, in order; empty when the launch stream orders everything or SYNC is off. A producer stream
    of 0 (which the interface disallows as ambiguous) counts as none."""
    if not SYNC:
        return []
    streams = []
    for view in views:
        stream = view.producer_stream
        if stream and not _same_stream(stream, launch_stream) and not any(_same_stream(stream, s) for s in streams):
            streams.append(stream)
    return streams


def _state(device_id):
    """(context, event) of the device; creates the event in its primary context on first use. The
    primary context stays retained for the process's lifetime, as the CUDA runtime keeps it."""
    state = _device_state.get(device_id)
    if state is None:
        _driver.call("cuInit", 0, what="initializing the CUDA driver")
        device = ctypes.c_int()
        _driver.call("cuDeviceGet", ctypes.byref(device), device_id, what=f"finding CUDA device {device_id}")
        context = ctypes.c_void_p()
        _driver.call("cuDevicePrimaryCtxRetain", ctypes.byref(context), device,
                     what=f"retaining CUDA device {device_id}'s primary context")
        event = ctypes.c_void_p()
        with _current(context):
            _driver.call("cuEventCreate", ctypes.byref(event), _EVENT_DISABLE_TIMING,
                         what="creating the event that orders CUDA array interface streams")
        state = _device_state[device_id] = (context, event)
    return state


class _current:
    """Makes `context` current on this thread for the block (stream handles 0, 1 and 2 name the current
    context's streams), then restores the previous one; nothing to do where it is current already (the
    usual case: the CUDA runtime made the device's primary context current)."""

    def __init__(self, context):
        self.context = context
        self.pushed = False

    def __enter__(self):
        current = ctypes.c_void_p()
        _driver.call("cuCtxGetCurrent", ctypes.byref(current), what="reading the current context")
        if current.value != self.context.value:
            _driver.call("cuCtxPushCurrent_v2", self.context, what="making the device's context current")
            self.pushed = True

    def __exit__(self, *exc):
        if self.pushed:
            popped = ctypes.c_void_p()
            _driver.call("cuCtxPopCurrent_v2", ctypes.byref(popped), what="restoring the previous context")


def _capturing(stream):
    status = ctypes.c_int()
    _driver.call("cuStreamIsCapturing", ctypes.c_void_p(stream), ctypes.byref(status),
                 what=lambda: f"asking whether stream {stream:#x} is capturing")
    return status.value != _CAPTURE_STATUS_NONE


def _order(first, then, event):
    """`then` waits for everything enqueued on `first` so far."""
    _driver.call("cuEventRecord", event, ctypes.c_void_p(first),
                 what=lambda: f"recording an event on stream {first:#x}")
    _driver.call("cuStreamWaitEvent", ctypes.c_void_p(then), event, 0,
                 what=lambda: f"making stream {then:#x} wait for stream {first:#x}")


def wait_for(streams, launch_stream, device_id):
    """Before smx's launch: launch_stream waits for each interface stream's pending work. Refuses (with
    nothing enqueued) a pairing that crosses a graph capture's boundary."""
    with _lock:
        context, event = _state(device_id)
        with _current(context):
            launch_capturing = _capturing(launch_stream)
            for stream in streams:
                if _capturing(stream) != launch_capturing:
                    inside, outside = (launch_stream, stream) if launch_capturing else (stream, launch_stream)
                    raise RuntimeError(
                        f"stream {inside:#x} is capturing a CUDA graph but stream {outside:#x} is not: smx "
                        f"launches on {launch_stream:#x} and an array's __cuda_array_interface__ names "
                        f"{stream:#x} as the stream its data is used on, and the two cannot be ordered across "
                        "the capture's boundary. Launch on the array's own stream (omit stream=), capture "
                        "both, or set SMX_CUDA_ARRAY_INTERFACE_SYNC=0 and order them yourself")
            for stream in streams:
                _order(stream, launch_stream, event)


def release(streams, launch_stream, device_id):
    """After smx's launch: each interface stream waits for it, so the producer's later work there cannot
    overtake smx's reads of x or writes of out."""
    with _lock:
        context, event = _state(device_id)
        with _current(context):
            for stream in streams:
                _order(launch_stream, stream, event)
