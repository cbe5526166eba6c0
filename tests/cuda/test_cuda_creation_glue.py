"""The GPU creation glue (ember/cuda/_creation.py) on the CPU: creation functions it
builds on the host run with the CPU as default device, even when called while a GPU is
the default (as in a backward on GPU arrays, whose rules build eye() masks)."""
import numpy as np
import pytest

from ember._core import array as _array
from ember._api import creation
from ember.cuda import _creation


@pytest.fixture
def cuda_default():
    prev = _array._swap_default_device(_array.Device("cuda", 0))
    yield
    _array._swap_default_device(prev)


@pytest.mark.parametrize("k", [-1, 0, 2])
def test_host_build_ignores_a_gpu_default_device(cuda_default, k):
    # eye() fills a zeros() array through a NumPy view: that zeros() must be host memory
    x = _creation._on_host(creation.eye.__wrapped__, (3, 4), {"k": k, "dtype": "float64"})
    assert x.device == "cpu"
    np.testing.assert_array_equal(np.asarray(x), np.eye(3, 4, k=k))
    assert _array._get_default_device() == "cuda:0"     # restored afterwards


def test_host_build_restores_the_default_on_error(cuda_default):
    with pytest.raises(ValueError, match="eye: negative"):
        _creation._on_host(creation.eye.__wrapped__, (-1,), {})
    assert _array._get_default_device() == "cuda:0"
