"""Optimizer steps for parameters on a GPU (the counterpart of
``ember._kernels.cpu.optim``: same functions, same arguments, same state keys).

SGD and Adam/AdamW run the fused multi-tensor kernels of ``kernels/optim.cu``:
one launch updates every parameter of a group.  The kernels take tables on the
device (arrays of tensor addresses, sizes, and a chunk table cutting every
tensor into ``_CHUNK``-element pieces); the host builds them in one NumPy
buffer per step and copies it over in one transfer.  Parameters whose
per-step scalars differ (an SGD momentum buffer created this step, an Adam
step count that differs because a parameter had no gradient on some steps)
go to separate launches, one per distinct value.

Adagrad and RMSprop are written with ember ops (a few launches per
parameter); they are rarely the bottleneck.

State: ``step`` stays a host 0-d float array (as PyTorch's non-capturable
optimizers keep it on the CPU), so the bias corrections are host arithmetic
and nothing is read back from the GPU.  Buffers live on the parameter's GPU;
for float16/bfloat16 parameters the fused kernels keep them in float32 (the
kernels accumulate in float32), the ember-op optimizers in the parameter's
dtype.  State loaded from a checkpoint onto the host is moved to the
parameter's GPU on first use.
"""
import math

import numpy as np
from ember._core.public import ops as _public_ops

__all__ = ["sgd_group", "adam_group", "adagrad_group", "rmsprop_group",
           "init_state_adagrad", "any_on_gpu", "unscale_grads"]

_CHUNK = 16384          # elements per chunk (one block of _THREADS works on it)
_THREADS = 256
_MAX_BLOCKS = 8192      # blocks stride over the chunks beyond this


def _R():
    from ember.cuda import _runtime
    return _runtime


def any_on_gpu(params):
    """Whether any parameter of the list lives on a GPU."""
    for p in params:
        if getattr(p, "is_cuda", False):
            return True
    return False


# ------------------------------------------------------------------ checks

def _dt(x):
    return str(x.dtype)


def _check_param(p, opname, i):
    from ember._core.array import ndarray
    if not isinstance(p, ndarray):
        raise TypeError(f"{opname}: parameter {i} is not an ember array (got "
                        f"{type(p).__name__})")
    if not getattr(p, "is_cuda", False):
        raise RuntimeError(f"{opname}: parameter {i} is on {p.device} but other parameters of "
                           f"its group are on a GPU; a group's parameters must share a device "
                           f"(move them with module.to(device) before making the optimizer)")
    if _R().suffix(p.dtype) is None:
        raise TypeError(f"{opname}: parameter {i} has dtype {_dt(p)}; only float16, "
                        f"bfloat16, float32 and float64 parameters are supported on the GPU")
    return p


def _check_grad(p, g, opname, i):
    from ember._core.array import ndarray
    if not isinstance(g, ndarray):
        raise TypeError(f"{opname}: the .grad of parameter {i} is not an ember array (got "
                        f"{type(g).__name__})")
    if g.device != p.device:
        raise RuntimeError(f"{opname}: parameter {i} is on {p.device} but its .grad is on "
                           f"{g.device}; they must be on the same device")
    if g.dtype != p.dtype:
        raise TypeError(f"{opname}: parameter {i} has dtype {_dt(p)} but its .grad has dtype "
                        f"{_dt(g)}; they must match")
    if tuple(g.shape) != tuple(p.shape):
        raise ValueError(f"{opname}: parameter {i} has shape {tuple(p.shape)} but its .grad "
                         f"has shape {tuple(g.shape)}; they must match")
    if g.grad_fn is not None or g.requires_grad:
        g = g.detach()
    if not g.is_contiguous():
        ember = _public_ops()
        g = ember.ascontiguousarray(g)
    return g


def _acc_dtype(p):
    """The dtype of the fused kernels' state for parameter p (AccT in optim.cu)."""
    return np.dtype(np.float64) if p.dtype == np.float64 else np.dtype(np.float32)


def _buf(st, key, p, dtype, opname, i, create=True):
    """state[key] as a C-contiguous `dtype` array on p's GPU with p's element count:
    created (zeros) when missing, moved/cast when it came from a host checkpoint."""
    R = _R()
    b = st.get(key)
    if b is None:
        if not create:
            return None
        b = R.zeros(tuple(p.shape), dtype, device=p.device.index)
        st[key] = b
        return b
    if not hasattr(b, "dtype") or not hasattr(b, "shape"):
        raise TypeError(f"{opname}: state[{key!r}] of parameter {i} is not an array (got "
                        f"{type(b).__name__})")
    if b.size != p.size:
        raise ValueError(f"{opname}: state[{key!r}] of parameter {i} has {b.size} elements, "
                         f"the parameter {p.size}; they must match")
    moved = b
    if not getattr(moved, "is_cuda", False) or moved.device != p.device:
        moved = moved.to(p.device)
    if moved.dtype != dtype:
        moved = moved.astype(dtype)
    if not moved.is_contiguous():
        ember = _public_ops()
        moved = ember.ascontiguousarray(moved)
    if moved is not b:
        st[key] = moved
    return moved


def _bump_step(st, opname, i):
    """state['step'] += 1 (a host 0-d float array, as PyTorch's); returns the new value."""
    from ember._core.array import ndarray
    from ember._kernels.cpu import optim as _cpu
    s = st.get("step")
    if isinstance(s, ndarray) and s.size == 1 and not getattr(s, "is_cuda", False):
        value = float(s.item()) + 1.0
        if s.dtype == np.float32:
            value = float(np.float32(value))
        s[...] = value
        return float(s.item())
    try:
        value = 0.0 if s is None else float(s.item() if isinstance(s, ndarray) else s)
    except (TypeError, ValueError):
        raise TypeError(f"{opname}: state['step'] of parameter {i} must be a number or a "
                        f"one-element array, got {type(s).__name__}") from None
    new = _cpu.new_step(value + 1.0)
    st["step"] = new
    return float(new.item())


class _Items:
    """The parameters of a group that have a gradient (contiguous views)."""

    def __init__(self, params, opname):
        self.rows = []              # (index, param, contiguous param, grad)
        for i, p in enumerate(params):
            g = getattr(p, "grad", None)
            if g is None:
                continue
            _check_param(p, opname, i)
            g = _check_grad(p, g, opname, i)
            pc = p if p.is_contiguous() else _contig_copy(p)
            self.rows.append((i, p, pc, g))

    def finish(self):
        """Copy updated contiguous stand-ins back into non-contiguous parameters."""
        ember = _public_ops()
        with ember.no_grad():
            for _, p, pc, _ in self.rows:
                if pc is not p:
                    p[...] = pc


def _contig_copy(p):
    ember = _public_ops()
    with ember.no_grad():
        return ember.ascontiguousarray(p.detach())


# ------------------------------------------------------------------ the fused launches

def _tables(lists, sizes):
    """One host int64 buffer: the address lists, the sizes, the chunk starts and the
    chunk -> tensor map (int32); returns (buffer, offsets in bytes, nchunks)."""
    n = len(sizes)
    sizes = np.asarray(sizes, dtype=np.int64)
    per = (sizes + _CHUNK - 1) // _CHUNK
    nchunks = int(per.sum())
    tensor_of = np.repeat(np.arange(n, dtype=np.int32), per)
    first = np.repeat(np.cumsum(per) - per, per)
    begin = (np.arange(nchunks, dtype=np.int64) - first) * _CHUNK
    nl = len(lists)
    n32 = (nchunks + 1) // 2                    # int32 entries packed two per int64 slot
    host = np.zeros(nl * n + n + nchunks + n32, dtype=np.int64)
    for k, addrs in enumerate(lists):
        host[k * n:(k + 1) * n] = np.asarray(addrs, dtype=np.uint64).view(np.int64)
    o_sizes = nl * n
    host[o_sizes:o_sizes + n] = sizes
    o_begin = o_sizes + n
    host[o_begin:o_begin + nchunks] = begin
    o_map = o_begin + nchunks
    host[o_map:].view(np.int32)[:nchunks] = tensor_of
    offsets = [k * n * 8 for k in range(nl)] + [o_sizes * 8, o_map * 8, o_begin * 8]
    return host, offsets, nchunks


def _addr(x):
    """The device address of x's first element."""
    return x.data_ptr()


def _bump(arrays):
    """Count an in-place write by a fused kernel (saved-array checks of autograd)."""
    for a in arrays:
        if a is not None:
            a._bump_version()


def _launch(kernel, device, lists, sizes, scalars):
    """Launch `kernel(lists..., sizes, chunk_tensor, chunk_begin, nchunks, chunk,
    *scalars)` on CUDA device `device` over the tensors described by `lists`
    (lists of addresses)."""
    R = _R()
    cp = R.cp()
    host, off, nchunks = _tables(lists, sizes)
    if nchunks == 0:
        return
    with cp.cuda.Device(device):
        dev = cp.asarray(host)          # one host-to-device copy on the current stream
        base = int(dev.data.ptr)
        ptrs = tuple(base + o for o in off)     # lists..., sizes, chunk_tensor, chunk_begin
        grid = min(nchunks, _MAX_BLOCKS)
        R.launch(kernel, grid, _THREADS, ptrs + (int(nchunks), int(_CHUNK)) + tuple(scalars))
    # `dev` may go back to CuPy's pool now: the pool reuses it in stream order


# ------------------------------------------------------------------ GradScaler

def unscale_grads(grads, inv_scale):
    """GradScaler's unscale of contiguous GPU gradients: g *= inv_scale in place, one
    launch per (device, dtype) (ember_multi_unscale); returns {device: int32 (1,) GPU
    array}, 1 where a result was inf or NaN.  Nothing is read back."""
    ember = _public_ops()
    R = _R()
    groups = {}
    for g in grads:
        groups.setdefault((g.get_device(), str(g.dtype)), []).append(g)
    found = {}
    for (dev, _), gs in groups.items():
        if dev not in found:
            found[dev] = R.zeros((1,), np.int32, dev)
        inv = inv_scale if inv_scale.get_device() == dev else inv_scale.to(gs[0].device)
        if inv.dtype != np.float32:
            inv = inv.astype(ember.float32)
        _launch(f"ember_multi_unscale_{R.suffix(gs[0].dtype)}", dev, ([_addr(g) for g in gs],),
                [g.size for g in gs], (inv, found[dev]))
        _bump(gs)
    return found


# ------------------------------------------------------------------ SGD

def sgd_group(params, state, lr, momentum, dampening, weight_decay, nesterov, maximize,
              opname="SGD"):
    """One SGD step over a group of GPU parameters (see ember.optim.SGD)."""
    items = _Items(params, opname)
    if not items.rows:
        return
    R = _R()
    launches = {}           # (dtype, first) -> rows
    for i, p, pc, g in items.rows:
        buf, buf_addr, first = None, 0, 0
        if momentum != 0:
            st = state[p]
            first = int(st.get("momentum_buffer") is None)
            buf = _buf(st, "momentum_buffer", p, _acc_dtype(p), opname, i)
            buf_addr = _addr(buf)
        launches.setdefault((p.get_device(), str(p.dtype), first), []).append(
            (pc, g, buf_addr, buf))
    for (dev, _, first), rows in launches.items():
        suffix = R.suffix(rows[0][0].dtype)
        lists = ([_addr(r[0]) for r in rows], [_addr(r[1]) for r in rows],
                 [r[2] for r in rows])
        sizes = [r[0].size for r in rows]
        _launch(f"ember_multi_sgd_{suffix}", dev, lists, sizes,
                (float(lr), float(momentum), float(dampening), float(weight_decay),
                 np.int32(bool(nesterov)), np.int32(bool(maximize)), np.int32(first)))
        _bump(r[0] for r in rows)
        _bump(r[3] for r in rows)
    items.finish()


# ------------------------------------------------------------------ Adam / AdamW

def adam_group(params, state, lr, beta1, beta2, eps, weight_decay, amsgrad, maximize,
               decoupled, opname="Adam"):
    """One Adam/AdamW step over a group of GPU parameters (see ember.optim.Adam)."""
    items = _Items(params, opname)
    if not items.rows:
        return
    R = _R()
    prepared = []
    for i, p, pc, g in items.rows:
        st = state[p]
        acc = _acc_dtype(p)
        if len(st) == 0:
            from ember._kernels.cpu import optim as _cpu
            st["step"] = _cpu.new_step()
        m = _buf(st, "exp_avg", p, acc, opname, i)
        v = _buf(st, "exp_avg_sq", p, acc, opname, i)
        vmax = _buf(st, "max_exp_avg_sq", p, acc, opname, i) if amsgrad else None
        prepared.append((st, i, pc, g, m, v, vmax))
    # every check passed: count the steps, then group by (dtype, step)
    launches = {}
    for st, i, pc, g, m, v, vmax in prepared:
        step = _bump_step(st, opname, i)
        key = (pc.get_device(), str(pc.dtype), step)
        launches.setdefault(key, []).append((pc, g, m, v, vmax))
    for (dev, _, step), rows in launches.items():
        suffix = R.suffix(rows[0][0].dtype)
        bc1 = 1.0 - beta1 ** step
        bc2_sqrt = math.sqrt(1.0 - beta2 ** step)
        lists = ([_addr(r[0]) for r in rows], [_addr(r[1]) for r in rows],
                 [_addr(r[2]) for r in rows], [_addr(r[3]) for r in rows],
                 [_addr(r[4]) if r[4] is not None else 0 for r in rows])
        sizes = [r[0].size for r in rows]
        _launch(f"ember_multi_adam_{suffix}", dev, lists, sizes,
                (float(lr), float(beta1), float(beta2), float(eps), float(weight_decay),
                 float(bc1), float(bc2_sqrt), np.int32(bool(decoupled)),
                 np.int32(bool(amsgrad)), np.int32(bool(maximize))))
        for r in rows:
            _bump((r[0], r[2], r[3], r[4]))
    items.finish()


# ------------------------------------------------------------------ Adagrad / RMSprop (ember ops)

def init_state_adagrad(p, st, initial_accumulator_value):
    """Adagrad's eager state for a GPU parameter: step 0 and ``sum`` filled with
    initial_accumulator_value (in the parameter's dtype, as PyTorch)."""
    from ember._kernels.cpu import optim as _cpu
    if _R().suffix(p.dtype) is None:
        raise TypeError(f"Adagrad: parameter has dtype {_dt(p)}; only floating parameters "
                        f"are supported")
    st["step"] = _cpu.new_step()
    s = _R().zeros(tuple(p.shape), p.dtype, device=p.device.index)
    if initial_accumulator_value != 0:
        s[...] = float(initial_accumulator_value)
    st["sum"] = s


def adagrad_group(params, state, lr, lr_decay, eps, weight_decay, initial_accumulator_value,
                  maximize, opname="Adagrad"):
    """One Adagrad step over a group of GPU parameters (see ember.optim.Adagrad)."""
    ember = _public_ops()
    items = _Items(params, opname)
    rows = []
    for i, p, pc, g in items.rows:
        st = state[p]
        if len(st) == 0:
            init_state_adagrad(p, st, initial_accumulator_value)
        rows.append((st, i, pc, g, _buf(st, "sum", p, p.dtype, opname, i)))
    with ember.no_grad():
        for st, i, pc, g, s in rows:
            step = _bump_step(st, opname, i)
            if maximize:
                g = -g
            if weight_decay != 0:
                g = g + weight_decay * pc
            clr = lr / (1.0 + (step - 1.0) * lr_decay)
            s[...] = s + g * g
            pc[...] = pc - clr * (g / (ember.sqrt(s) + eps))
    items.finish()


def rmsprop_group(params, state, lr, alpha, eps, weight_decay, momentum, centered, maximize,
                  opname="RMSprop"):
    """One RMSprop step over a group of GPU parameters (see ember.optim.RMSprop)."""
    ember = _public_ops()
    items = _Items(params, opname)
    rows = []
    for i, p, pc, g in items.rows:
        st = state[p]
        if len(st) == 0:
            from ember._kernels.cpu import optim as _cpu
            st["step"] = _cpu.new_step()
        sq = _buf(st, "square_avg", p, p.dtype, opname, i)
        ga = _buf(st, "grad_avg", p, p.dtype, opname, i) if centered else None
        buf = _buf(st, "momentum_buffer", p, p.dtype, opname, i) if momentum > 0 else None
        rows.append((st, i, pc, g, sq, ga, buf))
    with ember.no_grad():
        for st, i, pc, g, sq, ga, buf in rows:
            _bump_step(st, opname, i)
            if maximize:
                g = -g
            if weight_decay != 0:
                g = g + weight_decay * pc
            sq[...] = sq * alpha + (1.0 - alpha) * (g * g)
            if centered:
                ga[...] = ga + (1.0 - alpha) * (g - ga)         # lerp(ga, g, 1 - alpha)
                avg = ember.sqrt(sq - ga * ga) + eps
            else:
                avg = ember.sqrt(sq) + eps
            if buf is not None:
                buf[...] = buf * momentum + g / avg
                pc[...] = pc - lr * buf
            else:
                pc[...] = pc - lr * (g / avg)
    items.finish()
