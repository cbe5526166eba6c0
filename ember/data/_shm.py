"""Shared-memory transport of batches from DataLoader workers to the main process.

A worker builds each batch inside a fresh POSIX shared-memory segment (an
*arena*): default_collate stacks samples straight into it, and any other array
in the batch (a custom collate_fn's output, ``batch_size=None`` samples) is
copied into it once.  The batch is then pickled with every array replaced by a
small reference ``(segment, offset, shape, strides, dtype)``; only that
metadata travels through the pipe.  The main process opens the segment, maps
it, **unlinks it at once** (the name disappears from /dev/shm; the memory
lives on while mapped) and rebuilds the arrays as zero-copy ember arrays over
the mapping.  The mapping is an ordinary ``mmap`` object: NumPy holds a buffer
export on it and ember holds the NumPy array, so the memory is unmapped by
reference counting when the last array (or view) of the batch dies; nothing
has to be closed by hand.

Segment names are chosen by the main process (``<prefix>_<epoch>_<task>_<k>``),
so when an iterator shuts down it can unlink every segment of a task it never
received (a worker killed mid-batch, batches in flight at an early ``break``).
A worker whose parent died unlinks the segments it sent.

Why a fresh segment per batch rather than a ring of reused ones: the main
process hands the memory to the user zero-copy, and a batch may live for any
time (kept in a list, or a view of it kept), so reuse would need a handshake
back to the worker or a copy in the main process.  Per-batch segments cost a
shm_open + ftruncate + mmap + page faults (tens of microseconds per MB),
which the worker pays in parallel; measured on 768 KB batches this is well
below pickling the batch through a pipe (see benchmarks/bench_data.py).
"""
import io
import mmap
import os
import pickle

import numpy as np

from ember._core.array import ndarray
from ember._api._util import wrap, numpy_view, empty_raw

try:                                        # POSIX shared memory (CPython's own module)
    import _posixshmem
    AVAILABLE = True
except ImportError:                         # pragma: no cover - non-POSIX platforms
    _posixshmem = None
    AVAILABLE = False

_ALIGN = 64
_MIN_SEGMENT = 1 << 20          # first segment of a worker: at least 1 MiB (tmpfs is sparse)
SMALL = 32 << 10                # arrays below this many bytes travel pickled in the metadata
                                # (a segment costs more than copying them)


def _round_up(n, a):
    return (n + a - 1) // a * a


def unlink(name):
    """Remove a segment name; True when it existed."""
    try:
        _posixshmem.shm_unlink(name)
        return True
    except FileNotFoundError:
        return False


def open_and_unlink(name):
    """Map an existing segment read-write and remove its name (the mapping keeps
    the memory alive until it is garbage)."""
    fd = _posixshmem.shm_open(name, os.O_RDWR, mode=0o600)
    try:
        _posixshmem.shm_unlink(name)
        size = os.fstat(fd).st_size
        return mmap.mmap(fd, size)
    finally:
        os.close(fd)


class Arena:
    """Bump allocator over shared-memory segments, for one batch in a worker."""

    def __init__(self, base_name, hint):
        self.base_name = base_name
        self.hint = hint
        self.segments = []          # [name, mmap, uint8 view, address]
        self.pos = 0
        self.used = 0

    def _new_segment(self, nbytes):
        size = _round_up(max(nbytes, self.hint - self.used, _MIN_SEGMENT if not self.hint
                             else 0, 1), mmap.PAGESIZE)
        name = f"{self.base_name}_{len(self.segments)}"
        fd = _posixshmem.shm_open(name, os.O_CREAT | os.O_EXCL | os.O_RDWR, mode=0o600)
        try:
            os.ftruncate(fd, size)
            mm = mmap.mmap(fd, size)
        except BaseException:
            os.close(fd)
            unlink(name)
            raise
        os.close(fd)
        raw = np.frombuffer(mm, dtype=np.uint8)
        self.segments.append([name, mm, raw, raw.ctypes.data])
        self.pos = 0

    def alloc(self, shape, dtype):
        """(ember array, NumPy view) of a C-contiguous array inside the arena
        (small arrays: in private memory; they are pickled)."""
        dtype = np.dtype(dtype)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        if nbytes < SMALL:
            out = empty_raw(shape, dtype)
            return out, numpy_view(out)
        return self._alloc(shape, dtype, nbytes)

    def _alloc(self, shape, dtype, nbytes):
        if not self.segments or self.pos + nbytes > self.segments[-1][2].shape[0]:
            self._new_segment(nbytes)
        raw = self.segments[-1][2]
        view = raw[self.pos:self.pos + nbytes].view(dtype).reshape(shape)
        self.pos = _round_up(self.pos + nbytes, _ALIGN)
        self.used += _round_up(nbytes, _ALIGN)
        return wrap(view), view

    def locate(self, arr):
        """(segment index, byte offset) when `arr`'s memory lies inside the arena."""
        addr = arr.__array_interface__["data"][0]
        for k, (_, _, raw, base) in enumerate(self.segments):
            if base <= addr < base + raw.shape[0]:
                lo, hi = np.lib.array_utils.byte_bounds(arr) if hasattr(np.lib, "array_utils") \
                    else np.byte_bounds(arr)
                if lo >= base and hi <= base + raw.shape[0]:
                    return k, addr - base
        return None

    def names(self):
        return [s[0] for s in self.segments]

    def release(self):
        """Drop the worker's mappings (the segments live on in the main process)."""
        segs, self.segments = self.segments, []
        for s in segs:
            s[2] = None
            try:
                s[1].close()
            except BufferError:     # an array of the batch is still referenced here;
                pass                # the mapping goes when it does

    def discard(self):
        """Unlink and drop every segment (the batch is not sent)."""
        for s in self.segments:
            unlink(s[0])
        self.release()


class _Packer(pickle.Pickler):
    def __init__(self, file, arena):
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.arena = arena

    def persistent_id(self, obj):
        t = type(obj)
        if t is ndarray or isinstance(obj, ndarray):
            return self._ref(numpy_view(obj), True)
        if (t is np.ndarray or t is np.memmap) and obj.dtype.kind not in "OV" \
                and not obj.dtype.hasobject:
            return self._ref(obj, False)
        return None

    def _ref(self, a, is_ember):
        if a.size == 0:
            return (-1, 0, a.shape, None, a.dtype.str, is_ember)
        loc = self.arena.locate(a)
        if loc is None:
            if a.nbytes < SMALL:
                return None                 # pickled inline with the metadata
            _, view = self.arena._alloc(a.shape, a.dtype, a.nbytes)
            view[...] = a
            a = view
            loc = self.arena.locate(a)
        seg, offset = loc
        return (seg, offset, a.shape, a.strides, a.dtype.str, is_ember)


class _Unpacker(pickle.Unpickler):
    def __init__(self, file, maps):
        super().__init__(file)
        self.maps = maps

    def persistent_load(self, pid):
        seg, offset, shape, strides, dtype, is_ember = pid
        if seg < 0:
            a = np.empty(shape, dtype=np.dtype(dtype))
            return wrap(a) if is_ember else a
        a = np.ndarray(shape, dtype=np.dtype(dtype), buffer=self.maps[seg], offset=offset,
                       strides=strides)
        return wrap(a) if is_ember else a


def pack(obj, arena):
    """Pickle `obj` with its arrays placed in `arena`: (segment names, payload bytes)."""
    f = io.BytesIO()
    _Packer(f, arena).dump(obj)
    return arena.names(), f.getvalue()


def unpack(names, payload):
    """Inverse of `pack`, in the main process: map (and unlink) the segments and
    rebuild the object with zero-copy arrays."""
    maps = []
    try:
        for name in names:
            maps.append(open_and_unlink(name))
    except BaseException:
        for name in names[len(maps):]:
            unlink(name)
        raise
    return _Unpacker(io.BytesIO(payload), maps).load()
