"""Distances between rows of two arrays (PyTorch's ``cosine_similarity`` and
``pairwise_distance``), written with ember ops."""
import ember as E
from ember._core.array import ndarray

__all__ = ["cosine_similarity", "pairwise_distance"]


def _arrays(op, x1, x2):
    if not isinstance(x1, ndarray) or not isinstance(x2, ndarray):
        raise TypeError(f"{op}: expected two ember arrays, got {type(x1).__name__} and "
                        f"{type(x2).__name__}")
    try:
        shape = E.broadcast_shapes(x1.shape, x2.shape)
    except ValueError:
        raise ValueError(f"{op}: the shapes {tuple(x1.shape)} and {tuple(x2.shape)} cannot "
                         f"be broadcast together") from None
    return E.broadcast_to(x1, shape), E.broadcast_to(x2, shape)


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """Cosine of the angle between x1 and x2 along `dim` (broadcasting; PyTorch's
    ``F.cosine_similarity``).

    As in PyTorch each input is divided by its norm clamped below at `eps` first,
    and the clamp is not differentiated (the gradient is that of the plain norm).

    >>> import ember
    >>> import ember.nn.functional as F
    >>> F.cosine_similarity(ember.asarray([[1.0, 0.0], [0.0, 3.0]]),
    ...                     ember.asarray([[2.0, 0.0], [0.0, -1.0]])).tolist()
    [1.0, -1.0]
    """
    a, b = _arrays("cosine_similarity", x1, x2)
    if a.ndim == 0:
        raise ValueError("cosine_similarity: expected inputs with at least one dimension")

    def normalized(x):
        n = E.linalg.vector_norm(x, ord=2, axis=dim, keepdims=True)
        nd = n.detach()
        return x / (n + (E.maximum(nd, eps) - nd))
    return E.sum(normalized(a) * normalized(b), axis=dim)


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """The p-norm of ``x1 - x2 + eps`` over the last dimension (PyTorch's
    ``F.pairwise_distance``; broadcasting).

    >>> import ember
    >>> import ember.nn.functional as F
    >>> F.pairwise_distance(ember.asarray([[0.0, 0.0]]), ember.asarray([[3.0, 4.0]]),
    ...                     eps=0.0).tolist()
    [5.0]
    """
    a, b = _arrays("pairwise_distance", x1, x2)
    if a.ndim == 0:
        raise ValueError("pairwise_distance: expected inputs with at least one dimension")
    return E.linalg.vector_norm(a - b + eps, ord=p, axis=-1, keepdims=keepdim)
