"""The residual add fused into layer norm (nn.functional.normalization.add_layer_norm, used
by post-norm Transformer layers) and the fused AVX2 float32 layer-norm rows (ln_simd.h):
forward and gradients against PyTorch, float64 gradcheck / gradgradcheck, the fallbacks,
and the rows against nn_simd.h's primitives (``norm._set_ln_avx2``)."""
import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F
from ember.autograd import gradcheck, gradgradcheck
from ember.nn.functional.normalization import add_layer_norm, add_layer_norm_applies
from ember._kernels.cpu import norm as K
import helpers

torch = pytest.importorskip("torch")
TF = torch.nn.functional

TOL = {np.float32: dict(rtol=1e-4, atol=1e-5), np.float64: dict(rtol=1e-9, atol=1e-11)}


@pytest.fixture(params=[True, False], ids=["rows", "primitives"])
def ln_rows(request):
    prev = K._set_ln_avx2(request.param)
    yield request.param
    K._set_ln_avx2(prev)


def _arrays(shape, dt, affine, seed=0):
    rng = np.random.default_rng(seed)
    n = shape[-1]
    x = (rng.standard_normal(shape) * 3 + 2).astype(dt)
    r = rng.standard_normal(shape).astype(dt)
    w = rng.standard_normal(n).astype(dt) if affine != "none" else None
    b = rng.standard_normal(n).astype(dt) if affine == "both" else None
    return x, r, w, b


@pytest.mark.usefixtures("ln_rows")
@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(4, 8), (1, 7), (3, 2, 33), (64, 128), (5, 3), (2, 3, 200),
                                   (2, 5000)])
@pytest.mark.parametrize("affine", ["both", "weight", "none"])
def test_add_layer_norm_vs_torch(dt, shape, affine):
    arrays = _arrays(shape, dt, affine)
    pe = [None if a is None else ember.asarray(a, requires_grad=True) for a in arrays]
    pt = [None if a is None else torch.tensor(a, requires_grad=True) for a in arrays]
    ye = add_layer_norm(pe[0], pe[1], (shape[-1],), pe[2], pe[3], eps=1e-5)
    yt = TF.layer_norm(pt[0] + pt[1], (shape[-1],), pt[2], pt[3], eps=1e-5)
    helpers.close(ye.detach(), yt, **TOL[dt])
    g = np.random.default_rng(1).standard_normal(shape).astype(dt)
    ye.backward(ember.asarray(g))
    yt.backward(torch.tensor(g))
    for e, t in zip(pe, pt):
        if e is not None:
            helpers.close(e.grad, t.grad, **TOL[dt])


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(4, 8), (3, 2, 33), (64, 128), (1, 1), (2, 0, 8)])
def test_layer_norm_rows_match_primitives(dt, shape):
    """The AVX2 rows and nn_simd.h's primitives give the same numbers to float32 rounding."""
    x, r, w, b = _arrays(shape, dt, "both")
    g = np.random.default_rng(2).standard_normal(shape).astype(dt)
    out = {}
    prev = K._set_ln_avx2(True)
    try:
        for on in (True, False):
            K._set_ln_avx2(on)
            xe, we, be = (ember.asarray(a, requires_grad=True) for a in (x, w, b))
            y = F.layer_norm(xe, (shape[-1],), we, be)
            y.backward(ember.asarray(g))
            out[on] = [helpers.to_numpy(a) for a in (y.detach(), xe.grad, we.grad, be.grad)]
    finally:
        K._set_ln_avx2(prev)
    for a, b_ in zip(out[True], out[False]):
        np.testing.assert_allclose(a, b_, rtol=2e-5 if dt == np.float32 else 1e-12,
                                   atol=2e-5 if dt == np.float32 else 1e-12)


@pytest.mark.usefixtures("ln_rows")
def test_one_element_rows_exact():
    """A row of one element normalizes to exactly the bias; its input gradient is 0."""
    x = ember.asarray(np.arange(6, dtype=np.float32).reshape(6, 1) * 1.7 - 3, requires_grad=True)
    r = ember.asarray(np.full((6, 1), 0.25, np.float32), requires_grad=True)
    w = ember.asarray([2.0], dtype=ember.float32, requires_grad=True)
    b = ember.asarray([0.5], dtype=ember.float32, requires_grad=True)
    y = add_layer_norm(x, r, 1, w, b)
    assert y.tolist() == [[0.5]] * 6
    y.sum().backward()
    assert x.grad.tolist() == [[0.0]] * 6 and r.grad.tolist() == [[0.0]] * 6
    assert b.grad.tolist() == [6.0]


def test_add_layer_norm_gradcheck():
    x, r, w, b = (ember.asarray(a, requires_grad=True) for a in _arrays((3, 2, 9), np.float64,
                                                                         "both", seed=3))
    assert gradcheck(lambda x, r, w, b: add_layer_norm(x, r, (9,), w, b), (x, r, w, b))
    assert gradgradcheck(lambda x, r, w, b: add_layer_norm(x, r, (9,), w, b), (x, r, w, b))


def test_add_layer_norm_one_input_tracked():
    """Only r requires grad (x a constant): its gradient, and none for x."""
    x, r, w, b = _arrays((4, 16), np.float32, "both")
    re = ember.asarray(r, requires_grad=True)
    rt = torch.tensor(r, requires_grad=True)
    add_layer_norm(ember.asarray(x), re, 16, ember.asarray(w), ember.asarray(b)).sum().backward()
    TF.layer_norm(torch.tensor(x) + rt, (16,), torch.tensor(w), torch.tensor(b)).sum().backward()
    helpers.close(re.grad, rt.grad, **TOL[np.float32])


def test_add_layer_norm_layouts():
    """Non-contiguous and negative-stride operands give the contiguous results."""
    x, r, w, b = _arrays((6, 10), np.float32, "both")
    xe = ember.asarray(np.ascontiguousarray(x.T)).T          # transposed view
    re = ember.asarray(r[::-1].copy())[::-1]                  # negative stride
    y = add_layer_norm(xe, re, 10, ember.asarray(w), ember.asarray(b))
    yt = TF.layer_norm(torch.tensor(x + r), (10,), torch.tensor(w), torch.tensor(b))
    helpers.close(y, yt, **TOL[np.float32])


def test_add_layer_norm_fallbacks():
    """Broadcast operands, mixed dtypes, several normalized axes: the two ops, same values."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((3, 4, 5)).astype(np.float32)
    cases = [(x, rng.standard_normal(5).astype(np.float32), (5,)),
             (x, rng.standard_normal((3, 4, 5)), (5,)),
             (x, rng.standard_normal((3, 4, 5)).astype(np.float32), (4, 5))]
    for a, r, ns in cases:
        assert not add_layer_norm_applies(ember.asarray(a), ember.asarray(r), ns, None, None)
        y = add_layer_norm(ember.asarray(a), ember.asarray(r), ns)
        yt = TF.layer_norm(torch.tensor(a) + torch.tensor(r), ns)
        helpers.close(y, yt, rtol=1e-5, atol=1e-5)


def test_add_layer_norm_bad_shape():
    with pytest.raises(ValueError, match="layer_norm"):
        add_layer_norm(ember.ones((2, 3)), ember.ones((2, 3)), (4,))


@pytest.mark.parametrize("layer", ["encoder", "decoder"])
def test_post_norm_layers_fused_equal_unfused(layer):
    """A post-norm layer's outputs and gradients with the fused add + LayerNorm are the
    unfused ones (the same kernels but the add: float32 rounding apart)."""
    from ember.nn.modules import transformer
    ember.random.seed(0)
    if layer == "encoder":
        m = nn.TransformerEncoderLayer(16, 4, dim_feedforward=32, dropout=0.0,
                                       batch_first=True)
    else:
        m = nn.TransformerDecoderLayer(16, 4, dim_feedforward=32, dropout=0.0)
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 5, 16)).astype(np.float32)
    mem = rng.standard_normal((3, 5, 16)).astype(np.float32)
    res = {}
    try:
        for fuse in (True, False):
            transformer.fuse_add_norm = fuse
            m.zero_grad()
            xe = ember.asarray(x, requires_grad=True)
            y = m(xe) if layer == "encoder" else m(xe, ember.asarray(mem))
            (y * y).sum().backward()
            res[fuse] = [helpers.to_numpy(y.detach()), helpers.to_numpy(xe.grad)] + \
                [helpers.to_numpy(p.grad) for p in m.parameters()]
    finally:
        transformer.fuse_add_norm = True
    for a, b in zip(res[True], res[False]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
