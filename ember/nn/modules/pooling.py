"""Pooling layers (PyTorch's API and repr): MaxPool1d/2d, AvgPool1d/2d,
AdaptiveAvgPool1d/2d, AdaptiveMaxPool1d/2d.

>>> import ember
>>> from ember import nn
>>> nn.MaxPool2d(2)(ember.ones((1, 3, 8, 8))).shape
(1, 3, 4, 4)
"""
from ember.nn.modules.module import Module
from ember.nn.functional import pooling as _F

__all__ = ["MaxPool1d", "MaxPool2d", "AvgPool1d", "AvgPool2d", "AdaptiveAvgPool1d",
           "AdaptiveAvgPool2d", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d"]


def _single(v):
    return tuple(v) if isinstance(v, (tuple, list)) else (v,)


class _MaxPoolNd(Module):
    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False,
                 ceil_mode=False):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.dilation = dilation
        self.return_indices = return_indices
        self.ceil_mode = ceil_mode

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class MaxPool1d(_MaxPoolNd):
    """1-d max pooling over (N, C, L) or (C, L); see ``ember.nn.functional.max_pool1d``.

    >>> import ember
    >>> from ember import nn
    >>> nn.MaxPool1d(3, stride=2)
    MaxPool1d(kernel_size=3, stride=2, padding=0, dilation=1, ceil_mode=False)
    """

    def forward(self, input):
        return _F.max_pool1d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                             ceil_mode=self.ceil_mode, return_indices=self.return_indices)


class MaxPool2d(_MaxPoolNd):
    """2-d max pooling over (N, C, H, W) or (C, H, W); see ``ember.nn.functional.max_pool2d``.

    >>> import ember
    >>> from ember import nn
    >>> nn.MaxPool2d(2)
    MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)
    """

    def forward(self, input):
        return _F.max_pool2d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                             ceil_mode=self.ceil_mode, return_indices=self.return_indices)


class AvgPool1d(Module):
    """1-d average pooling over (N, C, L) or (C, L); see ``ember.nn.functional.avg_pool1d``.

    >>> import ember
    >>> from ember import nn
    >>> nn.AvgPool1d(3, stride=2)
    AvgPool1d(kernel_size=(3,), stride=(2,), padding=(0,))
    """

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False,
                 count_include_pad=True):
        super().__init__()
        self.kernel_size = _single(kernel_size)
        self.stride = _single(stride if stride is not None else kernel_size)
        self.padding = _single(padding)
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"

    def forward(self, input):
        return _F.avg_pool1d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                             self.count_include_pad)


class AvgPool2d(Module):
    """2-d average pooling over (N, C, H, W) or (C, H, W); see
    ``ember.nn.functional.avg_pool2d``.

    >>> import ember
    >>> from ember import nn
    >>> nn.AvgPool2d(2)(ember.ones((1, 1, 4, 4))).tolist()
    [[[[1.0, 1.0], [1.0, 1.0]]]]
    """

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False,
                 count_include_pad=True, divisor_override=None):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad
        self.divisor_override = divisor_override

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"

    def forward(self, input):
        return _F.avg_pool2d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                             self.count_include_pad, self.divisor_override)


class _AdaptiveNd(Module):
    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def extra_repr(self):
        return f"output_size={self.output_size}"


class AdaptiveAvgPool1d(_AdaptiveNd):
    """1-d adaptive average pooling to ``output_size`` over (N, C, L) or (C, L).

    >>> import ember
    >>> from ember import nn
    >>> nn.AdaptiveAvgPool1d(2)(ember.ones((1, 3, 7))).shape
    (1, 3, 2)
    """

    def forward(self, input):
        return _F.adaptive_avg_pool1d(input, self.output_size)


class AdaptiveAvgPool2d(_AdaptiveNd):
    """2-d adaptive average pooling to ``output_size`` (int or pair, None keeps that axis)
    over (N, C, H, W) or (C, H, W).

    >>> import ember
    >>> from ember import nn
    >>> nn.AdaptiveAvgPool2d((1, None))(ember.ones((1, 3, 7, 5))).shape
    (1, 3, 1, 5)
    """

    def forward(self, input):
        return _F.adaptive_avg_pool2d(input, self.output_size)


class _AdaptiveMaxNd(_AdaptiveNd):
    def __init__(self, output_size, return_indices=False):
        super().__init__(output_size)
        self.return_indices = return_indices


class AdaptiveMaxPool1d(_AdaptiveMaxNd):
    """1-d adaptive max pooling to ``output_size`` over (N, C, L) or (C, L).

    >>> import ember
    >>> from ember import nn
    >>> nn.AdaptiveMaxPool1d(2)(ember.ones((1, 3, 7))).shape
    (1, 3, 2)
    """

    def forward(self, input):
        return _F.adaptive_max_pool1d(input, self.output_size, self.return_indices)


class AdaptiveMaxPool2d(_AdaptiveMaxNd):
    """2-d adaptive max pooling to ``output_size`` over (N, C, H, W) or (C, H, W).

    >>> import ember
    >>> from ember import nn
    >>> nn.AdaptiveMaxPool2d(1)(ember.ones((1, 3, 7, 5))).shape
    (1, 3, 1, 1)
    """

    def forward(self, input):
        return _F.adaptive_max_pool2d(input, self.output_size, self.return_indices)
