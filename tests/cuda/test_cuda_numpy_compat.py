"""The NumPy long tail (issue #22) on GPU arrays: stride-trick views stay on the device
and share its memory, gradients flow back there, and the random module's device draws
are untouched by the host streams' switch to NumPy's (see cuda_helpers.py for how these
tests run without a GPU)."""
import numpy as np

import ember
from ember.lib.stride_tricks import sliding_window_view, as_strided
from cuda_helpers import DEV, GPU_MARK, gpu, host

pytestmark = GPU_MARK


def test_stride_tricks_on_the_device():
    a = np.arange(24, dtype=np.float32).reshape(4, 6)
    x = gpu(a)
    v = sliding_window_view(x, (2, 3))
    assert v.device == x.device
    np.testing.assert_array_equal(host(v), np.lib.stride_tricks.sliding_window_view(a, (2, 3)))
    s = as_strided(x, (3, 2), (8, 4))
    np.testing.assert_array_equal(host(s), np.lib.stride_tricks.as_strided(a, (3, 2), (8, 4)))
    x[0, 0] = 100.0                                      # the views share the memory
    assert host(v)[0, 0, 0, 0] == 100.0 and host(s)[0, 0] == 100.0


def test_sliding_window_view_gradient_on_the_device():
    a = np.random.default_rng(0).standard_normal((3, 5))
    x = gpu(a).requires_grad_(True)
    sliding_window_view(x, 2, axis=1).sum().backward()
    assert x.grad.device == x.device
    want = np.zeros_like(a)
    for j in range(4):
        want[:, j:j + 2] += 1
    np.testing.assert_allclose(host(x.grad), want)


def test_seeded_device_draws_stay_reproducible():
    ember.manual_seed(11)
    a = host(ember.random.randn(5, device=DEV))
    ember.random.seed(11)
    b = host(ember.random.randn(5, device=DEV))
    np.testing.assert_array_equal(a, b)
    assert ember.random.rand(3, device=DEV).device == ember.zeros(1, device=DEV).device


def test_flat_and_long_tail_functions_on_the_device():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    x = gpu(a)
    t = x.T
    t.flat[[1, 5]] = -1.0
    want = a.copy()
    want.T.flat[[1, 5]] = -1.0
    np.testing.assert_array_equal(host(x), want)
    assert float(x.flat[5]) == float(want.flat[5])
    np.testing.assert_array_equal(host(ember.emath.sqrt(gpu(np.array([-4.0, 9.0])))),
                                  np.emath.sqrt(np.array([-4.0, 9.0])))
    bits = np.array([1, 0, 1, 1, 0, 0, 0, 1, 1], np.uint8)
    np.testing.assert_array_equal(host(ember.packbits(gpu(bits))), np.packbits(bits))
    assert ember.printoptions is not None and str(gpu(np.array([0.5]))) == "[0.5]"
