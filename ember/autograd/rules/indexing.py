"""Gradient rules of index-based functions, sorting and selection, and of the
Python-level (non-ufunc) functions of ember/_api/elementwise.py.

Gathers (take, take_along_axis, compress, sort...) scatter the gradient back
with ``index_add`` / ``scatter_add``; those two gather it again, so every rule
here is differentiable once more.  Index arrays, masks and permutations are
non-differentiable data: they are read as NumPy arrays (``np.asarray(a.detach())``)
and passed to the ember ops as such, so nodes do not keep ember index arrays.

Conventions (PyTorch's): ``where`` sends the gradient to the branch that was
taken and none to the condition; ``clip`` passes the gradient where
``min <= x <= max`` and to a bound where x lies beyond it (where ``min > max``
the result is ``max`` and so is the gradient's target); sorts and top-k route
each output's gradient to the element it came from (stable order for ties).

round/around and fix are piecewise constant: their gradient is 0 (PyTorch's and
JAX's convention, as for floor/ceil/trunc/rint).  Not differentiable (declared
below): spacing.  In-place functions (put_along_axis, put,
place, ufunc.at) return None and cannot record.  Set functions (unique,
intersect1d, union1d, setdiff1d) have no rule, as in PyTorch.
"""
import math

import numpy as np

import ember as E
from ember.autograd.registry import defgrad, nondifferentiable
from ember._api._util import normalize_axis
from ember._core.dtypes import dtype_kind

nondifferentiable("spacing")


@defgrad("round", "around", save_args=False)
def _(g, res, x, *args, **kwargs):
    return (E.zeros_like(g),)


@defgrad("fix", save_args=False)
def _(g, res, x, *args, **kwargs):
    return (E.zeros_like(g),)


# ---------------------------------------------------------------- helpers

def _tracked(a):
    return getattr(a, "requires_grad", False)


def _np(a):
    """Non-differentiable data (an index array, a mask, values to sort) as NumPy
    (a host copy for a GPU array; GPU ops take NumPy arguments back as uploads)."""
    if isinstance(a, E.ndarray):
        return np.asarray(a.detach().cpu())
    return np.asarray(a)


def _zero(g):
    return E.zeros((), dtype=g.dtype)


def _c(v):
    if isinstance(v, E.ndarray) and dtype_kind(v.dtype) == "c":
        return E.conj(v)
    if isinstance(v, complex):
        return v.conjugate()
    return v


def _normalize_index(idx, n, mode):
    idx = idx.astype(np.intp, copy=False)
    if n == 0:
        return idx
    if mode == "clip":
        return np.clip(idx, 0, n - 1)
    return idx % n          # 'wrap', and negative indices of 'raise'


def _sum_to(g, shape):
    """g summed down to a shape it was broadcast from (inside a rule, before stacking)."""
    shape = tuple(shape)
    if tuple(g.shape) == shape:
        return g
    lead = g.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, n in enumerate(shape)
                                      if n == 1 and g.shape[lead + i] != 1)
    if axes:
        g = E.sum(g, axis=axes, keepdims=True)
    return E.reshape(g, shape)


def _scatter_perm(g, perm, axis):
    """The gradient of x[perm] along `axis` (perm a permutation along it): g moved back."""
    inv = np.argsort(perm, axis=axis, kind="stable")
    return E.take_along_axis(g, inv, axis=axis)


# ---------------------------------------------------------------- gathers and scatters

def _take_grad(g, x, indices, axis, mode):
    shape = tuple(x.shape)
    idx = _np(indices)
    if axis is None:
        n = math.prod(shape)
        idx = _normalize_index(idx, n, mode).reshape(-1)
        flat = E.index_add(E.zeros((n,), dtype=g.dtype), 0, idx, E.reshape(g, (-1,)))
        return E.reshape(flat, shape)
    ax = normalize_axis(axis, len(shape), "take")
    idx = _normalize_index(idx, shape[ax], mode).reshape(-1)
    g2 = E.reshape(g, shape[:ax] + (idx.size,) + shape[ax + 1:])
    return E.index_add(E.zeros(shape, dtype=g.dtype), ax, idx, g2)


@defgrad("take")
def _(g, res, x, /, indices, *, axis=None, out=None, mode="raise", dim=None):
    return (_take_grad(g, x, indices, axis if dim is None else dim, mode),)


@defgrad("index_select")
def _(g, res, x, dim, index):
    return (_take_grad(g, x, index, dim, "raise"),)


@defgrad("take_along_axis")
def _(g, res, x, /, indices, axis=-1):
    idx = _np(indices)
    if axis is None:
        n = x.size
        flat = E.scatter_add(E.zeros((n,), dtype=g.dtype), 0, idx.reshape(-1), E.reshape(g, (-1,)))
        return (E.reshape(flat, x.shape),)
    ax = normalize_axis(axis, x.ndim, "take_along_axis")
    zshape = tuple(g.shape[:ax]) + (x.shape[ax],) + tuple(g.shape[ax + 1:])
    idx = np.ascontiguousarray(np.broadcast_to(idx, tuple(g.shape)))
    # zshape may be larger than x (x broadcast against indices): the engine sums it down
    return (E.scatter_add(E.zeros(zshape, dtype=g.dtype), ax, idx, g),)


@defgrad("scatter_add")
def _(g, res, x, axis, index, src):
    gsrc = None
    if _tracked(src):
        idx = _np(index)
        ax = normalize_axis(axis, g.ndim, "scatter_add")
        key = tuple(slice(None) if d == ax else slice(0, idx.shape[d]) for d in range(g.ndim))
        gsrc = E.take_along_axis(g[key], idx, axis=ax)
    return (g if _tracked(x) else None), None, None, gsrc


@defgrad("index_add")
def _(g, res, x, axis, index, source, *, alpha=1, dim=None):
    gsrc = None
    if _tracked(source):
        if dim is not None:
            axis = dim
        idx = _np(index).reshape(-1).astype(np.intp)
        if x.ndim == 0:
            gsrc = E.broadcast_to(E.reshape(g, (1,)), (idx.shape[0],))
            gsrc = E.reshape(gsrc, source.shape)
        else:
            gsrc = E.take(g, idx, axis=normalize_axis(axis, x.ndim, "index_add"))
        if alpha != 1:
            gsrc = gsrc * _c(alpha)
    return (g if _tracked(x) else None), None, None, gsrc


@defgrad("compress")
def _(g, res, condition, x, axis=None):
    idx = np.flatnonzero(_np(condition).reshape(-1))
    if axis is None:
        flat = E.index_add(E.zeros((x.size,), dtype=g.dtype), 0, idx, g)
        return None, E.reshape(flat, x.shape)
    ax = normalize_axis(axis, x.ndim, "compress")
    return None, E.index_add(E.zeros(tuple(x.shape), dtype=g.dtype), ax, idx, g)


@defgrad("extract")
def _(g, res, condition, x):
    idx = np.flatnonzero(_np(condition).reshape(-1))
    flat = E.index_add(E.zeros((x.size,), dtype=g.dtype), 0, idx, g)
    return None, E.reshape(flat, x.shape)


@defgrad("masked_fill")
def _(g, res, x, mask, value):
    m = _np(mask).astype(bool)
    gx = E.where(m, _zero(g), g) if _tracked(x) else None
    gv = E.where(m, g, _zero(g)) if _tracked(value) else None
    return gx, None, gv


@defgrad("select")
def _(g, res, condlist, choicelist, default=0):
    conds = [_np(c).astype(bool) for c in condlist]
    shape = tuple(g.shape)
    taken = np.zeros(shape, dtype=bool)
    grads = []
    for c, ch in zip(conds, choicelist):
        c = np.broadcast_to(c, shape)
        sel = c & ~taken
        taken |= c
        grads.append(E.where(sel, g, _zero(g)) if _tracked(ch) else None)
    gdef = E.where(taken, _zero(g), g) if _tracked(default) else None
    return None, grads, gdef


@defgrad("choose")
def _(g, res, a, choices, mode="raise"):
    ai = _np(a).astype(np.intp)
    stacked = hasattr(choices, "shape")
    n = choices.shape[0] if stacked else len(choices)
    if mode == "wrap":
        ai = ai % n
    elif mode == "clip":
        ai = np.clip(ai, 0, n - 1)
    if stacked:
        sub = tuple(choices.shape[1:])
        return None, E.stack([_sum_to(E.where(ai == i, g, _zero(g)), sub) for i in range(n)])
    return None, [E.where(ai == i, g, _zero(g)) if _tracked(ch) else None
                  for i, ch in enumerate(choices)]


@defgrad("bincount")
def _(g, res, x, /, weights=None, minlength=0):
    if not _tracked(weights):
        return (None,)
    return None, E.take(g, _np(x).astype(np.intp))


# ---------------------------------------------------------------- sorting, selection

def _sort_grad(g, x, axis, descending):
    if x.ndim == 0:
        return g
    xv = _np(x)
    if axis is None:
        perm = E.argsort(E.asarray(xv.reshape(-1)), axis=0, descending=descending)
        return E.reshape(_scatter_perm(E.reshape(g, (-1,)), _np(perm), 0), x.shape)
    ax = normalize_axis(axis, x.ndim, "sort")
    perm = E.argsort(E.asarray(xv), axis=ax, descending=descending)
    return _scatter_perm(g, _np(perm), ax)


@defgrad("sort")
def _(g, res, x, /, *, axis=-1, descending=False, stable=True, kind=None, dim=None):
    return (_sort_grad(g, x, axis if dim is None else dim, descending),)


@defgrad("msort")
def _(g, res, x):
    return (_sort_grad(g, x, 0, False),)


@defgrad("partition")
def _(g, res, x, kth, axis=-1):
    xv = _np(x)
    if axis is None:
        perm = np.argpartition(xv.reshape(-1), kth)
        return (E.reshape(_scatter_perm(E.reshape(g, (-1,)), perm, 0), x.shape),)
    ax = normalize_axis(axis, x.ndim, "partition")
    return (_scatter_perm(g, np.argpartition(xv, kth, axis=ax), ax),)


@defgrad("topk", save_args=False, save_result=True)
def _(g, res, x, k, dim=-1, largest=True, sorted=True):
    gv = g[0]
    idx = _np(res[1])
    ax = normalize_axis(dim, x.ndim, "topk")
    return (E.scatter_add(E.zeros(tuple(x.shape), dtype=gv.dtype), ax, idx, gv),)


# ---------------------------------------------------------------- elementwise (Python-level)

@defgrad("where")
def _(g, res, condition, x=None, y=None, /):
    c = _np(condition).astype(bool)
    gx = E.where(c, g, _zero(g)) if _tracked(x) else None
    gy = E.where(c, _zero(g), g) if _tracked(y) else None
    return None, gx, gy


@defgrad("clip")
def _(g, res, x, /, min=None, max=None, *, out=None, a_min=np._NoValue, a_max=np._NoValue):
    if a_min is not np._NoValue:
        min = a_min
    if a_max is not np._NoValue:
        max = a_max
    xv = _np(x)
    lo = None if min is None else _np(min)
    hi = None if max is None else _np(max)
    with np.errstate(invalid="ignore"):
        ge = np.ones(xv.shape, bool) if lo is None else (xv >= lo)
        le = np.ones(xv.shape, bool) if hi is None else (xv <= hi)
        crossed = np.zeros((), bool) if lo is None or hi is None else np.asarray(lo > hi)
    gx = E.where(ge & le, g, _zero(g)) if _tracked(x) else None
    gmin = E.where(~ge & ~crossed, g, _zero(g)) if _tracked(min) else None
    gmax = E.where(~le | crossed, g, _zero(g)) if _tracked(max) else None
    return gx, gmin, gmax


@defgrad("real", save_args=False)
def _(g, res, x, /):
    return (g,)           # cast to x's complex dtype by the engine (imaginary part 0)


@defgrad("imag", save_args=False)
def _(g, res, x, /):
    if dtype_kind(x.dtype) == "c":
        return (g * 1j,)
    return (E.zeros(x.shape, dtype=g.dtype),)


@defgrad("conj", "conjugate", save_args=False)
def _(g, res, x, /, out=None):
    return (E.conj(g),)


@defgrad("angle")
def _(g, res, x, /, deg=False):
    scale = 180.0 / math.pi if deg else 1.0
    if dtype_kind(x.dtype) != "c":
        return (E.zeros(x.shape, dtype=g.dtype),)
    a2 = E.real(x * E.conj(x))
    zero = _np(x) == 0
    d = g * x * 1j / E.where(zero, 1.0, a2)
    if scale != 1.0:
        d = d * scale
    return (E.where(zero, E.zeros((), dtype=d.dtype), d),)


@defgrad("nan_to_num")
def _(g, res, x, copy=True, nan=0.0, posinf=None, neginf=None):
    return (E.where(np.isfinite(_np(x)), g, _zero(g)),)


@defgrad("sinc")
def _(g, res, x, /):
    zero = _np(x) == 0
    xs = E.where(zero, 1.0, x)
    px = xs * math.pi
    d = (E.cos(px) * px - E.sin(px)) / (px * xs)
    return (E.where(zero, _zero(g), g * _c(d)),)


def _i1(x):
    """The modified Bessel function I1 by its power series, in ember ops (differentiable)."""
    m = float(np.max(np.abs(_np(x)))) if x.size else 0.0
    terms = int(m / 2 + 6 * math.sqrt(m / 2 + 1) + 15)
    h = x * 0.5
    h2 = h * h
    t = h
    s = h
    for k in range(1, terms):
        t = t * h2 * (1.0 / (k * (k + 1)))
        s = s + t
    return s


@defgrad("i0")
def _(g, res, x, /):
    return (g * _i1(x),)


def _wide(v, g):
    """An operand of float_power as float64/complex128 (arrays recorded, scalars as they are)."""
    if isinstance(v, E.ndarray):
        return v.astype(E.complex128 if dtype_kind(g.dtype) == "c" else E.float64)
    return v


@defgrad("float_power")
def _(g, res, a, b, /):
    ga = gb = None
    A, B = _wide(a, g), _wide(b, g)
    if _tracked(a):
        d = B * E.float_power(A, B - 1)
        d = E.where(_np(b) == 0, E.zeros((), dtype=d.dtype), d)
        ga = g * _c(d)
    if _tracked(b):
        a0 = _np(a) == 0
        d = E.float_power(A, B) * E.log(E.where(a0, 1.0, A))
        gb = g * _c(E.where(a0, E.zeros((), dtype=d.dtype), d))
    return ga, gb


@defgrad("divmod")
def _(g, res, a, b, /):
    # q = floor(a / b) is piecewise constant; r = a - b * q
    gr = g[1]
    ga = gr if _tracked(a) else None
    gb = None
    if _tracked(b):
        q = E.asarray(np.floor_divide(_np(a), _np(b)))
        gb = -gr * q
    return ga, gb


@defgrad("ldexp")
def _(g, res, a, b, /):
    scale = np.ldexp(1.0, _np(b))
    return g * E.asarray(scale).astype(g.dtype), None


@defgrad("frexp")
def _(g, res, x, /):
    _, e = np.frexp(_np(x))
    return (g[0] * E.asarray(np.ldexp(1.0, -e)).astype(g[0].dtype),)


@defgrad("modf", save_args=False)
def _(g, res, x, /):
    return (g[0],)        # the integral part is piecewise constant
