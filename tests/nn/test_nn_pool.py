"""Pooling (ember.nn.functional.*pool*, nn.*Pool*) against PyTorch and finite differences."""
import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember import nn
from ember.autograd import gradcheck, gradgradcheck

torch = pytest.importorskip("torch")
TF = torch.nn.functional

RNG = np.random.default_rng(99)


def _pair(shape, dtype=np.float32, noncontig=False, values=None):
    a = RNG.standard_normal(shape).astype(dtype) if values is None else values.astype(dtype)
    if noncontig:
        e = ember.asarray(np.ascontiguousarray(np.swapaxes(a, -1, -2))).swapaxes(-1, -2)
        assert not e.is_contiguous()
        e.requires_grad = True
    else:
        e = ember.asarray(a, requires_grad=True)
    return e, torch.tensor(a, requires_grad=True)


def _compare(name, xs, args, kw, dtype=np.float32, noncontig=False, values=None):
    xe, xt = _pair(xs, dtype, noncontig, values)
    ye = getattr(F, name)(xe, *args, **kw)
    yt = getattr(TF, name)(xt, *args, **kw)
    if isinstance(yt, tuple):
        assert ye[1].dtype == np.int64
        np.testing.assert_array_equal(np.asarray(ye[1]), yt[1].numpy())
        ye, yt = ye[0], yt[0]
    assert ye.shape == tuple(yt.shape) and ye.dtype == dtype
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np.asarray(ye), yt.detach().numpy(), **tol)
    if ye.size:
        g = RNG.standard_normal(tuple(yt.shape)).astype(dtype)
        (ye * ember.asarray(g)).sum().backward()
        yt.backward(torch.tensor(g))
        np.testing.assert_allclose(np.asarray(xe.grad), xt.grad.numpy(), **tol)


MAX2D = [
    ((2, 3, 8, 8), (2,), {}),
    ((2, 3, 9, 8), (3, 2, 1), dict(return_indices=True)),
    ((2, 3, 9, 8), (3, 2, 1, 2, True), dict(return_indices=True)),
    ((3, 9, 8), ((3, 2), (2, 1), (1, 1)), dict(ceil_mode=True)),
    ((1, 2, 7, 7), (3,), dict(stride=2, ceil_mode=True, return_indices=True)),
    ((2, 2, 10, 10), (2,), dict(stride=1, dilation=3, padding=1)),
    ((1, 2, 10, 10), (4,), dict(stride=1, padding=2)),
    ((1, 1, 5, 5), (5,), {}),
]


@pytest.mark.parametrize("xs,args,kw", MAX2D)
def test_max_pool2d_matches_torch(xs, args, kw):
    _compare("max_pool2d", xs, args, kw)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("noncontig", [False, True])
def test_max_pool2d_dtypes_strided(dtype, noncontig):
    _compare("max_pool2d", (2, 3, 7, 6), (3, 2, 1), dict(return_indices=True), dtype, noncontig)


def test_max_pool_ties_and_nan_follow_torch():
    v = np.zeros((1, 1, 4, 4))
    v[0, 0, 1, 1] = v[0, 0, 0, 0] = 1.0          # ties: the first maximum wins
    v[0, 0, 2, 3] = np.nan
    v[0, 0, 3, 2] = np.nan                        # several NaNs: the last wins in torch
    for args in [(2,), (3, 1, 1)]:
        _compare("max_pool2d", (1, 1, 4, 4), args, dict(return_indices=True), values=v)
    w = RNG.integers(0, 3, (2, 3, 6, 18)).astype(np.float64)     # many ties, wide rows
    w[0, 0, 1, ::5] = np.nan
    w[1, 2, :, 7] = np.nan
    w[1, 1, 2, 3] = -np.inf
    _compare("max_pool2d", w.shape, (2,), dict(return_indices=True), values=w)
    _compare("max_pool2d", w.shape, (2,), dict(return_indices=True), dtype=np.float64, values=w)
    _compare("max_pool1d", (1, 1, 6), (2,), dict(return_indices=True),
             values=np.array([[[1.0, 1.0, 2.0, 2.0, -1.0, -1.0]]]))


@pytest.mark.parametrize("xs,args,kw", [
    ((2, 3, 9), (3, 2, 1), dict(ceil_mode=True, return_indices=True)),
    ((3, 9), (2,), {}),
    ((2, 2, 12), (3,), dict(dilation=2, padding=1)),
    ((2, 2, 12), (3,), dict(dilation=2, padding=1, return_indices=True)),
])
def test_max_pool1d_matches_torch(xs, args, kw):
    _compare("max_pool1d", xs, args, kw)


AVG2D = [
    ((2, 3, 8, 8), (2,), {}),
    ((2, 3, 9, 8), (3, 2, 1), {}),
    ((2, 3, 9, 8), (3, 2, 1), dict(ceil_mode=True, count_include_pad=False)),
    ((2, 3, 9, 8), (3, 2, 1), dict(ceil_mode=True)),
    ((2, 3, 9, 8), (3, 2, 1), dict(ceil_mode=True, divisor_override=5)),
    ((3, 7, 5), ((3, 2), (1, 2), (1, 1)), dict(count_include_pad=False)),
]


@pytest.mark.parametrize("xs,args,kw", AVG2D)
def test_avg_pool2d_matches_torch(xs, args, kw):
    _compare("avg_pool2d", xs, args, kw)


@pytest.mark.parametrize("kw", [{}, dict(ceil_mode=True, count_include_pad=False, padding=1)])
def test_avg_pool1d_matches_torch(kw):
    _compare("avg_pool1d", (2, 3, 10), (3, 2), kw)
    _compare("avg_pool1d", (3, 10), (3, 2), kw, dtype=np.float64)


@pytest.mark.parametrize("xs,osize", [((2, 3, 9, 8), (4, 3)), ((2, 3, 9, 8), (None, 3)),
                                      ((2, 3, 9, 8), 1), ((3, 5, 7), (7, 9)),
                                      ((2, 4, 8, 8), (8, None))])
def test_adaptive_pool2d_matches_torch(xs, osize):
    _compare("adaptive_avg_pool2d", xs, (osize,), {})
    _compare("adaptive_max_pool2d", xs, (osize,), dict(return_indices=True))


@pytest.mark.parametrize("xs,osize", [((2, 3, 9), 4), ((3, 5), 5), ((2, 3, 4), 7)])
def test_adaptive_pool1d_matches_torch(xs, osize):
    _compare("adaptive_avg_pool1d", xs, (osize,), {})
    _compare("adaptive_max_pool1d", xs, (osize,), dict(return_indices=True))


def test_adaptive_float64_strided():
    _compare("adaptive_avg_pool2d", (2, 3, 6, 5), ((4, 3),), {}, np.float64, True)


def test_empty_batch():
    x = ember.zeros((0, 3, 4, 4), requires_grad=True)
    for y in (F.max_pool2d(x, 2), F.avg_pool2d(x, 2), F.adaptive_avg_pool2d(x, 2)):
        assert y.shape == (0, 3, 2, 2)
        y.sum().backward()
        assert x.grad.shape == x.shape


# ---------------------------------------------------------------- finite differences

def _f64(*shape):
    # distinct values so the max is unique (finite differences need that)
    a = RNG.permutation(int(np.prod(shape))).reshape(shape) / 7.0
    return ember.asarray(a, requires_grad=True)


def test_gradcheck_max_pool():
    x = _f64(2, 2, 5, 5)
    assert gradcheck(lambda x: F.max_pool2d(x, 3, 2, 1, ceil_mode=True), (x,))
    assert gradcheck(lambda x: F.max_pool2d(x, 2, 1, dilation=2), (x,))
    assert gradgradcheck(lambda x: F.max_pool2d(x, 2), (x,))
    assert gradcheck(lambda x: F.adaptive_max_pool2d(x, (2, 3)), (x,))
    assert gradcheck(lambda x: F.max_pool1d(x, 2), (_f64(2, 5),))


def test_gradcheck_avg_pool():
    x = _f64(2, 2, 5, 5)
    assert gradcheck(lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True,
                                            count_include_pad=False), (x,))
    assert gradgradcheck(lambda x: F.avg_pool2d(x, 2, 1, divisor_override=3), (x,))
    assert gradcheck(lambda x: F.avg_pool1d(x, 3, 2, 1), (_f64(2, 7),))


def test_gradcheck_adaptive_avg_pool():
    x = _f64(2, 2, 5, 5)
    assert gradcheck(lambda x: F.adaptive_avg_pool2d(x, (3, 2)), (x,))
    assert gradgradcheck(lambda x: F.adaptive_avg_pool2d(x, (3, 2)), (x,))
    assert gradcheck(lambda x: F.adaptive_avg_pool1d(x, 3), (_f64(2, 7),))


def test_double_backward_max_pool_matches_torch():
    a = RNG.standard_normal((2, 2, 6, 6))
    xe = ember.asarray(a, requires_grad=True)
    xt = torch.tensor(a, requires_grad=True)
    ye, yt = F.max_pool2d(xe, 2) ** 2, TF.max_pool2d(xt, 2) ** 2
    ge, = ember.autograd.grad(ye.sum(), [xe], create_graph=True)
    gt, = torch.autograd.grad(yt.sum(), [xt], create_graph=True)
    (ge ** 2).sum().backward()
    (gt ** 2).sum().backward()
    np.testing.assert_allclose(np.asarray(xe.grad), xt.grad.numpy(), rtol=1e-12)


# ---------------------------------------------------------------- errors

def test_errors():
    x = ember.ones((1, 1, 4, 4))
    with pytest.raises(RuntimeError, match="3D \\(unbatched\\) or 4D"):
        F.max_pool2d(ember.ones((4, 4)), 2)
    with pytest.raises(ValueError, match="pad should be at most half"):
        F.max_pool2d(x, 2, padding=2, dilation=3)
    with pytest.raises(ValueError, match="pad should be at most half of kernel size"):
        F.avg_pool2d(x, 2, padding=2)
    with pytest.raises(RuntimeError, match="Output size is too small"):
        F.max_pool2d(x, 5)
    with pytest.raises(ValueError, match="stride must be greater than zero"):
        F.max_pool2d(x, 2, stride=0)
    with pytest.raises(ValueError, match="divisor must be not zero"):
        F.avg_pool2d(x, 2, divisor_override=0)
    with pytest.raises(TypeError, match=r"floating-point input \(float16, bfloat16, float32 or float64\), got int64"):
        F.avg_pool2d(ember.ones((1, 1, 4, 4), dtype=np.int64), 2)
    with pytest.raises(RuntimeError, match="2D \\(unbatched\\) or 3D"):
        F.adaptive_avg_pool1d(x, 2)


# ---------------------------------------------------------------- modules

@pytest.mark.parametrize("cls,args,kw,xs", [
    ("MaxPool2d", (2,), {}, (2, 3, 6, 6)),
    ("MaxPool2d", (3, 2, 1), dict(ceil_mode=True), (2, 3, 7, 7)),
    ("MaxPool1d", (3,), dict(stride=2), (2, 3, 9)),
    ("AvgPool2d", (3,), dict(stride=2, padding=1, count_include_pad=False), (2, 3, 7, 7)),
    ("AvgPool1d", (3,), dict(stride=2), (2, 3, 9)),
    ("AdaptiveAvgPool2d", ((2, None),), {}, (2, 3, 7, 5)),
    ("AdaptiveAvgPool1d", (4,), {}, (2, 3, 9)),
    ("AdaptiveMaxPool2d", (3,), {}, (2, 3, 7, 5)),
    ("AdaptiveMaxPool1d", (4,), {}, (2, 3, 9)),
])
def test_modules_match_torch(cls, args, kw, xs):
    em = getattr(nn, cls)(*args, **kw)
    tm = getattr(torch.nn, cls)(*args, **kw)
    assert repr(em) == repr(tm)
    xe, xt = _pair(xs)
    ye, yt = em(xe), tm(xt)
    np.testing.assert_allclose(np.asarray(ye), yt.detach().numpy(), rtol=1e-5, atol=1e-6)
    ye.sum().backward()
    yt.sum().backward()
    np.testing.assert_allclose(np.asarray(xe.grad), xt.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_max_pool_module_return_indices():
    m = nn.MaxPool2d(2, return_indices=True)
    out, idx = m(ember.arange(16.0).reshape(1, 1, 4, 4))
    assert idx.tolist() == [[[[5, 7], [13, 15]]]]


@pytest.mark.parametrize("simd", [1, 0])
@pytest.mark.parametrize("xs", [(64, 6, 28, 28), (4, 16, 10, 10), (2, 3, 33, 70), (1, 1, 2, 16),
                                (2, 2, 5, 40)])
def test_max_pool2d_k2_simd_paths_match_torch(simd, xs):
    """The 2x2 / stride-2 float32 pooling runs AVX-512 rows (up to 16 outputs a step, on
    rows of 8 or more outputs) where the CPU has it and SSE2 otherwise: both match
    PyTorch's values, indices (ties: the first maximum; NaN wins) and gradient."""
    from ember._kernels.cpu import pool as pk
    w = RNG.integers(-2, 3, xs).astype(np.float32)               # many ties
    w.reshape(-1)[::7] = np.nan
    w.reshape(-1)[3::11] = -np.inf
    old = pk._set_pool_simd(simd)
    try:
        _compare("max_pool2d", xs, (2,), dict(return_indices=True), values=w)
        _compare("max_pool2d", xs, (2,), {})
    finally:
        pk._set_pool_simd(old)
