"""ember's CUDA kernels run on the CPU: the .cu sources compiled as host C++
(tests/cuda_host_kernels.py, one thread of one block), for the kernels whose threads
never cooperate.  This runs their real index arithmetic and conversions without a GPU;
oracles are NumPy and ember's CPU ops.  (On a GPU, tests/test_cuda_kernels.py runs the
same kernels through NVRTC.)
"""
import numpy as np
import pytest

from ember._core.dtypes import BFLOAT16

import cuda_host_kernels as hk

pytestmark = pytest.mark.skipif(hk.compiler() is None, reason="no C++ compiler for the host")

SFX = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64", np.dtype(np.float16): "f16",
       BFLOAT16: "bf16"}
DTYPES = [np.float64, np.float32, np.float16, BFLOAT16]


def _taps(x, KH, KW, OH, OW, sh, sw, ph, pw, dh, dw):
    """im2col values (N, C, KH, KW, OH, OW) of x (N, C, H, W), padding read as 0."""
    N, C, H, W = x.shape
    big_h, big_w = ph + H + KH * dh + OH * sh, pw + W + KW * dw + OW * sw
    xp = np.zeros((N, C, big_h, big_w), x.dtype)
    xp[:, :, ph:ph + H, pw:pw + W] = x
    out = np.empty((N, C, KH, KW, OH, OW), x.dtype)
    for kh in range(KH):
        for kw in range(KW):
            out[:, :, kh, kw] = xp[:, :, kh * dh: kh * dh + sh * OH: sh,
                                   kw * dw: kw * dw + sw * OW: sw][:, :, :OH, :OW]
    return out


# (N, C, H, W, KH, KW, sh, sw, ph, pw, dh, dw, bottom/right padding)
GEOMS = [(2, 3, 7, 6, 3, 3, 1, 1, 1, 1, 1, 1, (1, 1)),
         (2, 2, 9, 8, 3, 2, 2, 3, 1, 2, 1, 2, (0, 1)),
         (1, 4, 5, 5, 1, 1, 1, 1, 0, 0, 1, 1, (0, 0)),
         (3, 1, 4, 11, 1, 3, 1, 2, 0, 1, 1, 1, (0, 2)),
         (1, 2, 8, 8, 5, 5, 3, 3, 2, 2, 1, 1, (2, 2))]


# (blocks, threads) of the emulated launches: one thread; blocks that stride over the
# planes and threads that stride inside one
LAUNCHES = [(1, 1), (3, 5)]


def _geom(N, C, Hh, W, KH, KW, sh, sw, ph, pw, dh, dw, extra):
    OH = (Hh + ph + extra[0] - dh * (KH - 1) - 1) // sh + 1
    OW = (W + pw + extra[1] - dw * (KW - 1) - 1) // sw + 1
    return hk.Conv2dGeom(C, Hh, W, KH, KW, OH, OW, sh, sw, ph, pw, dh, dw), OH, OW


def _data(shape, dtype, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32).astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("geom", GEOMS)
def test_im2col_both_layouts(dtype, geom):
    k = hk.load("pool_conv")
    N, C, Hh, W, KH, KW, sh, sw, ph, pw, dh, dw, extra = geom
    g, OH, OW = _geom(*geom)
    x = _data((N, C, Hh, W), dtype)
    K, L = C * KH * KW, OH * OW
    want = _taps(x, KH, KW, OH, OW, sh, sw, ph, pw, dh, dw).reshape(N, K, L)
    name = f"ember_im2col_{SFX[np.dtype(dtype)]}"
    for grid, block in LAUNCHES:
        col = np.full((N, K, L), 7, dtype)
        k.call(name, x, col, hk.i64(N), g, hk.i64(K * L), hk.i64(L), grid=grid, block=block)
        np.testing.assert_array_equal(col, want)
        colt = np.full((K, N, L), 7, dtype)                 # the weight gradient's layout
        k.call(name, x, colt, hk.i64(N), g, hk.i64(L), hk.i64(N * L), grid=grid, block=block)
        np.testing.assert_array_equal(colt, want.transpose(1, 0, 2))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("geom", GEOMS)
def test_col2im_is_the_adjoint_of_im2col(dtype, geom):
    k = hk.load("pool_conv")
    N, C, Hh, W, KH, KW, sh, sw, ph, pw, dh, dw, extra = geom
    g, OH, OW = _geom(*geom)
    K, L = C * KH * KW, OH * OW
    dcol = _data((N, K, L), dtype, 1)
    for grid, block in LAUNCHES:
        dx = np.full((N, C, Hh, W), 7, dtype)
        k.call(f"ember_col2im_{SFX[np.dtype(dtype)]}", dcol, dx, hk.i64(N), g, grid=grid,
               block=block)
        _check_col2im(dx, dcol, geom, OH, OW, dtype)


def _check_col2im(dx, dcol, geom, OH, OW, dtype):
    N, C, Hh, W, KH, KW, sh, sw, ph, pw, dh, dw, extra = geom
    # scatter-add reference: every column entry goes back to the pixel it was read from
    big_h, big_w = ph + Hh + KH * dh + OH * sh, pw + W + KW * dw + OW * sw
    acc = np.zeros((N, C, big_h, big_w))
    d = dcol.reshape(N, C, KH, KW, OH, OW).astype(np.float64)
    for kh in range(KH):
        for kw in range(KW):
            acc[:, :, kh * dh: kh * dh + sh * OH: sh, kw * dw: kw * dw + sw * OW: sw][
                :, :, :OH, :OW] += d[:, :, kh, kw]
    want = acc[:, :, ph:ph + Hh, pw:pw + W]
    np.testing.assert_allclose(dx.astype(np.float64), want,
                               rtol=1e-12 if dtype == np.float64 else 1e-5, atol=1e-12)


CASTS = [("f32", "f16"), ("f32", "bf16"), ("f16", "f32"), ("bf16", "f32"), ("f16", "bf16"),
         ("bf16", "f16"), ("f32", "f64"), ("f64", "f32"), ("f16", "f64"), ("bf16", "f64")]
_NP = {"f32": np.dtype(np.float32), "f64": np.dtype(np.float64), "f16": np.dtype(np.float16),
       "bf16": BFLOAT16}


@pytest.mark.parametrize("src,dst", CASTS)
def test_casts_match_numpy_bit_for_bit(src, dst):
    """Every 16-bit pattern (or a float32 sample with ties, subnormals, overflow, inf
    and NaN) through ember_cast_<src>_<dst>, against NumPy / ml_dtypes' astype."""
    k = hk.load("elementwise")
    S, D = _NP[src], _NP[dst]
    if S.itemsize == 2:
        x = np.arange(1 << 16, dtype=np.uint16).view(S)
    else:
        r = np.random.default_rng(0)
        bits = np.concatenate([r.integers(0, 1 << 32, 200_000, dtype=np.uint64).astype(np.uint32),
                               np.arange(0x477fe000, 0x47800000, 7, dtype=np.uint32),
                               np.array([0x7f800000, 0xff800000, 0x7fc00000, 0x00000001,
                                         0x33000000, 0x33000001, 0x387fe000], np.uint32)])
        with np.errstate(invalid="ignore"):
            x = bits.view(np.float32).astype(S)
    y = np.empty(x.shape, D)
    k.call(f"ember_cast_{src}_{dst}", x, y, hk.i64(x.size))
    with np.errstate(over="ignore", invalid="ignore"):
        want = (x.astype(np.float32).astype(D) if S == BFLOAT16 and D == np.float16
                else x.astype(D))
    nan = np.isnan(want.astype(np.float64))
    assert np.array_equal(np.isnan(y.astype(np.float64)), nan)
    assert np.array_equal(y[~nan].view(f"u{D.itemsize}"), want[~nan].view(f"u{D.itemsize}"))


@pytest.mark.parametrize("dtype,sfx", [(np.float32, "f32"), (np.float16, "f16_p32"),
                                       (BFLOAT16, "bf16_p32"), (np.float64, "f64")])
@pytest.mark.parametrize("N,C,S,grid,block", [(3, 4, 5, 3, 4), (3, 4, 5, 2, 7), (5, 3, 1, 2, 5),
                                              (2, 2, 9, 1, 1), (2, 3, 2, 5, 13)])
def test_batch_norm_apply_and_input_gradient(dtype, sfx, N, C, S, grid, block):
    """The kernels walk channels with additions (ChannelWalk): launches whose stride
    wraps the channel and spatial counts in every way, BatchNorm1d's S == 1 included."""
    k = hk.load("norm")
    x = _data((N, C, S), dtype)
    dy = _data((N, C, S), dtype, 1)
    acc = np.float64 if dtype == np.float64 else np.float32
    pdt = acc if sfx != "f16" else dtype
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=(0, 2)).astype(acc)
    invstd = (1 / np.sqrt(x64.var(axis=(0, 2)) + 1e-5)).astype(acc)
    gamma, beta = _data((C,), pdt, 2), _data((C,), pdt, 3)
    y = np.empty_like(x)
    k.call(f"ember_batch_norm_apply_{sfx}", x, mean, invstd, gamma, beta, y, hk.i64(N), hk.i64(C),
           hk.i64(S), grid=grid, block=block)
    xhat = (x64 - mean[None, :, None]) * invstd[None, :, None]
    want = xhat * gamma.astype(np.float64)[None, :, None] + beta.astype(np.float64)[None, :, None]
    tol = {np.dtype(np.float64): 1e-12, np.dtype(np.float32): 1e-5}.get(np.dtype(dtype), 1e-2)
    np.testing.assert_allclose(y.astype(np.float64), want, rtol=tol, atol=tol)
    y0 = np.empty_like(x)                                   # affine=False: null pointers
    k.call(f"ember_batch_norm_apply_{sfx}", x, mean, invstd, None, None, y0, hk.i64(N),
           hk.i64(C), hk.i64(S))
    np.testing.assert_allclose(y0.astype(np.float64), xhat, rtol=tol, atol=tol)
    g64 = dy.astype(np.float64)
    s1 = g64.sum(axis=(0, 2)).astype(acc)
    s2 = (g64 * xhat).sum(axis=(0, 2)).astype(acc)
    dx = np.empty_like(x)
    k.call(f"ember_batch_norm_bwd_input_{sfx}", dy, x, mean, invstd, gamma, s1, s2, dx, hk.i64(N),
           hk.i64(C), hk.i64(S), grid=grid, block=block)
    M = N * S
    want = (gamma.astype(np.float64) * invstd)[None, :, None] * (
        g64 - s1[None, :, None] / M - xhat * s2[None, :, None] / M)
    np.testing.assert_allclose(dx.astype(np.float64), want, rtol=tol * 4, atol=tol * 4)
