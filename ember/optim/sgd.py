"""SGD with momentum, dampening, Nesterov momentum and weight decay (PyTorch's numerics)."""
from ember.optim._options import check_options
from ember.optim import _steps
from ember.optim._amp_step import amp_inputs
from ember.optim.optimizer import Optimizer, _run_closure

__all__ = ["SGD"]


class SGD(Optimizer):
    r"""Stochastic gradient descent, optionally with momentum (``torch.optim.SGD``).

    For each parameter with a gradient ``g``::

        g = -g if maximize;  g = g + weight_decay * p
        b = g (first step) or momentum * b + (1 - dampening) * g
        g = g + momentum * b if nesterov else b        (when momentum != 0)
        p = p - lr * g

    Args:
        params: arrays or parameter groups to optimize.
        lr (float): learning rate (default 1e-3).
        momentum (float): momentum factor (default 0).
        dampening (float): dampening for momentum (default 0).
        weight_decay (float): L2 penalty (default 0).
        nesterov (bool): Nesterov momentum (default False).
        maximize (bool): maximize the objective instead of minimizing.
        foreach, fused: accepted for compatibility; ember always runs one
            fused kernel over all the parameters of a group.
        differentiable: not supported (must be False).

    The update of a whole group runs as one fused multi-tensor kernel;
    parameters whose ``.grad`` is None are skipped.

    GradScaler: SGD takes PyTorch's protocol for fused optimizers
    (``_step_supports_amp_scaling``), so ``GradScaler.step`` hands it the
    found-inf flag instead of reading it back: on a GPU the kernel skips the
    whole update on the device when the flag is set (nothing is read back; on
    the step that creates the momentum buffers the flag is read once, so a
    skipped first step leaves no state), on the CPU the flag is read.  A
    ``grad_scale`` set by the caller divides the gradients first, in place.

    >>> import ember
    >>> w = ember.asarray([1.0, -2.0], requires_grad=True)
    >>> opt = ember.optim.SGD([w], lr=0.1, momentum=0.9)
    >>> for _ in range(2):
    ...     opt.zero_grad(); (w * w).sum().backward(); opt.step()
    >>> [round(v, 4) for v in w.tolist()]
    [0.46, -0.92]
    """

    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0,
                 nesterov=False, *, maximize=False, foreach=None, differentiable=False,
                 fused=None):
        check_options(self, lr=lr, momentum=momentum, weight_decay=weight_decay,
                      nesterov=nesterov, dampening=dampening, differentiable=differentiable)
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening,
                        weight_decay=weight_decay, nesterov=nesterov, maximize=maximize,
                        foreach=foreach, differentiable=differentiable, fused=fused)
        super().__init__(params, defaults)

    _group_defaults_on_load = {"nesterov": False, "maximize": False, "foreach": None,
                               "differentiable": False, "fused": False}

    @property
    def _step_supports_amp_scaling(self):
        """GradScaler may hand this optimizer its found-inf flag (see the class
        docstring); not a subclass that replaces ``step``."""
        return type(self).step is SGD.step

    def _creates_state(self):
        """Whether this step would create a momentum buffer."""
        state = self.state
        for group in self.param_groups:
            if group["momentum"] != 0:
                for p in group["params"]:
                    if getattr(p, "grad", None) is not None:
                        st = state.get(p)
                        if st is None or st.get("momentum_buffer") is None:
                            return True
        return False

    def step(self, closure=None):
        """Perform one optimization step; returns the closure's loss if one is given."""
        loss = None
        if closure is not None:
            loss = _run_closure(closure)
        amp = amp_inputs(self, self._creates_state)
        for group in self.param_groups:
            params = group["params"]
            if type(params) is not list:
                params = list(params)
            kw = {} if amp is None else amp.group_kwargs(params)
            if kw is None:
                break           # GradScaler found an inf/NaN gradient: skipped
            _steps.sgd_group(params, self.state, group["lr"], group["momentum"],
                             group["dampening"], group["weight_decay"], group["nesterov"],
                             group["maximize"], "SGD", **kw)
        return loss
