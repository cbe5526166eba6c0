"""Gradient clipping: clip_grad_norm_, clip_grad_value_, get_total_norm, clip_grads_with_norm_.

>>> import ember
>>> from ember import nn
>>> p = nn.Parameter(ember.zeros(2)); p.grad = ember.asarray([3.0, 4.0])
>>> float(nn.utils.clip_grad_norm_([p], max_norm=1.0))
5.0
>>> [round(v, 4) for v in p.grad.tolist()]
[0.6, 0.8]
"""
import math

import numpy as np

from ember._core.array import ndarray
from ember._api._util import numpy_view
from ember._kernels.cpu.gemm import one_blas_thread
from ember._core.dtypes import dtype_kind

__all__ = ["clip_grad_norm_", "clip_grad_norm", "clip_grad_value_", "get_total_norm",
           "clip_grads_with_norm_"]


def _as_list(parameters):
    if isinstance(parameters, ndarray):
        return [parameters]
    return list(parameters)


def _grads(parameters):
    return [p.grad for p in _as_list(parameters) if p.grad is not None]


def get_total_norm(tensors, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """The `norm_type`-norm of all `tensors` together (as if concatenated), as a 0-d
    float array (``inf`` for the max norm).

    >>> import ember
    >>> from ember import nn
    >>> float(nn.utils.get_total_norm([ember.asarray([3.0]), ember.asarray([4.0])]))
    5.0
    """
    import ember
    tensors = _as_list(tensors)
    norm_type = float(norm_type)
    if not tensors:
        return ember.asarray(0.0)
    dtype = tensors[0].dtype
    if tensors[0].is_cuda:
        return _total_norm_on_device(tensors, norm_type, error_if_nonfinite, dtype)
    with ember.no_grad():
        if norm_type == math.inf:
            total = max(float(np.max(np.abs(numpy_view(t)))) if t.size else 0.0 for t in tensors)
        elif norm_type == -math.inf:
            total = min(float(np.min(np.abs(numpy_view(t)))) for t in tensors if t.size)
        else:
            acc = 0.0
            for t in tensors:
                v = numpy_view(t).reshape(-1) if t.is_contiguous() else numpy_view(t).ravel()
                if norm_type == 2.0:
                    # float64 accumulation; dot of a float32 vector with itself is BLAS sdot
                    if dtype_kind(v.dtype) == "f":
                        with one_blas_thread:
                            acc += float(np.dot(v, v))
                    else:
                        acc += float(np.sum(np.abs(v) ** 2))
                elif norm_type == 1.0:
                    acc += float(np.sum(np.abs(v), dtype=np.float64))
                elif norm_type == 0.0:
                    acc += float(np.count_nonzero(v))
                else:
                    acc += float(np.sum(np.abs(v).astype(np.float64) ** norm_type))
            if norm_type in (0.0, 1.0):
                total = acc
            else:
                total = acc ** (1.0 / norm_type)
    if error_if_nonfinite and not math.isfinite(total):
        raise RuntimeError(f"The total norm of order {norm_type} for gradients from "
                           f"`parameters` is non-finite, so it cannot be clipped. To disable "
                           f"this error and scale the gradients by the non-finite norm anyway, "
                           f"set `error_if_nonfinite=False`")
    return ember.asarray(total, dtype=dtype)


def _total_norm_on_device(tensors, norm_type, error_if_nonfinite, dtype):
    """get_total_norm of GPU arrays: per-array norms on the GPU, one value read back
    only when error_if_nonfinite asks for a check."""
    import ember
    with ember.no_grad():
        norms = ember.stack([ember.linalg.vector_norm(t.astype(ember.float64), ord=norm_type)
                             for t in tensors])
        total = ember.linalg.vector_norm(norms, ord=norm_type)
    if error_if_nonfinite and not math.isfinite(total.item()):
        raise RuntimeError(f"The total norm of order {norm_type} for gradients from "
                           f"`parameters` is non-finite, so it cannot be clipped. To disable "
                           f"this error and scale the gradients by the non-finite norm anyway, "
                           f"set `error_if_nonfinite=False`")
    return total.astype(dtype)


def clip_grads_with_norm_(parameters, max_norm, total_norm, foreach=None):
    """Scale the gradients of `parameters` by ``max_norm / (total_norm + 1e-6)`` when that
    is below 1 (in place).

    >>> import ember
    >>> from ember import nn
    >>> p = nn.Parameter(ember.zeros(1)); p.grad = ember.asarray([2.0])
    >>> nn.utils.clip_grads_with_norm_([p], 1.0, 2.0); [round(v, 4) for v in p.grad.tolist()]
    [1.0]
    """
    import ember
    grads = _grads(parameters)
    if not grads:
        return
    if grads[0].is_cuda:
        # no read-back: multiply by min(coef, 1) computed on the GPU, as PyTorch does
        with ember.no_grad():
            tn = total_norm if isinstance(total_norm, ember.ndarray) else \
                ember.asarray(float(total_norm), device=grads[0].device)
            coef = ember.minimum(float(max_norm) / (tn.astype(ember.float64) + 1e-6), 1.0)
            for g in grads:
                g *= coef.astype(g.dtype)
        return
    clip_coef = float(max_norm) / (float(total_norm) + 1e-6)
    if clip_coef >= 1.0:        # PyTorch multiplies by clamp(coef, max=1): a no-op then
        return
    with ember.no_grad():
        for g in grads:
            gv = numpy_view(g)
            gv *= gv.dtype.type(clip_coef)
            g._bump_version()


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False,
                    foreach=None):
    """Scale all gradients together so that their total `norm_type`-norm is at most
    `max_norm` (in place); returns the total norm before clipping (a 0-d array).

    >>> import ember
    >>> from ember import nn
    >>> p = nn.Parameter(ember.zeros(2)); p.grad = ember.asarray([1.0, -2.0])
    >>> float(nn.utils.clip_grad_norm_([p], 10.0, norm_type="inf"))
    2.0
    """
    import ember
    if isinstance(norm_type, str):
        if norm_type.lower() != "inf":
            raise ValueError(f"clip_grad_norm_: norm_type must be a number or 'inf', got "
                             f"{norm_type!r}")
        norm_type = math.inf
    parameters = _as_list(parameters)
    grads = _grads(parameters)
    if not grads:
        return ember.asarray(0.0)
    total = get_total_norm(grads, norm_type, error_if_nonfinite, foreach)
    clip_grads_with_norm_(parameters, max_norm, total, foreach)
    return total


def clip_grad_norm(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False,
                   foreach=None):
    """Deprecated alias of ``clip_grad_norm_``.

    >>> import ember
    >>> from ember import nn
    >>> p = nn.Parameter(ember.zeros(1)); p.grad = ember.asarray([3.0])
    >>> float(nn.utils.clip_grad_norm([p], 1.0))
    3.0
    """
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)


def clip_grad_value_(parameters, clip_value, foreach=None):
    """Clamp every gradient element to [-clip_value, clip_value], in place.

    >>> import ember
    >>> from ember import nn
    >>> p = nn.Parameter(ember.zeros(2)); p.grad = ember.asarray([5.0, -0.5])
    >>> nn.utils.clip_grad_value_([p], 1.0); p.grad.tolist()
    [1.0, -0.5]
    """
    import ember
    clip_value = float(clip_value)
    with ember.no_grad():
        for g in _grads(parameters):
            gv = numpy_view(g)
            np.clip(gv, -clip_value, clip_value, out=gv)
            g._bump_version()
