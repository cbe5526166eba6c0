"""Losses vs PyTorch: every reduction and option, gradients of input and target,
K-dimensional and probability targets, ignore_index, label smoothing, class weights;
gradcheck / gradgradcheck in float64; clear errors for bad targets."""
import warnings
from functools import partial

import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F
from ember.autograd import gradcheck, gradgradcheck
import helpers

torch = pytest.importorskip("torch")
TF = torch.nn.functional

REDUCTIONS = ["none", "mean", "sum"]


_close = partial(helpers.close, rtol=1e-5, atol=1e-6)


def _pair(a, grad=True):
    return ember.asarray(a, requires_grad=grad), torch.tensor(a, requires_grad=grad)


def _run(fe, ft, inputs, rtol=1e-5, atol=1e-6, seed=0):
    """Call both, compare outputs, backprop a random upstream gradient, compare grads."""
    pairs = [_pair(a, grad) for a, grad in inputs]
    le = fe(*[p[0] for p in pairs])
    lt = ft(*[p[1] for p in pairs])
    _close(le.detach(), lt, rtol=rtol, atol=atol)
    g = np.random.default_rng(seed).standard_normal(lt.shape).astype(np.asarray(le.detach()).dtype)
    le.backward(ember.asarray(g))
    lt.backward(torch.tensor(g))
    for (e, t), (_, grad) in zip(pairs, inputs):
        if grad:
            _close(e.grad, t.grad, rtol=rtol, atol=atol)


# ---------------------------------------------------------------- regression losses

@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("name,kw", [("mse_loss", {}), ("l1_loss", {}),
                                     ("smooth_l1_loss", {"beta": 1.0}),
                                     ("smooth_l1_loss", {"beta": 0.5}),
                                     ("smooth_l1_loss", {"beta": 0.0}),
                                     ("huber_loss", {"delta": 1.0}),
                                     ("huber_loss", {"delta": 0.3})])
def test_regression_losses(name, kw, reduction):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((4, 5)).astype(np.float32)
    b = rng.standard_normal((4, 5)).astype(np.float32)
    _run(lambda x, y: getattr(F, name)(x, y, reduction=reduction, **kw),
         lambda x, y: getattr(TF, name)(x, y, reduction=reduction, **kw),
         [(a, True), (b, True)])


def test_regression_broadcast_warns_and_legacy_flags():
    a = np.arange(6, dtype=np.float32).reshape(3, 2)
    b = np.ones(2, np.float32)
    with pytest.warns(UserWarning, match="different to the input size"):
        le = F.mse_loss(ember.asarray(a), ember.asarray(b))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lt = TF.mse_loss(torch.tensor(a), torch.tensor(b))
        _close(le, lt)
        _close(F.l1_loss(ember.asarray(a), ember.asarray(a + 1), size_average=False),
               TF.l1_loss(torch.tensor(a), torch.tensor(a + 1), size_average=False))
    with pytest.raises(ValueError, match="mse_loss: target shape \\(4,\\) cannot be broadcast"):
        F.mse_loss(ember.ones((3, 2)), ember.ones(4))
    with pytest.raises(ValueError, match="'avg' is not a valid value for reduction"):
        F.l1_loss(ember.ones(2), ember.ones(2), reduction="avg")
    with pytest.raises(ValueError, match="beta must be >= 0"):
        F.smooth_l1_loss(ember.ones(2), ember.ones(2), beta=-1.0)


# ---------------------------------------------------------------- cross-entropy, nll

def _targets(rng, shape, C, ignore=-100, n_ignored=1):
    t = rng.integers(0, C, shape)
    flat = t.reshape(-1)
    flat[:n_ignored] = ignore
    return t


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("ls", [0.0, 0.15])
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_cross_entropy_index_targets(reduction, weighted, ls, dt):
    rng = np.random.default_rng(1)
    N, C = 7, 5
    a = (rng.standard_normal((N, C)) * 3).astype(dt)
    t = _targets(rng, (N,), C)
    w = (rng.random(C) + 0.5).astype(dt) if weighted else None
    tol = dict(rtol=1e-5, atol=1e-6) if dt == np.float32 else dict(rtol=1e-10, atol=1e-12)
    _run(lambda x: F.cross_entropy(x, ember.asarray(t), weight=None if w is None else
                                   ember.asarray(w), reduction=reduction, label_smoothing=ls),
         lambda x: TF.cross_entropy(x, torch.tensor(t), weight=None if w is None else
                                    torch.tensor(w), reduction=reduction, label_smoothing=ls),
         [(a, True)], **tol)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("shape", [(3, 4, 5), (2, 4, 3, 2)])
def test_cross_entropy_k_dim(reduction, shape):
    rng = np.random.default_rng(2)
    C = shape[1]
    a = rng.standard_normal(shape).astype(np.float32)
    t = _targets(rng, shape[:1] + shape[2:], C, ignore=1, n_ignored=2)
    w = (rng.random(C) + 0.5).astype(np.float32)
    for ls in (0.0, 0.1):
        _run(lambda x: F.cross_entropy(x, ember.asarray(t), ember.asarray(w), ignore_index=1,
                                       reduction=reduction, label_smoothing=ls),
             lambda x: TF.cross_entropy(x, torch.tensor(t), torch.tensor(w), ignore_index=1,
                                        reduction=reduction, label_smoothing=ls),
             [(a, True)])


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("shape", [(6, 4), (5,), (2, 4, 3)])
def test_cross_entropy_probability_targets(reduction, shape):
    rng = np.random.default_rng(3)
    a = rng.standard_normal(shape).astype(np.float32)
    cdim = 0 if len(shape) == 1 else 1
    p = rng.random(shape).astype(np.float32)
    p /= p.sum(axis=cdim, keepdims=True)
    w = (rng.random(shape[cdim]) + 0.5).astype(np.float32)
    for weight, ls in ((None, 0.0), (w, 0.2)):
        _run(lambda x, y: F.cross_entropy(x, y, None if weight is None else ember.asarray(weight),
                                          reduction=reduction, label_smoothing=ls),
             lambda x, y: TF.cross_entropy(x, y, None if weight is None else
                                           torch.tensor(weight), reduction=reduction,
                                           label_smoothing=ls),
             [(a, True), (p, True)])


def test_cross_entropy_unbatched_empty_ignored_and_layouts():
    rng = np.random.default_rng(4)
    a = rng.standard_normal(5).astype(np.float32)
    for red in REDUCTIONS:
        _run(lambda x: F.cross_entropy(x, ember.asarray(3), reduction=red),
             lambda x: TF.cross_entropy(x, torch.tensor(3), reduction=red), [(a, True)])
    # every target ignored: mean is nan (0 / 0), sum is 0, gradients are 0
    b = rng.standard_normal((3, 4)).astype(np.float32)
    t = np.full(3, -100)
    for red in REDUCTIONS:
        _run(lambda x: F.cross_entropy(x, ember.asarray(t), reduction=red),
             lambda x: TF.cross_entropy(x, torch.tensor(t), reduction=red), [(b, True)])
    # empty batch
    for red in REDUCTIONS:
        le = F.cross_entropy(ember.zeros((0, 4)), ember.zeros(0, dtype=ember.int64), reduction=red)
        lt = TF.cross_entropy(torch.zeros((0, 4)), torch.zeros(0, dtype=torch.long), reduction=red)
        _close(le, lt)
    # int32 / uint8 targets, transposed (non-contiguous) logits, batch of one
    c = rng.standard_normal((4, 6)).astype(np.float32)
    t = np.array([0, 3, 1, 2, 2, 0])
    x, xt = _pair(c)
    le = F.cross_entropy(x.T, ember.asarray(t.astype(np.int32)))
    lt = TF.cross_entropy(xt.T, torch.tensor(t))
    _close(le.detach(), lt)
    le.backward()
    lt.backward()
    _close(x.grad, xt.grad)
    _close(F.cross_entropy(ember.asarray(c[:1]), ember.asarray(np.array([2], np.uint8))),
           TF.cross_entropy(torch.tensor(c[:1]), torch.tensor([2])))


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("shape", [(6, 4), (2, 4, 3)])
def test_nll_loss(reduction, shape):
    rng = np.random.default_rng(5)
    C = shape[1]
    a = np.log(rng.random(shape) + 0.1).astype(np.float32)
    t = _targets(rng, shape[:1] + shape[2:], C, ignore=2, n_ignored=1)
    w = (rng.random(C) + 0.5).astype(np.float32)
    for weight in (None, w):
        _run(lambda x: F.nll_loss(x, ember.asarray(t), None if weight is None else
                                  ember.asarray(weight), ignore_index=2, reduction=reduction),
             lambda x: TF.nll_loss(x, torch.tensor(t), None if weight is None else
                                   torch.tensor(weight), ignore_index=2, reduction=reduction),
             [(a, True)])


def test_cross_entropy_and_nll_errors():
    x = ember.ones((3, 4))
    with pytest.raises(IndexError, match=r"cross_entropy: target 4 \(at position 1\) is out of "
                                         r"bounds for 4 classes"):
        F.cross_entropy(x, ember.asarray([0, 4, 1]))
    with pytest.raises(IndexError, match="nll_loss: target -3"):
        F.nll_loss(x, ember.asarray([0, -3, 1]))
    with pytest.raises(IndexError, match="out of bounds"):
        F.cross_entropy(ember.ones((2, 4, 3)), ember.asarray([[0, 1, 9], [0, 0, 0]]))
    with pytest.raises(ValueError, match=r"expected input batch_size \(3\) to match target "
                                         r"batch_size \(2\)"):
        F.cross_entropy(x, ember.asarray([0, 1]))
    with pytest.raises(ValueError, match=r"expected target of shape \(2, 3\) for input of shape "
                                         r"\(2, 4, 3\), got \(2, 4\)"):
        F.cross_entropy(ember.ones((2, 4, 3)), ember.zeros((2, 4), dtype=ember.int64))
    with pytest.raises(TypeError, match="cross_entropy: expected class-index targets of an "
                                        "integer dtype"):
        F.cross_entropy(x, ember.asarray([True, False, True]))
    with pytest.raises(ValueError, match=r"probability targets must have the input's shape "
                                         r"\(3, 4\), got \(3,\)"):
        F.cross_entropy(x, ember.asarray([0.0, 1.0, 2.0]))
    with pytest.raises(ValueError, match="weight should be defined either for all 4 classes"):
        F.cross_entropy(x, ember.asarray([0, 1, 2]), weight=ember.ones(3))
    with pytest.raises(ValueError, match="label_smoothing must be between 0.0 and 1.0"):
        F.cross_entropy(x, ember.asarray([0, 1, 2]), label_smoothing=1.5)
    with pytest.raises(TypeError, match="cross_entropy: expected a floating-point input"):
        F.cross_entropy(ember.ones((3, 4), dtype=ember.int64), ember.asarray([0, 1, 2]))
    with pytest.raises(ValueError, match="'batchmean' is not a valid value for reduction"):
        F.cross_entropy(x, ember.asarray([0, 1, 2]), reduction="batchmean")


# ---------------------------------------------------------------- binary cross-entropy, kl

@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_binary_cross_entropy(reduction):
    rng = np.random.default_rng(6)
    p = rng.uniform(0.05, 0.95, (4, 3)).astype(np.float32)
    p[0, 0], p[0, 1] = 0.0, 1.0                    # log clamped at -100 as in PyTorch
    t = rng.random((4, 3)).astype(np.float32)
    t[0, 0], t[0, 1] = 1.0, 0.0
    w = rng.random((4, 3)).astype(np.float32)
    for weight in (None, w):
        le = F.binary_cross_entropy(ember.asarray(p), ember.asarray(t),
                                    None if weight is None else ember.asarray(weight),
                                    reduction=reduction)
        lt = TF.binary_cross_entropy(torch.tensor(p), torch.tensor(t),
                                     None if weight is None else torch.tensor(weight),
                                     reduction=reduction)
        _close(le, lt)
    q = p[1:]
    _run(lambda x, y: F.binary_cross_entropy(x, y, ember.asarray(w[1:]), reduction=reduction),
         lambda x, y: TF.binary_cross_entropy(x, y, torch.tensor(w[1:]), reduction=reduction),
         [(q, True), (t[1:], True)], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_binary_cross_entropy_with_logits(reduction):
    rng = np.random.default_rng(7)
    a = (rng.standard_normal((4, 3)) * 5).astype(np.float32)
    a[0, 0], a[0, 1] = 120.0, -120.0               # stable for large logits
    t = rng.random((4, 3)).astype(np.float32)
    w = rng.random((4, 3)).astype(np.float32)
    pw = (rng.random(3) * 3).astype(np.float32)
    for weight, pos in ((None, None), (w, None), (None, pw), (w, pw)):
        _run(lambda x, y: F.binary_cross_entropy_with_logits(
                 x, y, None if weight is None else ember.asarray(weight), reduction=reduction,
                 pos_weight=None if pos is None else ember.asarray(pos)),
             lambda x, y: TF.binary_cross_entropy_with_logits(
                 x, y, None if weight is None else torch.tensor(weight), reduction=reduction,
                 pos_weight=None if pos is None else torch.tensor(pos)),
             [(a, True), (t, True)], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("reduction", REDUCTIONS + ["batchmean"])
@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div(reduction, log_target):
    rng = np.random.default_rng(8)
    a = np.log(rng.dirichlet(np.ones(4), 3)).astype(np.float32)
    t = rng.dirichlet(np.ones(4), 3).astype(np.float32)
    if log_target:
        t = np.log(t + 0.1).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _run(lambda x, y: F.kl_div(x, y, reduction=reduction, log_target=log_target),
             lambda x, y: TF.kl_div(x, y, reduction=reduction, log_target=log_target),
             [(a, True), (t, True)])
        if not log_target:
            # zero target probabilities contribute 0 (xlogy); their target gradient is 0
            # here (PyTorch's is nan)
            t[0, 0] = 0.0
            _run(lambda x: F.kl_div(x, ember.asarray(t), reduction=reduction),
                 lambda x: TF.kl_div(x, torch.tensor(t), reduction=reduction), [(a, True)])
            y = ember.asarray(t, requires_grad=True)
            F.kl_div(ember.asarray(a), y, reduction=reduction).sum().backward()
            assert y.grad[0, 0].item() == 0.0 and np.isfinite(np.asarray(y.grad)).all()


def test_binary_losses_errors():
    with pytest.raises(ValueError, match="all elements of input should be between 0 and 1"):
        F.binary_cross_entropy(ember.asarray([1.5]), ember.asarray([1.0]))
    with pytest.raises(ValueError, match=r"binary_cross_entropy: target size \(2,\) must be the "
                                         r"same as input size \(1,\)"):
        F.binary_cross_entropy(ember.asarray([0.5]), ember.asarray([1.0, 0.0]))
    with pytest.raises(ValueError, match="must be the same as input size"):
        F.binary_cross_entropy_with_logits(ember.ones((2, 2)), ember.ones(2))
    with pytest.warns(UserWarning, match="batchmean"):
        F.kl_div(ember.zeros(2), ember.ones(2) / 2)


# ---------------------------------------------------------------- finite differences

def _f64(shape, seed, low=-2.0, high=2.0):
    return ember.asarray(np.random.default_rng(seed).uniform(low, high, shape),
                         requires_grad=True)


@pytest.mark.filterwarnings("ignore:kl_div")
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_gradcheck_elementwise_losses(reduction):
    x, y = _f64((3, 2), 0), _f64((3, 2), 1)
    pw = ember.asarray([1.5, 0.5], dtype=ember.float64)
    for f in (lambda a, b: F.mse_loss(a, b, reduction=reduction),
              lambda a, b: F.l1_loss(a, b, reduction=reduction),
              lambda a, b: F.smooth_l1_loss(a, b, reduction=reduction, beta=0.7),
              lambda a, b: F.huber_loss(a, b, reduction=reduction, delta=0.6),
              lambda a, b: F.binary_cross_entropy_with_logits(
                  a, b * 0.2 + 0.5, reduction=reduction, pos_weight=pw),
              lambda a, b: F.kl_div(a, b * 0.2 + 0.5, reduction=reduction)):
        assert gradcheck(f, (x, y))
    p, q = _f64((3, 2), 2, 0.1, 0.9), _f64((3, 2), 3, 0.1, 0.9)
    w = ember.asarray(np.random.default_rng(4).random((3, 2)))
    assert gradcheck(lambda a, b: F.binary_cross_entropy(a, b, w, reduction=reduction), (p, q))
    assert gradcheck(lambda a, b: F.kl_div(a, b, reduction=reduction, log_target=True), (x, y))


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_gradcheck_cross_entropy_and_nll(reduction):
    x = _f64((4, 3), 5)
    t = ember.asarray([0, 2, -100, 1])
    w = ember.asarray([0.5, 1.0, 2.0], dtype=ember.float64)
    for ls in (0.0, 0.3):
        f = lambda a: F.cross_entropy(a, t, w, reduction=reduction, label_smoothing=ls)  # noqa
        assert gradcheck(f, (x,))
        assert gradgradcheck(f, (x,))
    g = lambda a: F.nll_loss(a, t, w, reduction=reduction)  # noqa
    assert gradcheck(g, (x,))
    assert gradgradcheck(g, (x,))
    x3 = _f64((2, 3, 2), 6)
    t3 = ember.asarray([[0, 2], [1, 1]])
    assert gradcheck(lambda a: F.cross_entropy(a, t3, reduction=reduction), (x3,))
    p = ember.asarray(np.random.default_rng(7).dirichlet(np.ones(3), 4), requires_grad=True)
    assert gradcheck(lambda a, b: F.cross_entropy(a, b, reduction=reduction), (x, p))


def test_gradgradcheck_other_losses():
    x, y = _f64((3, 2), 8), _f64((3, 2), 9)
    assert gradgradcheck(lambda a, b: F.mse_loss(a, b), (x, y))
    assert gradgradcheck(lambda a, b: F.binary_cross_entropy_with_logits(a, b * 0.1 + 0.5), (x, y))
    p = _f64((3, 2), 10, 0.2, 0.8)
    assert gradgradcheck(lambda a, b: F.binary_cross_entropy(a, b * 0.1 + 0.5), (p, y))


def test_create_graph_gradient_matches_kernel_gradient():
    rng = np.random.default_rng(11)
    a = rng.standard_normal((5, 4))
    t = ember.asarray([0, 3, -100, 1, 1])
    w = ember.asarray(rng.random(4) + 0.5)
    for red in REDUCTIONS:
        for f in (lambda x: F.cross_entropy(x, t, w, reduction=red, label_smoothing=0.2),
                  lambda x: F.nll_loss(x, t, w, reduction=red)):
            x = ember.asarray(a, requires_grad=True)
            y = f(x)
            g = ember.asarray(rng.standard_normal(y.shape))
            (k,) = ember.autograd.grad(f(x), x, g)
            (c,) = ember.autograd.grad(f(x), x, g, create_graph=True)
            np.testing.assert_allclose(np.asarray(k), np.asarray(c.detach()), rtol=1e-12,
                                       atol=1e-14)


# ---------------------------------------------------------------- modules

def test_loss_modules_match_torch():
    rng = np.random.default_rng(12)
    a = rng.standard_normal((6, 4)).astype(np.float32)
    b = rng.standard_normal((6, 4)).astype(np.float32)
    t = rng.integers(0, 4, 6)
    p = rng.uniform(0.1, 0.9, (6, 4)).astype(np.float32)
    q = rng.random((6, 4)).astype(np.float32)
    w4 = (rng.random(4) + 0.5).astype(np.float32)
    E, T = ember.asarray, torch.tensor
    cases = [
        (nn.MSELoss(), torch.nn.MSELoss(), a, b),
        (nn.L1Loss(reduction="sum"), torch.nn.L1Loss(reduction="sum"), a, b),
        (nn.SmoothL1Loss(beta=0.5), torch.nn.SmoothL1Loss(beta=0.5), a, b),
        (nn.HuberLoss(delta=0.5), torch.nn.HuberLoss(delta=0.5), a, b),
        (nn.CrossEntropyLoss(E(w4), ignore_index=1, label_smoothing=0.1),
         torch.nn.CrossEntropyLoss(T(w4), ignore_index=1, label_smoothing=0.1), a, t),
        (nn.NLLLoss(E(w4), reduction="none"), torch.nn.NLLLoss(T(w4), reduction="none"), a, t),
        (nn.BCELoss(E(q)), torch.nn.BCELoss(T(q)), p, q),
        (nn.BCEWithLogitsLoss(pos_weight=E(w4)), torch.nn.BCEWithLogitsLoss(pos_weight=T(w4)),
         a, q),
        (nn.KLDivLoss(reduction="batchmean", log_target=True),
         torch.nn.KLDivLoss(reduction="batchmean", log_target=True), a, b),
    ]
    for me, mt, u, v in cases:
        x, xt = _pair(u)
        le, lt = me(x, E(v)), mt(xt, T(v))
        _close(le.detach(), lt)
        le.sum().backward()
        lt.sum().backward()
        _close(x.grad, xt.grad)
        assert repr(me) == repr(mt)
    ce = nn.CrossEntropyLoss(weight=E(w4))
    assert "weight" in dict(ce.named_buffers()) and "weight" in ce.state_dict()
    assert not list(ce.parameters())
    bl = nn.BCEWithLogitsLoss(pos_weight=E(w4))
    assert set(bl.state_dict()) == {"pos_weight"}
    with pytest.warns(UserWarning, match="size_average and reduce"):
        assert nn.MSELoss(size_average=False).reduction == "sum"


def test_threaded_cross_entropy_matches_single_thread():
    rng = np.random.default_rng(13)
    a = rng.standard_normal((400, 100)).astype(np.float32)
    t = _targets(rng, (400,), 100, n_ignored=3)
    w = ember.asarray((rng.random(100) + 0.5).astype(np.float32))
    before = ember.get_num_threads()
    res = []
    try:
        for nt in (1, 2):
            ember.set_num_threads(nt)
            x = ember.asarray(a, requires_grad=True)
            y = F.cross_entropy(x, ember.asarray(t), w, label_smoothing=0.1, reduction="none")
            y.sum().backward()
            res.append((np.asarray(y.detach()), np.asarray(x.grad)))
    finally:
        ember.set_num_threads(before)
    for u, v in zip(*res):
        np.testing.assert_array_equal(u, v)
    _close(res[0][0], TF.cross_entropy(torch.tensor(a), torch.tensor(t),
                                       torch.tensor(np.asarray(w)), label_smoothing=0.1,
                                       reduction="none"))
