"""Gradient rules of shape manipulation (views and copies): ember/_api/manipulation.py,
plus the triangle / diagonal helpers of creation.py and linalg_ops.py.

Every rule takes its forward's own parameter list (``dim=`` aliases included).
Views and copies that only move elements (reshape, transpose, flip, roll,
rot90...) send the gradient back through the inverse movement; joins
(concatenate, stack, hstack...) split it; splits join it; tile / repeat /
broadcast sum it over the copies.  All written with ember ops, so the
gradients are differentiable again.
"""
import builtins
import math
import operator

import numpy as np

import ember as E
from ember.autograd.registry import defgrad
from ember._api._util import normalize_axis


# ---------------------------------------------------------------- helpers

def _shape(a):
    """The shape of an array, an ArrayMeta or an array-like (nested lists, scalars)."""
    s = getattr(a, "shape", None)
    return tuple(s) if s is not None else np.shape(a)


def _tracked(a):
    return getattr(a, "requires_grad", False)


def _static(v, opname, what):
    """An integer argument (int, sequence, NumPy or ember array) as Python data."""
    if isinstance(v, E.ndarray):
        return v.tolist()
    if hasattr(v, "shape") and hasattr(v, "requires_grad"):      # an ArrayMeta
        raise RuntimeError(f"{opname}: backward needs the values of `{what}`, which was passed "
                           f"as an ember array; pass it as ints (a tuple or list) instead")
    if isinstance(v, np.ndarray):
        return v.tolist()
    return v


def _pick(axis, dim, default=None):
    return axis if dim is None else dim


def _split_points(sizes):
    pts, acc = [], 0
    for n in sizes[:-1]:
        acc += n
        pts.append(acc)
    return pts


def _split_along(g, sizes, axis):
    """g cut along `axis` into pieces of the given sizes (one recorded op)."""
    if len(sizes) == 1:
        return [g]
    return list(E.split(g, _split_points(sizes), axis=axis))


def _order_matters(shape, new_shape):
    """True when C and F order give different element mappings between the shapes."""
    a = [s for s in shape if s != 1]
    b = [s for s in new_shape if s != 1]
    return a != b and math.prod(shape) > 1


# ---------------------------------------------------------------- reshape family

def _reshape_back(g, x, order, opname):
    if order in ("A", "K"):
        if not _order_matters(x.shape, g.shape):
            order = "C"
        else:
            raise RuntimeError(
                f"{opname}: order={order!r} is not supported by autograd (the element order "
                f"depends on the input's memory layout, which the gradient does not keep); "
                f"pass order='C' or order='F'")
    if order == "F":
        return E.reshape(g, x.shape, order="F")
    return E.reshape(g, x.shape)


@defgrad("reshape", save_args=False)
def _(g, res, x, /, shape=None, *, order="C", copy=None):
    return (_reshape_back(g, x, order, "reshape"),)


@defgrad("ravel", save_args=False)
def _(g, res, x, /, order="C"):
    return (_reshape_back(g, x, order, "ravel"),)


@defgrad("flatten", "expand_dims", "unsqueeze", "squeeze", save_args=False)
def _(g, res, x, *args, **kwargs):
    return (E.reshape(g, x.shape),)


@defgrad("astype", save_args=False)
def _(g, res, x, dtype, *args, **kwargs):
    return (g,)


@defgrad("copy", "ascontiguousarray", save_args=False)
def _(g, res, x, *args, **kwargs):
    return (g,)


@defgrad("atleast_1d", "atleast_2d", "atleast_3d", save_args=False)
def _(g, res, *arys):
    gs = (g,) if len(arys) == 1 else g
    return tuple(E.reshape(gi, _shape(a)) if _tracked(a) and gi is not None else None
                 for a, gi in zip(arys, gs))


@defgrad("resize", save_args=False)
def _(g, res, x, new_shape):
    n = x.size
    if n == 0 or g.size == 0:
        return (E.zeros(x.shape, dtype=g.dtype),)
    idx = E.asarray(np.arange(g.size) % n)
    flat = E.index_add(E.zeros((n,), dtype=g.dtype), 0, idx, E.reshape(g, (-1,)))
    return (E.reshape(flat, x.shape),)


@defgrad("trim_zeros")
def _(g, res, filt, trim="fb"):
    # the result is filt[lo:hi]; find lo again from the (non-differentiable) values
    nz = np.flatnonzero(np.asarray(filt.detach().cpu()))
    lo = int(nz[0]) if nz.size and "f" in trim.lower() else 0
    n = filt.shape[0]
    return (E.pad(g, [(lo, n - lo - g.shape[0])]),)


# ---------------------------------------------------------------- axes

def _inverse_perm(axes, ndim):
    axes = [operator.index(a) % ndim for a in axes]
    inv = [0] * ndim
    for i, a in enumerate(axes):
        inv[a] = i
    return tuple(inv)


@defgrad("permute_dims", save_args=False)
def _(g, res, x, /, axes):
    axes = tuple(axes) if isinstance(axes, (tuple, list)) else (axes,)
    return (E.permute_dims(g, _inverse_perm(axes, x.ndim)),)


@defgrad("permute", save_args=False)
def _(g, res, x, /, *dims):
    if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
        dims = dims[0]
    return (E.permute_dims(g, _inverse_perm(dims, x.ndim)),)


@defgrad("transpose", save_args=False)
def _(g, res, x, /, axes=None):
    if axes is None:
        return (E.permute_dims(g, tuple(range(x.ndim - 1, -1, -1))),)
    axes = tuple(axes) if isinstance(axes, (tuple, list)) else (axes,)
    return (E.permute_dims(g, _inverse_perm(axes, x.ndim)),)


@defgrad("matrix_transpose", save_args=False)
def _(g, res, x, /):
    return (E.matrix_transpose(g),)


@defgrad("moveaxis", save_args=False)
def _(g, res, x, /, source, destination):
    return (E.moveaxis(g, destination, source),)


@defgrad("swapaxes", save_args=False)
def _(g, res, x, /, axis1, axis2):
    return (E.swapaxes(g, axis1, axis2),)


# ---------------------------------------------------------------- reversing, rotating

@defgrad("flip", save_args=False)
def _(g, res, x, /, axis=None, *, dims=None):
    return (E.flip(g, axis=_pick(axis, dims)),)


@defgrad("fliplr", save_args=False)
def _(g, res, x, /):
    return (E.flip(g, axis=1),)


@defgrad("flipud", save_args=False)
def _(g, res, x, /):
    return (E.flip(g, axis=0),)


@defgrad("rot90", save_args=False)
def _(g, res, m, k=1, axes=(0, 1)):
    return (E.rot90(g, -operator.index(k), axes=tuple(axes)),)


@defgrad("roll", save_args=False)
def _(g, res, x, /, shift, axis=None, *, dims=None):
    axis = _pick(axis, dims)
    shift = _static(shift, "roll", "shift")
    neg = np.negative(np.asarray(shift, dtype=np.int64))
    neg = int(neg) if neg.ndim == 0 else tuple(int(s) for s in neg)
    if axis is None:
        return (E.reshape(E.roll(E.reshape(g, (-1,)), int(np.sum(neg)), axis=0), x.shape),)
    return (E.roll(g, neg, axis=axis),)


# ---------------------------------------------------------------- joining

def _concat_grads(g, arrays, axis):
    """Gradients of concatenate(arrays, axis) (arrays a list or one stacked array)."""
    if hasattr(arrays, "shape"):                 # one array: its sub-arrays along axis 0
        xs = arrays
        if axis is None:
            return E.reshape(g, xs.shape)
        n, sub = xs.shape[0], tuple(xs.shape[1:])
        ax = normalize_axis(axis, len(sub), "concatenate")
        gi = E.reshape(g, sub[:ax] + (n, sub[ax]) + sub[ax + 1:])
        return E.moveaxis(gi, ax, 0)
    shapes = [_shape(a) for a in arrays]
    if axis is None:
        pieces = _split_along(g, [math.prod(s) for s in shapes], 0)
        return [E.reshape(p, s) for p, s in zip(pieces, shapes)]
    ax = normalize_axis(axis, len(shapes[0]), "concatenate")
    return _split_along(g, [s[ax] for s in shapes], ax)


@defgrad("concatenate", save_args=False)
def _(g, res, arrays, /, axis=0, out=None, *, dtype=None, casting="same_kind", dim=None):
    return (_concat_grads(g, arrays, _pick(axis, dim, 0)),)


@defgrad("concat", save_args=False)
def _(g, res, arrays, /, *, axis=0, out=None, dtype=None, casting="same_kind", dim=None):
    return (_concat_grads(g, arrays, _pick(axis, dim, 0)),)


@defgrad("cat", save_args=False)
def _(g, res, tensors, dim=0, *, out=None, axis=None):
    return (_concat_grads(g, tensors, dim if axis is None else axis),)


@defgrad("stack", save_args=False)
def _(g, res, arrays, axis=0, out=None, *, dtype=None, casting="same_kind", dim=None):
    axis = _pick(axis, dim, 0)
    ax = normalize_axis(axis, g.ndim, "stack")
    if hasattr(arrays, "shape"):
        return (E.moveaxis(g, ax, 0),)
    return (list(E.unstack(g, axis=ax)),)


@defgrad("unstack", save_args=False)
def _(g, res, x, /, *, axis=0, dim=None):
    ax = normalize_axis(_pick(axis, dim, 0), x.ndim, "unstack")
    return (E.stack(list(g), axis=ax),)


def _join_grads(g, tup, shapes_joined, axis):
    """Gradients of a join of `tup` after each element was reshaped to shapes_joined[i]."""
    pieces = _split_along(g, [s[axis] for s in shapes_joined], axis)
    if hasattr(tup, "shape"):
        return E.reshape(E.stack(pieces, axis=0), tup.shape)
    return [E.reshape(p, _shape(a)) for p, a in zip(pieces, tup)]


def _elements(tup):
    if hasattr(tup, "shape"):                    # one array: its sub-arrays
        return [tuple(tup.shape[1:])] * tup.shape[0] if len(tup.shape) else [()]
    return [_shape(a) for a in tup]


def _at_least(s, n):
    if len(s) >= n:
        return s
    if n == 1:
        return (1,)
    if n == 2:
        return (1,) * (2 - len(s)) + s
    return {0: (1, 1, 1), 1: (1,) + s + (1,), 2: s + (1,)}[len(s)]


@defgrad("hstack", save_args=False)
def _(g, res, tup, *, dtype=None, casting="same_kind"):
    shapes = [_at_least(s, 1) for s in _elements(tup)]
    ax = 0 if len(shapes[0]) == 1 else 1
    return (_join_grads(g, tup, shapes, ax),)


@defgrad("vstack", save_args=False)
def _(g, res, tup, *, dtype=None, casting="same_kind"):
    shapes = [_at_least(s, 2) for s in _elements(tup)]
    return (_join_grads(g, tup, shapes, 0),)


@defgrad("dstack", save_args=False)
def _(g, res, tup):
    shapes = [_at_least(s, 3) for s in _elements(tup)]
    return (_join_grads(g, tup, shapes, 2),)


@defgrad("column_stack", save_args=False)
def _(g, res, tup):
    shapes = [s if len(s) >= 2 else (math.prod(s), 1) for s in _elements(tup)]
    return (_join_grads(g, tup, shapes, 1),)


# ---------------------------------------------------------------- splitting

def _split_bounds(n, indices_or_sections, opname):
    ios = _static(indices_or_sections, opname, "indices_or_sections")
    if isinstance(ios, (int, np.integer)):
        each, extra = divmod(n, int(ios))
        bounds = [0]
        for i in range(int(ios)):
            bounds.append(bounds[-1] + each + (1 if i < extra else 0))
        return bounds
    return [0] + [operator.index(i) for i in ios] + [n]


def _unsplit(g, x, ax, bounds):
    """The gradient of x from the gradients of x[..., b[i]:b[i+1], ...] along ax."""
    n = x.shape[ax]
    spans = [slice(bounds[i], bounds[i + 1]).indices(n)[:2] for i in range(len(bounds) - 1)]
    pos, in_order = 0, True
    for lo, hi in spans:
        if hi > lo:
            in_order = in_order and lo == pos
            pos = hi
    if in_order and pos == n:
        # the pieces tile the axis in order (the usual case): join them
        pieces = [gi for gi, (lo, hi) in zip(g, spans) if hi > lo]
        if not pieces:
            return E.zeros(x.shape, dtype=g[0].dtype)
        return E.concatenate(pieces, axis=ax) if len(pieces) > 1 else pieces[0]
    # overlapping or out-of-order split points: add each piece into place
    total = None
    pre = (slice(None),) * ax
    for gi, (lo, hi) in zip(g, spans):
        if hi <= lo:
            continue
        part = E._index_add_into(gi, pre + (slice(lo, hi),), x.shape, gi.dtype)
        total = part if total is None else total + part
    return total if total is not None else E.zeros(x.shape, dtype=g[0].dtype)


@defgrad("array_split", "split", save_args=False)
def _(g, res, x, indices_or_sections, axis=0):
    ax = normalize_axis(axis, x.ndim, "split")
    return (_unsplit(g, x, ax, _split_bounds(x.shape[ax], indices_or_sections, "split")),)


@defgrad("hsplit", save_args=False)
def _(g, res, x, indices_or_sections):
    ax = 1 if x.ndim > 1 else 0
    return (_unsplit(g, x, ax, _split_bounds(x.shape[ax], indices_or_sections, "hsplit")),)


@defgrad("vsplit", save_args=False)
def _(g, res, x, indices_or_sections):
    return (_unsplit(g, x, 0, _split_bounds(x.shape[0], indices_or_sections, "vsplit")),)


@defgrad("dsplit", save_args=False)
def _(g, res, x, indices_or_sections):
    return (_unsplit(g, x, 2, _split_bounds(x.shape[2], indices_or_sections, "dsplit")),)


# ---------------------------------------------------------------- tiling, repeating, broadcasting

@defgrad("tile", save_args=False)
def _(g, res, x, repetitions, /):
    reps = _static(repetitions, "tile", "repetitions")
    reps = (int(reps),) if isinstance(reps, (int, np.integer)) else tuple(int(r) for r in reps)
    d = builtins.max(len(reps), x.ndim)
    reps = (1,) * (d - len(reps)) + reps
    shp = (1,) * (d - x.ndim) + tuple(x.shape)
    inter = tuple(v for r, s in zip(reps, shp) for v in (r, s))
    gs = E.sum(E.reshape(g, inter), axis=tuple(range(0, 2 * d, 2)))
    return (E.reshape(gs, x.shape),)


@defgrad("repeat")
def _(g, res, x, /, repeats, *, axis=None, dim=None):
    axis = _pick(axis, dim)
    shape = tuple(x.shape)
    if axis is None:
        shp, ax = (math.prod(shape),), 0
    else:
        shp, ax = shape, normalize_axis(axis, len(shape), "repeat")
    r = repeats
    if isinstance(r, E.ndarray):
        r = np.asarray(r.detach().cpu())
    r = np.asarray(r)
    if r.size == 1:
        n = int(r.reshape(()))
        gx = E.sum(E.reshape(g, shp[:ax] + (shp[ax], n) + shp[ax + 1:]), axis=ax + 1)
    else:
        idx = E.asarray(np.repeat(np.arange(shp[ax]), r.astype(np.intp)))
        gx = E.index_add(E.zeros(shp, dtype=g.dtype), ax, idx, g)
    return (E.reshape(gx, shape),)


@defgrad("broadcast_to", save_args=False)
def _(g, res, x, /, shape):
    return (g,)       # the engine sums it back to x's shape


@defgrad("broadcast_arrays", save_args=False)
def _(g, res, *arrays):
    return tuple(g)   # each summed back to its input's shape by the engine


@defgrad("meshgrid", save_args=False)
def _(g, res, *arrays, indexing="xy", sparse=False, copy=True):
    if len(arrays) == 1 and isinstance(arrays[0], (list, tuple)) and arrays[0] and \
            not isinstance(arrays[0][0], (int, float, complex)):
        grads = _meshgrid_grads(g, arrays[0], indexing)
        return (grads,)
    return tuple(_meshgrid_grads(g, arrays, indexing))


def _meshgrid_grads(g, arrays, indexing):
    if isinstance(g, E.ndarray):        # one input: one output's gradient
        g = (g,)
    n = len(arrays)
    out = []
    for i, (a, gi) in enumerate(zip(arrays, g)):
        if not _tracked(a) or gi is None:
            out.append(None)
            continue
        ax = i
        if indexing == "xy" and n >= 2 and i < 2:
            ax = 1 - i
        others = tuple(k for k in range(gi.ndim) if k != ax)
        out.append(E.reshape(E.sum(gi, axis=others), _shape(a)))
    return out


# ---------------------------------------------------------------- padding

def _pad_pairs(pad_width, ndim):
    pw = _static(pad_width, "pad", "pad_width")
    if not ndim:
        return []
    pw = np.broadcast_to(np.asarray(pw, dtype=np.int64), (ndim, 2))
    return [(int(a), int(b)) for a, b in pw.tolist()]


_INDEX_MODES = ("edge", "reflect", "symmetric", "wrap")


@defgrad("pad", save_args=False)
def _(g, res, x, pad_width, mode="constant", **kwargs):
    pairs = _pad_pairs(pad_width, x.ndim)
    if mode in ("constant", "empty"):
        key = tuple(slice(lo, lo + n) for (lo, _), n in zip(pairs, x.shape))
        return (g[key],)
    if mode in _INDEX_MODES and kwargs.get("reflect_type", "even") == "even":
        # each padded axis reads x at fixed positions: gather -> scatter-add per axis
        gx = g
        for ax, ((lo, hi), n) in enumerate(zip(pairs, x.shape)):
            if lo == 0 and hi == 0:
                continue
            src = np.pad(np.arange(n), (lo, hi), mode=mode)
            shp = tuple(gx.shape[:ax]) + (n,) + tuple(gx.shape[ax + 1:])
            gx = E.index_add(E.zeros(shp, dtype=g.dtype), ax, E.asarray(src), gx)
        return (gx,)
    raise RuntimeError(f"pad: autograd supports mode 'constant', 'empty', 'edge', 'reflect', "
                       f"'symmetric' and 'wrap' (reflect_type='even'), got mode={mode!r}"
                       + (f" with reflect_type={kwargs.get('reflect_type')!r}"
                          if "reflect_type" in kwargs else ""))


# ---------------------------------------------------------------- diagonals, triangles

@defgrad("tril", save_args=False)
def _(g, res, x, /, k=0):
    return (E.tril(g, k),)


@defgrad("triu", save_args=False)
def _(g, res, x, /, k=0):
    return (E.triu(g, k),)


def _diag_index(n1, n2, offset):
    if offset >= 0:
        length = builtins.max(0, builtins.min(n1, n2 - offset))
        i = np.arange(length)
        return i, i + offset
    length = builtins.max(0, builtins.min(n1 + offset, n2))
    i = np.arange(length)
    return i - offset, i


@defgrad("diagonal", save_args=False)
def _(g, res, x, /, offset=0, axis1=0, axis2=1):
    nd = x.ndim
    a1, a2 = normalize_axis(axis1, nd, "diagonal"), normalize_axis(axis2, nd, "diagonal")
    rest = [i for i in range(nd) if i not in (a1, a2)]
    shp_t = tuple(x.shape[i] for i in rest) + (x.shape[a1], x.shape[a2])
    r, c = _diag_index(x.shape[a1], x.shape[a2], operator.index(offset))
    z = E._index_add_into(g, (Ellipsis, r, c), shp_t, g.dtype)
    return (E.permute_dims(z, _inverse_perm(rest + [a1, a2], nd)),)


@defgrad("diag", save_args=False)
def _(g, res, v, k=0):
    k = operator.index(k)
    if len(v.shape) == 1:
        return (E.diagonal(g, offset=k),)
    r, c = _diag_index(v.shape[0], v.shape[1], k)
    return (E._index_add_into(g, (r, c), tuple(v.shape), g.dtype),)
