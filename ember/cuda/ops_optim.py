"""Fused multi-tensor optimizer kernels on the GPU (``kernels/optim.cu``).

A backend module: it launches kernels over lists of arrays and knows nothing
of optimizers.  The optimizers (``ember.optim``, the layer above; their GPU
side is ``ember/optim/_gpu.py``) check the arrays, create and move the
state, then call these functions with arrays that are contiguous, on one GPU and
of one dtype (Adam's step counts are float32 arrays on the GPU, counted by the
kernels); state buffers are float32 for 16-bit parameters (the kernels
compute in float32), else of the parameter's dtype.

One launch updates every array of a list: the kernels take tables on the
device (arrays of tensor addresses, sizes, and a chunk table cutting every
tensor into ``_CHUNK``-element pieces); the host builds them in one NumPy
buffer and copies it over in one transfer.  Nothing is read back.  The
options have ``torch.optim``'s names; ``ember/optim/reference.py`` is the
plain specification the kernels are tested against.
"""
import numpy as np

__all__ = ["sgd_step", "adam_step", "unscale_grads", "amp_update_scale"]

_CHUNK = 16384          # elements per chunk (one block of _THREADS works on it)
_THREADS = 256
_MAX_BLOCKS = 8192      # blocks stride over the chunks beyond this


def _R():
    from ember.cuda import _runtime
    return _runtime


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


def _addrs(arrays):
    """The device addresses of the arrays' first elements (0 for None)."""
    return [0 if a is None else a.data_ptr() for a in arrays]


def _bump(*lists):
    """Count the in-place writes of a fused kernel (autograd's saved-array checks)."""
    for arrays in lists:
        for a in arrays:
            if a is not None:
                a._bump_version()


def _launch(kernel, device, lists, sizes, scalars, before=None):
    """Launch `kernel(lists..., sizes, chunk_tensor, chunk_begin, nchunks, chunk,
    *scalars)` on CUDA device `device` over the tensors described by `lists`
    (lists of addresses).  ``before(table_pointers)``, if given, launches first on the
    same stream with the device address tables (even when every tensor is empty)."""
    R = _R()
    cp = R.cp()
    host, off, nchunks = _tables(lists, sizes)
    if nchunks == 0 and before is None:
        return
    with cp.cuda.Device(device):
        dev = cp.asarray(host)          # one host-to-device copy on the current stream
        base = int(dev.data.ptr)
        ptrs = tuple(base + o for o in off)     # lists..., sizes, chunk_tensor, chunk_begin
        if before is not None:
            before(ptrs)
        if nchunks:
            grid = min(nchunks, _MAX_BLOCKS)
            R.launch(kernel, grid, _THREADS,
                     ptrs + (int(nchunks), int(_CHUNK)) + tuple(scalars))
    # `dev` may go back to CuPy's pool now: the pool reuses it in stream order


def _kernel(family, params):
    return f"ember_multi_{family}_{_R().suffix(params[0].dtype)}"


def sgd_step(params, grads, momentum_buffers, *, lr, momentum, dampening, weight_decay,
             nesterov, maximize, first_step, grad_scale=None, found_inf=None):
    """One ``torch.optim.SGD`` step over lists of arrays of one GPU and dtype
    (``ember_multi_sgd``).  ``momentum_buffers`` holds None where momentum is 0;
    ``first_step``: the buffers were just created (``momentum_buffer = grad``).
    ``found_inf``: a float32 one-element array on this GPU (or None); nonzero skips the
    whole step on the device.  ``grad_scale``: likewise (or None); the gradients are
    divided by it first, in place (torch's ``_fused_sgd_``)."""
    if not params:
        return
    _launch(_kernel("sgd", params), params[0].get_device(),
            (_addrs(params), _addrs(grads), _addrs(momentum_buffers)),
            [p.size for p in params],
            (float(lr), float(momentum), float(dampening), float(weight_decay),
             np.int32(bool(nesterov)), np.int32(bool(maximize)), np.int32(bool(first_step)),
             grad_scale, found_inf))
    _bump(params, momentum_buffers, grads if grad_scale is not None else ())


def adam_step(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, *, lr, beta1,
              beta2, eps, weight_decay, amsgrad, maximize, decoupled_weight_decay,
              grad_scale=None, found_inf=None):
    """One ``torch.optim.Adam`` / ``AdamW`` step over lists of arrays of one GPU and
    dtype (``ember_multi_step_bump`` then ``ember_multi_adam``).  ``steps``: each
    parameter's step count, a float32 one-element array on this GPU, incremented here on
    the device; the kernel computes the bias corrections from it, so nothing goes
    through the host.  ``max_exp_avg_sqs`` holds None without amsgrad.  ``found_inf`` /
    ``grad_scale``: as for :func:`sgd_step` (a skipped step leaves the step counts too)."""
    if not params:
        return
    n = len(params)

    def bump(ptrs):
        _R().launch("ember_multi_step_bump", min((n + _THREADS - 1) // _THREADS, _MAX_BLOCKS),
                    _THREADS, (ptrs[5], int(n), found_inf))
    _launch(_kernel("adam", params), params[0].get_device(),
            (_addrs(params), _addrs(grads), _addrs(exp_avgs), _addrs(exp_avg_sqs),
             _addrs(max_exp_avg_sqs), _addrs(steps)),
            [p.size for p in params],
            (float(lr), float(beta1), float(beta2), float(eps), float(weight_decay),
             np.int32(bool(decoupled_weight_decay)), np.int32(bool(amsgrad)),
             np.int32(bool(maximize)), grad_scale, found_inf), before=bump)
    _bump(params, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps,
          grads if grad_scale is not None else ())


def unscale_grads(grads, inv_scale):
    """GradScaler's unscale of contiguous GPU gradients: g *= inv_scale in place, one
    launch per (device, dtype) (ember_multi_unscale); returns {device: int32 (1,) GPU
    array}, 1 where a result was inf or NaN.  Nothing is read back."""
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
            inv = inv.astype(np.float32)
        _launch(_kernel("unscale", gs), dev, (_addrs(gs),), [g.size for g in gs],
                (inv, found[dev]))
        _bump(gs)
    return found


def amp_update_scale(scale, growth_tracker, found_inf, *, growth_factor, backoff_factor,
                     growth_interval):
    """GradScaler.update on the device, in place, one launch (``ember_amp_update_scale``,
    torch's ``_amp_update_scale_``): `scale` a float32, `growth_tracker` an int32 and
    `found_inf` a float32 one-element array, all on one GPU.  Nothing is read back."""
    R = _R()
    with R.cp().cuda.Device(scale.get_device()):
        R.launch("ember_amp_update_scale", 1, 1,
                 (scale, growth_tracker, found_inf, float(growth_factor),
                  float(backoff_factor), int(growth_interval)))
    _bump((scale, growth_tracker))
