"""Static checks of the GPU backend against the installed CuPy, without a GPU.

A public op with no GPU implementation of its own runs on GPU arrays through CuPy's
function of the same name (ember.cuda._dispatch.cupy_call).  That only works where
CuPy has the function and accepts ember's keywords; NumPy (and the emulation built on
it) accepts more, so these gaps would otherwise show only on a GPU.  Here every such
op is checked against the signatures of the CuPy that is installed (CuPy imports
without a GPU), and every GPU op module must import.
"""
import inspect

import pytest

cupy = pytest.importorskip("cupy")

import ember                                    # noqa: E402
import ember.linalg                             # noqa: E402
from ember.autograd.dispatch import DiffOp      # noqa: E402
from ember.cuda import _dispatch as D           # noqa: E402

# ops whose host body runs on GPU arrays without CuPy (views, creation, dispatched pieces)
_NATIVE_MODULES = {"ember._api.creation", "ember._api.manipulation", "ember._api.dtype_funcs",
                   "ember._api.interop", "ember._api.misc", "ember.nn.modules.rnn",
                   "ember._api.fperr"}

# known differences, each with why it is acceptable: {op: {ember keyword: reason}}
_ACCEPTED = {
    "compress": {"x": "positional in practice (NumPy names it a)"},
    "extract": {"x": "positional in practice (NumPy names it arr)"},
    "intersect1d": {"b": "positional in practice (NumPy names it ar2)"},
    "setdiff1d": {"b": "positional in practice (NumPy names it ar2)"},
    "union1d": {"b": "positional in practice (NumPy names it ar2)"},
    "unravel_index": {"shape": "positional in practice (CuPy names it dims)"},
    "indices": {"sparse": "indices takes no array, so a call never reaches CuPy"},
    "unpackbits": {"count": "CuPy's unpackbits has none: count= on a GPU array raises "
                            "CuPy's TypeError naming it (not supported there)"},
}


def _public_ops():
    ops = {}
    for ns in (ember, ember.linalg):
        for k in dir(ns):
            v = getattr(ns, k)
            if isinstance(v, DiffOp):
                ops[v.name] = v
    return ops


def _through_cupy():
    """(name, DiffOp) of the public ops whose GPU path is CuPy's function."""
    D.load_ops()
    for name, op in sorted(_public_ops().items()):
        if D.route(op)[0] == D._IMPL or name.startswith("nn."):
            continue
        if getattr(op.fn, "__module__", None) in _NATIVE_MODULES:
            continue
        yield name, op


def test_every_gpu_op_module_imports():
    D.load_ops()
    assert D.LOAD_ERRORS == {}


def test_there_are_ops_to_check():
    assert len(list(_through_cupy())) > 20


def _keywords_cupy_refuses(name, ember_fn, allowed):
    """The keyword-capable parameters of ember_fn (after x) that CuPy's `name` does not
    take, leaving out `allowed(param_name)`; skips where CuPy's signature is opaque."""
    fn = D.cupy_function(name)
    assert fn is not None, (f"CuPy {cupy.__version__} has no {name}: give ember.{name} a GPU "
                            f"implementation")
    try:
        cs = inspect.signature(fn)
    except (TypeError, ValueError):
        pytest.skip(f"cupy.{name} has no introspectable signature (a ufunc or Cython function)")
    if any(p.kind is p.VAR_KEYWORD for p in cs.parameters.values()):
        return [], cs
    return [p.name for p in list(inspect.signature(ember_fn).parameters.values())[1:]
            if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)
            and D.cupy_keyword(name, p.name) not in cs.parameters
            and not allowed(p.name)], cs


@pytest.mark.parametrize("name,op", list(_through_cupy()),
                         ids=lambda v: v if isinstance(v, str) else "")
def test_cupy_has_the_function_and_ember_keywords(name, op):
    missing, cs = _keywords_cupy_refuses(name, op.fn, lambda k: k in _ACCEPTED.get(name, {}))
    assert not missing, (f"ember.{name}{inspect.signature(op.fn)} passes {missing} to "
                         f"cupy.{name}{cs}, which does not take them")


def _generic_reductions():
    from ember._api import reductions
    from ember.cuda import ops_reduce
    D.load_ops()
    for name in reductions.__all__:
        if name in ops_reduce._NAN_QUANTILES or not getattr(D._IMPLS.get(name), "via_cupy", False):
            continue            # computed by ember itself (kernels or CuPy pieces)
        yield name, getattr(reductions, name)


# keywords ember's generic GPU reductions translate before calling CuPy (ops_reduce._generic)
_TRANSLATED = {"out", "dim", "keepdim", "correction", "mean", "where", "initial"}


@pytest.mark.parametrize("name,host", list(_generic_reductions()),
                         ids=lambda v: v if isinstance(v, str) else "")
def test_cupy_takes_the_generic_reductions_keywords(name, host):
    """Reductions run CuPy's function with the host's keywords where ember's kernels do not
    cover the call."""
    from ember.cuda import ops_reduce
    missing, cs = _keywords_cupy_refuses(
        name, host, lambda k: k in _TRANSLATED or
        (k == "keepdims" and not ops_reduce._cupy_takes(name, "keepdims")))
    assert not missing, f"ember.{name} passes {missing} to cupy.{name}{cs}"
