"""Core ops on GPU arrays: advanced indexing (get, set, scatter-add of gradients),
device transfers as a differentiable op, matrix products through cuBLAS, and
``spacing`` (the one public op CuPy has no function for).

Index arrays are bounds-checked: CuPy's fancy indexing wraps out-of-range
indices around silently, which would be a wrong answer, not an error.  Reads
(``x[idx]``, and the scatter-adds into fresh arrays) queue the check and raise at
the next synchronisation (ember.cuda._checks); a write into an existing array
(``x[idx] = v``) waits for its check first, so a bad index never lands in it.
"""
import numpy as np

from ember._core.array import ndarray
from ember._core.util import check_index_add as _check_index_add
from ember.cuda import _runtime as R
from ember.cuda._gemm import mm
from ember.cuda import _checks
from ember.cuda._dispatch import gpu_op, cupy_call
from ember._core.dtypes import dtype_kind, BFLOAT16


def _key(key, x, wait=False, check=True):
    """The indexing key with ember arrays as CuPy arrays (host index arrays are
    copied to x's device), with the range checks of its integer indices queued (or,
    with `wait`, done at once; `check=False` skips them: the indices were checked by the
    op whose gradient this is)."""
    c = R.cp()
    if not isinstance(key, tuple):
        key = (key,)
    out = []
    axis = 0
    for k in key:
        if isinstance(k, ndarray):
            ck = R.as_cupy(k) if k.is_cuda else c.asarray(R._array._numpy(k))
        elif isinstance(k, (list, np.ndarray, np.bool_)):
            arr = np.asarray([e.item() if isinstance(e, ndarray) else e for e in k]
                             if isinstance(k, list) else k)
            ck = c.asarray(arr) if dtype_kind(arr.dtype) in "biu" else k
        else:
            ck = k
        if isinstance(ck, c.ndarray):
            if dtype_kind(ck.dtype) in "iu":
                if check:
                    _check_range(ck, x.shape[axis] if axis < x.ndim else 0, axis, x.shape,
                                 wait)
                axis += 1
            elif dtype_kind(ck.dtype) == "b":
                axis += max(ck.ndim, 1) if ck.ndim else 0
            else:
                raise IndexError(f"index: arrays used as indices must be of integer or "
                                 f"boolean type, got {ck.dtype}")
        elif k is None:
            pass
        elif k is Ellipsis:
            axis = x.ndim - sum(1 for e in key[key.index(Ellipsis) + 1:]
                                if e is not None and not (hasattr(e, "dtype") and
                                                          dtype_kind(np.dtype(e.dtype)) == "b"))
        else:
            axis += 1
        out.append(ck)
    return tuple(out)


def _range_error(idx, n, axis, shape):
    """The CPU's IndexError for the first index of idx outside [-n, n)."""
    lo, hi = int(idx.min()), int(idx.max())
    if lo >= -n and hi < n:            # the indices were overwritten since the op ran
        return IndexError(f"index: an index was out of bounds for axis {axis} with size {n} "
                          f"(array shape {tuple(shape)})")
    bad = hi if hi >= n else lo
    return IndexError(f"index: index {bad} is out of bounds for axis {axis} with size {n} "
                      f"(array shape {tuple(shape)})")


def _check_range(idx, n, axis, shape, wait=False):
    """Check idx against an axis of size n: queued for the next synchronisation (CuPy
    wraps a bad index around, so reading through it is safe meanwhile), or at once with
    `wait` (for writes into an existing array, which a wrapped index would corrupt)."""
    if idx.size == 0 or not _checks.checks_enabled():
        return
    flag = R.cp().any((idx < -n) | (idx >= n))
    if wait:
        if bool(flag):
            raise _range_error(idx, n, axis, shape)
        return
    _checks.defer(flag, lambda: _range_error(idx, n, axis, shape))


@R.on_arrays_device
def getitem_advanced(x, key):
    """x[key] with integer / boolean index arrays (a copy), on x's GPU."""
    k = _key(key, x)
    try:
        res = R.as_cupy(x)[k]
    except IndexError as e:
        raise IndexError(f"index: {e} (array shape {tuple(x.shape)})") from None
    return R.from_cupy(res)


@R.on_arrays_device
def setitem_advanced(x, key, value):
    """x[key] = value with index arrays, written into x's GPU memory."""
    c = R.cp()
    if isinstance(value, ndarray):
        value = R.as_cupy(value) if value.is_cuda else c.asarray(R._array._numpy(value))
    elif not isinstance(value, (bool, int, float, complex)):
        value = c.asarray(np.asarray(value))
    k = _key(key, x, wait=True)
    try:
        R.as_cupy(x)[k] = value
    except (IndexError, ValueError) as e:
        raise type(e)(f"index assignment: {e} (array shape {tuple(x.shape)})") from None


@gpu_op("_index_add_into")
def _index_add_into(g, key, shape, dtype):
    """zeros(shape)[key] += g with repeated indices accumulating (atomics)."""
    z = R.zeros(shape, dtype, g.get_device())
    cz = R.as_cupy(z)
    cg = R.as_cupy(g) if isinstance(g, ndarray) else g
    k = _key(key, z, check=False)      # getitem's indices: its forward checked them
    if all(not isinstance(e, R.cp().ndarray) for e in k):
        cz[k] += cg                 # basic indexing: no repeats possible
    else:
        R.cp().add.at(cz, k, cg)    # atomics: repeated indices accumulate
    return z


@gpu_op("_to_device")
def to_device(x, device):
    return R.transfer(x, device)


@gpu_op("matmul")
def matmul(a, b, /, *, out=None):
    """Matrix product through cuBLAS (ember.cuda._gemm), with NumPy's broadcasting rules."""
    c = R.cp()
    ca = R.as_cupy(a) if isinstance(a, ndarray) else c.asarray(a)
    cb = R.as_cupy(b) if isinstance(b, ndarray) else c.asarray(b)
    if ca.ndim == 0 or cb.ndim == 0:
        raise ValueError(f"matmul: input operand does not have enough dimensions (shapes "
                         f"{tuple(ca.shape)} and {tuple(cb.shape)}); use * for scalars")
    k1 = ca.shape[-1]
    k2 = cb.shape[-2] if cb.ndim > 1 else cb.shape[0]
    if k1 != k2:
        raise ValueError(f"matmul: shapes {tuple(ca.shape)} and {tuple(cb.shape)} do not "
                         f"match: {k1} (last axis of the first) != {k2}")
    if ca.dtype != cb.dtype:
        dt = np.result_type(ca.dtype, cb.dtype)
        ca, cb = ca.astype(dt), cb.astype(dt)
    if out is not None:
        mm(ca, cb, out=R.as_cupy(out))
        out._bump_version()
        return out
    return R.from_cupy(mm(ca, cb))


def _index_arg(index, device):
    """An array argument (ember, NumPy or list) as a CuPy array on `device` (dtype
    unchecked): host data is read with ember's dtype rules and copied there."""
    if isinstance(index, ndarray) and index.is_cuda:
        return R.as_cupy(index)
    host = index if isinstance(index, ndarray) else R._array._wrap(index)
    return R.as_cupy(R.from_host(R._array._numpy(host), device.index))


@gpu_op("index_add")
def index_add(x, axis, index, source, *, alpha=1, dim=None):
    """A copy of x with alpha * source added at index along axis (atomics on the GPU)."""
    from ember._core.util import normalize_axis
    if dim is not None:
        axis = dim
    ax = normalize_axis(axis, x.ndim, "index_add")
    idx = _index_arg(index, x.device)
    src = source if isinstance(source, ndarray) else R.from_host(np.asarray(source),
                                                                 x.get_device())
    _check_index_add(x, ax, idx, src)
    idx = idx.reshape(-1).astype(np.int64, copy=False)
    n = x.shape[ax] if x.ndim else 1
    _check_range(idx, n, ax, x.shape)
    out = x.copy()
    co = R.as_cupy(out)
    cs = R.as_cupy(src)
    if alpha != 1:
        cs = cs * alpha
    cs = cs.astype(x.dtype, copy=False)
    if x.ndim == 0:
        co, key, cs = co.reshape(1), idx, cs.reshape(-1)
    else:
        key = (slice(None),) * ax + (idx,)
    R.cp().add.at(co, key, cs)
    return out


@gpu_op("scatter_add")
def scatter_add(x, axis, index, src):
    """A copy of x with src added at positions `index` along axis (atomics on the GPU)."""
    from ember._core.util import normalize_axis
    ax = normalize_axis(axis, x.ndim, "scatter_add")
    idx = _index_arg(index, x.device)
    if dtype_kind(idx.dtype) not in "iu" and idx.size:
        raise IndexError(f"scatter_add: index must hold integers, got dtype {idx.dtype}")
    idx = idx.astype(np.int64, copy=False)
    s = R.as_cupy(src) if isinstance(src, ndarray) else R.cp().asarray(np.asarray(src))
    if idx.shape != s.shape:
        raise ValueError(f"scatter_add: index shape {tuple(idx.shape)} must match src shape "
                         f"{tuple(s.shape)}")
    _check_range(idx, x.shape[ax], ax, x.shape)
    out = x.copy()
    R.cp().add.at(R.as_cupy(out), along_axis_key(idx, ax), s.astype(x.dtype, copy=False))
    return out


def along_axis_key(idx, ax):
    """The fancy-index key that addresses idx's positions along axis ax (open grids on
    the other axes): NumPy's form of scatter_add and put_along_axis."""
    c = R.cp()
    key = [c.arange(d).reshape((1,) * i + (d,) + (1,) * (idx.ndim - i - 1))
           for i, d in enumerate(idx.shape)]
    key[ax] = idx
    return tuple(key)


# ---------------------------------------------------------------- linalg long tail
# (linalg.diagonal, trace, outer, vector_norm and vecdot have no entry here: their own
# definitions run on GPU arrays, see ember/linalg.py and ember/_api/linalg_ops.py)

@gpu_op("linalg.tensordot")
def linalg_tensordot(x1, x2, /, *, axes=2):
    """CuPy's tensordot, as ``ember.tensordot`` on GPU arrays (the same function under
    the linalg name, which CuPy's linalg lacks)."""
    return cupy_call("tensordot", (x1, x2), {"axes": axes})


@gpu_op("linalg.multi_dot")
def multi_dot(arrays):
    """The matrices' product, left to right, through this module's cuBLAS matmul."""
    arrays = list(arrays)
    if len(arrays) < 2:
        raise ValueError("multi_dot: expecting at least two arrays")
    res = arrays[0]
    for a in arrays[1:]:
        res = matmul(res, a)
    return res


@gpu_op("linalg.matrix_norm")
def matrix_norm(x, /, ord="fro", axis=None, keepdims=False, *, dim=None, keepdim=None):
    from ember._core.util import norm_axis_args, matrix_axes
    axis, keepdims = norm_axis_args(axis, dim, keepdims, keepdim, "matrix_norm")
    axis = matrix_axes((-2, -1) if axis is None else axis, "matrix_norm")
    res = R.cp().linalg.norm(R.as_cupy(x), ord=ord, axis=axis, keepdims=keepdims)
    return R.from_cupy(res)


@gpu_op("linalg.svdvals")
def svdvals(x, /):
    return R.from_cupy(R.cp().linalg.svd(R.as_cupy(x), compute_uv=False))


def spacing_of(xp, c):
    """NumPy's ``spacing`` of float array c with array module xp (CuPy here; NumPy
    reproduces it in the tests): the gap from c to the next representable value
    away from zero, NaN at +-inf.  The quirks of the host's loops are kept: +0 and
    -0 step up, except in bfloat16 (ml_dtypes steps -0 down); float16 always
    steps towards +inf whatever the sign."""
    inf = xp.asarray(np.inf, dtype=c.dtype)
    if c.dtype == np.float16:
        direction = xp.broadcast_to(inf, c.shape)
    elif c.dtype == BFLOAT16:
        direction = xp.where(xp.signbit(c), -inf, inf)
    else:
        direction = xp.where(c < 0, -inf, inf)
    gap = xp.nextafter(c, direction.astype(c.dtype)) - c
    return xp.where(xp.isinf(c), xp.asarray(np.nan, dtype=c.dtype), gap).astype(c.dtype)


@gpu_op("spacing")
def spacing(x):
    c = R.as_cupy(x)
    out_dt = np.spacing(np.zeros(1, c.dtype)).dtype      # NumPy's choice (ints: float)
    return R.from_cupy(spacing_of(R.cp(), c.astype(out_dt, copy=False)))
