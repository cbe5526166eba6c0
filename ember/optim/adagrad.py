"""Adagrad (PyTorch's numerics: lr decay, weight decay, initial accumulator, maximize)."""
from ember.optim._options import check_options
from ember.optim import _steps
from ember.optim.optimizer import Optimizer, _run_closure

__all__ = ["Adagrad"]


class Adagrad(Optimizer):
    r"""Adagrad (``torch.optim.Adagrad``).

    For each parameter with a gradient ``g`` (step ``t`` counted per parameter)::

        g = -g if maximize;  g = g + weight_decay * p
        clr = lr / (1 + (t - 1) * lr_decay)
        s = s + g * g;  p = p - clr * g / (sqrt(s) + eps)

    Args:
        params: arrays or parameter groups to optimize.
        lr (float): learning rate (default 1e-2).
        lr_decay (float): learning-rate decay (default 0).
        weight_decay (float): L2 penalty (default 0).
        initial_accumulator_value (float): starting value of ``s`` (default 0).
        eps (float): added to the denominator (default 1e-10).
        maximize (bool): maximize the objective instead of minimizing.
        foreach, fused: accepted for compatibility.
        differentiable: not supported (must be False).

    As in PyTorch the state (``step``, ``sum``) of the parameters given to
    the constructor is created at once.

    >>> import ember
    >>> w = ember.asarray([1.0, -1.0], requires_grad=True)
    >>> opt = ember.optim.Adagrad([w], lr=0.1)
    >>> (w * w).sum().backward(); opt.step()
    >>> [round(v, 4) for v in w.tolist()]
    [0.9, -0.9]
    """

    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0,
                 eps=1e-10, foreach=None, *, maximize=False, differentiable=False, fused=None):
        check_options(self, lr=lr, lr_decay=lr_decay, weight_decay=weight_decay,
                      initial_accumulator_value=initial_accumulator_value, eps=eps,
                      differentiable=differentiable)
        defaults = dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                        initial_accumulator_value=initial_accumulator_value, foreach=foreach,
                        maximize=maximize, differentiable=differentiable, fused=fused)
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                _steps.init_state_adagrad(p, self.state[p], initial_accumulator_value)

    _group_defaults_on_load = {"foreach": None, "maximize": False, "differentiable": False,
                               "fused": None}

    def step(self, closure=None):
        """Perform one optimization step; returns the closure's loss if one is given."""
        loss = None
        if closure is not None:
            loss = _run_closure(closure)
        init = self.defaults["initial_accumulator_value"]
        for group in self.param_groups:
            params = group["params"]
            if type(params) is not list:
                params = list(params)
            _steps.adagrad_group(params, self.state, group["lr"], group["lr_decay"], group["eps"],
                                 group["weight_decay"], init, group["maximize"], "Adagrad")
        return loss
