"""ember.nn: neural-network modules, losses and their functional forms (PyTorch's API).

>>> import ember
>>> from ember import nn
>>> model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
>>> model(ember.ones((3, 4))).shape
(3, 2)
"""
from ember.nn.parameter import Parameter
from ember.nn.modules import *          # noqa: F401,F403  (layers, losses, containers)
from ember.nn.modules import __all__ as _modules_all
from ember.nn import functional, init, utils

__all__ = ["Parameter", "functional", "init", "utils"] + list(_modules_all)


def __getattr__(name):
    # ember.nn.parallel (DistributedDataParallel) loads on first use, as after `import torch`
    if name == "parallel":
        import importlib
        return importlib.import_module("ember.nn.parallel")
    raise AttributeError(f"module 'ember.nn' has no attribute {name!r}")
