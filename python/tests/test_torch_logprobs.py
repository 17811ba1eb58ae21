"""torch.ops.smx.logsumexp, log_softmax_gather and cross_entropy on CPU tensors, and smx.* routing torch tensors
to them: against PyTorch's composed equivalents (torch.logsumexp, log_softmax(...).gather, F.cross_entropy with
reduction, ignore_index and label_smoothing) computed in float64, registration, fake kernels and opcheck,
gradcheck in float64, inplace_backward, torch.compile(fullgraph=True), and the Python kernels."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import smx
from test_torch import assert_compiled_matches_eager

torch = pytest.importorskip("torch", reason="the operators need PyTorch")
import torch.nn.functional as F  # noqa: E402
import smx.torch as smx_torch  # noqa: E402,F401  (defines torch.ops.smx)

PACKAGE_ROOT = Path(smx.__file__).resolve().parent.parent
DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
RTOL = {torch.float32: 1e-5, torch.float64: 1e-12}
OPERATORS = ["logsumexp", "log_softmax_gather", "cross_entropy", "cross_entropy_with_grad", "cross_entropy_with_grad_"]


def random_tensor(rng, shape, dtype):
    return torch.from_numpy(rng.standard_normal(shape) * 3).to(dtype)


def special_rows(x, dim):
    """x with rows along dim holding NaN, +inf, all -inf and some -inf, each beside an ordinary row."""
    moved = x.movedim(dim, -1).clone()
    rows = moved.reshape(-1, moved.shape[-1])
    for k, row in enumerate(range(1, rows.shape[0], 2)):
        kind = k % 4
        if kind == 0:
            rows[row, rows.shape[1] // 2] = float("nan")
        elif kind == 1:
            rows[row, 0] = float("inf")
        elif kind == 2:
            rows[row] = float("-inf")
        else:
            rows[row, ::2] = float("-inf")
    return rows.reshape(moved.shape).movedim(-1, dim)


def assert_close(got, expected):
    """got (float32 or float64) against a float64 expectation: NaN and infinities exactly, else within
    rtol * (|expected| + 1), the log-probabilities' scale."""
    expected = expected.to(torch.float64)
    assert got.shape == expected.shape, (got.shape, expected.shape)
    torch.testing.assert_close(got.to(torch.float64), expected, rtol=RTOL[got.dtype], atol=RTOL[got.dtype],
                               equal_nan=True)


def statistics(dtype):
    return torch.float64 if dtype == torch.float64 else torch.float32


@pytest.mark.parametrize("name", OPERATORS)
def test_every_operator_has_cpu_cuda_and_fake_kernels_and_is_pt2_compliant(name):
    for key in ("CPU", "CUDA", "Meta"):
        assert torch._C._dispatch_has_kernel_for_dispatch_key(f"smx::{name}", key), f"smx::{name} has no {key} kernel"
    assert torch.Tag.pt2_compliant_tag in getattr(torch.ops.smx, name).default.tags


@pytest.mark.parametrize("dtype", DTYPES)
def test_logsumexp_matches_torch_on_every_dim_keepdim_and_special_rows(rng, dtype):
    x = random_tensor(rng, (5, 6, 13), dtype)
    for dim in range(-3, 3):
        special = special_rows(x, dim)
        for keepdim in (False, True):
            got = smx.logsumexp(special, dim, keepdim=keepdim)
            assert got.dtype == statistics(dtype)
            assert_close(got, torch.logsumexp(special.double(), dim, keepdim=keepdim))
    out = torch.empty(13, 10, dtype=statistics(dtype))[:, ::2].t()  # a strided, transposed out
    assert smx.logsumexp(x, 1, out=out) is out
    assert_close(out, torch.logsumexp(x.double(), 1))


@pytest.mark.parametrize("dtype", DTYPES)
def test_log_softmax_gather_matches_log_softmax_then_gather(rng, dtype):
    x = random_tensor(rng, (4, 7, 9), dtype)
    for dim in (-1, 0, 1):
        special = special_rows(x, dim)
        for k in (1, 3, 12):
            shape = list(x.shape)
            shape[dim] = k
            index = torch.from_numpy(rng.integers(0, x.shape[dim], size=shape))
            got = smx.log_softmax_gather(special, index, dim)
            assert got.dtype == statistics(dtype)
            assert_close(got, torch.log_softmax(special.double(), dim).gather(dim, index))
            assert_close(smx.log_softmax_gather(special.transpose(0, 2), index.int().transpose(0, 2), 2 - dim % 3),
                         torch.log_softmax(special.double(), dim).gather(dim, index).transpose(0, 2))


def test_log_softmax_gather_refuses_indices_out_of_range_on_the_host(rng):
    x = random_tensor(rng, (3, 5), torch.float32)
    for call in (smx.log_softmax_gather, lambda *a: torch.ops.smx.log_softmax_gather(*a)):
        with pytest.raises(IndexError, match="index -1 is out of bounds for dimension 1 with size 5"):
            call(x, torch.tensor([[0], [-1], [2]]), 1)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("label_smoothing", [0.0, 0.1, 1.0])
def test_cross_entropy_matches_f_cross_entropy(rng, dtype, reduction, label_smoothing):
    logits = random_tensor(rng, (16, 33), dtype)
    target = torch.from_numpy(rng.integers(0, 33, size=16))
    target[::5] = -100
    got = smx.cross_entropy(logits, target, reduction=reduction, label_smoothing=label_smoothing)
    assert got.dtype == statistics(dtype)
    assert_close(got, F.cross_entropy(logits.double(), target, reduction=reduction, label_smoothing=label_smoothing))


def test_cross_entropy_with_classes_on_dim_one_special_rows_ignore_index_and_lse(rng):
    logits = special_rows(random_tensor(rng, (4, 10, 6), torch.float32), 1)
    target = torch.from_numpy(rng.integers(0, 10, size=(4, 6))).int()
    target[1, 2] = 3
    loss, lse = smx.cross_entropy(logits, target, dim=1, ignore_index=3, reduction="none", return_lse=True)
    assert_close(loss, F.cross_entropy(logits.double(), target.long(), ignore_index=3, reduction="none"))
    assert_close(lse, torch.logsumexp(logits.double(), 1))
    # every target ignored: mean NaN, as torch
    assert torch.isnan(smx.cross_entropy(logits, torch.full((4, 6), -100), dim=1))


def test_cross_entropy_refuses_targets_out_of_range_weights_and_probabilities(rng):
    logits = random_tensor(rng, (3, 4), torch.float32)
    with pytest.raises(IndexError, match="Target 4 is out of bounds"):
        smx.cross_entropy(logits, torch.tensor([0, 4, -100]))
    with pytest.raises(NotImplementedError, match="probability targets"):
        smx.cross_entropy(logits, torch.full((3, 4), 0.25))
    with pytest.raises(NotImplementedError, match="class weights"):
        smx.cross_entropy(logits, torch.tensor([0, 1, 2]), weight=torch.ones(4))
    with pytest.raises(ValueError, match="is not a valid value for reduction"):
        smx.cross_entropy(logits, torch.tensor([0, 1, 2]), reduction="batchmean")


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("label_smoothing", [0.0, 0.3])
def test_gradcheck_of_the_fused_cross_entropy_in_float64(rng, reduction, label_smoothing):
    logits = random_tensor(rng, (5, 7), torch.float64)
    target = torch.tensor([0, 6, -100, 3, 3])
    for view, dim, rows in ((logits, -1, target), (logits.t(), 0, target)):
        argument = view.detach().requires_grad_()
        assert torch.autograd.gradcheck(
            lambda t: smx.cross_entropy(t, rows, dim=dim, reduction=reduction, label_smoothing=label_smoothing),
            (argument,))


def test_fused_gradient_matches_torch_s_and_inplace_backward_gives_the_same(rng):
    for dtype in (torch.float32, torch.bfloat16):
        base = random_tensor(rng, (12, 50), torch.float32)
        target = torch.from_numpy(rng.integers(0, 50, size=12))
        target[3] = -100
        grads = []
        for inplace in (False, True):
            leaf = base.clone().to(dtype).requires_grad_()
            logits = leaf * 1.0  # not a leaf: inplace_backward overwrites it
            loss = smx.cross_entropy(logits, target, label_smoothing=0.05, inplace_backward=inplace)
            assert "CrossEntropyFunction" in type(loss.grad_fn).__name__  # the fused path, dlogits from forward
            if inplace:  # the logits now hold dlogits: rows of gradients sum to 0
                assert float(logits.detach().float().sum(1).abs().max()) < 1e-2
            (loss * 3.0).backward()
            grads.append(leaf.grad)
        expected_leaf = base.clone().double().requires_grad_()
        (F.cross_entropy(expected_leaf, target, label_smoothing=0.05) * 3.0).backward()
        tolerance = 1e-6 if dtype == torch.float32 else 4e-3
        for grad in grads:
            assert grad.dtype == dtype
            torch.testing.assert_close(grad.double(), expected_leaf.grad, rtol=tolerance, atol=tolerance)


def test_inplace_backward_marks_the_logits_written(rng):
    leaf = random_tensor(rng, (4, 9), torch.float32).requires_grad_()
    logits = leaf.exp()  # exp saves its output for its own backward: overwriting it must be refused there
    loss = smx.cross_entropy(logits, torch.tensor([1, 2, 3, 4]), inplace_backward=True)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


def test_gradcheck_of_the_operators_called_directly(rng):
    x = random_tensor(rng, (4, 6), torch.float64).requires_grad_()
    target = torch.tensor([1, -100, 5, 0])
    assert torch.autograd.gradcheck(lambda t: torch.ops.smx.logsumexp(t, 0, True), (x,))
    assert torch.autograd.gradcheck(lambda t: smx.log_softmax_gather(t, torch.tensor([[0, 0], [5, 1], [2, 3], [4, 4]])),
                                    (x,))
    for reduction in ("none", "mean"):
        assert torch.autograd.gradcheck(
            lambda t: torch.ops.smx.cross_entropy(t, target, -1, -100, 0.2, reduction)[0], (x,))


def test_fake_kernels_give_the_real_results_metadata(rng):
    from torch._subclasses.fake_tensor import FakeTensorMode
    x = random_tensor(rng, (3, 5, 4), torch.bfloat16)
    target = torch.zeros(3, 4, dtype=torch.int64)
    real = [torch.ops.smx.logsumexp(x, 1, True), torch.ops.smx.log_softmax_gather(x, target.unsqueeze(1), 1),
            *torch.ops.smx.cross_entropy(x, target, 1, -100, 0.0, "none"),
            *torch.ops.smx.cross_entropy_with_grad(x, target, 1, -100, 0.0, "sum")]
    with FakeTensorMode() as mode:
        fx, ft = mode.from_tensor(x), mode.from_tensor(target)
        fake = [torch.ops.smx.logsumexp(fx, 1, True), torch.ops.smx.log_softmax_gather(fx, ft.unsqueeze(1), 1),
                *torch.ops.smx.cross_entropy(fx, ft, 1, -100, 0.0, "none"),
                *torch.ops.smx.cross_entropy_with_grad(fx, ft, 1, -100, 0.0, "sum")]
        for got, want in zip(fake, real):
            assert (got.shape, got.dtype, got.stride()) == (want.shape, want.dtype, want.stride())
        with pytest.raises(ValueError, match="target has shape"):
            torch.ops.smx.cross_entropy(fx, ft[:2], 1)
        with pytest.raises(TypeError, match="int32 and int64 indices"):
            torch.ops.smx.log_softmax_gather(fx, mode.from_tensor(torch.zeros(3, 1, 4)), 1)


def test_opcheck_passes_for_every_operator(rng):
    x = random_tensor(rng, (6, 11), torch.float32)
    target = torch.tensor([0, 3, -100, 10, 2, 2])
    index = torch.tensor([[0, 10], [3, 3], [1, 2], [9, 0], [5, 6], [7, 7]])
    grad_x = x.double().requires_grad_()
    torch.library.opcheck(torch.ops.smx.logsumexp.default, (grad_x, 0, False))
    torch.library.opcheck(torch.ops.smx.logsumexp.out, (x, 1, True), {"y": torch.empty(6, 1)})
    torch.library.opcheck(torch.ops.smx.log_softmax_gather.default, (grad_x, index, 1))
    torch.library.opcheck(torch.ops.smx.cross_entropy.default, (grad_x, target, -1, -100, 0.1, "mean"))
    torch.library.opcheck(torch.ops.smx.cross_entropy_with_grad.default, (x, target, -1, -100, 0.0, "none"))
    torch.library.opcheck(torch.ops.smx.cross_entropy_with_grad_.default, (x.clone(), target, -1, -100, 0.0, "sum"))


def test_torch_compile_fullgraph_traces_every_call_and_matches_eager(rng):
    x = random_tensor(rng, (8, 40), torch.float32)
    target = torch.from_numpy(rng.integers(0, 40, size=8))
    index = torch.from_numpy(rng.integers(0, 40, size=(8, 3)))

    def everything(x):
        lse = smx.logsumexp(x * 2)
        gathered = smx.log_softmax_gather(x, index)
        loss, row_lse = smx.cross_entropy(x, target, label_smoothing=0.1, return_lse=True)
        return lse.sum() + gathered.mean() + loss + row_lse.mean()

    compiled = torch.compile(everything, fullgraph=True, backend="aot_eager")
    torch.testing.assert_close(compiled(x), everything(x), rtol=1e-6, atol=1e-6)

    def training_loss(x):
        return smx.cross_entropy(x * 1.0, target, reduction="sum") + smx.logsumexp(x, 0).sum()

    assert_compiled_matches_eager(training_loss, x, loss_tolerance=(1e-6, 1e-6), grad_tolerance=(1e-6, 1e-6))


def test_the_python_kernels_compute_the_same(tmp_path):
    # SMX_TORCH_EXTENSION=0: the operators over the ctypes binding, in a process of their own.
    script = tmp_path / "python_kernels.py"
    script.write_text(
        "import numpy as np, torch, torch.nn.functional as F, smx, smx.torch\n"
        "assert smx.torch.backend() == 'python'\n"
        "x = torch.from_numpy(np.random.default_rng().standard_normal((6, 30)) * 3)\n"
        "t = torch.tensor([0, 29, -100, 4, 4, 7])\n"
        "torch.testing.assert_close(smx.logsumexp(x, 0), torch.logsumexp(x, 0), rtol=1e-12, atol=1e-12)\n"
        "idx = torch.tensor([[1], [2], [3], [4], [5], [6]])\n"
        "torch.testing.assert_close(smx.log_softmax_gather(x, idx), torch.log_softmax(x, -1).gather(-1, idx))\n"
        "leaf = x.clone().requires_grad_()\n"
        "smx.cross_entropy(leaf, t, label_smoothing=0.2).backward()\n"
        "expected = x.clone().requires_grad_()\n"
        "F.cross_entropy(expected, t, label_smoothing=0.2).backward()\n"
        "torch.testing.assert_close(leaf.grad, expected.grad, rtol=1e-12, atol=1e-12)\n"
        "print('ok')\n")
    environment = dict(os.environ, PYTHONPATH=str(PACKAGE_ROOT), SMX_LIBRARY=smx.library_path(),
                       SMX_TORCH_EXTENSION="0")
    done = subprocess.run([sys.executable, str(script)], env=environment, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]
