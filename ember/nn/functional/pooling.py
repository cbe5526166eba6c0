"""Pooling: max / average / adaptive pooling in 1-d and 2-d (PyTorch's API and numerics).

The kernels (``ember._kernels.cpu.pool``) work on a stack of planes: every
leading axis (batch, channels) is folded into one, and a 1-d pooling is a 2-d
one with a unit height.  Each pooling is one differentiable op whose
gradient is another op with its own gradient, so double backward works:

* max pooling saves the flat index of each window's maximum; its gradient
  scatters the output gradient to those indices (``_index_scatter``), whose
  gradient is the matching gather (``_index_gather``) and back;
* average pooling and its gradient (``_avg_pool_backward``) are each other's
  adjoints, as are adaptive average pooling and ``_adaptive_avg_pool_backward``.
"""
import numpy as np

from ember._core.array import ndarray
from ember._api._util import numpy_view, empty_raw
from ember.autograd.registry import defop
from ember._kernels.cpu import pool as _pk
from ember.nn.functional._half import computes_in_float32
from ember._core.nn_args import pool_out as _pool_out

__all__ = ["max_pool1d", "max_pool2d", "avg_pool1d", "avg_pool2d", "adaptive_avg_pool1d",
           "adaptive_avg_pool2d", "adaptive_max_pool1d", "adaptive_max_pool2d"]

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
_INT64 = np.dtype(np.int64)


# ------------------------------------------------------------------ helpers

def _cview(x):
    v = numpy_view(x)
    if not v.flags.c_contiguous:
        v = np.ascontiguousarray(v)
    return v


def _planes(v, nd):
    """(..., H, W) or (..., L) -> (P, H, W) (a view: v is C-contiguous)."""
    if nd == 1:
        return v.reshape(-1, 1, v.shape[-1])
    return v.reshape(-1, v.shape[-2], v.shape[-1])


def _spatial(shape, nd):
    return (1, shape[-1]) if nd == 1 else (shape[-2], shape[-1])


def _new(lead, out2, nd, dtype):
    """A new array of shape lead + (OH, OW) (lead + (OW,) in 1-d) and its (P, OH, OW) view."""
    shape = tuple(lead) + ((out2[1],) if nd == 1 else tuple(out2))
    a = empty_raw(shape, dtype)
    return a, numpy_view(a).reshape(-1, out2[0], out2[1])


def _sz(shape):
    return "[" + ", ".join(str(int(s)) for s in shape) + "]"


# ------------------------------------------------------------------ max pooling

def _index_scatter_rule(g, res, src, idx, in_shape, nd):
    return (_index_gather(g, idx, nd),)


@defop("nn.functional.pooling._index_scatter", grad=_index_scatter_rule)
def _index_scatter(src, idx, in_shape, nd):
    """Zeros of shape in_shape with src added at the flat per-plane indices idx (the
    gradient of max pooling)."""
    sv = _planes(_cview(src), nd)
    iv = _planes(_cview(idx), nd)
    out = empty_raw(tuple(in_shape), sv.dtype)
    _pk.index_scatter(sv, iv, _planes(numpy_view(out), nd))
    return out


def _index_gather_rule(g, res, src, idx, nd):
    return (_index_scatter(g, idx, tuple(src.shape), nd),)


@defop("nn.functional.pooling._index_gather", grad=_index_gather_rule)
def _index_gather(src, idx, nd):
    """src's values at the flat per-plane indices idx (the adjoint of _index_scatter)."""
    sv = _planes(_cview(src), nd)
    iv = _cview(idx)
    out = empty_raw(tuple(idx.shape), sv.dtype)
    _pk.index_gather(sv, _planes(iv, nd), _planes(numpy_view(out), nd))
    return out


def _max_pool_rule(g, res, x, nd, k, s, p, d, ceil):
    return (_index_scatter(g[0], res[1], tuple(x.shape), nd),)


@defop("nn.functional.pooling._max_pool", grad=_max_pool_rule, save_args=False,
       save_result=True)
def _max_pool(x, nd, k, s, p, d, ceil):
    """(values, int64 indices) of max pooling; k, s, p, d are (h, w) pairs."""
    xv = _cview(x)
    H, W = _spatial(xv.shape, nd)
    out2 = (_pool_out(H, k[0], s[0], p[0], d[0], ceil), _pool_out(W, k[1], s[1], p[1], d[1], ceil))
    lead = xv.shape[:-nd]
    out, ov = _new(lead, out2, nd, xv.dtype)
    idx, iv = _new(lead, out2, nd, _INT64)
    _pk.max_pool2d_forward(_planes(xv, nd), ov, iv, k[0], k[1], s[0], s[1], p[0], p[1], d[0],
                           d[1])
    return out, idx


def _adaptive_max_rule(g, res, x, nd, osize):
    return (_index_scatter(g[0], res[1], tuple(x.shape), nd),)


@defop("nn.functional.pooling._adaptive_max_pool", grad=_adaptive_max_rule, save_args=False,
       save_result=True)
def _adaptive_max_pool(x, nd, osize):
    xv = _cview(x)
    lead = xv.shape[:-nd]
    out, ov = _new(lead, osize, nd, xv.dtype)
    idx, iv = _new(lead, osize, nd, _INT64)
    _pk.adaptive_max_pool2d_forward(_planes(xv, nd), ov, iv)
    return out, idx


# ------------------------------------------------------------------ average pooling

def _avg_pool_rule(g, res, x, nd, k, s, p, ceil, include_pad, divisor):
    return (_avg_pool_backward(g, tuple(x.shape), nd, k, s, p, ceil, include_pad, divisor),)


@defop("nn.functional.pooling._avg_pool", grad=_avg_pool_rule, save_args=False)
def _avg_pool(x, nd, k, s, p, ceil, include_pad, divisor):
    xv = _cview(x)
    H, W = _spatial(xv.shape, nd)
    out2 = (_pool_out(H, k[0], s[0], p[0], 1, ceil), _pool_out(W, k[1], s[1], p[1], 1, ceil))
    out, ov = _new(xv.shape[:-nd], out2, nd, xv.dtype)
    _pk.avg_pool2d_forward(_planes(xv, nd), ov, k[0], k[1], s[0], s[1], p[0], p[1],
                           include_pad, divisor or 0)
    return out


def _avg_pool_backward_rule(gg, res, g, in_shape, nd, k, s, p, ceil, include_pad, divisor):
    return (_avg_pool(gg, nd, k, s, p, ceil, include_pad, divisor),)


@defop("nn.functional.pooling._avg_pool_backward", grad=_avg_pool_backward_rule,
       save_args=False)
def _avg_pool_backward(g, in_shape, nd, k, s, p, ceil, include_pad, divisor):
    gv = _planes(_cview(g), nd)
    out = empty_raw(tuple(in_shape), gv.dtype)
    _pk.avg_pool2d_backward(gv, _planes(numpy_view(out), nd), k[0], k[1], s[0], s[1], p[0],
                            p[1], include_pad, divisor or 0)
    return out


def _adaptive_avg_rule(g, res, x, nd, osize):
    return (_adaptive_avg_pool_backward(g, tuple(x.shape), nd),)


@defop("nn.functional.pooling._adaptive_avg_pool", grad=_adaptive_avg_rule, save_args=False)
def _adaptive_avg_pool(x, nd, osize):
    xv = _cview(x)
    out, ov = _new(xv.shape[:-nd], osize, nd, xv.dtype)
    _pk.adaptive_avg_pool2d_forward(_planes(xv, nd), ov)
    return out


def _adaptive_avg_backward_rule(gg, res, g, in_shape, nd):
    return (_adaptive_avg_pool(gg, nd, _spatial(g.shape, nd)),)


@defop("nn.functional.pooling._adaptive_avg_pool_backward", grad=_adaptive_avg_backward_rule,
       save_args=False)
def _adaptive_avg_pool_backward(g, in_shape, nd):
    gv = _planes(_cview(g), nd)
    out = empty_raw(tuple(in_shape), gv.dtype)
    _pk.adaptive_avg_pool2d_backward(gv, _planes(numpy_view(out), nd))
    return out


# ------------------------------------------------------------------ argument checks

def _pair(v, nd, name, op, allow_none=False):
    if type(v) is int:
        return (1, v) if nd == 1 else (v, v)
    if isinstance(v, (tuple, list)):
        if len(v) == 1:
            v = (v[0],) * nd
        if len(v) == nd and all(allow_none and e is None or isinstance(e, (int, np.integer))
                                for e in v):
            v = tuple(None if e is None else int(e) for e in v)
            return (1,) + v if nd == 1 else v
    elif isinstance(v, np.integer):
        return _pair(int(v), nd, name, op)
    raise ValueError(f"{op}: {name} must be an int or a tuple of {nd} ints, got {v!r}")


def _input(op, x, nd):
    if not isinstance(x, ndarray):
        import ember
        x = ember.asarray(x)
    if x.ndim not in (nd + 1, nd + 2):
        raise RuntimeError(f"{op}: expected {nd + 1}D (unbatched) or {nd + 2}D (batched) input, "
                           f"but got input of size: {_sz(x.shape)}")
    if x.dtype not in _FLOATS and not (x.is_cuda and x.dtype == np.float16):
        raise TypeError(f"{op}: expected a floating-point input (float16, bfloat16, "
                        f"float32 or float64), got {x.dtype}")
    if any(n == 0 for n in x.shape[1:]):
        raise RuntimeError(f"{op}: expected input with non-zero sizes except for the batch "
                           f"dimension, but got input of size: {_sz(x.shape)}")
    return x


def _window(op, x, nd, kernel_size, stride, padding, dilation, ceil_mode):
    k = _pair(kernel_size, nd, "kernel_size", op)
    s = k if stride is None or (isinstance(stride, (tuple, list)) and len(stride) == 0) \
        else _pair(stride, nd, "stride", op)
    p = _pair(padding, nd, "padding", op)
    if nd == 1:
        p = (0, p[1])
    d = _pair(dilation, nd, "dilation", op)
    if min(k) <= 0:
        raise ValueError(f"{op}: kernel_size must be greater than zero, but got {k[2 - nd:]}")
    if min(s) <= 0:
        raise ValueError(f"{op}: stride must be greater than zero, but got {s[2 - nd:]}")
    if min(d) <= 0:
        raise ValueError(f"{op}: dilation must be greater than zero, but got {d[2 - nd:]}")
    if min(p) < 0:
        raise ValueError(f"{op}: padding must be non-negative, but got {p[2 - nd:]}")
    for i in range(2 - nd, 2):
        if p[i] > k[i] // 2:                         # torch checks the plain kernel size
            raise ValueError(f"{op}: pad should be at most half of kernel size, but got "
                             f"pad={p[i]}, kernel_size={k[i]}")
    H, W = _spatial(x.shape, nd)
    OH = _pool_out(H, k[0], s[0], p[0], d[0], ceil_mode)
    OW = _pool_out(W, k[1], s[1], p[1], d[1], ceil_mode)
    if OH < 1 or OW < 1:
        ins = "x".join(str(n) for n in x.shape[-nd - 1:])
        outs = "x".join(str(n) for n in (x.shape[-nd - 1],) + ((OW,) if nd == 1 else (OH, OW)))
        raise RuntimeError(f"{op}: given input size: ({ins}). Calculated output size: ({outs}). "
                           f"Output size is too small")
    return k, s, p, d


def _adaptive_size(op, x, nd, output_size):
    if output_size is None:
        raise ValueError(f"{op}: output_size must be given")
    o = _pair(output_size, nd, "output_size", op, allow_none=True)
    H, W = _spatial(x.shape, nd)
    o = (H if o[0] is None else o[0], W if o[1] is None else o[1])
    if min(o) < 0 or (min(o) == 0 and x.size != 0):
        raise ValueError(f"{op}: output_size must be positive, got {o[2 - nd:]}")
    return o


# ------------------------------------------------------------------ public functions

def _max_pool_nd(op, nd, input, kernel_size, stride, padding, dilation, ceil_mode,
                 return_indices):
    x = _input(op, input, nd)
    k, s, p, d = _window(op, x, nd, kernel_size, stride, padding, dilation, ceil_mode)
    out, idx = _max_pool(x, nd, k, s, p, d, bool(ceil_mode))
    return (out, idx) if return_indices else out


@computes_in_float32
def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """2-d max pooling over (N, C, H, W) or (C, H, W); stride defaults to kernel_size.

    With return_indices=True also returns the flat index (``iy*W + ix``) of each
    maximum in its input plane (int64), as PyTorch does.

    >>> import ember
    >>> import ember.nn.functional as F
    >>> x = ember.arange(16.0).reshape(1, 1, 4, 4)
    >>> F.max_pool2d(x, 2).tolist()
    [[[[5.0, 7.0], [13.0, 15.0]]]]
    """
    return _max_pool_nd("max_pool2d", 2, input, kernel_size, stride, padding, dilation,
                        ceil_mode, return_indices)


@computes_in_float32
def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """1-d max pooling over (N, C, L) or (C, L); stride defaults to kernel_size.

    >>> import ember
    >>> import ember.nn.functional as F
    >>> F.max_pool1d(ember.asarray([[[1.0, 3.0, 2.0, 0.0]]]), 2).tolist()
    [[[3.0, 2.0]]]
    """
    return _max_pool_nd("max_pool1d", 1, input, kernel_size, stride, padding, dilation,
                        ceil_mode, return_indices)


def _avg_pool_nd(op, nd, input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                 divisor_override):
    x = _input(op, input, nd)
    k, s, p, _ = _window(op, x, nd, kernel_size, stride, padding, 1, ceil_mode)
    if divisor_override is not None:
        divisor_override = int(divisor_override)
        if divisor_override == 0:
            raise ValueError(f"{op}: divisor must be not zero")
    return _avg_pool(x, nd, k, s, p, bool(ceil_mode), bool(count_include_pad), divisor_override)


@computes_in_float32
def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    """2-d average pooling over (N, C, H, W) or (C, H, W); stride defaults to kernel_size.

    count_include_pad: zero padding counts in the divisor; divisor_override replaces
    the divisor.

    >>> import ember
    >>> import ember.nn.functional as F
    >>> x = ember.arange(16.0).reshape(1, 1, 4, 4)
    >>> F.avg_pool2d(x, 2).tolist()
    [[[[2.5, 4.5], [10.5, 12.5]]]]
    """
    return _avg_pool_nd("avg_pool2d", 2, input, kernel_size, stride, padding, ceil_mode,
                        count_include_pad, divisor_override)


@computes_in_float32
def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True):
    """1-d average pooling over (N, C, L) or (C, L); stride defaults to kernel_size.

    >>> import ember
    >>> import ember.nn.functional as F
    >>> F.avg_pool1d(ember.asarray([[[1.0, 3.0, 2.0, 0.0]]]), 2).tolist()
    [[[2.0, 1.0]]]
    """
    return _avg_pool_nd("avg_pool1d", 1, input, kernel_size, stride, padding, ceil_mode,
                        count_include_pad, None)


@computes_in_float32
def adaptive_avg_pool2d(input, output_size):
    """2-d adaptive average pooling to output_size (an int, or a pair whose None entries
    keep the input's size) over (N, C, H, W) or (C, H, W).

    >>> import ember
    >>> import ember.nn.functional as F
    >>> F.adaptive_avg_pool2d(ember.arange(16.0).reshape(1, 1, 4, 4), 1).tolist()
    [[[[7.5]]]]
    """
    x = _input("adaptive_avg_pool2d", input, 2)
    return _adaptive_avg_pool(x, 2, _adaptive_size("adaptive_avg_pool2d", x, 2, output_size))


@computes_in_float32
def adaptive_avg_pool1d(input, output_size):
    """1-d adaptive average pooling to output_size over (N, C, L) or (C, L).

    >>> import ember
    >>> import ember.nn.functional as F
    >>> F.adaptive_avg_pool1d(ember.asarray([[[1.0, 3.0, 2.0, 0.0]]]), 2).tolist()
    [[[2.0, 1.0]]]
    """
    x = _input("adaptive_avg_pool1d", input, 1)
    return _adaptive_avg_pool(x, 1, _adaptive_size("adaptive_avg_pool1d", x, 1, output_size))


@computes_in_float32
def adaptive_max_pool2d(input, output_size, return_indices=False):
    """2-d adaptive max pooling to output_size over (N, C, H, W) or (C, H, W).

    >>> import ember
    >>> import ember.nn.functional as F
    >>> F.adaptive_max_pool2d(ember.arange(16.0).reshape(1, 1, 4, 4), 2).tolist()
    [[[[5.0, 7.0], [13.0, 15.0]]]]
    """
    x = _input("adaptive_max_pool2d", input, 2)
    out, idx = _adaptive_max_pool(x, 2, _adaptive_size("adaptive_max_pool2d", x, 2,
                                                       output_size))
    return (out, idx) if return_indices else out


@computes_in_float32
def adaptive_max_pool1d(input, output_size, return_indices=False):
    """1-d adaptive max pooling to output_size over (N, C, L) or (C, L).

    >>> import ember
    >>> import ember.nn.functional as F
    >>> F.adaptive_max_pool1d(ember.asarray([[[1.0, 3.0, 2.0, 0.0]]]), 2).tolist()
    [[[3.0, 2.0]]]
    """
    x = _input("adaptive_max_pool1d", input, 1)
    out, idx = _adaptive_max_pool(x, 1, _adaptive_size("adaptive_max_pool1d", x, 1,
                                                       output_size))
    return (out, idx) if return_indices else out
