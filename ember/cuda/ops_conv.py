"""The convolution ops of ``ember.nn.functional.conv`` on CUDA arrays.

Same lowering as the CPU: im2col (``ember_im2col_<dt>`` in pool_conv.cu) and one
batched GEMM through cuBLAS (``_gemm.mm``: the shared weight is a batch stride of 0,
not a copy per image); the input gradient (the transposed convolution) is a GEMM
with the weight read transposed, followed by col2im, a deterministic gather; the
weight gradient is one GEMM over all images, from columns laid out batch-inner.  A
1x1 convolution with stride 1 and no padding skips im2col.

Each op first offers its arguments to cuDNN (``cudnn_conv``), which answers None
where it is off, missing or refuses the configuration; these kernels then run.

The geometry arguments are conv.py's canonical ones: ``stride`` and ``dilation``
are (h, w) pairs, ``padding`` is (top, bottom, left, right), and 1-d arrays
(N, C, L) run as 2-d ones of unit height.  Asymmetric padding needs no kernel
support: the output size carries the bottom/right padding, and the kernels read
positions past the input as zero.
"""
import struct

from ember.cuda._dispatch import gpu_op
from ember.cuda import _runtime as R
from ember.cuda import cudnn_conv
from ember.cuda._gemm import mm

__all__ = ["geom"]

# struct Conv2dGeom { i64 C, H, W, KH, KW, OH, OW, sh, sw, ph, pw, dh, dw; }:
# thirteen 8-byte fields, so no padding anywhere.
_GEOM = struct.Struct("<13q")


def geom(C, H, W, KH, KW, OH, OW, sh, sw, ph, pw, dh, dw):
    """The Conv2dGeom struct of pool_conv.cu, packed for passing by value."""
    return _GEOM.pack(int(C), int(H), int(W), int(KH), int(KW), int(OH), int(OW), int(sh),
                      int(sw), int(ph), int(pw), int(dh), int(dw))


def _out_len(n, p0, p1, d, k, s):
    return (n + p0 + p1 - d * (k - 1) - 1) // s + 1


def _c4(x):
    """A C-contiguous cupy view (or copy) of ember GPU array x, 3-d (N, C, L) seen as
    (N, C, 1, L)."""
    c = R.cp().ascontiguousarray(R.as_cupy(x))
    if c.ndim == 3:
        c = c.reshape(c.shape[0], c.shape[1], 1, c.shape[2])
    return c


def _kernel(stem, dtype):
    sfx = R.suffix(dtype)
    if sfx is None:
        raise TypeError(f"conv (cuda): no {stem} kernel for dtype {dtype}")
    return f"ember_{stem}_{sfx}"


def _pointwise(kh, kw, stride, pad, H, W, OH, OW):
    """A 1x1 kernel with stride 1 and no padding: the columns are the input itself."""
    return (kh == 1 and kw == 1 and tuple(stride) == (1, 1) and OH == H and OW == W
            and pad[0] == 0 and pad[2] == 0)


_MAX_PLANES = 1 << 20        # blocks of a plane-walking launch (it strides over the rest)


def _plane_launch(plane_count, plane_size):
    """(grid, block) of im2col / col2im: a block per plane (up to _MAX_PLANES, then they
    stride), threads for the plane's positions (32 to 256).  Their in-plane index math
    is 32-bit, hence the limit on a plane's size."""
    if plane_size >= 2 ** 31:
        raise ValueError(f"conv (cuda): a plane of {plane_size} positions is beyond the "
                         f"kernels' 2**31 limit")
    threads = 32
    while threads < plane_size and threads < 256:
        threads *= 2
    return max(1, min(int(plane_count), _MAX_PLANES)), threads


def _columns(xc, kh, kw, stride, pad, dil, OH, OW, by_row=False):
    """im2col of cupy xc (N, C, H, W) -> (N, C*kh*kw, OH*OW) (cupy), or with ``by_row``
    (C*kh*kw, N, OH*OW): the weight gradient's layout, where each row spans the batch so
    that one GEMM sums over every image without a transposed copy of the columns."""
    cp = R.cp()
    N, C, H, W = xc.shape
    L = OH * OW
    K = C * kh * kw
    if _pointwise(kh, kw, stride, pad, H, W, OH, OW):
        v = xc.reshape(N, C, H * W)
        return cp.ascontiguousarray(v.transpose(1, 0, 2)) if by_row else v
    col = cp.empty((K, N, L) if by_row else (N, K, L), dtype=xc.dtype)
    total = col.size
    if total:
        g = geom(C, H, W, kh, kw, OH, OW, stride[0], stride[1], pad[0], pad[2], dil[0], dil[1])
        sn, sr = (L, N * L) if by_row else (K * L, L)
        grid, block = _plane_launch(N * K, L)
        R.launch(_kernel("im2col", xc.dtype), grid, block,
                 (R.from_cupy(xc), R.from_cupy(col), N, g, sn, sr))
    return col


def _col2im(dcol, N, C, H, W, kh, kw, stride, pad, dil, OH, OW):
    """col2im (the adjoint of im2col) of cupy dcol (N, C*kh*kw, OH*OW) -> (N, C, H, W)."""
    cp = R.cp()
    out = cp.empty((N, C, H, W), dtype=dcol.dtype)
    if out.size == 0:
        return out
    if dcol.size == 0:                # no output positions: nothing reads the input
        out.fill(0)
        return out
    g = geom(C, H, W, kh, kw, OH, OW, stride[0], stride[1], pad[0], pad[2], dil[0], dil[1])
    grid, block = _plane_launch(N * C, H * W)
    R.launch(_kernel("col2im", dcol.dtype), grid, block,
             (R.from_cupy(cp.ascontiguousarray(dcol)), R.from_cupy(out), N, g))
    return out


def _add_bias(out, b):
    """out (N, O, ...) cupy += b[:, None...] in place."""
    if b is None:
        return
    O = out.shape[1]
    out += R.as_cupy(b).astype(out.dtype, copy=False).reshape((1, O) + (1,) * (out.ndim - 2))


def _result(c, ndim):
    """cupy (N, O, H, W) -> the ember result, (N, O, W) when the input was 1-d."""
    if ndim == 3:
        c = c.reshape(c.shape[0], c.shape[1], c.shape[3])
    return R.from_cupy(c)


@gpu_op("nn.functional.conv._conv")
def _conv(x, w, b, stride, pad, dil, groups):
    """The convolution of x (N, C, [H,] W) with w (O, C/groups, [kh,] kw), plus b (O,)."""
    out = cudnn_conv.forward(x, w, stride, pad, dil, groups)
    if out is not None:
        _add_bias(out, b)
        return _result(out, x.ndim)
    cp = R.cp()
    xc = _c4(x)
    wc = _c4(w)
    N, C, H, W = xc.shape
    O, Cg, kh, kw = wc.shape
    G = groups
    OH = _out_len(H, pad[0], pad[1], dil[0], kh, stride[0])
    OW = _out_len(W, pad[2], pad[3], dil[1], kw, stride[1])
    L = OH * OW
    CKg = Cg * kh * kw
    col = _columns(xc, kh, kw, stride, pad, dil, OH, OW)
    if G == 1:
        out = mm(wc.reshape(O, CKg), col)                         # (N, O, L)
    else:
        out = mm(wc.reshape(G, O // G, CKg), col.reshape(N, G, CKg, L))
    out = cp.ascontiguousarray(out).reshape(N, O, OH, OW)
    _add_bias(out, b)
    return _result(out, x.ndim)


@gpu_op("nn.functional.conv._conv_transpose")
def _conv_transpose(x, w, b, out_hw, stride, pad, dil, groups):
    """The adjoint of ``_conv`` in its input: x (N, O, [OH,] OW) and w (O, C/groups, [kh,]
    kw) give (N, C, *out_hw), plus b (C,)."""
    out = cudnn_conv.backward_data(x, w, out_hw, stride, pad, dil, groups)
    if out is not None:
        _add_bias(out, b)
        return _result(out, x.ndim)
    cp = R.cp()
    xc = _c4(x)
    wc = _c4(w)
    N, O, OH, OW = xc.shape
    _, Cg, kh, kw = wc.shape
    G = groups
    C = Cg * G
    H, W = (1, out_hw[0]) if len(out_hw) == 1 else tuple(out_hw)
    L = OH * OW
    CKg = Cg * kh * kw
    wt = wc.reshape(G, O // G, CKg).transpose(0, 2, 1)                   # (G, CKg, Og)
    gv = xc.reshape(N, G, O // G, L)
    if G == 1:
        dcol = mm(wt[0], gv[:, 0])                                # (N, CKg, L)
    else:
        dcol = mm(wt, gv)                                         # (N, G, CKg, L)
    dcol = cp.ascontiguousarray(dcol).reshape(N, C * kh * kw, L)
    if _pointwise(kh, kw, stride, pad, H, W, OH, OW):
        out = dcol.reshape(N, C, H, W)
    else:
        out = _col2im(dcol, N, C, H, W, kh, kw, stride, pad, dil, OH, OW)
    _add_bias(out, b)
    return _result(out, x.ndim)


@gpu_op("nn.functional.conv._conv_weight")
def _conv_weight(x, g, wshape, stride, pad, dil, groups):
    """The adjoint of ``_conv`` in its weight: the gradient of w (shape `wshape`) for
    input x (N, C, [H,] W) and output gradient g (N, O, [OH,] OW)."""
    out = cudnn_conv.backward_filter(x, g, wshape, stride, pad, dil, groups)
    if out is not None:
        return R.from_cupy(out)
    cp = R.cp()
    xc = _c4(x)
    gc = _c4(g)
    N, O, OH, OW = gc.shape
    kh, kw = (1, wshape[2]) if len(wshape) == 3 else tuple(wshape[2:])
    G = groups
    Og = O // G
    CKg = wshape[1] * kh * kw
    L = OH * OW
    if N == 0 or L == 0:
        return R.from_cupy(cp.zeros(tuple(wshape), dtype=xc.dtype))
    # One GEMM per group over all N*L output positions at once (the CPU sums per-image
    # GEMMs): (G, Og, N*L) @ (G, N*L, CKg), the columns read transposed in place.  Only
    # the output gradient (the smaller operand) is reordered.
    col = _columns(xc, kh, kw, stride, pad, dil, OH, OW, by_row=True).reshape(G, CKg, N * L)
    gm = cp.ascontiguousarray(gc.reshape(N, G, Og, L).transpose(1, 2, 0, 3))
    out = mm(gm.reshape(G, Og, N * L), col.swapaxes(-1, -2))
    return R.from_cupy(out.reshape(tuple(wshape)))
