"""ember.autograd.Function (custom differentiable ops) against torch.autograd.Function."""
import doctest
from functools import partial

import numpy as np
import pytest

import ember
from ember.autograd import Function, once_differentiable
import helpers

torch = pytest.importorskip("torch")

F64 = ember.float64


def E(a, requires_grad=False):
    return ember.asarray(np.array(a, dtype=np.float64), dtype=F64, requires_grad=requires_grad)


def T(a, requires_grad=False):
    return torch.tensor(np.array(a, dtype=np.float64), dtype=torch.float64,
                        requires_grad=requires_grad)


close = partial(helpers.close, rtol=1e-10, atol=1e-12)


RNG = np.random.default_rng(0)
XV = RNG.uniform(-1, 1, (3, 4))
YV = RNG.uniform(-1, 1, (3, 4))


# ---------------------------------------------------------------- Functions used below
# (each ember Function has a torch twin written the same way)

class Exp(Function):
    @staticmethod
    def forward(ctx, x):
        y = ember.exp(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * y


class TExp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = torch.exp(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * y


class MulAdd(Function):
    """(x*y, x+k*y, argmax index) with the index non-differentiable; k is a float."""

    @staticmethod
    def forward(ctx, x, y, k):
        ctx.save_for_backward(x, y)
        ctx.k = k
        idx = ember.argmax(x)
        ctx.mark_non_differentiable(idx)
        return x * y, x + k * y, idx

    @staticmethod
    def backward(ctx, g1, g2, g_idx):
        x, y = ctx.saved_tensors
        ctx.g_idx = g_idx
        return g1 * y + g2, g1 * x + ctx.k * g2, None


class TMulAdd(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, y, k):
        ctx.save_for_backward(x, y)
        ctx.k = k
        idx = torch.argmax(x)
        ctx.mark_non_differentiable(idx)
        return x * y, x + k * y, idx

    @staticmethod
    def backward(ctx, g1, g2, g_idx):
        x, y = ctx.saved_tensors
        return g1 * y + g2, g1 * x + ctx.k * g2, None


class Cube(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 3 * x ** 2


class TCube(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 3 * x ** 2


class MulInplace(Function):
    """x *= 2 in place (x marked dirty)."""

    @staticmethod
    def forward(ctx, x):
        x *= 2
        ctx.mark_dirty(x)
        return x

    @staticmethod
    def backward(ctx, g):
        return g * 2


class TMulInplace(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x.mul_(2)
        ctx.mark_dirty(x)
        return x

    @staticmethod
    def backward(ctx, g):
        return g * 2


# ---------------------------------------------------------------- basics

def test_custom_exp_matches_torch():
    x, tx = E(XV, True), T(XV, True)
    y, ty = Exp.apply(x), TExp.apply(tx)
    assert y.requires_grad and y.grad_fn.name == "ExpBackward"
    close(y, ty)
    gv = RNG.uniform(-1, 1, XV.shape)
    y.backward(E(gv))
    ty.backward(T(gv))
    close(x.grad, tx.grad)


def test_two_outputs_and_non_differentiable():
    x, y = E(XV, True), E(YV, True)
    tx, ty = T(XV, True), T(YV, True)
    a, b, idx = MulAdd.apply(x, y, 0.5)
    ta, tb, tidx = TMulAdd.apply(tx, ty, 0.5)
    close(a, ta)
    close(b, tb)
    assert int(idx) == int(tidx)
    assert a.grad_fn is b.grad_fn and a.grad_fn.name == "MulAddBackward"
    assert not idx.requires_grad and not tidx.requires_grad
    (a * 3 + b * b).sum().backward()
    (ta * 3 + tb * tb).sum().backward()
    close(x.grad, tx.grad)
    close(y.grad, ty.grad)


def test_missing_output_grad_materialized_as_zeros():
    x, y = E(XV, True), E(YV, True)
    tx, ty = T(XV, True), T(YV, True)
    seen = {}

    class Probe(MulAdd):
        @staticmethod
        def backward(ctx, g1, g2, g_idx):
            seen["g2"], seen["g_idx"] = g2, g_idx
            return MulAdd.backward(ctx, g1, g2, g_idx)

    a, b, idx = Probe.apply(x, y, 2.0)
    a.sum().backward()                       # b and idx get no gradient
    ta, tb, _ = TMulAdd.apply(tx, ty, 2.0)
    ta.sum().backward()
    close(x.grad, tx.grad)
    close(y.grad, ty.grad)
    assert isinstance(seen["g2"], ember.ndarray) and seen["g2"].shape == (3, 4)
    assert not np.asarray(seen["g2"]).any()
    assert isinstance(seen["g_idx"], ember.ndarray) and seen["g_idx"].shape == ()


def test_materialize_grads_off():
    def make(base):
        class Two(base):
            @staticmethod
            def forward(ctx, x):
                ctx.set_materialize_grads(False)
                return x * 2, x * 3

            @staticmethod
            def backward(ctx, g1, g2):
                ctx_seen.append((g1 is None, g2 is None))
                out = None
                if g1 is not None:
                    out = g1 * 2
                if g2 is not None:
                    out = g2 * 3 if out is None else out + g2 * 3
                return out
        return Two

    ctx_seen = []
    x, tx = E(XV, True), T(XV, True)
    a, b = make(Function).apply(x)
    b.sum().backward()
    ta, tb = make(torch.autograd.Function).apply(tx)
    tb.sum().backward()
    assert ctx_seen == [(True, False), (True, False)]
    close(x.grad, tx.grad)


def test_needs_input_grad_matches_torch():
    got = {}

    def make(base, key):
        class Probe(base):
            @staticmethod
            def forward(ctx, a, b, c, d):
                got[key] = ctx.needs_input_grad
                return a * 1

            @staticmethod
            def backward(ctx, g):
                return g, None, None, None
        return Probe

    make(Function, "e").apply(E(XV, True), E(YV), 3, None)
    make(torch.autograd.Function, "t").apply(T(XV, True), T(YV), 3, None)
    assert got["e"] == got["t"] == (True, False, False, False)


def test_forward_runs_without_grad_and_outputs_do_not_require_grad():
    modes = []

    class Probe(Function):
        @staticmethod
        def forward(ctx, x):
            modes.append(ember.is_grad_enabled())
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    x = E(XV, True)
    y = Probe.apply(x)
    assert modes == [False] and y.requires_grad
    with ember.no_grad():
        assert not Probe.apply(x).requires_grad
    assert not Probe.apply(E(XV)).requires_grad
    assert Probe.apply(E(XV)).grad_fn is None
    assert ember.is_grad_enabled()


def test_non_array_outputs_pass_through_and_get_none():
    seen = []

    class WithInfo(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2, "info", 7

        @staticmethod
        def backward(ctx, g, g_info, g_seven):
            seen.append((g_info, g_seven))
            return g * 2

    x = E(XV, True)
    y, info, seven = WithInfo.apply(x)
    assert info == "info" and seven == 7
    y.sum().backward()
    assert seen == [(None, None)]
    close(x.grad, np.full(XV.shape, 2.0))


def test_input_returned_unchanged_is_a_new_array():
    class Ident(Function):
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, g):
            return g * 5

    x = E(XV, True)
    h = x * 1
    y = Ident.apply(h)
    assert y is not h and h.grad_fn.name != "IdentBackward" and y.grad_fn.name == "IdentBackward"
    y.sum().backward()
    close(x.grad, np.full(XV.shape, 5.0))


def test_backward_may_return_broadcastable_gradients():
    class AddBias(Function):
        @staticmethod
        def forward(ctx, x, b):
            return x + b

        @staticmethod
        def backward(ctx, g):
            return g, g                      # b's gradient is reduced by the engine

    x, b = E(XV, True), E(YV[0], True)
    AddBias.apply(x, b).sum().backward()
    close(b.grad, np.full(4, 3.0))


def test_keyword_arguments_and_setup_context():
    class Scale(Function):
        @staticmethod
        def forward(ctx, x, scale=2.0):
            ctx.scale = scale
            return x * scale

        @staticmethod
        def backward(ctx, g):
            return g * ctx.scale, None

    x = E(XV, True)
    Scale.apply(x, scale=4.0).sum().backward()
    close(x.grad, np.full(XV.shape, 4.0))
    x.grad = None
    Scale.apply(x=x).sum().backward()
    close(x.grad, np.full(XV.shape, 2.0))

    class Sq(Function):
        @staticmethod
        def forward(x):
            return x * x

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(inputs[0])

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g

    x = E(XV, True)
    Sq.apply(x).sum().backward()
    close(x.grad, 2 * XV)


# ---------------------------------------------------------------- in place

def test_mark_dirty_matches_torch():
    x, tx = E(XV, True), T(XV, True)
    h, th = x * 3, tx * 3
    out, tout = MulInplace.apply(h), TMulInplace.apply(th)
    assert out is h and th is tout
    assert h.grad_fn.name == "MulInplaceBackward"
    close(h, th)
    (h * h).sum().backward()
    (th * th).sum().backward()
    close(x.grad, tx.grad)


def test_mark_dirty_through_a_view_matches_torch():
    x, tx = E(XV, True), T(XV, True)
    h, th = x * 1, tx * 1
    v, tv = h[1], th[1]
    MulInplace.apply(v)
    TMulInplace.apply(tv)
    close(h, th)
    gv = RNG.uniform(-1, 1, XV.shape)
    (h * E(gv)).sum().backward()
    (th * T(gv)).sum().backward()
    close(x.grad, tx.grad)


def test_mark_dirty_on_leaf_requiring_grad_raises():
    with pytest.raises(RuntimeError, match="leaf"):
        MulInplace.apply(E(XV, True))
    with pytest.raises(RuntimeError, match="leaf"):
        TMulInplace.apply(T(XV, True))
    # without grad mode (or without grad) nothing is recorded and it is allowed
    x = E(XV)
    assert MulInplace.apply(x) is x
    close(x, 2 * XV)


def test_mark_dirty_must_be_returned():
    class Bad(Function):
        @staticmethod
        def forward(ctx, x):
            x *= 2
            ctx.mark_dirty(x)
            return x * 1

        @staticmethod
        def backward(ctx, g):
            return g

    with pytest.raises(RuntimeError, match="marked dirty.*not returned"):
        Bad.apply(E(XV, True) * 1)


def test_saved_array_modified_in_place_raises():
    x = E(XV, True)
    h = x * 1
    y = Cube.apply(h)
    with ember.no_grad():
        h += 1
    with pytest.raises(RuntimeError) as ei:
        y.sum().backward()
    msg = str(ei.value)
    assert "modified by an in-place operation" in msg and "Cube" in msg
    assert "(3,4)" in msg and "version 1" in msg and "expected version 0" in msg
    # torch raises too
    tx = T(XV, True)
    th = tx * 1
    ty = TCube.apply(th)
    with torch.no_grad():
        th += 1
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        ty.sum().backward()


def test_saved_output_modified_in_place_raises():
    x = E(XV, True)
    y = Exp.apply(x)
    y2 = y + 1                               # add keeps no inputs
    y += 1                                   # y's own history moves on; its saved copy is stale
    with pytest.raises(RuntimeError, match="saved array 0 of Exp"):
        y2.sum().backward()


# ---------------------------------------------------------------- graph lifetime and errors

def test_second_backward_without_retain_graph_raises():
    x = E(XV, True)
    y = Cube.apply(x)
    y.backward(E(np.ones(XV.shape)), retain_graph=True)
    y.backward(E(np.ones(XV.shape)))
    close(x.grad, 6 * XV ** 2)
    with pytest.raises(RuntimeError, match="CubeBackward.*second time"):
        y.backward(E(np.ones(XV.shape)))


def test_saved_tensors_after_free_raises():
    kept = []

    class Keep(Cube):
        @staticmethod
        def backward(ctx, g):
            kept.append(ctx)
            return Cube.backward(ctx, g)

    x = E(XV, True)
    Keep.apply(x).sum().backward()
    with pytest.raises(RuntimeError, match="KeepBackward.*freed"):
        kept[0].saved_tensors


def test_wrong_number_of_gradients():
    def make(ret):
        class Bad(Function):
            @staticmethod
            def forward(ctx, x, y):
                return x * y

            @staticmethod
            def backward(ctx, g):
                return ret(g)
        return Bad

    x, y = E(XV, True), E(YV, True)
    with pytest.raises(RuntimeError, match="BadBackward.*incorrect number.*expected 2"):
        make(lambda g: g).apply(x, y).sum().backward()
    with pytest.raises(RuntimeError, match="BadBackward.*incorrect number of gradients.*got 3"):
        make(lambda g: (g, g, g)).apply(x, y).sum().backward()
    # extra Nones are tolerated (as in PyTorch)
    make(lambda g: (g, g, None)).apply(x, y).sum().backward()
    close(x.grad, np.ones(XV.shape))


def test_gradient_for_non_array_input_raises():
    class Bad(Function):
        @staticmethod
        def forward(ctx, x, k):
            return x * k

        @staticmethod
        def backward(ctx, g):
            return g, g

    with pytest.raises(RuntimeError, match="BadBackward.*position 2.*not an ember array"):
        Bad.apply(E(XV, True), 2.0).sum().backward()


def test_save_for_backward_rejects_non_arrays():
    class Bad(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x, 3)
            return x * 1

    with pytest.raises(TypeError, match="save_for_backward"):
        Bad.apply(E(XV, True))


def test_function_is_not_called_directly():
    with pytest.raises(RuntimeError, match="apply"):
        Exp(E(XV))


# ---------------------------------------------------------------- higher order

def test_double_backward_matches_torch():
    x, tx = E(XV, True), T(XV, True)
    (g,) = ember.autograd.grad(Cube.apply(x).sum(), x, create_graph=True)
    (tg,) = torch.autograd.grad(TCube.apply(tx).sum(), tx, create_graph=True)
    close(g, tg)
    assert g.requires_grad
    (gg,) = ember.autograd.grad((g * g).sum(), x)
    (tgg,) = torch.autograd.grad((tg * tg).sum(), tx)
    close(gg, tgg)


def test_double_backward_through_saved_output_matches_torch():
    x, tx = E(XV, True), T(XV, True)
    (g,) = ember.autograd.grad((Exp.apply(x) ** 2).sum(), x, create_graph=True)
    (tg,) = torch.autograd.grad((TExp.apply(tx) ** 2).sum(), tx, create_graph=True)
    close(g, tg)
    (gg,) = ember.autograd.grad(g.sum(), x)
    (tgg,) = torch.autograd.grad(tg.sum(), tx)
    close(gg, tgg)


def test_gradcheck_and_gradgradcheck_of_custom_functions():
    x, y = E(XV[:2, :3].copy(), True), E(YV[:2, :3].copy(), True)
    assert ember.autograd.gradcheck(lambda a, b: MulAdd.apply(a, b, 0.7)[:2], (x, y))
    assert ember.autograd.gradcheck(Exp.apply, (x,))
    assert ember.autograd.gradgradcheck(Cube.apply, (x,))
    assert ember.autograd.gradgradcheck(lambda a, b: MulAdd.apply(a, b, 0.7)[1] ** 2, (x, y))


def test_once_differentiable():
    modes = []

    class OnceExp(Function):
        @staticmethod
        def forward(ctx, x):
            y = ember.exp(x)
            ctx.save_for_backward(y)
            return y

        @staticmethod
        @once_differentiable
        def backward(ctx, g):
            modes.append(ember.is_grad_enabled())
            (y,) = ctx.saved_tensors
            assert not y.requires_grad
            return g * y

    x = E(XV, True)
    OnceExp.apply(x).sum().backward()
    close(x.grad, np.exp(XV))
    (g,) = ember.autograd.grad(OnceExp.apply(x).sum(), x, create_graph=True)
    assert modes == [False, False]
    close(g, np.exp(XV))
    with pytest.raises(RuntimeError, match="once_differentiable.*OnceExpBackward"):
        ember.autograd.grad(g.sum(), x)
    with pytest.raises(RuntimeError, match="once_differentiable"):
        g.sum().backward()


def test_docstring_examples():
    from ember.autograd import function as mod
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    n = 0
    for test in doctest.DocTestFinder().find(mod):
        out = []
        runner.run(test, out=out.append)
        assert runner.failures == 0, "".join(out)
        n += len(test.examples)
    assert n > 20
    for obj in (mod.Function, mod.Function.apply, mod.FunctionCtx, mod.once_differentiable,
                mod.FunctionCtx.save_for_backward, mod.FunctionCtx.mark_dirty,
                mod.FunctionCtx.mark_non_differentiable, mod.FunctionCtx.set_materialize_grads):
        assert ">>>" in obj.__doc__
