"""F.unfold / F.fold (PyTorch's im2col and col2im on (N, C, H, W) arrays), written
with ember ops: unfold gathers every sliding block with one ``take`` on the
flattened, zero-padded planes; fold adds the blocks back with ``index_add`` (its
adjoint).  Each is the other's gradient, so derivatives of any order work, on
every device."""
import numpy as np

import ember as E
from ember._core.array import ndarray

__all__ = ["unfold", "fold"]


def _pair(v, name, op):
    if isinstance(v, (list, tuple)):
        if len(v) != 2:
            raise ValueError(f"{op}: {name} must be an int or a pair, got {v!r}")
        return int(v[0]), int(v[1])
    return int(v), int(v)


def _geometry(op, spatial, kernel_size, dilation, padding, stride):
    k, d, p, s = (_pair(v, n, op) for v, n in ((kernel_size, "kernel_size"),
                                                (dilation, "dilation"),
                                                (padding, "padding"), (stride, "stride")))
    if min(k) <= 0 or min(d) <= 0 or min(s) <= 0 or min(p) < 0:
        raise ValueError(f"{op}: kernel_size, dilation and stride must be positive and "
                         f"padding non-negative, got kernel_size={k}, dilation={d}, "
                         f"padding={p}, stride={s}")
    padded = tuple(n + 2 * pi for n, pi in zip(spatial, p))
    blocks = tuple((n - di * (ki - 1) - 1) // si + 1
                   for n, ki, di, si in zip(padded, k, d, s))
    if min(blocks) <= 0:
        raise RuntimeError(f"{op}: the padded spatial size {padded} is too small for "
                           f"kernel_size={k} with dilation={d}: no sliding block fits")
    return k, d, p, s, padded, blocks


def _flat_index(k, d, s, padded, blocks):
    """Flat positions in a padded plane of every (kernel offset, block) pair:
    shape (kh*kw * oh*ow,), kernel offset major."""
    ki = np.arange(k[0])[:, None, None, None] * d[0]
    kj = np.arange(k[1])[None, :, None, None] * d[1]
    oi = np.arange(blocks[0])[None, None, :, None] * s[0]
    oj = np.arange(blocks[1])[None, None, None, :] * s[1]
    return ((ki + oi) * padded[1] + (kj + oj)).reshape(-1).astype(np.int64)


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """Extract sliding local blocks (PyTorch's ``F.unfold``, im2col).

    ``(N, C, H, W)`` -> ``(N, C * kh * kw, L)`` where L counts the blocks
    (``(C, H, W)`` -> ``(C * kh * kw, L)`` unbatched); rows are ordered channel,
    then kernel row, then kernel column.

    >>> import ember
    >>> import ember.nn.functional as F
    >>> x = ember.arange(9.0).reshape(1, 1, 3, 3)
    >>> F.unfold(x, 2).tolist()
    [[[0.0, 1.0, 3.0, 4.0], [1.0, 2.0, 4.0, 5.0], [3.0, 4.0, 6.0, 7.0], [4.0, 5.0, 7.0, 8.0]]]
    """
    if not isinstance(input, ndarray):
        raise TypeError(f"unfold: expected an ember array, got {type(input).__name__}")
    if input.ndim not in (3, 4):
        raise ValueError(f"unfold: expected a 3-d (C, H, W) or 4-d (N, C, H, W) input, got "
                         f"shape {tuple(input.shape)}")
    if input.ndim == 3:
        return unfold(input[None], kernel_size, dilation, padding, stride)[0]
    n, c = input.shape[:2]
    k, d, p, s, padded, blocks = _geometry("unfold", input.shape[2:], kernel_size, dilation,
                                           padding, stride)
    from ember.nn.functional.padding import pad
    x = pad(input, (p[1], p[1], p[0], p[0])) if p[0] or p[1] else input
    x = E.reshape(x, (n, c, padded[0] * padded[1]))
    idx = E.asarray(_flat_index(k, d, s, padded, blocks), device=input.device)
    cols = E.take(x, idx, axis=2)
    return E.reshape(cols, (n, c * k[0] * k[1], blocks[0] * blocks[1]))


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """Combine sliding local blocks into an array, summing overlaps (PyTorch's
    ``F.fold``, col2im; the adjoint of :func:`unfold`).

    ``(N, C * kh * kw, L)`` -> ``(N, C, H, W)`` with ``(H, W) = output_size``
    (``(C * kh * kw, L)`` -> ``(C, H, W)`` unbatched).

    >>> import ember
    >>> import ember.nn.functional as F
    >>> F.fold(ember.ones((1, 4, 4)), (3, 3), 2).tolist()
    [[[[1.0, 2.0, 1.0], [2.0, 4.0, 2.0], [1.0, 2.0, 1.0]]]]
    """
    if not isinstance(input, ndarray):
        raise TypeError(f"fold: expected an ember array, got {type(input).__name__}")
    if input.ndim not in (2, 3):
        raise ValueError(f"fold: expected a 2-d (C*kh*kw, L) or 3-d (N, C*kh*kw, L) input, "
                         f"got shape {tuple(input.shape)}")
    if input.ndim == 2:
        return fold(input[None], output_size, kernel_size, dilation, padding, stride)[0]
    out_hw = _pair(output_size, "output_size", "fold")
    k, d, p, s, padded, blocks = _geometry("fold", out_hw, kernel_size, dilation, padding,
                                           stride)
    n, ck, length = input.shape
    kk = k[0] * k[1]
    if ck % kk:
        raise RuntimeError(f"fold: expected size of input's dimension 1 to be divisible by "
                           f"the product of kernel_size {k}, got input {tuple(input.shape)}")
    if length != blocks[0] * blocks[1]:
        raise RuntimeError(f"fold: given output_size={out_hw}, kernel_size={k}, "
                           f"dilation={d}, padding={p}, stride={s}, expected size of "
                           f"input's dimension 2 to match the number of blocks "
                           f"{blocks[0] * blocks[1]}, got input {tuple(input.shape)}")
    c = ck // kk
    idx = E.asarray(_flat_index(k, d, s, padded, blocks), device=input.device)
    src = E.reshape(input, (n, c, kk * length))
    planes = E.zeros((n, c, padded[0] * padded[1]), dtype=input.dtype, device=input.device)
    out = E.reshape(E.index_add(planes, 2, idx, src), (n, c) + padded)
    if p[0] or p[1]:
        out = out[:, :, p[0]:p[0] + out_hw[0], p[1]:p[1] + out_hw[1]]
    return out
