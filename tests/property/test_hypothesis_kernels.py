"""Property tests: elementwise and reduction kernels against NumPy on random
shapes, strides (negative, zero-size, 0-d, broadcast) and dtypes."""
import warnings

import numpy as np
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

import ember

REAL = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
        "float16", "float32", "float64"]
BINARY = ["add", "subtract", "multiply", "maximum", "minimum", "equal", "less", "logical_and",
          "floor_divide", "remainder", "bitwise_xor", "arctan2", "divide"]


def elements_for(dt):
    if dt.kind == "f":
        return st.floats(-100, 100, width=dt.itemsize * 8, allow_nan=False, allow_subnormal=False)
    return None


@st.composite
def strided(draw, dtype, shape):
    """An array of `shape` viewed with random positive/negative steps."""
    dt = np.dtype(dtype)
    steps = tuple(draw(st.sampled_from([1, 2, -1, -2])) for _ in shape)
    base_shape = tuple(max(1, n * abs(s)) if n else 0 for n, s in zip(shape, steps))
    base = draw(hnp.arrays(dt, base_shape, elements=elements_for(dt)))
    return base[tuple(slice(None, None, s) for s in steps)][tuple(slice(0, n) for n in shape)]


@st.composite
def binary_case(draw):
    dtype = draw(st.sampled_from(REAL))
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=5))
    # the second operand broadcasts: drop leading dims and set some to 1
    k = draw(st.integers(0, len(shape)))
    other = tuple(1 if draw(st.booleans()) else n for n in shape[len(shape) - k:])
    dtype2 = draw(st.sampled_from([dtype, dtype, "float32", "int64"]))
    a = draw(strided(dtype, shape))
    b = draw(strided(dtype2, other))
    if draw(st.booleans()):
        a, b = b, a
    return draw(st.sampled_from(BINARY)), a, b


def numpy_ref(name, a, b):
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if name in ("arctan2", "divide") and a.dtype.kind in "biu" and b.dtype.kind in "biu":
            return getattr(np, name)(a.astype(np.float32), b.astype(np.float32))
        return getattr(np, name)(a, b)


@settings(max_examples=300, deadline=None)
@given(binary_case())
def test_binary_ops_match_numpy(case):
    name, a, b = case
    try:
        exp = numpy_ref(name, a, b)
    except TypeError:
        try:
            getattr(ember, name)(ember.asarray(a), ember.asarray(b))
        except TypeError:
            return
        raise AssertionError(f"{name} accepted dtypes NumPy rejects: {a.dtype}, {b.dtype}")
    got = np.asarray(getattr(ember, name)(ember.asarray(a), ember.asarray(b)))
    assert got.shape == exp.shape
    assert got.dtype == exp.dtype, (name, a.dtype, b.dtype, got.dtype, exp.dtype)
    if exp.dtype.kind == "f":
        np.testing.assert_allclose(got, exp, rtol=2e-3 if exp.dtype == np.float16 else 1e-6,
                                   atol=1e-6, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, exp)


@st.composite
def reduction_case(draw):
    dtype = draw(st.sampled_from(REAL))
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=6))
    a = draw(strided(dtype, shape))
    axes = draw(st.one_of(st.none(), st.lists(st.integers(0, a.ndim - 1), unique=True, min_size=1)
                          .map(tuple)))
    return draw(st.sampled_from(["sum", "max", "min", "any", "all", "prod"])), a, axes


@settings(max_examples=300, deadline=None)
@given(reduction_case())
def test_reductions_match_numpy(case):
    name, a, axes = case
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if a.dtype == np.float16 and name in ("sum", "prod"):
            exp = getattr(np, name)(a.astype(np.float32), axis=axes).astype(np.float16)
        else:
            exp = getattr(np, name)(a, axis=axes)
    got = np.asarray(getattr(ember, name)(ember.asarray(a), axis=axes))
    assert got.shape == np.shape(exp) and got.dtype == np.asarray(exp).dtype
    if got.dtype.kind == "f":
        np.testing.assert_allclose(got, exp, rtol=5e-3 if got.dtype == np.float16 else 1e-5, atol=1e-4)
    else:
        np.testing.assert_array_equal(got, exp)
