"""The GPU cross-entropy and softmax ops (ember/cuda/ops_loss.py, ops_softmax.py) run on the
CPU end to end: CuPy replaced by NumPy, kernel launches by the host build of the real
kernels (tests/cuda_host_kernels.ember_launch), deferred input checks evaluated at once.
Oracle: ember's CPU ops.
"""
import types

import numpy as np
import pytest

import ember
from ember._core import array as _array
from ember._core.dtypes import BFLOAT16
from ember.cuda import _runtime as real_R
from ember.cuda import ops_loss, ops_softmax
from ember.nn.functional import loss as cpu_loss
import ember.nn.functional as F

import cuda_host_kernels as hk

pytestmark = pytest.mark.skipif(hk.compiler() is None, reason="no C++ compiler for the host")


def _np(x):
    return x if isinstance(x, np.ndarray) else _array._numpy(x)


def _from(c):
    return ember.asarray(np.asarray(c) if np.ndim(c) == 0 else c)


class _Checks:
    """ember.cuda._checks evaluated at once: a set flag raises the op's error now."""

    @staticmethod
    def checks_enabled():
        return True

    @staticmethod
    def defer(flag, make_error):
        if bool(np.any(np.asarray(_np(flag)))):
            raise make_error()


@pytest.fixture
def host_gpu(monkeypatch):
    cp = types.SimpleNamespace(
        **{n: getattr(np, n) for n in ("empty", "zeros", "ones", "where", "ascontiguousarray",
                                        "arange", "any", "argmax", "exp", "broadcast_to",
                                        "moveaxis", "int32")}, ndarray=np.ndarray)
    fake = types.SimpleNamespace(cp=lambda: cp, as_cupy=_np, from_cupy=_from,
                                 launch=hk.ember_launch, blocks=real_R.blocks,
                                 suffix=real_R.suffix)
    for mod in (ops_loss, ops_softmax):
        monkeypatch.setattr(mod, "R", fake)
    monkeypatch.setattr(ops_loss, "_checks", _Checks)


def _logits(N, C, dtype, seed=0):
    r = np.random.default_rng(seed)
    return ember.asarray((r.standard_normal((N, C)) * 3).astype(np.float32).astype(dtype))


RED = {"none": 0, "mean": 1, "sum": 2}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("reduction", list(RED))
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("smoothing", [0.0, 0.2])
def test_cross_entropy_forward_and_gradient(host_gpu, dtype, reduction, weighted, smoothing):
    N, C, ignore = 7, 37, 2
    x = _logits(N, C, dtype)
    t = ember.asarray(np.array([0, 2, 36, 5, 2, 11, 1], np.int64))   # two ignored rows
    w = ember.asarray(np.linspace(0.5, 2, C).astype(dtype)) if weighted else None
    args = (x, t, w, ignore, RED[reduction], smoothing)
    scratch = cpu_loss._scratch(x)          # the CPU backward reads the forward's scratch
    want = cpu_loss._cross_entropy_nc(*args, scratch)
    got = ops_loss._cross_entropy_nc(*args, None)
    tol = 1e-12 if dtype == np.float64 else 2e-5
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=tol, atol=tol)
    g = ember.asarray(np.linspace(0.5, 1.5, max(1, N if reduction == "none" else 1))
                      .astype(dtype).reshape(want.shape))
    with ember.no_grad():
        want_g, = cpu_loss._ce_nc_grad(g, None, *args, scratch)
        got_g = ops_loss.cross_entropy_backward(g, *args, None)
    assert got_g.dtype == dtype and got_g.shape == (N, C)
    np.testing.assert_allclose(got_g.numpy(), want_g.numpy(), rtol=tol * 4, atol=tol * 4)


@pytest.mark.parametrize("dtype", [np.float16, BFLOAT16])
def test_cross_entropy_16bit_logits(host_gpu, dtype):
    """16-bit logits: the kernels accumulate in float32 (the CPU computes through float32)."""
    N, C = 5, 50
    x = _logits(N, C, dtype)
    t = ember.asarray(np.array([1, 49, 0, 7, 7], np.int64))
    x32 = x.astype(np.float32)
    scratch = cpu_loss._scratch(x32)
    want = cpu_loss._cross_entropy_nc(x32, t, None, -100, 1, 0.0, scratch)
    got = ops_loss._cross_entropy_nc(x, t, None, -100, 1, 0.0, None)
    np.testing.assert_allclose(got.numpy().astype(np.float64), want.numpy(), rtol=1e-2)
    g = ember.asarray(np.ones((), dtype))
    with ember.no_grad():
        got_g = ops_loss.cross_entropy_backward(g, x, t, None, -100, 1, 0.0, None)
        want_g, = cpu_loss._ce_nc_grad(g.astype(np.float32), None, x32, t, None, -100, 1, 0.0,
                                       scratch)
    assert got_g.dtype == dtype
    np.testing.assert_allclose(got_g.numpy().astype(np.float64), want_g.numpy(), rtol=2e-2,
                               atol=2e-3)


def test_bad_target_is_reported_with_the_cpu_message(host_gpu):
    x = _logits(3, 4, np.float32)
    t = ember.asarray(np.array([0, 4, 1], np.int64))
    with pytest.raises(IndexError, match=r"target 4 \(at position 1\) is out of bounds"):
        ops_loss._cross_entropy_nc(x, t, None, -100, 1, 0.0, None)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, BFLOAT16])
@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_softmax_any_axis(host_gpu, dtype, log, axis):
    x = ember.asarray((np.random.default_rng(3).standard_normal((4, 6, 5)) * 3)
                      .astype(np.float32).astype(dtype))
    name = "log_softmax" if log else "softmax"
    got = getattr(ops_softmax, name)(x, axis)
    want = getattr(F, name)(x.astype(np.float32), dim=axis)
    g = ember.asarray(np.random.default_rng(4).standard_normal((4, 6, 5)).astype(np.float32))
    got_g = ops_softmax.softmax_backward(g.astype(dtype), got, axis % 3, log)
    y32 = want.numpy().astype(np.float64)
    g64 = g.numpy().astype(np.float64)
    want_g = (g64 - np.exp(y32) * g64.sum(axis, keepdims=True)) if log else \
        y32 * (g64 - (g64 * y32).sum(axis, keepdims=True))
    tol = {np.dtype(np.float32): 1e-6, np.dtype(np.float64): 1e-6,
           np.dtype(np.float16): 2e-3, BFLOAT16: 1e-2}[np.dtype(dtype)]
    assert got.dtype == dtype and got_g.dtype == dtype
    np.testing.assert_allclose(got.numpy().astype(np.float64),
                               want.numpy().astype(np.float64), rtol=tol, atol=tol)
    np.testing.assert_allclose(got_g.numpy().astype(np.float64), want_g, rtol=tol * 8,
                               atol=tol * 8)
