"""Adam and AdamW (PyTorch's numerics, amsgrad, maximize, coupled/decoupled weight decay)."""
from ember.optim._options import check_options
from ember.optim import _steps
from ember.optim._amp_step import amp_inputs
from ember.optim.optimizer import Optimizer, _run_closure

__all__ = ["Adam", "AdamW"]


class Adam(Optimizer):
    r"""Adam (``torch.optim.Adam``).

    For each parameter with a gradient ``g`` (step ``t`` counted per parameter)::

        g = -g if maximize;  g = g + weight_decay * p   (or p *= 1 - lr*weight_decay
                                                         when decoupled_weight_decay)
        m = lerp(m, g, 1 - beta1);  v = beta2 * v + (1 - beta2) * g * g
        vmax = max(vmax, v) if amsgrad
        p = p - lr / (1 - beta1**t) * m / (sqrt(v or vmax) / sqrt(1 - beta2**t) + eps)

    Args:
        params: arrays or parameter groups to optimize.
        lr (float): learning rate (default 1e-3).
        betas (tuple): coefficients of the running averages (default (0.9, 0.999)).
        eps (float): added to the denominator (default 1e-8).
        weight_decay (float): L2 penalty (default 0).
        amsgrad (bool): use the AMSGrad variant (default False).
        maximize (bool): maximize the objective instead of minimizing.
        decoupled_weight_decay (bool): AdamW's decoupled weight decay.
        foreach, fused, capturable: accepted for compatibility (ember always
            runs one fused kernel per group, on the CPU and on a GPU).
        differentiable: not supported (must be False).

    State per parameter: ``step`` (a 0-d float array: on the host for a host
    parameter, a float32 array on the parameter's GPU for a GPU parameter, as
    PyTorch's fused Adam keeps it), ``exp_avg``, ``exp_avg_sq`` and, with
    amsgrad, ``max_exp_avg_sq``.

    GradScaler: Adam takes PyTorch's protocol for fused optimizers
    (``_step_supports_amp_scaling``), so ``GradScaler.step`` hands it the
    found-inf flag instead of reading it back: on a GPU the kernels skip the
    whole update on the device when the flag is set (parameters, state and step
    count unchanged, nothing read back; on the step that creates the state the
    flag is read once, so a skipped first step leaves no state), on the CPU the
    flag is read.  A ``grad_scale`` set by the caller divides the gradients
    first, in place.

    >>> import ember
    >>> w = ember.asarray([1.0, -1.0], requires_grad=True)
    >>> opt = ember.optim.Adam([w], lr=0.1)
    >>> (w * w).sum().backward(); opt.step()
    >>> [round(v, 4) for v in w.tolist()]
    [0.9, -0.9]
    """

    _decoupled = False
    _name = "Adam"

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 amsgrad=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False, fused=None, decoupled_weight_decay=False):
        check_options(self, lr=lr, eps=eps, betas=betas, weight_decay=weight_decay,
                      differentiable=differentiable)
        beta1, beta2 = betas
        defaults = dict(lr=lr, betas=(float(beta1), float(beta2)), eps=eps,
                        weight_decay=weight_decay, amsgrad=amsgrad, maximize=maximize,
                        foreach=foreach, capturable=capturable,
                        differentiable=differentiable, fused=fused,
                        decoupled_weight_decay=decoupled_weight_decay)
        super().__init__(params, defaults)

    _group_defaults_on_load = {"amsgrad": False, "maximize": False, "foreach": None,
                               "capturable": False, "differentiable": False, "fused": None}

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("decoupled_weight_decay", self._decoupled)

    @property
    def _step_supports_amp_scaling(self):
        """GradScaler may hand this optimizer its found-inf flag (see the class
        docstring); not a subclass that replaces ``step``."""
        return type(self).step is Adam.step

    def _creates_state(self):
        """Whether this step would create some parameter's state."""
        state = self.state
        for group in self.param_groups:
            amsgrad = group["amsgrad"]
            for p in group["params"]:
                if getattr(p, "grad", None) is not None:
                    st = state.get(p)
                    if st is None or st.get("exp_avg") is None or (
                            amsgrad and st.get("max_exp_avg_sq") is None):
                        return True
        return False

    def step(self, closure=None):
        """Perform one optimization step; returns the closure's loss if one is given."""
        loss = None
        if closure is not None:
            loss = _run_closure(closure)
        state = self.state
        name = self._name
        amp = amp_inputs(self, self._creates_state)
        for group in self.param_groups:
            params = group["params"]
            if type(params) is not list:
                params = list(params)
            kw = {} if amp is None else amp.group_kwargs(params)
            if kw is None:
                break           # GradScaler found an inf/NaN gradient: skipped
            beta1, beta2 = group["betas"]
            _steps.adam_group(params, state, group["lr"], beta1, beta2, group["eps"],
                              group["weight_decay"], group["amsgrad"], group["maximize"],
                              group["decoupled_weight_decay"], name, **kw)
        return loss


class AdamW(Adam):
    r"""AdamW: Adam with decoupled weight decay (``torch.optim.AdamW``).

    Same as ``Adam(..., decoupled_weight_decay=True)``: the parameters are
    first scaled by ``1 - lr * weight_decay``, and the decay never enters the
    running averages.  Default ``weight_decay=1e-2``.

    >>> import ember
    >>> w = ember.asarray([1.0, -1.0], requires_grad=True)
    >>> opt = ember.optim.AdamW([w], lr=0.1, weight_decay=0.5)
    >>> (w * w).sum().backward(); opt.step()
    >>> [round(v, 4) for v in w.tolist()]
    [0.85, -0.85]
    """

    _decoupled = True
    _name = "AdamW"

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, *, maximize=False, foreach=None, capturable=False,
                 differentiable=False, fused=None):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach,
                         maximize=maximize, capturable=capturable,
                         differentiable=differentiable, fused=fused,
                         decoupled_weight_decay=True)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            group["decoupled_weight_decay"] = True
