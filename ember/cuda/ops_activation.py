"""The activations of ember.nn.functional.activation on CUDA arrays.

relu, sigmoid, tanh, gelu (erf and tanh forms) and silu run the unary kernels of
elementwise.cu (on a C-contiguous copy when the input is strided).  The other
forwards and every ``_*_backward`` op are CuPy elementwise kernels with the CPU
kernels' formulas.  dtype rules follow the CPU exactly: float16 is computed in
float32 and handed back as float16, integer inputs give the default float dtype,
complex inputs are refused (except by tanh, which defers to ember.tanh).
"""

import numpy as np

from ember.cuda._dispatch import gpu_op
from ember.cuda import _runtime as R
from ember._core.dtypes import dtype_kind

__all__ = []

_F16 = np.dtype(np.float16)
_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)

# Shared device helpers of the CuPy kernels (T is float or double: float16 is upcast).
_PREAMBLE = r"""
template <typename T> __device__ __forceinline__ T em_sigmoid(T x) {
  if (x >= T(0)) return T(1) / (T(1) + exp(-x));
  const T e = exp(x);
  return e / (T(1) + e);
}
"""

# name -> (input params, operation); output is always "T y".  v: the input (or the
# forward's output for the *_bwd_res kernels), gv: the incoming gradient.
_FORMULAS = {
    "leaky_relu": ("T v, float64 p0", "y = v > T(0) ? v : v * (T)p0"),
    "elu": ("T v, float64 p0, float64 p1, float64 p2",
            "y = v > T(0) ? v * (T)p1 : (T)(p0 * p1) * expm1(v * (T)p2)"),
    "softplus": ("T v, float64 p0, float64 p1",
                 "const T z = v * (T)p0; "
                 "const T sp = ((z > T(0) ? z : T(0)) + log1p(exp(-fabs(z)))) / (T)p0; "
                 "y = (v != v) ? v : (z > (T)p1 ? v : sp)"),
    "relu_bwd": ("T gv, T v", "y = v <= T(0) ? T(0) : gv"),
    "leaky_relu_bwd": ("T gv, T v, float64 p0", "y = v > T(0) ? gv : gv * (T)p0"),
    "hardtanh_bwd": ("T gv, T v, float64 p0, float64 p1",
                     "y = (v <= (T)p0 || v >= (T)p1) ? T(0) : gv"),
    "sigmoid_bwd": ("T gv, T v", "y = gv * v * (T(1) - v)"),
    "tanh_bwd": ("T gv, T v", "y = gv * (T(1) - v * v)"),
    "silu_bwd": ("T gv, T v",
                 "const T s = em_sigmoid(v); y = gv * s * (T(1) + v * (T(1) - s))"),
    "gelu_bwd": ("T gv, T v",
                 "y = gv * (T(0.5) * (T(1) + erf(v * T(0.70710678118654752440))) "
                 "+ v * T(0.39894228040143267794) * exp(T(-0.5) * v * v))"),
    "elu_bwd": ("T gv, T v, float64 p0, float64 p1, float64 p2",
                "y = v > T(0) ? gv * (T)p1 : gv * (T)(p0 * p1 * p2) * exp(v * (T)p2)"),
    "softplus_bwd": ("T gv, T v, float64 p0, float64 p1",
                     "y = v * (T)p0 > (T)p1 ? gv : gv * em_sigmoid(v * (T)p0)"),
}
_KERNELS = {}


def _ek(name):
    """The CuPy ElementwiseKernel for formula `name` (built once)."""
    k = _KERNELS.get(name)
    if k is None:
        params, body = _FORMULAS[name]
        k = R.cp().ElementwiseKernel(params, "T y", body, f"ember_act_{name}",
                                     preamble=_PREAMBLE)
        _KERNELS[name] = k
    return k


def _compute_dtype(x, opname):
    """The float dtype the CPU computes x's activation in (before the cast back)."""
    from ember._core.dtypes import default_float_dtype
    dt = x.dtype
    if dt == _F32 or dt == _F64:
        return dt
    if dtype_kind(dt) == "c":
        raise TypeError(f"{opname}: complex input (dtype {dt}) is not supported")
    return _F32 if dtype_kind(dt) == "f" else np.dtype(default_float_dtype())


def _result(out, orig):
    """Hand back as the CPU does: float inputs keep their dtype (float16 is cast back)."""
    if dtype_kind(orig) == "f" and out.dtype != orig:
        out = out.astype(orig)
    return R.from_cupy(out)


def _unary_ek(name, x, opname, *params):
    orig = x.dtype
    cdt = _compute_dtype(x, opname)
    c = R.as_cupy(x).astype(cdt, copy=False)
    return _result(_ek(name)(c, *[float(p) for p in params]), orig)


def _binary_ek(name, g, x, opname, *params):
    """formula(g, x, *params) with g cast to x's compute dtype and broadcast to x's shape."""
    cp = R.cp()
    orig = x.dtype
    cdt = _compute_dtype(x, opname)
    xc = R.as_cupy(x).astype(cdt, copy=False)
    gc = R.as_cupy(g) if hasattr(g, "is_cuda") else cp.asarray(np.asarray(g))
    gc = gc.astype(cdt, copy=False)
    if gc.shape != xc.shape:
        gc = cp.broadcast_to(gc, xc.shape)
    return _result(_ek(name)(gc, xc, *[float(p) for p in params]), orig)


def _unary_cu(op, x, opname):
    """The elementwise.cu kernel ember_<op>_<dt>_contig on a contiguous copy of x."""
    cp = R.cp()
    orig = x.dtype
    c = R.as_cupy(x)
    if R.suffix(orig) is None:          # integers: the CPU computes in the default float
        c = c.astype(_compute_dtype(x, opname))
    c = cp.ascontiguousarray(c)
    y = cp.empty(c.shape, dtype=c.dtype)
    n = int(c.size)
    if n:
        R.launch(f"ember_{op}_{R.suffix(c.dtype)}_contig", R.blocks(n), 256,
                 (R.from_cupy(c), R.from_cupy(y), n))
    return _result(y, orig)


def _floaty(x):
    return dtype_kind(x.dtype) == "f"


# ---------------------------------------------------------------- relu

@gpu_op("nn.functional.activation._relu")
def _relu(input):
    if _floaty(input) and R.suffix(input.dtype) is not None:
        return _unary_cu("relu", input, "relu")
    return NotImplemented               # integers: the op's definition (maximum(x, 0))


@gpu_op("nn.functional.activation._relu_backward")
def _relu_backward(g, r):
    if r.dtype in (_F32, _F64) and g.dtype == r.dtype and g.shape == r.shape:
        return _binary_ek("relu_bwd", g, r, "relu backward")
    return g * (r > 0)


# ---------------------------------------------------------------- hardtanh / leaky relu

@gpu_op("nn.functional.activation._hardtanh_backward")
def _hardtanh_backward(g, x, min_val, max_val):
    return _binary_ek("hardtanh_bwd", g, x, "hardtanh backward", min_val, max_val)


@gpu_op("nn.functional.activation._leaky_relu")
def _leaky_relu(input, negative_slope=0.01):
    return _unary_ek("leaky_relu", input, "leaky_relu", negative_slope)


@gpu_op("nn.functional.activation._leaky_relu_backward")
def _leaky_relu_backward(g, x, negative_slope):
    return _binary_ek("leaky_relu_bwd", g, x, "leaky_relu backward", negative_slope)


# ---------------------------------------------------------------- sigmoid / tanh

@gpu_op("nn.functional.sigmoid")
def sigmoid(input):
    return _unary_cu("sigmoid", input, "sigmoid")


@gpu_op("nn.functional.activation._sigmoid_backward")
def _sigmoid_backward(g, r):
    return _binary_ek("sigmoid_bwd", g, r, "sigmoid backward")


@gpu_op("nn.functional.tanh")
def tanh(input):
    if dtype_kind(input.dtype) == "c":
        return NotImplemented           # the op's definition: ember.tanh
    return _unary_cu("tanh", input, "tanh")


@gpu_op("nn.functional.activation._tanh_backward")
def _tanh_backward(g, r):
    return _binary_ek("tanh_bwd", g, r, "tanh backward")


# ---------------------------------------------------------------- silu / gelu

@gpu_op("nn.functional.activation._silu")
def _silu(input):
    return _unary_cu("silu", input, "silu")


@gpu_op("nn.functional.activation._silu_backward")
def _silu_backward(g, x):
    return _binary_ek("silu_bwd", g, x, "silu backward")


@gpu_op("nn.functional.activation._gelu")
def _gelu(input):
    return _unary_cu("gelu", input, "gelu")


@gpu_op("nn.functional.activation._gelu_backward")
def _gelu_backward(g, x):
    return _binary_ek("gelu_bwd", g, x, "gelu backward")


@gpu_op("nn.functional.activation._gelu_tanh")
def _gelu_tanh(input):
    if _floaty(input) and R.suffix(input.dtype) is not None:
        return _unary_cu("gelu_tanh", input, "gelu")
    return NotImplemented               # the op's definition: ember ops, on the GPU


# ---------------------------------------------------------------- elu / softplus

@gpu_op("nn.functional.activation._elu")
def _elu(input, alpha=1.0, scale=1.0, input_scale=1.0):
    return _unary_ek("elu", input, "elu", alpha, scale, input_scale)


@gpu_op("nn.functional.activation._elu_backward")
def _elu_backward(g, x, alpha, scale, input_scale):
    return _binary_ek("elu_bwd", g, x, "elu backward", alpha, scale, input_scale)


@gpu_op("nn.functional.softplus")
def softplus(input, beta=1.0, threshold=20.0):
    return _unary_ek("softplus", input, "softplus", beta, threshold)


@gpu_op("nn.functional.activation._softplus_backward")
def _softplus_backward(g, x, beta, threshold):
    return _binary_ek("softplus_bwd", g, x, "softplus backward", beta, threshold)
