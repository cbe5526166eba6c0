"""Reductions on GPU arrays.

``sum``, ``mean``, ``max``/``amax`` and ``min``/``amin`` of float16/32/64 arrays over
any set of adjacent axes (all axes included) run ember's kernels (reduce.cu):
the input is viewed as (outer, n, inner) with the reduced axes in the middle;
``inner == 1`` reduces each row with one block (warp shuffles + shared memory),
otherwise one thread per output column walks the n values with coalesced
loads; a whole-array reduction is two deterministic passes.  ``argmax`` /
``argmin`` of one axis use the arg kernels.  Every other case (other dtypes,
``where=``, scattered axes, the statistics long tail) runs CuPy's reduction of
the same name, and the result takes the dtype the host function gives, so both
devices agree.

The host functions are ember._api.reductions', which sits above this backend: it
offers itself through ember._core.gpu_hooks, and this module registers the GPU form of
each of its functions when it loads (``register_reductions``).
"""
import builtins
import functools
import math
import warnings

import numpy as np

from ember._core.util import normalize_axis_tuple, pick_axis
from ember._core import array as _array
from ember._core.array import ndarray
from ember.cuda import _runtime as R
from ember.cuda._dispatch import gpu_op, cupy_call, host_context, _IMPLS
from ember._core.dtypes import dtype_kind, BFLOAT16
from ember._core import gpu_hooks

_THREADS = 256
_KERNEL_RED = {"sum": "sum", "mean": "mean", "max": "max", "amax": "max", "min": "min",
               "amin": "min"}


def _axes(x, axis, dim, name):
    axis = pick_axis(axis, dim, name)
    return () if x.ndim == 0 else normalize_axis_tuple(axis, x.ndim, name)


def _keepdims(keepdims, keepdim):
    return bool(keepdims if keepdim is None else keepdim)


def _split(shape, axes):
    """(outer, n, inner) when the reduced axes are adjacent, else None."""
    axes = sorted(axes)
    if axes != list(range(axes[0], axes[-1] + 1)):
        return None
    outer = math.prod(shape[:axes[0]])
    n = math.prod(shape[axes[0]:axes[-1] + 1])
    inner = math.prod(shape[axes[-1] + 1:])
    return outer, n, inner


def _out_shape(shape, axes, keep):
    if keep:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def _kernel_reduce(kind, x, axes, keep):
    """ember's reduction kernel `kind` over `axes` (x float, non-empty), or None."""
    sfx = R.suffix(x.dtype)
    if sfx is None or x.size == 0 or not axes:
        return None
    shape = tuple(x.shape)
    parts = _split(shape, axes)
    if parts is None:
        # reduced axes apart ((0, 2) of 3-d): the kept axes first, in order, then the
        # reduced ones, in one contiguous copy; the kernels then reduce its rows (CuPy's
        # own reductions would not accumulate 16-bit data in float32)
        kept = [i for i in range(x.ndim) if i not in axes]
        x = x.transpose(kept + sorted(axes)).copy()
        parts = (math.prod(x.shape[:len(kept)]), math.prod(x.shape[len(kept):]), 1)
    elif not x.is_contiguous():
        x = x.copy()
    outer, n, inner = parts
    dev = x.get_device()
    y = R.empty(_out_shape(shape, axes, keep), x.dtype, dev)
    if outer * inner == 1:
        grid = builtins.min(R.blocks(n, _THREADS), 1024)
        acc = np.float64 if x.dtype == np.float64 else np.float32
        partial = R.empty((grid,), acc, dev)
        R.launch(f"ember_{kind}_{sfx}_full_pass1", grid, _THREADS, (x, partial, n))
        R.launch(f"ember_{kind}_{sfx}_full_pass2", 1, _THREADS, (partial, y, grid, n))
    elif inner == 1:
        R.launch(f"ember_{kind}_{sfx}_inner", builtins.min(outer, 65535), _THREADS,
                 (x, y, outer, n))
    else:
        R.launch(f"ember_{kind}_{sfx}_outer", R.blocks(outer * inner, _THREADS), _THREADS,
                 (x, y, outer, n, inner))
    return y


@functools.lru_cache(maxsize=4096)
def _host_dtype(name, dtype, ndim, frozen_kwargs, frozen_pos=()):
    """The dtype the host function gives for this input dtype and these options
    (run once on a tiny host array and cached)."""
    pos = tuple(np.full(p[1], 0.5) if isinstance(p, tuple) else p for p in frozen_pos)
    probe = _host_module_fn(name)(np.ones((2,) * ndim, dtype=dtype) if ndim else
                                  np.ones((), dtype=dtype), *pos, **dict(frozen_kwargs))
    res = probe[0] if isinstance(probe, tuple) else probe
    return np.dtype(res.dtype) if hasattr(res, "dtype") else None


def _host_module_fn(name):
    raw = getattr(_host, name)
    fn = getattr(raw, "__wrapped__", raw)

    def call(arr, *pos, **kw):
        # a fresh host array (nothing to record): the plain host function on it
        with warnings.catch_warnings(), host_context():
            warnings.simplefilter("ignore")
            return fn(_array._wrap(np.ascontiguousarray(arr)), *pos, **kw)
    return call


def _frozen_pos(pos):
    """Positional-only options (quantile's q) for the cached dtype probe: an array q
    stands in as ('shape', its shape) of valid values (0.5), a list as a tuple."""
    out = []
    for p in pos:
        if isinstance(p, (ndarray, np.ndarray)):
            out.append(("shape", tuple(p.shape)))
        elif isinstance(p, list):
            out.append(tuple(p))
        else:
            out.append(p)
    return tuple(out)


def _frozen(kwargs):
    items = []
    for k, v in kwargs.items():
        if isinstance(v, ndarray) or k == "out":
            continue
        if isinstance(v, list):
            v = tuple(v)
        try:
            hash(v)
        except TypeError:
            return None
        items.append((k, v))
    return tuple(sorted(items))


def _generic(name, x, kwargs, pos=()):
    """CuPy's reduction `name`, cast to the dtype the host function returns (`pos`: the
    positional-only options after x, quantile's q)."""
    if isinstance(x, ndarray) and x.is_cuda:
        fz = _frozen(kwargs)
        want = _host_dtype(name, x.dtype, x.ndim, fz, _frozen_pos(pos)) if fz is not None \
            else None
    else:
        want = None
    if "correction" in kwargs:          # the array API's name for ddof
        corr = kwargs.pop("correction")
        if corr is not None:
            kwargs["ddof"] = corr
    if "mean" in kwargs and kwargs["mean"] is None:
        kwargs.pop("mean")
    out = kwargs.pop("out", None)
    for ember_kw, numpy_kw in (("dim", "axis"), ("keepdim", "keepdims")):
        if kwargs.get(ember_kw) is not None:
            kwargs[numpy_kw] = kwargs.pop(ember_kw)
        kwargs.pop(ember_kw, None)
    if isinstance(x, ndarray) and x.is_cuda and x.dtype == BFLOAT16:
        # CuPy's NaN tests and sorts do not all know ml_dtypes' bfloat16: reduce a float32
        # copy (exact) and cast the result back to the host function's dtype below
        x = R.astype(x, np.float32)
    where, initial = kwargs.pop("where", None), kwargs.pop("initial", None)
    if where is not None or initial is not None:
        res = R.from_cupy(_where_initial(name, R.as_cupy(x), where, initial, **kwargs))
    elif name in _NAN_QUANTILES:
        res = R.from_cupy(_nan_quantile(R.as_cupy(x), *pos, scale=_NAN_QUANTILES[name],
                                        **kwargs))
    elif kwargs.get("keepdims") and not _cupy_takes(name, "keepdims"):
        kwargs.pop("keepdims")                  # (count_nonzero): reduce, then keep the axes
        res = cupy_call(name, (x,) + tuple(pos), kwargs)
        res = res.reshape(_out_shape(x.shape, normalize_axis_tuple(kwargs.get("axis"), x.ndim,
                                                                   name), True))
    else:
        res = cupy_call(name, (x,) + tuple(pos), kwargs)
    if want is not None and isinstance(res, ndarray) and res.dtype != want:
        res = R.astype(res, want)
    if out is not None:
        out[...] = res
        return out
    return res


# NumPy's where= / initial= (CuPy's reductions take neither): function, identity, combine
_WHERE_INITIAL = {"sum": ("sum", 0, "add"), "min": ("min", None, "minimum"),
                  "amin": ("min", None, "minimum"), "max": ("max", None, "maximum"),
                  "amax": ("max", None, "maximum")}


def _where_initial(name, v, where, initial, axis=None, keepdims=False, dtype=None):
    """NumPy's reduction `name` of CuPy array v with where= and initial=: elements
    outside `where` replaced by the identity (or initial), initial folded in."""
    cp = R.cp()
    if name not in _WHERE_INITIAL:
        raise TypeError(f"{name}: where= and initial= are not supported")
    fn, identity, combine = _WHERE_INITIAL[name]
    fill = identity if identity is not None else initial     # what masked elements become
    if where is not None:
        if fill is None:
            raise ValueError(f"{name}: reduction operation '{combine}' does not have an "
                             f"identity, so to use a where mask one has to specify 'initial'")
        w = R.as_cupy(where) if isinstance(where, ndarray) else cp.asarray(where)
        v = cp.where(cp.broadcast_to(w, v.shape), v, cp.asarray(fill, dtype=v.dtype))
    axes = normalize_axis_tuple(axis, v.ndim, name)
    kw = {"dtype": dtype} if fn == "sum" and dtype is not None else {}
    if any(v.shape[a] == 0 for a in axes) and fill is not None:
        like = getattr(cp, fn)(cp.zeros((1,), v.dtype), **kw)
        start = initial if initial is not None else identity
        return cp.full(_out_shape(v.shape, axes, keepdims), start, like.dtype)
    res = getattr(cp, fn)(v, axis=axis, keepdims=keepdims, **kw)
    if initial is not None:
        res = getattr(cp, combine)(res, cp.asarray(initial, dtype=res.dtype))
    return res


@functools.lru_cache(maxsize=None)
def _cupy_takes(name, keyword):
    """Whether CuPy's function `name` accepts `keyword`."""
    import inspect
    fn = getattr(R.cp(), name, None)
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return True
    return keyword in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


# CuPy has no nanquantile / nanpercentile: q scale of each
_NAN_QUANTILES = {"nanquantile": 1.0, "nanpercentile": 100.0}
# NumPy's methods (Hyndman & Fan): the continuous ones by their (alpha, beta) plotting
# positions, the virtual index of quantile q in n numbers being
# n q + alpha + q (1 - alpha - beta) - 1 ('linear' is (n - 1) q, as NumPy writes it)
_CONTINUOUS = {"interpolated_inverted_cdf": (0.0, 1.0), "hazen": (0.5, 0.5),
               "weibull": (0.0, 0.0), "median_unbiased": (1 / 3.0, 1 / 3.0),
               "normal_unbiased": (3 / 8.0, 3 / 8.0)}
_Q_METHODS = ("inverted_cdf", "averaged_inverted_cdf", "closest_observation",
              *_CONTINUOUS, "linear", "lower", "higher", "midpoint", "nearest")


def _discrete_index(cp, method, n, q):
    """The order statistic a discrete method picks (an integer index, unclipped), or
    None for the methods that interpolate."""
    if method == "lower":
        return cp.floor((n - 1) * q)
    if method == "higher":
        return cp.ceil((n - 1) * q)
    if method == "nearest":
        return cp.around((n - 1) * q)          # (halves to even, as NumPy)
    if method in ("inverted_cdf", "closest_observation"):
        v = n * q - 1 if method == "inverted_cdf" else n * q - 1.5
        lo = cp.floor(v)
        at_lo = (v - lo) == 0
        if method == "closest_observation":   # the even order statistic at a tie
            at_lo &= (lo % 2) == 1
        return cp.where(at_lo, lo, lo + 1)
    return None


def _interpolation(cp, method, n, q):
    """(lower index, upper index, weight) of an interpolating method, as NumPy's
    _quantile: past the top both neighbours are the last number (index -1), below the
    bottom both are the first, and the weight is the virtual index minus the lower one
    (NumPy's arithmetic, so that infinite neighbours give the same NaN or inf)."""
    if method == "averaged_inverted_cdf":
        v = n * q - 1
    elif method == "midpoint":
        v = 0.5 * (cp.floor((n - 1) * q) + cp.ceil((n - 1) * q))
    elif method == "linear":
        v = (n - 1) * q
    else:
        alpha, beta = _CONTINUOUS[method]
        v = n * q + (alpha + q * (1 - alpha - beta)) - 1
    lo = cp.floor(v)
    hi = lo + 1
    above, below = v >= n - 1, v < 0
    lo, hi = cp.where(above, -1.0, lo), cp.where(above, -1.0, hi)
    lo, hi = cp.where(below, 0.0, lo), cp.where(below, 0.0, hi)
    t = v - lo
    if method == "averaged_inverted_cdf":
        t = cp.where(t == 0, 0.5, 1.0)
    elif method == "midpoint":
        t = cp.where(v % 1 == 0, 0.0, 0.5)
    return lo, hi, t


def _nan_quantile(v, q, axis=None, method="linear", keepdims=False, scale=1.0):
    """NumPy's nanquantile on CuPy array v: each slice sorted (NaNs last), its count of
    numbers n, the order statistic(s) that `method` reads at q in those n numbers
    (NumPy's 13 methods); NaN for all-NaN slices."""
    cp = R.cp()
    name = "nanquantile" if scale == 1.0 else "nanpercentile"
    if method not in _Q_METHODS:
        raise ValueError(f"{name}: {method!r} is not a valid method. Use one of: "
                         f"{', '.join(_Q_METHODS)}")
    qa = cp.asarray(q, dtype=np.float64) / scale
    if bool(cp.any((qa < 0) | (qa > 1))):
        raise ValueError(f"{name}: quantiles must be in the range [0, {scale:g}]")
    work = v if dtype_kind(v.dtype) == "f" else v.astype(np.float64)
    if hasattr(q, "dtype"):             # an array q promotes as in NumPy (a float q does not)
        work = work.astype(np.result_type(work.dtype, q.dtype), copy=False)
    ndim = work.ndim
    axes = normalize_axis_tuple(axis, ndim, name)
    kept = [i for i in range(ndim) if i not in axes]
    work = work.transpose(kept + list(axes))
    work = work.reshape(work.shape[:len(kept)] + (-1,))         # (kept..., N)
    srt = cp.sort(work, axis=-1)                                # NaNs last
    n = (~cp.isnan(work)).sum(axis=-1).astype(np.float64)       # numbers per slice
    qb = qa.reshape(qa.shape + (1,) * n.ndim)                   # (q..., kept...)
    srt = cp.broadcast_to(srt, qa.shape + srt.shape)
    last = max(srt.shape[-1] - 1, 0)

    def at(i):
        # index -1 is the slice's last number (n - 1): NumPy indexes the numbers alone
        i = cp.minimum(cp.where(i < 0, n - 1, i), n - 1)
        i = cp.clip(i, 0, last).astype(np.int64)[..., None]
        return cp.take_along_axis(srt, i, axis=-1)[..., 0]
    idx = _discrete_index(cp, method, n, qb)
    if idx is not None:
        res = at(cp.maximum(idx, 0))
    else:
        lo, hi, t = _interpolation(cp, method, n, qb)
        a, b = at(lo), at(hi)
        t = t.astype(srt.dtype)
        res = cp.where(t >= 0.5, b - (b - a) * (1 - t), a + (b - a) * t)
    res = cp.where(n == 0, cp.asarray(np.nan, res.dtype), res)
    if keepdims:
        res = res.reshape(qa.shape + _out_shape(v.shape, axes, True))
    return res


def _register_generic(name):
    import inspect
    params = list(inspect.signature(getattr(_host, name)).parameters.values())[1:]
    # the required options after x (quantile's q: positional-only in the standard, by
    # name too as in NumPy) stay positional; the others go by their host names
    n_pos = 0
    for p in params:
        if p.kind is p.POSITIONAL_ONLY or (p.kind is p.POSITIONAL_OR_KEYWORD
                                           and p.default is p.empty):
            n_pos += 1
        else:
            break
    lead = [p.name for p in params[:n_pos]]
    names = [p.name for p in params[n_pos:]]

    def impl(x, *args, **kwargs):
        if len(args) < n_pos:                   # q=... given by name
            args = args + tuple(kwargs.pop(k) for k in lead[len(args):] if k in kwargs)
        pos = args[:n_pos]                      # required options (quantile's q) stay so
        kwargs.update(zip(names, args[n_pos:]))  # other options by their host names
        return _generic(name, x, kwargs, pos)
    impl.__name__ = name
    impl.via_cupy = True                # CuPy's function of this name does the work
    impl.from_host_table = True
    gpu_op(name)(impl)


def _make_fast(name):
    kind = _KERNEL_RED[name]

    def impl(x, axis=None, dtype=None, out=None, keepdims=False, *, dim=None, keepdim=None,
             initial=None, where=None):
        if dtype is None and out is None and initial is None and where is None \
                and isinstance(x, ndarray) and x.is_cuda:
            axes = _axes(x, axis, dim, name)
            res = _kernel_reduce(kind, x, axes, _keepdims(keepdims, keepdim))
            if res is not None:
                return res
        kw = {"axis": axis, "keepdims": keepdims, "dim": dim, "keepdim": keepdim}
        if name in ("sum", "mean"):
            kw["dtype"] = dtype
        elif dtype is not None:
            raise TypeError(f"{name}() got an unexpected keyword argument 'dtype'")
        if initial is not None:
            kw["initial"] = initial
        if where is not None:
            kw["where"] = where
        if out is not None:
            kw["out"] = out
        kw = {k: v for k, v in kw.items() if not (k in ("dim", "keepdim") and v is None)}
        if "dim" in kw:
            kw["axis"] = kw.pop("dim")
        if "keepdim" in kw:
            kw["keepdims"] = kw.pop("keepdim")
        return _generic(name, x, kw)
    impl.__name__ = name
    impl.via_cupy = True                # what the kernels do not cover goes to CuPy's function
    impl.from_host_table = True
    gpu_op(name)(impl)


_host = None        # ember._api.reductions


def register_reductions(host):
    """Register the GPU form of every reduction of `host` (ember._api.reductions, offered
    through ember._core.gpu_hooks): CuPy's function of the same name with the host's
    dtype (``_generic``), ember's kernels first for ``_KERNEL_RED``; the reductions this
    module implements itself (argmax...) keep theirs, and a host function declared
    ``device_generic`` (logsumexp) is its own GPU implementation."""
    global _host
    _host = host
    # an alias (amax is max) is dispatched as the op it names: nothing to register
    names = [n for n in host.__all__ if getattr(getattr(host, n), "__name__", n) == n]
    for name in names:
        if getattr(getattr(host, name), "device_generic", False):
            continue        # (logsumexp) its own definition runs on the GPU too
        impl = _IMPLS.get(name)
        if impl is None or getattr(impl, "from_host_table", False):
            _register_generic(name)
    for name in _KERNEL_RED:
        if name in names:
            _make_fast(name)


def _make_arg(name, is_max):
    def impl(x, axis=None, out=None, *, keepdims=False, dim=None, keepdim=None):
        axis = pick_axis(axis, dim, name)
        keep = _keepdims(keepdims, keepdim)
        sfx = R.suffix(x.dtype)
        if sfx is not None and out is None and axis is not None and x.ndim > 0 and x.size > 0:
            ax = normalize_axis_tuple(axis, x.ndim, name)[0]
            xc = x if x.is_contiguous() else x.copy()
            outer, n, inner = _split(x.shape, (ax,))
            y = R.empty(_out_shape(x.shape, (ax,), keep), np.int64, x.get_device())
            if inner == 1:
                R.launch(f"ember_{name}_{sfx}_inner", builtins.min(outer, 65535), _THREADS,
                         (xc, y, outer, n))
            else:
                R.launch(f"ember_{name}_{sfx}_outer", R.blocks(outer * inner, _THREADS),
                         _THREADS, (xc, y, outer, n, inner))
            return y
        kw = {"axis": axis, "keepdims": keep}
        if out is not None:
            kw["out"] = out
        return _generic(name, x, kw)
    impl.__name__ = name
    impl.via_cupy = True                # what the kernels do not cover goes to CuPy's function
    gpu_op(name)(impl)


_make_arg("argmax", True)
_make_arg("argmin", False)


register_reductions(gpu_hooks.host_functions("reductions"))
