"""Collation: turning a list of samples into a batch (PyTorch's default_collate).

``default_collate`` stacks ember arrays, NumPy arrays and numbers into ember
arrays with a new leading batch axis, keeps strings as lists, and recurses
into dicts, namedtuples, tuples and lists, with PyTorch's output types and
dtypes (Python ints -> int64, floats -> float64, bools -> bool; NumPy and
ember arrays keep their dtype; tuples come back as lists).
``default_convert`` (used when ``batch_size=None``) only converts NumPy
arrays and scalars to ember arrays.

Inside a DataLoader worker the stacked arrays are written straight into the
shared-memory segment that carries the batch to the main process (see
``ember/data/_shm.py``), so a batch is copied once, not three times.

>>> from ember.data import default_collate
>>> b = default_collate([{"x": 1.5, "y": 1}, {"x": 2.5, "y": 2}])
>>> b["x"].dtype, b["y"].dtype, b["y"].tolist()
(dtype('float64'), dtype('int64'), [1, 2])
"""
import collections.abc
import copy
import re

import numpy as np

from ember._core.array import ndarray
from ember._api._util import wrap, numpy_view, empty_raw
from ember._core.dtypes import dtype_kind

__all__ = ["default_collate", "default_convert", "collate", "default_collate_fn_map"]

np_str_obj_array_pattern = re.compile(r"[SaUO]")
default_collate_err_msg_format = ("default_collate: batch must contain tensors, numpy arrays, "
                                  "numbers, dicts or lists; found {}")


# ------------------------------------------------------------------ output memory

def _alloc_private(shape, dtype):
    out = empty_raw(shape, dtype)
    return out, numpy_view(out)


# (shape, dtype) -> (ember array, writable NumPy view of its memory).  A DataLoader
# worker swaps in an allocator that carves the arrays out of a shared-memory segment.
_allocator = _alloc_private


def _set_allocator(alloc):
    """Install `alloc` (None: private memory); returns the previous one."""
    global _allocator
    prev = _allocator
    _allocator = _alloc_private if alloc is None else alloc
    return prev


def _stack_numpy(arrays):
    """Stack same-shape NumPy arrays along a new axis 0 into a fresh ember array."""
    first = arrays[0]
    shape = first.shape
    dtype = first.dtype
    for i, a in enumerate(arrays):
        if a.shape != shape:
            raise RuntimeError(f"stack expects each tensor to be equal size, but got "
                               f"{list(shape)} at entry 0 and {list(a.shape)} at entry {i}")
        if a.dtype != dtype:
            dtype = np.result_type(dtype, a.dtype)
    out, view = _allocator((len(arrays),) + shape, dtype)
    if first.size:
        np.stack(arrays, out=view)
    return out


# ------------------------------------------------------------------ per-type collate

def collate_array_fn(batch, *, collate_fn_map=None):
    """ember arrays -> one ember array with a new leading batch axis."""
    from ember.autograd.grad_mode import is_grad_enabled
    if is_grad_enabled() and any(getattr(b, "requires_grad", False) for b in batch):
        import ember
        return ember.stack(list(batch))             # keeps the autograd history
    return _stack_numpy([numpy_view(b) for b in batch])


def collate_numpy_array_fn(batch, *, collate_fn_map=None):
    elem = batch[0]
    if np_str_obj_array_pattern.search(elem.dtype.str) is not None:
        raise TypeError(default_collate_err_msg_format.format(elem.dtype))
    return _stack_numpy([np.asarray(b) for b in batch])


def collate_numpy_scalar_fn(batch, *, collate_fn_map=None):
    arr = np.asarray(batch)
    if dtype_kind(arr.dtype) in "OSUV":
        raise TypeError(default_collate_err_msg_format.format(type(batch[0])))
    return wrap(arr)


def collate_float_fn(batch, *, collate_fn_map=None):
    return wrap(np.asarray(batch, dtype=np.float64))


def collate_int_fn(batch, *, collate_fn_map=None):
    arr = np.asarray(batch)
    if dtype_kind(arr.dtype) in "iu":
        if arr.dtype != np.int64:
            arr = arr.astype(np.int64)
    elif dtype_kind(arr.dtype) == "f":                     # ints mixed with floats, as torch.tensor
        from ember._core.dtypes import default_float_dtype
        arr = arr.astype(default_float_dtype())
    elif dtype_kind(arr.dtype) != "b":
        raise TypeError(default_collate_err_msg_format.format(type(batch[0])))
    return wrap(arr)


def collate_str_fn(batch, *, collate_fn_map=None):
    return batch


default_collate_fn_map = {
    ndarray: collate_array_fn,
    np.ndarray: collate_numpy_array_fn,
    (np.bool_, np.number, np.object_): collate_numpy_scalar_fn,
    float: collate_float_fn,
    int: collate_int_fn,
    str: collate_str_fn,
    bytes: collate_str_fn,
}


# ------------------------------------------------------------------ the recursion

def collate(batch, *, collate_fn_map=None):
    """Collate `batch` (a list of samples), dispatching leaf types through
    ``collate_fn_map`` (type or tuple of types -> ``fn(batch, *, collate_fn_map)``)
    and recursing into mappings and sequences, as PyTorch's ``collate``.

    >>> from ember.data.collate import collate
    >>> collate([(1, "a"), (2, "b")], collate_fn_map={int: lambda b, **k: sum(b),
    ...                                                str: lambda b, **k: list(b)})
    [3, ['a', 'b']]
    """
    elem = batch[0]
    elem_type = type(elem)
    if collate_fn_map is not None:
        if elem_type in collate_fn_map:
            return collate_fn_map[elem_type](batch, collate_fn_map=collate_fn_map)
        for collate_type in collate_fn_map:
            if isinstance(elem, collate_type):
                return collate_fn_map[collate_type](batch, collate_fn_map=collate_fn_map)

    if isinstance(elem, collections.abc.Mapping):
        try:
            if isinstance(elem, collections.abc.MutableMapping):
                clone = copy.copy(elem)
                clone.update({key: collate([d[key] for d in batch], collate_fn_map=collate_fn_map)
                              for key in elem})
                return clone
            return elem_type({key: collate([d[key] for d in batch], collate_fn_map=collate_fn_map)
                              for key in elem})
        except TypeError:
            return {key: collate([d[key] for d in batch], collate_fn_map=collate_fn_map)
                    for key in elem}
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):        # namedtuple
        return elem_type(*(collate(samples, collate_fn_map=collate_fn_map)
                           for samples in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        it = iter(batch)
        elem_size = len(next(it))
        if not all(len(e) == elem_size for e in it):
            raise RuntimeError("each element in list of batch should be of equal size")
        transposed = list(zip(*batch))
        if isinstance(elem, tuple):
            return [collate(samples, collate_fn_map=collate_fn_map) for samples in transposed]
        try:
            if isinstance(elem, collections.abc.MutableSequence):
                clone = copy.copy(elem)
                for i, samples in enumerate(transposed):
                    clone[i] = collate(samples, collate_fn_map=collate_fn_map)
                return clone
            return elem_type([collate(samples, collate_fn_map=collate_fn_map)
                              for samples in transposed])
        except TypeError:
            return [collate(samples, collate_fn_map=collate_fn_map) for samples in transposed]
    raise TypeError(default_collate_err_msg_format.format(elem_type))


def default_collate(batch):
    """Stack a list of samples into a batch, as ``torch.utils.data.default_collate``.

    ember / NumPy arrays -> ember array with a leading batch axis (dtype kept);
    ``int`` -> int64, ``float`` -> float64, ``bool`` -> bool; ``str``/``bytes``
    -> list unchanged; dicts, namedtuples and lists collate field by field
    (tuples come back as lists).

    >>> import ember
    >>> from ember.data import default_collate
    >>> default_collate([0, 1, 2]).tolist()
    [0, 1, 2]
    >>> default_collate(["a", "b"])
    ['a', 'b']
    >>> x, y = default_collate([(ember.zeros(2), 0), (ember.ones(2), 1)])
    >>> x.shape, y.tolist()
    ((2, 2), [0, 1])
    """
    return collate(batch, collate_fn_map=default_collate_fn_map)


def default_convert(data):
    """Convert NumPy arrays and scalars inside ``data`` to ember arrays (no batching);
    the collate function used when ``batch_size=None``.

    >>> import numpy as np
    >>> from ember.data import default_convert
    >>> out = default_convert({"a": np.arange(3), "b": "text", "c": 7})
    >>> type(out["a"]).__name__, out["b"], out["c"]
    ('ndarray', 'text', 7)
    """
    elem_type = type(data)
    if isinstance(data, ndarray):
        return data
    if elem_type.__module__ == "numpy" and elem_type.__name__ not in ("str_", "string_", "bytes_"):
        if isinstance(data, np.ndarray) and np_str_obj_array_pattern.search(data.dtype.str):
            return data
        if isinstance(data, np.generic) and dtype_kind(np.dtype(data.dtype)) in "OSUV":
            return data
        return wrap(np.asarray(data))
    if isinstance(data, collections.abc.Mapping):
        try:
            if isinstance(data, collections.abc.MutableMapping):
                clone = copy.copy(data)
                clone.update({key: default_convert(data[key]) for key in data})
                return clone
            return elem_type({key: default_convert(data[key]) for key in data})
        except TypeError:
            return {key: default_convert(data[key]) for key in data}
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return elem_type(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        try:
            if isinstance(data, collections.abc.MutableSequence):
                clone = copy.copy(data)
                for i, d in enumerate(data):
                    clone[i] = default_convert(d)
                return clone
            return elem_type([default_convert(d) for d in data])
        except TypeError:
            return [default_convert(d) for d in data]
    return data
