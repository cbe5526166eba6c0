"""The GPU optimizer path (ember.optim -> ember/optim/_gpu.py -> ember/cuda/ops_optim.py ->
optim.cu's fused multi-tensor kernels) run on the CPU: the optimizers are pointed at
ember.optim._gpu, whose launches (ops_optim) go to the host build of the real kernels
(tests/cuda_host_kernels.ember_launch).  Oracle: the same optimizers on the CPU kernels.
"""
import contextlib
import types

import numpy as np
import pytest

import ember
from ember._core.dtypes import BFLOAT16
from ember.cuda import _runtime as real_R
from ember._kernels.cpu import optim as cpu_optim
from ember.cuda import ops_optim
from ember.optim import _gpu as gpu_optim
from ember.optim import adam as adam_mod, optimizer as optimizer_mod, sgd as sgd_mod

import cuda_host_kernels as hk

pytestmark = pytest.mark.skipif(hk.compiler() is None, reason="no C++ compiler for the host")


class _HostBuffer:
    """cupy.asarray(host) stand-in: the table stays a NumPy array; .data.ptr its address."""

    def __init__(self, a):
        self.a = np.ascontiguousarray(a)
        self.data = types.SimpleNamespace(ptr=self.a.ctypes.data)


@pytest.fixture
def host_gpu(monkeypatch):
    fake_cp = types.SimpleNamespace(
        asarray=_HostBuffer,
        cuda=types.SimpleNamespace(Device=lambda d: contextlib.nullcontext()))
    fake = types.SimpleNamespace(
        suffix=real_R.suffix, cp=lambda: fake_cp,
        zeros=lambda shape, dtype, device=None: ember.zeros(shape, dtype=dtype),
        launch=lambda name, grid, block, args: hk.ember_launch(name, grid, block, args,
                                                                max_blocks=3))
    monkeypatch.setattr(ops_optim, "_R", lambda: fake)

    def check(p, g, opname, i):            # the parameters are host arrays here
        return cpu_optim.check_param_and_grad(p, g, opname, i, False)
    monkeypatch.setattr(gpu_optim, "_check", check)
    used = []

    def kernels(params):
        used.append(True)
        return gpu_optim
    _use(monkeypatch, kernels)
    return used


def _use(mp, kernels):
    """Point the optimizers at `kernels(params) -> module` (they import _kernels by name)."""
    for mod in (optimizer_mod, sgd_mod, adam_mod):
        mp.setattr(mod, "_kernels", kernels)


def _cpu(params):
    return optimizer_mod._cpu_kernels


SHAPES = [(40000,), (3, 5), (7,)]          # 40000: three 16384-element chunks


def _params(dtype, seed):
    r = np.random.default_rng(seed)
    out = []
    for s in SHAPES:
        p = ember.asarray(r.standard_normal(s).astype(np.float32).astype(dtype))
        p.requires_grad_()
        out.append(p)
    return out


def _set_grads(params, seed):
    r = np.random.default_rng(seed)
    for p in params:
        p.grad = ember.asarray(r.standard_normal(p.shape).astype(np.float32).astype(p.dtype))


def _run(make_opt, dtype, steps=3, skip_grad_on=None):
    params = _params(dtype, 0)
    opt = make_opt(params)
    for k in range(steps):
        _set_grads(params, 10 + k)
        if skip_grad_on is not None and k == 1:
            params[skip_grad_on].grad = None     # a parameter without a gradient this step
        opt.step()
    return [p.detach().numpy().astype(np.float64) for p in params], opt


OPTS = {
    "sgd": lambda ps: ember.optim.SGD(ps, lr=0.1),
    "sgd_momentum": lambda ps: ember.optim.SGD(ps, lr=0.05, momentum=0.9, dampening=0.1,
                                               weight_decay=0.01),
    "sgd_nesterov_max": lambda ps: ember.optim.SGD(ps, lr=0.05, momentum=0.8, nesterov=True,
                                                   maximize=True),
    "adam": lambda ps: ember.optim.Adam(ps, lr=0.01, weight_decay=0.01),
    "adamw_amsgrad": lambda ps: ember.optim.AdamW(ps, lr=0.01, amsgrad=True,
                                                  weight_decay=0.05),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", list(OPTS))
def test_fused_steps_match_the_cpu_optimizers(host_gpu, name, dtype):
    with pytest.MonkeyPatch.context() as mp:
        _use(mp, _cpu)
        want, _ = _run(OPTS[name], dtype, skip_grad_on=1)
    used_before = len(host_gpu)
    got, opt = _run(OPTS[name], dtype, skip_grad_on=1)
    assert len(host_gpu) > used_before                 # the GPU path ran
    tol = 1e-12 if dtype == np.float64 else 2e-6
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [np.float16, BFLOAT16])
@pytest.mark.parametrize("name", ["sgd_momentum", "adamw_amsgrad"])
def test_16bit_parameters_keep_float32_state(host_gpu, name, dtype):
    """The fused kernels keep 16-bit parameters' state in float32 and round the
    parameter once per step: close to the float32 run."""
    got, opt = _run(OPTS[name], dtype)
    with pytest.MonkeyPatch.context() as mp:
        _use(mp, _cpu)
        ref, _ = _run(OPTS[name], np.float32)
    for p in opt.param_groups[0]["params"]:
        for key, v in opt.state[p].items():
            if key != "step":
                assert v.dtype == np.float32, key
    tol = 1e-2 if dtype == np.float16 else 4e-2
    for g, w in zip(got, ref):
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol)
