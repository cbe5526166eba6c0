"""Regressions found by the Array API conformance suite and by scikit-learn's and
SciPy's array-API tests (issue 23), each checked against NumPy: sorted unique_*,
vecdot's dtype, finfo's Python floats, the inspection namespace's dtypes, NumPy's
keyword names next to the standard's positional-only form."""
import numpy as np
import pytest

import ember
from helpers import assert_matches, layouts, random_array


# ---------------------------------------------------------------- unique_*, sorted

def _np_unique(v):
    """NumPy's sorted unique with the Array API's NaN rule (NaNs distinct)."""
    return np.unique(v.reshape(-1), return_index=True, return_inverse=True,
                     return_counts=True, equal_nan=False)


UNIQUE_INPUTS = {
    "ints_unsorted": np.array([1, 0, 1, 3, 2, 0]),           # issue 23's example
    "wide_range": np.array([100, -7, 2 ** 40, 3, -7, 100], np.int64),
    "uint8": np.array([200, 3, 3, 0, 255], np.uint8),
    "float_nan": np.array([2.5, np.nan, -1.0, 2.5, np.nan, -0.0, 0.0]),
    "float32_2d": np.round(random_array((4, 5), "float32")),
    "bool": np.array([[True, False], [True, True]]),
    "zero_d": np.array(7, np.int32),
    "empty": np.zeros((0, 3)),
}


@pytest.mark.parametrize("name", list(UNIQUE_INPUTS))
def test_unique_functions_sorted(name):
    base = UNIQUE_INPUTS[name]
    values, index, inverse, counts = _np_unique(base)
    for label, a in layouts(base):
        x = ember.asarray(a)
        assert_matches(ember.unique_values(x), values)
        c = ember.unique_counts(x)
        assert_matches(c.values, values)
        assert_matches(c.counts, counts)
        i = ember.unique_inverse(x)
        assert_matches(i.values, values)
        assert_matches(i.inverse_indices, inverse.reshape(a.shape))
        u = ember.unique_all(x)
        assert_matches(u.values, values)
        assert_matches(u.indices, index)
        assert_matches(u.inverse_indices, inverse.reshape(a.shape))
        assert_matches(u.counts, counts)
        # the values rebuild x through the inverse (NaN compares by position)
        rebuilt = ember.take(u.values, u.inverse_indices.reshape(-1)).reshape(a.shape)
        np.testing.assert_array_equal(np.asarray(rebuilt), a)


def test_unique_values_positional_only_and_result_names():
    r = ember.unique_all(ember.asarray([3, 1, 3]))
    assert r._fields == ("values", "indices", "inverse_indices", "counts")
    assert ember.unique_values(ember.asarray([3, 1])).tolist() == [1, 3]
    for name in ("unique_all", "unique_counts", "unique_inverse", "unique_values"):
        with pytest.raises(TypeError):          # x is positional-only, as in NumPy 2
            getattr(np, name)(x=np.asarray([3, 1]))
        with pytest.raises(TypeError):
            getattr(ember, name)(x=ember.asarray([3, 1]))


# ---------------------------------------------------------------- vecdot keeps the promoted dtype

@pytest.mark.parametrize("d1,d2", [("uint8", "uint8"), ("int8", "int8"), ("int16", "uint8"),
                                   ("int32", "int64"), ("float32", "float32"),
                                   ("float32", "float64"), ("complex64", "complex64"),
                                   ("bool", "bool")])
def test_vecdot_dtype_as_numpy(d1, d2):
    rng = np.random.default_rng(1)
    a = random_array((3, 4), d1, rng, 0, 9)
    b = random_array((4,), d2, rng, 0, 9)
    expected = np.vecdot(a, b)
    got = ember.vecdot(ember.asarray(a), ember.asarray(b))
    assert got.dtype == expected.dtype
    assert_matches(got, expected, rtol=1e-6 if "float32" in (d1, d2) or "complex64" in (d1, d2)
                   else None)


def test_vecdot_uint8_wraps_as_numpy():
    a = np.full((2, 5), 200, np.uint8)
    assert_matches(ember.vecdot(ember.asarray(a), ember.asarray(a)), np.vecdot(a, a))


# ---------------------------------------------------------------- finfo / iinfo fields

@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "complex64", "complex128"])
def test_finfo_python_floats(dtype):
    exp = np.finfo(dtype)
    for arg in (getattr(ember, dtype), np.dtype(dtype), ember.zeros(1, dtype=dtype)):
        got = ember.finfo(arg)
        assert type(got.bits) is int and got.bits == exp.bits
        for f in ("eps", "max", "min", "smallest_normal", "tiny", "resolution", "epsneg"):
            v = getattr(got, f)
            assert type(v) is float and v == float(getattr(exp, f)), f
        assert got.dtype == exp.dtype and isinstance(got.dtype, np.dtype)
        assert (got.precision, got.nmant, got.maxexp) == (exp.precision, exp.nmant, exp.maxexp)


def test_finfo_bfloat16():
    import ml_dtypes
    exp = ml_dtypes.finfo(ember.bfloat16)
    got = ember.finfo(ember.bfloat16)
    assert type(got.eps) is float and got.eps == float(exp.eps)
    assert got.max == float(exp.max) and got.bits == 16


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int64", "uint64"])
def test_iinfo_python_ints(dtype):
    got, exp = ember.iinfo(getattr(ember, dtype)), np.iinfo(dtype)
    assert type(got.max) is int and type(got.min) is int and type(got.bits) is int
    assert (got.min, got.max, got.bits, got.dtype) == (exp.min, exp.max, exp.bits, exp.dtype)


# ---------------------------------------------------------------- NumPy's keyword names

def test_put_along_axis_numpy_keywords():
    base = random_array((3, 4), "float64")
    idx = np.argsort(base, axis=-1)[:, :2]
    vals = np.arange(6.0).reshape(3, 2)
    expected = base.copy()
    np.put_along_axis(expected, idx, values=vals, axis=-1)
    got = ember.asarray(base.copy())
    ember.put_along_axis(got, ember.asarray(idx), values=ember.asarray(vals), axis=-1)
    assert_matches(got, expected)
    got = ember.asarray(base.copy())
    ember.put_along_axis(got, indices=ember.asarray(idx), values=ember.asarray(vals), axis=-1)
    assert_matches(got, expected)


def test_numpy_keyword_names():
    a = random_array((3, 4, 2), "float64")
    x = ember.asarray(a)
    i = np.argsort(a, axis=1)
    assert_matches(ember.take_along_axis(x, indices=ember.asarray(i), axis=1),
                   np.take_along_axis(a, indices=i, axis=1))
    assert_matches(ember.take(x, indices=ember.asarray([0, 2]), axis=1),
                   np.take(a, indices=[0, 2], axis=1))
    assert_matches(ember.moveaxis(x, source=0, destination=-1),
                   np.moveaxis(a, source=0, destination=-1))
    assert_matches(ember.swapaxes(x, axis1=0, axis2=2), np.swapaxes(a, axis1=0, axis2=2))
    assert_matches(ember.repeat(x, repeats=2, axis=0), np.repeat(a, repeats=2, axis=0))
    assert_matches(ember.rot90(m=x, k=1), np.rot90(m=a, k=1))
    assert_matches(ember.stack(arrays=[x, x], axis=1), np.stack(arrays=[a, a], axis=1))
    assert_matches(ember.quantile(x, q=0.3, axis=0), np.quantile(a, q=0.3, axis=0))
    assert_matches(ember.percentile(x, q=30.0), np.percentile(a, q=30.0))
    assert ember.can_cast(from_=ember.int8, to=ember.int16) == np.can_cast(from_=np.int8, to=np.int16)
    m = random_array((3, 3), "float64")
    assert_matches(ember.linalg.matrix_power(ember.asarray(m), n=3),
                   np.linalg.matrix_power(m, n=3), rtol=1e-12)


def test_keyword_names_keep_gradients():
    a = ember.asarray(random_array((3, 4), "float64"), requires_grad=True)
    i = ember.asarray(np.argsort(np.asarray(a.detach()), axis=1))
    ember.take_along_axis(a, indices=i, axis=1).sum().backward()
    assert_matches(a.grad, np.ones((3, 4)))
    b = ember.asarray(random_array((2, 3), "float64"), requires_grad=True)
    ember.moveaxis(b, source=0, destination=1).sum().backward()
    assert_matches(b.grad, np.ones((2, 3)))


# ---------------------------------------------------------------- floor_divide with an infinite operand

INF, NAN = np.inf, np.nan


def _floordiv_oracle(a, b):
    """NumPy's floor_divide, except floor(a / b) where exactly one operand is infinite
    (the Array API's result; NumPy and Python give NaN for inf // 2 and -1 for 1 // -inf)."""
    with np.errstate(all="ignore"):
        return np.where(np.isinf(a) != np.isinf(b), np.floor(a / b), np.floor_divide(a, b))


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_floor_divide_infinite_operand(dtype):
    vals = np.array([INF, -INF, 7.0, -7.0, 0.0, -0.0, 2.5, NAN])
    a, b = [v.astype(dtype) for v in np.meshgrid(vals, vals, indexing="ij")]
    expected = _floordiv_oracle(a, b).astype(dtype)
    with np.errstate(all="ignore"):
        got = ember.floor_divide(ember.asarray(a), ember.asarray(b))
        num = ~np.isnan(expected)            # signed zeros and infinities as the oracle
        np.testing.assert_array_equal(np.signbit(np.asarray(got))[num], np.signbit(expected)[num])
        assert_matches(got, expected)
        assert_matches(ember.asarray(a) // ember.asarray(b), expected)
        x = ember.asarray(a.copy())
        x //= ember.asarray(b)
        assert_matches(x, expected)
        # a Python scalar operand, broadcast and strided layouts
        assert_matches(ember.asarray(a) // INF, _floordiv_oracle(a, dtype_scalar(dtype, INF)))
        assert_matches(ember.asarray(a[:, ::-2]) // ember.asarray(b[0, ::-2]),
                       _floordiv_oracle(a[:, ::-2], b[0, ::-2]).astype(dtype))


def dtype_scalar(dtype, v):
    return np.asarray(v, dtype=dtype)


def test_floor_divide_finite_operands_unchanged():
    a = random_array((50,), "float64", np.random.default_rng(3), -20, 20)
    b = random_array((50,), "float64", np.random.default_rng(4), -4, 4)
    assert_matches(ember.asarray(a) // ember.asarray(b), np.floor_divide(a, b))
    assert_matches(ember.asarray(a) % ember.asarray(b), np.remainder(a, b))


# ---------------------------------------------------------------- complex expm1

# (input, the standard's special value): C99's cexp special values minus one
EXPM1_SPECIAL = [
    (complex(0.0, 0.0), complex(0.0, 0.0)),
    (complex(-0.0, 0.0), complex(0.0, 0.0)),
    (complex(-0.0, -0.0), complex(0.0, -0.0)),
    (complex(INF, 0.0), complex(INF, 0.0)),
    (complex(INF, 2.0), complex(INF * np.cos(2.0), INF * np.sin(2.0))),
    (complex(-INF, 2.0), complex(-1.0, 0.0 * np.sin(2.0))),
    (complex(-INF, INF), complex(-1.0, 0.0)),
    (complex(-INF, NAN), complex(-1.0, 0.0)),
    (complex(INF, INF), complex(INF, NAN)),
    (complex(INF, NAN), complex(INF, NAN)),
    (complex(NAN, 0.0), complex(NAN, 0.0)),
    (complex(NAN, 1.0), complex(NAN, NAN)),
    (complex(1.0, INF), complex(NAN, NAN)),
    (complex(1.0, NAN), complex(NAN, NAN)),
]


def _same_complex(got, expected):
    """Equal parts, NaN matching NaN, zeros of the same sign."""
    for g, e in zip(got, expected):
        for gp, ep in ((g.real, e.real), (g.imag, e.imag)):
            assert (np.isnan(gp) and np.isnan(ep)) or \
                (gp == ep and np.signbit(gp) == np.signbit(ep)), (got, expected)


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_expm1_complex_special_values(dtype):
    z = np.array([c for c, _ in EXPM1_SPECIAL], dtype)
    expected = [e for _, e in EXPM1_SPECIAL]
    with np.errstate(all="ignore"):
        got = np.asarray(ember.expm1(ember.asarray(z)))
    assert got.dtype == dtype
    _same_complex(got.tolist(), expected)
    # conjugate symmetry: expm1(conj(z)) == conj(expm1(z)) (where the standard fixes the
    # sign: not for -inf + inf j / -inf + nan j, whose -1 +- 0j leaves it open)
    fixed = np.isfinite(z.imag) | ~np.isneginf(z.real)
    with np.errstate(all="ignore"):
        gc = np.asarray(ember.expm1(ember.asarray(np.conj(z[fixed]))))
    _same_complex(gc.tolist(), np.conj(got[fixed]).tolist())


@pytest.mark.parametrize("dtype,rtol", [("complex64", 2e-6), ("complex128", 1e-14)])
def test_expm1_complex_finite(dtype, rtol):
    rng = np.random.default_rng(5)
    z = random_array((40,), "complex128", rng, -3, 3)
    tiny = z * 1e-9                         # exp(z) - 1 would cancel here: series oracle
    got = ember.expm1(ember.asarray(np.concatenate([z, tiny]).astype(dtype)))
    z, tiny = z.astype(dtype).astype(np.complex128), tiny.astype(dtype).astype(np.complex128)
    expected = np.concatenate([np.exp(z) - 1, tiny + tiny ** 2 / 2 + tiny ** 3 / 6])
    np.testing.assert_allclose(np.asarray(got), expected, rtol=rtol, atol=0)


# ---------------------------------------------------------------- Python floats with an explicit dtype

@pytest.mark.parametrize("value", [2.5749250371013963e-260, 16777217.0, 4.5860098989617354e-11,
                                   1e300, -0.0])
def test_python_float_with_float64_dtype_keeps_its_value(value):
    """With the float32 default, a Python float given an explicit float64 dtype must not
    pass through float32 on the way (NumPy keeps every bit)."""
    prev = ember.get_default_dtype()
    ember.set_default_dtype(ember.float32)
    try:
        _check_float64_value(value)
    finally:
        ember.set_default_dtype(prev)


def _check_float64_value(value):
    expected = np.asarray(value, dtype=np.float64)
    for got in (ember.asarray(value, dtype=ember.float64),
                ember.asarray(value, dtype="float64"),
                ember.full((), value, dtype=ember.float64),
                ember.full((3,), value, dtype=ember.float64),
                ember.full_like(ember.zeros(2, dtype=ember.float64), value)):
        assert got.dtype == np.float64
        np.testing.assert_array_equal(np.asarray(got), np.broadcast_to(expected, got.shape))
        assert np.all(np.signbit(np.asarray(got)) == np.signbit(expected))
    z = ember.asarray(complex(value, value), dtype=ember.complex128)
    assert z.item() == complex(value, value)
    assert ember.asarray(value).dtype == np.float32              # no dtype: the default


def test_python_int_out_of_range_for_dtype_as_numpy():
    with pytest.raises(OverflowError):
        np.asarray(300, dtype=np.uint8)
    with pytest.raises(OverflowError):
        ember.asarray(300, dtype=ember.uint8)
    assert ember.asarray(-5, dtype=ember.int8).item() == -5
    assert ember.asarray(True, dtype=ember.float64).item() == 1.0
