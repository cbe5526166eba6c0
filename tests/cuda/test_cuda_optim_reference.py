"""The optimizers on a GPU against ember.optim.reference (the plain per-parameter
updates, themselves tested against torch.optim in test_optim_reference.py).

SGD, Adam and AdamW run the fused multi-tensor kernels (ember/cuda/kernels/optim.cu,
launched by ember/cuda/ops_optim.py); RMSprop, Adagrad and Adadelta run the reference
updates with ember ops on the GPU.  Every option combination (tests/optim_cases.py),
several steps, float32 and float64, and 16-bit parameters for the fused kernels.  Runs
on a GPU or on the CPU emulation (``EMBER_CUDA_EMULATION=1``); skipped otherwise.
"""
import numpy as np
import pytest

import ember
import ember.optim as eo
from ember._core.dtypes import BFLOAT16

from cuda_helpers import GPU_MARK, assert_on_device, gpu, host
from optim_cases import CASES, FUSED_GPU, SHAPES, case_id, grad_fn, inits, reference_run

pytestmark = GPU_MARK

N_STEPS = 6
FUSED = [c for c in CASES if c[0] in FUSED_GPU]
OTHERS = [c for c in CASES if c[0] not in FUSED_GPU][::3]
# every fused case in float32, every other one in float64 (CI runs this file emulated twice)
FUSED_PARAMS = [pytest.param(name, kw, np.float32, id=f"{case_id((name, kw))}-float32")
                for name, kw in FUSED] + \
    [pytest.param(name, kw, np.float64, id=f"{case_id((name, kw))}-float64")
     for name, kw in FUSED[::2]]


def _tol(name, kw, dtype):
    if dtype == np.float64:
        return dict(rtol=1e-10, atol=1e-12)
    if name == "RMSprop" and kw.get("centered") and kw.get("alpha", 0.99) < 0.5:
        return dict(rtol=2e-3, atol=1e-5)      # see test_optim_reference._tol
    return dict(rtol=5e-5, atol=1e-6)


def _gpu_run(name, kw, dtype, n_steps):
    grad = grad_fn(SHAPES, n_steps)
    params = [gpu(a).requires_grad_() for a in inits(dtype)]
    opt = getattr(eo, name)(params, **kw)
    for k in range(n_steps):
        for i, p in enumerate(params):
            p.grad = gpu(np.asarray(grad(k, i, _f64(p)), dtype=dtype))
        opt.step()
    return params, opt


def _f64(x):
    a = host(x)
    return a.astype(np.float64)


def _check(params, opt, want, states, tol, state_dtype=None):
    for p, w, st in zip(params, want, states):
        assert_on_device(p)
        np.testing.assert_allclose(_f64(p), w.astype(np.float64), **tol)
        got = opt.state[p]
        assert sorted(got) == sorted(st)
        if "step" in st:
            assert float(got["step"]) == float(st["step"])
        for key in st:
            if key == "step":
                continue
            assert_on_device(got[key])
            if state_dtype is not None:
                assert got[key].dtype == state_dtype, key
            np.testing.assert_allclose(_f64(got[key]), np.asarray(st[key], np.float64),
                                       err_msg=key, **tol)


@pytest.mark.parametrize("name,kw,dtype", FUSED_PARAMS)
def test_fused_gpu_kernels_match_reference(name, kw, dtype):
    params, opt = _gpu_run(name, kw, dtype, N_STEPS)
    want, states = reference_run(name, kw, dtype, N_STEPS)
    _check(params, opt, want, states, _tol(name, kw, dtype), state_dtype=dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name,kw", OTHERS, ids=[case_id(c) for c in OTHERS])
def test_other_optimizers_on_gpu_match_reference(name, kw, dtype):
    params, opt = _gpu_run(name, kw, dtype, N_STEPS)
    want, states = reference_run(name, kw, dtype, N_STEPS)
    _check(params, opt, want, states, _tol(name, kw, dtype), state_dtype=dtype)


@pytest.mark.parametrize("dtype", [np.float16, BFLOAT16], ids=["float16", "bfloat16"])
@pytest.mark.parametrize("name,kw", FUSED[::4], ids=[case_id(c) for c in FUSED[::4]])
def test_fused_gpu_kernels_16bit_parameters(name, kw, dtype):
    """16-bit parameters: float32 state, the update in float32, the parameter rounded
    once per step; the reference does the same on a float32 copy."""
    params, opt = _gpu_run(name, kw, dtype, 4)
    want, states = reference_run(name, kw, dtype, 4, work_dtype=np.float32)
    ulp = 2.0 ** -7 if dtype == BFLOAT16 else 2.0 ** -10
    for p in params:
        assert p.dtype == dtype
    _check(params, opt, want, states, dict(rtol=4 * ulp, atol=4 * ulp),
           state_dtype=np.float32)


def test_gpu_step_errors_name_the_optimizer():
    p = gpu(np.zeros((2, 3), np.float32)).requires_grad_()
    opt = eo.Adam([p])
    p.grad = gpu(np.zeros((3, 2), np.float32))
    with pytest.raises(ValueError, match=r"Adam: parameter 0 has shape \(2, 3\) but its "
                                         r"\.grad has shape \(3, 2\)"):
        opt.step()
    p.grad = gpu(np.zeros((2, 3), np.float64))
    with pytest.raises(TypeError, match="Adam: parameter 0 has dtype float32 but its .grad"):
        opt.step()
    assert len(opt.state) == 0 or float(opt.state[p]["step"]) == 0
    if p.is_cuda:
        p.grad = ember.zeros((2, 3))
        with pytest.raises(RuntimeError, match="SGD: parameter 0 is on cuda.* but its .grad "
                                               "is on cpu"):
            eo.SGD([p], lr=0.1).step()
