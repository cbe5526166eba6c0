"""Indexing, in-place operations and views under autograd.

* ``x[key]`` on an array that requires grad records ``getitem`` (basic keys
  still return views that share memory).
* ``x[key] = v``, ``x += y``, ``ufunc(..., out=x)``, ``x.fill(v)`` overwrite
  x's memory and give x a new history: the op, applied to x's old value.
  A leaf that requires grad refuses (its gradient would lose meaning).
* A differentiable view remembers its base and how to re-derive itself from
  it (``_view_of = (base, view_fn, version)``).  Writing through a view gives
  the base a new history ("copy the new slice into the old base") and
  re-derives the view's history from it; any other view of the base whose
  history predates a write is re-derived when it is next used (its storage
  version moved on), so every read sees the latest values' history, as in
  PyTorch.
"""
import numpy as np

import ember as _ember        # the namespace (being built when this imports: used in calls)
from ember._core import array as _array
from ember._core.array import ndarray
from ember.autograd import engine
from ember.autograd.registry import defgrad, RULES



def _no_grad():
    return _array._set_grad_enabled(False)


def _restore(prev):
    _array._set_grad_enabled(prev)


class ViewFn:
    """Re-creates a view from its base: a chain of (op, args after the first, kwargs)."""
    __slots__ = ("steps",)

    def __init__(self, steps):
        self.steps = steps

    def __call__(self, t):
        for fn, rest, kwargs in self.steps:
            t = fn(t, *rest, **(kwargs or {}))
        return t


def _ag_mark_view(x, out, rule, args, kwargs, index, single):
    """`out` (output `index` of rule's op on x) shares x's memory: remember how to redo it."""
    if rule.name in ("astype",):
        return
    # the public (recording) op, so that re-deriving the view records it
    step = (_public_op(rule), tuple(args[1:]), kwargs)
    if single:
        fn_steps = [step]
    else:
        fn_steps = [step, (_pick, (index,), None)]
    if x._view_of is not None:
        base, fn, _ = x._view_of
        steps = list(fn.steps) + fn_steps
    else:
        base, steps = x, fn_steps
    out._view_of = (base, ViewFn(steps), out.storage.version)


def _public_op(rule):
    if rule.name.startswith("linalg."):
        return getattr(_ember.linalg, rule.name[len("linalg."):], rule.forward)
    return getattr(_ember, rule.name, rule.forward)


def _pick(t, i):
    return t[i]


def _ag_refresh_view(v):
    """Re-derive a view's history from its base's current one."""
    base, fn, _ = v._view_of
    prev = _array._set_grad_enabled(True)
    try:
        t = fn(base)
    finally:
        _array._set_grad_enabled(prev)
    v.grad_fn = t.grad_fn
    v._output_nr = t._output_nr
    v.requires_grad = t.requires_grad
    v._view_of = (base, fn, v.storage.version)


def _alias_with_history(x):
    """A new array object on x's memory carrying x's current history."""
    a = _array._as_strided(x, x.shape, x.strides, _array._storage_offset_bytes(x))
    if x.requires_grad:
        a.requires_grad = True
        if x.grad_fn is not None:
            a.grad_fn = x.grad_fn
            a._output_nr = x._output_nr
        else:
            # a leaf: the alias must send gradients to the leaf's own accumulator
            a.grad_fn = engine._accumulator(x)
            a._output_nr = 0
    return a


def _snapshot(x):
    """A copy of x's current values that carries x's history (x is about to be overwritten)."""
    prev = _no_grad()
    try:
        c = x.copy()
    finally:
        _restore(prev)
    if x.requires_grad:
        node, nr = engine._edge(x)
        c.requires_grad = True
        c.grad_fn = node
        c._output_nr = nr
    return c


def _shares(a, x):
    return isinstance(a, ndarray) and a.storage is x.storage


def _check_inplace_target(out, opname):
    if not out.flags.writeable:
        raise ValueError(f"{opname}: assignment destination is read-only")
    if out.requires_grad and out.grad_fn is None and _array._is_grad_enabled():
        raise RuntimeError(f"{opname}: a leaf array that requires grad (shape {out.shape}) is "
                           f"being used in an in-place operation; do it on x.detach() or under "
                           f"ember.no_grad()")
    if out._view_of is not None:
        base = out._view_of[0]
        if base.requires_grad and base.grad_fn is None:
            raise RuntimeError(f"{opname}: a view of a leaf array that requires grad (base "
                               f"shape {base.shape}) is being used in an in-place operation")


def _ag_inplace(rule, compute, args, out):
    """out[...] = op(*args), recorded as out's new history (`rule` may be None)."""
    opname = rule.name if rule is not None else getattr(compute, "__name__", "in-place op")
    _check_inplace_target(out, f"ember.{opname}")
    tracked = any(isinstance(a, ndarray) and a.requires_grad for a in args)
    if rule is None:
        if out.requires_grad or tracked:
            raise RuntimeError(f"ember.{opname}: this op is not differentiable and cannot "
                               f"write in place into an array that is part of a graph")
    if rule is not None and rule.save_args:
        args = tuple(_snapshot(a) if _shares(a, out) else a for a in args)
    new = compute(*args)
    if not isinstance(new, ndarray):
        new = _ember.asarray(new)
    if rule is not None and (tracked or out.requires_grad):
        new = engine._record(rule, tuple(args), None, new)
    _write_and_rebase(out, new)
    return out


def _write_and_rebase(out, new):
    prev = _no_grad()
    try:
        _ember._elementwise._assign(out, new)
        out._bump_version()
    finally:
        _restore(prev)
    if not new.requires_grad and not out.requires_grad:
        return
    if out._view_of is None:
        out.grad_fn = new.grad_fn
        out._output_nr = new._output_nr
        out.requires_grad = new.requires_grad
        return
    base, fn, _ = out._view_of
    base_old = _alias_with_history(base) if base.requires_grad else None
    meta = (tuple(base.shape), base.dtype)

    def copy_slices(grads, fn=fn):
        g = grads[0]
        prev = _no_grad()
        try:
            mask = _ember.ones(meta[0], dtype=meta[1])
            fn(mask)[...] = 0
        finally:
            _restore(prev)
        return [g * mask, fn(g)]

    engine.attach("CopySlices", copy_slices, [base_old, new], [base])
    _ag_refresh_view(out)


# ---------------------------------------------------------------- getitem / setitem

def _getitem(x, key):
    return x[key]


_getitem.device_generic = True          # runs unchanged on GPU arrays (ember/cuda/_dispatch.py)


def _np_key(key):
    from ember._api.indexing import _np_key as conv
    return conv(key)


def _gpu_key(key):
    return isinstance(key, ndarray) and key.is_cuda or isinstance(key, tuple) and any(
        isinstance(k, ndarray) and k.is_cuda for k in key)


def _owned_key(key):
    """The key with index arrays copied: the graph must not see later writes to them."""
    if _gpu_key(key):
        # GPU index arrays stay on the GPU, copied (on their device) and held as CuPy
        # views: the node keeps them whole (rules see ember array arguments only as shape
        # and dtype).  Not a dispatch: a zero-copy view of data the copy already placed.
        from ember.cuda._runtime import as_cupy

        def own(k):
            if isinstance(k, ndarray):
                return as_cupy(k.copy()) if k.is_cuda else _np_key(k).copy()
            return k
        return own(key) if isinstance(key, ndarray) else tuple(own(k) for k in key)
    key = _np_key(key)
    if isinstance(key, np.ndarray):
        return key.copy()
    if isinstance(key, tuple):
        return tuple(k.copy() if isinstance(k, np.ndarray) else k for k in key)
    return key


def _index_add_into(g, key, shape, dtype):
    """zeros(shape)[key] += g, with repeated indices accumulating."""
    z = _ember.zeros(shape, dtype=dtype)
    np.add.at(_array._numpy(z), _np_key(key), _array._numpy(g) if isinstance(g, ndarray) else g)
    return z


@defgrad("_getitem", save_args=False)
def _(g, res, x, key):
    return (_ember._index_add_into(g, key, x.shape, x.dtype),)


@defgrad("_index_add_into")
def _(gz, res, g, key, shape, dtype):
    return (gz[key],)


def _ag_getitem(x, key):
    # index arrays as NumPy arrays: the node keeps the key, not ember arrays
    return _ember._getitem(x, _owned_key(key))


def _setitem_value(x, key, value):
    """x with x[key] replaced by value (out of place)."""
    new = x.copy()
    new[key] = value
    return new


_setitem_value.device_generic = True


@defgrad("_setitem_value", save_args=False)
def _(g, res, x, key, value):
    prev = _no_grad()
    try:
        mask = _ember.ones(x.shape, dtype=g.dtype)
        mask[key] = 0
    finally:
        _restore(prev)
    gv = g[key] if getattr(value, "requires_grad", False) else None
    if gv is not None and gv.ndim < value.ndim:
        gv = gv.reshape((1,) * (value.ndim - gv.ndim) + tuple(gv.shape))
    return g * mask, None, gv


def _ag_setitem(x, key, value):
    """x[key] = value with autograd (x gets a new history)."""
    if isinstance(value, (list, tuple)):
        value = _ember.asarray(value)
    key = _owned_key(key)
    rule = RULES["_setitem_value"]

    def compute(x_old, v):
        prev = _no_grad()
        try:
            return _setitem_value(x_old, key, v)
        finally:
            _restore(prev)

    _check_inplace_target(x, "index assignment")
    tracked = (isinstance(value, ndarray) and value.requires_grad) or x.requires_grad
    x_old = _snapshot(x) if x.requires_grad else x
    v = _snapshot(value) if _shares(value, x) else value
    new = compute(x_old, v)
    if tracked:
        new = engine._record(rule, (x_old, key, v), None, new)
    _write_and_rebase(x, new)
