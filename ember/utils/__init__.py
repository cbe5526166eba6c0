"""ember.utils: where PyTorch programs look for ``torch.utils`` names.

``ember.utils.data`` is ``ember.data`` itself (the same module object), so
``from ember.utils.data import DataLoader, Dataset, TensorDataset`` works.

>>> import ember.utils.data, ember.data
>>> ember.utils.data is ember.data
True
"""
import sys as _sys

from ember import data

# `import ember.utils.data[.sampler ...]` finds the ember.data modules themselves
_sys.modules[__name__ + ".data"] = data
for _sub in ("dataset", "sampler", "distributed", "collate", "dataloader"):
    _sys.modules[f"{__name__}.data.{_sub}"] = _sys.modules["ember.data." + _sub]
del _sub

__all__ = ["data"]
