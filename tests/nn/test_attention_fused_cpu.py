"""The fused float32 CPU attention kernel (ember._kernels.cpu.attention) against PyTorch,
against float64 finite differences, and against ember's unfused path (the switch off).

Tolerances: float32 attention accumulates D or S products per element in float32 (a
few ulp each) and the softmax's exp is ~1 ulp, so outputs and gradients agree with
PyTorch's float32 math to ~1e-6 relative; RTOL 1e-4 / ATOL 2e-5 (the Transformer suite's)
leaves a wide margin while catching any wrong index (errors of O(1)).  Against float64
finite differences the float32 gradients are compared at 2e-3 relative / 1e-4 absolute
(the float32 rounding of the inputs alone moves the values by ~1e-7 relative; central
differences in float64 with eps 1e-6 are exact to ~1e-9).
"""
from functools import partial

import numpy as np
import pytest

import ember as E
import ember.nn.functional as F
from ember._kernels.cpu import attention as fa
from ember.nn.functional import attention as attn_mod
import helpers

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")
TF = torch.nn.functional

RTOL, ATOL = 1e-4, 2e-5
_close = partial(helpers.close, rtol=RTOL, atol=ATOL)
_FUSED = fa.fused_enabled()          # the CPU has AVX-512F (and the switch is on)


class _Spy:
    """Counts the fused kernel's calls (and whether each one ran)."""

    def __init__(self, mod):
        self.mod, self.calls = mod, []

    def forward(self, *a):
        r = self.mod.forward(*a)
        self.calls.append(("forward", r))
        return r

    def backward(self, *a):
        r = self.mod.backward(*a)
        self.calls.append(("backward", r))
        return r

    def __getattr__(self, name):
        return getattr(self.mod, name)


@pytest.fixture(params=["fused", "unfused"])
def path(request, monkeypatch):
    """Runs the test with the fused kernel on (where the CPU has it) and off; yields the
    spy, whose calls say whether the kernel ran."""
    on = request.param == "fused"
    if on and not _FUSED:
        pytest.skip("no AVX-512F: the fused attention kernel is not used on this CPU")
    spy = _Spy(fa)
    monkeypatch.setattr(attn_mod, "_fa", spy)
    fa._set_fused(on)
    try:
        yield spy
    finally:
        fa._set_fused(_FUSED)


@pytest.fixture(params=[1, 2])
def threads(request):
    old = E.get_num_threads()
    E.set_num_threads(request.param)
    yield request.param
    E.set_num_threads(old)


def _pair(a, grad=True):
    a = np.asarray(a, dtype=np.float32)
    t = torch.tensor(a, requires_grad=grad)
    e = E.asarray(a.copy())
    e.requires_grad = grad
    return t, e


def _ran(spy, kinds=("forward", "backward")):
    """The kernel ran (and succeeded) for each kind when on; it never ran when off."""
    got = {k for k, ok in spy.calls if ok}
    if fa.fused_enabled():
        assert set(kinds) <= got, f"fused kernel did not run: {spy.calls}"
    else:
        assert not spy.calls


def _backward_both(touts, eouts, rng):
    tl = el = 0
    for t, e in zip(touts, eouts):
        w = rng.standard_normal(tuple(t.shape)).astype(np.float32)
        tl = tl + (t * torch.tensor(w)).sum()
        el = el + (e * E.asarray(w)).sum()
    tl.backward()
    el.backward()


# (B, H, L, S, D, Dv): L != S, D not a multiple of 16, L or S of 1, the benchmark's size,
# an empty batch
SHAPES = [(2, 3, 7, 9, 5, 11), (1, 2, 1, 6, 17, 3), (2, 2, 5, 1, 8, 8), (2, 4, 64, 64, 32, 32),
          (3, 2, 33, 20, 19, 21), (0, 2, 4, 4, 8, 8)]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("mask", ["none", "bool", "float", "column"])
def test_sdpa_matches_torch(path, threads, shape, mask):
    B, H, L, S, D, Dv = shape
    rng = np.random.default_rng(B * 100 + L + S + D)
    tq, eq = _pair(rng.standard_normal((B, H, L, D)))
    tk, ek = _pair(rng.standard_normal((B, H, S, D)))
    tv, ev = _pair(rng.standard_normal((B, H, S, Dv)))
    tkw, ekw = {}, {}
    tm = None
    if mask == "bool":                        # broadcast (L, S), every row keeps one key
        m = rng.random((L, S)) > 0.4
        m[:, 0] = True
        tkw["attn_mask"], ekw["attn_mask"] = torch.tensor(m), E.asarray(m)
    elif mask == "float":                     # (B, 1, L, S), differentiated
        tm, em = _pair(rng.standard_normal((B, 1, L, S)))
        tkw["attn_mask"], ekw["attn_mask"] = tm, em
    elif mask == "column":                    # (L, 1): one value per query row (stride 0)
        tm, em = _pair(rng.standard_normal((L, 1)))
        tkw["attn_mask"], ekw["attn_mask"] = tm, em
    to = TF.scaled_dot_product_attention(tq, tk, tv, **tkw)
    eo = F.scaled_dot_product_attention(eq, ek, ev, **ekw)
    _close(eo, to, "output")
    _backward_both([to], [eo], rng)
    pairs = [(tq, eq, "q"), (tk, ek, "k"), (tv, ev, "v")] + ([(tm, em, "mask")] if tm is not
                                                            None else [])
    for t, e, n in pairs:
        if t.grad is None:                    # an empty batch: torch leaves no gradient
            assert B == 0 and (e.grad is None or not np.asarray(e.grad).any())
        else:
            _close(e.grad, t.grad, f"grad {n}")
    if B:
        _ran(path)


def test_sdpa_strided_and_broadcast_inputs(path, threads):
    """q a transposed view, k reversed along the sequence (negative strides), v a column
    slice, the batch axes broadcast (k and v shared by every batch entry)."""
    rng = np.random.default_rng(3)
    B, H, L, S, D = 3, 2, 10, 12, 24
    tq0, eq0 = _pair(rng.standard_normal((B, L, H, D)))
    tk0, ek0 = _pair(rng.standard_normal((1, H, S, D)))
    tv0, ev0 = _pair(rng.standard_normal((H, S, 2 * D)))
    tq, eq = tq0.transpose(1, 2), eq0.swapaxes(1, 2)
    tk, ek = tk0.flip(2), E.flip(ek0, 2)
    tv, ev = tv0[..., ::2], ev0[..., ::2]
    assert not eq.is_contiguous() and not ek.is_contiguous() and not ev.is_contiguous()
    to = TF.scaled_dot_product_attention(tq, tk, tv, scale=0.3)
    eo = F.scaled_dot_product_attention(eq, ek, ev, scale=0.3)
    _close(eo, to, "output")
    _backward_both([to], [eo], rng)
    for t, e, n in ((tq0, eq0, "q"), (tk0, ek0, "k"), (tv0, ev0, "v")):
        _close(e.grad, t.grad, f"grad {n}")
    _ran(path)


def test_fully_masked_rows_match_unfused():
    """Rows whose every score is -inf give what the unfused path gives (NaN, as PyTorch's
    math path), in the output and in the gradients."""
    rng = np.random.default_rng(4)
    q, k, v = (rng.standard_normal(s).astype(np.float32) for s in
               ((2, 2, 6, 20), (2, 2, 18, 20), (2, 2, 18, 20)))
    m = rng.standard_normal((2, 1, 6, 18)).astype(np.float32)
    m[0, 0, 2] = -np.inf
    m[1, 0, 5] = -np.inf
    m[:, :, 3, ::2] = -np.inf
    res = []
    for on in (False, True):
        fa._set_fused(on)
        try:
            eq, ek, ev = (E.asarray(x.copy(), requires_grad=True) for x in (q, k, v))
            eo = F.scaled_dot_product_attention(eq, ek, ev, attn_mask=E.asarray(m))
            eo.sum().backward()
            res.append([np.asarray(x.detach()) for x in (eo, eq.grad, ek.grad, ev.grad)])
        finally:
            fa._set_fused(_FUSED)
    assert np.isnan(res[0][0][0, :, 2]).all()            # the unfused path's NaN rows
    for got, want in zip(res[1], res[0]):
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL, equal_nan=True)


@pytest.mark.skipif(not _FUSED, reason="no AVX-512F: the fused kernel is not used")
@pytest.mark.parametrize("mask_grad", [True, False])
def test_fused_equals_unfused_bitwise(mask_grad):
    """Where the unfused path runs the same GEMM kernel (N and K above 16), the fused
    kernel's formulas, order and primitives are the same: identical numbers (with the
    mask's gradient asked for, the kernel stores ds; without, it keeps it in a scratch)."""
    rng = np.random.default_rng(5)
    B, H, L, S, D = 2, 4, 64, 48, 32
    x = rng.standard_normal((B, L, 3 * H * D)).astype(np.float32)
    mask = rng.standard_normal((B, 1, L, S)).astype(np.float32)
    res = []
    for on in (False, True):
        fa._set_fused(on)
        try:
            qkv = E.asarray(x.copy(), requires_grad=True)
            m = E.asarray(mask.copy(), requires_grad=mask_grad)
            heads = qkv.reshape(B, L, 3, H, D).permute(2, 0, 3, 1, 4)
            q, k, v = heads[0], heads[1][:, :, :S], heads[2][:, :, :S]
            o = F.scaled_dot_product_attention(q, k, v, attn_mask=m)
            (o * o).sum().backward()
            res.append([np.asarray(t.detach()) for t in (o, qkv.grad) + ((m.grad,) if
                                                                          mask_grad else ())])
        finally:
            fa._set_fused(_FUSED)
    for got, want in zip(res[1], res[0]):
        np.testing.assert_array_equal(got, want)


def _fd_grads(f, arrays, eps=1e-6):
    """Central differences in float64 of the scalar f(*arrays) by each array's elements."""
    out = []
    for i, a in enumerate(arrays):
        g = np.zeros_like(a)
        for idx in np.ndindex(a.shape):
            hi = [x.copy() for x in arrays]
            lo = [x.copy() for x in arrays]
            hi[i][idx] += eps
            lo[i][idx] -= eps
            g[idx] = (f(*hi) - f(*lo)) / (2 * eps)
        out.append(g)
    return out


@pytest.mark.parametrize("with_weights", [False, True])
def test_gradients_against_float64_finite_differences(path, with_weights):
    """The float32 gradients (through the fused kernel when on) against central
    differences of the same loss computed in float64 through ember's public API."""
    rng = np.random.default_rng(6)
    B, L, Ein, H = 2, 3, 6, 2
    x = rng.standard_normal((B, L, Ein))
    w_in = rng.standard_normal((3 * Ein, Ein)) * 0.5
    w_out = rng.standard_normal((Ein, Ein)) * 0.5
    kpm = np.zeros((B, L), dtype=bool)
    kpm[1, 0] = True
    wo = rng.standard_normal((B, L, Ein))
    ww = rng.standard_normal((B, L, L))

    def loss(x, w_in, dtype=E.float64, grad=False):
        xs = E.asarray(x, dtype=dtype, requires_grad=grad)
        ws = E.asarray(w_in, dtype=dtype, requires_grad=grad)
        out, w = F.multi_head_attention_forward(
            xs, xs, xs, Ein, H, ws, None, None, None, False, 0.0,
            E.asarray(w_out, dtype=dtype), None, key_padding_mask=E.asarray(kpm),
            need_weights=with_weights, batch_first=True)
        val = (out * E.asarray(wo, dtype=dtype)).sum()
        if with_weights:
            val = val + (w * E.asarray(ww, dtype=dtype)).sum()
        return val, xs, ws

    def f64(x, w_in):
        return float(np.asarray(loss(x, w_in)[0]))
    num = _fd_grads(f64, [x, w_in])
    val, xs, ws = loss(x, w_in, E.float32, True)
    val.backward()
    for got, want, n in ((xs.grad, num[0], "x"), (ws.grad, num[1], "in_proj_weight")):
        np.testing.assert_allclose(np.asarray(got), want, rtol=2e-3, atol=1e-4, err_msg=n)
    _ran(path)


@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("masks", ["none", "bool", "float"])
def test_mha_self_attention_matches_torch(path, threads, batch_first, need_weights, masks):
    """The packed self-attention core (strided head views of the in-projection, the output
    written into the merged layout) with the kernel on and off."""
    rng = np.random.default_rng(7)
    N, L, Ein, H = 3, 10, 40, 4           # head dim 10
    tx, ex = _pair(rng.standard_normal((N, L, Ein) if batch_first else (L, N, Ein)))
    tw, ew = _pair(rng.standard_normal((3 * Ein, Ein)) * 0.3)
    tb, eb = _pair(rng.standard_normal(3 * Ein) * 0.1)
    tow, eow = _pair(rng.standard_normal((Ein, Ein)) * 0.3)
    tob, eob = _pair(rng.standard_normal(Ein) * 0.1)
    kw_t, kw_e = {}, {}
    if masks == "bool":
        kpm = np.zeros((N, L), dtype=bool)
        kpm[0, -3:] = True
        am = np.triu(np.ones((L, L), dtype=bool), 1)
        kw_t = dict(key_padding_mask=torch.tensor(kpm), attn_mask=torch.tensor(am))
        kw_e = dict(key_padding_mask=E.asarray(kpm), attn_mask=E.asarray(am))
    elif masks == "float":
        am = rng.standard_normal((N * H, L, L)).astype(np.float32)
        kw_t, kw_e = dict(attn_mask=torch.tensor(am)), dict(attn_mask=E.asarray(am))
    targs = (Ein, H, tw, tb, None, None, False, 0.0, tow, tob)
    eargs = (Ein, H, ew, eb, None, None, False, 0.0, eow, eob)
    txx = tx.transpose(0, 1) if batch_first else tx     # torch has no batch_first here
    to, tw_ = TF.multi_head_attention_forward(txx, txx, txx, *targs, need_weights=need_weights,
                                              **kw_t)
    if batch_first:
        to = to.transpose(0, 1)
    eo, ew_ = F.multi_head_attention_forward(ex, ex, ex, *eargs, need_weights=need_weights,
                                             batch_first=batch_first, **kw_e)
    _close(eo, to, "output")
    if need_weights:
        _close(ew_, tw_, "weights")
        _backward_both([to, tw_], [eo, ew_], rng)
    else:
        assert ew_ is None
        _backward_both([to], [eo], rng)
    for t, e, n in ((tx, ex, "x"), (tw, ew, "in_proj_weight"), (tb, eb, "in_proj_bias")):
        _close(e.grad, t.grad, f"grad {n}")
    _ran(path)


def test_float64_and_openblas_leave_kernel_unused():
    """float64 attention never reaches the float32 kernel, nor float32 attention while
    ember's float32 GEMM kernel is switched off (gemm._set_f32_kernel(False))."""
    from ember._kernels.cpu import gemm
    spy = _Spy(fa)
    old = attn_mod._fa
    attn_mod._fa = spy
    x = np.random.default_rng(8).standard_normal((2, 2, 5, 20))
    try:
        q = E.asarray(x, requires_grad=True)
        F.scaled_dot_product_attention(q, q, q).sum().backward()
        was, limits = gemm.f32_kernel(), gemm._f32_limit()
        gemm._set_f32_kernel(False)
        try:
            q32 = E.asarray(x.astype(np.float32), requires_grad=True)
            F.scaled_dot_product_attention(q32, q32, q32).sum().backward()
        finally:
            gemm._set_f32_kernel(was, *limits)
    finally:
        attn_mod._fa = old
    assert not spy.calls


def test_mha_weights_only_loss(path):
    """A loss on the attention weights alone (no gradient reaches the output: dV is zero
    and dP comes from the weights' gradient only)."""
    rng = np.random.default_rng(9)
    N, L, Ein, H = 2, 6, 24, 3
    tx, ex = _pair(rng.standard_normal((L, N, Ein)))
    tw, ew = _pair(rng.standard_normal((3 * Ein, Ein)) * 0.3)
    tow, eow = _pair(rng.standard_normal((Ein, Ein)) * 0.3, grad=False)
    _, tw_ = TF.multi_head_attention_forward(tx, tx, tx, Ein, H, tw, None, None, None, False,
                                             0.0, tow, None, average_attn_weights=False)
    _, ew_ = F.multi_head_attention_forward(ex, ex, ex, Ein, H, ew, None, None, None, False,
                                            0.0, eow, None, average_attn_weights=False)
    _close(ew_, tw_, "weights")
    _backward_both([tw_], [ew_], rng)
    for t, e, n in ((tx, ex, "x"), (tw, ew, "in_proj_weight")):
        _close(e.grad, t.grad, f"grad {n}")
    _ran(path)
