"""Core ops on GPU arrays: advanced indexing (get, set, scatter-add of gradients),
device transfers as a differentiable op, and matrix products through cuBLAS.

Index arrays are bounds-checked before use: CuPy's fancy indexing wraps
out-of-range indices around silently, which would be a wrong answer, not an
error.  The check reads two numbers back from the GPU, so it waits for it.
"""
import numpy as np

from ember._core.array import ndarray
from ember.autograd import inplace as _inplace
from ember.cuda import _runtime as R
from ember.cuda._dispatch import gpu_op


def _key(key, x):
    """The indexing key with ember arrays as CuPy arrays (host index arrays are
    copied to x's device), after checking integer indices are in range."""
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
            ck = c.asarray(arr) if arr.dtype.kind in "biu" else k
        else:
            ck = k
        if isinstance(ck, c.ndarray):
            if ck.dtype.kind in "iu":
                _check_range(ck, x.shape[axis] if axis < x.ndim else 0, axis, x.shape)
                axis += 1
            elif ck.dtype.kind == "b":
                axis += max(ck.ndim, 1) if ck.ndim else 0
            else:
                raise IndexError(f"index: arrays used as indices must be of integer or "
                                 f"boolean type, got {ck.dtype}")
        elif k is None:
            pass
        elif k is Ellipsis:
            axis = x.ndim - sum(1 for e in key[key.index(Ellipsis) + 1:]
                                if e is not None and not (hasattr(e, "dtype") and
                                                          np.dtype(e.dtype).kind == "b"))
        else:
            axis += 1
        out.append(ck)
    return tuple(out)


def _check_range(idx, n, axis, shape):
    if idx.size == 0:
        return
    lo, hi = int(idx.min()), int(idx.max())
    if lo < -n or hi >= n:
        bad = hi if hi >= n else lo
        raise IndexError(f"index: index {bad} is out of bounds for axis {axis} with size {n} "
                         f"(array shape {tuple(shape)})")


def getitem_advanced(x, key):
    """x[key] with integer / boolean index arrays (a copy), on x's GPU."""
    k = _key(key, x)
    try:
        res = R.as_cupy(x)[k]
    except IndexError as e:
        raise IndexError(f"index: {e} (array shape {tuple(x.shape)})") from None
    return R.from_cupy(res)


def setitem_advanced(x, key, value):
    """x[key] = value with index arrays, written into x's GPU memory."""
    c = R.cp()
    if isinstance(value, ndarray):
        value = R.as_cupy(value) if value.is_cuda else c.asarray(R._array._numpy(value))
    elif not isinstance(value, (bool, int, float, complex)):
        value = c.asarray(np.asarray(value))
    k = _key(key, x)
    try:
        R.as_cupy(x)[k] = value
    except (IndexError, ValueError) as e:
        raise type(e)(f"index assignment: {e} (array shape {tuple(x.shape)})") from None


gpu_op("_getitem")(_inplace._getitem)
gpu_op("_setitem_value")(_inplace._setitem_value)


@gpu_op("_index_add_into")
def _index_add_into(g, key, shape, dtype):
    """zeros(shape)[key] += g with repeated indices accumulating (atomics)."""
    z = R.zeros(shape, dtype, g.get_device())
    cz = R.as_cupy(z)
    cg = R.as_cupy(g) if isinstance(g, ndarray) else g
    k = _key(key, z)
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
    """Matrix product through cuBLAS (cupy.matmul), with NumPy's broadcasting rules."""
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
        c.matmul(ca, cb, out=R.as_cupy(out))
        out._bump_version()
        return out
    return R.from_cupy(c.matmul(ca, cb))
