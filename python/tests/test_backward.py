"""smx.softmax_backward and smx.log_softmax_backward on NumPy arrays (the ctypes path, CPU backend): values
against the float64 formulas of conftest.backward_reference, dtypes, dim, out=, in place, layouts, special
values and the errors the binding and libsmx raise. Torch tensors: test_torch_backward.py."""

import numpy as np
import pytest

import smx
from conftest import (HALF_AND_SINGLE, assert_close_backward, backward_reference, numpy_dtype, random_array,
                      reference)

MODES = [pytest.param(False, id="softmax"), pytest.param(True, id="log_softmax")]
ALL_DTYPES = HALF_AND_SINGLE + ["float64"]


def backward(log):
    return smx.log_softmax_backward if log else smx.softmax_backward


def forward_output(rng, shape, dim, log, name):
    """What the forward gives for fresh random x, rounded to `name`: the output a backward is given."""
    return reference(rng.standard_normal(shape) * 3, dim, log).astype(numpy_dtype(name))


def check(got, grad_output, output, dim, log, name=None):
    expected, scale = backward_reference(grad_output, output, dim, log)
    assert_close_backward(got, name or np.dtype(got.dtype).name, expected, scale)


@pytest.mark.parametrize("log", MODES)
@pytest.mark.parametrize("dx_name", ALL_DTYPES)
@pytest.mark.parametrize("y_name", ALL_DTYPES)
def test_every_dtype_pair_on_every_dim(rng, y_name, dx_name, log):
    for dim in (-3, -2, 0, 1, 2):
        y = forward_output(rng, (3, 4, 33), dim, log, y_name)
        dy = random_array(rng, y.shape, y_name)
        dx = backward(log)(dy, y, dim, dtype=numpy_dtype(dx_name))
        assert isinstance(dx, np.ndarray) and dx.dtype == numpy_dtype(dx_name) and dx.shape == y.shape
        check(dx, dy, y, dim, log)


@pytest.mark.parametrize("log", MODES)
def test_default_dtype_is_output_s_and_the_result_takes_output_s_dim_order(rng, log):
    y = forward_output(rng, (6, 9), 0, log, "float32").T  # F-ordered
    dy = random_array(rng, (9, 6), "float32")
    dx = backward(log)(dy, y, 1)
    assert dx.dtype == np.float32 and dx.flags.f_contiguous and not dx.flags.c_contiguous
    check(dx, dy, y, 1, log)


@pytest.mark.parametrize("log", MODES)
def test_strided_and_broadcast_inputs_are_read_in_place(rng, log):
    y = forward_output(rng, (8, 12), 1, log, "float64")
    dy = random_array(rng, (8, 24), "float64")[::-1, ::2]  # reversed rows, every other column
    check(backward(log)(dy, y[:, ::-1], 1), dy, y[:, ::-1], 1, log)
    row = random_array(rng, (12,), "float64")
    broadcast_dy = np.broadcast_to(row, (8, 12))  # zero stride across rows, read-only
    check(backward(log)(broadcast_dy, y, -1), broadcast_dy, y, -1, log)
    broadcast_y = np.broadcast_to(y[:1], (8, 12))
    check(backward(log)(dy, broadcast_y, 1), dy, broadcast_y, 1, log)


@pytest.mark.parametrize("log", MODES)
@pytest.mark.parametrize("name", ALL_DTYPES)
def test_out_is_written_and_returned_and_may_be_grad_output_itself(rng, name, log):
    y = forward_output(rng, (5, 40), 1, log, name)
    dy = random_array(rng, y.shape, name)
    out = np.full(y.shape, np.nan, numpy_dtype("float32"))
    assert backward(log)(dy, y, 1, out=out) is out
    check(out, dy, y, 1, log)
    expected, scale = backward_reference(dy, y, 1, log)
    assert backward(log)(dy, y, 1, out=dy) is dy  # in place
    assert_close_backward(dy, name, expected, scale)


def test_in_place_on_a_transposed_negative_stride_view(rng):
    y = forward_output(rng, (7, 10), 0, False, "float32")
    dy = random_array(rng, (10, 7), "float32").T[::-1]
    y = y[::-1]
    expected, scale = backward_reference(dy, y, 0, False)
    smx.softmax_backward(dy, y, 0, out=dy)
    assert_close_backward(dy, "float32", expected, scale)


@pytest.mark.parametrize("log", MODES)
def test_special_values_follow_pytorch_s_formulas(rng, log):
    inf, nan = np.inf, np.nan
    y = forward_output(rng, (6, 5), 1, log, "float32")
    dy = random_array(rng, (6, 5), "float32")
    dy[1, 2] = nan           # the row's sum is NaN: every element
    y[2, 3] = nan            # softmax: every element (sum(dy * y)); log-softmax: that element only
    dy[3, 0] = inf           # an infinite sum: the others -inf, the element itself NaN (inf - inf)
    y[4, 1] = -inf if log else 0.0  # log: exp(-inf) = 0 gives dx = dy there; softmax: a zero y gives 0
    dy[5, 0], dy[5, 4] = inf, -inf  # inf - inf in the sum
    dx = backward(log)(dy, y, 1)
    assert np.isnan(dx[1]).all() and np.isnan(dx[5]).all()
    assert np.array_equal(np.isnan(dx[2]), np.arange(5) == 3) if log else np.isnan(dx[2]).all()
    assert np.isnan(dx[3, 0]) and (dx[3, 1:] == -inf).all()
    assert dx[4, 1] == (dy[4, 1] if log else 0.0) and np.isfinite(dx[4]).all()
    check(dx, dy, y, 1, log)


@pytest.mark.parametrize("log", MODES)
def test_axis_of_size_one_zero_dim_arrays_and_scalars_give_zero(rng, log):
    y = np.full((4, 1, 3), 0.0 if log else 1.0, np.float32)  # the forward's output along a size-1 axis
    assert np.array_equal(backward(log)(random_array(rng, y.shape, "float32"), y, 1), np.zeros(y.shape, np.float32))
    for dim in (0, -1):
        dx = backward(log)(np.array(2.5, np.float64), np.array(0.0 if log else 1.0), dim)
        assert isinstance(dx, np.ndarray) and dx.shape == () and dx == 0.0
    dx = backward(log)(np.float32(-1.5), np.float32(0.0 if log else 1.0))
    assert dx.shape == () and dx.dtype == np.float32 and dx == 0.0


@pytest.mark.parametrize("shape", [(0,), (0, 5), (3, 0), (2, 0, 4)])
def test_zero_size_arrays_succeed(shape):
    for dim in range(len(shape)):
        dx = smx.log_softmax_backward(np.empty(shape, np.float32), np.empty(shape, np.float32), dim, dtype="float16")
        assert dx.shape == shape and dx.dtype == np.float16


def test_the_gradient_matches_central_differences_of_smx_s_own_forward(rng):
    # In float64 the backward is the derivative of the forward: sum(dy * f(x)) moved along one x element.
    x = rng.standard_normal((3, 6))
    dy = rng.standard_normal((3, 6))
    step = 1e-6
    for log, forward in ((False, smx.softmax), (True, smx.log_softmax)):
        dx = backward(log)(dy, forward(x, 1), 1)
        for index in np.ndindex(x.shape):
            moved_up, moved_down = x.copy(), x.copy()
            moved_up[index] += step
            moved_down[index] -= step
            difference = (np.sum(dy * forward(moved_up, 1)) - np.sum(dy * forward(moved_down, 1))) / (2 * step)
            assert abs(dx[index] - difference) <= 1e-7 * (1 + abs(difference)), (log, index)


def test_repeated_problems_reuse_one_cached_descriptor(rng):
    y = forward_output(rng, (7, 19), 1, False, "float32")
    smx.softmax_backward(random_array(rng, y.shape, "float32"), y, 1)
    before = smx._cache_info()
    for _ in range(3):
        smx.softmax_backward(random_array(rng, y.shape, "float32"), y, 1)
    after = smx._cache_info()
    assert (after.hits - before.hits, after.misses - before.misses) == (3, 0)
    smx.log_softmax_backward(random_array(rng, y.shape, "float32"), y, 1)  # the other mode: its own descriptor
    assert smx._cache_info().misses == after.misses + 1


def test_what_the_binding_refuses_before_libsmx(rng):
    y = forward_output(rng, (3, 4), 1, False, "float32")
    dy = random_array(rng, (3, 4), "float32")
    with pytest.raises(IndexError, match=r"range of \[-2, 1\], but got 2"):
        smx.softmax_backward(dy, y, 2)
    with pytest.raises(TypeError, match="dim must be an int"):
        smx.softmax_backward(dy, y, True)
    with pytest.raises(ValueError, match=r"grad_output has shape \(4, 3\) but output has shape \(3, 4\)"):
        smx.softmax_backward(dy.T, y, 1)
    with pytest.raises(TypeError, match="output is a builtins array but grad_output is a numpy array"):
        smx.softmax_backward(dy, y.tolist(), 1)
    with pytest.raises(ValueError, match=r"out has shape \(4, 3\) but output has shape \(3, 4\)"):
        smx.softmax_backward(dy, y, 1, out=np.empty((4, 3), np.float32))
    with pytest.raises(TypeError, match="dtype=float16 disagrees with out's dtype float32"):
        smx.log_softmax_backward(dy, y, 1, dtype="float16", out=np.empty((3, 4), np.float32))
    with pytest.raises(ValueError, match="out= is read-only"):
        smx.softmax_backward(dy, y, 1, out=np.broadcast_to(np.float32(0), (3, 4)))
    with pytest.raises(TypeError, match="got dtype int64"):
        smx.softmax_backward(dy.astype(np.int64), y, 1)
    with pytest.raises(ValueError, match="is not a CUDA stream handle"):
        smx.softmax_backward(dy, y, 1, stream=-1)  # checked on the CPU too, then ignored
    assert smx.softmax_backward(dy, y, 1, stream=0).shape == (3, 4)


def test_what_libsmx_refuses_raises_smx_errors(rng):
    y = forward_output(rng, (3, 4), 1, True, "float32")
    dy = random_array(rng, (3, 4), "float32")
    with pytest.raises(smx.SmxTypeError, match="dy is f16 but y is f32") as raised:
        smx.log_softmax_backward(dy.astype(np.float16), y, 1)
    assert raised.value.status == 3003 and isinstance(raised.value, TypeError)
    with pytest.raises(smx.SmxValueError, match="may not share any memory") as raised:
        smx.log_softmax_backward(dy, y, 1, out=y)  # dx over y: y must survive the call
    assert raised.value.status == 2007
    buffer = np.zeros(13, np.float32)
    buffer[:12] = dy.ravel()
    with pytest.raises(smx.SmxValueError, match="in-place needs dx == dy"):
        smx.log_softmax_backward(buffer[:12].reshape(3, 4), y, 1, out=buffer[1:].reshape(3, 4))
    self_overlapping = np.lib.stride_tricks.as_strided(np.zeros(4, np.float32), (3, 4), (0, 4))  # writable
    with pytest.raises(smx.SmxValueError, match="dx overlaps itself"):
        smx.log_softmax_backward(dy, y, 1, out=self_overlapping)
