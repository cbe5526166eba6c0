"""Property tests of the core copy/cast/assign kernels against NumPy on random
shapes, strides (negative, zero-size, 0-d, broadcast) and dtypes."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

import ember
from helpers import ALL_DTYPES

dtypes = st.sampled_from(ALL_DTYPES)


@st.composite
def strided_arrays(draw, dtype=None):
    """A NumPy array of random dtype and shape, viewed with random steps (negative too)."""
    dt = np.dtype(draw(dtypes) if dtype is None else dtype)
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=5))
    elements = None
    if dt.kind == "f":
        elements = st.floats(-1e3, 1e3, width=dt.itemsize * 8, allow_nan=False)
    base = draw(hnp.arrays(dt, shape, elements=elements))
    if base.ndim == 0:
        return base
    steps = tuple(draw(st.sampled_from([1, 2, -1, -2])) for _ in range(base.ndim))
    return base[tuple(slice(None, None, s) for s in steps)]


@settings(max_examples=150, deadline=None)
@given(strided_arrays(), dtypes)
def test_astype_matches_numpy(arr, target):
    x = ember.asarray(arr)
    with np.errstate(all="ignore"):
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            expected = arr.astype(target)
    got = np.asarray(x.astype(target))
    assert got.dtype == expected.dtype and got.shape == expected.shape
    if np.dtype(target).kind in "iu" and arr.dtype.kind in "fc":
        # out-of-range float -> int is undefined in C and in NumPy alike: compare in range only
        info = np.iinfo(target)
        src = arr.real if arr.dtype.kind == "c" else arr
        with np.errstate(all="ignore"):
            ok = (src > info.min - 1) & (src < info.max + 1)
        np.testing.assert_array_equal(got[ok], expected[ok])
    else:
        np.testing.assert_array_equal(got, expected)


@settings(max_examples=100, deadline=None)
@given(strided_arrays())
def test_copy_is_contiguous_and_equal(arr):
    x = ember.asarray(arr)
    c = x.copy()
    assert c.is_contiguous()
    assert c.storage is not x.storage
    np.testing.assert_array_equal(np.asarray(c), arr)


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_setitem_broadcasts_like_numpy(data):
    arr = data.draw(strided_arrays(dtype="float64"))
    dst = np.zeros_like(arr)
    x = ember.asarray(np.zeros_like(arr))
    # a source broadcastable to the destination: drop leading dims, set some to 1
    nsrc = data.draw(st.integers(0, arr.ndim))
    shape = list(arr.shape[arr.ndim - nsrc:])
    for i in range(len(shape)):
        if data.draw(st.booleans()):
            shape[i] = 1
    src = np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape)
    dst[...] = src
    x[...] = ember.asarray(src)
    np.testing.assert_array_equal(np.asarray(x), dst)


def test_overlapping_assignment_reads_before_writing():
    a = np.arange(10.0)
    x = ember.asarray(a.copy())
    x[1:] = x[:-1]
    a[1:] = a[:-1].copy()
    np.testing.assert_array_equal(np.asarray(x), a)
    y = ember.asarray(np.arange(10.0))
    y[::-1] = y                        # full reversal onto itself
    np.testing.assert_array_equal(np.asarray(y), np.arange(10.0)[::-1])


def test_overlapping_inplace_op():
    a = np.arange(10.0)
    x = ember.asarray(a.copy())
    x[1:] += x[:-1]
    a[1:] += a[:-1]
    np.testing.assert_array_equal(np.asarray(x), a)


def test_broadcast_assignment_errors():
    x = ember.zeros((2, 3))
    with pytest.raises(ValueError, match=r"could not broadcast input array from shape \(4,\) into shape \(2,3\)"):
        x[...] = ember.zeros((4,))


@pytest.mark.parametrize("dtype", ["float16", "float32"])
@pytest.mark.filterwarnings("ignore:overflow")
def test_float16_rounding_matches_numpy(dtype):
    vals = np.array([0.1, 65504.0, 65520.0, 1e-8, 6e-8, -2.5e-5, np.inf, -np.inf, 5.96e-8,
                     2049.0, 2051.0, 1.0 + 2 ** -11, 1.0 + 3 * 2 ** -11], dtype=dtype)
    got = np.asarray(ember.asarray(vals.astype(np.float64)).astype("float16"))
    np.testing.assert_array_equal(got, vals.astype(np.float64).astype(np.float16))
    nan = np.asarray(ember.asarray(np.array([np.nan])).astype("float16"))
    assert np.isnan(nan[0])


@pytest.mark.parametrize("src", ["complex64", "complex128"])
@pytest.mark.parametrize("dst", ["complex64", "complex128", "float64", "bool"])
def test_complex_casts_keep_infinities(src, dst):
    a = np.array([0 + np.inf * 1j, np.inf + 0j, complex(np.nan, 1), -0.0 + 0j, 0j], dtype=src)
    with np.errstate(all="ignore"):
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            expected = a.astype(dst)
    got = np.asarray(ember.asarray(a).astype(dst))
    np.testing.assert_array_equal(got, expected)
    assert (np.signbit(got.real) == np.signbit(expected.real)).all()
