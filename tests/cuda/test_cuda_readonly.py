"""The read-only flag on GPU arrays (issue #24): every write path refuses, as on the
CPU (where tests/test_hardening.py checks it against NumPy)."""
import numpy as np
import pytest

import ember
from cuda_helpers import DEV, GPU_MARK, gpu, host

pytestmark = GPU_MARK


def _ro():
    x = gpu(np.arange(3.0))
    x.flags.writeable = False
    return x


_WRITES = {
    "setitem": lambda x: x.__setitem__(0, 1.0),
    "setitem_slice": lambda x: x.__setitem__(slice(None), 1.0),
    "setitem_advanced": lambda x: x.__setitem__(gpu(np.array([0, 1])), 1.0),
    "fill": lambda x: x.fill(0.0),
    "iadd": lambda x: x.__iadd__(1.0),
    "imul_array": lambda x: x.__imul__(gpu(np.ones(3))),
    "ufunc_out": lambda x: ember.add(gpu(np.ones(3)), 1.0, out=x),
    "unary_out": lambda x: ember.exp(gpu(np.ones(3)), out=x),
    "sum_out": lambda x: ember.sum(gpu(np.ones((2, 3))), axis=0, out=x),
    "matmul_out": lambda x: ember.matmul(gpu(np.ones((3, 3))), gpu(np.ones(3)), out=x),
    "copyto": lambda x: ember.copyto(x, gpu(np.ones(3))),
}


@pytest.mark.parametrize("name", sorted(_WRITES))
def test_gpu_read_only_refuses_writes(name):
    x = _ro()
    with pytest.raises(ValueError, match="read-only"):
        _WRITES[name](x)
    np.testing.assert_array_equal(host(x), np.arange(3.0))
    w = gpu(np.arange(3.0))
    _WRITES[name](w)                # the same write works on a writeable array


def test_gpu_views_and_broadcasts_are_read_only():
    x = _ro()
    assert not x[1:].flags.writeable and x.device == ember.asarray(x).device
    with pytest.raises(ValueError, match="WRITEABLE"):
        x[1:].flags.writeable = True
    b = ember.broadcast_to(gpu(np.arange(3.0)), (2, 3))
    assert str(b.device) == str(x.device) and not b.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        b[0, 0] = 5.0
    c = b.copy()
    assert c.flags.writeable and c.flags.c_contiguous
    np.testing.assert_array_equal(host(c), np.broadcast_to(np.arange(3.0), (2, 3)))


def test_gpu_backward_through_broadcast():
    w = gpu(np.ones((2, 3))).requires_grad_()
    for _ in range(2):
        (w.sum() + w.mean()).backward()
    np.testing.assert_allclose(host(w.grad), np.full((2, 3), 2 * (1 + 1 / 6)), rtol=1e-6)
    assert DEV in str(w.grad.device) or DEV == "cpu"
