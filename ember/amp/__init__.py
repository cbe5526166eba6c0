"""Mixed precision: ``autocast`` (lower-precision matmuls and convolutions,
float32 reductions and losses) and ``GradScaler`` (dynamic loss scaling).

>>> import ember.amp
>>> with ember.amp.autocast("cpu", dtype=ember.float16):
...     y = ember.matmul(ember.ones((2, 2)), ember.ones((2, 2)))
>>> y.dtype
dtype('float16')
"""
from ember.amp.autocast import (autocast, is_autocast_enabled, get_autocast_dtype,
                                is_autocast_cache_enabled, set_autocast_enabled,
                                set_autocast_dtype, clear_autocast_cache)
from ember.amp.grad_scaler import GradScaler

__all__ = ["autocast", "GradScaler", "is_autocast_enabled", "get_autocast_dtype",
           "is_autocast_cache_enabled", "set_autocast_enabled", "set_autocast_dtype",
           "clear_autocast_cache"]
