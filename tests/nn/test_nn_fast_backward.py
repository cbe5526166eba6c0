"""The kernel-direct backward paths of F.linear and F.relu (taken when the backward is
not itself recorded) against PyTorch, against the op-by-op rule they replace
(bit-identical), and in float64 by finite differences.

Cases: every subset of (input, weight, bias) requiring grad, no bias, a 0-d / (1,)
bias, non-contiguous and broadcast (stride-0) output gradients, float32/float64,
a 3-d input (the general path), and create_graph (the recorded rule, double backward).
"""
import sys
from functools import partial

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember.autograd import gradcheck, gradgradcheck
import helpers

torch = pytest.importorskip("torch")
_lin = sys.modules["ember.nn.functional.linear"]
_act = sys.modules["ember.nn.functional.activation"]
TF = torch.nn.functional

close32 = partial(helpers.close, rtol=1e-5, atol=1e-6)


def _pair(a, grad):
    e = ember.asarray(np.array(a), requires_grad=grad)
    t = torch.tensor(np.array(a), requires_grad=grad)
    return e, t


def _grads(arrays):
    return [None if a.grad is None else np.asarray(a.grad) for a in arrays]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("need", [(1, 1, 1), (0, 1, 1), (1, 0, 0), (1, 1, 0), (0, 0, 1)])
@pytest.mark.parametrize("gkind", ["dense", "transposed", "sum"])
def test_linear_relu_backward_matches_torch(dtype, need, gkind):
    M, K, N = 7, 5, 6
    xe, xt = _pair(helpers.rnd(M, K, seed=1, dtype=dtype), bool(need[0]))
    we, wt = _pair(helpers.rnd(N, K, seed=2, dtype=dtype), bool(need[1]))
    be, bt = _pair(helpers.rnd(N, seed=3, dtype=dtype), bool(need[2]))
    ye, yt = F.relu(F.linear(xe, we, be)), TF.relu(TF.linear(xt, wt, bt))
    close32(ye, yt)
    if gkind == "sum":              # a broadcast (stride-0) gradient reaches both rules
        ye.sum().backward()
        yt.sum().backward()
    else:
        g = helpers.rnd(N, M, seed=4, dtype=dtype) if gkind == "transposed" \
            else helpers.rnd(M, N, seed=4, dtype=dtype)
        ge = ember.asarray(g)
        gt = torch.tensor(g)
        if gkind == "transposed":   # a non-contiguous gradient
            ge, gt = ge.T, gt.T
        ye.backward(ge)
        yt.backward(gt)
    for e, t in zip((xe, we, be), (xt, wt, bt)):
        if t.grad is None:
            assert e.grad is None
        else:
            assert e.grad.dtype == dtype and e.grad.shape == tuple(t.grad.shape)
            close32(e.grad, t.grad)


def _rule_grads(fast, fn, args, g):
    """Gradients of fn(*args) for the output gradient g, with the fast host paths on or
    (monkeypatched away) off."""
    leaves = [ember.asarray(np.array(a), requires_grad=True) for a in args]
    saved_l, saved_r = _lin._grad_on, _act._grad_on
    if not fast:                    # pretend grad mode is on inside the rules
        _lin._grad_on = _act._grad_on = lambda: True
    try:
        fn(*leaves).backward(ember.asarray(g))
    finally:
        _lin._grad_on, _act._grad_on = saved_l, saved_r
    return _grads(leaves)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fast_paths_bit_identical_to_rules(dtype):
    x, w, b = (helpers.rnd(33, 20, seed=5, dtype=dtype), helpers.rnd(17, 20, seed=6, dtype=dtype),
               helpers.rnd(17, seed=7, dtype=dtype))
    g = helpers.rnd(33, 17, seed=8, dtype=dtype)
    fn = lambda x, w, b: F.relu(F.linear(x, w, b))      # noqa: E731
    fast, slow = _rule_grads(True, fn, (x, w, b), g), _rule_grads(False, fn, (x, w, b), g)
    for a, c in zip(fast, slow):
        np.testing.assert_array_equal(a, c)


@pytest.mark.parametrize("bshape", [(), (1,)])
def test_linear_broadcast_bias(bshape):
    x = helpers.rnd(4, 3, seed=1)
    w = helpers.rnd(5, 3, seed=2)
    b = helpers.rnd(*bshape, seed=3)
    xe, xt = _pair(x, True)
    we, wt = _pair(w, True)
    be, bt = _pair(b, True)
    F.linear(xe, we, be).sum().backward()
    TF.linear(xt, wt, bt).sum().backward()
    for e, t in zip((xe, we, be), (xt, wt, bt)):
        assert e.grad.shape == tuple(t.grad.shape)
        helpers.close(e.grad, t.grad, rtol=1e-12)


def test_linear_no_bias_and_3d_input():
    x = helpers.rnd(2, 4, 3, seed=1)
    w = helpers.rnd(5, 3, seed=2)
    for xs in (x, x[0]):
        xe, xt = _pair(xs, True)
        we, wt = _pair(w, True)
        F.linear(xe, we).sum().backward()
        TF.linear(xt, wt).sum().backward()
        helpers.close(xe.grad, xt.grad, rtol=1e-12)
        helpers.close(we.grad, wt.grad, rtol=1e-12)


def test_linear_relu_gradcheck_float64():
    x = helpers.leaf(helpers.rnd(4, 3, seed=1))
    w = helpers.leaf(helpers.rnd(2, 3, seed=2))
    b = helpers.leaf(helpers.rnd(2, seed=3))
    fn = lambda x, w, b: F.relu(F.linear(x, w, b))      # noqa: E731
    assert gradcheck(fn, (x, w, b))
    assert gradgradcheck(fn, (x, w, b))     # create_graph: the recorded rules


def test_double_backward_matches_torch():
    x, w, b = helpers.rnd(4, 3, seed=1), helpers.rnd(2, 3, seed=2), helpers.rnd(2, seed=3)
    xe, xt = _pair(x, True)
    we, wt = _pair(w, True)
    be, bt = _pair(b, True)
    (gxe,) = ember.autograd.grad(F.relu(F.linear(xe, we, be)).sum(), (xe,), create_graph=True)
    (gxt,) = torch.autograd.grad(TF.relu(TF.linear(xt, wt, bt)).sum(), (xt,), create_graph=True)
    helpers.close(gxe, gxt, rtol=1e-12)
    (gxe ** 2).sum().backward()
    (gxt ** 2).sum().backward()
    helpers.close(we.grad, wt.grad, rtol=1e-12)
