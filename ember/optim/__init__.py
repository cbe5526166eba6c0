"""ember.optim: optimizers and learning-rate schedulers with PyTorch's API and numerics.

SGD, Adam, AdamW, RMSprop and Adagrad update all the parameters of a group with
one fused multi-tensor kernel (Cython on the CPU, GIL released, threaded for big
groups); Adadelta and LBFGS are written with ember array operations.
"""
from ember.optim.optimizer import Optimizer
from ember.optim.sgd import SGD
from ember.optim.adam import Adam, AdamW
from ember.optim.rmsprop import RMSprop
from ember.optim.adagrad import Adagrad
from ember.optim.adadelta import Adadelta
from ember.optim.lbfgs import LBFGS
from ember.optim import lr_scheduler

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "LBFGS",
           "lr_scheduler"]
