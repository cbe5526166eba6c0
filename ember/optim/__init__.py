"""ember.optim: optimizers and learning-rate schedulers with PyTorch's API and numerics.

SGD, Adam, AdamW, RMSprop and Adagrad update all the parameters of a group with
one fused multi-tensor kernel (Cython on the CPU, GIL released, threaded for big
groups; CUDA for SGD and Adam/AdamW on a GPU).  ``ember.optim.reference`` holds
the plain per-parameter updates with PyTorch's names, the specification the
kernels are tested against; Adadelta (and RMSprop and Adagrad on a GPU) run them
with ember array operations, LBFGS is written with them too.  The options are
checked in one place, ``ember/optim/_options.py``.

Where things are: the optimizer classes here (options, state dicts, hooks); a
group's step is an op of ``ember/optim/_steps.py`` (``adam_group``...), one
definition whose body is the CPU kernel of ``ember/_kernels/cpu/optim.pyx`` +
``optim_simd.h`` (one options struct per optimizer, ``emb_adam_options``...); on GPU
parameters the one GPU dispatch runs the op's implementation registered by
``ember/optim/_gpu.py`` (state, step counts, bias corrections), which calls the
backend's launchers in ``ember/cuda/ops_optim.py`` and the kernels of
``ember/cuda/kernels/optim.cu``.
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
