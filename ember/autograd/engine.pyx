# cython: wraparound=True, boundscheck=True
"""The backward engine: graph nodes, recording, and dependency-counted execution.

Recording (define-by-run): an op whose inputs require grad runs its forward
with grad mode off, then ``record`` adds one ``RuleNode`` holding the op's
gradient rule, its arguments and edges to the inputs' nodes; outputs point
back to the node through ``grad_fn``.  Leaves get one ``AccumulateGrad`` node
each (cached on the leaf, which it references weakly, so there is no cycle).

Execution (``run_backward``): one iterative pass counts, for every node that
leads to a wanted gradient, how many edges reach it; nodes then run once each
when all their gradients have arrived (no recursion, so chains of any length
work).  Gradient rules are written with ember ops, so with
``create_graph=True`` the backward pass is itself recorded.
"""
cimport cython
from cpython.ref cimport PyObject, _Py_REFCNT

from ember._core.array cimport (ndarray, grad_enabled, set_grad_mode, new_view, new_empty,
                                shape_tuple)
from ember._core.dtypes cimport KIND, DTYPE_OBJS
from ember._core.storage cimport Storage
from ember._core.elementwise cimport binary, unary, set_autograd_hooks, write_scalar

from ember._core.array import _swap_default_device
import weakref as _weakref
import traceback as _traceback
from ember._core.dtypes import dtype_kind

cdef object _ember = None           # the ember namespace (set by ember._wiring)
cdef list _EW_RULES = []            # elementwise op code -> Rule or None
cdef list _EW_NONDIFF = []          # elementwise op code -> True if its results are constants
cdef dict _EW_CODES = {}            # elementwise op name -> op code
cdef bint _anomaly = False          # ember.autograd.detect_anomaly()


def _set_namespace(ns, list op_names not None):
    global _ember, _EW_RULES, _EW_CODES
    _ember = ns
    _EW_RULES = [None] * len(op_names)
    _EW_NONDIFF[:] = [False] * len(op_names)
    _EW_CODES = {n: i for i, n in enumerate(op_names)}


def _set_anomaly(bint on):
    global _anomaly
    cdef bint prev = _anomaly
    _anomaly = on
    return prev


def _anomaly_enabled():
    return _anomaly


cdef inline object _dtype(ndarray x):
    """x.dtype without the attribute lookup (the property returns the same object)."""
    return DTYPE_OBJS[x.tcode]


cdef inline bint _is_float(ndarray x) noexcept:
    cdef char k = KIND[x.tcode]
    return k == b'f' or k == b'c'


# ---------------------------------------------------------------- nodes

cdef class Node:
    """A step of the recorded graph: turns gradients of its outputs into
    gradients of its inputs (``grad_fn`` of arrays that ops produced)."""

    cpdef list apply(self, list grads):
        raise NotImplementedError

    cdef void release(self):
        self.released = True

    @property
    def name(self):
        return type(self).__name__

    def __repr__(self):
        return f"<{self.name()}>" if callable(self.name) else f"<{self.name}>"

    @property
    def next_functions(self):
        """((node, output index), ...) for each input, as in PyTorch."""
        if self.next_nodes is None:
            return ()
        return tuple((n, self.next_nrs[i]) for i, n in enumerate(self.next_nodes))

    def register_prehook(self, fn):
        """fn(grad) runs on the gradient of this node's output before the node does."""
        if self.pre_hooks is None:
            self.pre_hooks = []
        entry = (0, fn)
        self.pre_hooks.append(entry)
        return _RemovableHandle(self.pre_hooks, entry)


@cython.final
cdef class AccumulateGrad(Node):
    """The node of a leaf: adds what reaches it into ``leaf.grad``."""

    cpdef list apply(self, list grads):
        return []

    @property
    def variable(self):
        return self.leaf_ref()

    @property
    def name(self):
        return "AccumulateGrad"


cdef class _RemovableHandle:
    cdef list container
    cdef object entry

    def __init__(self, container, entry):
        self.container = container
        self.entry = entry

    def remove(self):
        """Unregister the hook (a no-op the second time)."""
        if self.container is not None:
            try:
                self.container.remove(self.entry)
            except ValueError:
                pass
            self.container = None


@cython.final
cdef class Rule:
    """An op's gradient rule: ``fn(grad, result, *args, **kwargs)`` returns one
    gradient per positional argument (a list of them for a list argument, None
    where there is none).  ``grad`` and ``result`` are tuples for ops with
    several outputs."""

    def __init__(self, fn, name, save_args=True, save_result=False):
        self.fn = fn
        self.name = name
        self.save_args = save_args
        self.save_result = save_result


cdef str _shape_str(object shape):
    return str(tuple(shape)).replace(" ", "")


cdef inline bint _same_shape(ndarray x, tuple shape) noexcept:
    cdef Py_ssize_t i
    if x.ndim != len(shape):
        return False
    for i in range(x.ndim):
        if x.shape[i] != <Py_ssize_t>shape[i]:
            return False
    return True


cdef object _fit(object g, tuple meta, str opname, Py_ssize_t k):
    """g summed down to the input's shape (undoing broadcasting) and cast to its dtype."""
    cdef ndarray x
    shape, dtype = meta
    if not isinstance(g, ndarray):
        g = _ember.asarray(g, dtype=dtype)
    x = <ndarray>g
    if not _same_shape(x, <tuple>shape):
        g = _sum_to(g, shape_tuple(x), shape, opname, k)
    if _dtype(<ndarray>g) is not dtype and _dtype(<ndarray>g) != dtype:
        if KIND[(<ndarray>g).tcode] == b'c' and dtype_kind(dtype) != 'c':
            g = _ember.real(g)
        g = g.astype(dtype)
    return g


cdef object _sum_to(object g, tuple gshape, tuple shape, str opname, Py_ssize_t k):
    cdef Py_ssize_t lead = len(gshape) - len(shape), i
    if lead < 0:
        raise RuntimeError(f"{opname}: the gradient for input {k} has shape {_shape_str(gshape)}, "
                           f"which cannot be reduced to the input's shape {_shape_str(shape)}")
    axes = list(range(lead))
    for i in range(len(shape)):
        if shape[i] == 1 and gshape[lead + i] != 1:
            axes.append(lead + i)
        elif shape[i] != gshape[lead + i]:
            raise RuntimeError(f"{opname}: the gradient for input {k} has shape "
                               f"{_shape_str(gshape)}, which cannot be reduced to the input's "
                               f"shape {_shape_str(shape)}")
    if axes:
        g = _ember.sum(g, axis=tuple(axes), keepdims=True)
    if lead:
        g = _ember.reshape(g, shape)
    return g


cdef str _node_name(str opname):
    # "nn.functional.log_softmax" -> "LogSoftmaxBackward" (the module path is dropped)
    opname = opname.rpartition(".")[2]
    return "".join(p[:1].upper() + p[1:] for p in opname.split("_")) + "Backward"


@cython.final
@cython.freelist(256)
cdef class RuleNode(Node):
    """The node of an op with a gradient rule (most of ember's ops)."""

    @property
    def name(self):
        return _node_name(self.rule.name)

    cdef void release(self):
        self.released = True
        self.args = None
        self.kwargs = None
        self.saved = None
        self.result = None

    cdef object _unpack_result(self, bint connect):
        cdef ndarray r, v
        cdef Py_ssize_t i
        if self.result is None:
            return None
        if not connect:
            return self.result
        # create_graph: the output as part of the graph (this node is its grad_fn)
        if isinstance(self.result, ndarray):
            return _attached(<ndarray>self.result, self, 0)
        return tuple(_attached(<ndarray>r, self, i) if r is not None else None
                     for i, r in enumerate(self.result))

    cpdef list apply(self, list grads):
        cdef Py_ssize_t i, k, j, n
        cdef ndarray s
        if grads is None:
            raise TypeError(f"{self.name}.apply: grads must be a list of arrays, not None")
        name = self.rule.name
        if self.released:
            raise RuntimeError(
                f"{self.name}: trying to backward through the graph a second time (or to "
                f"use its saved arrays after they were freed); pass retain_graph=True to "
                f"the first backward() or autograd.grad() call to keep them")
        if self.saved is not None:
            for i in range(len(self.saved)):
                s = <ndarray>self.saved[i]
                if s.storage.version != <Py_ssize_t>self.versions[i]:
                    raise RuntimeError(
                        f"one of the arrays needed for gradient computation has been modified "
                        f"by an in-place operation: an input of ember.{name} ({self.name}) of "
                        f"shape {_shape_str(shape_tuple(s))} and dtype {s.dtype} is at version "
                        f"{s.storage.version}; expected version {self.versions[i]}")
        if self.result is not None:
            r0 = self.result
            if not isinstance(r0, ndarray):
                r0 = None
                for r in self.result:
                    if r is not None:
                        r0 = r
                        break
            if r0 is not None and (<ndarray>r0).storage.version != self.result_version:
                raise RuntimeError(
                    f"one of the arrays needed for gradient computation has been modified by "
                    f"an in-place operation: the output of ember.{name} ({self.name}) of shape "
                    f"{_shape_str(shape_tuple(<ndarray>r0))} is at version "
                    f"{(<ndarray>r0).storage.version}; expected version {self.result_version}")
        if self.num_outputs == 1:
            g = grads[0]
        else:
            g = tuple(_materialize(grads, self.out_meta))
        ret = NotImplemented
        if self.rule.cfn != NULL:
            ret = self.rule.cfn(self, g)
        if ret is NotImplemented:
            result = self._unpack_result(grad_enabled())
            if self.kwargs:
                ret = self.rule.fn(g, result, *self.args, **self.kwargs)
            else:
                ret = self.rule.fn(g, result, *self.args)
        if isinstance(ret, ndarray) and self.slots is _SLOT_A:
            # the common case (one array for the first input): no tuple around it
            return [_fit(ret, <tuple>self.slot_meta[0], name, 0)]
        if isinstance(ret, ndarray) or not isinstance(ret, (tuple, list)):
            ret = (ret,)
        n = len(self.slots)
        out = [None] * n
        for k in range(n):
            i, j = self.slots[k]
            gi = ret[i] if i < len(ret) else None
            if gi is not None and j >= 0:
                gi = gi[j]
            if gi is not None:
                out[k] = _fit(gi, self.slot_meta[k], name, k)
        return out


cdef list _materialize(list grads, object out_meta):
    cdef list res = []
    cdef Py_ssize_t i
    for i in range(len(grads)):
        g = grads[i]
        if g is None and out_meta is not None and out_meta[i] is not None:
            g = _ember.zeros(out_meta[i][0], dtype=out_meta[i][1])
        res.append(g)
    return res


cdef inline void _set_history(ndarray x, Node node, int nr) noexcept:
    """x is output `nr` of `node` (and so requires grad)."""
    x._requires_grad = True
    x.grad_fn = node
    x._output_nr = nr


cdef inline void _add_edge(list nodes, list nrs, list meta, ndarray x):
    """Append the edge that x's gradient takes, and x's (shape, dtype) to fit it to."""
    nodes.append(edge_node(x))
    nrs.append(x._output_nr if x.grad_fn is not None else 0)
    meta.append((shape_tuple(x), _dtype(x)))


cdef ndarray _detached(ndarray x):
    """A new array object on x's memory with no autograd history."""
    return new_view(x, x.ndim, x.shape, x.strides, x.offset, x.tcode)


cdef ndarray _attached(ndarray x, Node node, int nr):
    cdef ndarray v = _detached(x)
    _set_history(v, node, nr)
    return v


@cython.final
cdef class CallableNode(Node):
    """A node whose backward is a Python callable (custom Functions, in-place on views)."""

    @property
    def name(self):
        return self._name

    cdef void release(self):
        self.released = True
        if self.on_release is not None:
            self.on_release()

    cpdef list apply(self, list grads):
        cdef Py_ssize_t k
        if grads is None:
            raise TypeError(f"{self._name}.apply: grads must be a list of arrays, not None")
        if self.released:
            raise RuntimeError(
                f"{self._name}: trying to backward through the graph a second time (or to "
                f"use its saved arrays after they were freed); pass retain_graph=True to "
                f"the first backward() or autograd.grad() call to keep them")
        ret = self.fn(_materialize(grads, self.out_meta) if self.out_meta is not None else grads)
        if isinstance(ret, ndarray) or not isinstance(ret, (tuple, list)):
            ret = (ret,)
        out = []
        for k in range(len(self.slot_meta)):
            gi = ret[k] if k < len(ret) else None
            if gi is not None and self.slot_meta[k] is not None:
                gi = _fit(gi, self.slot_meta[k], self._name, k)
            out.append(gi)
        return out


# ---------------------------------------------------------------- edges of leaves

cdef class GradMeta:
    """Per-array autograd extras: the leaf's AccumulateGrad, retain_grad, hooks."""
    cdef public AccumulateGrad accumulator
    cdef public bint retains_grad
    cdef public list post_accumulate_hooks


cdef GradMeta _meta(ndarray x):
    cdef GradMeta m = x._grad_meta
    if m is None:
        m = GradMeta.__new__(GradMeta)
        x._grad_meta = m
    return m


cdef AccumulateGrad accumulator_of(ndarray leaf):
    cdef GradMeta m = _meta(leaf)
    cdef AccumulateGrad acc = m.accumulator
    if acc is None:
        acc = AccumulateGrad.__new__(AccumulateGrad)
        acc.leaf_ref = _weakref.ref(leaf)
        acc.next_nodes = ()
        acc.next_nrs = ()
        acc.num_outputs = 1
        m.accumulator = acc
    return acc


def _accumulator(ndarray leaf not None):
    return accumulator_of(leaf)


cdef inline Node edge_node(ndarray x):
    if x._view_of is not None and (<tuple>x._view_of)[2] != x.storage.version:
        _ember._ag_refresh_view(x)      # its base was written in place since: re-derive its history
    if x.grad_fn is not None:
        return <Node>x.grad_fn
    return accumulator_of(x)


def _edge(ndarray x not None):
    """(node, output index) that the gradient of x flows to."""
    return (edge_node(x), x._output_nr if x.grad_fn is not None else 0)


# ---------------------------------------------------------------- recording

cdef inline bint _tracked(object a) noexcept:
    return isinstance(a, ndarray) and (<ndarray>a)._requires_grad


@cython.final
@cython.freelist(256)
cdef class ArrayMeta:
    """What a rule that does not keep an input sees of it: shape and dtype."""
    cdef readonly tuple shape
    cdef readonly object dtype
    cdef readonly bint requires_grad

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        cdef Py_ssize_t n = 1
        for d in self.shape:
            n *= d
        return n


cdef ArrayMeta _array_meta(ndarray x):
    cdef ArrayMeta m = ArrayMeta.__new__(ArrayMeta)
    m.shape = shape_tuple(x)
    m.dtype = _dtype(x)
    m.requires_grad = x._requires_grad
    return m


cdef object _strip(object a):
    """An argument as a rule that does not keep array values sees it."""
    if isinstance(a, ndarray):
        return _array_meta(<ndarray>a)
    if isinstance(a, (list, tuple)) and a and isinstance(a[0], ndarray):
        return [_array_meta(<ndarray>e) if isinstance(e, ndarray) else e for e in a]
    return a


cdef object record(Rule rule, tuple args, dict kwargs, object result):
    """Attach a RuleNode for `rule` to `result` (computed with grad mode off)."""
    cdef list slots = [], nodes = [], nrs = [], meta = [], saved = None, versions = None
    cdef Py_ssize_t i, j
    cdef ndarray x
    cdef RuleNode node
    cdef list outs
    cdef bint single = isinstance(result, ndarray)
    for i in range(len(args)):
        a = args[i]
        if isinstance(a, ndarray):
            if (<ndarray>a)._requires_grad:
                x = <ndarray>a
                slots.append((i, -1))
                _add_edge(nodes, nrs, meta, x)
        elif isinstance(a, (list, tuple)):
            for j in range(len(a)):
                if _tracked(a[j]):
                    x = <ndarray>a[j]
                    slots.append((i, j))
                    _add_edge(nodes, nrs, meta, x)
    if not slots:
        return result
    result = _fresh_outputs(args, result, single)
    if single:
        if not _is_float(<ndarray>result):
            return result
        outs = [result]
    elif isinstance(result, (tuple, list)):
        outs = list(result)
        if not any(isinstance(o, ndarray) and _is_float(<ndarray>o) for o in outs):
            return result
    else:
        return result
    node = RuleNode.__new__(RuleNode)
    node.rule = rule
    node.next_nodes = tuple(nodes)
    node.next_nrs = tuple(nrs)
    node.slots = tuple(slots)
    node.slot_meta = tuple(meta)
    node.num_outputs = len(outs)
    if rule.save_args:
        node.args = args
        node.kwargs = kwargs
        saved = []
        versions = []
        for a in args:
            if isinstance(a, ndarray):
                saved.append(a)
                versions.append((<ndarray>a).storage.version)
            elif isinstance(a, (list, tuple)):
                for e in a:
                    if isinstance(e, ndarray):
                        saved.append(e)
                        versions.append((<ndarray>e).storage.version)
        node.saved = saved
        node.versions = versions
    else:
        stripped = []
        for a in args:
            stripped.append(_strip(a))
        node.args = tuple(stripped)
        node.kwargs = kwargs
    if not single:
        node.out_meta = tuple((shape_tuple(<ndarray>o), (<ndarray>o).dtype)
                              if isinstance(o, ndarray) and _is_float(<ndarray>o) else None
                              for o in outs)
    if rule.save_result:
        if single:
            node.result = _detached(<ndarray>result)
            node.result_version = (<ndarray>result).storage.version
        else:
            node.result = tuple(_detached(<ndarray>o) if isinstance(o, ndarray) else None
                                for o in outs)
            node.result_version = next((<ndarray>o).storage.version for o in outs
                                       if isinstance(o, ndarray))
    if _anomaly:
        node.creation_trace = "".join(_traceback.format_stack(limit=12))
    for i in range(len(outs)):
        o = outs[i]
        if isinstance(o, ndarray) and _is_float(<ndarray>o):
            x = <ndarray>o
            _set_history(x, node, i)
            if args and isinstance(args[0], ndarray) and x.storage is (<ndarray>args[0]).storage \
                    and (<ndarray>args[0])._requires_grad and rule.forward is not None:
                _ember._ag_mark_view(args[0], x, rule, args, kwargs, i, single)
    return result


cdef bint _is_an_input(tuple args, object o):
    for a in args:
        if a is o:
            return True
        if isinstance(a, (list, tuple)):
            for e in a:
                if e is o:
                    return True
    return False


cdef object _fresh_outputs(tuple args, object result, bint single):
    """An op that hands back an input object (astype(copy=False), atleast_1d...) must
    not rewrite that input's history: its output becomes a new array on the same memory."""
    cdef list outs
    if single:
        if _is_an_input(args, result):
            return _detached(<ndarray>result)
        return result
    if not isinstance(result, (tuple, list)):
        return result
    changed = False
    outs = []
    for o in result:
        if isinstance(o, ndarray) and _is_an_input(args, o):
            o = _detached(<ndarray>o)
            changed = True
        outs.append(o)
    if not changed:
        return result
    if isinstance(result, list):
        return outs
    if type(result) is tuple:
        return tuple(outs)
    return type(result)(*outs)          # a namedtuple


def _record(Rule rule not None, tuple args not None, kwargs, result):
    return record(rule, args, kwargs if kwargs else None, result)


def attach(str name not None, fn, inputs, outputs, out_meta=None, on_release=None):
    """Attach a CallableNode ``fn(grads) -> grads per input`` to `outputs`.

    `inputs` lists arrays (or None); those that require grad become edges.
    Returns the node, or None when no input requires grad."""
    cdef list nodes = [], nrs = [], meta = []
    cdef ndarray x
    cdef CallableNode node
    cdef Py_ssize_t i
    any_tracked = False
    for a in inputs:
        if _tracked(a):
            x = <ndarray>a
            _add_edge(nodes, nrs, meta, x)
            any_tracked = True
        else:
            nodes.append(None)
            nrs.append(0)
            meta.append(None)
    if not any_tracked:
        return None
    node = CallableNode.__new__(CallableNode)
    node._name = name
    node.fn = fn
    node.next_nodes = tuple(nodes)
    node.next_nrs = tuple(nrs)
    node.slot_meta = tuple(meta)
    node.num_outputs = len(outputs)
    node.out_meta = out_meta
    node.on_release = on_release
    if _anomaly:
        node.creation_trace = "".join(_traceback.format_stack(limit=12))
    for i in range(len(outputs)):
        o = outputs[i]
        if isinstance(o, ndarray) and _is_float(<ndarray>o):
            x = <ndarray>o
            _set_history(x, node, i)
    return node


# ---------------------------------------------------------------- elementwise hooks

cdef tuple _SLOT_A = ((0, -1),)
cdef tuple _SLOT_B = ((1, -1),)
cdef tuple _SLOT_AB = ((0, -1), (1, -1))
cdef tuple _NRS_0 = (0,)
cdef tuple _NRS_00 = (0, 0)


cdef inline int _nr(ndarray x) noexcept:
    return x._output_nr if x.grad_fn is not None else 0


cdef inline void _save_two(RuleNode node, object a, object b):
    """node.saved / node.versions: those of a and b that are arrays, in that order
    (list displays: one allocation each)."""
    cdef bint ka = isinstance(a, ndarray), kb = isinstance(b, ndarray)
    if ka and kb:
        node.saved = [a, b]
        node.versions = [(<ndarray>a).storage.version, (<ndarray>b).storage.version]
    elif ka:
        node.saved = [a]
        node.versions = [(<ndarray>a).storage.version]
    elif kb:
        node.saved = [b]
        node.versions = [(<ndarray>b).storage.version]
    else:
        node.saved = []
        node.versions = []


# The last (shape, dtype) pair and one-operand slot_meta built by record_ew: a chain of
# ops on one shape reuses them (equal immutable tuples, so sharing is invisible) instead
# of building two tuples per recorded op.
cdef tuple _last_meta_pair = ((), None)
cdef tuple _last_meta1 = (((), None),)


cdef inline tuple _meta_pair(ndarray x):
    global _last_meta_pair
    cdef object sh = shape_tuple(x)
    cdef object dt = _dtype(x)
    cdef tuple last = _last_meta_pair
    if last[0] is sh and last[1] is dt:
        return last
    last = (sh, dt)
    _last_meta_pair = last
    return last


cdef inline tuple _meta1(ndarray x):
    global _last_meta1
    cdef tuple pair = _meta_pair(x)
    cdef tuple last = _last_meta1
    if last[0] is pair:
        return last
    last = (pair,)
    _last_meta1 = last
    return last


cdef object record_ew(Rule rule, object a, object b, bint is_unary, ndarray res):
    """record() for an elementwise op (one or two operands, one fresh output): the
    hot path of recording, with the node's tuples built directly."""
    cdef RuleNode node
    cdef ndarray x, y
    cdef bint ta = _tracked(a)
    cdef bint tb = not is_unary and _tracked(b)
    if not _is_float(res) or not (ta or tb):
        return res
    node = RuleNode.__new__(RuleNode)
    node.rule = rule
    node.num_outputs = 1
    if ta and tb:
        x = <ndarray>a
        y = <ndarray>b
        node.next_nodes = (edge_node(x), edge_node(y))
        node.next_nrs = _NRS_00 if _nr(x) == 0 and _nr(y) == 0 else (_nr(x), _nr(y))
        node.slots = _SLOT_AB
        node.slot_meta = (_meta_pair(x), _meta_pair(y))
    else:
        x = <ndarray>(a if ta else b)
        node.next_nodes = (edge_node(x),)
        node.next_nrs = _NRS_0 if _nr(x) == 0 else (_nr(x),)
        node.slots = _SLOT_A if ta else _SLOT_B
        node.slot_meta = _meta1(x)
    if rule.save_cross and not is_unary:
        node.args = (a if tb else _strip(a), b if ta else _strip(b))
        _save_two(node, a if tb else None, b if ta else None)
    elif rule.save_args:
        node.args = (a,) if is_unary else (a, b)
        _save_two(node, a, None if is_unary else b)
    else:
        node.args = (_strip(a),) if is_unary else (_strip(a), _strip(b))
    if rule.save_result:
        node.result = _detached(res)
        node.result_version = res.storage.version
    if _anomaly:
        node.creation_trace = "".join(_traceback.format_stack(limit=12))
    _set_history(res, node, 0)
    return res


cdef object _record_binary(int op, object a, object b, object out):
    """The elementwise dispatcher calls this when an operand requires grad."""
    cdef object rule = _EW_RULES[op]
    if out is not None:
        return _inplace_elementwise(op, a, b, out)
    set_grad_mode(False)
    try:
        res = binary(op, a, b, None)
    finally:
        set_grad_mode(True)
    if rule is None:
        return _no_rule(op, res)
    if isinstance(res, ndarray):
        return record_ew(<Rule>rule, a, b, False, <ndarray>res)
    return record(<Rule>rule, (a, b), None, res)


cdef object _record_unary(int op, object a, object out):
    cdef object rule = _EW_RULES[op]
    if out is not None:
        return _inplace_elementwise(op, a, None, out)
    set_grad_mode(False)
    try:
        res = unary(op, a, None)
    finally:
        set_grad_mode(True)
    if rule is None:
        return _no_rule(op, res)
    if isinstance(res, ndarray):
        return record_ew(<Rule>rule, a, None, True, <ndarray>res)
    return record(<Rule>rule, (a,), None, res)


cdef object _inplace_elementwise(int op, object a, object b, object out):
    """``out = op(a, b)`` written into out's memory, recorded as out's new history."""
    rule = _EW_RULES[op]
    args = (a,) if b is None else (a, b)

    def compute(*args):
        set_grad_mode(False)
        try:
            if len(args) == 1:
                return unary(op, args[0], None)
            return binary(op, args[0], args[1], None)
        finally:
            set_grad_mode(True)
    return _ember._ag_inplace(rule, compute, args, out)


set_autograd_hooks(_record_binary, _record_unary)


def _register_elementwise(str name not None, Rule rule not None):
    _EW_RULES[_EW_CODES[name]] = rule


def _register_elementwise_nondiff(str name not None):
    _EW_NONDIFF[_EW_CODES[name]] = True


cdef object _no_rule(int op, object res):
    if isinstance(res, ndarray) and _is_float(<ndarray>res) and not _EW_NONDIFF[op]:
        raise RuntimeError(f"ember.{list(_EW_CODES)[op]} does not support autograd: an input "
                           f"requires grad but this op has no gradient rule; call it on "
                           f"x.detach() or under ember.no_grad()")
    return res


def _elementwise_rule(str name not None):
    return _EW_RULES[_EW_CODES[name]]


# ---------------------------------------------------------------- execution

cdef _check_anomaly(Node node, list grads):
    for g in grads:
        if isinstance(g, ndarray) and _is_float(<ndarray>g) and (<ndarray>g).size:
            if bool(_ember.any(_ember.isnan(g))):
                where = node.creation_trace or "(the forward ran before detect_anomaly was on)\n"
                raise RuntimeError(
                    f"Function '{node.name}' returned nan values in its output; the forward "
                    f"op was created here:\n{where}")


cdef _check_grad_slot(ndarray leaf):
    """A .grad the user assigned must be an array of the leaf's shape (else += broadcasts)."""
    gr = leaf.grad
    if gr is None:
        return
    if not isinstance(gr, ndarray):
        raise TypeError(f"backward: .grad of an array of shape {_shape_str(shape_tuple(leaf))} "
                        f"is a {type(gr).__name__}; it must be an ember array or None")
    if shape_tuple(<ndarray>gr) != shape_tuple(leaf):
        raise RuntimeError(f"backward: .grad has shape {_shape_str(shape_tuple(<ndarray>gr))} but "
                           f"the array has shape {_shape_str(shape_tuple(leaf))}; set .grad = None "
                           f"or assign a gradient of the array's shape")


cdef bint _sole_owner(object g, Py_ssize_t refs) noexcept:
    """Whether g (referenced `refs` times by the engine) is a fresh host array that
    nothing else can reach: no other reference to the array object, no other array on
    its memory, memory that ember allocated for it, C-contiguous, writeable, with no
    autograd state of its own.  Such a gradient becomes ``leaf.grad`` as it is, where
    a copy would give the same values in the same layout (PyTorch steals it too)."""
    cdef ndarray x
    cdef Storage s
    # (counted through borrowed pointers: a typed local would hold a reference too)
    if not isinstance(g, ndarray) or _Py_REFCNT(<PyObject*>g) != refs:
        return False
    x = <ndarray>g
    if _Py_REFCNT(<PyObject*>x.storage) != 1:
        return False
    s = x.storage
    return (s.owner is None and not s.has_buffer
            and s.device_index < 0 and not s.readonly and not s.owner_readonly
            and x.owns_storage and x.offset == 0 and x.c_contig and not x.readonly
            and not x._requires_grad and x.grad_fn is None and x.grad is None
            and x._grad_meta is None and x._view_of is None)


cdef _accumulate(ndarray leaf, object g, bint create_graph, bint steal=False):
    """leaf.grad += g (or = a copy of g), then the post-accumulate hooks.  With
    `steal` (g is an array only the engine holds: ``_sole_owner``) a first gradient
    is stored without a copy."""
    cdef GradMeta m
    _check_grad_slot(leaf)
    if create_graph:
        leaf.grad = g if leaf.grad is None else leaf.grad + g
    else:
        prev = grad_enabled()
        set_grad_mode(False)
        try:
            if isinstance(g, ndarray) and (<ndarray>g)._requires_grad:
                g = _detached(<ndarray>g)
            if leaf.grad is None:
                leaf.grad = g if steal else g.copy()
            elif isinstance(leaf.grad, ndarray) and (<ndarray>leaf.grad).grad_fn is None and \
                    shape_tuple(<ndarray>leaf.grad) == shape_tuple(<ndarray>g) and \
                    not (<ndarray>leaf.grad).readonly:
                leaf.grad += g
            else:
                leaf.grad = leaf.grad + g
        finally:
            set_grad_mode(prev)
    m = leaf._grad_meta
    if m is not None and m.post_accumulate_hooks:
        for h in list(m.post_accumulate_hooks):
            h(leaf)


cdef object _run_hooks(Node node, list buf):
    cdef Py_ssize_t nr
    for entry in list(node.pre_hooks):
        nr, fn = entry
        if buf[nr] is not None:
            r = fn(buf[nr])
            if r is not None:
                buf[nr] = r


cdef bint _all_none(list buf):
    for g in buf:
        if g is not None:
            return False
    return True


cdef bint _leads_anywhere(Node node, _Pass ps):
    for n in node.next_nodes:
        if n is not None and ps.at(<Node>n).needed:
            return True
    return False


def run_backward(tuple outputs not None, tuple grads not None, bint keep_graph, bint create_graph,
                 tuple inputs=None, bint accumulate=True, bint allow_unused=True):
    """run_backward on the device of the gradients: for a GPU graph, the constants
    that rules create (zeros, ones, index arrays) default to that GPU."""
    dev = None
    for i in range(len(grads)):
        g = grads[i]
        o = outputs[i]
        if isinstance(g, ndarray) and isinstance(o, ndarray) and \
                (<ndarray>g).storage.device_index != (<ndarray>o).storage.device_index:
            raise RuntimeError(f"backward: the gradient for output {i} is on {g.device} but "
                               f"the output is on {o.device}; move it with .to('{o.device}')")
        if isinstance(g, ndarray) and (<ndarray>g).storage.device_index >= 0:
            dev = g.device
    if dev is None:
        return _run_backward(outputs, grads, keep_graph, create_graph, inputs, accumulate,
                             allow_unused)
    prev = _swap_default_device(dev)
    try:
        return _run_backward(outputs, grads, keep_graph, create_graph, inputs, accumulate,
                             allow_unused)
    finally:
        _swap_default_device(prev)


@cython.final
@cython.freelist(256)
cdef class _Slot:
    """A node's state during one backward pass: whether it leads to a wanted gradient,
    how many edges from needed nodes still have to deliver, and its gradient buffer
    (one entry per output)."""
    cdef Node node
    cdef Py_ssize_t deps
    cdef list buf
    cdef bint needed


cdef int _in_flight = 0             # backward passes running now (all threads)


@cython.final
cdef class _Pass:
    """The state of one backward pass: a _Slot per node it visits, and the stack of
    nodes ready to run.  The pass that starts while no other runs (the common case)
    keeps each slot on its node (``Node._slot``: no dict lookups) and clears them all
    when it ends; a pass that starts while another runs (a backward inside a hook, or
    in another thread: both may reach the same nodes) keeps its slots in a dict."""
    cdef dict slots                 # node -> _Slot, or None: slots on the nodes
    cdef list touched               # nodes whose _slot this pass set
    cdef list ready                 # a stack of _Slot (never shrunk: see push/pop)
    cdef Py_ssize_t nready

    cdef inline _Slot get(self, Node node):
        """node's slot in this pass, or None before the pass visits it."""
        if self.slots is None:
            return <_Slot>node._slot
        return <_Slot>self.slots.get(node)

    cdef inline _Slot at(self, Node node):
        """node's slot, which the pass must have made (the edges were counted)."""
        cdef _Slot st = self.get(node)
        if st is None:
            raise RuntimeError(f"backward: the graph changed during the backward pass "
                               f"({node.name} was not reached when its edges were counted)")
        return st

    cdef inline _Slot add(self, Node node, bint needed):
        cdef _Slot st = _Slot.__new__(_Slot)
        st.node = node
        st.needed = needed
        if self.slots is None:
            node._slot = st
            self.touched.append(node)
        else:
            self.slots[node] = st
        return st

    @cython.boundscheck(False)
    @cython.wraparound(False)
    cdef inline void push(self, _Slot st):
        if self.nready < len(self.ready):
            self.ready[self.nready] = st
        else:
            self.ready.append(st)
        self.nready += 1

    @cython.boundscheck(False)
    @cython.wraparound(False)
    cdef inline _Slot pop(self):
        # (only called while nready > 0: indices stay inside the list)
        self.nready -= 1
        st = <_Slot>self.ready[self.nready]
        self.ready[self.nready] = None
        return st

    cdef void close(self):
        cdef Node node
        if self.touched is not None:
            for node in self.touched:
                node._slot = None
            self.touched = None


cdef _Pass _new_pass():
    cdef _Pass ps = _Pass.__new__(_Pass)
    if _in_flight == 0:
        ps.touched = []
    else:
        ps.slots = {}
    ps.ready = []
    return ps


cdef int _count_edges(list roots, _Pass ps) except -1:
    """Pass 1, every gradient wanted: count the edges that reach each node (deps)."""
    cdef Node node
    cdef _Slot st
    cdef list stack = []
    cdef Py_ssize_t top = 0
    for root in roots:
        node = root[0]
        if ps.get(node) is None:
            ps.add(node, True)
            stack.append(node)
            top += 1
    while top:
        top -= 1
        node = <Node>stack[top]
        nn = node.next_nodes
        if nn is None:
            continue
        for nxt_o in nn:
            if nxt_o is None:
                continue
            st = ps.get(<Node>nxt_o)
            if st is None:
                st = ps.add(<Node>nxt_o, True)
                if top < len(stack):
                    stack[top] = nxt_o
                else:
                    stack.append(nxt_o)
                top += 1
            st.deps += 1
    return 0


cdef int _count_edges_to(list roots, _Pass ps, set capture_nodes) except -1:
    """Pass 1 with inputs (iterative post-order): which nodes lead to a wanted gradient
    (needed), and how many edges from such nodes reach each of them (deps)."""
    cdef Node node
    cdef _Slot st
    cdef Py_ssize_t i
    cdef list stack
    cdef bint want
    for root in roots:
        node = root[0]
        if ps.get(node) is not None:
            continue
        stack = [(node, 0)]
        ps.add(node, False)             # visiting
        while stack:
            node, i = stack[-1]
            nn = node.next_nodes
            if nn is not None and i < len(nn):
                stack[-1] = (node, i + 1)
                nxt_o = nn[i]
                if nxt_o is not None and ps.get(<Node>nxt_o) is None:
                    ps.add(<Node>nxt_o, False)
                    stack.append((nxt_o, 0))
                continue
            stack.pop()
            want = node in capture_nodes
            if nn is not None:
                for nxt_o in nn:
                    if nxt_o is not None and ps.at(<Node>nxt_o).needed:
                        want = True
            ps.at(node).needed = want
            if want and nn is not None:
                for nxt_o in nn:
                    if nxt_o is not None:
                        st = ps.at(<Node>nxt_o)
                        if st.needed:
                            st.deps += 1
    return 0


cdef int _seed_roots(list roots, _Pass ps) except -1:
    """Put the roots' gradients in their nodes' buffers; the nodes with no edge left to
    wait for become ready."""
    cdef Node node
    cdef _Slot st
    cdef Py_ssize_t nr
    cdef list buf, seeded = []
    for node, nr, g in roots:
        st = ps.at(node)
        if not st.needed:
            continue
        buf = st.buf
        if buf is None:
            buf = [None] * node.num_outputs
            st.buf = buf
            seeded.append(st)
        buf[nr] = g if buf[nr] is None else buf[nr] + g
    for st in seeded:
        if st.deps == 0:
            ps.push(st)
    return 0


cdef int _pass_on(Node node, object grads_in, _Pass ps, bint prune) except -1:
    """Add node's input gradients `grads_in` into the buffers of the nodes it leads to;
    a node whose last edge arrived becomes ready."""
    cdef Node nxt
    cdef _Slot st
    cdef Py_ssize_t k, nr
    cdef list b
    cdef tuple next_nodes = node.next_nodes
    for k in range(len(next_nodes)):
        nxt_o = next_nodes[k]
        if nxt_o is None:
            continue
        nxt = <Node>nxt_o
        st = ps.at(nxt)
        if prune and not st.needed:
            continue
        g = grads_in[k] if k < len(grads_in) else None
        b = st.buf
        if b is None:
            b = [None] * nxt.num_outputs
            st.buf = b
        if g is not None:
            nr = node.next_nrs[k]
            b[nr] = g if b[nr] is None else b[nr] + g
        st.deps -= 1
        if st.deps == 0:
            ps.push(st)
    return 0


def _run_backward(tuple outputs not None, tuple grads not None, bint keep_graph, bint create_graph,
                  tuple inputs=None, bint accumulate=True, bint allow_unused=True):
    """Propagate `grads` of `outputs` back through the graph.

    Without `inputs`: accumulate into every leaf's ``.grad``.  With `inputs`:
    only the parts of the graph that lead to them run; their gradients are
    returned (and accumulated into their ``.grad`` when `accumulate`)."""
    global _in_flight
    cdef dict captures = {}
    cdef list roots = [], buf, result = None
    cdef Node node
    cdef _Slot st
    cdef _Pass ps
    cdef ndarray x
    cdef Py_ssize_t i, nr
    cdef bint prune = inputs is not None
    cdef set capture_nodes = set()

    for i in range(len(outputs)):
        x = <ndarray>outputs[i]
        node = edge_node(x)
        nr = x._output_nr if x.grad_fn is not None else 0
        roots.append((node, nr, grads[i]))
    if prune:
        result = [None] * len(inputs)
        for i in range(len(inputs)):
            x = <ndarray>inputs[i]
            node = edge_node(x)
            nr = x._output_nr if x.grad_fn is not None else 0
            captures.setdefault(node, []).append((nr, i))
            capture_nodes.add(node)

    ps = _new_pass()
    _in_flight += 1
    prev_mode = grad_enabled()
    try:
        if prune:
            _count_edges_to(roots, ps, capture_nodes)
        else:
            _count_edges(roots, ps)
        _seed_roots(roots, ps)
        set_grad_mode(create_graph)
        while ps.nready:
            st = ps.pop()
            node = st.node
            buf = st.buf
            st.buf = None
            if node.pre_hooks:
                _run_hooks(node, buf)
            if prune and node in captures:
                for nr, i in captures[node]:
                    result[i] = buf[nr]
            if isinstance(node, AccumulateGrad):
                if accumulate and (not prune or node in captures):
                    leaf = (<AccumulateGrad>node).leaf_ref()
                    g0 = buf[0]
                    buf[0] = None
                    buf = None
                    if leaf is not None and g0 is not None:
                        # g0 is referenced here only (1) unless a hook, the caller
                        # (a root gradient) or another edge still holds it
                        _accumulate(<ndarray>leaf, g0, create_graph,
                                    not create_graph and _sole_owner(g0, 1))
                    g0 = None
                continue
            if prune and node in captures and not _leads_anywhere(node, ps):
                continue
            if _all_none(buf):
                grads_in = [None] * len(node.next_nodes)
            else:
                grads_in = node.apply(buf)
                if _anomaly:
                    _check_anomaly(node, grads_in)
            if not keep_graph:
                node.release()
            _pass_on(node, grads_in, ps, prune)
            grads_in = None             # the buffers hold the gradients now (see _sole_owner)
    finally:
        set_grad_mode(prev_mode)
        _in_flight -= 1
        ps.close()

    if prune and accumulate:
        # non-leaf inputs of backward(inputs=...) get .grad too
        for i in range(len(inputs)):
            x = <ndarray>inputs[i]
            if x.grad_fn is not None and result[i] is not None:
                _accumulate(x, result[i], create_graph)
    return result


def _meta_of(ndarray x not None):
    return _meta(x)


def _backward_scalar(ndarray y not None, bint retain_graph, bint create_graph):
    """y.backward() for a one-element y: the common case, without Python-level checks."""
    cdef ndarray g
    if y.size != 1 or not y._requires_grad:
        return False
    if y.storage.device_index >= 0:
        run_backward((y,), (_ember.ones_like(y),), retain_graph, create_graph, None, True)
        return True
    g = new_empty(y.tcode, y.ndim, y.shape)
    write_scalar(g.data, y.tcode, 1)
    run_backward((y,), (g,), retain_graph, create_graph, None, True)
    return True


cdef object _host_sum = None
cdef Rule _sum_rule = None


def _set_sum(fn, Rule rule not None):
    global _host_sum, _sum_rule
    _host_sum = fn
    _sum_rule = rule


def _sum_all(ndarray x not None):
    """x.sum() of an array that requires grad (the method's common case, recorded
    without keyword-argument handling)."""
    set_grad_mode(False)
    try:
        res = _ember.sum(x) if x.storage.device_index >= 0 else _host_sum(x)
    finally:
        set_grad_mode(True)
    if not isinstance(res, ndarray):
        return record(_sum_rule, (x,), None, res)
    return record_ew(_sum_rule, x, None, True, <ndarray>res)

