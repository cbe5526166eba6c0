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
    want = hk.im2col_taps(x, KH, KW, OH, OW, sh, sw, ph, pw, dh, dw).reshape(N, K, L)
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
    with np.errstate(invalid="ignore"):
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


# ------------------------------------------------------------------ block-reducing kernels
# (each block's threads run as real threads: tests/cuda_host_kernels.py call_cooperative)

def _f64(a):
    return a.astype(np.float64)


def _tol16(dtype, t32=2e-6):
    return {np.dtype(np.float64): 1e-12, np.dtype(np.float32): t32,
            np.dtype(np.float16): 2e-3, BFLOAT16: 2e-2}[np.dtype(dtype)]


def _acc(dtype):
    return np.float64 if np.dtype(dtype) == np.float64 else np.float32


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("log", [False, True])
def test_softmax_forward_and_backward(dtype, log):
    k = hk.load("softmax")
    rows, cols = 5, 77
    x = _data((rows, cols), dtype) * 3
    x[1, :] = -np.inf if np.dtype(dtype) != BFLOAT16 else x[1, :]      # a fully masked row
    sfx = SFX[np.dtype(dtype)]
    y = np.empty_like(x)
    name = ("log_softmax" if log else "softmax")
    k.call_cooperative(f"ember_{name}_{sfx}", x, y, hk.i64(rows), hk.i64(cols), grid=2, block=64)
    x64 = _f64(x)
    with np.errstate(invalid="ignore"):
        m = x64.max(axis=1, keepdims=True)
        e = np.exp(x64 - m)
        want = (x64 - m - np.log(e.sum(1, keepdims=True))) if log else e / e.sum(1, keepdims=True)
    tol = _tol16(dtype)
    np.testing.assert_allclose(_f64(y), want, rtol=tol, atol=tol)
    dy = _data((rows, cols), dtype, 1)
    dx = np.empty_like(x)
    k.call_cooperative(f"ember_{name}_backward_{sfx}", y, dy, dx, hk.i64(rows), hk.i64(cols),
                       grid=3, block=32)
    y64, g64 = _f64(y), _f64(dy)
    with np.errstate(invalid="ignore"):
        want = (g64 - np.exp(y64) * g64.sum(1, keepdims=True)) if log else \
            y64 * (g64 - (g64 * y64).sum(1, keepdims=True))
    np.testing.assert_allclose(_f64(dx), want, rtol=tol * 4, atol=tol * 4)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_cross_entropy_forward_and_backward(dtype, smoothing):
    k = hk.load("softmax")
    rows, cols, ignore = 6, 40, -100
    x = _data((rows, cols), dtype) * 2
    t = np.array([3, ignore, 0, 39, 7, 7], np.int64)
    acc = _acc(dtype)
    loss, lse = np.empty(rows, acc), np.empty(rows, acc)
    bad = np.zeros(1, np.int32)
    sfx = SFX[np.dtype(dtype)]
    k.call_cooperative(f"ember_cross_entropy_fwd_{sfx}", x, t, loss, lse, hk.i64(rows),
                       hk.i64(cols), hk.i64(ignore), hk.f64(smoothing), bad, grid=4, block=64)
    x64 = _f64(x)
    m = x64.max(1)
    l = m + np.log(np.exp(x64 - m[:, None]).sum(1))
    keep = t != ignore
    want = np.zeros(rows)
    tk = np.where(keep, t, 0)
    want[keep] = ((1 - smoothing) * (l - x64[np.arange(rows), tk])
                  + smoothing * (l - x64.mean(1)))[keep]
    tol = _tol16(dtype, 1e-5)
    np.testing.assert_allclose(lse, l, rtol=tol, atol=tol)
    np.testing.assert_allclose(loss, want, rtol=tol, atol=tol)
    assert bad[0] == 0
    grad = np.full(1, 0.5, acc)                     # 'mean'-style scalar (stride 0)
    dx = np.empty_like(x)
    k.call(f"ember_cross_entropy_bwd_{sfx}", x, t, lse, grad, hk.i64(0), dx, hk.i64(rows),
           hk.i64(cols), hk.i64(ignore), hk.f64(smoothing), grid=3, block=7)
    p = np.exp(x64 - l[:, None])
    onehot = np.zeros((rows, cols))
    onehot[np.arange(rows), tk] = 1
    wantd = 0.5 * (p - smoothing / cols - (1 - smoothing) * onehot)
    wantd[~keep] = 0
    np.testing.assert_allclose(_f64(dx), wantd, rtol=tol * 2, atol=tol * 2)
    t_bad = t.copy()
    t_bad[2] = cols                                  # out of range: flagged, never silent
    k.call_cooperative(f"ember_cross_entropy_fwd_{sfx}", x, t_bad, loss, lse, hk.i64(rows),
                       hk.i64(cols), hk.i64(ignore), hk.f64(smoothing), bad, grid=2, block=32)
    assert bad[0] == 1 and np.isnan(loss[2])


@pytest.mark.parametrize("dtype", DTYPES)
def test_layer_norm_forward_and_backward(dtype):
    k = hk.load("norm")
    rows, cols, eps = 4, 50, 1e-5
    x = _data((rows, cols), dtype) * 2 + 3
    gamma, beta = _data((cols,), dtype, 1), _data((cols,), dtype, 2)
    acc = _acc(dtype)
    y = np.empty_like(x)
    mean, rstd = np.empty(rows, acc), np.empty(rows, acc)
    sfx = SFX[np.dtype(dtype)]
    k.call_cooperative(f"ember_layer_norm_fwd_{sfx}", x, gamma, beta, y, mean, rstd,
                       hk.i64(rows), hk.i64(cols), hk.f64(eps), grid=3, block=64)
    x64 = _f64(x)
    mu = x64.mean(1)
    rs = 1 / np.sqrt(x64.var(1) + eps)
    xhat = (x64 - mu[:, None]) * rs[:, None]
    tol = _tol16(dtype, 1e-5)
    np.testing.assert_allclose(mean, mu, rtol=tol, atol=tol)
    np.testing.assert_allclose(rstd, rs, rtol=tol, atol=tol)
    np.testing.assert_allclose(_f64(y), xhat * _f64(gamma) + _f64(beta), rtol=tol * 4,
                               atol=tol * 4)
    dy = _data((rows, cols), dtype, 3)
    dx = np.empty_like(x)
    k.call_cooperative(f"ember_layer_norm_bwd_input_{sfx}", dy, x, gamma, mean, rstd, dx,
                       hk.i64(rows), hk.i64(cols), grid=2, block=32)
    g = _f64(dy) * _f64(gamma)
    want = rs[:, None] * (g - g.mean(1, keepdims=True) - xhat * (g * xhat).mean(1, keepdims=True))
    np.testing.assert_allclose(_f64(dx), want, rtol=tol * 8, atol=tol * 8)
    dg, db = np.empty(cols, dtype), np.empty(cols, dtype)
    k.call(f"ember_layer_norm_bwd_params_{sfx}", dy, x, mean, rstd, dg, db, hk.i64(rows),
           hk.i64(cols), grid=2, block=9)
    np.testing.assert_allclose(_f64(dg), (_f64(dy) * xhat).sum(0), rtol=tol * 8, atol=tol * 8)
    np.testing.assert_allclose(_f64(db), _f64(dy).sum(0), rtol=tol * 8, atol=tol * 8)


def _check_bn_stats(x, stats, dtype):
    """stats (3, C) = mean, 1/std (eps 1e-5) and biased variance of x (N, C, S) per
    channel; returns x in float64, its mean and variance, and the tolerance."""
    x64 = _f64(x)
    mu, var = x64.mean(axis=(0, 2)), x64.var(axis=(0, 2))
    tol = _tol16(dtype, 1e-5)
    np.testing.assert_allclose(stats[0], mu, rtol=tol, atol=tol)
    np.testing.assert_allclose(stats[1], 1 / np.sqrt(var + 1e-5), rtol=tol, atol=tol)
    np.testing.assert_allclose(stats[2], var, rtol=tol * 4, atol=tol * 4)
    return x64, mu, var, tol


def _check_bn_param_grads(dy, x64, mu, var, s1, s2, dg, db, tol):
    """s1 = dbeta = sum(dy), s2 = dgamma = sum(dy * xhat) per channel."""
    xhat = (x64 - mu[None, :, None]) / np.sqrt(var + 1e-5)[None, :, None]
    want1, want2 = _f64(dy).sum(axis=(0, 2)), (_f64(dy) * xhat).sum(axis=(0, 2))
    for got, want in ((s1, want1), (s2, want2), (dg, want2), (db, want1)):
        np.testing.assert_allclose(_f64(got), want, rtol=tol * 4, atol=tol * 4)


# (N, C, S): spatial size below, above and equal to 1 against the 32/64-thread blocks
# (each thread walks its channel's elements by adding the block's step)
@pytest.mark.parametrize("N,C,S", [(3, 4, 11), (2, 3, 70), (5, 2, 1)])
@pytest.mark.parametrize("dtype,sfx", [(np.float32, "f32"), (np.float16, "f16_p32"),
                                       (BFLOAT16, "bf16_p32"), (np.float64, "f64")])
def test_batch_norm_statistics_and_parameter_gradients(dtype, sfx, N, C, S):
    k = hk.load("norm")
    x = _data((N, C, S), dtype) * 2 + 5
    acc = _acc(dtype)
    stats = np.empty((3, C), acc)                        # mean, 1/std, biased variance
    dsfx = SFX[np.dtype(dtype)]
    k.call_cooperative(f"ember_batch_norm_stats_{dsfx}", x, stats[0], stats[1], stats[2],
                       hk.i64(N), hk.i64(C), hk.i64(S), hk.f64(1e-5), grid=3, block=64)
    mean, inv = stats[0].copy(), stats[1].copy()
    x64, mu, var, tol = _check_bn_stats(x, stats, dtype)
    # the running statistics, in the parameters' dtype (float32 for 16-bit data)
    M = N * S
    pdt = np.float32 if sfx.endswith("_p32") else dtype
    rm, rv = np.full(C, 0.5, pdt), np.ones(C, pdt)
    k.call(f"ember_batch_norm_update_running_{SFX[np.dtype(acc)]}_{SFX[np.dtype(pdt)]}", stats,
           rm, rv, hk.i64(C), hk.f64(0.1), hk.f64(M / (M - 1)), grid=2, block=2)
    np.testing.assert_allclose(_f64(rm), 0.45 + 0.1 * mu, rtol=tol * 4, atol=tol * 4)
    np.testing.assert_allclose(_f64(rv), 0.9 + 0.1 * var * M / (M - 1), rtol=tol * 4,
                               atol=tol * 4)
    dy = _data((N, C, S), dtype, 1)
    s1, s2 = np.empty(C, acc), np.empty(C, acc)
    pdt = np.float32 if sfx.endswith("_p32") else dtype
    dg, db = np.empty(C, pdt), np.empty(C, pdt)
    k.call_cooperative(f"ember_batch_norm_bwd_reduce_{sfx}", dy, x, mean, inv, s1, s2, dg, db,
                       hk.i64(N), hk.i64(C), hk.i64(S), grid=2, block=32)
    _check_bn_param_grads(dy, x64, mu, var, s1, s2, dg, db, tol)


# (N, C, S, parts): parts that split a sample, parts shorter than a block, more parts
# than blocks (the grid strides), a last part shorter than the others, spatial size 1
@pytest.mark.parametrize("N,C,S,parts", [(3, 2, 70, 4), (2, 3, 11, 7), (5, 2, 1, 3),
                                         (4, 1, 33, 5)])
@pytest.mark.parametrize("dtype,sfx", [(np.float32, "f32"), (np.float16, "f16_p32"),
                                       (BFLOAT16, "bf16_p32"), (np.float64, "f64")])
def test_batch_norm_split_reductions(dtype, sfx, N, C, S, parts):
    """The _partial kernels over (channel, part) blocks and the _finish merges give the
    statistics and parameter gradients of the one-block-per-channel kernels."""
    k = hk.load("norm")
    x = _data((N, C, S), dtype) * 2 + 5
    acc = _acc(dtype)
    dsfx = SFX[np.dtype(dtype)]
    partial = np.full(C * parts * 3, np.nan, acc)
    k.call_cooperative(f"ember_batch_norm_stats_partial_{dsfx}", x, partial, hk.i64(N),
                       hk.i64(C), hk.i64(S), hk.i64(parts), grid=3, block=32)
    stats = np.empty((3, C), acc)
    k.call(f"ember_batch_norm_stats_finish_{dsfx}", partial, stats[0], stats[1], stats[2],
           hk.i64(N), hk.i64(C), hk.i64(S), hk.i64(parts), hk.f64(1e-5), grid=2, block=1)
    mean, inv = stats[0].copy(), stats[1].copy()
    x64, mu, var, tol = _check_bn_stats(x, stats, dtype)
    M = N * S
    counts = partial.reshape(C, parts, 3)[:, :, 2]
    n = -(-M // parts)
    np.testing.assert_array_equal(counts, [[max(0, min(n, M - p * n)) for p in range(parts)]] * C)
    dy = _data((N, C, S), dtype, 1)
    partial2 = np.full(C * parts * 2, np.nan, acc)
    k.call_cooperative(f"ember_batch_norm_bwd_reduce_partial_{dsfx}", dy, x, mean, inv, partial2,
                       hk.i64(N), hk.i64(C), hk.i64(S), hk.i64(parts), grid=2, block=32)
    s1, s2 = np.empty(C, acc), np.empty(C, acc)
    pdt = np.float32 if sfx.endswith("_p32") else dtype
    dg, db = np.empty(C, pdt), np.empty(C, pdt)
    k.call(f"ember_batch_norm_bwd_reduce_finish_{sfx}", partial2, s1, s2, dg, db, hk.i64(C),
           hk.i64(parts), grid=1, block=2)
    _check_bn_param_grads(dy, x64, mu, var, s1, s2, dg, db, tol)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", ["sum", "mean", "max", "min"])
def test_reductions(dtype, kind):
    k = hk.load("reduce")
    sfx = SFX[np.dtype(dtype)]
    x = _data((3, 70, 5), dtype)
    x[2, 4, 1] = np.nan                                   # NaN propagates through max / min
    fn = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min}[kind]
    tol = _tol16(dtype, 1e-5)
    x64 = _f64(x)
    inner = np.empty((15,), dtype)                       # (15, 70) rows reduced over 70
    xi = np.ascontiguousarray(x.transpose(0, 2, 1))
    k.call_cooperative(f"ember_{kind}_{sfx}_inner", xi, inner, hk.i64(15), hk.i64(70), grid=4,
                       block=64)
    np.testing.assert_allclose(_f64(inner), fn(_f64(xi), axis=2).reshape(-1), rtol=tol,
                               atol=tol * 8)
    outer = np.empty((3, 5), dtype)
    k.call(f"ember_{kind}_{sfx}_outer", x, outer, hk.i64(3), hk.i64(70), hk.i64(5), grid=2,
           block=4)
    np.testing.assert_allclose(_f64(outer), fn(x64, axis=1), rtol=tol, atol=tol * 8)
    parts = np.empty(3, _acc(dtype))
    k.call_cooperative(f"ember_{kind}_{sfx}_full_pass1", x, parts, hk.i64(x.size), grid=3,
                       block=32)
    y = np.empty(1, dtype)
    k.call_cooperative(f"ember_{kind}_{sfx}_full_pass2", parts, y, hk.i64(3), hk.i64(x.size),
                       grid=1, block=32)
    np.testing.assert_allclose(_f64(y)[0], fn(x64), rtol=tol, atol=tol * 32)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", ["argmax", "argmin"])
def test_argmax_argmin_ties_and_nan(dtype, kind):
    k = hk.load("reduce")
    sfx = SFX[np.dtype(dtype)]
    x = np.round(_data((6, 90), dtype) * 2).astype(dtype)   # many ties
    x[3, 50] = np.nan
    x[3, 70] = np.nan                                    # the first NaN wins
    y = np.empty(6, np.int64)
    k.call_cooperative(f"ember_{kind}_{sfx}_inner", x, y, hk.i64(6), hk.i64(90), grid=4,
                       block=64)
    np.testing.assert_array_equal(y, getattr(np, kind)(_f64(x), axis=1))
    yo = np.empty((2, 3), np.int64)
    xo = np.ascontiguousarray(x.reshape(2, 3, 90).transpose(0, 2, 1))
    k.call(f"ember_{kind}_{sfx}_outer", xo, yo, hk.i64(2), hk.i64(90), hk.i64(3), grid=2,
           block=2)
    np.testing.assert_array_equal(yo, getattr(np, kind)(_f64(xo), axis=1))


@pytest.mark.parametrize("dtype", [np.float32, BFLOAT16, np.float16, np.float64])
def test_multi_unscale_and_found_inf(dtype):
    """GradScaler's fused unscale over several gradients in chunks, and its inf flag."""
    k = hk.load("optim")
    sizes = np.array([5, 130, 1], np.int64)
    grads = [_data((int(n),), dtype, i) for i, n in enumerate(sizes)]
    want = [_f64(g) * 0.25 for g in grads]
    chunk = 64
    tensor, begin = [], []
    for t, n in enumerate(sizes):
        for b in range(0, int(n), chunk):
            tensor.append(t)
            begin.append(b)
    ptrs = np.array([g.ctypes.data for g in grads], np.uint64)
    inv = np.array([0.25], np.float32)
    found = np.zeros(1, np.int32)
    k.call_cooperative(f"ember_multi_unscale_{SFX[np.dtype(dtype)]}", ptrs, sizes,
                       np.array(tensor, np.int32), np.array(begin, np.int64),
                       hk.i64(len(tensor)), hk.i64(chunk), inv, found, grid=2, block=32)
    for g, w in zip(grads, want):
        np.testing.assert_array_equal(_f64(g), w)       # a power of two: exact
    assert found[0] == 0
    grads[1][77] = np.inf
    k.call_cooperative(f"ember_multi_unscale_{SFX[np.dtype(dtype)]}", ptrs, sizes,
                       np.array(tensor, np.int32), np.array(begin, np.int64),
                       hk.i64(len(tensor)), hk.i64(chunk), inv, found, grid=3, block=32)
    assert found[0] == 1


def _chunk_table(sizes, chunk):
    tensor, begin = [], []
    for t, n in enumerate(sizes):
        for b in range(0, int(n), chunk):
            tensor.append(t)
            begin.append(b)
    return np.array(tensor, np.int32), np.array(begin, np.int64)


def _ptrs(arrays):
    return np.array([a.ctypes.data for a in arrays], np.uint64)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_multi_adam_counts_steps_on_the_device_and_skips_on_found_inf(dtype):
    """ember_multi_step_bump + ember_multi_adam: each tensor's float step count is bumped
    on the device and gives its own bias corrections; grad_scale divides the gradients
    (written back); a nonzero found_inf changes nothing, step counts included.  Oracle:
    torch.optim.Adam's formulas in float64 (NumPy)."""
    k = hk.load("optim")
    sfx, acc = SFX[np.dtype(dtype)], _acc(dtype)
    sizes, chunk = np.array([5, 130], np.int64), 64
    tensor, begin = _chunk_table(sizes, chunk)
    params = [_data((int(n),), dtype, i) for i, n in enumerate(sizes)]
    grads = [_data((int(n),), dtype, 5 + i) * 2 for i, n in enumerate(sizes)]
    ms = [_data((int(n),), acc, 7 + i) * 0.1 for i, n in enumerate(sizes)]
    vs = [np.abs(_data((int(n),), acc, 9 + i)) * 0.01 for i, n in enumerate(sizes)]
    steps = [np.array([3.0], np.float32), np.array([0.0], np.float32)]
    scale = np.array([2.0], np.float32)
    before = [a.copy() for a in params + grads + ms + vs + steps]
    lr, b1, b2, eps, wd = 0.01, 0.9, 0.999, 1e-8, 0.1

    def launch(found):
        f = np.array([found], np.float32)
        k.call("ember_multi_step_bump", _ptrs(steps), hk.i64(2), f, grid=1, block=4)
        k.call(f"ember_multi_adam_{sfx}", _ptrs(params), _ptrs(grads), _ptrs(ms), _ptrs(vs),
               np.zeros(2, np.uint64), _ptrs(steps), sizes, tensor, begin, hk.i64(len(tensor)),
               hk.i64(chunk), lr, b1, b2, eps, wd, np.int32(1), np.int32(0), np.int32(0),
               scale, f, grid=2, block=8)
    launch(1.0)
    for a, b in zip(params + grads + ms + vs + steps, before):
        np.testing.assert_array_equal(a, b)
    launch(0.0)
    assert [s[0] for s in steps] == [4.0, 1.0]
    tol = _tol16(dtype, 2e-6)
    for i in range(2):
        t = float(steps[i][0])
        g = _f64((before[2 + i].astype(np.float64) / 2.0).astype(dtype))
        np.testing.assert_array_equal(_f64(grads[i]), g)          # unscaled, written back
        p = _f64(before[i]) * (1 - lr * wd)
        m = b1 * _f64(before[4 + i]) + (1 - b1) * g
        v = b2 * _f64(before[6 + i]) + (1 - b2) * g * g
        want = p - lr / (1 - b1 ** t) * m / (np.sqrt(v) / np.sqrt(1 - b2 ** t) + eps)
        np.testing.assert_allclose(_f64(ms[i]), m, rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(_f64(vs[i]), v, rtol=1e-6, atol=1e-9)
        np.testing.assert_allclose(_f64(params[i]), want, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_multi_sgd_skips_on_found_inf_and_divides_by_grad_scale(dtype):
    k = hk.load("optim")
    sfx = SFX[np.dtype(dtype)]
    sizes, chunk = np.array([70, 3], np.int64), 32
    tensor, begin = _chunk_table(sizes, chunk)
    params = [_data((int(n),), dtype, i) for i, n in enumerate(sizes)]
    grads = [_data((int(n),), dtype, 3 + i) for i, n in enumerate(sizes)]
    bufs = [_data((int(n),), dtype, 6 + i) for i, n in enumerate(sizes)]
    before = [a.copy() for a in params + grads + bufs]
    scale = np.array([4.0], np.float32)

    def launch(found):
        k.call(f"ember_multi_sgd_{sfx}", _ptrs(params), _ptrs(grads), _ptrs(bufs), sizes,
               tensor, begin, hk.i64(len(tensor)), hk.i64(chunk), 0.1, 0.9, 0.0, 0.0,
               np.int32(0), np.int32(0), np.int32(0), scale, np.array([found], np.float32),
               grid=2, block=8)
    launch(1.0)
    for a, b in zip(params + grads + bufs, before):
        np.testing.assert_array_equal(a, b)
    launch(0.0)
    tol = _tol16(dtype)
    for i in range(2):
        g = _f64(before[2 + i]) / 4.0
        buf = 0.9 * _f64(before[4 + i]) + g
        np.testing.assert_array_equal(_f64(grads[i]), g)
        np.testing.assert_allclose(_f64(bufs[i]), buf, rtol=tol, atol=tol)
        np.testing.assert_allclose(_f64(params[i]), _f64(before[i]) - 0.1 * buf, rtol=tol,
                                   atol=tol)


@pytest.mark.parametrize("scale, tracker, found, interval", [
    (1024.0, 0, 0.0, 3), (1024.0, 2, 0.0, 3), (1024.0, 2, 1.0, 3), (3.0e38, 0, 0.0, 1),
    (1.5, 1, 0.0, 2), (1e-30, 5, 1.0, 7)])
def test_amp_update_scale_follows_torch(scale, tracker, found, interval):
    """ember_amp_update_scale (GradScaler.update on the device) against PyTorch's
    _amp_update_scale_ on the CPU: growth, backoff, a growth that overflows (kept)."""
    torch = pytest.importorskip("torch")
    k = hk.load("optim")
    s, t = np.array([scale], np.float32), np.array([tracker], np.int32)
    k.call("ember_amp_update_scale", s, t, np.array([found], np.float32), 2.5, 0.25,
           hk.i64(interval), grid=1, block=1)
    ts, tt = torch.tensor([scale], dtype=torch.float32), torch.tensor([tracker], dtype=torch.int32)
    torch._amp_update_scale_(ts, tt, torch.tensor([found]), 2.5, 0.25, interval)
    assert s[0] == ts.item() and t[0] == tt.item()


# ------------------------------------------------------------------ elementwise.cu

def _unary_ref(op):
    import ember
    import ember.nn.functional as F
    return {"neg": ember.negative, "abs": ember.abs, "exp": ember.exp, "log": ember.log,
            "sqrt": ember.sqrt, "tanh": ember.tanh,
            "sigmoid": F.sigmoid, "relu": F.relu, "gelu": F.gelu,
            "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"), "silu": F.silu}[op]


def _binary_ref(op):
    import ember
    return {"add": ember.add, "sub": ember.subtract, "mul": ember.multiply,
            "div": ember.divide, "maximum": ember.maximum, "minimum": ember.minimum,
            "pow": ember.power}[op]


_SPECIAL = np.array([0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0, 20.0, -20.0, 88.0, -100.0, 1e-20,
                     np.inf, -np.inf, np.nan], np.float64)


def _sample(dtype, n=300, seed=0):
    r = np.random.default_rng(seed)
    x = np.concatenate([_SPECIAL, r.standard_normal(n) * 3, r.uniform(0, 4, 20)])
    with np.errstate(over="ignore"):
        return x.astype(np.float32).astype(dtype)


def _assert_close_nan(got, want, dtype, scale=1, atol=0.0):
    got, want = _f64(np.asarray(got)), _f64(np.asarray(want))
    assert np.array_equal(np.isnan(got), np.isnan(want)), "NaN positions differ"
    ok = ~np.isnan(want)
    tol = {np.dtype(np.float64): 1e-13, np.dtype(np.float32): 3e-6,
           np.dtype(np.float16): 1e-3, BFLOAT16: 8e-3}[np.dtype(dtype)] * scale
    np.testing.assert_allclose(got[ok], want[ok], rtol=tol, atol=max(tol * 1e-3, atol))


UNARY = ["neg", "abs", "exp", "log", "sqrt", "tanh", "sigmoid", "relu", "gelu",
         "gelu_tanh", "silu"]


class _StridedArgs:
    """elementwise.cu's StridedArgs from ember.cuda._elementwise._strided_args."""

    @staticmethod
    def of(shape, *arrays):
        import ctypes
        import ember
        from ember.cuda._elementwise import _strided_args

        class S(ctypes.Structure):
            _fields_ = [("ndim", ctypes.c_int), ("words", ctypes.c_longlong * 32)]
        return S.from_buffer_copy(_strided_args(shape, *[ember.asarray(a) for a in arrays]))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", UNARY)
def test_unary_kernels_match_the_cpu_ops(dtype, op):
    import ember
    k = hk.load("elementwise")
    sfx = SFX[np.dtype(dtype)]
    x = _sample(dtype)
    with np.errstate(all="ignore"):
        want = _unary_ref(op)(ember.asarray(x)).numpy()
    y = np.empty_like(x)
    k.call(f"ember_{op}_{sfx}_contig", x, y, hk.i64(x.size), grid=2, block=3)
    scale = 4 if op in ("gelu", "gelu_tanh", "silu", "sigmoid", "tanh") else 2
    # the GPU's erf form of gelu, x/2 (1 + erf(x / sqrt 2)) as PyTorch's CUDA kernel, loses
    # relative precision where 1 + erf cancels (x < -3); the CPU's does not
    atol = {"gelu": 1e-6, "gelu_tanh": 1e-6}.get(op, 0.0) * (1 if np.dtype(dtype).itemsize > 2
                                                              else 0)
    _assert_close_nan(y, want, dtype, scale, atol)
    # the strided form on a transposed view, into a transposed output
    xs = x[:330].reshape(30, 11).T
    ys = np.empty((30, 11), dtype).T
    k.call(f"ember_{op}_{sfx}_strided", xs, ys, hk.i64(xs.size), _StridedArgs.of(xs.shape, ys, xs),
           grid=2, block=5)
    _assert_close_nan(ys, want[:330].reshape(30, 11).T, dtype, scale, atol)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "maximum", "minimum", "pow"])
def test_binary_kernels_match_the_cpu_ops(dtype, op):
    import ember
    k = hk.load("elementwise")
    sfx = SFX[np.dtype(dtype)]
    a = _sample(dtype, seed=1)
    b = _sample(dtype, seed=2)[::-1].copy()
    if op == "pow":
        a = np.abs(a).astype(dtype)
        b = np.clip(_f64(b), -4, 4).astype(dtype)
    ref = _binary_ref(op)
    with np.errstate(all="ignore"):
        want = ref(ember.asarray(a), ember.asarray(b)).numpy()
    y = np.empty_like(a)
    k.call(f"ember_{op}_{sfx}_contig", a, b, y, hk.i64(a.size), grid=3, block=2)
    scale = 8 if op == "pow" else 1
    _assert_close_nan(y, want, dtype, scale)
    # a broadcast pair through the strided kernel
    a2, b2 = a[:30].reshape(3, 1, 10), b[:50].reshape(1, 5, 10)
    y2 = np.empty((3, 5, 10), dtype)
    k.call(f"ember_{op}_{sfx}_strided", a2, b2, y2, hk.i64(y2.size),
           _StridedArgs.of(y2.shape, y2, a2, b2), grid=2, block=4)
    with np.errstate(all="ignore"):
        want2 = ref(ember.asarray(a2), ember.asarray(b2)).numpy()
    _assert_close_nan(y2, want2, dtype, scale)
    # array with a Python scalar on either side
    for swap in (0, 1):
        s = 1.75
        ys = np.empty_like(a)
        k.call(f"ember_{op}_{sfx}_scalar", a, hk.f64(s), ys, hk.i64(a.size), hk.i32(swap),
               grid=2, block=3)
        with np.errstate(all="ignore"):
            ws = (ref(ember.asarray(np.full_like(a, s)), ember.asarray(a)) if swap
                  else ref(ember.asarray(a), ember.asarray(np.full_like(a, s)))).numpy()
        _assert_close_nan(ys, ws, dtype, scale)


# ------------------------------------------------------------------ index.cu

@pytest.mark.parametrize("dtype", DTYPES)
def test_gather_select_embedding(dtype):
    k = hk.load("index")
    sfx = SFX[np.dtype(dtype)]
    src = _data((2, 6, 3), dtype)
    r = np.random.default_rng(4)
    idx = r.integers(-6, 6, (2, 4, 3)).astype(np.int64)         # negative indices wrap
    out = np.empty((2, 4, 3), dtype)
    bad = np.zeros(1, np.int32)
    k.call(f"ember_gather_{sfx}", src, idx, out, hk.i64(2), hk.i64(6), hk.i64(4), hk.i64(3), bad,
           grid=2, block=5)
    np.testing.assert_array_equal(out, np.take_along_axis(src, idx % 6, axis=1))
    assert bad[0] == 0
    sel = np.array([5, -1, 0, 2, 2], np.int64)
    out = np.empty((2, 5, 3), dtype)
    k.call(f"ember_index_select_{sfx}", src, sel, out, hk.i64(2), hk.i64(6), hk.i64(5),
           hk.i64(3), bad, grid=3, block=4)
    np.testing.assert_array_equal(out, src[:, sel % 6])
    sel[1] = 6                                                     # out of range: flagged
    k.call(f"ember_index_select_{sfx}", src, sel, out, hk.i64(2), hk.i64(6), hk.i64(5),
           hk.i64(3), bad, grid=1, block=3)
    assert bad[0] == 1
    w = _data((7, 40), dtype, 1)
    ids = np.array([3, 0, 6, 3], np.int64)
    emb = np.empty((4, 40), dtype)
    bad[0] = 0
    k.call(f"ember_embedding_fwd_{sfx}", w, ids, emb, hk.i64(4), hk.i64(7), hk.i64(40), bad,
           grid=2, block=64)
    np.testing.assert_array_equal(emb, w[ids])
    assert bad[0] == 0
    ids[2] = -1                                                    # embedding does not wrap
    k.call(f"ember_embedding_fwd_{sfx}", w, ids, emb, hk.i64(4), hk.i64(7), hk.i64(40), bad,
           grid=1, block=32)
    assert bad[0] == 1


@pytest.mark.parametrize("dtype", DTYPES)
def test_scatter_add_index_add_index_put(dtype):
    k = hk.load("index")
    sfx = SFX[np.dtype(dtype)]
    tol = _tol16(dtype, 1e-6) * 4
    r = np.random.default_rng(5)
    src = _data((2, 5, 3), dtype)
    idx = r.integers(0, 4, (2, 5, 3)).astype(np.int64)
    out = np.zeros((2, 4, 3), dtype)
    bad = np.zeros(1, np.int32)
    k.call_cooperative(f"ember_scatter_add_{sfx}", src, idx, out, hk.i64(2), hk.i64(4),
                       hk.i64(5), hk.i64(3), bad, grid=2, block=32)
    want = np.zeros((2, 4, 3))
    for o in range(2):
        for j in range(5):
            for i in range(3):
                want[o, idx[o, j, i], i] += _f64(src)[o, j, i]
    np.testing.assert_allclose(_f64(out), want, rtol=tol, atol=tol)
    rows = np.array([1, -1, 1, 0, 2], np.int64)                    # repeats, a wrapped index
    for skip in (-1, 1):
        out = np.zeros((2, 4, 3), dtype)
        k.call_cooperative(f"ember_index_add_{sfx}", src, rows, out, hk.i64(2), hk.i64(4),
                           hk.i64(5), hk.i64(3), hk.i64(skip), bad, grid=3, block=32)
        want = np.zeros((2, 4, 3))
        for j, d in enumerate(rows % 4):
            if d != skip:
                want[:, d] += _f64(src)[:, j]
        np.testing.assert_allclose(_f64(out), want, rtol=tol, atol=tol)
    # the deterministic form: indices sorted on the host, one thread per (segment, column)
    perm = np.argsort(rows % 4, kind="stable").astype(np.int64)
    srt = (rows % 4)[perm]
    starts = np.flatnonzero(np.r_[True, srt[1:] != srt[:-1]]).astype(np.int64)
    seg = np.r_[starts, len(rows)].astype(np.int64)
    srt_bad = srt.copy()
    srt_bad[srt == 2] = 9                                          # an out-of-range segment is skipped
    out = np.ones((2, 4, 3), dtype)
    k.call(f"ember_index_add_sorted_{sfx}", src, srt_bad, perm, seg, hk.i64(len(starts)), out,
           hk.i64(2), hk.i64(4), hk.i64(5), hk.i64(3), hk.i64(-1), grid=2, block=3)
    want = np.ones((2, 4, 3))
    for j, d in enumerate(rows % 4):
        if d != 2:
            want[:, d] += _f64(src)[:, j]
    np.testing.assert_allclose(_f64(out), want, rtol=tol, atol=tol)
    vals = _data((2, 3, 3), dtype, 2)
    put = np.array([3, 0, -2], np.int64)
    for acc in (0, 1):
        out = np.ones((2, 4, 3), dtype)
        k.call_cooperative(f"ember_index_put_{sfx}", out, put, vals, hk.i64(2), hk.i64(4),
                           hk.i64(3), hk.i64(3), hk.i32(acc), bad, grid=2, block=32)
        want = np.ones((2, 4, 3))
        want[:, put % 4] = _f64(vals) + (1 if acc else 0)
        np.testing.assert_allclose(_f64(out), want, rtol=tol, atol=tol)


# ---------------------------------------------------------------- 2-d pooling kernels
# (planes, H, W, KH, KW, sh, sw, ph, pw, dh, dw, ceil_mode): stride, padding, dilation,
# ceil mode (a last window that starts in the padding-free tail) and 1-wide planes
POOLS = [(3, 7, 6, 3, 2, 2, 1, 1, 1, 1, 2, False),
         (2, 9, 8, 3, 3, 2, 2, 1, 1, 1, 1, True),
         (4, 5, 1, 2, 1, 2, 1, 0, 0, 1, 1, True),
         (1, 6, 7, 1, 1, 1, 1, 0, 0, 1, 1, False)]


def _pool_geom(P, Hh, W, KH, KW, sh, sw, ph, pw, dh, dw, ceil, torch_out):
    OH, OW = torch_out.shape[-2:]
    return hk.Conv2dGeom(P, Hh, W, KH, KW, OH, OW, sh, sw, ph, pw, dh, dw)


@pytest.mark.parametrize("pool", POOLS)
def test_max_pool_fwd_and_indices_match_torch(pool):
    torch = pytest.importorskip("torch")
    P, Hh, W, KH, KW, sh, sw, ph, pw, dh, dw, ceil = pool
    x = _data((P, Hh, W), np.float32, 3)
    ty, ti = torch.nn.functional.max_pool2d(torch.from_numpy(x)[None], (KH, KW), (sh, sw),
                                            (ph, pw), (dh, dw), ceil_mode=ceil,
                                            return_indices=True)
    g = _pool_geom(*pool, ty)
    k = hk.load("pool_conv")
    for grid, block in LAUNCHES:
        y = np.full(ty.shape[1:], 7, np.float32)
        idx = np.full(ty.shape[1:], -7, np.int64)
        k.call("ember_max_pool2d_fwd_f32", x, y, idx, g, grid=grid, block=block)
        np.testing.assert_array_equal(y, ty[0].numpy())
        np.testing.assert_array_equal(idx, ti[0].numpy())


@pytest.mark.parametrize("include_pad", [True, False])
@pytest.mark.parametrize("pool", [p for p in POOLS if p[9] == p[10] == 1 and
                                  p[7] * 2 <= p[3] and p[8] * 2 <= p[4]])
def test_avg_pool_fwd_and_bwd_match_torch(pool, include_pad):
    torch = pytest.importorskip("torch")
    P, Hh, W, KH, KW, sh, sw, ph, pw, dh, dw, ceil = pool
    x = torch.from_numpy(_data((1, P, Hh, W), np.float64, 4)).requires_grad_(True)
    ty = torch.nn.functional.avg_pool2d(x, (KH, KW), (sh, sw), (ph, pw), ceil_mode=ceil,
                                        count_include_pad=include_pad)
    dy = _data(tuple(ty.shape), np.float64, 5)
    ty.backward(torch.from_numpy(dy))
    g = _pool_geom(P, Hh, W, KH, KW, sh, sw, ph, pw, dh, dw, ceil, ty)
    k = hk.load("pool_conv")
    xn = x.detach().numpy()[0]
    for grid, block in LAUNCHES:
        y = np.full(ty.shape[1:], 7.0)
        k.call("ember_avg_pool2d_fwd_f64", xn, y, g, hk.i32(include_pad), hk.i64(0),
               grid=grid, block=block)
        np.testing.assert_allclose(y, ty.detach().numpy()[0], rtol=1e-12, atol=1e-12)
        dx = np.full((P, Hh, W), 7.0)
        k.call("ember_avg_pool2d_bwd_f64", dy[0], dx, g, hk.i32(include_pad), hk.i64(0),
               grid=grid, block=block)
        np.testing.assert_allclose(dx, x.grad.numpy()[0], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", DTYPES)
def test_layer_norm_of_one_element_gives_beta_exactly(dtype):
    # Welford's mean of one value is the value: x - mean is exactly 0, y is beta
    k = hk.load("norm")
    rows = 5
    x = _data((rows, 1), dtype) * 100 + 7
    gamma, beta = _data((1,), dtype, 1), _data((1,), dtype, 2)
    acc = _acc(dtype)
    y = np.empty_like(x)
    mean, rstd = np.empty(rows, acc), np.empty(rows, acc)
    k.call_cooperative(f"ember_layer_norm_fwd_{SFX[np.dtype(dtype)]}", x, gamma, beta, y, mean,
                       rstd, hk.i64(rows), hk.i64(1), hk.f64(1e-5), grid=2, block=32)
    np.testing.assert_array_equal(_f64(y), np.broadcast_to(_f64(beta), (rows, 1)))


# ---- fused attention (attention.cu) at the GPU's block size ---------------------------------
# The emulated GPU suite (tests/cuda/test_cuda_flash_attention.py) runs these kernels with
# 32 threads a block; here they run with the 128 ember.cuda launches (4 warps: the row and
# tile loops stride by blockDim) and fewer blocks than work items, with both mask slots,
# causal masking and dropout (its mask from random.cu's ember_uniform_f32, the stream the
# kernel documents), against NumPy in float64.

_FLASH_GEOM = "<37q2d2Q"


def _flash_geom(B, H, L, S, D, Dv, strides, kinds, causal, scale, p, seed=0, offset=0):
    import struct
    flat = [B, H, L, S, D, Dv] + [s for st in strides for s in st]
    return struct.pack(_FLASH_GEOM, *flat, kinds[0], kinds[1], int(causal), scale, p, seed,
                       offset)


def _st(x):
    return [s // x.itemsize for s in x.strides]


@pytest.mark.parametrize("D, Dv, DM, causal, p", [(16, 8, 64, False, 0.0), (16, 16, 64, True, 0.3),
                                                  (72, 40, 128, True, 0.0)])
def test_flash_attention_kernels_with_four_warps(D, Dv, DM, causal, p):
    k = hk.load("attention")
    B, H, L, S = 1, 2, 20, 37
    rng = np.random.default_rng(0)
    q = rng.standard_normal((B, H, L, D)).astype(np.float32)
    kk = rng.standard_normal((B, H, S, D)).astype(np.float32)
    v = rng.standard_normal((B, H, S, Dv)).astype(np.float32)
    masked = rng.random((L, S)) < 0.3                   # kind 3: True = masked
    masked[:, 0] = False
    pad = np.zeros((B, S), np.float32)                  # kind 1: additive, (B, 1, 1, S)
    pad[0, -3:] = -np.inf
    m0_st, m1_st = [0, 0, S, 1], [S, 0, 0, 1]
    scale, seed, offset = 0.3, 1234, 7
    o = np.empty((B, H, L, Dv), np.float32)
    lse = np.empty((B, H, L), np.float32)
    rs = np.zeros(2, np.int64)
    none = [0, 0, 0, 0]
    g = _flash_geom(B, H, L, S, D, Dv, [_st(q), _st(kk), _st(v), _st(o), none, m0_st, m1_st],
                    (3, 1), causal, scale, p, seed, offset)
    mb = masked.astype(np.uint8)
    k.call_cooperative(f"ember_flash_fwd_f32_d{DM}", q, kk, v, mb, pad, o, lse, rs, g,
                       grid=2, block=128)
    assert rs.tolist() == [seed, offset]
    u = np.empty(B * H * L * S, np.float32)
    hk.load("random").call("ember_uniform_f32", u, hk.i64(u.size), np.uint64(seed),
                           np.uint64(offset), hk.f64(0.0), hk.f64(1.0))
    z = (u.reshape(B, H, L, S) >= np.float32(p)) / (1.0 - p)
    s = q.astype(np.float64) @ kk.astype(np.float64).swapaxes(-1, -2) * scale
    s = np.where(masked, -np.inf, s) + pad[:, None, None, :]
    if causal:
        s = np.where(np.tril(np.ones((L, S), bool)), s, -np.inf)
    ref_lse = np.log(np.exp(s - s.max(-1, keepdims=True)).sum(-1)) + s.max(-1)
    P = np.exp(s - ref_lse[..., None])
    np.testing.assert_allclose(lse, ref_lse, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(o, (P * z) @ v, rtol=1e-4, atol=1e-5)
    go = rng.standard_normal(o.shape).astype(np.float32)
    g = _flash_geom(B, H, L, S, D, Dv, [_st(q), _st(kk), _st(v), _st(o), _st(go), m0_st, m1_st],
                    (3, 1), causal, scale, p)
    delta = np.empty((B, H, L), np.float32)
    k.call_cooperative("ember_flash_bwd_delta_f32", o, go, delta, g, grid=2, block=128)
    dq = np.zeros((B, H, L, D), np.float32)
    dk, dv = np.empty((B, H, S, D), np.float32), np.empty((B, H, S, Dv), np.float32)
    k.call_cooperative(f"ember_flash_bwd_f32_d{DM}", q, kk, v, mb, pad, go, lse, delta, rs, dq,
                       dk, dv, g, grid=2, block=128)
    g64 = go.astype(np.float64)
    dp = (g64 @ v.astype(np.float64).swapaxes(-1, -2)) * z
    ds = P * (dp - (dp * P).sum(-1, keepdims=True))
    np.testing.assert_allclose(dv, (P * z).swapaxes(-1, -2) @ g64, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(dq, ds @ kk.astype(np.float64) * scale, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(dk, ds.swapaxes(-1, -2) @ q.astype(np.float64) * scale,
                               rtol=1e-4, atol=1e-5)
