"""ember.autograd.functional (vjp, jvp, jacobian, hessian, vhp, hvp) against
torch.autograd.functional on the same computations, in float64."""
import doctest

import numpy as np
import pytest

import ember
from ember.autograd import functional as AF

torch = pytest.importorskip("torch")
TF = torch.autograd.functional

RNG = np.random.default_rng(1)
XV = RNG.uniform(-1, 1, (2, 2))
YV = RNG.uniform(-1, 1, 3)
VX = RNG.uniform(-1, 1, (2, 2))
VY = RNG.uniform(-1, 1, 3)


def E(a, requires_grad=False):
    return ember.asarray(np.array(a, dtype=np.float64), dtype=ember.float64,
                         requires_grad=requires_grad)


def T(a, requires_grad=False):
    return torch.tensor(np.array(a, dtype=np.float64), dtype=torch.float64,
                        requires_grad=requires_grad)


def close(got, expected):
    """Nested tuples of ember arrays vs nested tuples of torch tensors (torch's
    forward-mode jacobian gives lists; ember always gives tuples)."""
    if isinstance(expected, (tuple, list)):
        assert isinstance(got, tuple) and len(got) == len(expected), (type(got), got)
        for g, e in zip(got, expected):
            close(g, e)
        return
    assert isinstance(got, ember.ndarray), type(got)
    e = expected.detach().numpy()
    assert tuple(got.shape) == e.shape
    np.testing.assert_allclose(np.asarray(got), e, rtol=1e-10, atol=1e-12)


# The same computations written for both libraries (`m` is ember or torch).
def f_vec(m):
    return lambda x: m.sin(x) * x ** 2                       # (2,2) -> (2,2)


def f_two(m):
    return lambda x, y: (m.exp(x).sum() * y, (x ** 3).sum())   # ((2,2), (3,)) -> ((3,), ())


def f_scalar(m):
    return lambda x: (m.sin(x) * x ** 3).sum()


def f_scalar2(m):
    return lambda x, y: (x ** 2).sum() * (y ** 3).sum() + (m.sin(x) ** 2).sum()


def both(args):
    return tuple(E(a) for a in args), tuple(T(a) for a in args)


# ---------------------------------------------------------------- vjp / jvp

@pytest.mark.parametrize("create_graph", [False, True])
def test_vjp_one_input(create_graph):
    out, g = AF.vjp(f_vec(ember), E(XV), E(VX), create_graph=create_graph)
    tout, tg = TF.vjp(f_vec(torch), T(XV), T(VX), create_graph=create_graph)
    close(out, tout)
    close(g, tg)
    assert g.requires_grad == tg.requires_grad


def test_vjp_two_inputs_two_outputs():
    v = (E(VY), E(0.5))
    out, g = AF.vjp(f_two(ember), (E(XV), E(YV)), v)
    tout, tg = TF.vjp(f_two(torch), (T(XV), T(YV)), (T(VY), T(0.5)))
    close(out, tout)
    close(g, tg)


def test_vjp_scalar_output_needs_no_v_and_unused_input_gives_zeros():
    out, g = AF.vjp(lambda x, y: (x * x).sum(), (E(XV), E(YV)))
    tout, tg = TF.vjp(lambda x, y: (x * x).sum(), (T(XV), T(YV)))
    close(out, tout)
    close(g, tg)
    assert not np.asarray(g[1]).any()


def test_vjp_create_graph_is_differentiable():
    x, tx = E(XV, True), T(XV, True)
    _, g = AF.vjp(f_vec(ember), x, E(VX), create_graph=True)
    _, tg = TF.vjp(f_vec(torch), tx, T(VX), create_graph=True)
    (g * g).sum().backward()
    (tg * tg).sum().backward()
    close(x.grad, tx.grad)


@pytest.mark.parametrize("create_graph", [False, True])
def test_jvp(create_graph):
    out, t = AF.jvp(f_vec(ember), E(XV), E(VX), create_graph=create_graph)
    tout, tt = TF.jvp(f_vec(torch), T(XV), T(VX), create_graph=create_graph)
    close(out, tout)
    close(t, tt)
    (ex, ey), (tx, ty) = both((XV, YV))
    out, t = AF.jvp(f_two(ember), (ex, ey), (E(VX), E(VY)))
    tout, tt = TF.jvp(f_two(torch), (tx, ty), (T(VX), T(VY)))
    close(out, tout)
    close(t, tt)


def test_jvp_scalar_input_needs_no_v():
    out, t = AF.jvp(lambda x: x ** 3 * ember.sin(x), E(0.7))
    tout, tt = TF.jvp(lambda x: x ** 3 * torch.sin(x), T(0.7))
    close(out, tout)
    close(t, tt)


# ---------------------------------------------------------------- jacobian

@pytest.mark.parametrize("vectorize", [False, True])
def test_jacobian_one_input_one_output(vectorize):
    j = AF.jacobian(f_vec(ember), E(XV), vectorize=vectorize)
    tj = TF.jacobian(f_vec(torch), T(XV), vectorize=vectorize)
    assert j.shape == (2, 2, 2, 2)
    close(j, tj)


def test_jacobian_tuple_inputs_and_outputs():
    (ex, ey), (tx, ty) = both((XV, YV))
    close(AF.jacobian(f_two(ember), (ex, ey)), TF.jacobian(f_two(torch), (tx, ty)))
    # tuple of inputs, one output
    g = lambda m: (lambda x, y: m.sin(x).sum() * y)      # noqa: E731
    close(AF.jacobian(g(ember), (ex, ey)), TF.jacobian(g(torch), (tx, ty)))
    # one input, tuple of outputs
    h = lambda m: (lambda y: (y * 2, m.exp(y).sum()))   # noqa: E731
    close(AF.jacobian(h(ember), ey), TF.jacobian(h(torch), ty))


def test_jacobian_unused_input_and_zero_dim():
    (ex, ey), (tx, ty) = both((XV, YV))
    close(AF.jacobian(lambda x, y: x * 2, (ex, ey)), TF.jacobian(lambda x, y: x * 2, (tx, ty)))
    close(AF.jacobian(lambda s: s ** 3, E(1.5)), TF.jacobian(lambda s: s ** 3, T(1.5)))


def test_jacobian_create_graph_is_differentiable():
    x, tx = E(XV, True), T(XV, True)
    j = AF.jacobian(f_vec(ember), x, create_graph=True)
    tj = TF.jacobian(f_vec(torch), tx, create_graph=True)
    assert j.requires_grad
    (j ** 2).sum().backward()
    (tj ** 2).sum().backward()
    close(x.grad, tx.grad)
    # without create_graph: no history, and the caller's array gets no gradient
    x2 = E(XV, True)
    j2 = AF.jacobian(f_vec(ember), x2)
    assert not j2.requires_grad and x2.grad is None


def test_jacobian_forward_mode():
    (ex, ey), (tx, ty) = both((XV, YV))
    got = AF.jacobian(f_two(ember), (ex, ey), vectorize=True, strategy="forward-mode")
    exp = TF.jacobian(f_two(torch), (tx, ty), vectorize=True, strategy="forward-mode")
    close(got, exp)
    close(AF.jacobian(f_vec(ember), ex, vectorize=True, strategy="forward-mode"),
          TF.jacobian(f_vec(torch), tx))
    with pytest.raises(NotImplementedError, match="vectorize=True"):
        AF.jacobian(f_vec(ember), ex, strategy="forward-mode")
    with pytest.raises(NotImplementedError, match="create_graph"):
        AF.jacobian(f_vec(ember), ex, create_graph=True, vectorize=True, strategy="forward-mode")
    with pytest.raises(ValueError, match="strategy"):
        AF.jacobian(f_vec(ember), ex, strategy="sideways")


# ---------------------------------------------------------------- hessian / vhp / hvp

def test_hessian_one_and_two_inputs():
    h = AF.hessian(f_scalar(ember), E(XV))
    assert h.shape == (2, 2, 2, 2)
    close(h, TF.hessian(f_scalar(torch), T(XV)))
    (ex, ey), (tx, ty) = both((XV, YV))
    close(AF.hessian(f_scalar2(ember), (ex, ey)), TF.hessian(f_scalar2(torch), (tx, ty)))


def test_hessian_create_graph_and_forward_over_reverse():
    x, tx = E(YV, True), T(YV, True)
    h = AF.hessian(f_scalar(ember), x, create_graph=True)
    th = TF.hessian(f_scalar(torch), tx, create_graph=True)
    close(h, th)
    h.sum().backward()
    th.sum().backward()
    close(x.grad, tx.grad)
    fwd = AF.hessian(f_scalar(ember), E(YV), vectorize=True,
                     outer_jacobian_strategy="forward-mode")
    close(fwd, TF.hessian(f_scalar(torch), T(YV)))


@pytest.mark.parametrize("name", ["vhp", "hvp"])
def test_vhp_hvp(name):
    ours, theirs = getattr(AF, name), getattr(TF, name)
    out, p = ours(f_scalar(ember), E(XV), E(VX))
    tout, tp = theirs(f_scalar(torch), T(XV), T(VX))
    close(out, tout)
    close(p, tp)
    (ex, ey), (tx, ty) = both((XV, YV))
    out, p = ours(f_scalar2(ember), (ex, ey), (E(VX), E(VY)))
    tout, tp = theirs(f_scalar2(torch), (tx, ty), (T(VX), T(VY)))
    close(out, tout)
    close(p, tp)
    # create_graph: differentiable again
    x, tx = E(XV, True), T(XV, True)
    _, p = ours(f_scalar(ember), x, E(VX), create_graph=True)
    _, tp = theirs(f_scalar(torch), tx, T(VX), create_graph=True)
    p.sum().backward()
    tp.sum().backward()
    close(x.grad, tx.grad)


# ---------------------------------------------------------------- errors

def _both_raise(exc, match, ours, theirs):
    with pytest.raises(exc, match=match):
        ours()
    with pytest.raises(exc, match=match):
        theirs()


def test_errors_match_torch():
    ex, tx = E(XV), T(XV)
    _both_raise(RuntimeError, "v can only be None",
                lambda: AF.vjp(f_vec(ember), ex), lambda: TF.vjp(f_vec(torch), tx))
    _both_raise(RuntimeError, "v can only be None",
                lambda: AF.jvp(f_vec(ember), ex), lambda: TF.jvp(f_vec(torch), tx))
    _both_raise(RuntimeError, r"v has invalid size",
                lambda: AF.vjp(f_vec(ember), ex, E(YV)), lambda: TF.vjp(f_vec(torch), tx, T(YV)))
    _both_raise(RuntimeError, "invalid length",
                lambda: AF.jvp(f_two(ember), (ex, E(YV)), (E(VX),)),
                lambda: TF.jvp(f_two(torch), (tx, T(YV)), (T(VX),)))
    _both_raise(TypeError, "must be either",
                lambda: AF.jacobian(f_vec(ember), [ex]), lambda: TF.jacobian(f_vec(torch), [tx]))
    _both_raise(RuntimeError, "single element",
                lambda: AF.hessian(f_vec(ember), ex), lambda: TF.hessian(f_vec(torch), tx))
    _both_raise(RuntimeError, "should return a single",
                lambda: AF.vhp(f_two(ember), (ex, E(YV)), (E(VX), E(VY))),
                lambda: TF.vhp(f_two(torch), (tx, T(YV)), (T(VX), T(VY))))


def test_strict_mode_errors_match_torch():
    (ex, ey), (tx, ty) = both((XV, YV))
    _both_raise(RuntimeError, "independent of input 1",
                lambda: AF.jacobian(lambda x, y: x * 2, (ex, ey), strict=True),
                lambda: TF.jacobian(lambda x, y: x * 2, (tx, ty), strict=True))
    _both_raise(RuntimeError, "independent of input 1",
                lambda: AF.vjp(lambda x, y: (x * x).sum(), (ex, ey), strict=True),
                lambda: TF.vjp(lambda x, y: (x * x).sum(), (tx, ty), strict=True))
    _both_raise(RuntimeError, "does not require gradients",
                lambda: AF.vjp(lambda x: E(YV), ex, E(VY), strict=True),
                lambda: TF.vjp(lambda x: T(YV), tx, T(VY), strict=True))
    _both_raise(RuntimeError, "jacobian of the user-provided function with respect to input 0",
                lambda: AF.hessian(lambda x: (x * 2).sum(), ex, strict=True),
                lambda: TF.hessian(lambda x: (x * 2).sum(), tx, strict=True))
    # not strict: zeros
    close(AF.hessian(lambda x: (x * 2).sum(), ex), TF.hessian(lambda x: (x * 2).sum(), tx))
    close(AF.vjp(lambda x: E(YV), ex, E(VY))[1], TF.vjp(lambda x: T(YV), tx, T(VY))[1])


def test_inputs_are_left_alone():
    x = E(XV)
    out, g = AF.vjp(f_vec(ember), x, E(VX))
    assert not x.requires_grad and x.grad is None
    assert not out.requires_grad and not g.requires_grad
    y = E(XV, True)
    AF.hessian(f_scalar(ember), y)
    assert y.grad is None


def test_docstring_examples():
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    n = 0
    for test in doctest.DocTestFinder().find(AF):
        out = []
        runner.run(test, out=out.append)
        assert runner.failures == 0, "".join(out)
        n += len(test.examples)
    for name in AF.__all__:
        assert ">>>" in getattr(AF, name).__doc__, name
    assert n >= 15
