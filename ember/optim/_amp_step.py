"""GradScaler's protocol for optimizers that skip their own step (PyTorch's
``_step_supports_amp_scaling``), on the optimizers' side.

``GradScaler.step`` sets ``optimizer.found_inf`` (a one-element float32 array, nonzero
when a gradient was inf/NaN) and ``optimizer.grad_scale`` (None, or a one-element
array the gradients must be divided by) around ``optimizer.step()`` instead of reading
the flag itself.  :func:`amp_inputs` collects them for one ``step()`` call, and
:meth:`AmpInputs.group_kwargs` says how one parameter group takes them:

- a group on a GPU passes both to its fused kernels (``ember/optim/_gpu.py``), which
  skip the whole update on the device: nothing is read back;
- a group on the host reads the flag (host memory: no wait) and, unless it is set,
  divides its gradients by ``grad_scale`` in place before its step.

On a step that would create optimizer state (the first step, a new parameter) a
device flag is read once, so that a skipped step leaves no state behind, as PyTorch's
optimizers without fused kernels behave under GradScaler.

>>> import ember
>>> w = ember.asarray([1.0, 2.0], requires_grad=True)
>>> opt = ember.optim.SGD([w], lr=0.5)
>>> w.grad = ember.asarray([4.0, 8.0])
>>> opt.grad_scale, opt.found_inf = ember.asarray(4.0), ember.asarray(0.0)
>>> opt.step(); w.tolist(), w.grad.tolist()
([0.5, 1.0], [1.0, 2.0])
>>> opt.found_inf = ember.asarray(1.0)      # an inf gradient: the step is skipped
>>> opt.step(); w.tolist()
[0.5, 1.0]
"""
import ember

__all__ = ["AmpInputs", "amp_inputs"]


def _on_gpu(a):
    return bool(getattr(a, "is_cuda", False))


def _flag_set(found):
    """Read a found-inf flag (a number or a one-element array)."""
    if isinstance(found, ember.ndarray):
        if found.size != 1:
            raise ValueError(f"optimizer.found_inf must have one element, got shape "
                             f"{tuple(found.shape)}")
        return float(found.reshape(()).item()) != 0.0
    return float(found) != 0.0


class AmpInputs:
    """``found_inf`` / ``grad_scale`` of one ``step()`` call; ``skip``: the flag was read
    and is set (the step does nothing)."""

    __slots__ = ("found_inf", "grad_scale", "skip")

    def __init__(self, found_inf, grad_scale):
        self.found_inf = found_inf
        self.grad_scale = grad_scale
        self.skip = False

    def read_flag(self):
        """Read the flag now (host memory, or a device flag when it must be read)."""
        if self.found_inf is not None:
            self.skip = _flag_set(self.found_inf)
            self.found_inf = None
        return self.skip

    def group_kwargs(self, params):
        """The keywords of one group's step op: ``found_inf`` / ``grad_scale`` for a
        group on a GPU; {} for a host group (after dividing its gradients by
        ``grad_scale`` in place); None when the step is skipped."""
        if self.skip:
            return None
        if any(_on_gpu(p) for p in params):
            return {"found_inf": self.found_inf, "grad_scale": self.grad_scale}
        if self.read_flag():        # a device flag with host parameters: read it
            return None
        if self.grad_scale is not None:
            _unscale_host(params, self.grad_scale)
        return {}


def _unscale_host(params, grad_scale):
    """g /= grad_scale in place for the host gradients of `params` (the quotient in
    float32 at least, rounded to the gradient's dtype, as the GPU kernels)."""
    scale = grad_scale
    if not isinstance(scale, ember.ndarray):
        scale = ember.asarray(scale, dtype=ember.float32)
    if _on_gpu(scale):
        scale = scale.cpu()
    scale = scale.reshape(())
    if scale.dtype != ember.float32 and scale.dtype != ember.float64:
        scale = scale.astype(ember.float32)
    with ember.no_grad():
        for p in params:
            g = getattr(p, "grad", None)
            if g is not None:
                g[...] = g / scale


def amp_inputs(optimizer, creates_state):
    """GradScaler's inputs to this ``optimizer.step()`` call (None when it set none).
    A flag in host memory is read at once; so is a device flag when
    ``creates_state()`` says this step would create optimizer state."""
    found = getattr(optimizer, "found_inf", None)
    scale = getattr(optimizer, "grad_scale", None)
    if found is None and scale is None:
        return None
    amp = AmpInputs(found, scale)
    if found is not None and (not _on_gpu(found) or creates_state()):
        amp.read_flag()
    return amp
