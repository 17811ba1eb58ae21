"""smx on CUDA tensors (PyTorch, CuPy) against torch.softmax / torch.log_softmax computed in float64.

Skipped, with the reason, where PyTorch has no CUDA device or libsmx was built without its CUDA backend."""

import numpy as np
import pytest

import smx
from conftest import assert_close_values

torch = pytest.importorskip("torch", reason="the CUDA tests drive the GPU through PyTorch")


def _why_cuda_is_unavailable():
    if not torch.cuda.is_available():
        return "PyTorch sees no CUDA device"
    try:
        smx._cache._Handle(2, 0)
    except smx.SmxError as error:
        return f"libsmx cannot create a CUDA handle: {error}"
    return None


_UNAVAILABLE = _why_cuda_is_unavailable()
pytestmark = [pytest.mark.cuda, pytest.mark.skipif(_UNAVAILABLE is not None, reason=str(_UNAVAILABLE))]

DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32, "float64": torch.float64}
HALF_AND_SINGLE = ["float16", "bfloat16", "float32"]
MODES = [pytest.param(False, id="softmax"), pytest.param(True, id="log_softmax")]


@pytest.fixture
def generator():
    """A CUDA generator seeded afresh for each test; the seed is printed so a failure can be replayed."""
    seed = int(np.random.SeedSequence().entropy % (2 ** 63))
    print(f"torch seed {seed}")
    return torch.Generator(device="cuda").manual_seed(seed)


def random_tensor(generator, shape, name, device="cuda"):
    values = torch.randn(shape, generator=generator, device="cuda", dtype=torch.float32) * 3
    return values.to(device=device, dtype=DTYPES[name])


def poisoned(shape, name, device="cuda"):
    return torch.full(shape, float("nan"), dtype=DTYPES[name], device=device)


def expected_of(x, dim, log):
    """torch's own result in float64 on the CPU."""
    function = torch.log_softmax if log else torch.softmax
    return function(x.detach().double(), dim).cpu().numpy()


def assert_matches_torch(y, x, dim, log):
    torch.cuda.synchronize()
    assert y.shape == x.shape
    assert_close_values(y.detach().double().cpu().numpy(), str(y.dtype).replace("torch.", ""),
                        expected_of(x, dim, log), log)


def run(x, dim, log, **kwargs):
    return (smx.log_softmax if log else smx.softmax)(x, dim, **kwargs)


@pytest.mark.parametrize("log", MODES)
@pytest.mark.parametrize("row_len", [1, 7, 32, 129, 1024, 5000, 70000])
def test_row_lengths_of_every_kernel_size(generator, row_len, log):
    x = random_tensor(generator, (33, row_len), "float32")
    y = run(x, -1, log)
    assert y.is_cuda and y.dtype == torch.float32
    assert_matches_torch(y, x, -1, log)


@pytest.mark.parametrize("log", MODES)
@pytest.mark.parametrize("y_name", HALF_AND_SINGLE)
@pytest.mark.parametrize("x_name", HALF_AND_SINGLE)
def test_every_dtype_pair_with_out_and_with_dtype(generator, x_name, y_name, log):
    x = random_tensor(generator, (64, 300), x_name)
    out = poisoned(x.shape, y_name)
    assert run(x, -1, log, out=out) is out
    assert_matches_torch(out, x, -1, log)
    y = run(x, 0, log, dtype=DTYPES[y_name])
    assert y.dtype == DTYPES[y_name]
    assert_matches_torch(y, x, 0, log)


@pytest.mark.parametrize("log", MODES)
def test_float64(generator, log):
    x = random_tensor(generator, (17, 2049), "float64")
    assert_matches_torch(run(x, 1, log), x, 1, log)


@pytest.mark.parametrize("log", MODES)
def test_every_dim_of_contiguous_and_non_contiguous_4d_tensors(generator, log):
    base = random_tensor(generator, (6, 10, 12, 40), "float32")
    views = [base, base.transpose(1, 3), base[:, ::2, 1:, ::3], base.permute(3, 0, 2, 1),
             base.contiguous(memory_format=torch.channels_last)]
    for x in views:
        for dim in range(-4, 4):
            assert_matches_torch(run(x, dim, log), x, dim, log)


@pytest.mark.parametrize("log", MODES)
def test_out_into_a_strided_view_and_in_place(generator, log):
    x = random_tensor(generator, (40, 96), "float16")
    storage = poisoned((80, 96), "float32")
    out = storage[::2]
    run(x, -1, log, out=out)
    assert_matches_torch(out, x, -1, log)
    assert torch.isnan(storage[1::2]).all(), "wrote outside the out view"
    original = x.clone()
    assert run(x, -1, log, out=x) is x
    assert_matches_torch(x, original, -1, log)


@pytest.mark.parametrize("log", MODES)
def test_special_values_follow_torch(log):
    inf, nan = float("inf"), float("nan")
    x = torch.tensor([[1.0, 2.0, 3.0, 4.0], [1.0, inf, 3.0, 4.0], [1.0, nan, 3.0, 4.0],
                      [-inf, -inf, -inf, -inf], [-inf, 0.5, -inf, 2.0]], device="cuda")
    assert_matches_torch(run(x, -1, log), x, -1, log)


def test_zero_size_and_zero_dim(generator):
    empty = torch.empty((0, 5), device="cuda")
    assert smx.softmax(empty, 1).shape == (0, 5)
    scalar = random_tensor(generator, (), "float32")
    assert smx.softmax(scalar).item() == 1.0 and smx.log_softmax(scalar, 0).item() == 0.0


def test_runs_on_the_current_torch_stream_by_default(generator):
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        x = random_tensor(generator, (512, 4096), "float32")
        y = smx.softmax(x)
        z = y * 1.0  # queued behind smx's kernel on the side stream
    side.synchronize()
    assert_matches_torch(z, x, -1, False)


@pytest.mark.parametrize("spelling", ["object", "int"])
def test_explicit_stream_argument(generator, spelling):
    side = torch.cuda.Stream()
    x = random_tensor(generator, (256, 1000), "float32")
    side.wait_stream(torch.cuda.current_stream())  # x is ready before the side stream reads it
    out = poisoned(x.shape, "float32")
    smx.log_softmax(x, out=out, stream=side if spelling == "object" else side.cuda_stream)
    side.synchronize()
    assert_matches_torch(out, x, -1, True)


def test_a_result_dropped_right_after_a_stream_call_is_not_reused_under_its_kernel(generator):
    # The result is allocated on the current stream and written on `side`, whose kernel is held back by a
    # sleep. Dropped at once, its block must not go to the next allocation of the same size on the
    # current stream while smx still writes it: that tensor must stay all zeros. The current stream is a
    # created one: the legacy default stream would wait for `side` by itself and hide the hazard.
    x = random_tensor(generator, (2048, 4096), "float32")
    current, side = torch.cuda.Stream(), torch.cuda.Stream()
    current.wait_stream(torch.cuda.current_stream())
    side.wait_stream(torch.cuda.current_stream())
    # Warm-up: the first launch of a kernel loads its module, which waits for the whole GPU and would hide
    # the hazard (smx's kernel, and torch's fill behind zeros).
    smx.softmax(x, stream=side)
    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    with torch.cuda.stream(current):
        with torch.cuda.stream(side):
            torch.cuda._sleep(500_000_000)  # ~0.25 s of GPU time before smx's kernel runs
        smx.softmax(x, stream=side)  # result dropped at once
        z = torch.zeros(2048, 4096, device="cuda")
    torch.cuda.synchronize()
    assert int(torch.count_nonzero(z)) == 0


class InterfaceArray:
    """A torch tensor offered only through __cuda_array_interface__ (v3), naming `stream` as the stream its
    producer may still be using it on. No device attribute: smx asks the CUDA driver where it lives."""

    def __init__(self, tensor, stream):
        self.tensor = tensor
        itemsize = tensor.element_size()
        self.__cuda_array_interface__ = {
            "shape": tuple(tensor.shape), "typestr": np.dtype(str(tensor.dtype).replace("torch.", "")).str,
            "strides": tuple(stride * itemsize for stride in tensor.stride()), "data": (tensor.data_ptr(), False),
            "version": 3, "stream": stream}


def interface_streams_setup(generator):
    """x, a poisoned out and two created streams that x is ready on; smx's kernels loaded (a module's first
    load waits for the whole GPU, which would hide the hazards these tests hold open with sleeps)."""
    x = random_tensor(generator, (2048, 4096), "float32")
    out = poisoned(x.shape, "float32")
    first, second = torch.cuda.Stream(), torch.cuda.Stream()
    first.wait_stream(torch.cuda.current_stream())
    second.wait_stream(torch.cuda.current_stream())
    smx.softmax(InterfaceArray(x, None), out=InterfaceArray(torch.empty_like(x), None), stream=first)
    torch.cuda.synchronize()
    return x, out, first, second


def test_the_launch_waits_for_the_stream_an_interface_input_names(generator):
    x, out, producer, launch = interface_streams_setup(generator)
    values = random_tensor(generator, x.shape, "float32")
    producer.wait_stream(torch.cuda.current_stream())  # values are ready before the producer copies them
    with torch.cuda.stream(producer):
        torch.cuda._sleep(500_000_000)  # ~0.25 s of GPU time before x gets its values
        x.copy_(values)
    smx.softmax(InterfaceArray(x, producer.cuda_stream), out=InterfaceArray(out, None), stream=launch)
    torch.cuda.synchronize()
    assert_matches_torch(out, values, -1, False)


def test_the_stream_an_interface_input_names_waits_for_the_launch(generator):
    x, out, producer, launch = interface_streams_setup(generator)
    values = x.clone()
    torch.cuda.synchronize()
    with torch.cuda.stream(launch):
        torch.cuda._sleep(500_000_000)  # smx's kernel runs ~0.25 s late
    smx.log_softmax(InterfaceArray(x, producer.cuda_stream), out=InterfaceArray(out, None), stream=launch)
    with torch.cuda.stream(producer):
        x.fill_(0.0)  # the producer's next work on x: after smx has read it
    torch.cuda.synchronize()
    assert_matches_torch(out, values, -1, True)


def test_an_interface_output_is_written_between_its_stream_s_work_before_and_after(generator):
    x, out, owner, launch = interface_streams_setup(generator)
    with torch.cuda.stream(owner):
        torch.cuda._sleep(500_000_000)
        before = out.clone()  # the owner's pending read of out: smx must not write first
    with torch.cuda.stream(launch):
        torch.cuda._sleep(1_000_000_000)  # smx's kernel runs ~0.5 s late, after the owner's first read
    smx.softmax(InterfaceArray(x, None), out=InterfaceArray(out, owner.cuda_stream), stream=launch)
    with torch.cuda.stream(owner):
        after = out.clone()  # the owner's next read: sees smx's result
    torch.cuda.synchronize()
    assert bool(torch.isnan(before).all())
    assert_matches_torch(after, x, -1, False)


def test_interface_streams_inside_a_graph_capture(generator, monkeypatch):
    monkeypatch.setattr(smx._streams, "_events", {})  # the ordering event is first made inside the capture
    x = random_tensor(generator, (64, 1000), "float32")
    out = poisoned(x.shape, "float32")
    outside = torch.cuda.Stream()
    smx.softmax(x, out=torch.empty_like(x))  # loaded before capture (module loading is not capturable)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match="not in the same CUDA graph capture"):
        with torch.cuda.graph(graph):
            smx.softmax(InterfaceArray(x, outside.cuda_stream), out=InterfaceArray(out, None),
                        stream=torch.cuda.current_stream())
    # A stream forked into the capture is ordered like any other: in the replay smx's kernel waits for the
    # side stream's late copy of new values into x.
    values = random_tensor(generator, x.shape, "float32")
    graph = torch.cuda.CUDAGraph()
    side = torch.cuda.Stream()
    with torch.cuda.graph(graph):
        capture = torch.cuda.current_stream()
        side.wait_stream(capture)
        with torch.cuda.stream(side):
            torch.cuda._sleep(500_000_000)
            x.copy_(values)
        smx.softmax(InterfaceArray(x, side.cuda_stream), out=InterfaceArray(out, None), stream=capture)
        capture.wait_stream(side)  # joined back before the capture ends
    torch.cuda.synchronize()
    assert bool(torch.isnan(out).all())  # captured, not run
    graph.replay()
    torch.cuda.synchronize()
    assert_matches_torch(out, values, -1, False)


def test_an_interface_naming_the_legacy_stream_is_refused_inside_a_capture(generator):
    # CuPy names its current stream, often the legacy one (1), which no capture can take in.
    x = random_tensor(generator, (64, 1000), "float32")
    out = poisoned(x.shape, "float32")
    smx.softmax(x, out=torch.empty_like(x))
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match="not in the same CUDA graph capture"):
        with torch.cuda.graph(graph):
            smx.softmax(InterfaceArray(x, 1), out=InterfaceArray(out, None), stream=torch.cuda.current_stream())
    smx.softmax(InterfaceArray(x, 1), out=InterfaceArray(out, None), stream=torch.cuda.Stream())  # fine outside
    torch.cuda.synchronize()
    assert_matches_torch(out, x, -1, False)


def test_writing_a_tensor_saved_for_backward_makes_backward_refuse(generator):
    z = random_tensor(generator, (4, 64), "float32").requires_grad_()
    h = torch.sigmoid(z)  # sigmoid saves its output for backward
    before = h._version
    smx.softmax(h.detach(), out=h.detach())  # in place through a detached view: same version counter
    assert h._version > before
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        h.sum().backward()
    with torch.inference_mode():  # inference tensors have no version counter: nothing to bump
        t = random_tensor(generator, (4, 64), "float32")
        expected = torch.softmax(t.double(), -1)
        smx.softmax(t, out=t)
        assert torch.allclose(t.double(), expected, rtol=1e-5, atol=1e-7)


def test_plan_names_the_cuda_backend(generator):
    assert smx.plan(random_tensor(generator, (128, 1024), "float16")).startswith("cuda")


def test_out_on_another_device_is_refused(generator):
    x = random_tensor(generator, (2, 3), "float32")
    with pytest.raises(ValueError, match="out is on cpu:0 but x is on cuda:0"):
        smx.softmax(x, out=torch.empty((2, 3)))


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_tensors_on_the_second_gpu(generator):
    x = random_tensor(generator, (16, 500), "float32", device="cuda:1")
    y = smx.softmax(x)
    assert y.device == x.device
    assert_matches_torch(y, x, -1, False)


class DLPackOnly:
    """A CUDA array that offers only DLPack (like a JAX array), wrapping a torch tensor."""

    def __init__(self, tensor):
        self.tensor = tensor

    def __dlpack__(self, **kwargs):
        return self.tensor.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.tensor.__dlpack_device__()


@pytest.mark.parametrize("log", MODES)
def test_dlpack_only_cuda_arrays(generator, log):
    x = random_tensor(generator, (30, 200), "bfloat16").t()
    out = poisoned((200, 30), "float32")
    run(DLPackOnly(x), 0, log, out=DLPackOnly(out))
    assert_matches_torch(out, x, 0, log)


def cupy_to_torch(array):
    cupy = pytest.importorskip("cupy")
    return torch.as_tensor(np.ascontiguousarray(cupy.asnumpy(array)), device="cuda")


@pytest.mark.parametrize("log", MODES)
def test_cupy_arrays(log):
    cupy = pytest.importorskip("cupy", reason="CuPy is not installed")
    x = cupy.asarray(np.random.default_rng().standard_normal((48, 777)).astype(np.float32) * 3)[:, ::-1]
    y = run(x, -1, log)
    assert isinstance(y, cupy.ndarray) and y.dtype == np.float32
    assert_matches_torch(cupy_to_torch(y), cupy_to_torch(x), -1, log)
    half = run(x, 0, log, dtype="float16")
    assert isinstance(half, cupy.ndarray) and half.dtype == np.float16
    assert_matches_torch(cupy_to_torch(half), cupy_to_torch(x), 0, log)
    in_place = x.copy()
    run(in_place, -1, log, out=in_place)
    assert_matches_torch(cupy_to_torch(in_place), cupy_to_torch(x), -1, log)
