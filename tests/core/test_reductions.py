"""Reductions against NumPy: dtypes x layouts x axes x keepdims, empty and 0-d
inputs, NaN behaviour, out=/dtype=, the dim=/keepdim= aliases, large inputs."""
import warnings

import numpy as np
import pytest

import ember
from helpers import ALL_DTYPES, assert_matches, layouts, random_array

AXES = [None, 0, 1, -1, (0, 1), (0, 2), (), (2, 0, 1)]
REAL = [d for d in ALL_DTYPES if not d.startswith("complex")]


def np_sum_like(fn, a, axis, keepdims=False):
    """NumPy's sum/prod with ember's float16 rule (accumulate in float32)."""
    if a.dtype == np.float16:
        return fn(a.astype(np.float32), axis=axis, keepdims=keepdims).astype(np.float16)
    return fn(a, axis=axis, keepdims=keepdims)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("axis", AXES)
def test_sum_prod(dtype, axis):
    base = random_array((3, 4, 5), dtype, low=-2, high=3)
    for label, a in layouts(base):
        x = ember.asarray(a)
        rtol = 2e-3 if dtype == "float16" else 1e-5
        assert_matches(ember.sum(x, axis=axis), np_sum_like(np.sum, a, axis), rtol=rtol)
        assert_matches(x.sum(axis=axis, keepdims=True), np_sum_like(np.sum, a, axis, True), rtol=rtol)
        assert_matches(ember.prod(x, axis=axis), np_sum_like(np.prod, a, axis), rtol=rtol)


@pytest.mark.parametrize("dtype", REAL)
@pytest.mark.parametrize("axis", AXES)
def test_min_max_argmin_argmax(dtype, axis):
    base = random_array((3, 4, 5), dtype)
    for label, a in layouts(base):
        x = ember.asarray(a)
        assert_matches(ember.max(x, axis=axis), np.max(a, axis=axis))
        assert_matches(x.min(axis=axis, keepdims=True), np.min(a, axis=axis, keepdims=True))
        if axis is None or isinstance(axis, int):
            assert_matches(ember.argmax(x, axis=axis), np.argmax(a, axis=axis))
            assert_matches(x.argmin(axis=axis, keepdims=True), np.argmin(a, axis=axis, keepdims=True))


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_complex_min_max_follow_numpy(dtype):
    a = random_array((4, 3), dtype)
    assert_matches(ember.max(ember.asarray(a), axis=0), np.max(a, axis=0))
    assert_matches(ember.argmin(ember.asarray(a)), np.argmin(a))


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("axis", [None, 0, (0, 1), -1])
def test_all_any_count_nonzero(dtype, axis):
    a = random_array((3, 4, 2), dtype, low=-1, high=2)
    for label, arr in layouts(a):
        x = ember.asarray(arr)
        assert_matches(ember.all(x, axis=axis), np.all(arr, axis=axis))
        assert_matches(ember.any(x, axis=axis, keepdims=True), np.any(arr, axis=axis, keepdims=True))
        assert_matches(ember.count_nonzero(x, axis=axis), np.count_nonzero(arr, axis=axis))


@pytest.mark.parametrize("dtype", ["int8", "int64", "uint16", "float16", "float32", "float64", "complex128"])
@pytest.mark.parametrize("axis", [None, 0, 1, (0, 1)])
def test_mean_var_std(dtype, axis):
    a = random_array((5, 6), dtype)
    x = ember.asarray(a)
    af = a.astype(np.float32) if a.dtype.kind in "biu" else a
    rtol = 3e-3 if dtype == "float16" else 2e-5
    exp_mean = np.mean(af.astype(np.float32) if dtype == "float16" else af, axis=axis).astype(af.dtype)
    assert_matches(ember.mean(x, axis=axis), exp_mean, rtol=rtol)
    for ddof in (0, 1):
        wide = np.complex128 if af.dtype.kind == "c" else np.float64
        ev = np.var(af.astype(wide), axis=axis, ddof=ddof).astype(np.finfo(af.dtype).dtype)
        assert_matches(ember.var(x, axis=axis, ddof=ddof), ev, rtol=max(rtol, 1e-4))
        assert_matches(ember.std(x, axis=axis, correction=ddof),
                       np.sqrt(ev), rtol=max(rtol, 1e-4))


def test_torch_aliases_dim_keepdim():
    a = random_array((3, 4), "float32")
    x = ember.asarray(a)
    assert_matches(x.sum(dim=1, keepdim=True), a.sum(axis=1, keepdims=True))
    assert_matches(ember.mean(x, dim=0), a.mean(axis=0))
    # dim= is PyTorch's keyword, so max returns PyTorch's (values, indices)
    assert_matches(x.max(dim=1).values, a.max(axis=1))
    assert_matches(x.max(dim=1).indices, a.argmax(axis=1))
    assert_matches(x.argmax(dim=0), a.argmax(axis=0))
    with pytest.raises(TypeError, match="either axis= or dim="):
        ember.sum(x, axis=0, dim=0)


def test_dtype_and_out_arguments():
    a = np.arange(300, dtype=np.int8)
    x = ember.asarray(a)
    assert_matches(ember.sum(x), np.sum(a))                         # int8 sums in int64
    assert_matches(ember.sum(x, dtype=ember.int8), np.sum(a, dtype=np.int8))
    assert_matches(ember.sum(x, dtype=ember.float64), np.sum(a, dtype=np.float64))
    out = ember.empty((), dtype=ember.float64)
    res = ember.sum(ember.asarray(np.ones((3, 3))), out=out)
    assert res is out and out.item() == 9.0
    with pytest.raises(ValueError, match="shape"):
        ember.sum(ember.ones((3, 3)), axis=0, out=ember.empty((4,)))


def test_empty_reductions():
    e = ember.zeros((0, 3))
    assert_matches(ember.sum(e), np.sum(np.zeros((0, 3), np.float32)))
    assert_matches(ember.prod(e, axis=0), np.prod(np.zeros((0, 3), np.float32), axis=0))
    assert_matches(ember.max(e, axis=1), np.zeros((0,), np.float32))
    assert_matches(ember.all(e), np.array(True))
    assert_matches(ember.any(e), np.array(False))
    with pytest.raises(ValueError, match="zero-size array to reduction operation maximum"):
        ember.max(e)
    with pytest.raises(ValueError, match="empty"):
        ember.argmax(e)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert np.isnan(ember.mean(e).item())


def test_zero_d_inputs():
    x = ember.asarray(np.float64(2.5))
    assert ember.sum(x).item() == 2.5
    assert ember.max(x, axis=0).item() == 2.5
    assert ember.argmax(x).item() == 0
    assert ember.cumsum(x).tolist() == [2.5]


def test_nan_propagation_and_first_occurrence():
    a = np.array([[1.0, np.nan, 3.0], [2.0, 2.0, 1.0]], dtype=np.float32)
    x = ember.asarray(a)
    assert_matches(ember.max(x, axis=1), np.max(a, axis=1))
    assert_matches(ember.min(x), np.min(a))
    assert_matches(ember.argmax(x, axis=1), np.argmax(a, axis=1))
    assert_matches(ember.argmin(x, axis=1), np.argmin(a, axis=1))
    assert_matches(ember.sum(x, axis=1), np.sum(a, axis=1))
    ties = np.array([3, 7, 7, 1, 7])
    assert ember.argmax(ember.asarray(ties)).item() == 1


def test_bad_axes_raise_axis_error():
    x = ember.zeros((2, 3))
    with pytest.raises(np.exceptions.AxisError):
        ember.sum(x, axis=2)
    with pytest.raises(np.exceptions.AxisError):
        ember.argmax(x, axis=-3)
    with pytest.raises(ValueError, match="repeated axis"):
        ember.sum(x, axis=(0, 0))


@pytest.mark.parametrize("dtype", ["int32", "uint8", "float16", "float32", "float64", "complex64"])
@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_cumsum_cumprod(dtype, axis):
    base = random_array((4, 5), dtype, low=-2, high=3)
    for label, a in layouts(base):
        x = ember.asarray(a)
        rtol = 3e-3 if dtype == "float16" else 1e-5
        exp_s = np.cumsum(a.astype(np.float32), axis=axis).astype(np.float16) if dtype == "float16" \
            else np.cumsum(a, axis=axis)
        exp_p = np.cumprod(a.astype(np.float32), axis=axis).astype(np.float16) if dtype == "float16" \
            else np.cumprod(a, axis=axis)
        assert_matches(ember.cumsum(x, axis=axis), exp_s, rtol=rtol)
        assert_matches(x.cumprod(axis=axis), exp_p, rtol=rtol)


def test_cumulative_sum_array_api():
    a = np.arange(6).reshape(2, 3)
    x = ember.asarray(a)
    assert_matches(ember.cumulative_sum(x, axis=1), np.cumulative_sum(a, axis=1))
    assert_matches(ember.cumulative_sum(x, axis=0, include_initial=True),
                   np.cumulative_sum(a, axis=0, include_initial=True))
    assert_matches(ember.cumulative_prod(x + 1, axis=1, include_initial=True),
                   np.cumulative_prod(a + 1, axis=1, include_initial=True))
    with pytest.raises(ValueError, match="axis"):
        ember.cumulative_sum(x)


@pytest.mark.parametrize("axis", [None, 0, 1, (0, 1)])
def test_logsumexp(axis):
    a = random_array((4, 6), "float64", low=-50, high=50)
    a[0, 0] = -np.inf
    x = ember.asarray(a)
    m = np.max(a, axis=axis, keepdims=True)
    exp = np.log(np.sum(np.exp(a - m), axis=axis, keepdims=True)) + m
    assert_matches(ember.logsumexp(x, axis=axis, keepdims=True), exp)
    assert_matches(ember.logsumexp(x, axis=axis), np.squeeze(exp, axis=axis if axis is not None else (0, 1)))
    big = ember.asarray(np.array([1000.0, 1000.0]))
    assert abs(ember.logsumexp(big).item() - (1000 + np.log(2))) < 1e-9
    allneg = ember.asarray(np.array([-np.inf, -np.inf]))
    assert ember.logsumexp(allneg).item() == -np.inf


def test_large_inputs_use_threads_and_stay_accurate():
    rng = np.random.default_rng(7)
    a = rng.normal(size=1_000_003).astype(np.float32)
    x = ember.asarray(a)
    np.testing.assert_allclose(ember.sum(x).item(), a.astype(np.float64).sum(), rtol=1e-5)
    m = rng.normal(size=(700, 600)).astype(np.float32)
    y = ember.asarray(m)
    for axis in (0, 1):
        assert_matches(ember.sum(y, axis=axis), m.sum(axis=axis), rtol=1e-4, atol=1e-4)
        assert_matches(ember.max(y, axis=axis), m.max(axis=axis))
        assert_matches(ember.sum(y.T, axis=axis), m.T.sum(axis=axis), rtol=1e-4, atol=1e-4)
    assert ember.argmax(x).item() == int(np.argmax(a))
    ints = rng.integers(-1000, 1000, size=500_001)
    assert ember.sum(ember.asarray(ints)).item() == int(ints.sum())


@pytest.mark.parametrize("name", ["nansum", "nanmean", "nanmax", "nanmin", "median", "nanmedian", "ptp"])
def test_numpy_long_tail(name):
    a = random_array((4, 5), "float64")
    a[1, 2] = np.nan if name.startswith("nan") else a[1, 2]
    x = ember.asarray(a)
    assert_matches(getattr(ember, name)(x, axis=1), getattr(np, name)(a, axis=1))
    assert_matches(ember.quantile(x, 0.3, axis=0), np.quantile(a, 0.3, axis=0))
    assert_matches(ember.diff(x, axis=0), np.diff(a, axis=0))


@pytest.mark.parametrize("dtype", ["float64", "int16", "bool"])
@pytest.mark.parametrize("shape, axis", [((0,), -1), ((5,), 0), ((3, 4), 1), ((3, 4), 0)])
def test_diff_of_any_order(dtype, shape, axis):
    """Every n up to past the axis' length matches NumPy, with prepend/append too; a huge n
    (NumPy loops n times: found by tests/fuzz) returns the same empty result at once."""
    a = random_array(shape, dtype)
    x = ember.asarray(a)
    for n in range(0, shape[axis] + 3):
        assert_matches(ember.diff(x, n=n, axis=axis), np.diff(a, n=n, axis=axis))
        assert_matches(ember.diff(x, n=n, axis=axis, prepend=1, append=0),
                       np.diff(a, n=n, axis=axis, prepend=1, append=0))
    far = np.diff(a, n=shape[axis] + 2, axis=axis)
    assert_matches(ember.diff(x, n=10 ** 12, axis=axis), far)
    assert_matches(ember.diff(x[..., ::-1], n=np.int64(2 ** 62), axis=axis), far)
    with pytest.raises(ValueError):
        ember.diff(x, n=-1, axis=axis)


def test_ufunc_reduce_matches_sum():
    a = random_array((3, 4), "int16")
    assert_matches(ember.add.reduce(ember.asarray(a), axis=1), np.add.reduce(a, axis=1))
    assert_matches(ember.maximum.reduce(ember.asarray(a), axis=0), np.maximum.reduce(a, axis=0))
