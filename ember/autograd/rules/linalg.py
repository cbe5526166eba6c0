"""Gradient rules of matmul and the linear-algebra functions."""
import ember as E
from ember.autograd.registry import defgrad


def _c(x):
    return E.conj(x) if x.dtype.kind == "c" else x


@defgrad("matmul")
def _(g, res, a, b, **kwargs):
    a1, b1 = a.ndim == 1, b.ndim == 1
    A = E.reshape(a, (1, a.shape[0])) if a1 else a
    B = E.reshape(b, (b.shape[0], 1)) if b1 else b
    G = g
    if a1 and b1:
        G = E.reshape(g, (1, 1))
    elif a1:
        G = E.expand_dims(g, -2)
    elif b1:
        G = E.expand_dims(g, -1)
    ga = gb = None
    if a.requires_grad:
        ga = E.matmul(G, _c(E.matrix_transpose(B)))
        ga = E.reshape(ga, ga.shape[:-2] + (a.shape[0],)) if a1 else ga
    if b.requires_grad:
        gb = E.matmul(_c(E.matrix_transpose(A)), G)
        gb = E.reshape(gb, gb.shape[:-2] + (b.shape[0],)) if b1 else gb
    return ga, gb
