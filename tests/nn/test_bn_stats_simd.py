"""Batch norm's float32 statistics loop (ember/_kernels/cpu/bn_simd.h): the AVX-512 loop
and nn_simd.h's loop give the same statistics and outputs, close to a float64 oracle, for
runs that are multiples of the vector, have masked tails, or span several 4096-element
blocks; and the layer still matches PyTorch in training mode (output, running statistics,
gradients) with either loop."""
import numpy as np
import pytest

import ember
import ember.nn as nn
from ember._kernels.cpu import norm as k

torch = pytest.importorskip("torch")


@pytest.fixture
def both_loops():
    yield [on for on in (False, True) if k._set_bn_avx512(on) == on]
    k._set_bn_avx512(True)


@pytest.mark.parametrize("shape", [(4, 3, 8, 8), (3, 5, 7, 9), (2, 2, 70, 70), (5, 4, 1, 3),
                                   (2, 3, 1, 1), (3, 2, 4100)])
def test_statistics_against_float64(both_loops, shape):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(shape) * 2 + 5).astype(np.float32)
    axes = (0,) + tuple(range(2, len(shape)))
    x64 = x.astype(np.float64)
    mean, var = x64.mean(axis=axes), x64.var(axis=axes)
    y64 = (x64 - mean.reshape((1, -1) + (1,) * (len(shape) - 2))) / \
        np.sqrt(var.reshape((1, -1) + (1,) * (len(shape) - 2)) + 1e-5)
    outs = []
    for on in both_loops:
        k._set_bn_avx512(on)
        rm, rv = ember.zeros(shape[1]), ember.ones(shape[1])
        y = ember.nn.functional.batch_norm(ember.asarray(x), rm, rv, training=True,
                                           momentum=1.0)
        n = x.size // shape[1]
        np.testing.assert_allclose(rm.numpy(), mean, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(rv.numpy(), var * n / (n - 1), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(y.numpy(), y64, rtol=1e-5, atol=2e-5)
        outs.append(y.numpy())
    for o in outs[1:]:
        np.testing.assert_allclose(o, outs[0], rtol=1e-5, atol=2e-6)


def test_layer_matches_torch_with_either_loop(both_loops):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((8, 6, 5, 7)).astype(np.float32)
    g = rng.standard_normal(x.shape).astype(np.float32)
    tb = torch.nn.BatchNorm2d(6)
    xt = torch.tensor(x, requires_grad=True)
    yt = tb(xt)
    yt.backward(torch.from_numpy(g))
    for on in both_loops:
        k._set_bn_avx512(on)
        eb = nn.BatchNorm2d(6)
        xe = ember.asarray(x, requires_grad=True)
        ye = eb(xe)
        ye.backward(ember.asarray(g))
        np.testing.assert_allclose(ye.numpy(), yt.detach().numpy(), rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(xe.grad.numpy(), xt.grad.numpy(), rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(eb.weight.grad.numpy(), tb.weight.grad.numpy(),
                                   rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(eb.running_mean.numpy(), tb.running_mean.numpy(),
                                   rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(eb.running_var.numpy(), tb.running_var.numpy(),
                                   rtol=1e-5, atol=1e-6)
