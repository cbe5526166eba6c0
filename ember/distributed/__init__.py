"""ember.distributed: multi-process training (PyTorch's ``torch.distributed`` API).

One process per rank, started by an MPI launcher::

    mpiexec -n 4 python train.py
    python -m ember.distributed.run --nproc 4 train.py     # the same, through ember

Each process calls ``init_process_group("mpi")``; rank and world size come from the
launcher.  The collectives (``all_reduce``, ``broadcast``, ``all_gather``,
``reduce_scatter``, ``gather``, ``scatter``, ``reduce``, ``send``/``recv``,
``barrier``) run MPI (through mpi4py) directly on the array's memory: a C-contiguous
array is handed to MPI as it is, no copy; a non-contiguous one is staged through a
contiguous copy and the result copied back.  ``async_op=True`` starts the
nonblocking MPI operation and returns a :class:`Work` handle (``wait()``,
``is_completed()``).  Every wait polls with a timeout (``init_process_group(timeout=)``,
30 minutes by default) and fails with a ``RuntimeError`` naming the operation, instead
of hanging forever when a rank died or skipped a collective; an uncaught exception
in one rank aborts the whole job (``MPI_Abort``), so the others stop at once.

Without a launcher (a plain ``python`` process), ``init_process_group`` makes a group
of one process (world size 1) that needs neither MPI nor mpi4py:

>>> import ember
>>> import ember.distributed as dist
>>> dist.init_process_group("mpi")
>>> dist.get_rank(), dist.get_world_size()
(0, 1)
>>> x = ember.arange(4.0)
>>> dist.all_reduce(x, op=dist.ReduceOp.SUM)
>>> x.tolist()
[0.0, 1.0, 2.0, 3.0]
>>> dist.destroy_process_group()

Subgroups: ``new_group(ranks)`` (called by every rank) gives a group to pass as
``group=``; within it ``get_rank(group)`` is the group rank, while ``src``/``dst``
arguments stay global ranks, as in PyTorch.

``backend="nccl"`` (GPU arrays) is not available yet: ember has no GPU arrays.
"""
from ember.distributed._c10d import (
    ReduceOp, Work, DistBackendError, init_process_group, destroy_process_group,
    is_available, is_initialized, is_mpi_available, is_nccl_available, get_backend, get_rank,
    get_world_size, barrier, all_reduce, broadcast, reduce, all_gather, all_gather_into_tensor,
    reduce_scatter, reduce_scatter_tensor, gather, scatter, send, recv, isend, irecv,
    broadcast_object_list, all_gather_object, get_default_timeout, new_group,
    get_process_group_ranks, get_global_rank, get_group_rank)

__all__ = ["ReduceOp", "Work", "DistBackendError", "init_process_group", "destroy_process_group",
           "is_available", "is_initialized", "is_mpi_available", "is_nccl_available",
           "get_backend", "get_rank", "get_world_size", "barrier", "all_reduce", "broadcast",
           "reduce", "all_gather", "all_gather_into_tensor", "reduce_scatter",
           "reduce_scatter_tensor", "gather", "scatter", "send", "recv", "isend", "irecv",
           "broadcast_object_list", "all_gather_object", "get_default_timeout",
           "new_group", "get_process_group_ranks", "get_global_rank", "get_group_rank"]
