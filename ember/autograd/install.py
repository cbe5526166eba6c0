"""Put autograd on the public namespace (called by ``ember._wiring.connect_autograd``).

Every public function of ``ember`` (and ``ember.linalg``) becomes a
``DiffOp`` with its gradient rule, if it has one; the elementwise ufuncs get
their rules in the engine's op-code table (they record from Cython), as the op
table's ``grad`` column says.  A
function with no rule raises rather than silently dropping the gradient when
an input requires grad and it returns floating-point arrays, unless it is
declared non-differentiable (its results are constants, as ``zeros_like``).
"""
import functools
import types

from ember._core import array as _array
from ember._core.array import ndarray

from ember.autograd import engine, inplace, registry
from ember.autograd.dispatch import DiffOp

# API functions (outside the elementwise table) whose results are constants or integer
# data whatever their input.  The elementwise ones come from the op table (its rows with
# grad=False, registered by register_elementwise); tests/test_optable.py checks that
# every name registered as non-differentiable is a public ember function.
registry.nondifferentiable(
    "zeros_like", "ones_like", "empty_like", "full_like", "shape", "ndim", "size",
    "result_type", "can_cast", "isdtype", "finfo", "iinfo", "from_dlpack",
    "allclose", "array_equal", "array_equiv", "isclose", "count_nonzero", "nonzero",
    "argwhere", "flatnonzero", "argmax", "argmin", "argsort", "searchsorted", "digitize",
    "bincount", "histogram", "unique_counts", "unique_inverse", "nanargmax", "nanargmin",
    "argpartition", "lexsort", "all", "any", "broadcast_shapes", "tril_indices",
    "triu_indices", "indices", "diag_indices", "ndindex", "unravel_index",
    "ravel_multi_index", "iscomplex", "isreal",
)

from ember.autograd.rules.device import to_device as _to_device_fn

_INTERNAL = {
    "_to_device": _to_device_fn,
    "_getitem": inplace._getitem,
    "_index_add_into": inplace._index_add_into,
    "_setitem_value": inplace._setitem_value,
}


# API functions that write into an argument and return None: no history can be recorded
_WRITES_IN_PLACE = {"put_along_axis", "put", "place", "copyto", "fill_diagonal", "shuffle"}


def _refuse_tracked(fn, name):
    @functools.wraps(fn)
    def in_place_api(*args, **kwargs):
        if _array._is_grad_enabled() and any(
                isinstance(a, ndarray) and a.requires_grad
                for a in list(args) + list(kwargs.values())):
            raise RuntimeError(f"ember.{name} writes in place and does not support autograd: "
                               f"an argument requires grad; use index assignment "
                               f"(x[idx] = v, recorded) or run it under ember.no_grad()")
        return fn(*args, **kwargs)
    in_place_api.__module__, in_place_api.__qualname__ = "ember", name
    return in_place_api


def _conversion(fn, name):
    """asarray / array / tensor of an array in a graph: the same object, or a recorded
    cast/copy of it (a new leaf when requires_grad=True is asked for, as in PyTorch)."""
    @functools.wraps(fn)
    def convert(obj, /, *args, **kwargs):
        if not (isinstance(obj, ndarray) and obj.requires_grad and _array._is_grad_enabled()):
            return fn(obj, *args, **kwargs)
        prev = _array._set_grad_enabled(False)
        try:
            res = fn(obj, *args, **kwargs)
        finally:
            _array._set_grad_enabled(prev)
        if res is obj or kwargs.get("requires_grad"):
            return res
        return engine._record(registry.RULES["astype"], (obj, res.dtype), None, res)
    convert.__module__, convert.__qualname__ = "ember", name     # pickles as ember.<name>
    return convert


def _wrap(fn, name):
    if name in ("asarray", "array", "tensor", "asanyarray"):
        return _conversion(fn, name)
    if name in _WRITES_IN_PLACE:
        # still a DiffOp underneath, so GPU arrays reach their GPU implementation
        return _refuse_tracked(DiffOp(fn, name, None, nondiff=True), name)
    rule = registry.RULES.get(name) or registry.RULES.get(getattr(fn, "__name__", ""))
    if rule is not None and rule.forward is None:
        rule.forward = fn
    if rule is None and name in registry.NONDIFF:
        return DiffOp(fn, name, None, nondiff=True)     # constants: routed, never recorded
    return DiffOp(fn, name, rule)


def register_elementwise(op_table):
    """Give each elementwise op (a row of the op table) its rule, in the engine's op-code
    table, or mark it non-differentiable, as its row's ``grad`` says.  A row and the
    rules that disagree (grad=True without a @defgrad rule, or a rule for a grad=False
    op) are a build mistake, refused here rather than found by a user."""
    for code, row in enumerate(op_table):
        rule = registry.RULES.get(row.name)
        if row.grad and rule is None:
            raise ImportError(f"ember: elementwise op {row.name!r} has grad=True in "
                              f"_kernels/cpu/optable.py but no @defgrad rule")
        if not row.grad and rule is not None:
            raise ImportError(f"ember: elementwise op {row.name!r} has a gradient rule but "
                              f"grad=False in _kernels/cpu/optable.py")
        if row.grad:
            engine._register_elementwise(row.name, rule)
        else:
            registry.nondifferentiable(row.name)
            engine._register_elementwise_nondiff(row.name)


def wrap_public_functions(ns):
    """Make ns's public functions (ns is the ember module) and ember.linalg's DiffOps."""
    for name, fn in _INTERNAL.items():
        setattr(ns, name, _wrap(fn, name))
    done = {}           # aliases (around = round) stay one object
    for name in list(vars(ns)):
        obj = getattr(ns, name)
        if name.startswith("_") or not isinstance(obj, types.FunctionType):
            continue
        mod = getattr(obj, "__module__", "") or ""
        if not mod.startswith("ember._api") and not mod.startswith("ember.linalg"):
            continue
        if id(obj) not in done:
            done[id(obj)] = _wrap(obj, obj.__name__ if obj.__name__ in registry.RULES else name)
        setattr(ns, name, done[id(obj)])
    linalg = ns.linalg
    for name in list(getattr(linalg, "__all__", [])):
        obj = getattr(linalg, name)
        if isinstance(obj, types.FunctionType):
            setattr(linalg, name, _wrap(obj, "linalg." + name))
