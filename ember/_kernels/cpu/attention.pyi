# Type stubs for ember._kernels.cpu.attention (compiled, private): fused float32 attention
# (forward and first-order backward) on NumPy arrays of one batch shape.
from typing import Any

from numpy.typing import NDArray

MAX_SCORES: int
MAX_BATCH_DIMS: int

def fused_enabled() -> bool: ...
def _set_fused(on: bool) -> None: ...
def forward(q: NDArray[Any], k: NDArray[Any], v: NDArray[Any], bias: NDArray[Any] | None,
            scale: float, out: NDArray[Any], p: NDArray[Any]) -> bool: ...
def backward(go: NDArray[Any] | None, gp: NDArray[Any] | None, p: NDArray[Any],
             q: NDArray[Any], k: NDArray[Any], v: NDArray[Any], scale: float,
             dq: NDArray[Any], dk: NDArray[Any], dv: NDArray[Any], ds: NDArray[Any]) -> bool: ...
