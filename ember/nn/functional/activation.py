"""Activation functions (PyTorch's torch.nn.functional spellings and numerics).

Each hot activation is one differentiable op whose gradient rule is written with ember
ops (or with another differentiable op), so gradients of any order work.  GELU, SiLU and
sigmoid run fused CPU kernels.  ``inplace=True`` writes the result into the input (an
in-place operation autograd records when the input requires grad).

>>> import ember
>>> import ember.nn.functional as F
>>> x = ember.asarray([-2.0, 0.0, 3.0])
>>> F.relu(x).tolist(), F.hardtanh(x).tolist()
([0.0, 0.0, 3.0], [-1.0, 0.0, 1.0])
"""
import math

import numpy as np

from ember._core.array import ndarray
from ember._core.array import _is_grad_enabled as _grad_on
from ember._core.dtypes import default_float_dtype
from ember._api._util import numpy_view, empty_raw, as_array
from ember.autograd.registry import defop
from ember._core.dtypes import dtype_kind

__all__ = ["relu", "relu_", "relu6", "leaky_relu", "leaky_relu_", "gelu", "silu", "sigmoid",
           "tanh", "elu", "elu_", "selu", "celu", "softplus", "hardtanh", "hardtanh_", "mish",
           "hardsigmoid", "hardswish", "logsigmoid", "softsign", "tanhshrink", "threshold",
           "prelu", "glu"]

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


_EMBER = None


def _E():
    """The ember namespace, imported on first use and kept (an import statement per
    call costs about half a microsecond of every activation)."""
    global _EMBER
    if _EMBER is None:
        import ember
        _EMBER = ember
    return _EMBER


_KERNELS = None


def _K():
    """The CPU activation kernels (ember._kernels.cpu.embedding), imported on first use
    and kept: an import statement per call cost 0.5 us of each activation's overhead."""
    global _KERNELS
    if _KERNELS is None:
        from ember._kernels.cpu import embedding as K
        _KERNELS = K
    return _KERNELS


def _check_array(x, opname):
    if not isinstance(x, ndarray):
        raise TypeError(f"{opname}: expected an ember array, got {type(x).__name__}")


def _float_input(x, opname):
    """x as a C-contiguous float32/float64 array (other floats and integers are cast)."""
    dt = x.dtype
    if dt != np.float32 and dt != np.float64:
        if dtype_kind(dt) == "c":
            raise TypeError(f"{opname}: complex input (dtype {dt}) is not supported")
        x = x.astype(np.float32 if dtype_kind(dt) == "f" else default_float_dtype())
    if not x.is_contiguous():
        x = x.copy()
    return x


def _unary_kernel(kernel, x, opname, *params):
    """kernel(x, *params, out) over flat views (float16 computes in float32)."""
    _check_array(x, opname)
    orig = x.dtype
    xc = _float_input(x, opname)
    out = empty_raw(x.shape, xc.dtype)
    kernel(numpy_view(xc).reshape(-1), *params, numpy_view(out).reshape(-1))
    if dtype_kind(orig) == "f" and orig != out.dtype:
        out = out.astype(orig)
    return out


def _binary_kernel(kernel, g, x, opname, *params):
    """kernel(g, x, *params, out) over flat views; g is cast/copied to x's float dtype."""
    orig = x.dtype
    xc = _float_input(x, opname)
    g = as_array(g)
    if g.dtype != xc.dtype:
        g = g.astype(xc.dtype)
    if g.shape != xc.shape:
        g = _E().broadcast_to(g, xc.shape)
    if not g.is_contiguous():
        g = g.copy()
    out = empty_raw(xc.shape, xc.dtype)
    kernel(numpy_view(g).reshape(-1), numpy_view(xc).reshape(-1), *params,
           numpy_view(out).reshape(-1))
    if dtype_kind(orig) == "f" and orig != out.dtype:
        out = out.astype(orig)
    return out


def _inplace(input, out):
    """Write `out` into `input` (recorded by autograd when it tracks) and return input."""
    input[...] = out
    return input


# ---------------------------------------------------------------- relu

def _relu_backward_grad(gg, res, g, r):
    return _relu_backward(gg, r), None


@defop("nn.functional.activation._relu_backward", grad=_relu_backward_grad, save_args=True)
def _relu_backward(g, r):
    """g where r > 0 else 0 (ReLU's backward; linear in g, so its own gradient is itself)."""
    if (r.dtype == np.float32 or r.dtype == np.float64) and g.dtype == r.dtype \
            and g.shape == r.shape:
        return _binary_kernel(_K().relu_backward, g, r, "relu backward")
    return g * (r > 0)


def _relu_grad(g, res, input):
    if not _grad_on() and type(g) is ndarray:
        # backward not recorded: ReLU's backward kernel straight away (what the
        # _relu_backward op runs on these arrays, without its dispatch and checks)
        dt = res.dtype
        if g.dtype == dt and (dt == np.float32 or dt == np.float64) and g.shape == res.shape \
                and g.is_contiguous() and res.is_contiguous() and not res.is_cuda \
                and not g.is_cuda:
            out = empty_raw(res.shape, dt)
            _K().relu_backward(numpy_view(g).reshape(-1), numpy_view(res).reshape(-1),
                               numpy_view(out).reshape(-1))
            return (out,)
    return (_relu_backward(g, res),)


@defop("nn.functional.activation._relu", grad=_relu_grad, save_args=False, save_result=True)
def _relu(input):
    return _E().maximum(input, 0)


def relu(input, inplace=False):
    """max(x, 0), elementwise.

    >>> import ember
    >>> import ember.nn.functional as F
    >>> F.relu(ember.asarray([-1.0, 0.5])).tolist()
    [0.0, 0.5]
    """
    _check_array(input, "relu")
    if inplace:
        return _inplace(input, _relu(input))
    return _relu(input)


def relu_(input):
    """In-place ``relu``.

    >>> import ember
    >>> import ember.nn.functional as F
    >>> x = ember.asarray([-1.0, 2.0]); _ = F.relu_(x); x.tolist()
    [0.0, 2.0]
    """
    return relu(input, inplace=True)


# ---------------------------------------------------------------- hardtanh / relu6

def _hardtanh_backward_grad(gg, res, g, x, min_val, max_val):
    return _hardtanh_backward(gg, x, min_val, max_val), None


@defop("nn.functional.activation._hardtanh_backward", grad=_hardtanh_backward_grad,
       save_args=True)
def _hardtanh_backward(g, x, min_val, max_val):
    """g where min_val < x < max_val, else 0."""
    return _binary_kernel(_K().hardtanh_backward, g, x, "hardtanh backward", float(min_val),
                          float(max_val))


def _hardtanh_grad(g, res, input, min_val=-1.0, max_val=1.0):
    return (_hardtanh_backward(g, input, min_val, max_val),)


@defop("nn.functional.activation._hardtanh", grad=_hardtanh_grad, save_args=True)
def _hardtanh(input, min_val=-1.0, max_val=1.0):
    return _E().clip(input, min_val, max_val)


_hardtanh.fn.device_generic = True      # ember ops only: the same body runs on a GPU


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    """Clamp to [min_val, max_val] (gradient 1 strictly inside, 0 outside).

    >>> import ember
    >>> import ember.nn.functional as F
    >>> F.hardtanh(ember.asarray([-3.0, 0.5, 3.0]), -2.0, 2.0).tolist()
    [-2.0, 0.5, 2.0]
    """
    _check_array(input, "hardtanh")
    if min_val > max_val:
        raise ValueError(f"hardtanh: min_val ({min_val}) cannot be greater than max_val "
                         f"({max_val})")
    out = _hardtanh(input, min_val, max_val)
    return _inplace(input, out) if inplace else out


def hardtanh_(input, min_val=-1.0, max_val=1.0):
    """In-place ``hardtanh``.

    >>> import ember
    >>> import ember.nn.functional as F
    >>> x = ember.asarray([-3.0, 3.0]); _ = F.hardtanh_(x); x.tolist()
    [-1.0, 1.0]
    """
    return hardtanh(input, min_val, max_val, inplace=True)


def relu6(input, inplace=False):
    """min(max(x, 0), 6).

    >>> import ember
    >>> import ember.nn.functional as F
    >>> F.relu6(ember.asarray([-1.0, 3.0, 9.0])).tolist()
    [0.0, 3.0, 6.0]
    """
    return hardtanh(input, 0.0, 6.0, inplace)


# ---------------------------------------------------------------- leaky relu

def _leaky_relu_backward_grad(gg, res, g, x, negative_slope):
    return _leaky_relu_backward(gg, x, negative_slope), None


@defop("nn.functional.activation._leaky_relu_backward", grad=_leaky_relu_backward_grad,
       save_args=True)
def _leaky_relu_backward(g, x, negative_slope):
    """g where x > 0, else negative_slope * g."""
    return _binary_kernel(_K().leaky_relu_backward, g, x, "leaky_relu backward",
                          float(negative_slope))


def _leaky_relu_grad(g, res, input, negative_slope=0.01):
    return (_leaky_relu_backward(g, input, negative_slope),)


@defop("nn.functional.activation._leaky_relu", grad=_leaky_relu_grad, save_args=True)
def _leaky_relu(input, negative_slope=0.01):
    return _unary_kernel(_K().leaky_relu_forward, input, "leaky_relu", float(negative_slope))


def leaky_relu(input, negative_slope=0.01, inplace=False):
    """x if x > 0 else negative_slope * x.

    >>> import ember
    >>> import ember.nn.functional as F
    >>> F.leaky_relu(ember.asarray([-2.0, 2.0]), 0.25).tolist()
    [-0.5, 2.0]
    """
    _check_array(input, "leaky_relu")
    out = _leaky_relu(input, negative_slope)
    return _inplace(input, out) if inplace else out


def leaky_relu_(input, negative_slope=0.01):
    """In-place ``leaky_relu``.

    >>> import ember
    >>> import ember.nn.functional as F
    >>> x = ember.asarray([-2.0]); _ = F.leaky_relu_(x, 0.5); x.tolist()
    [-1.0]
    """
    return leaky_relu(input, negative_slope, inplace=True)


# ---------------------------------------------------------------- sigmoid

def _sigmoid_backward_grad(gg, res, g, r):
    return _sigmoid_backward(gg, r), gg * g * (1 - 2 * r)


@defop("nn.functional.activation._sigmoid_backward", grad=_sigmoid_backward_grad,
       save_args=True)
def _sigmoid_backward(g, r):
    """g * r * (1 - r) from the output r = sigmoid(x)."""
    return _binary_kernel(_K().sigmoid_backward, g, r, "sigmoid backward")


def _sigmoid_grad(g, res, input):
    return (_sigmoid_backward(g, res),)


@defop("nn.functional.sigmoid", grad=_sigmoid_grad, save_args=False, save_result=True)
def sigmoid(input):
    """1 / (1 + exp(-x)), without overflow for large ``|x|``.

    >>> import ember
    >>> import ember.nn.functional as F
    >>> F.sigmoid(ember.asarray([0.0, 100.0, -100.0], dtype=ember.float64)).tolist()
    [0.5, 1.0, 3.720075976020836e-44]
    """
    return _unary_kernel(_K().sigmoid_forward, input, "sigmoid")


def logsigmoid(input):
    """log(sigmoid(x)) = -softplus(-x), stable for large ``|x|``.

    >>> import ember
    >>> import ember.nn.functional as F
    >>> round(F.logsigmoid(ember.asarray([0.0])).item(), 5)
    -0.69315
    """
    return -softplus(-input)


def _tanh_backward_grad(gg, res, g, r):
    return _tanh_backward(gg, r), gg * g * (-2 * r)


@defop("nn.functional.activation._tanh_backward", grad=_tanh_backward_grad, save_args=True)
def _tanh_backward(g, r):
    """g * (1 - r^2) from the output r = tanh(x)."""
    return _binary_kernel(_K().tanh_backward, g, r, "tanh backward")


def _tanh_grad(g, res, input):
    return (_tanh_backward(g, res),)


@defop("nn.functional.tanh", grad=_tanh_grad, save_args=False, save_result=True)
def tanh(input):
    """Hyperbolic tangent (a vectorised float32 kernel; float64 uses libm).

    >>> import ember
    >>> import ember.nn.functional as F
    >>> F.tanh(ember.asarray([0.0])).tolist()
    [0.0]
    """
    if isinstance(input, ndarray) and (dtype_kind(input.dtype) == "c" or input.dtype == np.float32
                                       or input.dtype == np.float64):
        # the elementwise loop: float32 runs tanh_forward's kernel (em_vmath.h), float64
        # libm's, strided inputs without a copy, and less call overhead
        return _E().tanh(input)
    return _unary_kernel(_K().tanh_forward, input, "tanh")


# ---------------------------------------------------------------- silu

def _silu_backward_grad(gg, res, g, x):
    s = sigmoid(x)
    d2 = s * (1 - s) * (2 + x * (1 - 2 * s))
    return _silu_backward(gg, x), gg * g * d2


@defop("nn.functional.activation._silu_backward", grad=_silu_backward_grad, save_args=True)
def _silu_backward(g, x):
    return _binary_kernel(_K().silu_backward, g, x, "silu backward")


def _silu_grad(g, res, input, inplace=False):
    return (_silu_backward(g, input),)


@defop("nn.functional.activation._silu", grad=_silu_grad, save_args=True)
def _silu(input):
    return _unary_kernel(_K().silu_forward, input, "silu")


def silu(input, inplace=False):
    """x * sigmoid(x) (also called swish).

    >>> import ember
    >>> import ember.nn.functional as F
    >>> round(F.silu(ember.asarray([1.0])).item(), 5)
    0.73106
    """
    _check_array(input, "silu")
    out = _silu(input)
    return _inplace(input, out) if inplace else out


# ---------------------------------------------------------------- gelu

def _gelu_backward_grad(gg, res, g, x):
    E = _E()
    pdf = E.exp(-0.5 * x * x) * _INV_SQRT_2PI
    return _gelu_backward(gg, x), gg * g * pdf * (2 - x * x)


@defop("nn.functional.activation._gelu_backward", grad=_gelu_backward_grad, save_args=True)
def _gelu_backward(g, x):
    return _binary_kernel(_K().gelu_backward, g, x, "gelu backward")


def _gelu_grad(g, res, input):
    return (_gelu_backward(g, input),)


@defop("nn.functional.activation._gelu", grad=_gelu_grad, save_args=True)
def _gelu(input):
    return _unary_kernel(_K().gelu_forward, input, "gelu")


def _gelu_tanh_parts(x):
    """(s, dz) of the tanh GELU written with ember ops: s = sigmoid(z), z = 2k (x + c x^3),
    dz = dz/dx (the device-agnostic path, for GPU arrays the CPU kernels cannot read)."""
    k2, c = 2 * _SQRT_2_OVER_PI, 0.044715
    return sigmoid(k2 * (x + c * x * x * x)), k2 * (1 + 3 * c * x * x)


def _gelu_tanh_backward_grad(gg, res, g, x):
    # d/dx of s + x s (1 - s) z' (s = sigmoid(z), z = 2k (x + c x^3), z' = 2k (1 + 3c x^2))
    s, dz = _gelu_tanh_parts(x)
    ds = s * (1 - s)
    d2 = 2 * ds * dz + x * ds * (1 - 2 * s) * dz * dz + x * ds * (6 * 2 * _SQRT_2_OVER_PI
                                                                   * 0.044715 * x)
    return _gelu_tanh_backward(gg, x), gg * g * d2


def _half_on_gpu(x):
    return x.is_cuda and x.dtype.itemsize == 2 and dtype_kind(x.dtype) == "f"


@defop("nn.functional.activation._gelu_tanh_backward", grad=_gelu_tanh_backward_grad,
       save_args=True)
def _gelu_tanh_backward(g, x):
    """g times the tanh GELU's derivative at x (one CPU kernel)."""
    return _binary_kernel(_K().gelu_tanh_backward, g, x, "gelu backward")


def _gelu_tanh_backward_composite(g, x):
    """_gelu_tanh_backward written with ember ops (GPU arrays; differentiable as it is)."""
    half = _half_on_gpu(x)
    xw = x.astype(np.float32) if half else x
    s, dz = _gelu_tanh_parts(xw)
    gx = (g.astype(np.float32) if half else g) * (s + xw * (s * (1 - s)) * dz)
    return gx.astype(x.dtype) if half else gx


def _gelu_tanh_grad(g, res, input):
    if input.is_cuda:
        return (_gelu_tanh_backward_composite(g, input),)
    return (_gelu_tanh_backward(g, input),)


@defop("nn.functional.activation._gelu_tanh", grad=_gelu_tanh_grad, save_args=True)
def _gelu_tanh(input):
    # 0.5 x (1 + tanh(k (x + 0.044715 x^3))) computed as x sigmoid(2k (...)) in one
    # kernel (no cancellation for negative x).  16-bit inputs compute in float32 and
    # round once, as PyTorch (every step in 16 bits would round tanh to +-1 early).
    if not input.is_cuda:
        return _unary_kernel(_K().gelu_tanh_forward, input, "gelu")
    x = input.astype(np.float32) if _half_on_gpu(input) else input
    out = x * _gelu_tanh_parts(x)[0]
    return out.astype(input.dtype) if out.dtype != input.dtype else out


def gelu(input, approximate="none"):
    """Gaussian error linear unit: x * Phi(x) (``approximate='tanh'``: PyTorch's tanh
    approximation).

    >>> import ember
    >>> import ember.nn.functional as F
    >>> [round(v, 5) for v in F.gelu(ember.asarray([-1.0, 1.0])).tolist()]
    [-0.15866, 0.84134]
    """
    _check_array(input, "gelu")
    if approximate == "none":
        return _gelu(input)
    if approximate == "tanh":
        return _gelu_tanh(input)
    raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")


# ---------------------------------------------------------------- elu family

def _elu_backward_grad(gg, res, g, x, alpha, scale, input_scale):
    E = _E()
    # d/dx of the negative branch's derivative: input_scale^2 * scale * alpha * exp(is x)
    neg = (x <= 0) * (scale * alpha * input_scale * input_scale) * E.exp(x * input_scale)
    return _elu_backward(gg, x, alpha, scale, input_scale), gg * g * neg


@defop("nn.functional.activation._elu_backward", grad=_elu_backward_grad, save_args=True)
def _elu_backward(g, x, alpha, scale, input_scale):
    return _binary_kernel(_K().elu_backward, g, x, "elu backward", float(alpha), float(scale),
                          float(input_scale))


def _elu_grad(g, res, input, alpha=1.0, scale=1.0, input_scale=1.0):
    return (_elu_backward(g, input, alpha, scale, input_scale),)


@defop("nn.functional.activation._elu", grad=_elu_grad, save_args=True)
def _elu(input, alpha=1.0, scale=1.0, input_scale=1.0):
    return _unary_kernel(_K().elu_forward, input, "elu", float(alpha), float(scale),
                         float(input_scale))


def elu(input, alpha=1.0, inplace=False):
    """x if x > 0 else alpha * (exp(x) - 1).

    >>> import ember
    >>> import ember.nn.functional as F
    >>> [round(v, 4) for v in F.elu(ember.asarray([-1.0, 2.0])).tolist()]
    [-0.6321, 2.0]
    """
    _check_array(input, "elu")
    out = _elu(input, alpha)
    return _inplace(input, out) if inplace else out


def elu_(input, alpha=1.0):
    """In-place ``elu``.

    >>> import ember
    >>> import ember.nn.functional as F
    >>> x = ember.asarray([2.0]); _ = F.elu_(x); x.tolist()
    [2.0]
    """
    return elu(input, alpha, inplace=True)


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def selu(input, inplace=False):
    """scale * elu(x, alpha) with PyTorch's fixed alpha and scale.

    >>> import ember
    >>> import ember.nn.functional as F
    >>> round(F.selu(ember.asarray([1.0])).item(), 4)
    1.0507
    """
    _check_array(input, "selu")
    out = _elu(input, _SELU_ALPHA, _SELU_SCALE)
    return _inplace(input, out) if inplace else out


def celu(input, alpha=1.0, inplace=False):
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1)).

    >>> import ember
    >>> import ember.nn.functional as F
    >>> round(F.celu(ember.asarray([-1.0]), alpha=2.0).item(), 4)
    -0.7869
    """
    _check_array(input, "celu")
    if alpha == 0:
        raise ValueError("celu: alpha must not be zero")
    out = _elu(input, alpha, 1.0, 1.0 / alpha)
    return _inplace(input, out) if inplace else out


# ---------------------------------------------------------------- softplus

def _softplus_backward_grad(gg, res, g, x, beta, threshold):
    # d/dx [g * sigmoid(beta x)] = g * beta * s * (1 - s) below the threshold
    s = sigmoid(x * beta)
    d2 = (x * beta <= threshold) * (beta * s * (1 - s))
    return _softplus_backward(gg, x, beta, threshold), gg * g * d2


@defop("nn.functional.activation._softplus_backward", grad=_softplus_backward_grad,
       save_args=True)
def _softplus_backward(g, x, beta, threshold):
    return _binary_kernel(_K().softplus_backward, g, x, "softplus backward", float(beta),
                          float(threshold))


def _softplus_grad(g, res, input, beta=1.0, threshold=20.0):
    return (_softplus_backward(g, input, beta, threshold),)


@defop("nn.functional.softplus", grad=_softplus_grad, save_args=True)
def softplus(input, beta=1.0, threshold=20.0):
    """log(1 + exp(beta * x)) / beta, and x itself where beta * x > threshold.

    >>> import ember
    >>> import ember.nn.functional as F
    >>> [round(v, 4) for v in F.softplus(ember.asarray([0.0, 30.0])).tolist()]
    [0.6931, 30.0]
    """
    return _unary_kernel(_K().softplus_forward, input, "softplus", float(beta),
                         float(threshold))


# ---------------------------------------------------------------- composites

def mish(input, inplace=False):
    """x * tanh(softplus(x)).

    >>> import ember
    >>> import ember.nn.functional as F
    >>> round(F.mish(ember.asarray([1.0])).item(), 4)
    0.8651
    """
    out = input * tanh(softplus(input))
    return _inplace(input, out) if inplace else out


def hardsigmoid(input, inplace=False):
    """relu6(x + 3) / 6.

    >>> import ember
    >>> import ember.nn.functional as F
    >>> F.hardsigmoid(ember.asarray([-4.0, 0.0, 4.0])).tolist()
    [0.0, 0.5, 1.0]
    """
    out = _hardtanh(input + 3.0, 0.0, 6.0) / 6.0
    return _inplace(input, out) if inplace else out


def hardswish(input, inplace=False):
    """x * relu6(x + 3) / 6.

    >>> import ember
    >>> import ember.nn.functional as F
    >>> F.hardswish(ember.asarray([-4.0, 0.0, 4.0])).tolist()
    [-0.0, 0.0, 4.0]
    """
    out = input * (_hardtanh(input + 3.0, 0.0, 6.0) / 6.0)
    return _inplace(input, out) if inplace else out


def softsign(input):
    """``x / (1 + |x|)``.

    >>> import ember
    >>> import ember.nn.functional as F
    >>> F.softsign(ember.asarray([1.0])).tolist()
    [0.5]
    """
    return input / (1 + _E().abs(input))


def tanhshrink(input):
    """x - tanh(x).

    >>> import ember
    >>> import ember.nn.functional as F
    >>> F.tanhshrink(ember.asarray([0.0])).tolist()
    [0.0]
    """
    return input - tanh(input)


def threshold(input, threshold, value, inplace=False):
    """x if x > threshold else value.

    >>> import ember
    >>> import ember.nn.functional as F
    >>> F.threshold(ember.asarray([0.5, 2.0]), 1.0, -1.0).tolist()
    [-1.0, 2.0]
    """
    E = _E()
    out = E.where(input > threshold, input, E.asarray(value, dtype=input.dtype))
    return _inplace(input, out) if inplace else out


def prelu(input, weight):
    """x if x > 0 else weight * x, weight broadcast over the channel axis 1.

    >>> import ember
    >>> import ember.nn.functional as F
    >>> F.prelu(ember.asarray([[-2.0, 2.0]]), ember.asarray([0.25])).tolist()
    [[-0.5, 2.0]]
    """
    E = _E()
    if weight.size == 1:
        weight = weight.reshape(())     # one slope: the output keeps the input's shape
    elif input.ndim >= 2:
        if weight.size != input.shape[1]:
            raise ValueError(f"prelu: weight has {weight.size} elements but the input has "
                             f"{input.shape[1]} channels (axis 1)")
        weight = weight.reshape((-1,) + (1,) * (input.ndim - 2))
    return E.where(input > 0, input, weight * input)


def glu(input, dim=-1, *, axis=None):
    """a * sigmoid(b) where a, b are the two halves of `input` along `dim` (alias `axis`).

    >>> import ember
    >>> import ember.nn.functional as F
    >>> F.glu(ember.ones((2, 4))).shape
    (2, 2)
    """
    if axis is not None:
        if dim != -1 and dim != axis:
            raise TypeError(f"glu: got both dim={dim} and axis={axis}")
        dim = axis
    n = input.shape[dim]
    if n % 2:
        raise ValueError(f"glu: halving dimension must be even, but dimension {dim} is size {n}")
    E = _E()
    a, b = E.split(input, 2, axis=dim)
    return a * sigmoid(b)
