"""Attention and the Transformer encoder against PyTorch: outputs and every gradient."""
import math

from functools import partial

import numpy as np
import pytest

import ember as E
from ember import nn
import ember.nn.functional as F
from ember.autograd import gradcheck, gradgradcheck
import helpers

torch = pytest.importorskip("torch")

# PyTorch warns about its own deprecations and prototypes (mixed mask types, nested tensors,
# oneDNN without projections): not ember's business here
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")
TF = torch.nn.functional

RTOL, ATOL = 1e-4, 2e-5


def _pair(a, dtype=np.float32, grad=True):
    a = np.asarray(a, dtype=dtype)
    t = torch.tensor(a, requires_grad=grad)
    e = E.asarray(a.copy())
    e.requires_grad = grad
    return t, e


_close = partial(helpers.close, rtol=RTOL, atol=ATOL)


def _copy_state(tmod, emod):
    sd = {k: E.asarray(v.detach().numpy().copy()) for k, v in tmod.state_dict().items()}
    assert list(sd) == list(emod.state_dict())
    emod.load_state_dict(sd)


def _backward_both(touts, eouts, rng):
    """Backpropagate a random projection of each output (same weights for both)."""
    tl = el = 0
    for t, e in zip(touts, eouts):
        if t is None:
            assert e is None
            continue
        w = rng.standard_normal(tuple(t.shape)).astype(np.float32)
        tl = tl + (t * torch.tensor(w, dtype=t.dtype)).sum()
        el = el + (e * E.asarray(w.astype(np.asarray(e).dtype))).sum()
    tl.backward()
    el.backward()


# ------------------------------------------------------------------ scaled_dot_product_attention

@pytest.mark.parametrize("mask", ["none", "bool", "float", "causal", "scale", "bool_bcast"])
def test_sdpa_matches_torch(mask):
    rng = np.random.default_rng(0)
    N, H, L, S, D = 2, 3, 4, 5, 8
    (tq, eq), (tk, ek), (tv, ev) = (_pair(rng.standard_normal(s)) for s in
                                    ((N, H, L, D), (N, H, S, D), (N, H, S, 6)))
    tkw, ekw = {}, {}
    if mask in ("bool", "bool_bcast"):
        m = rng.random((L, S) if mask == "bool" else (N, 1, 1, S)) > 0.3
        m[..., 0] = True
        tkw, ekw = dict(attn_mask=torch.tensor(m)), dict(attn_mask=E.asarray(m))
    elif mask == "float":
        tm, em = _pair(rng.standard_normal((N, 1, L, S)))
        tkw, ekw = dict(attn_mask=tm), dict(attn_mask=em)
    elif mask == "causal":
        tkw = ekw = dict(is_causal=True)
    elif mask == "scale":
        tkw = ekw = dict(scale=0.3)
    to = TF.scaled_dot_product_attention(tq, tk, tv, **tkw)
    eo = F.scaled_dot_product_attention(eq, ek, ev, **ekw)
    _close(eo, to, "output")
    _backward_both([to], [eo], rng)
    for t, e, n in ((tq, eq, "q"), (tk, ek, "k"), (tv, ev, "v")):
        _close(e.grad, t.grad, f"grad {n}")
    if mask == "float":
        _close(ekw["attn_mask"].grad, tkw["attn_mask"].grad, "grad mask")


def test_sdpa_3d_noncontiguous_and_gqa():
    rng = np.random.default_rng(1)
    q = rng.standard_normal((3, 4, 6)).astype(np.float32)      # (B, E, L) -> transposed
    k = rng.standard_normal((3, 5, 4)).astype(np.float32)
    tq, eq = _pair(q)
    tk, ek = _pair(k)
    to = TF.scaled_dot_product_attention(tq.transpose(1, 2), tk, tk)
    eo = F.scaled_dot_product_attention(eq.swapaxes(1, 2), ek, ek)
    _close(eo, to, "3d output")
    # grouped-query attention: 4 query heads share 2 key/value heads
    tq, eq = _pair(rng.standard_normal((2, 4, 3, 8)))
    tk, ek = _pair(rng.standard_normal((2, 2, 5, 8)))
    to = TF.scaled_dot_product_attention(tq, tk, tk, enable_gqa=True)
    eo = F.scaled_dot_product_attention(eq, ek, ek, enable_gqa=True)
    _close(eo, to, "gqa output")
    _backward_both([to], [eo], rng)
    _close(ek.grad, tk.grad, "gqa grad k")


def test_sdpa_causal_rectangular_and_dropout():
    rng = np.random.default_rng(2)
    tq, eq = _pair(rng.standard_normal((1, 2, 3, 4)))
    tk, ek = _pair(rng.standard_normal((1, 2, 5, 4)))
    _close(F.scaled_dot_product_attention(eq, ek, ek, is_causal=True),
           TF.scaled_dot_product_attention(tq, tk, tk, is_causal=True), "causal L != S")
    E.random.seed(0)
    out = F.scaled_dot_product_attention(eq, ek, ek, dropout_p=0.5)
    assert out.shape == (1, 2, 3, 4) and np.isfinite(np.asarray(out)).all()


def test_sdpa_gradcheck():
    rng = np.random.default_rng(3)

    def arr(*s):
        a = E.asarray(rng.standard_normal(s))
        a.requires_grad = True
        return a
    q, k, v, m = arr(1, 2, 3, 4), arr(1, 2, 5, 4), arr(1, 2, 5, 3), arr(3, 5)
    assert gradcheck(lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
                     (q, k, v, m))
    assert gradcheck(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
                     (q, k, v))
    assert gradgradcheck(lambda q, k, v: F.scaled_dot_product_attention(q, k, v), (q, k, v))
    # the fused op's second output (the weights), broadcasting over batch axes
    from ember.nn.functional.attention import _sdpa
    q1 = arr(3, 4)
    assert gradcheck(lambda q, k, v, m: _sdpa(q, k, v, m, 0.5), (q1, k, v, m))
    assert gradgradcheck(lambda q, k, v, m: _sdpa(q, k, v, m, 0.5), (q1, k, v, m))


def test_flash_attention_reference_gradcheck():
    """The fused GPU kernel's op (_flash_attention: output, logsumexp) on the host runs its
    reference definition and backward op: finite differences in float64 for each mask kind
    (additive, bool True = attend, bool True = masked) and causal; and against the math
    path.  The kernel itself is checked against PyTorch in
    tests/cuda/test_cuda_flash_attention.py."""
    from ember.nn.functional.attention import _flash_attention
    rng = np.random.default_rng(5)

    def arr(*s):
        a = E.asarray(rng.standard_normal(s))
        a.requires_grad = True
        return a
    q, k, v = arr(2, 1, 3, 4), arr(2, 1, 5, 4), arr(2, 1, 5, 3)
    am = E.asarray(rng.standard_normal((3, 5)))
    keep = E.asarray(np.array([[1, 0, 1, 1, 0]] * 3, bool))
    pad = E.asarray(np.array([[0, 0, 0, 1, 1], [0, 1, 0, 0, 0]], bool)).reshape(2, 1, 1, 5)
    for masks in ((am, keep, 1, 2, False), (None, pad, 0, 3, False), (None, None, 0, 0, True)):
        def f(q, k, v, masks=masks):
            return _flash_attention(q, k, v, masks[0], masks[1], masks[2], masks[3], masks[4],
                                    0.5, 0.0, "0123")[0]
        assert gradcheck(f, (q, k, v))
        assert gradgradcheck(f, (q, k, v))
    want = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.5)
    got, lse, _ = _flash_attention(q, k, v, None, None, 0, 0, True, 0.5, 0.0, "0123")
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-12)
    s = np.where(np.tril(np.ones((3, 5), bool)), q.detach().numpy() @ k.detach().numpy()
                 .swapaxes(-1, -2) * 0.5, -np.inf)
    np.testing.assert_allclose(lse.numpy(), np.log(np.exp(s).sum(-1)), rtol=1e-6)


def test_sdpa_errors():
    q = E.ones((2, 3, 4))
    with pytest.raises(ValueError, match="last dimension"):
        F.scaled_dot_product_attention(q, E.ones((2, 3, 5)), E.ones((2, 3, 5)))
    with pytest.raises(ValueError, match="should not be set"):
        F.scaled_dot_product_attention(q, q, q, attn_mask=E.ones((3, 3)), is_causal=True)
    with pytest.raises(ValueError, match="broadcast"):
        F.scaled_dot_product_attention(q, q, q, attn_mask=E.ones((4, 4)))
    with pytest.raises(TypeError, match="floating"):
        F.scaled_dot_product_attention(E.ones((2, 3), dtype=E.int32), q, q)


# ------------------------------------------------------------------ MultiheadAttention

def _mha_pair(E_, H, **kw):
    t = torch.nn.MultiheadAttention(E_, H, **kw)
    e = nn.MultiheadAttention(E_, H, **kw)
    _copy_state(t, e)
    return t, e


def _run_mha(t, e, q, k=None, v=None, rng=None, same=True, **fkw):
    """same=True: self-attention with one array (the packed projection path)."""
    tq, eq = _pair(q)
    if same:
        tk = tv = tq
        ek = ev = eq
    else:
        (tk, ek), (tv, ev) = _pair(k), _pair(v)
    tkw, ekw = {}, {}
    for name, val in fkw.items():
        if isinstance(val, np.ndarray):
            if val.dtype == bool:
                tkw[name], ekw[name] = torch.tensor(val), E.asarray(val)
            else:
                tkw[name], ekw[name] = _pair(val)
        else:
            tkw[name] = ekw[name] = val
    to, tw = t(tq, tk, tv, **tkw)
    eo, ew = e(eq, ek, ev, **ekw)
    _close(eo, to, "mha output")
    if tw is None:
        assert ew is None
    else:
        _close(ew, tw, "mha weights")
    _backward_both([to, tw], [eo, ew], rng)
    _close(eq.grad, tq.grad, "grad query")
    if not same:
        _close(ek.grad, tk.grad, "grad key")
        _close(ev.grad, tv.grad, "grad value")
    for name, p in t.named_parameters():
        ep = e.get_parameter(name) if hasattr(e, "get_parameter") else \
            dict(e.named_parameters())[name]
        _close(ep.grad, p.grad, f"grad {name}")
    for name in fkw:
        if isinstance(tkw[name], torch.Tensor) and tkw[name].requires_grad:
            if tkw[name].grad is None:              # the mask was not used (is_causal hint)
                assert ekw[name].grad is None
            else:
                _close(ekw[name].grad, tkw[name].grad, f"grad {name}")


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("need_weights,average", [(False, True), (True, True), (True, False)])
@pytest.mark.parametrize("train", [True, False])
def test_mha_self_attention(batch_first, need_weights, average, train):
    rng = np.random.default_rng(4)
    t, e = _mha_pair(8, 2, batch_first=batch_first)
    t.train(train)
    e.train(train)
    x = rng.standard_normal((3, 5, 8))
    _run_mha(t, e, x, rng=rng, need_weights=need_weights, average_attn_weights=average)


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("kind", ["bool_attn", "float_attn", "bool_kpm", "float_kpm",
                                  "both", "attn3d", "causal"])
@pytest.mark.parametrize("need_weights", [False, True])
def test_mha_masks(batch_first, kind, need_weights):
    rng = np.random.default_rng(5)
    N, L, Ed, H = 3, 4, 8, 2
    t, e = _mha_pair(Ed, H, batch_first=batch_first)
    x = rng.standard_normal((N, L, Ed) if batch_first else (L, N, Ed))
    kw = {}
    if kind in ("bool_attn", "both"):
        m = rng.random((L, L)) > 0.6
        m[:, 0] = False
        kw["attn_mask"] = m
    if kind == "float_attn":
        kw["attn_mask"] = rng.standard_normal((L, L))
    if kind == "attn3d":
        kw["attn_mask"] = rng.standard_normal((N * H, L, L))
    if kind in ("bool_kpm", "both"):
        m = np.zeros((N, L), bool)
        m[0, 2:] = True
        m[2, 3] = True
        kw["key_padding_mask"] = m
    if kind == "float_kpm":
        kw["key_padding_mask"] = rng.standard_normal((N, L))
    if kind == "causal":
        kw["attn_mask"] = np.triu(np.full((L, L), -np.inf), 1)
        kw["is_causal"] = True
    _run_mha(t, e, x, rng=rng, need_weights=need_weights, **kw)


@pytest.mark.parametrize("batch_first", [False, True])
def test_mha_cross_attention_kdim_vdim(batch_first):
    rng = np.random.default_rng(6)
    N, L, S = 2, 3, 5
    t, e = _mha_pair(8, 4, kdim=6, vdim=5, batch_first=batch_first)
    sh = (lambda n, d: (N, n, d)) if batch_first else (lambda n, d: (n, N, d))
    _run_mha(t, e, rng.standard_normal(sh(L, 8)), rng.standard_normal(sh(S, 6)),
             rng.standard_normal(sh(S, 5)), rng=rng, same=False)
    # same embed dims, distinct key and value arrays (three projections)
    t, e = _mha_pair(8, 2, batch_first=batch_first)
    _run_mha(t, e, rng.standard_normal(sh(L, 8)), rng.standard_normal(sh(S, 8)),
             rng.standard_normal(sh(S, 8)), rng=rng, same=False, need_weights=False)


def test_mha_key_is_value():
    rng = np.random.default_rng(7)
    t, e = _mha_pair(8, 2)
    tq, eq = _pair(rng.standard_normal((3, 2, 8)))
    tk, ek = _pair(rng.standard_normal((5, 2, 8)))
    to, tw = t(tq, tk, tk)
    eo, ew = e(eq, ek, ek)
    _close(eo, to, "output")
    _backward_both([to], [eo], rng)
    _close(ek.grad, tk.grad, "grad kv")
    _close(e.in_proj_weight.grad, t.in_proj_weight.grad, "grad in_proj_weight")


@pytest.mark.parametrize("need_weights", [False, True])
def test_mha_bias_kv_zero_attn_no_bias(need_weights):
    rng = np.random.default_rng(8)
    t, e = _mha_pair(8, 2, add_bias_kv=True, add_zero_attn=True)
    kpm = np.zeros((2, 4), bool)
    kpm[1, 3] = True
    _run_mha(t, e, rng.standard_normal((4, 2, 8)), rng=rng, need_weights=need_weights,
             key_padding_mask=kpm, attn_mask=rng.standard_normal((4, 4)))
    t, e = _mha_pair(8, 2, bias=False)
    _run_mha(t, e, rng.standard_normal((4, 2, 8)), rng=rng, need_weights=need_weights)


@pytest.mark.parametrize("need_weights", [False, True])
def test_mha_unbatched(need_weights):
    rng = np.random.default_rng(9)
    t, e = _mha_pair(8, 2, batch_first=True)
    kpm = np.array([False, False, True, False])
    _run_mha(t, e, rng.standard_normal((4, 8)), rng=rng, need_weights=need_weights,
             key_padding_mask=kpm)
    _run_mha(t, e, rng.standard_normal((4, 8)), rng=rng, need_weights=need_weights,
             attn_mask=rng.standard_normal((2, 4, 4)), average_attn_weights=False)


def test_mha_init_and_state_dict():
    t = torch.nn.MultiheadAttention(8, 2, add_bias_kv=True, kdim=4, vdim=4)
    e = nn.MultiheadAttention(8, 2, add_bias_kv=True, kdim=4, vdim=4)
    assert [(k, tuple(v.shape)) for k, v in t.state_dict().items()] == \
           [(k, tuple(v.shape)) for k, v in e.state_dict().items()]
    e = nn.MultiheadAttention(16, 4)
    assert list(e.state_dict()) == ["in_proj_weight", "in_proj_bias", "out_proj.weight",
                                    "out_proj.bias"]
    bound = math.sqrt(6.0 / (16 + 48))                 # xavier_uniform_ on (48, 16)
    w = np.asarray(e.in_proj_weight)
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.8 * bound
    assert not np.asarray(e.in_proj_bias).any() and not np.asarray(e.out_proj.bias).any()


def test_mha_errors():
    e = nn.MultiheadAttention(8, 2)
    x = E.ones((3, 2, 8))
    with pytest.raises(ValueError, match="divisible"):
        nn.MultiheadAttention(8, 3)
    with pytest.raises(RuntimeError, match="is_causal"):
        e(x, x, x, is_causal=True)
    with pytest.raises(ValueError, match="2D attn_mask"):
        e(x, x, x, attn_mask=E.zeros((4, 4)))
    with pytest.raises(ValueError, match="embedding dimension"):
        e(E.ones((3, 2, 4)), x, x)
    with pytest.raises(TypeError, match="only bool and floating"):
        e(x, x, x, key_padding_mask=E.zeros((2, 3), dtype=E.int32))


def test_mha_dropout_runs():
    e = nn.MultiheadAttention(8, 2, dropout=0.5)
    x = E.ones((3, 2, 8))
    x.requires_grad = True
    out, w = e(x, x, x)
    out.sum().backward()
    assert x.grad.shape == x.shape


# ------------------------------------------------------------------ encoder

def _enc_layer_pair(**kw):
    base = dict(d_model=8, nhead=2, dim_feedforward=16, dropout=0.0)
    base.update(kw)
    t = torch.nn.TransformerEncoderLayer(**base)
    e = nn.TransformerEncoderLayer(**base)
    _copy_state(t, e)
    return t, e


def _run_encoder(t, e, x, rng, train=True, **fkw):
    t.train(train)
    e.train(train)
    tx, ex = _pair(x)
    tkw, ekw = {}, {}
    for name, val in fkw.items():
        if isinstance(val, np.ndarray):
            tkw[name] = torch.tensor(val if val.dtype == bool else val.astype(np.float32))
            ekw[name] = E.asarray(val if val.dtype == bool else val.astype(np.float32))
        else:
            tkw[name] = ekw[name] = val
    to = t(tx, **tkw)
    eo = e(ex, **ekw)
    _close(eo, to, "encoder output")
    _backward_both([to], [eo], rng)
    _close(ex.grad, tx.grad, "grad src")
    for name, p in t.named_parameters():
        _close(dict(e.named_parameters())[name].grad, p.grad, f"grad {name}")


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("train", [True, False])
def test_encoder_layer(norm_first, activation, batch_first, train):
    rng = np.random.default_rng(10)
    t, e = _enc_layer_pair(norm_first=norm_first, activation=activation,
                           batch_first=batch_first)
    _run_encoder(t, e, rng.standard_normal((3, 5, 8)), rng, train=train)


@pytest.mark.parametrize("batch_first", [False, True])
def test_encoder_layer_masks(batch_first):
    rng = np.random.default_rng(11)
    t, e = _enc_layer_pair(batch_first=batch_first, layer_norm_eps=1e-6)
    N, L = 3, 5
    x = rng.standard_normal((N, L, 8) if batch_first else (L, N, 8))
    kpm = np.zeros((N, L), bool)
    kpm[1, 3:] = True
    causal = np.triu(np.full((L, L), -np.inf, np.float32), 1)
    _run_encoder(t, e, x, rng, src_key_padding_mask=kpm)
    _run_encoder(t, e, x, rng, src_mask=causal, is_causal=True)
    _run_encoder(t, e, x, rng, src_mask=causal, src_key_padding_mask=kpm.astype(np.float32)
                 * -1e9)
    _run_encoder(t, e, rng.standard_normal((L, 8)), rng, src_mask=np.triu(np.ones((L, L),
                 bool), 1))


def test_encoder_layer_bias_false_and_callable_activation():
    rng = np.random.default_rng(12)
    t = torch.nn.TransformerEncoderLayer(8, 2, 16, 0.0, bias=False, activation=torch.tanh)
    e = nn.TransformerEncoderLayer(8, 2, 16, 0.0, bias=False, activation=E.tanh)
    _copy_state(t, e)
    _run_encoder(t, e, rng.standard_normal((4, 2, 8)), rng)


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("with_norm", [False, True])
def test_encoder_stack(batch_first, with_norm):
    rng = np.random.default_rng(13)
    kw = dict(d_model=8, nhead=2, dim_feedforward=16, dropout=0.0, batch_first=batch_first)
    t = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(**kw), 2,
                                    norm=torch.nn.LayerNorm(8) if with_norm else None,
                                    enable_nested_tensor=False)
    e = nn.TransformerEncoder(nn.TransformerEncoderLayer(**kw), 2,
                              norm=nn.LayerNorm(8) if with_norm else None)
    _copy_state(t, e)
    assert e.layers[0].linear1.weight is not e.layers[1].linear1.weight
    N, L = 2, 4
    x = rng.standard_normal((N, L, 8) if batch_first else (L, N, 8))
    causal = np.triu(np.full((L, L), -np.inf, np.float32), 1)
    kpm = np.array([[False] * L, [False, False, True, True]])
    _run_encoder(t, e, x, rng)
    _run_encoder(t, e, x, rng, mask=causal)               # detected as causal
    _run_encoder(t, e, x, rng, src_key_padding_mask=kpm)
    _run_encoder(t, e, x, rng, train=False, mask=causal, src_key_padding_mask=kpm)


def test_encoder_eval_nested_tensor_zeros_padding():
    """PyTorch's eval fast path (no grad, padding mask) pads outputs with zeros."""
    rng = np.random.default_rng(14)
    kw = dict(d_model=8, nhead=2, dim_feedforward=16, dropout=0.0, batch_first=True)
    t = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(**kw), 2)
    e = nn.TransformerEncoder(nn.TransformerEncoderLayer(**kw), 2)
    _copy_state(t, e)
    t.eval()
    e.eval()
    x = rng.standard_normal((2, 4, 8)).astype(np.float32)
    kpm = np.array([[False] * 4, [False, False, True, True]])
    with torch.no_grad():
        to = t(torch.tensor(x), src_key_padding_mask=torch.tensor(kpm))
    with E.no_grad():
        eo = e(E.asarray(x), src_key_padding_mask=E.asarray(kpm))
    _close(eo, to, "eval fast-path output", atol=1e-5)


def test_encoder_float64():
    rng = np.random.default_rng(15)
    t = torch.nn.TransformerEncoderLayer(8, 2, 16, 0.0).double()
    e = nn.TransformerEncoderLayer(8, 2, 16, 0.0, dtype=E.float64)
    _copy_state(t, e)
    tx, ex = _pair(rng.standard_normal((3, 2, 8)), np.float64)
    _close(e(ex), t(tx), "float64", rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("bf", [False, True])
def test_fused_self_attention_core_gradcheck(bf):
    from ember.nn.functional.attention import _self_attention_core
    rng = np.random.default_rng(16)
    N, L, H, D = 2, 3, 2, 2

    def arr(*s):
        a = E.asarray(rng.standard_normal(s))
        a.requires_grad = True
        return a
    qkv = arr(N, L, 3 * H * D) if bf else arr(L, N, 3 * H * D)
    bias = arr(N, 1, L, L)

    def f(qkv, bias):                 # both outputs: the merged heads and the weights
        out, p = _self_attention_core(qkv, bias, H, 0.7, bf)
        return out, p
    assert gradcheck(f, (qkv, bias))
    assert gradgradcheck(f, (qkv, bias))


def test_sdpa_broadcast_batch_dims():
    rng = np.random.default_rng(17)
    tq, eq = _pair(rng.standard_normal((3, 4)))              # no batch axes
    tk, ek = _pair(rng.standard_normal((2, 1, 5, 4)))
    tv, ev = _pair(rng.standard_normal((1, 3, 5, 2)))
    tm, em = _pair(rng.standard_normal((2, 1, 1, 5)))
    to = TF.scaled_dot_product_attention(tq, tk, tv, attn_mask=tm)
    eo = F.scaled_dot_product_attention(eq, ek, ev, attn_mask=em)
    _close(eo, to, "broadcast output")
    _backward_both([to], [eo], rng)
    for t, e, n in ((tq, eq, "q"), (tk, ek, "k"), (tv, ev, "v"), (tm, em, "mask")):
        _close(e.grad, t.grad, f"broadcast grad {n}")
