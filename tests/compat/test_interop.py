"""NumPy protocols, DLPack and Python protocols on ember arrays."""
import copy
import pickle

import numpy as np
import pytest

import ember
from helpers import assert_matches


def test_numpy_ufuncs_return_ember_arrays():
    x = ember.asarray(np.arange(4.0))
    r = np.exp(x)
    assert isinstance(r, ember.ndarray)
    assert_matches(r, np.exp(np.arange(4.0)))
    assert isinstance(np.add(x, 1), ember.ndarray)
    out = ember.empty((4,), dtype=ember.float64)
    assert np.multiply(x, 2, out=out) is out
    assert out.tolist() == [0.0, 2.0, 4.0, 6.0]
    assert isinstance(np.add.reduce(x), (ember.ndarray, float, np.floating))
    assert isinstance(np.modf(x)[0], ember.ndarray)        # not one of ember's ufuncs: NumPy runs it


def test_numpy_functions_dispatch_to_ember():
    x = ember.asarray(np.arange(6.0).reshape(2, 3))
    for fn, args in [(np.sum, ()), (np.mean, ()), (np.concatenate, None), (np.transpose, ()),
                     (np.median, ()), (np.cumsum, ()), (np.linalg.norm, ()), (np.where, None)]:
        if fn is np.concatenate:
            r = fn([x, x])
        elif fn is np.where:
            r = fn(x > 2, x, 0.0)
        else:
            r = fn(x, *args)
        assert isinstance(r, ember.ndarray), fn


def test_numpy_asarray_is_zero_copy_and_writes_through():
    x = ember.zeros((2, 3))
    v = np.asarray(x)
    v[1, 2] = 5
    assert x[1, 2].item() == 5
    assert np.asarray(x[:, ::-1]).strides == (12, -4)
    assert np.array(x, dtype=np.float64).dtype == np.float64


def test_dlpack_roundtrip_numpy():
    x = ember.arange(5.0)
    n = np.from_dlpack(x)
    assert np.shares_memory(n, np.asarray(x))
    assert x.__dlpack_device__() == (1, 0)
    with pytest.raises(BufferError):
        x.__dlpack__(stream=1)


def test_torch_interop():
    torch = pytest.importorskip("torch")
    x = ember.arange(6.0).reshape(2, 3)
    t = torch.from_dlpack(x)
    t[0, 0] = 9
    assert x[0, 0].item() == 9
    e = ember.asarray(torch.ones(3).numpy())
    assert e.tolist() == [1.0, 1.0, 1.0]


def test_python_protocols():
    x = ember.asarray([[1.0, 2.0], [3.0, 4.0]])
    assert len(x) == 2
    assert [r.tolist() for r in x] == [[1.0, 2.0], [3.0, 4.0]]
    y = pickle.loads(pickle.dumps(x))
    assert isinstance(y, ember.ndarray) and y.tolist() == x.tolist()
    c = copy.deepcopy(x)
    assert c.storage is not x.storage and c.tolist() == x.tolist()
    assert repr(ember.asarray([1.0, 2.0])) == "array([1., 2.], dtype=float32)"
    assert str(ember.asarray([1, 2])) == "[1 2]"
    assert f"{ember.asarray(2.5):.1f}" == "2.5"
    assert "requires_grad=True" in repr(ember.zeros(1, requires_grad=True))
    with pytest.raises(TypeError):
        hash(x)
    assert x.__array_namespace__() is ember


def test_array_api_namespace_basics():
    xp = ember.zeros(1).__array_namespace__()
    a = xp.asarray([[1, 2], [3, 4]], dtype=xp.int32)
    assert xp.matmul(a, a).tolist() == [[7, 10], [15, 22]]
    assert xp.linalg.matrix_norm(xp.astype(a, xp.float64)).item() == pytest.approx(np.sqrt(30))
    assert xp.isdtype(a.dtype, "integral")
