"""ember.optim.reference (the plain per-parameter updates) against torch.optim, and
ember's fused CPU kernels against the reference: every option combination of each
optimizer (tests/optim_cases.py), several steps, float32 and float64, 16-bit
parameters, parameters and state compared.  The GPU kernels against the reference:
tests/test_cuda_optim_reference.py."""
import numpy as np
import pytest

import ember as E
import ember.optim as eo
from ember._core.dtypes import BFLOAT16
from ember.optim import reference

from optim_cases import (CASES, FUSED_CPU, IDS, SHAPES, case_id, grad_fn, inits,
                         reference_run)

N_STEPS = 12
FUSED_16 = [c for c in CASES if c[0] in FUSED_CPU][::3]
DTYPES = [np.float32, np.float64]


def _tol(name, kw, dtype):
    if dtype == np.float64:
        return dict(rtol=1e-10, atol=1e-12)
    if name == "RMSprop" and kw.get("centered") and kw.get("alpha", 0.99) < 0.5:
        # sqrt(square_avg - grad_avg**2) cancels: torch's fused multiply-add and the
        # reference's two roundings differ by up to ~1e-3 relative after 12 float32 steps
        return dict(rtol=2e-3, atol=1e-5)
    return dict(rtol=5e-5, atol=1e-6)


def _np(x):
    if hasattr(x, "detach") and hasattr(x, "numpy") and not isinstance(x, E.ndarray):
        return x.detach().numpy()
    return np.asarray(x.detach() if isinstance(x, E.ndarray) else x)


def _assert_states(got, want, tol):
    assert sorted(got) == sorted(want)
    for key in want:
        np.testing.assert_allclose(np.asarray(_np(got[key]), dtype=np.float64),
                                   np.asarray(_np(want[key]), dtype=np.float64),
                                   err_msg=key, **tol)


# ------------------------------------------------------------ reference vs torch.optim
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name,kw", CASES, ids=IDS)
def test_reference_matches_torch(name, kw, dtype):
    torch = pytest.importorskip("torch")
    params, states = reference_run(name, kw, dtype, N_STEPS)
    grad = grad_fn(SHAPES, N_STEPS)
    tp = [torch.tensor(a, requires_grad=True) for a in inits(dtype)]
    topt = getattr(torch.optim, name)(tp, **kw)
    for k in range(N_STEPS):
        for i, p in enumerate(tp):
            p.grad = torch.tensor(np.asarray(grad(k, i, _np(p)), dtype=dtype))
        topt.step()
    tol = _tol(name, kw, dtype)
    for p, q, st, p_t in zip(params, tp, states, tp):
        assert p.dtype == dtype
        np.testing.assert_allclose(p, _np(q), **tol)
        _assert_states(st, topt.state[p_t], tol)


# ------------------------------------------------------------ the CPU kernels vs reference
def _ember_run(name, kw, dtype, n_steps, shapes=SHAPES):
    grad = grad_fn(shapes, n_steps)
    ep = [E.asarray(a, requires_grad=True) for a in inits(dtype, shapes)]
    opt = getattr(eo, name)(ep, **kw)
    for k in range(n_steps):
        for i, p in enumerate(ep):
            p.grad = E.asarray(np.asarray(grad(k, i, _np(p)), dtype=dtype))
        opt.step()
    return ep, opt


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name,kw", CASES, ids=IDS)
def test_cpu_optimizers_match_reference(name, kw, dtype):
    """The fused CPU kernels (Adadelta: the reference itself, with ember ops)."""
    ep, opt = _ember_run(name, kw, dtype, N_STEPS)
    want, states = reference_run(name, kw, dtype, N_STEPS)
    tol = _tol(name, kw, dtype)
    for p, w, st in zip(ep, want, states):
        assert p.dtype == dtype
        np.testing.assert_allclose(_np(p), w, **tol)
        _assert_states(opt.state[p], st, tol)


@pytest.mark.parametrize("dtype", [np.float16, BFLOAT16], ids=["float16", "bfloat16"])
@pytest.mark.parametrize("name,kw", FUSED_16, ids=[case_id(c) for c in FUSED_16])
def test_cpu_16bit_parameters_match_reference_in_float32(name, kw, dtype):
    """16-bit parameters: float32 state, the update computed in float32, the parameter
    rounded once per step; the reference does the same on a float32 copy."""
    ep, opt = _ember_run(name, kw, dtype, 6)
    want, states = reference_run(name, kw, dtype, 6, work_dtype=np.float32)
    for p, w, st in zip(ep, want, states):
        assert p.dtype == dtype
        # one rounding to 16 bits may land on the neighbour: one 16-bit ulp
        ulp = 2.0 ** -7 if dtype == BFLOAT16 else 2.0 ** -10
        np.testing.assert_allclose(_np(p.astype(E.float32)), w.astype(np.float32),
                                   rtol=ulp, atol=ulp)
        for key, v in opt.state[p].items():
            if key != "step":
                assert v.dtype == np.float32, key
        _assert_states(opt.state[p], st, dict(rtol=4 * ulp, atol=4 * ulp))


def test_reference_on_ember_arrays_matches_numpy():
    """The reference runs on ember arrays too (Adadelta everywhere, RMSprop and Adagrad on
    a GPU use it): the same numbers as on NumPy arrays."""
    picks = [("SGD", "nesterov"), ("Adam", "amsgrad"), ("RMSprop", "centered"),
             ("Adagrad", "lr_decay"), ("Adadelta", "weight_decay")]
    for name, kw in [next(c for c in CASES if c[0] == n and c[1].get(opt)) for n, opt in picks]:
        want, wstates = reference_run(name, kw, np.float64, 5)
        grad = grad_fn(SHAPES, 5)
        params = [E.asarray(a) for a in inits(np.float64)]
        states = [{} for _ in params]
        for k in range(5):
            for i, p in enumerate(params):
                reference.STEPS[name](p, E.asarray(grad(k, i, _np(p))), states[i], **kw)
        for p, w, st, wst in zip(params, want, states, wstates):
            np.testing.assert_allclose(_np(p), w, rtol=1e-13, atol=1e-15)
            _assert_states(st, wst, dict(rtol=1e-13, atol=1e-15))


def test_cases_cover_every_optimizer_option():
    """Each option of each optimizer's constructor (but lr and the compatibility flags) takes
    at least two values in CASES (an option not given counts as its default)."""
    import inspect
    skip = {"self", "params", "lr", "foreach", "fused", "capturable", "differentiable"}
    for name in {c[0] for c in CASES}:
        options = {k: v.default for k, v in
                   inspect.signature(getattr(eo, name).__init__).parameters.items()
                   if k not in skip}
        seen = {k: set() for k in options}
        for n, kw in CASES:
            if n == name:
                for k, default in options.items():
                    seen[k].add(repr(kw.get(k, default)))
        assert all(len(v) >= 2 for v in seen.values()), (name, seen)
