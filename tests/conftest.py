"""pytest configuration: tests/ on sys.path for `helpers`, default dtype reset."""
import glob
import os
import sys

import numpy as np
import pytest

_HERE = os.path.dirname(os.path.abspath(__file__))
# tests/ (helpers, cuda_helpers, ...) and each test folder: a few test modules import
# others by name (test_cuda_ops_coverage imports test_cuda_device)
sys.path[:0] = [_HERE] + sorted({os.path.dirname(p)
                                 for p in glob.glob(os.path.join(_HERE, "*", "test_*.py"))})

# Child processes the tests start (`python -c`, multiprocessing's spawn) run with the
# repository root as their current directory, which Python puts first on sys.path for
# -c: they would import the source folder ember/ (no compiled modules) instead of the
# installed ember.  PYTHONSAFEPATH (Python 3.11+) leaves the current directory out.
os.environ.setdefault("PYTHONSAFEPATH", "1")

import ember  # noqa: E402

if os.environ.get("EMBER_CUDA_EMULATION") == "1":
    # the GPU suites on the CPU: tests/cuda_emu (never a GPU run)
    import cuda_emu  # noqa: E402
    cuda_emu.install()


@pytest.fixture(params=["kernel", "blas"])
def f32_gemm_path(request):
    """Route every float32 product through one path: ember's AVX-512 kernel
    (ember/_kernels/cpu/f32_gemm.h; skipped without AVX-512F) or OpenBLAS, with the
    kernel's size limits lifted so that the whole product takes the path under test."""
    from ember._kernels.cpu import gemm
    on, limit = gemm.f32_kernel(), gemm._f32_limit()
    if request.param == "kernel" and not on:
        pytest.skip("no AVX-512F float32 kernel on this CPU")
    gemm._set_f32_kernel(request.param == "kernel", 1 << 62, 0)
    yield request.param
    gemm._set_f32_kernel(on, *limit)


@pytest.fixture(autouse=True)
def _default_dtype_float32():
    """Every test starts (and ends) with ember's default float dtype, float32."""
    ember.set_default_dtype(ember.float32 if hasattr(ember, "float32") else np.float32)
    yield
    ember.set_default_dtype(np.float32)


def pytest_configure(config):
    config.addinivalue_line("markers", "cuda: needs a CUDA device (skipped without one)")
