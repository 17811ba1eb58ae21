"""Shared test helpers: independent float64 NumPy references (softmax with PyTorch's special-value semantics,
and its backward) with per-dtype relative tolerances, fresh random data, poisoned outputs."""

import numpy as np
import pytest

try:
    import ml_dtypes
    BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
except ImportError:
    BFLOAT16 = None

# Relative tolerance per output dtype, as the C++ tests use (tests/support/reference.hpp).
RTOL = {"float64": 1e-12, "float32": 1e-5, "float16": 1e-3, "bfloat16": 8e-3}
# The absolute slack for softmax outputs that underflow, per output dtype (as tests/support/reference.cpp):
# the smallest normal, but for float16 its smallest subnormal (float16 keeps gradual underflow; its
# smallest normal, 6.1e-5, would excuse zeroing most outputs of a long row).
UNDERFLOW_SLACK = {"float64": 2.2250738585072014e-308, "float32": 1.1754943508222875e-38,
                   "float16": 2.0 ** -24, "bfloat16": 1.1754943508222875e-38}

HALF_AND_SINGLE = ["float16", "float32"] + (["bfloat16"] if BFLOAT16 is not None else [])


def numpy_dtype(name):
    """The NumPy dtype for one of the four names; skips the test for bfloat16 without ml_dtypes."""
    if name == "bfloat16":
        if BFLOAT16 is None:
            pytest.skip("bfloat16 on the CPU needs ml_dtypes")
        return BFLOAT16
    return np.dtype(name)


def reference(x, axis, log):
    """softmax / log-softmax of x along axis in float64, written from the definition:
    a row with +inf or NaN gives NaN, a row of all -inf gives NaN, -inf among finite values gives 0."""
    x = np.asarray(x).astype(np.float64)
    if x.ndim == 0:
        x = x.reshape(1)
        return reference(x, 0, log).reshape(())
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        shifted = x - np.max(x, axis=axis, keepdims=True)  # inf - inf and NaN give the NaN rows
        exps = np.exp(shifted)
        sums = np.sum(exps, axis=axis, keepdims=True)
        return shifted - np.log(sums) if log else exps / sums


def assert_close(y, expected, log):
    """y (any float dtype) against the float64 reference: NaN where NaN, equal infinities, elsewhere
    |y - ref| <= rtol*|ref| + UNDERFLOW_SLACK (softmax) or rtol*(|ref| + 1) (log-softmax)."""
    assert_close_values(np.asarray(y).astype(np.float64), np.dtype(y.dtype).name, expected, log)


def assert_close_values(got, name, expected, log):
    """assert_close for outputs already converted to float64; `name` is the output's dtype name."""
    assert got.shape == expected.shape
    nan_expected, nan_got = np.isnan(expected), np.isnan(got)
    assert np.array_equal(nan_expected, nan_got), f"NaN mismatch: got {got}, expected {expected}"
    inf_expected = np.isinf(expected)
    assert np.array_equal(got[inf_expected], expected[inf_expected]), "infinity mismatch"
    finite = ~nan_expected & ~inf_expected
    assert np.all(np.isfinite(got[finite])), f"non-finite output where the reference is finite: {got}"
    rtol = RTOL[name]
    error = np.abs(got[finite] - expected[finite])
    allowed = rtol * (np.abs(expected[finite]) + 1) if log else rtol * np.abs(expected[finite]) + UNDERFLOW_SLACK[name]
    if error.size:
        worst = int(np.argmax(error / allowed))
        assert error[worst] <= allowed[worst], (
            f"{name}: {int(np.sum(error > allowed))} of {error.size} out of tolerance; worst got "
            f"{got[finite][worst]}, expected {expected[finite][worst]}")


def backward_reference(grad_output, output, axis, log):
    """The backward from its definition in float64, (grad_input, scale): softmax y * (dy - sum(dy * y)),
    log-softmax dy - exp(y) * sum(dy); `scale` is each element's error scale, the magnitude its rounding errors
    are relative to (as tests/support/reference.hpp): softmax |y| * (|dy| + sum|dy * y|), log-softmax
    |dy| + exp(y) * sum|dy|. NaN and infinities propagate as IEEE arithmetic (and PyTorch's formulas) take them."""
    dy, y = (np.asarray(a).astype(np.float64) for a in (grad_output, output))
    if y.ndim == 0:
        dx, scale = backward_reference(dy.reshape(1), y.reshape(1), 0, log)
        return dx.reshape(()), scale.reshape(())
    with np.errstate(invalid="ignore", over="ignore"):
        if log:
            exp_y = np.exp(y)
            dx = dy - exp_y * np.sum(dy, axis=axis, keepdims=True)
            scale = np.abs(dy) + exp_y * np.sum(np.abs(dy), axis=axis, keepdims=True)
        else:
            dx = y * (dy - np.sum(dy * y, axis=axis, keepdims=True))
            scale = np.abs(y) * (np.abs(dy) + np.sum(np.abs(dy * y), axis=axis, keepdims=True))
    return dx, scale


def assert_close_backward(got, name, expected, scale, rtol=None):
    """A backward's result (converted to float64; `name` its dtype) against backward_reference: NaN where NaN,
    equal infinities, elsewhere |got - ref| <= rtol * scale + UNDERFLOW_SLACK, rtol the dtype's unless given."""
    got = np.asarray(got, dtype=np.float64)
    assert got.shape == expected.shape
    assert np.array_equal(np.isnan(got), np.isnan(expected)), f"NaN mismatch: got {got}, expected {expected}"
    infinite = np.isinf(expected)
    assert np.array_equal(got[infinite], expected[infinite]), "infinity mismatch"
    finite = np.isfinite(expected)
    assert np.all(np.isfinite(got[finite])), f"non-finite result where the reference is finite: {got}"
    error = np.abs(got[finite] - expected[finite])
    allowed = (RTOL[name] if rtol is None else rtol) * scale[finite] + UNDERFLOW_SLACK[name]
    if error.size:
        worst = int(np.argmax(error / allowed))
        assert error[worst] <= allowed[worst], (
            f"{name}: {int(np.sum(error > allowed))} of {error.size} out of tolerance; worst got "
            f"{got[finite][worst]}, expected {expected[finite][worst]}")


@pytest.fixture
def rng():
    """A generator seeded afresh for each test; the seed is printed so a failure can be replayed."""
    seed = np.random.SeedSequence().entropy
    print(f"numpy seed {seed}")
    return np.random.default_rng(seed)


def random_array(rng, shape, dtype_name):
    """Normal values with spread 3 (so rows have a real maximum), rounded to the dtype."""
    return (rng.standard_normal(shape) * 3).astype(numpy_dtype(dtype_name))


def poisoned(shape, dtype_name):
    """An output array filled with NaN, so an element the library fails to write is caught."""
    return np.full(shape, np.nan, dtype=numpy_dtype(dtype_name))
