"""smx on NumPy arrays (the CPU backend) against the float64 reference."""

import numpy as np
import pytest

import smx
from conftest import HALF_AND_SINGLE, assert_close, numpy_dtype, poisoned, random_array, reference

MODES = [pytest.param(False, id="softmax"), pytest.param(True, id="log_softmax")]
SHAPES = [(37,), (5, 33), (3, 4, 17), (2, 3, 5, 7)]


def run(x, dim, log, **kwargs):
    return (smx.log_softmax if log else smx.softmax)(x, dim, **kwargs)


@pytest.mark.parametrize("log", MODES)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda shape: f"{len(shape)}d")
def test_every_dim_positive_and_negative_matches_reference(rng, shape, log):
    x = random_array(rng, shape, "float32")
    for dim in range(-len(shape), len(shape)):
        y = run(x, dim, log)
        assert y.dtype == x.dtype and y.shape == x.shape
        assert_close(y, reference(x, dim, log), log)


@pytest.mark.parametrize("log", MODES)
@pytest.mark.parametrize("y_name", HALF_AND_SINGLE)
@pytest.mark.parametrize("x_name", HALF_AND_SINGLE)
def test_every_half_and_single_dtype_pair_matches_reference(rng, x_name, y_name, log):
    x = random_array(rng, (6, 129), x_name)
    out = poisoned(x.shape, y_name)
    y = run(x, -1, log, out=out)
    assert y is out
    assert_close(out, reference(x, -1, log), log)
    by_dtype = run(x, 0, log, dtype=y_name)
    assert by_dtype.dtype == numpy_dtype(y_name)
    assert_close(by_dtype, reference(x, 0, log), log)


@pytest.mark.parametrize("log", MODES)
def test_float64_matches_reference_to_float64_precision(rng, log):
    x = random_array(rng, (9, 300), "float64")
    assert_close(run(x, 1, log), reference(x, 1, log), log)


def strided_views(x):
    """Views of a 3-d array that exercise every kind of stride: sliced, transposed, negative."""
    return {
        "sliced": x[:, 1:, ::2],
        "transposed": x.transpose(2, 0, 1),
        "swapped_last_two": np.swapaxes(x, 1, 2),
        "reversed_first": x[::-1],
        "reversed_last": x[:, :, ::-1],
        "reversed_and_strided": x[::-1, ::2, ::-3],
    }


@pytest.mark.parametrize("log", MODES)
@pytest.mark.parametrize("view_name", list(strided_views(np.empty((2, 2, 2)))))
def test_strided_and_negative_stride_views_read_in_place(rng, view_name, log):
    base = random_array(rng, (4, 6, 18), "float32")
    x = strided_views(base)[view_name]
    for dim in range(x.ndim):
        out = poisoned(x.shape, "float32")
        run(x, dim, log, out=out)
        assert_close(out, reference(x, dim, log), log)


@pytest.mark.parametrize("log", MODES)
def test_output_into_strided_and_reversed_views(rng, log):
    x = random_array(rng, (5, 12), "float32")
    storage = poisoned((10, 24), "float16")
    out = storage[::-2, ::2]
    run(x, 1, log, out=out)
    assert_close(out, reference(x, 1, log), log)
    assert np.isnan(storage[::-2, 1::2].astype(np.float64)).all(), "wrote outside the out view"


def test_result_keeps_the_dim_order_of_x(rng):
    x = random_array(rng, (8, 5), "float32").T
    y = smx.softmax(x, 0)
    assert y.flags.f_contiguous and not y.flags.c_contiguous
    assert_close(y, reference(x, 0, False), False)


@pytest.mark.parametrize("log", MODES)
@pytest.mark.parametrize("name", HALF_AND_SINGLE + ["float64"])
def test_in_place_overwrites_x(rng, name, log):
    x = random_array(rng, (7, 45), name)
    expected = reference(x, -1, log)
    y = run(x, -1, log, out=x)
    assert y is x
    assert_close(x, expected, log)


@pytest.mark.parametrize("log", MODES)
def test_in_place_on_a_negative_stride_view(rng, log):
    base = random_array(rng, (6, 10), "float32")
    x = base[::-1, ::-1]
    expected = reference(x, 0, log)
    run(x, 0, log, out=x)
    assert_close(x, expected, log)


@pytest.mark.parametrize("log", MODES)
def test_special_values_follow_pytorch(log):
    inf, nan = np.inf, np.nan
    x = np.array([[1.0, 2.0, 3.0, 4.0],
                  [1.0, inf, 3.0, 4.0],      # +inf: the whole row is NaN
                  [1.0, nan, 3.0, 4.0],      # NaN: the whole row is NaN
                  [-inf, -inf, -inf, -inf],  # all -inf: NaN
                  [-inf, 0.5, -inf, 2.0]],   # -inf among finite values: 0 (log: -inf)
                 dtype=np.float32)
    y = run(x, -1, log)
    expected = reference(x, -1, log)
    assert np.isnan(y[1:4]).all()
    assert (y[4, [0, 2]] == (-inf if log else 0.0)).all()
    assert_close(y, expected, log)


@pytest.mark.parametrize("log", MODES)
def test_axis_of_size_one_gives_one_or_zero(rng, log):
    x = random_array(rng, (5, 1, 3), "float32")
    y = run(x, 1, log)
    assert np.array_equal(y, np.full(x.shape, 0.0 if log else 1.0, np.float32))


@pytest.mark.parametrize("shape", [(0,), (0, 5), (3, 0), (2, 0, 4)])
def test_zero_size_tensors_succeed(shape):
    x = np.empty(shape, np.float32)
    for dim in range(len(shape)):
        y = smx.softmax(x, dim)
        assert y.shape == shape and y.dtype == np.float32


@pytest.mark.parametrize("log", MODES)
@pytest.mark.parametrize("dim", [0, -1])
def test_zero_dim_array_is_a_one_element_axis(rng, dim, log):
    x = np.array(rng.standard_normal(), dtype=np.float32)
    y = run(x, dim, log)
    assert y.shape == () and y.dtype == np.float32
    assert y == (0.0 if log else 1.0)


@pytest.mark.parametrize("log", MODES)
@pytest.mark.parametrize("name", ["float16", "float32", "float64", "bfloat16"])
def test_numpy_scalars_are_zero_dim_inputs(name, log):
    scalar_type = numpy_dtype(name).type
    y = run(scalar_type(3.0), -1, log)
    assert isinstance(y, np.ndarray) and y.shape == () and y.dtype == numpy_dtype(name)
    assert y == (0.0 if log else 1.0)
    assert np.isnan(run(scalar_type(np.inf), 0, log))


class _Index:
    """An integer type of its own, as any object with __index__ is."""

    def __init__(self, value):
        self.value = value

    def __index__(self):
        return self.value


@pytest.mark.parametrize("dim", [np.int64(1), np.int32(-1), np.uint8(1), _Index(1), _Index(-1)],
                         ids=["int64", "int32", "uint8", "index", "negative_index"])
def test_dim_takes_any_integer_type(rng, dim):
    x = random_array(rng, (3, 5), "float32")
    assert_close(smx.softmax(x, dim), reference(x, 1, False), False)
    assert smx.plan(x, dim).startswith("cpu")


@pytest.mark.parametrize("spelling", ["float16", np.float16, np.dtype("float16"), "f2", "<f2"],
                         ids=["name", "type", "dtype", "char", "typestr"])
def test_dtype_argument_spellings(rng, spelling):
    x = random_array(rng, (3, 8), "float32")
    y = smx.softmax(x, dtype=spelling)
    assert y.dtype == np.float16
    assert_close(y, reference(x, -1, False), False)


def test_bfloat16_by_name_and_by_ml_dtypes(rng):
    bfloat16 = numpy_dtype("bfloat16")
    x = random_array(rng, (4, 40), "float32")
    assert smx.softmax(x, dtype="bfloat16").dtype == bfloat16
    assert_close(smx.log_softmax(x, dtype=bfloat16), reference(x, -1, True), True)


def test_bfloat16_without_ml_dtypes_is_a_clear_type_error(rng, monkeypatch):
    monkeypatch.setattr(smx._dtypes, "_ml_dtypes_bfloat16", lambda: None)
    x = random_array(rng, (2, 3), "float32")
    with pytest.raises(TypeError, match="ml_dtypes"):
        smx.softmax(x, dtype="bfloat16")


def test_plan_names_the_cpu_backend_and_primes_the_cache(rng):
    x = random_array(rng, (16, 64), "float32")
    smx._cache_clear()
    text = smx.plan(x, -1, log=True)
    assert text.startswith("cpu")
    smx.log_softmax(x, -1)
    info = smx._cache_info()
    assert (info.misses, info.hits) == (1, 1)


def test_version_and_library_path():
    number = smx._lib.lib.smxGetVersion()
    assert smx.version() == f"{number // 10000}.{number // 100 % 100}.{number % 100}"
    import os
    assert os.path.isfile(smx.library_path())


def test_log_callback_receives_the_plan_at_debug_level(rng):
    messages = []
    smx.set_log_callback(lambda level, message: messages.append((level, message)))
    try:
        smx.set_log_level("debug")
        smx._cache_clear()
        smx.softmax(random_array(rng, (3, 11), "float32"))
    finally:
        smx.set_log_level("off")
        smx.set_log_callback(None)
    assert any("plan" in message and level == 1 for level, message in messages), messages


def test_log_callback_may_call_smx_itself(rng):
    # libsmx logs while the descriptor cache creates a handle or a descriptor: a callback that calls smx
    # there must neither deadlock nor recurse (the nested call's messages are not delivered).
    import threading
    x = random_array(rng, (3, 13), "float32")
    nested = []
    messages = []

    def callback(level, message):
        messages.append(message)
        if not nested:
            nested.append(smx.softmax(x + 1.0, 1))

    done = threading.Event()
    result = []

    def outer():
        smx._cache_clear()
        result.append(smx.softmax(x, 1))
        done.set()

    smx.set_log_callback(callback)
    try:
        smx.set_log_level("debug")
        worker = threading.Thread(target=outer, daemon=True)
        worker.start()
        finished = done.wait(timeout=30)
    finally:
        smx.set_log_level("off")
        smx.set_log_callback(None)
    assert finished, "smx.softmax with a log callback that calls smx did not return"
    assert_close(result[0], reference(x, 1, False), False)
    assert_close(nested[0], reference(x + 1.0, 1, False), False)
    assert messages, "the outer call's messages reach the callback"


def test_numpy_pointers_survive_an_allocator_that_scribbles_on_freed_memory(tmp_path):
    # Python's debug allocator overwrites freed memory: a data pointer read from a struct already freed
    # (NumPy's __array_struct__ capsule collected too early) shows up as 0xdd... instead of the array.
    import os
    import subprocess
    import sys
    script = tmp_path / "scribble.py"
    script.write_text(
        "import numpy as np, smx\n"
        "x = np.random.default_rng(1).standard_normal((6, 40)).astype(np.float32)\n"
        "out = np.full((6, 40), np.nan, np.float32)\n"
        "y = smx.softmax(x, 1)\n"
        "smx.log_softmax(x, 1, out=out)\n"
        "e = np.exp(x.astype(np.float64) - x.max(1, keepdims=True))\n"
        "assert np.allclose(y, e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-7)\n"
        "assert np.allclose(np.exp(out), y, rtol=1e-5, atol=1e-7)\n"
        "print('ok')\n")
    env = dict(os.environ, PYTHONMALLOC="debug")
    env["PYTHONPATH"] = os.pathsep.join(p for p in [os.path.dirname(os.path.dirname(smx.__file__)),
                                                    env.get("PYTHONPATH", "")] if p)
    env.setdefault("SMX_LIBRARY", smx.library_path())
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


class _RaisingInterfaceArray:
    """Like a JAX array on the CPU: __cuda_array_interface__ raises (not AttributeError), DLPack works."""

    def __init__(self, array):
        self.array = array

    @property
    def __cuda_array_interface__(self):
        raise RuntimeError("INVALID_ARGUMENT: __cuda_array_interface__ is only defined for NVidia GPU buffers")

    def __dlpack__(self, **kwargs):
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


def test_an_interface_property_that_raises_falls_back_to_dlpack(rng):
    x = random_array(rng, (5, 19), "float32")
    out = np.full((5, 19), np.nan, np.float32)
    result = smx.softmax(_RaisingInterfaceArray(x), 1, out=_RaisingInterfaceArray(out))
    assert isinstance(result, _RaisingInterfaceArray)
    assert_close(out, reference(x, 1, False), False)


def test_set_log_callback_from_a_callback_raises_while_another_thread_replaces_it():
    # Thread B's callback runs; the main thread starts replacing the callback (libsmx waits for B's
    # delivery); B's callback then calls set_log_callback: it must raise, not wait for the main thread.
    import threading
    import time
    in_callback = threading.Event()
    seen = []

    def callback(level, message):
        if threading.current_thread().name != "B" or seen:
            return
        in_callback.set()
        time.sleep(0.3)  # the main thread is inside set_log_callback by now
        try:
            smx.set_log_callback(None)
            seen.append("returned")
        except RuntimeError as error:
            seen.append(str(error))

    smx.set_log_callback(callback)
    try:
        smx.set_log_level("info")
        smx._cache_clear()
        worker = threading.Thread(target=lambda: smx.softmax(np.ones((2, 3), np.float32)), name="B", daemon=True)
        worker.start()
        assert in_callback.wait(timeout=30)
        replacer = threading.Thread(target=smx.set_log_callback, args=(None,), daemon=True)
        replacer.start()
        replacer.join(timeout=30)
        worker.join(timeout=30)
        assert not replacer.is_alive() and not worker.is_alive(), "set_log_callback deadlocked"
    finally:
        smx.set_log_level("off")
        if not any(t.is_alive() for t in threading.enumerate() if t.name == "B"):
            smx.set_log_callback(None)
    assert seen and "inside a log callback" in seen[0], seen



def test_a_bool_is_not_a_stream_handle(rng):
    # True would otherwise pass as handle 1 (the legacy default stream); checked on every device, as every
    # stream= argument is, so a call valid on the CPU is valid on a GPU.
    with pytest.raises(TypeError, match="bool"):
        smx.softmax(random_array(rng, (2, 3), "float32"), stream=True)
