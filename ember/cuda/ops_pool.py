"""The pooling ops of ``ember.nn.functional.pooling`` on CUDA arrays.

As on the CPU, every leading axis (batch, channels) folds into a stack of P planes
and a 1-d pooling is a 2-d one of unit height.  Max and average pooling run the
pool_conv.cu kernels (Conv2dGeom with C = P planes); adaptive pooling and the
index scatter/gather of the max-pooling gradients are CuPy formulations:

* adaptive average pooling is separable, ``out = A_h @ x @ A_w.T`` with the small
  averaging matrices A (O, I) of the windows ``[floor(o*I/O), ceil((o+1)*I/O))``;
  its gradient is ``A_h.T @ g @ A_w`` (cuBLAS both ways);
* adaptive max pooling gathers every window, padded to the widest one with -inf,
  and takes the first maximum;
* ``_index_scatter`` adds with atomics (index.cu's scatter-add): overlapping windows may
  sum in any order, so float results can differ in the last bit between runs.

Known difference from the CPU: when a window holds several NaNs, the CPU reports
the index of the last one and the GPU kernels the first (the value is NaN either way).
"""
import numpy as np

from ember.cuda._dispatch import gpu_op
from ember._core.nn_args import pool_out
from ember.cuda import _runtime as R
from ember.cuda._gemm import mm
from ember.cuda.ops_conv import geom

_INT64 = np.dtype(np.int64)


def _planes(x, nd):
    """A C-contiguous cupy (P, H, W) view of ember GPU array x (..., [H,] W)."""
    c = R.cp().ascontiguousarray(R.as_cupy(x))
    hw = (1, c.shape[-1]) if nd == 1 else tuple(c.shape[-2:])
    return c.reshape(_lead(c.shape, nd) + hw)


def _lead(shape, nd):
    """The plane count of an array of `shape` as a 1-tuple (-1 fails on empty arrays)."""
    n = 1
    for s in shape[:-nd]:
        n *= s
    return (n,)


def _shape(lead, out2, nd):
    return tuple(lead) + ((out2[1],) if nd == 1 else tuple(out2))


def _kernel(stem, dtype):
    sfx = R.suffix(dtype)
    if sfx is None:
        raise TypeError(f"{stem} (cuda): no kernel for dtype {dtype}")
    return f"ember_{stem}_{sfx}"


# ------------------------------------------------------------------ max pooling

@gpu_op("nn.functional.pooling._max_pool")
def _max_pool(x, nd, k, s, p, d, ceil):
    """(values, int64 indices) of max pooling; k, s, p, d are (h, w) pairs."""
    cp = R.cp()
    xv = _planes(x, nd)
    n, H, W = xv.shape
    OH = pool_out(H, k[0], s[0], p[0], d[0], ceil)
    OW = pool_out(W, k[1], s[1], p[1], d[1], ceil)
    out = cp.empty((n, OH, OW), dtype=xv.dtype)
    idx = cp.empty((n, OH, OW), dtype=_INT64)
    if out.size:
        g = geom(n, H, W, k[0], k[1], OH, OW, s[0], s[1], p[0], p[1], d[0], d[1])
        R.launch(_kernel("max_pool2d_fwd", xv.dtype), R.blocks(out.size), 256,
                 (R.from_cupy(xv), R.from_cupy(out), R.from_cupy(idx), g))
    shape = _shape(x.shape[:-nd], (OH, OW), nd)
    return R.from_cupy(out.reshape(shape)), R.from_cupy(idx.reshape(shape))


def _windows(n_in, n_out):
    """Adaptive windows [floor(o*I/O), ceil((o+1)*I/O)) as (starts, ends) lists."""
    starts = [(o * n_in) // n_out for o in range(n_out)]
    ends = [((o + 1) * n_in + n_out - 1) // n_out for o in range(n_out)]
    return starts, ends


def _window_taps(n_in, n_out):
    """(pos, valid): (O, K) host arrays of the input positions of each adaptive window,
    padded to the widest window K (padding: the window's start, marked invalid)."""
    starts, ends = _windows(n_in, n_out)
    K = max((e - b for b, e in zip(starts, ends)), default=0)
    t = np.arange(K)
    pos = np.asarray(starts)[:, None] + t[None, :]
    valid = pos < np.asarray(ends)[:, None]
    return np.where(valid, pos, np.asarray(starts)[:, None]), valid


@gpu_op("nn.functional.pooling._adaptive_max_pool")
def _adaptive_max_pool(x, nd, osize):
    cp = R.cp()
    xv = _planes(x, nd)
    n, H, W = xv.shape
    OH, OW = osize
    shape = _shape(x.shape[:-nd], (OH, OW), nd)
    if n * OH * OW == 0:
        return (R.from_cupy(cp.empty(shape, dtype=xv.dtype)),
                R.from_cupy(cp.empty(shape, dtype=_INT64)))
    hp, hv = _window_taps(H, OH)                                  # (OH, KH)
    wp, wv = _window_taps(W, OW)                                  # (OW, KW)
    # flat in-plane index of every tap, (OH, OW, KH*KW), in the CPU's scan order
    flat = (hp[:, None, :, None] * W + wp[None, :, None, :]).reshape(OH, OW, -1)
    valid = (hv[:, None, :, None] & wv[None, :, None, :]).reshape(OH, OW, -1)
    flat_d = cp.asarray(flat, dtype=_INT64)
    vals = xv.reshape(n, H * W)[:, flat_d]                        # (n, OH, OW, K)
    if not valid.all():
        vals = cp.where(cp.asarray(valid)[None], vals, vals.dtype.type(-np.inf))
    # argmax takes the first maximum (and the first NaN), like the kernels
    am = cp.argmax(vals, axis=-1)
    out = cp.take_along_axis(vals, am[..., None], axis=-1)[..., 0]
    idx = cp.take_along_axis(cp.broadcast_to(flat_d, vals.shape), am[..., None], axis=-1)[..., 0]
    return (R.from_cupy(cp.ascontiguousarray(out).reshape(shape)),
            R.from_cupy(cp.ascontiguousarray(idx).reshape(shape)))


@gpu_op("nn.functional.pooling._index_scatter")
def _index_scatter(src, idx, in_shape, nd):
    """Zeros of shape in_shape with src added at the flat per-plane indices idx (the
    gradient of max pooling)."""
    cp = R.cp()
    sv = _planes(src, nd)
    iv = _planes(idx, nd)
    n = sv.shape[0]
    out_planes = _lead(tuple(in_shape), nd)[0]
    plane = (1 if nd == 1 else in_shape[-2]) * in_shape[-1]
    out = cp.zeros((out_planes, plane), dtype=sv.dtype)
    if sv.size:
        L = sv.shape[1] * sv.shape[2]
        i2 = iv.reshape(n, L)
        ok = (i2 >= 0) & (i2 < plane)                             # the CPU skips the rest
        if R.suffix(sv.dtype) is not None:
            # index.cu's scatter-add per plane (16-bit atomics included); an index the
            # CPU skips becomes `plane`, which the kernel skips too (its flag is unused)
            i2 = cp.ascontiguousarray(cp.where(ok, i2, plane))
            flag = cp.zeros(1, dtype=np.int32)
            R.launch(_kernel("scatter_add", sv.dtype), R.blocks(n * L), 256,
                     (R.from_cupy(cp.ascontiguousarray(sv.reshape(n, L))), R.from_cupy(i2),
                      R.from_cupy(out), n, plane, L, 1, R.from_cupy(flag)))
        else:
            flat = cp.where(ok, i2, 0) + (cp.arange(n, dtype=_INT64) * plane)[:, None]
            vals = cp.where(ok, sv.reshape(n, L), sv.dtype.type(0))
            cp.add.at(out.reshape(-1), flat.reshape(-1), vals.reshape(-1))
    return R.from_cupy(out.reshape(tuple(in_shape)))


@gpu_op("nn.functional.pooling._index_gather")
def _index_gather(src, idx, nd):
    """src's values at the flat per-plane indices idx (the adjoint of _index_scatter)."""
    cp = R.cp()
    sv = _planes(src, nd)
    iv = _planes(idx, nd)
    n, H, W = sv.shape
    plane = H * W
    out_shape = tuple(idx.shape)
    if iv.size == 0:
        return R.from_cupy(cp.empty(out_shape, dtype=sv.dtype))
    i2 = iv.reshape(iv.shape[0], -1)
    ok = (i2 >= 0) & (i2 < plane)
    got = cp.take_along_axis(sv.reshape(n, plane), cp.where(ok, i2, 0), axis=1)
    out = cp.where(ok, got, sv.dtype.type(0))
    return R.from_cupy(cp.ascontiguousarray(out).reshape(out_shape))


# ------------------------------------------------------------------ average pooling

def _avg_launch(stem, src, dst, n, H, W, OH, OW, k, s, p, include_pad, divisor, total):
    if total == 0:
        return
    g = geom(n, H, W, k[0], k[1], OH, OW, s[0], s[1], p[0], p[1], 1, 1)
    R.launch(_kernel(stem, src.dtype), R.blocks(total), 256,
             (R.from_cupy(src), R.from_cupy(dst), g, np.int32(1 if include_pad else 0),
              int(divisor or 0)))


@gpu_op("nn.functional.pooling._avg_pool")
def _avg_pool(x, nd, k, s, p, ceil, include_pad, divisor):
    cp = R.cp()
    xv = _planes(x, nd)
    n, H, W = xv.shape
    OH = pool_out(H, k[0], s[0], p[0], 1, ceil)
    OW = pool_out(W, k[1], s[1], p[1], 1, ceil)
    out = cp.empty((n, OH, OW), dtype=xv.dtype)
    _avg_launch("avg_pool2d_fwd", xv, out, n, H, W, OH, OW, k, s, p, include_pad, divisor,
                out.size)
    return R.from_cupy(out.reshape(_shape(x.shape[:-nd], (OH, OW), nd)))


@gpu_op("nn.functional.pooling._avg_pool_backward")
def _avg_pool_backward(g, in_shape, nd, k, s, p, ceil, include_pad, divisor):
    cp = R.cp()
    gv = _planes(g, nd)
    n, OH, OW = gv.shape
    H, W = (1, in_shape[-1]) if nd == 1 else (in_shape[-2], in_shape[-1])
    out = cp.empty((n, H, W), dtype=gv.dtype)
    if gv.size == 0:
        out.fill(0)
    _avg_launch("avg_pool2d_bwd", gv, out, n, H, W, OH, OW, k, s, p, include_pad, divisor,
                out.size if gv.size else 0)
    return R.from_cupy(out.reshape(tuple(in_shape)))


# ------------------------------------------------------------------ adaptive average

_MATS = {}


def _avg_matrix(n_in, n_out, dtype, device):
    """The (n_out, n_in) adaptive averaging matrix on the GPU (cached: it is tiny and
    the same for every batch)."""
    key = (n_in, n_out, np.dtype(dtype).str, device)
    m = _MATS.get(key)
    if m is None:
        starts, ends = _windows(n_in, n_out)
        a = np.zeros((n_out, n_in), dtype=np.float64)
        for o, (b, e) in enumerate(zip(starts, ends)):
            a[o, b:e] = 1.0 / (e - b)
        m = R.cp().asarray(a.astype(dtype))
        if len(_MATS) > 256:
            _MATS.clear()
        _MATS[key] = m
    return m


def _device_id():
    return R.cp().cuda.Device().id


@gpu_op("nn.functional.pooling._adaptive_avg_pool")
def _adaptive_avg_pool(x, nd, osize):
    cp = R.cp()
    xv = _planes(x, nd)
    n, H, W = xv.shape
    OH, OW = osize
    shape = _shape(x.shape[:-nd], (OH, OW), nd)
    if n * OH * OW == 0:
        return R.from_cupy(cp.empty(shape, dtype=xv.dtype))
    if OH == 1 and OW == 1:                                       # global average
        out = xv.reshape(n, H * W).mean(axis=1)
    else:
        dev = _device_id()
        ah = _avg_matrix(H, OH, xv.dtype, dev)
        aw = _avg_matrix(W, OW, xv.dtype, dev)
        out = mm(mm(ah, xv), aw.T)                  # (n, OH, OW)
    return R.from_cupy(cp.ascontiguousarray(out).reshape(shape))


@gpu_op("nn.functional.pooling._adaptive_avg_pool_backward")
def _adaptive_avg_pool_backward(g, in_shape, nd):
    cp = R.cp()
    gv = _planes(g, nd)
    n, OH, OW = gv.shape
    H, W = (1, in_shape[-1]) if nd == 1 else (in_shape[-2], in_shape[-1])
    if n * H * W == 0:
        return R.from_cupy(cp.zeros(tuple(in_shape), dtype=gv.dtype))
    if OH == 1 and OW == 1:
        out = cp.broadcast_to(gv / gv.dtype.type(H * W), (n, H, W))
    else:
        dev = _device_id()
        ah = _avg_matrix(H, OH, gv.dtype, dev)
        aw = _avg_matrix(W, OW, gv.dtype, dev)
        out = mm(mm(ah.T, gv), aw)                  # (n, H, W)
    return R.from_cupy(cp.ascontiguousarray(out).reshape(tuple(in_shape)))
