"""embedding (ember.nn.functional.sparse) on CUDA arrays.

The lookup is index.cu's ``embedding_fwd`` (a warp per row); the weight gradient
is ``index_add`` (atomics, rows at padding_idx skipped) or, when
``set_deterministic(True)`` was called, ``index_add_sorted`` (indices sorted
once, each row summed in index order: bitwise reproducible).  An out-of-range
index raises the CPU's IndexError at the next synchronisation: the kernel flags
it without a wait and skips it (see ember.cuda._checks; its output row is left
unwritten, and the error is raised before any value can be read).
``inverse_counts`` (scale_grad_by_freq) and ``renorm_`` (max_norm) are the GPU
implementations of sparse.py's private ops ``_inverse_counts`` and ``_renorm_``.
"""
import numpy as np

from ember.cuda._dispatch import gpu_op
from ember.cuda import _runtime as R
from ember.cuda import _checks
from ember._core.dtypes import dtype_kind, bfloat16

__all__ = ["set_deterministic", "inverse_counts", "renorm_",
           "index_add_rows"]

_F16 = np.dtype(np.float16)
_BF16 = np.dtype(bfloat16)
_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)
_I64 = np.dtype(np.int64)

_state = {"deterministic": False}


def set_deterministic(flag):
    """Use the sorted, order-fixed scatter-add for embedding gradients (slower, reproducible)."""
    _state["deterministic"] = bool(flag)


def _shape_str(s):
    from ember._core.util import shape_str
    return shape_str(s)


def _flat_indices(indices, opname):
    """indices as a flat, contiguous int64 cupy array (CPU's dtype rules and message)."""
    from ember._core.array import ndarray
    cp = R.cp()
    if isinstance(indices, ndarray):
        dt = indices.dtype
        c = R.as_cupy(indices)
    else:
        c = cp.asarray(np.asarray(indices))
        dt = c.dtype
    if dtype_kind(dt) not in "iu" or dt == np.bool_:
        raise TypeError(f"{opname}: indices must be an integer array (int32 or int64), got "
                        f"dtype {dt}")
    return cp.ascontiguousarray(c.reshape(-1).astype(_I64, copy=False))


def _gather(weight, indices, opname="embedding"):
    """weight[indices] via embedding_fwd, with the CPU's checks and errors."""
    from ember._core.array import ndarray
    cp = R.cp()
    if not isinstance(weight, ndarray):
        raise TypeError(f"{opname}: weight must be an ember array, got {type(weight).__name__}")
    if weight.ndim != 2:
        raise ValueError(f"{opname}: weight must be 2-d (num_embeddings, embedding_dim), got "
                         f"shape {_shape_str(weight.shape)}")
    if weight.dtype not in (_F32, _F64, _F16, _BF16):
        raise TypeError(f"{opname}: weight must be a floating array (float16, bfloat16, float32 "
                        f"or float64), got dtype {weight.dtype}")
    idx = _flat_indices(indices, opname)
    ishape = tuple(getattr(indices, "shape", np.shape(indices)))
    V, D = weight.shape
    w = cp.ascontiguousarray(R.as_cupy(weight))
    n = int(idx.size)
    out = cp.empty((n, D), dtype=w.dtype)
    check = n and _checks.checks_enabled()
    if n and D:
        bad = cp.zeros(1, dtype=cp.int32)
        R.launch(f"ember_embedding_fwd_{R.suffix(w.dtype)}", R.blocks(n * 32), 256,
               (w, idx, out, n, int(V), int(D), bad))
    elif check:
        bad = cp.any((idx < 0) | (idx >= V))
    if check:
        _checks.defer(bad, lambda: _bad_index_error(idx, V, ishape, opname))
    return R.from_cupy(out.reshape(ishape + (D,)))


def _bad_index_error(idx, V, ishape, opname):
    """The CPU's IndexError for the first index outside [0, V); built when the deferred
    check reports, so it reads the indices then."""
    cp = R.cp()
    where = (f"an embedding of num_embeddings={V} (valid indices are 0 to {V - 1}); "
             f"indices shape {_shape_str(ishape)}")
    bad = (idx < 0) | (idx >= V)
    if not bool(cp.any(bad)):          # the indices were overwritten since the op ran
        return IndexError(f"{opname}: an index was out of range for {where}")
    return IndexError(f"{opname}: index {int(idx[int(cp.argmax(bad))])} is out of range "
                      f"for {where}")


@R.on_arrays_device
def index_add_rows(src, idx, n_out, skip_index=-1):
    """out (n_out, D) zeros, then out[idx[i]] += src[i] for idx[i] != skip_index (cupy in,
    cupy out; src (n, D) contiguous, idx (n,) int64 in range)."""
    cp = R.cp()
    n, D = src.shape
    out = cp.zeros((n_out, D), dtype=src.dtype)
    if n == 0 or D == 0:
        return out
    sfx = R.suffix(src.dtype)
    if not _state["deterministic"]:
        bad = cp.zeros(1, dtype=cp.int32)
        R.launch(f"ember_index_add_{sfx}", R.blocks(n * D), 256,
               (src, idx, out, 1, int(n_out), int(n), int(D), int(skip_index), bad))
        return out
    perm = cp.ascontiguousarray(cp.argsort(idx).astype(_I64, copy=False))
    sidx = cp.ascontiguousarray(idx[perm])
    starts = cp.flatnonzero(cp.concatenate([cp.ones(1, dtype=bool), sidx[1:] != sidx[:-1]]))
    seg = cp.ascontiguousarray(cp.concatenate([starts.astype(_I64),
                                               cp.full(1, n, dtype=_I64)]))
    nseg = int(starts.size)
    R.launch(f"ember_index_add_sorted_{sfx}", R.blocks(nseg * D), 256,
           (src, sidx, perm, seg, nseg, out, 1, int(n_out), int(n), int(D), int(skip_index)))
    return out


@gpu_op("nn.functional.embedding")
def _embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0,
               scale_grad_by_freq=False, sparse=False):
    return _gather(weight, input)


@gpu_op("nn.functional.sparse._gather_op")
def _gather_op(weight, indices):
    return _gather(weight, indices)


@gpu_op("nn.functional.sparse._embedding_backward")
def _embedding_backward(grad, indices, num_weights, padding_idx, scale):
    """The weight gradient of embedding on CUDA (see sparse._embedding_backward)."""
    cp = R.cp()
    D = grad.shape[-1]
    if scale is not None:
        grad = grad * scale
    g = R.as_cupy(grad)
    if g.dtype != _F32 and g.dtype != _F64:
        g = g.astype(_F32)              # as the CPU: 16-bit gradients sum in float32
    idx = _flat_indices(indices, "embedding backward")
    g = cp.ascontiguousarray(g.reshape(int(idx.size), D))
    pad = -1 if padding_idx is None else int(padding_idx)
    return R.from_cupy(index_add_rows(g, idx, int(num_weights), pad))


@gpu_op("nn.functional.sparse._inverse_counts")
@R.on_arrays_device
def inverse_counts(input, weight):
    """scale_grad_by_freq's factor on the GPU: 1 / (occurrences of each index in the batch),
    shaped input.shape + (1,), of weight's dtype (an ember GPU array)."""
    cp = R.cp()
    idx = _flat_indices(input, "embedding")
    counts = cp.bincount(idx, minlength=int(weight.shape[0]))
    inv = (1.0 / cp.maximum(counts, 1))[idx]
    return R.from_cupy(inv.reshape(tuple(input.shape) + (1,)).astype(weight.dtype))


@gpu_op("nn.functional.sparse._renorm_")
@R.on_arrays_device
def renorm_(weight, indices, max_norm, norm_type):
    """embedding's max_norm on the GPU: rows of `weight` referenced by `indices` scaled in
    place to norm <= max_norm (the CPU's _renorm_)."""
    cp = R.cp()
    w = R.as_cupy(weight)
    V = weight.shape[0]
    idx = cp.unique(_flat_indices(indices, "embedding"))
    if idx.size:
        lo, hi = int(idx[0]), int(idx[-1])
        if lo < 0 or hi >= V:
            bad = lo if lo < 0 else hi
            raise IndexError(f"embedding: index {bad} is out of range for an embedding of "
                             f"num_embeddings={V} (valid indices are 0 to {V - 1})")
    rows = w[idx]
    norms = cp.linalg.norm(rows.astype(_F64), ord=norm_type, axis=1)
    big = norms > max_norm
    if bool(big.any()):
        scale = cp.where(big, max_norm / (norms + 1e-7), 1.0)
        w[idx] = rows * scale[:, None].astype(w.dtype)
        weight._bump_version()
