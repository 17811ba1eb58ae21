"""torch.ops.smx (smx/torch.py and its C++ extension) on CPU tensors: registration, values against the float64
reference, fake tensors, opcheck, torch.compile(fullgraph=True), autograd, errors, and smx.softmax's routing
of torch tensors through the operators. The CUDA side is in test_torch_cuda.py."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import smx
from conftest import assert_close_values, reference

torch = pytest.importorskip("torch", reason="the operators need PyTorch")
import smx.torch as smx_torch  # noqa: E402  (imports torch, defines torch.ops.smx, builds or loads the extension)

PACKAGE_ROOT = Path(smx.__file__).resolve().parent.parent
DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32, "float64": torch.float64}
HALF_AND_SINGLE = ["float16", "bfloat16", "float32"]
MODES = [pytest.param(False, id="softmax"), pytest.param(True, id="log_softmax")]
OPERATORS = ["softmax", "log_softmax"]


def random_tensor(rng, shape, name):
    """Normal values with spread 3, rounded to the dtype (bfloat16 through torch: NumPy has none)."""
    return torch.from_numpy(rng.standard_normal(shape) * 3).to(DTYPES[name])


def assert_matches_reference(y, x, dim, log):
    assert y.shape == x.shape
    assert_close_values(y.detach().double().numpy(), str(y.dtype).replace("torch.", ""),
                        reference(x.detach().double().numpy(), dim, log), log)


def op(log, overload="default"):
    return getattr(getattr(torch.ops.smx, "log_softmax" if log else "softmax"), overload)


def wrapper(log):
    return smx.log_softmax if log else smx.softmax


def test_importing_smx_and_computing_on_numpy_does_not_import_torch():
    script = ("import sys, numpy as np, smx\n"
              "smx.softmax(np.ones((2, 3), np.float32))\n"
              "print('torch' in sys.modules, 'smx.torch' in sys.modules)\n")
    environment = dict(os.environ, PYTHONPATH=str(PACKAGE_ROOT), SMX_LIBRARY=smx.library_path())
    done = subprocess.run([sys.executable, "-c", script], env=environment, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["False", "False"]


@pytest.mark.parametrize("name", OPERATORS)
def test_every_operator_has_cpu_cuda_autograd_and_fake_kernels(name):
    for overload in ("", ".out"):
        qualified = f"smx::{name}{overload}"
        for key in ("CPU", "CUDA", "Meta"):
            assert torch._C._dispatch_has_kernel_for_dispatch_key(qualified, key), f"{qualified} has no {key} kernel"
    assert torch._C._dispatch_has_kernel_for_dispatch_key(f"smx::{name}", "Autograd")
    assert torch.Tag.pt2_compliant_tag in getattr(torch.ops.smx, name).default.tags


def test_the_extension_is_built_and_bound():
    # CI builds it (g++ and ninja are installed by scripts/install-deps.sh); the Python kernels are the
    # fallback where it cannot be built, tested apart below.
    assert smx_torch.backend() == "extension", "the C++ extension did not load (see the warning at import)"
    assert os.path.isfile(smx_torch.extension_path)


@pytest.mark.parametrize("log", MODES)
@pytest.mark.parametrize("name", list(DTYPES))
def test_operators_match_the_float64_reference_on_every_dim(rng, name, log):
    x = random_tensor(rng, (3, 4, 33), name)
    for dim in range(-3, 3):
        y = op(log)(x, dim)
        assert y.dtype == x.dtype
        assert_matches_reference(y, x, dim, log)


@pytest.mark.parametrize("log", MODES)
@pytest.mark.parametrize("y_name", HALF_AND_SINGLE)
@pytest.mark.parametrize("x_name", HALF_AND_SINGLE)
def test_every_half_and_single_dtype_pair_by_dtype_and_by_out(rng, x_name, y_name, log):
    x = random_tensor(rng, (6, 129), x_name)
    y = op(log)(x, 1, DTYPES[y_name])
    assert y.dtype == DTYPES[y_name]
    assert_matches_reference(y, x, 1, log)
    out = torch.full((6, 129), float("nan"), dtype=DTYPES[y_name])
    assert op(log, "out")(x, 0, y=out) is None
    assert_matches_reference(out, x, 0, log)


def layouts(rng):
    """Inputs of every kind of layout torch tensors take: dense, transposed, sliced, broadcast, 0-d, empty."""
    base = random_tensor(rng, (4, 6, 10), "float32")
    return {"dense": base, "transposed": base.transpose(0, 2), "permuted": base.permute(1, 2, 0),
            "sliced": base[:, 1:, ::3], "broadcast": base[:1].expand(3, 6, 10), "zero_d": base[0, 0, 0],
            "empty": torch.empty((0, 6, 10)), "channels_last": random_tensor(rng, (2, 3, 4, 5), "float32").contiguous(
                memory_format=torch.channels_last)}


@pytest.mark.parametrize("log", MODES)
def test_results_take_torch_empty_like_layout_and_match_the_reference(rng, log):
    for name, x in layouts(rng).items():
        y = op(log)(x, -1)
        assert y.stride() == torch.empty_like(x).stride(), name
        assert_matches_reference(y, x, -1, log)


@pytest.mark.parametrize("log", MODES)
def test_fake_tensors_carry_the_real_results_shape_dtype_and_strides(rng, log):
    from torch._subclasses.fake_tensor import FakeTensorMode
    for name, x in layouts(rng).items():
        for dtype in (None, torch.float16):
            real = op(log)(x, 0, dtype)
            with FakeTensorMode(allow_non_fake_inputs=False) as mode:
                fake = op(log)(mode.from_tensor(x), 0, dtype)
            assert (fake.shape, fake.dtype, fake.stride(), fake.device) == (
                real.shape, real.dtype, real.stride(), real.device), name


def test_fake_kernels_refuse_what_the_real_kernels_refuse(rng):
    from torch._subclasses.fake_tensor import FakeTensorMode
    x = random_tensor(rng, (3, 5), "float32")
    with FakeTensorMode() as mode:
        fake = mode.from_tensor(x)
        with pytest.raises(IndexError, match="Dimension out of range"):
            torch.ops.smx.softmax(fake, 2)
        with pytest.raises(TypeError, match="got dtype int32"):
            torch.ops.smx.softmax(mode.from_tensor(torch.ones(3, dtype=torch.int32)), 0)
        with pytest.raises(ValueError, match=r"out has shape \(5, 3\) but x has shape \(3, 5\)"):
            torch.ops.smx.softmax.out(fake, 0, y=mode.from_tensor(torch.empty(5, 3)))


@pytest.mark.parametrize("name", OPERATORS)
def test_opcheck_passes_for_every_overload(rng, name):
    packet = getattr(torch.ops.smx, name)
    x = random_tensor(rng, (5, 7), "float32")
    for args in [(x, 1, None), (x.t(), 0, torch.bfloat16), (x.detach().requires_grad_(), -1, None),
                 (random_tensor(rng, (3, 4), "float64").requires_grad_(), 0, None)]:
        torch.library.opcheck(packet.default, args)
    torch.library.opcheck(packet.out, (x, 1), {"y": torch.empty(5, 7, dtype=torch.float16)})
    torch.library.opcheck(packet.out, (x.t(), 0, torch.float32), {"y": torch.empty(5, 7).t()})


class GraphRecorder:
    """A torch.compile backend that keeps each graph it is given and runs it as traced."""

    def __init__(self):
        self.graphs = []

    def __call__(self, graph_module, example_inputs):
        self.graphs.append(graph_module)
        return graph_module.forward

    def targets(self):
        return [str(node.target) for graph in self.graphs for node in graph.graph.nodes if node.op == "call_function"]


def smx_everywhere(x, out):
    """Every way of calling smx on torch tensors, mixed with torch ops."""
    a = smx.softmax(x * 2, -1)
    b = smx.log_softmax(x, 0, dtype=torch.float16)
    smx.softmax(x, 1, out=out)
    c = torch.ops.smx.log_softmax(a, -1)
    return a.sum(0) + b.float().mean() + out + c


def test_torch_compile_fullgraph_traces_every_call_into_one_graph(rng):
    x = random_tensor(rng, (8, 33), "float32")
    recorder = GraphRecorder()
    compiled = torch.compile(smx_everywhere, backend=recorder, fullgraph=True)
    got = compiled(x, torch.empty_like(x))
    assert len(recorder.graphs) == 1
    smx_targets = sorted(target for target in recorder.targets() if target.startswith("smx."))
    assert smx_targets == ["smx.log_softmax", "smx.log_softmax.default", "smx.softmax.default", "smx.softmax.out"]
    torch.testing.assert_close(got, smx_everywhere(x, torch.empty_like(x)), rtol=1e-6, atol=1e-6)


def test_torch_compile_fullgraph_writes_in_place_and_into_strided_views(rng):
    # out= a non-contiguous view of a graph input, and out=x: functionalized writes, no graph break.
    x = random_tensor(rng, (4, 16), "float32")

    def into_views(x, buffer):
        y = x * 1.0
        smx.softmax(y, out=y)
        smx.log_softmax(x, 0, out=buffer[:, ::2])
        smx.softmax(x.t(), 1, out=buffer[:, 1::2].t())
        return y + 1

    buffer, expected_buffer = torch.zeros(4, 32), torch.zeros(4, 32)
    expected = into_views(x, expected_buffer)
    got = torch.compile(into_views, fullgraph=True)(x, buffer)
    torch.testing.assert_close(got, expected, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(buffer, expected_buffer, rtol=1e-6, atol=1e-6)
    assert_matches_reference(buffer[:, ::2], x, 0, True)


def test_torch_compile_fullgraph_of_smx_s_first_torch_call_in_a_process():
    # smx.softmax imports smx.torch on its first torch tensor; under torch.compile that import is traced.
    script = ("import torch, smx\n"
              "x = torch.randn(3, 7)\n"
              "got = torch.compile(lambda t: smx.softmax(t, -1) + 1, fullgraph=True)(x)\n"
              "torch.testing.assert_close(got, torch.softmax(x, -1) + 1)\n"
              "print('ok')\n")
    environment = dict(os.environ, PYTHONPATH=str(PACKAGE_ROOT), SMX_LIBRARY=smx.library_path())
    done = subprocess.run([sys.executable, "-c", script], env=environment, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]


def assert_compiled_matches_eager(loss, x, loss_tolerance, grad_tolerance):
    """loss(x) and its gradient through torch.compile(fullgraph=True) (inductor) against eager, each
    tolerance an (rtol, atol) pair."""
    compiled = torch.compile(loss, fullgraph=True)
    eager_x, compiled_x = x.clone().requires_grad_(), x.clone().requires_grad_()
    eager_loss, compiled_loss = loss(eager_x), compiled(compiled_x)
    eager_loss.backward()
    compiled_loss.backward()
    torch.testing.assert_close(compiled_loss, eager_loss, rtol=loss_tolerance[0], atol=loss_tolerance[1])
    torch.testing.assert_close(compiled_x.grad, eager_x.grad, rtol=grad_tolerance[0], atol=grad_tolerance[1])


def test_torch_compile_with_inductor_and_autograd_matches_eager(rng):
    x = random_tensor(rng, (16, 40), "float32")

    def loss(x):
        return (smx.softmax(x, -1) * torch.arange(40.0)).sum() + smx.log_softmax(x, 0).square().mean()

    # The upstream gradient reaches 39 (the arange): inductor's fused float32 rounding of it differs from eager's
    # by an ulp of 39 (~4e-6) times y, so the gradient's atol is on that scale, not on the result's.
    assert_compiled_matches_eager(loss, x, loss_tolerance=(1e-5, 1e-5), grad_tolerance=(1e-5, 1e-5))


@pytest.mark.parametrize("log", MODES)
def test_gradcheck_in_float64(rng, log):
    x = random_tensor(rng, (4, 6, 5), "float64")
    for view in (x, x.transpose(0, 2)):
        for dim in (0, -1, 1):
            argument = view.detach().requires_grad_()
            assert torch.autograd.gradcheck(lambda t: wrapper(log)(t, dim), (argument,))
            assert torch.autograd.gradgradcheck(lambda t: op(log)(t, dim), (argument,))


EPSILON = {"float32": 2.0 ** -23, "float16": 2.0 ** -10, "bfloat16": 2.0 ** -7}
SMALLEST_STEP = {"float32": 2.0 ** -149, "float16": 2.0 ** -24, "bfloat16": 2.0 ** -133}  # subnormal spacing


@pytest.mark.parametrize("log", MODES)
@pytest.mark.parametrize("y_name", HALF_AND_SINGLE)
def test_gradient_with_dtype_flows_back_to_x_s_dtype_within_y_s_precision(rng, y_name, log):
    # y comes out in y_name and its gradient is computed there, then cast to x's float32 (as torch.softmax's
    # dtype= does). Against the exact gradient in float64, each element may be off by a few of y's
    # rounding steps of the terms it is made of: y_i * (w_i - sum_j w_j y_j) (softmax, whose tiny y_i
    # round to y's subnormal spacing) or w_i - exp(y_i) * sum_j w_j (log-softmax).
    x = random_tensor(rng, (5, 64), "float32")
    weights = random_tensor(rng, (5, 64), "float32")
    argument = x.clone().requires_grad_()
    (wrapper(log)(argument, 1, dtype=DTYPES[y_name]).float() * weights).sum().backward()
    assert argument.grad.dtype == torch.float32
    exact_x, exact_w = x.double().requires_grad_(), weights.double()
    exact_y = (torch.log_softmax if log else torch.softmax)(exact_x, 1)
    (exact_y * exact_w).sum().backward()
    probabilities = exact_y.exp() if log else exact_y
    if log:
        allowed = 8 * EPSILON[y_name] * (exact_w.abs() + probabilities * exact_w.abs().sum(1, keepdim=True))
    else:
        terms = exact_w.abs() + (exact_w.abs() * probabilities).sum(1, keepdim=True)
        allowed = 8 * (EPSILON[y_name] * probabilities + SMALLEST_STEP[y_name]) * terms
    error = (argument.grad.double() - exact_x.grad).abs()
    assert bool((error <= allowed).all()), f"worst error {float((error / allowed).max()):.2f} x the allowance"


def test_out_with_a_tensor_that_requires_grad_is_refused_like_torch_s_out(rng):
    x = random_tensor(rng, (3, 8), "float32").requires_grad_()
    with pytest.raises(RuntimeError, match="does not support automatic differentiation"):
        smx.softmax(x, out=torch.empty(3, 8))
    with torch.no_grad():
        out = torch.empty(3, 8)
        smx.softmax(x, out=out)  # no graph to record: allowed
    assert_matches_reference(out, x, -1, False)


def test_out_is_marked_written_so_a_backward_needing_its_old_values_refuses(rng):
    z = random_tensor(rng, (4, 16), "float32").requires_grad_()
    h = torch.sigmoid(z)  # saves its output for backward
    before = h._version
    smx.softmax(h.detach(), out=h.detach())  # in place through a detached view: same version counter
    assert h._version > before
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        h.sum().backward()


def test_in_place_and_inference_tensors(rng):
    with torch.inference_mode():
        t = random_tensor(rng, (4, 64), "float32")
        original = t.clone()
        assert smx.log_softmax(t, out=t) is t
    assert_matches_reference(t, original, -1, True)
    smx.softmax(t, out=t)  # an inference tensor written outside inference mode, as the ctypes binding does
    assert_matches_reference(t, torch.log_softmax(original.double(), -1), -1, False)


def test_libsmx_errors_raise_smx_exceptions_through_smx_and_builtins_through_torch_ops(rng):
    x = random_tensor(rng, (3, 4), "float64")
    overlapping = torch.empty(1, 4, dtype=torch.float64).expand(3, 4)  # out overlaps itself
    with pytest.raises(smx.SmxValueError, match="BAD_PARAM_OVERLAP") as raised:
        smx.softmax(x, out=overlapping)
    assert 2000 <= raised.value.status < 3000 and raised.value.detail
    with pytest.raises(ValueError, match=r"\(smx status 20[0-9][0-9]\)"):
        torch.ops.smx.softmax.out(x, -1, None, y=overlapping)
    with pytest.raises(smx.SmxValueError):
        smx.softmax(torch.ones((1,) * 9, dtype=torch.float64))  # more dims than libsmx takes


@pytest.mark.parametrize("ndim", [9, 24])
def test_tensors_of_more_than_8_dims_are_refused_with_libsmx_message(ndim):
    # The extension reads a tensor's layout into 8-entry arrays: it must refuse before, not overflow them.
    x = torch.ones((1,) * ndim, dtype=torch.float32)
    calls = (lambda: torch.ops.smx.softmax(x, -1), lambda: torch.ops.smx.softmax_backward(x, x, -1),
             lambda: torch.ops.smx.logsumexp(x, -1))
    for call in calls:
        with pytest.raises(ValueError, match=r"ndim \d+ out of range: a tensor has 1 to 8 dimensions"):
            call()


def test_float64_to_float32_through_the_op_is_computed_in_float64(rng):
    x = random_tensor(rng, (3, 40), "float64")
    y = torch.ops.smx.softmax(x, -1, torch.float32)
    assert y.dtype == torch.float32
    torch.testing.assert_close(y, torch.softmax(x, -1).to(torch.float32), rtol=1e-5, atol=1e-7)


def test_what_the_binding_refuses_before_libsmx(rng):
    x = random_tensor(rng, (3, 4), "float32")
    with pytest.raises(IndexError, match=r"range of \[-2, 1\], but got 2"):
        smx.softmax(x, 2)
    with pytest.raises(TypeError, match="got dtype int64"):
        smx.softmax(torch.ones(3, dtype=torch.int64))
    with pytest.raises(TypeError, match="got dtype int8"):
        smx.softmax(x, dtype="int8")
    with pytest.raises(TypeError, match="out is a numpy array but x is a torch array"):
        smx.softmax(x, out=np.empty((3, 4), np.float32))
    with pytest.raises(ValueError, match=r"out has shape \(4, 3\) but x has shape \(3, 4\)"):
        smx.softmax(x, out=torch.empty(4, 3))
    with pytest.raises(TypeError, match="dtype=float16 disagrees with out's dtype float32"):
        smx.softmax(x, dtype="float16", out=torch.empty(3, 4))
    with pytest.raises(NotImplementedError, match="SparseCPU"):  # no kernel for that backend: torch's error
        smx.softmax(x.to_sparse())
    with pytest.raises(ValueError, match="is not a CUDA stream handle"):
        smx.softmax(x, stream=-1)  # checked on the CPU too, then ignored


def test_dtype_spellings_and_stream_on_the_cpu(rng):
    x = random_tensor(rng, (2, 50), "float32")
    for spelling in ("float16", np.float16, torch.float16):
        y = smx.log_softmax(x, dtype=spelling)
        assert y.dtype == torch.float16
        assert_matches_reference(y, x, -1, True)
    assert_matches_reference(smx.softmax(x, stream=0), x, -1, False)


def test_repeated_problems_reuse_one_cached_descriptor(rng):
    x = random_tensor(rng, (7, 19), "float32")
    smx.softmax(x)
    hits, misses, _, handles = smx_torch._cache_info()
    for _ in range(3):
        smx.softmax(random_tensor(rng, (7, 19), "float32"))
    after = smx_torch._cache_info()
    assert (after[0] - hits, after[1] - misses, after[3]) == (3, 0, handles)
    smx.softmax(x, 0)  # another axis: another descriptor
    assert smx_torch._cache_info()[1] == misses + 1


NEEDS_BINDING = pytest.mark.skipif(smx_torch._binding is None, reason="the extension was built without the Python "
                                   "headers (or not at all), so it has no eager binding")


def test_the_extension_holds_the_eager_binding_where_the_python_headers_are():
    expected = smx_torch.backend() == "extension" and smx_torch._python_headers_found()
    assert (smx_torch._binding is not None) == expected


def with_special_rows(x):
    """x (2-d, at least 6 rows of 4+) with rows of NaN, +inf, all -inf, -inf among finite, huge and tiny values."""
    x = x.clone()
    x[0, 1], x[1, 2], x[2] = float("nan"), float("inf"), float("-inf")
    x[3, ::2] = float("-inf")
    x[4] *= 1e4
    x[5] *= 1e-4
    return x


def recording_mode(base, hook):
    """(a mode of class `base` whose `hook` records each function it sees by name, the list of names)."""
    seen = []

    def record(self, func, types, args=(), kwargs=None):
        seen.append(str(func))
        return func(*args, **(kwargs or {}))

    return type("Recorder", (base,), {hook: record})(), seen


class OperatorCalls:
    """Counts the torch.ops calls smx.softmax / log_softmax make, by standing in for them in smx.torch."""

    def __init__(self, monkeypatch):
        self.count = 0
        for name in ("_softmax", "_softmax_out", "_log_softmax", "_log_softmax_out"):
            monkeypatch.setattr(smx_torch, name, self.counting(getattr(smx_torch, name)))

    def counting(self, operator):
        def call(*args, **kwargs):
            self.count += 1
            return operator(*args, **kwargs)
        return call


@NEEDS_BINDING
@pytest.mark.parametrize("log", MODES)
def test_eager_calls_take_the_binding_and_give_the_operators_results(rng, log, monkeypatch):
    calls = OperatorCalls(monkeypatch)
    base = with_special_rows(random_tensor(rng, (6, 70), "float32"))
    for name, x in {**layouts(rng), "special": base, "special_transposed": base.t().contiguous().t()}.items():
        for dim in range(-max(x.dim(), 1), max(x.dim(), 1)):
            for dtype in (None, torch.bfloat16):
                expected = op(log)(x, dim, dtype)
                got = wrapper(log)(x, dim, dtype=dtype)
                assert (got.dtype, got.stride()) == (expected.dtype, expected.stride()), name
                assert torch.equal(got.nan_to_num(7.0), expected.nan_to_num(7.0)), name  # bit for bit, NaN where NaN
                assert torch.equal(got.isnan(), expected.isnan()), name
                out = torch.full_like(expected, float("nan"))
                assert wrapper(log)(x, dim, dtype=dtype, out=out) is out
                assert torch.equal(out.nan_to_num(7.0), expected.nan_to_num(7.0)), name
    assert_matches_reference(wrapper(log)(base, 1), base, 1, log)
    assert calls.count == 0, "an eager call went through torch.ops instead of the binding"


@NEEDS_BINDING
def test_the_binding_keeps_autograd_and_the_operators_refusals(rng, monkeypatch):
    calls = OperatorCalls(monkeypatch)
    x = random_tensor(rng, (4, 9), "float64").requires_grad_()
    assert torch.autograd.gradcheck(lambda t: smx.log_softmax(t, 0), (x,))
    with pytest.raises(RuntimeError, match="does not support automatic differentiation"):
        smx.softmax(x, out=torch.empty(4, 9, dtype=torch.float64))
    with pytest.raises(IndexError, match=r"range of \[-2, 1\], but got -3"):
        smx.softmax(x, -3)
    with pytest.raises(smx.SmxValueError, match="BAD_PARAM_OVERLAP"):
        smx.softmax(x.detach(), out=torch.empty(1, 9, dtype=torch.float64).expand(4, 9))
    assert calls.count == 0
    with pytest.raises(TypeError, match=r"expected 4 arguments: \(x, dim, dtype, out\)"):
        smx_torch._binding.softmax(x, -1, None)


@NEEDS_BINDING
def test_dispatch_modes_the_profiler_and_make_fx_see_the_binding_s_calls(rng):
    from torch.fx.experimental.proxy_tensor import make_fx
    from torch.utils._python_dispatch import TorchDispatchMode

    x, out = random_tensor(rng, (3, 5), "float32"), torch.empty(3, 5)
    mode, seen = recording_mode(TorchDispatchMode, "__torch_dispatch__")
    with mode:
        smx.softmax(x)
        smx.log_softmax(x, 0, out=out)
    smx_calls = [name for name in seen if name.startswith("smx.")]
    assert smx_calls == ["smx.softmax.default", "smx.log_softmax.out"]
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profile:
        smx.softmax(x)
    assert "smx::softmax" in [event.name for event in profile.events()]
    graph = make_fx(lambda t: smx.softmax(t, -1) * 2)(x)
    assert [str(node.target) for node in graph.graph.nodes if node.op == "call_function"] == [
        "smx.softmax.default", "aten.mul.Tensor"]


def test_calls_the_binding_would_not_see_as_torch_ops_does_go_through_torch_ops(rng, monkeypatch):
    # A __torch_function__ mode, a tensor subclass, a dim that is not an int: torch.ops' own handling.
    from torch.overrides import TorchFunctionMode
    calls = OperatorCalls(monkeypatch)

    class Subclass(torch.Tensor):
        pass

    x = random_tensor(rng, (3, 5), "float32")
    mode, seen = recording_mode(TorchFunctionMode, "__torch_function__")
    with mode:
        smx.softmax(x)
    assert seen == ["smx.softmax.default"]
    y = smx.softmax(x.as_subclass(Subclass), out=torch.empty(3, 5).as_subclass(Subclass))
    assert type(y) is Subclass  # torch.Tensor's own __torch_function__ keeps the subclass
    assert_matches_reference(smx.log_softmax(x, np.int64(0)), x, 0, True)
    assert calls.count == 3


@NEEDS_BINDING
@pytest.mark.parametrize("log", MODES)
def test_the_binding_declines_what_torch_ops_must_handle_without_writing(rng, log):
    # Its contract with smx's Python (docs/python.md, "Eager calls: the binding"): NotImplemented and nothing
    # written for a call torch.ops must handle, the result for the others (nn.Parameter too, as torch's own
    # bindings take it).
    from torch.overrides import TorchFunctionMode

    class Subclass(torch.Tensor):
        pass

    call = smx_torch._binding.log_softmax if log else smx_torch._binding.softmax
    x = random_tensor(rng, (3, 5), "float32")
    out = torch.full((3, 5), float("nan"))
    declined = {"a subclass x": (x.as_subclass(Subclass), -1, None, None),
                "a subclass out": (x, -1, None, out.as_subclass(Subclass)),
                "a NumPy integer dim": (x, np.int64(-1), None, out), "a bool dim": (x, True, None, out),
                "a dtype name": (x, -1, "float32", out), "a NumPy x": (x.numpy(), -1, None, None),
                "a NumPy out": (x, -1, None, out.numpy())}
    for case, arguments in declined.items():
        assert call(*arguments) is NotImplemented, case
    mode, seen = recording_mode(TorchFunctionMode, "__torch_function__")
    with mode:
        assert call(x, -1, None, out) is NotImplemented
    assert seen == [] and torch.isnan(out).all(), "a declined call ran something"
    assert call(x, -1, None, out) is out
    assert_matches_reference(out, x, -1, log)
    y = call(torch.nn.Parameter(x.double()), 0, torch.float32, None)
    assert type(y) is torch.Tensor and y.dtype == torch.float32 and y.grad_fn is not None
    assert_matches_reference(y, x.double(), 0, log)


def smx_torch_functions_run(call):
    """The names of smx.torch's Python functions that call() runs (sys.setprofile sees every Python call)."""
    names = []

    def record(frame, event, _arg):
        if event == "call" and frame.f_globals.get("__name__") == "smx.torch":
            names.append(frame.f_code.co_name)

    sys.setprofile(record)
    try:
        call()
    finally:
        sys.setprofile(None)
    return names


@NEEDS_BINDING
@pytest.mark.parametrize("log", MODES)
def test_smx_softmax_takes_the_binding_first_only_without_stream_or_options(rng, log):
    # The eager fast path: a plain call, with out= or requires_grad (the operator's Autograd kernel records
    # it), goes from smx.softmax straight to the binding, running none of smx.torch's Python; stream=, options,
    # a subclass, a __torch_function__ mode or a NumPy dim go through smx.torch, options to their own operator.
    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode

    class Subclass(torch.Tensor):
        pass

    name, torch_function = ("log_softmax", torch.log_softmax) if log else ("softmax", torch.softmax)
    function = wrapper(log)
    x, out = random_tensor(rng, (4, 9), "float64"), torch.full((4, 9), float("nan"), dtype=torch.float64)
    leaf, torch_leaf = x.clone().requires_grad_(), x.clone().requires_grad_()
    upstream = random_tensor(rng, (4, 9), "float64")
    taken = {"plain": lambda: function(x), "out=": lambda: function(x, out=out),
             "requires_grad": lambda: function(leaf, 0).backward(upstream),
             "masked_rows 'nan' as another str": lambda: function(x, masked_rows="".join(["na", "n"]))}
    function(x)  # a process's first call on a tensor imports smx.torch's calls into smx
    for case, call in taken.items():
        assert smx_torch_functions_run(call) == [], case
    torch_function(torch_leaf, 0).backward(upstream)
    torch.testing.assert_close(leaf.grad, torch_leaf.grad, rtol=1e-12, atol=1e-12)
    assert_matches_reference(out, x, -1, log)
    option_sets = [{"scale": 0.5}, {"masked_rows": "zero"}, {"batch_invariant": True}, {"causal": 8},
                   {"mask": torch.ones(9, dtype=torch.bool)}]

    def under_a_function_mode():
        with recording_mode(TorchFunctionMode, "__torch_function__")[0]:
            return function(x)

    not_taken = {"stream=": lambda: function(x, stream=0), "subclass": lambda: function(x.as_subclass(Subclass)),
                 "NumPy dim": lambda: function(x, np.int64(1)), "function mode": under_a_function_mode}
    not_taken.update({f"{options}": lambda options=options: function(x, **options) for options in option_sets})
    dispatch_mode, seen = recording_mode(TorchDispatchMode, "__torch_dispatch__")
    with dispatch_mode:
        for case, call in not_taken.items():
            ran = smx_torch_functions_run(call)
            assert name in ran or f"{name}_with_options" in ran, case
    assert [call for call in seen if call.startswith("smx.")] == [f"smx.{name}.default"] * 4 + [
        f"smx.{name}_with_options.default"] * 5
    assert_matches_reference(function(x, scale=0.5), x * 0.5, -1, log)


def test_python_headers_are_looked_for_where_torch_s_builder_and_g_plus_plus_look(tmp_path, monkeypatch):
    import sysconfig
    monkeypatch.setattr(sysconfig, "get_path", lambda name, *args, **kwargs: str(tmp_path / "none"))
    monkeypatch.delenv("CPATH", raising=False)
    monkeypatch.delenv("CPLUS_INCLUDE_PATH", raising=False)
    assert not smx_torch._python_headers_found()
    (tmp_path / "include").mkdir()
    (tmp_path / "include" / "Python.h").write_text("")
    folders = ["", str(tmp_path / "elsewhere"), str(tmp_path / "include")]
    monkeypatch.setenv("CPLUS_INCLUDE_PATH", os.pathsep.join(folders))
    assert smx_torch._python_headers_found()
    monkeypatch.delenv("CPLUS_INCLUDE_PATH")
    monkeypatch.setattr(sysconfig, "get_path", lambda name, *args, **kwargs: str(tmp_path / "include"))
    assert smx_torch._python_headers_found()


def test_the_extension_without_the_python_headers_runs_without_the_binding():
    # Where Python.h is missing (some Python installs lack it), the extension is built without the binding
    # and smx.softmax calls torch.ops.smx; a process of its own (the kernels are registered once per process).
    script = ("import sysconfig\n"
              "found = sysconfig.get_path\n"
              "sysconfig.get_path = lambda name, *args, **kwargs: ('/nonexistent' if name == 'include' else "
              "found(name, *args, **kwargs))\n"
              "import warnings, torch, smx\n"
              "with warnings.catch_warnings():\n"
              "    warnings.simplefilter('error', RuntimeWarning)  # the build must succeed\n"
              "    import smx.torch\n"
              "assert smx.torch.backend() == 'extension' and smx.torch._binding is None\n"
              "x = torch.randn(5, 33, dtype=torch.float64) * 3\n"
              "torch.testing.assert_close(smx.softmax(x, 0), torch.softmax(x, 0), rtol=1e-12, atol=0)\n"
              "out = torch.empty(5, 33)\n"
              "smx.log_softmax(x, out=out)\n"
              "torch.testing.assert_close(out, torch.log_softmax(x, -1).float(), rtol=1e-5, atol=1e-6)\n"
              "print('ok')\n")
    environment = dict(os.environ, PYTHONPATH=str(PACKAGE_ROOT), SMX_LIBRARY=smx.library_path())
    for variable in ("CPATH", "CPLUS_INCLUDE_PATH"):  # folders g++ would find Python.h in
        environment.pop(variable, None)
    done = subprocess.run([sys.executable, "-c", script], env=environment, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]


def test_numpy_arrays_keep_the_ctypes_path_with_torch_imported(rng):
    x = (rng.standard_normal((5, 40)) * 3).astype(np.float32)
    y = smx.softmax(x)
    assert isinstance(y, np.ndarray) and y.dtype == np.float32
    assert_close_values(y.astype(np.float64), "float32", reference(x, -1, False), False)


def test_the_python_kernels_where_the_extension_is_not_used(tmp_path):
    # SMX_TORCH_EXTENSION=0: the fallback for machines without a compiler, in a process of its own (the
    # operators' kernels are registered once per process).
    script = tmp_path / "python_kernels.py"
    script.write_text(
        "import warnings\n"
        "import numpy as np, torch, smx\n"
        "with warnings.catch_warnings():\n"
        "    warnings.simplefilter('error')  # nothing tried, so nothing to warn about\n"
        "    import smx.torch\n"
        "assert smx.torch.backend() == 'python' and smx.torch.extension_path is None\n"
        "x = torch.from_numpy(np.random.default_rng().standard_normal((6, 30)) * 3)\n"
        "expected = torch.log_softmax(x, 0)\n"
        "torch.testing.assert_close(smx.log_softmax(x, 0), expected, rtol=1e-12, atol=0)\n"
        "out = torch.empty(6, 30, dtype=torch.float32)\n"
        "smx.softmax(x.float(), out=out)\n"
        "torch.testing.assert_close(out, torch.softmax(x.float(), -1), rtol=1e-5, atol=1e-7)\n"
        "assert torch.autograd.gradcheck(lambda t: smx.softmax(t, 1), (x.clone().requires_grad_(),))\n"
        "compiled = torch.compile(lambda t: smx.softmax(t, -1) * 2, backend='aot_eager', fullgraph=True)\n"
        "torch.testing.assert_close(compiled(x), torch.softmax(x, -1) * 2)\n"
        "torch.library.opcheck(torch.ops.smx.softmax.default, (x.clone().requires_grad_(), 1, None))\n"
        "try:\n"
        "    smx.softmax(x, dtype=torch.float32)\n"
        "except smx.SmxTypeError:\n"
        "    pass\n"
        "print('ok')\n")
    assert_runs_with_the_python_kernels(script)


def assert_runs_with_the_python_kernels(script):
    """Runs a script file with SMX_TORCH_EXTENSION=0 in a process of its own (the operators' kernels are
    registered once per process) and checks it printed just 'ok'."""
    environment = dict(os.environ, PYTHONPATH=str(PACKAGE_ROOT), SMX_LIBRARY=smx.library_path(),
                       SMX_TORCH_EXTENSION="0")
    done = subprocess.run([sys.executable, str(script)], env=environment, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]


def test_host_overhead_bench_runs_on_cpu_tensors_and_writes_json(tmp_path):
    # The CI smoke run of bench/host_overhead.py (its figures matter on a GPU, where the lead runs it).
    report = tmp_path / "host_overhead.json"
    environment = dict(os.environ, SMX_LIBRARY=smx.library_path())
    done = subprocess.run([sys.executable, str(PACKAGE_ROOT.parent / "bench" / "host_overhead.py"), "--device", "cpu",
                           "--shape", "4x8", "--shape", "2x3x4:float16", "--op", "softmax", "--op", "log_softmax",
                           "--calls", "5", "--samples", "2",
                           "--warm-up", "1", "--json", str(report)],
                          env=environment, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    written = json.loads(report.read_text())
    assert written["device"] == "cpu" and written["torch"] == torch.__version__ and written["commit"]
    assert written["binding"] == (smx_torch._binding is not None)
    expected = set()
    for name in ("softmax", "log_softmax"):
        callers = {f"torch.{name}", f"torch.ops.smx.{name}", f"smx.{name}", f"smx.torch.{name}", "smx ctypes path"}
        callers |= {"smx binding"} if smx_torch._binding is not None else set()
        expected |= {(name, caller, variant, shape) for caller in callers for variant in ("plain", "out=")
                     for shape in ((4, 8), (2, 3, 4))}
    assert {(row["op"], row["caller"], row["variant"], tuple(row["shape"])) for row in written["results"]} == expected
    assert all(row["host_us"] > 0 and len(row["host_samples_us"]) == 2 for row in written["results"])
    assert all(row["plan"].startswith("cpu ") for row in written["results"])
