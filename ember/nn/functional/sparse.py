"""embedding and one_hot: lookups of rows of a weight matrix by integer index.

The gradient of ``embedding`` w.r.t. the weight is a scatter-add of the output gradient's
rows (a CPU kernel); rows at ``padding_idx`` get none.  That scatter-add is itself a
differentiable op (its gradient is an embedding lookup), so double backward works.

>>> import ember
>>> import ember.nn.functional as F
>>> w = ember.arange(6.0).reshape(3, 2)
>>> F.embedding(ember.asarray([[2, 0]]), w).tolist()
[[[4.0, 5.0], [0.0, 1.0]]]
"""
import numpy as np

from ember._core.array import ndarray
from ember._api._util import numpy_view, empty_raw, as_array, shape_str
from ember.autograd.registry import defop
from ember._core.dtypes import dtype_kind, is_half_dtype

__all__ = ["embedding", "one_hot"]


def _K():
    from ember._kernels.cpu import embedding as K
    return K


def _flat_indices(indices, opname):
    """indices as a contiguous flat int32/int64 NumPy array."""
    if not isinstance(indices, ndarray):
        indices = as_array(indices)
    dt = indices.dtype
    if dtype_kind(dt) not in "iu" or dt == np.bool_:
        raise TypeError(f"{opname}: indices must be an integer array (int32 or int64), got "
                        f"dtype {dt}")
    v = numpy_view(indices)
    if dt != np.int64 and dt != np.int32:
        v = v.astype(np.int64)
    return np.ascontiguousarray(v).reshape(-1)


def _weight_view(weight, opname):
    if not isinstance(weight, ndarray):
        raise TypeError(f"{opname}: weight must be an ember array, got {type(weight).__name__}")
    if weight.ndim != 2:
        raise ValueError(f"{opname}: weight must be 2-d (num_embeddings, embedding_dim), got "
                         f"shape {shape_str(weight.shape)}")
    if weight.dtype != np.float32 and weight.dtype != np.float64 and not is_half_dtype(weight.dtype):
        raise TypeError(f"{opname}: weight must be a floating array (float16, bfloat16, float32 "
                        f"or float64), got dtype {weight.dtype}")
    w = weight if weight.is_contiguous() else weight.copy()
    return numpy_view(w)


def _gather(weight, indices, opname="embedding"):
    """weight[indices] through the row-gather kernel, with a clear error for bad indices."""
    wv = _weight_view(weight, opname)
    idx = _flat_indices(indices, opname)
    out = empty_raw(tuple(indices.shape) + (weight.shape[1],), weight.dtype)
    ov = numpy_view(out).reshape(idx.shape[0], weight.shape[1])
    if is_half_dtype(weight.dtype):     # the row copy moves bytes: 16-bit rows as uint16
        wv, ov = wv.view(np.uint16), ov.view(np.uint16)
    bad = _K().gather_rows(wv, idx, ov)
    if bad >= 0:
        raise IndexError(f"{opname}: index {int(idx[bad])} is out of range for an embedding "
                         f"of num_embeddings={weight.shape[0]} (valid indices are 0 to "
                         f"{weight.shape[0] - 1}); indices shape {shape_str(indices.shape)}")
    return out


def _padding_mask(indices, padding_idx, dtype):
    """1 where indices != padding_idx, 0 there, with a trailing axis for broadcasting."""
    import ember
    return ember.expand_dims((indices != padding_idx).astype(dtype), -1)


def _embedding_backward_grad(gg, res, grad, indices, num_weights, padding_idx, scale):
    # d(sum <gg, scatter_add(grad)>)/d grad = gg gathered at indices (0 at padding)
    if not grad.requires_grad:
        return None, None, None, None, None
    out = _gather_op(gg, indices)
    if padding_idx is not None and padding_idx >= 0:
        out = out * _padding_mask(indices, padding_idx, out.dtype)
    if scale is not None:
        out = out * scale
    return out, None, None, None, None


@defop("nn.functional.sparse._embedding_backward", grad=_embedding_backward_grad,
       save_args=True)
def _embedding_backward(grad, indices, num_weights, padding_idx, scale):
    """The weight gradient of embedding: zeros (num_weights, D), then
    ``out[indices[i]] += grad[i] * scale[i]`` for indices != padding_idx."""
    import ember
    D = grad.shape[-1]
    if scale is not None:
        grad = grad * scale
    g = grad if grad.is_contiguous() else grad.copy()
    if g.dtype != np.float32 and g.dtype != np.float64:
        g = g.astype(np.float32)
    out = ember.zeros((num_weights, D), dtype=g.dtype)
    idx = _flat_indices(indices, "embedding backward")
    pad = -1 if padding_idx is None else int(padding_idx)
    _K().scatter_add_rows(numpy_view(g).reshape(idx.shape[0], D), idx, numpy_view(out), pad)
    return out


def _gather_op_grad(g, res, weight, indices):
    return (_embedding_backward(g, indices, weight.shape[0], None, None), None)


@defop("nn.functional.sparse._gather_op", grad=_gather_op_grad, save_args=True)
def _gather_op(weight, indices):
    return _gather(weight, indices)


def _embedding_grad(g, res, input, weight, padding_idx=None, max_norm=None, norm_type=2.0,
                    scale_grad_by_freq=False, sparse=False):
    scale = _inverse_counts(input, weight) if scale_grad_by_freq else None
    pad = None
    if padding_idx is not None:
        pad = padding_idx + weight.shape[0] if padding_idx < 0 else padding_idx
    return None, _embedding_backward(g, input, weight.shape[0], pad, scale)


# The device-specific pieces below are private ops; their GPU implementations are
# registered for the same names in ember/cuda/ops_sparse.py.

@defop("nn.functional.sparse._inverse_counts")
def _inverse_counts(input, weight):
    """scale_grad_by_freq's factor: 1 / (occurrences of each index in the batch), shaped
    input.shape + (1,), of weight's dtype."""
    idx = _flat_indices(input, "embedding")
    counts = np.zeros(weight.shape[0], dtype=np.int64)
    _K().count_rows(idx, counts)
    inv = (1.0 / np.maximum(counts, 1))[idx].reshape(tuple(input.shape) + (1,))
    return as_array(inv.astype(weight.dtype))


@defop("nn.functional.sparse._renorm_")
def _renorm_(weight, indices, max_norm, norm_type):
    """Scale the rows of `weight` referenced by `indices` to norm <= max_norm, in place."""
    wv = numpy_view(weight)
    idx = np.unique(_flat_indices(indices, "embedding"))
    if idx.size and (idx[0] < 0 or idx[-1] >= weight.shape[0]):
        bad = idx[0] if idx[0] < 0 else idx[-1]
        raise IndexError(f"embedding: index {int(bad)} is out of range for an embedding of "
                         f"num_embeddings={weight.shape[0]} (valid indices are 0 to "
                         f"{weight.shape[0] - 1})")
    rows = wv[idx]
    norms = np.linalg.norm(rows.astype(np.float64), ord=norm_type, axis=1)
    big = norms > max_norm
    if big.any():
        scale = max_norm / (norms[big] + 1e-7)
        wv[idx[big]] = rows[big] * scale[:, None].astype(wv.dtype)
        weight._bump_version()


@defop("nn.functional.embedding", grad=_embedding_grad, save_args=True)
def _embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0,
               scale_grad_by_freq=False, sparse=False):
    return _gather(weight, input)


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0,
              scale_grad_by_freq=False, sparse=False):
    """Rows of `weight` (num_embeddings, embedding_dim) selected by the integer array
    `input`: the result has shape ``input.shape + (embedding_dim,)``.

    ``padding_idx``: that row gets no gradient.  ``max_norm``: rows looked up are first
    rescaled in place to norm <= max_norm (``norm_type``-norm).  ``scale_grad_by_freq``:
    gradients are divided by how often each index occurs in the batch.  ``sparse``
    gradients are not supported (dense gradients are returned).

    >>> import ember
    >>> import ember.nn.functional as F
    >>> F.embedding(ember.asarray([1, 1]), ember.eye(3)).tolist()
    [[0.0, 1.0, 0.0], [0.0, 1.0, 0.0]]
    """
    if padding_idx is not None:
        n = weight.shape[0]
        if not -n <= padding_idx < n:
            raise ValueError(f"embedding: padding_idx must be within num_embeddings "
                             f"(-{n} <= padding_idx < {n}), got {padding_idx}")
    if not isinstance(input, ndarray):
        input = as_array(input)
    if max_norm is not None:
        import ember
        with ember.no_grad():
            _renorm_(weight, input, max_norm, norm_type)
    if padding_idx is None and not scale_grad_by_freq:
        return _embedding(input, weight)
    return _embedding(input, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq,
                      sparse)


def one_hot(tensor, num_classes=-1):
    """One-hot encoding of an integer array: shape ``tensor.shape + (num_classes,)``,
    dtype int64 (``num_classes=-1``: max + 1).

    >>> import ember
    >>> import ember.nn.functional as F
    >>> F.one_hot(ember.asarray([0, 2]), 3).tolist()
    [[1, 0, 0], [0, 0, 1]]
    """
    import ember
    idx = _flat_indices(tensor, "one_hot")
    if num_classes == -1:
        if idx.size == 0:
            raise RuntimeError("one_hot: cannot infer the number of classes of an empty array; "
                               "pass num_classes")
        num_classes = int(idx.max()) + 1
    if idx.size and (idx.min() < 0 or idx.max() >= num_classes):
        raise RuntimeError(f"one_hot: class values must be in [0, {num_classes}), got values "
                           f"from {int(idx.min())} to {int(idx.max())}")
    out = np.zeros((idx.size, num_classes), dtype=np.int64)
    out[np.arange(idx.size), idx] = 1
    return ember.asarray(out.reshape(tuple(tensor.shape) + (num_classes,)))
