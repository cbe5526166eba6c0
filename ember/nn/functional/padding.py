"""F.pad: PyTorch's padding (constant, reflect, replicate, circular), written with
ember ops (slices, flips, concatenation), so it runs on every device and every
derivative order comes from those ops' rules."""
import ember as E
from ember._core.array import ndarray

__all__ = ["pad"]

_MODES = ("constant", "reflect", "replicate", "circular")


def _check(x, pad, mode, value):
    if not isinstance(x, ndarray):
        raise TypeError(f"pad: expected an ember array, got {type(x).__name__}")
    try:
        pad = [int(p) for p in pad]
    except TypeError:
        raise TypeError(f"pad: `pad` must be a sequence of ints, got {pad!r}") from None
    if len(pad) % 2:
        raise ValueError(f"pad: padding length must be divisible by 2, got {len(pad)} values")
    if len(pad) // 2 > x.ndim:
        raise ValueError(f"pad: padding length {len(pad)} is too large for an input with "
                         f"{x.ndim} dimensions (shape {tuple(x.shape)})")
    if mode not in _MODES:
        raise NotImplementedError(f"pad: mode must be one of {', '.join(_MODES)}, got "
                                  f"{mode!r}")
    if mode != "constant" and value is not None and value != 0:
        raise ValueError(f"pad: padding mode {mode!r} doesn't take in a value argument")
    if mode != "constant" and len(pad) // 2 > x.ndim - 1:
        raise NotImplementedError(
            f"pad: mode {mode!r} pads at most the last {max(x.ndim - 1, 0)} dimensions of an "
            f"input of shape {tuple(x.shape)} (the first is the batch or channel axis), got "
            f"{len(pad) // 2} pairs")
    return pad


def _slice(x, axis, start, stop):
    key = [slice(None)] * x.ndim
    key[axis] = slice(start, stop)
    return x[tuple(key)]


def _pad_axis(x, axis, lo, hi, mode, value):
    """Pad (lo, hi >= 0) along one axis."""
    n = x.shape[axis]
    if mode == "constant":
        parts = []
        for k in (lo, hi):
            shape = list(x.shape)
            shape[axis] = k
            parts.append(E.full(tuple(shape), value, dtype=x.dtype, device=x.device)
                         if k else None)
        pieces = [parts[0], x, parts[1]]
    elif mode == "reflect":
        if lo >= n or hi >= n:
            raise ValueError(f"pad: padding size should be less than the corresponding input "
                             f"dimension in reflect mode, but got padding ({lo}, {hi}) at "
                             f"dimension {axis} of input {tuple(x.shape)}")
        pieces = [E.flip(_slice(x, axis, 1, lo + 1), axis=axis) if lo else None, x,
                  E.flip(_slice(x, axis, n - 1 - hi, n - 1), axis=axis) if hi else None]
    elif mode == "replicate":
        if n == 0:
            raise ValueError(f"pad: replicate mode cannot pad the empty dimension {axis} of "
                             f"input {tuple(x.shape)}")
        def edge(i, k):
            shape = list(x.shape)
            shape[axis] = k
            return E.broadcast_to(_slice(x, axis, i, i + 1), tuple(shape))
        pieces = [edge(0, lo) if lo else None, x, edge(n - 1, hi) if hi else None]
    else:   # circular
        if lo > n or hi > n:
            raise ValueError(f"pad: padding value causes wrapping around more than once in "
                             f"circular mode: padding ({lo}, {hi}) at dimension {axis} of "
                             f"input {tuple(x.shape)}")
        pieces = [_slice(x, axis, n - lo, n) if lo else None, x,
                  _slice(x, axis, 0, hi) if hi else None]
    pieces = [p for p in pieces if p is not None]
    return pieces[0] if len(pieces) == 1 else E.concatenate(pieces, axis=axis)


def pad(input, pad, mode="constant", value=None):
    """Pad `input` (PyTorch's ``F.pad``): `pad` lists (before, after) pairs starting
    from the LAST dimension, ``(left, right)``, ``(left, right, top, bottom)``, ...

    mode: ``"constant"`` (fill with `value`, default 0; negative pads crop),
    ``"reflect"`` (mirror without repeating the edge; pads smaller than the size),
    ``"replicate"`` (repeat the edge) or ``"circular"`` (wrap around).  The
    non-constant modes pad at most ``input.ndim - 1`` trailing dimensions; negative
    pads crop in every mode.  Differentiable to any order, on every device.

    >>> import ember
    >>> import ember.nn.functional as F
    >>> x = ember.asarray([[1.0, 2.0, 3.0]])
    >>> F.pad(x, (1, 2)).tolist()
    [[0.0, 1.0, 2.0, 3.0, 0.0, 0.0]]
    >>> F.pad(x, (2, 1), mode="reflect").tolist()
    [[3.0, 2.0, 1.0, 2.0, 3.0, 2.0]]
    >>> F.pad(x, (1, 1), mode="circular").tolist()
    [[3.0, 1.0, 2.0, 3.0, 1.0]]
    """
    pad = _check(input, pad, mode, value)
    if value is None:
        value = 0
    x = input
    for i in range(len(pad) // 2):
        axis = x.ndim - 1 - i
        lo, hi = pad[2 * i], pad[2 * i + 1]
        if lo < 0 or hi < 0:        # negative pads crop first
            n = x.shape[axis]
            x = _slice(x, axis, max(-lo, 0), n - max(-hi, 0) if -hi < n else 0)
            lo, hi = max(lo, 0), max(hi, 0)
        if lo or hi:
            x = _pad_axis(x, axis, lo, hi, mode, value)
    return x
