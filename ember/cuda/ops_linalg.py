"""ember.linalg's factorisations on GPU arrays: the host functions themselves, whose
views and results follow the array's device (ember.linalg._view / _ember), so the GPU
gets the CPU's argument checks, dtype rules (integers in the default float dtype,
16-bit in float32) and result types (QRResult, SVDResult, ...) with cuSOLVER through
CuPy's linalg doing the work."""
import ember.linalg as _host
from ember.cuda._dispatch import gpu_op

_DEVICE_GENERIC = ("inv", "solve", "det", "slogdet", "cholesky", "qr", "svd", "eigh",
                   "eigvalsh", "eig", "eigvals", "lstsq", "pinv", "matrix_rank", "cond")

for _name in _DEVICE_GENERIC:
    _op = getattr(_host, _name)
    gpu_op(f"linalg.{_name}")(getattr(_op, "fn", _op))     # the function under the DiffOp
