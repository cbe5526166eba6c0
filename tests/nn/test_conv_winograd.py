"""Winograd float32 convolutions (ember/_kernels/cpu/winograd.h): the forward, the input
gradient and the weight gradient of 3x3 stride-1 conv2d over 2x2 tiles (F(2x2, 3x3),
F(3x3, 2x2)) and over 4x4 tiles (F(4x4, 3x3), F(3x3, 4x4)), each forced in turn, against
PyTorch, with the error against a float64 oracle kept within a stated factor of PyTorch's
own float32 error (plus 4e-7 of the largest value): 8x for 2x2 tiles, 10x for 4x4 tiles
(measured 3-7x at ResNet shapes and 128-512 channels; benchmarks/README.md).  Below 16
channels on either side (shapes only the forced mode runs 4x4 tiles on: the cost rule
starts at 16) PyTorch's 3x3 sums are nearly exact (4e-8) while the 6x6 transforms alone
round to up to ~2e-6 of the largest value, so there the 4x4 floor is 2.5e-6 (over 40 seeds
per case below: at most 2.2e-6 above 10x PyTorch's).  Each test draws its data from a
fresh generator, so its inputs do not depend on which tests ran before it."""
import os
import subprocess
import sys

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember.nn.functional import fused
from tests.helpers import layouts

torch = pytest.importorskip("torch")
TF = torch.nn.functional

wg = pytest.importorskip("ember._kernels.cpu.winograd")
pytestmark = pytest.mark.skipif(not wg.available(), reason="Winograd off or no AVX-512")

RNG = np.random.default_rng(2025)


@pytest.fixture(autouse=True)
def _fresh_rng():
    """The same data for a test whatever ran before it in this process (xdist order)."""
    global RNG
    RNG = np.random.default_rng(2025)


@pytest.fixture(params=[2, 4], ids=["F2", "F4"])
def forced(request):
    """Winograd for every eligible shape (the cost rule bypassed), over 2x2 tiles, then over
    4x4 tiles."""
    old = wg._set_mode(request.param)
    yield request.param
    wg._set_mode(old)


# the error bound against float64, in units of PyTorch's float32 error, per tile size
BOUND = {2: 8, 4: 10}


def _rel_err(got, ref):
    """max |got - ref| / max |ref| (ref in float64)."""
    scale = max(float(np.abs(ref).max()), 1e-30) if ref.size else 1.0
    return float(np.abs(np.asarray(got, np.float64) - ref).max()) / scale if ref.size else 0.0


def _check(got, t32, t64, what, factor=8, floor=4e-7):
    """got (ember, float32) close to PyTorch's float32 result, and its error against the
    float64 oracle within ``factor`` times PyTorch's own plus ``floor`` (a few float32
    ulps of the scale)."""
    ref = t64.detach().numpy()
    e_ours, e_torch = _rel_err(got, ref), _rel_err(t32.detach().numpy(), ref)
    assert e_ours <= factor * e_torch + floor, (what, e_ours, e_torch)
    scale = float(np.abs(ref).max()) if ref.size else 1.0
    np.testing.assert_allclose(np.asarray(got), t32.detach().numpy(), rtol=0,
                               atol=2e-5 * max(scale, 1.0), err_msg=what)
    return e_ours, e_torch


def _run(x, w, b, pad):
    """(ember out, dx, dw), (torch float32 ...), (torch float64 ...) of conv2d(x, w, b,
    padding=pad) with a random upstream gradient.  x may be any NumPy layout."""
    xe = ember.asarray(x)
    xe = xe.detach()
    xe.requires_grad = True
    we = ember.asarray(np.ascontiguousarray(w), requires_grad=True)
    be = None if b is None else ember.asarray(b)
    ye = F.conv2d(xe, we, be, padding=pad)
    res = []
    for dt in (torch.float32, torch.float64):
        xt = torch.tensor(np.ascontiguousarray(x), dtype=dt, requires_grad=True)
        wt = torch.tensor(w, dtype=dt, requires_grad=True)
        bt = None if b is None else torch.tensor(b, dtype=dt)
        yt = TF.conv2d(xt, wt, bt, padding=pad)
        res.append([xt, wt, yt])
    g = RNG.standard_normal(tuple(res[0][2].shape)).astype(np.float32)
    (ye * ember.asarray(g)).sum().backward()
    for xt, wt, yt in res:
        yt.backward(torch.tensor(g, dtype=yt.dtype))
    return (ye, xe.grad, we.grad), [(yt, xt.grad, wt.grad) for xt, wt, yt in res]


CASES = [
    # N, C, O, H, W, pad
    (2, 16, 16, 8, 8, 1),
    (1, 3, 5, 7, 9, 1),          # odd sizes: tile remainders in both directions
    (2, 1, 1, 5, 6, 0),
    (1, 16, 64, 9, 11, 2),       # padding 2
    (3, 64, 16, 6, 5, 0),
    (1, 64, 64, 8, 8, 1),
    (2, 3, 16, 33, 35, 1),       # 17 x 18 tiles per sample: blocks of a single tile row
    (1, 2, 3, 4, 140, 1),        # 70 tiles per row: rows split into 64-tile pieces
    (1, 100, 96, 6, 7, 1),       # many channels: 32-tile blocks
    (1, 5, 4, 3, 3, 0),          # one output pixel
    (2, 4, 4, 1, 2, 1),          # a 1 x 2 input
    (2, 8, 8, 13, 19, 1),        # F(4x4): 5 tiles per row, 3 tile rows per vector
    (3, 16, 16, 6, 6, 1),        # F(4x4): 2 x 2 tiles per sample (ResNet's 8x8 stage, odd)
    (1, 4, 4, 10, 70, 1),        # F(4x4): 18 tiles per row: a row in two pieces
    (2, 16, 8, 16, 16, 0),       # F(4x4): 14 x 14 output (3.5 tiles), padding 0
]


@pytest.mark.parametrize("N,C,O,H,W,pad", CASES)
def test_forward_and_gradients_match_torch(forced, N, C, O, H, W, pad):
    """Output, input gradient and weight gradient (all three Winograd) match PyTorch's
    float32 conv2d; the error against float64 stays within BOUND times PyTorch's."""
    x = RNG.standard_normal((N, C, H, W)).astype(np.float32)
    w = (RNG.standard_normal((O, C, 3, 3)) / np.sqrt(9 * C)).astype(np.float32)
    b = RNG.standard_normal(O).astype(np.float32)
    calls, calls4 = wg._calls(), wg._calls_f4()
    ours, (t32, t64) = _run(x, w, b, pad)
    assert wg._calls() == calls + 3                  # forward and both gradients
    assert wg._calls_f4() - calls4 == (0 if forced == 2 else 3)
    floor = 2.5e-6 if forced == 4 and min(C, O) < 16 else 4e-7
    for k, what in enumerate(("out", "dx", "dw")):
        _check(ours[k], t32[k], t64[k], what, BOUND[forced], floor)


@pytest.mark.parametrize("label", ["transposed", "step2", "negative_stride"])
def test_strided_inputs(forced, label):
    """Non-contiguous and negative-stride inputs give PyTorch's result."""
    base = RNG.standard_normal((2, 16, 7, 10)).astype(np.float32)
    x = dict(layouts(base))[label]
    w = (RNG.standard_normal((16, 16, 3, 3)) / 12).astype(np.float32)
    ours, (t32, t64) = _run(x, w, None, 1)
    for k, what in enumerate(("out", "dx", "dw")):
        _check(ours[k], t32[k], t64[k], what, BOUND[forced])


def test_asymmetric_padding_and_conv_transpose(forced):
    """padding='same' with an even split and conv_transpose2d (whose forward is the input
    gradient's kernel) at stride 1."""
    x = RNG.standard_normal((2, 16, 9, 7)).astype(np.float32)
    w = RNG.standard_normal((16, 16, 3, 3)).astype(np.float32)
    ye = F.conv2d(ember.asarray(x), ember.asarray(w), padding="same")
    yt = TF.conv2d(torch.tensor(x), torch.tensor(w), padding="same")
    y64 = TF.conv2d(torch.tensor(x, dtype=torch.float64), torch.tensor(w, dtype=torch.float64),
                    padding="same")
    _check(ye, yt, y64, "same", BOUND[forced])
    for pad in (0, 1, 2):
        ye = F.conv_transpose2d(ember.asarray(x), ember.asarray(w), padding=pad)
        yt = TF.conv_transpose2d(torch.tensor(x), torch.tensor(w), padding=pad)
        y64 = TF.conv_transpose2d(torch.tensor(x, dtype=torch.float64),
                                  torch.tensor(w, dtype=torch.float64), padding=pad)
        _check(ye, yt, y64, f"conv_transpose2d padding {pad}", BOUND[forced])


@pytest.mark.usefixtures("forced")
def test_fused_relu_and_nan():
    """conv2d + ReLU in one op (bias and ReLU in the output transform); NaN stays NaN."""
    x = RNG.standard_normal((2, 16, 8, 9)).astype(np.float32)
    x[0, 3, 2, 2] = np.nan
    w = RNG.standard_normal((32, 16, 3, 3)).astype(np.float32)
    b = RNG.standard_normal(32).astype(np.float32)
    ye = np.asarray(fused.conv2d_relu(ember.asarray(x), ember.asarray(w), ember.asarray(b),
                                      1, 1, 1))
    yt = TF.relu(TF.conv2d(torch.tensor(x), torch.tensor(w), torch.tensor(b), 1, 1)).numpy()
    np.testing.assert_array_equal(np.isnan(ye), np.isnan(yt))
    ok = ~np.isnan(yt)
    np.testing.assert_allclose(ye[ok], yt[ok], rtol=0, atol=1e-4 * np.abs(yt[ok]).max())


def test_resnet_stage_shapes_against_float64():
    """The ResNet-20 3x3 stride-1 layers (batch 4; the cost rule picks Winograd over 4x4
    tiles for all three passes): error against float64 within 10x PyTorch's float32
    error."""
    for C, HW in ((16, 32), (32, 16), (64, 8)):
        assert wg.pays(C, C, HW, HW) and wg.pays(C, C, HW, HW, True)
        assert wg.tile(C, C, HW, HW) == 4
        assert wg.wtile(C, C, HW, HW) == 4
        x = RNG.standard_normal((4, C, HW, HW)).astype(np.float32)
        w = (RNG.standard_normal((C, C, 3, 3)) / np.sqrt(9 * C)).astype(np.float32)
        calls, calls4 = wg._calls(), wg._calls_f4()
        ours, (t32, t64) = _run(x, w, None, 1)
        assert wg._calls() == calls + 3 and wg._calls_f4() == calls4 + 3
        for k, what in enumerate(("out", "dx", "dw")):
            _check(ours[k], t32[k], t64[k], f"{C}x{HW}: {what}", BOUND[4])


def test_tile_rule():
    """4x4 tiles for 16 channels or more each side and outputs that 4x4 tiles cover with
    little waste (all three passes); 2x2 tiles otherwise, and always when forced to 2."""
    for ci, co, hw in ((16, 16, 32), (32, 32, 16), (64, 64, 8), (64, 64, 4), (256, 256, 8),
                       (64, 64, 12), (64, 64, 7)):
        assert wg.tile(ci, co, hw, hw) == 4, (ci, co, hw)
    for ci, co, hw in ((8, 16, 32), (16, 8, 32), (8, 8, 32), (32, 32, 6), (64, 64, 10)):
        assert wg.tile(ci, co, hw, hw) == 2, (ci, co, hw)
    # the weight gradient follows the same rule
    assert wg.wtile(16, 16, 32, 32) == 4 and wg.wtile(64, 64, 8, 8) == 4
    assert wg.wtile(8, 16, 32, 32) == 2 and wg.wtile(32, 32, 6, 6) == 2
    old = wg._set_mode(2)
    try:
        assert wg.tile(64, 64, 8, 8) == 2 and wg.wtile(16, 16, 32, 32) == 2
        wg._set_mode(4)
        assert wg.tile(8, 8, 6, 6) == 4 and wg.wtile(64, 64, 6, 6) == 4
    finally:
        wg._set_mode(old)


def test_cost_rule():
    """Not for few channels (ResNet's stem, 3 -> 16) or tiny outputs; the weight gradient
    needs 16 channels each side and not too many in all."""
    assert wg.pays(8, 8, 32, 32) and wg.pays(256, 256, 8, 8)
    assert not wg.pays(3, 16, 32, 32)
    assert not wg.pays(16, 3, 32, 32)
    assert not wg.pays(64, 64, 2, 2)
    assert wg.pays(16, 16, 32, 32, True) and wg.pays(64, 64, 8, 8, True)
    assert not wg.pays(16, 8, 32, 32, True)
    assert not wg.pays(256, 256, 8, 8, True)


@pytest.mark.usefixtures("forced")
def test_other_convolutions_do_not_take_it():
    """Stride 2, dilation 2, groups 2, 5x5 and float64 run the other kernels."""
    x = RNG.standard_normal((1, 4, 9, 9)).astype(np.float32)
    calls = wg._calls()
    F.conv2d(ember.asarray(x), ember.asarray(np.ones((4, 4, 3, 3), np.float32)), stride=2)
    F.conv2d(ember.asarray(x), ember.asarray(np.ones((4, 4, 3, 3), np.float32)), dilation=2)
    F.conv2d(ember.asarray(x), ember.asarray(np.ones((4, 2, 3, 3), np.float32)), groups=2)
    F.conv2d(ember.asarray(x), ember.asarray(np.ones((4, 4, 5, 5), np.float32)))
    F.conv2d(ember.asarray(x.astype(np.float64)), ember.asarray(np.ones((4, 4, 3, 3))))
    assert wg._calls() == calls


def test_mode_switch_turns_it_off():
    """_set_mode(-1) and EMBER_WINOGRAD=0 (at import) keep every convolution on the direct
    kernels, with the same results."""
    x = RNG.standard_normal((2, 32, 16, 16)).astype(np.float32)
    w = RNG.standard_normal((32, 32, 3, 3)).astype(np.float32)
    on = np.asarray(F.conv2d(ember.asarray(x), ember.asarray(w), padding=1))
    old = wg._set_mode(-1)
    try:
        calls = wg._calls()
        off = np.asarray(F.conv2d(ember.asarray(x), ember.asarray(w), padding=1))
        assert wg._calls() == calls and not wg.available()
    finally:
        wg._set_mode(old)
    np.testing.assert_allclose(on, off, rtol=0, atol=2e-5 * np.abs(off).max())
    code = ("import numpy as np, ember, ember.nn.functional as F\n"
            "from ember._kernels.cpu import winograd as wg\n"
            "F.conv2d(ember.ones((1, 32, 8, 8)), ember.ones((32, 32, 3, 3)), padding=1)\n"
            "print(wg.available(), wg._calls())\n")
    env = dict(os.environ, EMBER_WINOGRAD="0")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "0"]


@pytest.mark.parametrize("env,mode,f4", [("2", 2, 0), ("4", 4, 1), ("", 0, 1)])
def test_environment_forces_a_variant(env, mode, f4):
    """EMBER_WINOGRAD=2 / 4 (at import) force F(2x2, 3x3) / F(4x4, 3x3) for every eligible
    shape, here a 3 -> 16 channel one that the cost rule keeps direct; unset, the cost rule
    runs a 16 -> 16 channel 16x16 forward as F(4x4, 3x3)."""
    shape = "(1, 3, 16, 16)), ember.ones((16, 3, 3, 3))" if env else \
        "(1, 16, 16, 16)), ember.ones((16, 16, 3, 3))"
    code = ("import ember, ember.nn.functional as F\n"
            "from ember._kernels.cpu import winograd as wg\n"
            f"F.conv2d(ember.ones({shape}, padding=1)\n"
            "print(wg._set_mode(0), wg._calls(), wg._calls_f4())\n")
    environ = {k: v for k, v in os.environ.items() if k != "EMBER_WINOGRAD"}
    if env:
        environ["EMBER_WINOGRAD"] = env
    out = subprocess.run([sys.executable, "-c", code], env=environ, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [str(mode), "1", str(f4)]


def test_f4_non_finite_falls_back():
    """F(4x4, 3x3) would spread a NaN over whole 4x4 output tiles; where an output comes
    out non-finite the convolution reruns as F(2x2, 3x3), so NaN lands where PyTorch's
    does (the forward, with bias and without)."""
    old = wg._set_mode(4)
    try:
        for bias in (None, RNG.standard_normal(16).astype(np.float32)):
            x = RNG.standard_normal((2, 16, 12, 13)).astype(np.float32)
            x[1, 5, 6, 7] = np.nan
            w = (RNG.standard_normal((16, 16, 3, 3)) / 12).astype(np.float32)
            calls4 = wg._calls_f4()
            ye = np.asarray(F.conv2d(ember.asarray(x), ember.asarray(w),
                                     None if bias is None else ember.asarray(bias), padding=1))
            assert wg._calls_f4() == calls4 + 1
            yt = TF.conv2d(torch.tensor(x), torch.tensor(w),
                           None if bias is None else torch.tensor(bias), padding=1).numpy()
            np.testing.assert_array_equal(np.isnan(ye), np.isnan(yt))
            ok = ~np.isnan(yt)
            np.testing.assert_allclose(ye[ok], yt[ok], rtol=0, atol=2e-5 * np.abs(yt[ok]).max())
    finally:
        wg._set_mode(old)
