"""The normalization ops of ``ember.nn.functional.normalization`` on CUDA arrays.

Two layers:

* the CUDA twins of the CPU kernel functions (``ember._kernels.cpu.norm``): same
  names, arguments and results (``new_stats`` reads its ``like`` argument, the input,
  for the device and dtype);
* the ``@gpu_op`` registrations, written with them: the four forward defops, and the
  private ops through which normalization.py's gradient rules and running-statistics
  update reach the kernels (``_layer_norm_backward``, ``_batch_norm_backward``,
  ``_group_norm_backward``, ``_batch_norm_update_running``, ``_new_stats``: the CPU
  kernels are their bodies there).

Kernels (norm.cu): layer norm forward / input gradient (one block per row), batch
norm statistics, apply and backward (one block per channel for the reductions, or
several per channel and a merge when there are too few channels to fill the GPU).
Batch norm of float16 / bfloat16 data runs as itself with float32 parameters (the
``_p32`` kernels), as PyTorch's mixed batch norm: no widened copy of the activations.
Group norm is layer norm over (N*G) rows of C/G*S values followed by the
per-channel affine, and its input gradient is the layer-norm input gradient of
``g * weight``.  Parameter gradients that are sums over rows use cuBLAS (a
ones-vector GEMV) or CuPy reductions.

Batch norm's training forward and backward and its evaluation forward first offer their
arguments to cuDNN (``cudnn_norm``), which answers None where it is off, missing or
refuses them; the kernels above then run.

Saved statistics live on the GPU in the accumulator type of the kernels (float64
for float64 input, float32 otherwise); the CPU keeps float64.  They never leave
normalization.py's rules.
"""
import math

import numpy as np

from ember.cuda._dispatch import gpu_op
from ember.cuda import _runtime as R
from ember.cuda import cudnn_norm
from ember.cuda._gemm import mm

_F64 = np.dtype(np.float64)
_F32 = np.dtype(np.float32)
_GRID_CAP = 65535            # the row/channel kernels loop over rows, so any grid works


# ------------------------------------------------------------------ helpers

def _acc(dtype):
    """The kernels' accumulator dtype for data of `dtype`."""
    return _F64 if np.dtype(dtype) == _F64 else _F32


def _kernel(stem, dtype):
    sfx = R.suffix(dtype)
    if sfx is None:
        raise TypeError(f"{stem} (cuda): no kernel for dtype {dtype}")
    return f"ember_{stem}_{sfx}"


def _threads(n):
    """Block size for a one-block-per-row kernel over rows of n values (a multiple of
    32, at most 512)."""
    t = 32
    while t < n and t < 512:
        t *= 2
    return t


def _grid(rows):
    return max(1, min(int(rows), _GRID_CAP))


#: fewest elements a part of a split batch-norm reduction gets (see _bn_parts)
_MIN_PART = 16384


def _bn_parts(C, M):
    """How many parts to cut each channel's M elements into for the batch-norm
    reductions: 1 (one block per channel) when there are channels enough to fill the GPU,
    else enough parts for about four blocks per multiprocessor, each of at least
    _MIN_PART elements."""
    want = -(-(R.max_resident_blocks() // 4) // max(C, 1))
    return max(1, min(want, M // _MIN_PART))


def _bn_reduce(name, stem, dtype, C, M, whole, part, finish, per, acc):
    """Launch batch-norm reduction `stem` on data of `dtype` over C channels of M values:
    the one-block-per-channel kernel `name(stem)` with arguments `whole`, or, split, the
    _partial kernel over (channel, part) blocks with arguments part(partials, parts) and
    the _finish kernel `name(stem + "_finish")` that merges each channel's partials
    (`per` values each) in part order, with arguments finish(partials, parts).  (`name`
    adds _p32 where the kernel writes float32 parameters; the partials do not.)"""
    parts = _bn_parts(C, M)
    if parts == 1:
        R.launch(name(stem), _grid(C), _threads(M), whole)
        return
    partials = _e(R.cp().empty((C * parts * per,), dtype=acc))
    R.launch(_kernel(stem + "_partial", dtype), _grid(C * parts), _threads(-(-M // parts)),
             part(partials, parts))
    R.launch(name(stem + "_finish"), R.blocks(C), 256, finish(partials, parts))


def _pdt(dtype):
    """The batch-norm parameter dtype for data of `dtype`: float32 for 16-bit data (the
    mixed kernels, ``_p32``), else the data's own."""
    return _F32 if np.dtype(dtype).itemsize == 2 else np.dtype(dtype)


def _bn_kernel(stem, dtype):
    """A batch-norm kernel that reads or writes parameters, for data of `dtype`."""
    return _kernel(stem, dtype) + ("_p32" if np.dtype(dtype).itemsize == 2 else "")


def _c(x, dtype=None):
    """A C-contiguous cupy array of ember GPU array x (a view when it already is one)."""
    return R.cp().ascontiguousarray(R.as_cupy(x), dtype=dtype)


def _e(c):
    """cupy array -> ember array for a kernel argument; None -> a null pointer."""
    return 0 if c is None else R.from_cupy(c)


def _param(p, dtype):
    """An optional weight/bias as a flat contiguous cupy array of `dtype`, or None."""
    if p is None:
        return None
    return _c(p, dtype).reshape(-1)


def _stats(stats, rows, n, dtype, opname):
    """The cupy view of a statistics array from new_stats, checked."""
    if not R.is_gpu(stats):
        raise ValueError(f"{opname}: internal error: the statistics array is not on the GPU "
                         f"(make it with normalization._new_stats)")
    st = R.as_cupy(stats)
    if st.shape != (rows, n) or st.dtype != _acc(dtype) or not st.flags.c_contiguous:
        raise ValueError(f"{opname}: internal error: bad statistics array "
                         f"({st.shape}, {st.dtype}; expected ({rows}, {n}), {_acc(dtype)})")
    return st


def _ncs(shape):
    """(N, C, S): batch, channels and the product of the spatial sizes."""
    return shape[0], shape[1], math.prod(shape[2:])


def _device_index(x):
    return getattr(getattr(x, "device", None), "index", None)


# ------------------------------------------------------------------ the kernel twins

@R.on_arrays_device
def new_stats(rows, n, like):
    """An uninitialised (rows, n) statistics array on like's device, in the accumulator
    type of like's dtype."""
    return R.empty((int(rows), int(n)), _acc(like.dtype), device=_device_index(like))


def _ln_rows(x):
    """(M, N): x seen as rows over its last axis, as the CPU kernel sees it."""
    N = x.shape[-1] if x.ndim else 1
    return (x.size // N if N else 0), N


@R.on_arrays_device
def layer_norm_forward(x, weight, bias, eps, stats):
    """Layer norm over the last axis of x; fills stats (2, M): mean, 1/std; returns y."""
    M, N = _ln_rows(x)
    xc = _c(x)
    st = _stats(stats, 2, M, xc.dtype, "layer_norm")
    y = R.cp().empty(xc.shape, dtype=xc.dtype)
    if xc.size:
        R.launch(_kernel("layer_norm_fwd", xc.dtype), _grid(M), _threads(N),
                 (_e(xc), _e(_param(weight, xc.dtype)), _e(_param(bias, xc.dtype)), _e(y),
                  _e(st[0]), _e(st[1]), M, N, float(eps)))
    return R.from_cupy(y)


def _row_sums(a):
    """Column sums of cupy a (M, N) through cuBLAS (a ones-vector GEMV)."""
    cp = R.cp()
    return mm(cp.ones((a.shape[0],), dtype=a.dtype), a)


@R.on_arrays_device
def layer_norm_backward(g, x, weight, stats, need_x, need_wb):
    """(gx, gw, gb) of layer norm; None where not needed; gw/gb are the row sums of
    g * xhat and g (also without weight/bias: the caller picks)."""
    cp = R.cp()
    M, N = _ln_rows(x)
    xc = _c(x)
    gc = _c(g, xc.dtype)
    st = _stats(stats, 2, M, xc.dtype, "layer_norm backward")
    gx = gw = gb = None
    if need_x:
        gxc = cp.empty(xc.shape, dtype=xc.dtype)
        if xc.size:
            R.launch(_kernel("layer_norm_bwd_input", xc.dtype), _grid(M), _threads(N),
                     (_e(gc), _e(xc), _e(_param(weight, xc.dtype)), _e(st[0]), _e(st[1]),
                      _e(gxc), M, N))
        gx = R.from_cupy(gxc)
    if need_wb:
        if xc.size:
            x2 = xc.reshape(M, N).astype(st.dtype, copy=False)
            g2 = gc.reshape(M, N).astype(st.dtype, copy=False)
            xhat = (x2 - st[0][:, None]) * st[1][:, None]
            gwc = _row_sums(g2 * xhat).astype(xc.dtype)
            gbc = _row_sums(g2).astype(xc.dtype)
        else:
            gwc = cp.zeros((N,), dtype=xc.dtype)
            gbc = cp.zeros((N,), dtype=xc.dtype)
        gw, gb = R.from_cupy(gwc), R.from_cupy(gbc)
    return gx, gw, gb


def _bn_apply(xc, mean, invstd, w, b, N, C, S):
    y = R.cp().empty(xc.shape, dtype=xc.dtype)
    if xc.size:
        pdt = _pdt(xc.dtype)
        R.launch(_bn_kernel("batch_norm_apply", xc.dtype), R.blocks(xc.size), 256,
                 (_e(xc), _e(mean), _e(invstd), _e(_param(w, pdt)), _e(_param(b, pdt)),
                  _e(y), N, C, S))
    return y


@R.on_arrays_device
def batch_norm_train_forward(x, weight, bias, eps, stats):
    """Batch norm with batch statistics; fills stats (3, C): mean, 1/std, biased
    variance; returns y."""
    y = cudnn_norm.train_forward(x, weight, bias, eps, stats)
    if y is not None:
        return y
    cp = R.cp()
    xc = _c(x)
    N, C, S = _ncs(xc.shape)
    st = _stats(stats, 3, C, xc.dtype, "batch_norm")
    if xc.size == 0:
        return R.from_cupy(cp.empty(xc.shape, dtype=xc.dtype))
    outs = (_e(st[0]), _e(st[1]), _e(st[2]))            # mean, 1/std, biased variance
    _bn_reduce(lambda stem: _kernel(stem, xc.dtype), "batch_norm_stats", xc.dtype, C, N * S,
               (_e(xc),) + outs + (N, C, S, float(eps)),
               lambda p, parts: (_e(xc), p, N, C, S, parts),
               lambda p, parts: (p,) + outs + (N, C, S, parts, float(eps)), 3, st.dtype)
    return R.from_cupy(_bn_apply(xc, st[0], st[1], weight, bias, N, C, S))


@R.on_arrays_device
def batch_norm_update_running(running_mean, running_var, stats, momentum, count):
    """running = (1 - momentum) * running + momentum * batch statistic, in place on the
    GPU arrays; the variance enters unbiased, as in PyTorch.  (The caller bumps their
    versions, as for the CPU kernel.)"""
    st = R.as_cupy(stats)
    C = st.shape[1]
    unb = count / (count - 1) if count > 1 else float("nan")
    for name, a in (("running_mean", running_mean), ("running_var", running_var)):
        if not R.is_gpu(a) or a.get_device() != stats.get_device():
            raise ValueError(f"batch_norm: {name} is on {a.device} but the input is on "
                             f"{stats.device}: running statistics must be on the input's "
                             f"device")
        if not a.is_contiguous() or a.size != C:
            raise ValueError(f"batch_norm: {name} must be a contiguous array of {C} values, "
                             f"got shape {tuple(a.shape)}")
    rsfx = R.suffix(running_mean.dtype)
    if rsfx is not None and running_var.dtype == running_mean.dtype:
        # one launch instead of a dozen CuPy operations per layer and step
        R.launch(f"ember_batch_norm_update_running_{R.suffix(st.dtype)}_{rsfx}", R.blocks(C),
                 256, (stats, running_mean, running_var, C, float(momentum), float(unb)))
        return
    for a, row, scale in ((running_mean, 0, 1.0), (running_var, 2, unb)):
        ac = R.as_cupy(a).reshape(C)
        new = (1.0 - momentum) * ac.astype(_F64) + momentum * (st[row].astype(_F64) * scale)
        ac[...] = new.astype(ac.dtype)


@R.on_arrays_device
def batch_norm_eval_forward(x, running_mean, running_var, weight, bias, eps):
    """Batch norm with running statistics; returns (y, mean, 1/std), the last two
    float64 (C,) arrays as on the CPU."""
    cp = R.cp()
    xc = _c(x)
    N, C, S = _ncs(xc.shape)
    mean64 = _c(running_mean, _F64).reshape(C)
    rstd64 = 1.0 / cp.sqrt(_c(running_var, _F64).reshape(C) + eps)
    acc = _acc(xc.dtype)
    y = _bn_apply(xc, mean64.astype(acc), rstd64.astype(acc), weight, bias, N, C, S)
    return R.from_cupy(y), R.from_cupy(mean64), R.from_cupy(rstd64)


@R.on_arrays_device
def batch_norm_backward(g, x, weight, stats, running, need_x):
    """(gx, gw, gb) of batch norm.  Training (running None): stats is the forward's
    (3, C) array.  Evaluation: running = (mean, 1/std) (C,) arrays and gx = g * w / std.
    gw, gb are the per-channel sums of g * xhat and g, in float32 for 16-bit x (the
    parameters' precision; the caller casts them to the parameters' dtype)."""
    if running is None:
        r = cudnn_norm.train_backward(g, x, weight, stats, need_x)
        if r is not None:
            return r
    cp = R.cp()
    xc = _c(x)
    gc = _c(g, xc.dtype)
    N, C, S = _ncs(xc.shape)
    acc = _acc(xc.dtype)
    if running is None:
        st = _stats(stats, 3, C, xc.dtype, "batch_norm backward")
        mean, invstd = st[0], st[1]
    else:
        mean = _c(running[0], acc).reshape(C)
        invstd = _c(running[1], acc).reshape(C)
    pdt = _pdt(xc.dtype)
    w = _param(weight, pdt)
    if xc.size == 0:
        gx = R.from_cupy(cp.empty(xc.shape, dtype=xc.dtype)) if need_x else None
        return (gx, R.from_cupy(cp.zeros((C,), dtype=pdt)),
                R.from_cupy(cp.zeros((C,), dtype=pdt)))
    sum_dy = cp.empty((C,), dtype=acc)
    sum_dy_xhat = cp.empty((C,), dtype=acc)
    gw = cp.empty((C,), dtype=pdt)
    gb = cp.empty((C,), dtype=pdt)
    outs = (_e(sum_dy), _e(sum_dy_xhat), _e(gw), _e(gb))
    ins = (_e(gc), _e(xc), _e(mean), _e(invstd))
    _bn_reduce(lambda stem: _bn_kernel(stem, xc.dtype), "batch_norm_bwd_reduce", xc.dtype,
               C, N * S, ins + outs + (N, C, S), lambda p, parts: ins + (p, N, C, S, parts),
               lambda p, parts: (p,) + outs + (C, parts), 2, acc)
    gx = None
    if need_x:
        if running is None:
            gxc = cp.empty(xc.shape, dtype=xc.dtype)
            R.launch(_bn_kernel("batch_norm_bwd_input", xc.dtype), R.blocks(xc.size), 256,
                     (_e(gc), _e(xc), _e(mean), _e(invstd), _e(w), _e(sum_dy),
                      _e(sum_dy_xhat), _e(gxc), N, C, S))
        else:
            # evaluation: the statistics are constants, gx = g * w / std per channel
            scale = invstd.astype(_F64) * (1.0 if w is None else w.astype(_F64))
            gxc = gc * scale.astype(xc.dtype).reshape((1, C) + (1,) * (xc.ndim - 2))
        gx = R.from_cupy(cp.ascontiguousarray(gxc))
    return gx, R.from_cupy(gw), R.from_cupy(gb)


@R.on_arrays_device
def group_norm_forward(x, G, weight, bias, eps, stats):
    """Group norm of x (N, C, ...) with G groups; fills stats (2, N*G): mean, 1/std per
    sample and group; returns y."""
    xc = _c(x)
    N, C, S = _ncs(xc.shape)
    rows, L = N * G, (C // G) * S
    st = _stats(stats, 2, rows, xc.dtype, "group_norm")
    y = R.cp().empty(xc.shape, dtype=xc.dtype)
    if xc.size == 0:
        return R.from_cupy(y)
    # layer norm of the (N*G, C/G*S) rows without affine, then the per-channel affine
    R.launch(_kernel("layer_norm_fwd", xc.dtype), _grid(rows), _threads(L),
             (_e(xc), 0, 0, _e(y), _e(st[0]), _e(st[1]), rows, L, float(eps)))
    w, b = _param(weight, xc.dtype), _param(bias, xc.dtype)
    y3 = y.reshape(N, C, S)
    if w is not None:
        y3 *= w[:, None]
    if b is not None:
        y3 += b[:, None]
    return R.from_cupy(y)


@R.on_arrays_device
def group_norm_backward(g, x, G, weight, stats, need_x):
    """(gx, gw, gb) of group norm; gw, gb are the per-channel sums of g * xhat and g."""
    cp = R.cp()
    xc = _c(x)
    gc = _c(g, xc.dtype)
    N, C, S = _ncs(xc.shape)
    rows, L = N * G, (C // G) * S
    st = _stats(stats, 2, rows, xc.dtype, "group_norm backward")
    if xc.size == 0:
        gx = R.from_cupy(cp.empty(xc.shape, dtype=xc.dtype)) if need_x else None
        return (gx, R.from_cupy(cp.zeros((C,), dtype=xc.dtype)),
                R.from_cupy(cp.zeros((C,), dtype=xc.dtype)))
    w = _param(weight, xc.dtype)
    x3 = xc.reshape(N, G, L).astype(st.dtype, copy=False)
    xhat = ((x3 - st[0].reshape(N, G, 1)) * st[1].reshape(N, G, 1)).reshape(N, C, S)
    g3 = gc.reshape(N, C, S)
    gw = (g3 * xhat).sum(axis=(0, 2)).astype(xc.dtype)
    gb = g3.sum(axis=(0, 2), dtype=st.dtype).astype(xc.dtype)
    gx = None
    if need_x:
        # per (sample, group) row this is the layer-norm input gradient of g * weight
        gh = cp.ascontiguousarray(g3 * w[:, None] if w is not None else g3)
        gxc = cp.empty(xc.shape, dtype=xc.dtype)
        R.launch(_kernel("layer_norm_bwd_input", xc.dtype), _grid(rows), _threads(L),
                 (_e(gh), _e(xc), 0, _e(st[0]), _e(st[1]), _e(gxc), rows, L))
        gx = R.from_cupy(gxc)
    return gx, R.from_cupy(gw), R.from_cupy(gb)


# ------------------------------------------------------------------ the defops on the GPU

@gpu_op("nn.functional.normalization._layer_norm")
def _layer_norm(x, weight, bias, normalized_shape, eps, stats):
    N = math.prod(normalized_shape)
    if len(normalized_shape) == 1:
        return layer_norm_forward(x, weight, bias, eps, stats)
    xr = R.from_cupy(_c(x).reshape(x.size // N if N else 0, N))
    y = layer_norm_forward(xr, weight, bias, eps, stats)
    return R.from_cupy(R.as_cupy(y).reshape(tuple(x.shape)))


@gpu_op("nn.functional.normalization._batch_norm_train")
def _batch_norm_train(x, weight, bias, eps, stats):
    return batch_norm_train_forward(x, weight, bias, eps, stats)


@gpu_op("nn.functional.normalization._batch_norm_eval")
def _batch_norm_eval(x, running_mean, running_var, weight, bias, eps):
    y = cudnn_norm.eval_forward(x, running_mean, running_var, weight, bias, eps)
    if y is not None:
        return y
    y, _, _ = batch_norm_eval_forward(x, running_mean, running_var, weight, bias, eps)
    return y


@gpu_op("nn.functional.normalization._group_norm")
def _group_norm(x, weight, bias, num_groups, eps, stats):
    return group_norm_forward(x, num_groups, weight, bias, eps, stats)


# ------------------------------------------------------------------ the private ops of the rules

_NN = "nn.functional.normalization."
gpu_op(_NN + "_layer_norm_backward")(layer_norm_backward)
gpu_op(_NN + "_batch_norm_backward")(batch_norm_backward)
gpu_op(_NN + "_group_norm_backward")(group_norm_backward)
gpu_op(_NN + "_batch_norm_update_running")(batch_norm_update_running)
gpu_op(_NN + "_new_stats")(new_stats)
