"""Layer + ReLU as one op on the CPU: ``linear_relu`` and ``conv2d_relu``.

``relu(linear(x, w, b))`` and ``relu(conv2d(x, w, b, ...))`` computed as ONE
differentiable op each, with the same numbers and gradients as the two ops:

* forward: the GEMM (or the direct convolution) writes its output, and the bias
  and the ReLU are applied in the same pass (for the convolution, inside the
  kernel while each sample is in cache); the pre-activation is never stored;
* backward: the output gradient is masked by ``y > 0`` and the bias gradient summed in
  the same pass over it (``ember._kernels.cpu.fused``: vectorised, on ember arrays
  for the linear layer), then the two GEMMs (or the two adjoint convolutions) take the
  masked gradient.

One node instead of two; the bias add and the ReLU are one pass instead of two, and
so are ReLU's backward and the bias gradient.

Where they are used: ``nn.Sequential`` calls them for a ``Linear`` (when
``ember.nn.modules.container.fuse_enabled``, on by default) or a ``Conv2d`` (when
``fuse_conv_enabled`` too, off by default: not shown to pay, benchmarks/README.md)
followed by a ``ReLU`` when neither module has hooks or a replaced ``forward``, and
the input is a CPU float32/float64 array of the plain shape (``Sequential.forward``);
``TransformerEncoderLayer``'s feed-forward for ``activation=relu``.
The pre-activation is internal to the Sequential, so no user code can hold it,
hook it or ``retain_grad`` it: the fusion cannot be observed except through speed.
Written by hand, ``F.relu(F.linear(x, w, b))`` stays two ops.

When the backward is itself recorded (``create_graph=True``), the gradient is
written with the differentiable ops (``_relu_backward``, ``@``, the adjoint
convolutions), so higher derivatives work.

>>> import ember
>>> from ember.nn.functional.fused import linear_relu
>>> linear_relu(ember.asarray([[1.0, -2.0]]), ember.ones((2, 2)), ember.asarray([0.5, 2.0])).tolist()
[[0.0, 1.0]]
"""
import sys

import numpy as np

from ember._core.array import ndarray
from ember._core.array import _is_grad_enabled as _grad_on
from ember._api._util import numpy_view, empty_raw
from ember.autograd.registry import defop
from ember._kernels.cpu import fused as _fk
from ember._kernels.cpu.gemm import matmul as _gemm
from ember.nn.functional import conv as _cv
from ember.nn.functional.activation import _relu_backward
from ember.nn.functional.linear import _host_gemm_grads

__all__ = ["linear_relu", "conv2d_relu"]

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def _autocasting():
    """Inside an autocast region linear/conv cast their arguments by op name: not fused."""
    amp = sys.modules.get("ember.amp.autocast")
    return amp is not None and amp._ACTIVE[0] > 0


def _contig(a):
    return a if a.is_contiguous() else a.copy()


def _masked_grad(g, y, shape3, need_bias, sum_axes):
    """(g where y > 0, its sum over `sum_axes` or None) for the ReLU output y."""
    if _grad_on() or g.dtype != y.dtype or g.shape != y.shape or shape3[2] == 1:
        # a recorded backward (create_graph) or other arguments: the differentiable ops
        gm = _relu_backward(g, y)
        return gm, (gm.sum(axis=sum_axes) if need_bias else None)
    g = _contig(g)
    gm = empty_raw(y.shape, y.dtype)
    gb = empty_raw((shape3[1],), y.dtype) if need_bias else None
    _fk.relu_grad_bias(numpy_view(g).reshape(shape3), numpy_view(y).reshape(shape3),
                       numpy_view(gm).reshape(shape3),
                       None if gb is None else numpy_view(gb))
    return gm, gb


# ------------------------------------------------------------------ linear + relu

def _linear_relu_grad(g, y, input, weight, bias=None):
    need_b = bias is not None and bias.requires_grad
    if not _grad_on() and g.dtype == y.dtype and g.shape == y.shape and not g.is_cuda:
        # backward not recorded: ReLU's mask and the bias gradient (the column sums of the
        # masked gradient) in one pass over g, then the two GEMMs, straight from the kernels
        r = _fk.rows_relu_grad_bias(_contig(g), y, need_b)
        if r is not None:
            gm, gb = r
            gi, gw = _host_gemm_grads(gm, input, weight)
            return gi, gw, gb
    O = y.shape[-1]
    rows = y.size // O if O else 0
    gm, gb = _masked_grad(g, y, (rows, O, 1), need_b, tuple(range(y.ndim - 1)))
    gi = gm @ weight if input.requires_grad else None
    gw = None
    if weight.requires_grad:
        if y.ndim == 2:
            gw = gm.T @ input
        else:
            gw = gm.reshape((rows, O)).T @ input.reshape((rows, input.shape[-1]))
    return gi, gw, gb


@defop("nn.functional.fused._linear_relu", grad=_linear_relu_grad, save_args=True,
       save_result=True)
def _linear_relu(input, weight, bias):
    """The op behind ``linear_relu``, on arguments ``fusable_linear`` accepted."""
    xs, O = input.shape, weight.shape[0]
    out = empty_raw(xs[:-1] + (O,), input.dtype)
    if len(xs) == 2:
        _gemm(numpy_view(input), numpy_view(weight).T, numpy_view(out))
    else:
        M = input.size // xs[-1] if xs[-1] else int(np.prod(xs[:-1]))
        _gemm(numpy_view(input).reshape(M, xs[-1]), numpy_view(weight).T,
              numpy_view(out).reshape(M, O))
    _fk.rows_bias_relu(out, None if bias is None else _contig(bias))
    return out


def linear_relu(input, weight, bias=None):
    """``relu(input @ weight.T + bias)`` in one op: input (..., in_features) float32 or
    float64 on the CPU (contiguous when more than 2-d), weight (out_features, in_features), bias (out_features,) or
    None.  Same result and gradients as ``F.relu(F.linear(input, weight, bias))``.

    >>> import ember
    >>> from ember.nn.functional.fused import linear_relu
    >>> linear_relu(ember.ones((1, 3)), -ember.ones((2, 3))).tolist()
    [[0.0, 0.0]]
    """
    if not fusable_linear(input, weight, bias):
        raise ValueError(f"linear_relu: expects CPU float32/float64 input (..., in) with "
                         f"weight (out, in) and bias (out,) or None of its dtype; got input "
                         f"{tuple(input.shape)} {input.dtype}, weight {tuple(weight.shape)} "
                         f"{weight.dtype}" + ("" if bias is None else
                                              f", bias {tuple(bias.shape)} {bias.dtype}"))
    return _linear_relu(input, weight, bias)


def fusable_linear(input, weight, bias):
    """Whether ``linear_relu`` takes these arguments (else: linear, then relu)."""
    if not (isinstance(input, ndarray) and isinstance(weight, ndarray)):
        return False
    dt = input.dtype
    if input.ndim < 2 or weight.ndim != 2 or dt not in _FLOATS or weight.dtype != dt \
            or input.shape[-1] != weight.shape[1] or input.is_cuda or weight.is_cuda \
            or (input.ndim > 2 and not input.is_contiguous()) or _autocasting():
        return False
    if bias is not None and (not isinstance(bias, ndarray) or bias.dtype != dt
                             or bias.shape != (weight.shape[0],) or bias.is_cuda):
        return False
    return True


# ------------------------------------------------------------------ conv2d + relu

def _conv_relu_grad(g, y, x, w, b, stride, pad, dil, groups):
    need_b = b is not None and b.requires_grad
    N, O = y.shape[0], y.shape[1]
    gm, gb = _masked_grad(g, y, (N, O, y.size // (N * O) if N * O else 0), need_b, (0, 2, 3))
    gx, gw, _ = _cv._conv_rule(gm, None, x, w, None, stride, pad, dil, groups)
    return gx, gw, gb


@defop("nn.functional.fused._conv_relu", grad=_conv_relu_grad, save_args=True,
       save_result=True)
def _conv_relu(x, w, b, stride, pad, dil, groups):
    xv = _cv._cview(x)
    if _cv._FAST and xv.dtype == _cv._F32:
        wv = _cv._cview(w)
        N, C, H, W = xv.shape
        O, Cg, kh, kw = wv.shape
        OH = _cv._out_len(H, pad[0], pad[1], dil[0], kh, stride[0])
        OW = _cv._out_len(W, pad[2], pad[3], dil[1], kw, stride[1])
        out = empty_raw((N, O, OH, OW), xv.dtype)
        _cv._ck.conv2d_forward_f32(xv, wv, None if b is None else _cv._cview(b),
                                   numpy_view(out), stride[0], stride[1], pad[0], pad[1],
                                   pad[2], pad[3], dil[0], dil[1], groups, True)
        return out
    out = _cv._conv(x, w, b, stride, pad, dil, groups)     # grad mode is off in here
    ov = numpy_view(out)
    N, O = ov.shape[:2]
    _fk.bias_relu(ov.reshape(N, O, -1), None)
    return out


def conv2d_relu(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """``relu(conv2d(input, weight, bias, ...))`` in one op, for batched (N, C, H, W)
    float32/float64 input on the CPU; same arguments, result and gradients as
    ``F.relu(F.conv2d(...))``.

    >>> import ember
    >>> from ember.nn.functional.fused import conv2d_relu
    >>> conv2d_relu(ember.ones((1, 1, 3, 3)), -ember.ones((1, 1, 2, 2)), padding=1)[0, 0, 0].tolist()
    [0.0, 0.0, 0.0, 0.0]
    """
    op = "conv2d_relu"
    if not fusable_conv2d(input, weight, bias):
        raise ValueError(f"{op}: expects 4-d CPU float32/float64 input with weight and bias "
                         f"of its dtype")
    x, w, b, stride, dilation, _ = _cv._prepare(op, 2, input, weight, bias, stride, dilation,
                                                groups, False)
    pad = _cv._padding(op, padding, 2, tuple(w.shape[2:]), stride, dilation)
    _cv._check_kernel_fits(op, x, tuple(w.shape[2:]), pad, dilation, 2)
    return _conv_relu(x, w, b, stride, pad, dilation, groups)


def fusable_conv2d(input, weight, bias):
    """Whether ``conv2d_relu`` takes these arrays (else: conv2d, then relu)."""
    if not (isinstance(input, ndarray) and isinstance(weight, ndarray)):
        return False
    dt = input.dtype
    if input.ndim != 4 or weight.ndim != 4 or dt not in _FLOATS or weight.dtype != dt \
            or input.is_cuda or weight.is_cuda or _autocasting():
        return False
    if bias is not None and (not isinstance(bias, ndarray) or bias.dtype != dt
                             or bias.is_cuda):
        return False
    return True
