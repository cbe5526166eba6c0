"""GradScaler + SGD/Adam/AdamW trajectories, ember against PyTorch CPU (shared by
tests/optim/test_optim_amp_step.py on the CPU and tests/cuda/test_cuda_optim_amp_step.py
on a GPU or its emulation).

Each step: zero_grad, the scaled loss's backward, an inf or NaN planted in one gradient
on the steps that say so, ``scaler.step``, ``scaler.update``.  PyTorch runs its fused
optimizers (``fused=True``, which take GradScaler's found_inf / grad_scale as ember's
do) unless the very first step is skipped: its fused SGD then keeps an uninitialised
momentum buffer, so the oracle there is its default optimizer (a skipped step leaves
no state at all), which ember follows on both devices.
"""
import numpy as np
import pytest

import ember
import ember.amp  # noqa: F401

SHAPES = [(3, 5), (7,), (16500,)]          # 16500: two chunks of the fused GPU kernels
CASES = [
    ("SGD", dict(lr=0.05)),
    ("SGD", dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01)),
    ("SGD", dict(lr=0.05, momentum=0.9, dampening=0.1, maximize=True)),
    ("Adam", dict(lr=0.01)),
    ("Adam", dict(lr=0.01, amsgrad=True, weight_decay=0.1, maximize=True)),
    ("AdamW", dict(lr=0.01, weight_decay=0.1)),
    ("AdamW", dict(lr=0.01, weight_decay=0.1, amsgrad=True)),
]
CASE_IDS = [f"{n}-{'-'.join(f'{k}={v}' for k, v in kw.items())}" for n, kw in CASES]
# 0: clean step, 1: an inf gradient, 2: a NaN gradient (growth_interval 2: the scale
# grows after two clean steps and backs off after each bad one)
PATTERNS = {"later": [0, 0, 1, 0, 2, 1, 0, 0],
            "first": [1, 0, 0, 2, 0]}
SCALER = dict(init_scale=2.0 ** 10, growth_factor=2.0, backoff_factor=0.5, growth_interval=2)


def _init(seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(np.float32) for s in SHAPES]


def _coef(seed=1):
    rng = np.random.default_rng(seed)
    return [rng.uniform(0.5, 1.5, s).astype(np.float32) for s in SHAPES]


def _bad(kind):
    return float("nan") if kind == 2 else float("inf")


def _state_np(st):
    return {k: float(v) if k == "step" else np.asarray(v.tolist(), dtype=np.float64)
            for k, v in st.items()}


def run_torch(name, kw, pattern):
    torch = pytest.importorskip("torch")
    ps = [torch.nn.Parameter(torch.tensor(v)) for v in _init()]
    cs = [torch.tensor(c) for c in _coef()]
    fused = True if pattern[0] == 0 else None
    opt = getattr(torch.optim, name)(ps, fused=fused, **kw)
    scaler = torch.amp.GradScaler("cpu", **SCALER)
    out = []
    for bad in pattern:
        opt.zero_grad()
        loss = sum(((p * c) ** 2).sum() for p, c in zip(ps, cs))
        scaler.scale(loss).backward()
        if bad:
            with torch.no_grad():
                ps[1].grad[2] = _bad(bad)
        scaler.step(opt)
        scaler.update()
        out.append((scaler.get_scale(), scaler._get_growth_tracker(),
                    [p.detach().numpy().astype(np.float64) for p in ps],
                    [_state_np(opt.state[p]) if p in opt.state else {} for p in ps]))
    return out


def run_ember(name, kw, pattern, device):
    ps = [ember.asarray(v).to(device).requires_grad_(True) for v in _init()]
    cs = [ember.asarray(c).to(device) for c in _coef()]
    opt = getattr(ember.optim, name)(ps, **kw)
    assert opt._step_supports_amp_scaling
    scaler = ember.amp.GradScaler(device, **SCALER)
    out = []
    for bad in pattern:
        opt.zero_grad()
        loss = sum(((p * c) ** 2).sum() for p, c in zip(ps, cs))
        scaler.scale(loss).backward()
        if bad:
            with ember.no_grad():
                ps[1].grad[2] = _bad(bad)
        scaler.step(opt)
        scaler.update()
        out.append((scaler.get_scale(), scaler._get_growth_tracker(),
                    [np.asarray(p.detach().cpu().tolist(), dtype=np.float64) for p in ps],
                    [_state_np(opt.state[p]) if opt.state.get(p) else {} for p in ps]))
    return out, opt


def compare(mine, ref, rtol=2e-6, atol=1e-6):
    """Scale, growth tracker, parameters and optimizer state after every step (float32:
    atol 1e-6 for entries of order 1-10 whose updates nearly cancel)."""
    assert len(mine) == len(ref)
    for i, ((s1, g1, w1, st1), (s2, g2, w2, st2)) in enumerate(zip(mine, ref)):
        assert (s1, g1) == (s2, g2), f"step {i}: scale/tracker {(s1, g1)} != {(s2, g2)}"
        for a, b in zip(w1, w2):
            np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=f"step {i}")
        for a, b in zip(st1, st2):
            assert sorted(a) == sorted(b), f"step {i}: state keys {sorted(a)} != {sorted(b)}"
            for k in b:
                if k == "step":
                    assert a[k] == b[k], f"step {i}: step count {a[k]} != {b[k]}"
                else:
                    np.testing.assert_allclose(a[k], b[k], rtol=rtol, atol=atol,
                                               err_msg=f"step {i}: state[{k!r}]")


def check_grad_scale_and_found_inf(name, kw, device):
    """optimizer.grad_scale / found_inf set by hand (PyTorch's protocol, as its fused
    optimizers take it): the gradients are divided by the scale in place and used; a
    nonzero flag leaves parameters, gradients and state untouched.  Oracle: PyTorch's
    fused optimizer on the CPU."""
    torch = pytest.importorskip("torch")
    init, rng = _init(), np.random.default_rng(5)
    grads = [[(rng.standard_normal(s) * 3).astype(np.float32) for s in SHAPES]
             for _ in range(3)]
    tp = [torch.nn.Parameter(torch.tensor(v)) for v in init]
    topt = getattr(torch.optim, name)(tp, fused=True, **kw)
    ep = [ember.asarray(v).to(device).requires_grad_(True) for v in init]
    eopt = getattr(ember.optim, name)(ep, **kw)
    for k, (gs, found) in enumerate(zip(grads, [0.0, 1.0, 0.0])):
        for p, g in zip(tp, gs):
            p.grad = torch.tensor(g)
        for p, g in zip(ep, gs):
            p.grad = ember.asarray(g).to(device)
        topt.grad_scale, topt.found_inf = torch.tensor(3.0), torch.tensor(found)
        eopt.grad_scale = ember.asarray(3.0, dtype=ember.float32).to(device)
        eopt.found_inf = ember.asarray(found, dtype=ember.float32).to(device)
        topt.step()
        eopt.step()
        del eopt.grad_scale, eopt.found_inf
        for a, b in zip(ep, tp):
            np.testing.assert_allclose(a.detach().cpu().numpy(), b.detach().numpy(),
                                       rtol=2e-6, atol=1e-7, err_msg=f"step {k}")
            np.testing.assert_allclose(a.grad.cpu().numpy(), b.grad.numpy(), rtol=1e-6,
                                       err_msg=f"step {k}: the gradient written back")
            sa, sb = _state_np(eopt.state[a]), _state_np(topt.state[b])
            assert sorted(sa) == sorted(sb)
            for key in sb:
                np.testing.assert_allclose(sa[key], sb[key], rtol=2e-6, atol=1e-7,
                                           err_msg=f"step {k}: state[{key!r}]")
