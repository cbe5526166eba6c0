"""Dropout: zero elements (or whole channels) at random in training, scaling the rest by
1 / (1 - p).  Draws come from ember.random's global generator, so ``ember.random.seed``
makes them reproducible.

>>> import ember
>>> import ember.nn.functional as F
>>> ember.random.seed(0)
>>> y = F.dropout(ember.ones(1000), p=0.5)
>>> sorted(set(y.tolist()))
[0.0, 2.0]
"""
import numbers

import numpy as np

from ember._core.array import ndarray
from ember._api._util import wrap
from ember.autograd.registry import defop
from ember._core.dtypes import dtype_kind

__all__ = ["dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout"]


def _check_p(p, opname):
    if not isinstance(p, numbers.Real) or isinstance(p, bool) or not 0.0 <= p <= 1.0:
        raise ValueError(f"{opname}: dropout probability has to be between 0 and 1, but got {p}")


@defop("nn.functional.dropout._mask")
def _mask(like, shape, p, scaled=True):
    """An array of `shape` with 0 (probability p) or 1 / (1 - p) elsewhere (1 when not
    `scaled`), of like's dtype and on like's device.  On the host it draws from
    ember.random's global generator; a CUDA device draws from its own Philox generator
    (ember/cuda/ops_random.py)."""
    import ember.random
    dtype = like.dtype
    draw = dtype if dtype in (np.float32, np.float64) else np.float32
    u = ember.random._global._g.random(shape, dtype=draw)
    # keep where u >= p: floor(u + 1 - p) is 1 there and 0 elsewhere
    u += 1.0 - p
    np.floor(u, out=u)
    if scaled:
        u *= 1.0 / (1.0 - p)
    m = wrap(u)
    return m if m.dtype == dtype else m.astype(dtype)


def _apply(input, p, training, inplace, mask_shape, opname):
    if not isinstance(input, ndarray):
        raise TypeError(f"{opname}: expected an ember array, got {type(input).__name__}")
    _check_p(p, opname)
    if not training or p == 0 or input.size == 0:
        return input
    if dtype_kind(input.dtype) not in "fc":
        raise TypeError(f"{opname}: expected a floating-point input, got dtype {input.dtype}")
    if p == 1:
        mask = input.dtype.type(0)
        out = input * mask
    else:
        mask = _mask(input, mask_shape, p)
        out = input * mask
    if inplace:
        input[...] = out
        return input
    return out


def dropout(input, p=0.5, training=True, inplace=False):
    """Zero each element with probability `p` and scale the others by 1 / (1 - p)
    (identity when ``training=False``).

    >>> import ember
    >>> import ember.nn.functional as F
    >>> x = ember.ones(4)
    >>> F.dropout(x, 0.5, training=False) is x
    True
    >>> F.dropout(x, 1.0).tolist()
    [0.0, 0.0, 0.0, 0.0]
    """
    return _apply(input, p, training, inplace, getattr(input, "shape", None), "dropout")


def _feature(input, p, training, inplace, spatial, opname):
    if not isinstance(input, ndarray):
        raise TypeError(f"{opname}: expected an ember array, got {type(input).__name__}")
    if input.ndim not in (spatial + 1, spatial + 2):
        raise ValueError(f"{opname}: expected {spatial + 1}-d (unbatched) or {spatial + 2}-d "
                         f"(batched) input, got shape {tuple(input.shape)}")
    shape = input.shape[:input.ndim - spatial] + (1,) * spatial
    return _apply(input, p, training, inplace, shape, opname)


def dropout1d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of (N, C, L) or (C, L) input with probability `p`.

    >>> import ember
    >>> import ember.nn.functional as F
    >>> y = F.dropout1d(ember.ones((2, 3, 5)), 0.5)
    >>> bool(all(len(set(row.tolist())) == 1 for row in y.reshape(6, 5)))
    True
    """
    return _feature(input, p, training, inplace, 1, "dropout1d")


def dropout2d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of (N, C, H, W) or (C, H, W) input with probability `p`.

    >>> import ember
    >>> import ember.nn.functional as F
    >>> F.dropout2d(ember.ones((2, 3, 4, 4)), 0.5).shape
    (2, 3, 4, 4)
    """
    return _feature(input, p, training, inplace, 2, "dropout2d")


def dropout3d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of (N, C, D, H, W) or (C, D, H, W) input with probability `p`.

    >>> import ember
    >>> import ember.nn.functional as F
    >>> F.dropout3d(ember.ones((1, 2, 2, 2, 2)), 0.5, training=False).shape
    (1, 2, 2, 2, 2)
    """
    return _feature(input, p, training, inplace, 3, "dropout3d")


def alpha_dropout(input, p=0.5, training=False, inplace=False):
    """Dropout that keeps zero mean and unit variance for SELU networks: dropped
    elements are set to SELU's negative saturation value, then an affine correction.

    >>> import ember
    >>> import ember.nn.functional as F
    >>> F.alpha_dropout(ember.ones(3), 0.5, training=False).tolist()
    [1.0, 1.0, 1.0]
    """
    if not isinstance(input, ndarray):
        raise TypeError(f"alpha_dropout: expected an ember array, got {type(input).__name__}")
    _check_p(p, "alpha_dropout")
    if not training or p == 0 or input.size == 0:
        return input
    if p == 1:
        out = input * input.dtype.type(0)
    else:
        alpha = 1.7580993408473766          # selu scale * alpha (PyTorch's constant)
        keep = _mask(input, input.shape, p, False)  # 0 / 1
        a = 1.0 / ((alpha * alpha * p + 1) * (1 - p)) ** 0.5
        b = (keep - 1) * (alpha * a) + alpha * a * p
        out = input * (keep * a) + b
    if inplace:
        input[...] = out
        return input
    return out
