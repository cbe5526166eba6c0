"""What a fuzz call's source may use: ``A(...)`` builds an argument array inside a
guarded buffer, ``check_guards()`` says whether a call wrote outside the arrays it
was given, ``touch(r)`` reads every byte of a result (a bogus shape or stride then
crashes here, inside the call's own record).

A reproducer is ``python -c "from tests.fuzz.values import *; <the call's source>"``
run from the repository root.
"""
import math

import numpy as np

import ember

__all__ = ["A", "ember", "np", "check_guards", "touch", "reset"]

GUARD = 16                      # elements of sentinel on each side of every array
_SENTINEL = 0x5A
_LIVE = []                      # (numpy view of the whole buffer, mask of guard bytes, snapshot)


def _values(n, dtype, fill, seed):
    rng = np.random.default_rng(seed)
    kind = np.dtype(dtype).kind if dtype != "bfloat16" else "f"
    if fill == "zero" or n == 0:
        return np.zeros(n, dtype="float64")
    if fill == "special":
        if kind in "fc":
            pool = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e38, -1e-45]
        elif kind == "b":
            pool = [0, 1]
        else:
            info = np.iinfo(dtype)
            pool = [info.min, info.max, 0, -1 if kind == "i" else 1]
        return np.array([pool[i % len(pool)] for i in range(n)], dtype=object)
    if kind == "b":
        return rng.integers(0, 2, n)
    if kind in "iu":
        return rng.integers(0 if kind == "u" else -9, 10, n)
    return rng.standard_normal(n) * 3


def A(shape=(3,), dtype="float32", layout="c", fill="rand", seed=0):
    """An ember array of `shape`/`dtype` laid out as `layout` ("c": contiguous, "neg":
    last axis reversed, "step": every other element of the last axis, "T":
    transposed, "bcast": a broadcast view of one row), filled with `fill`
    ("rand", "special": NaN/inf/extremes, "zero"), with GUARD sentinel elements
    around it that check_guards() verifies after the call."""
    shape = tuple(shape)
    n = math.prod(shape)
    npdt = ember.bfloat16 if dtype == "bfloat16" else np.dtype(dtype)
    npdt = np.dtype(npdt)
    span = 2 * n if layout == "step" else (shape[-1] if layout == "bcast" and shape else n)
    total = span + 2 * GUARD
    raw = np.full(total * npdt.itemsize, _SENTINEL, np.uint8)
    whole_np = raw.view(npdt)
    vals = _values(span, dtype, fill, seed)
    if span:
        with np.errstate(all="ignore"):
            whole_np[GUARD:GUARD + span] = vals.astype(npdt) if vals.dtype != object else \
                np.array([npdt.type(v) for v in vals], dtype=npdt)
    whole = ember.asarray(whole_np)                 # zero-copy: ember writes land in `raw`
    idx = np.arange(total)                          # the same view of element numbers
    inner, inner_idx = whole[GUARD:GUARD + span], idx[GUARD:GUARD + span]
    if layout == "step" and shape:
        lead = shape[:-1] + (2 * shape[-1],)
        x, xi = inner.reshape(lead)[..., ::2], inner_idx.reshape(lead)[..., ::2]
    elif layout == "T" and len(shape) >= 2:
        x, xi = inner.reshape(shape[::-1]).T, inner_idx.reshape(shape[::-1]).T
    elif layout == "neg" and shape:
        x, xi = inner.reshape(shape)[..., ::-1], inner_idx.reshape(shape)[..., ::-1]
    elif layout == "bcast" and shape:
        x, xi = ember.broadcast_to(inner, shape), np.broadcast_to(inner_idx, shape)
    else:
        x, xi = inner[:n].reshape(shape), inner_idx[:n].reshape(shape)
    mask = np.ones(total, bool)
    mask[np.asarray(xi).reshape(-1)] = False        # elements outside the view
    bytes_mask = np.repeat(mask, npdt.itemsize)
    _LIVE.append((raw, bytes_mask, raw[bytes_mask].copy()))
    return x


def check_guards():
    """A description of the first write outside a given array since the last
    reset(), or None."""
    for raw, mask, snap in _LIVE:
        now = raw[mask]
        if not np.array_equal(now, snap):
            bad = int(np.flatnonzero(now != snap)[0])
            return f"wrote outside an argument array (byte {bad} of its guard/gap region)"
    return None


def reset():
    _LIVE.clear()
    if ember.get_default_dtype() != np.float32:
        ember.set_default_dtype(np.float32)


def touch(r, depth=0):
    """Read every byte of an ember array result (and of arrays in a tuple/list)."""
    if isinstance(r, ember.ndarray):
        if r.device != ember.Device("cpu"):
            return
        if r.size <= 10 ** 6:
            np.asarray(r).tobytes()
        elif r.size:
            np.asarray(r[(0,) * r.ndim]), np.asarray(r[(-1,) * r.ndim])
    elif isinstance(r, (tuple, list)) and depth < 2:
        for v in r[:16]:
            touch(v, depth + 1)
