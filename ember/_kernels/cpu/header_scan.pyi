# Type stubs for ember._kernels.cpu.header_scan (compiled, private): the one-pass
# safetensors header reader used by ember.load.
from typing import Any

import numpy as np

__all__ = ["scan", "TooManyDims"]

class TooManyDims(Exception): ...

_Entry = tuple[int, int, str, np.dtype[Any], list[int], tuple[int, ...]]

def scan(raw: bytes | bytearray | memoryview, data_start: int, size: int,
         dtypes: dict[str, np.dtype[Any]], maxdim: int, max_bytes: int,
         keep_metadata: frozenset[str] | set[str] | tuple[str, ...] = ...,
         ) -> tuple[list[_Entry], dict[str, str] | None] | None: ...
