"""Sorting, set functions and random numbers."""
import numpy as np
import pytest

import ember
from helpers import assert_matches, layouts, random_array


@pytest.mark.parametrize("dtype", ["bool", "int8", "uint32", "int64", "float16", "float32", "float64"])
@pytest.mark.parametrize("axis", [-1, 0, None])
def test_sort_argsort(dtype, axis):
    base = random_array((4, 6), dtype, low=-3, high=3)       # many ties
    for label, a in layouts(base):
        x = ember.asarray(a)
        flat = a.reshape(-1) if axis is None else a
        ax = 0 if axis is None else axis
        assert_matches(ember.sort(x, axis=axis), np.sort(flat, axis=ax, kind="stable"))
        assert_matches(ember.argsort(x, axis=axis), np.argsort(flat, axis=ax, kind="stable"))
        # descending and stable: equal elements keep their original order
        idx = np.asarray(ember.argsort(x, axis=axis, descending=True))
        vals = np.take_along_axis(flat, idx, axis=ax)
        assert (np.diff(vals.astype(np.float64), axis=ax) <= 0).all()
        key = -flat.astype(np.float64)
        assert_matches(ember.argsort(x, axis=axis, descending=True), np.argsort(key, axis=ax, kind="stable"))
        assert_matches(ember.sort(x, axis=axis, descending=True), np.take_along_axis(flat, idx, axis=ax))


def test_sort_nan_and_method():
    a = np.array([3.0, np.nan, 1.0, 2.0])
    assert_matches(ember.sort(ember.asarray(a)), np.sort(a))
    x = ember.asarray(np.array([[3, 1, 2], [9, 8, 7]]))
    v = x._version
    x.sort(axis=1)
    assert x.tolist() == [[1, 2, 3], [7, 8, 9]] and x._version > v


def test_searchsorted():
    a = np.array([1, 2, 2, 5])
    v = np.array([0, 2, 3, 6])
    for side in ("left", "right"):
        assert_matches(ember.searchsorted(ember.asarray(a), ember.asarray(v), side=side),
                       np.searchsorted(a, v, side=side))
    with pytest.raises(ValueError, match="1-dimensional"):
        ember.searchsorted(ember.zeros((2, 2)), ember.zeros(1))


def test_unique_family():
    a = np.array([3, 1, 3, 2, 1, 1])
    x = ember.asarray(a)
    # the Array API's unique_* sorted, as ember documents (NumPy 2.3+'s leave the order
    # unspecified): np.unique with NaNs distinct is the oracle
    ev, ei, einv, ec = np.unique(a, return_index=True, return_inverse=True, return_counts=True,
                                 equal_nan=False)
    assert_matches(ember.unique_values(x), ev)
    r = ember.unique_counts(x)
    assert_matches(r.values, ev)
    assert_matches(r.counts, ec)
    r = ember.unique_inverse(x)
    assert_matches(r.inverse_indices, einv)
    r = ember.unique_all(x)
    for got, e in zip(r, (ev, ei, einv, ec)):
        assert_matches(got, e)
    vals, idx, inv, cnt = ember.unique(x, return_index=True, return_inverse=True, return_counts=True)
    evals, eidx, einv, ecnt = np.unique(a, return_index=True, return_inverse=True, return_counts=True)
    for g, ex in ((vals, evals), (idx, eidx), (inv, einv), (cnt, ecnt)):
        assert_matches(g, ex)
    f = np.array([np.nan, 1.0, np.nan])
    assert_matches(ember.unique_values(ember.asarray(f)), np.unique(f, equal_nan=False))


def test_topk_and_sets():
    v, i = ember.topk(ember.asarray([1, 5, 3, 5]), 2)
    assert v.tolist() == [5, 5] and i.tolist() == [1, 3]
    v, i = ember.topk(ember.asarray([1, 5, 3]), 2, largest=False)
    assert v.tolist() == [1, 3]
    assert_matches(ember.isin(ember.asarray([1, 2, 3]), ember.asarray([2])), np.isin([1, 2, 3], [2]))
    assert_matches(ember.intersect1d(ember.asarray([1, 2, 3]), ember.asarray([2, 3, 4])), np.array([2, 3]))
    assert_matches(ember.bincount(ember.asarray([0, 1, 1, 3])), np.bincount([0, 1, 1, 3]))


def test_random_reproducible_and_typed():
    g1, g2 = ember.random.default_rng(123), ember.random.default_rng(123)
    assert_matches(g1.random((3, 4)), np.asarray(g2.random((3, 4))))
    assert g1.random(2).dtype == np.float32
    assert g1.random(2, dtype=ember.float64).dtype == np.float64
    assert g1.standard_normal((2,)).dtype == np.float32
    assert g1.integers(0, 5, size=3).dtype == np.int64
    ember.random.seed(7)
    a = ember.random.randn(5)
    ember.random.seed(7)
    b = ember.random.randn(5)
    assert_matches(a, np.asarray(b))
    ember.random.manual_seed(1)
    s = ember.random.get_state()
    c = ember.random.rand(3)
    ember.random.set_state(s)
    assert_matches(ember.random.rand(3), np.asarray(c))
    with pytest.raises(TypeError):
        g1.random(2, dtype=ember.int32)


def test_random_distributions_have_the_right_moments():
    g = ember.random.default_rng(0)
    n = 100_000
    u = np.asarray(g.uniform(2.0, 4.0, size=n), dtype=np.float64)
    assert abs(u.mean() - 3.0) < 4 * (2 / np.sqrt(12)) / np.sqrt(n) and u.min() >= 2 and u.max() < 4
    z = np.asarray(g.normal(1.0, 2.0, size=n), dtype=np.float64)
    assert abs(z.mean() - 1.0) < 4 * 2 / np.sqrt(n)
    assert abs(z.std() - 2.0) < 0.05
    ints = np.asarray(ember.random.randint(0, 10, size=n))
    assert ints.min() == 0 and ints.max() == 9
    p = np.asarray(ember.random.permutation(50))
    assert sorted(p.tolist()) == list(range(50))
    c = np.asarray(ember.random.choice(10, size=5, replace=False))
    assert len(set(c.tolist())) == 5
    x = ember.arange(10)
    v = x._version
    ember.random.shuffle(x)
    assert sorted(x.tolist()) == list(range(10)) and x._version > v
    b = np.asarray(g.bernoulli(0.25, size=n))
    assert abs(b.mean() - 0.25) < 0.01
