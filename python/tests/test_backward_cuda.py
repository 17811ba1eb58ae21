"""smx.softmax_backward / log_softmax_backward and the backward operators on CUDA tensors (and CuPy arrays):
values against the float64 formulas across row lengths, dtype pairs and layouts, special values, in place,
gradcheck and gradgradcheck in float64, CUDA graph capture.

Skipped, with the reason, where PyTorch has no CUDA device or libsmx was built without its CUDA backend."""

import numpy as np
import pytest

import smx
from conftest import assert_close_backward, backward_reference
from test_cuda import _UNAVAILABLE, DTYPES, MODES, generator, random_tensor  # noqa: F401

torch = pytest.importorskip("torch", reason="the CUDA tests drive the GPU through PyTorch")
import smx.torch as smx_torch  # noqa: E402,F401  (defines torch.ops.smx)

pytestmark = [pytest.mark.cuda, pytest.mark.skipif(_UNAVAILABLE is not None, reason=str(_UNAVAILABLE))]


def backward(log):
    return smx.log_softmax_backward if log else smx.softmax_backward


def forward_output(x, dim, log, name=None):
    """torch's forward of x, rounded to `name` (default x's dtype): the output a backward is given."""
    y = (torch.log_softmax if log else torch.softmax)(x.double(), dim)
    return y.to(DTYPES[name] if name else x.dtype)


def assert_matches_formula(grad_input, grad_output, output, dim, log):
    torch.cuda.synchronize()
    expected, scale = backward_reference(grad_output.double().cpu().numpy(), output.double().cpu().numpy(),
                                         dim % max(output.dim(), 1), log)
    assert_close_backward(grad_input.double().cpu().numpy(), str(grad_input.dtype).replace("torch.", ""), expected,
                          scale)


@pytest.mark.parametrize("log", MODES)
@pytest.mark.parametrize("row_len", [1, 7, 32, 129, 1024, 5000, 70000, 1 << 20])
def test_row_lengths_of_every_kernel_size(generator, row_len, log):
    rows = 3 if row_len >= 1 << 20 else 33
    output = forward_output(random_tensor(generator, (rows, row_len), "float32"), -1, log)
    grad_output = random_tensor(generator, (rows, row_len), "float32")
    grad_input = backward(log)(grad_output, output, -1)
    assert grad_input.is_cuda and grad_input.dtype == torch.float32
    assert_matches_formula(grad_input, grad_output, output, -1, log)


@pytest.mark.parametrize("log", MODES)
@pytest.mark.parametrize("dx_name", list(DTYPES))
@pytest.mark.parametrize("y_name", list(DTYPES))
def test_every_dtype_pair_by_dtype_and_by_out(generator, y_name, dx_name, log):
    output = forward_output(random_tensor(generator, (64, 300), "float32"), 1, log, y_name)
    grad_output = random_tensor(generator, (64, 300), y_name)
    grad_input = backward(log)(grad_output, output, 1, dtype=DTYPES[dx_name])
    assert grad_input.dtype == DTYPES[dx_name]
    assert_matches_formula(grad_input, grad_output, output, 1, log)
    out = torch.full((64, 300), float("nan"), dtype=DTYPES[dx_name], device="cuda")
    backward(log)(grad_output, output, 1, out=out)
    assert_matches_formula(out, grad_output, output, 1, log)


@pytest.mark.parametrize("log", MODES)
def test_every_layout_class_and_broadcast_and_in_place(generator, log):
    base = random_tensor(generator, (16, 96, 40), "float32")
    grads = random_tensor(generator, (16, 96, 40), "float32")
    cases = {
        "spatial (middle dim)": (grads, forward_output(base, 1, log), 1),
        "general (transposed output)": (grads, forward_output(base.transpose(0, 2), 0, log).transpose(0, 2), 2),
        "padded rows": (grads[:, :, :33], forward_output(base[:, :, :33], -1, log), -1),
        "broadcast grad_output": (grads[:1].expand(16, 96, 40), forward_output(base, -1, log), -1),
        "reversed": (grads.flip(2), forward_output(base, -1, log).flip(2), -1),
    }
    for name, (grad_output, output, dim) in cases.items():
        grad_input = backward(log)(grad_output, output, dim)
        assert_matches_formula(grad_input, grad_output, output, dim, log)
    output = forward_output(base, -1, log)
    in_place = grads.clone()
    backward(log)(in_place, output, -1, out=in_place)
    assert_matches_formula(in_place, grads, output, -1, log)


@pytest.mark.parametrize("log", MODES)
def test_special_values_match_the_formula(generator, log):
    output = forward_output(random_tensor(generator, (6, 2000), "float32") / 3, 1, log)
    grad_output = random_tensor(generator, (6, 2000), "float32")
    grad_output[1, 7] = float("nan")
    output[2, 11] = float("nan")
    grad_output[3, 0] = float("inf")
    output[4, 5] = float("-inf") if log else 0.0
    grad_output[5, 0], grad_output[5, 1999] = float("inf"), float("-inf")
    assert_matches_formula(backward(log)(grad_output, output, 1), grad_output, output, 1, log)


@pytest.mark.parametrize("log", MODES)
def test_gradcheck_and_gradgradcheck_in_float64(generator, log):
    x = random_tensor(generator, (4, 6, 5), "float64")
    forward = smx.log_softmax if log else smx.softmax
    for dim in (0, -1):
        argument = x.detach().requires_grad_()
        assert torch.autograd.gradcheck(lambda t: forward(t, dim), (argument,))
        assert torch.autograd.gradgradcheck(lambda t: forward(t, dim), (argument,))
        grad_output = random_tensor(generator, x.shape, "float64").requires_grad_()
        output = forward_output(x, dim, log).detach().requires_grad_()
        assert torch.autograd.gradgradcheck(lambda g, y: backward(log)(g, y, dim), (grad_output, output))


@pytest.mark.parametrize("log", MODES)
def test_cuda_graph_captures_and_replays_the_backward(generator, log):
    output = forward_output(random_tensor(generator, (48, 3000), "float32"), -1, log)
    grad_output = random_tensor(generator, (48, 3000), "float32")
    out = torch.full(output.shape, float("nan"), dtype=torch.float16, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up: descriptors made, kernels loaded
        backward(log)(grad_output, output), backward(log)(grad_output, output, out=out)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        allocated = backward(log)(grad_output, output)
        backward(log)(grad_output, output, out=out)
    values = random_tensor(generator, grad_output.shape, "float32")
    grad_output.copy_(values)
    graph.replay()
    assert_matches_formula(allocated, values, output, -1, log)
    assert_matches_formula(out, values, output, -1, log)


def test_forward_and_backward_under_inductor_match_eager(generator):
    x = random_tensor(generator, (64, 1000), "float32")
    weights = random_tensor(generator, (64, 1000), "float32")

    def loss(t):
        return (smx.softmax(t, -1) * weights).sum() + smx.log_softmax(t, 0).square().mean()

    eager_x, compiled_x = x.clone().requires_grad_(), x.clone().requires_grad_()
    loss(eager_x).backward()
    torch.compile(loss, fullgraph=True)(compiled_x).backward()
    torch.testing.assert_close(compiled_x.grad, eager_x.grad, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("log", MODES)
def test_cupy_arrays(log):
    cupy = pytest.importorskip("cupy", reason="CuPy is not installed")
    rng = np.random.default_rng()
    output = cupy.asarray(torch.softmax(torch.from_numpy(rng.standard_normal((48, 777))), -1).numpy().astype(np.float32))
    if log:
        output = cupy.log(output)
    grad_output = cupy.asarray(rng.standard_normal((48, 777)).astype(np.float32))[:, ::-1]
    grad_input = backward(log)(grad_output, output, -1)
    assert isinstance(grad_input, cupy.ndarray) and grad_input.dtype == np.float32
    expected, scale = backward_reference(cupy.asnumpy(grad_output), cupy.asnumpy(output), 1, log)
    assert_close_backward(cupy.asnumpy(grad_input), "float32", expected, scale)
