"""smx.softmax / smx.log_softmax options (scale, mask, causal, masked_rows, batch_invariant): NumPy arrays against
a float64 NumPy reference written from the documented semantics, torch tensors against PyTorch's composed
equivalents ((x * scale).softmax, x.masked_fill(~m, -inf).softmax, (x + mask).softmax, SDPA-style causal
masks, _safe_softmax) and their gradients, the options operators under opcheck and torch.compile, the
keywords' refusals, and on CUDA (when present) the same comparisons plus batch invariance bit for bit."""

import numpy as np
import pytest

import smx
from conftest import HALF_AND_SINGLE, assert_close_values, numpy_dtype, random_array

MODES = [pytest.param(False, id="softmax"), pytest.param(True, id="log_softmax")]
FLOATING = ["float16", "float32", "float64"]


def run(x, dim, log, **kwargs):
    return (smx.log_softmax if log else smx.softmax)(x, dim, **kwargs)


def options_reference(x, dim, log, scale=None, mask=None, causal=None, masked_rows="nan", batch_invariant=False):
    """y = softmax(scale * x + additive mask) over the kept elements (bool mask True, j <= i + causal), 0 (log:
    -inf) at the others, which are never read; a row with nothing to normalize NaN or, with 'zero', 0 (-inf).
    batch_invariant changes no value."""
    shape = np.shape(x)
    z = np.moveaxis(np.asarray(x, np.float64), dim, -1)  # rows along the last axis
    if scale is not None:  # per-row factors have x's shape without dim: the moved z's but for its last axis
        z = z * (np.expand_dims(np.asarray(scale, np.float64), -1) if np.ndim(scale) else scale)
    keep = np.ones(z.shape, bool)
    if mask is not None:
        mask = np.moveaxis(np.broadcast_to(np.asarray(mask), shape), dim, -1)
        if mask.dtype == np.bool_:
            keep &= mask
        else:
            z = z + mask.astype(np.float64)
    if causal is not None:
        keep &= np.tril(np.ones(z.shape[-2:], bool), causal)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        kept = np.where(keep, z, -np.inf)  # an excluded element is not read
        row_max = np.max(kept, axis=-1, keepdims=True)  # NaN propagates
        shifted = kept - row_max
        exps = np.exp(shifted)
        sums = np.sum(exps, axis=-1, keepdims=True)
        y = shifted - np.log(sums) if log else exps / sums
        if masked_rows == "zero":
            empty = np.broadcast_to(row_max == -np.inf, y.shape)
            y = np.where(empty, -np.inf if log else 0.0, y)
    return np.moveaxis(y, -1, dim)


def check(y, expected, log):
    assert_close_values(np.asarray(y).astype(np.float64), np.dtype(y.dtype).name, expected, log)


# ---- NumPy ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("log", MODES)
@pytest.mark.parametrize("x_name", HALF_AND_SINGLE + ["float64"])
def test_each_option_alone_matches_the_reference(rng, x_name, log):
    x = random_array(rng, (4, 6, 33), x_name)
    x[0, 0, 3] = np.nan
    x[1, 2, :] = -np.inf
    keep = rng.random((6, 33)) < 0.7
    additive = np.where(rng.random((33,)) < 0.2, -np.inf, rng.standard_normal(33)).astype(np.float16)
    per_row = rng.standard_normal((4, 6)).astype(np.float32)
    for options in (dict(scale=0.37), dict(scale=per_row), dict(mask=keep), dict(mask=additive), dict(causal=0),
                    dict(causal=-2), dict(causal=33 - 6), dict(masked_rows="zero"), dict(batch_invariant=True)):
        expected = options_reference(x, -1, log, **options)
        check(run(x, -1, log, **options), expected, log)


@pytest.mark.parametrize("log", MODES)
def test_options_combined_on_strided_views_and_other_axes(rng, log):
    base = random_array(rng, (5, 8, 40), "float32")
    x = base[:, ::2, ::-1]  # (5, 4, 40), strided and reversed
    keep = rng.random((4, 1)) < 0.8          # broadcast along the axis of dim 1 below
    per_row = rng.standard_normal((5, 40)).astype(np.float64)  # converted to float32
    for dim in (1, -1):
        options = dict(scale=per_row if dim == 1 else 2.5, mask=keep if dim == 1 else rng.random(40) < 0.6,
                       masked_rows="zero")
        scale = per_row.astype(np.float32) if dim == 1 else 2.5
        expected = options_reference(x, dim, log, scale=scale, mask=options["mask"], masked_rows="zero")
        out = np.full(x.shape, np.nan, np.float32)
        assert run(x, dim, log, out=out, **options) is out
        check(out, expected, log)
    causal = dict(causal=3, mask=(rng.random((40,)) < 0.5), scale=-1.5)
    check(run(x, -1, log, **causal), options_reference(x, -1, log, **causal), log)


@pytest.mark.parametrize("log", MODES)
def test_excluded_nan_is_not_read_and_empty_rows_follow_masked_rows(rng, log):
    x = random_array(rng, (3, 5), "float32")
    x[0, 4] = np.nan            # excluded by the mask: row 0 stays finite
    keep = np.array([[True, True, True, True, False], [False] * 5, [True, False, True, False, True]])
    nan_rows = run(x, -1, log, mask=keep)
    assert np.all(np.isfinite(nan_rows[0, :4])) and np.all(np.isnan(nan_rows[1]))
    zero_rows = run(x, -1, log, mask=keep, masked_rows="zero")
    assert np.all(zero_rows[1] == (-np.inf if log else 0.0))
    check(zero_rows, options_reference(x, -1, log, mask=keep, masked_rows="zero"), log)


def test_scale_zero_gives_a_uniform_row_over_the_kept_elements(rng):
    x = random_array(rng, (2, 6), "float64")
    keep = np.array([True, False, True, True, False, True])
    y = smx.softmax(x, scale=0.0, mask=keep)
    assert np.array_equal(y, np.where(keep, 0.25, 0.0)[None].repeat(2, 0))


def test_plans_name_the_options_and_no_options_is_the_plain_plan(rng):
    x = random_array(rng, (3, 17), "float32")
    assert smx.plan(x) == smx.plan(x, scale=1.0) == smx.plan(x, masked_rows="nan") == "cpu reference layout=rows threads=1"
    assert smx.plan(x, scale=0.5, causal=1, batch_invariant=True) == (
        "cpu reference layout=rows threads=1 options=scale(0.5),causal(1),batch_invariant")


def test_what_the_keywords_refuse(rng):
    x = random_array(rng, (3, 4), "float32")
    with pytest.raises(ValueError, match="masked_rows must be 'nan' or 'zero'"):
        smx.softmax(x, masked_rows="none")
    with pytest.raises(TypeError, match="causal must be None or an int offset"):
        smx.softmax(x, causal=True)
    with pytest.raises(TypeError, match="causal must be None or an int offset"):
        smx.softmax(x, causal=1.5)
    with pytest.raises(TypeError, match="batch_invariant must be a bool"):
        smx.softmax(x, batch_invariant=1)
    with pytest.raises(TypeError, match="per-row scale is a floating array"):
        smx.softmax(x, scale=np.ones(3, np.int32))
    with pytest.raises(smx.SmxValueError, match="scale shape"):
        smx.softmax(x, scale=np.ones(4, np.float32))
    with pytest.raises(smx.SmxValueError, match="does not broadcast"):
        smx.softmax(x, mask=np.ones(3, bool))
    with pytest.raises(smx.SmxValueError, match="causal needs the softmax along the last dim"):
        smx.softmax(x, 0, causal=0)
    with pytest.raises(TypeError, match="got dtype int64"):
        smx.softmax(x, mask=np.ones(4, np.int64))
    with pytest.raises(TypeError):
        smx.softmax(np.ones((2, 3), bool))  # a bool x is never computed on


# ---- torch on the CPU -------------------------------------------------------------------------------------------

torch = pytest.importorskip("torch", reason="the composed equivalents need PyTorch")
import smx.torch  # noqa: E402,F401  (defines torch.ops.smx)

INF = float("inf")


def composed(x, dim, log, scale=None, mask=None, causal=None, masked_rows="nan"):
    """PyTorch's own composition of the options, in float64."""
    z = x.double()
    if isinstance(scale, torch.Tensor):
        z = z * scale.double().unsqueeze(dim)
    elif scale is not None:
        z = z * scale
    if mask is not None and mask.dtype == torch.bool:
        z = z.masked_fill(~mask, -INF)
    elif mask is not None:
        z = z + mask.double()
    if causal is not None:
        z = z.masked_fill(~torch.ones(z.shape[-2:], dtype=torch.bool).tril(causal), -INF)
    if masked_rows == "zero" and hasattr(torch.ops.aten, "_safe_softmax") and not log:
        return torch.ops.aten._safe_softmax(z, dim)
    y = z.log_softmax(dim) if log else z.softmax(dim)
    if masked_rows == "zero":
        empty = (z == -INF).all(dim, keepdim=True).expand_as(y)
        y = y.masked_fill(empty, -INF if log else 0.0)
    return y


def check_torch(y, expected, log):
    assert_close_values(y.detach().double().numpy(), str(y.dtype).replace("torch.", ""),
                        expected.detach().numpy(), log)


@pytest.mark.parametrize("log", MODES)
@pytest.mark.parametrize("name", ["float16", "bfloat16", "float32", "float64"])
def test_torch_matches_the_composed_equivalents(rng, name, log):
    dtype = getattr(torch, name)
    x = torch.from_numpy(rng.standard_normal((2, 3, 7, 9)) * 3).to(dtype)
    keep = torch.from_numpy(rng.random((7, 9)) < 0.7)
    additive = torch.from_numpy(np.where(rng.random((3, 1, 9)) < 0.2, -np.inf, rng.standard_normal((3, 1, 9))))
    per_row = torch.from_numpy(rng.standard_normal((2, 3, 7))).float()
    cases = [dict(scale=0.125), dict(scale=per_row), dict(mask=keep), dict(mask=additive.to(dtype)),
             dict(causal=0), dict(causal=9 - 7), dict(causal=-1, masked_rows="zero"),
             dict(mask=keep, scale=2.0, causal=1, masked_rows="zero"), dict(batch_invariant=True)]
    for options in cases:
        y = run(x, -1, log, **options)
        assert y.dtype == dtype and y.shape == x.shape
        reference_options = {key: value for key, value in options.items() if key != "batch_invariant"}
        check_torch(y, composed(x, -1, log, **reference_options), log)
        with_dtype = run(x, -1, log, dtype=torch.float32, **options)
        assert with_dtype.dtype == torch.float32
        check_torch(with_dtype, composed(x, -1, log, **reference_options), log)


@pytest.mark.parametrize("log", MODES)
def test_torch_gradients_match_the_composed_gradients(rng, log):
    x = torch.from_numpy(rng.standard_normal((3, 5, 8))).requires_grad_()
    keep = torch.from_numpy(rng.random((5, 8)) < 0.7)
    keep[:, 0] = True
    per_row = torch.from_numpy(rng.standard_normal((3, 5))).float()
    for options in (dict(scale=0.7), dict(scale=per_row), dict(mask=keep), dict(causal=2),
                    dict(mask=torch.from_numpy(rng.standard_normal(8)).float(), scale=-1.2),
                    dict(mask=keep, scale=per_row, causal=1)):
        y = run(x, -1, log, **options)
        expected = composed(x, -1, log, **options)
        kept = torch.isfinite(expected) if log else expected != 0
        # Upstream gradients 0 at excluded elements: there PyTorch's composed log-softmax adds them to the row's sum
        # (smx's gradient is the forward's own, in which they are constants; smx.h).
        grad = torch.from_numpy(rng.standard_normal(x.shape)).masked_fill(~kept, 0)
        (got,) = torch.autograd.grad(y, x, grad)
        (want,) = torch.autograd.grad(expected, x, grad)
        torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-12)


def test_torch_log_softmax_gradient_ignores_upstream_gradients_at_excluded_elements(rng):
    x = torch.from_numpy(rng.standard_normal((2, 6))).requires_grad_()
    keep = torch.tensor([True, True, False, True, False, True])
    y = smx.log_softmax(x, mask=keep)
    grad = torch.from_numpy(rng.standard_normal((2, 6)))
    (got,) = torch.autograd.grad(y, x, grad)
    kept_grad = grad.masked_fill(~keep, 0)
    want = (kept_grad - y.detach().exp() * kept_grad.sum(-1, keepdim=True)).masked_fill(~keep, 0)
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


def test_torch_masked_rows_zero_gradient_is_zero_in_empty_rows():
    x = torch.zeros(2, 4, dtype=torch.float64, requires_grad=True)
    keep = torch.tensor([[False] * 4, [True, False, True, True]])
    for log in (False, True):
        y = run(x, -1, log, mask=keep, masked_rows="zero")
        (got,) = torch.autograd.grad(y, x, torch.ones(2, 4, dtype=torch.float64))
        assert torch.all(got[0] == 0)


def test_options_operators_pass_opcheck(rng):
    x = torch.from_numpy(rng.standard_normal((3, 4, 6))).float()
    keep = torch.from_numpy(rng.random((4, 6)) < 0.8)
    scale = torch.from_numpy(rng.standard_normal((3, 4))).float()
    for name in ("softmax_with_options", "log_softmax_with_options"):
        operator = getattr(torch.ops.smx, name).default
        torch.library.opcheck(operator, (x, -1, None, None, scale, keep, 1, "zero", False))
        torch.library.opcheck(operator, (x.double().requires_grad_(), -1, None, 0.5, None, None, None, "nan", True))


def test_torch_compile_fullgraph_traces_the_options(rng):
    x = torch.from_numpy(rng.standard_normal((4, 10))).float()
    keep = torch.from_numpy(rng.random(10) < 0.7)

    def masked(t, m):
        return smx.softmax(t, mask=m, scale=0.5, masked_rows="zero") * 2

    compiled = torch.compile(masked, backend="aot_eager", fullgraph=True)
    torch.testing.assert_close(compiled(x, keep), masked(x, keep))


def test_torch_keywords_refuse_foreign_masks_and_bad_values(rng):
    x = torch.ones(2, 3)
    with pytest.raises(TypeError, match="pass a torch tensor"):
        smx.softmax(x, mask=np.ones(3, bool))
    with pytest.raises(ValueError, match="masked_rows"):
        smx.softmax(x, masked_rows="zeros")
    with pytest.raises(smx.SmxValueError, match="does not broadcast"):
        smx.softmax(x, mask=torch.ones(2, dtype=torch.bool))


# ---- CUDA ---------------------------------------------------------------------------------------------------------

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@cuda
@pytest.mark.parametrize("log", MODES)
@pytest.mark.parametrize("name", ["float16", "bfloat16", "float32", "float64"])
def test_cuda_tensors_match_the_composed_equivalents(rng, name, log):
    dtype = getattr(torch, name)
    x = (torch.from_numpy(rng.standard_normal((2, 4, 9, 300))) * 3).to(dtype)
    keep = torch.from_numpy(rng.random((9, 300)) < 0.7)
    additive = torch.from_numpy(np.where(rng.random(300) < 0.2, -np.inf, rng.standard_normal(300))).to(dtype)
    per_row = torch.from_numpy(rng.standard_normal((2, 4, 9))).float()
    for options in (dict(scale=0.125), dict(scale=per_row), dict(mask=keep), dict(mask=additive), dict(causal=291),
                    dict(causal=-3, masked_rows="zero"), dict(mask=keep, scale=per_row, causal=200)):
        on_device = {key: value.cuda() if isinstance(value, torch.Tensor) else value for key, value in options.items()}
        y = run(x.cuda(), -1, log, **on_device)
        check_torch(y.cpu(), composed(x, -1, log, **options), log)


@cuda
def test_cuda_batch_invariance_is_bitwise_across_row_counts_and_positions(rng):
    n = 3000
    probe = torch.from_numpy(rng.standard_normal(n)).float().cuda()
    keep = torch.from_numpy(rng.random(n) < 0.9).cuda()
    results = []
    for rows in (1, 7, 64, 4096):
        for position in {0, rows // 2, rows - 1}:
            x = torch.randn(rows, n, device="cuda")
            x[position] = probe
            y = smx.softmax(x, mask=keep, batch_invariant=True)
            results.append(y[position].clone())
    for result in results[1:]:
        assert torch.equal(result, results[0])
