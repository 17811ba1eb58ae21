"""smx.logsumexp, smx.log_softmax_gather and smx.cross_entropy on NumPy arrays (the ctypes binding, CPU backend)
against float64 NumPy references written from the definitions, with special rows (NaN, +-inf, all -inf), every
dtype, dims and layouts; and what the binding refuses."""

import numpy as np
import pytest

import smx
from conftest import HALF_AND_SINGLE, assert_close_values, numpy_dtype, random_array, reference

DTYPES = HALF_AND_SINGLE + ["float64"]


def result_name(x):
    return "float64" if np.dtype(x.dtype) == np.float64 else "float32"


def with_special_rows(x, axis):
    """x with rows along `axis` replaced by NaN, +inf, all -inf, some -inf and one finite among -inf rows,
    each next to an ordinary row."""
    x = np.moveaxis(x.copy(), axis, -1)
    rows = x.reshape(-1, x.shape[-1])
    specials = [lambda r: r.__setitem__(len(r) // 2, np.nan), lambda r: r.__setitem__(0, np.inf),
                lambda r: r.fill(-np.inf), lambda r: r.__setitem__(slice(None, None, 2), -np.inf),
                lambda r: (r.fill(-np.inf), r.__setitem__(-1, 1.5))]
    for k, row in enumerate(range(1, len(rows), 2)):
        specials[k % len(specials)](rows[row])
    return np.moveaxis(rows.reshape(x.shape), -1, axis)


def reference_logsumexp(x, axis, keepdims=False):
    """torch.logsumexp's algorithm in float64: the max (NaN-blind), set to 0 where infinite, then added back."""
    x = np.asarray(x).astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        top = np.max(np.where(np.isnan(x), -np.inf, x), axis=axis, keepdims=True) if x.shape[axis] else np.zeros(
            x.shape[:axis] + (1,) + x.shape[axis + 1:])
        top = np.where(np.isfinite(top), top, 0.0)
        result = np.log(np.sum(np.exp(x - top), axis=axis, keepdims=True)) + top
    return result if keepdims else np.squeeze(result, axis)


def reference_cross_entropy(logits, target, axis, ignore_index=-100, label_smoothing=0.0, reduction="mean"):
    """F.cross_entropy with class indices, composed as PyTorch composes it, in float64; targets out of range
    give NaN rows (torch raises)."""
    logp = reference(logits, axis, True)
    classes = logits.shape[axis]
    counted = target != ignore_index
    inside = (target >= 0) & (target < classes)
    picked = np.take_along_axis(logp, np.expand_dims(np.where(inside, target, 0), axis), axis).squeeze(axis)
    with np.errstate(invalid="ignore"):
        rows = np.where(inside, -picked, np.nan)
        if label_smoothing > 0:
            rows = (1 - label_smoothing) * rows + label_smoothing / classes * -logp.sum(axis)
    rows = np.where(counted, rows, 0.0)
    if reduction == "none":
        return rows
    with np.errstate(invalid="ignore", divide="ignore"):
        return rows.sum() / (counted.sum() if reduction == "mean" else 1)


# ---- logsumexp ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", DTYPES)
def test_logsumexp_matches_the_reference_on_every_dim_with_special_rows(rng, name):
    x = random_array(rng, (6, 5, 14), name)
    for dim in range(-3, 3):
        special = with_special_rows(x, dim)
        for keepdim in (False, True):
            got = smx.logsumexp(special, dim, keepdim=keepdim)
            assert got.dtype == np.dtype(result_name(special))
            assert_close_values(got.astype(np.float64), result_name(special),
                                reference_logsumexp(special, dim % 3, keepdim), True)


def test_logsumexp_of_transposed_and_strided_views_and_into_out(rng):
    x = random_array(rng, (40, 30), "float32")
    for view, dim in ((x.T, 0), (x[::3, ::-2], 1), (x[:, 1:], 0)):
        assert_close_values(smx.logsumexp(view, dim).astype(np.float64), "float32", reference_logsumexp(view, dim),
                            True)
    out = np.full(80, np.nan, np.float32)[::2]  # a strided out
    assert smx.logsumexp(x, 1, out=out) is out
    assert_close_values(out.astype(np.float64), "float32", reference_logsumexp(x, 1), True)


def test_logsumexp_of_empty_axes_scalars_and_size_one_axes(rng):
    assert np.all(smx.logsumexp(np.zeros((3, 0), np.float32), 1) == -np.inf)
    assert smx.logsumexp(np.zeros((0, 4), np.float32), 1).shape == (0,)
    scalar = np.float64(2.5)
    assert smx.logsumexp(scalar).shape == () and smx.logsumexp(scalar) == 2.5
    column = random_array(rng, (7, 1), "float16")
    np.testing.assert_array_equal(smx.logsumexp(column, 1), column[:, 0].astype(np.float32))


def test_logsumexp_refuses_an_out_of_the_wrong_dtype_or_shape(rng):
    x = random_array(rng, (4, 5), "float16")
    with pytest.raises(TypeError, match="out has dtype float16 but must be float32"):
        smx.logsumexp(x, out=np.empty(4, np.float16))
    with pytest.raises(ValueError, match=r"out has shape \(5,\) but must have shape \(4,\)"):
        smx.logsumexp(x, out=np.empty(5, np.float32))
    with pytest.raises(TypeError, match="got dtype int32"):
        smx.logsumexp(np.ones((2, 3), np.int32))


# ---- log_softmax_gather ---------------------------------------------------------------------------------

@pytest.mark.parametrize("name", DTYPES)
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_log_softmax_gather_matches_the_reference(rng, name, index_dtype):
    x = random_array(rng, (6, 9, 11), name)
    for dim in (-1, 0, 1):
        special = with_special_rows(x, dim)
        for k in (1, 4, 20):  # repeats, and more than the axis holds
            shape = list(special.shape)
            shape[dim] = k
            index = rng.integers(0, special.shape[dim], size=shape).astype(index_dtype)
            got = smx.log_softmax_gather(special, index, dim)
            assert got.shape == index.shape and got.dtype == np.dtype(result_name(special))
            expected = np.take_along_axis(reference(special, dim, True), index, dim)
            assert_close_values(got.astype(np.float64), result_name(special), expected, True)


def test_log_softmax_gather_refuses_host_indices_out_of_range_before_the_call(rng):
    x = random_array(rng, (3, 5), "float32")
    for bad in (5, -1, 2 ** 40):
        index = np.array([[0], [bad], [1]], np.int64)
        with pytest.raises(IndexError, match=f"index {bad} is out of bounds for dimension 1 with size 5"):
            smx.log_softmax_gather(x, index, 1)
    with pytest.raises(TypeError, match="int32 and int64 indices; got dtype float32"):
        smx.log_softmax_gather(x, np.zeros((3, 1), np.float32))
    with pytest.raises(ValueError, match="index has shape"):
        smx.log_softmax_gather(x, np.zeros((2, 1), np.int64))
    assert smx.log_softmax_gather(x, np.zeros((3, 0), np.int64)).shape == (3, 0)


# ---- cross_entropy --------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", DTYPES)
@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("label_smoothing", [0.0, 0.15])
def test_cross_entropy_matches_the_reference(rng, name, reduction, label_smoothing):
    logits = random_array(rng, (12, 30), name)
    target = rng.integers(0, 30, size=12)
    target[::4] = -100
    got = smx.cross_entropy(logits, target, reduction=reduction, label_smoothing=label_smoothing)
    expected = reference_cross_entropy(logits, target, 1, -100, label_smoothing, reduction)
    assert got.dtype == np.dtype(result_name(logits)) and got.shape == np.shape(expected)
    assert_close_values(np.asarray(got, np.float64), result_name(logits), np.asarray(expected), True)


def test_cross_entropy_with_classes_on_another_dim_special_rows_and_lse(rng):
    logits = with_special_rows(random_array(rng, (4, 10, 6), "float32"), 1)
    target = rng.integers(0, 10, size=(4, 6)).astype(np.int32)
    target[0, 0] = 7  # ignore_index inside [0, classes)
    loss, lse = smx.cross_entropy(logits, target, dim=1, ignore_index=7, reduction="none", return_lse=True)
    assert_close_values(loss.astype(np.float64), "float32",
                        reference_cross_entropy(logits, target, 1, 7, 0.0, "none"), True)
    assert_close_values(lse.astype(np.float64), "float32", reference_logsumexp(logits, 1), True)


def test_cross_entropy_with_every_target_ignored(rng):
    logits = random_array(rng, (5, 8), "float64")
    target = np.full(5, -100)
    assert np.isnan(smx.cross_entropy(logits, target))
    assert smx.cross_entropy(logits, target, reduction="sum") == 0.0
    np.testing.assert_array_equal(smx.cross_entropy(logits, target, reduction="none"), np.zeros(5))


def test_cross_entropy_refuses_what_it_does_not_support(rng):
    logits, target = random_array(rng, (3, 4), "float32"), np.array([0, 1, 2])
    with pytest.raises(IndexError, match="Target 4 is out of bounds"):
        smx.cross_entropy(logits, np.array([0, 4, 1]))
    with pytest.raises(NotImplementedError, match="class weights"):
        smx.cross_entropy(logits, target, weight=np.ones(4, np.float32))
    with pytest.raises(NotImplementedError, match="probability targets"):
        smx.cross_entropy(logits, np.full((3, 4), 0.25, np.float32))
    with pytest.raises(ValueError, match="elementwise is not a valid value for reduction"):
        smx.cross_entropy(logits, target, reduction="elementwise")
    with pytest.raises(ValueError, match="label_smoothing must be between 0.0 and 1.0"):
        smx.cross_entropy(logits, target, label_smoothing=1.5)
    with pytest.raises(TypeError, match="ignore_index must be an int"):
        smx.cross_entropy(logits, target, ignore_index=1.0)
    with pytest.raises(ValueError, match=r"target has shape \(4,\)"):
        smx.cross_entropy(logits, np.array([0, 1, 2, 3]))
    with pytest.raises(TypeError, match=r"int32 and int64 for indices\); got dtype int16"):
        smx.cross_entropy(logits, target.astype(np.int16))



def test_the_descriptors_are_cached_per_problem(rng):
    smx._cache_clear()
    x = random_array(rng, (4, 9), "float32")
    for _ in range(3):
        smx.logsumexp(x)
        smx.cross_entropy(x, np.arange(4))
    info = smx._cache_info()
    assert (info.misses, info.hits) == (2, 4)
