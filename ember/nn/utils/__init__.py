"""ember.nn.utils: gradient clipping and parameter/vector conversion (PyTorch's API).

>>> import ember
>>> from ember import nn
>>> p = nn.Parameter(ember.zeros(3)); p.grad = ember.full((3,), 4.0)
>>> float(nn.utils.clip_grad_norm_([p], 1.0)) > 6.9
True
"""
from ember.nn.utils import clip_grad, convert_parameters
from ember.nn.utils.clip_grad import (clip_grad_norm_, clip_grad_norm, clip_grad_value_,
                                      get_total_norm, clip_grads_with_norm_)
from ember.nn.utils.convert_parameters import parameters_to_vector, vector_to_parameters

__all__ = ["clip_grad_norm_", "clip_grad_norm", "clip_grad_value_", "get_total_norm",
           "clip_grads_with_norm_", "parameters_to_vector", "vector_to_parameters"]
