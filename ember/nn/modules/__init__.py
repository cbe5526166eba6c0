"""The layers, losses and containers of ember.nn, one file per family."""
from ember.nn.modules import (module, container, linear, activation, dropout, sparse, flatten,
                              conv, pooling, loss, normalization, rnn, transformer,
                              upsampling, fold, distance)

__all__ = []
for _m in (module, container, linear, activation, dropout, sparse, flatten, conv, pooling,
           loss, normalization, rnn, transformer, upsampling, fold, distance):
    for _name in _m.__all__:
        globals()[_name] = getattr(_m, _name)
    __all__ += list(_m.__all__)
del _m
