"""Stride-2 float32 convolutions on the direct kernels (ResNet-20's 3x3 / 2 layers): the
phase split of the source and the write-back of the input gradient's phases move rows
with AVX-512 kernels, and the weight gradient of 16k output channels runs over output
channels (``conv._set_s2_mode(0)``), or scalar loops and the pixel form (``-1``).  Forward, input
gradient and weight gradient against PyTorch and a float64 oracle, both forms
bit-identical, odd/even sizes, padding 0/1, dilation, mixed strides, strided inputs, an
empty batch, and float64 gradcheck of the same geometries."""
import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember.autograd import gradcheck
from ember.nn.functional import conv as cv
from tests.helpers import layouts

torch = pytest.importorskip("torch")
TF = torch.nn.functional


def _run(x, w, kw, upstream_seed=1):
    """(out, dx, dw) of conv2d(x, w, **kw) with ember, for a random upstream gradient."""
    xe = ember.asarray(x, requires_grad=True)
    we = ember.asarray(w, requires_grad=True)
    ye = F.conv2d(xe, we, **kw)
    g = np.random.default_rng(upstream_seed).standard_normal(ye.shape).astype(x.dtype)
    ye.backward(ember.asarray(g))
    return [ye.numpy(), xe.grad.numpy(), we.grad.numpy()], g


def _torch(x, w, kw, g):
    xt = torch.tensor(np.ascontiguousarray(x), requires_grad=True)
    wt = torch.tensor(w, requires_grad=True)
    yt = TF.conv2d(xt, wt, **kw)
    yt.backward(torch.from_numpy(g))
    return [yt.detach().numpy(), xt.grad.numpy(), wt.grad.numpy()]


def test_channel_forms_are_chosen_for_stage_3_only():
    """The forms over channels replace the pixel forms where under 0.9 of the pixel
    form's lanes are outputs: ResNet-20's stage-3 stride-2 layer (64 of 80), not stage 2
    (256 of 272)."""
    if not cv._ck.fast_available():
        pytest.skip("no AVX-512 on this CPU")
    assert cv._ck._s2_chan(64, 1, 2, 8, 8, 9)
    assert not cv._ck._s2_chan(32, 1, 2, 16, 16, 17)
    assert not cv._ck._s2_chan(64, 2, 2, 8, 8, 9)        # groups
    assert not cv._ck._s2_chan(24, 1, 2, 8, 8, 9)        # not 16k channels
    assert not cv._ck._s2_chan(64, 1, 1, 8, 8, 9)        # stride 1


def _both_modes(x, w, kw):
    """ember's results with the vector row moves and with the scalar loops (output and
    input gradient asserted bit-identical; the weight gradient over output channels sums
    in another order: float32 rounding), and the upstream gradient used."""
    runs = []
    for mode in (0, -1):
        old = cv._ck._set_s2_mode(mode)
        try:
            runs.append(_run(x, w, kw))
        finally:
            cv._ck._set_s2_mode(old)
    (got, g), (ref, _) = runs
    np.testing.assert_array_equal(got[0], ref[0])
    np.testing.assert_array_equal(got[1], ref[1])
    scale = max(1.0, float(np.abs(ref[2]).max())) if ref[2].size else 1.0
    np.testing.assert_allclose(got[2], ref[2], rtol=1e-5, atol=1e-5 * scale)
    return got, g


CASES = [
    # x shape, w shape, conv2d kwargs
    ((4, 16, 32, 32), (32, 16, 3, 3), dict(stride=2, padding=1)),     # ResNet-20 stage 2
    ((3, 32, 16, 16), (64, 32, 3, 3), dict(stride=2, padding=1)),     # stage 3
    ((2, 3, 9, 11), (4, 3, 3, 3), dict(stride=2, padding=1)),         # odd sizes
    ((2, 3, 10, 12), (5, 3, 3, 3), dict(stride=2)),                   # padding 0, even
    ((2, 3, 9, 7), (5, 3, 3, 3), dict(stride=2)),                     # padding 0, odd
    ((2, 2, 40, 70), (3, 2, 3, 3), dict(stride=2, padding=1)),        # rows over 32 floats
    ((2, 2, 11, 13), (3, 2, 3, 3), dict(stride=2, padding=2, dilation=2)),
    ((2, 3, 9, 10), (4, 3, 2, 4), dict(stride=2, padding=(0, 1))),    # even kernel
    ((1, 2, 12, 9), (3, 2, 3, 3), dict(stride=(1, 2), padding=1)),    # stride 2 across only
    ((1, 2, 12, 9), (3, 2, 3, 3), dict(stride=(2, 1), padding=1)),    # stride 2 down only
    ((1, 2, 13, 14), (3, 2, 3, 3), dict(stride=(3, 2), padding=1)),
    ((2, 4, 8, 8), (6, 2, 3, 3), dict(stride=2, padding=1, groups=2)),
    ((2, 3, 3, 3), (4, 3, 3, 3), dict(stride=2, padding=1)),          # 2x2 output
    ((2, 3, 2, 2), (4, 3, 1, 1), dict(stride=2, padding=1)),          # padded 1x1 kernel
    # 16k output channels: the weight gradient over output channels
    ((2, 3, 11, 13), (16, 3, 3, 3), dict(stride=2, padding=1, dilation=2)),
    ((2, 3, 12, 15), (16, 3, 5, 5), dict(stride=2, padding=2)),
    ((1, 2, 13, 14), (32, 2, 3, 3), dict(stride=(3, 2), padding=1)),
    ((2, 2, 9, 9), (16, 2, 3, 5), dict(stride=(1, 2))),
    ((3, 5, 7, 6), (16, 5, 3, 3), dict(stride=2)),
    # 16k input channels, odd sizes: the input gradient over input channels
    ((2, 16, 9, 11), (16, 16, 3, 3), dict(stride=2, padding=1)),
    ((2, 32, 7, 8), (8, 32, 3, 3), dict(stride=2)),
]


@pytest.mark.parametrize("xs,ws,kw", CASES)
def test_matches_torch_and_float64(xs, ws, kw):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(ws).astype(np.float32)
    got, g = _both_modes(x, w, kw)
    ref32 = _torch(x, w, kw, g)
    ref64 = _torch(x.astype(np.float64), w.astype(np.float64), kw, g.astype(np.float64))
    for a, r32, r64 in zip(got, ref32, ref64):
        assert a.shape == r64.shape and a.dtype == np.float32
        # float32 accuracy: sums of up to C*9 (or N*OH*OW) products of unit normals
        scale = max(1.0, float(np.abs(r64).max()))
        np.testing.assert_allclose(a, r64, rtol=1e-5, atol=2e-5 * scale)
        np.testing.assert_allclose(a, r32, rtol=1e-5, atol=2e-5 * scale)


@pytest.mark.parametrize("label", ["transposed", "step2", "negative_stride"])
def test_strided_inputs(label):
    rng = np.random.default_rng(2)
    base = rng.standard_normal((2, 4, 9, 10)).astype(np.float32)
    w = rng.standard_normal((6, 4, 3, 3)).astype(np.float32)
    x = dict(layouts(base))[label]
    assert not x.flags.c_contiguous
    kw = dict(stride=2, padding=1)
    got, g = _both_modes(x, w, kw)
    for a, r in zip(got, _torch(x, w, kw, g)):
        np.testing.assert_allclose(a, r, rtol=1e-5, atol=1e-4)


def test_empty_batch():
    x = np.zeros((0, 3, 9, 9), np.float32)
    w = np.random.default_rng(3).standard_normal((4, 3, 3, 3)).astype(np.float32)
    got, g = _both_modes(x, w, dict(stride=2, padding=1))
    assert got[0].shape == (0, 4, 5, 5) and got[1].shape == x.shape
    np.testing.assert_array_equal(got[2], np.zeros_like(w))


@pytest.mark.parametrize("xs,ws,kw", [
    ((2, 2, 7, 6), (3, 2, 3, 3), dict(stride=2, padding=1)),
    ((1, 2, 6, 7), (2, 2, 3, 3), dict(stride=2)),
    ((1, 1, 9, 8), (2, 1, 3, 2), dict(stride=2, padding=1, dilation=2)),
])
def test_gradcheck_float64(xs, ws, kw):
    rng = np.random.default_rng(4)
    x = ember.asarray(rng.standard_normal(xs), requires_grad=True)
    w = ember.asarray(rng.standard_normal(ws), requires_grad=True)
    assert gradcheck(lambda a, b: F.conv2d(a, b, **kw), (x, w))


def test_row_kernels_match_a_numpy_reference():
    """The row moves themselves, over every row length to 40 (masked tails, one or two
    vectors), through the phase split of a 1-channel 1x1 stride-2 convolution with
    padding (which the pointwise shortcut path does not take): out = x[::2, ::2] inside
    the padding."""
    rng = np.random.default_rng(5)
    for W in range(1, 41):
        x = rng.standard_normal((1, 1, 5, W)).astype(np.float32)
        w = np.ones((1, 1, 1, 1), np.float32)
        got, g = _both_modes(x, w, dict(stride=2, padding=1))
        xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
        np.testing.assert_array_equal(got[0], xp[:, :, ::2, ::2])
        dx = np.zeros_like(xp)
        dx[:, :, ::2, ::2] = g
        np.testing.assert_array_equal(got[1], dx[:, :, 1:-1, 1:-1])
