"""ember on CUDA GPUs: the device API (``ember.cuda.is_available()``, streams,
events, memory statistics, seeding) and the CUDA C kernel sources.

GPU arrays come from ``device='cuda'`` (``ember.zeros(3, device='cuda')``),
``x.to('cuda')`` / ``x.cuda()``, or zero-copy from CuPy and DLPack producers
(``ember.asarray(cupy_array)``, ``ember.from_dlpack(torch_cuda_tensor)``).
Ops on them queue on the current CUDA stream and return at once; only reading
values (``item()``, ``tolist()``, ``.cpu()``) and explicit synchronisation wait.
Bad input that only the GPU can see (an index out of range) is flagged by the
kernels and raised at the next of those waits (``set_check_mode``; _checks.py).
Memory comes from CuPy's memory pool, the caching allocator.

Importing ember never imports CuPy; the backend starts with the first GPU array.

>>> import ember
>>> ember.cuda.is_available() in (True, False)
True

The kernels live in ``kernels/*.cu`` and are compiled once per device by NVRTC
(``cupy.RawModule``); ``kernel_source``, ``nvrtc_options`` and ``kernel_names``
describe them for the loader and the compile checks.
"""

from ember.cuda._sources import (  # noqa: F401  (the kernel sources, described)
    FAMILIES, DTYPES, CASTS, kernel_files, kernel_source, nvrtc_options, kernel_names)
from ember.cuda._device_api import (
    is_available, device_count, current_device, set_device, get_device_name, synchronize,
    Stream, Event, current_stream, default_stream, stream, device, memory_allocated,
    max_memory_allocated, memory_reserved, max_memory_reserved, reset_peak_memory_stats,
    empty_cache, memory_stats, manual_seed, manual_seed_all, seed, initial_seed, _init,
    _unavailable_reason, get_device_properties, get_device_capability, mem_get_info,
    is_bf16_supported, DeviceProperties)
from ember.cuda._checks import set_check_mode, get_check_mode

__all__ = ["FAMILIES", "DTYPES", "kernel_files", "kernel_source", "nvrtc_options",
           "kernel_names", "is_available", "device_count", "current_device", "set_device",
           "get_device_name", "synchronize", "Stream", "Event", "current_stream",
           "default_stream", "stream", "device", "memory_allocated", "max_memory_allocated",
           "memory_reserved", "max_memory_reserved", "reset_peak_memory_stats", "empty_cache",
           "memory_stats", "manual_seed", "manual_seed_all", "seed", "initial_seed",
           "set_check_mode", "get_check_mode", "get_device_properties",
           "get_device_capability", "mem_get_info", "is_bf16_supported", "DeviceProperties"]
