"""Basic indexing (views) and advanced indexing (NumPy semantics) vs NumPy."""
import numpy as np
import pytest

import ember
from helpers import assert_matches, layouts, random_array

BASIC_KEYS = [0, -1, (1,), (slice(None), 2), (slice(1, None, 2),), (slice(None, None, -1),),
              (Ellipsis, 1), (None, 0), (1, None, slice(None, None, -2)), (slice(5, 1, -2), Ellipsis, -1),
              (slice(None), None, slice(0, 0)), (), Ellipsis, np.int64(1)]


@pytest.mark.parametrize("key", BASIC_KEYS, ids=repr)
@pytest.mark.parametrize("dtype", ["int8", "float32", "complex64", "bool"])
def test_basic_indexing_is_a_view(key, dtype):
    base = random_array((6, 4, 3), dtype)
    for label, a in layouts(base):
        x = ember.asarray(a)
        got = x[key]
        assert_matches(got, a[key])
        assert got.storage is x.storage


def test_basic_setitem_writes_through_and_broadcasts():
    a = np.zeros((4, 5))
    x = ember.asarray(np.zeros((4, 5)))
    for key, val in [((0,), 1.0), ((slice(None), 1), np.arange(4.0)), ((slice(1, 3), slice(None, None, -2)), 7),
                     ((Ellipsis, -1), ember.asarray([9.0])), (2, np.arange(5))]:
        a[key] = np.asarray(val) if isinstance(val, ember.ndarray) else val
        x[key] = val
        assert_matches(x, a)


def test_basic_index_errors():
    x = ember.zeros((2, 3))
    with pytest.raises(IndexError, match="out of bounds for axis 1 with size 3"):
        x[0, 3]
    with pytest.raises(IndexError, match="too many indices"):
        x[0, 0, 0]
    with pytest.raises(IndexError, match="single ellipsis"):
        x[..., ...]
    with pytest.raises(IndexError):
        x[1.5]
    with pytest.raises(IndexError):
        ember.asarray(3.0)[0]


ADV_KEYS = [
    [0, 2, 2],
    np.array([[1], [0]]),
    (np.array([0, 1]), np.array([2, 0])),
    (slice(None), [0, 0, 1]),
    (Ellipsis, np.array([True, False, True])),
    np.array([True, False, True, False, True]),
    (np.array([1, -1]), slice(None), None),
    ([0, 1], Ellipsis, [1, 0]),
    True,
    (np.array([], dtype=np.int64),),
]


@pytest.mark.parametrize("key", ADV_KEYS, ids=repr)
def test_advanced_getitem(key):
    base = random_array((5, 4, 3), "float64")
    for label, a in layouts(base):
        x = ember.asarray(a)
        assert_matches(x[key], a[key])
        # the same key written with ember arrays
        if isinstance(key, np.ndarray):
            assert_matches(x[ember.asarray(key)], a[key])


def test_boolean_mask_and_setitem():
    a = random_array((4, 5), "int32")
    x = ember.asarray(a.copy())
    m = a > 0
    assert_matches(x[ember.asarray(m)], a[m])
    x[ember.asarray(m)] = 0
    a2 = a.copy()
    a2[m] = 0
    assert_matches(x, a2)
    v0 = x._version
    x[[0, 1], [1, 2]] = ember.asarray([7, 8], dtype=ember.int32)
    a2[[0, 1], [1, 2]] = [7, 8]
    assert_matches(x, a2)
    assert x._version == v0 + 1


def test_advanced_index_errors():
    x = ember.zeros((3, 4))
    with pytest.raises(IndexError, match="out of bounds"):
        x[[0, 5]]
    with pytest.raises(IndexError):
        x[ember.asarray([True, False])]


def test_zero_d_integer_array_as_index():
    x = ember.arange(5)
    assert x[ember.asarray(3)].item() == 3


def test_take_and_along_axis():
    a = random_array((3, 4), "float32")
    x = ember.asarray(a)
    idx = np.array([3, 0, 1])
    assert_matches(ember.take(x, ember.asarray(idx), axis=1), np.take(a, idx, axis=1))
    assert_matches(ember.take(x, ember.asarray(idx)), np.take(a, idx))
    order = np.argsort(a, axis=1)
    assert_matches(ember.take_along_axis(x, ember.asarray(order), axis=1), np.take_along_axis(a, order, axis=1))
    y = ember.asarray(a.copy())
    ember.put_along_axis(y, ember.asarray(order[:, :1]), -1.0, axis=1)
    a2 = a.copy()
    np.put_along_axis(a2, order[:, :1], -1.0, axis=1)
    assert_matches(y, a2)
    with pytest.raises(IndexError):
        ember.take(x, ember.asarray([9]), axis=1)


def test_nonzero_argwhere():
    a = np.array([[0, 2, 0], [3, 0, 4]])
    x = ember.asarray(a)
    for got, exp in zip(ember.nonzero(x), np.nonzero(a)):
        assert_matches(got, exp)
    assert_matches(ember.argwhere(x), np.argwhere(a))
    assert_matches(ember.flatnonzero(x), np.flatnonzero(a))
    with pytest.raises(ValueError, match="0d"):
        ember.nonzero(ember.asarray(1))
    for got, exp in zip(ember.where(x > 1), np.where(a > 1)):
        assert_matches(got, exp)


def test_index_add_and_scatter_add_accumulate_duplicates():
    x = ember.zeros((4, 2))
    src = ember.ones((3, 2))
    got = ember.index_add(x, 0, ember.asarray([0, 0, 3]), src)
    exp = np.zeros((4, 2), np.float32)
    np.add.at(exp, [0, 0, 3], 1.0)
    assert_matches(got, exp)
    assert ember.sum(x).item() == 0            # out of place
    with pytest.raises(ValueError, match="source has shape"):
        ember.index_add(x, 0, ember.asarray([0]), src)
    s = ember.scatter_add(ember.zeros(3), 0, ember.asarray([2, 2, 0]), ember.ones(3))
    assert s.tolist() == [1.0, 0.0, 2.0]
