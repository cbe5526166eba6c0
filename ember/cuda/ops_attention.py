"""The attention ops of ember.nn.functional.attention on CUDA arrays.

Two kinds.  The flash ops (``_flash_attention`` and its backward) run attention.cu's
fused kernels: no (L, S) score matrix is ever allocated; the forward keeps the output
and one float32 logsumexp per query row, the backward recomputes the probabilities
tile by tile (dropout's mask too, from the Philox (seed, offset) the forward stored on
the device).  The math ops (``_sdpa``, ``_self_attention_core`` and their first-order
backward ops) materialise the weights: scores, weighted sums and their gradients are
batched cuBLAS GEMMs (``_gemm.mm`` over broadcast (batch, head) axes, k read transposed
in place) around softmax.cu's row kernels; the multi-head core reads q, k, v as strided
views of the packed projection and writes its output (and the packed gradient) in
place, as the CPU does.  attention.py decides which kind runs.
"""
import struct

import numpy as np

from ember._core import array as _array
from ember.cuda._dispatch import gpu_op
from ember._core.nn_args import qkv_views, merged_view, core_dims
from ember.cuda import _runtime as R
from ember.cuda._gemm import mm
from ember.cuda.ops_softmax import row_softmax, row_softmax_backward

__all__ = []


def _cp_or_none(g):
    return None if g is None else R.as_cupy(g)


def _scores_softmax(q, k, bias, scale, batch):
    """p = softmax(q k^T * scale + bias) over the last axis, shape batch + (L, S), C-contiguous."""
    cp = R.cp()
    s = mm(q, k.swapaxes(-1, -2), alpha=scale)      # the scale applied inside the GEMM
    if bias is not None:
        s = s + R.as_cupy(bias)
    full = tuple(batch) + (q.shape[-2], k.shape[-2])
    if s.shape != full:
        s = cp.broadcast_to(s, full)
    return row_softmax(s, False)


def _attention_grad(go, g_p, p, q, k, v, scale):
    """Backward of out = p @ v, p = softmax(q k^T * scale + bias): (dq, dk, dv, ds) as cupy
    arrays with the broadcast batch shape of p (the engine sums them down)."""
    cp = R.cp()
    batch = p.shape[:-2]
    if go is None:
        dv = cp.zeros(batch + (v.shape[-2], v.shape[-1]), dtype=v.dtype)
        dp = cp.zeros(p.shape, dtype=p.dtype)
    else:
        dv = mm(p.swapaxes(-1, -2), go)
        dp = mm(go, v.swapaxes(-1, -2))
    if dv.shape[:-2] != batch:
        dv = cp.ascontiguousarray(cp.broadcast_to(dv, batch + dv.shape[-2:]))
    if g_p is not None:
        dp = dp + g_p
    ds = row_softmax_backward(cp.broadcast_to(dp, p.shape), p, False)
    dq = mm(ds, k, alpha=scale)
    dk = mm(ds.swapaxes(-1, -2), q, alpha=scale)
    return dq, dk, dv, ds


@gpu_op("nn.functional.attention._sdpa")
def _sdpa(query, key, value, bias, scale):
    """(softmax(q k^T * scale + bias) @ v, the weights) on CUDA."""
    cp = R.cp()
    bs = np.broadcast_shapes(tuple(query.shape[:-2]), tuple(key.shape[:-2]),
                             tuple(value.shape[:-2]),
                             tuple(bias.shape[:-2]) if bias is not None else ())
    q, k, v = R.as_cupy(query), R.as_cupy(key), R.as_cupy(value)
    p = _scores_softmax(q, k, bias, scale, bs)
    out = mm(p, v)
    want = bs + (query.shape[-2], value.shape[-1])
    if out.shape != want:
        out = cp.ascontiguousarray(cp.broadcast_to(out, want))
    return R.from_cupy(out), R.from_cupy(p)


@gpu_op("nn.functional.attention._sdpa_backward")
def _sdpa_backward(g_out, g_p, p, query, key, value, scale):
    """attention._sdpa's first-order backward on CUDA: (dq, dk, dv, ds)."""
    q, k, v = R.as_cupy(query), R.as_cupy(key), R.as_cupy(value)
    dq, dk, dv, ds = _attention_grad(_cp_or_none(g_out), _cp_or_none(g_p), R.as_cupy(p),
                                     q, k, v, scale)
    return R.from_cupy(dq), R.from_cupy(dk), R.from_cupy(dv), R.from_cupy(ds)


@gpu_op("nn.functional.attention._self_attention_core")
def _self_attention_core(qkv, bias, num_heads, scale, bf):
    """Multi-head self-attention from the packed projection on CUDA (see attention.py)."""
    cp = R.cp()
    n, e, d = core_dims(qkv, num_heads, bf)
    c = cp.ascontiguousarray(R.as_cupy(qkv))
    q, k, v = qkv_views(c, n, num_heads, d, bf)
    out = cp.empty(tuple(qkv.shape[:2]) + (e,), dtype=c.dtype)
    p = _scores_softmax(q, k, bias, scale, q.shape[:-2])
    merged_view(out, n, num_heads, d, bf)[...] = mm(p, v)
    return R.from_cupy(out), R.from_cupy(p)


@gpu_op("nn.functional.attention._self_attention_core_backward")
def _self_attention_core_backward(g_out, g_p, p, qkv, num_heads, scale, bf):
    """attention._self_attention_core's first-order backward on CUDA: (dqkv, ds), dqkv
    packed like qkv."""
    cp = R.cp()
    n, e, d = core_dims(qkv, num_heads, bf)
    c = cp.ascontiguousarray(R.as_cupy(qkv))
    q, k, v = qkv_views(c, n, num_heads, d, bf)
    dqkv = cp.empty(tuple(qkv.shape), dtype=c.dtype)
    go = None
    if g_out is not None:
        go = merged_view(cp.ascontiguousarray(R.as_cupy(g_out)), n, num_heads, d, bf)
    dq, dk, dv, ds = _attention_grad(go, _cp_or_none(g_p), R.as_cupy(p), q, k, v, scale)
    for dst, src in zip(qkv_views(dqkv, n, num_heads, d, bf), (dq, dk, dv)):
        dst[...] = src
    return R.from_cupy(dqkv), R.from_cupy(ds)


# ------------------------------------------------------------------ flash attention

# struct FlashGeom (attention.cu): 37 int64 (B, H, L, S, D, Dv; the (batch, head, row,
# feature) element strides of q, k, v, out, dout, mask0, mask1; kind0, kind1, causal),
# 2 doubles (scale, p), 2 uint64 (seed, offset): no padding anywhere.
_GEOM = struct.Struct("<37q2d2Q")
_THREADS = 128
_FLASH_SUFFIX = {"float32": "f32", "float16": "f16", "bfloat16": "bf16"}


def _strides4(x, B, H):
    """x's (batch, head, row, feature) element strides, as a list, seen broadcast to
    (B, H, rows, features): leading axes added, 0 where an axis is missing or of length 1
    (so x of 2 to 4 dimensions, a head view or a broadcast mask, is read in place)."""
    item = x.itemsize
    st = [s // item for s in x.strides]
    shape = list(x.shape)
    while len(st) < 4:
        st.insert(0, 0)
        shape.insert(0, 1)
    return [0 if n == 1 else s for n, s in zip(shape, st)]


def _geom(B, H, L, S, D, Dv, strides, kinds, causal, scale, p, seed=0, offset=0):
    flat = [B, H, L, S, D, Dv]
    for s in strides:
        flat += s
    return _GEOM.pack(*(int(v) for v in flat), int(kinds[0]), int(kinds[1]), int(causal),
                      float(scale), float(p), int(seed), int(offset))


def _flash_dims(query, key, value):
    """(batch shape, B, H, L, S, D, Dv, DM, dtype suffix), or None where no kernel fits."""
    sfx = _FLASH_SUFFIX.get(np.dtype(query.dtype).name)
    D, Dv = query.shape[-1], value.shape[-1]
    if sfx is None or max(D, Dv) > 128 or min(D, Dv) < 1 or query.ndim > 4:
        return None
    bs = tuple(np.broadcast_shapes(tuple(query.shape[:-2]), tuple(key.shape[:-2]),
                                   tuple(value.shape[:-2])))
    b4 = (1,) * (2 - len(bs)) + bs
    return (bs, b4[0], b4[1], query.shape[-2], key.shape[-2], D, Dv,
            64 if max(D, Dv) <= 64 else 128, sfx)


def _mask_strides(m, B, H):
    return [0, 0, 0, 0] if m is None else _strides4(m, B, H)


def _grid(items):
    return max(1, min(items, 65535))


@gpu_op("nn.functional.attention._flash_attention")
def _flash_attention(query, key, value, mask0, mask1, kind0, kind1, causal, scale, dropout_p,
                     out_order):
    """attention.cu's fused forward: (out, logsumexp (B, H, L) float32, rng state (2,)
    int64 on the device); `out` is a (batch..., L, Dv) view of a buffer laid out in
    `out_order` (axes of (B, H, L, Dv))."""
    dims = _flash_dims(query, key, value)
    if dims is None:
        return NotImplemented
    bs, B, H, L, S, D, Dv, DM, sfx = dims
    dev = query.get_device()
    order = tuple(int(c) for c in out_order)
    full = (B, H, L, Dv)
    buf = R.empty(tuple(full[a] for a in order), query.dtype, dev)
    bst = [0] * 4
    for pos, a in enumerate(order):
        bst[a] = buf.strides[pos]
    o4 = _array._as_strided(buf, full, tuple(bst), 0, query.dtype)
    lse = R.empty((B, H, L), np.float32, dev)
    rng = R.empty((2,), np.int64, dev)
    seed = offset = 0
    if dropout_p > 0.0:
        from ember.cuda.ops_random import _take
        seed, offset = _take(dev)
    st = [_strides4(x, B, H) for x in (query, key, value, o4)]
    st += [[0] * 4, _mask_strides(mask0, B, H), _mask_strides(mask1, B, H)]
    g = _geom(B, H, L, S, D, Dv, st, (kind0, kind1), causal, scale, dropout_p, seed, offset)
    R.launch(f"ember_flash_fwd_{sfx}_d{DM}", _grid(B * H * -(-L // 32)), _THREADS,
             (query, key, value, mask0, mask1, o4, lse, rng, g))
    if order == (0, 1, 2, 3):
        out = _array._as_strided(buf, bs + (L, Dv), tuple(buf.strides[4 - len(bs) - 2:]), 0,
                                 query.dtype)
    else:
        out = o4
    return out, lse, rng


@gpu_op("nn.functional.attention._flash_attention_backward")
def _flash_attention_backward(g_out, query, key, value, out, lse, rng, mask0, mask1, kind0,
                              kind1, causal, scale, dropout_p):
    """attention.cu's fused backward: (dq, dk, dv), each of the broadcast batch shape."""
    bs, B, H, L, S, D, Dv, DM, sfx = _flash_dims(query, key, value)
    dev = query.get_device()
    dt = query.dtype
    st = [_strides4(x, B, H) for x in (query, key, value, out, g_out)]
    st += [_mask_strides(mask0, B, H), _mask_strides(mask1, B, H)]
    g = _geom(B, H, L, S, D, Dv, st, (kind0, kind1), causal, scale, dropout_p)
    delta = R.empty((B, H, L), np.float32, dev)
    R.launch(f"ember_flash_bwd_delta_{sfx}", R.blocks(B * H * L), 256, (out, g_out, delta, g))
    dq32 = R.zeros((B, H, L, D), np.float32, dev)
    dk = R.empty((B, H, S, D), dt, dev)
    dv = R.empty((B, H, S, Dv), dt, dev)
    R.launch(f"ember_flash_bwd_{sfx}_d{DM}", _grid(B * H * -(-S // 16)), _THREADS,
             (query, key, value, mask0, mask1, g_out, lse, delta, rng, dq32, dk, dv, g))
    dq = dq32 if np.dtype(dt) == np.float32 else R.astype(dq32, dt)
    return (dq.reshape(bs + (L, D)), dk.reshape(bs + (S, D)), dv.reshape(bs + (S, Dv)))
