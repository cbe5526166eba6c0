"""RMSprop (PyTorch's numerics: centered, momentum, weight decay, maximize)."""
from ember.optim._options import check_options
from ember.optim import _steps
from ember.optim.optimizer import Optimizer, _run_closure

__all__ = ["RMSprop"]


class RMSprop(Optimizer):
    r"""RMSprop (``torch.optim.RMSprop``).

    For each parameter with a gradient ``g``::

        g = -g if maximize;  g = g + weight_decay * p
        v = alpha * v + (1 - alpha) * g * g
        avg = sqrt(v - ga * ga) with ga = lerp(ga, g, 1 - alpha) if centered else sqrt(v)
        avg = avg + eps
        b = momentum * b + g / avg;  p = p - lr * b     (momentum > 0)
        p = p - lr * g / avg                            (otherwise)

    Args:
        params: arrays or parameter groups to optimize.
        lr (float): learning rate (default 1e-2).
        alpha (float): smoothing constant (default 0.99).
        eps (float): added to the denominator (default 1e-8).
        weight_decay (float): L2 penalty (default 0).
        momentum (float): momentum factor (default 0).
        centered (bool): normalize by the estimated variance of the gradient.
        maximize (bool): maximize the objective instead of minimizing.
        capturable, foreach: accepted for compatibility.
        differentiable: not supported (must be False).

    >>> import ember
    >>> w = ember.asarray([1.0, -1.0], requires_grad=True)
    >>> opt = ember.optim.RMSprop([w], lr=0.01)
    >>> (w * w).sum().backward(); opt.step()
    >>> [round(v, 4) for v in w.tolist()]
    [0.9, -0.9]
    """

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0,
                 centered=False, capturable=False, foreach=None, maximize=False,
                 differentiable=False):
        check_options(self, lr=lr, eps=eps, momentum=momentum, weight_decay=weight_decay,
                      alpha=alpha, differentiable=differentiable)
        defaults = dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps, centered=centered,
                        weight_decay=weight_decay, capturable=capturable, foreach=foreach,
                        maximize=maximize, differentiable=differentiable)
        super().__init__(params, defaults)

    _group_defaults_on_load = {"momentum": 0, "centered": False, "foreach": None,
                               "maximize": False, "differentiable": False, "capturable": False}

    def step(self, closure=None):
        """Perform one optimization step; returns the closure's loss if one is given."""
        loss = None
        if closure is not None:
            loss = _run_closure(closure)
        for group in self.param_groups:
            params = group["params"]
            if type(params) is not list:
                params = list(params)
            _steps.rmsprop_group(params, self.state, group["lr"], group["alpha"], group["eps"],
                                 group["weight_decay"], group["momentum"], group["centered"],
                                 group["maximize"], "RMSprop")
        return loss
