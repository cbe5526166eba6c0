"""ember.nn.parallel: data-parallel training across processes (PyTorch's ``torch.nn.parallel``).

>>> from ember.nn.parallel import DistributedDataParallel
>>> DistributedDataParallel.__name__
'DistributedDataParallel'
"""
from ember.nn.parallel.distributed import DistributedDataParallel

__all__ = ["DistributedDataParallel"]
