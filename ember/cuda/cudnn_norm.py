"""Batch norm through cuDNN: the training forward, the evaluation forward and the training
backward of ``ember/cuda/ops_norm.py`` (which calls these first and runs its own
kernels when they answer None).

cuDNN's spatial batch norm on the contiguous (N, C, S, 1) view of an (N, C, ...) input:
float32, float64, and float16 / bfloat16 data with float32 parameters (the parameters'
type is cuDNN's: float32 for every data type but float64).  A 4-d input stored channels
last (its strides those of an (N, H, W, C) array: ember's channels-last layout) runs
with NHWC descriptors on the data as it is stored, and its results (y, the input
gradient) come back channels last, as PyTorch's do; the training forward and backward
use ``CUDNN_BATCHNORM_SPATIAL_PERSISTENT`` there (PyTorch's choice for channels-last
training: cuDNN's NHWC kernels), every other case ``CUDNN_BATCHNORM_SPATIAL``.
Missing weight / bias are ones / zeros.  The statistics array is ops_norm's (3, C):
cuDNN writes the batch mean and 1/std into its first two rows (its "saved" mean and
inverse variance, which the backward reads back), and one small kernel derives the
biased variance row from the second (1/std**2 - eps), which ops_norm's running-statistics
update reads; cuDNN itself updates no running statistics (ember does, after the
forward).  The backward of evaluation mode (the statistics are constants) stays with
ops_norm's elementwise kernels: cuDNN's backward is the training one.  The training
backward passes the saved statistics, so cuDNN does not use its epsilon argument there
(ops_norm's backward is not given the forward's).
"""
import numpy as np

from ember.cuda import _cudnn as D
from ember.cuda import _cudnn_lib as L
from ember.cuda import _runtime as R

__all__ = ["train_forward", "eval_forward", "train_backward"]

_PLANS = D.plans()
_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)
#: eps given to the backward: unused by cuDNN when the saved statistics are passed
_BACKWARD_EPS = 1e-5


def _pdt(dtype):
    """cuDNN's parameter (and statistics) dtype for data of `dtype`."""
    return _F64 if np.dtype(dtype) == _F64 else _F32


def _shape4(x):
    N, C = x.shape[0], x.shape[1]
    S = x.size // (N * C) if N * C else 0
    return (N, C, S, 1)


_NONE = object()         # _ready's "no statistics array to check"


def _ready(op, x, eps, stats=_NONE):
    """(table, dtype, C, the cupy (3, C) statistics or None) when cuDNN takes x (and
    `stats`, when given, is ops_norm's statistics array), else None (counted)."""
    t = D.usable()
    if t is None:
        return None
    if D.cudnn_dtype(x.dtype) is None or x.ndim < 2:
        return D.fell_back(op, None, None, f"dtype {x.dtype}, {x.ndim}-d input")
    s4 = _shape4(x)
    if not D.small_enough(s4) or eps is not None and not eps >= 0.0:
        return D.fell_back(op, None, None, "empty, too large, or a negative eps")
    dt, C = np.dtype(x.dtype), s4[1]
    st = None
    if stats is not _NONE:
        st = _stats(stats, C, dt)
        if st is None:
            return D.fell_back(op, None, None, "statistics array")
    return t, dt, C, st


def _layout(xc, training):
    """(axis order, batch-norm mode, descriptor dims) of cupy input xc: NHWC with the
    persistent mode in training for a channels-last 4-d input, else NCHW on the
    (N, C, S, 1) view with the spatial mode."""
    if D.channels_last(xc):
        mode = L.BATCHNORM_SPATIAL_PERSISTENT if training else L.BATCHNORM_SPATIAL
        return D.NHWC, mode, tuple(int(d) for d in xc.shape)
    return D.NCHW, L.BATCHNORM_SPATIAL, _shape4(xc)


def _data(c, order):
    """cupy c (N, C, ...) as cuDNN reads it in layout `order`: c itself (NHWC, already
    checked channels last) or a C-contiguous view or copy."""
    return c if order == D.NHWC else R.cp().ascontiguousarray(c)


def _out(c, dtype, order):
    """An empty array like c (shape, layout) of `dtype`."""
    return D.empty(c.shape, dtype, order) if order == D.NHWC else R.cp().empty(c.shape, dtype)


def _plan(t, h, op, dt, s4, order, mode):
    """(x descriptor, parameter descriptor) of data of dtype dt, descriptor dims s4
    stored in axis order `order`, for batch-norm `mode` (cached)."""
    key = ("bn", R.cp().cuda.runtime.getDevice(), dt.name, s4, order, mode)
    p = _PLANS.get(key)
    if p is None:
        xd = D.tensor_desc(t, op, D.cudnn_dtype(dt), s4, D.contiguous_strides(s4, order))
        bd = D.tensor_desc(t, op, D.cudnn_dtype(_pdt(dt)), (1, s4[1], 1, 1), (s4[1], 1, 1, 1))
        D.check(t.cudnnDeriveBNTensorDescriptor(bd, xd, mode), op,
                "cudnnDeriveBNTensorDescriptor")
        p = _PLANS[key] = (xd, bd)
    return p


def _setup(t, op, x, dt, training):
    """What every batch-norm call starts with: (handle on the current stream, x
    descriptor, parameter descriptor, mode, layout, cupy x as cuDNN reads it, parameter
    dtype)."""
    h = D.handle(t, op)
    order, mode, dims = _layout(R.as_cupy(x), training)
    xd, bd = _plan(t, h, op, dt, dims, order, mode)
    return h, xd, bd, mode, order, _data(R.as_cupy(x), order), _pdt(dt)


def _const(value, C, dtype):
    """A cached device vector of C `value`s (the weight / bias cuDNN needs when there is
    none)."""
    key = ("const", R.cp().cuda.runtime.getDevice(), value, C, dtype.name)
    c = _PLANS.get(key)
    if c is None:
        c = _PLANS[key] = R.cp().full((C,), value, dtype=dtype)
    return c


def _vec(p, C, dtype, default):
    """Parameter or statistic p as a contiguous cupy (C,) array of dtype."""
    if p is None:
        return _const(default, C, dtype)
    return R.cp().ascontiguousarray(R.as_cupy(p), dtype=dtype).reshape(C)


def _stats(stats, C, dt):
    """The cupy (3, C) view of ops_norm's statistics array, or None when it is not one."""
    if not R.is_gpu(stats):
        return None
    st = R.as_cupy(stats)
    if st.shape != (3, C) or st.dtype != _pdt(dt) or not st.flags.c_contiguous:
        return None
    return st


_VAR_KERNEL = []


def _var_from_invstd(st, eps):
    """st[2] = 1 / st[1]**2 - eps (the biased batch variance), one launch."""
    if not _VAR_KERNEL:
        _VAR_KERNEL.append(R.cp().ElementwiseKernel(
            "T invstd, float64 eps", "T var",
            "var = (T)(1.0 / ((double)invstd * (double)invstd) - eps)",
            "ember_bn_var_from_invstd"))
    _VAR_KERNEL[0](st[1], float(eps), st[2])


def _detail(x, **more):
    parts = [f"input {tuple(x.shape)} {x.dtype}"]
    parts += [f"{k} {v}" for k, v in more.items()]
    return ", ".join(parts)


def _run(op, key_fn):
    """Run key_fn() -> result; None (counted) when it raised Fallback."""
    try:
        out = key_fn()
    except D.Fallback as why:
        return D.fell_back(op, None, None, str(why))
    D.ran(op)
    return out


def train_forward(x, weight, bias, eps, stats):
    """Batch norm of ember GPU array x with its batch statistics: the ember result y, with
    stats (3, C) filled as ops_norm's kernels fill it (mean, 1/std, biased variance);
    None when ember's kernels must run it."""
    op = "batch_norm"
    r = _ready(op, x, eps, stats)
    if r is None:
        return None
    t, dt, C, st = r

    def go():
        h, xd, bd, mode, order, xc, pdt = _setup(t, op, x, dt, True)
        w, b = _vec(weight, C, pdt, 1.0), _vec(bias, C, pdt, 0.0)
        y = _out(xc, dt, order)
        one, zero = D.scalars(dt == _F64)
        status = t.cudnnBatchNormalizationForwardTraining(
            h, mode, one, zero, xd, xc.data.ptr, xd, y.data.ptr, bd,
            w.data.ptr, b.data.ptr, 0.0, None, None, float(eps), st[0].data.ptr,
            st[1].data.ptr)
        if status != L.SUCCESS:
            D.run_failed(status, op, _detail(xc, eps=eps))
        _var_from_invstd(st, eps)
        return R.from_cupy(y)
    return _run(op, go)


def eval_forward(x, running_mean, running_var, weight, bias, eps):
    """Batch norm of ember GPU array x with the running statistics: the ember result, or
    None when ember's kernels must run it."""
    op = "batch_norm (eval)"
    r = _ready(op, x, eps)
    if r is None:
        return None
    t, dt, C, _ = r

    def go():
        h, xd, bd, mode, order, xc, pdt = _setup(t, op, x, dt, False)
        w, b = _vec(weight, C, pdt, 1.0), _vec(bias, C, pdt, 0.0)
        mean, var = _vec(running_mean, C, pdt, 0.0), _vec(running_var, C, pdt, 1.0)
        y = _out(xc, dt, order)
        one, zero = D.scalars(dt == _F64)
        status = t.cudnnBatchNormalizationForwardInference(
            h, mode, one, zero, xd, xc.data.ptr, xd, y.data.ptr, bd,
            w.data.ptr, b.data.ptr, mean.data.ptr, var.data.ptr, float(eps))
        if status != L.SUCCESS:
            D.run_failed(status, op, _detail(xc, eps=eps))
        return R.from_cupy(y)
    return _run(op, go)


def train_backward(g, x, weight, stats, need_x):
    """(gx, gw, gb) of training-mode batch norm, as ops_norm.batch_norm_backward returns
    them (gw, gb in the parameters' dtype: float32 for 16-bit data); None when ember's
    kernels must run it (also when gx is not needed: they skip computing it)."""
    op = "batch_norm backward"
    if not need_x:
        return None
    r = _ready(op, x, None, stats)
    if r is None:
        return None
    t, dt, C, st = r
    if tuple(g.shape) != tuple(x.shape):
        return D.fell_back(op, None, None, f"gradient shape {tuple(g.shape)}")

    def go():
        cp = R.cp()
        h, xd, bd, mode, order, xc, pdt = _setup(t, op, x, dt, True)
        gc = R.as_cupy(g).astype(dt, copy=False)
        # the output gradient in the input's layout (one descriptor serves x, dy, dx)
        gc = D.in_layout(gc, order) if order == D.NHWC else cp.ascontiguousarray(gc)
        w = _vec(weight, C, pdt, 1.0)
        gx = _out(xc, dt, order)
        gw, gb = cp.empty((C,), dtype=pdt), cp.empty((C,), dtype=pdt)
        one, zero = D.scalars(dt == _F64)
        status = t.cudnnBatchNormalizationBackward(
            h, mode, one, zero, one, zero, xd, xc.data.ptr, xd, gc.data.ptr,
            xd, gx.data.ptr, bd, w.data.ptr, gw.data.ptr, gb.data.ptr, _BACKWARD_EPS,
            st[0].data.ptr, st[1].data.ptr)
        if status != L.SUCCESS:
            D.run_failed(status, op, _detail(xc, grad_output=f"{tuple(gc.shape)} {gc.dtype}"))
        return R.from_cupy(gx), R.from_cupy(gw), R.from_cupy(gb)
    return _run(op, go)
