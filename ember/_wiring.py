"""How ember's layers are connected where an import cannot do it.

Imports go downward (storage, dtypes, the array and the elementwise dispatcher in
``ember/_core``; the namespace in ``ember/_api``; autograd above it; the GPU backend
beside the CPU kernels).  A few calls go the other way, for speed or because the
upper layer is optional, and for those a lower module holds a reference that an
upper layer sets once it exists.  Every such reference is listed here, with the
function that sets it; ``ember/__init__.py`` calls ``connect_namespace`` and then
``connect_autograd``, and ``ember.cuda`` makes the GPU connections when a GPU is
first used.

Set by ``connect_namespace(ns)`` (the ``ember`` module, once ``ember._api`` is in it):

- ``ember._core.array._ember`` = the ``ember`` namespace.  Array methods (``x.reshape``,
  ``x @ y``, ``x.sum()``...) are the namespace's functions; ``array.pyx`` sits below
  ``ember._api`` and cannot import it (``_api`` imports ``array``).
- ``ember._core.array._assign`` = ``elementwise._assign`` (``x[...] = v``): elementwise
  cimports array, so array cannot import elementwise.

Set by ``connect_autograd(ns)`` (after ``ember.autograd`` is imported):

- ``ember._core.array._ember_untracked`` = the namespace's functions before autograd
  wraps them: a method on an array nothing records calls these directly (no
  ``DiffOp`` dispatch on the hot path).
- ``ember.autograd.engine._ember`` = the namespace (the engine sums, reshapes and casts
  gradients with ember ops; ``ember._api`` is below autograd and imports the engine's
  Cython module, not the other way round).
- the elementwise rules: the engine's op-code table gets each row's ``@defgrad`` rule,
  or marks the op non-differentiable, as the op table's ``grad`` column says
  (``install.register_elementwise``); the C versions of the hottest rules attach to
  the same rules (``fast_rules.install``).
- ``ember.autograd.engine._host_sum`` / ``_sum_rule``: ``x.sum()`` recorded without
  keyword handling (``engine._sum_all``).
- the namespace's ``_ag_sum_all``, ``_ag_getitem``, ``_ag_setitem``, ``_ag_inplace``,
  ``_ag_mark_view``, ``_ag_refresh_view``: the recording versions of ``x.sum()``,
  ``x[k]``, ``x[k] = v``, ``x += y`` and views, which ``array.pyx`` calls through
  ``_ember`` when an operand requires grad (array is below autograd).
- every public function becomes a ``DiffOp`` (``install.wrap_public_functions``).

Set by ``ember.autograd.engine`` itself when it is imported (a C-level link):

- ``ember._core.elementwise._autograd_binary`` / ``_autograd_unary`` =
  ``engine._record_binary`` / ``_record_unary`` (``set_autograd_hooks``): ``a + b`` on an
  array that requires grad records from C, without a Python frame.

Set by ``ember.cuda`` when a GPU is first used (``ember.cuda._device_api._init``), so that
``import ember`` never imports CuPy; while unset, no array lives on a GPU:

- ``ember._core.array._gpu_backend`` = ``ember.cuda._runtime`` (``_set_gpu_backend``):
  GPU allocation, transfers, device checks.
- ``ember._core.elementwise._gpu_resolve`` = ``ember.cuda._dispatch.elementwise_impl``
  (``_set_gpu_elementwise``): for GPU operands the elementwise dispatcher asks the one
  GPU dispatch's registry for the implementation registered under the ufunc's name
  (``ember.cuda._elementwise`` registers every op-table row with ``gpu_op``), once per
  op code, and keeps it until the registrations change (``_forget_gpu_routes``).
- ``ember._core.elementwise._gpu_elementwise`` = ``ember.cuda._elementwise`` (same
  setter): ``cast(x, tcode)`` and ``assign(dst, src)`` for GPU arrays, the backend's
  storage-level copies (dtype conversion, ``x[...] = v``), which are not ops and stay
  backend primitives outside the registry.
- ``ember.autograd.dispatch._gpu_call`` (``_set_gpu_dispatch``): how a ``DiffOp``
  reaches the GPU implementation of a public function.

Set by ``ember.amp`` while an autocast region is open:

- ``ember.autograd.dispatch._autocast`` (``_set_autocast``): casts the arguments of every
  public op first.
"""
import types

from ember._core import array as _array
from ember._core import elementwise as _elementwise


def connect_namespace(ns):
    """Give the array type the namespace its methods call, and ``x[...] = v``'s copy."""
    _array._set_namespace(ns, _elementwise._assign)


def connect_autograd(ns):
    """Connect autograd to the namespace ns (the ``ember`` module) and wrap its
    public functions; see the module docstring for each link."""
    from ember._api import reductions
    from ember.autograd import engine, fast_rules, inplace, install, registry
    from ember.autograd.rules import load_all

    # the plain functions, captured before wrap_public_functions replaces them
    _array._set_plain_namespace(types.SimpleNamespace(**vars(ns)))
    load_all()                                  # rule modules register on import
    engine._set_namespace(ns, _elementwise.op_names())
    fast_rules.install()
    install.register_elementwise(_elementwise.op_table())
    install.wrap_public_functions(ns)
    engine._set_sum(reductions.sum, registry.RULES["sum"])
    ns._ag_sum_all = engine._sum_all
    ns._ag_getitem = inplace._ag_getitem
    ns._ag_setitem = inplace._ag_setitem
    ns._ag_inplace = inplace._ag_inplace
    ns._ag_mark_view = inplace._ag_mark_view
    ns._ag_refresh_view = inplace._ag_refresh_view
