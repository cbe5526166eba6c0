"""1x1 convolutions with stride > 1 (ResNet's downsampling shortcuts) run as a subsample +
GEMM (ember.nn.functional.conv._pointwise_strided): forward and both gradients against
PyTorch, float64 gradcheck, strided inputs, and the paths around it."""
import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember.autograd import gradcheck, gradgradcheck
from ember.nn.functional import conv as cv
from tests.helpers import layouts

torch = pytest.importorskip("torch")


def _both(x, w, b, stride, dtype, upstream_seed=1):
    """(ember out, dx, dw, db), (torch ...) for conv2d(x, w, b, stride)."""
    xe = ember.asarray(x, requires_grad=True)
    we = ember.asarray(w, requires_grad=True)
    be = None if b is None else ember.asarray(b, requires_grad=True)
    ye = F.conv2d(xe, we, be, stride=stride)
    g = np.random.default_rng(upstream_seed).standard_normal(ye.shape).astype(dtype)
    ye.backward(ember.asarray(g))
    xt = torch.tensor(np.ascontiguousarray(x), requires_grad=True)
    wt = torch.tensor(w, requires_grad=True)
    bt = None if b is None else torch.tensor(b, requires_grad=True)
    yt = torch.nn.functional.conv2d(xt, wt, bt, stride=stride)
    yt.backward(torch.from_numpy(g))
    got = [ye.numpy(), xe.grad.numpy(), we.grad.numpy()] + ([] if b is None else [be.grad.numpy()])
    ref = [yt.detach().numpy(), xt.grad.numpy(), wt.grad.numpy()] + \
        ([] if b is None else [bt.grad.numpy()])
    return got, ref


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("N,C,O,H,W,stride,bias", [
    (4, 16, 32, 32, 32, (2, 2), False),      # ResNet-20 stage 2 shortcut
    (3, 32, 64, 16, 16, (2, 2), False),      # stage 3 shortcut
    (2, 3, 5, 7, 9, (2, 2), True),           # odd sizes: the last row/column is dropped
    (2, 4, 6, 10, 11, (3, 2), True),         # different strides, remainders
    (1, 5, 3, 6, 6, (1, 3), False),          # stride 1 on one axis only
    (2, 2, 3, 1, 1, (2, 2), True),           # one pixel
])
def test_matches_torch(dtype, N, C, O, H, W, stride, bias):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((N, C, H, W)).astype(dtype)
    w = rng.standard_normal((O, C, 1, 1)).astype(dtype)
    b = rng.standard_normal(O).astype(dtype) if bias else None
    assert cv._pointwise_strided(x, w.shape, stride, (0, 0, 0, 0), (1, 1), 1)
    got, ref = _both(x, w, b, stride, dtype)
    tol = 1e-4 if dtype == np.float32 else 1e-11
    for gv, rv in zip(got, ref):
        assert gv.shape == rv.shape and gv.dtype == rv.dtype
        np.testing.assert_allclose(gv, rv, rtol=tol, atol=tol)


@pytest.mark.parametrize("label", ["transposed", "step2", "negative_stride"])
def test_strided_inputs(label):
    rng = np.random.default_rng(2)
    base = rng.standard_normal((2, 4, 8, 8)).astype(np.float32)
    w = rng.standard_normal((6, 4, 1, 1)).astype(np.float32)
    x = dict(layouts(base))[label]
    assert not x.flags.c_contiguous
    got, ref = _both(x, w, None, (2, 2), np.float32)
    for gv, rv in zip(got, ref):
        np.testing.assert_allclose(gv, rv, rtol=1e-4, atol=1e-4)


def test_same_as_the_direct_kernels():
    """The subsample + GEMM form gives what the general path (direct kernels / im2col)
    gives: compared with the shortcut switched off."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 8, 12, 10)).astype(np.float32)
    w = rng.standard_normal((5, 8, 1, 1)).astype(np.float32)
    runs = []
    for on in (True, False):
        cv.POINTWISE_STRIDED = on
        try:
            assert cv._pointwise_strided(x, w.shape, (2, 2), (0, 0, 0, 0), (1, 1), 1) == on
            got, _ = _both(x, w, None, (2, 2), np.float32)
        finally:
            cv.POINTWISE_STRIDED = True
        runs.append(got)
    for a, b in zip(*runs):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def test_gradcheck_float64():
    rng = np.random.default_rng(4)
    x = ember.asarray(rng.standard_normal((2, 3, 5, 6)), requires_grad=True)
    w = ember.asarray(rng.standard_normal((4, 3, 1, 1)), requires_grad=True)
    b = ember.asarray(rng.standard_normal(4), requires_grad=True)
    assert gradcheck(lambda x, w, b: F.conv2d(x, w, b, stride=2), (x, w, b))
    assert gradgradcheck(lambda x, w: F.conv2d(x, w, stride=(2, 3)), (x, w))


def test_conv_transpose_and_conv1d_take_it():
    """conv_transpose2d (stride 2, 1x1, output_padding) and conv1d (1x1, stride 2)."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 4, 5, 5))
    w = rng.standard_normal((4, 3, 1, 1))
    ye = F.conv_transpose2d(ember.asarray(x), ember.asarray(w), stride=2, output_padding=1)
    yt = torch.nn.functional.conv_transpose2d(torch.from_numpy(x), torch.from_numpy(w),
                                              stride=2, output_padding=1)
    np.testing.assert_allclose(ye.numpy(), yt.numpy(), rtol=1e-12, atol=1e-12)
    x1 = rng.standard_normal((2, 4, 9))
    w1 = rng.standard_normal((3, 4, 1))
    ye = F.conv1d(ember.asarray(x1), ember.asarray(w1), stride=2)
    yt = torch.nn.functional.conv1d(torch.from_numpy(x1), torch.from_numpy(w1), stride=2)
    np.testing.assert_allclose(ye.numpy(), yt.numpy(), rtol=1e-12, atol=1e-12)


def test_other_geometries_do_not_take_it():
    x = np.zeros((1, 4, 8, 8), np.float32)
    assert not cv._pointwise_strided(x, (4, 4, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1)
    assert not cv._pointwise_strided(x, (4, 4, 3, 3), (2, 2), (0, 0, 0, 0), (1, 1), 1)
    assert not cv._pointwise_strided(x, (4, 4, 1, 1), (2, 2), (1, 1, 1, 1), (1, 1), 1)
    assert not cv._pointwise_strided(x, (4, 2, 1, 1), (2, 2), (0, 0, 0, 0), (1, 1), 2)



def test_empty_batch():
    x = np.zeros((0, 3, 6, 6), np.float32)
    w = np.ones((4, 3, 1, 1), np.float32)
    got, ref = _both(x, w, None, (2, 2), np.float32)
    for gv, rv in zip(got, ref):
        assert gv.shape == rv.shape
        np.testing.assert_array_equal(gv, rv)



def test_no_input_channels():
    """Zero input channels: a zero (N, O, OH, OW) output and empty gradients, as the
    general path gives (PyTorch returns an (N, 0, OH, OW) output here, so it is no
    oracle)."""
    runs = []
    for on in (True, False):
        cv.POINTWISE_STRIDED = on
        try:
            x = ember.asarray(np.ones((2, 0, 6, 6), np.float32), requires_grad=True)
            w = ember.asarray(np.ones((4, 0, 1, 1), np.float32), requires_grad=True)
            y = F.conv2d(x, w, stride=2)
            y.sum().backward()
            runs.append((y.numpy(), x.grad.numpy(), w.grad.numpy()))
        finally:
            cv.POINTWISE_STRIDED = True
    for a, b in zip(*runs):
        assert a.shape == b.shape
        np.testing.assert_array_equal(a, b)
    assert runs[0][0].shape == (2, 4, 3, 3) and not runs[0][0].any()
