"""The fused (flash) attention kernels of ember/cuda/kernels/attention.cu, through
F.scaled_dot_product_attention and nn.MultiheadAttention on CUDA arrays, against
PyTorch CPU (float64 on the same, dtype-rounded inputs): forward and the gradients of
query, key and value, with causal, boolean and additive masks, key-padding masks,
L != S, head dims 16/64 (the d64 kernels) and 80 (d128), float32, float16 and
bfloat16; dropout against the same computation given the kernel's own mask (redrawn
from the generator state it used); the cases that fall back to the math path; and the
memory: the fused path never allocates the (B, H, L, S) scores.

Without a GPU: ``EMBER_CUDA_EMULATION=1`` runs the kernels' host build (tests/cuda_emu).
Shapes are tiny because every emulated block runs 32 OS threads.
"""
import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember import nn
from cuda_helpers import DRY, GPU_MARK, gpu, host, on_test_device

pytestmark = GPU_MARK
torch = pytest.importorskip("torch")

_FLASH = "nn.functional.attention._flash_attention"
_FLASH_BWD = "nn.functional.attention._flash_attention_backward"
# (forward rtol/atol, gradient atol relative to the largest gradient)
TOL = {"float32": (1e-4, 1e-5, 1e-4), "float16": (1e-2, 2e-3, 1e-2),
       "bfloat16": (5e-2, 2e-2, 5e-2)}


@pytest.fixture
def calls(monkeypatch):
    """Counts of the fused forward and backward GPU kernels' calls (a spy on the
    registered implementations)."""
    if DRY:
        pytest.skip("the fused kernels need CUDA arrays")
    gpu(ember.zeros(1))                     # the GPU backend registers its ops on first use
    from ember.cuda import _dispatch
    seen = {"fwd": 0, "bwd": 0}
    for key, name in (("fwd", _FLASH), ("bwd", _FLASH_BWD)):
        impl = _dispatch._IMPLS[name]

        def spy(*a, _impl=impl, _key=key, **kw):
            seen[_key] += 1
            return _impl(*a, **kw)
        monkeypatch.setitem(_dispatch._IMPLS, name, spy)
    return seen


def _rnd(shape, seed, dtype):
    """(ember array on the test device, float64 torch copy of its rounded values)."""
    a = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    e = ember.asarray(a).astype(dtype)
    t = torch.from_numpy(np.asarray(e.astype(ember.float64))).requires_grad_()
    return gpu(e).requires_grad_(), t


def _check(got, want, dtype, what):
    rtol, atol, _ = TOL[dtype]
    np.testing.assert_allclose(host(got.astype(ember.float64)), want.detach().numpy(),
                               rtol=rtol, atol=atol, err_msg=what)


def _check_grad(got, want, dtype, what):
    gatol = TOL[dtype][2]
    w = want.numpy()
    scale = max(1.0, float(np.abs(w).max()))
    np.testing.assert_allclose(host(got.astype(ember.float64)), w, rtol=gatol,
                               atol=gatol * scale, err_msg=what)


def _run_both(qs, ks, vs, dtype, mask=None, causal=False, seed=0):
    q, tq = _rnd(qs, seed, dtype)
    k, tk = _rnd(ks, seed + 1, dtype)
    v, tv = _rnd(vs, seed + 2, dtype)
    em = tm = None
    if mask is not None:
        em, tm = gpu(ember.asarray(mask)), torch.from_numpy(mask)
        if mask.dtype != np.bool_:
            em = em.astype(dtype)
            tm = torch.from_numpy(np.asarray(em.cpu().astype(ember.float64)))
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=em, is_causal=causal)
    want = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, attn_mask=tm,
                                                            is_causal=causal)
    g = np.random.default_rng(seed + 3).standard_normal(tuple(want.shape))
    out.backward(gpu(ember.asarray(g).astype(dtype)))
    want.backward(torch.from_numpy(np.asarray(ember.asarray(g).astype(dtype)
                                              .astype(ember.float64))))
    _check(out, want, dtype, "output")
    for name, a, t in (("dq", q, tq), ("dk", k, tk), ("dv", v, tv)):
        assert a.grad.shape == a.shape
        _check_grad(a.grad, t.grad, dtype, name)


def _bool_mask(L, S, seed, lead=()):
    m = np.random.default_rng(seed).random(lead + (L, S)) < 0.7
    m[..., 0] = True                        # no fully masked row
    return m


CASES = [  # (q shape, k shape, v shape, mask maker, causal)
    ((2, 2, 5, 16), (2, 2, 7, 16), (2, 2, 7, 16), None, False),
    ((1, 2, 40, 16), (1, 2, 35, 16), (1, 2, 35, 8), None, True),       # 2 tiles, L > S
    ((1, 1, 6, 16), (1, 1, 37, 16), (1, 1, 37, 16), None, True),       # L < S
    ((2, 1, 5, 16), (2, 1, 9, 16), (2, 1, 9, 16), "bool", False),
    ((1, 2, 5, 16), (1, 2, 9, 16), (1, 2, 9, 16), "float", False),
    ((2, 5, 16), (1, 9, 16), (2, 9, 16), "bool_b", False),             # 3-d, broadcast k
    ((1, 1, 7, 64), (1, 1, 5, 64), (1, 1, 5, 64), None, False),
]


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("qs,ks,vs,mask,causal", CASES)
def test_sdpa_matches_torch(calls, qs, ks, vs, mask, causal, dtype):
    L, S = qs[-2], ks[-2]
    m = None
    if mask == "bool":
        m = _bool_mask(L, S, 7)
    elif mask == "bool_b":
        m = _bool_mask(L, S, 7, (2,))
    elif mask == "float":
        m = np.random.default_rng(8).standard_normal((1, 1, L, S)).astype(np.float32)
    _run_both(qs, ks, vs, dtype, m, causal)
    assert calls == {"fwd": 1, "bwd": 1}


def test_strided_views_are_read_in_place(calls):
    """Head views of a (B, L, H, D) array, a negative-stride key and a broadcast value:
    the kernel reads every array through its strides."""
    x = np.random.default_rng(0).standard_normal((2, 7, 3, 16)).astype(np.float32)
    kk = np.random.default_rng(1).standard_normal((2, 3, 9, 16)).astype(np.float32)
    vv = np.random.default_rng(2).standard_normal((1, 3, 9, 16)).astype(np.float32)
    q = gpu(ember.asarray(x)).requires_grad_()
    k = gpu(ember.asarray(kk)).requires_grad_()
    v = gpu(ember.asarray(vv)).requires_grad_()
    qv, kv = q.permute(0, 2, 1, 3), k[:, :, ::-1, :]
    assert not qv.is_contiguous()
    out = F.scaled_dot_product_attention(qv, kv, v, is_causal=True)
    tq, tk, tv = (torch.from_numpy(a.astype(np.float64)).requires_grad_() for a in (x, kk, vv))
    want = torch.nn.functional.scaled_dot_product_attention(
        tq.permute(0, 2, 1, 3), tk.flip(2), tv, is_causal=True)
    _check(out, want, "float32", "output")
    out.sum().backward()
    want.sum().backward()
    for name, a, ta in (("dq", q, tq), ("dk", k, tk), ("dv", v, tv)):
        _check_grad(a.grad, ta.grad, "float32", name)
    assert calls == {"fwd": 1, "bwd": 1}


def test_autocast_runs_the_kernel_in_half_precision(calls):
    import ember.amp
    q, tq = _rnd((1, 2, 5, 16), 0, "float32")
    m = np.random.default_rng(3).standard_normal((5, 5)).astype(np.float32)
    with ember.amp.autocast("cuda", dtype=ember.float16):
        out = F.scaled_dot_product_attention(q, q, q, attn_mask=gpu(ember.asarray(m)))
    assert out.dtype == ember.float16
    want = torch.nn.functional.scaled_dot_product_attention(tq, tq, tq,
                                                            attn_mask=torch.from_numpy(m))
    np.testing.assert_allclose(host(out.astype(ember.float32)), want.detach().numpy(),
                               rtol=2e-2, atol=1e-2)
    out.astype(ember.float32).sum().backward()
    assert q.grad.dtype == ember.float32 and calls == {"fwd": 1, "bwd": 1}


def test_empty_inputs_take_the_math_path(calls):
    q = gpu(ember.ones((2, 0, 4, 8)))
    assert F.scaled_dot_product_attention(q, q, q).shape == (2, 0, 4, 8)
    assert calls["fwd"] == 0


def test_sdpa_head_dim_128_kernel_and_bfloat16(calls):
    _run_both((1, 1, 5, 80), (1, 1, 18, 80), (1, 1, 18, 72), "float32", causal=True)
    _run_both((1, 2, 6, 16), (1, 2, 6, 16), (1, 2, 6, 16), "bfloat16", _bool_mask(6, 6, 3))
    assert calls == {"fwd": 2, "bwd": 2}


def test_fully_masked_row_gives_nan_as_the_math_path(calls):
    m = _bool_mask(3, 4, 1)
    m[1] = False
    q, kv = gpu(ember.ones((1, 1, 3, 16))), gpu(ember.ones((1, 1, 4, 16)))
    out = host(F.scaled_dot_product_attention(q, kv, kv, attn_mask=gpu(ember.asarray(m))))
    assert np.isnan(out[0, 0, 1]).all() and not np.isnan(out[0, 0, [0, 2]]).any()
    assert calls["fwd"] == 1


def _drawn_mask(state, shape, p):
    """The keep mask the fused kernel drew from generator state `state`: the same Philox
    stream as ember_uniform_f32 (flat element (bh * L + i) * S + j)."""
    from ember.cuda import ops_random
    with on_test_device():
        dev = ember.Device(gpu(ember.zeros(())).device)
        ops_random.set_rng_state(state, dev)
        u = ops_random.uniform(0.0, 1.0, shape, ember.float32, dev)
    return host(u) >= np.float32(p)


@pytest.mark.parametrize("causal", [False, True])
def test_dropout_mask_is_the_same_in_forward_and_backward(calls, causal):
    from ember.cuda import ops_random
    p = 0.3
    qs, ks = (1, 2, 9, 16), (1, 2, 11, 16)
    q, tq = _rnd(qs, 0, "float32")
    k, tk = _rnd(ks, 1, "float32")
    v, tv = _rnd(ks, 2, "float32")
    dev = ember.Device(q.device)
    state = ops_random.get_rng_state(dev)
    out = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=causal)
    keep = torch.from_numpy(_drawn_mask(state, (1, 2, 9, 11), p))
    assert 0 < keep.double().mean() < 1
    s = tq @ tk.transpose(-1, -2) / 4.0
    if causal:
        s = s.masked_fill(~torch.ones(9, 11, dtype=torch.bool).tril(), -np.inf)
    want = (torch.softmax(s, -1) * keep / (1 - p)) @ tv
    g = np.random.default_rng(5).standard_normal((1, 2, 9, 16))
    out.backward(gpu(ember.asarray(g, dtype=ember.float32)))
    want.backward(torch.from_numpy(g.astype(np.float32).astype(np.float64)))
    _check(out, want, "float32", "output")
    for name, a, t in (("dq", q, tq), ("dk", k, tk), ("dv", v, tv)):
        _check_grad(a.grad, t.grad, "float32", name)
    assert calls == {"fwd": 1, "bwd": 1}


def test_dropout_statistics_and_p_one(calls):
    q = gpu(ember.zeros((1, 1, 8, 16)))
    v = gpu(ember.ones((1, 1, 64, 16)))
    # uniform weights 1/64: each output is (kept count) / 64 / (1 - p)
    out = host(F.scaled_dot_product_attention(q, gpu(ember.zeros((1, 1, 64, 16))), v,
                                              dropout_p=0.5))
    kept = out[0, 0, :, 0] * 64 * 0.5
    assert np.allclose(kept, np.round(kept), atol=1e-4)
    assert 0.3 < kept.mean() / 64 < 0.7
    assert (host(F.scaled_dot_product_attention(q, q, gpu(ember.ones((1, 1, 8, 16))),
                                                dropout_p=1.0)) == 0).all()


def test_fallbacks_use_the_math_path(calls):
    q64 = gpu(ember.ones((1, 1, 3, 8), dtype=ember.float64))
    assert F.scaled_dot_product_attention(q64, q64, q64).dtype == ember.float64
    big = gpu(ember.ones((1, 1, 3, 130)))                   # head dim above 128
    assert F.scaled_dot_product_attention(big, big, big).shape == (1, 1, 3, 130)
    q = gpu(ember.ones((1, 1, 3, 8)))
    bias = gpu(ember.zeros((3, 3))).requires_grad_()       # a differentiated mask
    F.scaled_dot_product_attention(q, q, q, attn_mask=bias).sum().backward()
    assert bias.grad is not None and bias.grad.shape == (3, 3)
    wide = gpu(ember.zeros((2, 1, 3, 3)))                   # a mask widening the batch
    assert F.scaled_dot_product_attention(q, q, q, attn_mask=wide).shape == (2, 1, 3, 8)
    assert calls == {"fwd": 0, "bwd": 0}


def test_the_switch_turns_the_kernel_off(calls, monkeypatch):
    q, _ = _rnd((1, 2, 5, 16), 0, "float32")
    fused = host(F.scaled_dot_product_attention(q, q, q, is_causal=True))
    assert calls["fwd"] == 1
    monkeypatch.setattr(ember.backends.cuda, "_FLASH", [True])
    ember.backends.cuda.enable_flash_sdp(False)
    math = host(F.scaled_dot_product_attention(q, q, q, is_causal=True))
    assert calls["fwd"] == 1
    np.testing.assert_allclose(fused, math, rtol=1e-5, atol=1e-6)


def test_double_backward_runs_the_recorded_formulas(calls):
    q, tq = _rnd((1, 1, 4, 16), 0, "float32")
    k, tk = _rnd((1, 1, 5, 16), 1, "float32")
    v, tv = _rnd((1, 1, 5, 16), 2, "float32")
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    (gq,) = ember.autograd.grad((out * out).sum(), [q], create_graph=True)
    (gq * gq).sum().backward()
    s = (tq @ tk.transpose(-1, -2) / 4.0).masked_fill(~torch.ones(4, 5).bool().tril(), -np.inf)
    want = torch.softmax(s, -1) @ tv            # torch's math path (its fused one has no
    (tgq,) = torch.autograd.grad((want * want).sum(), [tq], create_graph=True)  # 2nd order)
    (tgq * tgq).sum().backward()
    _check_grad(gq, tgq.detach(), "float32", "dq")
    _check_grad(k.grad, tk.grad, "float32", "d2k")
    assert calls["fwd"] == 1


def test_fused_path_never_allocates_the_scores(calls):
    """Pool peak (the emulated pool counts every live byte; CuPy's keeps freed blocks
    cached, so its total after the call covers the peak too) during forward + backward,
    against one (B, H, L, S) float32 score matrix; the math path exceeds it."""
    import cupy
    pool = cupy.get_default_memory_pool()
    B, H, L, S, D = 1, 2, 256, 256, 8
    scores = B * H * L * S * 4

    def peak(mask_grad):
        q = gpu(ember.ones((B, H, L, D))).requires_grad_()
        kpm = gpu(ember.zeros((B, 1, 1, S)))
        if mask_grad:
            kpm.requires_grad_()
        with on_test_device():
            pool.free_all_blocks()
            base = pool.used_bytes()
        F.scaled_dot_product_attention(q, q, q, attn_mask=kpm).sum().backward()
        with on_test_device():
            return pool.total_bytes() - base

    fused = peak(False)
    assert calls == {"fwd": 1, "bwd": 1}
    assert fused < scores / 2, (fused, scores)
    assert peak(True) >= scores                             # the math path, for contrast


@pytest.mark.parametrize("bf", [True, False])
def test_multihead_attention_uses_the_kernel(calls, bf):
    E_, H, L, N = 32, 2, 6, 2
    tm = torch.nn.MultiheadAttention(E_, H, batch_first=bf, dtype=torch.float64)
    m = nn.MultiheadAttention(E_, H, batch_first=bf)
    with torch.no_grad(), ember.no_grad():
        for name in ("in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"):
            tp = tm.get_parameter(name)
            tp.copy_(tp.float().double())                   # the float32 values on both
            m.get_parameter(name).copy_(ember.asarray(tp.float().numpy()))
    m.to(gpu(ember.zeros(())).device)
    shape = (N, L, E_) if bf else (L, N, E_)
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    kpm = np.zeros((N, L), bool)
    kpm[1, -2:] = True
    xe = gpu(ember.asarray(x)).requires_grad_()
    xt = torch.from_numpy(x.astype(np.float64)).requires_grad_()
    out, w = m(xe, xe, xe, key_padding_mask=gpu(ember.asarray(kpm)), need_weights=False)
    want, _ = tm(xt, xt, xt, key_padding_mask=torch.from_numpy(kpm), need_weights=False)
    assert w is None
    _check(out, want, "float32", "output")
    out.sum().backward()
    want.sum().backward()
    _check_grad(xe.grad, xt.grad, "float32", "dx")
    _check_grad(m.in_proj_weight.grad, tm.in_proj_weight.grad, "float32", "d in_proj")
    # the causal hint, cross attention (key is value, query is not)
    causal = np.triu(np.ones((L, L), bool), 1)
    y = gpu(ember.asarray(x[::-1].copy()))
    out, _ = m(y, xe, xe, attn_mask=gpu(ember.asarray(causal)), need_weights=False,
               is_causal=True)
    want, _ = tm(torch.from_numpy(x[::-1].astype(np.float64)), xt, xt,
                 attn_mask=torch.from_numpy(causal), need_weights=False, is_causal=True)
    _check(out, want, "float32", "causal output")
    assert calls == {"fwd": 2, "bwd": 1}
    m(xe, xe, xe, need_weights=True)                        # weights: the math path
    assert calls["fwd"] == 2
