"""Gradient rules of shape manipulation (views and copies)."""
import ember as E
from ember.autograd.registry import defgrad


@defgrad("reshape", save_args=False)
def _(g, res, x, *args, **kwargs):
    return (E.reshape(g, x.shape),)


@defgrad("astype", save_args=False)
def _(g, res, x, dtype, *args, **kwargs):
    return (g,)


@defgrad("broadcast_to", save_args=False)
def _(g, res, x, shape, *args, **kwargs):
    return (g,)       # the engine sums it back to x's shape


@defgrad("permute_dims", save_args=False)
def _(g, res, x, axes, *args, **kwargs):
    inv = [0] * len(axes)
    for i, a in enumerate(axes):
        inv[a % len(axes)] = i
    return (E.permute_dims(g, tuple(inv)),)


@defgrad("matrix_transpose", save_args=False)
def _(g, res, x):
    return (E.matrix_transpose(g),)
