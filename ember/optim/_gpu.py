"""The optimizers' steps for parameter groups on a GPU.

The GPU implementations of the group-step ops of ``ember/optim/_steps.py``
(``sgd_group``, ``adam_group``, ``rmsprop_group``, ``adagrad_group``,
``init_state_adagrad``): the same names, arguments and state keys as their CPU
kernels (``ember._kernels.cpu.optim``).  ``_steps`` registers them for its ops
(``gpu_op``) when the GPU backend starts, so an optimizer step reaches them through
the one GPU dispatch.  A group may hold parameters of several GPUs (model
parallelism): they launch on each parameter's own device.  This is the
optimizer's side of the GPU path: the checks of the arrays (the CPU
kernels' own, ``check_param_and_grad``), the state (created on the
parameter's GPU; state loaded from a host checkpoint moved there on first
use).  Then:

- SGD and Adam/AdamW call the backend's fused multi-tensor kernels
  (``ember.cuda.ops_optim``): one launch per (device, dtype; for SGD also
  whether the momentum buffers were just created), Adam's preceded by one that
  counts its steps.  Their state is float32 for 16-bit parameters, as on the
  CPU.  Adam's step count is a float32 0-d array on the parameter's GPU (as
  PyTorch's fused and capturable Adam keep it), counted and read by the
  kernels, so the bias corrections never need a host value.  Both take
  GradScaler's ``found_inf`` / ``grad_scale`` (arrays on a GPU, or None;
  PyTorch's protocol for fused optimizers): a nonzero flag skips the whole
  step on the device (parameters, state and step counts unchanged) with
  nothing read back.
- RMSprop and Adagrad have no fused GPU kernel: they run the reference
  updates of ``ember.optim.reference`` with ember ops (a few launches per
  parameter), state in the parameter's dtype.
"""
import numpy as np

import ember
from ember._core.dtypes import dtype_kind
from ember._kernels.cpu import optim as _cpu
from ember.cuda import ops_optim
from ember.optim import reference

__all__ = ["sgd_group", "adam_group", "rmsprop_group", "adagrad_group",
           "init_state_adagrad"]


def _check(p, g, opname, i):
    """The fused steps' checks of parameter i and its gradient (shared with the CPU)."""
    return _cpu.check_param_and_grad(p, g, opname, i, True)


def _fused_state_dtype(p):
    """The fused kernels' state dtype for p (AccT in optim.cu): float32 for 16-bit."""
    return np.dtype(np.float64) if p.dtype == np.float64 else np.dtype(np.float32)


class _Rows:
    """The parameters of a group that have a gradient, checked, as
    (index, param, contiguous param, contiguous grad)."""

    def __init__(self, params, opname):
        self.rows = []
        self.grad_copies = []       # (param, contiguous copy of its gradient)
        for i, p in enumerate(params):
            g = getattr(p, "grad", None)
            if g is None:
                continue
            g = _check(p, g, opname, i)
            if g.grad_fn is not None or g.requires_grad:
                g = g.detach()
            if not g.is_contiguous():
                g = ember.ascontiguousarray(g)
                self.grad_copies.append((p, g))
            pc = p if p.is_contiguous() else ember.ascontiguousarray(p.detach())
            self.rows.append((i, p, pc, g))

    def finish(self, grads_written=False):
        """Copy updated contiguous stand-ins back into non-contiguous parameters (and
        gradients, when the kernel wrote them: unscaled by grad_scale)."""
        with ember.no_grad():
            for _, p, pc, _ in self.rows:
                if pc is not p:
                    p[...] = pc
            if grads_written:
                for p, g in self.grad_copies:
                    p.grad[...] = g


def _buf(st, key, p, dtype, opname, i):
    """state[key] as a C-contiguous `dtype` array on p's GPU with p's element count:
    created (zeros) when missing, moved/cast when it came from a host checkpoint."""
    b = st.get(key)
    if b is None:
        b = st[key] = ember.zeros(tuple(p.shape), dtype=dtype, device=p.device)
        return b
    if not hasattr(b, "dtype") or not hasattr(b, "shape"):
        raise TypeError(f"{opname}: state[{key!r}] of parameter {i} is not an array (got "
                        f"{type(b).__name__})")
    if b.size != p.size:
        raise ValueError(f"{opname}: state[{key!r}] of parameter {i} has {b.size} elements, "
                         f"the parameter {p.size}; they must match")
    moved = b
    if moved.device != p.device:
        moved = moved.to(p.device)
    if moved.dtype != dtype:
        moved = moved.astype(dtype)
    if not moved.is_contiguous():
        moved = ember.ascontiguousarray(moved)
    if moved is not b:
        st[key] = moved
    return moved


def _step_counter(st):
    if len(st) == 0:
        st["step"] = _cpu.new_step()


def _device_step(st, p, opname, i):
    """state['step'] as a float32 one-element array on p's GPU (created 0 when missing;
    a host count, from a checkpoint or the CPU, copied over once: nothing is read back)."""
    s = st.get("step")
    if isinstance(s, ember.ndarray):
        if s.size != 1:
            raise TypeError(f"{opname}: state['step'] of parameter {i} must be a number or a "
                            f"one-element array, got an array of shape {tuple(s.shape)}")
        if s.device == p.device and s.dtype == np.float32:
            return s
        moved = s.reshape(())
        if moved.dtype != np.float32:
            moved = moved.astype(np.float32)
        moved = moved.to(p.device)
    else:
        try:
            value = 0.0 if s is None else float(s)
        except (TypeError, ValueError):
            raise TypeError(f"{opname}: state['step'] of parameter {i} must be a number or "
                            f"a one-element array, got {type(s).__name__}") from None
        moved = ember.full((), value, dtype=ember.float32, device=p.device)
    st["step"] = moved
    return moved


def _on_device(flag, like, cache):
    """GradScaler's found_inf / grad_scale as a float32 array on the device of array
    `like` (None stays None): a copy between devices, never through the host when it is
    on a GPU."""
    if flag is None:
        return None
    device = like.device
    got = cache.get(str(device))
    if got is None:
        got = flag
        if not isinstance(got, ember.ndarray):
            got = ember.asarray(got, dtype=ember.float32)
        if got.device != device:
            got = got.to(device)
        if got.dtype != np.float32:
            got = got.astype(np.float32)
        if got.size != 1:
            raise ValueError(f"found_inf / grad_scale must have one element, got shape "
                             f"{tuple(got.shape)}")
        cache[str(device)] = got
    return got


# ------------------------------------------------------------------ fused kernels

def sgd_group(params, state, lr, momentum, dampening, weight_decay, nesterov, maximize,
              opname="SGD", *, found_inf=None, grad_scale=None):
    """One SGD step over a group of GPU parameters (see ember.optim.SGD); `found_inf` /
    `grad_scale`: GradScaler's arrays (see the module docstring)."""
    rows = _Rows(params, opname)
    launches = {}           # (device, dtype, first step) -> (params, grads, momentum buffers)
    for i, p, pc, g in rows.rows:
        buf, first_step = None, False
        if momentum != 0:
            st = state[p]
            first_step = st.get("momentum_buffer") is None
            buf = _buf(st, "momentum_buffer", p, _fused_state_dtype(p), opname, i)
        lists = launches.setdefault((p.get_device(), str(p.dtype), first_step), ([], [], []))
        for lst, a in zip(lists, (pc, g, buf)):
            lst.append(a)
    flags, scales = {}, {}
    for (_, _, first_step), (ps, gs, bufs) in launches.items():
        ops_optim.sgd_step(ps, gs, bufs, lr=lr, momentum=momentum, dampening=dampening,
                           weight_decay=weight_decay, nesterov=nesterov, maximize=maximize,
                           first_step=first_step,
                           grad_scale=_on_device(grad_scale, ps[0], scales),
                           found_inf=_on_device(found_inf, ps[0], flags))
    rows.finish(grad_scale is not None)


def adam_group(params, state, lr, beta1, beta2, eps, weight_decay, amsgrad, maximize,
               decoupled, opname="Adam", *, found_inf=None, grad_scale=None):
    """One Adam/AdamW step over a group of GPU parameters (see ember.optim.Adam);
    `found_inf` / `grad_scale`: GradScaler's arrays (see the module docstring)."""
    rows = _Rows(params, opname)
    launches = {}           # (device, dtype) -> (params, grads, m, v, vmax, steps)
    for i, p, pc, g in rows.rows:
        st = state[p]
        dtype = _fused_state_dtype(p)
        step = _device_step(st, p, opname, i)
        exp_avg = _buf(st, "exp_avg", p, dtype, opname, i)
        exp_avg_sq = _buf(st, "exp_avg_sq", p, dtype, opname, i)
        max_exp_avg_sq = _buf(st, "max_exp_avg_sq", p, dtype, opname, i) if amsgrad else None
        lists = launches.setdefault((p.get_device(), str(p.dtype)), ([], [], [], [], [], []))
        for lst, a in zip(lists, (pc, g, exp_avg, exp_avg_sq, max_exp_avg_sq, step)):
            lst.append(a)
    # every check passed: one launch per (device, dtype), which counts the steps too
    flags, scales = {}, {}
    for lists in launches.values():
        ops_optim.adam_step(*lists, lr=lr, beta1=beta1, beta2=beta2, eps=eps,
                            weight_decay=weight_decay, amsgrad=amsgrad, maximize=maximize,
                            decoupled_weight_decay=decoupled,
                            grad_scale=_on_device(grad_scale, lists[0][0], scales),
                            found_inf=_on_device(found_inf, lists[0][0], flags))
    rows.finish(grad_scale is not None)


# ------------------------------------------------------------------ reference updates

def init_state_adagrad(p, st, initial_accumulator_value):
    """Adagrad's eager state for a GPU parameter: step 0 and ``sum`` filled with
    initial_accumulator_value (in the parameter's dtype, as PyTorch)."""
    if dtype_kind(p.dtype) != "f":
        raise TypeError(f"Adagrad: parameter has dtype {p.dtype}; only floating parameters "
                        f"are supported")
    st["step"] = _cpu.new_step()
    st["sum"] = ember.full(tuple(p.shape), float(initial_accumulator_value), dtype=p.dtype,
                           device=p.device)


def _reference_steps(update, rows, state, buffers, opname, options):
    """Check and place every parameter's state first, then run `update` (a reference
    step) on each, so that a bad array anywhere changes nothing."""
    work = []
    for i, p, pc, g in rows.rows:
        st = state[p]
        _step_counter(st)
        for key in buffers:
            _buf(st, key, p, p.dtype, opname, i)
        work.append((st, pc, g))
    with ember.no_grad():
        for st, pc, g in work:
            update(pc, g, st, **options)
    rows.finish()


def adagrad_group(params, state, lr, lr_decay, eps, weight_decay, initial_accumulator_value,
                  maximize, opname="Adagrad"):
    """One Adagrad step over a group of GPU parameters (see ember.optim.Adagrad)."""
    rows = _Rows(params, opname)
    for _, p, _, _ in rows.rows:
        if len(state[p]) == 0:
            init_state_adagrad(p, state[p], initial_accumulator_value)
    _reference_steps(reference.adagrad_step, rows, state, ("sum",), opname,
                     dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                          maximize=maximize))


def rmsprop_group(params, state, lr, alpha, eps, weight_decay, momentum, centered, maximize,
                  opname="RMSprop"):
    """One RMSprop step over a group of GPU parameters (see ember.optim.RMSprop)."""
    rows = _Rows(params, opname)
    buffers = ("square_avg",) + (("grad_avg",) if centered else ()) + \
        (("momentum_buffer",) if momentum > 0 else ())
    _reference_steps(reference.rmsprop_step, rows, state, buffers, opname,
                     dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay,
                          momentum=momentum, centered=centered, maximize=maximize))
