"""Arrays smx reads through DLPack and __cuda_array_interface__, checked on the CPU: the capsule and
interface parsing, stream choice and device routing (CUDA runs themselves are in test_cuda.py)."""

import ctypes

import numpy as np
import pytest

import smx
from smx import _arrays, _dlpack, _driver, _streams
from conftest import assert_close, poisoned, random_array, reference


class DLPackOnly:
    """A foreign CPU array that offers only the DLPack protocol (like a JAX CPU array)."""

    def __init__(self, array):
        self.array = array
        self.requests = []

    def __dlpack__(self, **kwargs):
        self.requests.append(kwargs)
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


class LegacyDLPackOnly(DLPackOnly):
    """A producer from before DLPack 1.0: no max_version keyword, legacy 'dltensor' capsules."""

    def __dlpack__(self, stream=None):
        self.requests.append({"stream": stream})
        return self.array.__dlpack__(stream=stream)


class BareCudaArray:
    """Host memory dressed as a CUDA array through __cuda_array_interface__ (v3) alone: nothing names its
    device, so smx asks the CUDA driver which device holds the pointer."""

    def __init__(self, array, stream=None, typestr=None):
        self.array = array
        self.__cuda_array_interface__ = {
            "shape": array.shape, "typestr": typestr or array.dtype.str, "strides": array.strides,
            "data": (array.__array_interface__["data"][0], not array.flags.writeable), "version": 3,
            "stream": stream}


class FakeCudaArray(BareCudaArray):
    """A BareCudaArray that names its device through __dlpack_device__, to test the interface's parsing."""

    def __init__(self, array, device_id=3, stream=None, typestr=None):
        super().__init__(array, stream, typestr)
        self.device_id = device_id

    def __dlpack_device__(self):
        return (2, self.device_id)


@pytest.mark.parametrize("producer", [DLPackOnly, LegacyDLPackOnly])
@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
def test_dlpack_arrays_with_negative_strides_match_reference(rng, producer, log):
    base = random_array(rng, (6, 20), "float32")
    x = producer(base[::-1, ::-2])
    y = producer(poisoned((6, 10), "float32"))
    (smx.log_softmax if log else smx.softmax)(x, 1, out=y)
    assert_close(y.array, reference(base[::-1, ::-2], 1, log), log)
    assert all(request["stream"] is None for request in x.requests)  # CPU: no stream is passed


def test_dlpack_asks_for_a_versioned_capsule_and_no_copy_for_outputs(rng):
    x = DLPackOnly(random_array(rng, (3, 4), "float32"))
    y = DLPackOnly(np.empty((3, 4), np.float32))
    smx.softmax(x, out=y)
    assert x.requests == [{"stream": None, "max_version": (1, 0)}]
    assert y.requests == [{"stream": None, "max_version": (1, 0), "copy": False}]


def test_read_only_dlpack_input_works_and_read_only_dlpack_output_is_refused(rng):
    array = random_array(rng, (3, 9), "float32")
    array.flags.writeable = False
    out = DLPackOnly(np.empty((3, 9), np.float32))
    smx.softmax(DLPackOnly(array), out=out)
    assert_close(out.array, reference(array, -1, False), False)
    with pytest.raises(ValueError, match="read-only"):
        smx.softmax(DLPackOnly(np.empty((3, 9), np.float32)), out=DLPackOnly(array))


def test_dlpack_input_without_out_asks_for_out(rng):
    with pytest.raises(TypeError, match="pass out="):
        smx.softmax(DLPackOnly(random_array(rng, (3,), "float32")))


def test_dlpack_integer_input_is_a_type_error_naming_it():
    with pytest.raises(TypeError, match="int16"):
        smx.softmax(DLPackOnly(np.ones(4, np.int16)), out=DLPackOnly(np.empty(4, np.float32)))


def test_reading_a_capsule_leaves_it_unconsumed(rng):
    array = random_array(rng, (2, 3), "float32")
    get_name = ctypes.pythonapi.PyCapsule_GetName
    get_name.restype, get_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
    for capsule in (array.__dlpack__(), array.__dlpack__(max_version=(1, 0))):
        name = get_name(capsule)
        parsed = _dlpack.parse(capsule)
        assert get_name(capsule) == name  # still owned by the producer's destructor
        assert parsed.pointer == array.__array_interface__["data"][0]
        assert (parsed.shape, parsed.strides) == ((2, 3), (3, 1))


def test_cuda_array_interface_is_read_exactly(rng):
    array = random_array(rng, (4, 10), "float16")[::-1, ::2]
    view = _arrays.describe(FakeCudaArray(array, device_id=3, stream=77), None, writable=False)
    assert (view.device_type, view.device_id) == (_arrays.CUDA, 3)
    assert view.pointer == array.__array_interface__["data"][0]
    assert (view.shape, view.strides) == ((4, 5), (-10, 2))
    assert view.stream == 77  # the producer's stream, where the data is ready
    assert _arrays.describe(FakeCudaArray(array, stream=77), 5, writable=False).stream == 5  # stream= wins
    assert _arrays.describe(FakeCudaArray(array, stream=None), None, writable=False).stream == 0
    # The interface's own stream is kept apart from the launch stream, for the ordering around the launch.
    assert _arrays.describe(FakeCudaArray(array, stream=77), 5, writable=False).producer_stream == 77
    assert _arrays.describe(FakeCudaArray(array, stream=None), 5, writable=False).producer_stream is None
    assert _arrays.describe(array, None, writable=False).producer_stream is None  # NumPy: no stream


def test_cuda_array_interface_without_a_float_typestr_is_refused(rng):
    with pytest.raises(TypeError, match="int32"):
        _arrays.describe(FakeCudaArray(np.ones(3, np.int32)), None, writable=False)
    with pytest.raises(TypeError, match="bfloat16 arrays must also offer __dlpack__"):
        _arrays.describe(FakeCudaArray(np.ones(3, np.float16), typestr="<V2"), None, writable=False)


def test_read_only_cuda_array_interface_output_is_refused(rng):
    array = np.empty(3, np.float32)
    array.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        _arrays.describe(FakeCudaArray(array), None, writable=True)


def test_cuda_arrays_go_to_the_cuda_backend(rng):
    x = FakeCudaArray(random_array(rng, (2, 8), "float32"), device_id=0)
    out = FakeCudaArray(np.empty((2, 8), np.float32), device_id=0)
    with pytest.raises(smx.SmxError) as raised:
        smx.softmax(x, out=out)
    # A CPU-only libsmx has no CUDA backend (3002); one with it but no GPU has no device (3001); with a GPU
    # the CUDA backend refuses host memory (2010). Each shows the call reached the CUDA handle.
    assert raised.value.status in (3001, 3002, 2010)


def test_an_interface_array_without_a_device_and_no_cuda_driver_is_refused_by_the_cuda_backend(rng, monkeypatch):
    # As on a machine without the driver: libcuda.so.1 does not load. Was: a raw OSError from ctypes.
    monkeypatch.setattr(_driver, "_LIBRARY_NAME", "libcuda-absent-for-this-test.so.1")
    monkeypatch.setattr(_driver, "_library", None)
    monkeypatch.setattr(_driver, "_functions", {})
    x = BareCudaArray(random_array(rng, (2, 8), "float32"))
    out = BareCudaArray(np.empty((2, 8), np.float32))
    with pytest.raises(smx.SmxError) as raised:
        smx.softmax(x, out=out)
    handle = ctypes.c_void_p()
    cuda_handle_status = smx._lib.lib.smxCreate(ctypes.byref(handle), _arrays.CUDA, 0)
    if cuda_handle_status == 0:  # libsmx itself reaches a GPU here, and refuses host memory as device 0's
        smx._lib.lib.smxDestroy(handle)
        assert raised.value.status == 2010
    else:  # what every driverless machine gives: no CUDA backend (3002) or no device (3001)
        assert isinstance(raised.value, smx.SmxNotImplementedError)
        assert raised.value.status == cuda_handle_status


def test_output_on_another_device_is_refused(rng):
    x = FakeCudaArray(random_array(rng, (2, 8), "float32"), device_id=0)
    out = FakeCudaArray(np.empty((2, 8), np.float32), device_id=1)
    with pytest.raises(ValueError, match="out is on cuda:1 but x is on cuda:0"):
        smx.softmax(x, out=out)


class Stream:
    def __init__(self, **attributes):
        self.__dict__.update(attributes)


@pytest.mark.parametrize("stream, handle", [
    (0, 0), (1234, 1234), (Stream(cuda_stream=11), 11), (Stream(ptr=12), 12),
    (Stream(__cuda_stream__=lambda: (0, 13)), 13), (Stream(handle=ctypes.c_void_p(14)), 14),
    (Stream(handle=ctypes.c_void_p(None)), 0)], ids=["zero", "int", "torch", "cupy", "protocol", "numba",
                                                     "numba_default"])
def test_stream_arguments_of_every_spelling(stream, handle):
    assert _arrays.stream_handle(stream) == handle


def interface_view(producer_stream):
    view = _arrays.View()
    view.producer_stream = producer_stream
    return view


def test_streams_ordered_around_a_launch_are_the_interface_streams_other_than_the_launch_stream(monkeypatch):
    monkeypatch.setattr(_streams, "SYNC", True)
    views = (interface_view(7), interface_view(9))
    assert _streams.foreign_streams(5, views) == [7, 9]
    assert _streams.foreign_streams(7, views) == [9]
    assert _streams.foreign_streams(7, (interface_view(7), interface_view(7))) == []  # launched where x and out are
    assert _streams.foreign_streams(5, (interface_view(7), interface_view(7))) == [7]  # each stream once
    assert _streams.foreign_streams(5, (interface_view(None), interface_view(0))) == []  # no stream named
    assert _streams.foreign_streams(0, (interface_view(1), interface_view(None))) == []  # 0 and 1: the legacy stream
    assert _streams.foreign_streams(1, (interface_view(2),)) == [2]  # the per-thread default stream is another
    monkeypatch.setattr(_streams, "SYNC", False)  # SMX_CUDA_ARRAY_INTERFACE_SYNC=0
    assert _streams.foreign_streams(5, views) == []


class FakeDriver:
    """Stands in for _driver.call: a context stack (device d's primary context is 0x100 + d), streams in
    graph captures (`captures`: stream -> capture id), legacy streams barred from a capture under way
    (`implicit`); records the stream operations with the context current at the time."""

    def __init__(self, stack=(), context_device=(), captures=(), implicit=()):
        self.stack = list(stack)
        self.context_device = {0x100: 0, 0x101: 1, **dict(context_device)}
        self.captures = dict(captures)
        self.implicit = set(implicit)
        self.operations = []
        self.events = 0
        self.destroyed = 0

    def __call__(self, name, *args, what):
        out = args[0]._obj if isinstance(args[0], type(ctypes.byref(ctypes.c_int()))) else None
        if name == "cuDeviceGet":
            out.value = args[1]
        elif name == "cuDevicePrimaryCtxRetain":
            out.value = 0x100 + args[1].value
        elif name == "cuCtxGetCurrent":
            out.value = self.stack[-1] if self.stack else None
        elif name == "cuCtxGetDevice":
            out.value = self.context_device[self.stack[-1]]
        elif name == "cuCtxPushCurrent_v2":
            self.stack.append(args[0].value)
            self.operations.append(("push", args[0].value))
        elif name == "cuCtxPopCurrent_v2":
            out.value = self.stack.pop()
            self.operations.append(("pop", out.value))
        elif name == "cuEventCreate":
            self.events += 1
            out.value = 0x900 + self.events
        elif name == "cuEventDestroy_v2":
            self.destroyed += 1
        elif name == "cuStreamGetCaptureInfo_v3":
            stream = args[0].value or 0
            if stream in self.implicit:
                raise _streams._driver.DriverError(what(), 906)
            args[1]._obj.value = 1 if stream in self.captures else 0
            args[2]._obj.value = self.captures.get(stream, 0)
        elif name == "cuEventRecord":
            self.operations.append(("record on", args[1].value or 0))
        elif name == "cuStreamWaitEvent":
            self.operations.append(("wait on", args[0].value or 0))


@pytest.fixture
def fake_driver(monkeypatch):
    """Installs a FakeDriver (replace its fields per test) and forgets contexts and events of other tests."""
    driver = FakeDriver()
    monkeypatch.setattr(_streams._driver, "call", lambda name, *args, what: driver(name, *args, what=what))
    monkeypatch.setattr(_streams._driver, "has", lambda name: name == "cuStreamGetCaptureInfo_v3")
    monkeypatch.setattr(_streams, "_events", {})
    monkeypatch.setattr(_streams, "_primary_contexts", {})
    return driver


def stream_operations(driver):
    return [operation for operation in driver.operations if operation[0] not in ("push", "pop")]


def test_the_launch_waits_for_each_interface_stream_and_each_waits_for_the_launch(fake_driver):
    _streams.wait_for([7, 9], 5, 0)
    assert stream_operations(fake_driver) == [("record on", 7), ("wait on", 5), ("record on", 9), ("wait on", 5)]
    fake_driver.operations.clear()
    _streams.release([7, 9], 5, 0)
    assert stream_operations(fake_driver) == [("record on", 5), ("wait on", 7), ("record on", 5), ("wait on", 9)]


@pytest.mark.parametrize("stack, pushes, made, destroyed", [
    ([], [0x100], 1, 0),  # no context current: the device's primary pushed, then popped; its event kept
    ([0x101], [0x100], 1, 0),  # another device's context current: likewise, and it is current again after
    ([0x100], [], 1, 0),  # the device's primary already current: used as it is
    ([0x555], [], 2, 2),  # a non-primary context of the device (as PyCUDA makes): used, an event per block
], ids=["none", "other-device", "primary", "non-primary"])
def test_the_ordering_runs_in_the_device_s_current_context_and_leaves_the_stack_as_it_found_it(fake_driver, stack,
                                                                                              pushes, made, destroyed):
    fake_driver.stack = list(stack)
    fake_driver.context_device[0x555] = 0
    _streams.wait_for([7], 5, 0)
    _streams.release([7], 5, 0)
    assert fake_driver.stack == stack
    assert [context for kind, context in fake_driver.operations if kind == "push"] == pushes * 2
    assert [context for kind, context in fake_driver.operations if kind == "pop"] == pushes * 2
    assert (fake_driver.events, fake_driver.destroyed) == (made, destroyed)


@pytest.mark.parametrize("captures, implicit", [
    ({5: 11}, ()),  # the launch stream captures, the interface stream does not
    ({7: 11}, ()),  # the other way round
    ({5: 11, 7: 12}, ()),  # two different captures
    ({5: 11}, {7}),  # the interface names the legacy stream, barred from the capture under way
], ids=["launch-capturing", "interface-stream-capturing", "two-captures", "legacy-stream-barred"])
def test_streams_on_both_sides_of_a_capture_s_boundary_are_refused_before_anything_is_enqueued(fake_driver, captures,
                                                                                                implicit):
    fake_driver.captures, fake_driver.implicit = dict(captures), set(implicit)
    with pytest.raises(RuntimeError, match="not in the same CUDA graph capture"):
        _streams.wait_for([7], 5, 0)
    assert stream_operations(fake_driver) == [] and fake_driver.stack == []  # the pushed context popped too


def test_streams_in_the_same_capture_are_ordered(fake_driver):
    fake_driver.captures = {5: 11, 7: 11}
    _streams.wait_for([7], 5, 0)
    assert stream_operations(fake_driver) == [("record on", 7), ("wait on", 5)]


class RecordingLib:
    """Stands in for libsmx in _forward: records the forward call's stream."""

    def __init__(self, log):
        self.log = log

    def smxSoftmaxForward(self, descriptor, workspace, workspace_bytes, y, x, stream):
        self.log.append(("forward on", stream))
        return 0


class FakeDescriptor:
    pointer, workspace_bytes, plan = 1, 0, "fake"


@pytest.mark.parametrize("x_stream, out_stream, stream, ordered, launch", [
    (7, 9, 5, [7, 9], 5),  # stream= elsewhere: both interface streams ordered around it
    (7, None, 5, [7], 5),
    (None, 9, 5, [9], 5),  # out's stream alone
    (7, 9, None, [9], 7),  # launched on x's stream: only out's is another
    (7, 7, None, [], 7),  # everything on x's stream: nothing to order
], ids=["both", "x-only", "out-only", "on-x-stream", "one-stream"])
def test_a_call_orders_the_interface_streams_around_its_launch(monkeypatch, rng, x_stream, out_stream, stream,
                                                              ordered, launch):
    log = []
    monkeypatch.setattr(_streams, "SYNC", True)
    monkeypatch.setattr(smx, "lib", RecordingLib(log))
    monkeypatch.setattr(smx._cache, "descriptor", lambda *args: FakeDescriptor())
    monkeypatch.setattr(_streams, "wait_for", lambda streams, at, device: log.append(("wait_for", streams, at, device)))
    monkeypatch.setattr(_streams, "release", lambda streams, at, device: log.append(("release", streams, at, device)))
    x = FakeCudaArray(random_array(rng, (4, 10), "float32"), stream=x_stream)
    out = FakeCudaArray(poisoned((4, 10), "float32"), stream=out_stream)
    smx.softmax(x, out=out, stream=stream)
    expected = [("forward on", launch)]
    if ordered:
        expected = [("wait_for", ordered, launch, 3)] + expected + [("release", ordered, launch, 3)]
    assert log == expected
