"""DistributedDataParallel: data-parallel training over ``ember.distributed`` (PyTorch's API).

How it works (as in PyTorch's reducer):

* At construction, the ranks check that they hold the same parameters (names, shapes,
  dtypes) and rank 0's parameters and buffers are broadcast to all.
* The parameters that require grad are grouped, in reverse registration order (the
  order in which backward usually produces their gradients), into buckets of at most
  ``bucket_cap_mb`` MB (25 by default; the first bucket 1 MB, so communication starts
  early), one dtype per bucket.  Each bucket is one flat contiguous buffer.
* A post-accumulate-grad hook on every parameter copies its gradient into its bucket
  when backward has produced it; once all of a bucket's gradients are in, the bucket
  is divided by the world size and its ``all_reduce`` is started (nonblocking), so it
  travels while backward goes on computing the next gradients.  Buckets are launched
  in bucket order on every rank (MPI needs the same order everywhere).  When the last
  gradient is in, the hook waits for the outstanding reductions and writes the
  averaged gradients back into ``param.grad``.
* ``no_sync()``: inside it, backward only accumulates locally; the next synchronised
  backward reduces the accumulated gradients.
* ``find_unused_parameters=True``: after forward, the autograd graph is walked from
  the outputs; parameters it does not reach are marked ready at once (they contribute
  zeros), so the reduction can complete.  A parameter unused on every rank keeps
  ``grad = None``.  Without the flag, a parameter that gets no gradient makes the next
  forward fail with an error saying so (the iteration's reduction never finished).
"""
import contextlib
import weakref

import numpy as np

from ember.nn.modules.module import Module
from ember._core.dtypes import dtype_kind

__all__ = ["DistributedDataParallel"]

_FIRST_BUCKET_BYTES = 1 << 20


class _Bucket:
    __slots__ = ("index", "dtype", "members", "offsets", "sizes", "data", "pending", "work")

    def __init__(self, index, dtype):
        self.index = index
        self.dtype = dtype
        self.members = []          # parameter indices
        self.offsets = []
        self.sizes = []
        self.data = None
        self.pending = 0
        self.work = None


def _model_device(module):
    """The one device of the module's parameters (CPU for a model without any)."""
    from ember._core.array import CPU
    devices = {}
    for n, p in module.named_parameters():
        devices.setdefault(p.device, n)
    if len(devices) > 1:
        desc = ", ".join(f"{d} ({n!r})" for d, n in devices.items())
        raise ValueError(f"DistributedDataParallel: the model's parameters must all be on one "
                         f"device, got parameters on {desc}")
    return next(iter(devices), CPU)


def _check_device_ids(device, device_ids, output_device):
    """PyTorch's arguments: None for CPU models; for a GPU model also [its device] (an
    index, 'cuda:N' or a Device) and output_device its device."""
    import ember

    def same(v):
        try:
            d = ember.Device(f"cuda:{v}") if isinstance(v, int) else ember.Device(v)
        except (TypeError, ValueError):
            return False
        return d.type == "cuda" and (d.index or 0) == (device.index or 0)
    for what, v in (("device_ids", device_ids), ("output_device", output_device)):
        if v is None or (isinstance(v, (list, tuple)) and len(v) == 0):
            continue
        if device.type != "cuda":
            raise ValueError(f"DistributedDataParallel: {what}={v!r}: the model is on {device}; "
                             f"{what} is for GPU models (leave it None)")
        ok = same(v) if what == "output_device" else (
            isinstance(v, (list, tuple)) and len(v) == 1 and same(v[0]))
        if not ok:
            raise ValueError(f"DistributedDataParallel: {what}={v!r}: a GPU model takes "
                             f"{'[its device]' if what == 'device_ids' else 'its device'} "
                             f"({device}), one device per process")


def _writable(g):
    """Whether the averaged gradient can be written into g in place (a host gradient
    that NumPy sees as read-only, a broadcast one, gets a fresh array instead)."""
    if g.is_cuda:
        return g.is_contiguous()
    from ember._api._util import numpy_view
    return numpy_view(g).flags.writeable


def _is_array(x):
    from ember._core.array import ndarray
    return isinstance(x, ndarray)


def _arrays_in(obj, out):
    """Every ember array in a (nested) forward output."""
    if _is_array(obj):
        out.append(obj)
    elif isinstance(obj, (list, tuple)):
        for o in obj:
            _arrays_in(o, out)
    elif isinstance(obj, dict):
        for o in obj.values():
            _arrays_in(o, out)
    return out


def _reachable_leaves(outputs):
    """ids of the leaf arrays the autograd graph of `outputs` reaches."""
    seen, leaves, stack = set(), set(), []
    for x in outputs:
        if not x.requires_grad:
            continue
        if x.grad_fn is None:
            leaves.add(id(x))
        else:
            stack.append(x.grad_fn)
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        var = getattr(node, "variable", None) if type(node).__name__ == "AccumulateGrad" else None
        if var is not None:
            leaves.add(id(var))
            continue
        for nxt, _ in node.next_functions:
            if nxt is not None:
                stack.append(nxt)
    return leaves


class DistributedDataParallel(Module):
    """Data parallelism: wrap the model, train as usual; gradients are averaged over
    the ranks during backward.

    ``ddp(x)`` runs ``module(x)``; ``ddp.module`` is the wrapped model and
    ``ddp.state_dict()`` prefixes its keys with ``module.`` (as PyTorch does).  Needs
    ``ember.distributed.init_process_group()`` first (``'nccl'`` for a model on a GPU:
    its gradient buckets live on that GPU).  Arguments as in PyTorch; ``device_ids`` is
    None or ``[the model's GPU]``, ``output_device`` None or that GPU (one device per
    process);
    ``gradient_as_bucket_view``, ``static_graph`` and ``check_reduction`` are accepted and
    have no effect (gradients are copied into the buckets and back, which costs a memory
    copy per step, not a different result).

    >>> import ember, ember.distributed as dist
    >>> from ember import nn
    >>> from ember.nn.parallel import DistributedDataParallel as DDP
    >>> dist.init_process_group("mpi")            # world size 1 without a launcher
    >>> model = DDP(nn.Linear(3, 1))
    >>> model(ember.ones((2, 3))).sum().backward()
    >>> model.module.weight.grad.tolist()
    [[2.0, 2.0, 2.0]]
    >>> sorted(model.state_dict())
    ['module.bias', 'module.weight']
    >>> dist.destroy_process_group()
    """

    def __init__(self, module, device_ids=None, output_device=None, dim=0,
                 broadcast_buffers=True, process_group=None, bucket_cap_mb=None,
                 find_unused_parameters=False, check_reduction=False,
                 gradient_as_bucket_view=False, static_graph=False, init_sync=True):
        super().__init__()
        from ember.distributed import _c10d
        g = _c10d._group(process_group, "DistributedDataParallel")
        if not isinstance(module, Module):
            raise TypeError(f"DistributedDataParallel: module must be an ember.nn.Module, got "
                            f"{type(module).__name__}")
        self._device = _model_device(module)
        _check_device_ids(self._device, device_ids, output_device)
        if self._device.type == "cuda" and g.size > 1 and getattr(g, "nccl", None) is None:
            raise RuntimeError(
                f"DistributedDataParallel: the model's parameters are on {self._device}, but "
                f"the process group's backend is {g.backend!r}; GPU models reduce their "
                f"gradients over NCCL: init_process_group('nccl')")
        if bucket_cap_mb is None:
            bucket_cap_mb = 25
        if not bucket_cap_mb > 0:
            raise ValueError(f"DistributedDataParallel: bucket_cap_mb must be positive, got "
                             f"{bucket_cap_mb}")
        self.module = module
        self.process_group = process_group
        self.dim = dim
        self.broadcast_buffers = bool(broadcast_buffers)
        self.find_unused_parameters = bool(find_unused_parameters)
        self.gradient_as_bucket_view = bool(gradient_as_bucket_view)
        self.static_graph = bool(static_graph)
        self.require_backward_grad_sync = True
        self.bucket_bytes_cap = int(bucket_cap_mb * (1 << 20))
        self._world = g.size
        self._rank = g.rank
        self._src = g.global_rank(0)    # the group's first member broadcasts (a global rank)
        named = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
        self._param_names = [n for n, _ in named]
        self._params = [p for _, p in named]
        self._index = {id(p): i for i, p in enumerate(self._params)}
        self._fired = 0
        self._state = "idle"        # idle | armed (forward done, reducing) | done
        if self._world > 1:
            self._verify_same_model(module)
            if init_sync:
                self._sync_module_states(module)
        self._build_buckets()
        self._handles = []
        ref = weakref.ref(self)

        def hook(p, _ref=ref):
            ddp = _ref()
            if ddp is not None:
                ddp._on_grad_ready(p)
        if self._world > 1:
            for p in self._params:
                self._handles.append(p.register_post_accumulate_grad_hook(hook))

    # ------------------------------------------------------------ setup
    def _verify_same_model(self, module):
        from ember import distributed as dist
        mine = [(n, tuple(p.shape), np.dtype(p.dtype).str)
                for n, p in module.named_parameters()]
        allp = [None] * self._world
        dist.all_gather_object(allp, mine, group=self.process_group)
        for r, theirs in enumerate(allp):
            if theirs != allp[0]:
                diff = next((f"{a} vs {b}" for a, b in zip(allp[0], theirs) if a != b),
                            f"{len(allp[0])} vs {len(theirs)} parameters")
                raise RuntimeError(f"DistributedDataParallel: rank {r} has different parameters "
                                   f"than rank 0 (first difference: {diff}); every rank must "
                                   f"wrap the same model")

    def _sync_module_states(self, module):
        from ember import distributed as dist
        from ember.autograd.grad_mode import no_grad
        with no_grad():
            for p in module.parameters():
                dist.broadcast(p, self._src, group=self.process_group)
            for b in module.buffers():
                dist.broadcast(b, self._src, group=self.process_group)

    def _build_buckets(self):
        buckets = []
        cur = None
        cap = min(_FIRST_BUCKET_BYTES, self.bucket_bytes_cap)
        cur_bytes = 0
        self._bucket_of = [None] * len(self._params)
        self._slot_of = [None] * len(self._params)
        for i in reversed(range(len(self._params))):
            p = self._params[i]
            dt = np.dtype(p.dtype)
            nbytes = int(p.size) * dt.itemsize
            if cur is None or cur.dtype != dt or (cur.members and cur_bytes + nbytes > cap):
                if cur is not None:
                    cap = self.bucket_bytes_cap
                cur = _Bucket(len(buckets), dt)
                buckets.append(cur)
                cur_bytes = 0
            self._bucket_of[i] = cur.index
            self._slot_of[i] = len(cur.members)
            cur.members.append(i)
            cur.offsets.append(cur_bytes // dt.itemsize)
            cur.sizes.append(int(p.size))
            cur_bytes += nbytes
        import ember
        for b in buckets:           # on the parameters' device: NCCL reduces GPU buckets
            b.data = ember.zeros(sum(b.sizes), dtype=b.dtype, device=self._device)
        self._buckets = buckets

    # ------------------------------------------------------------ forward
    def forward(self, *inputs, **kwargs):
        from ember.autograd.grad_mode import is_grad_enabled, no_grad
        if self._state == "armed" and self._fired > 0:
            missing = [self._param_names[i] for i, r in enumerate(self._ready) if not r]
            raise RuntimeError(
                "DistributedDataParallel: expected to have finished reduction in the prior "
                "iteration before starting a new one: these parameters got no gradient in the "
                f"last backward: {missing[:10]}{' ...' if len(missing) > 10 else ''}. Pass "
                "find_unused_parameters=True if some parameters do not take part in the loss, "
                "and make sure every forward output that depends on them takes part in it")
        if self._world > 1 and self.broadcast_buffers and self._buffers_to_sync():
            from ember import distributed as dist
            with no_grad():
                for b in self.module.buffers():
                    dist.broadcast(b, self._src, group=self.process_group)
        out = self.module(*inputs, **kwargs)
        if self._world > 1 and self.require_backward_grad_sync and is_grad_enabled() \
                and self._params:
            self._prepare_for_backward(out)
        else:
            self._state = "idle"
        return out

    def _buffers_to_sync(self):
        for _ in self.module.buffers():
            return True
        return False

    def _prepare_for_backward(self, out):
        n = len(self._params)
        for b in self._buckets:         # an armed iteration that never ran backward
            if b.work is not None:
                b.work.wait()
        self._fired = 0
        self._ready = [False] * n
        self._nready = 0
        self._next_bucket = 0
        self._used = np.zeros(n, np.int32)
        for b in self._buckets:
            b.pending = len(b.members)
            b.work = None
        self._state = "armed"
        if self.find_unused_parameters:
            reach = _reachable_leaves(_arrays_in(out, []))
            for i, p in enumerate(self._params):
                if id(p) not in reach:
                    self._mark_ready(i, used=False)

    # ------------------------------------------------------------ backward
    def _on_grad_ready(self, p):
        if self._state != "armed":
            if self._state == "done":
                raise RuntimeError(
                    "DistributedDataParallel: a parameter received a gradient after this "
                    "iteration's reduction had finished (backward ran twice after one forward, "
                    "e.g. with retain_graph=True); run forward again, or use no_sync() for "
                    "the extra backward passes")
            return                  # no_sync / eval forward / not through DDP: local only
        i = self._index.get(id(p))
        if i is None:
            return
        self._fired += 1
        if self._ready[i]:
            raise RuntimeError(f"DistributedDataParallel: parameter {self._param_names[i]!r} "
                               f"was marked ready twice in one iteration")
        self._mark_ready(i, used=True)

    def _mark_ready(self, i, used):
        from ember import distributed as dist
        from ember.autograd.grad_mode import no_grad
        self._ready[i] = True
        self._nready += 1
        if used:
            self._used[i] = 1
        b = self._buckets[self._bucket_of[i]]
        k = self._slot_of[i]
        off, sz = b.offsets[k], b.sizes[k]
        dst = b.data[off:off + sz]
        g = self._params[i].grad
        with no_grad():
            if g is None:
                dst[...] = 0
            else:
                dst[...] = g.reshape(-1)
        b.pending -= 1
        if b.pending == 0:
            bs = self._buckets
            while self._next_bucket < len(bs) and bs[self._next_bucket].pending == 0:
                nb = bs[self._next_bucket]
                if dtype_kind(nb.dtype) in "fc":
                    with no_grad():
                        nb.data *= 1.0 / self._world
                    nb.work = dist.all_reduce(nb.data, group=self.process_group, async_op=True)
                else:
                    nb.work = dist.all_reduce(nb.data, op=dist.ReduceOp.AVG,
                                              group=self.process_group, async_op=True)
                self._next_bucket += 1
        else:
            # drive MPI's progress on the buckets in flight (no progress thread)
            for j in range(self._next_bucket):
                w = self._buckets[j].work
                if w is not None and not getattr(w, "_done", True):
                    w.is_completed()
                    break
        if self._nready == len(self._params):
            self._finalize()

    def _finalize(self):
        from ember import distributed as dist
        from ember.autograd.grad_mode import no_grad
        used = None
        if self.find_unused_parameters:
            used = self._used.copy()
            dist.all_reduce(used, op=dist.ReduceOp.MAX, group=self.process_group)
        for b in self._buckets:
            b.work.wait()
        with no_grad():
            for i, p in enumerate(self._params):
                b = self._buckets[self._bucket_of[i]]
                k = self._slot_of[i]
                off, sz = b.offsets[k], b.sizes[k]
                src = b.data[off:off + sz].reshape(tuple(p.shape))
                g = p.grad
                if g is None:
                    if used is not None and not used[i]:
                        continue        # unused on every rank: stays None, as in PyTorch
                    p.grad = src.copy()
                elif not _writable(g):
                    p.grad = src.copy()
                else:
                    g[...] = src
        self._state = "done"

    # ------------------------------------------------------------ API
    @contextlib.contextmanager
    def no_sync(self):
        """Inside, backward accumulates gradients locally without communicating; the
        first synchronised backward after it averages the accumulated gradients.

        >>> import ember, ember.distributed as dist
        >>> from ember import nn
        >>> from ember.nn.parallel import DistributedDataParallel as DDP
        >>> dist.init_process_group()
        >>> ddp = DDP(nn.Linear(2, 1))
        >>> with ddp.no_sync():
        ...     ddp(ember.ones((1, 2))).sum().backward()
        >>> ddp(ember.ones((1, 2))).sum().backward()
        >>> ddp.module.bias.grad.tolist()
        [2.0]
        >>> dist.destroy_process_group()
        """
        old = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = old

    def extra_repr(self):
        return (f"world_size={self._world}, buckets={len(self._buckets)}, "
                f"find_unused_parameters={self.find_unused_parameters}")
