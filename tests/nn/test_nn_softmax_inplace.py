"""The softmax kernels' in-place mode (``inplace=True``: the result over the input, as
attention uses it on its scores) gives the same numbers as the out-of-place kernels, which
tests/nn/test_nn_softmax.py holds against PyTorch: softmax and log_softmax, forward and
backward, over the last axis (rows) and an inner axis, float32 and float64."""
import numpy as np
import pytest

import ember
from ember._api._util import numpy_view
from ember._kernels.cpu import softmax as sk


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("axis", [2, 1])
@pytest.mark.parametrize("log", [False, True])
def test_inplace_matches(dtype, axis, log):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 37, 21)).astype(dtype) * 3
    g = rng.standard_normal((3, 37, 21)).astype(dtype)
    ref = sk.softmax_forward(ember.asarray(x), axis, log)
    xi = ember.asarray(x.copy())
    got = sk.softmax_forward(xi, axis, log, True)
    assert got is xi
    np.testing.assert_array_equal(numpy_view(got), numpy_view(ref))
    gref = sk.softmax_backward(ember.asarray(g), ref, axis, log)
    gi = ember.asarray(g.copy())
    ggot = sk.softmax_backward(gi, ref, axis, log, True)
    assert ggot is gi
    np.testing.assert_array_equal(numpy_view(ggot), numpy_view(gref))
