"""The fused attention ops of ember.nn.functional.attention on CUDA arrays.

Scores, weighted sums and their gradients are batched cuBLAS GEMMs
(``_gemm.mm`` over broadcast (batch, head) axes, k read transposed in place) around softmax.cu's row
kernels; the multi-head core reads q, k, v as strided views of the packed
projection and writes its output (and the packed gradient) in place, as the CPU
does.  ``sdpa_grad`` / ``core_grad`` are the first-order branches of the gradient
rules (attention.py calls them for GPU arrays; its create_graph branch is ember
ops and needs nothing here).
"""
import numpy as np

from ember.cuda._dispatch import gpu_op
from ember._core.nn_args import qkv_views, merged_view, core_dims
from ember.cuda import _runtime as R
from ember.cuda._gemm import mm
from ember.cuda.ops_softmax import row_softmax, row_softmax_backward

__all__ = ["sdpa_grad", "core_grad"]


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


@R.on_arrays_device
def sdpa_grad(g_out, g_p, p, query, key, value, bias_grad, scale):
    """attention._sdpa_grad's first-order branch for GPU arrays: (dq, dk, dv, dbias, None)."""
    q, k, v = R.as_cupy(query), R.as_cupy(key), R.as_cupy(value)
    dq, dk, dv, ds = _attention_grad(_cp_or_none(g_out), _cp_or_none(g_p), R.as_cupy(p),
                                     q, k, v, scale)
    return (R.from_cupy(dq), R.from_cupy(dk), R.from_cupy(dv),
            R.from_cupy(ds) if bias_grad else None, None)


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


@R.on_arrays_device
def core_grad(g_out, g_p, p, qkv, num_heads, scale, bf, bias_grad):
    """attention._core_grad's first-order branch for GPU arrays: (dqkv, dbias, None, None,
    None), dqkv packed like qkv."""
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
    return R.from_cupy(dqkv), (R.from_cupy(ds) if bias_grad else None), None, None, None
