"""NumPy protocols: what happens when NumPy functions meet ember arrays.

``numpy.exp(x)`` (a ufunc) and ``numpy.sum(x)`` / ``numpy.concatenate([x])``
(functions) return ember arrays: ember's own implementation runs when it has
one with that name, otherwise NumPy runs on zero-copy views and array results
are wrapped back.
"""
import numpy as np

from ember._core.array import ndarray
from ember._api._util import numpy_view, wrap
from ember._core.public import ops as _public_ops

# the functions here run unchanged on GPU arrays (views, ember ops, fresh arrays): the GPU
# dispatch (ember/cuda/_dispatch.py) runs them there when no GPU kernel is registered
DEVICE_GENERIC = True

__all__ = []


def _to_numpy(obj):
    if isinstance(obj, ndarray):
        return numpy_view(obj)
    if isinstance(obj, (list, tuple)):
        conv = [_to_numpy(o) for o in obj]
        return type(obj)(conv) if isinstance(obj, list) else tuple(conv)
    if isinstance(obj, dict):
        return {k: _to_numpy(v) for k, v in obj.items()}
    return obj


def _to_ember(obj):
    if isinstance(obj, np.ndarray):
        return wrap(obj)
    if isinstance(obj, tuple):
        return tuple(_to_ember(o) for o in obj)
    if isinstance(obj, list):
        return [_to_ember(o) for o in obj]
    return obj


def _array_ufunc(ufunc, method, inputs, kwargs):
    """``numpy.<ufunc>(..., ember arrays ...)``: ember computes plain calls of its own
    ufuncs; everything else (methods, other ufuncs, keywords ember lacks, NumPy
    outputs) runs NumPy on zero-copy views, and array results come back as ember
    arrays (NumPy scalars stay scalars, a NumPy ``out=`` stays NumPy's)."""
    ember = _public_ops()
    ours = getattr(ember, ufunc.__name__, None)
    if method == "__call__" and isinstance(ours, ember.ufunc) and ours.nin == ufunc.nin \
            and kwargs.get("where", True) is True:
        kw = dict(kwargs)
        kw.pop("where", None)
        out = kw.pop("out", None)
        if isinstance(out, tuple):
            out = out[0] if len(out) == 1 else out
        dtype = kw.pop("dtype", None)
        if kw.get("casting", "same_kind") == "same_kind":
            kw.pop("casting", None)
        if not kw and (out is None or isinstance(out, ndarray)):
            return ours(*inputs, out=out, dtype=dtype)
    return _run_numpy(ufunc, method, inputs, kwargs)


def _run_numpy(ufunc, method, inputs, kwargs):
    np_inputs = _to_numpy(list(inputs))
    np_kwargs = _to_numpy(kwargs)
    if "out" in np_kwargs and not isinstance(np_kwargs["out"], tuple) and np_kwargs["out"] is not None:
        np_kwargs["out"] = (np_kwargs["out"],)
    res = getattr(ufunc, method)(*np_inputs, **np_kwargs)
    for a in inputs:                    # ufunc.at writes into its first operand
        if method == "at" and isinstance(a, ndarray):
            a._bump_version()
            break
    if "out" in kwargs and kwargs["out"] is not None:
        out = kwargs["out"]
        for o in (out if isinstance(out, tuple) else (out,)):
            if isinstance(o, ndarray):
                o._bump_version()
        return out[0] if isinstance(out, tuple) and len(out) == 1 else out
    return _to_ember(res)


def _array_function(func, types, args, kwargs):
    ember = _public_ops()
    name = func.__name__
    module = getattr(func, "__module__", "") or ""
    ours = None
    if module in ("numpy", "numpy.core.fromnumeric", "numpy._core.fromnumeric") or module.startswith("numpy"):
        if module.startswith("numpy.linalg"):
            ours = getattr(ember.linalg, name, None)
        elif module.startswith("numpy.fft"):
            ours = getattr(ember.fft, name, None)
        elif module == "numpy" or module.startswith("numpy._core") or module.startswith("numpy.lib") \
                or module.startswith("numpy.core"):
            ours = getattr(ember, name, None)
    if callable(ours) and not isinstance(ours, type):
        try:
            return ours(*args, **kwargs)
        except TypeError:
            pass            # a keyword NumPy has and ember does not: let NumPy run it
    res = func._implementation(*_to_numpy(list(args)), **_to_numpy(kwargs)) \
        if hasattr(func, "_implementation") else func(*_to_numpy(list(args)), **_to_numpy(kwargs))
    return _to_ember(res)
