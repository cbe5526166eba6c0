"""Creation functions vs NumPy: from data, filled, ranges, grids, triangles, DLPack."""
import array as pyarray

import numpy as np
import pytest

import ember
from helpers import ALL_DTYPES, assert_matches, layouts


def test_asarray_dtype_rules():
    assert ember.asarray([1.5, 2]).dtype == np.float32          # Python floats -> default float
    assert ember.asarray([1, 2]).dtype == np.int64
    assert ember.asarray([True]).dtype == np.bool_
    assert ember.asarray([1j]).dtype == np.complex64
    assert ember.asarray(np.array([1.5])).dtype == np.float64   # NumPy arrays keep their dtype
    assert ember.asarray(2.5).shape == ()
    assert ember.asarray([[1, 2], [3, 4]], dtype=ember.float64).dtype == np.float64
    ember.set_default_dtype(ember.float64)
    assert ember.asarray([1.5]).dtype == np.float64
    assert ember.arange(0, 1, 0.5).dtype == np.float64


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_asarray_roundtrip_all_dtypes(dtype):
    a = np.arange(6).reshape(2, 3).astype(dtype)
    x = ember.asarray(a)
    assert x.dtype == a.dtype
    assert np.shares_memory(np.asarray(x), a)
    assert_matches(x, a)
    assert_matches(ember.asarray(x.tolist(), dtype=dtype), a)


def test_asarray_copy_semantics():
    a = np.arange(3.0)
    assert np.shares_memory(np.asarray(ember.asarray(a, copy=False)), a)
    assert not np.shares_memory(np.asarray(ember.asarray(a, copy=True)), a)
    with pytest.raises(ValueError, match="copy"):
        ember.asarray(a, dtype=ember.float32, copy=False)
    with pytest.raises(ValueError, match="copy"):
        ember.asarray([1, 2], copy=False)
    x = ember.asarray(a)
    assert ember.asarray(x) is x
    y = ember.array(x)
    assert y is not x and y.storage is not x.storage
    big_endian = np.arange(3, dtype=">i4")
    assert_matches(ember.asarray(big_endian), np.arange(3, dtype=np.int32))


def test_asarray_from_buffers_and_errors():
    assert ember.asarray(pyarray.array("i", [1, 2])).tolist() == [1, 2]
    assert ember.asarray(memoryview(b"\x05")).tolist() == [5]
    with pytest.raises(TypeError):
        ember.asarray(["a", "b"])
    with pytest.raises(TypeError):
        ember.asarray({"a": 1})


@pytest.mark.parametrize("dtype", [None, "int32", "float64", "bool", "complex64"])
@pytest.mark.parametrize("shape", [(), (0,), (3,), (2, 3)])
def test_filled_constructors(dtype, shape):
    npdt = np.float32 if dtype is None else dtype
    assert_matches(ember.zeros(shape, dtype=dtype), np.zeros(shape, npdt))
    assert_matches(ember.ones(shape, dtype=dtype), np.ones(shape, npdt))
    assert_matches(ember.full(shape, 3, dtype=dtype), np.full(shape, 3, npdt if dtype else np.int64))
    assert ember.empty(shape, dtype=dtype).shape == shape
    like = ember.zeros(shape, dtype=dtype)
    assert_matches(ember.ones_like(like), np.ones(shape, npdt))
    assert_matches(ember.zeros_like(like, dtype=ember.int8), np.zeros(shape, np.int8))
    assert_matches(ember.full_like(like, 2), np.full(shape, 2, npdt))
    assert ember.empty_like(like).shape == shape


def test_full_infers_dtype():
    assert ember.full((2,), True).dtype == np.bool_
    assert ember.full((2,), 7).dtype == np.int64
    assert ember.full((2,), 7.0).dtype == np.float32
    assert ember.full((2,), 1j).dtype == np.complex64
    with pytest.raises(OverflowError):
        ember.full((2,), 300, dtype=ember.uint8)
    with pytest.raises(ValueError, match="negative dimensions"):
        ember.zeros((2, -1))


@pytest.mark.parametrize("args", [(5,), (2, 9), (2, 9, 3), (9, 2, -2), (0, 1, 0.1), (1.5, 4),
                                  (-3, 3, 0.7), (5, 2)])
def test_arange(args):
    got = ember.arange(*args)
    exp = np.arange(*args)
    if exp.dtype == np.float64:
        exp = np.arange(*args, dtype=np.float32)
    assert_matches(got, exp)
    with pytest.raises(ValueError, match="step"):
        ember.arange(0, 1, 0)


@pytest.mark.parametrize("kw", [{}, {"endpoint": False}, {"num": 1}, {"num": 0}])
def test_linspace(kw):
    assert_matches(ember.linspace(-1, 2, **{"num": 7, **kw}),
                   np.linspace(-1, 2, **{"num": 7, **kw}).astype(np.float32))
    x, step = ember.linspace(0, 1, 5, retstep=True)
    assert step == 0.25
    with pytest.raises(ValueError):
        ember.linspace(0, 1, -1)


@pytest.mark.parametrize("n,m,k", [(3, None, 0), (3, 4, 1), (4, 3, -2), (2, 2, 5), (0, 3, 0)])
def test_eye_identity_tri(n, m, k):
    assert_matches(ember.eye(n, m, k=k), np.eye(n, m, k=k, dtype=np.float32))
    a = np.arange(20).reshape(4, 5)
    assert_matches(ember.tril(ember.asarray(a), k=k), np.tril(a, k))
    assert_matches(ember.triu(ember.asarray(a), k=k), np.triu(a, k))
    assert_matches(ember.identity(3, dtype=ember.int8), np.identity(3, dtype=np.int8))
    with pytest.raises(ValueError, match="tril"):
        ember.tril(ember.arange(3))


@pytest.mark.parametrize("indexing", ["xy", "ij"])
def test_meshgrid(indexing):
    a, b = np.arange(3), np.arange(4.0)
    for got, exp in zip(ember.meshgrid(ember.asarray(a), ember.asarray(b), indexing=indexing),
                        np.meshgrid(a, b, indexing=indexing)):
        assert_matches(got, exp)
    # NumPy flattens inputs that are not 1-d; sparse keeps the length-1 axes
    for got, exp in zip(ember.meshgrid(ember.asarray(a.reshape(3, 1)), ember.asarray(np.float64(2)),
                                       indexing=indexing),
                        np.meshgrid(a.reshape(3, 1), np.float64(2), indexing=indexing)):
        assert_matches(got, exp)
    for got, exp in zip(ember.meshgrid(ember.asarray(a), ember.asarray(b), indexing=indexing, sparse=True),
                        np.meshgrid(a, b, indexing=indexing, sparse=True)):
        assert_matches(got, exp)
    views = ember.meshgrid(ember.asarray(a), ember.asarray(b), copy=False)
    assert_matches(views[0], np.meshgrid(a, b)[0])
    assert ember.meshgrid() == []
    with pytest.raises(ValueError, match="indexing"):
        ember.meshgrid(ember.asarray(a), indexing="yx")


def test_diag_and_copy_functions():
    v = np.arange(3)
    assert_matches(ember.diag(ember.asarray(v), k=1), np.diag(v, k=1))
    m = np.arange(9).reshape(3, 3)
    assert_matches(ember.diag(ember.asarray(m), k=-1), np.diag(m, k=-1))
    t = ember.asarray(m).T
    c = ember.ascontiguousarray(t)
    assert c.is_contiguous() and not t.is_contiguous()
    assert_matches(c, m.T)
    assert_matches(ember.copy(t), m.T)


def test_requires_grad_and_device_keywords():
    for make in (lambda **k: ember.zeros(2, **k), lambda **k: ember.ones(2, **k),
                 lambda **k: ember.full(2, 1.0, **k), lambda **k: ember.asarray([1.0], **k),
                 lambda **k: ember.arange(3.0, **k), lambda **k: ember.eye(2, **k)):
        assert make(requires_grad=True).requires_grad
        assert make(device="cpu").device == "cpu"
        with pytest.raises(RuntimeError, match="cuda"):
            make(device="cuda:0")


def test_from_dlpack_numpy_and_torch():
    a = np.arange(4.0)
    x = ember.from_dlpack(a)
    assert np.shares_memory(np.asarray(x), a)
    torch = pytest.importorskip("torch")
    t = torch.arange(6, dtype=torch.float32).reshape(2, 3)[:, ::2]
    e = ember.from_dlpack(t)
    assert_matches(e, t.numpy())
    t[0, 0] = 42
    assert e[0, 0].item() == 42                    # shared memory
    back = torch.from_dlpack(ember.arange(3.0))
    assert back.tolist() == [0.0, 1.0, 2.0]
    with pytest.raises(TypeError):
        ember.from_dlpack([1, 2])


# ---------------------------------------------------------------- more edge cases

def test_numpy_positional_signatures():
    assert_matches(ember.zeros((2, 3), ember.int32), np.zeros((2, 3), np.int32))
    assert_matches(ember.ones(2, "int8"), np.ones(2, "int8"))
    assert ember.empty((2,), ember.float64).dtype == np.float64
    assert_matches(ember.full((2,), 3, ember.int16), np.full((2,), 3, np.int16))
    assert_matches(ember.arange(0, 10, 3, ember.int32), np.arange(0, 10, 3, np.int32))
    assert_matches(ember.eye(3, 4, 1, ember.int8), np.eye(3, 4, 1, np.int8))
    assert_matches(ember.identity(2, ember.int64), np.identity(2, np.int64))
    assert_matches(ember.linspace(0, 1, 3, True, False, ember.float64), np.linspace(0, 1, 3))
    a = np.arange(12).reshape(3, 4)
    assert_matches(ember.tril(ember.asarray(a), 1), np.tril(a, 1))
    assert_matches(ember.triu(ember.asarray(a), -1), np.triu(a, -1))
    assert_matches(ember.zeros_like(ember.asarray(a), ember.float16), np.zeros_like(a, np.float16))


@pytest.mark.parametrize("make", [ember.zeros, ember.ones, ember.empty])
def test_fortran_order(make):
    x = make((2, 3), order="F")
    assert x.shape == (2, 3) and np.asarray(x).flags.f_contiguous
    y = ember.full((2, 3), 7, order="F")
    assert np.asarray(y).flags.f_contiguous and y.tolist() == [[7] * 3] * 2
    f = ember.asarray(np.arange(6.0).reshape(2, 3), order="F")
    assert np.asarray(f).flags.f_contiguous
    assert_matches(f, np.arange(6.0).reshape(2, 3))
    with pytest.raises(ValueError, match="order"):
        make((2,), order="X")
    with pytest.raises(ValueError, match="copy"):
        ember.asarray(np.ones((2, 3)), order="F", copy=False)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_filled_constructors_all_dtypes(dtype):
    for shape in [(), (0, 2), (2, 3)]:
        assert_matches(ember.zeros(shape, dtype=dtype), np.zeros(shape, dtype))
        assert_matches(ember.ones(shape, dtype=dtype), np.ones(shape, dtype))
        assert_matches(ember.full(shape, 1, dtype=dtype), np.full(shape, 1, dtype))
        assert_matches(ember.eye(3, dtype=dtype), np.eye(3, dtype=dtype))
        src = np.arange(6).reshape(2, 3).astype(dtype)
        assert_matches(ember.ones_like(ember.asarray(src)), np.ones_like(src))
        assert_matches(ember.full_like(ember.asarray(src), 1), np.full_like(src, 1))


def test_full_fill_values():
    assert_matches(ember.full((2,), 2.7, dtype=ember.int32), np.full((2,), 2.7, np.int32))
    assert_matches(ember.full((2,), 2, dtype=ember.bool), np.full((2,), 2, bool))
    assert_matches(ember.full((3,), float("nan")), np.full((3,), np.nan, np.float32))
    assert_matches(ember.full((2,), np.int8(3)), np.full((2,), 3, np.int8))       # NumPy scalar keeps dtype
    assert_matches(ember.full((2,), ember.asarray(np.float64(2.5))), np.full((2,), 2.5))
    assert_matches(ember.full(3, -1, dtype=ember.int8), np.full(3, -1, np.int8))
    assert_matches(ember.full((1,), 2 ** 63, dtype=ember.uint64), np.full((1,), 2 ** 63, np.uint64))
    ember.set_default_dtype(ember.float64)
    assert ember.full((1,), 0.5).dtype == np.float64 and ember.full((1,), 1j).dtype == np.complex128
    with pytest.raises(OverflowError):
        ember.full((2,), -1, dtype=ember.uint8)
    with pytest.raises(ValueError, match="scalar"):
        ember.full((2, 2), ember.asarray([1, 2]))
    with pytest.raises(TypeError, match="shape"):
        ember.full("ab", 1)
    with pytest.raises(TypeError, match="dtype"):
        ember.zeros(2, dtype=object)
    with pytest.raises(TypeError, match="dtype"):
        ember.ones(2, dtype="U3")


def test_asarray_more_sources():
    # nested lists holding ember arrays, NumPy scalars, 0-d arrays, big ints
    x = ember.asarray([ember.ones(2), ember.zeros(2)])
    assert_matches(x, np.array([[1, 1], [0, 0]], np.float32))
    assert_matches(ember.asarray(np.float64(1.5)), np.array(1.5))
    assert_matches(ember.asarray(np.int8(3)), np.array(3, np.int8))
    assert_matches(ember.asarray([2 ** 63]), np.array([2 ** 63], np.uint64))
    assert_matches(ember.asarray([]), np.array([], np.float32))
    assert_matches(ember.asarray([True, 2]), np.array([1, 2]))
    assert_matches(ember.asarray([1, 2.5]), np.array([1, 2.5], np.float32))
    assert_matches(ember.asarray([[1, 2]], dtype=float), np.array([[1, 2]], dtype=float))
    assert_matches(ember.asarray((1, 2), dtype="uint16"), np.array([1, 2], np.uint16))
    assert_matches(ember.asarray(np.ones((4, 4))[::2, ::-1]), np.ones((2, 4)))
    assert ember.asarray(np.ones((4, 4))[::2, ::-1]).strides == (64, -8)        # layout kept
    assert ember.asarray([1.0], requires_grad=True).requires_grad
    with pytest.raises(ValueError):
        ember.asarray([[1, 2], [3]])                                             # ragged
    with pytest.raises(OverflowError):
        ember.asarray([300], dtype=ember.uint8)
    for bad in (None, "abc", np.array(["2020-01-01"], dtype="M8[D]"), np.array([1, None], dtype=object),
                np.ones(2, dtype=np.longdouble) if np.dtype(np.longdouble).itemsize > 8 else object()):
        with pytest.raises(TypeError):
            ember.asarray(bad)


def test_asarray_buffer_protocol_objects_are_zero_copy():
    b = bytearray(b"ab")
    x = ember.asarray(b)
    assert x.dtype == np.uint8 and x.tolist() == [97, 98]
    x[0] = 65
    assert b == bytearray(b"Ab")                        # writes through
    arr = pyarray.array("d", [1.0, 2.0])
    y = ember.asarray(arr, copy=False)
    assert y.dtype == np.float64
    y[1] = 5.0
    assert arr[1] == 5.0
    ro = ember.asarray(b"xy")
    assert ro.tolist() == [120, 121]
    with pytest.raises(ValueError, match="read-only"):
        ro[0] = 1
    strided = ember.asarray(memoryview(np.arange(6.0))[::2])
    assert_matches(strided, np.arange(6.0)[::2])
    assert_matches(ember.frombuffer(bytearray(b"\x01\x00\x02\x00"), dtype=ember.int16),
                   np.array([1, 2], np.int16))


def test_asarray_readonly_numpy_input_stays_readonly():
    a = np.ones(3)
    a.setflags(write=False)
    x = ember.asarray(a)
    assert_matches(x, a)
    with pytest.raises(ValueError, match="read-only"):
        x[0] = 2.0
    with pytest.raises(ValueError, match="read-only"):
        ember.add(x, 1, out=x)
    c = ember.asarray(a, copy=True)
    c[0] = 2.0
    assert a[0] == 1.0


def test_array_copy_keyword_follows_numpy2():
    a = np.arange(3.0)
    assert np.shares_memory(np.asarray(ember.array(a, copy=False)), a)
    assert np.shares_memory(np.asarray(ember.array(a, copy=None)), a)
    assert not np.shares_memory(np.asarray(ember.array(a)), a)
    with pytest.raises(ValueError, match="copy"):
        ember.array(a, dtype=ember.float32, copy=False)
    assert ember.array([1], ndmin=3).shape == (1, 1, 1)
    x = ember.asarray(a)
    assert ember.asarray(x, copy=False) is x
    assert ember.asarray(x, dtype=ember.float64, copy=False) is x
    with pytest.raises(ValueError, match="copy"):
        ember.asarray(x, dtype=ember.float32, copy=False)
    with pytest.raises(ValueError, match="copy"):
        ember.asarray(1.5, copy=False)


@pytest.mark.parametrize("args", [(0, 1, 0.1), (1, 0, -0.3), (0.5,), (-5,), (3, 3), (10, 0, -3),
                                  (-2.5, 2.5, 0.5), (0, 5, 7)])
def test_arange_length_rule(args):
    got = ember.arange(*args)
    exp = np.arange(*args)
    if exp.dtype.kind == "f":
        exp = np.arange(*args, dtype=np.float32)
    assert_matches(got, exp)


def test_arange_argument_types_and_errors():
    assert_matches(ember.arange(ember.asarray(4)), np.arange(4))              # 0-d array argument
    assert_matches(ember.arange(np.int32(3)), np.arange(3))
    assert ember.arange(np.float64(2)).dtype == np.float32                     # float -> default float
    assert_matches(ember.arange(5, dtype=ember.float64), np.arange(5, dtype=np.float64))
    assert_matches(ember.arange(0, 5, 1.5, dtype=ember.int64), np.arange(0, 5, 1.5, dtype=np.int64))
    for bad in ("3", 1j, ember.ones(2)):
        with pytest.raises(TypeError, match="arange"):
            ember.arange(bad)
    with pytest.raises(ValueError, match="arange"):
        ember.arange(0, np.inf)
    with pytest.raises(ValueError, match="arange"):
        ember.arange(0, np.nan)


def test_linspace_more():
    assert_matches(ember.linspace(-3, 0, 4, dtype=ember.int64), np.linspace(-3, 0, 4, dtype=np.int64))
    assert_matches(ember.linspace(-1, 1, 4, dtype=ember.int32), np.linspace(-1, 1, 4, dtype=np.int32))
    assert_matches(ember.linspace(0, 1j, 3), np.linspace(0, 1j, 3).astype(np.complex64))
    start = np.array([0.0, 1.0])
    for axis in (0, 1, -1):
        assert_matches(ember.linspace(ember.asarray(start), 2.0, 3, axis=axis),
                       np.linspace(start, 2.0, 3, axis=axis).astype(np.float32))
    assert ember.linspace(0, 1, 2, dtype=ember.float16).dtype == np.float16
    assert ember.linspace(0, 1, 3, requires_grad=True).requires_grad
    with pytest.raises(TypeError, match="linspace"):
        ember.linspace(0, 1, 2.5)
    assert_matches(ember.logspace(0, 3, 4), np.logspace(0, 3, 4).astype(np.float32))
    assert_matches(ember.logspace(0, 3, 4, base=2.0, endpoint=False, dtype=ember.float64),
                   np.logspace(0, 3, 4, base=2.0, endpoint=False))
    assert ember.logspace(0, 1, 2, requires_grad=True).requires_grad


def test_eye_errors_and_tri_layouts():
    with pytest.raises(ValueError, match="eye"):
        ember.eye(-1)
    with pytest.raises(TypeError, match="eye"):
        ember.eye(2.0)
    assert ember.eye(2, 0).shape == (2, 0)
    base = np.arange(24).reshape(2, 3, 4).astype(np.float32)
    for label, arr in layouts(base):
        for k in (-1, 0, 2):
            assert_matches(ember.tril(ember.asarray(arr), k=k), np.tril(arr, k))
            assert_matches(ember.triu(ember.asarray(arr), k=k), np.triu(arr, k))
    with pytest.raises(ValueError, match="triu"):
        ember.triu(ember.asarray(3.0))


def test_diag_more():
    for k in (-2, 0, 1):
        v = np.arange(1, 4).astype(np.float32)
        assert_matches(ember.diag(ember.asarray(v), k), np.diag(v, k))
        m = np.arange(12).reshape(3, 4)
        for label, arr in layouts(m):
            assert_matches(ember.diag(ember.asarray(arr), k=k), np.diag(arr, k))
    assert_matches(ember.diag([1, 2]), np.diag([1, 2]))
    with pytest.raises(ValueError, match="diag"):
        ember.diag(ember.asarray(1.0))
    with pytest.raises(ValueError, match="diag"):
        ember.diag(ember.zeros((2, 2, 2)))


def test_like_functions_keep_dtype_and_accept_keywords():
    src = ember.asarray(np.arange(6, dtype=np.int16).reshape(2, 3)).T
    for fn in (ember.zeros_like, ember.ones_like, ember.empty_like):
        r = fn(src)
        assert r.shape == (3, 2) and r.dtype == np.int16
        assert fn(src, dtype=ember.float64).dtype == np.float64
        assert fn(src, shape=(4,)).shape == (4,)
        assert fn(src, device="cpu", requires_grad=False).device == "cpu"
        with pytest.raises(RuntimeError, match="cuda"):
            fn(src, device="cuda")
    assert_matches(ember.full_like(src, 2.7), np.full_like(np.asarray(src), 2.7))
    assert_matches(ember.zeros_like([1.5, 2.5]), np.zeros(2, np.float32))


def test_device_keyword_everywhere():
    dev = ember.Device("cpu")
    calls = [lambda **k: ember.empty(2, **k), lambda **k: ember.zeros_like(ember.ones(2), **k),
             lambda **k: ember.linspace(0, 1, 3, **k), lambda **k: ember.logspace(0, 1, 3, **k),
             lambda **k: ember.identity(2, **k), lambda **k: ember.asarray(np.ones(2), **k),
             lambda **k: ember.from_dlpack(np.ones(2), **k), lambda **k: ember.full_like(ember.ones(1), 2, **k)]
    for make in calls:
        assert make(device=dev).device == "cpu"
        with pytest.raises(RuntimeError, match="not available"):
            make(device="cuda:1")
        with pytest.raises(ValueError):
            make(device="tpu")


def test_from_dlpack_copy_and_capsule():
    a = np.arange(4.0)
    c = ember.from_dlpack(a, copy=True)
    assert not np.shares_memory(np.asarray(c), a)
    x = ember.arange(3.0)
    assert ember.from_dlpack(x) is x
    assert ember.from_dlpack(x, copy=True).storage is not x.storage
    assert_matches(ember.from_dlpack(a.__dlpack__()), a)
    assert_matches(ember.from_dlpack(a[::-1]), a[::-1])


def test_ascontiguousarray_has_at_least_one_dimension():
    """NumPy's ascontiguousarray returns ndim >= 1: a 0-d input becomes shape (1,)."""
    for value in (2.5, np.float32(1.5), np.asarray(7)):
        x = ember.asarray(value)
        want = np.ascontiguousarray(np.asarray(x))
        got = ember.ascontiguousarray(x)
        assert got.shape == want.shape and got.dtype == want.dtype
        assert got.tolist() == want.tolist()
    x = ember.ones((2, 3))
    assert ember.ascontiguousarray(x).shape == (2, 3)
