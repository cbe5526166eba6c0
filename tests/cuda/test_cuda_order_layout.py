"""Copies of GPU arrays keep NumPy's memory layout for ``order=`` (the CPU suite
tests/core/test_order_layout.py has the full matrix): ``astype``, ``copy``,
``asarray``/``array``, ``ascontiguousarray`` and the ``*_like`` functions."""
import numpy as np
import pytest

import ember
from cuda_helpers import GPU_MARK, assert_on_device, gpu, host

pytestmark = GPU_MARK

ORDERS = ["C", "F", "A", "K"]


VIEWS = {"c": lambda a: a, "f": lambda a: a.T,
         "channels_last": lambda a: a.transpose(0, 3, 1, 2),
         "negative": lambda a: a[:, ::-1, :, ::2],
         "size1": lambda a: a[:, :1].transpose(3, 1, 2, 0),
         "empty": lambda a: a[:, :0].transpose(1, 2, 0, 3)}


def _check(got, ref, what):
    assert_on_device(got)
    assert got.shape == ref.shape and got.dtype == ref.dtype, what
    np.testing.assert_array_equal(host(got), ref, err_msg=what)
    assert got.flags.c_contiguous == ref.flags.c_contiguous, what
    assert got.flags.f_contiguous == ref.flags.f_contiguous, what
    if ref.size:
        assert got.strides == ref.strides, f"{what}: {got.strides} != {ref.strides}"


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("label", list(VIEWS))
def test_gpu_copies_keep_the_layout(label, order):
    a = np.arange(120.0).reshape(2, 3, 4, 5)
    v, x = VIEWS[label](a), VIEWS[label](gpu(a))  # the same view on both sides
    if v.size:
        assert x.strides == v.strides
    for dt in ("float32", "float64", "int32"):
        _check(x.astype(dt, order=order), v.astype(dt, order=order), f"{label} astype {dt}")
    _check(x.copy(order=order), v.copy(order=order), f"{label} copy")
    _check(ember.copy(x, order=order), np.copy(v, order=order), f"{label} ember.copy")
    _check(ember.asarray(x, dtype="float32", order=order),
           np.asarray(v, dtype="float32", order=order), f"{label} asarray")
    _check(ember.array(x, order=order), np.array(v, order=order), f"{label} array")
    _check(ember.zeros_like(x, order=order), np.zeros_like(v, order=order), f"{label} zeros_like")
    _check(ember.full_like(x, 3, order=order), np.full_like(v, 3, order=order), label)
    assert ember.ascontiguousarray(x).flags.c_contiguous


def test_gpu_astype_autograd_keeps_the_layout():
    v = np.random.default_rng(0).standard_normal((2, 3, 4))
    x = gpu(v).requires_grad_(True)
    y = x.transpose(2, 0, 1).astype(ember.float32)
    assert y.strides == v.transpose(2, 0, 1).astype(np.float32).strides
    (y * 2).sum().backward()
    np.testing.assert_allclose(host(x.grad), np.full(v.shape, 2.0))
