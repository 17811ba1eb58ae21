"""The descriptor cache: reuse, keys, eviction, and many threads at once."""

import threading

import numpy as np
import pytest

import smx
from conftest import assert_close, random_array, reference


@pytest.fixture(autouse=True)
def empty_cache():
    smx._cache_clear()
    yield
    smx._cache_clear()


def test_repeated_calls_reuse_one_descriptor_and_one_handle(rng):
    for _ in range(5):
        x = random_array(rng, (4, 10), "float32")
        assert_close(smx.softmax(x), reference(x, -1, False), False)
    info = smx._cache_info()
    assert (info.misses, info.hits, info.size, info.handles) == (1, 4, 1, 1)


def test_every_part_of_the_problem_is_in_the_key(rng):
    x = random_array(rng, (4, 10), "float32")
    smx.softmax(x)
    smx.softmax(x, 0)                        # another dim
    smx.log_softmax(x)                       # another mode
    smx.softmax(x, dtype="float16")          # another output dtype
    smx.softmax(x.astype(np.float16))        # another input dtype
    smx.softmax(x[:, ::2])                   # other x strides and shape
    smx.softmax(x, out=np.empty((4, 20), np.float32)[:, ::2])  # other y strides
    smx.softmax(random_array(rng, (5, 10), "float32"))        # another shape
    info = smx._cache_info()
    assert (info.misses, info.hits) == (8, 0)
    smx.softmax(x, 0)
    assert smx._cache_info().hits == 1


def test_least_recently_used_descriptors_are_evicted(rng, monkeypatch):
    monkeypatch.setattr(smx._cache, "MAX_DESCRIPTORS", 3)
    arrays = [random_array(rng, (2, length), "float32") for length in range(1, 6)]
    for x in arrays:
        smx.softmax(x)
    info = smx._cache_info()
    assert (info.size, info.evictions, info.maxsize) == (3, 2, 3)
    smx.softmax(arrays[-1])                  # still cached
    smx.softmax(arrays[0])                   # evicted: created again
    info = smx._cache_info()
    assert (info.hits, info.misses) == (1, 6)


def test_eight_threads_hammering_shared_and_evicted_descriptors_get_right_answers(rng, monkeypatch):
    monkeypatch.setattr(smx._cache, "MAX_DESCRIPTORS", 4)  # small, so threads evict descriptors others use
    shapes = [(3, length) for length in (5, 17, 64, 130, 257, 1000)]
    inputs = [random_array(rng, shape, name) for shape in shapes for name in ("float32", "float16")]
    expected = [(reference(x, -1, False), reference(x, -1, True)) for x in inputs]
    failures = []
    start = threading.Barrier(8)

    def hammer(thread_index):
        start.wait()
        try:
            for step in range(60):
                which = (thread_index * 7 + step) % len(inputs)
                log = bool(step % 2)
                y = (smx.log_softmax if log else smx.softmax)(inputs[which], -1)
                assert_close(y, expected[which][log], log)
        except Exception as error:  # collected: an exception in a thread would otherwise be lost
            failures.append(repr(error))

    threads = [threading.Thread(target=hammer, args=(index,)) for index in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    info = smx._cache_info()
    assert info.hits + info.misses == 8 * 60
    assert info.evictions > 0 and info.size <= 4 and info.handles == 1
