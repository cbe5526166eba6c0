"""``nn.Unfold`` / ``nn.Fold``: sliding local blocks (im2col / col2im) as layers."""
from ember.nn.modules.module import Module

__all__ = ["Unfold", "Fold"]


class Unfold(Module):
    """:func:`ember.nn.functional.unfold` as a layer: ``(N, C, H, W)`` ->
    ``(N, C * kh * kw, L)``.

    >>> import ember
    >>> from ember import nn
    >>> nn.Unfold(kernel_size=(2, 3))(ember.ones((2, 5, 3, 4))).shape
    (2, 30, 4)
    """

    def __init__(self, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.kernel_size = kernel_size
        self.dilation = dilation
        self.padding = padding
        self.stride = stride

    def forward(self, input):
        from ember.nn.functional import unfold
        return unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, dilation={self.dilation}, "
                f"padding={self.padding}, stride={self.stride}")


class Fold(Module):
    """:func:`ember.nn.functional.fold` as a layer: ``(N, C * kh * kw, L)`` ->
    ``(N, C, H, W)`` with ``(H, W) = output_size``, overlaps summed.

    >>> import ember
    >>> from ember import nn
    >>> nn.Fold(output_size=(4, 5), kernel_size=(2, 2))(ember.ones((1, 12, 12))).shape
    (1, 3, 4, 5)
    """

    def __init__(self, output_size, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.output_size = output_size
        self.kernel_size = kernel_size
        self.dilation = dilation
        self.padding = padding
        self.stride = stride

    def forward(self, input):
        from ember.nn.functional import fold
        return fold(input, self.output_size, self.kernel_size, self.dilation, self.padding,
                    self.stride)

    def extra_repr(self):
        return (f"output_size={self.output_size}, kernel_size={self.kernel_size}, "
                f"dilation={self.dilation}, padding={self.padding}, stride={self.stride}")
