"""GradScaler: dynamic loss scaling for mixed-precision training (PyTorch's
``torch.amp.GradScaler`` semantics and state layout).

Small float16 gradients underflow to zero.  Multiplying the loss by a large
scale before ``backward()`` keeps them representable; ``unscale_`` divides the
gradients back (and notes whether any is inf/NaN), ``step`` skips the
optimizer step when one is, and ``update`` shrinks the scale after a skipped
step (``backoff_factor``) or grows it after ``growth_interval`` clean steps
(``growth_factor``).

The scale and the inf flag live on the device of the arrays (a 0-d float32
array), so scaling and unscaling queue on the GPU without waiting for it.  With
an ordinary optimizer ``step`` reads the flag back (one synchronisation per step,
as PyTorch's GradScaler does).  An optimizer that declares
``_step_supports_amp_scaling = True`` (PyTorch's protocol for its fused
optimizers) skips its own update on the device when ``optimizer.found_inf`` is
set: ``step`` then hands it the flag (and ``optimizer.grad_scale = None``: the
gradients are already unscaled) and reads nothing back, and ``update`` computes
the next scale and growth tracker on the device too; ``get_scale()`` reads the
scale back only when asked.  ember's SGD, Adam and AdamW take the protocol (their
fused GPU kernels skip on the device; Adam's step count lives there), so a GPU
training step with them reads nothing back; on the CPU they read the flag, which
costs no wait, with the same results.
"""
import enum
import warnings

import numpy as np

__all__ = ["GradScaler"]


class _Stage(enum.Enum):
    READY = 0
    UNSCALED = 1
    STEPPED = 2


def _new_state():
    # found_host: found_inf as read by step() (update() reuses it instead of waiting again)
    return {"stage": _Stage.READY, "found_inf": None, "found_host": None}


class GradScaler:
    """Dynamic loss scaling.

    Args:
        device: ``'cuda'`` (default) or ``'cpu'``: where the scale lives.
        init_scale: the first scale (default 2**16).
        growth_factor: scale multiplier after ``growth_interval`` steps without
            inf/NaN gradients (default 2.0).
        backoff_factor: scale multiplier after a step with inf/NaN gradients
            (default 0.5).
        growth_interval: clean steps between growths (default 2000).
        enabled: False makes every method a pass-through (``scale`` returns its
            argument, ``step`` just calls ``optimizer.step()``).

    A 'cuda' scaler on a machine without a usable GPU warns and disables itself,
    as PyTorch's.

    With ember's SGD, Adam or AdamW, ``step`` hands the optimizer the found-inf
    flag (``optimizer.found_inf``) instead of reading it back, and their fused
    kernels skip the update on the GPU when it is set: a GPU step waits for
    nothing.  Other optimizers are stepped only after the flag is read.

    >>> import ember, ember.amp
    >>> w = ember.asarray([1.0, 2.0], requires_grad=True)
    >>> opt = ember.optim.SGD([w], lr=0.1)
    >>> scaler = ember.amp.GradScaler("cpu", init_scale=1024.0)
    >>> loss = (w * w).sum()
    >>> scaler.scale(loss).backward()
    >>> scaler.step(opt); scaler.update()
    >>> w.tolist(), scaler.get_scale()
    ([0.800000011920929, 1.600000023841858], 1024.0)
    """

    _tracker_dev = None         # (a class default too: scalers pickled before it existed)

    def __init__(self, device="cuda", init_scale=2.0 ** 16, growth_factor=2.0,
                 backoff_factor=0.5, growth_interval=2000, enabled=True):
        dev = str(device).split(":", 1)[0]
        if dev not in ("cuda", "cpu"):
            raise ValueError(f"GradScaler: device must be 'cuda' or 'cpu', got {device!r}")
        self._device = str(device)
        if enabled and dev == "cuda":
            import ember.cuda
            avail = getattr(ember.cuda, "is_available", None)
            if avail is None or not avail():
                warnings.warn("GradScaler is enabled, but CUDA is not available; disabling "
                              "(use GradScaler('cpu') for CPU arrays)", stacklevel=2)
                enabled = False
        self._enabled = bool(enabled)
        if self._enabled:
            if not growth_factor > 1.0:
                raise ValueError("GradScaler: the growth factor must be > 1.0, got "
                                 f"{growth_factor}")
            if not backoff_factor < 1.0:
                raise ValueError("GradScaler: the backoff factor must be < 1.0, got "
                                 f"{backoff_factor}")
            if not (isinstance(growth_interval, (int, np.integer))
                    and not isinstance(growth_interval, bool) and growth_interval > 0):
                raise ValueError("GradScaler: growth_interval must be a positive int, got "
                                 f"{growth_interval!r}")
        self._init_scale = float(init_scale)
        self._growth_factor = float(growth_factor)
        self._backoff_factor = float(backoff_factor)
        self._growth_interval = int(growth_interval)
        self._init_growth_tracker = 0
        self._scale = None              # 0-d float32 array on the device (lazy)
        self._scale_host = None         # its value as a float: reading it needs no sync
        self._growth_tracker = 0        # consecutive clean steps (host int: no sync needed)
        self._tracker_dev = None        # the tracker, on the device after a device update()
        self._per_optimizer_states = {}

    # ------------------------------------------------------------ helpers
    def _array_device(self, x):
        return getattr(x, "device", None)

    def _lazy_init_scale(self, like):
        import ember
        dev = self._array_device(like) if getattr(like, "is_cuda", False) else None
        self._scale = ember.full((), self._init_scale, dtype=ember.float32, device=dev)
        self._scale_host = float(np.float32(self._init_scale))

    def _check_scale(self, funcname):
        if self._scale is None:
            raise RuntimeError(f"GradScaler.{funcname}: the scale has not been "
                               f"initialized; call scale() on the loss first")

    def _state(self, optimizer):
        st = self._per_optimizer_states.get(id(optimizer))
        if st is None:
            st = self._per_optimizer_states[id(optimizer)] = _new_state()
        return st

    # ------------------------------------------------------------ the API
    def scale(self, outputs):
        """``outputs * scale`` (an array, or a list/tuple/iterable of arrays); returns
        `outputs` unchanged when disabled."""
        if not self._enabled:
            return outputs
        from ember._core.array import ndarray
        if isinstance(outputs, ndarray):
            if self._scale is None:
                self._lazy_init_scale(outputs)
            return outputs * self._on(outputs)

        def apply(v):
            if isinstance(v, ndarray):
                if self._scale is None:
                    self._lazy_init_scale(v)
                return v * self._on(v)
            if isinstance(v, (list, tuple)):
                return type(v)(apply(e) for e in v)
            if hasattr(v, "__iter__") and not isinstance(v, (str, bytes, dict)):
                return map(apply, v)
            raise ValueError("GradScaler.scale: outputs must be an array or an iterable "
                             f"of arrays, got {type(v).__name__}")
        return apply(outputs)

    def _on(self, x):
        """The scale on x's device (the scale lives where the first output was)."""
        s = self._scale
        if getattr(x, "is_cuda", False) != getattr(s, "is_cuda", False) or (
                getattr(x, "is_cuda", False) and x.device != s.device):
            return s.to(x.device)
        return s

    def _unscale_grads(self, optimizer, inv_scale, allow_fp16):
        """Multiply every gradient by inv_scale in place; returns the found-inf flag
        (a 0-d float32 array, 1.0 when any gradient has an inf or NaN)."""
        import ember
        host, gpu = [], []
        for group in optimizer.param_groups:
            for p in group["params"]:
                g = getattr(p, "grad", None)
                if g is None:
                    continue
                if not allow_fp16 and g.dtype == np.float16:
                    raise ValueError("Attempting to unscale FP16 gradients.")
                if g.grad_fn is not None or g.requires_grad:
                    g = g.detach()
                    p.grad = g
                (gpu if getattr(g, "is_cuda", False) else host).append(g)
        flags = []
        with ember.no_grad():
            for g in host:
                # the product in the gradient's own dtype, written in place
                g[...] = g * inv_scale.astype(g.dtype)
                flags.append(ember.logical_not(ember.isfinite(g).all()))
            if gpu:
                flags.extend(_unscale_on_gpu(gpu, inv_scale))
        if not flags:
            return ember.zeros((), dtype=ember.float32)
        found = flags[0].astype(ember.float32)
        for f in flags[1:]:
            found = ember.maximum(found, f.astype(ember.float32))
        return found

    def unscale_(self, optimizer):
        """Divide `optimizer`'s gradients by the scale, in place (call it before
        gradient clipping).  At most once per optimizer between ``update()`` calls."""
        if not self._enabled:
            return
        self._check_scale("unscale_")
        st = self._state(optimizer)
        if st["stage"] is _Stage.UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since "
                               "the last update().")
        if st["stage"] is _Stage.STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        import ember
        # the reciprocal in double precision, then float32 (as PyTorch)
        inv = (1.0 / self._scale.astype(ember.float64)).astype(ember.float32)
        st["found_inf"] = self._unscale_grads(optimizer, inv, allow_fp16=False)
        st["stage"] = _Stage.UNSCALED

    def _scale_value(self):
        if self._scale_host is None:        # updated on the device: read it (user asked)
            self._scale_host = float(self._scale.item())
        return self._scale_host

    def step(self, optimizer, *args, **kwargs):
        """Unscale the gradients (unless ``unscale_`` already did) and call
        ``optimizer.step(*args, **kwargs)`` unless a gradient is inf/NaN.
        Returns what ``optimizer.step`` returned (None when skipped)."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is "
                               "enabled.")
        self._check_scale("step")
        st = self._state(optimizer)
        if st["stage"] is _Stage.STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if st["stage"] is _Stage.READY:
            self.unscale_(optimizer)
        if st["found_inf"] is None:
            raise RuntimeError("No inf checks were recorded for this optimizer.")
        retval = None
        if getattr(optimizer, "_step_supports_amp_scaling", False):
            # the optimizer skips its update on the device when the flag is set: no wait
            optimizer.grad_scale = None         # (the gradients are unscaled already)
            optimizer.found_inf = st["found_inf"]
            try:
                retval = optimizer.step(*args, **kwargs)
            finally:
                del optimizer.grad_scale, optimizer.found_inf
            st["found_host"] = None
        else:
            st["found_host"] = float(st["found_inf"].item())    # the one wait of a step
            if not st["found_host"]:
                retval = optimizer.step(*args, **kwargs)
        st["stage"] = _Stage.STEPPED
        return retval

    def update(self, new_scale=None):
        """Set the scale for the next iteration: `new_scale` (a float or a one-element
        array) if given; otherwise backoff after a step with inf/NaN gradients, growth
        after ``growth_interval`` clean steps in a row."""
        if not self._enabled:
            return
        self._check_scale("update")
        if new_scale is not None:
            if isinstance(new_scale, (int, float, np.floating, np.integer)):
                value = float(new_scale)
            else:
                if getattr(new_scale, "size", None) != 1:
                    raise ValueError("GradScaler.update: new_scale should be a float or a "
                                     "1-element array")
                value = float(new_scale.reshape(()).item())
            self._fill_scale(value)
        else:
            states = [st for st in self._per_optimizer_states.values()
                      if st["found_inf"] is not None]
            if not states:
                raise RuntimeError("No inf checks were recorded prior to update.")
            if self._scale.is_cuda and any(st["stage"] is _Stage.STEPPED and
                                           st["found_host"] is None for st in states):
                self._update_on_device(states)      # step() read nothing back: neither here
                self._per_optimizer_states = {}
                return
            # step() has read its flags already: waiting again here would stall the host
            # until the optimizer's kernels finish
            found = any(st["found_host"] if st["found_host"] is not None
                        else float(st["found_inf"].item()) for st in states)
            scale = self._scale_value()
            self._tracker_to_host()
            # float32 scale times the double factor, rounded to float32 (PyTorch's kernel)
            if found:
                scale = float(np.float32(scale * self._backoff_factor))
                self._growth_tracker = 0
            else:
                successful = self._growth_tracker + 1
                if successful == self._growth_interval:
                    grown = float(np.float32(scale * self._growth_factor))
                    if np.isfinite(grown):
                        scale = grown
                    self._growth_tracker = 0
                else:
                    self._growth_tracker = successful
            self._fill_scale(scale)
        self._per_optimizer_states = {}

    def _update_on_device(self, states):
        """update() without a read-back: the found-inf flags, the scale and the growth
        tracker stay on the device, updated in place by one kernel (PyTorch's
        _amp_update_scale_; ember.cuda.ops_optim.amp_update_scale)."""
        import ember
        from ember.cuda.ops_optim import amp_update_scale
        dev = self._scale.device
        with ember.no_grad():
            flags = []
            for st in states:
                f = st["found_inf"]
                if f.device != dev:
                    f = f.to(dev)
                flags.append(f if f.dtype == np.float32 else f.astype(ember.float32))
            found = flags[0]
            for f in flags[1:]:
                found = ember.maximum(found, f)
            tracker = self._tracker_on_device(dev)
            amp_update_scale(self._scale, tracker, found, growth_factor=self._growth_factor,
                             backoff_factor=self._backoff_factor,
                             growth_interval=self._growth_interval)
            self._tracker_dev = tracker
        self._scale_host = None             # read back by get_scale() only when asked

    def _tracker_on_device(self, dev):
        import ember
        t = self._tracker_dev
        if t is None:
            t = ember.full((), self._growth_tracker, dtype=ember.int32, device=dev)
        return t

    def _fill_scale(self, value):
        import ember
        dev = self._scale.device if getattr(self._scale, "is_cuda", False) else None
        self._scale = ember.full((), value, dtype=ember.float32, device=dev)  # no host copy
        self._scale_host = float(np.float32(value))

    def _tracker_to_host(self):
        if self._tracker_dev is not None:
            self._growth_tracker = int(self._tracker_dev.item())
            self._tracker_dev = None

    # ------------------------------------------------------------ accessors
    def get_scale(self):
        """The current scale as a Python float (1.0 when disabled)."""
        if not self._enabled:
            return 1.0
        return self._init_scale if self._scale is None else self._scale_value()

    def get_growth_factor(self):
        return self._growth_factor

    def set_growth_factor(self, new_factor):
        self._growth_factor = float(new_factor)

    def get_backoff_factor(self):
        return self._backoff_factor

    def set_backoff_factor(self, new_factor):
        self._backoff_factor = float(new_factor)

    def get_growth_interval(self):
        return self._growth_interval

    def set_growth_interval(self, new_interval):
        self._growth_interval = int(new_interval)

    def _get_growth_tracker(self):
        if not self._enabled:
            return 0
        if self._tracker_dev is not None:
            return int(self._tracker_dev.item())
        return self._growth_tracker

    def is_enabled(self):
        """Whether the scaler is active."""
        return self._enabled

    def state_dict(self):
        """``{"scale", "growth_factor", "backoff_factor", "growth_interval",
        "_growth_tracker"}`` (PyTorch's keys); empty when disabled."""
        if not self._enabled:
            return {}
        return {"scale": self.get_scale(), "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor,
                "growth_interval": self._growth_interval,
                "_growth_tracker": self._get_growth_tracker()}

    def load_state_dict(self, state_dict):
        """Restore a ``state_dict()`` (PyTorch's layout)."""
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was saved "
                               "from a disabled instance of GradScaler.")
        self._init_scale = float(state_dict["scale"])
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._growth_tracker = int(state_dict["_growth_tracker"])
        self._tracker_dev = None
        if self._scale is not None:
            self._fill_scale(self._init_scale)

    def __repr__(self):
        return (f"GradScaler(device={self._device!r}, scale={self.get_scale()}, "
                f"enabled={self._enabled})")


def _unscale_on_gpu(grads, inv_scale):
    """GPU gradients times inv_scale in place, with no host round trip, by one fused
    launch per (device, dtype) (ember.cuda.ops_optim.unscale_grads; a non-contiguous
    gradient is unscaled in a contiguous copy written back); returns one 0-d "found
    inf" flag (an ember GPU bool array) per device."""
    import ember
    from ember.cuda.ops_optim import unscale_grads
    work = [g if g.is_contiguous() else ember.ascontiguousarray(g) for g in grads]
    found = unscale_grads(work, inv_scale)
    with ember.no_grad():
        for g, w in zip(grads, work):
            if w is not g:
                g[...] = w
    return [f.reshape(()) != 0 for f in found.values()]
