"""torch.ops.smx.softmax_backward / log_softmax_backward and smx.softmax_backward on CPU torch tensors:
registration, values against torch._softmax_backward_data / _log_softmax_backward_data and the float64
formulas, fake tensors, opcheck, torch.compile(fullgraph=True), gradcheck and gradgradcheck, the forward
operators' gradient running them, errors. The CUDA side is in test_torch_cuda.py."""

import numpy as np
import pytest

import smx
from conftest import assert_close_backward, backward_reference

torch = pytest.importorskip("torch", reason="the operators need PyTorch")
import smx.torch as smx_torch  # noqa: E402,F401  (defines torch.ops.smx)
from test_torch import (DTYPES, HALF_AND_SINGLE, MODES, GraphRecorder, assert_runs_with_the_python_kernels,  # noqa: E402
                        random_tensor)

OPERATORS = ["softmax_backward", "log_softmax_backward"]


def op(log, overload="default"):
    return getattr(getattr(torch.ops.smx, "log_softmax_backward" if log else "softmax_backward"), overload)


def wrapper(log):
    return smx.log_softmax_backward if log else smx.softmax_backward


def torch_backward(log):
    return torch._log_softmax_backward_data if log else torch._softmax_backward_data


def forward_output(x, dim, log):
    return (torch.log_softmax if log else torch.softmax)(x, dim)


def assert_matches_formula(grad_input, grad_output, output, dim, log, rtol=None):
    expected, scale = backward_reference(grad_output.detach().double().numpy(), output.detach().double().numpy(),
                                         dim % max(output.dim(), 1), log)
    assert_close_backward(grad_input.detach().double().numpy(), str(grad_input.dtype).replace("torch.", ""), expected,
                          scale, rtol)


@pytest.mark.parametrize("name", OPERATORS)
def test_every_backward_operator_has_cpu_cuda_autograd_and_fake_kernels(name):
    for overload in ("", ".out"):
        qualified = f"smx::{name}{overload}"
        for key in ("CPU", "CUDA", "Meta", "Autograd"):
            assert torch._C._dispatch_has_kernel_for_dispatch_key(qualified, key), f"{qualified} has no {key} kernel"
    assert torch.Tag.pt2_compliant_tag in getattr(torch.ops.smx, name).default.tags


@pytest.mark.parametrize("log", MODES)
@pytest.mark.parametrize("name", list(DTYPES))
def test_operators_match_torch_s_backward_on_every_dim(rng, name, log):
    for dim in range(-3, 3):
        output = forward_output(random_tensor(rng, (3, 4, 33), name), dim, log)
        grad_output = random_tensor(rng, (3, 4, 33), name)
        grad_input = op(log)(grad_output, output, dim)
        assert grad_input.dtype == output.dtype and grad_input.shape == output.shape
        assert_matches_formula(grad_input, grad_output, output, dim, log)
        theirs = torch_backward(log)(grad_output.double(), output.double(), dim, torch.float64)
        torch.testing.assert_close(grad_input.double(), theirs, rtol=1e-2 if name in ("float16", "bfloat16") else 1e-5,
                                   atol=1e-2 if name in ("float16", "bfloat16") else 1e-5)


@pytest.mark.parametrize("log", MODES)
@pytest.mark.parametrize("dx_name", list(DTYPES))
@pytest.mark.parametrize("y_name", HALF_AND_SINGLE)
def test_every_grad_input_dtype_by_dtype_and_by_out(rng, y_name, dx_name, log):
    # torch's CPU backward takes only input_dtype == output's dtype; smx takes any grad_input dtype.
    output = forward_output(random_tensor(rng, (6, 129), "float32"), 1, log).to(DTYPES[y_name])
    grad_output = random_tensor(rng, (6, 129), y_name)
    grad_input = op(log)(grad_output, output, 1, DTYPES[dx_name])
    assert grad_input.dtype == DTYPES[dx_name]
    assert_matches_formula(grad_input, grad_output, output, 1, log)
    out = torch.full((6, 129), float("nan"), dtype=DTYPES[dx_name])
    assert op(log, "out")(grad_output, output, -1, grad_input=out) is None
    assert_matches_formula(out, grad_output, output, -1, log)


@pytest.mark.parametrize("log", MODES)
@pytest.mark.parametrize("name", ["float32", "float64"])
def test_special_values_propagate_exactly_as_torch_s_backward(rng, name, log):
    inf, nan = float("inf"), float("nan")
    output = forward_output(random_tensor(rng, (8, 6), name) / 3, 1, log)
    grad_output = random_tensor(rng, (8, 6), name)
    grad_output[1, 2] = nan
    output[2, 3] = nan
    grad_output[3, 0] = inf
    grad_output[4, 5] = -inf
    grad_output[5, 0], grad_output[5, 1] = inf, -inf
    output[6, 4] = -inf if log else 0.0
    output[7, 1], grad_output[7, 0] = (-inf, inf) if log else (0.0, inf)  # an infinite sum meets exp(y) = 0 / y = 0
    ours = op(log)(grad_output, output, 1)
    theirs = torch_backward(log)(grad_output, output, 1, output.dtype)
    assert torch.equal(ours.isnan(), theirs.isnan())
    assert torch.equal(ours.isinf(), theirs.isinf()) and torch.equal(ours[ours.isinf()], theirs[theirs.isinf()])
    finite = theirs.isfinite()
    torch.testing.assert_close(ours[finite], theirs[finite], rtol=1e-5, atol=1e-6)


def layouts(rng):
    """(grad_output, output) pairs of every kind of layout: dense, transposed, sliced, broadcast, 0-d, empty."""
    base = forward_output(random_tensor(rng, (4, 6, 10), "float32"), -1, False)
    grad = random_tensor(rng, (4, 6, 10), "float32")
    return {"dense": (grad, base), "transposed": (grad.transpose(0, 2), base.transpose(0, 2)),
            "mixed": (grad.transpose(0, 2).contiguous(), base.transpose(0, 2)),
            "sliced": (grad[:, 1:, ::3], base[:, 1:, ::3]), "broadcast": (grad[:1].expand(3, 6, 10), base[:3]),
            "zero_d": (grad[0, 0, 0], base[0, 0, 0]), "empty": (torch.empty((0, 6, 10)), torch.empty((0, 6, 10)))}


@pytest.mark.parametrize("log", MODES)
def test_results_take_output_s_layout_and_match_the_formula(rng, log):
    for name, (grad_output, output) in layouts(rng).items():
        grad_input = op(log)(grad_output, output, -1)
        assert grad_input.stride() == torch.empty_like(output).stride(), name
        assert_matches_formula(grad_input, grad_output, output, -1, log)


@pytest.mark.parametrize("log", MODES)
def test_fake_tensors_carry_the_real_results_shape_dtype_and_strides(rng, log):
    from torch._subclasses.fake_tensor import FakeTensorMode
    for name, (grad_output, output) in layouts(rng).items():
        for dtype in (None, torch.float64):
            real = op(log)(grad_output, output, 0, dtype)
            with FakeTensorMode(allow_non_fake_inputs=False) as mode:
                fake = op(log)(mode.from_tensor(grad_output), mode.from_tensor(output), 0, dtype)
            assert (fake.shape, fake.dtype, fake.stride(), fake.device) == (
                real.shape, real.dtype, real.stride(), real.device), name


def test_fake_and_real_kernels_refuse_alike(rng):
    from torch._subclasses.fake_tensor import FakeTensorMode
    output = forward_output(random_tensor(rng, (3, 5), "float32"), 1, False)
    grad_output = random_tensor(rng, (3, 5), "float32")
    refusals = [
        (IndexError, "Dimension out of range", lambda g, y: torch.ops.smx.softmax_backward(g, y, 2)),
        (TypeError, "grad_output is float16 but output is float32",
         lambda g, y: torch.ops.smx.softmax_backward(g.half(), y, 1)),
        (TypeError, "got dtype int32", lambda g, y: torch.ops.smx.softmax_backward(g.int(), y.int(), 1)),
        (ValueError, r"grad_output has shape \(5, 3\) but output has shape \(3, 5\)",
         lambda g, y: torch.ops.smx.log_softmax_backward(g.t(), y, 1)),
        (ValueError, r"out has shape \(5, 3\) but output has shape \(3, 5\)",
         lambda g, y: torch.ops.smx.softmax_backward.out(g, y, 0, grad_input=torch.empty(5, 3))),
        (TypeError, "dtype=float16 disagrees with out's dtype float32",
         lambda g, y: torch.ops.smx.softmax_backward.out(g, y, 0, torch.float16, grad_input=torch.empty(3, 5))),
    ]
    for error, message, call in refusals:
        with pytest.raises(error, match=message):
            call(grad_output, output)
        with FakeTensorMode() as mode:
            with pytest.raises(error, match=message):
                call(mode.from_tensor(grad_output), mode.from_tensor(output))


@pytest.mark.parametrize("name", OPERATORS)
def test_opcheck_passes_for_every_overload(rng, name):
    packet = getattr(torch.ops.smx, name)
    output = forward_output(random_tensor(rng, (5, 7), "float32"), 1, name.startswith("log"))
    grad_output = random_tensor(rng, (5, 7), "float32")
    output64 = forward_output(random_tensor(rng, (3, 4), "float64"), 0, name.startswith("log"))
    for args in [(grad_output, output, 1, None), (grad_output.t(), output.t(), 0, torch.bfloat16),
                 (grad_output.detach().requires_grad_(), output.detach().requires_grad_(), -1, None),
                 (random_tensor(rng, (3, 4), "float64").requires_grad_(), output64.requires_grad_(), 0, None)]:
        torch.library.opcheck(packet.default, args)
    torch.library.opcheck(packet.out, (grad_output, output, 1), {"grad_input": torch.empty(5, 7, dtype=torch.float16)})
    torch.library.opcheck(packet.out, (grad_output.t(), output.t(), 0, torch.float32),
                          {"grad_input": torch.empty(5, 7).t()})


@pytest.mark.parametrize("log", MODES)
def test_gradcheck_and_gradgradcheck_of_the_backward_operators_in_float64(rng, log):
    x = random_tensor(rng, (4, 6, 5), "float64")
    for dim in (0, -1, 1):
        output = forward_output(x, dim, log).detach().requires_grad_()
        grad_output = random_tensor(rng, x.shape, "float64").requires_grad_()
        assert torch.autograd.gradcheck(lambda g, y: op(log)(g, y, dim), (grad_output, output))
        assert torch.autograd.gradgradcheck(lambda g, y: wrapper(log)(g, y, dim), (grad_output, output))


def test_the_forward_s_gradient_runs_the_smx_backward_operator(rng):
    from torch.utils._python_dispatch import TorchDispatchMode

    class Recorder(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.calls = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.calls.append(str(func))
            return func(*args, **(kwargs or {}))

    for forward, expected in ((smx.softmax, "smx.softmax_backward.default"),
                              (smx.log_softmax, "smx.log_softmax_backward.default")):
        x = random_tensor(rng, (4, 9), "float32").requires_grad_()
        y = forward(x, -1, dtype=torch.float16)
        recorder = Recorder()
        with recorder:
            y.float().sum().backward()
        assert expected in recorder.calls and not any("_backward_data" in call for call in recorder.calls)
        assert x.grad.dtype == torch.float32  # written in x's dtype by the operator, no cast after it


def assert_gradients_match_torch_s(x, weights, log, rtol, atol):
    """The gradient of sum(f(x) * weights) through smx's forward and backward against torch's autograd."""
    ours, theirs = x.clone().requires_grad_(), x.clone().requires_grad_()
    ((smx.log_softmax if log else smx.softmax)(ours, -1) * weights).sum().backward()
    ((torch.log_softmax if log else torch.softmax)(theirs, -1) * weights).sum().backward()
    torch.testing.assert_close(ours.grad, theirs.grad, rtol=rtol, atol=atol)


@pytest.mark.parametrize("log", MODES)
def test_autograd_through_smx_matches_torch_s_autograd(rng, log):
    assert_gradients_match_torch_s(random_tensor(rng, (8, 50), "float64"), random_tensor(rng, (8, 50), "float64"), log,
                                   rtol=1e-12, atol=1e-14)


def backward_everywhere(grad_output, output, buffer):
    """Every way of calling the backward on torch tensors, mixed with torch ops."""
    a = smx.softmax_backward(grad_output * 2, output, -1)
    b = torch.ops.smx.log_softmax_backward(grad_output, output.log(), 0, torch.float64)
    smx.softmax_backward(grad_output, output, 1, out=buffer)
    c = torch.ops.smx.softmax_backward(a, output, -1)
    return a.sum(0) + b.float().mean() + buffer + c


def test_torch_compile_fullgraph_traces_every_backward_call_into_one_graph(rng):
    output = forward_output(random_tensor(rng, (8, 33), "float32"), -1, False)
    grad_output = random_tensor(rng, (8, 33), "float32")
    recorder = GraphRecorder()
    compiled = torch.compile(backward_everywhere, backend=recorder, fullgraph=True)
    got = compiled(grad_output, output, torch.empty_like(output))
    assert len(recorder.graphs) == 1
    smx_targets = sorted(target for target in recorder.targets() if target.startswith("smx."))
    assert smx_targets == ["smx.log_softmax_backward", "smx.softmax_backward", "smx.softmax_backward.default",
                           "smx.softmax_backward.out"]
    torch.testing.assert_close(got, backward_everywhere(grad_output, output, torch.empty_like(output)), rtol=1e-6,
                               atol=1e-6)


def test_torch_compile_with_inductor_of_a_function_calling_the_backward(rng):
    output = forward_output(random_tensor(rng, (16, 40), "float32"), 1, True)
    grad_output = random_tensor(rng, (16, 40), "float32")

    def step(g, y):
        return smx.log_softmax_backward(g * 0.5, y, 1).square().sum(0) + torch.ops.smx.softmax_backward(g, y.exp(), 0)

    got = torch.compile(step, fullgraph=True)(grad_output, output)
    torch.testing.assert_close(got, step(grad_output, output), rtol=1e-5, atol=1e-5)


def test_out_is_refused_with_a_tensor_that_requires_grad_and_marked_written(rng):
    output = forward_output(random_tensor(rng, (3, 8), "float32"), -1, False)
    grad_output = random_tensor(rng, (3, 8), "float32").requires_grad_()
    with pytest.raises(RuntimeError, match="does not support automatic differentiation"):
        smx.softmax_backward(grad_output, output, out=torch.empty(3, 8))
    with torch.no_grad():
        out = torch.empty(3, 8)
        before = out._version
        smx.softmax_backward(grad_output, output, out=out)
    assert out._version > before
    assert_matches_formula(out, grad_output, output, -1, False)


def test_in_place_over_grad_output(rng):
    output = forward_output(random_tensor(rng, (4, 64), "float32"), -1, True)
    grad = random_tensor(rng, (4, 64), "float32")
    original = grad.clone()
    assert smx.log_softmax_backward(grad, output, out=grad) is grad
    assert_matches_formula(grad, original, output, -1, True)


def test_errors_through_smx_and_through_the_operators(rng):
    output = forward_output(random_tensor(rng, (3, 4), "float64"), -1, False)
    grad_output = random_tensor(rng, (3, 4), "float64")
    with pytest.raises(smx.SmxValueError, match="may not share any memory") as raised:
        smx.softmax_backward(grad_output, output, out=output)  # dx over y
    assert raised.value.status == 2007
    with pytest.raises(ValueError, match=r"\(smx status 2007\)"):
        torch.ops.smx.softmax_backward.out(grad_output, output, -1, None, grad_input=output)
    with pytest.raises(TypeError, match="grad_output is a numpy array but output is a torch tensor"):
        smx.softmax_backward(grad_output.numpy(), output)
    with pytest.raises(TypeError, match="output is a numpy array but grad_output is a torch tensor"):
        smx.softmax_backward(grad_output, output.numpy())
    with pytest.raises(TypeError, match="out is a numpy array but output is a torch array"):
        smx.softmax_backward(grad_output, output, out=np.empty((3, 4)))
    with pytest.raises(TypeError, match="grad_output is float32 but output is float64"):
        smx.softmax_backward(grad_output.float(), output)
    with pytest.raises(IndexError, match=r"range of \[-2, 1\], but got 2"):
        smx.log_softmax_backward(grad_output, output, 2)


def test_dtype_spellings_and_stream_on_the_cpu(rng):
    output = forward_output(random_tensor(rng, (2, 50), "float32"), -1, False)
    grad_output = random_tensor(rng, (2, 50), "float32")
    for spelling in ("float16", np.float16, torch.float16):
        grad_input = smx.softmax_backward(grad_output, output, dtype=spelling)
        assert grad_input.dtype == torch.float16
        assert_matches_formula(grad_input, grad_output, output, -1, False)
    assert_matches_formula(smx.softmax_backward(grad_output, output, stream=0), grad_output, output, -1, False)


def test_repeated_problems_reuse_one_cached_descriptor(rng):
    output = forward_output(random_tensor(rng, (7, 19), "float32"), -1, False)
    smx.softmax_backward(random_tensor(rng, (7, 19), "float32"), output)
    hits, misses, _, _ = smx_torch._cache_info()
    for _ in range(3):
        smx.softmax_backward(random_tensor(rng, (7, 19), "float32"), output)
    after = smx_torch._cache_info()
    assert (after[0] - hits, after[1] - misses) == (3, 0)


def test_the_python_kernels_of_the_backward_where_the_extension_is_not_used(tmp_path):
    # SMX_TORCH_EXTENSION=0, in a process of its own (the operators' kernels are registered once per process).
    script = tmp_path / "python_backward_kernels.py"
    script.write_text(
        "import numpy as np, torch, smx, smx.torch\n"
        "assert smx.torch.backend() == 'python'\n"
        "rng = np.random.default_rng()\n"
        "x = torch.from_numpy(rng.standard_normal((6, 30)) * 3)\n"
        "g = torch.from_numpy(rng.standard_normal((6, 30)))\n"
        "for log in (False, True):\n"
        "    y = (torch.log_softmax if log else torch.softmax)(x, 0)\n"
        "    expected = (torch._log_softmax_backward_data if log else torch._softmax_backward_data)(g, y, 0, y.dtype)\n"
        "    backward = smx.log_softmax_backward if log else smx.softmax_backward\n"
        "    torch.testing.assert_close(backward(g, y, 0), expected, rtol=1e-12, atol=1e-14)\n"
        "    out = torch.empty(6, 30, dtype=torch.float32)\n"
        "    backward(g, y, 0, out=out)\n"
        "    torch.testing.assert_close(out, expected.float())\n"
        "    op = torch.ops.smx.log_softmax_backward if log else torch.ops.smx.softmax_backward\n"
        "    arguments = (g.clone().requires_grad_(), y.detach().requires_grad_())\n"
        "    assert torch.autograd.gradcheck(lambda a, b: op(a, b, 1), arguments)\n"
        "    assert torch.autograd.gradgradcheck(lambda a, b: op(a, b, 1), arguments)\n"
        "    forward = smx.log_softmax if log else smx.softmax\n"
        "    assert torch.autograd.gradgradcheck(lambda t: forward(t, 1), (x.clone().requires_grad_(),))\n"
        "    compiled = torch.compile(lambda a, b: op(a, b, -1) * 2, backend='aot_eager', fullgraph=True)\n"
        "    torch.testing.assert_close(compiled(g, y), op(g, y, -1) * 2)\n"
        "    torch.library.opcheck(op.default, arguments + (1, None))\n"
        "print('ok')\n")
    assert_runs_with_the_python_kernels(script)
