# Type stubs for ember._kernels.cpu.fused (compiled, private): bias + ReLU in one pass
# and its gradient, on (N, C, L) float32/float64 NumPy views of ember memory, written in
# place.
from typing import Any

from numpy.typing import NDArray

def bias_relu(y: NDArray[Any], b: NDArray[Any] | None) -> None: ...
def relu_grad_bias(g: NDArray[Any], y: NDArray[Any], gx: NDArray[Any],
                   gb: NDArray[Any] | None) -> None: ...
