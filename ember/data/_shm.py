"""Shared-memory transport of batches from DataLoader workers to the main process.

Each worker owns a small pool of POSIX shared-memory segments.  It builds a
batch inside a free segment (default_collate and the TensorDataset gatherer
write the stacked arrays straight into it; any other large array in the batch,
e.g. from a custom collate_fn, is copied into it once), then pickles the batch
with every array replaced by a reference ``(segment, offset, shape, strides,
dtype)``: only that metadata goes through the worker's pipe.

The main process maps each segment the first time it sees it and **unlinks
its name at once** (nothing is left in /dev/shm; the memory lives while
mapped), keeps the mapping, and rebuilds the batch's arrays as zero-copy ember
arrays over it.  All arrays of one batch in one segment are views of one NumPy
array object whose death (the last array or view of the batch is gone; plain
reference counting) is observed with ``weakref.finalize``: the segment is
then reported free to its worker, piggy-backed on the next task sent to it,
and reused.  A batch the user keeps simply keeps its segment; the worker then
creates another one (the pool grows to what is in flight plus what is held).

Why reuse instead of a fresh segment per batch: a fresh segment costs
shm_open + ftruncate + mmap in both processes, munmap, and a page fault per
4 KB page when the worker first writes it; on this machine that is ~1 ms for a
768 KB batch, against ~27 us to write the same bytes into a segment already
mapped (and ~67 us to pickle and unpickle them).  With reuse, a batch costs the
main process a few tens of microseconds whatever its size.

Names are ``<iterator prefix>_<worker>_<k>`` with k = 0, 1, 2... per worker,
so an iterator that shuts down (or whose worker died) can unlink every name
it never mapped: it knows which k it has seen.  A worker whose parent died
unlinks all its names itself.  Arrays under ``SMALL`` bytes travel pickled in
the metadata (cheaper than any segment bookkeeping).
"""
import errno
import io
import mmap
import os
import pickle
import weakref

import numpy as np

from ember._core.array import ndarray
from ember._api._util import wrap, numpy_view, empty_raw
from ember._core.dtypes import dtype_kind

try:                                        # POSIX shared memory (CPython's own module)
    import _posixshmem
    AVAILABLE = True
except ImportError:                         # pragma: no cover - non-POSIX platforms
    _posixshmem = None
    AVAILABLE = False

_ALIGN = 64
_MIN_SEGMENT = 1 << 20          # a worker's first segment: at least 1 MiB (tmpfs is sparse)
SMALL = 32 << 10                # arrays below this many bytes travel pickled in the metadata


def _round_up(n, a):
    return (n + a - 1) // a * a


def seg_name(prefix, worker_id, k):
    return f"{prefix}_{worker_id}_{k}"


def unlink(name):
    """Remove a segment name; True when it existed."""
    try:
        _posixshmem.shm_unlink(name)
        return True
    except FileNotFoundError:
        return False


# ------------------------------------------------------------------ worker side

class _Segment:
    __slots__ = ("k", "name", "mm", "raw", "base", "size", "announced")

    def __init__(self, k, name, size):
        fd = _posixshmem.shm_open(name, os.O_CREAT | os.O_EXCL | os.O_RDWR, mode=0o600)
        try:
            os.ftruncate(fd, size)
            if hasattr(os, "posix_fallocate"):
                # reserve the pages now: a full /dev/shm is then a clear error here,
                # not a SIGBUS when the batch is written
                try:
                    os.posix_fallocate(fd, 0, size)
                except OSError as exc:
                    if exc.errno in (errno.ENOSPC, errno.ENOMEM):
                        raise OSError(exc.errno, f"DataLoader: cannot reserve {size} bytes of "
                                      "shared memory for a batch (/dev/shm is full); enlarge "
                                      "it (e.g. docker --shm-size), or use fewer workers or a "
                                      "smaller prefetch_factor") from None
                    if exc.errno not in (errno.EINVAL, errno.EOPNOTSUPP):
                        raise
            self.mm = mmap.mmap(fd, size)
        except BaseException:
            os.close(fd)
            unlink(name)
            raise
        os.close(fd)
        self.k, self.name, self.size = k, name, size
        self.raw = np.frombuffer(self.mm, dtype=np.uint8)
        self.base = self.raw.ctypes.data
        self.announced = False          # the main process has not mapped it yet

    def close(self):
        self.raw = None
        try:
            self.mm.close()
        except BufferError:             # an array of it is still referenced here;
            pass                        # the mapping goes when that array does


class Pool:
    """A worker's segments: free ones are reused for the next batch."""

    def __init__(self, prefix, worker_id):
        self.prefix, self.worker_id = prefix, worker_id
        self.next_k = 0
        self.free = []                  # _Segment
        self.busy = {}                  # k -> _Segment (the main process holds its batch)
        self.retired = []               # ks to report: dropped segments
        self.hint = 0                   # bytes the last batch needed

    def release(self, ks):
        """The main process is done with segments `ks`."""
        for k in ks:
            seg = self.busy.pop(k, None)
            if seg is not None:
                self.free.append(seg)

    def take(self, nbytes):
        """A free segment of at least `nbytes` (a new one when none fits; free
        segments smaller than a new one are retired)."""
        best = None
        for seg in self.free:
            if seg.size >= nbytes and (best is None or seg.size < best.size):
                best = seg
        if best is not None:
            self.free.remove(best)
            return best
        size = _round_up(max(nbytes, self.hint, _MIN_SEGMENT if not self.hint else 1),
                         mmap.PAGESIZE)
        for seg in [s for s in self.free if s.size < size]:
            self.free.remove(seg)
            self.retired.append(seg.k)
            seg.close()
        seg = _Segment(self.next_k, seg_name(self.prefix, self.worker_id, self.next_k), size)
        self.next_k += 1
        return seg

    def all_names(self):
        return [seg_name(self.prefix, self.worker_id, k) for k in range(self.next_k)]


class Arena:
    """Bump allocator for one batch over segments taken from a Pool."""

    def __init__(self, pool):
        self.pool = pool
        self.segs = []
        self.pos = 0
        self.used = 0

    def alloc(self, shape, dtype):
        """(ember array, NumPy view) of a C-contiguous array for the batch: in a
        segment, or in private memory when small (then it is pickled)."""
        dtype = np.dtype(dtype)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        if nbytes < SMALL:
            out = empty_raw(shape, dtype)
            return out, numpy_view(out)
        view = self._alloc(shape, dtype, nbytes)
        return wrap(view), view

    def _alloc(self, shape, dtype, nbytes):
        if not self.segs or self.pos + nbytes > self.segs[-1].size:
            self.segs.append(self.pool.take(max(nbytes, self.pool.hint - self.used)))
            self.pos = 0
        raw = self.segs[-1].raw
        view = raw[self.pos:self.pos + nbytes].view(dtype).reshape(shape)
        self.pos = _round_up(self.pos + nbytes, _ALIGN)
        self.used += _round_up(nbytes, _ALIGN)
        return view

    def locate(self, arr):
        """(index in self.segs, byte offset) when `arr` lies inside the arena."""
        addr = arr.__array_interface__["data"][0]
        for i, seg in enumerate(self.segs):
            if seg.base <= addr < seg.base + seg.size:
                lo, hi = np.lib.array_utils.byte_bounds(arr)
                if lo >= seg.base and hi <= seg.base + seg.size:
                    return i, addr - seg.base
        return None

    def commit(self):
        """The batch is sent: its segments are busy until the main process frees
        them.  Returns [(k, size, new)] in arena order."""
        pool = self.pool
        out = []
        for seg in self.segs:
            out.append((seg.k, seg.size, not seg.announced))
            seg.announced = True
            pool.busy[seg.k] = seg
        if self.used:
            pool.hint = self.used
        self.segs = []
        return out

    def abort(self):
        """The batch is not sent: its segments go back to the free list."""
        self.pool.free.extend(self.segs)
        self.segs = []


class _Packer(pickle.Pickler):
    def __init__(self, file, arena):
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.arena = arena

    def persistent_id(self, obj):
        t = type(obj)
        if t is ndarray or isinstance(obj, ndarray):
            return self._ref(numpy_view(obj), True)
        if (t is np.ndarray or t is np.memmap) and not obj.dtype.hasobject \
                and dtype_kind(obj.dtype) != "V":
            return self._ref(obj, False)
        return None

    def _ref(self, a, is_ember):
        if a.size == 0:
            return (-1, 0, a.shape, None, a.dtype.str, is_ember)
        loc = self.arena.locate(a)
        if loc is None:
            if a.nbytes < SMALL:
                return None                 # pickled inline with the metadata
            view = self.arena._alloc(a.shape, a.dtype, a.nbytes)
            view[...] = a
            loc = self.arena.locate(view)
            a = view
        seg, offset = loc
        return (seg, offset, a.shape, a.strides, a.dtype.str, is_ember)


def pack(obj, arena):
    """Pickle `obj` with its large arrays placed in `arena` -> payload bytes."""
    f = io.BytesIO()
    _Packer(f, arena).dump(obj)
    return f.getvalue()


# ------------------------------------------------------------------ main side

class _Unpacker(pickle.Unpickler):
    """Rebuilds arrays over mapped segments.  All arrays of one batch in one
    segment are views of one NumPy array (its "owner"); a finalizer on the owner
    reports the segment free.  (No closures or per-call classes here: a cycle
    would keep the owners alive until the next garbage collection.)"""

    def __init__(self, file, mms, wid, used, freed):
        super().__init__(file)
        self.mms, self.wid, self.used, self.freed = mms, wid, used, freed
        self.owners = [None] * len(mms)

    def persistent_load(self, pid):
        seg, offset, shape, strides, dtype, is_ember = pid
        if seg < 0:
            a = np.empty(shape, dtype=np.dtype(dtype))
        else:
            o = self.owners[seg]
            if o is None:
                o = self.owners[seg] = np.frombuffer(self.mms[seg], dtype=np.uint8)
                weakref.finalize(o, self.freed.append,
                                 (self.wid, self.used[seg][0])).atexit = False
            a = np.ndarray(shape, dtype=np.dtype(dtype), buffer=o, offset=offset,
                           strides=strides)
        return wrap(a) if is_ember else a


class Receiver:
    """The main process's view of every worker's segments (one per iterator)."""

    def __init__(self, prefix, num_workers):
        self.prefix = prefix
        self.maps = [dict() for _ in range(num_workers)]    # k -> mmap, per worker
        self.seen = [set() for _ in range(num_workers)]     # ks mapped or retired
        self.freed = []                 # (worker, k) of batches that died (finalizers)

    def _map(self, wid, k, size):
        name = seg_name(self.prefix, wid, k)
        fd = _posixshmem.shm_open(name, os.O_RDWR, mode=0o600)
        try:
            _posixshmem.shm_unlink(name)
            mm = mmap.mmap(fd, size)
        finally:
            os.close(fd)
        self.maps[wid][k] = mm
        self.seen[wid].add(k)
        return mm

    def retire(self, wid, ks):
        for k in ks:
            if k not in self.seen[wid]:         # never mapped: its name is still there
                unlink(seg_name(self.prefix, wid, k))
                self.seen[wid].add(k)
            self.maps[wid].pop(k, None)         # arrays still using it keep the mapping

    def segments(self, wid, used):
        """Map the segments of a batch (new ones for the first time)."""
        maps = self.maps[wid]
        return [maps[k] if not new and k in maps else self._map(wid, k, size)
                for k, size, new in used]

    def unpack(self, wid, used, payload):
        """Rebuild a batch: zero-copy arrays over the worker's segments; each
        segment is reported free once every array of this batch in it is gone."""
        u = _Unpacker(io.BytesIO(payload), self.segments(wid, used), wid, used, self.freed)
        obj = u.load()
        for i, (k, _, _) in enumerate(used):    # a segment the batch did not use: free now
            if u.owners[i] is None:
                self.freed.append((wid, k))
        return obj

    def discard(self, wid, used):
        """A batch nobody will see (stale after a reset): its segments are free."""
        self.segments(wid, used)
        for k, _, _ in used:
            self.freed.append((wid, k))

    def take_freed(self, num_workers):
        """Freed segments per worker since the last call."""
        out = [[] for _ in range(num_workers)]
        freed = self.freed
        while freed:
            wid, k = freed.pop()
            out[wid].append(k)
        return out

    def cleanup(self):
        """After the workers are gone: unlink every name never mapped.  Names of
        worker w are k = 0, 1, ...; past the highest k seen, stop at the first
        missing one."""
        for wid, seen in enumerate(self.seen):
            top = max(seen) if seen else -1
            k = 0
            while True:
                if k not in seen:
                    if not unlink(seg_name(self.prefix, wid, k)) and k > top:
                        break
                k += 1
        self.maps = [dict() for _ in self.maps]
