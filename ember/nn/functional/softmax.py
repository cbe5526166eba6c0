"""softmax, log_softmax and softmin along one axis (fused kernels, PyTorch's numerics).

Each is one differentiable op: the forward and the first-order backward run
fused Cython kernels (ember._kernels.cpu.softmax); when the backward itself
is recorded (``create_graph=True``) the gradient is written with ember ops on
the saved output, so gradients of any order work.
"""

import numpy as np

import ember as _E
from ember._core.array import ndarray
from ember._core.array import _is_grad_enabled as _grad_on
from ember._api._util import as_array
from ember._kernels.cpu import softmax as _k
from ember.autograd.registry import defop
from ember._core.dtypes import is_half_dtype
from ember._core.nn_args import softmax_dim as _resolve_dim, float_input as _float_input

__all__ = ["softmax", "log_softmax", "softmin"]

_F32 = np.dtype(np.float32)


def _prepare(opname, input, dtype):
    """(input as a float array of the computing dtype, dtype to hand back or None)."""
    x = _float_input(opname, input, dtype)
    dt = x.dtype
    if is_half_dtype(dt):               # computed in float32, handed back in 16 bits
        return _k.contig(x.astype(_F32)), dt
    return _k.contig(x), None


def _forward(opname, input, dim, axis, dtype, log, stacklevel=4):
    x, back = _prepare(opname, input, dtype)
    d = _resolve_dim(opname, x.ndim, dim, axis, stacklevel)
    if x.ndim == 0:
        y = _k.softmax_forward(x.reshape(1), 0, log).reshape(())
    else:
        y = _k.softmax_forward(x, d, log)
    return y if back is None else y.astype(back)


def _backward(g, res, ndim, dim, axis, log):
    d = _resolve_dim("softmax", ndim, dim, axis, 0) if (dim is not None or axis is not None) \
        else (0 if ndim in (0, 1, 3) else 1)
    if _grad_on():
        # create_graph: the same formula with ember ops (res is part of the graph here)
        if log:
            return g - _E.exp(res) * g.sum(axis=d, keepdims=True)
        return res * (g - (g * res).sum(axis=d, keepdims=True))
    y = res
    if is_half_dtype(y.dtype) and not y.is_cuda:    # the CPU kernels: 16-bit in float32
        y = y.astype(_F32)
    if g.dtype != y.dtype:
        g = g.astype(y.dtype)
    g = _k.contig(g)
    if y.ndim == 0:
        return _softmax_backward(g.reshape(1), y.reshape(1), 0, log).reshape(())
    return _softmax_backward(g, y, d, log)


# The first-order input gradient by the fused kernel: a private op whose body is the CPU
# kernel, its GPU implementation registered for its name in ember/cuda/ops_softmax.py.
_softmax_backward = defop("nn.functional.softmax._softmax_backward")(_k.softmax_backward)


def _softmax_grad(g, res, input, dim=None, _stacklevel=3, dtype=None, *, axis=None):
    return (_backward(g, res, res.ndim, dim, axis, False),)


def _log_softmax_grad(g, res, input, dim=None, _stacklevel=3, dtype=None, *, axis=None):
    return (_backward(g, res, res.ndim, dim, axis, True),)


@defop("nn.functional.softmax", grad=_softmax_grad, save_args=False, save_result=True)
def softmax(input, dim=None, _stacklevel=3, dtype=None, *, axis=None):
    """Softmax along `dim` (alias `axis`): ``exp(x) / sum(exp(x), dim)``, computed stably.

    `dtype` casts the input first (as PyTorch).  Without `dim`, PyTorch's legacy
    choice (0 for 0-, 1- and 3-d inputs, else 1) is made with a warning.

    >>> import ember
    >>> import ember.nn.functional as F
    >>> F.softmax(ember.asarray([[1.0, 1.0], [0.0, 0.0]]), dim=1).tolist()
    [[0.5, 0.5], [0.5, 0.5]]
    """
    return _forward("softmax", input, dim, axis, dtype, False)


@defop("nn.functional.log_softmax", grad=_log_softmax_grad, save_args=False,
       save_result=True)
def log_softmax(input, dim=None, _stacklevel=3, dtype=None, *, axis=None):
    """log(softmax(x)) along `dim` (alias `axis`), computed as ``x - max - log(sum(exp(x - max)))``.

    >>> import ember
    >>> import ember.nn.functional as F
    >>> y = F.log_softmax(ember.asarray([0.0, 0.0]), dim=0)
    >>> [round(v, 4) for v in y.tolist()]
    [-0.6931, -0.6931]
    """
    return _forward("log_softmax", input, dim, axis, dtype, True)


def softmin(input, dim=None, _stacklevel=3, dtype=None, *, axis=None):
    """softmax(-x) along `dim` (alias `axis`).

    >>> import ember
    >>> import ember.nn.functional as F
    >>> F.softmin(ember.asarray([0.0, 0.0]), dim=0).tolist()
    [0.5, 0.5]
    """
    x = input if isinstance(input, ndarray) else as_array(input)
    if dtype is not None:
        x = x.astype(dtype)
    if dim is None and axis is None:
        dim = _resolve_dim("softmin", x.ndim, None, None, 3)
    return softmax(-x, dim, axis=axis)
