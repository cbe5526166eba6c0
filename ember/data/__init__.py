"""ember.data: datasets, samplers and the DataLoader (PyTorch's ``torch.utils.data`` API).

>>> import ember
>>> from ember.data import DataLoader, TensorDataset
>>> loader = DataLoader(TensorDataset(ember.ones((6, 2))), batch_size=4)
>>> [x.shape for (x,) in loader]
[(4, 2), (2, 2)]

With ``num_workers > 0`` batches are built in worker processes and handed
over through shared memory (zero-copy); see ``ember/data/dataloader.py``.
"""
from ember.data.dataset import (Dataset, IterableDataset, TensorDataset, StackDataset,
                                ConcatDataset, ChainDataset, Subset, random_split)
from ember.data.sampler import (Sampler, SequentialSampler, RandomSampler, SubsetRandomSampler,
                                WeightedRandomSampler, BatchSampler)
from ember.data.distributed import DistributedSampler
from ember.data.collate import default_collate, default_convert
from ember.data._worker import get_worker_info, WorkerInfo
from ember.data.dataloader import DataLoader

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "StackDataset", "ConcatDataset",
           "ChainDataset", "Subset", "random_split", "Sampler", "SequentialSampler",
           "RandomSampler", "SubsetRandomSampler", "WeightedRandomSampler", "BatchSampler",
           "DistributedSampler", "default_collate", "default_convert", "get_worker_info",
           "WorkerInfo", "DataLoader"]
