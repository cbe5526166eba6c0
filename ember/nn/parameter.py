"""Parameter: an array that a Module registers as one of its trainable weights."""
from ember._core.array import ndarray, _alias_as, _set_data
from ember._core.dtypes import dtype_kind

__all__ = ["Parameter"]


class Parameter(ndarray):
    """A trainable array: assigning one to a Module attribute registers it.

    It shares memory with `data` (no copy) and is a leaf that requires grad
    unless ``requires_grad=False``.  Arithmetic on it returns plain arrays.

    >>> import ember
    >>> p = ember.nn.Parameter(ember.zeros((2, 3)))
    >>> p.requires_grad, p.shape
    (True, (2, 3))
    """

    def __new__(cls, data=None, requires_grad=True):
        import ember
        if data is None:
            data = ember.empty((0,))
        elif not isinstance(data, ndarray):
            data = ember.asarray(data)
        if dtype_kind(data.dtype) not in "fc" and requires_grad:
            raise TypeError(f"Parameter: only floating-point and complex arrays can require "
                            f"gradients, got dtype {data.dtype}")
        p = _alias_as(data, cls)
        p.requires_grad = requires_grad
        return p

    def __init__(self, data=None, requires_grad=True):
        pass

    @property
    def data(self):
        """The parameter's values as a plain array outside the graph, sharing its memory
        (PyTorch's ``p.data``); ``p.data = t`` makes the parameter hold `t`'s memory,
        shape and dtype, keeping the Parameter object (and its ``.grad``).

        >>> import ember
        >>> p = ember.nn.Parameter(ember.zeros(2))
        >>> d = p.data; d += 1; p.tolist(), d.requires_grad
        ([1.0, 1.0], False)
        >>> p.data = ember.ones((3,), dtype=ember.float64); p.shape, p.dtype
        ((3,), dtype('float64'))
        """
        return ndarray.detach(self)

    @data.setter
    def data(self, value):
        if not isinstance(value, ndarray):
            raise TypeError(f"Parameter.data: expected an ember array, got "
                            f"{type(value).__name__}")
        _set_data(self, ndarray.detach(value))

    def __repr__(self):
        return "Parameter containing:\n" + ndarray.__repr__(self)

    def __reduce_ex__(self, protocol):
        return (_rebuild_parameter, (ndarray.detach(self).copy(), self.requires_grad))

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        p = Parameter(ndarray.detach(self).copy(), self.requires_grad)
        memo[id(self)] = p
        return p


def _rebuild_parameter(data, requires_grad):
    return Parameter(data, requires_grad)
