"""The GPU attention glue (ember/cuda/ops_attention.py) run on the CPU: CuPy replaced by
NumPy, softmax.cu's row kernels by NumPy softmax, and cuBLAS by the column-major model
of tests/cublas_model.py.  Checks the GEMM operands (k read transposed, the scale as
the GEMM's alpha), broadcasting and the packed multi-head layouts of the forward and
backward against ember's CPU attention.  The kernels are checked on a GPU
(tests/test_cuda_nn.py).
"""
import types

import numpy as np
import pytest

import ember
from ember._core import array as _array
from ember._core.array import ndarray
from ember.cuda import _gemm, ops_attention
from ember.nn.functional import attention as cpu_attention

from cublas_model import CublasModel


def _np(x):
    return x if isinstance(x, np.ndarray) else _array._numpy(x)


def _softmax(c, log):
    c = np.asarray(c, np.float64)
    m = c.max(-1, keepdims=True)
    e = np.exp(c - m)
    s = e.sum(-1, keepdims=True)
    return (c - m - np.log(s)) if log else e / s


def _row_softmax(c, log):
    return np.ascontiguousarray(_softmax(c, log).astype(c.dtype))


def _row_softmax_backward(g, y, log):
    g64, y64 = np.asarray(g, np.float64), np.asarray(y, np.float64)
    assert not log
    return np.ascontiguousarray((y64 * (g64 - (g64 * y64).sum(-1, keepdims=True)))
                                .astype(y.dtype))


@pytest.fixture
def cpu_gpu(monkeypatch):
    model = CublasModel()
    fake = types.SimpleNamespace(cp=lambda: np, as_cupy=_np,
                                 from_cupy=lambda c: ember.asarray(np.ascontiguousarray(c)))
    monkeypatch.setattr(ops_attention, "R", fake)
    monkeypatch.setattr(ops_attention, "mm", lambda a, b, out=None, alpha=1.0:
                        _gemm.matmul(np, a, b, out, model, alpha))
    monkeypatch.setattr(ops_attention, "row_softmax", _row_softmax)
    monkeypatch.setattr(ops_attention, "row_softmax_backward", _row_softmax_backward)
    return model


def _r(shape, seed):
    return ember.asarray(np.random.default_rng(seed).standard_normal(shape))


def _close(got, want):
    if want is None:
        assert got is None
        return
    assert isinstance(got, ndarray) and got.shape == want.shape
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-10, atol=1e-12)


SDPA = [((2, 3, 5, 4), (2, 3, 6, 4), (2, 3, 6, 7), None),
        ((2, 3, 5, 4), (1, 3, 6, 4), (2, 1, 6, 7), (5, 6)),        # broadcast batches, bias
        ((5, 4), (6, 4), (6, 3), (1, 6))]


@pytest.mark.parametrize("qs,ks,vs,bs", SDPA)
def test_sdpa_forward_and_gradient(cpu_gpu, qs, ks, vs, bs):
    q, k, v = _r(qs, 0), _r(ks, 1), _r(vs, 2)
    bias = None if bs is None else _r(bs, 3).requires_grad_()
    scale = 0.37
    want_out, want_p = cpu_attention._sdpa(q, k, v, bias, scale)
    got_out, got_p = ops_attention._sdpa(q, k, v, bias, scale)
    _close(got_out, want_out)
    _close(got_p, want_p)
    g_out, g_p = _r(want_out.shape, 4), _r(want_p.shape, 5)
    with ember.no_grad():
        want = cpu_attention._sdpa_grad((g_out, g_p), (want_out, want_p), q, k, v, bias, scale)
    got = ops_attention._sdpa_backward(g_out, g_p, want_p, q, k, v, scale)
    for gw, ww in zip(got, want[:4]):      # dq, dk, dv, and ds for the bias
        if ww is not None:
            _close(gw, ww)


@pytest.mark.parametrize("bf", [True, False])
def test_multi_head_core_forward_and_gradient(cpu_gpu, bf):
    n, L, h, d = 2, 5, 3, 4
    qkv = _r((n, L, 3 * h * d) if bf else (L, n, 3 * h * d), 0)
    bias = _r((L, L), 1)
    scale = 0.5
    want_out, want_p = cpu_attention._self_attention_core(qkv, bias, h, scale, bf)
    got_out, got_p = ops_attention._self_attention_core(qkv, bias, h, scale, bf)
    _close(got_out, want_out)
    _close(got_p, want_p)
    g_out = _r(want_out.shape, 2)
    with ember.no_grad():
        want = cpu_attention._core_grad((g_out, None), (want_out, want_p), qkv, bias, h,
                                        scale, bf)
    got = ops_attention._self_attention_core_backward(g_out, None, want_p, qkv, h, scale, bf)
    _close(got[0], want[0])


def test_scale_is_the_gemm_alpha(cpu_gpu):
    q, k, v = _r((2, 5, 4), 0), _r((2, 6, 4), 1), _r((2, 6, 3), 2)
    ops_attention._sdpa(q, k, v, None, 0.25)
    scores, weighted = cpu_gpu.calls
    assert scores[0].transa == 1 and scores[1] == _np(k).ctypes.data    # k^T read in place
    assert cpu_gpu.alphas == [0.25, 1.0]
