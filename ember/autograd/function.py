"""Custom differentiable functions: ``ember.autograd.Function``.

A subclass defines ``forward(ctx, *args)`` (run with grad mode off) and
``backward(ctx, *grad_outputs)`` (one gradient per forward argument);
``MyFn.apply(*args)`` runs forward and, when grad mode is on and an input
requires grad, attaches one graph node (``MyFnBackward``) to the outputs.
The API is PyTorch's: ``ctx.save_for_backward`` / ``ctx.saved_tensors``
(checked against in-place changes by storage version), ``needs_input_grad``,
``mark_non_differentiable``, ``mark_dirty`` (in-place forwards),
``set_materialize_grads`` and the ``once_differentiable`` decorator.

backward runs with grad mode as the engine sets it (on under
``create_graph=True``), so a backward written with ember ops is itself
differentiable.

>>> import ember
>>> class Cube(ember.autograd.Function):
...     @staticmethod
...     def forward(ctx, x):
...         ctx.save_for_backward(x)
...         return x ** 3
...     @staticmethod
...     def backward(ctx, g):
...         (x,) = ctx.saved_tensors
...         return g * 3 * x ** 2
>>> x = ember.asarray([1.0, 2.0], requires_grad=True)
>>> y = Cube.apply(x)
>>> y.grad_fn.name
'CubeBackward'
>>> y.sum().backward()
>>> x.grad.tolist()
[3.0, 12.0]
"""
import functools
import inspect
import weakref

from ember._core import array as _array
from ember._core.array import ndarray
from ember.autograd import engine as _engine
from ember._core.dtypes import dtype_kind

__all__ = ["Function", "FunctionCtx", "once_differentiable"]


def _E():
    import ember
    return ember


def _is_float(x):
    return dtype_kind(x.dtype) in "fc"


def _shape(x):
    return str(tuple(x.shape)).replace(" ", "")


def _freed_error(name):
    return RuntimeError(
        f"{name}: trying to backward through the graph a second time (or to access saved "
        f"arrays after they were freed): the arrays saved with ctx.save_for_backward are freed "
        f"by backward() / autograd.grad(); pass retain_graph=True to the first call to keep them")


class FunctionCtx:
    """The ``ctx`` object that a Function's forward and backward share.

    Besides the methods below it holds any attribute forward sets on it
    (``ctx.k = 3``).

    >>> import ember
    >>> class Scale(ember.autograd.Function):
    ...     @staticmethod
    ...     def forward(ctx, x, k):
    ...         ctx.k = k
    ...         return x * k
    ...     @staticmethod
    ...     def backward(ctx, g):
    ...         return g * ctx.k, None
    >>> x = ember.ones(2, requires_grad=True)
    >>> Scale.apply(x, 5.0).sum().backward()
    >>> x.grad.tolist()
    [5.0, 5.0]
    """

    def __init__(self):
        self._fn_name = "Function"
        self._to_save = None          # what forward passed to save_for_backward
        self._saved = None            # after apply: [(array, output index or None, version)]
        self._released = False
        self._node_ref = None
        self._dirty = ()
        self._non_differentiable = ()
        self.materialize_grads = True
        self.needs_input_grad = ()

    # ---------------------------------------------------------------- forward side

    def save_for_backward(self, *arrays):
        """Keep arrays (inputs, outputs or intermediates; None allowed) for backward.

        Read them back with ``ctx.saved_tensors``; an array modified in place
        after the Function ran makes that read fail (its gradient would be
        wrong).

        >>> import ember
        >>> class Sq(ember.autograd.Function):
        ...     @staticmethod
        ...     def forward(ctx, x):
        ...         ctx.save_for_backward(x)
        ...         return x * x
        ...     @staticmethod
        ...     def backward(ctx, g):
        ...         (x,) = ctx.saved_tensors
        ...         return 2 * x * g
        >>> x = ember.asarray([3.0], requires_grad=True)
        >>> Sq.apply(x).backward()
        >>> x.grad.tolist()
        [6.0]
        """
        for i, a in enumerate(arrays):
            if a is not None and not isinstance(a, ndarray):
                raise TypeError(f"{self._fn_name}: save_for_backward can only save ember arrays "
                                f"(or None), but argument {i} is a {type(a).__name__}; store "
                                f"other values as attributes of ctx")
        self._to_save = tuple(arrays)

    def mark_dirty(self, *arrays):
        """Declare inputs that forward modified in place (and returns as outputs).

        A dirty input takes the Function's node as its new history; a leaf
        that requires grad cannot be modified this way.

        >>> import ember
        >>> class AddOneInplace(ember.autograd.Function):
        ...     @staticmethod
        ...     def forward(ctx, x):
        ...         x += 1
        ...         ctx.mark_dirty(x)
        ...         return x
        ...     @staticmethod
        ...     def backward(ctx, g):
        ...         return g
        >>> w = ember.ones(2, requires_grad=True)
        >>> h = w * 2
        >>> out = AddOneInplace.apply(h)
        >>> out is h, h.grad_fn.name, h.tolist()
        (True, 'AddOneInplaceBackward', [3.0, 3.0])
        """
        for i, a in enumerate(arrays):
            if not isinstance(a, ndarray):
                raise TypeError(f"{self._fn_name}: mark_dirty takes ember arrays, but argument "
                                f"{i} is a {type(a).__name__}")
        self._dirty = tuple(arrays)

    def mark_non_differentiable(self, *arrays):
        """Declare outputs that have no gradient (e.g. indices): they do not require
        grad, and backward receives zeros for them (or None without
        materialization).

        >>> import ember
        >>> class SortVals(ember.autograd.Function):
        ...     @staticmethod
        ...     def forward(ctx, x):
        ...         idx = ember.argsort(x)
        ...         ctx.mark_non_differentiable(idx)
        ...         ctx.idx = idx
        ...         return ember.take(x, idx), idx
        ...     @staticmethod
        ...     def backward(ctx, g, g_idx):
        ...         out = ember.zeros(g.shape, dtype=g.dtype)
        ...         out[ctx.idx] = g
        ...         return out
        >>> x = ember.asarray([3.0, 1.0, 2.0], requires_grad=True)
        >>> vals, idx = SortVals.apply(x)
        >>> vals.requires_grad, idx.requires_grad
        (True, False)
        """
        for i, a in enumerate(arrays):
            if not isinstance(a, ndarray):
                raise TypeError(f"{self._fn_name}: mark_non_differentiable takes ember arrays, "
                                f"but argument {i} is a {type(a).__name__}")
        self._non_differentiable = tuple(arrays)

    def set_materialize_grads(self, value):
        """Whether missing output gradients reach backward as zeros (True, the
        default) or as None.

        >>> import ember
        >>> class Two(ember.autograd.Function):
        ...     @staticmethod
        ...     def forward(ctx, x):
        ...         ctx.set_materialize_grads(False)
        ...         return x * 1, x * 2
        ...     @staticmethod
        ...     def backward(ctx, g1, g2):
        ...         ctx.seen = (g1 is None, g2 is None)
        ...         return g1 if g2 is None else g2 * 2
        >>> x = ember.ones(2, requires_grad=True)
        >>> a, b = Two.apply(x)
        >>> a.sum().backward()
        >>> a.grad_fn is b.grad_fn, x.grad.tolist()
        (True, [1.0, 1.0])
        """
        self.materialize_grads = bool(value)

    # ---------------------------------------------------------------- backward side

    @property
    def saved_tensors(self):
        """The arrays given to ``save_for_backward``, checked to be unmodified.

        Raises RuntimeError if the graph was freed (a second backward without
        ``retain_graph=True``) or a saved array was modified in place since.

        >>> import ember
        >>> class Sq(ember.autograd.Function):
        ...     @staticmethod
        ...     def forward(ctx, x):
        ...         ctx.save_for_backward(x)
        ...         return x * x
        ...     @staticmethod
        ...     def backward(ctx, g):
        ...         (x,) = ctx.saved_tensors
        ...         return 2 * x * g
        >>> h = ember.ones(2, requires_grad=True) * 1
        >>> y = Sq.apply(h)
        >>> with ember.no_grad():
        ...     h += 1                     # changes an array Id saved
        >>> y.sum().backward()
        Traceback (most recent call last):
        ...
        RuntimeError: one of the arrays ... saved array 0 of Sq ... at version 1; expected version 0 ...
        """
        if self._released:
            raise _freed_error(f"{self._fn_name}Backward")
        if self._saved is None:
            return tuple(self._to_save) if self._to_save is not None else ()
        node = self._node_ref() if self._node_ref is not None else None
        connect = _array._is_grad_enabled() and node is not None
        out = []
        for i, (a, nr, version) in enumerate(self._saved):
            if a is None:
                out.append(None)
                continue
            if a._version != version:
                raise RuntimeError(
                    f"one of the arrays needed for gradient computation has been modified by "
                    f"an in-place operation: saved array {i} of {self._fn_name} "
                    f"(ctx.save_for_backward) of shape {_shape(a)} and dtype {a.dtype} is at "
                    f"version {a._version}; expected version {version} (the version when "
                    f"{self._fn_name}.apply ran)")
            if nr is None:
                out.append(a)
            else:
                # an output of this Function: a fresh alias, part of the graph when recording
                v = a.detach()
                if connect:
                    v.requires_grad = True
                    v.grad_fn = node
                    v._output_nr = nr
                out.append(v)
        return tuple(out)

    @property
    def saved_variables(self):
        """Deprecated alias of ``saved_tensors`` (PyTorch's older name)."""
        return self.saved_tensors

    def _release(self):
        self._released = True
        self._saved = None
        self._to_save = None


class _FunctionMeta(type):
    def __call__(cls, *args, **kwargs):
        if args or kwargs:
            raise RuntimeError(
                f"{cls.__name__}: custom Functions are called through "
                f"{cls.__name__}.apply(...), with forward and backward as static methods")
        return super().__call__()


def _bind(cls, args, kwargs, with_ctx):
    """Move arguments passed by keyword to their positional slots (as forward declares them)."""
    try:
        sig = inspect.signature(cls.forward)
    except (TypeError, ValueError):
        return args, kwargs
    try:
        bound = sig.bind(None, *args, **kwargs) if with_ctx else sig.bind(*args, **kwargs)
    except TypeError as e:
        raise TypeError(f"{cls.__name__}.apply: {e}") from None
    if not with_ctx:
        bound.apply_defaults()
    pos = bound.args[1:] if with_ctx else bound.args
    return tuple(pos), dict(bound.kwargs)


def _index_of(obj, seq):
    for i, o in enumerate(seq):
        if o is obj:
            return i
    return -1


class Function(metaclass=_FunctionMeta):
    """Base class of custom differentiable operations (PyTorch's API).

    Subclasses define two static methods:

    * ``forward(ctx, *args, **kwargs)``: the computation, run with grad mode
      off; returns an array or a tuple (non-array entries pass through).
    * ``backward(ctx, *grad_outputs)``: one gradient per output in, one
      gradient per positional forward argument out (None for non-arrays or
      where no gradient is needed; check ``ctx.needs_input_grad``).

    (Alternatively ``forward(*args)`` without ctx plus
    ``setup_context(ctx, inputs, output)``, as in PyTorch 2.)

    Call ``MyFn.apply(*args)``.  Outputs get one node named
    ``MyFnBackward`` as their ``grad_fn`` when grad mode is on and an input
    requires grad; otherwise they do not require grad.

    >>> import ember
    >>> class Exp(ember.autograd.Function):
    ...     @staticmethod
    ...     def forward(ctx, x):
    ...         y = ember.exp(x)
    ...         ctx.save_for_backward(y)
    ...         return y
    ...     @staticmethod
    ...     def backward(ctx, g):
    ...         (y,) = ctx.saved_tensors
    ...         return g * y
    >>> x = ember.asarray([0.0, 1.0], dtype=ember.float64, requires_grad=True)
    >>> (g,) = ember.autograd.grad(Exp.apply(x).sum(), x, create_graph=True)
    >>> [round(v, 4) for v in g.tolist()]
    [1.0, 2.7183]
    >>> (gg,) = ember.autograd.grad(g.sum(), x)      # backward used ember ops: differentiable
    >>> [round(v, 4) for v in gg.tolist()]
    [1.0, 2.7183]
    """

    @staticmethod
    def forward(ctx, *args, **kwargs):
        """The computation (override it as a static method)."""
        raise NotImplementedError("a custom Function must define forward(ctx, *args) as a "
                                  "static method")

    @staticmethod
    def backward(ctx, *grad_outputs):
        """Gradients of the inputs from those of the outputs (override it as a static method)."""
        raise NotImplementedError("a custom Function must define backward(ctx, *grad_outputs) "
                                  "as a static method to be differentiated")

    @staticmethod
    def setup_context(ctx, inputs, output):
        """Optional (PyTorch 2 style): fill ctx from the inputs and output of a
        ``forward`` that takes no ctx."""
        raise NotImplementedError("setup_context is not defined")

    @classmethod
    def apply(cls, *args, **kwargs):
        """Run forward and record the Function in the graph; returns forward's output.

        >>> import ember
        >>> class Double(ember.autograd.Function):
        ...     @staticmethod
        ...     def forward(ctx, x):
        ...         return x * 2
        ...     @staticmethod
        ...     def backward(ctx, g):
        ...         return g * 2
        >>> x = ember.ones(3, requires_grad=True)
        >>> Double.apply(x).sum().backward()
        >>> x.grad.tolist()
        [2.0, 2.0, 2.0]
        """
        name = cls.__name__
        setup_style = cls.setup_context is not Function.setup_context
        if kwargs or setup_style:
            args, kwargs = _bind(cls, args, kwargs, not setup_style)
        for k, v in kwargs.items():
            if isinstance(v, ndarray) and v.requires_grad and _array._is_grad_enabled():
                raise RuntimeError(f"{name}.apply: the array passed as keyword argument {k!r} "
                                   f"requires grad, but only positional arguments of forward "
                                   f"can receive gradients")
        ctx = FunctionCtx()
        ctx._fn_name = name
        ctx.needs_input_grad = tuple(isinstance(a, ndarray) and a.requires_grad for a in args)
        build = _array._is_grad_enabled() and any(ctx.needs_input_grad)

        prev = _array._set_grad_enabled(False)
        try:
            if setup_style:
                raw = cls.forward(*args, **kwargs)
                cls.setup_context(ctx, args, raw)
            else:
                raw = cls.forward(ctx, *args, **kwargs)
        finally:
            _array._set_grad_enabled(prev)

        is_tuple = isinstance(raw, tuple)
        outs = raw if is_tuple else (raw,)
        dirty = ctx._dirty
        for d in dirty:
            if _index_of(d, outs) < 0:
                raise RuntimeError(f"{name}: an array marked dirty (shape {_shape(d)}) was not "
                                   f"returned by forward; arrays modified in place must be "
                                   f"returned as outputs")
        if build:
            from ember.autograd.inplace import _check_inplace_target
            for d in dirty:
                _check_inplace_target(d, f"{name}.apply (ctx.mark_dirty)")

        nondiff = ctx._non_differentiable
        final, attach_outs, rebase = [], [], []
        for o in outs:
            if not isinstance(o, ndarray):
                final.append(o)
                attach_outs.append(None)
                continue
            is_dirty = _index_of(o, dirty) >= 0
            differentiable = build and _is_float(o) and _index_of(o, nondiff) < 0
            if is_dirty:
                final.append(o)
                if differentiable and o._view_of is not None:
                    alias = o.detach()
                    rebase.append((o, alias))
                    attach_outs.append(alias)
                else:
                    attach_outs.append(o if differentiable else None)
            elif _index_of(o, args) >= 0 or o.requires_grad:
                # an input returned as is (or an array with history): a new array object
                alias = o.detach()
                final.append(alias)
                attach_outs.append(alias if differentiable else None)
            else:
                final.append(o)
                attach_outs.append(o if differentiable else None)

        if build:
            node = cls._attach(ctx, args, outs, attach_outs)
            if rebase:
                from ember.autograd.inplace import _write_and_rebase
                for o, alias in rebase:
                    _write_and_rebase(o, alias)
            ctx._node_ref = weakref.ref(node)
            ctx._saved = cls._pack_saved(ctx, args, outs, final, attach_outs, dirty)
            ctx._to_save = None
        ctx._dirty = ctx._non_differentiable = ()        # ctx keeps no references to outputs
        return tuple(final) if is_tuple else final[0]

    @classmethod
    def _attach(cls, ctx, args, outs, attach_outs):
        name = f"{cls.__name__}Backward"
        is_array = tuple(isinstance(a, ndarray) for a in args)
        n_in = len(args)
        out_meta = None
        if ctx.materialize_grads:
            out_meta = [(tuple(o.shape), o.dtype) if isinstance(o, ndarray) else None
                        for o in outs]
        backward = cls.backward

        def run(grads):
            res = backward(ctx, *grads)
            if not isinstance(res, tuple):
                res = (res,)
            if len(res) != n_in:
                if len(res) > n_in and all(r is None for r in res[n_in:]):
                    res = res[:n_in]
                else:
                    raise RuntimeError(
                        f"function {name} returned an incorrect number of gradients (expected "
                        f"{n_in}, one per argument of {cls.__name__}.forward; got {len(res)})")
            for i, r in enumerate(res):
                if r is not None and not is_array[i]:
                    raise RuntimeError(
                        f"function {name} returned a gradient different than None at position "
                        f"{i + 1}, but the corresponding forward input was not an ember array")
            return list(res)

        node = _engine.attach(name, run, list(args), attach_outs, out_meta=out_meta,
                              on_release=ctx._release)
        return node

    @staticmethod
    def _pack_saved(ctx, args, outs, final, attach_outs, dirty):
        saved = []
        for s in (ctx._to_save or ()):
            if s is None:
                saved.append((None, None, 0))
                continue
            j = _index_of(s, outs)
            if j >= 0 and (_index_of(s, dirty) >= 0 or _index_of(s, args) < 0):
                # an output: keep it without history (no cycle output -> node -> ctx -> output)
                nr = j if attach_outs[j] is not None else None
                saved.append((s.detach(), nr, s._version))
            else:
                saved.append((s, None, s._version))
        return saved


def once_differentiable(fn):
    """Decorate a Function's backward that is not itself differentiable.

    backward then runs with grad mode off.  When a higher-order graph is
    requested (``create_graph=True``) and the gradients would depend on it,
    they come back attached to a node that raises if it is ever
    differentiated (PyTorch's behaviour).

    >>> import ember
    >>> class Exp(ember.autograd.Function):
    ...     @staticmethod
    ...     def forward(ctx, x):
    ...         y = ember.exp(x)
    ...         ctx.save_for_backward(y)
    ...         return y
    ...     @staticmethod
    ...     @ember.autograd.once_differentiable
    ...     def backward(ctx, g):
    ...         (y,) = ctx.saved_tensors
    ...         return g * y
    >>> x = ember.zeros(2, requires_grad=True)
    >>> (g,) = ember.autograd.grad(Exp.apply(x).sum(), x, create_graph=True)
    >>> g.tolist()
    [1.0, 1.0]
    >>> ember.autograd.grad(g.sum(), x)
    Traceback (most recent call last):
    ...
    RuntimeError: trying to differentiate twice a function ... @once_differentiable (ExpBackward)
    """
    @functools.wraps(fn)
    def wrapper(ctx, *grad_outputs):
        prev = _array._set_grad_enabled(False)
        try:
            res = fn(ctx, *grad_outputs)
        finally:
            _array._set_grad_enabled(prev)
        if not prev:
            return res
        edges = [g for g in grad_outputs if isinstance(g, ndarray) and g.requires_grad]
        node = ctx._node_ref() if getattr(ctx, "_node_ref", None) is not None else None
        if node is not None and any(getattr(ctx, "needs_input_grad", ())):
            E = _E()
            for n, nr in node.next_functions:
                if n is None:
                    continue
                a = E.zeros(())
                a.requires_grad = True
                a.grad_fn = n
                a._output_nr = nr
                edges.append(a)
        if not edges:
            return res
        single = not isinstance(res, tuple)
        outs = (res,) if single else res
        new = tuple(o.detach() if isinstance(o, ndarray) and _is_float(o) else o for o in outs)
        fname = f"{getattr(ctx, '_fn_name', 'Function')}Backward"

        def delayed_error(grads):
            raise RuntimeError(f"trying to differentiate twice a function that was marked with "
                               f"@once_differentiable ({fname})")

        _engine.attach("DelayedError", delayed_error, edges,
                       [o if isinstance(o, ndarray) and _is_float(o) else None for o in new])
        return new[0] if single else new
    return wrapper
