"""Convolutions: conv1d, conv2d, conv_transpose1d, conv_transpose2d (PyTorch's API).

Every convolution runs as im2col (``ember._kernels.cpu.conv``) followed by
one batched BLAS GEMM; a 1x1 convolution with stride 1 and no padding skips
im2col (it is a plain GEMM).  A 1-d convolution is a 2-d one with a unit
height.

Three differentiable ops carry everything, and their gradients are written
with each other, so gradients of any order work:

* ``_conv(x, w, b)``            the convolution;
* ``_conv_transpose(x, w, b)``  its adjoint in x (the input gradient of
  ``_conv``, and the transposed convolution);
* ``_conv_weight(x, g)``        its adjoint in w (the weight gradient).

Dtypes follow PyTorch: input, weight and bias of one floating dtype (mixed ones are
refused outside autocast), the result in it.  16-bit floats run in float32 on the CPU
(rounded once at the end) and as themselves on the GPU (cuDNN, or ember's im2col +
cuBLAS kernels, accumulating in float32).

Their geometry arguments are canonical: ``stride`` and ``dilation`` are
(h, w) pairs, ``padding`` is (top, bottom, left, right) (asymmetric for
``padding='same'`` with an even kernel), and 1-d arrays use a unit height.
"""
import numpy as np

from ember._core.array import ndarray
from ember._api._util import numpy_view, empty_raw
from ember.autograd.registry import defop
from ember._kernels.cpu import conv as _ck
from ember._kernels.cpu.gemm import matmul as _gemm
from ember._core.dtypes import is_half_dtype

__all__ = ["conv1d", "conv2d", "conv_transpose1d", "conv_transpose2d"]

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)
# float32 on a CPU with AVX-512: direct convolutions (no column buffer, no BLAS)
_FAST = _ck.fast_available()


# ------------------------------------------------------------------ helpers

def _cview(x):
    """A C-contiguous NumPy view of ember array `x` (a copy only if it is strided)."""
    v = numpy_view(x)
    if not v.flags.c_contiguous:
        v = np.ascontiguousarray(v)
    return v


def _as4d(v):
    """(N, C, L) -> (N, C, 1, L); 4-d arrays pass through."""
    if v.ndim == 3:
        return v.reshape(v.shape[0], v.shape[1], 1, v.shape[2])
    return v


def _out_len(n, p0, p1, d, k, s):
    return (n + p0 + p1 - d * (k - 1) - 1) // s + 1


def _columns(xv, kh, kw, stride, pad, dil, OH, OW):
    """im2col of xv (N, C, H, W) -> (N, C*kh*kw, OH*OW), or xv itself reshaped for a
    1x1 kernel with stride 1 and no padding."""
    N, C, H, W = xv.shape
    if kh == 1 and kw == 1 and stride == (1, 1) and OH == H and OW == W and pad[0] == 0 \
            and pad[2] == 0:
        return xv.reshape(N, C, H * W)
    L = OH * OW
    col = numpy_view(empty_raw((N, C * kh * kw, L), xv.dtype))
    _ck.im2col(xv, col, kh, kw, stride[0], stride[1], pad[0], pad[2], dil[0], dil[1], OH, OW,
               C * kh * kw * L, L)
    return col


def _add_bias(outv, b):
    """outv (N, O, ...) += b[:, None...] in place."""
    N, O = outv.shape[:2]
    o3 = outv.reshape(N, O, -1)
    o3 += _cview(b).reshape(O, 1)


def _sum_axes(g):
    return (0,) + tuple(range(2, g.ndim))


def _crop(y, hw):
    """y's spatial axes cut to hw (a transposed convolution with an output_padding of at
    least the stride reaches further than the plain convolution that is its gradient)."""
    if tuple(y.shape[2:]) == tuple(hw):
        return y
    if y.ndim == 3:
        return y[:, :, :hw[0]]
    return y[:, :, :hw[0], :hw[1]]


# ------------------------------------------------------------------ 1x1 strided kernels
# A 1x1 kernel with stride > 1, no padding, no dilation, one group (ResNet's downsampling
# shortcuts) reads one input pixel of every stride x stride block: the direct kernels copy
# the whole input into stride phases to use one of them.  As a subsample + GEMM instead:
# forward  out[n] = w (O, C) @ x[n, :, ::sh, ::sw] (C, L);
# input gradient: dx = 0, dx[n, :, ::sh, ::sw] = w^T (C, O) @ g[n] (O, L);
# weight gradient: dw = sum_n g[n] (O, L) @ x[n, :, ::sh, ::sw]^T (L, C).

# False: those convolutions take the general path (A/B measurements, tests)
POINTWISE_STRIDED = True


def _pointwise_strided(xv, wshape, stride, pad, dil, groups):
    """True for the 1x1 / stride > 1 / unpadded / undilated / one-group convolution of
    the 4-d float array xv (the subsample + GEMM form applies)."""
    return (POINTWISE_STRIDED and groups == 1 and wshape[2] == 1 and wshape[3] == 1 and stride != (1, 1)
            and not any(pad) and dil == (1, 1) and xv.dtype in _FLOATS)


def _subsample(xv, stride, OH, OW):
    """x[:, :, ::sh, ::sw] cut to OH x OW, as a C-contiguous (N, C, OH * OW) array (the
    im2col of a 1x1 kernel: on ember's threads)."""
    return _columns(xv, 1, 1, stride, (0, 0, 0, 0), (1, 1), OH, OW)


# ------------------------------------------------------------------ the three ops

def _conv_rule(g, res, x, w, b, stride, pad, dil, groups):
    gx = gw = gb = None
    if x.requires_grad:
        gx = _conv_transpose(g, w, None, tuple(x.shape[2:]), stride, pad, dil, groups)
    if w.requires_grad:
        gw = _conv_weight(x, g, tuple(w.shape), stride, pad, dil, groups)
    if b is not None and b.requires_grad:
        gb = g.sum(axis=_sum_axes(g))
    return gx, gw, gb


@defop("nn.functional.conv._conv", grad=_conv_rule)
def _conv(x, w, b, stride, pad, dil, groups):
    """The convolution of x (N, C, [H,] W) with w (O, C/groups, [kh,] kw), plus b (O,)."""
    xv = _as4d(_cview(x))
    wv = _as4d(_cview(w))
    N, C, H, W = xv.shape
    O, Cg, kh, kw = wv.shape
    OH = _out_len(H, pad[0], pad[1], dil[0], kh, stride[0])
    OW = _out_len(W, pad[2], pad[3], dil[1], kw, stride[1])
    out = empty_raw((N, O, OH, OW) if x.ndim == 4 else (N, O, OW), xv.dtype)
    ov = numpy_view(out)
    if _pointwise_strided(xv, wv.shape, stride, pad, dil, groups):
        _gemm(wv.reshape(O, C), _subsample(xv, stride, OH, OW), ov.reshape(N, O, OH * OW))
        if b is not None:
            _add_bias(ov, b)
        return out
    if _FAST and xv.dtype == _F32:
        _ck.conv2d_forward_f32(xv, wv, None if b is None else _cview(b),
                               ov.reshape(N, O, OH, OW), stride[0], stride[1], pad[0], pad[1],
                               pad[2], pad[3], dil[0], dil[1], groups)
        return out
    col = _columns(xv, kh, kw, stride, pad, dil, OH, OW)
    L = OH * OW
    if groups == 1:
        _gemm(wv.reshape(O, Cg * kh * kw), col, ov.reshape(N, O, L))
    else:
        G = groups
        _gemm(wv.reshape(G, O // G, Cg * kh * kw), col.reshape(N, G, -1, L),
              ov.reshape(N, G, O // G, L))
    if b is not None:
        _add_bias(ov, b)
    return out


def _conv_transpose_rule(g, res, x, w, b, out_hw, stride, pad, dil, groups):
    gx = gw = gb = None
    if x.requires_grad:
        gx = _crop(_conv(g, w, None, stride, pad, dil, groups), x.shape[2:])
    if w.requires_grad:
        gw = _conv_weight(g, x, tuple(w.shape), stride, pad, dil, groups)
    if b is not None and b.requires_grad:
        gb = g.sum(axis=_sum_axes(g))
    return gx, gw, gb, None


@defop("nn.functional.conv._conv_transpose", grad=_conv_transpose_rule)
def _conv_transpose(x, w, b, out_hw, stride, pad, dil, groups):
    """The adjoint of ``_conv`` in its input: x (N, O, [OH,] OW) and w (O, C/groups, [kh,]
    kw) give (N, C, *out_hw), plus b (C,)."""
    xv = _as4d(_cview(x))
    wv = _as4d(_cview(w))
    N, O, OH, OW = xv.shape
    _, Cg, kh, kw = wv.shape
    G = groups
    C = Cg * G
    H, W = (1, out_hw[0]) if len(out_hw) == 1 else out_hw
    out = empty_raw((N, C, H, W) if x.ndim == 4 else (N, C, W), xv.dtype)
    ov = _as4d(numpy_view(out))
    if _pointwise_strided(xv, wv.shape, stride, pad, dil, groups):
        L = OH * OW
        part = np.empty((N, C, L), xv.dtype)
        _gemm(wv.reshape(O, C).T, xv.reshape(N, O, L), part)
        # zeroes each plane and scatters the strided pixels, on ember's threads
        _ck.col2im(part, ov, 1, 1, stride[0], stride[1], 0, 0, 1, 1, OH, OW, C * L, L)
        if b is not None:
            _add_bias(ov, b)
        return out
    if _FAST and xv.dtype == _F32:
        _ck.conv2d_input_f32(xv, wv, ov, stride[0], stride[1], pad[0], pad[1], pad[2], pad[3],
                             dil[0], dil[1], groups)
        if b is not None:
            _add_bias(ov, b)
        return out
    L = OH * OW
    CKg = Cg * kh * kw
    wt = wv.reshape(G, O // G, CKg).transpose(0, 2, 1)          # (G, CKg, Og)
    gv = xv.reshape(N, G, O // G, L)
    pointwise = (kh == 1 and kw == 1 and stride == (1, 1) and OH == H and OW == W
                 and pad[0] == 0 and pad[2] == 0)
    if pointwise:
        dst = ov.reshape(N, G, Cg, L)
        _gemm(wt[0] if G == 1 else wt, gv[:, 0] if G == 1 else gv,
              dst[:, 0] if G == 1 else dst)
    else:
        dcol = numpy_view(empty_raw((N, C * kh * kw, L), xv.dtype))
        if G == 1:
            _gemm(wt[0], gv[:, 0], dcol)
        else:
            _gemm(wt, gv, dcol.reshape(N, G, CKg, L))
        _ck.col2im(dcol, ov, kh, kw, stride[0], stride[1], pad[0], pad[2], dil[0], dil[1],
                   OH, OW, C * kh * kw * L, L)
    if b is not None:
        _add_bias(ov, b)
    return out


def _conv_weight_rule(gw, res, x, g, wshape, stride, pad, dil, groups):
    gx = gg = None
    if x.requires_grad:
        gx = _conv_transpose(g, gw, None, tuple(x.shape[2:]), stride, pad, dil, groups)
    if g.requires_grad:
        gg = _crop(_conv(x, gw, None, stride, pad, dil, groups), g.shape[2:])
    return gx, gg


@defop("nn.functional.conv._conv_weight", grad=_conv_weight_rule)
def _conv_weight(x, g, wshape, stride, pad, dil, groups):
    """The adjoint of ``_conv`` in its weight: the gradient of w (shape `wshape`) for
    input x (N, C, [H,] W) and output gradient g (N, O, [OH,] OW)."""
    xv = _as4d(_cview(x))
    gv = _as4d(_cview(g))
    N, O, OH, OW = gv.shape
    kh, kw = (1, wshape[2]) if len(wshape) == 3 else wshape[2:]
    out = empty_raw(tuple(wshape), xv.dtype)
    if _pointwise_strided(xv, (1, 1) + (kh, kw), stride, pad, dil, groups) and N:
        dst = numpy_view(out).reshape(O, wshape[1])
        sub = _subsample(xv, stride, OH, OW)
        part = _gemm(gv.reshape(N, O, OH * OW), sub.transpose(0, 2, 1),
                     np.empty((N, O, wshape[1]), xv.dtype))
        np.sum(part, axis=0, out=dst)
        return out
    if _FAST and xv.dtype == _F32:
        _ck.conv2d_weight_f32(xv, gv, numpy_view(out).reshape(wshape[0], wshape[1], kh, kw),
                              stride[0], stride[1], pad[0], pad[1], pad[2], pad[3], dil[0],
                              dil[1], groups)
        return out
    G = groups
    CKg = wshape[1] * kh * kw
    dst = numpy_view(out).reshape(G, O // G, CKg)
    if N == 0:
        dst[...] = 0
        return out
    L = OH * OW
    col = _columns(xv, kh, kw, stride, pad, dil, OH, OW).reshape(N, G, CKg, L)
    g4 = gv.reshape(N, G, O // G, L)
    if N == 1:
        _gemm(g4[0], col[0].transpose(0, 2, 1), dst)
    else:
        part = _gemm(g4, col.transpose(0, 1, 3, 2), np.empty((N,) + dst.shape, dst.dtype))
        np.sum(part, axis=0, out=dst)
    return out


# ------------------------------------------------------------------ argument checks

def _sz(shape):
    return "[" + ", ".join(str(int(s)) for s in shape) + "]"


def _tuple(v, n, name, op):
    if type(v) is int:
        return (v,) * n
    if isinstance(v, (tuple, list)):
        if len(v) == 1:
            return (int(v[0]),) * n
        if len(v) == n:
            return tuple(int(e) for e in v)
    elif isinstance(v, (np.integer,)) or (isinstance(v, ndarray) and v.ndim == 0):
        return (int(v),) * n
    raise ValueError(f"{op}: {name} must be an int or a tuple of {n} ints, got {v!r}")


def _as_array(x, op, what):
    if isinstance(x, ndarray):
        return x
    import ember
    if x is None:
        raise TypeError(f"{op}: {what} must be an array, got None")
    return ember.asarray(x)


def _autocasting(x):
    """Whether an autocast region for x's device type is open.  CUDA autocast casts input,
    weight and bias of the convolution op to one dtype itself; CPU autocast leaves
    convolutions in their inputs' dtypes, and mixed 16-bit / float32 arguments run in
    float32 there (:func:`_widened`)."""
    import sys
    amp = sys.modules.get("ember.amp.autocast")
    return amp is not None and amp.is_autocast_enabled("cuda" if x.is_cuda else "cpu")


def _check_dtypes(op, x, w, b):
    """PyTorch's dtype rules: a floating input (float16 / bfloat16 / float32 / float64,
    on either device), and weight and bias of the input's dtype, unless autocast will
    cast them (the error names the op, the dtypes and the shapes)."""
    if x.dtype not in _FLOATS and not is_half_dtype(x.dtype):
        raise TypeError(f"{op}: expected a floating-point input (float16, bfloat16, "
                        f"float32 or float64), got input of dtype {x.dtype}")
    if _autocasting(x) and all(a is None or a.dtype != _F64 for a in (x, w, b)):
        return                      # (autocast casts no float64 array, as in PyTorch)
    for name, a in (("weight", w), ("bias", b)):
        if a is not None and a.dtype != x.dtype:
            raise TypeError(f"{op}: input type ({x.dtype}) and {name} type ({a.dtype}) should "
                            f"be the same (input {_sz(x.shape)} {x.dtype}, {name} "
                            f"{_sz(a.shape)} {a.dtype})")


def _widened(x, w, b):
    """(x, w, b, dtype): on the CPU, 16-bit float arguments widened to float32 for the
    float32 kernels, and `dtype` the 16-bit input dtype to round the result back to (None
    when nothing was widened).  On the GPU, float16 and bfloat16 run as themselves (cuDNN
    in their own dtype with float32 compute, or ember's im2col + cuBLAS kernels)."""
    if x.is_cuda or not any(a is not None and is_half_dtype(a.dtype) for a in (x, w, b)):
        return x, w, b, None
    wide = [None if a is None or not is_half_dtype(a.dtype) else a.astype(_F32)
            for a in (x, w, b)]
    x2, w2, b2 = (a if v is None else v for a, v in zip((x, w, b), wide))
    return x2, w2, b2, (x.dtype if is_half_dtype(x.dtype) else None)


def _narrowed(y, dtype):
    return y if dtype is None else y.astype(dtype)


def _prepare(op, nd, input, weight, bias, stride, dilation, groups, transposed):
    """Shared checks; returns (x, w, b, stride, dilation, unbatched)."""
    x = _as_array(input, op, "input")
    w = _as_array(weight, op, "weight")
    b = None if bias is None else _as_array(bias, op, "bias")
    if x.ndim not in (nd + 1, nd + 2):
        raise RuntimeError(f"{op}: expected {nd + 1}D (unbatched) or {nd + 2}D (batched) input, "
                           f"but got input of size: {_sz(x.shape)}")
    if w.ndim != nd + 2:
        raise RuntimeError(f"{op}: expected a {nd + 2}D weight, but got weight of size "
                           f"{_sz(w.shape)}")
    _check_dtypes(op, x, w, b)
    stride = _tuple(stride, nd, "stride", op)
    dilation = _tuple(dilation, nd, "dilation", op)
    if type(groups) is not int:
        groups = int(groups)
    if min(stride) <= 0:
        raise ValueError(f"{op}: non-positive stride is not supported (got stride={stride})")
    if min(dilation) <= 0:
        raise ValueError(f"{op}: dilation should be greater than zero (got {dilation})")
    if groups <= 0:
        raise ValueError(f"{op}: non-positive groups is not supported (got groups={groups})")
    unbatched = x.ndim == nd + 1
    if unbatched:
        x = x[None]
    C = x.shape[1]
    if not transposed:
        O, Cg = w.shape[0], w.shape[1]
        if O % groups != 0:
            raise RuntimeError(f"{op}: given groups={groups}, expected weight to be divisible "
                               f"by {groups} at dimension 0, but got weight of size "
                               f"{_sz(w.shape)} instead")
        if C != Cg * groups:
            raise RuntimeError(f"{op}: given groups={groups}, weight of size {_sz(w.shape)}, "
                               f"expected input{_sz(x.shape)} to have {Cg * groups} channels, "
                               f"but got {C} channels instead")
        nout = O
    else:
        if C != w.shape[0]:
            raise RuntimeError(f"{op}: given transposed=True, weight of size {_sz(w.shape)}, "
                               f"expected input{_sz(x.shape)} to have {w.shape[0]} channels, "
                               f"but got {C} channels instead")
        if C % groups != 0:
            raise RuntimeError(f"{op}: given groups={groups}, expected weight to be divisible "
                               f"by {groups} at dimension 0, but got weight of size "
                               f"{_sz(w.shape)} instead")
        nout = w.shape[1] * groups
    if b is not None and (b.ndim != 1 or b.shape[0] != nout):
        raise RuntimeError(f"{op}: given weight of size {_sz(w.shape)}, expected bias to be "
                           f"1-dimensional with {nout} elements, but got bias of size "
                           f"{_sz(b.shape)} instead")
    return x, w, b, stride, dilation, unbatched


def _padding(op, padding, nd, ksize, stride, dilation):
    """padding (int, tuple, 'valid' or 'same') -> (top, bottom, left, right)."""
    if isinstance(padding, str):
        if padding == "valid":
            return (0, 0, 0, 0)
        if padding != "same":
            raise ValueError(f"{op}: invalid padding string {padding!r}, should be one of "
                             f"{{'valid', 'same'}}")
        if any(s != 1 for s in stride):
            raise ValueError(f"{op}: padding='same' is not supported for strided convolutions")
        pads = []
        for d, k in zip(dilation, ksize):
            total = d * (k - 1)
            pads.append((total // 2, total - total // 2))
    else:
        p = _tuple(padding, nd, "padding", op)
        if min(p) < 0:
            raise ValueError(f"{op}: negative padding is not supported (got padding={p})")
        pads = [(e, e) for e in p]
    if nd == 1:
        return (0, 0) + pads[0]
    return pads[0] + pads[1]


def _check_kernel_fits(op, x, ksize, pad, dilation, nd):
    sizes = x.shape[2:]
    padded = [sizes[i] + pad[2 * i + (4 - 2 * nd)] + pad[2 * i + 1 + (4 - 2 * nd)]
              for i in range(nd)]
    eff = [dilation[i] * (ksize[i] - 1) + 1 for i in range(nd)]
    if any(e > p for e, p in zip(eff, padded)):
        raise RuntimeError(f"{op}: calculated padded input size per channel: "
                           f"({' x '.join(map(str, padded))}). Kernel size: "
                           f"({' x '.join(map(str, eff))}). Kernel size can't be greater than "
                           f"actual input size")


def _forward(op, nd, input, weight, bias, stride, padding, dilation, groups):
    x, w, b, stride, dilation, unbatched = _prepare(op, nd, input, weight, bias, stride,
                                                    dilation, groups, False)
    ksize = tuple(w.shape[2:])
    pad = _padding(op, padding, nd, ksize, stride, dilation)
    _check_kernel_fits(op, x, ksize, pad, dilation, nd)
    if nd == 1:
        stride, dilation = (1,) + stride, (1,) + dilation
    x, w, b, half = _widened(x, w, b)
    y = _narrowed(_conv(x, w, b, stride, pad, dilation, groups), half)
    return y[0] if unbatched else y


def _transposed(op, nd, input, weight, bias, stride, padding, output_padding, groups,
                dilation):
    x, w, b, stride, dilation, unbatched = _prepare(op, nd, input, weight, bias, stride,
                                                    dilation, groups, True)
    if isinstance(padding, str):
        raise ValueError(f"{op}: padding must be an int or a tuple of ints, got {padding!r}")
    p = _tuple(padding, nd, "padding", op)
    if min(p) < 0:
        raise ValueError(f"{op}: negative padding is not supported (got padding={p})")
    op_ = _tuple(output_padding, nd, "output_padding", op)
    for i in range(nd):
        if op_[i] < 0 or (op_[i] >= stride[i] and op_[i] >= dilation[i]):
            raise ValueError(f"{op}: output padding must be smaller than either stride or "
                             f"dilation, but got output_padding={op_}, stride={stride}, "
                             f"dilation={dilation}")
    ksize = tuple(w.shape[2:])
    out_hw = tuple((x.shape[2 + i] - 1) * stride[i] - 2 * p[i] + dilation[i] * (ksize[i] - 1)
                   + op_[i] + 1 for i in range(nd))
    if min(out_hw) <= 0:
        raise RuntimeError(f"{op}: given input size {_sz(x.shape)}, the output size "
                           f"{_sz(out_hw)} is too small")
    pad = (0, 0, p[0], p[0]) if nd == 1 else (p[0], p[0], p[1], p[1])
    if nd == 1:
        stride, dilation = (1,) + stride, (1,) + dilation
    x, w, b, half = _widened(x, w, b)
    y = _narrowed(_conv_transpose(x, w, b, out_hw, stride, pad, dilation, groups), half)
    return y[0] if unbatched else y


# ------------------------------------------------------------------ public functions

def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-d convolution (cross-correlation, as in PyTorch) over (N, C, H, W) or (C, H, W).

    weight is (out_channels, in_channels/groups, kh, kw); padding is an int, a pair,
    ``'valid'`` or ``'same'``.

    >>> import ember
    >>> import ember.nn.functional as F
    >>> x = ember.ones((1, 1, 4, 4))
    >>> w = ember.ones((2, 1, 3, 3))
    >>> F.conv2d(x, w, padding=1)[0, 0].tolist()[0]
    [4.0, 6.0, 6.0, 4.0]
    """
    return _forward("conv2d", 2, input, weight, bias, stride, padding, dilation, groups)


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """1-d convolution over (N, C, L) or (C, L); weight is (out, in/groups, k).

    >>> import ember
    >>> import ember.nn.functional as F
    >>> F.conv1d(ember.ones((1, 1, 5)), ember.ones((1, 1, 3))).tolist()
    [[[3.0, 3.0, 3.0]]]
    """
    return _forward("conv1d", 1, input, weight, bias, stride, padding, dilation, groups)


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """2-d transposed convolution (the gradient of conv2d with respect to its input).

    weight is (in_channels, out_channels/groups, kh, kw); the output size is
    ``(H - 1)*stride - 2*padding + dilation*(k - 1) + output_padding + 1``.

    >>> import ember
    >>> import ember.nn.functional as F
    >>> y = F.conv_transpose2d(ember.ones((1, 1, 2, 2)), ember.ones((1, 1, 2, 2)), stride=2)
    >>> y.shape
    (1, 1, 4, 4)
    """
    return _transposed("conv_transpose2d", 2, input, weight, bias, stride, padding,
                       output_padding, groups, dilation)


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """1-d transposed convolution over (N, C, L) or (C, L); weight is (in, out/groups, k).

    >>> import ember
    >>> import ember.nn.functional as F
    >>> F.conv_transpose1d(ember.ones((1, 1, 2)), ember.ones((1, 1, 2))).tolist()
    [[[1.0, 2.0, 1.0]]]
    """
    return _transposed("conv_transpose1d", 1, input, weight, bias, stride, padding,
                       output_padding, groups, dilation)
