"""softmax / log_softmax / softmin vs PyTorch: values and gradients over every axis,
dtypes, layouts, edge values; gradcheck and gradgradcheck in float64."""
import warnings

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember.autograd import gradcheck, gradgradcheck
import helpers

torch = pytest.importorskip("torch")
TF = torch.nn.functional

TOL = {np.float32: dict(rtol=1e-5, atol=2e-6), np.float64: dict(rtol=1e-10, atol=1e-12)}


def _pair(a):
    return ember.asarray(a, requires_grad=True), torch.tensor(a, requires_grad=True)


def _close(e, t, dt):
    helpers.close(e, t, **TOL[dt])


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("shape,dim", [((4, 10), 1), ((4, 10), 0), ((4, 10), -1), ((2, 3, 5), 1),
                                       ((2, 3, 5), 0), ((3, 37), 1), ((7,), 0), ((2, 1, 3), 1),
                                       ((64, 300), 1), ((3, 130, 4), 1)])
@pytest.mark.parametrize("log", [False, True])
def test_matches_torch(dt, shape, dim, log):
    rng = np.random.default_rng(0)
    a = (rng.standard_normal(shape) * 4).astype(dt)
    g = rng.standard_normal(shape).astype(dt)
    x, xt = _pair(a)
    y = (F.log_softmax if log else F.softmax)(x, dim=dim)
    yt = (torch.log_softmax if log else torch.softmax)(xt, dim)
    _close(y.detach(), yt, dt)
    y.backward(ember.asarray(g))
    yt.backward(torch.tensor(g))
    _close(x.grad, xt.grad, dt)


def test_axis_alias_dtype_and_softmin():
    a = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)
    x = ember.asarray(a)
    np.testing.assert_allclose(np.asarray(F.softmax(x, axis=0)), np.asarray(F.softmax(x, dim=0)))
    y = F.log_softmax(x, dim=1, dtype=ember.float64)
    assert y.dtype == np.float64
    np.testing.assert_allclose(np.asarray(y), TF.log_softmax(torch.tensor(a), 1,
                                                             dtype=torch.float64).numpy())
    np.testing.assert_allclose(np.asarray(F.softmin(x, dim=1)),
                               TF.softmin(torch.tensor(a), 1).numpy(), rtol=1e-5, atol=1e-7)
    with pytest.raises(TypeError, match="either dim= or axis="):
        F.softmax(x, dim=0, axis=1)


def test_implicit_dim_warns_like_torch():
    a = np.ones((2, 3, 4), np.float32)
    with pytest.warns(UserWarning, match="Implicit dimension"):
        y = F.softmax(ember.asarray(a))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yt = TF.softmax(torch.tensor(a))
    np.testing.assert_allclose(np.asarray(y), yt.numpy())


def test_non_contiguous_and_0d():
    a = np.random.default_rng(2).standard_normal((5, 6)).astype(np.float32)
    base = ember.asarray(a, requires_grad=True)
    xt = torch.tensor(a, requires_grad=True)
    for view, tview in ((lambda t: t.T, lambda t: t.T), (lambda t: t[:, ::2], lambda t: t[:, ::2])):
        y = F.softmax(view(base), dim=1)
        yt = torch.softmax(tview(xt), 1)
        _close(y.detach(), yt, np.float32)
        (y * y).sum().backward()
        (yt * yt).sum().backward()
        _close(base.grad, xt.grad, np.float32)
        base.grad = None
        xt.grad = None
    s = ember.asarray(3.0, requires_grad=True)
    y = F.log_softmax(s, dim=0)
    assert y.shape == () and y.item() == 0.0
    y.backward()
    assert s.grad.item() == 0.0


def test_extreme_values():
    a = np.array([[1e4, 0.0, -1e4], [-np.inf, 0.0, 1.0], [np.nan, 0.0, 1.0],
                  [-np.inf, -np.inf, -np.inf]], np.float32)
    for log, tf in ((False, torch.softmax), (True, torch.log_softmax)):
        y = np.asarray((F.log_softmax if log else F.softmax)(ember.asarray(a), dim=1))
        np.testing.assert_allclose(y, tf(torch.tensor(a), 1).numpy(), rtol=1e-6, atol=0,
                                   equal_nan=True)


def test_empty_and_float16():
    y = F.softmax(ember.zeros((0, 4)), dim=1)
    assert y.shape == (0, 4)
    y = F.softmax(ember.zeros((3, 0)), dim=1)
    assert y.shape == (3, 0)
    h = F.softmax(ember.asarray(np.array([[1.0, 2.0]], np.float16)), dim=1)
    assert h.dtype == np.float16
    np.testing.assert_allclose(np.asarray(h, np.float32), [[0.2689, 0.7311]], atol=1e-3)


def test_errors():
    with pytest.raises(TypeError, match="softmax: expected a floating-point input"):
        F.softmax(ember.asarray([1, 2]), dim=0)
    with pytest.raises(IndexError, match="log_softmax: dimension out of range"):
        F.log_softmax(ember.ones((2, 3)), dim=2)


@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("shape,dim", [((3, 4), 1), ((3, 4), 0), ((2, 3, 2), 1)])
def test_gradcheck_and_gradgradcheck(log, shape, dim):
    a = np.random.default_rng(3).standard_normal(shape)
    x = ember.asarray(a, requires_grad=True)
    f = (lambda t: F.log_softmax(t, dim=dim)) if log else (lambda t: F.softmax(t, dim=dim))
    assert gradcheck(f, (x,))
    assert gradgradcheck(f, (x,))


def test_create_graph_gradient_matches_kernel_gradient():
    a = np.random.default_rng(4).standard_normal((4, 5))
    g = ember.asarray(np.random.default_rng(5).standard_normal((4, 5)))
    for f in (F.softmax, F.log_softmax):
        x = ember.asarray(a, requires_grad=True)
        (k,) = ember.autograd.grad(f(x, dim=1), x, g)
        (c,) = ember.autograd.grad(f(x, dim=1), x, g, create_graph=True)
        np.testing.assert_allclose(np.asarray(k), np.asarray(c.detach()), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("shape,dim", [((300, 130), 1), ((40, 30, 40), 1)])
def test_threaded_kernels_match_single_thread(shape, dim):
    a = np.random.default_rng(6).standard_normal(shape).astype(np.float32)
    g = ember.asarray(np.random.default_rng(7).standard_normal(shape).astype(np.float32))
    before = ember.get_num_threads()
    res = []
    try:
        for nt in (1, 2):
            ember.set_num_threads(nt)
            out = []
            for f in (F.softmax, F.log_softmax):
                x = ember.asarray(a, requires_grad=True)
                y = f(x, dim=dim)
                y.backward(g)
                out += [np.asarray(y.detach()), np.asarray(x.grad)]
            res.append(out)
    finally:
        ember.set_num_threads(before)
    for u, v in zip(*res):
        np.testing.assert_array_equal(u, v)
    _close(res[0][0], torch.softmax(torch.tensor(a), dim), np.float32)
