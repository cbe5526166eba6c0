"""NumPy programs' long tail (issue #22), each checked against NumPy itself: stride
tricks, scalar-type aliases, floating-point error settings, ``ndarray.flat``,
``ufunc.reduceat``, ``fromiter``, ``interp``, ``indices``, ``ndindex``,
``ndenumerate``, ``packbits``, print options, ``emath``, ``show_config``, Python's
types as dtypes, NumPy's random streams, and the refusal of non-numeric dtypes."""
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

import ember
from ember.lib.stride_tricks import sliding_window_view, as_strided
from helpers import assert_matches


def E(a):
    return ember.asarray(a)


# ---------------------------------------------------------------- stride tricks

def _layouts():
    base = np.arange(60, dtype=np.float64).reshape(5, 12)
    return {"contiguous": base, "strided": base[:, ::2], "negative": base[::-1, ::-3],
            "transposed": base.T}


@pytest.mark.parametrize("layout", ["contiguous", "strided", "negative", "transposed"])
@pytest.mark.parametrize("window,axis", [(2, 0), (3, 1), (3, -1), ((2, 2), None),
                                         ((2, 3), (0, 1)), ((2, 2), (1, 1)), ((1, 1), None)])
def test_sliding_window_view_matches_numpy(layout, window, axis):
    a = _layouts()[layout]
    x = E(a)
    got = sliding_window_view(x, window, axis=axis)
    want = np.lib.stride_tricks.sliding_window_view(a, window, axis=axis)
    assert_matches(got, want)
    assert np.shares_memory(np.asarray(got), np.asarray(x))


@pytest.mark.parametrize("dtype", [np.int8, np.int64, np.float32, np.complex64, np.bool_])
def test_sliding_window_view_dtypes_0d_and_empty(dtype):
    a = (np.arange(7) % 3).astype(dtype)
    assert_matches(sliding_window_view(E(a), 4), np.lib.stride_tricks.sliding_window_view(a, 4))
    s = np.array(3, dtype=dtype)
    assert_matches(sliding_window_view(E(s), ()), np.lib.stride_tricks.sliding_window_view(s, ()))
    e = np.zeros((0, 4), dtype=dtype)
    assert_matches(sliding_window_view(E(e), 2, axis=1),
                   np.lib.stride_tricks.sliding_window_view(e, 2, axis=1))


def test_sliding_window_view_is_a_read_only_view():
    x = ember.arange(6.0)
    v = sliding_window_view(x, 3)
    assert not v.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        v[0, 0] = 5.0
    x[1] = 100.0                                   # writes to the input show through
    assert v[0].tolist() == [0.0, 100.0, 2.0] and v[1].tolist()[0] == 100.0
    w = sliding_window_view(x, 3, writeable=True)
    w[0, 0] = -1.0
    assert x[0].item() == -1.0


@pytest.mark.parametrize("args", [(5,), ((2, 2),), (-1,), (2, 3), ((2, 2), (0,))])
def test_sliding_window_view_errors_as_numpy(args):
    a = np.arange(4.0)
    with pytest.raises(Exception) as want:
        np.lib.stride_tricks.sliding_window_view(a, *args)
    with pytest.raises(type(want.value), match="sliding_window_view"):
        sliding_window_view(E(a), *args)


@pytest.mark.parametrize("layout", ["contiguous", "negative"])
def test_sliding_window_view_gradient_against_torch_unfold(layout):
    torch = pytest.importorskip("torch")
    a = _layouts()[layout]
    up = np.random.default_rng(0).standard_normal(
        np.lib.stride_tricks.sliding_window_view(a, 3, axis=1).shape)
    x = E(a.copy()).requires_grad_(True) if layout == "contiguous" else None
    if x is None:
        x = E(np.ascontiguousarray(a)).requires_grad_(True)
    (sliding_window_view(x, 3, axis=1) * E(up)).sum().backward()
    t = torch.tensor(np.ascontiguousarray(a), requires_grad=True)
    (t.unfold(1, 3, 1) * torch.tensor(up)).sum().backward()
    np.testing.assert_allclose(np.asarray(x.grad), t.grad.numpy(), rtol=1e-12)


def test_sliding_window_view_gradcheck():
    x = ember.asarray(np.random.default_rng(1).standard_normal((4, 5)), requires_grad=True)
    assert ember.autograd.gradcheck(lambda v: sliding_window_view(v, (2, 3)) ** 2, (x,))
    assert ember.autograd.gradcheck(lambda v: sliding_window_view(v[:, ::-2], 2, axis=1), (x,))


def test_as_strided_matches_numpy_and_shares_memory():
    a = np.arange(10, dtype=np.int32)
    got = as_strided(E(a), shape=(4, 3), strides=(8, 4))
    want = np.lib.stride_tricks.as_strided(a, shape=(4, 3), strides=(8, 4))
    assert_matches(got, want)
    x = E(a.copy())
    v = as_strided(x, (2, 2), (4, 0))
    v[1, 1] = 99
    assert x[1].item() == 99
    assert_matches(as_strided(x), np.asarray(x))
    r = E(a)[::-1]                                 # negative strides, offset into the block
    assert_matches(as_strided(r, (3,), (-8,)),
                   np.lib.stride_tricks.as_strided(a[::-1], (3,), (-8,)))
    assert not as_strided(E(a), writeable=False).flags.writeable


def test_as_strided_refuses_views_outside_the_memory():
    x = ember.arange(5)
    with pytest.raises(ValueError, match="as_strided.*outside"):
        as_strided(x, (3, 3), (8, 16))
    with pytest.raises(ValueError, match="as_strided.*outside"):
        as_strided(x[1:], (3,), (-8,))            # one element before the block
    assert as_strided(x[2:], (3,), (-8,)).tolist() == [2, 1, 0]   # backwards, inside it
    assert as_strided(x, (0, 7), (8, 8)).shape == (0, 7)


def test_as_strided_gradient_against_torch():
    torch = pytest.importorskip("torch")
    a = np.random.default_rng(2).standard_normal(8)
    up = np.random.default_rng(3).standard_normal((3, 4))
    x = E(a).requires_grad_(True)
    (as_strided(x, (3, 4), (16, 8)) * E(up)).sum().backward()
    t = torch.tensor(a, requires_grad=True)
    (torch.as_strided(t, (3, 4), (2, 1)) * torch.tensor(up)).sum().backward()
    np.testing.assert_allclose(np.asarray(x.grad), t.grad.numpy(), rtol=1e-12)
    assert ember.autograd.gradcheck(lambda v: as_strided(v, (3, 3), (8, 8)) ** 3,
                                    (ember.asarray(a[:5], requires_grad=True),))


# ---------------------------------------------------------------- scalar types and dtypes

ALIASES = ["byte", "ubyte", "short", "ushort", "intc", "uintc", "intp", "uintp", "long", "ulong",
           "longlong", "ulonglong", "int_", "uint", "half", "single", "double", "csingle",
           "cdouble", "bool_"]


@pytest.mark.parametrize("name", ALIASES)
def test_scalar_type_aliases_are_numpys(name):
    assert getattr(ember, name) is getattr(np, name)
    assert ember.zeros(2, dtype=getattr(ember, name)).dtype == np.zeros(2, getattr(np, name)).dtype
    x = E((np.arange(3) % 2).astype(getattr(np, name)))
    assert x.dtype == np.dtype(getattr(np, name))


@pytest.mark.parametrize("name", ["longdouble", "clongdouble", "object_", "str_", "datetime64"])
def test_refused_numpy_types_say_why(name):
    with pytest.raises(AttributeError, match="numeric dtypes only"):
        getattr(ember, name)


@pytest.mark.parametrize("py", [float, int, bool, complex])
def test_python_types_as_dtypes_mean_what_they_mean_in_numpy(py):
    want = np.dtype(py)
    assert ember.zeros(2, dtype=py).dtype == want
    assert ember.ones((2, 0), dtype=py).dtype == want
    assert ember.empty(3, dtype=py).dtype == want
    assert ember.full(2, 1, dtype=py).dtype == want
    if py is not bool:
        assert ember.arange(3, dtype=py).dtype == np.arange(3, dtype=py).dtype
    assert_matches(ember.asarray([1, 2], dtype=py), np.asarray([1, 2], dtype=py))
    x = E(np.arange(6, dtype=np.int16).reshape(2, 3))[:, ::-1]
    assert_matches(x.astype(py), np.arange(6, dtype=np.int16).reshape(2, 3)[:, ::-1].astype(py))
    assert_matches(ember.astype(E(np.float32(2.5)), py), np.float32(2.5).astype(py))


def test_view_float_reinterprets_as_float64():
    a = np.arange(4, dtype=np.int64)
    assert_matches(E(a).view(float), a.view(float))
    b = np.arange(4, dtype=np.float32)
    assert_matches(E(b).view(float), b.view(float))
    assert_matches(E(np.arange(2.0)).view(complex), np.arange(2.0).view(complex))


def test_python_float_values_keep_the_default_float_dtype():
    assert ember.asarray([1.5]).dtype == ember.get_default_dtype() == np.float32
    assert ember.asarray(1.5).dtype == np.float32


def _run(code, **env):
    full = dict(os.environ, **env)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full,
                       timeout=120)
    return r


def test_default_dtype_from_the_environment():
    r = _run("import ember; print(ember.get_default_dtype(), ember.asarray([0.5]).dtype, "
             "ember.random.rand(2).dtype)", EMBER_DEFAULT_DTYPE="float64")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["float64"] * 3
    r = _run("import ember", EMBER_DEFAULT_DTYPE="float16")
    assert r.returncode != 0 and "EMBER_DEFAULT_DTYPE" in r.stderr


@pytest.mark.parametrize("make", [
    lambda: ember.asarray(["a", "b"]),
    lambda: ember.asarray(np.array(["a"])),
    lambda: ember.array(np.array([1, None], dtype=object)),
    lambda: ember.asarray(np.array(["2020-01-01"], dtype="M8[D]")),
    lambda: ember.asarray(np.zeros(2, dtype=[("a", "i4"), ("b", "f8")])),
    lambda: ember.zeros(2, dtype=object),
    lambda: ember.zeros(2, dtype=str),
    lambda: ember.ones(2, dtype="U3"),
    lambda: ember.empty(2, dtype="M8[s]"),
    lambda: ember.zeros(2, dtype=[("a", "i4")]),
    lambda: ember.arange(3).astype("U3"),
    lambda: ember.arange(3).astype(object),
    lambda: ember.full(2, 1, dtype="m8[s]"),
], ids=["list-str", "np-str", "object", "datetime", "structured", "zeros-object", "zeros-str",
        "ones-U3", "empty-M8", "zeros-structured", "astype-U3", "astype-object", "full-m8"])
def test_non_numeric_dtypes_are_refused_clearly(make):
    with pytest.raises(TypeError, match="numeric dtypes only"):
        make()


# ---------------------------------------------------------------- floating-point errors

def test_seterr_geterr_errstate_semantics():
    default = {"divide": "ignore", "over": "ignore", "under": "ignore", "invalid": "ignore"}
    assert ember.geterr() == default
    assert set(ember.geterr()) == set(np.geterr())
    old = ember.seterr(divide="ignore")
    assert old == default
    with pytest.warns(RuntimeWarning, match="does not detect"):
        with ember.errstate(over="raise"):
            assert ember.geterr()["over"] == "raise"
            with ember.errstate(all="ignore"):
                assert ember.geterr() == default
            assert ember.geterr()["over"] == "raise"
    assert ember.geterr() == default
    with pytest.raises(ValueError):
        ember.seterr(divide="loud")
    with pytest.raises(ValueError):
        with ember.errstate(invalid="nope"):
            pass
    with ember.errstate(divide="ignore"):           # IEEE results, no warning
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            a = np.array([1.0, -1.0, 0.0])
            with np.errstate(all="ignore"):
                assert_matches(E(a) / 0.0, a / 0.0)

    @ember.errstate(all="ignore")
    def f():
        return ember.geterr()
    assert f() == default
    assert ember.seterrcall(print) is None and ember.geterrcall() is print
    assert ember.seterrcall(None) is print
    with pytest.raises(ValueError):
        ember.seterrcall(3)


# ---------------------------------------------------------------- flat

FLAT_CASES = {   # (base array, the view of it that .flat works on)
    "contiguous": (lambda: np.arange(24, dtype=np.float32).reshape(4, 6), lambda b: b),
    "transposed": (lambda: np.arange(24, dtype=np.float32).reshape(4, 6), lambda b: b.T),
    "negative": (lambda: np.arange(24, dtype=np.float32).reshape(4, 6), lambda b: b[::-1, ::2]),
    "0d": (lambda: np.array(5, np.int16), lambda b: b),
    "empty": (lambda: np.zeros((0, 3)), lambda b: b),
}


@pytest.mark.parametrize("case", sorted(FLAT_CASES))
def test_flat_reads_as_numpy(case):
    make, view = FLAT_CASES[case]
    a = view(make())
    x = view(E(make()))
    assert [float(v) for v in x.flat] == [float(v) for v in a.flat]
    assert len(x.flat) == len(a.flat)
    np.testing.assert_array_equal(np.asarray(x.flat), np.asarray(a.flat))
    if a.size:
        assert float(x.flat[a.size - 1]) == float(a.flat[a.size - 1])
        assert_matches(x.flat[1:5:2], a.flat[1:5:2])
        assert_matches(x.flat[[0, a.size - 1, 0]], a.flat[[0, a.size - 1, 0]])


@pytest.mark.parametrize("case", sorted(FLAT_CASES))
@pytest.mark.parametrize("key,value", [(0, 7), (slice(1, 6, 2), -1), ([0, 2, 2], [5, 6, 7]),
                                       (Ellipsis, [1, 2]), (slice(None), 3)])
def test_flat_assignment_writes_into_the_array_as_numpy(case, key, value):
    make, view = FLAT_CASES[case]
    base_np, base_e = make(), E(make())
    n, x = view(base_np), view(base_e)
    if n.size == 0 and key == 0 or (isinstance(key, list) and n.size < 3):
        return
    n.flat[key] = value
    x.flat[key] = value
    assert_matches(base_e, base_np)        # written through the view into the memory


def test_flat_setter_and_autograd():
    x = ember.zeros((2, 3))
    x.flat = [1.0, 2.0]
    a = np.zeros((2, 3), np.float32)
    a.flat = [1.0, 2.0]
    assert_matches(x, a)
    w = ember.asarray([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    (w.flat[[0, 3]] * 2).sum().backward()
    assert w.grad.tolist() == [[2.0, 0.0], [0.0, 2.0]]


# ---------------------------------------------------------------- reduceat

@pytest.mark.parametrize("ufunc", ["add", "multiply", "maximum", "minimum", "logical_or"])
@pytest.mark.parametrize("dtype", [np.int32, np.float64, np.bool_])
def test_reduceat_matches_numpy(ufunc, dtype):
    a = (np.arange(24).reshape(4, 6) % 5).astype(dtype)
    idx = [0, 3, 1, 5]
    for arr in (a, a[:, ::-1], a.T):
        for axis in (0, 1):
            ind = [i for i in idx if i < arr.shape[axis]]
            assert_matches(getattr(ember, ufunc).reduceat(E(arr), ind, axis=axis),
                           getattr(np, ufunc).reduceat(arr, ind, axis=axis))
    with pytest.raises(IndexError, match="reduceat"):
        ember.add.reduceat(E(a), [0, 10])
    with pytest.raises(ValueError, match="reduceat"):
        ember.sqrt.reduceat(E(a), [0])


# ---------------------------------------------------------------- small creation helpers

@pytest.mark.parametrize("dtype", [float, int, np.float32, np.int8, complex, bool])
def test_fromiter_matches_numpy(dtype):
    assert_matches(ember.fromiter((i % 3 for i in range(7)), dtype),
                   np.fromiter((i % 3 for i in range(7)), dtype))
    assert_matches(ember.fromiter(iter(range(10)), dtype, count=4),
                   np.fromiter(iter(range(10)), dtype, count=4))
    assert_matches(ember.fromiter([], dtype), np.fromiter([], dtype))
    with pytest.raises(TypeError, match="numeric dtypes only"):
        ember.fromiter(["a"], "U1")


def test_interp_matches_numpy():
    rng = np.random.default_rng(4)
    xp = np.sort(rng.uniform(-3, 3, 9))
    fp = rng.standard_normal(9)
    x = rng.uniform(-4, 4, (3, 5))
    assert_matches(ember.interp(E(x), E(xp), E(fp)), np.interp(x, xp, fp))
    assert_matches(ember.interp(E(x), E(xp), E(fp), left=-9.0, right=9.0),
                   np.interp(x, xp, fp, left=-9.0, right=9.0))
    assert_matches(ember.interp(E(x)[:, ::-2], E(xp), E(fp)), np.interp(x[:, ::-2], xp, fp))
    assert_matches(ember.interp(E(x), E(xp), E(fp), period=2.0), np.interp(x, xp, fp, period=2.0))
    cf = fp + 1j * fp[::-1]
    assert_matches(ember.interp(E(x), E(xp), E(cf)), np.interp(x, xp, cf))
    assert_matches(ember.interp(2.5, [1, 2, 3], [3, 2, 0]),
                   np.interp(2.5, [1, 2, 3], [3, 2, 0]).astype(np.float32))
    r = ember.interp(E(x.astype(np.float32)), E(xp.astype(np.float32)), E(fp.astype(np.float32)))
    assert r.dtype == np.float32
    np.testing.assert_allclose(np.asarray(r), np.interp(x, xp, fp), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="interp"):
        ember.interp(E(x), E(xp), E(fp[:-1]))


def test_interp_gradients():
    xp = ember.asarray([0.0, 1.0, 3.0, 3.5], dtype=ember.float64)
    fp = ember.asarray([1.0, -2.0, 5.0, 0.5], dtype=ember.float64, requires_grad=True)
    x = ember.asarray([[-0.5, 0.25], [1.5, 2.9], [3.2, 4.0]], dtype=ember.float64,
                      requires_grad=True)
    for kw in ({}, {"left": 0.0, "right": 9.0}):
        assert ember.autograd.gradcheck(lambda a, f: ember.interp(a, xp, f, **kw), (x, fp))
    # the slope where x lies inside, 0 outside (a finite-difference check of one point)
    y = ember.interp(x, xp, fp)
    y.sum().backward()
    assert x.grad.tolist() == [[0.0, -3.0], [3.5, 3.5], [-9.0, 0.0]]
    with pytest.raises(RuntimeError, match="xp"):
        ember.interp(x, xp.detach().requires_grad_(True), fp).sum().backward()


@pytest.mark.parametrize("dims", [(2, 3), (4,), (), (0, 2)])
@pytest.mark.parametrize("dtype", [int, np.int32, float])
def test_indices_matches_numpy(dims, dtype):
    assert_matches(ember.indices(dims, dtype=dtype), np.indices(dims, dtype=dtype))
    for g, w in zip(ember.indices(dims, dtype=dtype, sparse=True),
                    np.indices(dims, dtype=dtype, sparse=True)):
        assert_matches(g, w)


def test_ndindex_and_ndenumerate_match_numpy():
    assert list(ember.ndindex(2, 3)) == list(np.ndindex(2, 3))
    assert list(ember.ndindex((2, 1))) == list(np.ndindex((2, 1)))
    assert list(ember.ndindex()) == list(np.ndindex())
    for a in (np.arange(6.0).reshape(2, 3)[:, ::-1], np.array(4), np.zeros((0, 2))):
        got = list(ember.ndenumerate(E(a)))
        want = list(np.ndenumerate(a))
        assert [i for i, _ in got] == [i for i, _ in want]
        assert [v for _, v in got] == [v for _, v in want]


@pytest.mark.parametrize("bitorder", ["big", "little"])
def test_packbits_unpackbits_match_numpy(bitorder):
    rng = np.random.default_rng(5)
    bits = rng.integers(0, 2, (3, 13)).astype(np.uint8)
    for a in (bits, bits[:, ::-1], bits.astype(bool), bits.astype(np.int32)):
        for axis in (None, 0, 1, -1):
            assert_matches(ember.packbits(E(a), axis=axis, bitorder=bitorder),
                           np.packbits(a, axis=axis, bitorder=bitorder))
    packed = np.packbits(bits, axis=1)
    for axis, count in ((None, None), (1, None), (1, 11), (0, None), (None, -3)):
        assert_matches(ember.unpackbits(E(packed), axis=axis, count=count, bitorder=bitorder),
                       np.unpackbits(packed, axis=axis, count=count, bitorder=bitorder))
    assert_matches(ember.packbits(E(np.zeros(0, np.uint8))), np.packbits(np.zeros(0, np.uint8)))
    with pytest.raises(TypeError, match="packbits"):
        ember.packbits(E(np.ones(3)))
    with pytest.raises(TypeError, match="unpackbits"):
        ember.unpackbits(E(np.ones(3, np.int32)))


# ---------------------------------------------------------------- print options

def test_printoptions_change_embers_printing_as_numpys():
    a = np.array([1 / 3, 2e-9, 12345.678, np.nan, np.inf])
    x = E(a)
    assert ember.get_printoptions() == np.get_printoptions()
    for opts in ({"precision": 3}, {"suppress": True}, {"precision": 2, "floatmode": "fixed"},
                 {"nanstr": "NaN", "infstr": "Inf"}, {"sign": "+"}, {"threshold": 3, "edgeitems": 1},
                 {"formatter": {"float": lambda v: f"<{v:.1f}>"}}, {"linewidth": 20}):
        with ember.printoptions(**opts) as got:
            with np.printoptions(**opts):
                assert str(x) == str(a)
                assert repr(x) == repr(a)
                assert got == np.get_printoptions()
            # ember's options leave NumPy's printing alone
            assert str(a) == np.array2string(a)
    assert ember.get_printoptions() == np.get_printoptions()
    big = np.arange(2000)
    assert str(E(big)) == str(big)


def test_set_printoptions_validates_and_persists():
    try:
        ember.set_printoptions(precision=4)
        assert ember.get_printoptions()["precision"] == 4
        ember.set_printoptions(linewidth=30)                  # the others stay
        assert ember.get_printoptions()["precision"] == 4
        assert np.get_printoptions()["precision"] == 8
        with pytest.raises((TypeError, ValueError)):
            ember.set_printoptions(precision="many")
        with pytest.raises(ValueError):
            ember.set_printoptions(floatmode="sometimes")
        assert ember.get_printoptions()["precision"] == 4
    finally:
        ember.set_printoptions(**np.get_printoptions())


# ---------------------------------------------------------------- emath

EMATH_DOMAIN = {
    "sqrt": [-4.0, 0.0, 2.25], "log": [-1.0, 1.0, 10.0], "log2": [-8.0, 0.5, 8.0],
    "log10": [-100.0, 1.0, 1000.0], "arccos": [-2.0, 0.5, 3.0], "arcsin": [-2.0, 0.5, 3.0],
    "arctanh": [-2.0, 0.5, 3.0],
}


@pytest.mark.parametrize("name", sorted(EMATH_DOMAIN))
def test_emath_matches_numpy(name):
    vals = np.array(EMATH_DOMAIN[name])
    fn, ref = getattr(ember.emath, name), getattr(np.emath, name)
    assert_matches(fn(E(vals)), ref(vals))
    inside = vals[1:2]                         # in the real domain: a real result
    assert_matches(fn(E(inside)), ref(inside))
    got32 = fn(E(vals.astype(np.float32)))
    assert got32.dtype == np.complex64
    np.testing.assert_allclose(np.asarray(got32), ref(vals), rtol=1e-5)
    assert_matches(fn(E(vals.reshape(3, 1)[::-1])), ref(vals.reshape(3, 1)[::-1]))
    assert_matches(fn(E(vals[:0])), ref(vals[:0]))


def test_emath_logn_power_and_gradient():
    v = np.array([-8.0, 4.0, 0.5])
    assert_matches(ember.emath.logn(2.0 * np.ones(1), E(v)), np.emath.logn(2.0 * np.ones(1), v))
    assert_matches(ember.emath.logn(E(np.array([-2.0])), E(v)), np.emath.logn(np.array([-2.0]), v))
    assert_matches(ember.emath.power(E(v), 2), np.emath.power(v, 2))
    np.testing.assert_allclose(np.asarray(ember.emath.power(E(v), 0.5)), np.emath.power(v, 0.5),
                               rtol=1e-12)
    x = ember.asarray([4.0, 9.0], dtype=ember.float64, requires_grad=True)
    ember.emath.sqrt(x).sum().backward()
    np.testing.assert_allclose(np.asarray(x.grad), 0.5 / np.sqrt([4.0, 9.0]))


# ---------------------------------------------------------------- show_config

def test_show_config_reports_build_and_runtime(capsys):
    cfg = ember.show_config(mode="dicts")
    assert cfg["ember"]["version"] == ember.__version__
    assert cfg["Build"]["compiler"]["name"] and cfg["Build"]["openmp"] in (True, False)
    assert cfg["CPU"]["simd"]["elementwise_loops"] in ("avx2", "baseline")
    assert cfg["CPU"]["threads"] == ember.get_num_threads()
    assert "ember_gemm" in cfg["BLAS"] and "numpy" in cfg["BLAS"]
    from ember._kernels.cpu import gemm
    assert cfg["BLAS"]["ember_gemm"]["bfloat16_kernel"] == ("avx512_bf16" if gemm.bf16_kernel()
                                                            else None)
    for key in ("cupy_distribution", "emulation"):
        assert key in cfg["GPU"]
    assert "mpi4py" in cfg["MPI"]
    ember.show_config()
    out = capsys.readouterr().out
    assert f"version: {ember.__version__}" in out and "GPU:" in out and "MPI:" in out
    with pytest.raises(ValueError):
        ember.show_config(mode="html")


def test_import_ember_stays_light():
    r = _run("import sys, ember; print(sorted(m for m in ('cupy', 'mpi4py', 'scipy', 'torch') "
             "if m in sys.modules))")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


# ---------------------------------------------------------------- random: NumPy's streams

GEN_DRAWS = [
    ("random", (5,), {}), ("standard_normal", ((2, 3),), {}), ("normal", (1.0, 2.0, 4), {}),
    ("uniform", (-1, 3, (2, 2)), {}), ("exponential", (2.0, 3), {}),
    ("integers", (0, 10, 6), {}), ("integers", (5,), {"size": 3, "endpoint": True}),
    ("choice", (10, 4), {"replace": False}), ("permutation", (7,), {}),
    ("poisson", (3.0, 5), {}), ("binomial", (10, 0.3, 5), {}), ("gamma", (2.0, 1.0, 3), {}),
    ("beta", (2.0, 3.0, 3), {}), ("standard_exponential", (4,), {}),
    ("standard_gamma", (1.5, 3), {}), ("multivariate_normal", ([0, 1], [[1, 0.5], [0.5, 2]], 3), {}),
    ("dirichlet", ([1.0, 2.0, 3.0], 2), {}), ("laplace", (0.0, 1.0, 3), {}),
]


def _as_float64(kwargs, name):
    if name in ("integers", "choice", "permutation", "poisson", "binomial"):
        return kwargs
    return dict(kwargs, dtype=ember.float64)


@pytest.mark.parametrize("name,args,kwargs", GEN_DRAWS, ids=[g[0] for g in GEN_DRAWS])
def test_default_rng_draws_numpys_stream(name, args, kwargs):
    g, n = ember.random.default_rng(1234), np.random.default_rng(1234)
    for _ in range(2):                               # and the stream goes on the same way
        got = getattr(g, name)(*args, **_as_float64(kwargs, name))
        want = np.asarray(getattr(n, name)(*args, **kwargs))
        assert_matches(got, want)
    # the default float dtype: NumPy's values, rounded once
    g, n = ember.random.default_rng(7), np.random.default_rng(7)
    got = getattr(g, name)(*args, **kwargs)
    want = np.asarray(getattr(n, name)(*args, **kwargs))
    assert_matches(got, want.astype(np.float32) if want.dtype == np.float64 else want)


def test_default_rng_float32_algorithms_and_shuffle():
    g, n = ember.random.default_rng(3), np.random.default_rng(3)
    assert_matches(g.random(4, dtype=ember.float32), n.random(4, dtype=np.float32))
    assert_matches(g.standard_normal(4, dtype=ember.float32),
                   n.standard_normal(4, dtype=np.float32))
    a = np.arange(12).reshape(3, 4)
    x = E(a.copy())
    g.shuffle(x)
    n.shuffle(a)
    assert_matches(x, a)
    assert_matches(g.permuted(E(a), axis=1), n.permuted(a, axis=1))
    assert_matches(g.permutation(E(a), axis=1), n.permutation(a, axis=1))
    assert_matches(g.integers(0, 5, 3, dtype=np.int8), n.integers(0, 5, 3, dtype=np.int8))
    with pytest.raises(TypeError):
        g.random(2, dtype=ember.int32)
    for bg in ("PCG64", "MT19937", "Philox", "SFC64", "PCG64DXSM"):
        g = ember.random.Generator(getattr(ember.random, bg)(ember.random.SeedSequence(8)))
        n = np.random.Generator(getattr(np.random, bg)(np.random.SeedSequence(8)))
        assert_matches(g.normal(size=3, dtype=ember.float64), n.normal(size=3))
    kids = ember.random.default_rng(2).spawn(2)
    assert_matches(kids[1].integers(0, 9, 4), np.random.default_rng(2).spawn(2)[1].integers(0, 9, 4))


def test_legacy_module_functions_draw_numpys_legacy_stream():
    ember.random.seed(42)
    np.random.seed(42)
    f64 = {"dtype": ember.float64}
    assert_matches(ember.random.rand(2, 3, **f64), np.random.rand(2, 3))
    assert_matches(ember.random.randn(4, **f64), np.random.randn(4))
    assert_matches(ember.random.randint(0, 100, size=5), np.random.randint(0, 100, size=5))
    assert_matches(ember.random.randint(7, size=(2, 2)), np.random.randint(7, size=(2, 2)))
    assert_matches(ember.random.random((3,), **f64), np.random.random((3,)))
    assert_matches(ember.random.random_sample(2, **f64), np.random.random_sample(2))
    assert_matches(ember.random.normal(1.0, 3.0, 4, **f64), np.random.normal(1.0, 3.0, 4))
    assert_matches(ember.random.uniform(-2, 2, (2, 2), **f64), np.random.uniform(-2, 2, (2, 2)))
    assert_matches(ember.random.choice(10, 3, replace=False), np.random.choice(10, 3, replace=False))
    assert_matches(ember.random.choice(E(np.arange(5.0)), 4, p=[0.1, 0.2, 0.3, 0.2, 0.2]),
                   np.random.choice(np.arange(5.0), 4, p=[0.1, 0.2, 0.3, 0.2, 0.2]))
    assert_matches(ember.random.permutation(6), np.random.permutation(6))
    a = np.arange(10)
    x = E(a.copy())
    ember.random.shuffle(x)
    np.random.shuffle(a)
    assert_matches(x, a)
    assert_matches(ember.random.standard_normal(3, **f64), np.random.standard_normal(3))
    assert_matches(ember.random.exponential(2.0, 3, **f64), np.random.exponential(2.0, 3))
    assert_matches(ember.random.poisson(2.0, 4), np.random.poisson(2.0, 4))
    assert_matches(ember.random.binomial(5, 0.5, 4), np.random.binomial(5, 0.5, 4))
    assert_matches(ember.random.beta(2.0, 2.0, 2, **f64), np.random.beta(2.0, 2.0, 2))
    s_e, s_n = ember.random.get_state(), np.random.get_state()
    assert s_e[0] == s_n[0] and np.array_equal(s_e[1], s_n[1]) and s_e[2:] == s_n[2:]
    # the default float dtype: NumPy's values, rounded
    assert_matches(ember.random.rand(3), np.random.rand(3).astype(np.float32))
    # a state from NumPy restores ember's stream
    ember.random.set_state(np.random.get_state())
    assert_matches(ember.random.randn(2, **f64), np.random.randn(2))
    r = ember.random.RandomState(9)
    assert_matches(r.rand(3, dtype=ember.float64), np.random.RandomState(9).rand(3))


def test_manual_seed_makes_torch_style_programs_reproducible():
    from ember import nn
    import ember.nn.functional as F

    def program():
        g = ember.manual_seed(123)
        model = nn.Linear(4, 3)
        x = ember.random.randn(2, 4)
        y = F.dropout(ember.ones(50), p=0.5)
        w = nn.init.normal_(ember.empty(3))
        return g, [np.asarray(t.detach()).copy() for t in (model.weight, model.bias, x, y, w)]

    g1, a = program()
    g2, b = program()
    assert g1 is g2 is ember.default_generator
    for u, v in zip(a, b):
        np.testing.assert_array_equal(u, v)
    assert ember.initial_seed() == 123
    assert ember.manual_seed(-1).initial_seed() == 2 ** 64 - 1      # PyTorch's mapping
    ember.manual_seed(2 ** 40)
    r1 = ember.random.rand(2)
    ember.manual_seed(2 ** 40)
    assert_matches(ember.random.rand(2), np.asarray(r1))
    s = ember.seed()
    assert isinstance(s, int) and ember.initial_seed() == s
    # a private generator feeds generator= arguments and leaves the global state alone
    gen = ember.Generator().manual_seed(5)
    st = ember.default_generator.get_state()
    w1 = nn.init.uniform_(ember.empty(4), generator=gen).tolist()
    w2 = nn.init.uniform_(ember.empty(4), generator=ember.Generator().manual_seed(5)).tolist()
    assert w1 == w2
    now = ember.default_generator.get_state()["mt19937"]
    assert np.array_equal(now["state"]["key"], st["mt19937"]["state"]["key"])
    assert now["state"]["pos"] == st["mt19937"]["state"]["pos"]
    ember.default_generator.set_state(st)
    with pytest.raises(RuntimeError, match="CPU"):
        ember.Generator("cuda")
