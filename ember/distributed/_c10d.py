"""The process group and the collectives (see ``ember/distributed/__init__.py``).

Buffers: an ember array (or a NumPy array) is turned into a NumPy view of the same
memory (``numpy_view``, no copy) and that view is handed to mpi4py, which passes its
address straight to MPI.  In-place operations (``all_reduce``, ``broadcast``, ``recv``,
...) use ``MPI_IN_PLACE`` where MPI has it.  A non-contiguous array is staged: copied
into a contiguous buffer, and (for outputs) the result copied back when the operation
completes.  Lists of outputs (``all_gather``, ``gather``) or inputs (``reduce_scatter``,
``scatter``) whose arrays lie back to back in memory (the rows of one array, for
instance ``list(out)``) are used as one buffer, without a copy; other lists are
staged through one contiguous buffer.

Every operation is started as a nonblocking MPI call and completed by polling
(``MPI_Testall``) until it is done or the group's timeout expires, so a rank that died
or never joined makes the others fail with a clear ``DistBackendError`` instead of
hanging.  After a timeout the group is in an undefined state (as in PyTorch): let the
error end the process, which aborts the whole job.
"""
import ctypes
import datetime
import os
import pickle
import sys
import time

import numpy as np

from ember.distributed import _nccl
from ember.distributed._reduce_op import ReduceOp
from ember._core.dtypes import dtype_kind, BFLOAT16

__all__ = ["ReduceOp", "Work", "DistBackendError", "init_process_group", "destroy_process_group",
           "is_available", "is_initialized", "is_mpi_available", "is_nccl_available",
           "get_backend", "get_rank", "get_world_size", "barrier", "all_reduce", "broadcast",
           "reduce", "all_gather", "all_gather_into_tensor", "reduce_scatter",
           "reduce_scatter_tensor", "gather", "scatter", "send", "recv", "isend", "irecv",
           "broadcast_object_list", "all_gather_object", "get_default_timeout"]

_YIELD_AFTER = float(os.environ.get("EMBER_DIST_YIELD_AFTER", "0"))   # seconds of pure spinning
_YIELD_EVERY = int(os.environ.get("EMBER_DIST_YIELD_EVERY", "8"))    # in bursts of 32 polls
_ABORT_GRACE = 0.5          # seconds between an uncaught error's report and MPI_Abort
_DEFAULT_TIMEOUT = 1800.0           # seconds, PyTorch's default for CPU backends
# environment variables by which MPI launchers (MPICH/Hydra, Open MPI, PMIx, MVAPICH,
# Intel MPI, Slurm's PMI) tell a process that it is one rank of a job
_LAUNCHER_VARS = ("PMI_RANK", "PMI_SIZE", "PMIX_RANK", "OMPI_COMM_WORLD_SIZE",
                  "MV2_COMM_WORLD_SIZE", "MPI_LOCALNRANKS", "HYDI_CONTROL_FD")


class DistBackendError(RuntimeError):
    """A collective failed or timed out (a rank died, hung, or skipped the call)."""


DistBackendError.__module__ = "ember.distributed"


# ------------------------------------------------------------------ the group

class _Group:
    """A process group: the default one (``ranks`` None: every rank of the job) or one
    made by :func:`new_group` (``ranks``: its members' global ranks, in group-rank
    order).  ``rank``/``size`` are this process's rank in the group and its size."""

    def __init__(self, backend, rank, size, timeout, comm=None, mpi=None, ranks=None):
        self.backend = backend
        self.rank = rank
        self.size = size
        self.timeout = timeout
        self.comm = comm
        self.MPI = mpi
        self.dtypes = {}
        self.ranks = ranks
        self.nccl = None            # backend 'nccl': the NcclCommunicator for GPU arrays
        self.nccl_device = None     # ... and the CUDA device it drives

    def global_rank(self, group_rank):
        return group_rank if self.ranks is None else self.ranks[group_rank]

    def __repr__(self):
        who = "default group" if self.ranks is None else f"group of ranks {list(self.ranks)}"
        return f"<ember.distributed {who}>"

    def mpi_type(self, dtype):
        t = self.dtypes.get(dtype)
        if t is None:
            dt = np.dtype(dtype)
            try:            # a predefined MPI datatype (reductions are defined on those)
                # bfloat16 has none: it moves as its 16 bits (reductions widen it, _Buf)
                t = self.MPI.UINT16_T if dt == BFLOAT16 else self.MPI.Datatype.fromcode(dt.char)
            except Exception:
                raise TypeError(f"ember.distributed: dtype {dt.name} has no MPI "
                                f"datatype") from None
            self.dtypes[dtype] = t
        return t

    def spec(self, arr):
        # [buffer, datatype]: mpi4py derives the counts (for the "v"-less collectives it
        # splits a list-sized buffer evenly among the ranks)
        return [arr, self.mpi_type(arr.dtype)]


_GROUP = None
_SAVED_EXCEPTHOOK = None


def _to_seconds(timeout, where):
    if timeout is None:
        env = os.environ.get("EMBER_DIST_TIMEOUT")
        return float(env) if env else _DEFAULT_TIMEOUT
    if isinstance(timeout, datetime.timedelta):
        timeout = timeout.total_seconds()
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise ValueError(f"{where}: timeout must be a positive number of seconds or a "
                         f"datetime.timedelta, got {timeout!r}")
    return float(timeout)


def _launched_by_mpi():
    if any(v in os.environ for v in _LAUNCHER_VARS):
        return True
    mod = sys.modules.get("mpi4py.MPI")
    return mod is not None and mod.Is_initialized() and mod.COMM_WORLD.Get_size() > 1


def is_available():
    """True: ember.distributed is always importable (MPI itself is optional).

    >>> import ember.distributed as dist
    >>> dist.is_available()
    True
    """
    return True


def is_mpi_available():
    """Whether mpi4py (the ``ember[mpi]`` extra) can be imported.

    >>> import ember.distributed as dist
    >>> isinstance(dist.is_mpi_available(), bool)
    True
    """
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return False
    return True


def is_nccl_available():
    """Whether the ``'nccl'`` backend (GPU arrays) can be used: a usable GPU and CuPy
    with NCCL.

    >>> import ember.distributed as dist
    >>> isinstance(dist.is_nccl_available(), bool)
    True
    """
    return _nccl.is_available()


def is_initialized():
    """Whether ``init_process_group`` has been called (and not undone).

    >>> import ember.distributed as dist
    >>> dist.is_initialized()
    False
    """
    return _GROUP is not None


def get_default_timeout():
    """The timeout (seconds) of a group made without ``timeout=``: ``$EMBER_DIST_TIMEOUT``
    or 1800.

    >>> import ember.distributed as dist
    >>> dist.get_default_timeout() > 0
    True
    """
    return _to_seconds(None, "get_default_timeout")


def _env_int(name):
    v = os.environ.get(name)
    if v is None or v == "":
        return None
    try:
        return int(v)
    except ValueError:
        raise ValueError(f"init_process_group: environment variable {name}={v!r} is not an "
                         f"integer") from None


def init_process_group(backend=None, init_method=None, timeout=None, world_size=-1, rank=-1,
                       store=None, group_name="", pg_options=None, device_id=None):
    """Join the default process group: every rank of the job must call it.

    ``backend="mpi"`` (the default; ``None`` means it): rank and world size come from
    the MPI launcher (``mpiexec -n N``, ``python -m ember.distributed.run``); the
    ``world_size=``/``rank=`` arguments and ``WORLD_SIZE``/``RANK`` environment
    variables, when given, must agree with it.  Without a launcher the group is the
    one process itself (world size 1; needs no MPI).  ``timeout`` (seconds or a
    ``datetime.timedelta``) bounds every wait of every collective on host arrays.

    ``backend="nccl"``: the same job set-up, plus an NCCL communicator on this
    process's GPU (``device_id``, else ``LOCAL_RANK``, else the current device);
    collectives on GPU arrays then run on NCCL (see ``_nccl.py``), those on host
    arrays still on MPI.

    >>> import ember.distributed as dist
    >>> dist.init_process_group("mpi", timeout=60)
    >>> dist.get_world_size(), dist.get_backend()
    (1, 'mpi')
    >>> dist.destroy_process_group()
    """
    global _GROUP, _SAVED_EXCEPTHOOK
    if _GROUP is not None:
        raise RuntimeError("init_process_group: trying to initialize the default process group "
                           "twice (call destroy_process_group() first)")
    name = "mpi" if backend is None else str(backend).lower()
    use_nccl = name in ("nccl", "cuda:nccl")
    if use_nccl:
        why = _nccl.unavailable_reason()
        if why is not None:
            raise RuntimeError(f"init_process_group: backend 'nccl' (for GPU arrays) is not "
                               f"available: {why}; use backend='mpi' for CPU arrays")
        name = "mpi"        # the job is set up as for MPI; NCCL is added on top below
    if name in ("gloo", "cpu:gloo", "ucc"):
        raise ValueError(f"init_process_group: backend {backend!r} is not available in ember; "
                         f"the CPU backend is 'mpi' (launch with mpiexec -n N or python -m "
                         f"ember.distributed.run --nproc N)")
    if name not in ("mpi", "cpu:mpi"):
        raise ValueError(f"init_process_group: unknown backend {backend!r}; expected 'mpi' "
                         f"or 'nccl'")
    if init_method not in (None, "env://") and not str(init_method).startswith("mpi"):
        raise ValueError(f"init_process_group: init_method={init_method!r} is not supported: the "
                         f"'mpi' backend gets rank and world size from the MPI launcher")
    if store is not None:
        raise ValueError("init_process_group: store= is not supported by the 'mpi' backend")
    secs = _to_seconds(timeout, "init_process_group")
    env_size, env_rank = _env_int("WORLD_SIZE"), _env_int("RANK")
    want_size = world_size if world_size is not None and world_size != -1 else env_size
    want_rank = rank if rank is not None and rank != -1 else env_rank

    if not _launched_by_mpi():
        if want_size not in (None, 1) or want_rank not in (None, 0):
            raise RuntimeError(
                f"init_process_group: world_size={want_size}, rank={want_rank} were asked for, "
                f"but this process was not started by an MPI launcher; start the job with "
                f"`mpiexec -n N python script.py` or `python -m ember.distributed.run --nproc N "
                f"script.py` (backend 'mpi')")
        _GROUP = _Group("mpi", 0, 1, secs)
        if use_nccl:
            _add_nccl(_GROUP, device_id)
        return None

    try:
        from mpi4py import MPI
    except ImportError as e:
        raise RuntimeError("init_process_group: backend 'mpi' needs mpi4py and an MPI library; "
                           "install them with `pip install ember[mpi]` (mpi4py + mpich)") from e
    comm = MPI.COMM_WORLD.Dup()         # our own communicator: user MPI calls cannot interfere
    r, n = comm.Get_rank(), comm.Get_size()
    if want_size is not None and want_size != n:
        comm.Free()
        raise RuntimeError(f"init_process_group: world_size={want_size} was asked for (argument "
                           f"or WORLD_SIZE) but the MPI job has {n} processes")
    if want_rank is not None and want_rank != r:
        comm.Free()
        raise RuntimeError(f"init_process_group: rank={want_rank} was asked for (argument or "
                           f"RANK) but MPI gives this process rank {r}")
    _GROUP = _Group("mpi", r, n, secs, comm, MPI)
    if use_nccl:
        try:
            _add_nccl(_GROUP, device_id)
        except BaseException:
            _GROUP = None
            comm.Free()
            raise
    if n > 1 and _SAVED_EXCEPTHOOK is None:
        _SAVED_EXCEPTHOOK = sys.excepthook
        sys.excepthook = _abort_on_uncaught
    return None


def _add_nccl(g, device_id):
    """Give group `g` an NCCL communicator (every member calls this together)."""
    dev = _nccl.pick_device(device_id) if device_id is not None or g.ranks is None \
        else _GROUP.nccl_device
    g.nccl = _nccl.make_comm(g.size, g.rank, g.comm, dev)
    g.nccl_device = dev
    g.backend = "nccl"


def _on_gpu(g, x, opname):
    """Whether the collective on array `x` runs on NCCL (x lives on a GPU)."""
    if not _nccl.is_gpu(x):
        return False
    if g.nccl is None:
        raise RuntimeError(f"{opname}: {_describe(x)} lives on {x.device}, but this group's "
                           f"backend is {g.backend!r} (host arrays); GPU arrays need "
                           f"init_process_group('nccl')")
    return True


def _abort_on_uncaught(exc_type, exc, tb):
    """An uncaught exception in one rank ends the whole job (the others would otherwise
    wait for it until their timeout)."""
    hook = _SAVED_EXCEPTHOOK or sys.__excepthook__
    try:
        hook(exc_type, exc, tb)
    finally:
        g = _GROUP
        if g is not None and g.MPI is not None and g.size > 1:
            try:
                sys.stderr.write(f"ember.distributed: rank {g.rank} of {g.size} failed with an "
                                 f"uncaught {exc_type.__name__}; aborting the MPI job\n")
                sys.stdout.flush()
                sys.stderr.flush()
                # give the launcher a moment to forward the message: MPI_Abort tears the
                # job down at once, and output still in its pipes would be lost
                time.sleep(_ABORT_GRACE)
            finally:
                g.MPI.COMM_WORLD.Abort(1)


def destroy_process_group(group=None):
    """Leave the default process group (MPI itself stays initialised until exit, so
    ``init_process_group`` may be called again).

    >>> import ember.distributed as dist
    >>> dist.init_process_group()
    >>> dist.destroy_process_group()
    >>> dist.is_initialized()
    False
    """
    global _GROUP, _SAVED_EXCEPTHOOK
    g = _group(group, "destroy_process_group")
    if g.nccl is not None:
        g.nccl.destroy()
        g.nccl = None
    if g is not _GROUP:                     # a new_group(): free its communicator only
        if g.comm is not None:
            g.comm.Free()
            g.comm = None
        return
    if g.comm is not None:
        try:
            g.comm.Free()
        except Exception:
            pass
    _GROUP = None
    if _SAVED_EXCEPTHOOK is not None:
        if sys.excepthook is _abort_on_uncaught:
            sys.excepthook = _SAVED_EXCEPTHOOK
        _SAVED_EXCEPTHOOK = None


def _group(group, opname):
    g = _GROUP
    if g is None:
        raise RuntimeError(f"{opname}: the default process group has not been initialized; call "
                           f"ember.distributed.init_process_group() first")
    if group is None or group is g or group is _WORLD:
        return g
    if isinstance(group, _NonMember):
        raise RuntimeError(f"{opname}: this process (rank {g.rank}) is not a member of the group "
                           f"of ranks {list(group.ranks)}; only its members may use it")
    if not isinstance(group, _Group):
        raise TypeError(f"{opname}: group must be None or a group made by new_group(), got "
                        f"{type(group).__name__}")
    if group.comm is None and group.size > 1:
        raise RuntimeError(f"{opname}: {group!r} has been destroyed")
    return group


class _NonMember:
    """What :func:`new_group` returns on ranks outside the group (PyTorch's
    ``GroupMember.NON_GROUP_MEMBER``): using it in a collective is an error."""

    def __init__(self, ranks):
        self.ranks = tuple(ranks)

    def __repr__(self):
        return f"<ember.distributed non-member of the group of ranks {list(self.ranks)}>"


def new_group(ranks=None, timeout=None, backend=None, pg_options=None,
              use_local_synchronization=False, group_desc=None):
    """A process group of some of the ranks (``ranks``: global ranks; None: all).  Every
    rank of the default group must call it, in the same order as other ``new_group``
    calls.  Members get a group to pass as ``group=`` to the collectives; in it,
    ``get_rank(group)`` is the rank within the group, while ``src``/``dst`` arguments
    stay global ranks, as in PyTorch.  Other ranks get a placeholder that is an error
    to use.

    >>> import ember, ember.distributed as dist
    >>> dist.init_process_group()
    >>> g = dist.new_group([0])
    >>> x = ember.ones(2)
    >>> dist.all_reduce(x, group=g)
    >>> dist.get_process_group_ranks(g), dist.get_rank(g)
    ([0], 0)
    >>> dist.destroy_process_group()
    """
    w = _group(None, "new_group")
    members = list(range(w.size)) if ranks is None else [int(r) for r in ranks]
    if len(set(members)) != len(members) or not members:
        raise ValueError(f"new_group: ranks must be distinct and not empty, got {ranks!r}")
    bad = [r for r in members if not 0 <= r < w.size]
    if bad:
        raise ValueError(f"new_group: ranks {bad} are not ranks of the job (world size "
                         f"{w.size}; ranks 0..{w.size - 1})")
    if backend not in (None, "mpi", w.backend):
        raise ValueError(f"new_group: backend {backend!r} differs from the default group's "
                         f"{w.backend!r}; ember has one backend per job")
    secs = w.timeout if timeout is None else _to_seconds(timeout, "new_group")
    me = w.rank
    if w.size == 1:
        sub = _Group(w.backend, 0, 1, secs, None, None, tuple(members))
    else:
        # a collective over the whole job: members get a communicator, the others COMM_NULL
        key = members.index(me) if me in members else 0
        comm = w.comm.Split(0 if me in members else w.MPI.UNDEFINED, key)
        if me not in members:
            return _NonMember(members)
        sub = _Group(w.backend, key, len(members), secs, comm, w.MPI, tuple(members))
    if w.nccl is not None:
        _add_nccl(sub, None)        # the members' own NCCL communicator, on the same GPU
    return sub


def get_process_group_ranks(group):
    """The global ranks of `group`'s members, in group-rank order."""
    g = _group(group, "get_process_group_ranks")
    return list(range(g.size)) if g.ranks is None else list(g.ranks)


def get_global_rank(group, group_rank):
    """The global rank of `group`'s member number `group_rank`."""
    g = _group(group, "get_global_rank")
    if not 0 <= group_rank < g.size:
        raise ValueError(f"get_global_rank: group rank {group_rank} is not in the group (size "
                         f"{g.size})")
    return g.global_rank(group_rank)


def get_group_rank(group, global_rank):
    """`global_rank`'s rank within `group`."""
    g = _group(group, "get_group_rank")
    if g.ranks is None:
        return global_rank
    if global_rank not in g.ranks:
        raise ValueError(f"get_group_rank: rank {global_rank} is not a member of {g!r}")
    return g.ranks.index(global_rank)


class _World:
    def __repr__(self):
        return "<ember.distributed default group>"


_WORLD = _World()


def get_backend(group=None):
    """The backend's name (``'mpi'``).

    >>> import ember.distributed as dist
    >>> dist.init_process_group(); dist.get_backend(); dist.destroy_process_group()
    'mpi'
    """
    return _group(group, "get_backend").backend


def get_rank(group=None):
    """This process's rank, 0 ... world size - 1.

    >>> import ember.distributed as dist
    >>> dist.init_process_group(); dist.get_rank(); dist.destroy_process_group()
    0
    """
    return _group(group, "get_rank").rank


def get_world_size(group=None):
    """The number of processes in the group.

    >>> import ember.distributed as dist
    >>> dist.init_process_group(); dist.get_world_size(); dist.destroy_process_group()
    1
    """
    return _group(group, "get_world_size").size


# ------------------------------------------------------------------ buffers

def _ndarray_type():
    from ember._core.array import ndarray
    return ndarray


def _describe(x):
    return f"{np.dtype(x.dtype).name} array of shape {tuple(x.shape)}"


def _numpy_of(x, opname, what):
    nd = _ndarray_type()
    if isinstance(x, nd):
        from ember._api._util import numpy_view
        return numpy_view(x)
    if isinstance(x, np.ndarray):
        return x
    raise TypeError(f"{opname}: {what} must be an ember array (or a NumPy array), "
                    f"got {type(x).__name__}")


def _bump(x):
    if isinstance(x, _ndarray_type()):
        x._bump_version()


class _Buf:
    """The contiguous NumPy buffer MPI works on for the array `x` (a view of x's memory,
    or a staged copy that is written back to x by ``finish`` when x is an output).

    ``reduces``: the buffer takes part in an MPI reduction; bfloat16 has no MPI
    arithmetic, so it is staged in float32 (reduced there, rounded once on the way
    back)."""
    __slots__ = ("owner", "view", "arr", "out")

    def __init__(self, x, opname, what, out, reduces=False):
        v = _numpy_of(x, opname, what)
        if out and not v.flags.writeable:
            raise ValueError(f"{opname}: {what} ({_describe(v)}) is read-only; the result is "
                             f"written into it")
        self.owner = x
        self.view = v
        self.out = out
        if reduces and v.dtype == BFLOAT16:
            self.arr = v.astype(np.float32)
        else:
            self.arr = v if v.flags.c_contiguous else np.ascontiguousarray(v)

    def finish(self):
        if self.out:
            if self.arr is not self.view:
                np.copyto(self.view, self.arr, casting="same_kind")
            _bump(self.owner)


def _check_like(arrs, ref, opname, what, refname):
    """Every array in the list `arrs` has ref's shape and dtype."""
    rs, rd = tuple(ref.shape), np.dtype(ref.dtype)
    for i, a in enumerate(arrs):
        if not isinstance(a, (np.ndarray, _ndarray_type())):
            raise TypeError(f"{opname}: {what}[{i}] must be an ember array, "
                            f"got {type(a).__name__}")
        if tuple(a.shape) != rs or np.dtype(a.dtype) != rd:
            raise ValueError(f"{opname}: {what}[{i}] is a {_describe(a)} but {refname} is a "
                             f"{np.dtype(rd).name} array of shape {rs}; every entry of {what} "
                             f"must have the same shape and dtype as {refname}")


def _check_list(lst, n, opname, what):
    if not isinstance(lst, (list, tuple)):
        raise TypeError(f"{opname}: {what} must be a list of arrays, got {type(lst).__name__}")
    if len(lst) != n:
        raise ValueError(f"{opname}: {what} has {len(lst)} arrays but the world size is {n}; "
                         f"it needs one per rank")


class _ListBuf:
    """One contiguous buffer for a list of equally shaped arrays: the arrays' own memory
    when they lie back to back (no copy), else a staging buffer."""
    __slots__ = ("items", "views", "arr", "out", "span")

    def __init__(self, items, ref_shape, dtype, opname, what, out):
        views = [_numpy_of(a, opname, f"{what}[{i}]") for i, a in enumerate(items)]
        self.items, self.views, self.out = items, views, out
        if out:
            for i, v in enumerate(views):
                if not v.flags.writeable:
                    raise ValueError(f"{opname}: {what}[{i}] is read-only; the result is "
                                     f"written into it")
        self.arr = self._span(views, dtype)
        self.span = self.arr is not None
        if self.arr is None:
            if out:
                self.arr = np.empty((len(views),) + tuple(ref_shape), dtype)
            else:
                self.arr = np.stack(views) if views else np.empty((0,), dtype)

    @staticmethod
    def _span(views, dtype):
        if not views:
            return None
        nb = views[0].nbytes
        p0 = views[0].ctypes.data
        for i, v in enumerate(views):
            if not v.flags.c_contiguous or v.ctypes.data != p0 + i * nb:
                return None
        total = nb * len(views)
        if total == 0:
            return None
        # each array owns its own range, so the union of back-to-back ranges is valid memory
        raw = (ctypes.c_char * total).from_address(p0)
        return np.frombuffer(raw, dtype=dtype).reshape((len(views),) + views[0].shape)

    def finish(self):
        if self.out:
            if not self._is_span():
                for i, v in enumerate(self.views):
                    np.copyto(v, self.arr[i])
            for a in self.items:
                _bump(a)

    def _is_span(self):
        return self.span


# ------------------------------------------------------------------ reductions

_INT_OPS = {ReduceOp.SUM: "SUM", ReduceOp.PRODUCT: "PROD", ReduceOp.MIN: "MIN",
            ReduceOp.MAX: "MAX", ReduceOp.BAND: "BAND", ReduceOp.BOR: "BOR",
            ReduceOp.BXOR: "BXOR"}
_BOOL_OPS = {ReduceOp.SUM: "LOR", ReduceOp.MAX: "LOR", ReduceOp.BOR: "LOR",
             ReduceOp.PRODUCT: "LAND", ReduceOp.MIN: "LAND", ReduceOp.BAND: "LAND",
             ReduceOp.BXOR: "LXOR"}
_FLOAT_OPS = {ReduceOp.SUM: "SUM", ReduceOp.AVG: "SUM", ReduceOp.PRODUCT: "PROD",
              ReduceOp.MIN: "MIN", ReduceOp.MAX: "MAX"}
_COMPLEX_OPS = {ReduceOp.SUM: "SUM", ReduceOp.AVG: "SUM", ReduceOp.PRODUCT: "PROD"}


def _reduce_op(op, dtype, g, opname):
    """(MPI op or None for a world of one, whether to divide by the world size)."""
    try:
        rop = op if isinstance(op, ReduceOp) else ReduceOp(op)
    except ValueError:
        raise ValueError(f"{opname}: unknown reduction op {op!r}; expected a ReduceOp "
                         f"(SUM, AVG, PRODUCT, MIN, MAX, BAND, BOR, BXOR)") from None
    dt = np.dtype(dtype)
    table = (_BOOL_OPS if dtype_kind(dt) == "b" else _INT_OPS if dtype_kind(dt) in "iu" else
             _FLOAT_OPS if dtype_kind(dt) == "f" else _COMPLEX_OPS if dtype_kind(dt) == "c" else {})
    name = table.get(rop)
    if name is None:
        raise TypeError(f"{opname}: ReduceOp.{rop.name} is not supported for dtype {dt.name}")
    mop = getattr(g.MPI, name) if g.MPI is not None else None
    return mop, rop is ReduceOp.AVG


def _divide(arr, n):
    if n != 1:
        np.divide(arr, n, out=arr, casting="unsafe")


# ------------------------------------------------------------------ work handles

class Work:
    """The handle of an operation started with ``async_op=True``: ``wait()`` blocks
    until it is done (the result is then in the output arrays), ``is_completed()``
    asks without blocking.

    >>> import ember, ember.distributed as dist
    >>> dist.init_process_group()
    >>> x = ember.ones(3)
    >>> work = dist.all_reduce(x, async_op=True)
    >>> work.wait(), work.is_completed()
    (True, True)
    >>> dist.destroy_process_group()
    """

    def __init__(self, group, opname, reqs, finish=None, desc="", statuses=None):
        self._group = group
        self._opname = opname
        self._reqs = reqs
        self._finish = finish
        self._desc = desc
        self._statuses = statuses
        self._done = False
        self._error = None
        self._source = None

    def _description(self):
        # built only when needed (a timeout message): formatting it per call cost ~2 us
        return self._desc() if callable(self._desc) else self._desc

    def is_completed(self):
        """True once the operation has finished (and its result has landed)."""
        if self._done:
            return True
        if not self._reqs or self._test():
            self._complete()
            return True
        return False

    def is_success(self):
        return self._done and self._error is None

    def _test(self):
        MPI = self._group.MPI
        if self._statuses is not None:
            return MPI.Request.Testall(self._reqs, self._statuses)
        return MPI.Request.Testall(self._reqs)

    def wait(self, timeout=None):
        """Block until the operation is done; raise ``DistBackendError`` after `timeout`
        seconds (default: the group's timeout).  Returns True."""
        if self._error is not None:
            raise self._error
        if self._done:
            return True
        if self._reqs:
            g = self._group
            limit = g.timeout if timeout is None else _to_seconds(timeout, f"{self._opname}.wait")
            if not self._test():
                t0 = time.monotonic()
                spins = 0
                while True:
                    done = False
                    for _ in range(32):
                        if self._test():
                            done = True
                            break
                    if done:
                        break
                    el = time.monotonic() - t0
                    if el > limit:
                        self._error = DistBackendError(
                            f"{self._opname}: timed out after {limit:g} s waiting for the other "
                            f"ranks (this is rank {g.rank} of {g.size}; {self._description()}). "
                            f"A rank may have died, hung, or skipped this call; every rank must "
                            f"call the same collectives in the same order")
                        raise self._error
                    # give the core away between bursts of polling: when there are more
                    # runnable processes than cores, the rank we wait for may need it
                    spins += 1
                    if el > _YIELD_AFTER and spins % _YIELD_EVERY == 0:
                        os.sched_yield()
                        if el > 1.0:
                            time.sleep(0.0005)
        self._complete()
        return True

    def _complete(self):
        self._done = True
        self._reqs = None
        if self._statuses is not None:
            self._source = self._group.global_rank(self._statuses[0].Get_source())
            self._statuses = None
        f, self._finish = self._finish, None
        if f is not None:
            f()

    def source_rank(self):
        """The rank a finished ``irecv`` received from."""
        if not self._done:
            self.wait()
        return self._source

    # PyTorch's spelling
    _source_rank = source_rank

    def __repr__(self):
        return f"<Work {self._opname} {'done' if self._done else 'pending'}>"


def _run(g, opname, reqs, finish, async_op, desc, statuses=None):
    w = Work(g, opname, reqs, finish, desc, statuses)
    if async_op:
        return w
    w.wait()
    return None


def _check_rank(r, g, opname, what):
    """A global rank (as PyTorch's src/dst) -> the rank within group `g`."""
    if g.ranks is not None:
        if isinstance(r, bool) or not isinstance(r, (int, np.integer)) or int(r) not in g.ranks:
            raise ValueError(f"{opname}: {what}={r!r} is not a member of the group of ranks "
                             f"{list(g.ranks)} ({what} is a global rank)")
        return g.ranks.index(int(r))
    if isinstance(r, bool) or not isinstance(r, (int, np.integer)) or not 0 <= r < g.size:
        raise ValueError(f"{opname}: {what}={r!r} is not a rank of the group "
                         f"(world size {g.size}; ranks 0..{g.size - 1})")
    return int(r)


# ------------------------------------------------------------------ collectives

def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False):
    """Combine `tensor` across all ranks (``op``: SUM, AVG, PRODUCT, MIN, MAX, BAND, BOR,
    BXOR), in place: afterwards every rank holds the result.

    >>> import ember, ember.distributed as dist
    >>> dist.init_process_group()
    >>> x = ember.asarray([1.0, 2.0])
    >>> dist.all_reduce(x, op=dist.ReduceOp.MAX)
    >>> x.tolist()
    [1.0, 2.0]
    >>> dist.destroy_process_group()
    """
    g = _group(group, "all_reduce")
    if _on_gpu(g, tensor, "all_reduce"):
        return _nccl.all_reduce(g, tensor, op, async_op)
    b = _Buf(tensor, "all_reduce", "tensor", True, reduces=True)
    mop, avg = _reduce_op(op, b.arr.dtype, g, "all_reduce")
    reqs = []
    if g.size > 1:
        reqs = [g.comm.Iallreduce(g.MPI.IN_PLACE, g.spec(b.arr), mop)]

    def finish():
        if avg:
            _divide(b.arr, g.size)
        b.finish()
    return _run(g, "all_reduce", reqs, finish, async_op, lambda: f"tensor: {_describe(b.arr)}")


def broadcast(tensor, src, group=None, async_op=False):
    """Copy rank `src`'s `tensor` into `tensor` on every other rank.

    >>> import ember, ember.distributed as dist
    >>> dist.init_process_group()
    >>> x = ember.arange(3)
    >>> dist.broadcast(x, src=0)
    >>> x.tolist()
    [0, 1, 2]
    >>> dist.destroy_process_group()
    """
    g = _group(group, "broadcast")
    src = _check_rank(src, g, "broadcast", "src")
    if _on_gpu(g, tensor, "broadcast"):
        return _nccl.broadcast(g, tensor, src, async_op)
    b = _Buf(tensor, "broadcast", "tensor", g.rank != src)
    reqs = []
    if g.size > 1:
        reqs = [g.comm.Ibcast(g.spec(b.arr), root=src)]
    return _run(g, "broadcast", reqs, b.finish, async_op,
                lambda: f"src={src}, tensor: {_describe(b.arr)}")


def reduce(tensor, dst, op=ReduceOp.SUM, group=None, async_op=False):
    """Combine `tensor` across ranks into `tensor` on rank `dst` (the others' arrays
    are left as they were).

    >>> import ember, ember.distributed as dist
    >>> dist.init_process_group()
    >>> x = ember.ones(2)
    >>> dist.reduce(x, dst=0, op=dist.ReduceOp.SUM)
    >>> x.tolist()
    [1.0, 1.0]
    >>> dist.destroy_process_group()
    """
    g = _group(group, "reduce")
    dst = _check_rank(dst, g, "reduce", "dst")
    root = g.rank == dst
    if _on_gpu(g, tensor, "reduce"):
        return _nccl.reduce(g, tensor, dst, op, async_op)
    b = _Buf(tensor, "reduce", "tensor", root, reduces=True)
    mop, avg = _reduce_op(op, b.arr.dtype, g, "reduce")
    reqs = []
    if g.size > 1:
        if root:
            reqs = [g.comm.Ireduce(g.MPI.IN_PLACE, g.spec(b.arr), mop, root=dst)]
        else:
            reqs = [g.comm.Ireduce(g.spec(b.arr), None, mop, root=dst)]

    def finish():
        if root:
            if avg:
                _divide(b.arr, g.size)
            b.finish()
    return _run(g, "reduce", reqs, finish, async_op,
                lambda: f"dst={dst}, tensor: {_describe(b.arr)}")


def all_gather(tensor_list, tensor, group=None, async_op=False):
    """Every rank's `tensor` into ``tensor_list[rank]`` on every rank (`tensor_list`:
    one array per rank, each shaped like `tensor`).

    >>> import ember, ember.distributed as dist
    >>> dist.init_process_group()
    >>> out = [ember.zeros(2)]
    >>> dist.all_gather(out, ember.asarray([3.0, 4.0]))
    >>> out[0].tolist()
    [3.0, 4.0]
    >>> dist.destroy_process_group()
    """
    g = _group(group, "all_gather")
    if _on_gpu(g, tensor, "all_gather"):
        _check_list(tensor_list, g.size, "all_gather", "tensor_list")
        _check_like(tensor_list, tensor, "all_gather", "tensor_list", "tensor")
        return _nccl.all_gather(g, tensor_list, tensor, async_op)
    send = _Buf(tensor, "all_gather", "tensor", False)
    _check_list(tensor_list, g.size, "all_gather", "tensor_list")
    _check_like(tensor_list, send.arr, "all_gather", "tensor_list", "tensor")
    recv = _ListBuf(tensor_list, send.arr.shape, send.arr.dtype, "all_gather", "tensor_list", True)
    reqs = _allgather(g, send.arr, recv.arr)
    return _run(g, "all_gather", reqs, recv.finish, async_op,
                lambda: f"tensor: {_describe(send.arr)}")


def _allgather(g, send, recv):
    if g.size == 1:
        np.copyto(recv.reshape(send.shape), send)
        return []
    return [g.comm.Iallgather(g.spec(send), g.spec(recv))]


def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False):
    """Every rank's `input_tensor`, concatenated (shape ``(world*n, ...)``) or stacked
    (shape ``(world, n, ...)``) in rank order, into `output_tensor`.

    >>> import ember, ember.distributed as dist
    >>> dist.init_process_group()
    >>> out = ember.zeros(2)
    >>> dist.all_gather_into_tensor(out, ember.asarray([5.0, 6.0]))
    >>> out.tolist()
    [5.0, 6.0]
    >>> dist.destroy_process_group()
    """
    op = "all_gather_into_tensor"
    g = _group(group, op)
    if _on_gpu(g, input_tensor, op):
        _check_split(output_tensor, input_tensor, g.size, op, "output_tensor", "input_tensor")
        return _nccl.all_gather_into_tensor(g, output_tensor, input_tensor, async_op)
    send = _Buf(input_tensor, op, "input_tensor", False)
    recv = _Buf(output_tensor, op, "output_tensor", True)
    _check_split(recv.arr, send.arr, g.size, op, "output_tensor", "input_tensor")
    reqs = _allgather(g, send.arr, recv.arr)
    return _run(g, op, reqs, recv.finish, async_op, lambda: f"input_tensor: {_describe(send.arr)}")


def _check_split(big, small, n, opname, bigname, smallname):
    ok = np.dtype(big.dtype) == np.dtype(small.dtype) and (
        tuple(big.shape) == (n,) + tuple(small.shape) or
        (small.ndim >= 1 and big.ndim == small.ndim and big.shape[1:] == small.shape[1:] and
         big.shape[0] == n * small.shape[0]) or
        (small.ndim == 0 and tuple(big.shape) == (n,)))
    if not ok:
        raise ValueError(f"{opname}: {bigname} is a {_describe(big)} but {smallname} is a "
                         f"{_describe(small)}; with world size {n}, {bigname} must have the "
                         f"same dtype and shape ({n}*{small.shape[0] if small.ndim else 1}, ...) "
                         f"or ({n}, *{smallname}.shape)")


def reduce_scatter(output, input_list, op=ReduceOp.SUM, group=None, async_op=False):
    """Combine ``input_list[r]`` across ranks into `output` on rank r (`input_list`: one
    array per rank, each shaped like `output`).

    >>> import ember, ember.distributed as dist
    >>> dist.init_process_group()
    >>> out = ember.zeros(2)
    >>> dist.reduce_scatter(out, [ember.asarray([1.0, 2.0])])
    >>> out.tolist()
    [1.0, 2.0]
    >>> dist.destroy_process_group()
    """
    g = _group(group, "reduce_scatter")
    if _on_gpu(g, output, "reduce_scatter"):
        _check_list(input_list, g.size, "reduce_scatter", "input_list")
        _check_like(input_list, output, "reduce_scatter", "input_list", "output")
        return _nccl.reduce_scatter(g, output, input_list, op, async_op)
    recv = _Buf(output, "reduce_scatter", "output", True, reduces=True)
    _check_list(input_list, g.size, "reduce_scatter", "input_list")
    _check_like(input_list, recv.view, "reduce_scatter", "input_list", "output")
    send = _ListBuf(input_list, recv.view.shape, recv.view.dtype, "reduce_scatter",
                    "input_list", False)
    if send.arr.dtype != recv.arr.dtype:        # bfloat16: reduced in float32
        send.arr = send.arr.astype(recv.arr.dtype)
    mop, avg = _reduce_op(op, recv.arr.dtype, g, "reduce_scatter")
    reqs = _reduce_scatter(g, send.arr, recv.arr, mop)

    def finish():
        if avg:
            _divide(recv.arr, g.size)
        recv.finish()
    return _run(g, "reduce_scatter", reqs, finish, async_op,
                lambda: f"output: {_describe(recv.arr)}")


def _reduce_scatter(g, send, recv, mop):
    if g.size == 1:
        np.copyto(recv, send.reshape(recv.shape))
        return []
    return [g.comm.Ireduce_scatter_block(g.spec(send), g.spec(recv), mop)]


def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None, async_op=False):
    """Combine `input` (``world`` chunks along axis 0, or stacked) across ranks; rank r
    receives chunk r in `output`.

    >>> import ember, ember.distributed as dist
    >>> dist.init_process_group()
    >>> out = ember.zeros(2)
    >>> dist.reduce_scatter_tensor(out, ember.asarray([7.0, 8.0]))
    >>> out.tolist()
    [7.0, 8.0]
    >>> dist.destroy_process_group()
    """
    opname = "reduce_scatter_tensor"
    g = _group(group, opname)
    if _on_gpu(g, output, opname):
        _check_split(input, output, g.size, opname, "input", "output")
        return _nccl.reduce_scatter_tensor(g, output, input, op, async_op)
    recv = _Buf(output, opname, "output", True, reduces=True)
    send = _Buf(input, opname, "input", False, reduces=True)
    _check_split(send.view, recv.view, g.size, opname, "input", "output")
    mop, avg = _reduce_op(op, recv.arr.dtype, g, opname)
    reqs = _reduce_scatter(g, send.arr, recv.arr, mop)

    def finish():
        if avg:
            _divide(recv.arr, g.size)
        recv.finish()
    return _run(g, opname, reqs, finish, async_op, lambda: f"output: {_describe(recv.arr)}")


def _root_list(lst, g, root, groot, like, opname, what, argname, role, writable):
    """The list of one array per rank that only the root passes (gather's outputs,
    scatter's inputs): checked and wrapped on the root (group rank `root`, global rank
    `groot`), required to be empty elsewhere."""
    if g.rank == root:
        if lst is None:
            raise ValueError(f"{opname}: rank {groot} is the {role} and needs a {what} "
                             f"(one array per rank)")
        _check_list(lst, g.size, opname, what)
        _check_like(lst, like, opname, what, "tensor")
        return _ListBuf(lst, like.shape, like.dtype, opname, what, writable)
    if lst:
        raise ValueError(f"{opname}: {what} must be empty on ranks other than "
                         f"{argname}={groot} (this is rank {g.global_rank(g.rank)})")
    return None


def _root_check(lst, g, like, opname, what):
    if lst is None:
        raise ValueError(f"{opname}: this rank is the root and needs a {what} (one array per "
                         f"rank)")
    _check_list(lst, g.size, opname, what)
    _check_like(lst, like, opname, what, "tensor")


def gather(tensor, gather_list=None, dst=0, group=None, async_op=False):
    """Every rank's `tensor` into ``gather_list[rank]`` on rank `dst` (the other ranks
    pass no `gather_list`).

    >>> import ember, ember.distributed as dist
    >>> dist.init_process_group()
    >>> out = [ember.zeros(1)]
    >>> dist.gather(ember.asarray([9.0]), out, dst=0)
    >>> out[0].tolist()
    [9.0]
    >>> dist.destroy_process_group()
    """
    g = _group(group, "gather")
    gdst, dst = dst, _check_rank(dst, g, "gather", "dst")
    if _on_gpu(g, tensor, "gather"):
        if g.rank == dst:
            _root_check(gather_list, g, tensor, "gather", "gather_list")
        elif gather_list:
            raise ValueError(f"gather: gather_list must be empty on ranks other than "
                             f"dst={gdst} (this is rank {g.global_rank(g.rank)})")
        return _nccl.gather(g, tensor, gather_list, dst, async_op)
    send = _Buf(tensor, "gather", "tensor", False)
    recv = _root_list(gather_list, g, dst, gdst, send.arr, "gather", "gather_list",
                      "dst", "destination", True)
    if g.size == 1:
        np.copyto(recv.arr.reshape(send.arr.shape), send.arr)
        reqs = []
    else:
        rspec = g.spec(recv.arr) if recv is not None else None
        reqs = [g.comm.Igather(g.spec(send.arr), rspec, root=dst)]
    return _run(g, "gather", reqs, recv.finish if recv is not None else None, async_op,
                lambda: f"dst={gdst}, tensor: {_describe(send.arr)}")


def scatter(tensor, scatter_list=None, src=0, group=None, async_op=False):
    """``scatter_list[r]`` on rank `src` into `tensor` on rank r (the other ranks pass
    no `scatter_list`).

    >>> import ember, ember.distributed as dist
    >>> dist.init_process_group()
    >>> x = ember.zeros(2)
    >>> dist.scatter(x, [ember.asarray([1.0, 5.0])], src=0)
    >>> x.tolist()
    [1.0, 5.0]
    >>> dist.destroy_process_group()
    """
    g = _group(group, "scatter")
    gsrc, src = src, _check_rank(src, g, "scatter", "src")
    if _on_gpu(g, tensor, "scatter"):
        if g.rank == src:
            _root_check(scatter_list, g, tensor, "scatter", "scatter_list")
        elif scatter_list:
            raise ValueError(f"scatter: scatter_list must be empty on ranks other than "
                             f"src={gsrc} (this is rank {g.global_rank(g.rank)})")
        return _nccl.scatter(g, tensor, scatter_list, src, async_op)
    recv = _Buf(tensor, "scatter", "tensor", True)
    send = _root_list(scatter_list, g, src, gsrc, recv.arr, "scatter", "scatter_list",
                      "src", "source", False)
    if g.size == 1:
        np.copyto(recv.arr, send.arr.reshape(recv.arr.shape))
        reqs = []
    else:
        sspec = g.spec(send.arr) if send is not None else None
        reqs = [g.comm.Iscatter(sspec, g.spec(recv.arr), root=src)]
    return _run(g, "scatter", reqs, recv.finish, async_op,
                lambda: f"src={gsrc}, tensor: {_describe(recv.arr)}")


def barrier(group=None, async_op=False, device_ids=None):
    """Wait until every rank has reached the barrier.

    >>> import ember.distributed as dist
    >>> dist.init_process_group(); dist.barrier(); dist.destroy_process_group()
    """
    g = _group(group, "barrier")
    if g.nccl is not None:
        return _nccl.barrier(g, async_op)
    reqs = [g.comm.Ibarrier()] if g.size > 1 else []
    return _run(g, "barrier", reqs, None, async_op, "barrier")


def _p2p_peer(peer, g, opname, what):
    local = _check_rank(peer, g, opname, what)
    if local == g.rank:
        raise ValueError(f"{opname}: {what}={peer} is this process's own rank; point-to-point "
                         f"messages go to another rank")
    return local


def isend(tensor, dst, group=None, tag=0):
    """Start sending `tensor` to rank `dst`; returns a :class:`Work` (``wait()`` before
    modifying `tensor`)."""
    g = _group(group, "isend")
    dst = _p2p_peer(dst, g, "isend", "dst")
    if _on_gpu(g, tensor, "isend"):
        return _nccl.send(g, tensor, dst, async_op=True)
    b = _Buf(tensor, "isend", "tensor", False)
    reqs = [g.comm.Isend(g.spec(b.arr), dest=dst, tag=int(tag))]
    return Work(g, "send", reqs, None, f"dst={dst}, tag={tag}, tensor: {_describe(b.arr)}")


def irecv(tensor, src=None, group=None, tag=0):
    """Start receiving into `tensor` from rank `src` (any rank when None); returns a
    :class:`Work` whose ``source_rank()`` tells who sent it."""
    g = _group(group, "irecv")
    if _on_gpu(g, tensor, "irecv"):
        if src is None:
            raise ValueError("irecv: the NCCL backend cannot receive from any rank (src=None); "
                             "name the sender")
        return _nccl.recv(g, tensor, _p2p_peer(src, g, "irecv", "src"), async_op=True)
    source = g.MPI.ANY_SOURCE if g.MPI is not None and src is None else src
    if src is not None:
        src = _p2p_peer(src, g, "irecv", "src")
        source = src
    elif g.size == 1:
        raise ValueError("irecv: a world of one process has no other rank to receive from")
    b = _Buf(tensor, "irecv", "tensor", True)
    st = g.MPI.Status()
    reqs = [g.comm.Irecv(g.spec(b.arr), source=source, tag=int(tag))]
    return Work(g, "recv", reqs, b.finish,
                f"src={'any' if src is None else src}, tag={tag}, tensor: {_describe(b.arr)}",
                statuses=[st])


def send(tensor, dst, group=None, tag=0):
    """Send `tensor` to rank `dst` (which calls :func:`recv`); blocks until sent.

    >>> import ember.distributed as dist
    >>> dist.init_process_group()
    >>> import ember
    >>> dist.send(ember.ones(2), dst=0)
    Traceback (most recent call last):
    ...
    ValueError: send: dst=0 is this process's own rank; point-to-point messages go to another rank
    >>> dist.destroy_process_group()
    """
    g = _group(group, "send")
    _p2p_peer(dst, g, "send", "dst")
    isend(tensor, dst, group, tag).wait()


def recv(tensor, src=None, group=None, tag=0):
    """Receive into `tensor` from rank `src` (any rank when None); returns the sender's
    rank."""
    w = irecv(tensor, src, group, tag)
    w.wait()
    if isinstance(w, _nccl.GpuWork):
        return src
    return w.source_rank()


# ------------------------------------------------------------------ Python objects

def broadcast_object_list(object_list, src=0, group=None, device=None):
    """Rank `src`'s picklable objects into `object_list` (same length) on every rank.

    >>> import ember.distributed as dist
    >>> dist.init_process_group()
    >>> objs = [{"seed": 3}]
    >>> dist.broadcast_object_list(objs, src=0); objs
    [{'seed': 3}]
    >>> dist.destroy_process_group()
    """
    g = _group(group, "broadcast_object_list")
    gsrc = src                                  # the global rank, for the calls below
    src = _check_rank(src, g, "broadcast_object_list", "src")
    if g.size == 1:
        return None
    data = np.frombuffer(pickle.dumps(list(object_list)), np.uint8) if g.rank == src else None
    n = np.array([data.size if data is not None else 0], np.int64)
    broadcast(n, gsrc, group)
    if data is None:
        data = np.empty(int(n[0]), np.uint8)
    else:
        data = data.copy()
    broadcast(data, gsrc, group)
    if g.rank != src:
        objs = pickle.loads(data.tobytes())
        if len(objs) != len(object_list):
            raise ValueError(f"broadcast_object_list: rank {gsrc} sent {len(objs)} objects but "
                             f"object_list here has {len(object_list)}")
        object_list[:] = objs
    return None


def all_gather_object(object_list, obj, group=None):
    """Every rank's picklable `obj` into ``object_list[rank]`` (a list of world-size
    entries) on every rank.

    >>> import ember.distributed as dist
    >>> dist.init_process_group()
    >>> out = [None]
    >>> dist.all_gather_object(out, "hello"); out
    ['hello']
    >>> dist.destroy_process_group()
    """
    g = _group(group, "all_gather_object")
    if not isinstance(object_list, list) or len(object_list) != g.size:
        raise ValueError(f"all_gather_object: object_list must be a list of {g.size} entries "
                         f"(the group's size)")
    if g.size == 1:
        object_list[0] = obj
        return None
    data = np.frombuffer(pickle.dumps(obj), np.uint8)
    sizes = np.zeros(g.size, np.int64)
    all_gather_into_tensor(sizes, np.array([data.size], np.int64), group)
    m = int(sizes.max())
    buf = np.zeros(m, np.uint8)
    buf[:data.size] = data
    out = np.empty((g.size, m), np.uint8)
    all_gather_into_tensor(out, buf, group)
    for r in range(g.size):
        object_list[r] = pickle.loads(out[r, :sizes[r]].tobytes())
    return None
