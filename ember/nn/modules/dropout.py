"""Dropout modules: identity in eval mode, random zeroing in training mode.

>>> import ember
>>> from ember import nn
>>> d = nn.Dropout(0.5); x = ember.ones(4)
>>> d.eval()(x) is x
True
"""
from ember.nn.modules.module import Module
from ember.nn.functional.dropout import (_check_p, dropout, dropout1d, dropout2d, dropout3d,
                                         alpha_dropout)

__all__ = ["Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout"]


class _DropoutNd(Module):
    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        _check_p(p, type(self).__name__)
        self.p = p
        self.inplace = inplace

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"


class Dropout(_DropoutNd):
    """Zero each element with probability `p` in training, scaling the rest by
    1 / (1 - p); identity in eval mode.

    >>> from ember import nn
    >>> nn.Dropout(p=0.2)
    Dropout(p=0.2, inplace=False)
    """

    def forward(self, input):
        return dropout(input, self.p, self.training, self.inplace)


class Dropout1d(_DropoutNd):
    """Zero whole channels of (N, C, L) / (C, L) input in training.

    >>> import ember
    >>> from ember import nn
    >>> nn.Dropout1d(0.5)(ember.ones((2, 3, 4))).shape
    (2, 3, 4)
    """

    def forward(self, input):
        return dropout1d(input, self.p, self.training, self.inplace)


class Dropout2d(_DropoutNd):
    """Zero whole channels of (N, C, H, W) / (C, H, W) input in training.

    >>> import ember
    >>> from ember import nn
    >>> nn.Dropout2d(0.5)(ember.ones((2, 3, 4, 4))).shape
    (2, 3, 4, 4)
    """

    def forward(self, input):
        return dropout2d(input, self.p, self.training, self.inplace)


class Dropout3d(_DropoutNd):
    """Zero whole channels of (N, C, D, H, W) / (C, D, H, W) input in training.

    >>> import ember
    >>> from ember import nn
    >>> nn.Dropout3d(0.5)(ember.ones((1, 2, 2, 2, 2))).shape
    (1, 2, 2, 2, 2)
    """

    def forward(self, input):
        return dropout3d(input, self.p, self.training, self.inplace)


class AlphaDropout(_DropoutNd):
    """Alpha dropout (keeps SELU's self-normalising statistics) in training.

    >>> import ember
    >>> from ember import nn
    >>> nn.AlphaDropout(0.2)(ember.ones(3)).shape
    (3,)
    """

    def forward(self, input):
        return alpha_dropout(input, self.p, self.training)
