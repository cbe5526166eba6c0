"""The checks of the optimizers' options (learning rate, betas, eps...), in one place.

Every optimizer's constructor calls ``check_options(self, **its options)``;
the messages carry PyTorch's text (``Invalid learning rate: -1``) after the
optimizer's name.  The kernels below (``ember/_kernels/cpu/optim.pyx``,
``ember/cuda/ops_optim.py``) trust these values and check only the arrays.
"""
import numpy as np

from ember._core.array import ndarray

__all__ = ["check_options"]


def _non_negative(what):
    def check(value):
        return None if 0.0 <= value else f"Invalid {what}: {value}"
    return check


def _betas(betas):
    try:
        beta1, beta2 = betas
    except (TypeError, ValueError):
        return f"betas must be a pair of numbers, got {betas!r}"
    for i, beta in enumerate((beta1, beta2)):
        if not 0.0 <= beta < 1.0:
            return f"Invalid beta parameter at index {i}: {beta}"
    return None


def _rho(rho):
    return None if 0.0 <= rho <= 1.0 else f"Invalid rho value: {rho}"


# option name -> check(value) -> None or the message (PyTorch's words)
_RULES = {
    "lr": _non_negative("learning rate"),
    "eps": _non_negative("epsilon value"),
    "betas": _betas,
    "weight_decay": _non_negative("weight_decay value"),
    "momentum": _non_negative("momentum value"),
    "alpha": _non_negative("alpha value"),
    "rho": _rho,
    "lr_decay": _non_negative("lr_decay value"),
    "initial_accumulator_value": _non_negative("initial_accumulator_value value"),
}


def _check_lr_type(name, lr):
    if isinstance(lr, ndarray) and lr.size != 1:
        raise ValueError(f"{name}: Tensor lr must be 1-element, got shape {lr.shape}")
    if isinstance(lr, bool) or not isinstance(lr, (int, float, ndarray, np.number)):
        raise TypeError(f"{name}: lr must be a number, got {type(lr).__name__}")


def check_options(opt, differentiable=False, nesterov=None, dampening=0, **options):
    """Raise a clear error for an option out of range.  ``opt`` is the optimizer
    (its class name goes in the message); the other keywords are its options.

    >>> import ember
    >>> w = ember.zeros(2, requires_grad=True)
    >>> ember.optim.Adam([w], betas=(0.9, 1.0))
    Traceback (most recent call last):
    ...
    ValueError: Adam: Invalid beta parameter at index 1: 1.0
    """
    name = type(opt).__name__
    if differentiable:
        raise NotImplementedError(f"{name}: differentiable=True (autograd through the "
                                  "optimizer step) is not supported by ember")
    if "lr" in options:
        _check_lr_type(name, options["lr"])
    for key, value in options.items():
        message = _RULES[key](value)
        if message is not None:
            raise ValueError(f"{name}: {message}")
    if nesterov and (options.get("momentum", 0) <= 0 or dampening != 0):
        raise ValueError(f"{name}: Nesterov momentum requires a momentum and zero dampening "
                         f"(got momentum={options.get('momentum', 0)}, "
                         f"dampening={dampening})")
