"""F.pad, F.interpolate (+ nn.Upsample*), F.unfold/F.fold (+ nn.Unfold/Fold),
F.cosine_similarity and F.pairwise_distance (+ modules) against PyTorch: forward,
backward, gradcheck and gradgradcheck in float64."""
from functools import partial

import numpy as np
import pytest

import ember as E
from ember import nn
import ember.nn.functional as F
from ember.autograd import gradcheck, gradgradcheck
import helpers

torch = pytest.importorskip("torch")
TF = torch.nn.functional


def _pair(a, grad=True):
    t = torch.tensor(a, requires_grad=grad)
    e = E.asarray(a.copy())
    e.requires_grad = grad
    return t, e


def _close(e, t, what="", dtype=np.float32):
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == np.float32 else dict(rtol=1e-11, atol=1e-12)
    helpers.close(e, t, what, **tol)


def _compare(tfn, efn, arrays, dtype=np.float32, seed=0):
    """Forward and backward (a random projection of the output) against torch."""
    rng = np.random.default_rng(seed)
    pairs = [_pair(a.astype(dtype)) for a in arrays]
    to = tfn(*[t for t, _ in pairs])
    eo = efn(*[e for _, e in pairs])
    assert tuple(eo.shape) == tuple(to.shape)
    _close(eo, to, "forward", dtype)
    w = rng.standard_normal(tuple(to.shape)).astype(dtype)
    (to * torch.tensor(w)).sum().backward()
    (eo * E.asarray(w)).sum().backward()
    for i, (t, e) in enumerate(pairs):
        _close(e.grad, t.grad, f"grad {i}", dtype)


_leaf = partial(helpers.leaf, copy=False)


# ---------------------------------------------------------------------------------- pad

PADS = [
    ((2, 3), (1, 1, 4)),
    ((1, 2, 0, 1), (2, 3, 3, 4)),
    ((1, 1, 2, 0, 1, 1), (1, 2, 3, 4, 3)),
    ((2,) * 2, (3, 5)),
]


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
@pytest.mark.parametrize("pad,shape", PADS, ids=str)
def test_pad_matches_torch(mode, pad, shape):
    x = np.random.default_rng(1).standard_normal(shape)
    _compare(lambda t: TF.pad(t, pad, mode=mode), lambda e: F.pad(e, pad, mode=mode), [x])
    _compare(lambda t: TF.pad(t, pad, mode=mode), lambda e: F.pad(e, pad, mode=mode), [x],
             dtype=np.float64)


def test_pad_constant_value_negative_and_layouts():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((3, 4, 5))
    for pad in [(-1, 2), (1, -2, -1, 0), (0, 0, 0, 0, 1, 1), (-2, -2)]:
        _compare(lambda t: TF.pad(t, pad, value=2.5), lambda e: F.pad(e, pad, value=2.5), [x])
    # non-contiguous and negative-stride inputs; 0-size axes; integer dtype
    base = rng.standard_normal((4, 6))
    for view in (lambda a: a.T, lambda a: a[:, ::-2], lambda a: a[::-1]):
        xe = view(E.asarray(base))
        xt = torch.tensor(np.ascontiguousarray(view(base)))
        for mode in ("constant", "reflect", "replicate", "circular"):
            _close(F.pad(xe, (1, 2), mode=mode), TF.pad(xt, (1, 2), mode=mode), mode,
                   np.float64)
    xi = np.arange(6).reshape(2, 3)
    np.testing.assert_array_equal(np.asarray(F.pad(E.asarray(xi), (1, 1), value=7)),
                                  TF.pad(torch.tensor(xi), (1, 1), value=7).numpy())
    assert F.pad(E.asarray(xi), (1, 1)).dtype == E.asarray(xi).dtype
    z = np.zeros((2, 0))
    assert F.pad(E.asarray(z), (1, 2)).shape == TF.pad(torch.tensor(z), (1, 2)).shape


def test_pad_gradcheck():
    x = _leaf(np.random.default_rng(3).standard_normal((1, 2, 3, 4)))
    for mode in ("constant", "reflect", "replicate", "circular"):
        f = lambda a, mode=mode: F.pad(a, (2, 1, 1, 2), mode=mode)     # noqa: E731
        assert gradcheck(f, (x,))
        assert gradgradcheck(f, (x,))


def test_pad_errors():
    x = E.ones((1, 2, 3))
    with pytest.raises(ValueError, match="divisible by 2"):
        F.pad(x, (1, 2, 3))
    with pytest.raises(ValueError, match="too large"):
        F.pad(x, (1,) * 8)
    with pytest.raises(ValueError, match="less than"):
        F.pad(x, (3, 0), mode="reflect")
    with pytest.raises(ValueError, match="wrapping"):
        F.pad(x, (4, 0), mode="circular")
    with pytest.raises(NotImplementedError, match="mode"):
        F.pad(x, (1, 1), mode="symmetric")
    with pytest.raises(TypeError, match="ember array"):
        F.pad(np.ones(3), (1, 1))


# ---------------------------------------------------------------------------- interpolate

INTERP = [
    # (shape, kwargs)
    ((2, 3, 5), dict(size=9, mode="nearest")),
    ((2, 3, 5), dict(scale_factor=2.5, mode="nearest")),
    ((2, 3, 7), dict(size=3, mode="nearest")),
    ((2, 3, 5), dict(scale_factor=1.7, mode="nearest-exact")),
    ((1, 2, 4, 5), dict(size=(7, 3), mode="nearest-exact")),
    ((2, 3, 5), dict(size=8, mode="linear")),
    ((2, 3, 5), dict(size=8, mode="linear", align_corners=True)),
    ((2, 3, 6), dict(scale_factor=0.5, mode="linear")),
    ((2, 3, 5), dict(scale_factor=1.3, mode="linear", recompute_scale_factor=True)),
    ((1, 2, 4, 5), dict(size=(7, 3), mode="bilinear")),
    ((1, 2, 4, 5), dict(scale_factor=(1.5, 2.0), mode="bilinear", align_corners=True)),
    ((1, 2, 4, 5), dict(scale_factor=2, mode="bilinear")),
    ((1, 2, 4, 5), dict(size=(9, 6), mode="bicubic")),
    ((1, 2, 4, 5), dict(size=(9, 3), mode="bicubic", align_corners=True)),
    ((1, 2, 6, 5), dict(scale_factor=0.6, mode="bicubic")),
    ((1, 2, 3, 4, 5), dict(size=(5, 6, 4), mode="trilinear")),
    ((1, 2, 3, 4, 5), dict(scale_factor=2, mode="trilinear", align_corners=True)),
    ((1, 2, 3, 4, 5), dict(scale_factor=(2, 1, 1.5), mode="nearest")),
    ((2, 3, 7), dict(size=3, mode="area")),
    ((1, 2, 7, 9), dict(size=(3, 4), mode="area")),
    ((1, 2, 6, 8), dict(scale_factor=0.5, mode="area")),
    ((1, 2, 3, 4, 5), dict(size=(2, 3, 2), mode="area")),
    ((1, 2, 3, 5), dict(size=(3, 5), mode="bilinear")),
]


@pytest.mark.parametrize("shape,kw", INTERP, ids=[f"{s}-{k}" for s, k in INTERP])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_interpolate_matches_torch(shape, kw, dtype):
    x = np.random.default_rng(4).standard_normal(shape)
    _compare(lambda t: TF.interpolate(t, **kw), lambda e: F.interpolate(e, **kw), [x],
             dtype=dtype)


@pytest.mark.parametrize("mode,shape", [("nearest", (1, 1, 3, 4)), ("bilinear", (1, 2, 3, 4)),
                                        ("bicubic", (1, 1, 3, 3)), ("area", (1, 1, 5, 4)),
                                        ("linear", (1, 2, 4)), ("trilinear", (1, 1, 2, 2, 3)),
                                        ("nearest-exact", (1, 1, 4))])
def test_interpolate_gradcheck(mode, shape):
    x = _leaf(np.random.default_rng(5).standard_normal(shape))
    size = tuple(max(2, 2 * n - 1) for n in shape[2:]) if mode != "area" else \
        tuple(max(1, n - 2) for n in shape[2:])

    def f(a):
        return F.interpolate(a, size=size, mode=mode)
    assert gradcheck(f, (x,))
    assert gradgradcheck(f, (x,))


def test_interpolate_layouts_and_modules():
    rng = np.random.default_rng(6)
    base = rng.standard_normal((1, 2, 6, 5))
    xe, xt = E.asarray(base)[:, :, ::-2, :], torch.tensor(np.ascontiguousarray(base[:, :, ::-2]))
    _close(F.interpolate(xe, scale_factor=2, mode="bilinear"),
           TF.interpolate(xt, scale_factor=2, mode="bilinear"), "negative stride", np.float64)
    xe2 = E.asarray(base).transpose(0, 1, 3, 2)
    _close(F.interpolate(xe2, size=(4, 7), mode="bicubic"),
           TF.interpolate(torch.tensor(base).permute(0, 1, 3, 2), size=(4, 7), mode="bicubic"),
           "transposed", np.float64)
    xi = (base * 10).astype(np.int64)
    np.testing.assert_array_equal(
        np.asarray(F.interpolate(E.asarray(xi), scale_factor=2)),
        TF.interpolate(torch.tensor(xi).double(), scale_factor=2).long().numpy())
    x = base.astype(np.float32)
    for em, tmod in [(nn.Upsample(scale_factor=2, mode="nearest"),
                      torch.nn.Upsample(scale_factor=2, mode="nearest")),
                     (nn.Upsample(size=(3, 7), mode="bilinear", align_corners=False),
                      torch.nn.Upsample(size=(3, 7), mode="bilinear", align_corners=False)),
                     (nn.UpsamplingNearest2d(scale_factor=3), torch.nn.UpsamplingNearest2d(
                         scale_factor=3)),
                     (nn.UpsamplingBilinear2d(size=(8, 9)), torch.nn.UpsamplingBilinear2d(
                         size=(8, 9)))]:
        _compare(tmod, em, [x])
    assert "scale_factor=2.0" in repr(nn.Upsample(scale_factor=2))


def test_interpolate_errors():
    x = E.ones((1, 1, 4, 4))
    with pytest.raises(ValueError, match="only one of size or scale_factor"):
        F.interpolate(x, size=3, scale_factor=2)
    with pytest.raises(ValueError, match="either size or scale_factor"):
        F.interpolate(x)
    with pytest.raises(ValueError, match="align_corners"):
        F.interpolate(x, size=3, align_corners=True)
    with pytest.raises(ValueError, match="linear mode needs 3D"):
        F.interpolate(x, size=3, mode="linear")
    with pytest.raises(ValueError, match="spatial dimensions"):
        F.interpolate(x, size=(3, 3, 3))
    with pytest.raises(ValueError, match="mode must be"):
        F.interpolate(x, size=3, mode="cubic")
    with pytest.raises(ValueError, match="3-d, 4-d or 5-d"):
        F.interpolate(E.ones((4, 4)), size=3)
    with pytest.raises(NotImplementedError, match="antialias"):
        F.interpolate(x, size=3, mode="bilinear", antialias=True)


# ---------------------------------------------------------------------------- unfold / fold

FOLDS = [
    dict(kernel_size=2),
    dict(kernel_size=(2, 3), stride=(2, 1)),
    dict(kernel_size=3, padding=1),
    dict(kernel_size=(3, 2), dilation=(2, 1), padding=(1, 2), stride=2),
]


@pytest.mark.parametrize("kw", FOLDS, ids=str)
def test_unfold_fold_match_torch(kw):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 3, 7, 6))
    _compare(lambda t: TF.unfold(t, **kw), lambda e: F.unfold(e, **kw), [x])
    _compare(lambda t: TF.unfold(t, **kw), lambda e: F.unfold(e, **kw), [x[0]])   # unbatched
    cols = TF.unfold(torch.tensor(x), **kw).detach().numpy()
    _compare(lambda t: TF.fold(t, (7, 6), **kw), lambda e: F.fold(e, (7, 6), **kw), [cols],
             dtype=np.float64)
    _compare(lambda t: TF.fold(t, (7, 6), **kw), lambda e: F.fold(e, (7, 6), **kw),
             [cols[1]])
    _compare(torch.nn.Unfold(**kw), nn.Unfold(**kw), [x])
    _compare(torch.nn.Fold((7, 6), **kw), nn.Fold((7, 6), **kw), [cols])


def test_unfold_fold_gradcheck_and_layouts():
    rng = np.random.default_rng(8)
    x = _leaf(rng.standard_normal((1, 2, 4, 3)))
    kw = dict(kernel_size=2, padding=1, stride=(1, 2))
    assert gradcheck(lambda a: F.unfold(a, **kw), (x,))
    assert gradgradcheck(lambda a: F.unfold(a, **kw), (x,))
    cols = _leaf(np.asarray(F.unfold(x.detach(), **kw)))
    assert gradcheck(lambda c: F.fold(c, (4, 3), **kw), (cols,))
    assert gradgradcheck(lambda c: F.fold(c, (4, 3), **kw), (cols,))
    base = rng.standard_normal((2, 3, 5, 6))
    _close(F.unfold(E.asarray(base)[:, :, ::-1, ::2], 2),
           TF.unfold(torch.tensor(np.ascontiguousarray(base[:, :, ::-1, ::2])), 2), "strided",
           np.float64)


def test_unfold_fold_errors():
    with pytest.raises(ValueError, match="4-d"):
        F.unfold(E.ones((2, 3)), 2)
    with pytest.raises(RuntimeError, match="no sliding block"):
        F.unfold(E.ones((1, 1, 2, 2)), 3)
    with pytest.raises(ValueError, match="positive"):
        F.unfold(E.ones((1, 1, 4, 4)), 2, stride=0)
    with pytest.raises(RuntimeError, match="divisible"):
        F.fold(E.ones((1, 5, 9)), (4, 4), 2)
    with pytest.raises(RuntimeError, match="number of blocks"):
        F.fold(E.ones((1, 4, 8)), (4, 4), 2)


# ---------------------------------------------------------------- cosine / pairwise distance

@pytest.mark.parametrize("shapes,dim", [(((4, 5), (4, 5)), 1), (((3, 4, 5), (4, 5)), -1),
                                        (((2, 3), (1, 3)), 0), (((6,), (6,)), 0),
                                        (((3, 2, 4), (3, 1, 4)), 1)])
def test_cosine_similarity_matches_torch(shapes, dim):
    rng = np.random.default_rng(9)
    a, b = (rng.standard_normal(s) for s in shapes)
    for dtype in (np.float32, np.float64):
        _compare(lambda x, y: TF.cosine_similarity(x, y, dim=dim),
                 lambda x, y: F.cosine_similarity(x, y, dim=dim), [a, b], dtype=dtype)
    _compare(torch.nn.CosineSimilarity(dim=dim), nn.CosineSimilarity(dim=dim), [a, b])


def test_cosine_similarity_zero_vector_and_gradcheck():
    a = np.array([[0.0, 0.0, 0.0], [1.0, 2.0, 3.0]])
    b = np.array([[1.0, 2.0, 0.5], [0.0, 0.0, 1e-9]])
    _compare(lambda x, y: TF.cosine_similarity(x, y, eps=1e-6),
             lambda x, y: F.cosine_similarity(x, y, eps=1e-6), [a, b], dtype=np.float64)
    rng = np.random.default_rng(10)
    x, y = _leaf(rng.standard_normal((3, 4))), _leaf(rng.standard_normal((3, 4)))
    assert gradcheck(F.cosine_similarity, (x, y))
    assert gradgradcheck(F.cosine_similarity, (x, y))


@pytest.mark.parametrize("p", [2.0, 1.0, 3.0, float("inf")])
@pytest.mark.parametrize("keepdim", [False, True])
def test_pairwise_distance_matches_torch(p, keepdim):
    rng = np.random.default_rng(11)
    a, b = rng.standard_normal((4, 5)), rng.standard_normal((1, 5))
    for dtype in (np.float32, np.float64):
        _compare(lambda x, y: TF.pairwise_distance(x, y, p=p, keepdim=keepdim),
                 lambda x, y: F.pairwise_distance(x, y, p=p, keepdim=keepdim), [a, b],
                 dtype=dtype)
    _compare(torch.nn.PairwiseDistance(p=p, keepdim=keepdim),
             nn.PairwiseDistance(p=p, keepdim=keepdim), [a, b])
    _compare(lambda x, y: TF.pairwise_distance(x, y, p=p),
             lambda x, y: F.pairwise_distance(x, y, p=p), [a[0], b[0]])
    x, y = _leaf(a), _leaf(b)
    if p != float("inf"):
        assert gradcheck(lambda u, v: F.pairwise_distance(u, v, p=p), (x, y))
        assert gradgradcheck(lambda u, v: F.pairwise_distance(u, v, p=p), (x, y))


def test_distance_errors():
    with pytest.raises(ValueError, match="broadcast"):
        F.cosine_similarity(E.ones((2, 3)), E.ones((2, 4)))
    with pytest.raises(TypeError, match="ember arrays"):
        F.pairwise_distance(E.ones(3), [1.0, 2.0, 3.0])
