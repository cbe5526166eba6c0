"""Smoke tests of the core: storage, views, the elementwise dispatcher."""
import weakref

import numpy as np

import ember
from helpers import assert_matches, layouts, random_array


def test_add_matches_numpy_across_layouts():
    base = random_array((3, 4), "float32")
    other = random_array((3, 4), "float32", np.random.default_rng(1))
    for label, arr in layouts(base):
        got = ember.asarray(arr) + ember.asarray(other)
        assert_matches(got, arr + other)


def test_numpy_view_is_zero_copy_and_writes_through():
    x = ember.zeros((4,), dtype="float64")
    v = np.asarray(x)
    v[1] = 5.0
    assert x.tolist() == [0.0, 5.0, 0.0, 0.0]


def test_wrapping_numpy_is_zero_copy():
    a = np.arange(5.0)
    x = ember.asarray(a)
    a[0] = 42
    assert x[0].item() == 42


def test_storage_freed_when_last_view_dies():
    before = ember.memory_stats()["allocated_bytes"]
    x = ember.zeros((1000,), dtype="float64")
    v = x[10:20]
    s = weakref.ref(x.storage)
    del x
    assert s() is not None            # the view keeps the storage alive
    del v
    assert s() is None                # freed at once, no GC pass needed
    assert ember.memory_stats()["allocated_bytes"] == before
