"""Linear layers: Identity, Linear, Bilinear (PyTorch's initialisation).

>>> import ember
>>> from ember import nn
>>> fc = nn.Linear(3, 2)
>>> fc.weight.shape, fc.bias.shape, fc(ember.ones((4, 3))).shape
((2, 3), (2,), (4, 2))
"""
import math

import ember
from ember.nn.parameter import Parameter
from ember.nn.modules.module import Module
from ember.nn import init
from ember.nn.functional.linear import linear, bilinear

__all__ = ["Identity", "Linear", "Bilinear"]


class Identity(Module):
    """Returns its input unchanged (arguments to the constructor are ignored).

    >>> import ember
    >>> from ember import nn
    >>> x = ember.ones(3); nn.Identity(54, unused="x")(x) is x
    True
    """

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):
        return input


class Linear(Module):
    """``y = x @ weight.T + bias`` with weight (out_features, in_features) and bias
    (out_features,), both initialised from U(-1/sqrt(in_features), 1/sqrt(in_features))
    as in PyTorch.

    >>> import ember
    >>> from ember import nn
    >>> nn.Linear(4, 8, bias=False)
    Linear(in_features=4, out_features=8, bias=False)
    """

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        from ember.nn.modules.module import _check_cuda
        dev = _check_cuda(device, "Linear")
        self.in_features = in_features
        self.out_features = out_features
        self.weight = Parameter(ember.empty((out_features, in_features), dtype=dtype))
        if bias:
            self.bias = Parameter(ember.empty((out_features,), dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()
        if dev is not None:
            self.to(dev)

    def reset_parameters(self):
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input):
        # the registry read directly (0.05 us) instead of Module.__getattr__ (0.4 us each):
        # this is the hot path of every MLP; a weight replaced by a plain attribute (e.g. a
        # reparametrisation that deletes the parameter) is still found by getattr
        p = self._parameters
        w = p["weight"] if "weight" in p else self.weight
        b = p["bias"] if "bias" in p else self.bias
        return linear(input, w, b)

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


class Bilinear(Module):
    """``y_o = x1 . weight_o . x2 + bias_o`` with weight (out, in1, in2), initialised from
    U(-1/sqrt(in1), 1/sqrt(in1)) as in PyTorch.

    >>> import ember
    >>> from ember import nn
    >>> nn.Bilinear(2, 3, 4)(ember.ones((5, 2)), ember.ones((5, 3))).shape
    (5, 4)
    """

    def __init__(self, in1_features, in2_features, out_features, bias=True, device=None,
                 dtype=None):
        super().__init__()
        self.in1_features = in1_features
        self.in2_features = in2_features
        self.out_features = out_features
        self.weight = Parameter(ember.empty((out_features, in1_features, in2_features),
                                            dtype=dtype))
        if bias:
            self.bias = Parameter(ember.empty((out_features,), dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        bound = 1 / math.sqrt(self.weight.shape[1])
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1, input2):
        return bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self):
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")
