"""Max pooling's backward (zero the input gradient, add the output gradient at the
recorded indices) bit for bit against PyTorch: values, indices and gradients with ties,
NaN (in the input and in the upstream gradient), -0.0, odd sizes, ceil_mode, padding,
dilation, return_indices, strided inputs, an empty batch, adaptive pooling to half size,
double backward and float64 gradcheck.  (A window-by-window AVX-512 form of the 2x2 /
stride-2 backward was measured no faster than this scatter, which is memory-bound at
LeNet's pool1, and slower at pool2's rows of 5: not kept; benchmarks/README.md.)"""
import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember.autograd import gradcheck
from tests.helpers import layouts

torch = pytest.importorskip("torch")
TF = torch.nn.functional

RNG = np.random.default_rng(25)


def _grads(x, g, kw):
    """ember's (out, indices or None, dx) of max_pool2d(x, **kw) for upstream g."""
    xe = ember.asarray(x, requires_grad=True)
    r = F.max_pool2d(xe, **kw)
    y, idx = (r if kw.get("return_indices") else (r, None))
    y.backward(ember.asarray(g))
    return y.numpy(), None if idx is None else idx.numpy(), xe.grad.numpy()


def _check(x, kw):
    xt = torch.tensor(np.ascontiguousarray(x), requires_grad=True)
    rt = TF.max_pool2d(xt, **kw)
    yt, it = (rt if kw.get("return_indices") else (rt, None))
    g = RNG.standard_normal(tuple(yt.shape)).astype(x.dtype)
    g.reshape(-1)[::13] = -0.0
    if g.size:
        g.reshape(-1)[0] = np.nan
    yt.backward(torch.from_numpy(g))
    y, idx, dx = _grads(x, g, kw)
    np.testing.assert_array_equal(y, yt.detach().numpy())
    if it is not None:
        np.testing.assert_array_equal(idx, it.numpy())
    ref = xt.grad.numpy()
    np.testing.assert_array_equal(dx, ref)
    assert np.array_equal(np.signbit(dx), np.signbit(ref))


SHAPES = [(64, 6, 28, 28), (8, 16, 10, 10), (2, 3, 9, 11), (2, 2, 40, 70), (1, 1, 2, 2),
          (3, 2, 5, 33), (1, 1, 3, 2)]


@pytest.mark.parametrize("xs", SHAPES)
@pytest.mark.parametrize("ret", [False, True])
def test_matches_torch_with_ties_and_nan(xs, ret):
    x = RNG.integers(-2, 3, xs).astype(np.float32)               # many ties
    x.reshape(-1)[::7] = np.nan
    x.reshape(-1)[3::11] = -np.inf
    x.reshape(-1)[5::17] = -0.0
    _check(x, dict(kernel_size=2, return_indices=ret))
    _check(RNG.standard_normal(xs).astype(np.float32), dict(kernel_size=2, stride=2))


@pytest.mark.parametrize("kw", [
    dict(kernel_size=2, ceil_mode=True),                 # a partial last window
    dict(kernel_size=2, padding=1),                      # windows over the padding
    dict(kernel_size=3, stride=2, padding=1),            # same output size, other windows
    dict(kernel_size=2, stride=2, dilation=2),
    dict(kernel_size=(2, 1), stride=(2, 1)),
])
@pytest.mark.parametrize("xs", [(2, 3, 8, 8), (2, 3, 9, 7)])
def test_other_windows(kw, xs):
    _check(RNG.standard_normal(xs).astype(np.float32), dict(kw, return_indices=True))


def test_adaptive_max_pool_to_half_size():
    """Adaptive max pooling to half the size has exactly the 2x2 windows."""
    x = RNG.standard_normal((2, 3, 8, 12)).astype(np.float32)
    g = RNG.standard_normal((2, 3, 4, 6)).astype(np.float32)
    xe = ember.asarray(x, requires_grad=True)
    F.adaptive_max_pool2d(xe, (4, 6)).backward(ember.asarray(g))
    xt = torch.tensor(x, requires_grad=True)
    TF.adaptive_max_pool2d(xt, (4, 6)).backward(torch.from_numpy(g))
    np.testing.assert_array_equal(xe.grad.numpy(), xt.grad.numpy())


@pytest.mark.parametrize("label", ["transposed", "step2", "negative_stride"])
def test_strided_inputs(label):
    base = RNG.standard_normal((2, 3, 10, 12)).astype(np.float32)
    x = dict(layouts(base))[label]
    assert not x.flags.c_contiguous
    _check(x, dict(kernel_size=2, return_indices=True))


def test_empty_batch():
    _check(np.zeros((0, 3, 8, 8), np.float32), dict(kernel_size=2))


def test_double_backward_and_gradcheck():
    """The gradient of the backward (a gather at the indices) is unchanged; float64 takes
    the scatter and passes gradcheck."""
    x = ember.asarray(RNG.standard_normal((2, 2, 6, 7)), requires_grad=True)
    assert gradcheck(lambda a: F.max_pool2d(a, 2), (x,))
    xs = RNG.standard_normal((2, 2, 6, 8)).astype(np.float32)
    xe = ember.asarray(xs, requires_grad=True)
    xt = torch.tensor(xs, requires_grad=True)
    ge = ember.asarray(np.ones((2, 2, 3, 4), np.float32), requires_grad=True)
    gt = torch.ones((2, 2, 3, 4), requires_grad=True)
    (dxe,) = ember.autograd.grad(F.max_pool2d(xe, 2), xe, ge, create_graph=True)
    (dxt,) = torch.autograd.grad(TF.max_pool2d(xt, 2), xt, gt, create_graph=True)
    w = RNG.standard_normal(xs.shape).astype(np.float32)
    (dxe * ember.asarray(w)).sum().backward()
    (dxt * torch.from_numpy(w)).sum().backward()
    np.testing.assert_array_equal(ge.grad.numpy(), gt.grad.numpy())
