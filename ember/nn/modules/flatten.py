"""Flatten and Unflatten: reshape a range of axes (views when the memory allows).

>>> import ember
>>> from ember import nn
>>> nn.Flatten()(ember.ones((2, 3, 4))).shape
(2, 12)
"""
from ember.nn.modules.module import Module

__all__ = ["Flatten", "Unflatten"]


def _flatten(input, start_dim, end_dim):
    nd = input.ndim
    if nd == 0:
        return input.reshape((1,))
    s = start_dim + nd if start_dim < 0 else start_dim
    e = end_dim + nd if end_dim < 0 else end_dim
    if not (0 <= s < nd and 0 <= e < nd):
        raise IndexError(f"flatten: dimension out of range (expected to be in range of "
                         f"[{-nd}, {nd - 1}], but got start_dim={start_dim}, end_dim={end_dim})")
    if s > e:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    if s == e:
        return input
    shape = input.shape
    n = 1
    for d in shape[s:e + 1]:
        n *= d
    return input.reshape(shape[:s] + (n,) + shape[e + 1:])


class Flatten(Module):
    """Flatten axes ``start_dim..end_dim`` into one (default: all but the batch axis).

    >>> import ember
    >>> from ember import nn
    >>> nn.Flatten(0, 1)(ember.ones((2, 3, 4))).shape
    (6, 4)
    """

    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim = start_dim
        self.end_dim = end_dim

    def forward(self, input):
        return _flatten(input, self.start_dim, self.end_dim)

    def extra_repr(self):
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Split axis `dim` into the shape `unflattened_size` (one entry may be -1).

    >>> import ember
    >>> from ember import nn
    >>> nn.Unflatten(1, (2, 5))(ember.ones((3, 10))).shape
    (3, 2, 5)
    """

    def __init__(self, dim, unflattened_size):
        super().__init__()
        if isinstance(dim, str):
            raise TypeError("Unflatten: named dimensions are not supported; pass an int dim")
        if not isinstance(unflattened_size, (tuple, list)) or \
                not all(isinstance(s, int) for s in unflattened_size):
            raise TypeError(f"unflattened_size must be a tuple of ints, but found type "
                            f"{type(unflattened_size).__name__}")
        self.dim = dim
        self.unflattened_size = tuple(unflattened_size)

    def forward(self, input):
        nd = input.ndim
        d = self.dim + nd if self.dim < 0 else self.dim
        if not 0 <= d < nd:
            raise IndexError(f"Unflatten: dimension {self.dim} out of range for a {nd}-d input")
        shape = input.shape
        return input.reshape(shape[:d] + self.unflattened_size + shape[d + 1:])

    def extra_repr(self):
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"
