"""Shared pieces of the GPU suite (test_cuda_device/_nn/_autograd).

Every GPU test compares ember on 'cuda' with ember on the CPU (itself tested
against NumPy and PyTorch) from the same inputs.  Nothing here imports CuPy:
collecting the GPU tests on a machine without a GPU must not touch it.

``EMBER_GPU_TESTS_ON_CPU=1`` dry-runs the suite's test logic with the device
'cpu' (tests that need a real GPU or CuPy still skip).  That only checks the
tests themselves; it never counts as running ember on a GPU.

``EMBER_TEST_CUDA_DEVICE=N`` runs the suite's GPU side on ``cuda:N`` while device 0
stays current: every op must put its work and its result on its arrays' device.
It needs N + 1 devices (a multi-GPU machine, or the emulation with
``EMBER_CUDA_EMU_DEVICES``); tests that name ``'cuda'`` themselves stay on device 0.
"""
import os

import numpy as np
import pytest

import ember


def cuda_available():
    """ember.cuda.is_available(), False if ember.cuda cannot even be imported."""
    try:
        import ember.cuda as ecuda
        return bool(ecuda.is_available())
    except Exception:
        return False


DRY = os.environ.get("EMBER_GPU_TESTS_ON_CPU") == "1"
_INDEX = os.environ.get("EMBER_TEST_CUDA_DEVICE")
DEV = "cpu" if DRY else ("cuda" if _INDEX is None else f"cuda:{int(_INDEX)}")
HAVE_GPU = (not DRY) and cuda_available()
if HAVE_GPU and _INDEX is not None:
    import ember.cuda as _ecuda
    if _ecuda.device_count() <= int(_INDEX):
        raise RuntimeError(f"EMBER_TEST_CUDA_DEVICE={_INDEX}, but there are only "
                           f"{_ecuda.device_count()} CUDA device(s)")

#: module-level ``pytestmark`` of every GPU test file
GPU_MARK = [pytest.mark.cuda,
            pytest.mark.skipif(not (DRY or HAVE_GPU),
                               reason="no CUDA device (ember.cuda.is_available() is False)")]
#: for tests that need a real GPU (CuPy interop, memory pool, streams)
real_gpu = pytest.mark.skipif(not HAVE_GPU, reason="needs a real CUDA device")

# default tolerances of a GPU-vs-CPU comparison, per dtype (GPU libm and
# reduction order differ from the CPU's by a few ulp)
RTOL = {"float16": 2e-3, "bfloat16": 1e-2, "float32": 2e-5, "float64": 1e-12,
        "complex64": 2e-5, "complex128": 1e-12}
ATOL = {"float16": 2e-3, "bfloat16": 1e-2, "float32": 1e-6, "float64": 1e-12,
        "complex64": 1e-6, "complex128": 1e-12}


def on_test_device():
    """A block with the test device current (a no-op unless EMBER_TEST_CUDA_DEVICE): for
    code that means "the current device" (x.cuda(), to('cuda'), CuPy calls)."""
    if _INDEX is None:
        import contextlib
        return contextlib.nullcontext()
    import ember.cuda
    return ember.cuda.device(int(_INDEX))


def gpu(x):
    """A copy of ember/NumPy array ``x`` on the test device."""
    if not isinstance(x, ember.ndarray):
        x = ember.asarray(x)
    return x.to(DEV)


def host(x):
    """NumPy copy of a (GPU) ember array; NumPy arrays and scalars pass through."""
    if isinstance(x, ember.ndarray):
        return np.asarray(x.cpu())
    return np.asarray(x)


def settle(result=None):
    """Wait for the device, so that the input checks a GPU op deferred (an index out of
    range: ember/cuda/_checks.py) raise here, not in some later test."""
    if not DRY and HAVE_GPU:
        import ember.cuda
        ember.cuda.synchronize()


def assert_on_device(x):
    assert isinstance(x, ember.ndarray), f"expected an ember array, got {type(x)}"
    if not DRY:
        assert x.is_cuda, f"result is on {x.device}, expected cuda"
        assert x.device.type == "cuda"
        if _INDEX is not None:
            assert x.device == ember.Device(DEV), f"result is on {x.device}, expected {DEV}"


def _floaty(dt):
    return dt.kind in "fc" or dt == ember.bfloat16


def assert_same(got, expected, rtol=None, atol=None, check_dtype=True):
    """GPU result ``got`` vs CPU result ``expected``: on the device, same type,
    shape and dtype, values equal (floats: to the dtype's tolerance)."""
    assert_on_device(got)
    g = host(got)
    e = host(expected)
    assert g.shape == e.shape, f"shape {g.shape} != {e.shape}"
    if check_dtype:
        assert g.dtype == e.dtype, f"dtype {g.dtype} != {e.dtype}"
    if _floaty(g.dtype) or _floaty(e.dtype):
        rt = RTOL.get(g.dtype.name, 1e-5) if rtol is None else rtol
        at = ATOL.get(g.dtype.name, 1e-6) if atol is None else atol
        # bfloat16 (NumPy kind 'V') is compared through float32
        g, e = (a.astype(np.float32) if a.dtype == ember.bfloat16 else a for a in (g, e))
        np.testing.assert_allclose(g, e, rtol=rt, atol=at, equal_nan=True)
    else:
        np.testing.assert_array_equal(g, e)


def assert_same_tree(got, expected, **kw):
    """assert_same over (nested) tuples/lists of arrays."""
    if isinstance(expected, (tuple, list)):
        assert isinstance(got, (tuple, list)) and len(got) == len(expected)
        for g, e in zip(got, expected):
            assert_same_tree(g, e, **kw)
    elif isinstance(expected, ember.ndarray):
        assert_same(got, expected, **kw)
    else:
        assert got == expected


def layout_pairs(base):
    """(label, cpu_array, gpu_array) holding ``base``'s values in the same memory
    layout on both devices: contiguous, transposed, step-2 slice, negative
    stride.  The views are taken on each device (views are metadata only)."""
    out = [("contiguous", ember.asarray(base.copy()), gpu(base.copy()))]
    if base.ndim >= 2:
        c = np.ascontiguousarray(base.T)
        out.append(("transposed", ember.asarray(c).T, gpu(c).T))
    if base.ndim >= 1 and base.size:
        big = np.repeat(base, 2, axis=-1)
        out.append(("step2", ember.asarray(big)[..., ::2], gpu(big)[..., ::2]))
        rev = np.ascontiguousarray(base[..., ::-1])
        out.append(("negative_stride", ember.asarray(rev)[..., ::-1], gpu(rev)[..., ::-1]))
    return out


def cupy():
    """The cupy module (only called from tests that run on a real GPU)."""
    import cupy as cp
    return cp
