"""Gradient rules of the reductions (ember/_api/reductions.py).

Every rule takes the forward's own parameter list (``dim=``/``keepdim=``
aliases included) and is written with ember ops, so gradients of any order
work.  Conventions follow PyTorch: ties of max/min (amax/amin) share the
gradient evenly; prod with zeros gives the product of the other elements
(exact, also at several zeros); std has zero gradient where std == 0;
quantile/median route the gradient to the one or two order statistics they
interpolate.

Not differentiable on purpose (integer or bool results, declared in
install.py): argmin, argmax, nanargmin, nanargmax, all, any, count_nonzero.
"""
import numpy as np

import ember as E
from ember.autograd.registry import defgrad as _defgrad
from ember._api._util import normalize_axis_tuple
from ember.autograd.rules._util import axes_of
from ember._core.dtypes import dtype_kind


# ---------------------------------------------------------------- helpers

class _Meta:
    """Shape and dtype of a list argument seen as one array (save_args=False rules)."""
    def __init__(self, shape, dtype):
        self.shape, self.dtype, self.requires_grad = tuple(shape), dtype, True
        self.ndim = len(self.shape)
        self.size = int(np.prod(self.shape, dtype=np.int64))


def _seq(rule, save_args):
    """Let `rule` take a list/tuple of arrays as its first argument (``ember.sum([a, b])``):
    the list is seen as one stacked array and the gradient is split back into a list."""
    def wrapped(g, res, x, *args, **kwargs):
        if not isinstance(x, (list, tuple)):
            return rule(g, res, x, *args, **kwargs)
        if save_args:
            xs = E.stack([e if isinstance(e, E.ndarray) else E.asarray(e) for e in x])
        else:
            first = next(e for e in x if hasattr(e, "shape"))
            xs = _Meta((len(x),) + tuple(first.shape), first.dtype)
        ret = list(rule(g, res, xs, *args, **kwargs))
        if ret and ret[0] is not None:
            ret[0] = [ret[0][j] for j in range(len(x))]
        return tuple(ret)
    wrapped.__name__ = getattr(rule, "__name__", "rule")
    return wrapped


def defgrad(*names, save_args=True, save_result=False):
    """registry.defgrad, with list/tuple first arguments handled (``_seq``)."""
    def register(fn):
        _defgrad(*names, save_args=save_args, save_result=save_result)(_seq(fn, save_args))
        return fn
    return register


def _pick(axis, dim, keepdims, keepdim):
    if dim is not None:
        axis = dim
    if keepdim is not None:
        keepdims = keepdim
    return axis, bool(keepdims)


def _axes(x, axis, opname):
    """Reduced axes of x (sorted, non-negative); a 0-d array reduces nothing."""
    if x.ndim == 0:
        return ()
    return axes_of(axis, x.ndim, opname)


def _kshape(shape, axes):
    return tuple(1 if i in axes else n for i, n in enumerate(shape))


def _keep(a, shape, axes, keepdims):
    """A reduction's result (or its gradient) with the reduced axes put back as length 1."""
    if keepdims or not axes:
        return a
    return E.reshape(a, _kshape(shape, axes))


def _count(shape, axes):
    n = 1
    for a in axes:
        n *= shape[a]
    return n


def _is_complex(x):
    return dtype_kind(x.dtype) == "c"


def _conj(x):
    return E.conj(x) if isinstance(x, E.ndarray) and _is_complex(x) else x


def _real_dtype(dt):
    dt = np.dtype(dt)
    if dtype_kind(dt) == "c":
        return np.dtype(np.float32) if dt == np.complex64 else np.dtype(np.float64)
    return dt if dtype_kind(dt) == "f" else np.dtype(np.float64)


def _detach(x):
    return x.detach() if isinstance(x, E.ndarray) else E.asarray(x)


def _rev(a, ax):
    """a reversed along axis ax (a view)."""
    return a[(slice(None),) * ax + (slice(None, None, -1),)]


def _slice_axis(a, ax, sl):
    return a[(slice(None),) * ax + (sl,)]


def _revcumsum(a, ax):
    """sum_{k >= i} a_k along ax."""
    return _rev(E.cumsum(_rev(a, ax), axis=ax), ax)


def _weights(mask, cnt, dt):
    """mask / max(cnt, 1) as a constant array of real dtype dt."""
    dt = _real_dtype(dt)
    return mask.astype(dt) / E.maximum(cnt, 1).astype(dt)


def _to_last(x, axes):
    """x with `axes` moved to the end and flattened into one: (kept..., N), with the
    information needed to undo it (``_from_last``)."""
    nd = x.ndim
    keep = [i for i in range(nd) if i not in axes]
    perm = tuple(keep + list(axes))
    xp = E.permute_dims(x, perm) if perm != tuple(range(nd)) else x
    lead = tuple(x.shape[i] for i in keep)
    pshape = tuple(x.shape[i] for i in perm)
    return E.reshape(xp, lead + (_count(x.shape, axes),)), (perm, pshape)


def _from_last(a, info):
    perm, pshape = info
    a = E.reshape(a, pshape)
    if perm == tuple(range(len(perm))):
        return a
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return E.permute_dims(a, tuple(inv))


# ---------------------------------------------------------------- sum, mean, prod

@defgrad("sum", save_args=False)
def _(g, res, x, axis=None, dtype=None, out=None, keepdims=False, *, dim=None, keepdim=None,
      initial=None, where=None):
    axis, keepdims = _pick(axis, dim, keepdims, keepdim)
    axes = _axes(x, axis, "sum")
    gx = E.broadcast_to(_keep(g, x.shape, axes, keepdims), x.shape)
    if where is not None:
        gx = gx * E.asarray(where).astype(_real_dtype(g.dtype))
    return (gx,)


@defgrad("mean", save_args=False)
def _(g, res, x, axis=None, dtype=None, out=None, keepdims=False, *, dim=None, keepdim=None):
    axis, keepdims = _pick(axis, dim, keepdims, keepdim)
    axes = _axes(x, axis, "mean")
    n = max(_count(x.shape, axes), 1)
    return (E.broadcast_to(_keep(g, x.shape, axes, keepdims) / n, x.shape),)


def _prod_others(x, axes):
    """prod_{j != i} x_j over each reduced slice, without division (exact with zeros):
    exclusive running products from the left times those from the right."""
    if not axes:
        return E.ones(x.shape, dtype=x.dtype)
    xm, info = _to_last(x, axes)
    last = xm.ndim - 1
    left = _slice_axis(E.cumulative_prod(xm, axis=last, include_initial=True), last,
                       slice(None, -1))
    right = _rev(_slice_axis(E.cumulative_prod(_rev(xm, last), axis=last, include_initial=True),
                             last, slice(None, -1)), last)
    return _from_last(left * right, info)


def _prod_grad(gk, rk, x, axes):
    """Gradient of prod over `axes` (gk, rk: upstream gradient and result, keepdims shape)."""
    if x.size == 0:
        return E.zeros(x.shape, dtype=gk.dtype)
    if not bool(E.any(_detach(x) == 0)):
        return gk * (_conj(rk) / _conj(x))
    return gk * _conj(_prod_others(x, axes))


@defgrad("prod", save_result=True)
def _(g, res, x, axis=None, dtype=None, out=None, keepdims=False, *, dim=None, keepdim=None):
    axis, keepdims = _pick(axis, dim, keepdims, keepdim)
    axes = _axes(x, axis, "prod")
    if dtype is not None and np.dtype(dtype) != x.dtype:
        x = x.astype(dtype)
    gk = _keep(g, x.shape, axes, keepdims)
    rk = _keep(res, x.shape, axes, keepdims)
    return (_prod_grad(gk, rk, x, axes),)


# ---------------------------------------------------------------- var, std

def _var_parts(x, axis, dtype, ddof, correction, dim, keepdim, keepdims, opname):
    axis, keepdims = _pick(axis, dim, keepdims, keepdim)
    if correction is not None:
        ddof = correction
    ddof = 0 if ddof is None else ddof
    axes = _axes(x, axis, opname)
    if dtype is not None and np.dtype(dtype) != x.dtype:
        x = x.astype(dtype)
    d = x - E.mean(x, axis=axes, keepdims=True)
    n = _count(x.shape, axes) - ddof
    return axes, keepdims, d, n


def _inv_or_inf(n):
    return 1.0 / n if n > 0 else float("inf")


@defgrad("var")
def _(g, res, x, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, correction=None,
      dim=None, keepdim=None, mean=None):
    axes, keepdims, d, n = _var_parts(x, axis, dtype, ddof, correction, dim, keepdim, keepdims,
                                      "var")
    gk = _keep(g, x.shape, axes, keepdims)
    return (gk * d * (2.0 * _inv_or_inf(n)),)


def _std_scale(gk, rk):
    """gk / rk, with 0 where rk == 0 (PyTorch's convention for std and norms)."""
    zero = (_detach(rk) == 0).astype(rk.dtype)
    return gk * (1 - zero) / (rk + zero)


@defgrad("std", save_result=True)
def _(g, res, x, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, correction=None,
      dim=None, keepdim=None):
    axes, keepdims, d, n = _var_parts(x, axis, dtype, ddof, correction, dim, keepdim, keepdims,
                                      "std")
    gk = _keep(g, x.shape, axes, keepdims)
    rk = _keep(res, x.shape, axes, keepdims)
    return (_std_scale(gk, rk) * d * _inv_or_inf(n),)


# ---------------------------------------------------------------- min, max, ptp

def _extreme_weights(xd, rk, axes, where=None, nan_wins=True):
    """Constant weights that split the gradient evenly among the elements equal to the
    result (a NaN result: among the NaNs)."""
    m = xd == rk
    if nan_wins and dtype_kind(xd.dtype) in "fc":
        m = m | (E.isnan(xd) & E.isnan(rk))
    if where is not None:
        m = m & E.asarray(where)
    return _weights(m, E.sum(m, axis=axes, keepdims=True), xd.dtype)


def _minmax_rule(g, res, x, axis, keepdims, dim, keepdim, where, opname):
    axis, keepdims = _pick(axis, dim, keepdims, keepdim)
    axes = _axes(x, axis, opname)
    gk = _keep(g, x.shape, axes, keepdims)
    rk = _keep(_detach(res), x.shape, axes, keepdims)
    return (gk * _extreme_weights(_detach(x), rk, axes, where),)


@defgrad("max", "amax", save_result=True)
def _(g, res, x, axis=None, out=None, keepdims=False, *, dim=None, keepdim=None, initial=None,
      where=None):
    return _minmax_rule(g, res, x, axis, keepdims, dim, keepdim, where, "max")


@defgrad("min", "amin", save_result=True)
def _(g, res, x, axis=None, out=None, keepdims=False, *, dim=None, keepdim=None, initial=None,
      where=None):
    return _minmax_rule(g, res, x, axis, keepdims, dim, keepdim, where, "min")


# ---------------------------------------------------------------- logsumexp

@defgrad("logsumexp", save_result=True)
def _(g, res, x, axis=None, keepdims=False, *, dim=None, keepdim=None):
    axis, keepdims = _pick(axis, dim, keepdims, keepdim)
    axes = _axes(x, axis, "logsumexp")
    gk = _keep(g, x.shape, axes, keepdims)
    rk = _keep(res, x.shape, axes, keepdims)
    return (gk * _conj(E.exp(x - rk)),)


# ---------------------------------------------------------------- cumulative sums and products

def _cum_axis(x, axis, opname):
    """(axis along which the flattened-or-not x accumulates, whether x is flattened)."""
    if axis is None:
        return 0, True
    return axes_of(axis, x.ndim, opname)[0], False


def _cumsum_grad(g, x, axis, include_initial, opname):
    ax, flat = _cum_axis(x, axis, opname)
    if include_initial:
        g = _slice_axis(g, ax, slice(1, None))
    gx = _revcumsum(g, ax)
    return (E.reshape(gx, x.shape) if flat else gx,)


@defgrad("cumsum", save_args=False)
def _(g, res, x, axis=None, dtype=None, out=None, *, dim=None):
    return _cumsum_grad(g, x, axis if dim is None else dim, False, "cumsum")


@defgrad("cumulative_sum", save_args=False)
def _(g, res, x, *, axis=None, dtype=None, include_initial=False, out=None, dim=None):
    return _cumsum_grad(g, x, axis if dim is None else dim, include_initial, "cumulative_sum")


def _cumprod_core(g, x, y, ax, exact):
    """Gradient of y = cumprod(x) along ax: sum_{k >= i} g_k prod_{j <= k, j != i} x_j.

    Before the first zero of a slice it is revcumsum(g*y)/x; at the first zero it is
    revcumsum(g*y') with y' the running product of x with that zero replaced by 1; after
    it the value is 0 -- but with ``exact`` (create_graph) it is written as
    x_zero * (the same gradient for x') so that its derivative is right too."""
    z = _detach(x) == 0
    if not bool(E.any(z)):
        return _revcumsum(g * y, ax) / x
    zc = E.cumsum(z, axis=ax)
    before = zc == 0
    first = z & (zc == 1)
    part_b = _revcumsum(g * y, ax) / E.where(before, x, 1)
    x1 = E.where(first, 1, x)
    if exact:
        xz = E.sum(E.where(first, x, 0), axis=ax, keepdims=True)
        rest = E.where(first, 1, xz) * _cumprod_core(g, x1, E.cumprod(x1, axis=ax), ax, True)
    else:
        rest = E.where(first, _revcumsum(g * E.cumprod(x1, axis=ax), ax), 0)
    return E.where(before, part_b, rest)


def _cumprod_grad(g, res, x, axis, include_initial, opname):
    ax, flat = _cum_axis(x, axis, opname)
    if x.size == 0:
        return (E.zeros(x.shape, dtype=g.dtype),)
    xf = E.reshape(x, (-1,)) if flat else x
    if res.dtype != xf.dtype:
        xf = xf.astype(res.dtype)
    if include_initial:
        g = _slice_axis(g, ax, slice(1, None))
        res = _slice_axis(res, ax, slice(1, None))
    gx = _cumprod_core(g, _conj(xf), _conj(res), ax, E.is_grad_enabled())
    return (E.reshape(gx, x.shape) if flat else gx,)


@defgrad("cumprod", save_result=True)
def _(g, res, x, axis=None, dtype=None, out=None, *, dim=None):
    return _cumprod_grad(g, res, x, axis if dim is None else dim, False, "cumprod")


@defgrad("cumulative_prod", save_result=True)
def _(g, res, x, *, axis=None, dtype=None, include_initial=False, out=None, dim=None):
    return _cumprod_grad(g, res, x, axis if dim is None else dim, include_initial,
                         "cumulative_prod")


# ---------------------------------------------------------------- NaN-aware reductions
# (NumPy wrappers: f(x, /, *args, axis=None, dim=None, keepdims=None, keepdim=None, **kwargs))

def _nan_setup(g, x, axis, dim, keepdims, keepdim, opname):
    axis, keepdims = _pick(axis, dim, keepdims, keepdim)
    axes = _axes(x, axis, opname)
    return axes, _keep(g, x.shape, axes, keepdims)


def _valid(x, where):
    v = ~E.isnan(_detach(x))
    if where is not None:
        v = v & E.asarray(where)
    return v


@defgrad("nansum")
def _(g, res, x, *args, axis=None, dim=None, keepdims=None, keepdim=None, **kw):
    axes, gk = _nan_setup(g, x, axis, dim, keepdims, keepdim, "nansum")
    return (gk * _valid(x, kw.get("where")).astype(_real_dtype(g.dtype)),)


@defgrad("nanmean")
def _(g, res, x, *args, axis=None, dim=None, keepdims=None, keepdim=None, **kw):
    axes, gk = _nan_setup(g, x, axis, dim, keepdims, keepdim, "nanmean")
    v = _valid(x, kw.get("where"))
    return (gk * _weights(v, E.sum(v, axis=axes, keepdims=True), g.dtype),)


def _nanvar_parts(x, axes, kw):
    ddof = kw.get("correction")
    if ddof is None:
        ddof = kw.get("ddof", 0) or 0
    v = _valid(x, kw.get("where"))
    cnt = E.sum(v, axis=axes, keepdims=True)
    xz = E.where(v, x, 0)
    m = E.sum(xz, axis=axes, keepdims=True) / E.maximum(cnt, 1).astype(_real_dtype(x.dtype))
    d = E.where(v, x - m, 0)
    n = (cnt - ddof).astype(_real_dtype(x.dtype))
    return d, n, v


@defgrad("nanvar")
def _(g, res, x, *args, axis=None, dim=None, keepdims=None, keepdim=None, **kw):
    axes, gk = _nan_setup(g, x, axis, dim, keepdims, keepdim, "nanvar")
    d, n, v = _nanvar_parts(x, axes, kw)
    with np.errstate(divide="ignore", invalid="ignore"):
        return (E.where(v, gk * d * (2.0 / n), 0),)


@defgrad("nanstd", save_result=True)
def _(g, res, x, *args, axis=None, dim=None, keepdims=None, keepdim=None, **kw):
    axes, gk = _nan_setup(g, x, axis, dim, keepdims, keepdim, "nanstd")
    d, n, v = _nanvar_parts(x, axes, kw)
    rk = _keep(res, x.shape, axes, bool(keepdims if keepdim is None else keepdim))
    with np.errstate(divide="ignore", invalid="ignore"):
        return (E.where(v, _std_scale(gk, rk) * d / n, 0),)


@defgrad("nanprod", save_result=True)
def _(g, res, x, *args, axis=None, dim=None, keepdims=None, keepdim=None, **kw):
    axes, gk = _nan_setup(g, x, axis, dim, keepdims, keepdim, "nanprod")
    rk = _keep(res, x.shape, axes, bool(keepdims if keepdim is None else keepdim))
    v = _valid(x, None)
    xs = E.where(v, x, 1)
    return (_prod_grad(gk, rk, xs, axes) * v.astype(_real_dtype(g.dtype)),)


def _nan_extreme(g, res, x, axis, dim, keepdims, keepdim, opname):
    axes, gk = _nan_setup(g, x, axis, dim, keepdims, keepdim, opname)
    rk = _keep(_detach(res), x.shape, axes, bool(keepdims if keepdim is None else keepdim))
    return gk * _extreme_weights(_detach(x), rk, axes, nan_wins=False)


@defgrad("nanmax", save_result=True)
def _(g, res, x, *args, axis=None, dim=None, keepdims=None, keepdim=None, **kw):
    return (_nan_extreme(g, res, x, axis, dim, keepdims, keepdim, "nanmax"),)


@defgrad("nanmin", save_result=True)
def _(g, res, x, *args, axis=None, dim=None, keepdims=None, keepdim=None, **kw):
    return (_nan_extreme(g, res, x, axis, dim, keepdims, keepdim, "nanmin"),)


@defgrad("ptp")
def _(g, res, x, *args, axis=None, dim=None, keepdims=None, keepdim=None, **kw):
    axes, gk = _nan_setup(g, x, axis, dim, keepdims, keepdim, "ptp")
    xd = _detach(x)
    if not axes or x.size == 0:
        return (E.zeros(x.shape, dtype=g.dtype),)
    wmax = _extreme_weights(xd, E.max(xd, axis=axes, keepdims=True), axes)
    wmin = _extreme_weights(xd, E.min(xd, axis=axes, keepdims=True), axes)
    return (gk * (wmax - wmin),)


# ---------------------------------------------------------------- average

@defgrad("average")
def _(g, res, x, *args, axis=None, dim=None, keepdims=None, keepdim=None, **kw):
    # The weights are constants: they are a keyword argument of the NumPy wrapper,
    # which the engine does not record (no gradient flows to them).
    if isinstance(g, tuple):            # returned=True: (average, sum of weights)
        g = g[0]
    axis, kd = _pick(axis, dim, keepdims, keepdim)
    axes = _axes(x, axis, "average")
    gk = _keep(g, x.shape, axes, kd)
    w = kw.get("weights")
    if w is None:
        return (E.broadcast_to(gk / max(_count(x.shape, axes), 1), x.shape),)
    w = _detach(w)
    if w.shape != x.shape:
        # 1-D (or axes-shaped) weights: laid along the reduced axes, as NumPy does
        order = np.argsort(normalize_axis_tuple(axis, x.ndim, "average"))
        w = E.permute_dims(w, tuple(int(i) for i in order)) if w.ndim > 1 else w
        w = E.reshape(w, tuple(s if i in axes else 1 for i, s in enumerate(x.shape)))
    w = w.astype(_real_dtype(g.dtype)) if dtype_kind(w.dtype) != "c" else w
    scl = E.sum(E.broadcast_to(w, x.shape), axis=axes, keepdims=True)
    return (gk * _conj(w / scl),)


# ---------------------------------------------------------------- median, quantile, percentile

_QUANTILE_METHODS = ("linear", "lower", "higher", "nearest", "midpoint")


def _quantile_grad(g, x, q, axis, method, nan, opname, scale=1.0):
    """The gradient goes to the (one or two) order statistics each quantile interpolates:
    with h = q (n - 1), lo = floor(h), t = h - lo, weight 1 - t to the element of rank lo
    and t to the element of rank lo + 1 (ranks by a stable sort, NaNs last)."""
    if method not in _QUANTILE_METHODS:
        raise NotImplementedError(f"{opname}: no gradient for method={method!r} (supported: "
                                  f"{', '.join(_QUANTILE_METHODS)})")
    shape = x.shape
    xd = _detach(x)
    if xd.ndim == 0:
        xd = E.reshape(xd, (1,))
    axes = tuple(range(xd.ndim)) if axis is None else axes_of(axis, xd.ndim, opname)
    xm, info = _to_last(xd, axes)
    last = xm.ndim - 1
    rank = E.argsort(E.argsort(xm, axis=last), axis=last)
    dt = _real_dtype(g.dtype)
    qa = np.asarray(q.detach().cpu() if isinstance(q, E.ndarray) else q, dtype=np.float64) / scale
    qf = E.asarray(qa.reshape((-1,) + (1,) * xm.ndim), dtype=np.float64)
    if nan:
        nv = E.sum(~E.isnan(xm), axis=last, keepdims=True).astype(np.float64)
    else:
        nv = E.full((1,) * xm.ndim, float(xm.shape[last]), dtype=np.float64)
    top = E.maximum(nv - 1, 0)
    h = qf * top
    if method == "linear":
        lo = E.floor(h)
        t = h - lo
    elif method == "midpoint":
        lo = E.floor(h)
        t = E.where(lo == h, 0.0, 0.5)
    elif method == "lower":
        lo, t = E.floor(h), E.zeros_like(h)
    elif method == "higher":
        lo, t = E.ceil(h), E.zeros_like(h)
    else:  # nearest (NumPy rounds half to even)
        lo, t = E.round(h), E.zeros_like(h)
    lo = E.minimum(E.maximum(lo, 0), top)
    hi = E.minimum(lo + 1, top)
    rk = rank.astype(np.float64)
    w = (1 - t) * (rk == lo).astype(np.float64) + t * (rk == hi).astype(np.float64)
    w = (w * (nv > 0).astype(np.float64)).astype(dt)       # (m, kept..., N)
    gq = E.reshape(g, (w.shape[0],) + xm.shape[:-1] + (1,))
    gx = E.reshape(_from_last(E.sum(gq * w, axis=0), info), shape)
    if not (getattr(q, "requires_grad", False) and method == "linear"):
        return (gx,)
    # d/dq of the linear interpolation: (n - 1) (x[ceil(h)] - x[floor(h)]), as PyTorch (0
    # where h = q (n - 1) is a whole number)
    hi = E.minimum(E.ceil(h), top)
    xv = xm.astype(np.float64)
    zero = E.zeros((), dtype=np.float64)

    def at(r):
        return E.sum(E.where(rk == r, xv, zero), axis=last + 1, keepdims=True)
    slope = ((at(hi) - at(lo)) * top / scale).astype(dt)
    dq = E.sum(E.reshape(gq * slope, (w.shape[0], -1)), axis=1)
    return gx, E.reshape(dq, q.shape)


@defgrad("median")
def _(g, res, x, *args, axis=None, dim=None, keepdims=None, keepdim=None, **kw):
    return _quantile_grad(g, x, 0.5, axis if dim is None else dim, "linear", False,
                          "median")


@defgrad("nanmedian")
def _(g, res, x, *args, axis=None, dim=None, keepdims=None, keepdim=None, **kw):
    return _quantile_grad(g, x, 0.5, axis if dim is None else dim, "linear", True,
                          "nanmedian")


@defgrad("quantile")
def _(g, res, x, q, axis=None, *, method="linear", keepdims=False, dim=None, keepdim=None):
    return _quantile_grad(g, x, q, axis if dim is None else dim, method, False,
                          "quantile")


@defgrad("percentile")
def _(g, res, x, q, axis=None, *, method="linear", keepdims=False, dim=None, keepdim=None):
    return _quantile_grad(g, x, q, axis if dim is None else dim, method, False,
                          "percentile", 100.0)


@defgrad("nanquantile")
def _(g, res, x, q, axis=None, *, method="linear", keepdims=False):
    return _quantile_grad(g, x, q, axis, method, True, "nanquantile")


@defgrad("nanpercentile")
def _(g, res, x, q, axis=None, *, method="linear", keepdims=False):
    return _quantile_grad(g, x, q, axis, method, True, "nanpercentile", 100.0)


# ---------------------------------------------------------------- diff

def _along(a, ax):
    """Length a prepend/append value adds along the axis (a scalar or 0-d array: 1)."""
    if a is None:
        return 0
    shape = a.shape if hasattr(a, "shape") else np.shape(a)
    return 1 if len(shape) == 0 else shape[ax]


@defgrad("diff", save_args=False)
def _(g, res, x, n=1, axis=-1, prepend=None, append=None, *, dim=None):
    ax = axes_of(axis if dim is None else dim, x.ndim, "diff")[0]
    if n == 0:                      # x itself (prepend/append unused, as in NumPy)
        return g, None, None, None, None
    # diff is linear: its adjoint is (-diff of the zero-padded gradient), n times
    h = g
    p, L = _along(prepend, ax), x.shape[ax]
    if g.shape[ax] == 0:            # n >= the joined length: an empty result, zero gradients
        shape = list(g.shape)
        shape[ax] = p + L + _along(append, ax)
        h = E.zeros(tuple(shape), dtype=g.dtype)
    else:
        for _ in range(n):
            h = -E.diff(h, axis=ax, prepend=0, append=0)
    gx = _slice_axis(h, ax, slice(p, p + L))
    tracked = lambda a: getattr(a, "requires_grad", False)      # noqa: E731
    gp = _slice_axis(h, ax, slice(0, p)) if tracked(prepend) else None
    ga = _slice_axis(h, ax, slice(p + L, None)) if tracked(append) else None
    return gx, None, None, gp, ga
