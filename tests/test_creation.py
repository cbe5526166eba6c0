"""Creation functions and dtype functions vs NumPy."""
import array as pyarray

import numpy as np
import pytest

import ember
from helpers import ALL_DTYPES, assert_matches


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
    with pytest.raises(ValueError):
        ember.meshgrid(ember.zeros((2, 2)))


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


# ---------------------------------------------------------------- dtype functions

def test_dtype_objects_are_numpys():
    assert ember.float32 is np.float32 and ember.bool is np.bool_
    assert ember.zeros(1).dtype == ember.float32
    assert ember.dtype("int16") == np.int16


@pytest.mark.parametrize("a", ALL_DTYPES)
@pytest.mark.parametrize("b", ["bool", "int8", "uint64", "float16", "float32", "complex128"])
def test_result_type_and_promote_types_match_numpy(a, b):
    assert ember.result_type(np.dtype(a), np.dtype(b)) == np.result_type(a, b)
    assert ember.promote_types(a, b) == np.promote_types(a, b)
    assert ember.can_cast(a, b) == np.can_cast(a, b)
    assert ember.result_type(ember.zeros(1, dtype=a), ember.zeros(1, dtype=b)) == np.result_type(a, b)


def test_result_type_with_python_scalars():
    assert ember.result_type(ember.zeros(1, dtype=ember.int8), 1) == np.int8
    assert ember.result_type(ember.zeros(1, dtype=ember.int8), 1.0) == np.float32   # default float
    assert ember.result_type(ember.zeros(1, dtype=ember.float16), 1.0) == np.float16
    assert ember.result_type(ember.zeros(1, dtype=ember.float64), 1j) == np.complex128
    assert ember.result_type(1, 2.0) == np.float32
    with pytest.raises(ValueError):
        ember.result_type()


def test_finfo_iinfo_isdtype():
    assert ember.finfo(ember.float32).eps == np.finfo(np.float32).eps
    assert ember.finfo(ember.zeros(1, dtype=ember.float16)).max == np.finfo(np.float16).max
    assert ember.iinfo(ember.int16).min == -32768
    with pytest.raises(ValueError):
        ember.finfo(ember.int8)
    with pytest.raises(ValueError):
        ember.iinfo(ember.float32)
    assert ember.isdtype(ember.float32, "real floating")
    assert ember.isdtype(ember.uint8, ("integral", "bool"))
    assert not ember.isdtype(ember.complex64, "numeric") is False
    assert ember.isdtype(ember.int8, ember.int8)
    with pytest.raises(ValueError):
        ember.isdtype(ember.int8, "strings")
    with pytest.raises(TypeError):
        ember.set_default_dtype(ember.int32)
