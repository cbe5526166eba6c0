"""Basic indexing (views) and advanced indexing (NumPy semantics) vs NumPy."""
import numpy as np
import pytest

import ember
from helpers import ALL_DTYPES, assert_matches, layouts, random_array


def E(a):
    return ember.asarray(a)


def shares(a, b):
    return np.shares_memory(np.asarray(a), np.asarray(b))


def to_ember_key(key):
    """The same key with every NumPy array inside it replaced by an ember array."""
    if isinstance(key, np.ndarray):
        return E(key)
    if isinstance(key, tuple):
        return tuple(to_ember_key(k) for k in key)
    return key


# ---------------------------------------------------------------- basic indexing (array.pyx)

BASIC_KEYS = [0, -1, (1,), (slice(None), 2), (slice(1, None, 2),), (slice(None, None, -1),),
              (Ellipsis, 1), (None, 0), (1, None, slice(None, None, -2)), (slice(5, 1, -2), Ellipsis, -1),
              (slice(None), None, slice(0, 0)), (), Ellipsis, np.int64(1), np.uint8(2), slice(-100, 100),
              (slice(None, None, 3), slice(None, None, -3), slice(None, None, -1)), (-6, -4, -3),
              (Ellipsis, None), (None, Ellipsis, None), (0, Ellipsis, 0, None), slice(10, 20),
              (slice(None, None, -1), slice(None, None, -1)), (Ellipsis, slice(1, 2), None)]


@pytest.mark.parametrize("key", BASIC_KEYS, ids=repr)
@pytest.mark.parametrize("dtype", ["int8", "float32", "complex64", "bool", "uint64", "float16"])
def test_basic_indexing_is_a_view(key, dtype):
    base = random_array((6, 4, 3), dtype)
    for label, a in layouts(base):
        x = E(a)
        got = x[key]
        assert_matches(got, a[key])
        assert got.storage is x.storage


def test_basic_indexing_random_slices():
    rng = np.random.default_rng(3)
    a = np.arange(7 * 5 * 4, dtype=np.int64).reshape(7, 5, 4)
    x = E(a)

    def rnd_slice(n):
        pick = lambda: None if rng.random() < 0.3 else int(rng.integers(-n - 2, n + 3))
        return slice(pick(), pick(), None if rng.random() < 0.3 else int(rng.choice([-3, -2, -1, 1, 2, 3])))
    for _ in range(200):
        key = tuple(rnd_slice(n) if rng.random() < 0.8 else int(rng.integers(-n, n)) for n in a.shape)
        got = x[key]
        assert_matches(got, a[key])
        # views of views
        key2 = tuple(rnd_slice(n) for n in got.shape)
        assert_matches(got[key2], a[key][key2])


def test_basic_views_write_through():
    a = np.zeros((4, 5))
    x = E(np.zeros((4, 5)))
    v = x[1:3, ::-2]
    v[...] = 7
    a[1:3, ::-2] = 7
    assert_matches(x, a)
    w = x[::-1][2]
    w[0] = -1
    a[::-1][2][0] = -1
    assert_matches(x, a)
    assert w.storage is x.storage
    # a NumPy view of an ember view writes through too
    np.asarray(x[:, 4])[...] = 3
    a[:, 4] = 3
    assert_matches(x, a)


def test_basic_setitem_writes_through_and_broadcasts():
    a = np.zeros((4, 5))
    x = E(np.zeros((4, 5)))
    for key, val in [((0,), 1.0), ((slice(None), 1), np.arange(4.0)), ((slice(1, 3), slice(None, None, -2)), 7),
                     ((Ellipsis, -1), E(np.array([9.0]))), (2, np.arange(5)), ((None, 1), [[5.0] * 5]),
                     (slice(None, None, -1), np.arange(5.0)), ((), 2.5), ((Ellipsis,), np.zeros((1, 1, 5)))]:
        a[key] = np.asarray(val) if isinstance(val, ember.ndarray) else val
        v0 = x._version
        x[key] = val
        assert x._version == v0 + 1
        assert_matches(x, a)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_basic_setitem_casts_like_numpy(dtype):
    a = random_array((3, 4), dtype)
    for label, arr in layouts(a):
        arr = arr.copy() if label == "contiguous" else arr
        x = E(arr.copy())
        exp = arr.copy()
        src = random_array((4,), "int16")
        exp[1] = src.astype(dtype)
        x[1] = E(src)
        exp[:, ::-2] = 1
        x[:, ::-2] = 1
        assert_matches(x, exp)


def test_setitem_overlapping_source():
    a = np.arange(10)
    x = E(a.copy())
    x[1:] = x[:-1]
    a[1:] = a[:-1].copy()
    assert_matches(x, a)
    x[::-1] = x
    a[::-1] = a.copy()
    assert_matches(x, a)


def test_basic_index_errors():
    x = ember.zeros((2, 3))
    with pytest.raises(IndexError, match="out of bounds for axis 1 with size 3"):
        x[0, 3]
    with pytest.raises(IndexError, match="out of bounds for axis 0 with size 2"):
        x[-3]
    with pytest.raises(IndexError, match="out of bounds for axis 0 with size 2"):
        x[np.int64(2)]
    with pytest.raises(IndexError, match="too many indices"):
        x[0, 0, 0]
    with pytest.raises(IndexError, match="too many indices"):
        x[0, ..., 0, 0]
    with pytest.raises(IndexError, match="single ellipsis"):
        x[..., ...]
    with pytest.raises(IndexError):
        x[1.5]
    with pytest.raises(IndexError):
        x["a"]
    with pytest.raises(IndexError):
        ember.asarray(3.0)[0]
    with pytest.raises(ValueError, match="step"):
        x[::0]
    with pytest.raises(IndexError):
        x[0, 3] = 1
    with pytest.raises(ValueError, match="broadcast"):
        x[0] = ember.zeros(4)
    with pytest.raises(ValueError, match="read-only"):
        ro = np.zeros(3)
        ro.flags.writeable = False
        E(ro)[0] = 1


def test_zero_d_indexing():
    x = E(np.array(4.5))
    assert_matches(x[()], np.array(4.5))
    assert_matches(x[...], np.array(4.5))
    assert_matches(x[None], np.array([4.5]))
    assert x[()].storage is x.storage
    x[()] = 1.0
    assert x.item() == 1.0
    x[...] = 2.0
    assert x.item() == 2.0


# ---------------------------------------------------------------- advanced indexing

ADV_KEYS = [
    [0, 2, 2],
    [-1, -5, 0],
    np.array([[1], [0]]),
    (np.array([0, 1]), np.array([2, 0])),
    (np.array([[0], [4]]), np.array([1, 3]), 0),
    (slice(None), [0, 0, 1]),
    (Ellipsis, np.array([True, False, True])),
    np.array([True, False, True, False, True]),
    np.zeros((5, 4), dtype=bool),
    np.array([[True, False, True, False]] * 5),
    (np.array([1, -1]), slice(None), None),
    ([0, 1], Ellipsis, [1, 0]),
    (slice(None), [1, 0], [0, 2]),
    ([1, 0], slice(None), [0, 2]),      # advanced indices separated by a slice
    (None, [1, 0], None, slice(1, 3)),
    (slice(None, None, -1), [3, 1], slice(None, None, -1)),
    True,
    False,
    np.bool_(True),
    (True, 0),
    (Ellipsis, False),
    (np.array([], dtype=np.int64),),
    (np.array([], dtype=np.int64), np.array([], dtype=np.int64)),
    (np.array(2),),
    (np.array(2), np.array(1), 0),
    ([0, 1], [1, 2], [2, 0]),
    np.array([[0, 1], [2, 3]], dtype=np.uint8),
    (np.array([1, 3], dtype=np.int16), slice(1, 3)),
]


@pytest.mark.parametrize("key", ADV_KEYS, ids=repr)
@pytest.mark.parametrize("dtype", ["float64", "int8", "bool", "complex64"])
def test_advanced_getitem(key, dtype):
    base = random_array((5, 4, 3), dtype)
    for label, a in layouts(base):
        x = E(a)
        exp = a[key]
        got = x[key]
        assert_matches(got, exp)
        assert not shares(got, x) or exp.size == 0
        # the same key written with ember arrays
        assert_matches(x[to_ember_key(key)], exp)


@pytest.mark.parametrize("key", ADV_KEYS, ids=repr)
def test_advanced_setitem(key):
    base = random_array((5, 4, 3), "float32")
    for label, a in layouts(base):
        a = a.copy() if label == "contiguous" else a
        x = E(a.copy())
        exp = a.copy()
        exp[key] = -1.0
        v0 = x._version
        x[key] = -1.0
        assert x._version == v0 + 1
        assert_matches(x, exp)
        # an array value of the indexed shape, as ember and as NumPy array
        vals = np.arange(exp[key].size, dtype=np.float32).reshape(exp[key].shape)
        exp[key] = vals
        x[to_ember_key(key)] = E(vals)
        assert_matches(x, exp)
        x2 = E(a.copy())
        x2[key] = vals
        assert_matches(x2, exp)


def test_advanced_setitem_broadcast_cast_and_duplicates():
    a = np.zeros((4, 5), np.int32)
    x = E(a.copy())
    a[[0, 2]] = np.arange(5)
    x[[0, 2]] = ember.arange(5)
    assert_matches(x, a)
    a[:, [1, 3]] = [[7], [8], [9], [10]]
    x[:, [1, 3]] = [[7], [8], [9], [10]]
    assert_matches(x, a)
    a[[1, 1, 1]] = [[1] * 5, [2] * 5, [3] * 5]        # last write wins, as NumPy
    x[[1, 1, 1]] = E(np.array([[1] * 5, [2] * 5, [3] * 5]))
    assert_matches(x, a)
    a[a > 5] = 2.9                                     # float into int: truncation
    x[x > 5] = 2.9
    assert_matches(x, a)
    with pytest.raises(ValueError):
        x[[0, 1]] = ember.zeros(3)


def test_boolean_mask_and_setitem():
    a = random_array((4, 5), "int32")
    x = E(a.copy())
    m = a > 0
    assert_matches(x[E(m)], a[m])
    assert_matches(x[x > 0], a[m])
    assert_matches(x[[True, False, True, True]], a[[True, False, True, True]])
    x[E(m)] = 0
    a2 = a.copy()
    a2[m] = 0
    assert_matches(x, a2)
    x[E(m)] = E(np.arange(m.sum(), dtype=np.int32))
    a2[m] = np.arange(m.sum())
    assert_matches(x, a2)
    v0 = x._version
    x[[0, 1], [1, 2]] = ember.asarray([7, 8], dtype=ember.int32)
    a2[[0, 1], [1, 2]] = [7, 8]
    assert_matches(x, a2)
    assert x._version == v0 + 1


def test_advanced_index_errors():
    x = ember.zeros((3, 4))
    with pytest.raises(IndexError, match="index 5 is out of bounds for axis 0 with size 3"):
        x[[0, 5]]
    with pytest.raises(IndexError, match="index -5 is out of bounds for axis 1 with size 4"):
        x[:, [-5]]
    with pytest.raises(IndexError, match="out of bounds"):
        x[E(np.array([3]))]
    with pytest.raises(IndexError, match="boolean index did not match"):
        x[ember.asarray([True, False])]
    with pytest.raises(IndexError):
        x[[0, 1], [0, 1, 2]]                 # shape mismatch between index arrays
    with pytest.raises(IndexError):
        x[[0.5]]
    with pytest.raises(IndexError):
        x[E(np.array([1.0]))]
    with pytest.raises(IndexError, match="out of bounds"):
        x[[0, 5]] = 1
    with pytest.raises(IndexError):
        x[[0], [0], [0]]


def test_zero_d_integer_array_as_index():
    a = np.arange(20).reshape(5, 4)
    x = E(a)
    assert x[E(np.array(3))].tolist() == a[3].tolist()
    assert_matches(x[E(np.array(3))], a[np.array(3)])
    assert_matches(x[E(np.array(-1)), E(np.array(2))], np.asarray(a[np.array(-1), np.array(2)]))
    assert_matches(x[1, E(np.array(2))], np.asarray(a[1, np.array(2)]))
    assert_matches(x[E(np.array(True))], a[np.array(True)])
    x[E(np.array(0))] = 100
    assert x[0, 0].item() == 100


def test_index_with_numpy_and_list_indices():
    a = random_array((6, 3), "int64")
    x = E(a)
    for key in [[1, 2], np.array([1, 2]), (np.array([1, 2]), [0, 1]), [[0, 1], [2, 3]],
                [np.array(1), np.array(2)], [E(np.array(1)), 3]]:
        np_key = [np.asarray(k) for k in key] if isinstance(key, list) and isinstance(key[0], ember.ndarray) else key
        assert_matches(x[key], a[np_key])


# ---------------------------------------------------------------- take & friends

def test_take():
    a = random_array((3, 4), "float32")
    for label, arr in layouts(a):
        x = E(arr)
        idx = np.array([3, 0, 1, -1])
        assert_matches(ember.take(x, E(idx), axis=1), np.take(arr, idx, axis=1))
        assert_matches(ember.take(x, idx, axis=-2 + 1), np.take(arr, idx, axis=-1))
        assert_matches(ember.take(x, E(idx)), np.take(arr, idx))
        assert_matches(ember.take(x, [[0, 1], [2, 2]], axis=0), np.take(arr, [[0, 1], [2, 2]], axis=0))
        assert_matches(ember.take(x, 2, axis=0), np.take(arr, 2, axis=0))
        assert_matches(x.take(E(idx), axis=1), np.take(arr, idx, axis=1))
        assert_matches(ember.take(x, [5, -7], axis=1, mode="wrap"), np.take(arr, [5, -7], axis=1, mode="wrap"))
        assert_matches(ember.take(x, [5, -7], axis=1, mode="clip"), np.take(arr, [5, -7], axis=1, mode="clip"))
        assert_matches(ember.index_select(x, 1, E(idx)), np.take(arr, idx, axis=1))
        assert_matches(ember.take(x, E(idx), dim=1), np.take(arr, idx, axis=1))
    out = ember.zeros((3, 2))
    r = ember.take(E(a), [1, 0], axis=1, out=out)
    assert r is out
    assert_matches(out, np.take(a, [1, 0], axis=1))
    assert_matches(ember.take(E(np.array(5)), [0, 0]), np.take(np.array(5), [0, 0]))
    assert_matches(ember.take(E(a), np.array([], dtype=np.int64), axis=0), np.take(a, np.array([], dtype=np.int64), axis=0))
    with pytest.raises(IndexError, match="take"):
        ember.take(E(a), ember.asarray([9]), axis=1)
    with pytest.raises(IndexError):
        ember.take(E(a), ember.asarray([1.0]), axis=1)
    with pytest.raises(np.exceptions.AxisError):
        ember.take(E(a), [0], axis=2)


@pytest.mark.parametrize("axis", [0, 1, -1, None])
def test_take_put_along_axis(axis):
    a = random_array((3, 4), "float64")
    for label, arr in layouts(a):
        x = E(arr)
        order = np.argsort(arr, axis=axis)
        assert_matches(ember.take_along_axis(x, E(order), axis=axis), np.take_along_axis(arr, order, axis=axis))
        if axis is None:
            continue
        y = E(arr.copy())
        first = np.take(order, [0], axis=axis)
        ember.put_along_axis(y, E(first), -1.0, axis=axis)
        a2 = arr.copy()
        np.put_along_axis(a2, first, -1.0, axis=axis)
        assert_matches(y, a2)
        vals = np.arange(first.size, dtype=np.float64).reshape(first.shape)
        ember.put_along_axis(y, E(first), E(vals), axis=axis)
        np.put_along_axis(a2, first, vals, axis=axis)
        assert_matches(y, a2)


def test_along_axis_errors():
    x = ember.zeros((3, 4))
    with pytest.raises(IndexError):
        ember.take_along_axis(x, ember.asarray([[9]]), axis=1)
    with pytest.raises((ValueError, IndexError)):
        ember.take_along_axis(x, ember.asarray([0]), axis=1)
    with pytest.raises(TypeError):
        ember.put_along_axis(np.zeros((3, 4)), ember.asarray([[0]]), 1.0, axis=1)
    v0 = x._version
    ember.put_along_axis(x, ember.asarray([[0]]), 1.0, axis=1)
    assert x._version > v0


@pytest.mark.parametrize("dtype", ["bool", "int8", "uint32", "float32", "complex128"])
def test_nonzero_argwhere_flatnonzero(dtype):
    base = random_array((3, 4), dtype)
    for label, a in layouts(base):
        x = E(a)
        got = ember.nonzero(x)
        assert isinstance(got, tuple)
        for g, e in zip(got, np.nonzero(a)):
            assert_matches(g, e.astype(np.int64))
        assert len(got) == 2
        assert_matches(x.nonzero()[1], np.nonzero(a)[1].astype(np.int64))
        assert_matches(ember.argwhere(x), np.argwhere(a).astype(np.int64))
        assert_matches(ember.flatnonzero(x), np.flatnonzero(a).astype(np.int64))
    e = ember.nonzero(ember.zeros((0, 3)))
    assert [v.shape for v in e] == [(0,), (0,)] and e[0].dtype == ember.int64
    assert_matches(ember.nonzero(E(np.array([0, 0, 0])))[0], np.zeros(0, np.int64))
    with pytest.raises(ValueError, match="0d"):
        ember.nonzero(ember.asarray(1))
    a = np.array([[0, 2, 0], [3, 0, 4]])
    for got, exp in zip(ember.where(E(a) > 1), np.where(a > 1)):
        assert_matches(got, exp)


def test_compress_extract_put_place():
    a = np.arange(12).reshape(3, 4)
    x = E(a)
    assert_matches(ember.compress([True, False, True], x, axis=0), np.compress([True, False, True], a, axis=0))
    assert_matches(ember.compress(E(np.array([False, True])), x, axis=1), np.compress([False, True], a, axis=1))
    assert_matches(ember.compress([True, False, True], x), np.compress([True, False, True], a))
    assert_matches(ember.extract(x % 3 == 0, x), np.extract(a % 3 == 0, a))
    y, b = E(a.copy()), a.copy()
    ember.put(y, [0, -1], [100, 200])
    np.put(b, [0, -1], [100, 200])
    assert_matches(y, b)
    ember.place(y, y > 5, [1, 2])
    np.place(b, b > 5, [1, 2])
    assert_matches(y, b)


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


@pytest.mark.parametrize("dtype", ["int32", "float32", "float64", "complex64"])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_index_add_vs_numpy_add_at(dtype, axis):
    base = random_array((4, 5), dtype)
    rng = np.random.default_rng(7)
    for label, a in layouts(base):
        n = a.shape[axis]
        idx = rng.integers(-n, n, size=7)
        sshape = list(a.shape)
        sshape[axis] = 7
        src = random_array(tuple(sshape), dtype, rng=rng)
        exp = a.copy()
        key = (slice(None),) * (axis % 2) + (idx,)
        np.add.at(exp, key, src)
        got = ember.index_add(E(a), axis, E(idx), E(src))
        assert_matches(got, exp)
        assert_matches(E(a), a)                 # input untouched
        exp2 = a.copy()
        np.add.at(exp2, key, src * 2)
        assert_matches(ember.index_add(E(a), axis, E(idx), E(src), alpha=2), exp2)


def test_index_add_errors():
    x = ember.zeros((3, 2))
    with pytest.raises(IndexError, match="index_add"):
        ember.index_add(x, 0, ember.asarray([3]), ember.ones((1, 2)))
    with pytest.raises(ValueError):
        ember.index_add(x, 0, ember.asarray([[0]]), ember.ones((1, 2)))
    with pytest.raises(np.exceptions.AxisError):
        ember.index_add(x, 2, ember.asarray([0]), ember.ones((1, 2)))
    with pytest.raises(TypeError):
        ember.index_add(ember.zeros(3, dtype=ember.int32), 0, ember.asarray([0]), ember.ones(1))
    with pytest.raises(IndexError):
        ember.index_add(x, 0, ember.asarray([0.0]), ember.ones((1, 2)))


def test_index_helpers():
    for got, exp in zip(ember.diag_indices(3), np.diag_indices(3)):
        assert_matches(got, exp.astype(np.int64))
    for got, exp in zip(ember.tril_indices(4, -1), np.tril_indices(4, -1)):
        assert_matches(got, exp.astype(np.int64))
    for got, exp in zip(ember.triu_indices(3, 1, 5), np.triu_indices(3, 1, 5)):
        assert_matches(got, exp.astype(np.int64))
    a = np.arange(20).reshape(4, 5)
    ix = ember.ix_([0, 2], [1, 3, 4])
    assert_matches(E(a)[ix], a[np.ix_([0, 2], [1, 3, 4])])
    assert_matches(ember.unravel_index(E(np.array([7, 3])), (4, 5))[1], np.unravel_index([7, 3], (4, 5))[1].astype(np.int64))
    assert_matches(ember.ravel_multi_index((E(np.array([1, 2])), E(np.array([2, 0]))), (4, 5)),
                   np.ravel_multi_index(([1, 2], [2, 0]), (4, 5)).astype(np.int64))
    assert_matches(ember.masked_fill(E(a), E(a > 10), -1), np.where(a > 10, -1, a))


def test_results_are_ember_arrays_and_fresh():
    a = np.arange(12).reshape(3, 4)
    x = E(a)
    for r in [x[[0, 1]], x[x > 3], x[True], ember.take(x, [1]), ember.take_along_axis(x, E(np.zeros((3, 1), np.int64)), 1),
              ember.argwhere(x), ember.flatnonzero(x), *ember.nonzero(x), ember.compress([1, 0, 1], x, 0)]:
        assert isinstance(r, ember.ndarray)
        assert not shares(r, x)


def test_too_many_dimensions_is_an_error_not_a_crash():
    x = ember.zeros((1,) * 32)
    with pytest.raises(IndexError, match="at most 32"):
        x[None]
    with pytest.raises(IndexError, match="at most 32"):
        x[..., None]
    # an index too large for an index variable: NumPy's errors (issue #24)
    for m in (np, ember):
        with pytest.raises(OverflowError, match="too large"):
            m.arange(3)[2 ** 63]
        with pytest.raises(IndexError, match="only integers"):
            m.arange(3)[2 ** 70]
    y = ember.arange(3)
    with pytest.raises(IndexError, match="only integers"):
        y[2 ** 70] = 1
    with pytest.raises(IndexError, match="out of bounds"):
        y[2 ** 62] = 1
