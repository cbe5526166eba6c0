"""2-d convolutions through cuDNN: the forward, the data gradient and the weight gradient
of ``ember/cuda/ops_conv.py``'s three ops (which call these first and run their own
im2col + GEMM kernels when they answer None).

Each takes ember GPU arrays and returns a cupy array (N, O, OH, OW) (the data gradient:
(N, C, H, W); the weight gradient: w's shape, C-contiguous), without bias.  The layout
follows the input: NHWC descriptors when a 4-d input is stored channels-last (its
strides those of an (N, H, W, C) array), NCHW otherwise; the weight is given to cuDNN
in the same layout (a copy when it is not stored so) and the result comes back in it.
1-d convolutions run as 2-d ones of unit height.  cuDNN takes symmetric padding only:
``padding='same'`` with an even kernel runs ember's kernels.

A plan per configuration (direction, device, dtype, layout, shapes, geometry, the
switches) holds the descriptors and the algorithms in preference order, found once: by
cuDNN's heuristics, or by timing them all (``cudnnFind*AlgorithmEx``, with the workspace
from the pool) when ``benchmark`` is set; only deterministic ones when
``deterministic`` is set; no TF32 ones for float32 unless ``allow_tf32``.  A call then
binds the handle to the current stream, takes the algorithm's workspace from the memory
pool and queues one cuDNN call.
"""
import ctypes

import numpy as np

from ember.cuda import _cudnn as D
from ember.cuda import _cudnn_lib as L
from ember.cuda import _runtime as R

__all__ = ["forward", "backward_data", "backward_filter"]

_NCHW, _NHWC = (0, 1, 2, 3), (0, 2, 3, 1)
_FUNCS = {
    "forward": ("cudnnGetConvolutionForwardAlgorithm_v7",
                "cudnnFindConvolutionForwardAlgorithmEx",
                "cudnnGetConvolutionForwardWorkspaceSize", "cudnnConvolutionForward"),
    "backward_data": ("cudnnGetConvolutionBackwardDataAlgorithm_v7",
                      "cudnnFindConvolutionBackwardDataAlgorithmEx",
                      "cudnnGetConvolutionBackwardDataWorkspaceSize",
                      "cudnnConvolutionBackwardData"),
    "backward_filter": ("cudnnGetConvolutionBackwardFilterAlgorithm_v7",
                        "cudnnFindConvolutionBackwardFilterAlgorithmEx",
                        "cudnnGetConvolutionBackwardFilterWorkspaceSize",
                        "cudnnConvolutionBackwardFilter"),
}
_OPNAME = {"forward": "conv2d", "backward_data": "conv2d input gradient",
           "backward_filter": "conv2d weight gradient"}
_PLANS = D.plans()
_F64 = np.dtype(np.float64)


class _Plan:
    """The descriptors of one configuration (a, b: the inputs, o: the output, in the
    direction's argument order), its candidate algorithms and their workspace sizes."""
    __slots__ = ("a", "b", "o", "conv", "cands", "math", "ws")


def _out_len(n, p, d, k, s):
    return (n + 2 * p - d * (k - 1) - 1) // s + 1


def _channels_last(c):
    """Whether 4-d cupy array c is stored as (N, H, W, C) and not also as (N, C, H, W)."""
    return (c.ndim == 4 and not c.flags.c_contiguous
            and c.transpose(0, 2, 3, 1).flags.c_contiguous)


def _as4d(c):
    return c.reshape(c.shape[0], c.shape[1], 1, c.shape[2]) if c.ndim == 3 else c


def _in_layout(c, order):
    """cupy c (N, C, H, W) stored in axis order `order` (a view when it already is)."""
    cp = R.cp()
    if order == _NCHW:
        return cp.ascontiguousarray(c)
    return cp.ascontiguousarray(c.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)


def _empty(shape, dtype, order):
    """A new cupy array of logical shape (N, C, H, W) stored in axis order `order`."""
    cp = R.cp()
    if order == _NCHW:
        return cp.empty(shape, dtype=dtype)
    n, c, h, w = shape
    return cp.empty((n, h, w, c), dtype=dtype).transpose(0, 3, 1, 2)


def _math(dtype):
    """The math type a configuration starts with (PyTorch's choice): tensor cores for
    16-bit data, no TF32 for float32 unless allowed."""
    if np.dtype(dtype).itemsize == 2:
        return L.TENSOR_OP_MATH
    if np.dtype(dtype) == np.float32 and not D.FLAGS.allow_tf32:
        return L.FMA_MATH
    return L.DEFAULT_MATH


def _plan(t, h, op, direction, dt, order, xs, ws_, ys, pad, stride, dil, groups, ptrs):
    cdt = D.cudnn_dtype(dt)
    compute = L.DATA["float64"] if np.dtype(dt) == _F64 else L.DATA["float32"]
    fmt = L.TENSOR_NCHW if order == _NCHW else L.TENSOR_NHWC
    xd = D.tensor_desc(t, op, cdt, xs, D.contiguous_strides(xs, order))
    wd = D.filter_desc(t, op, cdt, fmt, ws_)
    yd = D.tensor_desc(t, op, cdt, ys, D.contiguous_strides(ys, order))
    math = _math(dt)
    cd = D.conv_desc(t, op, pad, stride, dil, groups, compute, math)
    p = _Plan()
    p.a, p.b, p.o = {"forward": (xd, wd, yd), "backward_data": (wd, yd, xd),
                     "backward_filter": (xd, yd, wd)}[direction]
    p.conv, p.math = cd, math
    get, find, wsize, _ = (getattr(t, n) for n in _FUNCS[direction])
    n = L.ALGO_COUNT[direction]
    perf = (L.PerfResult * n)()
    got = ctypes.c_int()
    if D.FLAGS.benchmark:
        sizes = []
        for algo in range(n):
            s = ctypes.c_size_t()
            if wsize(h, p.a, p.b, cd, p.o, algo, s) == L.SUCCESS:
                sizes.append(s.value)
        ws, owner, size = _search_workspace(sizes)
        D.check(find(h, p.a, ptrs[0], p.b, ptrs[1], cd, p.o, ptrs[2], n, got, perf, ws, size),
                op, _FUNCS[direction][1])
        del owner
    else:
        D.check(get(h, p.a, p.b, cd, p.o, n, got, perf), op, _FUNCS[direction][0])
    # float32 without TF32: no tensor-core algorithm, and FMA math where an algorithm
    # reports the default one (which lets cuDNN use TF32 on Ampere and later)
    no_tf32 = np.dtype(dt) == np.float32 and not D.FLAGS.allow_tf32
    p.cands = [(r.algo, L.FMA_MATH if no_tf32 and r.mathType == L.DEFAULT_MATH else r.mathType)
               for r in perf[:got.value]
               if r.status == L.SUCCESS
               and (not D.FLAGS.deterministic or r.determinism == L.DETERMINISTIC)
               and not (no_tf32 and r.mathType in (L.TENSOR_OP_MATH,
                                                   L.TENSOR_OP_MATH_ALLOW_CONVERSION))]
    if not p.cands:
        raise D.Fallback("no usable algorithm" + (" (deterministic ones only)"
                                                  if D.FLAGS.deterministic else ""))
    p.ws = [None] * len(p.cands)
    return p


def _search_workspace(sizes):
    """(pointer, owner, size) of the largest workspace among `sizes` that the pool gives
    (the algorithm search skips algorithms needing more)."""
    oom = D.out_of_memory()
    for size in sorted(set(sizes), reverse=True):
        try:
            ptr, owner = D.workspace(size)
            return ptr, owner, size
        except oom:
            continue
    return 0, None, 0


def _execute(t, h, op, p, direction, ptrs, double, detail):
    """Run the plan's first algorithm whose workspace the pool can give."""
    _, _, wsize, run = (getattr(t, n) for n in _FUNCS[direction])
    one, zero = D.scalars(double)
    oom = D.out_of_memory()
    for i, (algo, math) in enumerate(p.cands):
        if p.math != math:
            D.check(t.cudnnSetConvolutionMathType(p.conv, math), op, "cudnnSetConvolutionMathType")
            p.math = math
        if p.ws[i] is None:
            s = ctypes.c_size_t()
            D.check(wsize(h, p.a, p.b, p.conv, p.o, algo, s), op, _FUNCS[direction][2])
            p.ws[i] = s.value
        try:
            ws, owner = D.workspace(p.ws[i])
        except oom:
            continue
        status = run(h, one, p.a, ptrs[0], p.b, ptrs[1], p.conv, algo, ws, p.ws[i], zero,
                     p.o, ptrs[2])
        del owner
        if status != L.SUCCESS:
            D.run_failed(status, op, detail)
        return
    raise _NoMemory("no algorithm's workspace fits in the free memory")


class _NoMemory(D.Fallback):
    """Out of memory for every workspace: ember's kernels run this call, and cuDNN is
    tried again on the next (not remembered)."""


def _conv(direction, dt, order, xs, ws_, ys, pad, stride, dil, groups, ptrs, detail):
    """Plan (or find the plan of) and run one convolution; False when ember's kernels
    must run it instead."""
    op = _OPNAME[direction]
    t = D.usable()
    key = (direction, R.cp().cuda.runtime.getDevice(), np.dtype(dt).name, order, xs, ws_, ys,
           pad, stride, dil, groups, D.FLAGS.key())
    p = _PLANS.get(key)
    if isinstance(p, str):
        D.fell_back(op, None, None, p)
        return False
    try:
        h = D.handle(t, op)
        if p is None:
            p = _PLANS[key] = _plan(t, h, op, direction, dt, order, xs, ws_, ys, pad,
                                    stride, dil, groups, ptrs)
        _execute(t, h, op, p, direction, ptrs, np.dtype(dt) == _F64, detail)
    except D.Fallback as why:
        D.fell_back(op, None if isinstance(why, _NoMemory) else _PLANS, key, str(why))
        return False
    D.ran(op)
    return True


def _geometry(H, W, kh, kw, stride, pad, dil):
    """((ph, pw), (OH, OW)) of the convolution of an H x W input, or None when the padding
    is asymmetric."""
    if pad[0] != pad[1] or pad[2] != pad[3]:
        return None
    return ((pad[0], pad[2]), (_out_len(H, pad[0], dil[0], kh, stride[0]),
                               _out_len(W, pad[2], dil[1], kw, stride[1])))


def _detail(**shapes):
    return ", ".join(f"{k} {tuple(v.shape)} {v.dtype}" for k, v in shapes.items())


def _usable_for(op, *arrays):
    """The dtype when cuDNN is on and takes these arrays, else None (counted)."""
    if D.usable() is None:
        return None
    dt = arrays[0].dtype
    if D.cudnn_dtype(dt) is None or any(a.dtype != dt for a in arrays):
        D.fell_back(op, None, None, f"dtype {dt}")
        return None
    return dt


def forward(x, w, stride, pad, dil, groups):
    """cupy (N, O, OH, OW) = x (N, C, [H,] W) convolved with w (O, C/groups, [kh,] kw), in
    x's layout; None when ember's kernels must run it."""
    op = "conv2d"
    dt = _usable_for(op, x, w)
    if dt is None:
        return None
    xc, wc = _as4d(R.as_cupy(x)), _as4d(R.as_cupy(w))
    O, _, kh, kw = wc.shape
    geo = _geometry(xc.shape[2], xc.shape[3], kh, kw, stride, pad, dil)
    if geo is None:
        return D.fell_back(op, None, None, "asymmetric padding")
    (ph, pw), (OH, OW) = geo
    ys = (xc.shape[0], O, OH, OW)
    if OH <= 0 or OW <= 0 or not D.small_enough(xc.shape, wc.shape, ys):
        return D.fell_back(op, None, None, "empty or beyond 2**31 elements")
    order = _NHWC if _channels_last(xc) else _NCHW
    xa, wa = _in_layout(xc, order), _in_layout(wc, order)
    y = _empty(ys, dt, order)
    ok = _conv("forward", dt, order, tuple(xc.shape), tuple(wc.shape), ys, (ph, pw),
               tuple(stride), tuple(dil), int(groups), (xa.data.ptr, wa.data.ptr, y.data.ptr),
               _detail(input=xc, weight=wc))
    return y if ok else None


def backward_data(g, w, out_hw, stride, pad, dil, groups):
    """cupy (N, C, H, W): the gradient of the input of the convolution of an (N, C,
    *out_hw) input with w whose output gradient is g (N, O, [OH,] OW); None when ember's
    kernels must run it."""
    op = "conv2d input gradient"
    dt = _usable_for(op, g, w)
    if dt is None:
        return None
    gc, wc = _as4d(R.as_cupy(g)), _as4d(R.as_cupy(w))
    O, Cg, kh, kw = wc.shape
    H, W = (1, out_hw[0]) if len(out_hw) == 1 else tuple(out_hw)
    xs = (gc.shape[0], Cg * groups, H, W)
    geo = _geometry(H, W, kh, kw, stride, pad, dil)
    if geo is None:
        return D.fell_back(op, None, None, "asymmetric padding")
    (ph, pw), ohw = geo
    if ohw != tuple(gc.shape[2:]):
        return D.fell_back(op, None, None, "output size beyond the convolution's")
    if not D.small_enough(xs, wc.shape, gc.shape):
        return D.fell_back(op, None, None, "empty or beyond 2**31 elements")
    order = _NHWC if _channels_last(gc) else _NCHW
    ga, wa = _in_layout(gc, order), _in_layout(wc, order)
    dx = _empty(xs, dt, order)
    ok = _conv("backward_data", dt, order, xs, tuple(wc.shape), tuple(gc.shape), (ph, pw),
               tuple(stride), tuple(dil), int(groups), (wa.data.ptr, ga.data.ptr, dx.data.ptr),
               _detail(grad_output=gc, weight=wc))
    return dx if ok else None


def backward_filter(x, g, wshape, stride, pad, dil, groups):
    """cupy array of shape `wshape`, C-contiguous: the gradient of the weight of the
    convolution of x (N, C, [H,] W) whose output gradient is g; None when ember's kernels
    must run it."""
    op = "conv2d weight gradient"
    dt = _usable_for(op, x, g)
    if dt is None:
        return None
    xc, gc = _as4d(R.as_cupy(x)), _as4d(R.as_cupy(g))
    ws4 = tuple(wshape) if len(wshape) == 4 else (wshape[0], wshape[1], 1, wshape[2])
    geo = _geometry(xc.shape[2], xc.shape[3], ws4[2], ws4[3], stride, pad, dil)
    if geo is None:
        return D.fell_back(op, None, None, "asymmetric padding")
    (ph, pw), ohw = geo
    if ohw != tuple(gc.shape[2:]):
        return D.fell_back(op, None, None, "output size beyond the convolution's")
    if not D.small_enough(xc.shape, ws4, gc.shape):
        return D.fell_back(op, None, None, "empty or beyond 2**31 elements")
    order = _NHWC if _channels_last(xc) else _NCHW
    xa, ga = _in_layout(xc, order), _in_layout(gc, order)
    dw = _empty(ws4, dt, order)
    ok = _conv("backward_filter", dt, order, tuple(xc.shape), ws4, tuple(gc.shape), (ph, pw),
               tuple(stride), tuple(dil), int(groups), (xa.data.ptr, ga.data.ptr, dw.data.ptr),
               _detail(input=xc, grad_output=gc))
    if not ok:
        return None
    return R.cp().ascontiguousarray(dw).reshape(tuple(wshape))

