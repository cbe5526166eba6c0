"""The backward engine: accumulation, graph lifetime, hooks, grad modes, version
counters, in-place ops and views, against PyTorch where it has the same API."""
import gc
import threading
import weakref
from functools import partial

import numpy as np
import pytest

import ember
from ember import autograd
import helpers
from helpers import tleaf

torch = pytest.importorskip("torch")

leaf = partial(helpers.leaf, copy=False)
close = partial(helpers.close, rtol=1e-6, atol=1e-9)


# ---------------------------------------------------------------- basics

def test_backward_accumulates_into_leaves_and_adds_on_repeat():
    x = leaf([1.0, 2.0, 3.0])
    (x * x).sum().backward()
    close(x.grad, [2.0, 4.0, 6.0])
    (x * 3).sum().backward()
    close(x.grad, [5.0, 7.0, 9.0])
    assert x.grad.requires_grad is False and x.grad.grad_fn is None


def test_gradient_flows_through_several_paths_and_is_summed():
    v = np.array([0.5, -1.5, 2.0])
    x, tx = leaf(v), tleaf(v)
    a = ember.exp(x)
    y = (a * x + ember.sin(a) - a / (x + 3)).sum()
    ta = torch.exp(tx)
    ty = (ta * tx + torch.sin(ta) - ta / (tx + 3)).sum()
    y.backward()
    ty.backward()
    close(x.grad, tx.grad)


def test_broadcasting_is_reduced_to_each_input_shape_and_dtype():
    a = ember.asarray(np.ones((3, 1), np.float32), requires_grad=True)
    b = ember.asarray(np.arange(4, dtype=np.float64), requires_grad=True)
    (a * b).sum().backward()
    assert a.grad.shape == (3, 1) and a.grad.dtype == ember.float32
    assert b.grad.shape == (4,) and b.grad.dtype == ember.float64
    close(a.grad, np.full((3, 1), 6.0))
    close(b.grad, np.full(4, 3.0))


def test_python_scalars_and_reflected_operators():
    v = np.array([0.5, 1.5, 2.5])
    x, tx = leaf(v), tleaf(v)
    y = (2 - x) * (1 / x) + 2 ** x - x ** 2 + (-x) / 4
    ty = (2 - tx) * (1 / tx) + 2 ** tx - tx ** 2 + (-tx) / 4
    y.sum().backward()
    ty.sum().backward()
    close(x.grad, tx.grad)


def test_non_scalar_backward_needs_a_gradient():
    x = leaf([1.0, 2.0])
    y = x * 2
    with pytest.raises(RuntimeError, match="only for outputs with one element"):
        y.backward()
    y.backward(ember.asarray([1.0, 10.0], dtype=ember.float64))
    close(x.grad, [2.0, 20.0])
    with pytest.raises(RuntimeError, match="shape"):
        (x * 2).backward(ember.ones(3, dtype=ember.float64))


def test_backward_on_something_that_does_not_require_grad():
    with pytest.raises(RuntimeError, match="does not require grad"):
        ember.ones(3).sum().backward()


def test_integer_arrays_cannot_require_grad_and_comparisons_do_not():
    with pytest.raises(RuntimeError, match="floating point"):
        ember.arange(3).requires_grad_()
    x = leaf([1.0, -2.0, 3.0])
    for r in (x > 0, x == 1, ember.argmax(x), ember.isnan(x)):
        assert not r.requires_grad
    (ember.floor(x) + x).sum().backward()           # floor: derivative 0
    close(x.grad, [1.0, 1.0, 1.0])


def test_detach_shares_memory_and_cuts_the_graph():
    x = leaf([1.0, 2.0])
    y = x * 2
    d = y.detach()
    assert not d.requires_grad and d.grad_fn is None and d.is_leaf
    d[0] = 7.0
    assert y[0].item() == 7.0
    with pytest.raises(RuntimeError, match="leaf"):
        y.requires_grad_(False)


def test_a_function_without_rule_refuses_instead_of_dropping_gradients():
    x = leaf([3.0, 1.0, 2.0])
    with pytest.raises(RuntimeError, match="does not support autograd"):
        ember.unique_values(x)
    with ember.no_grad():
        ember.unique_values(x)
    ember.unique_values(x.detach())


def test_out_argument_with_autograd_is_refused():
    x = leaf([1.0, 2.0])
    with pytest.raises(RuntimeError, match="out="):
        ember.sum(x, out=ember.zeros((), dtype=ember.float64))


# ---------------------------------------------------------------- graph lifetime

def test_second_backward_through_a_freed_graph_raises_and_retain_graph_keeps_it():
    x = leaf([1.0, 2.0])
    y = (ember.exp(x) * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    tx = tleaf([1.0, 2.0])
    ty = (torch.exp(tx) * tx).sum()
    ty.backward(retain_graph=True)
    ty.backward()
    close(x.grad, tx.grad)
    with pytest.raises(RuntimeError, match="second time"):
        y.backward()


def test_dropping_the_output_frees_the_graph_at_once():
    x = leaf([1.0, 2.0])
    y = ember.tanh(x * 2) + 1
    refs = [weakref.ref(y.grad_fn), weakref.ref(y.grad_fn.next_functions[0][0])]
    del y
    assert all(r() is None for r in refs)       # no gc.collect(): refcounting alone


def test_graph_holds_no_reference_cycles():
    gc.collect()
    gc.disable()
    try:
        x = leaf(np.ones(5))
        for _ in range(50):
            y = (ember.exp(x) * x).sum()
            y.backward()
            del y
        assert gc.collect() == 0
    finally:
        gc.enable()


def test_retain_grad_and_hooks_leave_no_cycles():
    x = leaf([1.0, 2.0])
    h = ember.exp(x)
    h.retain_grad()
    h.register_hook(lambda g: g * 2)
    r = weakref.ref(h.grad_fn)
    gc.disable()
    try:
        del h
        assert r() is None
    finally:
        gc.enable()


def test_leaf_is_not_kept_alive_by_its_graph_node():
    x = leaf([1.0])
    acc = autograd.engine._accumulator(x)
    r = weakref.ref(x)
    del x
    assert r() is None and acc.variable is None


def test_a_chain_of_100000_ops_backpropagates_without_recursion():
    x = leaf([1.0], dtype=ember.float64)
    y = x
    for _ in range(100_000):
        y = y * 1.0
    y.sum().backward()
    close(x.grad, [1.0])


# ---------------------------------------------------------------- autograd.grad

def test_grad_returns_gradients_and_leaves_dot_grad_alone():
    x, w = leaf([1.0, 2.0]), leaf([3.0, 4.0])
    y = (x * w).sum()
    gx, gw = autograd.grad(y, (x, w))
    close(gx, [3.0, 4.0])
    close(gw, [1.0, 2.0])
    assert x.grad is None and w.grad is None


def test_grad_allow_unused_and_materialize():
    x, z = leaf([1.0]), leaf([2.0])
    y = (x * 2).sum()
    with pytest.raises(RuntimeError, match="not used"):
        autograd.grad(y, (x, z), retain_graph=True)
    gx, gz = autograd.grad(y, (x, z), allow_unused=True, retain_graph=True)
    assert gz is None
    gx, gz = autograd.grad(y, (x, z), materialize_grads=True)
    close(gz, [0.0])


def test_grad_of_an_intermediate_and_pruning():
    x = leaf([1.0, 2.0])
    h = x * 3
    y = (h * h).sum()
    (gh,) = autograd.grad(y, h)
    close(gh, [6.0, 12.0])


def test_higher_order_gradients_match_torch():
    v = np.array([0.3, -0.7, 1.1])
    x, tx = leaf(v), tleaf(v)
    f = lambda m, t: (m.sin(t) * t ** 3).sum()                       # noqa: E731
    (g1,) = autograd.grad(f(ember, x), x, create_graph=True)
    (tg1,) = torch.autograd.grad(f(torch, tx), tx, create_graph=True)
    close(g1, tg1)
    (g2,) = autograd.grad(g1.sum(), x, create_graph=True)
    (tg2,) = torch.autograd.grad(tg1.sum(), tx, create_graph=True)
    close(g2, tg2)
    (g3,) = autograd.grad(g2.sum(), x)
    (tg3,) = torch.autograd.grad(tg2.sum(), tx)
    close(g3, tg3)


def test_backward_with_inputs_accumulates_only_there():
    x, w = leaf([1.0, 2.0]), leaf([3.0, 4.0])
    h = x * w
    h.retain_grad()
    (h * h).sum().backward(inputs=[w])
    assert x.grad is None
    close(h.grad, [6.0, 16.0])          # retained grads are still recorded, as in PyTorch
    close(w.grad, 2 * np.array([3.0, 8.0]) * np.array([1.0, 2.0]))


def test_backward_create_graph_gives_differentiable_grads():
    x, tx = leaf([0.5, 2.0]), tleaf([0.5, 2.0])
    (x ** 3).sum().backward(create_graph=True)
    (tx ** 3).sum().backward(create_graph=True)
    assert x.grad.requires_grad
    g = x.grad
    x.grad = None
    tg = tx.grad
    tx.grad = None
    g.sum().backward()
    tg.sum().backward()
    close(x.grad, tx.grad)


# ---------------------------------------------------------------- hooks

def test_hooks_see_and_replace_gradients():
    x = leaf([1.0, 2.0])
    seen = []
    h = x * 2
    h.register_hook(lambda g: seen.append(np.asarray(g).copy()))
    handle = x.register_hook(lambda g: g * 10)
    (h * h).sum().backward()
    close(seen[0], [4.0, 8.0])
    close(x.grad, [80.0, 160.0])
    handle.remove()
    x.grad = None
    (x * 1).sum().backward()
    close(x.grad, [1.0, 1.0])


def test_retain_grad_on_non_leaf():
    x = leaf([1.0, 2.0])
    h = ember.exp(x)
    h.retain_grad()
    assert h.retains_grad
    (h * 3).sum().backward()
    close(h.grad, [3.0, 3.0])
    assert (x * 2).grad is None


def test_post_accumulate_grad_hook_runs_once_per_backward_after_accumulation():
    x = leaf([1.0, 2.0])
    calls = []
    x.register_post_accumulate_grad_hook(lambda t: calls.append(np.asarray(t.grad).copy()))
    (x * x + x).sum().backward()       # x reached by three paths: one accumulation
    assert len(calls) == 1
    close(calls[0], [3.0, 5.0])
    with pytest.raises(RuntimeError, match="leaf"):
        (x * 2).register_post_accumulate_grad_hook(lambda t: None)


# ---------------------------------------------------------------- grad modes

def test_no_grad_enable_grad_set_grad_enabled_and_decorators():
    x = leaf([1.0])
    with ember.no_grad():
        assert not (x * 2).requires_grad
        with ember.enable_grad():
            assert (x * 2).requires_grad
    ember.set_grad_enabled(False)
    try:
        assert not (x * 2).requires_grad
    finally:
        ember.set_grad_enabled(True)
    assert (x * 2).requires_grad

    @ember.no_grad()
    def f(t):
        return t * 2
    assert not f(x).requires_grad
    with ember.inference_mode():
        assert ember.is_inference_mode_enabled() and not (x * 2).requires_grad
    assert ember.is_grad_enabled()


def test_grad_mode_is_thread_local():
    x = leaf([1.0])
    result = {}

    def worker():
        result["other"] = (x * 2).requires_grad

    with ember.no_grad():
        t = threading.Thread(target=worker)
        t.start()
        t.join()
        assert not (x * 2).requires_grad
    assert result["other"] is True


# ---------------------------------------------------------------- version counters, in-place

def test_modifying_a_saved_input_in_place_is_detected():
    x = leaf([1.0, 2.0])
    a = x * 2
    y = a * a
    a += 1
    with pytest.raises(RuntimeError, match=r"modified by an in-place operation.*multiply.*"
                                           r"shape \(2,\).*version 1; expected version 0"):
        y.sum().backward()


def test_modifying_a_saved_output_in_place_is_detected():
    x = leaf([1.0, 2.0])
    y = ember.exp(x)
    y[0] = 5.0
    with pytest.raises(RuntimeError, match="output of ember.exp"):
        y.sum().backward()


def test_in_place_on_a_leaf_that_requires_grad_raises():
    x = leaf([1.0, 2.0])
    with pytest.raises(RuntimeError, match="leaf"):
        x += 1
    with pytest.raises(RuntimeError, match="leaf"):
        x[0] = 3.0
    with pytest.raises(RuntimeError, match="leaf"):
        x[0:1] *= 2
    with ember.no_grad():
        x += 1                          # fine without recording (optimizer updates)
    close(x.detach(), [2.0, 3.0])


def test_in_place_ops_on_non_leaves_match_torch():
    v = np.array([0.5, -1.0, 2.0])
    x, tx = leaf(v), tleaf(v)
    y, ty = x * 2, tx * 2
    y *= x
    ty *= tx
    y += 1
    ty += 1
    ember.tanh(y, out=y)
    ty.tanh_()
    y.sum().backward()
    ty.sum().backward()
    close(x.grad, tx.grad)


@pytest.mark.parametrize("case", ["slice", "transpose", "reshape", "chain", "setitem", "fill"])
def test_in_place_through_views_matches_torch(case):
    rng = np.random.default_rng(0)
    v = rng.standard_normal((3, 4))
    w = rng.standard_normal((3, 4))
    x, tx = leaf(v), tleaf(v)
    c, tc = leaf(w), tleaf(w)
    y, ty = x * 1.5, tx * 1.5
    if case == "slice":
        y[1:, ::2] *= c[1:, ::2]
        ty[1:, ::2] *= tc[1:, ::2]
    elif case == "transpose":
        yt, tyt = y.T, ty.T
        yt += c.T
        tyt += tc.T
    elif case == "reshape":
        r, tr = y.reshape(12), ty.reshape(12)
        r[::3] = ember.exp(r[::3])
        tr[::3] = torch.exp(tr[::3])
    elif case == "chain":
        row, trow = y[2], ty[2]
        sub, tsub = row[1:3], trow[1:3]
        sub *= 4.0
        tsub *= 4.0
        row += c[0]
        trow += tc[0]
    elif case == "setitem":
        y[0] = c[1] * 2
        ty[0] = tc[1] * 2
        y[:, 1] = 0.0
        ty[:, 1] = 0.0
    elif case == "fill":
        y[1].fill(3.0)
        ty[1].fill_(3.0)
    (y * y).sum().backward()
    (ty * ty).sum().backward()
    close(y.detach(), ty)
    close(x.grad, tx.grad)
    if c.grad is not None or tc.grad is not None:
        close(c.grad, tc.grad)


def test_a_view_taken_before_an_in_place_write_sees_the_new_history():
    x, tx = leaf([1.0, 2.0, 3.0]), tleaf([1.0, 2.0, 3.0])
    y, ty = x * 1, tx * 1
    v, tv = y[1:], ty[1:]
    y *= 2
    ty *= 2
    (v * v).sum().backward()
    (tv * tv).sum().backward()
    close(x.grad, tx.grad)


def test_setitem_of_a_tracked_value_into_a_plain_array():
    w, tw = leaf([1.0, 2.0]), tleaf([1.0, 2.0])
    z, tz = ember.zeros((2, 2), dtype=ember.float64), torch.zeros((2, 2), dtype=torch.float64)
    z[1] = w * 3
    tz[1] = tw * 3
    assert z.requires_grad
    (z * z).sum().backward()
    (tz * tz).sum().backward()
    close(w.grad, tw.grad)


# ---------------------------------------------------------------- anomaly mode

def test_detect_anomaly_names_the_op_and_where_it_was_created():
    x = leaf([0.0, 1.0])
    with autograd.detect_anomaly():
        y = ember.sqrt(x)
        z = (y * 0.0).sum()
        with pytest.raises(RuntimeError, match=r"SqrtBackward.*nan(.|\n)*test_autograd_engine"):
            z.backward()


def test_node_introspection():
    x = leaf([1.0])
    y = ember.exp(x) * 2
    assert y.grad_fn.name == "MultiplyBackward"
    ((node, nr),) = y.grad_fn.next_functions        # the tracked input only
    assert node.name == "ExpBackward" and nr == 0
    assert node.next_functions[0][0].name == "AccumulateGrad"
    assert "grad_fn=<" in repr(y)


def test_asarray_of_a_tracked_array_is_itself_and_casts_are_recorded():
    x = leaf([1.0, 2.0], dtype=ember.float32)
    assert ember.asarray(x) is x
    y = ember.asarray(x, dtype=ember.float64)
    z = ember.array(x * 2)                          # a copy, still in the graph
    (y.sum() + z.sum()).backward()
    assert x.grad.dtype == ember.float32
    close(x.grad, [3.0, 3.0])
    t = ember.tensor(x, requires_grad=True)         # an explicit new leaf
    assert t.is_leaf and t.requires_grad


def test_in_place_api_functions_and_ufunc_methods_refuse_tracked_arrays():
    y = leaf([[1.0, 2.0, 3.0]]) * 1
    with pytest.raises(RuntimeError, match="put_along_axis"):
        ember.put_along_axis(y, ember.asarray([[0]]), 5.0, axis=1)
    with pytest.raises(RuntimeError, match="add.at"):
        ember.add.at(y, [0], 1.0)
    with pytest.raises(RuntimeError, match="subtract.reduce"):
        ember.subtract.reduce(y, axis=1)
    x = leaf([1.0, 4.0, 2.0])
    ember.maximum.reduce(x).backward()                # delegates to max: differentiable
    close(x.grad, [0.0, 1.0, 0.0])
    with ember.no_grad():
        ember.put_along_axis(y, ember.asarray([[0]]), 5.0, axis=1)


def test_tracked_keyword_only_arguments_are_refused_not_ignored():
    x, lo = leaf([1.0, -2.0]), leaf([0.0, 0.0])
    with pytest.raises(RuntimeError, match="keyword-only"):
        ember.clip(x, a_min=lo)


def test_multiplying_by_a_constant_saves_nothing_so_later_writes_are_fine():
    v = np.arange(6.0).reshape(2, 3)
    x, tx = leaf(v), tleaf(v)
    y, ty = x * 1, tx * 1
    y[0] += y[1] * 2
    ty[0] += ty[1] * 2
    (y * y).sum().backward()
    (ty * ty).sum().backward()
    close(x.grad, tx.grad)


def test_a_wrongly_shaped_grad_slot_is_an_error_not_a_broadcast():
    x = leaf([1.0, 2.0, 3.0])
    x.grad = ember.zeros(1, dtype=ember.float64)
    with pytest.raises(RuntimeError, match=r"\.grad has shape \(1,\) but the array has shape \(3,\)"):
        (x * 2).sum().backward()
    x.grad = 5.0
    with pytest.raises(TypeError, match="must be an ember array"):
        (x * 2).sum().backward()
    x.grad = ember.ones(3, dtype=ember.float64)
    (x * 2).sum().backward()
    close(x.grad, [3.0, 3.0, 3.0])
