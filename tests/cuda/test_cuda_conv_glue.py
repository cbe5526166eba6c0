"""The GPU convolution glue (ember/cuda/ops_conv.py) run on the CPU: CuPy replaced by
NumPy, the im2col / col2im kernels by NumPy models of their documented contracts or by
their host build (tests/cuda_host_kernels.py), and cuBLAS by the column-major model of
tests/cublas_model.py.

What this checks without a GPU: the layouts ops_conv asks the kernels for, the GEMM
operands it builds from them (shapes, transposes, batch strides, groups) and the
reshapes back, for the forward, input-gradient and weight-gradient ops, against
ember's CPU convolution.  The kernels themselves are checked on a GPU
(tests/test_cuda_kernels.py, tests/test_cuda_nn.py).
"""
import types

import numpy as np
import pytest
from numpy.lib.stride_tricks import as_strided

import ember
from ember._core import array as _array
from ember.cuda import _gemm, ops_conv
from ember.cuda import _runtime as real_R
from ember.nn.functional import conv as cpu_conv

from cublas_model import CublasModel
import cuda_host_kernels as hk


def _geometry(g):
    C, H, W, KH, KW, OH, OW, sh, sw, ph, pw, dh, dw = ops_conv._GEOM.unpack(g)
    return C, H, W, KH, KW, OH, OW, sh, sw, ph, pw, dh, dw


def _taps(x, g):
    """The im2col values (N, C, KH, KW, OH, OW) of x (N, C, H, W): padding reads as 0."""
    C, H, W, KH, KW, OH, OW, sh, sw, ph, pw, dh, dw = _geometry(g)
    return hk.im2col_taps(x, KH, KW, OH, OW, sh, sw, ph, pw, dh, dw)


def _im2col(x, col, N, g, sn, sr):
    """ember_im2col: element (n, r, l) to col[n * sn + r * sr + l]."""
    C, H, W, KH, KW, OH, OW = _geometry(g)[:7]
    K, L = C * KH * KW, OH * OW
    vals = _taps(x, g).reshape(N, K, L)
    isz = col.itemsize
    as_strided(col, (N, K, L), (sn * isz, sr * isz, isz))[...] = vals


def _col2im(dcol, dx, N, g):
    """ember_col2im: the adjoint of im2col from the (N, K, L) layout."""
    C, H, W, KH, KW, OH, OW, sh, sw, ph, pw, dh, dw = _geometry(g)
    big = 2 * max(KH * dh + OH * sh, KW * dw + OW * sw) + H + W
    acc = np.zeros((N, C, big, big), np.float64)
    d = dcol.reshape(N, C, KH, KW, OH, OW).astype(np.float64)
    for kh in range(KH):
        for kw in range(KW):
            acc[:, :, kh * dh: kh * dh + sh * OH: sh, kw * dw: kw * dw + sw * OW: sw][
                :, :, :OH, :OW] += d[:, :, kh, kw]
    dx[...] = acc[:, :, ph:ph + H, pw:pw + W].astype(dx.dtype)


def _np(x):
    return x if isinstance(x, np.ndarray) else _array._numpy(x)


def _launch(name, grid, block, args, shmem=0):
    args = [_np(a) if isinstance(a, (np.ndarray, ember.ndarray)) else a for a in args]
    if name.startswith("ember_im2col_"):
        _im2col(*args)
    elif name.startswith("ember_col2im_"):
        _col2im(*args)
    else:
        raise AssertionError(f"unexpected kernel {name}")


@pytest.fixture(params=["model", "host"])
def cpu_gpu(monkeypatch, request):
    """ops_conv with NumPy for CuPy, the cuBLAS model, and for the kernels either NumPy
    models of their contracts or their host build (tests/cuda_host_kernels.py)."""
    if request.param == "host":
        if hk.compiler() is None:
            pytest.skip("no C++ compiler for the host build of the kernels")
        launch = hk.ember_launch
    else:
        launch = _launch
    calls = []
    model = CublasModel()
    fake = types.SimpleNamespace(
        cp=lambda: np, as_cupy=_np, from_cupy=lambda c: ember.asarray(c),
        launch=launch, blocks=real_R.blocks, suffix=real_R.suffix)

    def mm(a, b, out=None):
        calls.append((a.shape, b.shape))
        return _gemm.matmul(np, a, b, out, model)

    monkeypatch.setattr(ops_conv, "R", fake)
    monkeypatch.setattr(ops_conv, "mm", mm)
    return types.SimpleNamespace(gemms=calls, model=model)


CASES = [
    # (N, C, H, W), (O, C/groups, kh, kw), stride, pad (t, b, l, r), dilation, groups
    ((2, 3, 7, 6), (4, 3, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),
    ((2, 3, 9, 8), (5, 3, 3, 2), (2, 3), (1, 0, 2, 1), (1, 2), 1),
    ((3, 4, 5, 5), (6, 4, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1),      # pointwise
    ((2, 4, 6, 6), (6, 2, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 2),      # groups
    ((2, 6, 6, 5), (6, 1, 3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 6),      # depthwise
    ((1, 2, 4, 4), (3, 2, 1, 1), (2, 2), (0, 0, 0, 0), (1, 1), 1),      # strided 1x1
    ((4, 2, 1, 9), (3, 2, 1, 3), (1, 1), (0, 0, 1, 1), (1, 1), 1),      # a 1-d conv
]


def _arrays(xs, ws, dtype=np.float64):
    r = np.random.default_rng(0)
    return (ember.asarray(r.standard_normal(xs).astype(dtype)),
            ember.asarray(r.standard_normal(ws).astype(dtype)),
            ember.asarray(r.standard_normal(ws[0]).astype(dtype)))


def _out_hw(xs, ws, stride, pad, dil):
    return tuple((n + pad[2 * i] + pad[2 * i + 1] - dil[i] * (k - 1) - 1) // stride[i] + 1
                 for i, (n, k) in enumerate(zip(xs[2:], ws[2:])))


@pytest.mark.parametrize("xs,ws,stride,pad,dil,groups", CASES)
def test_forward_and_both_gradients_match_the_cpu(cpu_gpu, xs, ws, stride, pad, dil, groups):
    x, w, b = _arrays(xs, ws)
    want = cpu_conv._conv(x, w, b, stride, pad, dil, groups)
    got = ops_conv._conv(x, w, b, stride, pad, dil, groups)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, atol=1e-12)

    g = ember.asarray(np.random.default_rng(1).standard_normal(want.shape))
    args = (tuple(xs[2:]), stride, pad, dil, groups)
    want_dx = cpu_conv._conv_transpose(g, w, None, *args)
    got_dx = ops_conv._conv_transpose(g, w, None, *args)
    np.testing.assert_allclose(got_dx.numpy(), want_dx.numpy(), rtol=1e-12, atol=1e-12)

    wargs = (tuple(ws), stride, pad, dil, groups)
    want_dw = cpu_conv._conv_weight(x, g, *wargs)
    got_dw = ops_conv._conv_weight(x, g, *wargs)
    assert got_dw.shape == tuple(ws)
    np.testing.assert_allclose(got_dw.numpy(), want_dw.numpy(), rtol=1e-12, atol=1e-12)


def test_weight_gradient_is_one_gemm_over_the_batch(cpu_gpu):
    xs, ws = (4, 3, 8, 8), (5, 3, 3, 3)
    x, w, _ = _arrays(xs, ws)
    oh = _out_hw(xs, ws, (1, 1), (1, 1, 1, 1), (1, 1))
    g = ember.asarray(np.ones((4, 5) + oh))
    ops_conv._conv_weight(x, g, ws, (1, 1), (1, 1, 1, 1), (1, 1), 1)
    (p, first, second, _), = cpu_gpu.model.calls
    assert p.batch == 1 and p.k == 4 * 64 and p.m == 27 and p.n == 5


def test_forward_shares_the_weight_without_copies(cpu_gpu):
    x, w, b = _arrays((3, 2, 6, 6), (4, 2, 3, 3))
    ops_conv._conv(x, w, b, (1, 1), (1, 1, 1, 1), (1, 1), 1)
    (p, _, second, _), = cpu_gpu.model.calls
    assert p.batch == 3 and p.stride_b == 0 and second == _array._numpy(w).ctypes.data


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_low_precision_glue(cpu_gpu, dtype):
    xs, ws, stride, pad, dil, groups = CASES[1]
    x, w, b = _arrays(xs, ws, dtype)
    ref = cpu_conv._conv(*(ember.asarray(_array._numpy(a).astype(np.float64)) for a in (x, w, b)),
                         stride, pad, dil, groups)
    got = ops_conv._conv(x, w, b, stride, pad, dil, groups)
    assert got.dtype == dtype
    tol = 1e-5 if dtype == np.float32 else 2e-2
    np.testing.assert_allclose(got.numpy().astype(np.float64), ref.numpy(), rtol=tol, atol=tol)
