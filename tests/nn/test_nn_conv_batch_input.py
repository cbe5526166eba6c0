"""The float32 input gradient and the valid forward of small stride-1 convolutions with
16 samples per vector
(``conv_batch.h``, ``conv._input_batch_f32`` / ``_forward_batch_f32``; issue #25,
LeNet-5's conv2) against PyTorch in float64, with the path forced off for comparison, and where it must not be taken."""
import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember.autograd import gradcheck
from ember.nn.functional import conv as conv_mod

torch = pytest.importorskip("torch")
TF = torch.nn.functional
ck = conv_mod._ck

pytestmark = pytest.mark.skipif(not ck.fast_available(), reason="no AVX-512 on this CPU")

RNG = np.random.default_rng(25)


def _dx_ref(g, w, hw, kw):
    """The float64 PyTorch input gradient of conv2d (its transposed convolution)."""
    gt = torch.tensor(np.asarray(g, dtype=np.float64))
    wt = torch.tensor(np.asarray(w, dtype=np.float64))
    return torch.nn.grad.conv2d_input((g.shape[0], w.shape[1]) + tuple(hw), wt, gt,
                                      **kw).numpy()


def _dx(g, w, hw, kw, on):
    """ember's input gradient of conv2d (through autograd) with the batch path on/off
    (the stride-1 input gradient forced to the scatter form, which the batch path
    replaces where it applies)."""
    old = ck._set_batch_input(on)
    mode = ck._set_input_mode(1)
    try:
        x = ember.zeros((g.shape[0], w.shape[1]) + tuple(hw), dtype=ember.float32,
                        requires_grad=True)
        y = F.conv2d(x, ember.asarray(w), None, **kw)
        assert y.shape == g.shape
        y.backward(ember.asarray(g))
        return np.asarray(x.grad)
    finally:
        ck._set_batch_input(old)
        ck._set_input_mode(mode)


CASES = [
    # (N, C, H, W), (O, C, kh, kw), kwargs: the path applies to all of them
    ((64, 6, 14, 14), (16, 6, 5, 5), {}),                     # LeNet-5's second conv
    ((16, 6, 14, 14), (16, 6, 5, 5), {}),                     # one full block
    ((37, 3, 9, 12), (5, 3, 5, 5), {}),                       # masked tail block (5 samples)
    ((17, 2, 8, 7), (4, 2, 2, 3), dict(padding=(1, 2))),      # padded, 3-wide, 2 rows
    ((20, 1, 16, 16), (3, 1, 5, 5), dict(padding=(0, 2))),    # 16-wide output rows
    ((18, 4, 6, 6), (7, 4, 3, 3), dict(padding=(1, 1))),
]


def _applies(xs, ws, kw):
    p = kw.get("padding", (0, 0))
    OH, OW = xs[2] + 2 * p[0] - ws[2] + 1, xs[3] + 2 * p[1] - ws[3] + 1
    return ck._batch_pays(xs[0], xs[1], xs[2], xs[3], ws[0], OH, OW, ws[2], ws[3], 1, 1, 1)


@pytest.mark.parametrize("xs,ws,kw", CASES)
def test_batch_input_gradient_matches_torch(xs, ws, kw):
    assert _applies(xs, ws, kw)
    g = RNG.standard_normal((xs[0], ws[0]) + tuple(
        xs[2 + a] + 2 * kw.get("padding", (0, 0))[a] - ws[2 + a] + 1 for a in range(2))
    ).astype(np.float32)
    w = RNG.standard_normal(ws).astype(np.float32)
    ref = _dx_ref(g, w, xs[2:], kw)
    scale = max(1.0, float(np.abs(ref).max()))
    on = _dx(g, w, xs[2:], kw, True)
    off = _dx(g, w, xs[2:], kw, False)
    np.testing.assert_allclose(on, ref, rtol=1e-5, atol=1e-5 * scale)
    np.testing.assert_allclose(off, ref, rtol=1e-5, atol=1e-5 * scale)


def test_lenet_conv2_takes_the_batch_path_by_default():
    assert ck._scatter_pays(14, 14, 10, 10, 5, 5, 0, 0, 1, 1)
    assert _applies((64, 6, 14, 14), (16, 6, 5, 5), {})


@pytest.mark.parametrize("layout", ["noncontig", "negstride"])
def test_batch_input_strided_gradient_and_transposed_conv(layout):
    """conv_transpose2d (the same op) of a non-contiguous / negative-stride input."""
    base = RNG.standard_normal((32, 16, 10, 10)).astype(np.float32)
    w = RNG.standard_normal((16, 6, 5, 5)).astype(np.float32)
    if layout == "noncontig":
        e = ember.asarray(np.ascontiguousarray(base.swapaxes(-1, -2))).swapaxes(-1, -2)
        assert not e.is_contiguous()
    else:
        e = ember.asarray(base[:, :, ::-1].copy())[:, :, ::-1]
    assert _applies((32, 6, 14, 14), w.shape, {})
    y = F.conv_transpose2d(e, ember.asarray(w))
    ref = TF.conv_transpose2d(torch.tensor(base, dtype=torch.float64),
                              torch.tensor(w, dtype=torch.float64)).numpy()
    np.testing.assert_allclose(np.asarray(y), ref, rtol=1e-5, atol=1e-4)


def test_batch_input_empty_and_small_batches():
    """Under 16 samples (and an empty batch) the scatter form runs; results still match."""
    w = RNG.standard_normal((16, 6, 5, 5)).astype(np.float32)
    for n in (0, 1, 15):
        assert not ck._batch_pays(n, 6, 14, 14, 16, 10, 10, 5, 5, 1, 1, 1)
        g = RNG.standard_normal((n, 16, 10, 10)).astype(np.float32)
        got = _dx(g, w, (14, 14), {}, True)
        assert got.shape == (n, 6, 14, 14)
        np.testing.assert_allclose(got, _dx_ref(g, w, (14, 14), {}), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("args", [
    (64, 6, 14, 14, 16, 10, 10, 5, 5, 1, 1, 2),      # groups
    (64, 6, 14, 14, 16, 6, 6, 5, 5, 2, 2, 1),        # dilation
    (64, 6, 14, 14, 16, 8, 8, 7, 7, 1, 1, 1),        # 7-wide kernel
    (64, 6, 14, 14, 16, 10, 10, 5, 4, 1, 1, 1),      # 4-wide kernel
    (64, 6, 24, 24, 16, 20, 20, 5, 5, 1, 1, 1),      # rows of 20 outputs
    (8, 6, 14, 14, 16, 10, 10, 5, 5, 1, 1, 1),       # under 16 samples
])
def test_batch_input_not_taken_where_it_does_not_apply(args):
    assert not ck._batch_pays(*args)


def test_batch_input_switch_off():
    old = ck._set_batch_input(False)
    try:
        assert not ck._batch_pays(64, 6, 14, 14, 16, 10, 10, 5, 5, 1, 1, 1)
    finally:
        ck._set_batch_input(old)
    assert ck._batch_pays(64, 6, 14, 14, 16, 10, 10, 5, 5, 1, 1, 1) == old


def test_conv2d_gradcheck_float64_lenet_like():
    """Finite differences in float64 of the op whose float32 gradient this path computes."""
    x = ember.asarray(RNG.standard_normal((2, 2, 6, 6)), requires_grad=True)
    w = ember.asarray(RNG.standard_normal((3, 2, 5, 5)), requires_grad=True)
    assert gradcheck(lambda a, b: F.conv2d(a, b), (x, w))


# ---------------------------------------------------------------- the forward over batch lanes

FWD_CASES = [
    ((64, 6, 14, 14), (16, 6, 5, 5)),        # LeNet-5's second conv
    ((37, 3, 12, 14), (16, 3, 5, 5)),        # masked tail block, non-square
    ((16, 2, 7, 6), (32, 2, 3, 3)),          # 3x3, 32 channels
    ((20, 1, 9, 13), (16, 1, 5, 5)),         # one input channel, 9 output rows
]


def _fwd(x, w, b, on, relu=False):
    old = ck._set_batch_forward(on)
    try:
        out = np.empty((x.shape[0], w.shape[0], x.shape[2] - w.shape[2] + 1,
                        x.shape[3] - w.shape[3] + 1), np.float32)
        ck.conv2d_forward_f32(x, w, b, out, 1, 1, 0, 0, 0, 0, 1, 1, 1, relu)
        return out
    finally:
        ck._set_batch_forward(old)


@pytest.mark.parametrize("xs,ws", FWD_CASES)
@pytest.mark.parametrize("relu", [False, True])
def test_batch_forward_matches_torch(xs, ws, relu):
    out_hw = (xs[2] - ws[2] + 1, xs[3] - ws[3] + 1)
    assert ck._fwd_batch_pays(*xs, ws[0], *out_hw, ws[2], ws[3], 1, 1, 1)
    x = RNG.standard_normal(xs).astype(np.float32)
    x[0, 0, 0, 0] = np.nan                                  # NaN goes through the ReLU
    w = RNG.standard_normal(ws).astype(np.float32)
    b = RNG.standard_normal(ws[0]).astype(np.float32)
    ref = TF.conv2d(torch.tensor(x, dtype=torch.float64), torch.tensor(w, dtype=torch.float64),
                    torch.tensor(b, dtype=torch.float64))
    if relu:
        ref = torch.where(torch.isnan(ref), ref, ref.clamp(min=0))
    ref = ref.numpy()
    for on in (True, False):
        np.testing.assert_allclose(_fwd(x, w, b, on, relu), ref, rtol=1e-5, atol=1e-4)
    if not relu:                                            # no bias
        np.testing.assert_allclose(_fwd(x, w, None, True), ref - b[:, None, None],
                                   rtol=1e-5, atol=1e-4)


def test_batch_forward_through_conv2d_and_layouts():
    """F.conv2d with the batch forward: non-contiguous and negative-stride inputs, and the
    gradients (the batch input gradient) against PyTorch."""
    base = RNG.standard_normal((32, 6, 14, 14)).astype(np.float32)
    w = RNG.standard_normal((16, 6, 5, 5)).astype(np.float32)
    ref = TF.conv2d(torch.tensor(base, dtype=torch.float64),
                    torch.tensor(w, dtype=torch.float64)).numpy()
    nc = ember.asarray(np.ascontiguousarray(base.swapaxes(-1, -2))).swapaxes(-1, -2)
    neg = ember.asarray(base[:, :, ::-1].copy())[:, :, ::-1]
    for e in (nc, neg):
        np.testing.assert_allclose(np.asarray(F.conv2d(e, ember.asarray(w))), ref,
                                   rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("args", [
    (64, 6, 14, 14, 16, 10, 10, 5, 5, 1, 1, 2),      # groups
    (64, 6, 14, 14, 8, 10, 10, 5, 5, 1, 1, 1),       # 8 output channels (no channel form)
    (64, 16, 10, 10, 16, 10, 10, 3, 3, 1, 1, 1),     # same-padded 3x3 (pitch mostly outputs)
    (64, 6, 24, 24, 16, 20, 20, 5, 5, 1, 1, 1),      # rows of 20 outputs
    (8, 6, 14, 14, 16, 10, 10, 5, 5, 1, 1, 1),       # under 16 samples
])
def test_batch_forward_not_taken_where_it_does_not_apply(args):
    assert not ck._fwd_batch_pays(*args)


def test_batch_forward_switch_off_and_empty_batch():
    old = ck._set_batch_forward(False)
    try:
        assert not ck._fwd_batch_pays(64, 6, 14, 14, 16, 10, 10, 5, 5, 1, 1, 1)
    finally:
        ck._set_batch_forward(old)
    x = ember.zeros((0, 6, 14, 14), dtype=ember.float32)
    y = F.conv2d(x, ember.ones((16, 6, 5, 5), dtype=ember.float32))
    assert y.shape == (0, 16, 10, 10)


# ---------------------------------------------------------------- the weight gradient

@pytest.mark.parametrize("xs,ws", FWD_CASES)
@pytest.mark.parametrize("threads", [1, 2])
def test_batch_weight_gradient_matches_torch(xs, ws, threads):
    out_hw = (xs[2] - ws[2] + 1, xs[3] - ws[3] + 1)
    x = RNG.standard_normal(xs).astype(np.float32)
    g = RNG.standard_normal((xs[0], ws[0]) + out_hw).astype(np.float32)
    ref = torch.nn.grad.conv2d_weight(torch.tensor(x, dtype=torch.float64), ws,
                                      torch.tensor(g, dtype=torch.float64)).numpy()
    scale = max(1.0, float(np.abs(ref).max()))
    old_t = ember.get_num_threads()
    ember.set_num_threads(threads)
    try:
        for on in (True, False):
            old = ck._set_batch_weight(on)
            try:
                dw = np.full(ws, np.nan, np.float32)          # every entry is written
                ck.conv2d_weight_f32(x, g, dw, 1, 1, 0, 0, 0, 0, 1, 1, 1)
            finally:
                ck._set_batch_weight(old)
            np.testing.assert_allclose(dw, ref, rtol=1e-5, atol=1e-5 * scale)
    finally:
        ember.set_num_threads(old_t)


def test_batch_weight_gradient_through_autograd():
    """conv2d's weight and bias gradients with the batch paths on, against PyTorch."""
    x = RNG.standard_normal((40, 6, 14, 14)).astype(np.float32)
    w = RNG.standard_normal((16, 6, 5, 5)).astype(np.float32)
    b = RNG.standard_normal(16).astype(np.float32)
    g = RNG.standard_normal((40, 16, 10, 10)).astype(np.float32)
    xe, we, be = (ember.asarray(a, requires_grad=True) for a in (x, w, b))
    F.conv2d(xe, we, be).backward(ember.asarray(g))
    xt, wt, bt = (torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in (x, w, b))
    TF.conv2d(xt, wt, bt).backward(torch.tensor(g, dtype=torch.float64))
    for e, t in ((xe, xt), (we, wt), (be, bt)):
        ref = t.grad.numpy()
        np.testing.assert_allclose(np.asarray(e.grad), ref, rtol=1e-5,
                                   atol=1e-5 * max(1.0, float(np.abs(ref).max())))
