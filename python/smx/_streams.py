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

Inside a CUDA graph capture both streams must belong to the same capture: an event cannot join a captured
stream to one outside it (or in another capture), so that case is refused before anything is enqueued.

The events live in the context libsmx launches in: the one current on the calling thread where it belongs
to the array's device (the CUDA runtime launches there too, e.g. a context PyCUDA made current), else the
device's primary context, pushed for the duration of the driver calls."""

import ctypes
import os
import sys
import threading

from . import _arrays, _driver
from ._errors import check

__all__ = ["foreign_streams", "wait_for", "release", "SYNC"]

# Read once, at import: the interface's "configuration option" to ignore producers' streams.
SYNC = os.environ.get("SMX_CUDA_ARRAY_INTERFACE_SYNC", "1").strip() != "0"

_EVENT_DISABLE_TIMING = 0x2  # CU_EVENT_DISABLE_TIMING: the cheapest kind to record and wait on
_CAPTURE_STATUS_NONE = 0  # CU_STREAM_CAPTURE_STATUS_NONE
# The legacy stream queried while another stream captures in global or thread-local mode: it cannot take
# part in any capture.
_ERROR_STREAM_CAPTURE_IMPLICIT = 906

# One event per context, re-recorded for every pair of streams ordered. A wait takes the event's latest
# record at the time of the call, so a record and its wait must not interleave with another thread's:
# the lock holds them together. One lock for every device: ordered calls are the uncommon path, and their
# driver calls take microseconds.
_lock = threading.Lock()
_events = {}  # primary context handle -> its event
_primary_contexts = {}  # device ordinal -> (CUdevice, primary context), retained once for the process


def _same_stream(a, b):
    # Handles 0 and 1 both name the legacy default stream (libsmx is not built for per-thread default
    # streams, so its handle 0 is the legacy one); 2 is the per-thread default stream, another stream.
    return (a or 1) == (b or 1)


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


def _primary_context(device_id):
    """(CUdevice, primary context) of the device; the context is retained on first use and kept for the
    process's lifetime, as the CUDA runtime keeps it."""
    found = _primary_contexts.get(device_id)
    if found is None:
        _driver.call("cuInit", 0, what="initializing the CUDA driver")
        device = ctypes.c_int()
        _driver.call("cuDeviceGet", ctypes.byref(device), device_id, what=f"finding CUDA device {device_id}")
        context = ctypes.c_void_p()
        _driver.call("cuDevicePrimaryCtxRetain", ctypes.byref(context), device,
                     what=f"retaining CUDA device {device_id}'s primary context")
        found = _primary_contexts[device_id] = (device.value, context.value)
    return found


class _DeviceContext:
    """For the block, a context of `device_id` is current on this thread: the current one if it belongs
    to that device, else the device's primary context, pushed on entry and popped on exit. `event` is an
    ordering event of that context: a primary context's is kept for the process (primary contexts live as
    long); another context's is made for the block and destroyed after it, since that context may be
    destroyed and its handle reused by a new one."""

    def __init__(self, device_id):
        self.device_id = device_id
        self.pushed = None
        self.event = None
        self.temporary_event = None

    def __enter__(self):
        device, primary = _primary_context(self.device_id)
        current = ctypes.c_void_p()
        _driver.call("cuCtxGetCurrent", ctypes.byref(current), what="reading the current context")
        context = current.value
        if context is not None:
            current_device = ctypes.c_int()
            _driver.call("cuCtxGetDevice", ctypes.byref(current_device), what="reading the current context's device")
            if current_device.value != device:
                context = None
        if context is None:
            _driver.call("cuCtxPushCurrent_v2", ctypes.c_void_p(primary),
                         what=f"making CUDA device {self.device_id}'s primary context current")
            self.pushed = context = primary
        event = _events.get(context) if context == primary else None
        if event is None:
            created = ctypes.c_void_p()
            try:
                _driver.call("cuEventCreate", ctypes.byref(created), _EVENT_DISABLE_TIMING,
                             what="creating the event that orders CUDA array interface streams")
            except BaseException:
                self.__exit__(*sys.exc_info())  # pops what was pushed; the creation's error is the one raised
                raise
            event = created.value
            if context == primary:
                _events[context] = event
            else:
                self.temporary_event = event
        self.event = ctypes.c_void_p(event)
        return self

    def __exit__(self, exc_type, exc, traceback):
        if self.temporary_event is not None:
            # Released once the waits on it have been satisfied (the driver keeps it until then).
            try:
                _driver.call("cuEventDestroy_v2", ctypes.c_void_p(self.temporary_event), what="destroying an event")
            except _driver.DriverError:
                if exc_type is None:
                    raise
        if self.pushed is None:
            return
        popped = ctypes.c_void_p()
        try:
            _driver.call("cuCtxPopCurrent_v2", ctypes.byref(popped), what="restoring the previous context")
        except _driver.DriverError:
            if exc_type is None:
                raise
            return  # the error that brought us here is the one to report
        if popped.value != self.pushed and exc_type is None:
            raise RuntimeError(f"the context popped ({popped.value:#x}) is not the one smx pushed "
                               f"({self.pushed:#x}): another library changed this thread's context stack")


def _capture(stream):
    """The id of the graph capture `stream` takes part in; 0 for none; None for a legacy stream that
    cannot take part in the capture under way on another stream."""
    status, capture_id = ctypes.c_int(), ctypes.c_uint64()
    what = lambda: f"asking whether stream {stream:#x} is capturing a CUDA graph"  # noqa: E731
    try:
        if _driver.has("cuStreamGetCaptureInfo_v3"):
            _driver.call("cuStreamGetCaptureInfo_v3", ctypes.c_void_p(stream), ctypes.byref(status),
                         ctypes.byref(capture_id), None, None, None, None, what=what)
        else:
            _driver.call("cuStreamGetCaptureInfo_v2", ctypes.c_void_p(stream), ctypes.byref(status),
                         ctypes.byref(capture_id), None, None, None, what=what)
    except _driver.DriverError as error:
        if error.result == _ERROR_STREAM_CAPTURE_IMPLICIT:
            return None
        raise
    return 0 if status.value == _CAPTURE_STATUS_NONE else capture_id.value


def _order(first, then, event):
    """`then` waits for everything enqueued on `first` so far."""
    _driver.call("cuEventRecord", event, ctypes.c_void_p(first),
                 what=lambda: f"recording an event on stream {first:#x}")
    _driver.call("cuStreamWaitEvent", ctypes.c_void_p(then), event, 0,
                 what=lambda: f"making stream {then:#x} wait for stream {first:#x}")


def wait_for(streams, launch_stream, device_id):
    """Before smx's launch: launch_stream waits for each interface stream's pending work. Refuses (with
    nothing enqueued) a pairing that crosses a graph capture's boundary."""
    with _lock, _DeviceContext(device_id) as context:
        launch_capture = _capture(launch_stream)
        for stream in streams:
            stream_capture = _capture(stream)
            if stream_capture != launch_capture:  # one outside any capture, in another, or a legacy stream barred
                raise RuntimeError(
                    f"streams {launch_stream:#x} and {stream:#x} are not in the same CUDA graph capture (one is "
                    f"capturing a CUDA graph and the other is not, or is in another capture): smx launches on "
                    f"{launch_stream:#x} and an array's __cuda_array_interface__ names {stream:#x} as the stream "
                    "its data is used on, and the two cannot be ordered across a capture's boundary. Launch on "
                    "the array's own stream (omit stream=), bring both into the capture, or set "
                    "SMX_CUDA_ARRAY_INTERFACE_SYNC=0 and order them yourself")
        for stream in streams:
            _order(stream, launch_stream, context.event)


def release(streams, launch_stream, device_id):
    """After smx's launch: each interface stream waits for it, so the producer's later work there cannot
    overtake smx's reads of x or writes of out. Every stream is tried; the first failure is raised after."""
    failure = None
    with _lock, _DeviceContext(device_id) as context:
        for stream in streams:
            try:
                _order(launch_stream, stream, context.event)
            except _driver.DriverError as error:
                failure = failure or error
    if failure is not None:
        raise failure


def launch(views, descriptor, call):
    """Runs call(workspace) on views[0]'s stream: the workspace allocated there, and interface arrays whose
    stream is not the launch stream ordered both ways around it (above). `views`: every operand."""
    lead = views[0]
    owner, workspace = None, None
    if descriptor.workspace_bytes:
        owner, workspace = _arrays.workspace(lead, descriptor.workspace_bytes)
    foreign = foreign_streams(lead.stream, views) if any(
        view.producer_stream is not None for view in views) else []
    if foreign:
        wait_for(foreign, lead.stream, lead.device_id)
    check(call(workspace))
    if foreign:
        release(foreign, lead.stream, lead.device_id)
    del owner  # safe once enqueued: CPU work is done, CUDA pools are ordered on the launch stream
