"""The GPU optimizer path (ember.optim -> the group-step ops of ember/optim/_steps.py ->
their GPU implementations in ember/optim/_gpu.py -> ember/cuda/ops_optim.py -> optim.cu's
fused multi-tensor kernels) run on the CPU: the ops' bodies are pointed at ember.optim._gpu,
whose launches (ops_optim) go to the host build of the real kernels
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
from ember.optim import _gpu as gpu_optim, _steps

import cuda_host_kernels as hk

pytestmark = pytest.mark.skipif(hk.compiler() is None, reason="no C++ compiler for the host")

_STEPS = ("sgd_group", "adam_group", "rmsprop_group", "adagrad_group", "init_state_adagrad")


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

    def counted(fn):
        def run(*args, **kwargs):
            used.append(True)
            return fn(*args, **kwargs)
        return run
    _use(monkeypatch, types.SimpleNamespace(
        **{name: counted(getattr(gpu_optim, name)) for name in _STEPS}))
    return used


def _use(mp, impl):
    """Make `impl`'s functions the bodies of the group-step ops (the parameters here are
    host arrays, which the dispatch would give the CPU kernels)."""
    for name in _STEPS:
        mp.setattr(getattr(_steps, name), "fn", getattr(impl, name))


def test_the_gpu_steps_are_the_ops_registered_implementations():
    """Each group-step op reaches its GPU implementation the one way: registered under
    the op's name (the dispatcher's route), callable with arrays of several GPUs."""
    from ember.cuda import _dispatch
    _steps._register_gpu_steps(None)            # (what the backend's start runs)
    for name in _STEPS:
        kind, fn = _dispatch.route(getattr(_steps, name))
        assert kind == _dispatch._MULTI_DEVICE and fn is getattr(gpu_optim, name)
    assert _steps.sgd_group.fn is cpu_optim.sgd_group


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
        _use(mp, cpu_optim)
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
        _use(mp, cpu_optim)
        ref, _ = _run(OPTS[name], np.float32)
    for p in opt.param_groups[0]["params"]:
        for key, v in opt.state[p].items():
            if key != "step":
                assert v.dtype == np.float32, key
    tol = 1e-2 if dtype == np.float16 else 4e-2
    for g, w in zip(got, ref):
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol)
