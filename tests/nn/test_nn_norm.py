"""Normalization layers vs PyTorch: layer_norm, batch_norm (train / eval, running
statistics over several steps, momentum=None), group_norm, instance_norm, normalize and
their modules; gradients of input, weight and bias; gradcheck / gradgradcheck."""
import copy

import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F
from ember.autograd import gradcheck, gradgradcheck
import helpers

torch = pytest.importorskip("torch")
TF = torch.nn.functional

TOL = {np.float32: dict(rtol=1e-4, atol=1e-5), np.float64: dict(rtol=1e-9, atol=1e-11)}


def _close(e, t, dt=np.float32, **kw):
    helpers.close(e, t, **{**TOL[dt], **kw})


def _pair(a, grad=True):
    if a is None:
        return None, None
    return ember.asarray(a, requires_grad=grad), torch.tensor(a, requires_grad=grad)


def _check(fe, ft, arrays, dt, seed=0, **kw):
    """Run both on the same arrays (None allowed), compare outputs and all gradients."""
    pairs = [_pair(a) for a in arrays]
    ye = fe(*[p[0] for p in pairs])
    yt = ft(*[p[1] for p in pairs])
    _close(ye.detach(), yt, dt, **kw)
    g = np.random.default_rng(seed).standard_normal(yt.shape).astype(dt)
    ye.backward(ember.asarray(g))
    yt.backward(torch.tensor(g))
    for e, t in pairs:
        if e is not None:
            _close(e.grad, t.grad, dt, **kw)


# ---------------------------------------------------------------- layer norm

@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("shape,ns", [((4, 8), (8,)), ((2, 3, 5, 6), (5, 6)), ((1, 7), (7,)),
                                      ((3, 2, 33), (33,)), ((64, 128), (128,)),
                                      ((2, 3), (2, 3))])
@pytest.mark.parametrize("affine", ["both", "weight", "none"])
def test_layer_norm(dt, shape, ns, affine):
    rng = np.random.default_rng(0)
    a = (rng.standard_normal(shape) * 3 + 2).astype(dt)
    w = rng.standard_normal(ns).astype(dt) if affine != "none" else None
    b = rng.standard_normal(ns).astype(dt) if affine == "both" else None
    _check(lambda x, w, b: F.layer_norm(x, ns, w, b, eps=1e-5),
           lambda x, w, b: TF.layer_norm(x, ns, w, b, eps=1e-5), [a, w, b], dt)


def test_layer_norm_layouts_large_offset_and_errors():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((6, 8)).astype(np.float32)
    x, xt = _pair(a)
    y = F.layer_norm(x.T, (6,))
    yt = TF.layer_norm(xt.T, (6,))
    _close(y.detach(), yt)
    (y * y).sum().backward()
    (yt * yt).sum().backward()
    _close(x.grad, xt.grad)
    # mean far from zero: two-pass statistics keep float32 accurate
    big = (rng.standard_normal((4, 64)) + 1000).astype(np.float32)
    _close(F.layer_norm(ember.asarray(big), (64,)), TF.layer_norm(torch.tensor(big), (64,)),
           atol=2e-3, rtol=1e-3)
    assert F.layer_norm(ember.zeros((0, 5)), (5,)).shape == (0, 5)
    with pytest.raises(ValueError, match=r"layer_norm: given normalized_shape=\[4\], expected "
                                         r"input with shape \(\*, 4\), but got input of shape "
                                         r"\(2, 3\)"):
        F.layer_norm(ember.ones((2, 3)), (4,))
    with pytest.raises(ValueError, match=r"layer_norm: expected weight of shape \(3,\)"):
        F.layer_norm(ember.ones((2, 3)), 3, ember.ones(2))
    with pytest.raises(TypeError, match="layer_norm: expected a floating-point input"):
        F.layer_norm(ember.ones((2, 3), dtype=ember.int64), 3)


# ---------------------------------------------------------------- batch norm

@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(8, 5), (4, 3, 7), (4, 3, 5, 6), (2, 2, 2, 3, 2), (2, 4)])
@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_functional(dt, shape, affine):
    rng = np.random.default_rng(2)
    C = shape[1]
    a = (rng.standard_normal(shape) * 2 + 1).astype(dt)
    w = rng.standard_normal(C).astype(dt) if affine else None
    b = rng.standard_normal(C).astype(dt) if affine else None
    tt = torch.float32 if dt == np.float32 else torch.float64
    rm, rv = ember.zeros(C, dtype=dt), ember.ones(C, dtype=dt)
    rmt, rvt = torch.zeros(C, dtype=tt), torch.ones(C, dtype=tt)
    kw = dict(atol=5e-5) if dt == np.float32 and shape[0] * np.prod(shape[2:]) <= 2 else {}
    for step in range(2):
        _check(lambda x, w, b: F.batch_norm(x, rm, rv, w, b, training=True, momentum=0.3),
               lambda x, w, b: TF.batch_norm(x, rmt, rvt, w, b, training=True, momentum=0.3),
               [a + step, w, b], dt, seed=step, **kw)
        _close(rm, rmt, dt)
        _close(rv, rvt, dt)
    _check(lambda x, w, b: F.batch_norm(x, rm, rv, w, b, training=False),
           lambda x, w, b: TF.batch_norm(x, rmt, rvt, w, b, training=False), [a, w, b], dt)
    # no running statistics at all
    _check(lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
           lambda x, w, b: TF.batch_norm(x, None, None, w, b, training=True), [a, w, b], dt,
           **kw)


def test_empty_batches():
    for f, ft in ((lambda x: F.batch_norm(x, None, None, training=True),
                   lambda x: TF.batch_norm(x, None, None, training=True)),
                  (lambda x: F.group_norm(x, 3), lambda x: TF.group_norm(x, 3)),
                  (lambda x: F.layer_norm(x, (2,)), lambda x: TF.layer_norm(x, (2,)))):
        x = ember.zeros((0, 3, 2), requires_grad=True)
        y = f(x)
        assert y.shape == (0, 3, 2)
        y.sum().backward()
        assert x.grad.shape == (0, 3, 2)
    bn = nn.BatchNorm1d(3)
    assert bn(ember.zeros((0, 3))).shape == (0, 3)
    assert bn.running_mean.tolist() == [0.0, 0.0, 0.0] and bn.running_var.tolist() == [1.0] * 3


def test_batch_norm_errors():
    with pytest.raises(ValueError, match=r"Expected more than 1 value per channel when training, "
                                         r"got input size \(1, 3\)"):
        F.batch_norm(ember.ones((1, 3)), None, None, training=True)
    with pytest.raises(ValueError, match="running_mean and running_var are needed"):
        F.batch_norm(ember.ones((2, 3)), None, None, training=False)
    with pytest.raises(ValueError, match=r"expected running_mean of shape \(3,\)"):
        F.batch_norm(ember.ones((2, 3)), ember.zeros(4), ember.ones(3), training=True)
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        F.batch_norm(ember.ones(3), ember.zeros(3), ember.ones(3))


# ---------------------------------------------------------------- group / instance norm

@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("shape,G", [((4, 6, 5), 3), ((2, 8, 3, 3), 4), ((3, 4), 2),
                                     ((2, 6, 4), 1), ((2, 6, 4), 6), ((1, 4, 33), 2)])
@pytest.mark.parametrize("affine", [True, False])
def test_group_norm(dt, shape, G, affine):
    rng = np.random.default_rng(3)
    C = shape[1]
    a = (rng.standard_normal(shape) * 2 + 1).astype(dt)
    w = rng.standard_normal(C).astype(dt) if affine else None
    b = rng.standard_normal(C).astype(dt) if affine else None
    kw = dict(rtol=1e-4, atol=5e-5) if dt == np.float32 and shape == (3, 4) else {}
    _check(lambda x, w, b: F.group_norm(x, G, w, b), lambda x, w, b: TF.group_norm(x, G, w, b),
           [a, w, b], dt, **kw)


def test_group_norm_errors():
    with pytest.raises(ValueError, match=r"divisible by num_groups, but got input of shape "
                                         r"\(2, 6, 4\) and num_groups=4"):
        F.group_norm(ember.ones((2, 6, 4)), 4)
    with pytest.raises(ValueError, match="num_channels \\(6\\) must be divisible"):
        nn.GroupNorm(4, 6)


def test_instance_norm_and_normalize():
    rng = np.random.default_rng(4)
    a = rng.standard_normal((3, 4, 5)).astype(np.float32)
    w = rng.standard_normal(4).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    rm, rv = ember.zeros(4), ember.ones(4)
    rmt, rvt = torch.zeros(4), torch.ones(4)
    _check(lambda x, w, b: F.instance_norm(x, rm, rv, w, b),
           lambda x, w, b: TF.instance_norm(x, rmt, rvt, w, b), [a, w, b], np.float32)
    _close(rm, rmt)
    _close(rv, rvt)
    _close(F.instance_norm(ember.asarray(a), rm, rv, use_input_stats=False),
           TF.instance_norm(torch.tensor(a), rmt, rvt, use_input_stats=False))
    for p, dim in ((2.0, 1), (1.0, -1), (3.0, 0)):
        _check(lambda x: F.normalize(x, p=p, dim=dim), lambda x: TF.normalize(x, p=p, dim=dim),
               [a], np.float32)
    z = ember.zeros((2, 3), requires_grad=True)
    F.normalize(z).sum().backward()
    zt = torch.zeros((2, 3), requires_grad=True)
    TF.normalize(zt).sum().backward()
    _close(z.grad, zt.grad)


# ---------------------------------------------------------------- finite differences

def _f64(shape, seed):
    return ember.asarray(np.random.default_rng(seed).standard_normal(shape) * 1.5 + 0.5,
                         requires_grad=True)


def test_gradcheck_and_gradgradcheck_norms():
    x, w, b = _f64((3, 4), 0), _f64((4,), 1), _f64((4,), 2)
    f = lambda x, w, b: F.layer_norm(x, (4,), w, b)  # noqa: E731
    assert gradcheck(f, (x, w, b))
    assert gradgradcheck(f, (x, w, b))
    x2, w2, b2 = _f64((2, 3, 4), 3), _f64((3, 4), 4), _f64((3, 4), 5)
    assert gradcheck(lambda x, w, b: F.layer_norm(x, (3, 4), w, b), (x2, w2, b2))
    xb, wb, bb = _f64((4, 2, 3), 6), _f64((2,), 7), _f64((2,), 8)
    g = lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True)  # noqa: E731
    assert gradcheck(g, (xb, wb, bb))
    assert gradgradcheck(g, (xb, wb, bb))
    rm = ember.asarray([0.1, -0.2], dtype=ember.float64)
    rv = ember.asarray([0.5, 2.0], dtype=ember.float64)
    h = lambda x, w, b: F.batch_norm(x, rm, rv, w, b, training=False)  # noqa: E731
    assert gradcheck(h, (xb, wb, bb))
    assert gradgradcheck(h, (xb, wb, bb))
    xg, wg, bg = _f64((2, 4, 3), 9), _f64((4,), 10), _f64((4,), 11)
    k = lambda x, w, b: F.group_norm(x, 2, w, b)  # noqa: E731
    assert gradcheck(k, (xg, wg, bg))
    assert gradgradcheck(k, (xg, wg, bg))
    assert gradcheck(lambda x: F.batch_norm(x, None, None, training=True), (_f64((5, 3), 12),))


def test_create_graph_gradient_matches_kernel_gradient():
    rng = np.random.default_rng(13)
    cases = [(lambda x, w, b: F.layer_norm(x, (4,), w, b), (3, 4), 4),
             (lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True), (4, 3, 2), 3),
             (lambda x, w, b: F.group_norm(x, 3, w, b), (2, 6, 2), 6)]
    for f, shape, C in cases:
        x, w, b = _f64(shape, 1), _f64((C,), 2), _f64((C,), 3)
        g = ember.asarray(rng.standard_normal(shape))
        k = ember.autograd.grad(f(x, w, b), (x, w, b), g)
        c = ember.autograd.grad(f(x, w, b), (x, w, b), g, create_graph=True)
        for u, v in zip(k, c):
            np.testing.assert_allclose(np.asarray(u), np.asarray(v.detach()), rtol=1e-10,
                                       atol=1e-12)


# ---------------------------------------------------------------- modules

def _copy_params(me, mt):
    with torch.no_grad(), ember.no_grad():
        for name, p in mt.named_parameters():
            p.copy_(torch.tensor(np.random.default_rng(len(name)).standard_normal(p.shape)
                                 .astype(np.float32)))
            getattr(me, name)[...] = ember.asarray(p.detach().numpy())


@pytest.mark.parametrize("cls,shape", [("BatchNorm1d", (6, 4)), ("BatchNorm1d", (5, 4, 3)),
                                       ("BatchNorm2d", (4, 4, 3, 3)),
                                       ("BatchNorm3d", (2, 4, 2, 2, 3))])
@pytest.mark.parametrize("momentum", [0.1, None])
def test_batchnorm_modules_over_steps(cls, shape, momentum):
    me = getattr(nn, cls)(4, momentum=momentum)
    mt = getattr(torch.nn, cls)(4, momentum=momentum)
    _copy_params(me, mt)
    m64 = copy.deepcopy(mt).double()
    rng = np.random.default_rng(5)
    for step in range(3):
        a = (rng.standard_normal(shape) * (step + 1) + step).astype(np.float32)
        x, xt = _pair(a)
        x64 = torch.tensor(a, dtype=torch.float64, requires_grad=True)
        ye, yt, y64 = me(x), mt(xt), m64(x64)
        _close(ye.detach(), yt)
        (ye * ye).sum().backward()
        (yt * yt).sum().backward()
        (y64 * y64).sum().backward()
        # d(sum y^2)/dx is zero but for the eps term: it is all cancellation, so float32
        # results differ by summation order (PyTorch's changes with its thread count).
        # ember must be within a few times PyTorch float32's distance to the float64 gradient.
        g64 = x64.grad.numpy()
        err_ember = np.abs(np.asarray(x.grad, np.float64) - g64).max()
        err_torch = np.abs(xt.grad.numpy().astype(np.float64) - g64).max()
        assert err_ember <= 4 * err_torch + 1e-6, (err_ember, err_torch)
        _close(x.grad, xt.grad, atol=3 * max(err_ember, err_torch) + 1e-6)
        _close(me.weight.grad, mt.weight.grad)
        _close(me.bias.grad, mt.bias.grad)
        me.weight.grad = me.bias.grad = None
        mt.zero_grad()
    for name in ("running_mean", "running_var", "num_batches_tracked"):
        _close(getattr(me, name), getattr(mt, name))
    me.eval()
    mt.eval()
    a = rng.standard_normal(shape).astype(np.float32)
    x, xt = _pair(a)
    ye, yt = me(x), mt(xt)
    _close(ye.detach(), yt)
    ye.sum().backward()
    yt.sum().backward()
    _close(x.grad, xt.grad)
    _close(me.weight.grad, mt.weight.grad)
    assert repr(me) == repr(mt)
    assert list(me.state_dict()) == list(mt.state_dict())


def test_batchnorm_module_options_and_errors():
    rng = np.random.default_rng(6)
    a = rng.standard_normal((5, 3, 2)).astype(np.float32)
    for kw in (dict(affine=False), dict(track_running_stats=False), dict(bias=False)):
        me, mt = nn.BatchNorm1d(3, **kw), torch.nn.BatchNorm1d(3, **kw)
        for mode in (True, False):
            me.train(mode)
            mt.train(mode)
            _close(me(ember.asarray(a)), mt(torch.tensor(a)).detach())
        assert repr(me) == repr(mt)
        assert sorted(me.state_dict()) == sorted(mt.state_dict())
    bn = nn.BatchNorm1d(3)
    with pytest.raises(ValueError, match="Expected more than 1 value per channel when training"):
        bn(ember.ones((1, 3)))
    bn.eval()
    assert bn(ember.ones((1, 3))).shape == (1, 3)
    with pytest.raises(ValueError, match=r"BatchNorm1d: expected 2D or 3D input \(got 4D"):
        bn(ember.ones((1, 3, 2, 2)))
    with pytest.raises(ValueError, match=r"BatchNorm2d: expected 4D input \(got 3D"):
        nn.BatchNorm2d(3)(ember.ones((1, 3, 2)))
    # state dict round trip from torch (values through NumPy)
    mt = torch.nn.BatchNorm2d(3)
    mt(torch.randn(4, 3, 2, 2))
    me = nn.BatchNorm2d(3)
    me.load_state_dict({k: v.numpy() for k, v in mt.state_dict().items()})
    _close(me.running_var, mt.running_var)
    assert me.num_batches_tracked.item() == 1
    sd = {k: v.numpy() for k, v in mt.state_dict().items() if k != "num_batches_tracked"}
    me.load_state_dict(sd, strict=False)
    me.reset_running_stats()
    assert me.running_var.tolist() == [1.0, 1.0, 1.0] and me.num_batches_tracked.item() == 0


def test_layernorm_and_groupnorm_modules():
    rng = np.random.default_rng(7)
    a = rng.standard_normal((3, 4, 6)).astype(np.float32)
    for kw in ({}, dict(elementwise_affine=False), dict(bias=False), dict(eps=1e-3)):
        me, mt = nn.LayerNorm(6, **kw), torch.nn.LayerNorm(6, **kw)
        _copy_params(me, mt)
        _check(lambda x: me(x), lambda x: mt(x), [a], np.float32)
        for name, p in mt.named_parameters():
            _close(getattr(me, name).grad, p.grad)
        assert repr(me) == repr(mt)
    me, mt = nn.LayerNorm((4, 6)), torch.nn.LayerNorm((4, 6))
    _check(lambda x: me(x), lambda x: mt(x), [a], np.float32)
    assert repr(me) == repr(mt)
    for kw in ({}, dict(affine=False), dict(bias=False)):
        me, mt = nn.GroupNorm(2, 4, **kw), torch.nn.GroupNorm(2, 4, **kw)
        _copy_params(me, mt)
        _check(lambda x: me(x), lambda x: mt(x), [a], np.float32)
        for name, p in mt.named_parameters():
            _close(getattr(me, name).grad, p.grad)
        assert repr(me) == repr(mt)


def test_threaded_kernels_match_single_thread():
    rng = np.random.default_rng(14)
    cases = [(lambda x, w, b: F.layer_norm(x, (128,), w, b), (300, 128), 128),
             (lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True), (8, 16, 16, 16),
              16),
             (lambda x, w, b: F.batch_norm(x, ember.zeros(16), ember.ones(16) * 2, w, b),
              (8, 16, 16, 16), 16),
             (lambda x, w, b: F.group_norm(x, 4, w, b), (4, 8, 32, 32), 8)]
    before = ember.get_num_threads()
    try:
        for f, shape, C in cases:
            a = (rng.standard_normal(shape) + 0.5).astype(np.float32)
            wa = rng.standard_normal(C).astype(np.float32)
            g = ember.asarray(rng.standard_normal(shape).astype(np.float32))
            res = []
            for nt in (1, 2):
                ember.set_num_threads(nt)
                x, w, b = (ember.asarray(v, requires_grad=True) for v in (a, wa, wa))
                y = f(x, w, b)
                y.backward(g)
                res.append([np.asarray(y.detach()), np.asarray(x.grad), np.asarray(w.grad),
                            np.asarray(b.grad)])
            for u, v in zip(*res):
                np.testing.assert_allclose(u, v, rtol=1e-5, atol=1e-5)
    finally:
        ember.set_num_threads(before)


# ---------------------------------------------------------------- one element: bias exactly

@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_norms_over_one_element_give_the_bias_exactly(dt):
    # x - mean must be exactly 0 (not rounding noise amplified by 1/sqrt(eps)), as PyTorch
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((4, 3, 1)) * 100 + 7).astype(dt)
    w, b = rng.standard_normal(1).astype(dt), rng.standard_normal(1).astype(dt)
    y = F.layer_norm(ember.asarray(x), (1,), ember.asarray(w), ember.asarray(b))
    np.testing.assert_array_equal(np.asarray(y), np.broadcast_to(b, x.shape))
    w3, b3 = rng.standard_normal(3).astype(dt), rng.standard_normal(3).astype(dt)
    y = F.group_norm(ember.asarray(x), 3, ember.asarray(w3), ember.asarray(b3))
    np.testing.assert_array_equal(np.asarray(y), np.broadcast_to(b3[:, None], x.shape))
    # (PyTorch's own group_norm is off by rounding noise here; ember's is exact)
    # gradients: xhat = 0, so d/dx = 0 and d/dweight = 0 exactly; d/dbias = sum of g
    xe, we, be = (ember.asarray(a, requires_grad=True) for a in (x, w, b))
    g = rng.standard_normal(x.shape).astype(dt)
    gx, gw, gb = ember.autograd.grad(F.layer_norm(xe, (1,), we, be), (xe, we, be),
                                     grad_outputs=ember.asarray(g))
    assert not np.asarray(gx).any() and not np.asarray(gw).any()
    np.testing.assert_allclose(np.asarray(gb), g.sum(dtype=np.float64).reshape(1), rtol=1e-5)
    if dt == np.float64:        # and PyTorch agrees (in float32 its weight gradient is noise)
        _check(lambda a, c, d: F.layer_norm(a, (1,), c, d),
               lambda a, c, d: torch.nn.functional.layer_norm(a, (1,), c, d), [x, w, b], dt)
        _check(lambda a, c, d: F.group_norm(a, 3, c, d),
               lambda a, c, d: torch.nn.functional.group_norm(a, 3, c, d), [x, w3, b3], dt)
