"""The GPU matmul, linear and adaptive-pooling glue (ember/cuda/ops_core.py,
ops_linear.py, ops_pool.py) run on the CPU: CuPy replaced by NumPy and cuBLAS by the
column-major model of tests/cublas_model.py, against ember's CPU ops.  The GEMM plan
itself is tests/test_cuda_gemm_plan.py; this checks what the ops hand it.
"""
import types

import numpy as np
import pytest

import ember
from ember._core import array as _array
from ember.cuda import _gemm, ops_core, ops_linear, ops_pool
import ember.nn.functional as F
from ember.nn.functional import pooling as cpu_pooling

from cublas_model import CublasModel


def _np(x):
    return x if isinstance(x, np.ndarray) else _array._numpy(x)


@pytest.fixture
def model(monkeypatch):
    m = CublasModel()
    fake_cp = types.SimpleNamespace(
        **{k: getattr(np, k) for k in ("asarray", "empty", "zeros", "ascontiguousarray",
                                        "broadcast_to")},
        cuda=types.SimpleNamespace(Device=lambda: types.SimpleNamespace(id=0)))
    fake = types.SimpleNamespace(cp=lambda: fake_cp, as_cupy=_np,
                                 from_cupy=lambda c: ember.asarray(np.ascontiguousarray(c)))
    for mod in (ops_core, ops_linear, ops_pool):
        monkeypatch.setattr(mod, "R", fake)
        monkeypatch.setattr(mod, "mm", lambda a, b, out=None, alpha=1.0:
                            _gemm.matmul(np, a, b, out, m, alpha))
    monkeypatch.setattr(ops_pool, "_MATS", {})
    return m


def _r(shape, seed=0, dtype=np.float64):
    return ember.asarray(np.random.default_rng(seed).standard_normal(shape).astype(dtype))


@pytest.mark.parametrize("sa,sb", [((3, 4), (4, 5)), ((2, 3, 4), (4, 5)), ((4,), (4,)),
                                   ((4,), (2, 4, 3)), ((2, 1, 3, 4), (5, 4, 2))])
def test_matmul(model, sa, sb):
    a, b = _r(sa, 1), _r(sb, 2)
    want = np.matmul(a.numpy(), b.numpy())
    got = ops_core.matmul(a, b)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12)
    out = ember.zeros(want.shape, dtype=ember.float64)
    assert ops_core.matmul(a, b, out=out) is out
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-12)


def test_matmul_mixed_dtypes_promote(model):
    a, b = _r((3, 4), 1, np.float32), _r((4, 2), 2)
    got = ops_core.matmul(a, b)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got.numpy(), a.numpy().astype(np.float64) @ b.numpy(), rtol=1e-6)


@pytest.mark.parametrize("xs", [(5, 4), (2, 3, 4), (4,)])
def test_linear_is_one_gemm_with_the_weight_in_place(model, xs):
    x, w, b = _r(xs, 1), _r((6, 4), 2), _r((6,), 3)
    want = F.linear(x, w, b)                            # the CPU op
    got = ops_linear.linear(x, w, b)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)
    (p, first, second, _), = model.calls
    assert p.batch == 1 and first == _np(w).ctypes.data and p.transa == 1


def test_bilinear(model):
    x1, x2, w, b = _r((5, 3), 1), _r((5, 4), 2), _r((2, 3, 4), 3), _r((2,), 4)
    want = F.bilinear(x1, x2, w, b)
    got = ops_linear.bilinear(x1, x2, w, b)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)


@pytest.mark.parametrize("xs,osize", [((2, 3, 7, 9), (3, 4)), ((2, 3, 8, 8), (8, 8)),
                                      ((1, 2, 5, 6), (1, 6))])
def test_adaptive_avg_pool_forward_and_backward(model, xs, osize):
    x = _r(xs, 1)
    want = cpu_pooling._adaptive_avg_pool(x, 2, osize)
    got = ops_pool._adaptive_avg_pool(x, 2, osize)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)
    g = _r(want.shape, 2)
    want_g = cpu_pooling._adaptive_avg_pool_backward(g, tuple(xs), 2)
    got_g = ops_pool._adaptive_avg_pool_backward(g, tuple(xs), 2)
    np.testing.assert_allclose(got_g.numpy(), want_g.numpy(), rtol=1e-12)
