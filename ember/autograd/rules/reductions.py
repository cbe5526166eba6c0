"""Gradient rules of the reductions."""
import ember as E
from ember.autograd.registry import defgrad
from ember.autograd.rules._util import unreduce, axes_of


@defgrad("sum", save_args=False)
def _(g, res, x, axis=None, dtype=None, out=None, keepdims=False, *, dim=None, keepdim=None,
      initial=None, where=None):
    if dim is not None:
        axis = dim
    if keepdim is not None:
        keepdims = keepdim
    return (unreduce(g, x.shape, axis, keepdims, "sum"),)


@defgrad("mean", save_args=False)
def _(g, res, x, axis=None, dtype=None, out=None, keepdims=False, *, dim=None, keepdim=None):
    if dim is not None:
        axis = dim
    if keepdim is not None:
        keepdims = keepdim
    axes = axes_of(axis, x.ndim, "mean")
    n = 1
    for a in axes:
        n *= x.shape[a]
    return (unreduce(g, x.shape, axis, keepdims, "mean") / max(n, 1),)
