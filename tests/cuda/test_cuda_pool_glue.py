"""The GPU pooling ops (ember/cuda/ops_pool.py) run on the CPU end to end: CuPy replaced
by NumPy and every kernel launch by the host build of the real kernel
(tests/cuda_host_kernels.ember_launch), against ember's CPU pooling ops.
"""
import types

import numpy as np
import pytest

import ember
from ember._core import array as _array
from ember._core.dtypes import BFLOAT16
from ember.cuda import _runtime as real_R
from ember.cuda import ops_pool
from ember.nn.functional import pooling as cpu_pooling

import cuda_host_kernels as hk

pytestmark = pytest.mark.skipif(hk.compiler() is None, reason="no C++ compiler for the host")


def _np(x):
    return x if isinstance(x, np.ndarray) else _array._numpy(x)


@pytest.fixture
def host_gpu(monkeypatch):
    fake_cp = types.SimpleNamespace(
        **{n: getattr(np, n) for n in ("empty", "zeros", "where", "ascontiguousarray", "arange",
                                        "asarray", "broadcast_to", "take_along_axis",
                                        "argmax")})
    fake = types.SimpleNamespace(cp=lambda: fake_cp, as_cupy=_np,
                                 from_cupy=lambda c: ember.asarray(c), launch=hk.ember_launch,
                                 blocks=real_R.blocks, suffix=real_R.suffix)
    monkeypatch.setattr(ops_pool, "R", fake)


def _x(shape, dtype, seed=0):
    r = np.random.default_rng(seed)
    return ember.asarray(np.round(r.standard_normal(shape) * 4).astype(np.float32).astype(dtype))


CASES = [((2, 3, 9, 8), (3, 3), (2, 2), (1, 1), (1, 1), False),
         ((1, 2, 7, 7), (2, 3), (1, 2), (0, 1), (2, 1), True),
         ((2, 1, 5, 6), (2, 2), (2, 2), (0, 0), (1, 1), True)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, BFLOAT16])
@pytest.mark.parametrize("shape,k,s,p,d,ceil", CASES)
def test_max_pool_forward_indices_and_gradient_scatter(host_gpu, dtype, shape, k, s, p, d, ceil):
    x = _x(shape, dtype)                                # rounded values: many ties
    # (the CPU kernels are float32 / float64: 16-bit values compare exactly through float32)
    x32 = x.astype(np.float32) if x.dtype.itemsize == 2 else x
    want_v, want_i = cpu_pooling._max_pool(x32, 2, k, s, p, d, ceil)
    got_v, got_i = ops_pool._max_pool(x, 2, k, s, p, d, ceil)
    assert got_v.dtype == dtype
    np.testing.assert_array_equal(got_v.numpy().astype(np.float32), want_v.numpy())
    np.testing.assert_array_equal(got_i.numpy(), want_i.numpy())
    g = _x(want_v.shape, dtype, 1)
    g32 = g.astype(np.float32) if g.dtype.itemsize == 2 else g
    want = cpu_pooling._index_scatter(g32, want_i, tuple(shape), 2)
    got = ops_pool._index_scatter(g, got_i, tuple(shape), 2)
    np.testing.assert_allclose(got.numpy().astype(np.float64),
                               want.numpy().astype(np.float64), rtol=1e-2, atol=1e-2)


def test_index_scatter_skips_indices_outside_the_plane(host_gpu):
    src = ember.asarray(np.ones((1, 1, 2, 2), np.float32))
    idx = ember.asarray(np.array([[[[0, -1], [4, 3]]]], np.int64))   # plane of 4: -1, 4 skipped
    want = cpu_pooling._index_scatter(src, idx, (1, 1, 2, 2), 2)
    got = ops_pool._index_scatter(src, idx, (1, 1, 2, 2), 2)
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert got.numpy().sum() == 2


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("include_pad,divisor", [(True, None), (False, None), (True, 3)])
@pytest.mark.parametrize("shape,k,s,p,d,ceil", CASES)
def test_avg_pool_forward_and_backward(host_gpu, dtype, include_pad, divisor, shape, k, s, p, d,
                                       ceil):
    x = _x(shape, dtype)
    args = (2, k, s, p, ceil, include_pad, divisor)
    want = cpu_pooling._avg_pool(x.astype(np.float32), *args)
    got = ops_pool._avg_pool(x, *args)
    tol = 1e-6 if dtype == np.float32 else 2e-3
    np.testing.assert_allclose(got.numpy().astype(np.float64), want.numpy().astype(np.float64),
                               rtol=tol, atol=tol)
    g = _x(want.shape, dtype, 1)
    bargs = (tuple(shape), 2, k, s, p, ceil, include_pad, divisor)
    want_g = cpu_pooling._avg_pool_backward(g.astype(np.float32), *bargs)
    got_g = ops_pool._avg_pool_backward(g, *bargs)
    np.testing.assert_allclose(got_g.numpy().astype(np.float64),
                               want_g.numpy().astype(np.float64), rtol=tol * 2, atol=tol * 2)
