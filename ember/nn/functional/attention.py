"""Attention: scaled dot-product attention and the multi-head attention forward.

On CUDA arrays of float16, bfloat16 or float32 with head dims up to 128 (and, for
multi-head attention, no weights asked for), attention is the fused flash kernel
(`_flash_attention`): causal, boolean and additive masks and dropout run inside it and
the (L, S) scores never exist in memory.  Elsewhere the math path below runs (also the
fused kernel's oracle in the tests).

Without dropout, attention (scores, mask, softmax, weighted sum) is one autograd
node whose forward and backward are batched GEMMs (BLAS on ``(N, H, L, D)`` views,
read in place) around ember's fused softmax kernel; multi-head self-attention
works straight on the packed ``q, k, v`` projection and writes the merged heads
(and, backward, the packed projection gradient) without copies.  With dropout, it
is the same computation composed of recorded ember ops.

Numerics follow PyTorch's math path (``q * scale @ k^T``, masks added before a
softmax over the last axis).  A row whose every position is masked gives NaN, as
in PyTorch.
"""
import math

import numpy as np

import ember as E
from ember._core.array import ndarray
from ember._api._util import numpy_view, empty_raw
from ember.autograd.registry import defop
from ember._kernels.cpu.gemm import matmul as _gemm
from ember._kernels.cpu import gemm as _gemm_mod
from ember._kernels.cpu import attention as _fa
from ember._core.dtypes import dtype_kind
from ember.backends.cuda import flash_sdp_enabled as _flash_sdp_enabled
from ember._core.nn_args import (qkv_views as _qkv_views, merged_view as _merged_view,
                                 core_dims as _core_dims)

__all__ = ["scaled_dot_product_attention", "multi_head_attention_forward"]

_CAUSAL = {}          # (L, S, dtype) -> float (L, S) bias, 0 on and below the diagonal
_F32 = np.dtype(np.float32)
_FUSED_PAR_MACS = 1 << 18       # below: the fused kernel runs on one thread anyway


def _F():
    """The nn.functional ops attention is built from, from their own modules (the package
    ember.nn.functional imports this one)."""
    from types import SimpleNamespace
    from ember.nn.functional.dropout import dropout
    from ember.nn.functional.linear import linear
    from ember.nn.functional.softmax import softmax
    return SimpleNamespace(softmax=softmax, dropout=dropout, linear=linear)


def _causal_bias(L, S, dtype, device=None):
    """The (L, S) additive causal mask (0 where j <= i, -inf above) on `device`, cached."""
    key = (L, S, str(dtype), str(device))
    b = _CAUSAL.get(key)
    if b is None:
        if len(_CAUSAL) > 64:
            _CAUSAL.clear()
        b = E.triu(E.full((L, S), -math.inf, dtype=dtype, device=device), 1)
        _CAUSAL[key] = b
    return b


def _bool_to_bias(mask, dtype, true_means_keep):
    """A boolean mask as an additive float mask of `dtype` (0 kept, -inf masked)."""
    zero = E.zeros((), dtype=dtype, device=mask.device)
    ninf = E.full((), -math.inf, dtype=dtype, device=mask.device)
    if true_means_keep:
        return E.where(mask, zero, ninf)
    return E.where(mask, ninf, zero)


def _check_float(x, what, op):
    if not isinstance(x, ndarray):
        raise TypeError(f"{op}: {what} must be an ember array, got {type(x).__name__}")
    if dtype_kind(x.dtype) != "f":
        raise TypeError(f"{op}: {what} must be a floating-point array, got dtype {x.dtype}")


def _attend(q, k, v, bias, dropout_p, scale, need_weights=False):
    """softmax(q*scale @ k^T + bias) (dropout) @ v on (..., L, D) arrays."""
    F = _F()
    if scale != 1.0:
        q = q * scale
    w = q @ k.swapaxes(-1, -2)
    if bias is not None:
        w = w + bias
    w = F.softmax(w, dim=-1)
    if dropout_p > 0.0:
        w = F.dropout(w, p=dropout_p, training=True)
    out = w @ v
    return (out, w) if need_weights else out


# ------------------------------------------------------------------ fused attention
# Without dropout, attention is ONE autograd node.  The forward and the first-order
# backward run on NumPy views of ember's memory: BLAS reads q, k, v in place (strided
# head views are fine), the scores are scaled, masked and soft-maxed in place (the
# softmax kernel of ember.nn.functional.softmax), and the results are written straight
# into their final layout.  With ``create_graph=True`` the rule recomputes the same
# formulas with recorded ember ops, so higher-order gradients are exact.

def _fused_shape(q, k, v, out):
    """The batch shape when the fused float32 kernel (ember._kernels.cpu.attention) takes
    this attention, else None: the kernel switched on (AVX-512F), ember's float32 GEMM
    kernel on, float32 operands, non-empty matrices, the output's columns contiguous, at
    most 2^20 scores per (batch, head) pair, and at least as many pairs as threads (the
    kernel gives each pair to one thread; below that, or above the limit, the unfused
    path's GEMMs split single pairs over the threads)."""
    if not (_fa.fused_enabled() and _gemm_mod.f32_kernel()):
        return None
    if not (q.dtype == _F32 and k.dtype == _F32 and v.dtype == _F32 and out.dtype == _F32):
        return None
    L, S = q.shape[-2], k.shape[-2]
    if not (L and S and q.shape[-1] and v.shape[-1]) or L * S > _fa.MAX_SCORES \
            or out.strides[-1] != 4:
        return None
    bs = tuple(out.shape[:-2])
    if len(bs) > _fa.MAX_BATCH_DIMS:
        return None
    pairs = math.prod(bs)
    if pairs and pairs < E.get_num_threads() and pairs * L * S * (q.shape[-1] + v.shape[-1]) \
            >= _FUSED_PAR_MACS:
        return None
    return bs


def _batch_view(x, bs):
    """x (NumPy, (..., m, n)) seen with batch shape `bs` (stride 0 where it broadcasts)."""
    if tuple(x.shape[:-2]) == bs:
        return x
    return np.broadcast_to(x, bs + tuple(x.shape[-2:]))


def _np_attention(q, k, v, bias, scale, out):
    """NumPy q (..., L, D), k (..., S, D), v (..., S, Dv) -> p (ember, (..., L, S));
    softmax(q k^T * scale + bias) @ v is written into `out` (a NumPy array/view).
    float32 attention runs the fused kernel where `_fused_shape` allows.  Otherwise the
    scale is applied by the GEMM as it stores the scores, and the softmax runs in
    place over them: no pass and no array beyond the scores themselves."""
    from ember._kernels.cpu import softmax as _k
    bs = _fused_shape(q, k, v, out)
    bn = None if bias is None or bs is None else numpy_view(bias)
    if bs is not None and (bn is None or bn.dtype == _F32):
        p = empty_raw(bs + (q.shape[-2], k.shape[-2]), q.dtype)
        try:
            bn = None if bn is None else _batch_view(bn, bs)
        except ValueError:              # a bias the unfused path reports on
            bn = False
        if bn is not False and _fa.forward(_batch_view(q, bs), _batch_view(k, bs),
                                           _batch_view(v, bs), bn, scale, out,
                                           numpy_view(p)):
            return p
    s = empty_raw(tuple(out.shape[:-2]) + (q.shape[-2], k.shape[-2]), q.dtype)
    sn = numpy_view(s)
    _gemm(q, k.swapaxes(-1, -2), sn, scale)
    if bias is not None:
        np.add(sn, numpy_view(bias), out=sn)
    p = _k.softmax_forward(s, sn.ndim - 1, False, True)
    _gemm(numpy_view(p), v, out)
    return p


def _np_attention_grad(go, g_p, p, q, k, v, scale, dq, dk, dv, need_ds=True):
    """First-order backward of `_np_attention` (go: gradient of the output, g_p: of p;
    either may be None).  Writes dq, dk, dv (NumPy arrays/views); returns the gradient
    of the scores before scaling (the bias gradient), an ember array, or None when
    `need_ds` is False and the fused kernel ran (it then never stores it).  The softmax
    backward runs in place over dp, and the GEMMs apply the scale as they store (the
    fused float32 kernel where `_fused_shape` allows)."""
    from ember._kernels.cpu import softmax as _k
    pn = numpy_view(p)
    bs = _fused_shape(q, k, v, dv)
    if bs is not None and tuple(pn.shape[:-2]) == bs and (go is None or go.dtype == _F32) \
            and (g_p is None or g_p.dtype == _F32):
        ds = empty_raw(tuple(p.shape), p.dtype) if need_ds else None
        if _fa.backward(go, g_p, pn, _batch_view(q, bs), _batch_view(k, bs),
                        _batch_view(v, bs), scale, dq, dk, dv,
                        None if ds is None else numpy_view(ds)):
            return ds
    dp = empty_raw(tuple(p.shape), p.dtype)
    dpn = numpy_view(dp)
    if go is None:
        dv[...] = 0
        dpn[...] = 0
    else:
        _gemm(pn.swapaxes(-1, -2), go, dv)
        _gemm(go, v.swapaxes(-1, -2), dpn)
    if g_p is not None:
        np.add(dpn, g_p, out=dpn)
    ds = _k.softmax_backward(dp, p, pn.ndim - 1, False, True)
    dsn = numpy_view(ds)
    _gemm(dsn, k, dq, scale)
    _gemm(dsn.swapaxes(-1, -2), q, dk, scale)
    return ds


def _em_attention(q, k, v, bias, scale):
    """The same with recorded ember ops: (out, p)."""
    s = (q @ k.swapaxes(-1, -2)) * scale
    if bias is not None:
        s = s + bias
    p = _F().softmax(s, dim=-1)
    return p @ v, p


def _em_attention_grad(go, g_p, p, q, k, v, scale):
    """Backward of `_em_attention` with ember ops: (dq, dk, dv, ds)."""
    if go is None:
        dv = E.zeros(v.shape, dtype=v.dtype)
        dp = E.zeros(p.shape, dtype=p.dtype)
    else:
        dv = p.swapaxes(-1, -2) @ go
        dp = go @ v.swapaxes(-1, -2)
    if g_p is not None:
        dp = dp + g_p
    ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True))
    return (ds @ k) * scale, (ds.swapaxes(-1, -2) @ q) * scale, dv, ds


def _np_or_none(g):
    return None if g is None else numpy_view(E.ascontiguousarray(g))


def _no_double_backward(name):
    def rule(*args):
        raise RuntimeError(f"ember.nn.functional.attention.{name} is a first-order backward: "
                           f"its gradient rule runs the recorded ember-op formulas instead")
    return rule


@defop("nn.functional.attention._sdpa_backward", grad=_no_double_backward("_sdpa_backward"))
def _sdpa_backward(g_out, g_p, p, query, key, value, scale):
    """First-order backward of `_sdpa` (g_out, g_p: gradients of its output and weights,
    either may be None): (dq, dk, dv, ds) of the weights' broadcast batch shape, ds the
    gradient of the scores before scaling (the bias gradient).  The GPU one is
    ember.cuda.ops_attention's."""
    return _sdpa_backward_host(g_out, g_p, p, query, key, value, scale)


def _sdpa_backward_host(g_out, g_p, p, query, key, value, scale, need_ds=True):
    """`_sdpa_backward` on host arrays (ds None when not `need_ds` and the fused kernel
    ran)."""
    qn, kn, vn = numpy_view(query), numpy_view(key), numpy_view(value)
    bs = tuple(p.shape[:-2])
    dq = empty_raw(bs + tuple(query.shape[-2:]), query.dtype)
    dk = empty_raw(bs + tuple(key.shape[-2:]), key.dtype)
    dv = empty_raw(bs + tuple(value.shape[-2:]), value.dtype)
    ds = _np_attention_grad(_np_or_none(g_out), _np_or_none(g_p), p, qn, kn, vn, scale,
                            numpy_view(dq), numpy_view(dk), numpy_view(dv), need_ds)
    return dq, dk, dv, ds


def _sdpa_grad(g, res, query, key, value, bias, scale):
    g_out, g_p = g
    bias_grad = bias is not None and getattr(bias, "requires_grad", False)
    if E.is_grad_enabled():
        out, p = _em_attention(query, key, value, bias, scale)
        dq, dk, dv, ds = _em_attention_grad(g_out, g_p, p, query, key, value, scale)
    elif bias_grad or query.is_cuda:
        dq, dk, dv, ds = _sdpa_backward(g_out, g_p, res[1], query, key, value, scale)
    else:       # host arrays, no bias gradient: the fused kernel need not store ds
        dq, dk, dv, ds = _sdpa_backward_host(g_out, g_p, res[1], query, key, value, scale,
                                             False)
    return dq, dk, dv, (ds if bias_grad else None), None


@defop("nn.functional.attention._sdpa", grad=_sdpa_grad, save_args=True, save_result=True)
def _sdpa(query, key, value, bias, scale):
    """(softmax(q k^T * scale + bias) @ v, the weights) for same-dtype float arrays."""
    bs = np.broadcast_shapes(tuple(query.shape[:-2]), tuple(key.shape[:-2]),
                             tuple(value.shape[:-2]),
                             tuple(bias.shape[:-2]) if bias is not None else ())
    out = empty_raw(bs + (query.shape[-2], value.shape[-1]), query.dtype)
    p = _np_attention(numpy_view(query), numpy_view(key), numpy_view(value), bias, scale,
                      numpy_view(out))
    return out, p


# Multi-head self-attention from the packed projection ``qkv`` (one GEMM of the input):
# q, k, v are (N, H, L, D) views of qkv, the output is written straight into the merged
# (..., L, E) layout, and the backward writes dq, dk, dv straight into one packed
# gradient for the projection (no head split/merge copies).

def _core_grad(g, res, qkv, bias, num_heads, scale, bf):
    g_out, g_p = g
    n, e, d = _core_dims(qkv, num_heads, bf)
    bias_grad = bias is not None and getattr(bias, "requires_grad", False)
    if E.is_grad_enabled():
        if bf:
            q, k, v = E.unstack(qkv.reshape(n, -1, 3, num_heads, d).permute(2, 0, 3, 1, 4))
        else:
            q, k, v = E.unstack(qkv.reshape(-1, n, 3, num_heads, d).permute(2, 1, 3, 0, 4))
        out, p = _em_attention(q, k, v, bias, scale)
        go = None
        if g_out is not None:
            go = (g_out.reshape(n, -1, num_heads, d).permute(0, 2, 1, 3) if bf else
                  g_out.reshape(-1, n, num_heads, d).permute(1, 2, 0, 3))
        dq, dk, dv, ds = _em_attention_grad(go, g_p, p, q, k, v, scale)
        st = E.stack([dq, dk, dv], axis=0)                  # (3, N, H, L, D)
        dqkv = st.permute(1, 3, 0, 2, 4) if bf else st.permute(3, 1, 0, 2, 4)
        return dqkv.reshape(qkv.shape), (ds if bias_grad else None), None, None, None
    if bias_grad or qkv.is_cuda:
        dqkv, ds = _self_attention_core_backward(g_out, g_p, res[1], qkv, num_heads, scale, bf)
    else:       # host arrays, no bias gradient: the fused kernel need not store ds
        dqkv, ds = _core_backward_host(g_out, g_p, res[1], qkv, num_heads, scale, bf, False)
    return dqkv, (ds if bias_grad else None), None, None, None


@defop("nn.functional.attention._self_attention_core_backward",
       grad=_no_double_backward("_self_attention_core_backward"))
def _self_attention_core_backward(g_out, g_p, p, qkv, num_heads, scale, bf):
    """First-order backward of `_self_attention_core`: (dqkv packed like qkv, ds).  The
    GPU one is ember.cuda.ops_attention's."""
    return _core_backward_host(g_out, g_p, p, qkv, num_heads, scale, bf)


def _core_backward_host(g_out, g_p, p, qkv, num_heads, scale, bf, need_ds=True):
    """`_self_attention_core_backward` on host arrays (ds None when not `need_ds` and the
    fused kernel ran)."""
    n, e, d = _core_dims(qkv, num_heads, bf)
    q, k, v = _qkv_views(numpy_view(qkv), n, num_heads, d, bf)
    dqkv = empty_raw(tuple(qkv.shape), qkv.dtype)
    dq, dk, dv = _qkv_views(numpy_view(dqkv), n, num_heads, d, bf)
    go = _np_or_none(g_out)
    if go is not None:
        go = _merged_view(go, n, num_heads, d, bf)
    ds = _np_attention_grad(go, _np_or_none(g_p), p, q, k, v, scale, dq, dk, dv, need_ds)
    return dqkv, ds


@defop("nn.functional.attention._self_attention_core", grad=_core_grad, save_args=True,
       save_result=True)
def _self_attention_core(qkv, bias, num_heads, scale, bf):
    """softmax(q k^T * scale + bias) v per head, from the packed C-contiguous projection
    qkv ((N, L, 3E) when bf, else (L, N, 3E)).  Returns (output in qkv's layout with E
    features, attention weights (N, H, L, L))."""
    n, e, d = _core_dims(qkv, num_heads, bf)
    q, k, v = _qkv_views(numpy_view(qkv), n, num_heads, d, bf)
    out = empty_raw(tuple(qkv.shape[:2]) + (e,), qkv.dtype)
    p = _np_attention(q, k, v, bias, scale, _merged_view(numpy_view(out), n, num_heads, d, bf))
    return out, p


_FUSED_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


# ------------------------------------------------------------------ flash attention
# On GPU arrays attention runs as ONE fused kernel (ember/cuda/kernels/attention.cu) that
# never allocates the (L, S) scores: the forward keeps the output and a float32
# logsumexp per query row, the backward recomputes the probabilities tile by tile.
# Masks reach the kernel as they are (up to two, each broadcast through strides) with a
# kind: 1 additive float, 2 bool True = attend (SDPA), 3 bool True = masked (MHA);
# dropout runs inside the kernel on a Philox stream whose (seed, offset) the forward
# stores on the device for the backward.  The definitions below are the same
# computation with ember ops (the reference; what a device without the kernel runs).

_FLASH_DTYPES = (np.dtype(np.float32), np.dtype(np.float16), np.dtype(E.bfloat16))
_FLASH_MAX_HEAD_DIM = 128
_FLASH_IDENTITY = "0123"


def _flash_bias(mask0, mask1, kind0, kind1, causal, L, S, dtype, device):
    """The masks of a flash call as one additive float bias (None when there is none)."""
    bias = None
    for m, kind in ((mask0, kind0), (mask1, kind1)):
        if m is None or kind == 0:
            continue
        b = m.astype(dtype) if kind == 1 else _bool_to_bias(m, dtype, kind == 2)
        bias = b if bias is None else bias + b
    if causal:
        c = _causal_bias(L, S, dtype, device)
        bias = c if bias is None else bias + c
    return bias


def _acc_dtype(dtype):
    """The reference's accumulation dtype: float64 for float64, else float32."""
    return E.float64 if dtype == E.float64 else E.float32


def _flash_scores(query, key, mask0, mask1, kind0, kind1, causal, scale):
    """Scores q k^T * scale + masks in the accumulation dtype (the reference's only)."""
    acc = _acc_dtype(query.dtype)
    q, k = query.astype(acc), key.astype(acc)
    s = (q @ k.swapaxes(-1, -2)) * scale
    bias = _flash_bias(mask0, mask1, kind0, kind1, causal, q.shape[-2], k.shape[-2], acc,
                       query.device)
    return s if bias is None else s + bias


def _flash_grad(g, res, query, key, value, mask0, mask1, kind0, kind1, causal, scale,
                dropout_p, out_order):
    g_out = g[0]
    none = (None,) * 8              # masks, kinds, causal, scale, dropout_p, out_order
    if g_out is None:
        return (None, None, None) + none
    if E.is_grad_enabled():         # create_graph: recorded ember ops, exact to any order
        if dropout_p > 0.0:
            raise NotImplementedError(
                "scaled_dot_product_attention: double backward through the fused GPU "
                "attention with dropout is not supported; use dropout_p=0.0 or "
                "create_graph=False")
        bias = _flash_bias(mask0, mask1, kind0, kind1, causal, query.shape[-2],
                           key.shape[-2], query.dtype, query.device)
        out, p = _em_attention(query, key, value, bias, scale)
        dq, dk, dv, _ = _em_attention_grad(g_out, None, p, query, key, value, scale)
        return (dq, dk, dv) + none
    out, lse, rng = res
    if g_out.dtype != out.dtype:
        g_out = g_out.astype(out.dtype)
    dq, dk, dv = _flash_attention_backward(g_out, query, key, value, out, lse, rng, mask0,
                                           mask1, kind0, kind1, causal, scale, dropout_p)
    return (dq, dk, dv) + none


@defop("nn.functional.attention._flash_attention", grad=_flash_grad, save_args=True,
       save_result=True)
def _flash_attention(query, key, value, mask0, mask1, kind0, kind1, causal, scale,
                     dropout_p, out_order):
    """(softmax(q k^T * scale + masks) (dropout) @ v, float32 logsumexp of each query row
    (B, H, L), the dropout stream's (seed, offset) as 2 int64).  On CUDA the fused kernel
    runs and writes the output in the axis order `out_order` of (B, H, L, Dv) (a string
    of digits); this definition is the reference (no dropout)."""
    if dropout_p > 0.0:
        raise NotImplementedError(f"_flash_attention: dropout inside fused attention runs "
                                  f"on CUDA arrays only, got arrays on {query.device}")
    s = _flash_scores(query, key, mask0, mask1, kind0, kind1, causal, scale)
    m = s.max(axis=-1, keepdims=True)
    lse = E.log(E.exp(s - m).sum(axis=-1, keepdims=True)) + m
    out = (E.exp(s - lse) @ value.astype(s.dtype)).astype(query.dtype)
    lse = lse[..., 0].astype(E.float32)
    lead = (1,) * (3 - lse.ndim) + tuple(lse.shape)
    return out, lse.reshape(lead), E.zeros(2, dtype=E.int64)


@defop("nn.functional.attention._flash_attention_backward",
       grad=_no_double_backward("_flash_attention_backward"))
def _flash_attention_backward(g_out, query, key, value, out, lse, rng, mask0, mask1, kind0,
                              kind1, causal, scale, dropout_p):
    """First-order backward of `_flash_attention` from its output and logsumexp: (dq, dk,
    dv) of the broadcast batch shape (CUDA: the fused kernel; this: the reference, which
    recomputes the logsumexp at the inputs' precision, so float64 stays float64)."""
    if dropout_p > 0.0:
        raise NotImplementedError(f"_flash_attention_backward: dropout inside fused "
                                  f"attention runs on CUDA arrays only, got arrays on "
                                  f"{query.device}")
    s = _flash_scores(query, key, mask0, mask1, kind0, kind1, causal, scale)
    f32 = s.dtype
    m = s.max(axis=-1, keepdims=True)     # the logsumexp again, at the scores' precision
    p = E.exp(s - (E.log(E.exp(s - m).sum(axis=-1, keepdims=True)) + m))
    go, o = g_out.astype(f32), out.astype(f32)
    dv = p.swapaxes(-1, -2) @ go
    ds = p * (go @ value.astype(f32).swapaxes(-1, -2) - (go * o).sum(axis=-1, keepdims=True))
    dq = (ds @ key.astype(f32)) * scale
    dk = (ds.swapaxes(-1, -2) @ query.astype(f32)) * scale
    return dq.astype(query.dtype), dk.astype(key.dtype), dv.astype(value.dtype)


def _flash_mask_ok(mask, batch):
    """Whether the kernel can read `mask` as given: bool or float, not differentiated, its
    batch axes broadcasting into the attention's without widening them."""
    if mask is None:
        return True
    if mask.requires_grad or mask.ndim > 4 or mask.ndim < 1:
        return False
    if mask.dtype != E.bool and dtype_kind(mask.dtype) != "f":
        return False
    try:
        return tuple(np.broadcast_shapes(tuple(mask.shape[:-2]), batch)) == batch
    except ValueError:
        return False


def _flash_applies(query, key, value, *masks):
    """Whether the fused GPU kernel computes this attention: CUDA arrays of one float16 /
    bfloat16 / float32 dtype, 2-4 dimensions, head dims 1..128, non-empty, masks it can
    read."""
    if not query.is_cuda or query.dtype not in _FLASH_DTYPES or not _flash_sdp_enabled():
        return False
    if key.dtype != query.dtype or value.dtype != query.dtype:
        return False
    if not all(2 <= x.ndim <= 4 and x.size for x in (query, key, value)):
        return False
    if not (1 <= query.shape[-1] <= _FLASH_MAX_HEAD_DIM
            and 1 <= value.shape[-1] <= _FLASH_MAX_HEAD_DIM):
        return False
    try:
        batch = tuple(np.broadcast_shapes(tuple(query.shape[:-2]), tuple(key.shape[:-2]),
                                          tuple(value.shape[:-2])))
    except ValueError:
        return False
    return all(_flash_mask_ok(m, batch) for m in masks)


def _flash_mask_arg(mask, dtype, bool_kind):
    """(mask as the kernel reads it, its kind)."""
    if mask is None:
        return None, 0
    if mask.dtype == E.bool:
        return mask, bool_kind
    return (mask if mask.dtype == dtype else mask.astype(dtype)), 1


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    """``softmax(query @ key^T * scale + mask) @ value`` over the last two axes.

    query ``(..., L, E)``, key ``(..., S, E)``, value ``(..., S, Ev)`` -> ``(..., L, Ev)``;
    leading (batch, head) axes broadcast.  `attn_mask` broadcasts to ``(..., L, S)``: a
    boolean mask is True where attention is allowed, a float mask is added to the scores.
    ``is_causal=True`` masks the positions above the diagonal (top-left aligned when
    L != S) and excludes `attn_mask`.  `scale` defaults to ``1/sqrt(E)``.  Dropout with
    probability `dropout_p` is applied to the attention weights whenever
    ``dropout_p > 0`` (pass 0.0 in evaluation, as with PyTorch).  ``enable_gqa=True``
    lets key/value have fewer heads (axis -3) than query, each shared by a group.

    >>> import ember
    >>> import ember.nn.functional as F
    >>> q = ember.ones((2, 4, 5, 8))
    >>> F.scaled_dot_product_attention(q, q, q, is_causal=True).shape
    (2, 4, 5, 8)
    """
    op = "scaled_dot_product_attention"
    for name, x in (("query", query), ("key", key), ("value", value)):
        _check_float(x, name, op)
        if x.ndim < 2:
            raise ValueError(f"{op}: {name} must have at least 2 dimensions (..., seq, "
                             f"features), got shape {tuple(x.shape)}")
    if query.shape[-1] != key.shape[-1]:
        raise ValueError(f"{op}: query and key must have the same last dimension, got "
                         f"shapes {tuple(query.shape)} and {tuple(key.shape)}")
    if key.shape[-2] != value.shape[-2]:
        raise ValueError(f"{op}: key and value must have the same sequence length (axis -2), "
                         f"got shapes {tuple(key.shape)} and {tuple(value.shape)}")
    if not 0.0 <= dropout_p <= 1.0:
        raise ValueError(f"{op}: dropout_p must be in [0, 1], got {dropout_p}")
    if enable_gqa and query.ndim >= 3 and key.ndim >= 3:
        hq, hk, hv = query.shape[-3], key.shape[-3], value.shape[-3]
        if hk != hv or hq % hk:
            raise ValueError(f"{op}: with enable_gqa, key and value need the same number of "
                             f"heads dividing the query's, got {hq}, {hk}, {hv}")
        if hq != hk:
            key = E.repeat(key, hq // hk, axis=-3)
            value = E.repeat(value, hq // hk, axis=-3)
    L, S = query.shape[-2], key.shape[-2]
    if scale is None:
        scale = 1.0 / math.sqrt(query.shape[-1]) if query.shape[-1] else 1.0
    if is_causal and attn_mask is not None:
        raise ValueError(f"{op}: an explicit attn_mask should not be set when is_causal=True")
    if attn_mask is not None:
        if not isinstance(attn_mask, ndarray):
            attn_mask = E.asarray(attn_mask)
        if attn_mask.dtype != E.bool and dtype_kind(attn_mask.dtype) != "f":
            raise TypeError(f"{op}: attn_mask must be boolean or floating-point, got dtype "
                            f"{attn_mask.dtype}")
        try:
            E.broadcast_shapes(tuple(attn_mask.shape), tuple(query.shape[:-1]) + (S,))
        except ValueError:
            raise ValueError(f"{op}: attn_mask of shape {tuple(attn_mask.shape)} does not "
                             f"broadcast to the attention scores' shape "
                             f"{tuple(query.shape[:-1]) + (S,)}") from None
    if _flash_applies(query, key, value, attn_mask):
        mask, kind = _flash_mask_arg(attn_mask, query.dtype, 2)
        return _flash_attention(query, key, value, mask, None, kind, 0, bool(is_causal),
                                float(scale), float(dropout_p), _FLASH_IDENTITY)[0]
    bias = None
    if is_causal:
        bias = _causal_bias(L, S, query.dtype, query.device)
    elif attn_mask is not None:
        bias = _bool_to_bias(attn_mask, query.dtype, True) if attn_mask.dtype == E.bool \
            else attn_mask
    if dropout_p == 0.0 and query.dtype in _FUSED_DTYPES and key.dtype == query.dtype \
            and value.dtype == query.dtype and (bias is None or dtype_kind(bias.dtype) == "f"):
        if bias is not None and bias.dtype != query.dtype:
            bias = bias.astype(query.dtype)
        return _sdpa(query, key, value, bias, float(scale))[0]
    return _attend(query, key, value, bias, float(dropout_p), float(scale))


# ------------------------------------------------------------------ multi-head attention

def _canonical_mask(mask, name, dtype, op):
    """PyTorch's convention for MHA masks: bool True = masked (-inf); float masks added."""
    if mask is None:
        return None
    if not isinstance(mask, ndarray):
        mask = E.asarray(mask)
    if mask.dtype == E.bool:
        return _bool_to_bias(mask, dtype, False)
    if dtype_kind(mask.dtype) != "f":
        raise TypeError(f"{op}: only bool and floating types of {name} are supported, got "
                        f"dtype {mask.dtype}")
    return mask


def _pad_last(mask):
    """Append one zero column (an unmasked position) to a float mask."""
    z = E.zeros(tuple(mask.shape[:-1]) + (1,), dtype=mask.dtype, device=mask.device)
    return E.concatenate([mask, z], axis=-1)


def _heads(x, n, h, d, bf):
    """(L, N, H*D) (or (N, L, H*D) when bf) -> (N, H, L, D), a view."""
    if bf:
        return x.reshape(n, -1, h, d).permute(0, 2, 1, 3)
    return x.reshape(-1, n, h, d).permute(1, 2, 0, 3)


def multi_head_attention_forward(query, key, value, embed_dim_to_check, num_heads,
                                 in_proj_weight, in_proj_bias, bias_k, bias_v, add_zero_attn,
                                 dropout_p, out_proj_weight, out_proj_bias, training=True,
                                 key_padding_mask=None, need_weights=True, attn_mask=None,
                                 use_separate_proj_weight=False, q_proj_weight=None,
                                 k_proj_weight=None, v_proj_weight=None, static_k=None,
                                 static_v=None, average_attn_weights=True, is_causal=False,
                                 batch_first=False):
    """The forward of :class:`ember.nn.MultiheadAttention` (PyTorch's signature).

    query ``(L, N, E)``, key/value ``(S, N, Ek/Ev)`` (or ``(N, L, E)``... with
    ``batch_first=True``, an ember extension that avoids transposing; unbatched 2-d
    inputs ``(L, E)``).  `key_padding_mask` ``(N, S)``: bool True = ignore that key, or
    float (added).  `attn_mask` ``(L, S)`` or ``(N*num_heads, L, S)``: bool True = not
    allowed to attend, or float (added).  `is_causal` is a hint that `attn_mask` is the
    causal mask (it must still be given).  Returns ``(output, weights)``; weights
    ``(N, L, S)`` averaged over heads (or ``(N, num_heads, L, S)``) when `need_weights`,
    else None.

    >>> import ember
    >>> import ember.nn.functional as F
    >>> E, H = 8, 2
    >>> x = ember.ones((5, 3, E))
    >>> w, b = ember.ones((3 * E, E)) * 0.1, ember.zeros(3 * E)
    >>> out, wts = F.multi_head_attention_forward(x, x, x, E, H, w, b, None, None, False,
    ...     0.0, ember.ones((E, E)), ember.zeros(E))
    >>> out.shape, wts.shape
    ((5, 3, 8), (3, 5, 5))
    """
    F = _F()
    op = "multi_head_attention_forward"
    is_batched = _mha_check_ranks(query, key, value, key_padding_mask, attn_mask, op)
    if not is_batched:
        query, key, value, key_padding_mask = _mha_add_batch(query, key, value,
                                                             key_padding_mask)
    bf = bool(batch_first) and is_batched
    if bf:
        bsz, tgt_len, embed_dim = query.shape
        src_len, kv_s = key.shape[1], 1
    else:
        tgt_len, bsz, embed_dim = query.shape
        src_len, kv_s = key.shape[0], 0
    dtype = query.dtype
    key_padding_mask = _canonical_mask(key_padding_mask, "key_padding_mask", dtype, op)
    if is_causal and attn_mask is None:
        raise RuntimeError(f"{op}: need attn_mask if specifying the is_causal hint; "
                           f"ember.nn.generate_square_subsequent_mask(L) makes one")
    if is_causal and key_padding_mask is None and not need_weights:
        attn_mask = None
    else:
        attn_mask = _canonical_mask(attn_mask, "attn_mask", dtype, op)
        if key_padding_mask is not None:
            is_causal = False
    head_dim = _mha_check_shapes(query, key, value, embed_dim_to_check, num_heads, bsz,
                                 bf, use_separate_proj_weight, op)
    if not training:
        dropout_p = 0.0
    scale = 1.0 / math.sqrt(head_dim)
    # the fused kernel (no weights) where it applies; else the packed self-attention core
    flash = (query.is_cuda and not need_weights and dtype in _FLASH_DTYPES
             and 1 <= head_dim <= _FLASH_MAX_HEAD_DIM and _flash_sdp_enabled())

    # input projections (2-d GEMMs over all tokens)
    if use_separate_proj_weight:
        q, k, v = _mha_project_separate(F, query, key, value, q_proj_weight, k_proj_weight,
                                        v_proj_weight, in_proj_bias, op)
    else:
        if in_proj_weight is None:
            raise ValueError(f"{op}: use_separate_proj_weight is False but in_proj_weight "
                             f"is None")
        if query is key and key is value:
            qkv = _linear2d(F, query, in_proj_weight, in_proj_bias)
            if (not flash and bias_k is None and bias_v is None and static_k is None
                    and static_v is None and not add_zero_attn and dropout_p == 0.0
                    and dtype in _FUSED_DTYPES):
                out, w = _mha_packed_core(qkv, attn_mask, key_padding_mask, is_causal, bsz,
                                          num_heads, tgt_len, src_len, scale, bf, op)
                return _finish(F, out, w, out_proj_weight, out_proj_bias, need_weights,
                               average_attn_weights, is_batched)
            q, k, v = E.split(qkv, 3, axis=-1)
        else:
            q, k, v = _mha_project_packed(F, query, key, value, in_proj_weight, in_proj_bias)

    # masks: float, broadcastable to (N, H, L, S)
    attn_mask = _check_attn_mask(attn_mask, bsz, num_heads, tgt_len, src_len, op)
    k, v, attn_mask, key_padding_mask = _mha_bias_kv(k, v, bias_k, bias_v, static_k,
                                                     static_v, attn_mask, key_padding_mask,
                                                     bsz, embed_dim, bf, kv_s, op)
    q = _heads(q, bsz, num_heads, head_dim, bf)
    k = _heads(k, bsz, num_heads, head_dim, bf)
    v = _heads(v, bsz, num_heads, head_dim, bf)
    k, v = _mha_static_kv(k, v, static_k, static_v, bsz, num_heads, head_dim, op)
    if add_zero_attn:
        k, v, attn_mask, key_padding_mask = _mha_zero_attn(k, v, attn_mask, key_padding_mask)
    if flash:
        out, w = _mha_flash(q, k, v, attn_mask, key_padding_mask, is_causal, bsz, num_heads,
                            tgt_len, dropout_p, scale, bf, op), None
    else:
        bias = _mha_bias(attn_mask, key_padding_mask, is_causal, bsz, num_heads, tgt_len,
                         k.shape[2], dtype, op, checked=True, device=query.device)
        if need_weights:
            out, w = _attend(q, k, v, bias, float(dropout_p), scale, need_weights=True)
        else:
            out, w = _attend(q, k, v, bias, float(dropout_p), scale), None
    # merge heads: (N, H, L, D) -> (N, L, E) or (L, N, E)
    out = out.permute(0, 2, 1, 3) if bf else out.permute(2, 0, 1, 3)
    out = out.reshape(out.shape[0], out.shape[1], embed_dim)
    return _finish(F, out, w, out_proj_weight, out_proj_bias, need_weights,
                   average_attn_weights, is_batched)


def _mha_check_ranks(query, key, value, key_padding_mask, attn_mask, op):
    """Float inputs of matching ranks; whether the call is batched (3-d) or not (2-d)."""
    for name, x in (("query", query), ("key", key), ("value", value)):
        _check_float(x, name, op)
    if query.ndim == 3:
        if key.ndim != 3 or value.ndim != 3:
            raise ValueError(f"{op}: for batched (3-D) query, expected key and value to be "
                             f"3-D but found {key.ndim}-D and {value.ndim}-D arrays")
        if key_padding_mask is not None and key_padding_mask.ndim != 2:
            raise ValueError(f"{op}: for batched (3-D) query, expected key_padding_mask to be "
                             f"None or 2-D but found {key_padding_mask.ndim}-D")
        is_batched = True
    elif query.ndim == 2:
        if key.ndim != 2 or value.ndim != 2:
            raise ValueError(f"{op}: for unbatched (2-D) query, expected key and value to be "
                             f"2-D but found {key.ndim}-D and {value.ndim}-D arrays")
        if key_padding_mask is not None and key_padding_mask.ndim != 1:
            raise ValueError(f"{op}: for unbatched (2-D) query, expected key_padding_mask to "
                             f"be None or 1-D but found {key_padding_mask.ndim}-D")
        is_batched = False
    else:
        raise ValueError(f"{op}: query should be unbatched 2-D or batched 3-D, got a "
                         f"{query.ndim}-D array of shape {tuple(query.shape)}")
    if attn_mask is not None and attn_mask.ndim not in (2, 3):
        raise ValueError(f"{op}: expected attn_mask to be None, 2-D or 3-D but found "
                         f"{attn_mask.ndim}-D")
    return is_batched


def _mha_add_batch(query, key, value, key_padding_mask):
    """Unbatched (L, E) inputs as (L, 1, E), keeping which of them are the same array."""
    same_kv = key is value
    same_qk = query is key
    query = query[:, None]
    key = query if same_qk else key[:, None]
    value = key if same_kv else value[:, None]
    if key_padding_mask is not None:
        key_padding_mask = key_padding_mask[None]
    return query, key, value, key_padding_mask


def _mha_check_shapes(query, key, value, embed_dim_to_check, num_heads, bsz, bf,
                      use_separate_proj_weight, op):
    """The embedding, head and batch sizes agree; returns the head dimension."""
    embed_dim = query.shape[-1]
    kv_b = 0 if bf else 1
    if embed_dim != embed_dim_to_check:
        raise ValueError(f"{op}: was expecting embedding dimension of {embed_dim_to_check}, "
                         f"but got {embed_dim}")
    head_dim = embed_dim // num_heads
    if head_dim * num_heads != embed_dim:
        raise ValueError(f"{op}: embed_dim {embed_dim} not divisible by num_heads {num_heads}")
    if key.shape[kv_b] != bsz or value.shape[kv_b] != bsz:
        raise ValueError(f"{op}: query, key and value must have the same batch size, got "
                         f"shapes {tuple(query.shape)}, {tuple(key.shape)}, {tuple(value.shape)}")
    if use_separate_proj_weight:
        if key.shape[:2] != value.shape[:2]:
            raise ValueError(f"{op}: key's sequence and batch dims {tuple(key.shape[:2])} do "
                             f"not match value's {tuple(value.shape[:2])}")
    elif key.shape != value.shape:
        raise ValueError(f"{op}: key shape {tuple(key.shape)} does not match value shape "
                         f"{tuple(value.shape)}")
    return head_dim


def _mha_project_packed(F, query, key, value, in_proj_weight, in_proj_bias):
    """q, k, v projections by the three blocks of the packed in_proj_weight (key and value
    the same array: one GEMM for both)."""
    W = E.split(in_proj_weight, 3, axis=0)
    b = E.split(in_proj_bias, 3, axis=0) if in_proj_bias is not None else (None,) * 3
    q = _linear2d(F, query, W[0], b[0])
    if key is value:
        Wkv = E.concatenate(W[1:], axis=0)
        bkv = E.concatenate(b[1:], axis=0) if in_proj_bias is not None else None
        k, v = E.split(_linear2d(F, key, Wkv, bkv), 2, axis=-1)
    else:
        k = _linear2d(F, key, W[1], b[1])
        v = _linear2d(F, value, W[2], b[2])
    return q, k, v


def _mha_project_separate(F, query, key, value, q_proj_weight, k_proj_weight, v_proj_weight,
                          in_proj_bias, op):
    """q, k, v projections by three separate weights."""
    if q_proj_weight is None or k_proj_weight is None or v_proj_weight is None:
        raise ValueError(f"{op}: use_separate_proj_weight is True but q_proj_weight, "
                         f"k_proj_weight or v_proj_weight is None")
    b = E.split(in_proj_bias, 3, axis=0) if in_proj_bias is not None else (None,) * 3
    return (_linear2d(F, query, q_proj_weight, b[0]), _linear2d(F, key, k_proj_weight, b[1]),
            _linear2d(F, value, v_proj_weight, b[2]))


def _mha_packed_core(qkv, attn_mask, key_padding_mask, is_causal, bsz, num_heads, tgt_len,
                     src_len, scale, bf, op):
    """Self-attention on the packed projection: the fused core (output, weights)."""
    bias = _mha_bias(attn_mask, key_padding_mask, is_causal, bsz, num_heads, tgt_len, src_len,
                     qkv.dtype, op, device=qkv.device)
    if not qkv.is_contiguous():
        qkv = E.ascontiguousarray(qkv)
    return _self_attention_core(qkv, bias, num_heads, scale, bf)


def _mha_bias_kv(k, v, bias_k, bias_v, static_k, static_v, attn_mask, key_padding_mask, bsz,
                 embed_dim, bf, kv_s, op):
    """Append bias_k / bias_v as one more key and value (and an unmasked mask column)."""
    if bias_k is not None and bias_v is not None:
        if static_k is not None or static_v is not None:
            raise ValueError(f"{op}: bias cannot be added to a static key or value")
        shape = (1, bsz, embed_dim) if not bf else (bsz, 1, embed_dim)
        k = E.concatenate([k, E.broadcast_to(bias_k.reshape(1, 1, embed_dim), shape)],
                          axis=kv_s)
        v = E.concatenate([v, E.broadcast_to(bias_v.reshape(1, 1, embed_dim), shape)],
                          axis=kv_s)
        if attn_mask is not None:
            attn_mask = _pad_last(attn_mask)
        if key_padding_mask is not None:
            key_padding_mask = _pad_last(key_padding_mask)
    elif bias_k is not None or bias_v is not None:
        raise ValueError(f"{op}: bias_k and bias_v must be given together")
    return k, v, attn_mask, key_padding_mask


def _mha_static_kv(k, v, static_k, static_v, bsz, num_heads, head_dim, op):
    """static_k / static_v ((N*H, S, D)) in place of the projected heads."""
    for name, st in (("static_k", static_k), ("static_v", static_v)):
        if st is not None:
            if st.ndim != 3 or st.shape[0] != bsz * num_heads or st.shape[2] != head_dim:
                raise ValueError(f"{op}: expecting {name} of shape (N*num_heads, S, head_dim) "
                                 f"= ({bsz * num_heads}, S, {head_dim}), got {tuple(st.shape)}")
    if static_k is not None:
        k = static_k.reshape(bsz, num_heads, -1, head_dim)
    if static_v is not None:
        v = static_v.reshape(bsz, num_heads, -1, head_dim)
    return k, v


def _mha_zero_attn(k, v, attn_mask, key_padding_mask):
    """add_zero_attn: one more all-zero key and value (and an unmasked mask column)."""
    bsz, num_heads, _, head_dim = k.shape
    k = E.concatenate([k, E.zeros((bsz, num_heads, 1, head_dim), dtype=k.dtype,
                                  device=k.device)], axis=2)
    v = E.concatenate([v, E.zeros((bsz, num_heads, 1, head_dim), dtype=v.dtype,
                                  device=v.device)], axis=2)
    if attn_mask is not None:
        attn_mask = _pad_last(attn_mask)
    if key_padding_mask is not None:
        key_padding_mask = _pad_last(key_padding_mask)
    return k, v, attn_mask, key_padding_mask


def _mha_flash(q, k, v, attn_mask, key_padding_mask, is_causal, bsz, num_heads, tgt_len,
               dropout_p, scale, bf, op):
    """(N, H, L, D) heads through the fused GPU kernel (the masks as the kernel reads them:
    the (1 or N*H, L, S) attention mask and the (N, S) key-padding mask, both float),
    written in the merged layout; falls back to the composite where it does not apply."""
    src_len = k.shape[2]
    am = kpm = None
    if attn_mask is not None:
        am = attn_mask[None] if attn_mask.shape[0] == 1 else \
            attn_mask.reshape(bsz, num_heads, tgt_len, src_len)
    if key_padding_mask is not None:
        if tuple(key_padding_mask.shape) != (bsz, src_len):
            raise ValueError(f"{op}: expected key_padding_mask of shape {(bsz, src_len)}, "
                             f"got {tuple(key_padding_mask.shape)}")
        kpm = key_padding_mask.reshape(bsz, 1, 1, src_len)
    if not _flash_applies(q, k, v, am, kpm):
        bias = _mha_bias(attn_mask, key_padding_mask, is_causal, bsz, num_heads, tgt_len,
                         src_len, q.dtype, op, checked=True, device=q.device)
        return _attend(q, k, v, bias, float(dropout_p), scale)
    am, k0 = _flash_mask_arg(am, q.dtype, 3)
    kpm, k1 = _flash_mask_arg(kpm, q.dtype, 3)
    causal = bool(is_causal) and am is None and kpm is None
    return _flash_attention(q, k, v, am, kpm, k0, k1, causal, float(scale), float(dropout_p),
                            "0213" if bf else "2013")[0]


def _linear2d(F, x, w, b):
    """F.linear on (A, B, in) as one 2-d GEMM over all A*B rows."""
    a0, a1 = x.shape[0], x.shape[1]
    return F.linear(x.reshape(a0 * a1, x.shape[2]), w, b).reshape(a0, a1, w.shape[0])


def _check_attn_mask(attn_mask, bsz, num_heads, tgt_len, src_len, op):
    """(L, S) -> (1, L, S); (N*H, L, S) checked."""
    if attn_mask is None:
        return None
    if attn_mask.ndim == 2:
        if tuple(attn_mask.shape) != (tgt_len, src_len):
            raise ValueError(f"{op}: the shape of the 2D attn_mask is {tuple(attn_mask.shape)}, "
                             f"but should be {(tgt_len, src_len)}")
        return attn_mask[None]
    if tuple(attn_mask.shape) != (bsz * num_heads, tgt_len, src_len):
        raise ValueError(f"{op}: the shape of the 3D attn_mask is {tuple(attn_mask.shape)}, "
                         f"but should be {(bsz * num_heads, tgt_len, src_len)}")
    return attn_mask


def _mha_bias(attn_mask, key_padding_mask, is_causal, bsz, num_heads, tgt_len, src_len, dtype,
              op, checked=False, device=None):
    """The float masks merged into one additive bias broadcastable to (N, H, L, S)
    (a causal one made on `device`)."""
    if not checked:
        attn_mask = _check_attn_mask(attn_mask, bsz, num_heads, tgt_len, src_len, op)
    bias = None
    if attn_mask is not None:
        bias = attn_mask[None] if attn_mask.shape[0] == 1 else \
            attn_mask.reshape(bsz, num_heads, tgt_len, src_len)
    if key_padding_mask is not None:
        if tuple(key_padding_mask.shape) != (bsz, src_len):
            raise ValueError(f"{op}: expected key_padding_mask of shape {(bsz, src_len)}, "
                             f"got {tuple(key_padding_mask.shape)}")
        kpm = key_padding_mask.reshape(bsz, 1, 1, src_len)
        bias = kpm if bias is None else bias + kpm
    if is_causal and bias is None:
        bias = _causal_bias(tgt_len, src_len, dtype, device)
    return bias


def _finish(F, out, w, out_proj_weight, out_proj_bias, need_weights, average, is_batched):
    """Output projection, optional head-averaged weights, unbatched squeeze."""
    out = _linear2d(F, out, out_proj_weight, out_proj_bias)
    if not need_weights:
        w = None
    elif average:
        w = w.mean(axis=1)
    if not is_batched:
        out = out[:, 0]
        if w is not None:
            w = w[0]
    return out, w
