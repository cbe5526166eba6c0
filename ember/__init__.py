"""ember: an imperative, NumPy-compatible array library with automatic differentiation."""
from ember._core.storage import memory_stats, reset_peak_memory_stats, empty_cache, set_allocator_caching
from ember._core.dtypes import set_default_dtype, get_default_dtype
from ember._core.array import ndarray, Device
from ember._core import elementwise as _elementwise
from ember._core.elementwise import set_num_threads, get_num_threads
from ember._core import array as _array

Tensor = ndarray
