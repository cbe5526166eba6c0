"""The engine's gradient buffers: a leaf's first gradient is stored without a copy only
when nothing else can reach it, and the per-pass bookkeeping survives reentrant,
concurrent and failing backward passes.

Every case checks values against PyTorch and that ``.grad`` shares no memory with
an array that user code, a hook, another leaf or a Function still holds (an in-place
change of one must not show in the other), as PyTorch's clone-unless-unreferenced
rule gives."""
import threading

import numpy as np
import pytest

import ember
from ember import autograd
from helpers import tleaf, to_numpy

torch = pytest.importorskip("torch")

X = [0.5, -1.0, 2.0]
C = [1.5, 0.25, -2.0]


def leaf(values=X, dtype="float64"):
    return ember.asarray(np.asarray(values, dtype=dtype), requires_grad=True)


def assert_independent(a, b):
    """a and b (ember arrays) do not share memory: writing a leaves b unchanged."""
    before = to_numpy(b).copy()
    a += 1
    np.testing.assert_array_equal(to_numpy(b), before)
    a -= 1


def test_gradient_shared_by_two_leaves_is_copied_once():
    # add hands the same gradient object to both operands
    x, w, c = leaf(), leaf(C), ember.asarray(np.asarray(X) * 2)
    ((x + w) * c).sum().backward()
    tx, tw = tleaf(X), tleaf(C)
    ((tx + tw) * torch.tensor(np.asarray(X) * 2)).sum().backward()
    np.testing.assert_allclose(to_numpy(x.grad), tx.grad.numpy())
    np.testing.assert_allclose(to_numpy(w.grad), tw.grad.numpy())
    assert_independent(x.grad, w.grad)
    assert_independent(w.grad, x.grad)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_fresh_gradient_values_and_layout(dtype):
    x = leaf(dtype=dtype)
    (ember.tanh(x) * ember.asarray(np.asarray(C, dtype=dtype))).sum().backward()
    tx = torch.tensor(np.asarray(X, dtype=dtype), requires_grad=True)
    (torch.tanh(tx) * torch.tensor(np.asarray(C, dtype=dtype))).sum().backward()
    np.testing.assert_allclose(to_numpy(x.grad), tx.grad.numpy(), rtol=1e-6)
    assert x.grad.dtype == x.dtype and x.grad.shape == x.shape
    assert x.grad.flags.c_contiguous and x.grad.flags.writeable
    assert x.grad.grad_fn is None and not x.grad.requires_grad
    x.grad += 1                             # the stored gradient is the leaf's own


def test_root_gradient_held_by_the_caller_is_copied():
    x = leaf()
    g = ember.asarray(np.asarray(C))
    (x * 1.0).backward(g)                   # the multiply rule makes a new array: fine
    x.grad = None
    x.backward(g)                           # the leaf itself: its gradient is the caller's g
    np.testing.assert_array_equal(to_numpy(x.grad), C)
    assert_independent(g, x.grad)


def test_gradient_kept_by_a_hook_is_copied():
    x = leaf()
    kept = []
    x.register_hook(lambda g: kept.append(g))
    (x * ember.asarray(np.asarray(C))).sum().backward()
    np.testing.assert_array_equal(to_numpy(x.grad), C)
    assert_independent(x.grad, kept[0])


def test_gradient_returned_by_a_hook_and_held_elsewhere_is_copied():
    x = leaf()
    h = ember.asarray(np.asarray([7.0, 8.0, 9.0]))
    x.register_hook(lambda g: h)
    (x * 3.0).sum().backward()
    np.testing.assert_array_equal(to_numpy(x.grad), [7.0, 8.0, 9.0])
    assert_independent(x.grad, h)


def test_view_gradient_is_copied_to_a_contiguous_writeable_grad():
    x = ember.asarray(np.arange(6.0).reshape(2, 3), requires_grad=True)
    x.T.sum().backward()                    # a transposed broadcast gradient
    np.testing.assert_array_equal(to_numpy(x.grad), np.ones((2, 3)))
    assert x.grad.flags.c_contiguous and x.grad.flags.writeable
    x2 = ember.asarray(np.arange(6.0), requires_grad=True)
    (x2.reshape(2, 3) * ember.asarray(np.arange(6.0).reshape(2, 3))).sum().backward()
    np.testing.assert_array_equal(to_numpy(x2.grad), np.arange(6.0))
    assert x2.grad.flags.c_contiguous and x2.grad.flags.writeable


class ReturnSaved(autograd.Function):
    """Its gradient is an array the caller also holds (saved in forward)."""

    @staticmethod
    def forward(ctx, x, b):
        ctx.save_for_backward(b)
        return x * 1.0

    @staticmethod
    def backward(ctx, g):
        (b,) = ctx.saved_tensors
        assert g.shape == b.shape
        return b, None


def test_gradient_that_a_function_returns_from_its_inputs_is_copied():
    x = leaf()
    b = ember.asarray(np.asarray(C))
    ReturnSaved.apply(x, b).sum().backward()
    np.testing.assert_array_equal(to_numpy(x.grad), C)
    assert_independent(x.grad, b)


def test_accumulation_over_passes_matches_pytorch():
    x, c = leaf(), ember.asarray(np.asarray(C))
    tx, tc = tleaf(X), torch.tensor(C, dtype=torch.float64)
    y, ty = (ember.exp(x) * c).sum(), (torch.exp(tx) * tc).sum()
    for _ in range(3):
        y.backward(retain_graph=True)
        ty.backward(retain_graph=True)
    np.testing.assert_allclose(to_numpy(x.grad), tx.grad.numpy())
    with pytest.raises(RuntimeError, match="second time"):
        y.backward()
        y.backward()


def test_create_graph_keeps_the_gradient_graph():
    x, tx = leaf(), tleaf(X)
    (x * x * x).sum().backward(create_graph=True)
    (tx * tx * tx).sum().backward(create_graph=True)
    np.testing.assert_allclose(to_numpy(x.grad), tx.grad.detach().numpy())
    assert x.grad.requires_grad
    gx, = autograd.grad(x.grad.sum(), x)
    tgx, = torch.autograd.grad(tx.grad.sum(), tx)
    np.testing.assert_allclose(to_numpy(gx), tgx.numpy())


def test_reentrant_backward_in_a_hook_shares_the_leaf():
    # the inner pass runs while the outer one is in flight and reaches the same leaf
    x, tx = leaf(), tleaf(X)

    def run(v):
        inner = (v * 3.0).sum()
        mid = v * 2.0
        def hook(g):
            assert g.shape == v.shape
            inner.backward()
        mid.register_hook(hook)
        (mid * mid).sum().backward()

    run(x)
    run(tx)
    np.testing.assert_allclose(to_numpy(x.grad), tx.grad.numpy())


def test_concurrent_backward_on_one_graph():
    x = leaf()
    y = ember.tanh(ember.exp(x) * 0.5).sum()
    expected, = autograd.grad(y, x, retain_graph=True)
    results, errors = [], []

    def worker():
        try:
            for _ in range(30):
                results.append(to_numpy(autograd.grad(y, x, retain_graph=True)[0]))
        except Exception as exc:            # reported below
            errors.append(exc)
    threads = [threading.Thread(target=worker) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(results) == 90
    for r in results:
        np.testing.assert_array_equal(r, to_numpy(expected))


def test_failing_pass_leaves_the_engine_usable():
    x, c = leaf(), ember.asarray(np.asarray(C))
    y = ember.tanh(x) * c

    def failing(g):
        raise ValueError(f"hook failed on a gradient of shape {g.shape}")
    handle = y.register_hook(failing)
    with pytest.raises(ValueError, match="hook failed"):
        y.sum().backward(retain_graph=True)
    handle.remove()
    assert x.grad is None
    y.sum().backward()
    tx = tleaf(X)
    (torch.tanh(tx) * torch.tensor(C, dtype=torch.float64)).sum().backward()
    np.testing.assert_allclose(to_numpy(x.grad), tx.grad.numpy())
