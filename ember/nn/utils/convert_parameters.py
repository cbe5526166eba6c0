"""parameters_to_vector / vector_to_parameters: flatten parameters into one vector and back.

>>> import ember
>>> from ember import nn
>>> m = nn.Linear(2, 3)
>>> v = nn.utils.parameters_to_vector(m.parameters()); v.shape
(9,)
>>> nn.utils.vector_to_parameters(v * 0, m.parameters()); float(abs(m.weight).sum())
0.0
"""
from ember._core.array import ndarray

__all__ = ["parameters_to_vector", "vector_to_parameters"]


def parameters_to_vector(parameters):
    """All parameters flattened and concatenated into one 1-d array (differentiable).

    >>> import ember
    >>> from ember import nn
    >>> nn.utils.parameters_to_vector([ember.ones((2, 2)), ember.zeros(1)]).tolist()
    [1.0, 1.0, 1.0, 1.0, 0.0]
    """
    import ember
    vec = [p.reshape((-1,)) for p in parameters]
    if not vec:
        return ember.empty((0,))
    return ember.concat(vec)


def vector_to_parameters(vec, parameters):
    """Copy consecutive slices of the 1-d array `vec` into `parameters`, in place.

    >>> import ember
    >>> from ember import nn
    >>> p = nn.Parameter(ember.zeros((2, 2)))
    >>> nn.utils.vector_to_parameters(ember.arange(4.0), [p]); p.tolist()
    [[0.0, 1.0], [2.0, 3.0]]
    """
    import ember
    if not isinstance(vec, ndarray):
        raise TypeError(f"expected vec to be an ember array, but got: {type(vec).__name__}")
    if vec.ndim != 1:
        raise ValueError(f"vector_to_parameters: vec must be 1-d, got shape {vec.shape}")
    parameters = list(parameters)
    total = sum(p.size for p in parameters)
    if total != vec.shape[0]:
        raise ValueError(f"vector_to_parameters: vec has {vec.shape[0]} elements but the "
                         f"parameters have {total}")
    pointer = 0
    with ember.no_grad():
        for param in parameters:
            n = param.size
            param[...] = vec[pointer:pointer + n].reshape(param.shape)
            pointer += n
