"""Plain reference implementations of ember's optimizer updates.

One function per optimizer, one parameter at a time, written the way
PyTorch's single-tensor code (``torch/optim/adam.py`` ``_single_tensor_adam``
and friends) reads, with PyTorch's names: ``exp_avg``, ``exp_avg_sq``,
``bias_correction1``, ``bias_correction2``, ``step_size``, ``denom``... The
arithmetic is array operations in the parameter's dtype, one operation after
another, so a NumPy array and an ember array (on any device) both work.

These functions are the specification the fused kernels are tested against
(``ember/_kernels/cpu/optim.pyx`` on the CPU, ``ember/cuda/kernels/optim.cu``
on the GPU); they are tested against ``torch.optim`` in turn.  Optimizers
without a fused kernel on a device run them directly (Adadelta everywhere,
RMSprop and Adagrad on a GPU).  They round where each array operation
rounds: a fused kernel's fused multiply-adds may differ in the last bit.

Each ``*_step(param, grad, state, **options)`` updates ``param`` and the
per-parameter ``state`` dict (PyTorch's keys; buffers created on the first
step, in the parameter's dtype) in place.  ``state["step"]`` starts as a
Python float; a 0-d array already there (as the optimizers keep it) counts in
place.  With ember arrays, call them under ``ember.no_grad()``.

>>> import numpy as np
>>> from ember.optim import reference
>>> p = np.array([1.0, -2.0]); state = {}
>>> reference.adam_step(p, np.array([0.5, 0.5]), state, lr=0.1, betas=(0.9, 0.999))
>>> p.round(4).tolist(), state["step"]
([0.9, -2.1], 1.0)
"""

__all__ = ["sgd_step", "adam_step", "adamw_step", "rmsprop_step", "adagrad_step",
           "adadelta_step", "STEPS"]


def _xp(a):
    """The array namespace of `a` (NumPy for NumPy arrays, ember for ember's)."""
    return a.__array_namespace__()


def _count_step(state):
    """``state["step"] += 1``; returns the new count.  A 0-d array (the optimizers
    keep PyTorch's 0-d float step tensor) counts in place, in its own dtype."""
    step = state.get("step", 0.0)
    step += 1
    state["step"] = step
    return float(step)


def _direction(param, grad, weight_decay, maximize):
    """The gradient the update follows: negated to maximize, plus the L2 penalty."""
    if maximize:
        grad = -grad
    if weight_decay != 0:
        grad = grad + weight_decay * param
    return grad


def sgd_step(param, grad, state, *, lr, momentum=0.0, dampening=0.0, weight_decay=0.0,
             nesterov=False, maximize=False):
    """One ``torch.optim.SGD`` step for one parameter (state: ``momentum_buffer``)."""
    grad = _direction(param, grad, weight_decay, maximize)
    if momentum != 0:
        buf = state.get("momentum_buffer")
        if buf is None:                     # the first step: momentum_buffer = grad
            buf = state["momentum_buffer"] = _xp(param).zeros_like(param)
            buf[...] = grad
        else:
            buf *= momentum
            buf += (1 - dampening) * grad
        if nesterov:
            grad = grad + momentum * buf
        else:
            grad = buf
    param -= lr * grad


def adam_step(param, grad, state, *, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
              amsgrad=False, maximize=False, decoupled_weight_decay=False):
    """One ``torch.optim.Adam`` step for one parameter (AdamW with
    ``decoupled_weight_decay=True``).  State: ``step``, ``exp_avg``,
    ``exp_avg_sq`` and, with amsgrad, ``max_exp_avg_sq``."""
    xp = _xp(param)
    beta1, beta2 = betas
    if "exp_avg" not in state:
        state["exp_avg"] = xp.zeros_like(param)
        state["exp_avg_sq"] = xp.zeros_like(param)
        if amsgrad:
            state["max_exp_avg_sq"] = xp.zeros_like(param)
    exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
    step = _count_step(state)

    if maximize:
        grad = -grad
    if weight_decay != 0:
        if decoupled_weight_decay:
            param *= 1 - lr * weight_decay
        else:
            grad = grad + weight_decay * param

    exp_avg += (grad - exp_avg) * (1 - beta1)           # lerp(exp_avg, grad, 1 - beta1)
    exp_avg_sq *= beta2
    exp_avg_sq += (1 - beta2) * grad * grad

    bias_correction1 = 1 - beta1 ** step
    bias_correction2 = 1 - beta2 ** step
    step_size = lr / bias_correction1
    bias_correction2_sqrt = bias_correction2 ** 0.5

    if amsgrad:
        max_exp_avg_sq = state["max_exp_avg_sq"]
        max_exp_avg_sq[...] = xp.maximum(max_exp_avg_sq, exp_avg_sq)
        denom = xp.sqrt(max_exp_avg_sq) / bias_correction2_sqrt + eps
    else:
        denom = xp.sqrt(exp_avg_sq) / bias_correction2_sqrt + eps
    param -= (step_size * exp_avg) / denom


def adamw_step(param, grad, state, *, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
               amsgrad=False, maximize=False):
    """One ``torch.optim.AdamW`` step: Adam with decoupled weight decay."""
    adam_step(param, grad, state, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
              amsgrad=amsgrad, maximize=maximize, decoupled_weight_decay=True)


def rmsprop_step(param, grad, state, *, lr, alpha=0.99, eps=1e-8, weight_decay=0.0,
                 momentum=0.0, centered=False, maximize=False):
    """One ``torch.optim.RMSprop`` step for one parameter.  State: ``step``,
    ``square_avg``, and ``momentum_buffer`` (momentum > 0), ``grad_avg`` (centered)."""
    xp = _xp(param)
    if "square_avg" not in state:
        state["square_avg"] = xp.zeros_like(param)
        if momentum > 0:
            state["momentum_buffer"] = xp.zeros_like(param)
        if centered:
            state["grad_avg"] = xp.zeros_like(param)
    _count_step(state)
    grad = _direction(param, grad, weight_decay, maximize)

    square_avg = state["square_avg"]
    square_avg *= alpha
    square_avg += (1 - alpha) * grad * grad
    if centered:
        grad_avg = state["grad_avg"]
        grad_avg += (grad - grad_avg) * (1 - alpha)     # lerp(grad_avg, grad, 1 - alpha)
        avg = xp.sqrt(square_avg - grad_avg * grad_avg)
    else:
        avg = xp.sqrt(square_avg)
    avg = avg + eps

    if momentum > 0:
        buf = state["momentum_buffer"]
        buf *= momentum
        buf += grad / avg
        param -= lr * buf
    else:
        param -= (lr * grad) / avg


def adagrad_step(param, grad, state, *, lr, lr_decay=0.0, weight_decay=0.0,
                 initial_accumulator_value=0.0, eps=1e-10, maximize=False):
    """One ``torch.optim.Adagrad`` step for one parameter.  State: ``step``, ``sum``
    (which ``torch.optim.Adagrad`` creates in its constructor, filled with
    initial_accumulator_value)."""
    xp = _xp(param)
    if "sum" not in state:
        state["sum"] = xp.full_like(param, initial_accumulator_value)
    step = _count_step(state)
    grad = _direction(param, grad, weight_decay, maximize)

    clr = lr / (1 + (step - 1) * lr_decay)
    state_sum = state["sum"]
    state_sum += grad * grad
    std = xp.sqrt(state_sum) + eps
    param -= (clr * grad) / std


def adadelta_step(param, grad, state, *, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0.0,
                  maximize=False):
    """One ``torch.optim.Adadelta`` step for one parameter.  State: ``step``,
    ``square_avg``, ``acc_delta``."""
    xp = _xp(param)
    if "square_avg" not in state:
        state["square_avg"] = xp.zeros_like(param)
        state["acc_delta"] = xp.zeros_like(param)
    _count_step(state)
    grad = _direction(param, grad, weight_decay, maximize)

    square_avg, acc_delta = state["square_avg"], state["acc_delta"]
    square_avg *= rho
    square_avg += (1 - rho) * grad * grad
    std = xp.sqrt(square_avg + eps)
    delta = xp.sqrt(acc_delta + eps) / std * grad
    acc_delta *= rho
    acc_delta += (1 - rho) * delta * delta
    param -= lr * delta


#: the reference step of each optimizer class of ember.optim, by class name
STEPS = {"SGD": sgd_step, "Adam": adam_step, "AdamW": adamw_step, "RMSprop": rmsprop_step,
         "Adagrad": adagrad_step, "Adadelta": adadelta_step}
