"""Shared pieces of the optimizer tests against ember.optim.reference: every option
combination of each optimizer, and a deterministic training trajectory."""
import itertools

import numpy as np


def _grid(**axes):
    keys = list(axes)
    return [dict(zip(keys, values)) for values in itertools.product(*axes.values())]


def _sgd_ok(kw):
    return not kw["nesterov"] or (kw["momentum"] > 0 and kw["dampening"] == 0)


#: (optimizer class name, options): each option combination worth telling apart
CASES = (
    [("SGD", dict(lr=0.05, **kw)) for kw in _grid(
        momentum=[0.0, 0.9], dampening=[0.0, 0.3], nesterov=[False, True],
        weight_decay=[0.0, 0.1], maximize=[False, True]) if _sgd_ok(kw)]
    + [("Adam", dict(lr=0.01, betas=(0.8, 0.99), eps=1e-6, **kw)) for kw in _grid(
        weight_decay=[0.0, 0.1], amsgrad=[False, True], maximize=[False, True],
        decoupled_weight_decay=[False, True])]
    + [("AdamW", dict(lr=0.01, **kw)) for kw in _grid(
        weight_decay=[0.0, 0.3], amsgrad=[False, True], maximize=[False, True])]
    # beta1 = 0.3: torch's lerp takes its other branch (weight 1 - beta1 >= 0.5)
    + [("Adam", dict(lr=0.02, betas=(0.3, 0.8), amsgrad=True)),
       ("AdamW", dict(lr=0.02, betas=(0.3, 0.8), eps=1e-6))]
    + [("RMSprop", dict(lr=0.01, **kw)) for kw in _grid(
        alpha=[0.99, 0.3], momentum=[0.0, 0.5], centered=[False, True],
        weight_decay=[0.0, 0.1], maximize=[False, True])]
    + [("RMSprop", dict(lr=0.02, eps=1e-4, momentum=0.5))]
    + [("Adagrad", dict(lr=0.1, **kw)) for kw in _grid(
        lr_decay=[0.0, 0.01], weight_decay=[0.0, 0.1], initial_accumulator_value=[0.0, 0.5],
        maximize=[False, True])]
    + [("Adagrad", dict(lr=0.05, eps=1e-6))]
    + [("Adadelta", dict(lr=0.5, **kw)) for kw in _grid(
        rho=[0.9, 0.5], weight_decay=[0.0, 0.1], maximize=[False, True])]
    + [("Adadelta", dict(eps=1e-5))]
)


def case_id(case):
    name, kw = case
    return name + "-" + ",".join(f"{k}={v}" for k, v in kw.items() if v not in (0.0, False))


IDS = [case_id(c) for c in CASES]
#: the optimizers with a fused multi-tensor kernel on the CPU
FUSED_CPU = ("SGD", "Adam", "AdamW", "RMSprop", "Adagrad")
#: the optimizers with a fused multi-tensor kernel on the GPU (ember/cuda/kernels/optim.cu)
FUSED_GPU = ("SGD", "Adam", "AdamW")

SHAPES = [(7, 5), (33,), (), (4, 3, 2)]


def inits(dtype, shapes=SHAPES, seed=0):
    rng = np.random.default_rng(seed)
    return [np.asarray(rng.standard_normal(s)).astype(dtype) for s in shapes]


def grad_fn(shapes=SHAPES, n_steps=12, seed=1):
    """Deterministic gradients that depend on the current parameters (so that a
    difference would grow): g = (p - target) * 0.7 + noise_k, in float64."""
    rng = np.random.default_rng(seed)
    targets = [rng.standard_normal(s) for s in shapes]
    noise = [[0.3 * rng.standard_normal(s) for s in shapes] for _ in range(n_steps)]

    def grad(k, i, p):
        return (np.asarray(p, dtype=np.float64) - targets[i]) * 0.7 + noise[k][i]
    return grad


def reference_run(name, kw, dtype, n_steps, shapes=SHAPES, grads=None, work_dtype=None):
    """The reference trajectory on NumPy arrays: (params, states).  With a 16-bit
    `dtype` and work_dtype=float32, each step updates a float32 copy of the 16-bit
    parameter with float32 state, then rounds the parameter to 16 bits (what ember's
    fused kernels do)."""
    from ember.optim import reference
    step = reference.STEPS[name]
    grads = grads or grad_fn(shapes, n_steps)
    params = inits(dtype, shapes)
    states = [{} for _ in params]
    for k in range(n_steps):
        for i, p in enumerate(params):
            g = grads(k, i, p).astype(dtype)
            if work_dtype is None:
                step(p, g, states[i], **kw)
            else:
                w = p.astype(work_dtype)
                step(w, g.astype(work_dtype), states[i], **kw)
                p[...] = w.astype(dtype)
    return params, states
