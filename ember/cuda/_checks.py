"""Input checks that GPU ops make without waiting for the GPU.

An op whose input can only be validated on the device (an embedding index, a
cross-entropy target, an advanced-indexing position) queues the check next to
its kernels: the kernel, or a small CuPy expression, sets a device flag when
the input is bad, and the op hands the flag to :func:`defer` with a function
that builds the op's usual exception.  The op then returns at once, as every
GPU op does, and the flags are read at the next point where the host waits
for the GPU anyway: reading values (``item()``, ``tolist()``, ``.cpu()``:
the checks queued on the current stream), ``Stream.synchronize()`` (that
stream's), ``ember.cuda.synchronize()`` and handing memory to another library
(DLPack, the CUDA array interface: all of them), ``Event.synchronize()`` (those
whose stream has finished).  Reading a value never waits for another stream.  The first failed check raises there, with a note that
says which op found it.  The kernels never touch memory through a bad index
(they skip it, or CuPy wraps it around), so nothing is corrupted meanwhile.

``set_check_mode('sync')`` (or ``EMBER_CUDA_CHECKS=sync`` in the environment)
waits for each check at its op, which points a traceback at the op itself
(the GPU counterpart of ``CUDA_LAUNCH_BLOCKING=1``); ``'off'`` skips the checks
(bad indices are then skipped or wrapped silently).

>>> import ember
>>> ember.cuda.get_check_mode() in ("async", "sync", "off")
True
"""
import atexit
import contextlib
import os
import sys
import threading

__all__ = ["set_check_mode", "get_check_mode", "checks_enabled", "defer", "flush",
           "pending_count"]

MODES = ("async", "sync", "off")

#: Pending checks beyond this many are read at once (one wait), so a program that never
#: reads a value back still finds its errors and the list holds a bounded set of arrays.
MAX_PENDING = 128

_DEFERRED_NOTE = ("\n(found by an earlier GPU op, which ran asynchronously; reported at the "
                  "first synchronisation after it. ember.cuda.set_check_mode('sync') raises at "
                  "the op itself)")


def _cp():
    from ember.cuda._cupy import cp             # (CuPy only once a check exists)
    return cp()


def _initial_mode():
    mode = os.environ.get("EMBER_CUDA_CHECKS", "async").strip().lower() or "async"
    if mode not in MODES:
        sys.stderr.write(f"ember.cuda: EMBER_CUDA_CHECKS={mode!r} is not one of {MODES}; "
                         f"using 'async'\n")
        return "async"
    return mode


_state = {"mode": _initial_mode()}
_pending = []            # [(flag, make_error, stream)] in the order the ops ran
_lock = threading.Lock()


def set_check_mode(mode):
    """How GPU ops report bad input that only the GPU can see (an index out of range).

    ``'async'`` (the default): the op returns at once and the error is raised at the
    next synchronisation (``item()``, ``.cpu()``, ``ember.cuda.synchronize()``...).
    ``'sync'``: the op waits for its check and raises itself (slower; for debugging).
    ``'off'``: no checks; bad indices are skipped or wrapped around silently.
    Switching mode first reports the checks still pending.

    >>> import ember
    >>> old = ember.cuda.get_check_mode()
    >>> ember.cuda.set_check_mode("sync")
    >>> ember.cuda.get_check_mode()
    'sync'
    >>> ember.cuda.set_check_mode(old)
    """
    if mode not in MODES:
        raise ValueError(f"set_check_mode: mode must be one of {MODES}, got {mode!r}")
    flush()
    _state["mode"] = mode


def get_check_mode():
    """The current check mode: 'async', 'sync' or 'off' (see set_check_mode).

    >>> import ember
    >>> ember.cuda.get_check_mode() in ("async", "sync", "off")
    True
    """
    return _state["mode"]


def checks_enabled():
    """False in 'off' mode: ops may then skip building their checks."""
    return _state["mode"] != "off"


def pending_count():
    """How many checks wait for the next synchronisation."""
    return len(_pending)


def defer(flag, make_error, stream=None):
    """Queue a check: `flag` is a device array (any shape, bool or integer) that the
    op's kernels leave nonzero when the input was bad; `make_error()` returns the
    exception to raise then.  `stream` is the CuPy stream the flag is written on (the
    current one by default).  Returns at once in 'async' mode."""
    mode = _state["mode"]
    if mode == "off":
        return
    if mode == "sync":
        if _read_flags([flag])[0]:
            raise make_error()
        return
    if stream is None:
        stream = _cp().cuda.get_current_stream()
    with _lock:
        _pending.append((flag, make_error, stream))
        full = len(_pending) >= MAX_PENDING
    if full:
        flush()


def _same_stream(a, b):
    return a is b or (a.ptr == b.ptr and a.device_id == b.device_id)


def flush(stream=None, only_done=False):
    """Read the flags of pending checks and raise the first failed check's error (the
    others read with it are dropped).  Which checks: all of them (waiting for their
    streams), those queued on `stream` (a CuPy stream the caller has just waited for),
    or with `only_done` those whose stream has finished (no wait at all).  A no-op
    when nothing is pending, so the synchronisation points call it freely."""
    if not _pending:
        return
    with _lock:
        if stream is None and not only_done:
            todo = list(_pending)
        elif stream is not None:
            todo = [e for e in _pending if _same_stream(e[2], stream)]
        else:
            todo = [e for e in _pending if e[2].done]
        if not todo:
            return
        taken = {id(e) for e in todo}
        _pending[:] = [e for e in _pending if id(e) not in taken]
    seen = set()
    for _, _, st in todo:
        if id(st) not in seen:
            seen.add(id(st))
            st.synchronize()            # at once when the caller already waited for it
    values = _read_flags([flag for flag, _, _ in todo])
    for (flag, make_error, _), bad in zip(todo, values):
        if bad:
            dev = getattr(flag, "device", None)       # the message may read the inputs
            with _cp().cuda.Device(dev.id) if dev is not None else contextlib.nullcontext():
                err = make_error()
            err.args = ((str(err.args[0]) if err.args else "") + _DEFERRED_NOTE,) + err.args[1:]
            raise err


def _read_flags(flags):
    """Whether each device flag array holds a nonzero element (one copy to the host
    per device; the caller has made sure the writes have finished)."""
    cp = _cp()
    out = [False] * len(flags)
    by_device = {}
    for i, f in enumerate(flags):
        by_device.setdefault(f.device.id, []).append(i)
    for dev, idxs in by_device.items():
        with cp.cuda.Device(dev):
            if len(idxs) == 1:
                f = flags[idxs[0]]
                out[idxs[0]] = bool(cp.asnumpy(f).any())
                continue
            parts = [cp.any(flags[i]).reshape(1) for i in idxs]
            host = cp.asnumpy(cp.concatenate(parts))
        for i, v in zip(idxs, host):
            out[i] = bool(v)
    return out


def _report_at_exit():
    """A check still pending at exit is printed, not lost."""
    if not _pending:
        return
    try:
        flush()
    except Exception as err:           # the interpreter is going away: say it, don't raise
        sys.stderr.write(f"ember.cuda: a GPU input check failed and no synchronisation "
                         f"reported it before exit: {type(err).__name__}: {err}\n")


atexit.register(_report_at_exit)
