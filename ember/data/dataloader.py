"""DataLoader: batches from a dataset, in the main process or in worker processes
(PyTorch's ``torch.utils.data.DataLoader``: same arguments, validation and
semantics).

With ``num_workers > 0`` each worker builds whole batches and hands them over
through shared memory (``ember/data/_shm.py``): the batch's arrays are
written once, in the worker, and appear in the main process as zero-copy
ember arrays; only a few hundred bytes of metadata go through the pipe.  The
main process hands out batches in sampler order whatever the workers' timing
(out-of-order arrivals wait in a reorder buffer), keeps at most
``prefetch_factor`` batches in flight per worker, notices a dead worker at
once (it waits on the workers' process sentinels together with their pipes),
re-raises a worker's exception with the worker's traceback, and leaves no
process or shared-memory segment behind when iteration ends, breaks early,
fails, or the iterator is garbage collected.

>>> import ember
>>> from ember.data import DataLoader, TensorDataset
>>> ds = TensorDataset(ember.arange(10).reshape(5, 2), ember.arange(5))
>>> loader = DataLoader(ds, batch_size=2)
>>> len(loader), [y.tolist() for x, y in loader]
(3, [[0, 1], [2, 3], [4]])
"""
import atexit
import itertools
import math
import multiprocessing
import multiprocessing.connection
import os
import secrets
import signal
import sys
import threading
import time
import warnings
import weakref

from ember.data import _worker, _shm
from ember.data.collate import default_collate, default_convert
from ember.data.dataset import IterableDataset
from ember.data.sampler import (BatchSampler, RandomSampler, Sampler, SequentialSampler,
                                _draw_seed, _normalize_generator)

__all__ = ["DataLoader", "get_worker_info", "default_collate", "default_convert"]

get_worker_info = _worker.get_worker_info

_JOIN_TIMEOUT = 1.0         # seconds a shutting-down iterator waits for its workers in all
                            # (they finish the batch in hand), before terminating them


class _InfiniteConstantSampler(Sampler):
    """``itertools.repeat(None)``: the sampler of an IterableDataset."""

    def __iter__(self):
        while True:
            yield None


def _cpu_count():
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count()


class DataLoader:
    """Iterate over a dataset in batches (PyTorch's DataLoader).

    Arguments as in PyTorch: ``dataset``, ``batch_size=1`` (None: no
    auto-batching), ``shuffle``, ``sampler``, ``batch_sampler``,
    ``num_workers=0``, ``collate_fn`` (default_collate, or default_convert when
    ``batch_size=None``), ``pin_memory`` (accepted; nothing to pin on CPU),
    ``drop_last``, ``timeout`` (seconds to wait for a batch from the workers,
    0 = forever), ``worker_init_fn(worker_id)``, ``multiprocessing_context``
    (a start method name or context; default 'fork' on Linux unless a start
    method was set globally), ``generator`` (``ember.random.Generator`` or an
    int seed: drives shuffling and the workers' base seed; default
    ember.random's global generator), ``prefetch_factor`` (batches in flight
    per worker, default 2), ``persistent_workers`` (keep the workers between
    epochs), ``in_order``.

    >>> import ember
    >>> from ember.data import DataLoader
    >>> loader = DataLoader(list(range(7)), batch_size=3, shuffle=True, generator=0)
    >>> sorted(sum((b.tolist() for b in loader), []))
    [0, 1, 2, 3, 4, 5, 6]
    >>> len(DataLoader(list(range(7)), batch_size=3, drop_last=True))
    2
    """

    _initialized = False

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None,
                 num_workers=0, collate_fn=None, pin_memory=False, drop_last=False, timeout=0,
                 worker_init_fn=None, multiprocessing_context=None, generator=None, *,
                 prefetch_factor=None, persistent_workers=False, pin_memory_device="",
                 in_order=True):
        if not isinstance(num_workers, int) or isinstance(num_workers, bool):
            raise TypeError(f"num_workers option should be an int, got {num_workers!r}")
        if num_workers < 0:
            raise ValueError("num_workers option should be non-negative; "
                             "use num_workers=0 to disable multiprocessing.")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("prefetch_factor option could only be specified in multiprocessing."
                             "let num_workers > 0 to enable multiprocessing, otherwise set "
                             "prefetch_factor to None.")
        elif num_workers > 0 and prefetch_factor is None:
            prefetch_factor = 2
        elif prefetch_factor is not None and prefetch_factor < 0:
            raise ValueError("prefetch_factor option should be non-negative")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")

        self.dataset = dataset
        self.num_workers = num_workers
        self.prefetch_factor = prefetch_factor
        self.pin_memory = pin_memory
        self.pin_memory_device = pin_memory_device
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.in_order = in_order

        if isinstance(dataset, IterableDataset):
            self._iterable = True
            if shuffle not in {False, None}:
                raise ValueError("DataLoader with IterableDataset: expected unspecified shuffle "
                                 f"option, but got shuffle={shuffle}")
            if sampler is not None:
                raise ValueError("DataLoader with IterableDataset: expected unspecified sampler "
                                 f"option, but got sampler={sampler}")
            elif batch_sampler is not None:
                raise ValueError("DataLoader with IterableDataset: expected unspecified "
                                 f"batch_sampler option, but got batch_sampler={batch_sampler}")
        else:
            shuffle = bool(shuffle)
            self._iterable = False

        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")

        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, "
                                 "shuffle, sampler, and drop_last")
            batch_size = None
            drop_last = False
        elif batch_size is None:
            if drop_last:
                raise ValueError("batch_size=None option disables auto-batching and is mutually "
                                 "exclusive with drop_last")

        generator = _normalize_generator(generator, "DataLoader")
        if sampler is None:
            if self._iterable:
                sampler = _InfiniteConstantSampler()
            elif shuffle:
                sampler = RandomSampler(dataset, generator=generator)
            else:
                sampler = SequentialSampler(dataset)

        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)

        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.generator = generator

        if collate_fn is None:
            collate_fn = default_collate if self._auto_collation else default_convert
        self.collate_fn = collate_fn
        self.persistent_workers = persistent_workers
        self._use_shm = _shm.AVAILABLE          # False: batches are pickled (for comparison)
        self._iterator = None
        self._initialized = True
        self._check_worker_number()

    # -------------------------------------------------------------- options

    @property
    def multiprocessing_context(self):
        return self._multiprocessing_context

    @multiprocessing_context.setter
    def multiprocessing_context(self, ctx):
        if ctx is not None:
            if self.num_workers > 0:
                if isinstance(ctx, str):
                    valid = multiprocessing.get_all_start_methods()
                    if ctx not in valid:
                        raise ValueError("multiprocessing_context option should specify a valid "
                                         f"start method in {valid!r}, but got "
                                         f"multiprocessing_context={ctx!r}")
                    ctx = multiprocessing.get_context(ctx)
                if not isinstance(ctx, multiprocessing.context.BaseContext):
                    raise TypeError("multiprocessing_context option should be a valid context "
                                    "object or a string specifying the start method, but got "
                                    f"multiprocessing_context={ctx}")
            else:
                raise ValueError("multiprocessing_context can only be used with multi-process "
                                 "loading (num_workers > 0), but got "
                                 f"num_workers={self.num_workers}")
        self._multiprocessing_context = ctx

    def _mp_context(self):
        if self._multiprocessing_context is not None:
            return self._multiprocessing_context
        if multiprocessing.get_start_method(allow_none=True) is None \
                and sys.platform.startswith("linux"):
            return multiprocessing.get_context("fork")
        return multiprocessing.get_context()

    def __setattr__(self, attr, val):
        if self._initialized and attr in ("batch_size", "batch_sampler", "sampler", "drop_last",
                                          "dataset", "persistent_workers"):
            raise ValueError(f"{attr} attribute should not be set after "
                             f"{self.__class__.__name__} is initialized")
        super().__setattr__(attr, val)

    @property
    def _auto_collation(self):
        return self.batch_sampler is not None

    @property
    def _index_sampler(self):
        return self.batch_sampler if self._auto_collation else self.sampler

    def _check_worker_number(self):
        if self.num_workers:
            n = _cpu_count()
            if n is not None and self.num_workers > n:
                warnings.warn(f"This DataLoader will create {self.num_workers} worker processes "
                              f"in total. Our suggested max number of worker in current system "
                              f"is {n}, which is smaller than what this DataLoader is going to "
                              "create.", stacklevel=3)

    # -------------------------------------------------------------- iteration

    def __iter__(self):
        if self.persistent_workers and self.num_workers > 0:
            if self._iterator is None or self._iterator._shutdown:
                self._iterator = _MultiProcessingIter(self)
            else:
                self._iterator._reset(self)
            return self._iterator
        if self.num_workers == 0:
            return _SingleProcessIter(self)
        return _MultiProcessingIter(self)

    def __len__(self):
        if self._iterable:
            length = len(self.dataset)
            if self.batch_size is not None:
                length = (length // self.batch_size if self.drop_last
                          else math.ceil(length / self.batch_size))
            return length
        return len(self._index_sampler)


class _BaseIter:
    def __init__(self, loader):
        self._dataset = loader.dataset
        self._iterable = loader._iterable
        self._auto_collation = loader._auto_collation
        self._drop_last = loader.drop_last
        self._index_sampler = loader._index_sampler
        self._num_workers = loader.num_workers
        self._timeout = loader.timeout
        self._collate_fn = loader.collate_fn
        self._sampler_iter = iter(self._index_sampler)
        self._base_seed = _draw_seed(loader.generator)
        self._persistent_workers = loader.persistent_workers
        self._num_yielded = 0

    def __iter__(self):
        return self

    def _reset(self, loader):
        self._sampler_iter = iter(self._index_sampler)
        self._num_yielded = 0

    def _next_index(self):
        return next(self._sampler_iter)

    def __next__(self):
        data = self._next_data()
        self._num_yielded += 1
        return data

    def __len__(self):
        return len(self._index_sampler)

    def __getstate__(self):
        raise NotImplementedError(f"{self.__class__.__name__} cannot be pickled")


class _SingleProcessIter(_BaseIter):
    def __init__(self, loader):
        super().__init__(loader)
        if self._timeout != 0:
            raise AssertionError("_SingleProcessDataLoaderIter requires timeout == 0 "
                                 "(timeout only applies to num_workers > 0)")
        self._fetcher = _worker.create_fetcher(self._iterable, self._dataset,
                                               self._auto_collation, self._collate_fn,
                                               self._drop_last)

    def _next_data(self):
        index = self._next_index()
        return self._fetcher.fetch(index)


# Multi-process iterators still running, shut down at interpreter exit.
_live_iters = weakref.WeakSet()
_live_lock = threading.Lock()


@atexit.register
def _shutdown_live_iterators():
    with _live_lock:
        iters = list(_live_iters)
    for it in iters:
        try:
            it._shutdown_workers()
        except Exception:
            pass


def _reap(workers, timeout):
    """Wait up to `timeout` s for the processes to exit; their exit codes (None:
    still running)."""
    deadline = time.monotonic() + timeout
    delay = 0.0005
    while True:
        codes = []
        for w in workers:
            try:
                codes.append(w.exitcode)
            except Exception:           # closed / never started
                codes.append(0)
        if all(c is not None for c in codes) or time.monotonic() >= deadline:
            return codes
        time.sleep(delay)
        delay = min(delay * 2, 0.02)


def _signal(w, sig):
    try:
        os.kill(w.pid, sig)
    except (OSError, TypeError):
        pass


def _signal_name(code):
    try:
        return signal.Signals(-code).name
    except (ValueError, AttributeError):
        return str(-code)


class _MultiProcessingIter(_BaseIter):
    def __init__(self, loader):
        super().__init__(loader)
        self._prefetch_factor = loader.prefetch_factor
        self._in_order = loader.in_order
        if self._prefetch_factor <= 0:
            raise ValueError("prefetch_factor must be positive when num_workers > 0, got "
                             f"{self._prefetch_factor}")
        ctx = loader._mp_context()
        self._shutdown = False
        self._fatal = None
        # shared-memory segment names: /em<pid>_<token>_<worker>_<k> (see _shm.py)
        self._seg_prefix = f"/em{os.getpid():x}_{secrets.token_hex(3)}"
        self._receiver = (_shm.Receiver(self._seg_prefix, self._num_workers)
                          if loader._use_shm else None)
        self._pending_free = [[] for _ in range(self._num_workers)]
        self._workers, self._index_queues, self._conns = [], [], []
        self._exit_sent = [False] * self._num_workers
        self._done_event = ctx.Event()
        try:
            for i in range(self._num_workers):
                iq = ctx.Queue()
                iq.cancel_join_thread()
                reader, writer = ctx.Pipe(duplex=False)
                w = ctx.Process(target=_worker.worker_loop,
                                args=(self._iterable, self._dataset, iq, writer,
                                      self._done_event,
                                      self._auto_collation, self._collate_fn, self._drop_last,
                                      self._base_seed, loader.worker_init_fn, i,
                                      self._num_workers,
                                      self._seg_prefix if self._receiver else None,
                                      os.getpid()),
                                daemon=True)
                self._index_queues.append(iq)
                self._conns.append(reader)
                try:
                    w.start()
                finally:
                    writer.close()          # the worker holds the only write end
                self._workers.append(w)
        except BaseException:
            self._shutdown_workers()
            raise
        with _live_lock:
            _live_iters.add(self)
        self._reset(loader, first_iter=True)

    # -------------------------------------------------------------- bookkeeping

    def _reset(self, loader, first_iter=False):
        if self._fatal is not None:
            raise RuntimeError(self._fatal)
        super()._reset(loader)
        self._send_idx = 0
        self._rcvd_idx = 0
        self._task_info = {}        # task -> (worker,) while in flight, (worker, data) once here
        self._tasks_outstanding = 0
        self._workers_status = [True] * self._num_workers
        self._workers_num_tasks = [0] * self._num_workers
        self._worker_cycle = itertools.cycle(range(self._num_workers))
        if not first_iter:
            # persistent workers: drop what is left of the last epoch, restart the workers'
            # fetchers (fresh dataset iterators), then prefetch again
            for q in self._index_queues:
                q.put(_worker._ResumeIteration())
            pending = self._num_workers
            while pending > 0:
                kind, _, _ = self._get_message()
                if kind == _worker.RESUMED:
                    pending -= 1
        for _ in range(self._prefetch_factor * self._num_workers):
            self._try_put_index()

    def _try_put_index(self):
        try:
            index = self._next_index()
        except StopIteration:
            return
        max_tasks = self._prefetch_factor * self._num_workers
        for _ in range(self._num_workers):
            w = next(self._worker_cycle)
            if self._workers_status[w]:
                if self._in_order or \
                        self._workers_num_tasks[w] < max_tasks // sum(self._workers_status):
                    break
        else:
            return
        freed = None
        if self._receiver is not None:          # segments whose batches died: reusable
            pending = self._pending_free
            for wid, ks in enumerate(self._receiver.take_freed(self._num_workers)):
                pending[wid].extend(ks)
            freed, pending[w] = pending[w], []
        self._index_queues[w].put((self._send_idx, index, freed))
        self._task_info[self._send_idx] = (w,)
        self._workers_num_tasks[w] += 1
        self._tasks_outstanding += 1
        self._send_idx += 1

    def _fail(self, message):
        """A fatal error: stop the workers, remember it for later calls, raise it.
        (The message is kept, not the exception: its traceback would hold this
        iterator in a reference cycle.)"""
        self._fatal = message
        self._shutdown_workers(graceful=False)
        raise RuntimeError(message)

    def _get_message(self):
        """The next message from any worker: (kind, task, payload).  Shared-memory
        batches are mapped (and their segments unlinked) here, as they arrive."""
        deadline = time.monotonic() + self._timeout if self._timeout > 0 else None
        while True:
            live = [i for i in range(self._num_workers) if not self._exit_sent[i]]
            waitables = {}
            for i in live:
                waitables[self._conns[i]] = i
                waitables[self._workers[i].sentinel] = i
            if not waitables:
                self._fail("DataLoader: no worker left to wait for")
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready = multiprocessing.connection.wait(list(waitables), timeout=remaining)
            if not ready:
                self._fail(f"DataLoader timed out after {self._timeout} seconds")
            # pipes first: a worker may have sent results just before exiting
            conns = self._conns_set()
            dead = None
            for r in [r for r in ready if r in conns] or ready:
                i = waitables[r]
                conn = self._conns[i]
                try:
                    msg = conn.recv() if conn.poll() else None
                except (EOFError, OSError):         # the worker closed its pipe: gone
                    msg, dead = None, i
                if msg is not None:
                    return self._decode(msg, i)
                if dead is None and not self._workers[i].is_alive():
                    dead = i
                if dead is not None:
                    break
            if dead is not None:
                self._worker_died(dead)

    def _decode(self, msg, wid):
        kind, idx, payload, retired = msg
        if retired:
            self._receiver.retire(wid, retired)
        if kind == _worker.SHM:
            used, blob = payload
            if idx in self._task_info:
                payload = self._receiver.unpack(wid, used, blob)
            else:                                   # stale (a reset epoch): free at once
                self._receiver.discard(wid, used)
                payload = None
            kind = _worker.DATA
        return kind, idx, payload

    def _conns_set(self):
        s = getattr(self, "_conn_set_cache", None)
        if s is None:
            s = self._conn_set_cache = set(self._conns)
        return s

    def _worker_died(self, i):
        w = self._workers[i]
        code = _reap([w], 0.1)[0]
        if code is not None and code < 0:
            how = f"killed by signal {_signal_name(code)}"
        else:
            how = f"exit code {code}"
        self._fail(f"DataLoader worker (pid {w.pid}) exited unexpectedly ({how}). If this "
                   "keeps happening, run with num_workers=0 to see the error in the main "
                   "process.")

    def _mark_worker_unavailable(self, i):
        self._workers_status[i] = False
        if not self._exit_sent[i]:
            self._exit_sent[i] = True
            try:
                self._index_queues[i].put(None)
            except Exception:
                pass

    # -------------------------------------------------------------- iteration

    def _next_data(self):
        if self._fatal is not None:
            raise RuntimeError(self._fatal)
        while True:
            while self._rcvd_idx < self._send_idx:
                info = self._task_info.get(self._rcvd_idx)
                if info:
                    if len(info) == 2 or self._workers_status[info[0]]:
                        break
                    del self._task_info[self._rcvd_idx]
                self._rcvd_idx += 1
            else:
                if not self._persistent_workers:
                    self._shutdown_workers()
                raise StopIteration

            if len(self._task_info[self._rcvd_idx]) == 2:
                worker_id, data = self._task_info.pop(self._rcvd_idx)
                self._rcvd_idx += 1
                return self._process_data(data, worker_id)

            if self._shutdown:
                raise StopIteration
            kind, idx, data = self._get_message()
            if kind == _worker.RESUMED:
                continue
            self._tasks_outstanding -= 1
            if kind == _worker.STOP:
                wid = data.worker_id
                if self._persistent_workers:
                    self._workers_status[wid] = False
                else:
                    self._mark_worker_unavailable(wid)
                self._task_info.pop(idx, None)
                self._workers_num_tasks[wid] -= 1
                self._try_put_index()
                continue
            if kind == _worker.ERROR:
                data = _ErrorItem(data)
            if idx not in self._task_info:
                continue
            if idx != self._rcvd_idx:
                if not self._in_order:
                    worker_id = self._task_info.pop(idx)[0]
                    return self._process_data(data, worker_id)
                self._task_info[idx] += (data,)
            else:
                worker_id = self._task_info.pop(idx)[0]
                self._rcvd_idx += 1
                return self._process_data(data, worker_id)

    def _process_data(self, data, worker_id):
        self._workers_num_tasks[worker_id] -= 1
        self._try_put_index()
        if type(data) is _ErrorItem:
            data.wrapper.reraise()
        return data

    # -------------------------------------------------------------- shutdown

    def _shutdown_workers(self, graceful=True):
        if self._shutdown:
            return
        self._shutdown = True
        done = getattr(self, "_done_event", None)
        if done is not None:
            done.set()                  # workers skip the tasks still queued
        try:
            with _live_lock:
                _live_iters.discard(self)
        except Exception:
            pass
        workers = getattr(self, "_workers", [])
        for i in range(len(workers)):
            if not self._exit_sent[i]:
                self._exit_sent[i] = True
                try:
                    self._index_queues[i].put(None)
                except Exception:
                    pass
        # reap by polling exit codes (not the sentinels: inside a garbage cycle the
        # Popen objects may already be finalized and their sentinels closed)
        codes = _reap(workers, _JOIN_TIMEOUT if graceful else 0.0)
        stubborn = [w for w, c in zip(workers, codes) if c is None]
        for w in stubborn:
            _signal(w, signal.SIGTERM)
        codes = _reap(stubborn, 1.0)
        for w, c in zip(stubborn, codes):
            if c is None:
                _signal(w, signal.SIGKILL)
        _reap([w for w, c in zip(stubborn, codes) if c is None], 5.0)
        for q in getattr(self, "_index_queues", []):
            q.cancel_join_thread()
            q.close()
        for c in getattr(self, "_conns", []):
            try:
                c.close()
            except Exception:
                pass
        # the workers are gone: unlink the segments never mapped here
        receiver = getattr(self, "_receiver", None)
        if receiver is not None:
            receiver.cleanup()
        self._task_info = {}
        for w in workers:
            try:
                w.close()
            except Exception:
                pass

    def __del__(self):
        try:
            self._shutdown_workers()
        except Exception:
            pass


class _ErrorItem:
    __slots__ = ("wrapper",)

    def __init__(self, wrapper):
        self.wrapper = wrapper
