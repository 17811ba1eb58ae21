"""smx.logsumexp, smx.log_softmax_gather and smx.cross_entropy on CUDA tensors: against PyTorch's composed
equivalents in float64, special rows, the documented device behaviour of indices and targets out of range (+inf,
NaN, never a fault; check=True), the fused gradient (also in place), CUDA graph capture, torch.compile with
inductor, and a language-model vocabulary.

Skipped, with the reason, where PyTorch has no CUDA device or libsmx was built without its CUDA backend."""

import pytest

import smx
from test_cuda import _UNAVAILABLE, generator, random_tensor  # noqa: F401

torch = pytest.importorskip("torch", reason="the operators need PyTorch")
import torch.nn.functional as F  # noqa: E402
import smx.torch as smx_torch  # noqa: E402,F401

from test_torch import assert_compiled_matches_eager  # noqa: E402
from test_torch_logprobs import assert_close, special_rows, statistics  # noqa: E402

pytestmark = [pytest.mark.cuda, pytest.mark.skipif(_UNAVAILABLE is not None, reason=str(_UNAVAILABLE))]

NAMES = ["float16", "bfloat16", "float32", "float64"]


def on_cpu(t):
    torch.cuda.synchronize()
    return t.detach().cpu()


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("shape, dim", [((64, 1000), -1), ((8, 32000), -1), ((3, 50257), 1), ((16, 300, 9), 1),
                                        ((4, 5, 6), 0)])
def test_logsumexp_and_gather_match_torch(generator, name, shape, dim):
    x = special_rows(random_tensor(generator, shape, name), dim)
    expected = torch.logsumexp(x.double(), dim).cpu()
    got = smx.logsumexp(x, dim)
    assert got.dtype == statistics(x.dtype) and got.is_cuda
    assert_close(on_cpu(got), expected)
    index_shape = list(shape)
    index_shape[dim] = 5
    index = torch.randint(0, shape[dim], index_shape, device="cuda", generator=generator)
    gathered = smx.log_softmax_gather(x, index, dim)
    assert_close(on_cpu(gathered), torch.log_softmax(x.double(), dim).gather(dim, index).cpu())


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("label_smoothing", [0.0, 0.1])
def test_cross_entropy_and_its_fused_gradient_match_torch(generator, name, reduction, label_smoothing):
    logits = random_tensor(generator, (256, 32000), name)
    target = torch.randint(0, 32000, (256,), device="cuda", generator=generator)
    target[::7] = -100
    leaf = logits.clone().requires_grad_()
    loss = smx.cross_entropy(leaf, target, reduction=reduction, label_smoothing=label_smoothing)
    loss.sum().backward()
    expected_leaf = logits.double().requires_grad_()
    expected = F.cross_entropy(expected_leaf, target, reduction=reduction, label_smoothing=label_smoothing)
    expected.sum().backward()
    assert_close(on_cpu(loss), expected.detach().cpu())
    tolerance = {"float16": 2e-3, "bfloat16": 8e-3, "float32": 1e-5, "float64": 1e-12}[name]
    torch.testing.assert_close(on_cpu(leaf.grad).double(), expected_leaf.grad.cpu(), rtol=tolerance,
                               atol=tolerance * float(expected_leaf.grad.abs().max()))


def test_cross_entropy_special_rows_and_inplace_backward(generator):
    logits = special_rows(random_tensor(generator, (64, 4096), "bfloat16"), 1)
    target = torch.randint(0, 4096, (64,), device="cuda", generator=generator)
    loss, lse = smx.cross_entropy(logits, target, reduction="none", return_lse=True)
    assert_close(on_cpu(loss), F.cross_entropy(logits.double(), target, reduction="none").cpu())
    assert_close(on_cpu(lse), torch.logsumexp(logits.double(), 1).cpu())
    base = random_tensor(generator, (32, 50257), "bfloat16")
    grads = []
    for inplace in (False, True):
        leaf = base.clone().requires_grad_()
        smx.cross_entropy(leaf * 1.0, target[:32], inplace_backward=inplace).backward()
        grads.append(on_cpu(leaf.grad))
    torch.testing.assert_close(grads[0], grads[1], rtol=0, atol=0)


def test_indices_and_targets_out_of_range_on_the_device_never_fault(generator):
    x = random_tensor(generator, (4, 100), "float32")
    index = torch.tensor([[0, 100], [-1, 5], [2 ** 40, 3], [99, 99]], device="cuda")
    gathered = on_cpu(smx.log_softmax_gather(x, index))
    assert torch.isposinf(gathered).tolist() == [[False, True], [True, False], [True, False], [False, False]]
    with pytest.raises(IndexError, match="check=True"):
        smx.log_softmax_gather(x, index, check=True)
    target = torch.tensor([3, 100, -100, -5], device="cuda")
    leaf = x.clone().requires_grad_()
    loss = smx.cross_entropy(leaf, target, reduction="none")
    loss.sum().backward()
    assert torch.isnan(on_cpu(loss)).tolist() == [False, True, False, True]
    grad = on_cpu(leaf.grad)
    assert torch.isnan(grad[1]).all() and torch.isnan(grad[3]).all() and (grad[2] == 0).all()
    assert torch.isfinite(grad[0]).all()


def test_a_cuda_graph_captures_the_fused_cross_entropy(generator):
    logits = random_tensor(generator, (128, 32000), "bfloat16")
    target = torch.randint(0, 32000, (128,), device="cuda", generator=generator)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up: descriptors made, kernels loaded
        torch.ops.smx.cross_entropy_with_grad(logits, target, -1, -100, 0.0, "mean")
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        loss, lse, dlogits = torch.ops.smx.cross_entropy_with_grad(logits, target, -1, -100, 0.0, "mean")
    logits.copy_(random_tensor(generator, (128, 32000), "bfloat16"))
    graph.replay()
    expected_leaf = logits.double().requires_grad_()
    expected = F.cross_entropy(expected_leaf, target)
    expected.backward()
    assert_close(on_cpu(loss), expected.detach().cpu())
    torch.testing.assert_close(on_cpu(dlogits).double(), expected_leaf.grad.cpu(), rtol=8e-3,
                               atol=8e-3 * float(expected_leaf.grad.abs().max()))


def test_torch_compile_with_inductor_matches_eager(generator):
    logits = random_tensor(generator, (64, 8192), "float32")
    target = torch.randint(0, 8192, (64,), device="cuda", generator=generator)

    def step(x):
        return smx.cross_entropy(x * 0.5, target, label_smoothing=0.1) + smx.logsumexp(x, 0).mean()

    assert_compiled_matches_eager(step, logits, loss_tolerance=(1e-5, 1e-5), grad_tolerance=(1e-5, 1e-7))
