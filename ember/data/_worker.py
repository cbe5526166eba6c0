"""DataLoader worker processes: the loop each worker runs, worker info, seeding,
dataset fetchers, and exception transport.

A worker reads tasks ``(task index, batch indices, segment name)`` from its own
index queue, builds the batch (fetch + collate) into a shared-memory arena
(``ember/data/_shm.py``) and sends back only metadata through its own pipe:
``(kind, task index, payload)``.  Its seeds are ``base_seed + worker_id``
for Python's ``random``, ``ember.random`` (and PyTorch when already
imported); NumPy's legacy global generator gets a seed sequence built from the
base seed and the worker id.  Exceptions are caught and sent with their
formatted traceback; the main process re-raises them in batch order.
"""
import os
import queue
import random
import sys
import traceback

import numpy as np

__all__ = ["get_worker_info", "WorkerInfo"]

# message kinds (worker -> main)
DATA, SHM, ERROR, STOP, RESUMED = range(5)
_POLL_INTERVAL = 0.1        # how often an idle worker checks for shutdown / its parent


class WorkerInfo:
    """What ``get_worker_info()`` returns inside a worker: ``id``, ``num_workers``,
    ``seed`` and ``dataset`` (this worker's copy)."""

    __slots__ = ("id", "num_workers", "seed", "dataset")

    def __init__(self, id, num_workers, seed, dataset):
        self.id = id
        self.num_workers = num_workers
        self.seed = seed
        self.dataset = dataset

    def __setattr__(self, key, val):
        if hasattr(self, "dataset"):
            raise RuntimeError(f"Cannot assign attributes to {type(self).__name__} objects")
        object.__setattr__(self, key, val)

    def __repr__(self):
        return (f"WorkerInfo(id={self.id}, num_workers={self.num_workers}, seed={self.seed}, "
                f"dataset={self.dataset!r})")


_worker_info = None


def get_worker_info():
    """Inside a DataLoader worker: its ``WorkerInfo`` (id, num_workers, seed,
    dataset); in the main process: None.

    >>> from ember.data import get_worker_info
    >>> get_worker_info() is None
    True
    """
    return _worker_info


class _IterableDatasetStopIteration:
    __slots__ = ("worker_id",)

    def __init__(self, worker_id):
        self.worker_id = worker_id


class _ResumeIteration:
    pass


class _KeyErrorMessage(str):
    """A KeyError argument whose repr is itself (keeps the traceback readable)."""

    def __repr__(self):
        return self


class ExceptionWrapper:
    """An exception caught in a worker, with its formatted traceback."""

    def __init__(self, exc_info=None, where="in background"):
        if exc_info is None:
            exc_info = sys.exc_info()
        self.exc_type = exc_info[0]
        self.exc_msg = "".join(traceback.format_exception(*exc_info))
        self.where = where

    def __reduce__(self):
        exc_type = self.exc_type
        try:                        # the class must unpickle in the main process
            import pickle
            pickle.loads(pickle.dumps(exc_type))
        except Exception:
            exc_type = RuntimeError
        return (_rebuild_wrapper, (exc_type, self.exc_msg, self.where))

    def reraise(self):
        msg = f"Caught {self.exc_type.__name__} {self.where}.\nOriginal {self.exc_msg}"
        if self.exc_type is KeyError:
            msg = _KeyErrorMessage(msg)
        elif getattr(self.exc_type, "message", None):
            raise self.exc_type(message=msg)
        try:
            exception = self.exc_type(msg)
        except Exception:
            raise RuntimeError(msg) from None
        try:
            raise exception
        finally:
            exception = None        # no frame -> traceback -> frame cycle keeping the iterator


def _rebuild_wrapper(exc_type, exc_msg, where):
    w = ExceptionWrapper.__new__(ExceptionWrapper)
    w.exc_type, w.exc_msg, w.where = exc_type, exc_msg, where
    return w


# ------------------------------------------------------------------ fetchers

def _gather_fn(dataset):
    """A one-pass batch gatherer for TensorDataset (possibly under Subsets), used
    when the collate function is default_collate; None otherwise."""
    from ember.data.dataset import TensorDataset, Subset
    t = type(dataset)
    if isinstance(dataset, TensorDataset) and t.__getitem__ is TensorDataset.__getitem__ \
            and getattr(t, "__getitems__", None) is None:
        return dataset._gather
    if t is Subset:
        inner = _gather_fn(dataset.dataset)
        if inner is not None:
            ind = dataset.indices
            return lambda indices, alloc: inner([ind[i] for i in indices], alloc)
    return None


class _MapDatasetFetcher:
    def __init__(self, dataset, auto_collation, collate_fn, drop_last):
        from ember.data.collate import default_collate
        self.dataset = dataset
        self.auto_collation = auto_collation
        self.collate_fn = collate_fn
        self.gather = (_gather_fn(dataset)
                       if auto_collation and collate_fn is default_collate else None)

    def fetch(self, index):
        if self.auto_collation:
            if self.gather is not None:
                from ember.data import collate
                out = self.gather(index, collate._allocator)
                if out is not None:
                    return out
            getitems = getattr(self.dataset, "__getitems__", None)
            if getitems:
                data = getitems(index)
            else:
                data = [self.dataset[i] for i in index]
        else:
            data = self.dataset[index]
        return self.collate_fn(data)


class _IterableDatasetFetcher:
    def __init__(self, dataset, auto_collation, collate_fn, drop_last):
        self.dataset_iter = iter(dataset)
        self.auto_collation = auto_collation
        self.collate_fn = collate_fn
        self.drop_last = drop_last
        self.ended = False

    def fetch(self, index):
        if self.ended:
            raise StopIteration
        if self.auto_collation:
            data = []
            for _ in index:
                try:
                    data.append(next(self.dataset_iter))
                except StopIteration:
                    self.ended = True
                    break
            if len(data) == 0 or (self.drop_last and len(data) < len(index)):
                raise StopIteration
        else:
            data = next(self.dataset_iter)
        return self.collate_fn(data)


def create_fetcher(iterable, dataset, auto_collation, collate_fn, drop_last):
    cls = _IterableDatasetFetcher if iterable else _MapDatasetFetcher
    return cls(dataset, auto_collation, collate_fn, drop_last)


# ------------------------------------------------------------------ seeding

def _seed_everything(base_seed, worker_id):
    seed = base_seed + worker_id
    random.seed(seed)
    np.random.seed([worker_id, base_seed & 0xFFFFFFFF, (base_seed >> 32) & 0xFFFFFFFF])
    import ember.random
    ember.random.seed(seed)
    torch = sys.modules.get("torch")
    if torch is not None:                   # the dataset uses torch: seed it too
        try:
            torch.manual_seed(seed)
        except Exception:
            pass
    return seed


# ------------------------------------------------------------------ the loop

def _single_thread(ember):
    """One compute thread per worker (the workers are the parallelism).  This also
    keeps forked workers clear of GNU OpenMP's thread pool, which does not survive
    fork(): an OpenMP region with more than one thread in a forked child of a
    process that already used OpenMP hangs."""
    ember.set_num_threads(1)
    try:
        import ctypes
        mode = getattr(os, "RTLD_NOLOAD", 0)
        if mode:                                # only if ember's OpenMP runtime is loaded
            ctypes.CDLL("libgomp.so.1", mode=mode).omp_set_num_threads(1)
    except (OSError, AttributeError):
        pass


def worker_loop(iterable, dataset, index_queue, conn, done_event, auto_collation, collate_fn,
                drop_last, base_seed, init_fn, worker_id, num_workers, shm_prefix, parent_pid):
    """Body of a DataLoader worker process (``shm_prefix`` None: batches are pickled)."""
    global _worker_info
    pool = None
    try:
        import ember
        from ember.data import collate as collate_mod
        from ember.data import _shm
        _single_thread(ember)
        seed = _seed_everything(base_seed, worker_id)
        _worker_info = WorkerInfo(id=worker_id, num_workers=num_workers, seed=seed,
                                  dataset=dataset)
        where = f"in DataLoader worker process {worker_id}"
        if shm_prefix is not None:
            pool = _shm.Pool(shm_prefix, worker_id)
        init_exception = None
        fetcher = None
        try:
            if init_fn is not None:
                init_fn(worker_id)
            fetcher = create_fetcher(iterable, dataset, auto_collation, collate_fn, drop_last)
        except Exception:
            init_exception = ExceptionWrapper(where=where)

        iteration_end = False
        while True:
            try:
                r = index_queue.get(timeout=_POLL_INTERVAL)
            except queue.Empty:
                # shutting down (the exit message may never come if the main process's
                # queue was finalized first, in a garbage cycle), or the main process died
                if done_event.is_set() or os.getppid() != parent_pid:
                    break
                continue
            if r is None:
                break
            if isinstance(r, _ResumeIteration):
                iteration_end = False
                if init_exception is None:
                    try:
                        fetcher = create_fetcher(iterable, dataset, auto_collation, collate_fn,
                                                 drop_last)
                    except Exception:
                        init_exception = ExceptionWrapper(where=where)
                conn.send((RESUMED, None, None, _retired(pool)))
                continue
            idx, index, freed = r
            if pool is not None and freed:
                pool.release(freed)                 # the main process is done with these
            if iteration_end or done_event.is_set():    # exhausted, or shutting down
                continue
            arena = None
            data = None
            if init_exception is not None:         # worker_init_fn failed: every task says so
                msg = (ERROR, idx, init_exception)
            else:
                if pool is not None:
                    arena = _shm.Arena(pool)
                    prev = collate_mod._set_allocator(arena.alloc)
                try:
                    data = fetcher.fetch(index)
                    if arena is not None:
                        blob = _shm.pack(data, arena)
                        msg = (SHM, idx, (arena.commit(), blob))
                    else:
                        msg = (DATA, idx, data)
                except StopIteration:
                    if iterable:
                        msg = (STOP, idx, _IterableDatasetStopIteration(worker_id))
                        iteration_end = True
                    else:
                        msg = (ERROR, idx, ExceptionWrapper(where=where))
                except Exception:
                    msg = (ERROR, idx, ExceptionWrapper(where=where))
                finally:
                    if arena is not None:
                        collate_mod._set_allocator(prev)
                        arena.abort()               # segments not committed: free again
                data = None
            try:
                conn.send(msg + (_retired(pool),))
            except (BrokenPipeError, ConnectionResetError, EOFError):
                break
            except Exception:                       # the batch does not pickle
                conn.send((ERROR, idx, ExceptionWrapper(where=where), _retired(pool)))
            del msg, r, index
    except KeyboardInterrupt:
        pass                        # the main process handles Ctrl-C
    finally:
        if pool is not None and os.getppid() != parent_pid:
            from ember.data import _shm
            for name in pool.all_names():           # nobody will map or unlink them now
                _shm.unlink(name)
        try:
            conn.close()
        except Exception:
            pass


def _retired(pool):
    """Segments the worker dropped since its last message (the main process
    forgets its mappings of them)."""
    if pool is None or not pool.retired:
        return None
    out, pool.retired = pool.retired, []
    return out
