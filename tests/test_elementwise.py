"""Every elementwise op against NumPy: dtypes x layouts x shapes, scalars,
broadcasting, out=, in-place operators and the integer corner cases."""
import operator
import warnings

import numpy as np
import pytest

import ember
from ember._core import elementwise as _ew
from helpers import ALL_DTYPES, SHAPES, assert_matches, layouts, random_array

OPS = _ew.op_names()
FLOAT_VALUED = {"divide", "arctan2", "hypot", "copysign", "nextafter", "logaddexp",
                "logaddexp2", "heaviside", "reciprocal", "sqrt", "cbrt", "exp", "exp2", "expm1",
                "log", "log2", "log10", "log1p", "sin", "cos", "tan", "arcsin", "arccos",
                "arctan", "sinh", "cosh", "tanh", "arcsinh", "arccosh", "arctanh", "deg2rad",
                "rad2deg", "rint"}


def numpy_expected(name, *args):
    """NumPy's answer under ember's documented rule: integer/bool inputs to
    float-valued functions are computed in the default float dtype (float32)."""
    uf = getattr(np, name)
    arrays = [a for a in args if isinstance(a, np.ndarray)]
    if name in FLOAT_VALUED and all(a.dtype.kind in "biu" for a in arrays):
        args = tuple(a.astype(np.float32) if isinstance(a, np.ndarray) else a for a in args)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return uf(*args)


def values_for(name, dtype, shape, seed=0):
    rng = np.random.default_rng(seed)
    a = random_array(shape, dtype, rng)
    dt = np.dtype(dtype)
    if name in ("arccosh",) and dt.kind in "fc":
        a = np.abs(a) + 1
    if name in ("arcsin", "arccos", "arctanh") and dt.kind == "f":
        a = (a / 6).astype(dt)
    if name in ("left_shift", "right_shift") and dt.kind in "iu":
        a = (np.abs(a.astype(np.int64)) % (dt.itemsize * 8)).astype(dt)
    return a


def call(name, *args, **kw):
    return getattr(ember, name)(*args, **kw)


def supported(name, dtype):
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            numpy_expected(name, *([np.ones(1, dtype=dtype)] * getattr(np, name).nin))
        return True
    except TypeError:
        return False


UNARY = [n for n in OPS if getattr(np, n).nin == 1]
BINARY = [n for n in OPS if getattr(np, n).nin == 2]


def rtol_for(dtype):
    return {"float16": 2e-3, "float32": 2e-5, "complex64": 2e-5}.get(np.dtype(dtype).name, 1e-12)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("name", UNARY)
def test_unary_matches_numpy(name, dtype):
    if not supported(name, dtype):
        with pytest.raises(TypeError, match=name):
            call(name, ember.asarray(np.ones(3, dtype=dtype)))
        return
    base = values_for(name, dtype, (3, 4))
    for label, arr in layouts(base):
        got = call(name, ember.asarray(arr))
        exp = numpy_expected(name, arr)
        rt = rtol_for(got.dtype) * (50 if name in ("tan", "expm1", "log1p") else 1)
        assert_matches(got, exp, rtol=rt, atol=1e-6 if got.dtype.kind in "fc" else None)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("name", BINARY)
def test_binary_matches_numpy(name, dtype):
    if not supported(name, dtype):
        with pytest.raises(TypeError, match=name):
            call(name, ember.asarray(np.ones(3, dtype=dtype)), ember.asarray(np.ones(3, dtype=dtype)))
        return
    a = values_for(name, dtype, (3, 4), 0)
    b = values_for(name, dtype, (3, 4), 1)
    if name in ("floor_divide", "remainder", "fmod", "divide") and np.dtype(dtype).kind in "iu":
        b[0, 0] = 0                      # division by zero must not crash (NumPy gives 0)
    if name == "power" and np.dtype(dtype).kind == "i":
        b = np.abs(b) % 4
    for label, arr in layouts(a):
        got = call(name, ember.asarray(arr), ember.asarray(b))
        exp = numpy_expected(name, arr, b)
        assert_matches(got, exp, rtol=rtol_for(got.dtype), atol=1e-6 if got.dtype.kind in "fc" else None)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("name", ["add", "multiply", "less", "maximum", "arctan2", "exp", "negative"])
def test_shapes_including_0d_and_empty(name, shape):
    a = values_for(name, "float64", shape, 0)
    if getattr(np, name).nin == 1:
        assert_matches(call(name, ember.asarray(a)), numpy_expected(name, a))
    else:
        b = values_for(name, "float64", shape, 1)
        assert_matches(call(name, ember.asarray(a), ember.asarray(b)), numpy_expected(name, a, b))


@pytest.mark.parametrize("sa,sb", [((3, 1), (1, 4)), ((2, 3, 4), (4,)), ((5,), ()), ((0, 3), (1, 3)),
                                   ((2, 1, 3), (2, 4, 1))])
def test_broadcasting(sa, sb):
    a, b = random_array(sa, "float32"), random_array(sb, "float32", np.random.default_rng(1))
    assert_matches(ember.asarray(a) * ember.asarray(b), a * b)
    assert_matches(ember.asarray(a) - b, a - b)        # NumPy operand on the right


def test_broadcast_error_names_op_and_shapes():
    with pytest.raises(ValueError, match=r"add: operands could not be broadcast together with shapes \(2,3\) \(4,\)"):
        ember.zeros((2, 3)) + ember.zeros((4,))


@pytest.mark.parametrize("dtype", ["bool", "int8", "uint8", "int32", "int64", "float16", "float32",
                                   "float64", "complex64"])
@pytest.mark.parametrize("scalar", [True, 3, -2, 2.5, 1j])
def test_python_scalars_are_weak(dtype, scalar):
    a = random_array((4,), dtype)
    x = ember.asarray(a)
    if isinstance(scalar, int) and not isinstance(scalar, bool) and scalar < 0 and np.dtype(dtype).kind == "u":
        with pytest.raises(OverflowError):
            x + scalar
        return
    for op in (operator.add, operator.mul):
        got = op(x, scalar)
        rgot = op(scalar, x)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            exp = op(a, scalar)
        if np.dtype(dtype).kind in "biu" and isinstance(scalar, (float, complex)):
            # ember: integer array with a Python float/complex -> default float/complex dtype
            exp = op(a.astype(np.float32 if isinstance(scalar, float) else np.complex64), scalar)
        assert_matches(got, exp, rtol=1e-3)
        assert_matches(rgot, exp, rtol=1e-3)


def test_scalar_out_of_range_is_an_error_for_arithmetic_but_not_comparison():
    x = ember.asarray(np.arange(4, dtype=np.uint8))
    with pytest.raises(OverflowError, match="300"):
        x + 300
    assert_matches(x < 300, np.ones(4, dtype=bool))
    assert_matches(x == -1, np.zeros(4, dtype=bool))
    assert_matches(ember.asarray(np.arange(3)) > 1.5, np.arange(3) > 1.5)


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64"])
def test_integer_division_corner_cases(dtype):
    info = np.iinfo(dtype)
    a = np.array([info.min, info.min, 7, -7, 7, 0], dtype=dtype)
    b = np.array([-1, 0, 0, 2, -2, 0], dtype=dtype)
    with np.errstate(all="ignore"):
        for name in ("floor_divide", "remainder", "fmod"):
            assert_matches(call(name, ember.asarray(a), ember.asarray(b)), getattr(np, name)(a, b))


@pytest.mark.parametrize("dtype", ["int8", "uint16", "int32", "uint64"])
def test_shifts_past_the_bit_width(dtype):
    bits = np.dtype(dtype).itemsize * 8
    a = np.array([1, 5, 7, 3], dtype=dtype)
    s = np.array([0, bits - 1, bits, bits + 3], dtype=dtype)
    assert_matches(ember.left_shift(ember.asarray(a), ember.asarray(s)), np.left_shift(a, s))
    assert_matches(ember.right_shift(ember.asarray(a), ember.asarray(s)), np.right_shift(a, s))


@pytest.mark.parametrize("name", ["maximum", "minimum", "fmax", "fmin"])
def test_nan_handling_in_extrema(name):
    a = np.array([np.nan, 1.0, np.nan, -0.0, 2.0], dtype=np.float32)
    b = np.array([1.0, np.nan, np.nan, 0.0, 1.0], dtype=np.float32)
    assert_matches(call(name, ember.asarray(a), ember.asarray(b)), getattr(np, name)(a, b))


def test_float16_arithmetic_rounds_like_numpy():
    a = np.linspace(-60000, 60000, 101).astype(np.float16)
    b = np.linspace(0.001, 3, 101).astype(np.float16)
    with np.errstate(all="ignore"):
        for op in (operator.add, operator.mul, operator.truediv):
            assert_matches(op(ember.asarray(a), ember.asarray(b)), op(a, b), rtol=0)


def test_out_argument_and_casting_rules():
    x = ember.asarray(np.arange(4, dtype=np.float32))
    out = ember.empty((4,), dtype=ember.float64)
    res = ember.add(x, 1, out=out)
    assert res is out
    assert_matches(out, np.arange(4, dtype=np.float64) + 1)
    bad = ember.empty((4,), dtype=ember.int32)
    with pytest.raises(TypeError, match="same_kind"):
        ember.add(x, 1, out=bad)
    with pytest.raises(ValueError, match="shape"):
        ember.add(x, 1, out=ember.empty((3,)))


def test_inplace_operators_write_in_place_and_check_casting():
    a = np.arange(6, dtype=np.int32).reshape(2, 3)
    x = ember.asarray(a.copy())
    storage = x.storage
    x += 2
    x *= ember.asarray([1, 2, 3], dtype=ember.int32)
    x //= 2
    x -= 1
    x <<= 1
    e = a.copy()
    e += 2
    e *= np.array([1, 2, 3], dtype=np.int32)
    e //= 2
    e -= 1
    e <<= 1
    assert x.storage is storage
    assert_matches(x, e)
    with pytest.raises(TypeError, match="same_kind"):
        x += 1.5
    f = ember.zeros((3,))
    f /= 2
    f **= 2
    f %= 3
    assert_matches(f, np.zeros(3, dtype=np.float32))


def test_operators_and_reflected_forms():
    a = random_array((3,), "float64")
    b = np.abs(random_array((3,), "float64", np.random.default_rng(2))) + 1
    x, y = ember.asarray(a), ember.asarray(b)
    for op in (operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv,
               operator.mod, operator.pow, operator.lt, operator.le, operator.gt, operator.ge,
               operator.eq, operator.ne):
        with np.errstate(invalid="ignore"):
            assert_matches(op(x, y), op(a, b))
            assert_matches(op(2.0, y), op(2.0, b))
    assert_matches(-x, -a)
    assert_matches(+x, +a)
    assert_matches(abs(x), abs(a))
    i = ember.asarray(np.array([1, 2, 3]))
    assert_matches(~i, ~np.array([1, 2, 3]))
    assert_matches(i & 1, np.array([1, 2, 3]) & 1)
    assert_matches(1 | i, 1 | np.array([1, 2, 3]))
    assert_matches(i ^ i, np.zeros(3, dtype=np.int64))
    q, r = divmod(i, 2)
    assert_matches(q, np.array([0, 1, 1]))
    assert_matches(r, np.array([1, 0, 1]))


def test_eq_with_unrelated_objects_does_not_raise():
    x = ember.zeros(2)
    assert (x == "text") is False
    assert (x != None) is True  # noqa: E711


def test_bitwise_on_floats_is_a_clear_error():
    with pytest.raises(TypeError, match="bitwise_and"):
        ember.zeros(2) & ember.zeros(2)


def test_bool_subtract_is_an_error_like_numpy():
    b = ember.asarray([True, False])
    with pytest.raises(TypeError, match="subtract"):
        b - b


def test_array_api_aliases_exist():
    for name in ["abs", "acos", "acosh", "add", "asin", "asinh", "atan", "atan2", "atanh",
                 "bitwise_and", "bitwise_left_shift", "bitwise_invert", "bitwise_or",
                 "bitwise_right_shift", "bitwise_xor", "ceil", "clip", "conj", "copysign", "cos",
                 "cosh", "divide", "equal", "exp", "expm1", "floor", "floor_divide", "greater",
                 "greater_equal", "hypot", "imag", "isfinite", "isinf", "isnan", "less",
                 "less_equal", "log", "log1p", "log2", "log10", "logaddexp", "logical_and",
                 "logical_not", "logical_or", "logical_xor", "maximum", "minimum", "multiply",
                 "negative", "nextafter", "not_equal", "positive", "pow", "real", "reciprocal",
                 "remainder", "round", "sign", "signbit", "sin", "sinh", "square", "sqrt",
                 "subtract", "tan", "tanh", "trunc"]:
        assert callable(getattr(ember, name)), name
    assert ember.acos is ember.arccos and ember.pow is ember.power


def test_ufunc_methods():
    x = ember.asarray(np.arange(6.0).reshape(2, 3))
    assert_matches(ember.add.reduce(x, axis=0), np.add.reduce(np.arange(6.0).reshape(2, 3), axis=0))
    assert_matches(ember.multiply.accumulate(ember.asarray([1, 2, 3])), np.array([1, 2, 6]))
    assert_matches(ember.subtract.outer(ember.arange(3), ember.arange(2)),
                   np.subtract.outer(np.arange(3), np.arange(2)))
    y = ember.zeros(4)
    ember.add.at(y, ember.asarray([0, 0, 3]), ember.asarray([1.0, 2.0, 5.0]))
    assert y.tolist() == [3.0, 0.0, 0.0, 5.0]
    v = y._version
    ember.negative.at(y, [0])
    assert y[0].item() == -3.0 and y._version == v + 1
    assert repr(ember.add) == "<ember.ufunc 'add'>"


def test_where_argument_of_ufunc():
    a = np.arange(4.0)
    out = ember.full((4,), -1.0, dtype=ember.float64)
    ember.add(ember.asarray(a), 1, out=out, where=ember.asarray([True, False, True, False]))
    assert out.tolist() == [1.0, -1.0, 3.0, -1.0]


@pytest.mark.parametrize("dtype", ["int32", "float32", "float64"])
def test_where_clip_round(dtype):
    a = random_array((3, 4), dtype)
    c = a > 0
    assert_matches(ember.where(ember.asarray(c), ember.asarray(a), 0), np.where(c, a, np.zeros((), dtype)))
    assert_matches(ember.clip(ember.asarray(a), -1, 2), np.clip(a, -1, 2))
    assert_matches(ember.clip(ember.asarray(a), max=1), np.minimum(a, np.asarray(1, dtype=dtype)))
    if np.dtype(dtype).kind == "f":
        assert_matches(ember.round(ember.asarray(a)), np.round(a))
        assert_matches(ember.round(ember.asarray(a), decimals=2), np.round(a, 2))


def test_where_broadcast_error():
    with pytest.raises(ValueError, match="where"):
        ember.where(ember.zeros((2,), dtype=ember.bool), ember.zeros(3), 1.0)


def test_isclose_allclose_array_equal():
    a = ember.asarray([1.0, 2.0, float("nan")])
    assert ember.isclose(a, ember.asarray([1.0, 2.1, float("nan")]), equal_nan=True).tolist() == [True, False, True]
    assert ember.allclose(ember.ones(3), ember.ones(3) + 1e-9)
    assert ember.array_equal(ember.arange(3), [0, 1, 2])
    assert not ember.array_equal(ember.arange(3), [0, 1])


def test_real_imag_conj():
    z = np.array([1 + 2j, -3j], dtype=np.complex64)
    assert_matches(ember.real(ember.asarray(z)), z.real)
    assert_matches(ember.imag(ember.asarray(z)), z.imag)
    assert_matches(ember.conj(ember.asarray(z)), z.conj())
    assert_matches(ember.asarray(z).real, z.real)
    assert_matches(abs(ember.asarray(z)), np.abs(z))


def test_large_arrays_take_the_threaded_path():
    a = random_array((700, 300), "float32")
    b = random_array((300,), "float32", np.random.default_rng(3))
    x = ember.asarray(a)
    assert_matches(x + ember.asarray(b), a + b)
    assert_matches(ember.exp(x[:, ::2]), np.exp(a[:, ::2]), rtol=1e-6)
    assert_matches(x.T * 2, a.T * 2)
