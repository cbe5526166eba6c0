"""Upsampling layers (PyTorch's ``nn.Upsample`` and its two fixed-mode forms)."""
from ember.nn.modules.module import Module

__all__ = ["Upsample", "UpsamplingNearest2d", "UpsamplingBilinear2d"]


class Upsample(Module):
    """Resample ``(N, C, d1, ..., dK)`` inputs with :func:`ember.nn.functional.interpolate`.

    Arguments as PyTorch's: size, scale_factor, mode='nearest', align_corners=None,
    recompute_scale_factor=None.

    >>> import ember
    >>> from ember import nn
    >>> nn.Upsample(scale_factor=2, mode="bilinear")(ember.ones((1, 3, 4, 4))).shape
    (1, 3, 8, 8)
    """

    def __init__(self, size=None, scale_factor=None, mode="nearest", align_corners=None,
                 recompute_scale_factor=None):
        super().__init__()
        self.name = type(self).__name__
        self.size = size
        self.scale_factor = float(scale_factor) if isinstance(scale_factor, (int, float)) \
            else (tuple(float(f) for f in scale_factor) if scale_factor is not None else None)
        self.mode = mode
        self.align_corners = align_corners
        self.recompute_scale_factor = recompute_scale_factor

    def forward(self, input):
        from ember.nn.functional import interpolate
        return interpolate(input, self.size, self.scale_factor, self.mode, self.align_corners,
                           recompute_scale_factor=self.recompute_scale_factor)

    def extra_repr(self):
        if self.scale_factor is not None:
            info = f"scale_factor={self.scale_factor!r}"
        else:
            info = f"size={self.size!r}"
        return info + f", mode={self.mode!r}"


class UpsamplingNearest2d(Upsample):
    """``Upsample(size, scale_factor, mode='nearest')`` for ``(N, C, H, W)`` inputs.

    >>> import ember
    >>> from ember import nn
    >>> nn.UpsamplingNearest2d(scale_factor=2)(ember.ones((1, 1, 2, 3))).shape
    (1, 1, 4, 6)
    """

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    """``Upsample(size, scale_factor, mode='bilinear', align_corners=True)``.

    >>> import ember
    >>> from ember import nn
    >>> nn.UpsamplingBilinear2d(size=(3, 5))(ember.ones((1, 1, 2, 3))).shape
    (1, 1, 3, 5)
    """

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)
