"""The GPU batch-norm glue (ember/cuda/ops_norm.py) run on the CPU: CuPy replaced by
NumPy and norm.cu's batch-norm kernels by NumPy models of their contracts (float32
accumulation, parameters in P: the data's dtype, or float32 for 16-bit data through the
``_p32`` kernels).  Checks which kernels the glue picks, the dtypes it hands them and
the results against ember's float32 CPU batch norm.  The kernels themselves run in
tests/test_cuda_nn.py on a GPU.
"""
import types

import numpy as np
import pytest

import ember
from ember._core import array as _array
from ember._core.dtypes import BFLOAT16
from ember.cuda import ops_norm
import ember.nn.functional as F


def _np(x):
    return x if isinstance(x, np.ndarray) else _array._numpy(x)


def _null(a):
    return None if isinstance(a, int) and a == 0 else _np(a)


def _parts(v, parts):
    """v cut into `parts` contiguous pieces of ceil(len / parts) values (the kernels' cut)."""
    n = -(-v.size // parts)
    return [v[p * n:(p + 1) * n] for p in range(parts)]


class Kernels:
    """NumPy models of the batch-norm kernels; records (name, parameter dtypes)."""

    def __init__(self):
        self.launched = []

    def __call__(self, name, grid, block, args, shmem=0):
        stem, sfx = name[len("ember_"):].rsplit("_", 1)
        if sfx == "p32":
            stem, sfx = stem.rsplit("_", 1)
            sfx += "_p32"
        getattr(self, stem)(sfx, *args)

    def _check_params(self, sfx, data, *params):
        mixed = sfx.endswith("_p32")
        assert mixed == (data.dtype.itemsize == 2), f"{sfx} for {data.dtype} data"
        want = np.float32 if mixed else data.dtype
        for p in params:
            if p is not None:
                assert p.dtype == want, f"{sfx}: parameter {p.dtype}, expected {want}"

    @staticmethod
    def _ncs(x, N, C, S):
        return x.reshape(N, C, S).astype(np.float32 if x.dtype != np.float64 else np.float64)

    def batch_norm_stats(self, sfx, x, mean, invstd, var, N, C, S, eps):
        x3 = self._ncs(_np(x), N, C, S)
        m = x3.mean(axis=(0, 2))
        v = ((x3 - m[:, None]) ** 2).mean(axis=(0, 2))
        _np(mean)[...] = m
        _np(invstd)[...] = 1.0 / np.sqrt(v + eps)
        _np(var)[...] = v
        self.launched.append((f"stats_{sfx}", ()))

    def batch_norm_stats_partial(self, sfx, x, partial, N, C, S, parts):
        # Welford (mean, m2, n) of each contiguous part of each channel's N*S values
        xc = self._ncs(_np(x), N, C, S).transpose(1, 0, 2).reshape(C, N * S)
        out = _np(partial).reshape(C, parts, 3)
        for c in range(C):
            for p, seg in enumerate(_parts(xc[c], parts)):
                out[c, p] = (seg.mean() if seg.size else 0.0,
                             ((seg - seg.mean()) ** 2).sum() if seg.size else 0.0, seg.size)
        self.launched.append((f"stats_partial_{sfx}", ()))

    def batch_norm_stats_finish(self, sfx, partial, mean, invstd, var, N, C, S, parts, eps):
        q = _np(partial).reshape(C, parts, 3).astype(np.float64)
        n = q[:, :, 2].sum(axis=1)
        m = (q[:, :, 0] * q[:, :, 2]).sum(axis=1) / n
        m2 = (q[:, :, 1] + q[:, :, 2] * (q[:, :, 0] - m[:, None]) ** 2).sum(axis=1)
        _np(mean)[...] = m
        _np(invstd)[...] = 1.0 / np.sqrt(m2 / n + eps)
        _np(var)[...] = m2 / n
        self.launched.append((f"stats_finish_{sfx}", ()))

    def batch_norm_apply(self, sfx, x, mean, invstd, gamma, beta, y, N, C, S):
        x, y, gamma, beta = _np(x), _np(y), _null(gamma), _null(beta)
        self._check_params(sfx, x, gamma, beta)
        v = (self._ncs(x, N, C, S) - _np(mean)[:, None]) * _np(invstd)[:, None]
        if gamma is not None:
            v = v * gamma[:, None]
        if beta is not None:
            v = v + beta[:, None]
        y[...] = v.reshape(y.shape).astype(y.dtype)
        self.launched.append((f"apply_{sfx}", tuple(p.dtype for p in (gamma, beta)
                                                    if p is not None)))

    def batch_norm_bwd_reduce(self, sfx, dy, x, mean, invstd, sum_dy, sum_dy_xhat, dgamma,
                              dbeta, N, C, S):
        x, dgamma, dbeta = _np(x), _null(dgamma), _null(dbeta)
        self._check_params(sfx, x, dgamma, dbeta)
        g = self._ncs(_np(dy), N, C, S)
        xhat = (self._ncs(x, N, C, S) - _np(mean)[:, None]) * _np(invstd)[:, None]
        s1, s2 = g.sum(axis=(0, 2)), (g * xhat).sum(axis=(0, 2))
        _np(sum_dy)[...] = s1
        _np(sum_dy_xhat)[...] = s2
        if dgamma is not None:
            dgamma[...] = s2
        if dbeta is not None:
            dbeta[...] = s1
        self.launched.append((f"bwd_reduce_{sfx}", ()))

    def batch_norm_bwd_reduce_partial(self, sfx, dy, x, mean, invstd, partial, N, C, S, parts):
        g = self._ncs(_np(dy), N, C, S)
        xhat = (self._ncs(_np(x), N, C, S) - _np(mean)[:, None]) * _np(invstd)[:, None]
        out = _np(partial).reshape(C, parts, 2)
        for c in range(C):
            gs = _parts(g[:, c].reshape(-1), parts)
            hs = _parts((g * xhat)[:, c].reshape(-1), parts)
            out[c] = [(a.sum(), b.sum()) for a, b in zip(gs, hs)]
        self.launched.append((f"bwd_reduce_partial_{sfx}", ()))

    def batch_norm_bwd_reduce_finish(self, sfx, partial, sum_dy, sum_dy_xhat, dgamma, dbeta,
                                     C, parts):
        dgamma, dbeta = _null(dgamma), _null(dbeta)
        q = _np(partial).reshape(C, parts, 2)
        _np(sum_dy)[...] = q[:, :, 0].sum(axis=1)
        _np(sum_dy_xhat)[...] = q[:, :, 1].sum(axis=1)
        if dgamma is not None:
            dgamma[...] = q[:, :, 1].sum(axis=1)
        if dbeta is not None:
            dbeta[...] = q[:, :, 0].sum(axis=1)
        self.launched.append((f"bwd_reduce_finish_{sfx}", ()))

    def batch_norm_bwd_input(self, sfx, dy, x, mean, invstd, gamma, sum_dy, sum_dy_xhat, dx,
                             N, C, S):
        x, gamma, dx = _np(x), _null(gamma), _np(dx)
        self._check_params(sfx, x, gamma)
        M = N * S
        xhat = (self._ncs(x, N, C, S) - _np(mean)[:, None]) * _np(invstd)[:, None]
        gm = gamma[:, None] if gamma is not None else 1.0
        v = gm * _np(invstd)[:, None] * (self._ncs(_np(dy), N, C, S)
                                         - _np(sum_dy)[:, None] / M
                                         - xhat * _np(sum_dy_xhat)[:, None] / M)
        dx[...] = v.reshape(dx.shape).astype(dx.dtype)
        self.launched.append((f"bwd_input_{sfx}", ()))


@pytest.fixture
def kernels(monkeypatch):
    k = Kernels()
    fake_cp = types.SimpleNamespace(
        **{n: getattr(np, n) for n in ("empty", "zeros", "reciprocal", "sqrt",
                                        "ascontiguousarray")})
    fake = types.SimpleNamespace(
        cp=lambda: fake_cp, as_cupy=_np, from_cupy=lambda c: ember.asarray(c),
        launch=k, blocks=lambda n, t=256: 1, max_resident_blocks=lambda: 64, suffix=lambda dt: {
            "float32": "f32", "float64": "f64", "float16": "f16", "bfloat16": "bf16"}.get(
                np.dtype(dt).name), is_gpu=lambda a: True,
        empty=lambda shape, dtype, device=None: ember.empty(shape, dtype=dtype))
    monkeypatch.setattr(ops_norm, "R", fake)
    return k


def _r(shape, seed, dtype=np.float32):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _reference(x32, w, b, g32):
    """float32 CPU batch norm (training): y and the gradients of sum(y * g)."""
    x = ember.asarray(x32).requires_grad_()
    wt = None if w is None else ember.asarray(w).requires_grad_()
    bt = None if b is None else ember.asarray(b).requires_grad_()
    y = F.batch_norm(x, None, None, wt, bt, training=True)
    (y * ember.asarray(g32)).sum().backward()
    return (y.numpy(), x.grad.numpy(), None if wt is None else wt.grad.numpy(),
            None if bt is None else bt.grad.numpy())


@pytest.mark.parametrize("split", [False, True])
@pytest.mark.parametrize("dtype", [np.float16, BFLOAT16, np.float32])
@pytest.mark.parametrize("affine", [True, False])
def test_training_forward_and_backward(kernels, monkeypatch, dtype, affine, split):
    if split:       # few channels of many values: S blocks per channel, then a merge
        monkeypatch.setattr(ops_norm, "_MIN_PART", 8)
    shape, C = (4, 3, 5, 2), 3
    x32 = _r(shape, 0)
    g32 = _r(shape, 1)
    w = _r((C,), 2) if affine else None
    b = _r((C,), 3) if affine else None
    x = ember.asarray(x32.astype(dtype))
    g = ember.asarray(g32.astype(dtype))
    ref = _reference(x.numpy().astype(np.float32), w, b, g.numpy().astype(np.float32))
    stats = ember.empty((3, C), dtype=np.float32)
    y = ops_norm.batch_norm_train_forward(x, None if w is None else ember.asarray(w),
                                          None if b is None else ember.asarray(b), 1e-5, stats)
    assert y.dtype == dtype
    tol = {np.dtype(np.float32): 1e-5, np.dtype(np.float16): 2e-3, BFLOAT16: 2e-2}[np.dtype(dtype)]
    np.testing.assert_allclose(y.numpy().astype(np.float32), ref[0], rtol=tol, atol=tol)
    gx, gw, gb = ops_norm.batch_norm_backward(g, x, None if w is None else ember.asarray(w),
                                              stats, None, True)
    assert gx.dtype == dtype and gw.dtype == np.float32 and gb.dtype == np.float32
    np.testing.assert_allclose(gx.numpy().astype(np.float32), ref[1], rtol=tol * 4,
                               atol=tol * 4)
    if affine:
        np.testing.assert_allclose(gw.numpy(), ref[2], rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(gb.numpy(), ref[3], rtol=1e-4, atol=1e-4)
    mixed = np.dtype(dtype).itemsize == 2
    names = [n for n, _ in kernels.launched]
    sfx = "f16" if dtype == np.float16 else "bf16" if mixed else "f32"
    psfx = sfx + ("_p32" if mixed else "")
    if split:       # 40 values per channel in parts of at least 8: ceil(16 / 3) = 6 -> 5
        assert names == [f"stats_partial_{sfx}", f"stats_finish_{sfx}", f"apply_{psfx}",
                         f"bwd_reduce_partial_{sfx}", f"bwd_reduce_finish_{psfx}",
                         f"bwd_input_{psfx}"]
    else:
        assert names == [f"stats_{sfx}", f"apply_{psfx}", f"bwd_reduce_{psfx}",
                         f"bwd_input_{psfx}"]


@pytest.mark.parametrize("dtype", [np.float16, BFLOAT16])
def test_eval_forward_and_backward(kernels, dtype):
    shape, C = (3, 2, 4), 2
    x = ember.asarray(_r(shape, 0).astype(dtype))
    rm, rv = ember.asarray(_r((C,), 1)), ember.asarray(np.abs(_r((C,), 2)) + 0.5)
    w, b = ember.asarray(_r((C,), 3)), ember.asarray(_r((C,), 4))
    y, mean, rstd = ops_norm.batch_norm_eval_forward(x, rm, rv, w, b, 1e-5)
    want = F.batch_norm(ember.asarray(x.numpy().astype(np.float32)), rm, rv, w, b,
                        training=False)
    assert y.dtype == dtype
    np.testing.assert_allclose(y.numpy().astype(np.float32), want.numpy(), rtol=2e-2, atol=2e-2)
    g = ember.asarray(_r(shape, 5).astype(dtype))
    gx, gw, gb = ops_norm.batch_norm_backward(g, x, w, None, (mean, rstd), True)
    assert gx.dtype == dtype and gw.dtype == np.float32
    scale = (1 / np.sqrt(rv.numpy() + 1e-5)) * w.numpy()
    np.testing.assert_allclose(gx.numpy().astype(np.float32),
                               g.numpy().astype(np.float32) * scale[None, :, None],
                               rtol=2e-2, atol=2e-2)
