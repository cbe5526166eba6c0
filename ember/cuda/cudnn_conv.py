"""2-d convolutions through cuDNN: the forward, the data gradient and the weight gradient
of ``ember/cuda/ops_conv.py``'s three ops (which call these first and run their own
im2col + GEMM kernels when they answer None).

Each takes ember GPU arrays and returns a cupy array (N, O, OH, OW) (the data gradient:
(N, C, H, W); the weight gradient: w's shape, C-contiguous), without bias.  float32,
float64, float16 and bfloat16 data run as themselves: the tensor and filter descriptors
carry the data's type, the convolution's compute type is float32 (float64 for float64
data), PyTorch's choice (cuDNN's "pseudo-half" configurations; bfloat16 has no other).
The layout follows the input: NHWC descriptors when a 4-d input is stored
channels-last (its strides those of an (N, H, W, C) array), NCHW otherwise; the weight
is given to cuDNN in the same layout (a copy when it is not stored so) and the result
comes back in it.
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

_NCHW, _NHWC = D.NCHW, D.NHWC
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


def _as4d(c):
    return c.reshape(c.shape[0], c.shape[1], 1, c.shape[2]) if c.ndim == 3 else c


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


def _pads(op, geo, ohw, shapes):
    """(ph, pw) of geometry `geo` (:func:`_geometry`'s answer) when cuDNN takes it: the
    padding symmetric, the output size `ohw` (when given) the convolution's own, every
    array in `shapes` non-empty and below 2**31 elements; else None (counted)."""
    if geo is None:
        return D.fell_back(op, None, None, "asymmetric padding")
    pads, got = geo
    if ohw is not None and got != tuple(ohw):
        return D.fell_back(op, None, None, "output size beyond the convolution's")
    if min(got) <= 0 or not D.small_enough(*shapes):
        return D.fell_back(op, None, None, "empty or beyond 2**31 elements")
    return pads


def _in_lead_layout(direction, dt, lead, ins, out_shape, xs, ws_, ys, pads, stride, dil,
                    groups, detail):
    """Run `direction` on its two inputs `ins` laid out as activation `lead` is stored
    (NHWC when it is channels last, else NCHW), into a new output of `out_shape` in that
    layout: the cupy output, or None when ember's kernels must run it."""
    order = _NHWC if D.channels_last(lead) else _NCHW
    a, b = (D.in_layout(c, order) for c in ins)
    out = D.empty(out_shape, dt, order)
    ok = _conv(direction, dt, order, tuple(xs), tuple(ws_), tuple(ys), pads, tuple(stride),
               tuple(dil), int(groups), (a.data.ptr, b.data.ptr, out.data.ptr), detail)
    return out if ok else None


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
    ys = None if geo is None else (xc.shape[0], O) + geo[1]
    pads = _pads(op, geo, None, (xc.shape, wc.shape, ys))
    if pads is None:
        return None
    return _in_lead_layout("forward", dt, xc, (xc, wc), ys, xc.shape, wc.shape, ys, pads,
                           stride, dil, groups, _detail(input=xc, weight=wc))


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
    pads = _pads(op, _geometry(H, W, kh, kw, stride, pad, dil), gc.shape[2:],
                 (xs, wc.shape, gc.shape))
    if pads is None:
        return None
    return _in_lead_layout("backward_data", dt, gc, (wc, gc), xs, xs, wc.shape, gc.shape,
                           pads, stride, dil, groups, _detail(grad_output=gc, weight=wc))


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
    pads = _pads(op, _geometry(xc.shape[2], xc.shape[3], ws4[2], ws4[3], stride, pad, dil),
                 gc.shape[2:], (xc.shape, ws4, gc.shape))
    if pads is None:
        return None
    dw = _in_lead_layout("backward_filter", dt, xc, (xc, gc), ws4, xc.shape, ws4, gc.shape,
                         pads, stride, dil, groups, _detail(input=xc, grad_output=gc))
    if dw is None:
        return None
    return R.cp().ascontiguousarray(dw).reshape(tuple(wshape))
