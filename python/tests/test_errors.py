"""Every refusal: what is raised, and that it names the problem."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import smx
from conftest import assert_close, random_array, reference

PACKAGE_ROOT = Path(__file__).resolve().parent.parent


class Foreign:
    """An array of another library (this test module), seen by smx through DLPack."""

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, **kwargs):
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


@pytest.mark.parametrize("status, kind", [
    (2006, ValueError), (2010, ValueError), (3003, TypeError), (3002, NotImplementedError),
    (3001, RuntimeError), (4000, RuntimeError), (4001, RuntimeError), (5000, RuntimeError)])
def test_status_categories_map_to_builtin_exceptions_carrying_the_status(status, kind):
    with pytest.raises(kind) as raised:
        smx._errors.check(status)
    assert isinstance(raised.value, smx.SmxError)
    assert raised.value.status == status
    assert raised.value.status_name.startswith("SMX_STATUS_")


def test_out_of_shape_is_a_value_error(rng):
    x = random_array(rng, (3, 4), "float32")
    with pytest.raises(ValueError, match=r"out has shape \(4, 3\) but x has shape \(3, 4\)"):
        smx.softmax(x, out=np.empty((4, 3), np.float32))


@pytest.mark.parametrize("dim", [2, -3, 7])
def test_dim_out_of_range_is_an_index_error_like_torch(rng, dim):
    with pytest.raises(IndexError, match=r"expected to be in range of \[-2, 1\]"):
        smx.softmax(random_array(rng, (3, 4), "float32"), dim)


def test_zero_dim_array_with_dim_one_is_an_index_error():
    with pytest.raises(IndexError, match=r"\[-1, 0\], but got 1"):
        smx.softmax(np.array(2.0, np.float32), 1)


@pytest.mark.parametrize("dim", [0.0, True, np.True_, "0", None], ids=["float", "bool", "numpy_bool", "str", "None"])
def test_non_integer_dim_is_a_type_error(rng, dim):
    with pytest.raises(TypeError, match="dim must be an int"):
        smx.softmax(random_array(rng, (3,), "float32"), dim)


def test_a_numpy_scalar_as_out_is_refused_as_read_only(rng):
    with pytest.raises(ValueError, match="read-only"):
        smx.softmax(np.ones((), np.float32), out=np.float32(0.0))


@pytest.mark.parametrize("dtype", ["int32", "uint8", "bool", "complex64", "int64"])
def test_non_float_input_is_a_type_error_naming_the_dtype(dtype):
    with pytest.raises(TypeError, match=dtype):
        smx.softmax(np.ones((2, 3), dtype))


@pytest.mark.parametrize("x_name, y_name", [("float64", "float32"), ("float64", "float16"), ("float32", "float64"),
                                             ("float16", "float64")])
def test_float64_pairs_with_another_dtype_are_computed_in_float64(rng, x_name, y_name):
    x = random_array(rng, (3, 17), x_name)
    y = smx.softmax(x, dtype=y_name)
    assert y.dtype == np.dtype(y_name)
    assert_close(y, reference(x, -1, False), False)


def test_dtype_disagreeing_with_out_is_a_type_error(rng):
    x = random_array(rng, (2, 5), "float32")
    with pytest.raises(TypeError, match="disagrees"):
        smx.softmax(x, dtype="float16", out=np.empty((2, 5), np.float32))


def test_unknown_dtype_argument_is_a_type_error(rng):
    with pytest.raises(TypeError, match="not a dtype"):
        smx.softmax(random_array(rng, (2,), "float32"), dtype=object())
    with pytest.raises(TypeError, match="int8"):
        smx.softmax(random_array(rng, (2,), "float32"), dtype="int8")


def test_out_from_another_library_is_a_type_error(rng):
    x = random_array(rng, (2, 5), "float32")
    with pytest.raises(TypeError, match="out is a test_errors array but x is a numpy array"):
        smx.softmax(x, out=Foreign(np.empty((2, 5), np.float32)))


def test_read_only_out_is_a_value_error(rng):
    x = random_array(rng, (2, 5), "float32")
    out = np.empty_like(x)
    out.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        smx.softmax(x, out=out)


def test_byte_strides_off_the_element_size_are_a_value_error():
    storage = np.zeros(32, np.uint8)
    x = np.lib.stride_tricks.as_strided(storage.view(np.float32)[:1], shape=(3,), strides=(6,))
    with pytest.raises(ValueError, match="not multiples of the element size"):
        smx.softmax(x)


def test_byte_swapped_input_is_a_type_error(rng):
    with pytest.raises(TypeError, match="byte order"):
        smx.softmax(random_array(rng, (4,), "float32").astype(">f4"))


def test_misaligned_data_is_refused_by_the_library(rng):
    storage = bytearray(4 * 9 + 1)
    x = np.frombuffer(storage, dtype=np.float32, count=9, offset=1)
    with pytest.raises(ValueError, match="aligned") as raised:
        smx.softmax(x)
    assert raised.value.status == 2011


def test_output_that_overlaps_itself_is_refused(rng):
    x = random_array(rng, (3, 4), "float32")
    storage = np.empty(4, np.float32)
    out = np.lib.stride_tricks.as_strided(storage, shape=(3, 4), strides=(0, 4), writeable=True)
    with pytest.raises(ValueError, match="overlaps itself") as raised:
        smx.softmax(x, out=out)
    assert raised.value.status == 2007


def test_output_partially_overlapping_input_is_refused(rng):
    storage = random_array(rng, (11,), "float32")
    with pytest.raises(ValueError, match="overlaps x") as raised:
        smx.softmax(storage[:10], out=storage[1:])
    assert raised.value.status == 2007


def test_in_place_with_another_dtype_is_refused_as_overlap(rng):
    storage = random_array(rng, (8,), "float32")
    with pytest.raises(ValueError, match="overlaps x"):
        smx.softmax(storage, out=storage.view(np.float16)[::2])


def test_more_dims_than_the_library_takes_is_a_value_error():
    with pytest.raises(ValueError) as raised:
        smx.softmax(np.ones((1,) * 9, np.float32))
    assert raised.value.status == 2003


@pytest.mark.parametrize("mask", [[[False, True, False]], False], ids=["masked", "nomask"])
def test_numpy_masked_arrays_are_a_type_error_as_x_and_as_out(rng, mask):
    masked = np.ma.masked_array(random_array(rng, (1, 3), "float32"), mask=mask)
    with pytest.raises(TypeError, match="masked arrays"):
        smx.softmax(masked)
    with pytest.raises(TypeError, match="masked arrays"):
        smx.softmax(random_array(rng, (1, 3), "float32"), out=masked)


def test_objects_that_are_not_arrays_are_a_type_error():
    with pytest.raises(TypeError, match="builtins.list"):
        smx.softmax([1.0, 2.0])


def test_bad_stream_argument_is_a_type_error(rng):
    with pytest.raises(TypeError, match="stream"):
        smx.softmax(random_array(rng, (2,), "float32"), stream="default")
    with pytest.raises(ValueError, match="stream"):
        smx.softmax(random_array(rng, (2,), "float32"), stream=-1)


def test_unknown_log_levels_are_value_errors():
    with pytest.raises(ValueError, match="unknown log level"):
        smx.set_log_level("verbose")
    with pytest.raises(ValueError) as raised:
        smx.set_log_level(5)
    assert isinstance(raised.value, smx.SmxError)


@pytest.mark.parametrize("level", [2 ** 40, 2 ** 32 + 4, 2 ** 31, -2 ** 31 - 1],
                         ids=["2**40", "2**32+4", "2**31", "-2**31-1"])
def test_log_levels_past_a_c_int_are_value_errors_naming_the_levels(level):
    # ctypes would pass them on truncated to 32 bits: 2**40 as 0 (trace), 2**32 + 4 as 4 (error).
    with pytest.raises(ValueError, match=r"trace, debug, info, warn, warning, error, off or an int 0-4, 6"):
        smx.set_log_level(level)


@pytest.mark.parametrize("level", [None, 2.0, True, np.True_, b"info"],
                         ids=["None", "float", "bool", "numpy_bool", "bytes"])
def test_log_levels_of_another_type_are_type_errors_naming_the_levels(level):
    with pytest.raises(TypeError, match=r"trace, debug, info, warn, warning, error, off or an int 0-4, 6"):
        smx.set_log_level(level)


def test_log_levels_take_any_integer_type():
    try:
        smx.set_log_level(np.int64(4))
        smx.set_log_level(np.uint8(6))
    finally:
        smx.set_log_level("off")


@pytest.mark.parametrize("callback", [42, "print", [print]], ids=["int", "str", "list"])
def test_a_log_callback_that_is_not_callable_is_a_type_error_and_installs_nothing(callback):
    messages = []
    smx.set_log_callback(lambda level, message: messages.append(message))
    try:
        with pytest.raises(TypeError, match="callable"):
            smx.set_log_callback(callback)
        smx.set_log_level("info")
        smx._cache_clear()
        smx.softmax(np.ones((2, 3), np.float32))  # creates a handle, which logs at info
    finally:
        smx.set_log_level("off")
        smx.set_log_callback(None)
    assert any("handle on cpu" in message for message in messages), messages


def import_smx_with(environment_library):
    environment = dict(os.environ, SMX_LIBRARY=environment_library, PYTHONPATH=str(PACKAGE_ROOT))
    return subprocess.run([sys.executable, "-c", "import smx"], env=environment, capture_output=True, text=True,
                          cwd=str(PACKAGE_ROOT.parent), timeout=60)


def test_smx_library_pointing_nowhere_fails_the_import_naming_the_path(tmp_path):
    missing = str(tmp_path / "nowhere" / "libsmx.so")
    result = import_smx_with(missing)
    assert result.returncode != 0
    assert "ImportError" in result.stderr and missing in result.stderr and "no such file" in result.stderr
    assert "SMX_LIBRARY" in result.stderr


def test_smx_library_pointing_at_a_non_library_fails_the_import(tmp_path):
    not_a_library = tmp_path / "libsmx.so"
    not_a_library.write_text("not an ELF file")
    result = import_smx_with(str(not_a_library))
    assert result.returncode != 0
    assert "ImportError" in result.stderr and str(not_a_library) in result.stderr
