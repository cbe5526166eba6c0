"""Activation modules: thin wrappers over ember.nn.functional.

>>> import ember
>>> from ember import nn
>>> nn.Sequential(nn.Linear(2, 2), nn.GELU())(ember.ones((1, 2))).shape
(1, 2)
"""
from ember._core.array import ndarray
from ember.nn.modules.module import Module
from ember.nn.functional.activation import _relu
from ember.nn.functional.activation import (
    relu, relu6, leaky_relu, gelu, silu, sigmoid, tanh, elu, selu, celu, softplus, hardtanh,
    mish, hardsigmoid, hardswish, logsigmoid, softsign, tanhshrink, threshold, prelu, glu)

__all__ = ["ReLU", "ReLU6", "LeakyReLU", "GELU", "SiLU", "Sigmoid", "Tanh", "ELU", "SELU",
           "CELU", "Softplus", "Hardtanh", "Mish", "Hardsigmoid", "Hardswish", "LogSigmoid",
           "Softsign", "Tanhshrink", "Threshold", "PReLU", "GLU", "Softmax", "LogSoftmax",
           "Softmin"]


class _Inplace(Module):
    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class ReLU(_Inplace):
    """max(x, 0).

    >>> import ember
    >>> from ember import nn
    >>> nn.ReLU()(ember.asarray([-1.0, 1.0])).tolist()
    [0.0, 1.0]
    """

    def forward(self, input):
        if type(input) is ndarray and not self.inplace:
            return _relu(input)         # what relu() runs, without its argument checks
        return relu(input, self.inplace)


class ReLU6(_Inplace):
    """min(max(x, 0), 6).

    >>> import ember
    >>> from ember import nn
    >>> nn.ReLU6()(ember.asarray([7.0])).tolist()
    [6.0]
    """

    def forward(self, input):
        return relu6(input, self.inplace)


class LeakyReLU(Module):
    """x if x > 0 else negative_slope * x.

    >>> from ember import nn
    >>> nn.LeakyReLU(0.2)
    LeakyReLU(negative_slope=0.2)
    """

    def __init__(self, negative_slope=0.01, inplace=False):
        super().__init__()
        self.negative_slope = negative_slope
        self.inplace = inplace

    def forward(self, input):
        return leaky_relu(input, self.negative_slope, self.inplace)

    def extra_repr(self):
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace else "")


class GELU(Module):
    """x * Phi(x); ``approximate='tanh'`` for the tanh approximation.

    >>> from ember import nn
    >>> nn.GELU(approximate="tanh")
    GELU(approximate='tanh')
    """

    def __init__(self, approximate="none"):
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"GELU: approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate

    def forward(self, input):
        return gelu(input, self.approximate)

    def extra_repr(self):
        return f"approximate={self.approximate!r}"


class SiLU(_Inplace):
    """x * sigmoid(x).

    >>> import ember
    >>> from ember import nn
    >>> nn.SiLU()(ember.zeros(1)).tolist()
    [0.0]
    """

    def forward(self, input):
        return silu(input, self.inplace)


class Sigmoid(Module):
    """1 / (1 + exp(-x)).

    >>> import ember
    >>> from ember import nn
    >>> nn.Sigmoid()(ember.zeros(1)).tolist()
    [0.5]
    """

    def forward(self, input):
        return sigmoid(input)


class Tanh(Module):
    """tanh(x).

    >>> import ember
    >>> from ember import nn
    >>> nn.Tanh()(ember.zeros(1)).tolist()
    [0.0]
    """

    def forward(self, input):
        return tanh(input)


class ELU(Module):
    """x if x > 0 else alpha * (exp(x) - 1).

    >>> from ember import nn
    >>> nn.ELU(alpha=0.5)
    ELU(alpha=0.5)
    """

    def __init__(self, alpha=1.0, inplace=False):
        super().__init__()
        self.alpha = alpha
        self.inplace = inplace

    def forward(self, input):
        return elu(input, self.alpha, self.inplace)

    def extra_repr(self):
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class SELU(_Inplace):
    """Scaled ELU with PyTorch's fixed constants.

    >>> import ember
    >>> from ember import nn
    >>> nn.SELU()(ember.zeros(1)).tolist()
    [0.0]
    """

    def forward(self, input):
        return selu(input, self.inplace)


class CELU(Module):
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1)).

    >>> from ember import nn
    >>> nn.CELU(2.0)
    CELU(alpha=2.0)
    """

    def __init__(self, alpha=1.0, inplace=False):
        super().__init__()
        self.alpha = alpha
        self.inplace = inplace

    def forward(self, input):
        return celu(input, self.alpha, self.inplace)

    def extra_repr(self):
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class Softplus(Module):
    """log(1 + exp(beta x)) / beta (linear above `threshold`).

    >>> from ember import nn
    >>> nn.Softplus()
    Softplus(beta=1.0, threshold=20.0)
    """

    def __init__(self, beta=1.0, threshold=20.0):
        super().__init__()
        self.beta = beta
        self.threshold = threshold

    def forward(self, input):
        return softplus(input, self.beta, self.threshold)

    def extra_repr(self):
        return f"beta={self.beta}, threshold={self.threshold}"


class Hardtanh(Module):
    """Clamp to [min_val, max_val].

    >>> from ember import nn
    >>> nn.Hardtanh(-2.0, 2.0)
    Hardtanh(min_val=-2.0, max_val=2.0)
    """

    def __init__(self, min_val=-1.0, max_val=1.0, inplace=False):
        super().__init__()
        if min_val > max_val:
            raise ValueError(f"Hardtanh: min_val ({min_val}) cannot be greater than max_val "
                             f"({max_val})")
        self.min_val = min_val
        self.max_val = max_val
        self.inplace = inplace

    def forward(self, input):
        return hardtanh(input, self.min_val, self.max_val, self.inplace)

    def extra_repr(self):
        return f"min_val={self.min_val}, max_val={self.max_val}" + (
            ", inplace=True" if self.inplace else "")


class Mish(_Inplace):
    """x * tanh(softplus(x)).

    >>> import ember
    >>> from ember import nn
    >>> nn.Mish()(ember.zeros(1)).tolist()
    [0.0]
    """

    def forward(self, input):
        return mish(input, self.inplace)


class Hardsigmoid(_Inplace):
    """relu6(x + 3) / 6.

    >>> import ember
    >>> from ember import nn
    >>> nn.Hardsigmoid()(ember.zeros(1)).tolist()
    [0.5]
    """

    def forward(self, input):
        return hardsigmoid(input, self.inplace)


class Hardswish(_Inplace):
    """x * relu6(x + 3) / 6.

    >>> import ember
    >>> from ember import nn
    >>> nn.Hardswish()(ember.asarray([4.0])).tolist()
    [4.0]
    """

    def forward(self, input):
        return hardswish(input, self.inplace)


class LogSigmoid(Module):
    """log(sigmoid(x)).

    >>> import ember
    >>> from ember import nn
    >>> round(nn.LogSigmoid()(ember.zeros(1)).item(), 4)
    -0.6931
    """

    def forward(self, input):
        return logsigmoid(input)


class Softsign(Module):
    """``x / (1 + |x|)``.

    >>> import ember
    >>> from ember import nn
    >>> nn.Softsign()(ember.asarray([1.0])).tolist()
    [0.5]
    """

    def forward(self, input):
        return softsign(input)


class Tanhshrink(Module):
    """x - tanh(x).

    >>> import ember
    >>> from ember import nn
    >>> nn.Tanhshrink()(ember.zeros(1)).tolist()
    [0.0]
    """

    def forward(self, input):
        return tanhshrink(input)


class Threshold(Module):
    """x if x > threshold else value.

    >>> from ember import nn
    >>> nn.Threshold(0.1, 20.0)
    Threshold(threshold=0.1, value=20.0)
    """

    def __init__(self, threshold, value, inplace=False):
        super().__init__()
        self.threshold = threshold
        self.value = value
        self.inplace = inplace

    def forward(self, input):
        return threshold(input, self.threshold, self.value, self.inplace)

    def extra_repr(self):
        return f"threshold={self.threshold}, value={self.value}" + (
            ", inplace=True" if self.inplace else "")


class PReLU(Module):
    """x if x > 0 else a * x with a learnable `a` (one, or one per channel).

    >>> from ember import nn
    >>> nn.PReLU(num_parameters=3).weight.shape
    (3,)
    """

    def __init__(self, num_parameters=1, init=0.25, device=None, dtype=None):
        import ember
        from ember.nn.parameter import Parameter
        super().__init__()
        self.num_parameters = num_parameters
        self.init = init
        self.weight = Parameter(ember.full((num_parameters,), init, dtype=dtype))

    def reset_parameters(self):
        from ember.nn import init as _init
        _init.constant_(self.weight, self.init)

    def forward(self, input):
        return prelu(input, self.weight)

    def extra_repr(self):
        return f"num_parameters={self.num_parameters}"


class GLU(Module):
    """a * sigmoid(b) with a, b the halves of the input along `dim`.

    >>> from ember import nn
    >>> nn.GLU()
    GLU(dim=-1)
    """

    def __init__(self, dim=-1):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return glu(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


def _softmax_dim(name, ndim, dim):
    """PyTorch's legacy choice when dim is None (with its warning)."""
    if dim is not None:
        return dim
    import warnings
    warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the call "
                  f"to include dim=X as an argument.", stacklevel=3)
    return 0 if ndim in (0, 1, 3) else 1


class Softmax(Module):
    """softmax along `dim` (``ember.nn.functional.softmax``).

    >>> import ember
    >>> from ember import nn
    >>> nn.Softmax(dim=-1)(ember.zeros((1, 4))).tolist()
    [[0.25, 0.25, 0.25, 0.25]]
    """

    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def __setstate__(self, state):
        super().__setstate__(state)
        self.__dict__.setdefault("dim", None)

    def forward(self, input):
        from ember.nn import functional as F
        return F.softmax(input, _softmax_dim("softmax", input.ndim, self.dim))

    def extra_repr(self):
        return f"dim={self.dim}"


class LogSoftmax(Module):
    """log(softmax) along `dim` (``ember.nn.functional.log_softmax``).

    >>> import ember
    >>> from ember import nn
    >>> round(nn.LogSoftmax(dim=1)(ember.zeros((1, 2))).tolist()[0][0], 4)
    -0.6931
    """

    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def __setstate__(self, state):
        super().__setstate__(state)
        self.__dict__.setdefault("dim", None)

    def forward(self, input):
        from ember.nn import functional as F
        return F.log_softmax(input, _softmax_dim("log_softmax", input.ndim, self.dim))

    def extra_repr(self):
        return f"dim={self.dim}"


class Softmin(Module):
    """softmax(-x) along `dim`.

    >>> import ember
    >>> from ember import nn
    >>> nn.Softmin(dim=0)(ember.zeros(2)).tolist()
    [0.5, 0.5]
    """

    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        from ember.nn import functional as F
        dim = _softmax_dim("softmin", input.ndim, self.dim)
        if hasattr(F, "softmin"):
            return F.softmin(input, dim)
        return F.softmax(-input, dim)

    def extra_repr(self):
        return f"dim={self.dim}"
