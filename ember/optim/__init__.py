"""ember.optim: optimizers and learning-rate schedulers with PyTorch's API and numerics.

Each optimizer updates all the parameters of a group with one fused
multi-tensor Cython kernel (GIL released, threaded for big groups).
"""
from ember.optim.optimizer import Optimizer
from ember.optim.sgd import SGD
from ember.optim.adam import Adam, AdamW
from ember.optim.rmsprop import RMSprop
from ember.optim.adagrad import Adagrad
from ember.optim import lr_scheduler

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "lr_scheduler"]
