"""dtype objects and dtype functions vs NumPy: result_type (with weak Python
scalars and ember's default float dtype), promote_types, can_cast, finfo,
iinfo, isdtype and the constants."""
import math

import numpy as np
import pytest

import ember
from helpers import ALL_DTYPES

KINDS = ["bool", "signed integer", "unsigned integer", "integral", "real floating",
         "complex floating", "numeric"]


def test_dtype_objects_are_numpys():
    for name in ALL_DTYPES:
        assert getattr(ember, name) is getattr(np, name)
    assert ember.bool is np.bool_
    assert ember.zeros(1).dtype == ember.float32
    assert ember.dtype("int16") == np.int16
    assert ember.zeros(1, dtype=ember.dtype("complex64")).dtype == np.complex64
    assert ember.newaxis is None
    assert (ember.pi, ember.e, ember.euler_gamma) == (math.pi, math.e, np.euler_gamma)
    assert ember.inf == math.inf and math.isnan(ember.nan)
    assert ember.zeros((2,))[:, ember.newaxis].shape == (2, 1)


@pytest.mark.parametrize("a", ALL_DTYPES)
@pytest.mark.parametrize("b", ALL_DTYPES)
def test_promotion_table_matches_numpy(a, b):
    exp = np.result_type(a, b)
    assert ember.result_type(np.dtype(a), np.dtype(b)) == exp
    assert ember.result_type(getattr(ember, a), b) == exp            # scalar types and strings
    assert ember.promote_types(a, b) == np.promote_types(a, b)
    for casting in ("no", "equiv", "safe", "same_kind", "unsafe"):
        assert ember.can_cast(a, b, casting=casting) == np.can_cast(a, b, casting=casting)


@pytest.mark.parametrize("a", ALL_DTYPES)
def test_result_type_of_arrays_and_mixed_arguments(a):
    x = ember.zeros(1, dtype=a)
    assert ember.result_type(x) == np.dtype(a)
    assert ember.result_type(x, ember.zeros(2, dtype="int8"), "uint8") == \
        np.result_type(a, "int8", "uint8")
    assert ember.result_type(np.zeros(1, dtype=a), x) == np.dtype(a)        # NumPy arrays count too
    assert ember.result_type(x, np.float64(1)) == np.result_type(a, np.float64)   # NumPy scalars strong
    assert ember.can_cast(x, "complex128") == np.can_cast(a, "complex128")


@pytest.mark.parametrize("a", ALL_DTYPES)
@pytest.mark.parametrize("scalar", [True, 1, -1, 1000, 2.5, 1j])
def test_result_type_with_weak_python_scalars(a, scalar):
    x = ember.zeros(1, dtype=a)
    got = ember.result_type(x, scalar)
    exp = np.result_type(np.zeros(1, dtype=a), scalar)
    kind = np.dtype(a).kind
    if kind in "biu" and isinstance(scalar, float):
        exp = np.dtype(np.float32)                  # ember: default float dtype, not float64
    elif kind in "biu" and isinstance(scalar, complex):
        exp = np.dtype(np.complex64)                # ... and its complex partner
    assert got == exp
    assert ember.result_type(scalar, x) == got     # order does not matter


def test_result_type_follows_the_default_dtype():
    i8 = ember.zeros(1, dtype=ember.int8)
    assert ember.result_type(i8, 1.0) == np.float32
    assert ember.result_type(1, 2.0) == np.float32
    assert ember.result_type(1.0) == np.float32
    assert ember.result_type(1j) == np.complex64
    assert ember.result_type(1) == np.int64
    assert ember.result_type(True) == np.bool_
    assert ember.result_type(True, 1) == np.int64
    assert ember.result_type(ember.zeros(1, dtype=ember.float16), 1.0) == np.float16
    assert ember.result_type(ember.zeros(1, dtype=ember.float16), 1j) == np.complex64
    assert ember.result_type(ember.zeros(1, dtype=ember.float64), 1j) == np.complex128
    ember.set_default_dtype(ember.float64)
    assert ember.get_default_dtype() == np.float64
    assert ember.result_type(i8, 1.0) == np.float64
    assert ember.result_type(i8, 1j) == np.complex128
    assert ember.result_type(1.0) == np.float64
    ember.set_default_dtype(ember.float32)
    assert ember.get_default_dtype() == np.float32
    with pytest.raises(TypeError):
        ember.set_default_dtype(ember.int32)


def test_result_type_errors():
    with pytest.raises(ValueError, match="result_type"):
        ember.result_type()
    with pytest.raises(TypeError):
        ember.result_type(ember.zeros(1), "U3")
    with pytest.raises(TypeError):
        ember.result_type(object())
    with pytest.raises(TypeError, match="can_cast"):
        ember.can_cast(1, ember.int8)
    with pytest.raises(TypeError):
        ember.promote_types("int8", object)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "complex64", "complex128"])
def test_finfo(dtype):
    got = ember.finfo(getattr(ember, dtype))
    exp = np.finfo(dtype)
    for attr in ("bits", "eps", "max", "min", "smallest_normal", "resolution", "dtype"):
        assert getattr(got, attr) == getattr(exp, attr)
    assert ember.finfo(ember.zeros(1, dtype=dtype)).eps == exp.eps       # arrays accepted
    assert ember.finfo(np.dtype(dtype)).max == exp.max


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"])
def test_iinfo(dtype):
    got = ember.iinfo(getattr(ember, dtype))
    exp = np.iinfo(dtype)
    assert (got.min, got.max, got.bits, got.dtype) == (exp.min, exp.max, exp.bits, exp.dtype)
    assert ember.iinfo(ember.zeros(1, dtype=dtype)).max == exp.max


def test_finfo_iinfo_errors():
    for dt in ("bool", "int8", "uint64"):
        with pytest.raises(ValueError, match="finfo"):
            ember.finfo(dt)
    for dt in ("bool", "float32", "complex64"):
        with pytest.raises(ValueError, match="iinfo"):
            ember.iinfo(dt)
    with pytest.raises(TypeError, match="finfo"):
        ember.finfo("U3")


def _expected_kind(dt, kind):
    k = np.dtype(dt).kind
    return {"bool": k == "b", "signed integer": k == "i", "unsigned integer": k == "u",
            "integral": k in "iu", "real floating": k == "f", "complex floating": k == "c",
            "numeric": k in "iufc"}[kind]


@pytest.mark.parametrize("dt", ALL_DTYPES)
def test_isdtype_kinds(dt):
    for kind in KINDS:
        assert ember.isdtype(getattr(ember, dt), kind) == _expected_kind(dt, kind), (dt, kind)
        assert ember.isdtype(np.dtype(dt), kind) == _expected_kind(dt, kind)
    assert ember.isdtype(getattr(ember, dt), getattr(ember, dt))
    assert ember.isdtype(np.dtype(dt), ("bool", "numeric"))          # tuples: any of them
    assert ember.isdtype(np.dtype(dt), (ember.int8, "real floating")) == (dt == "int8" or dt.startswith("float"))


def test_isdtype_errors():
    with pytest.raises(ValueError, match="isdtype"):
        ember.isdtype(ember.int8, "strings")
    with pytest.raises(TypeError, match="isdtype"):
        ember.isdtype(ember.zeros(1), "numeric")       # the Array API takes dtypes, not arrays


def test_dtype_keyword_accepts_all_spellings():
    for spelling in (ember.int16, np.int16, np.dtype("int16"), "int16", "i2"):
        assert ember.zeros(1, dtype=spelling).dtype == np.int16
    # Python's types mean what they mean in NumPy (and PyTorch): float is float64
    for spelling in (float, int, bool, complex, "float", "int", "bool", "complex"):
        assert ember.zeros(1, dtype=spelling).dtype == np.zeros(1, dtype=spelling).dtype
