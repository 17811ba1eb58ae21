"""Arrays smx reads through DLPack and __cuda_array_interface__, checked on the CPU: the capsule and
interface parsing, stream choice and device routing (CUDA runs themselves are in test_cuda.py)."""

import ctypes

import numpy as np
import pytest

import smx
from smx import _arrays, _dlpack, _streams
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


class FakeCudaArray:
    """Host memory dressed as a CUDA array through __cuda_array_interface__ (v3), to test its parsing."""

    def __init__(self, array, device_id=3, stream=None, typestr=None):
        self.array = array
        self.device_id = device_id
        self.__cuda_array_interface__ = {
            "shape": array.shape, "typestr": typestr or array.dtype.str, "strides": array.strides,
            "data": (array.__array_interface__["data"][0], not array.flags.writeable), "version": 3,
            "stream": stream}

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
    """Stands in for _driver.call: records the stream operations, answers cuStreamIsCapturing from
    `capturing` (a set of stream handles)."""

    def __init__(self, capturing=()):
        self.capturing = set(capturing)
        self.operations = []

    def __call__(self, name, *args, what):
        if name == "cuStreamIsCapturing":
            args[1]._obj.value = 1 if (args[0].value or 0) in self.capturing else 0
        elif name == "cuEventRecord":
            self.operations.append(("record on", args[1].value or 0))
        elif name == "cuStreamWaitEvent":
            self.operations.append(("wait on", args[0].value or 0))


def test_the_launch_waits_for_each_interface_stream_and_each_waits_for_the_launch(monkeypatch):
    driver = FakeDriver()
    monkeypatch.setattr(_streams._driver, "call", driver)
    monkeypatch.setattr(_streams, "_device_state", {})
    _streams.wait_for([7, 9], 5, 0)
    assert driver.operations == [("record on", 7), ("wait on", 5), ("record on", 9), ("wait on", 5)]
    driver.operations.clear()
    _streams.release([7, 9], 5, 0)
    assert driver.operations == [("record on", 5), ("wait on", 7), ("record on", 5), ("wait on", 9)]


@pytest.mark.parametrize("capturing", [{5}, {7}], ids=["launch-capturing", "interface-stream-capturing"])
def test_streams_on_both_sides_of_a_graph_capture_are_refused_before_anything_is_enqueued(monkeypatch, capturing):
    driver = FakeDriver(capturing)
    monkeypatch.setattr(_streams._driver, "call", driver)
    monkeypatch.setattr(_streams, "_device_state", {})
    with pytest.raises(RuntimeError, match="capturing a CUDA graph"):
        _streams.wait_for([7], 5, 0)
    assert driver.operations == []
    driver.capturing = {5, 7}  # both in the capture: ordered as usual
    _streams.wait_for([7], 5, 0)
    assert driver.operations == [("record on", 7), ("wait on", 5)]
