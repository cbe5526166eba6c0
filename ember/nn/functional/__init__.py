"""ember.nn.functional: the functional form of every layer and loss.

Every function that takes an axis accepts both ``axis=`` and ``dim=``.

>>> import ember
>>> import ember.nn.functional as F
>>> F.relu(ember.asarray([-1.0, 2.0])).tolist()
[0.0, 2.0]
"""
from ember.nn.functional import (activation, linear, conv, pooling, loss, softmax,
                                 normalization, sparse, dropout, attention, padding,
                                 upsampling, fold, distance)

__all__ = []
for _m in (activation, linear, conv, pooling, loss, softmax, normalization, sparse, dropout,
           attention, padding, upsampling, fold, distance):
    for _name in _m.__all__:
        globals()[_name] = getattr(_m, _name)
    __all__ += list(_m.__all__)
del _m
