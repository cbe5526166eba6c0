"""F.interpolate (PyTorch's resampling modes), written with ember ops.

Every mode is separable: the output is computed one spatial axis at a time.
Along one axis, each output position reads a few input positions (1 for
nearest, 2 for linear, 4 for bicubic, clamped at the borders) with weights that
depend only on the sizes; they are computed here with NumPy, in the input's
precision, by PyTorch's index formulas, and applied with ``take`` and
multiply-adds (``area`` averages whole windows: a small matrix product).  So the
forward runs on every device, and the gradients (of any order) are those of
``take`` / ``matmul``.
"""
import math

import numpy as np

import ember as E
from ember._core.array import ndarray
from ember._core.dtypes import dtype_kind

__all__ = ["interpolate", "upsample", "upsample_nearest", "upsample_bilinear"]

_MODES = ("nearest", "nearest-exact", "linear", "bilinear", "bicubic", "trilinear", "area")
_DIMS = {"linear": 1, "bilinear": 2, "bicubic": 2, "trilinear": 3}


def _tuple(v, n, what):
    if isinstance(v, (list, tuple)):
        if len(v) != n:
            raise ValueError(f"interpolate: the input has {n} spatial dimensions but {what} "
                             f"has {len(v)} values ({tuple(v)}); give one per spatial "
                             f"dimension of the (N, C, d1, ..., dK) input")
        return tuple(v)
    return (v,) * n


def _output_sizes(x, size, scale_factor, recompute_scale_factor, nd):
    """(output sizes, scales passed to the index formulas or None)."""
    if size is not None and scale_factor is not None:
        raise ValueError("interpolate: only one of size or scale_factor should be defined")
    if size is not None:
        if recompute_scale_factor:
            raise ValueError("interpolate: recompute_scale_factor is not meaningful with an "
                             "explicit size")
        sizes = tuple(int(s) for s in _tuple(size, nd, "size"))
        return sizes, (None,) * nd
    if scale_factor is None:
        raise ValueError("interpolate: either size or scale_factor should be defined")
    scales = tuple(float(s) for s in _tuple(scale_factor, nd, "scale_factor"))
    sizes = tuple(int(math.floor(float(n) * s)) for n, s in zip(x.shape[2:], scales))
    if recompute_scale_factor:
        return sizes, (None,) * nd
    return sizes, scales


def _inv_scale(n_in, n_out, scale, ftype):
    """PyTorch's compute_scales_value: 1/scale_factor when given, else in/out."""
    if scale is not None and scale > 0:
        return ftype(1.0 / scale)
    return ftype(n_in) / ftype(n_out)


def _taps(mode, n_in, n_out, scale, align_corners, ftype):
    """(indices (k, n_out) int64, weights (k, n_out) or None) for one axis."""
    dst = np.arange(n_out, dtype=ftype)
    if mode == "nearest" and n_out == 2 * n_in:        # PyTorch's exact special case
        return (np.arange(n_out, dtype=np.int64) // 2)[None], None
    if mode in ("nearest", "nearest-exact"):
        s = _inv_scale(n_in, n_out, scale, np.float32)
        d = dst.astype(np.float32)
        if mode == "nearest-exact":
            d = d + np.float32(0.5)
        idx = np.minimum(np.floor(d * s).astype(np.int64), n_in - 1)
        return idx[None], None
    if align_corners:
        s = ftype((n_in - 1) / (n_out - 1)) if n_out > 1 else ftype(0)
        src = s * dst
    else:
        s = _inv_scale(n_in, n_out, scale, ftype)
        src = s * (dst + ftype(0.5)) - ftype(0.5)
    if mode in ("linear", "bilinear", "trilinear"):
        if not align_corners:
            src = np.maximum(src, ftype(0))
        i0 = src.astype(np.int64)                    # src >= 0: truncation is floor
        lam1 = np.clip(src - i0.astype(ftype), 0, 1).astype(ftype)
        i1 = i0 + (i0 < n_in - 1)
        return np.stack([i0, i1]), np.stack([ftype(1) - lam1, lam1])
    # bicubic: Keys' cubic convolution kernel with a = -0.75, indices clamped
    fl = np.floor(src)
    t = (src - fl).astype(ftype)
    a = ftype(-0.75)

    def near(u):            # |u| <= 1
        return ((a + 2) * u - (a + 3)) * u * u + 1

    def far(u):             # 1 < |u| < 2
        return ((a * u - 5 * a) * u + 8 * a) * u - 4 * a
    w = np.stack([far(t + 1), near(t), near(1 - t), far(2 - t)]).astype(ftype)
    base = fl.astype(np.int64)
    idx = np.clip(np.stack([base - 1, base, base + 1, base + 2]), 0, n_in - 1)
    return idx, w


def _area_matrix(n_in, n_out, ftype):
    """The (n_out, n_in) adaptive-average-pooling matrix."""
    m = np.zeros((n_out, n_in), dtype=ftype)
    for i in range(n_out):
        lo = (i * n_in) // n_out
        hi = -((-(i + 1) * n_in) // n_out)
        m[i, lo:hi] = ftype(1) / ftype(hi - lo)
    return m


def _resample_axis(x, axis, mode, n_out, scale, align_corners):
    n_in = x.shape[axis]
    if n_in == n_out and (mode == "nearest" or scale is None or scale == 1.0):
        return x
    ftype = np.float64 if x.dtype == np.float64 else np.float32
    dev = x.device
    if mode == "area":
        m = E.asarray(_area_matrix(n_in, n_out, ftype).T.astype(x.dtype), device=dev)
        y = E.matmul(E.moveaxis(x, axis, -1), m)
        return E.moveaxis(y, -1, axis)
    idx, w = _taps(mode, n_in, n_out, scale, align_corners, ftype)
    bshape = [1] * x.ndim
    bshape[axis] = n_out
    out = None
    for k in range(idx.shape[0]):
        part = E.take(x, E.asarray(idx[k], device=dev), axis=axis)
        if w is not None:
            part = part * E.asarray(w[k].reshape(bshape).astype(x.dtype), device=dev)
        out = part if out is None else out + part
    return out


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    """Resample an ``(N, C, d1, ..., dK)`` array (K = 1, 2, 3) to a new spatial size
    (PyTorch's ``F.interpolate``).

    Args:
        size: output spatial size (an int or one per spatial dimension), or
        scale_factor: multiplier(s) of the spatial size (output = floor(in * s)).
        mode: ``"nearest"``, ``"nearest-exact"``, ``"linear"`` (3-d input),
            ``"bilinear"``/``"bicubic"`` (4-d), ``"trilinear"`` (5-d) or ``"area"``
            (adaptive average pooling).
        align_corners: for the linear and cubic modes: map the corner pixels'
            centres onto each other (default False); not allowed for the others.
        recompute_scale_factor: with `scale_factor`, compute the output size
            first and resample with in/out as the scale (PyTorch's option).
        antialias: not supported (must be False).

    Indices and weights follow PyTorch's formulas (so results match it to
    rounding); gradients are exact and of any order.  Runs on every device.

    >>> import ember
    >>> import ember.nn.functional as F
    >>> x = ember.asarray([[[1.0, 2.0, 4.0]]])
    >>> F.interpolate(x, scale_factor=2, mode="nearest").tolist()
    [[[1.0, 1.0, 2.0, 2.0, 4.0, 4.0]]]
    >>> F.interpolate(x, size=5, mode="linear", align_corners=True).tolist()
    [[[1.0, 1.5, 2.0, 3.0, 4.0]]]
    """
    if not isinstance(input, ndarray):
        raise TypeError(f"interpolate: expected an ember array, got {type(input).__name__}")
    if mode not in _MODES:
        raise ValueError(f"interpolate: mode must be one of {', '.join(_MODES)}, got {mode!r}")
    if input.ndim not in (3, 4, 5):
        raise ValueError(f"interpolate: expected a 3-d, 4-d or 5-d (N, C, d1, ...) input for "
                         f"mode {mode!r}, got shape {tuple(input.shape)}")
    nd = input.ndim - 2
    if mode in _DIMS and _DIMS[mode] != nd:
        raise ValueError(f"interpolate: got {input.ndim}D input, but {mode} mode needs "
                         f"{_DIMS[mode] + 2}D input")
    if mode in ("nearest", "nearest-exact", "area"):
        if align_corners is not None:
            raise ValueError("interpolate: align_corners option can only be set with the "
                             "interpolating modes: linear | bilinear | bicubic | trilinear")
    elif align_corners is None:
        align_corners = False
    if antialias:
        raise NotImplementedError("interpolate: antialias=True is not supported by ember")
    if dtype_kind(input.dtype) != "f" and mode not in ("nearest", "nearest-exact"):
        raise TypeError(f"interpolate: mode {mode!r} needs a floating-point input, got dtype "
                        f"{input.dtype}")
    if mode == "area" and size is None:
        recompute_scale_factor = True
    sizes, scales = _output_sizes(input, size, scale_factor, recompute_scale_factor, nd)
    for n in sizes:
        if n <= 0:
            raise ValueError(f"interpolate: the output size {sizes} of input "
                             f"{tuple(input.shape)} must be positive")
    x = input
    for k in range(nd):
        x = _resample_axis(x, 2 + k, mode, sizes[k], scales[k], align_corners)
    if x is input:
        x = x * 1 if input.requires_grad else E.array(input, copy=True)
    return x


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    """Deprecated PyTorch alias of :func:`interpolate`.

    >>> import ember, ember.nn.functional as F
    >>> F.upsample(ember.ones((1, 1, 2)), scale_factor=2).shape
    (1, 1, 4)
    """
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input, size=None, scale_factor=None):
    """Deprecated PyTorch alias: ``interpolate(..., mode="nearest")``.

    >>> import ember, ember.nn.functional as F
    >>> F.upsample_nearest(ember.ones((1, 1, 2, 2)), scale_factor=2).shape
    (1, 1, 4, 4)
    """
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None):
    """Deprecated PyTorch alias: ``interpolate(..., mode="bilinear", align_corners=True)``.

    >>> import ember, ember.nn.functional as F
    >>> F.upsample_bilinear(ember.ones((1, 1, 2, 2)), size=3).shape
    (1, 1, 3, 3)
    """
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)
