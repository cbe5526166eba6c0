"""NCCL for GPU arrays: the ``'nccl'`` backend of ember.distributed.

The job itself is set up as for ``'mpi'`` (ranks from the MPI launcher, or a
world of one process without one); MPI then only carries NCCL's unique id from
rank 0 to the others, once per communicator.  Every collective on GPU arrays is
one NCCL call on the current CuPy stream, in place on the arrays' memory: it is
queued, not waited for (as PyTorch's NCCL backend), and a non-contiguous array
is staged through a contiguous copy.  Host arrays in an ``'nccl'`` group still
go through MPI.

Limits (NCCL's): no receive from "any source", no bitwise reductions, no
timeouts (a rank that never joins makes the others wait at their next
synchronisation).  Each process drives one GPU: the current device when the
group is made (``device_id=`` or ``LOCAL_RANK`` choose it); collectives run with
that device current, whichever device the caller has made current since.
"""
import functools
import os

import numpy as np

__all__ = ["is_available", "unavailable_reason", "make_comm", "is_gpu"]


def is_gpu(x):
    """Whether x is an ember array on a GPU."""
    return bool(getattr(x, "is_cuda", False))


def _nccl():
    from cupy.cuda import nccl
    return nccl


def unavailable_reason():
    """Why the NCCL backend cannot be used here, or None when it can."""
    try:
        import ember.cuda
        avail = getattr(ember.cuda, "is_available", None)
        if avail is None or not avail():
            return "no usable CUDA GPU (ember.cuda.is_available() is False)"
    except Exception as e:          # noqa: BLE001 - any failure means "not usable"
        return f"the GPU backend failed to load ({e})"
    try:
        nccl = _nccl()
    except Exception as e:          # noqa: BLE001
        return f"CuPy's NCCL binding cannot be imported ({e}); install cupy with NCCL"
    if not getattr(nccl, "available", True):
        return "CuPy was built without NCCL"
    return None


def is_available():
    """Whether ``init_process_group('nccl')`` can work in this process."""
    return unavailable_reason() is None


def pick_device(device_id):
    """The CUDA device this process drives: `device_id` (an int, 'cuda:N' or a
    Device), else ``LOCAL_RANK`` modulo the device count, else the current one;
    made current."""
    import cupy
    if device_id is None:
        local = os.environ.get("LOCAL_RANK")
        if local not in (None, ""):
            n = cupy.cuda.runtime.getDeviceCount()
            idx = int(local) % max(n, 1)
        else:
            idx = cupy.cuda.Device().id
    elif isinstance(device_id, int):
        idx = device_id
    else:
        idx = getattr(device_id, "index", None)
        if idx is None:
            s = str(device_id)
            idx = int(s.split(":", 1)[1]) if ":" in s else cupy.cuda.Device().id
    cupy.cuda.Device(idx).use()
    return int(idx)


def make_comm(size, rank, mpi_comm, device):
    """An NcclCommunicator of `size` ranks on `device`: rank 0 makes the unique id,
    `mpi_comm` (None for a world of one) broadcasts it."""
    import cupy
    nccl = _nccl()
    uid = nccl.get_unique_id() if rank == 0 else None
    if size > 1:
        uid = mpi_comm.bcast(uid, root=0)
    with cupy.cuda.Device(device):
        return nccl.NcclCommunicator(size, uid, rank)


# ------------------------------------------------------------------ tables

def _dtype_code(dtype, opname):
    nccl = _nccl()
    name = np.dtype(dtype).name if str(dtype) != "bfloat16" else "bfloat16"
    table = {"int8": nccl.NCCL_INT8, "uint8": nccl.NCCL_UINT8, "bool": nccl.NCCL_UINT8,
             "int32": nccl.NCCL_INT32, "uint32": nccl.NCCL_UINT32,
             "int64": nccl.NCCL_INT64, "uint64": nccl.NCCL_UINT64,
             "float16": nccl.NCCL_FLOAT16, "float32": nccl.NCCL_FLOAT32,
             "float64": nccl.NCCL_FLOAT64, "bfloat16": getattr(nccl, "NCCL_BFLOAT16", None)}
    code = table.get(name)
    if code is None:
        raise TypeError(f"{opname}: dtype {name} is not supported by NCCL (supported: "
                        f"int8/32/64, uint8/32/64, bool, float16, bfloat16, float32, float64)")
    return code


def _op_code(op, dtype, opname):
    from ember.distributed._reduce_op import ReduceOp
    nccl = _nccl()
    try:
        rop = op if isinstance(op, ReduceOp) else ReduceOp(op)
    except ValueError:
        raise ValueError(f"{opname}: unknown reduction op {op!r}; expected a ReduceOp "
                         f"(SUM, AVG, PRODUCT, MIN, MAX)") from None
    if np.dtype(dtype) == np.bool_:
        # bools travel as uint8: MAX is OR, MIN is AND (SUM/PRODUCT as MPI's LOR/LAND)
        table = {ReduceOp.SUM: nccl.NCCL_MAX, ReduceOp.MAX: nccl.NCCL_MAX,
                 ReduceOp.BOR: nccl.NCCL_MAX, ReduceOp.PRODUCT: nccl.NCCL_MIN,
                 ReduceOp.MIN: nccl.NCCL_MIN, ReduceOp.BAND: nccl.NCCL_MIN}
    else:
        table = {ReduceOp.SUM: nccl.NCCL_SUM, ReduceOp.PRODUCT: nccl.NCCL_PROD,
                 ReduceOp.MIN: nccl.NCCL_MIN, ReduceOp.MAX: nccl.NCCL_MAX,
                 ReduceOp.AVG: nccl.NCCL_AVG}
    code = table.get(rop)
    if code is None:
        raise TypeError(f"{opname}: ReduceOp.{rop.name} is not supported by the NCCL backend "
                        f"for dtype {np.dtype(dtype).name}")
    return code


# ------------------------------------------------------------------ buffers and work

def _stream():
    import cupy
    return cupy.cuda.get_current_stream().ptr


def _check(g, x, opname, what):
    from ember._core.array import ndarray
    if not isinstance(x, ndarray) or not is_gpu(x):
        where = getattr(x, "device", type(x).__name__)
        raise TypeError(f"{opname}: {what} must be an ember GPU array like the others "
                        f"(backend 'nccl'), got one on {where}")
    dev = x.device.index or 0
    if dev != g.nccl_device:
        raise RuntimeError(f"{opname}: {what} is on cuda:{dev} but this process's NCCL "
                           f"communicator drives cuda:{g.nccl_device}")
    return x


class _Contig:
    """A contiguous stand-in for x (x itself when it already is), copied back by
    ``finish`` when x is an output."""
    __slots__ = ("x", "c", "out")

    def __init__(self, x, out):
        import ember
        self.x, self.out = x, out
        if x.is_contiguous():
            self.c = x
        else:
            with ember.no_grad():
                self.c = ember.ascontiguousarray(x.detach())

    @property
    def ptr(self):
        return self.c.data_ptr()          # a GPU array's data pointer is its device address

    def finish(self):
        if self.out:
            if self.c is not self.x:
                import ember
                with ember.no_grad():
                    self.x[...] = self.c
            self.x._bump_version()


class GpuWork:
    """Handle of an NCCL operation started with ``async_op=True``.  The operation is
    queued on the stream that was current; ``wait()`` makes the current stream wait
    for it (the host does not block, as PyTorch's NCCL work), ``is_completed()``
    asks whether the GPU has finished it."""

    def __init__(self, opname, finish=None):
        import cupy
        self._opname = opname
        if finish is not None:
            finish()
        self._event = cupy.cuda.Event(disable_timing=True)
        self._event.record()

    def wait(self, timeout=None):
        import cupy
        cupy.cuda.get_current_stream().wait_event(self._event)
        return True

    def is_completed(self):
        return bool(self._event.done)

    def is_success(self):
        return self.is_completed()

    def synchronize(self):
        self._event.synchronize()

    def exception(self):
        return None

    def source_rank(self):
        raise RuntimeError(f"{self._opname}: source_rank() is only known for MPI receives "
                           f"from any rank")

    def __repr__(self):
        return f"<ember.distributed NCCL work {self._opname}>"


def _done(opname, async_op, finish=None):
    if async_op:
        return GpuWork(opname, finish)
    if finish is not None:
        finish()
    return None


# ------------------------------------------------------------------ collectives

def _on_comm_device(fn):
    """Run a collective with the communicator's GPU current: NCCL queues on that
    device's current stream whichever device the caller left current."""
    @functools.wraps(fn)
    def run(g, *args, **kwargs):
        from ember.cuda import _runtime as R
        return R.run_on(g.nccl_device, fn, g, *args, **kwargs)
    return run


@_on_comm_device
def all_reduce(g, tensor, op, async_op):
    _check(g, tensor, "all_reduce", "tensor")
    b = _Contig(tensor, True)
    code = _op_code(op, tensor.dtype, "all_reduce")
    if b.c.size:
        g.nccl.allReduce(b.ptr, b.ptr, b.c.size, _dtype_code(tensor.dtype, "all_reduce"), code,
                         _stream())
    return _done("all_reduce", async_op, b.finish)


@_on_comm_device
def broadcast(g, tensor, src, async_op):
    _check(g, tensor, "broadcast", "tensor")
    b = _Contig(tensor, g.rank != src)
    if b.c.size:
        g.nccl.broadcast(b.ptr, b.ptr, b.c.size, _dtype_code(tensor.dtype, "broadcast"), src,
                         _stream())
    return _done("broadcast", async_op, b.finish)


@_on_comm_device
def reduce(g, tensor, dst, op, async_op):
    _check(g, tensor, "reduce", "tensor")
    b = _Contig(tensor, g.rank == dst)
    code = _op_code(op, tensor.dtype, "reduce")
    if b.c.size:
        g.nccl.reduce(b.ptr, b.ptr, b.c.size, _dtype_code(tensor.dtype, "reduce"), code, dst,
                      _stream())
    return _done("reduce", async_op, b.finish)


def _empty(shape, dtype, g):
    from ember.cuda import _runtime as R
    return R.empty(tuple(shape), dtype, device=g.nccl_device)


@_on_comm_device
def all_gather_into_tensor(g, output, input, async_op, opname="all_gather_into_tensor"):
    """`output` holds the ranks' `input`s back to back (shape checked by the caller)."""
    _check(g, output, opname, "output_tensor")
    _check(g, input, opname, "input_tensor")
    src = _Contig(input, False)
    dst = _Contig(output, True)
    if src.c.size:
        g.nccl.allGather(src.ptr, dst.ptr, src.c.size, _dtype_code(input.dtype, opname),
                         _stream())
    return _done(opname, async_op, dst.finish)


@_on_comm_device
def all_gather(g, tensor_list, tensor, async_op):
    _check(g, tensor, "all_gather", "tensor")
    for i, t in enumerate(tensor_list):
        _check(g, t, "all_gather", f"tensor_list[{i}]")
    tmp = _empty((g.size,) + tuple(tensor.shape), tensor.dtype, g)
    src = _Contig(tensor, False)
    if src.c.size:
        g.nccl.allGather(src.ptr, _Contig(tmp, False).ptr, src.c.size,
                         _dtype_code(tensor.dtype, "all_gather"), _stream())

    def finish():
        import ember
        with ember.no_grad():
            for i, t in enumerate(tensor_list):
                t[...] = tmp[i]
    return _done("all_gather", async_op, finish)


@_on_comm_device
def reduce_scatter_tensor(g, output, input, op, async_op, opname="reduce_scatter_tensor"):
    _check(g, output, opname, "output")
    _check(g, input, opname, "input")
    src = _Contig(input, False)
    dst = _Contig(output, True)
    code = _op_code(op, output.dtype, opname)
    if dst.c.size:
        g.nccl.reduceScatter(src.ptr, dst.ptr, dst.c.size, _dtype_code(output.dtype, opname),
                             code, _stream())
    return _done(opname, async_op, dst.finish)


@_on_comm_device
def reduce_scatter(g, output, input_list, op, async_op):
    _check(g, output, "reduce_scatter", "output")
    tmp = _empty((g.size,) + tuple(output.shape), output.dtype, g)
    import ember
    with ember.no_grad():
        for i, t in enumerate(input_list):
            _check(g, t, "reduce_scatter", f"input_list[{i}]")
            tmp[i] = t
    return reduce_scatter_tensor(g, output, tmp, op, async_op, "reduce_scatter")


@_on_comm_device
def gather(g, tensor, gather_list, dst, async_op):
    """Grouped point-to-point calls (NCCL has no gather)."""
    nccl = _nccl()
    _check(g, tensor, "gather", "tensor")
    src = _Contig(tensor, False)
    code = _dtype_code(tensor.dtype, "gather")
    outs = []
    if g.rank == dst:
        outs = [_Contig(_check(g, t, "gather", f"gather_list[{i}]"), True)
                for i, t in enumerate(gather_list)]
    stream = _stream()
    nccl.groupStart()
    try:
        if src.c.size:
            if g.rank == dst:
                for r, o in enumerate(outs):
                    if r != dst:
                        g.nccl.recv(o.ptr, o.c.size, code, r, stream)
            else:
                g.nccl.send(src.ptr, src.c.size, code, dst, stream)
    finally:
        nccl.groupEnd()

    def finish():
        if g.rank == dst:
            import ember
            with ember.no_grad():
                outs[dst].c[...] = src.c.reshape(outs[dst].c.shape)
            for o in outs:
                o.finish()
    return _done("gather", async_op, finish)


@_on_comm_device
def scatter(g, tensor, scatter_list, src, async_op):
    nccl = _nccl()
    _check(g, tensor, "scatter", "tensor")
    out = _Contig(tensor, True)
    code = _dtype_code(tensor.dtype, "scatter")
    ins = []
    if g.rank == src:
        ins = [_Contig(_check(g, t, "scatter", f"scatter_list[{i}]"), False)
               for i, t in enumerate(scatter_list)]
    stream = _stream()
    nccl.groupStart()
    try:
        if out.c.size:
            if g.rank == src:
                for r, s in enumerate(ins):
                    if r != src:
                        g.nccl.send(s.ptr, s.c.size, code, r, stream)
            else:
                g.nccl.recv(out.ptr, out.c.size, code, src, stream)
    finally:
        nccl.groupEnd()

    def finish():
        if g.rank == src:
            import ember
            with ember.no_grad():
                out.c[...] = ins[src].c.reshape(out.c.shape)
        out.finish()
    return _done("scatter", async_op, finish)


@_on_comm_device
def send(g, tensor, dst, async_op=False):
    _check(g, tensor, "send", "tensor")
    b = _Contig(tensor, False)
    if b.c.size:
        g.nccl.send(b.ptr, b.c.size, _dtype_code(tensor.dtype, "send"), dst, _stream())
    return _done("send", async_op)


@_on_comm_device
def recv(g, tensor, src, async_op=False):
    if src is None:
        raise ValueError("recv: the NCCL backend cannot receive from any rank (src=None); "
                         "name the sender")
    _check(g, tensor, "recv", "tensor")
    b = _Contig(tensor, True)
    if b.c.size:
        g.nccl.recv(b.ptr, b.c.size, _dtype_code(tensor.dtype, "recv"), src, _stream())
    return _done("recv", async_op, b.finish)


@_on_comm_device
def barrier(g, async_op):
    """An all-reduce of one number on the GPU, then (unless async) wait for it: every
    rank's earlier GPU work is then done too, as PyTorch's NCCL barrier."""
    import cupy
    one = _empty((1,), np.float32, g)
    one[...] = 0.0
    g.nccl.allReduce(_Contig(one, False).ptr, _Contig(one, False).ptr, 1,
                     _nccl().NCCL_FLOAT32, _nccl().NCCL_SUM, _stream())
    if async_op:
        return GpuWork("barrier")
    cupy.cuda.get_current_stream().synchronize()
    return None
