"""Convolution layers: Conv1d, Conv2d, ConvTranspose1d, ConvTranspose2d (PyTorch's API,
initialisation and repr).

>>> import ember
>>> from ember import nn
>>> conv = nn.Conv2d(3, 8, 3, padding=1)
>>> conv
Conv2d(3, 8, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))
>>> conv(ember.ones((2, 3, 5, 5))).shape
(2, 8, 5, 5)
"""
import math

import ember
from ember.nn.parameter import Parameter
from ember.nn.modules.module import Module, _check_cuda
from ember.nn import init
from ember.nn.functional import conv as _F

__all__ = ["Conv1d", "Conv2d", "ConvTranspose1d", "ConvTranspose2d"]

# PyTorch's padding_mode names -> ember.pad modes
_PAD_MODES = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}


def _ntuple(v, n, name):
    if isinstance(v, (tuple, list)):
        if len(v) == n:
            return tuple(int(e) for e in v)
        if len(v) == 1:
            return (int(v[0]),) * n
        raise ValueError(f"{name} must be an int or a tuple of {n} ints, got {v!r}")
    return (int(v),) * n


class _ConvNd(Module):
    _nd = 2

    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, dilation,
                 transposed, output_padding, groups, bias, padding_mode, device=None,
                 dtype=None):
        super().__init__()
        name = type(self).__name__
        dev = _check_cuda(device, name)
        nd = self._nd
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups != 0:
            raise ValueError("out_channels must be divisible by groups")
        kernel_size = _ntuple(kernel_size, nd, "kernel_size")
        stride = _ntuple(stride, nd, "stride")
        dilation = _ntuple(dilation, nd, "dilation")
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(f"Invalid padding string {padding!r}, should be one of "
                                 f"{{'valid', 'same'}}")
            if padding == "same" and any(s != 1 for s in stride):
                raise ValueError("padding='same' is not supported for strided convolutions")
        else:
            padding = _ntuple(padding, nd, "padding")
        if padding_mode not in ("zeros", "reflect", "replicate", "circular"):
            raise ValueError(f"padding_mode must be one of {{'zeros', 'reflect', 'replicate', "
                             f"'circular'}}, but got padding_mode={padding_mode!r}")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = kernel_size
        self.stride = stride
        self.padding = padding
        self.dilation = dilation
        self.transposed = transposed
        self.output_padding = _ntuple(output_padding, nd, "output_padding")
        self.groups = groups
        self.padding_mode = padding_mode
        # (left, right) per spatial axis, last axis first (torch's F.pad order)
        if isinstance(padding, str):
            rev = [0, 0] * nd
            if padding == "same":
                for d, k, i in zip(dilation, kernel_size, range(nd - 1, -1, -1)):
                    total = d * (k - 1)
                    rev[2 * i] = total // 2
                    rev[2 * i + 1] = total - total // 2
            self._reversed_padding_repeated_twice = rev
        else:
            self._reversed_padding_repeated_twice = [p for p in reversed(padding) for _ in (0, 1)]
        if transposed:
            shape = (in_channels, out_channels // groups) + kernel_size
        else:
            shape = (out_channels, in_channels // groups) + kernel_size
        self.weight = Parameter(ember.empty(shape, dtype=dtype))
        if bias:
            self.bias = Parameter(ember.empty((out_channels,), dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()
        if dev is not None:
            self.to(dev)

    def reset_parameters(self):
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            if fan_in != 0:
                bound = 1 / math.sqrt(fan_in)
                init.uniform_(self.bias, -bound, bound)

    def extra_repr(self):
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
             f"stride={self.stride}")
        if self.padding != (0,) * len(self.padding):
            s += f", padding={self.padding}"
        if self.dilation != (1,) * len(self.dilation):
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * len(self.output_padding):
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s

    def __setstate__(self, state):
        super().__setstate__(state)
        if not hasattr(self, "padding_mode"):
            self.padding_mode = "zeros"

    def _padded(self, input):
        """input padded by padding_mode (reflect / replicate / circular)."""
        rev = self._reversed_padding_repeated_twice
        nd = self._nd
        widths = [(0, 0)] * (input.ndim - nd)
        for i in range(nd):
            j = 2 * (nd - 1 - i)
            widths.append((rev[j], rev[j + 1]))
        return ember.pad(input, tuple(widths), mode=_PAD_MODES[self.padding_mode])


class Conv1d(_ConvNd):
    """1-d convolution over (N, C_in, L) or (C_in, L) inputs.

    weight: (out_channels, in_channels/groups, kernel_size); bias: (out_channels,),
    initialised as in PyTorch (``kaiming_uniform_`` with ``a=sqrt(5)``; bias from
    U(-1/sqrt(fan_in), 1/sqrt(fan_in))).

    >>> import ember
    >>> from ember import nn
    >>> nn.Conv1d(4, 2, 3, stride=2)(ember.ones((1, 4, 9))).shape
    (1, 2, 4)
    """
    _nd = 1

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         False, 0, groups, bias, padding_mode, device, dtype)

    def _conv_forward(self, input, weight, bias):
        if self.padding_mode != "zeros":
            return _F.conv1d(self._padded(input), weight, bias, self.stride, 0, self.dilation,
                             self.groups)
        return _F.conv1d(input, weight, bias, self.stride, self.padding, self.dilation,
                         self.groups)

    def forward(self, input):
        return self._conv_forward(input, self.weight, self.bias)


class Conv2d(_ConvNd):
    """2-d convolution over (N, C_in, H, W) or (C_in, H, W) inputs.

    weight: (out_channels, in_channels/groups, kh, kw); bias: (out_channels,),
    initialised as in PyTorch.  padding may be an int, a pair, ``'valid'`` or
    ``'same'``; padding_mode one of 'zeros', 'reflect', 'replicate', 'circular'.

    >>> import ember
    >>> from ember import nn
    >>> nn.Conv2d(3, 6, (3, 5), stride=2, bias=False)
    Conv2d(3, 6, kernel_size=(3, 5), stride=(2, 2), bias=False)
    """
    _nd = 2

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         False, 0, groups, bias, padding_mode, device, dtype)

    def _conv_forward(self, input, weight, bias):
        if self.padding_mode != "zeros":
            return _F.conv2d(self._padded(input), weight, bias, self.stride, 0, self.dilation,
                             self.groups)
        return _F.conv2d(input, weight, bias, self.stride, self.padding, self.dilation,
                         self.groups)

    def forward(self, input):
        return self._conv_forward(input, self.weight, self.bias)


class _ConvTransposeNd(_ConvNd):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, dilation,
                 transposed, output_padding, groups, bias, padding_mode, device=None,
                 dtype=None):
        if padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for '
                             f'{type(self).__name__}')
        if isinstance(padding, str):
            raise ValueError(f"{type(self).__name__}: padding must be an int or a tuple of "
                             f"ints, got {padding!r}")
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         transposed, output_padding, groups, bias, padding_mode, device, dtype)

    def _output_padding(self, input, output_size):
        """output_padding that gives the requested output_size (PyTorch's rule)."""
        if output_size is None:
            return self.output_padding
        nd = self._nd
        output_size = tuple(int(s) for s in output_size)
        n_nonspatial = 2 if input.ndim == nd + 2 else 1
        if len(output_size) == n_nonspatial + nd:
            output_size = output_size[n_nonspatial:]
        if len(output_size) != nd:
            raise ValueError(f"ConvTranspose{nd}D: for {input.ndim}D input, output_size must "
                             f"have {nd} or {n_nonspatial + nd} elements (got "
                             f"{len(output_size)})")
        mins, maxs = [], []
        for d in range(nd):
            size = ((input.shape[d + n_nonspatial] - 1) * self.stride[d] - 2 * self.padding[d]
                    + self.dilation[d] * (self.kernel_size[d] - 1) + 1)
            mins.append(size)
            maxs.append(size + self.stride[d] - 1)
        for i in range(nd):
            if not mins[i] <= output_size[i] <= maxs[i]:
                raise ValueError(f"requested an output size of {list(output_size)}, but valid "
                                 f"sizes range from {mins} to {maxs} (for an input of "
                                 f"{list(input.shape[n_nonspatial:])})")
        return tuple(output_size[d] - mins[d] for d in range(nd))


class ConvTranspose1d(_ConvTransposeNd):
    """1-d transposed convolution over (N, C_in, L) or (C_in, L) inputs.

    weight: (in_channels, out_channels/groups, kernel_size).

    >>> import ember
    >>> from ember import nn
    >>> nn.ConvTranspose1d(4, 2, 3, stride=2)(ember.ones((1, 4, 5))).shape
    (1, 2, 11)
    """
    _nd = 1

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 output_padding=0, groups=1, bias=True, dilation=1, padding_mode="zeros",
                 device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         True, output_padding, groups, bias, padding_mode, device, dtype)

    def forward(self, input, output_size=None):
        op = self._output_padding(input, output_size)
        return _F.conv_transpose1d(input, self.weight, self.bias, self.stride, self.padding,
                                   op, self.groups, self.dilation)


class ConvTranspose2d(_ConvTransposeNd):
    """2-d transposed convolution over (N, C_in, H, W) or (C_in, H, W) inputs.

    weight: (in_channels, out_channels/groups, kh, kw); ``forward(input,
    output_size=None)`` picks output_padding to reach output_size, as in PyTorch.

    >>> import ember
    >>> from ember import nn
    >>> up = nn.ConvTranspose2d(4, 2, 3, stride=2, padding=1)
    >>> up(ember.ones((1, 4, 5, 5))).shape, up(ember.ones((1, 4, 5, 5)), output_size=(10, 10)).shape
    ((1, 2, 9, 9), (1, 2, 10, 10))
    """
    _nd = 2

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 output_padding=0, groups=1, bias=True, dilation=1, padding_mode="zeros",
                 device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         True, output_padding, groups, bias, padding_mode, device, dtype)

    def forward(self, input, output_size=None):
        op = self._output_padding(input, output_size)
        return _F.conv_transpose2d(input, self.weight, self.bias, self.stride, self.padding,
                                   op, self.groups, self.dilation)
