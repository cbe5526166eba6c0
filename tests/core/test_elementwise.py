"""Every elementwise op against NumPy: dtypes x layouts x shapes, scalars,
broadcasting, out=, in-place operators and the integer corner cases."""
import operator
import warnings

import numpy as np
import pytest

import ember
from ember._core import elementwise as _ew
from ember._kernels.cpu import optable
from helpers import ALL_DTYPES, SHAPES, assert_matches, layouts, random_array, values_for

OPS = _ew.op_names()
# the op table's float-valued ops (class "f"; tests/test_optable.py checks the classes
# against NumPy): integer/bool inputs compute in the default float dtype
FLOAT_VALUED = set(optable.names(cls="f"))


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


# ---------------------------------------------------------------- every op, more situations

def expected_or_error(fn):
    """(value, None) from NumPy, or (None, exception type) when NumPy refuses."""
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fn(), None
    except (TypeError, ValueError, OverflowError) as err:
        return None, type(err)


def check_same(got_fn, exp_fn, rtol=None):
    exp, err = expected_or_error(exp_fn)
    if err is not None:
        base = TypeError if issubclass(err, TypeError) else err
        with pytest.raises(base):
            got_fn()
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)       # NaN from e.g. (-2) ** 2.5
        got = got_fn()
    dt = np.asarray(exp).dtype
    assert_matches(got, exp, rtol=rtol or rtol_for(dt), atol=1e-6 if dt.kind in "fc" else None)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("name", OPS)
@pytest.mark.parametrize("dtype", ["int32", "float32"])
def test_every_op_on_0d_empty_and_nd_shapes(name, shape, dtype):
    if not supported(name, dtype):
        return
    args = [values_for(name, dtype, shape, seed) for seed in range(getattr(np, name).nin)]
    if name in ("floor_divide", "remainder", "fmod", "power") and dtype == "int32":
        args[1] = np.abs(args[1]) % 3 + 1
    got = call(name, *[ember.asarray(a) for a in args])
    assert_matches(got, numpy_expected(name, *args), rtol=rtol_for(got.dtype),
                   atol=1e-6 if got.dtype.kind in "fc" else None)


@pytest.mark.parametrize("name", BINARY)
@pytest.mark.parametrize("dtype", ["bool", "int8", "uint16", "int64", "float16", "float64", "complex64"])
def test_binary_broadcasting_and_layouts_on_both_sides(name, dtype):
    if not supported(name, dtype):
        return
    a = values_for(name, dtype, (3, 1, 4), 0)
    b = values_for(name, dtype, (5, 1), 1)
    if name in ("floor_divide", "remainder", "fmod") and np.dtype(dtype).kind in "iu":
        b[0, 0] = 0
    if name == "power" and np.dtype(dtype).kind == "i":
        b = np.abs(b) % 4
    for label, bb in layouts(b):
        got = call(name, ember.asarray(a), ember.asarray(bb))
        assert got.shape == (3, 5, 4)
        check_same(lambda: call(name, ember.asarray(a), ember.asarray(bb)),
                   lambda: numpy_expected(name, a, bb))
        check_same(lambda: call(name, ember.asarray(bb), ember.asarray(a)),
                   lambda: numpy_expected(name, bb, a))


def numpy_expected_with_scalar(name, arr, scalar, left):
    """NumPy's answer with ember's rule for integer arrays meeting Python floats/complex."""
    if arr.dtype.kind in "biu" and isinstance(scalar, (float, complex)):
        arr = arr.astype(np.float32 if isinstance(scalar, float) else np.complex64)
    args = (scalar, arr) if left else (arr, scalar)
    return numpy_expected(name, *args)


@pytest.mark.parametrize("name", BINARY)
@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_python_scalar_on_either_side(name, dtype):
    a = values_for(name, dtype, (2, 3), 0)[:, ::-1]
    for scalar in (True, 2, -3, 2.5, 1j):
        if name in ("left_shift", "right_shift") and not isinstance(scalar, bool) and scalar == -3:
            continue            # negative shift counts: undefined in C, NumPy gives platform values
        if name in FLOAT_VALUED and a.dtype.kind == "u" and type(scalar) is int and scalar == -3:
            continue            # see test_float_valued_op_of_uint_and_negative_python_int
        for left in (False, True):
            args = (scalar, ember.asarray(a)) if left else (ember.asarray(a), scalar)
            check_same(lambda: call(name, *args),
                       lambda: numpy_expected_with_scalar(name, a, scalar, left),
                       rtol=1e-3 if np.dtype(dtype).itemsize <= 2 else None)


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"])
def test_comparisons_with_out_of_range_python_ints(dtype):
    info = np.iinfo(dtype)
    a = np.array([info.min, 0, 1, info.max], dtype=dtype)
    x = ember.asarray(a)
    for scalar in (info.max + 1, info.min - 1, 2 ** 64, -(2 ** 63) - 1, 2 ** 100, 300, -1, 1.5, -0.5):
        for name in ("equal", "not_equal", "less", "less_equal", "greater", "greater_equal"):
            for left in (False, True):
                args = (scalar, x) if left else (x, scalar)
                np_args = (scalar, a) if left else (a, scalar)
                assert_matches(call(name, *args), getattr(np, name)(*np_args))
        assert_matches(x == scalar, a == scalar)
        assert_matches(scalar < x, scalar < a)


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int32", "uint64"])
def test_arithmetic_with_out_of_range_python_int_raises(dtype):
    x = ember.asarray(np.arange(3, dtype=dtype))
    big = np.iinfo(dtype).max + 1
    for name in ("add", "multiply", "maximum", "bitwise_and"):
        with pytest.raises(OverflowError):
            call(name, x, big)
        with pytest.raises(OverflowError):
            call(name, big, x)


INPLACE = [("iadd", "add"), ("isub", "subtract"), ("imul", "multiply"), ("itruediv", "divide"),
           ("ifloordiv", "floor_divide"), ("imod", "remainder"), ("ipow", "power"),
           ("iand", "bitwise_and"), ("ior", "bitwise_or"), ("ixor", "bitwise_xor"),
           ("ilshift", "left_shift"), ("irshift", "right_shift")]


@pytest.mark.parametrize("op,name", INPLACE)
@pytest.mark.parametrize("lhs", ["bool", "int8", "uint8", "int32", "float16", "float32", "complex64"])
def test_inplace_operators_match_numpy_casting(op, name, lhs):
    for rhs in ["bool", "int8", "int64", "uint64", "float32", "float64", "complex128", 2, 1.5, 1j]:
        a = values_for(name, lhs, (2, 3), 0)
        if isinstance(rhs, str):
            b = values_for(name, rhs, (3,), 1)
            if name == "power" and b.dtype.kind in "iu":
                b = (np.abs(b.astype(np.int64)) % 3).astype(b.dtype)
            if name in ("floor_divide", "remainder") and b.dtype.kind in "biu":
                b = np.ones_like(b)
            eb = ember.asarray(b)
        else:
            b = eb = rhs
        exp_arr = a.copy()
        if a.dtype.kind in "biu" and isinstance(rhs, (float, complex)):
            exp, err = None, TypeError         # float/complex result into an integer array
        else:
            def run_numpy():
                getattr(operator, op)(exp_arr, b)
                return exp_arr
            exp, err = expected_or_error(run_numpy)
        x = ember.asarray(a.copy())
        storage = x.storage
        if err is not None:
            with pytest.raises(TypeError if issubclass(err, TypeError) else err):
                getattr(operator, op)(x, eb)
            continue
        with np.errstate(all="ignore"):
            res = getattr(operator, op)(x, eb)
        assert res is x and x.storage is storage
        assert_matches(x, exp, rtol=2e-3 if lhs == "float16" else 1e-5, atol=1e-5)


def test_inplace_on_views_writes_through_and_refuses_broadcast_growth():
    base = ember.zeros((3, 4))
    v = base[::2, ::-1]
    v += ember.asarray(np.arange(4.0, dtype=np.float32))
    exp = np.zeros((3, 4), np.float32)
    exp[::2, ::-1] += np.arange(4.0, dtype=np.float32)
    assert_matches(base, exp)
    with pytest.raises(ValueError, match="shape"):
        ember.zeros(2).__iadd__(ember.ones((2, 2)))


@pytest.mark.parametrize("name", ["add", "multiply", "maximum", "arctan2", "less", "exp", "negative", "sqrt"])
def test_out_argument_non_contiguous_and_dtype(name):
    nin = getattr(np, name).nin
    args = [random_array((3, 4), "float32", np.random.default_rng(s)) for s in range(nin)]
    exp = numpy_expected(name, *args)
    big = ember.zeros((4, 3), dtype=exp.dtype)
    out = big.T                                       # a transposed (non-contiguous) out
    res = call(name, *[ember.asarray(a) for a in args], out=out)
    assert res is out
    assert_matches(out, exp, rtol=1e-6)
    assert_matches(big, exp.T, rtol=1e-6)            # written through to the base
    out64 = ember.zeros((3, 4), dtype=np.float64 if exp.dtype.kind == "f" else bool)
    call(name, *[ember.asarray(a) for a in args], out=(out64,))
    assert_matches(out64, exp.astype(out64.dtype), rtol=1e-6)
    with pytest.raises(TypeError, match="out"):
        call(name, *[ember.asarray(a) for a in args], out=np.zeros((3, 4)))


def test_out_takes_part_in_broadcasting_like_numpy():
    out = ember.zeros((2, 3))
    assert ember.add(ember.ones(3), 1.0, out=out) is out
    assert out.tolist() == [[2.0] * 3] * 2
    ember.sqrt(ember.asarray([4.0]), out=out)
    assert out.tolist() == [[2.0] * 3] * 2
    with pytest.raises(ValueError, match="add"):
        ember.add(ember.ones((2, 3)), 1.0, out=ember.zeros(3))


@pytest.mark.parametrize("dtype", ["int16", "float32", "complex128"])
def test_ufunc_where_and_dtype_keywords(dtype):
    a = random_array((3, 4), dtype)
    b = random_array((3, 4), dtype, np.random.default_rng(5))
    mask = random_array((4,), "bool", np.random.default_rng(6))
    out_np = np.full((3, 4), 7, dtype=dtype)
    np.multiply(a, b, out=out_np, where=mask)
    out = ember.full((3, 4), 7, dtype=dtype)
    r = ember.multiply(ember.asarray(a), ember.asarray(b), out=out, where=ember.asarray(mask))
    assert r is out
    assert_matches(out, out_np)
    out2 = ember.full((3, 4), 7, dtype=dtype)
    ember.negative(ember.asarray(a), out=out2, where=mask[::-1])       # a NumPy mask, reversed
    exp2 = np.full((3, 4), 7, dtype=dtype)
    np.negative(a, out=exp2, where=mask[::-1])
    assert_matches(out2, exp2)
    got = ember.add(ember.asarray(a), ember.asarray(b), dtype=ember.complex128)
    assert_matches(got, np.add(a, b, dtype=np.complex128))


def test_ufunc_objects_and_methods_more():
    assert (ember.add.nin, ember.add.nout, ember.sqrt.nin, ember.sqrt.nout) == (2, 1, 1, 1)
    assert ember.add.__name__ == "add" and ember.arccos.__name__ == "arccos"
    assert isinstance(ember.add, ember.ufunc) and repr(ember.exp) == "<ember.ufunc 'exp'>"
    a = np.arange(12).reshape(3, 4)
    x = ember.asarray(a)
    assert_matches(ember.maximum.reduce(x, axis=1), np.maximum.reduce(a, axis=1))
    assert_matches(ember.maximum.reduce(x, axis=None), np.maximum.reduce(a, axis=None))
    assert_matches(ember.add.reduce(x, axis=(0, 1), keepdims=True), np.add.reduce(a, axis=(0, 1), keepdims=True))
    assert_matches(ember.add.reduce(x[:, ::-1], axis=0, initial=10), np.add.reduce(a[:, ::-1], axis=0, initial=10))
    assert_matches(ember.multiply.reduce(x, axis=0), np.multiply.reduce(a, axis=0))
    assert_matches(ember.bitwise_or.reduce(x, axis=0), np.bitwise_or.reduce(a, axis=0))
    assert_matches(ember.add.accumulate(x, axis=1), np.add.accumulate(a, axis=1))
    assert_matches(ember.add.outer([1, 2], [10, 20, 30]), np.add.outer([1, 2], [10, 20, 30]))
    assert_matches(ember.greater.outer(x[0], x[:, 0]), np.greater.outer(a[0], a[:, 0]))
    with pytest.raises(ValueError, match="maximum"):
        ember.maximum.reduce(ember.zeros(0))
    for method in ("reduce", "accumulate"):
        with pytest.raises(ValueError, match="sqrt"):
            getattr(ember.sqrt, method)(x)
    with pytest.raises(ValueError, match="sqrt"):
        ember.sqrt.outer(x, x)
    with pytest.raises(TypeError, match="add"):
        ember.add(x)
    with pytest.raises(TypeError, match="add"):
        ember.add(x, x, bogus=1)


@pytest.mark.parametrize("dtype", ["int32", "int64", "float32", "float64", "complex64"])
def test_ufunc_at_is_an_unbuffered_scatter(dtype):
    base = random_array((5, 3), dtype)
    idx = np.array([0, 4, 0, 2, 4, 4])
    vals = random_array((6, 3), dtype, np.random.default_rng(9))
    for name in ("add", "subtract", "multiply", "maximum", "minimum"):
        if not supported(name, dtype):
            continue
        e = base.copy()
        getattr(np, name).at(e, idx, vals)
        x = ember.asarray(base.copy())
        v0 = x._version
        getattr(ember, name).at(x, ember.asarray(idx), ember.asarray(vals))
        assert x._version > v0
        assert_matches(x, e)
    # views, tuple indices, scalar values, unary ops
    x = ember.zeros((4, 4), dtype=dtype)
    e = np.zeros((4, 4), dtype=dtype)
    ember.add.at(x[::-1], (ember.asarray([0, 0, 3]), ember.asarray([1, 1, 2])), 1)
    np.add.at(e[::-1], (np.array([0, 0, 3]), np.array([1, 1, 2])), 1)
    assert_matches(x, e)
    ember.negative.at(x, [0])
    np.negative.at(e, [0])
    assert_matches(x, e)
    with pytest.raises(IndexError):
        ember.add.at(x, [9], 1)
    with pytest.raises(TypeError, match="add.at"):
        ember.add.at(np.zeros(3), [0], 1)
    with pytest.raises(TypeError, match="add.at"):
        ember.add.at(x, [0])


@pytest.mark.parametrize("dtype", ["bool", "int8", "uint8", "int64", "float16", "float32", "float64", "complex64"])
def test_where_function_dtypes_and_broadcasting(dtype):
    a = random_array((3, 1, 4), dtype)
    b = random_array((2, 4), dtype, np.random.default_rng(3))
    c = random_array((3, 2, 1), "bool", np.random.default_rng(4))
    for label, aa in layouts(a):
        assert_matches(ember.where(ember.asarray(c), ember.asarray(aa), ember.asarray(b)), np.where(c, aa, b))
    # a non-bool condition, Python scalars on either side, mixed dtypes
    ci = c.astype(np.int32)
    assert_matches(ember.where(ember.asarray(ci), ember.asarray(a), 0), np.where(ci, a, 0))     # weak scalars
    assert_matches(ember.where(ember.asarray(c), 1, ember.asarray(b)), np.where(c, 1, b))
    other = random_array((4,), "int16", np.random.default_rng(5))
    exp = np.where(c, a, other)
    assert_matches(ember.where(ember.asarray(c), ember.asarray(a), ember.asarray(other)), exp)


def test_where_scalars_and_nonzero_form():
    assert_matches(ember.where(ember.asarray([True, False]), 1, 2), np.array([1, 2]))
    assert_matches(ember.where(ember.asarray([True, False]), 1.5, 2), np.array([1.5, 2], np.float32))
    assert_matches(ember.where(ember.asarray([True, False]), ember.asarray([1, 2]), 2.5),
                   np.array([1, 2.5], np.float32))
    assert_matches(ember.where(True, ember.asarray(1.0), 2.0), np.array(1.0, np.float32))
    assert_matches(ember.where([True, False], [1, 2], [3, 4]), np.array([1, 4]))
    nz = ember.where(ember.asarray([[0, 1], [1, 1]]))
    for g, e in zip(nz, np.where(np.array([[0, 1], [1, 1]]))):
        assert_matches(g, e)
    with pytest.raises(ValueError, match="where"):
        ember.where(ember.asarray([True]), 1)
    with pytest.raises(OverflowError):
        ember.where(ember.asarray([True]), ember.asarray(np.array([1], np.int8)), 300)


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int32", "int64", "float16", "float32", "float64"])
def test_clip_matches_numpy(dtype):
    a = random_array((3, 4), dtype, low=-10, high=10)
    for label, arr in layouts(a):
        x = ember.asarray(arr)
        assert_matches(ember.clip(x, 1, 3), np.clip(arr, 1, 3))
        assert_matches(ember.clip(x, None, 2), np.clip(arr, None, 2))
        assert_matches(ember.clip(x, min=2), np.clip(arr, 2, None))
        assert_matches(ember.clip(x, a_min=0, a_max=4), np.clip(arr, 0, 4))
        assert_matches(ember.clip(x, 4, 2), np.clip(arr, 4, 2))          # min > max -> max
        lo = random_array((4,), dtype, np.random.default_rng(2), low=-10, high=0)
        assert_matches(ember.clip(x, ember.asarray(lo), 5), np.clip(arr, lo, 5))
    x = ember.asarray(a)
    assert_matches(ember.clip(x), np.array(a))
    if np.dtype(dtype).kind in "iu":
        # Python int bounds beyond the dtype's range clip nothing on that side (NumPy 2)
        assert_matches(ember.clip(x, -1000, 1000), np.clip(a, -1000, 1000))
        assert_matches(ember.clip(x, None, 2 ** 70), np.clip(a, None, 2 ** 70))
    out = ember.zeros((3, 4), dtype=dtype)
    assert ember.clip(x, 0, 1, out=out) is out
    assert_matches(out, np.clip(a, 0, 1))
    if np.dtype(dtype).kind in "iu":
        # an integer array clipped by Python floats: ember's default float dtype
        assert_matches(ember.clip(x, 1.5, 3.5), np.clip(a.astype(np.float32), 1.5, 3.5))


def test_clip_nan_propagates():
    a = np.array([np.nan, -1.0, 5.0, 0.5], np.float32)
    assert_matches(ember.clip(ember.asarray(a), 0, 1), np.clip(a, 0, 1))


@pytest.mark.parametrize("dtype", ["int8", "int64", "uint16", "float16", "float32", "float64", "complex64"])
def test_round_matches_numpy(dtype):
    a = random_array((4, 5), dtype, low=-300, high=300)
    if np.dtype(dtype).kind == "f":
        a = (a / 7).astype(dtype)
        a[0, :3] = np.array([0.5, 1.5, -2.5])                      # halves go to even
    for label, arr in layouts(a):
        for dec in (0, 1, 2, -1, -2):
            assert_matches(ember.round(ember.asarray(arr), dec), np.round(arr, dec))
    assert_matches(ember.round(ember.asarray(a), decimals=1), np.round(a, 1))
    assert ember.around is ember.round


def test_round_of_bool_keeps_bool():
    # documented difference: NumPy turns bool into float16 here
    assert_matches(ember.round(ember.asarray([True, False])), np.array([True, False]))

def test_real_imag_conj_views_and_copies():
    z = random_array((3, 4), "complex128")
    for label, arr in layouts(z):
        x = ember.asarray(arr)
        assert_matches(ember.real(x), arr.real)
        assert_matches(ember.imag(x), arr.imag)
        assert_matches(ember.conj(x), arr.conj())
        assert_matches(ember.conjugate(x), np.conjugate(arr))
    x = ember.asarray(z.copy())
    ember.real(x)[0, 0] = 100.0                  # complex: real/imag are views
    ember.imag(x)[0, 1] = -7.0
    assert x[0, 0].item().real == 100.0 and x[0, 1].item().imag == -7.0
    r = ember.asarray(np.arange(3.0))
    assert ember.real(r) is r                    # real input: the array itself
    assert_matches(ember.imag(r), np.zeros(3))
    assert_matches(ember.conj(ember.asarray([1, 2])), np.array([1, 2]))
    assert_matches(ember.conj([1 + 1j]), np.array([1 - 1j], np.complex64))


def test_isclose_allclose_array_equal_more():
    a = np.array([1.0, 2.0, np.nan, np.inf, -np.inf, 1e-9], np.float32)
    b = np.array([1.0 + 1e-7, 2.1, np.nan, np.inf, np.inf, 0.0], np.float32)
    for eq in (False, True):
        assert_matches(ember.isclose(ember.asarray(a), ember.asarray(b), equal_nan=eq),
                       np.isclose(a, b, equal_nan=eq))
    assert_matches(ember.isclose(ember.asarray(a), ember.asarray(b), rtol=0.1, atol=0.1),
                   np.isclose(a, b, rtol=0.1, atol=0.1))
    assert_matches(ember.isclose(ember.asarray([1, 2]), ember.asarray([1, 3])), np.array([True, False]))
    assert ember.allclose(ember.asarray([1.0, np.nan]), ember.asarray([1.0, np.nan]), equal_nan=True)
    assert not ember.allclose(ember.asarray([1.0, np.nan]), ember.asarray([1.0, np.nan]))
    assert ember.array_equal(ember.asarray([1.0, np.nan]), ember.asarray([1.0, np.nan]), equal_nan=True)
    assert not ember.array_equal(ember.ones(2), ember.ones(3))
    assert ember.array_equiv(ember.ones((2, 2)), ember.ones(2))
    with pytest.raises(ValueError, match="allclose"):
        ember.allclose(ember.ones(2), ember.ones(3))
    with pytest.raises(ValueError, match="isclose"):
        ember.isclose(ember.ones(2), ember.ones(3))


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "complex64", "complex128"])
def test_nan_to_num(dtype):
    if np.dtype(dtype).kind == "c":
        a = np.array([complex(np.nan, 1), complex(np.inf, -np.inf), 1 + 2j], dtype)
    else:
        a = np.array([np.nan, np.inf, -np.inf, 1.5], dtype)
    assert_matches(ember.nan_to_num(ember.asarray(a)), np.nan_to_num(a))
    assert_matches(ember.nan_to_num(ember.asarray(a), nan=-1.0, posinf=9.0, neginf=-9.0),
                   np.nan_to_num(a, nan=-1.0, posinf=9.0, neginf=-9.0))
    x = ember.asarray(a.copy())
    v0 = x._version
    assert ember.nan_to_num(x, copy=False) is x and x._version > v0
    assert_matches(x, np.nan_to_num(a))
    assert_matches(ember.nan_to_num(ember.asarray([1, 2])), np.array([1, 2]))


def test_long_tail_functions():
    a = np.array([-2.5, -0.5, 0.0, 0.5, 3.0], np.float64)
    x = ember.asarray(a)
    z = np.array([1 + 1j, -1j, -2.0 + 0j])
    assert_matches(ember.angle(ember.asarray(z)), np.angle(z))
    assert_matches(ember.angle(ember.asarray(z), deg=True), np.angle(z, deg=True))
    assert_matches(ember.angle(ember.asarray([1, -1])), np.angle(np.array([1, -1], np.float32)))
    assert_matches(ember.sinc(x), np.sinc(a))
    assert_matches(ember.fix(x), np.fix(a))
    assert_matches(ember.spacing(x), np.spacing(a))
    assert_matches(ember.isposinf(ember.asarray([np.inf, -np.inf])), np.array([True, False]))
    assert_matches(ember.isneginf(ember.asarray([np.inf, -np.inf])), np.array([False, True]))
    assert_matches(ember.isreal(ember.asarray(z)), np.isreal(z))
    assert_matches(ember.iscomplex(ember.asarray(z)), np.iscomplex(z))
    assert_matches(ember.float_power(ember.asarray([2, 3]), 2), np.float_power([2, 3], 2))
    q, r = ember.divmod(ember.asarray([7, -7]), ember.asarray([2, 2]))
    assert_matches(q, np.array([3, -4])) and None
    assert_matches(r, np.array([1, 1]))
    m, e = ember.frexp(x)
    em, ee = np.frexp(a)
    assert_matches(m, em)
    assert_matches(e, ee)
    assert_matches(ember.ldexp(ember.asarray([1.0, 2.0]), ember.asarray([2, 3])),
                   np.ldexp(np.array([1.0, 2.0], np.float32), [2, 3]))
    fr, it = ember.modf(x)
    assert_matches(fr, np.modf(a)[0])
    assert_matches(it, np.modf(a)[1])
    assert_matches(ember.gcd(ember.asarray([12, 18]), 8), np.gcd([12, 18], 8))
    assert_matches(ember.lcm(ember.asarray([4, 6]), ember.asarray([6, 4])), np.lcm([4, 6], [6, 4]))
    assert_matches(ember.i0(x), np.i0(a))


def test_numpy_names_are_the_same_ufuncs():
    pairs = {"absolute": "abs", "arccos": "acos", "arccosh": "acosh", "arcsin": "asin",
             "arcsinh": "asinh", "arctan": "atan", "arctan2": "atan2", "arctanh": "atanh",
             "invert": "bitwise_invert", "left_shift": "bitwise_left_shift",
             "right_shift": "bitwise_right_shift", "power": "pow", "divide": "true_divide",
             "remainder": "mod", "rad2deg": "degrees", "deg2rad": "radians"}
    for a, b in pairs.items():
        assert getattr(ember, a) is getattr(ember, b), (a, b)
    assert ember.bitwise_not is ember.invert
    x = ember.asarray(np.array([0.5, 1.0], np.float64))
    assert_matches(ember.degrees(x), np.degrees(np.array([0.5, 1.0])))
    assert_matches(ember.fabs(ember.asarray([-1.5])), np.fabs(np.array([-1.5], np.float32)))
    assert_matches(ember.conjugate(ember.asarray([1j])), np.array([-1j], np.complex64))


def test_float_valued_op_of_uint_and_negative_python_int():
    a = np.array([1, 2], np.uint8)
    assert_matches(ember.divide(ember.asarray(a), -3), np.divide(a.astype(np.float32), -3))
    assert_matches(ember.arctan2(ember.asarray(a), -3), np.arctan2(a.astype(np.float32), -3))
