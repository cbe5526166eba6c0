"""Every ``>>>`` example in ember's public docstrings runs and prints what it says."""
import doctest
import importlib

import pytest

MODULES = ["ember", "ember._api.creation", "ember._api.dtype_funcs", "ember._api.elementwise",
           "ember._api.reductions", "ember._api.manipulation", "ember._api.indexing",
           "ember._api.linalg_ops", "ember._api.sorting", "ember._api.misc", "ember.linalg",
           "ember.random", "ember._core.storage", "ember._core.dtypes", "ember._core.array",
           "ember._core.elementwise", "ember.autograd", "ember.autograd.grad_mode",
           "ember.autograd.function", "ember.autograd.functional", "ember.autograd.gradcheck",
           "ember.autograd.anomaly", "ember.serialization", "ember._api.npextras",
           "ember._api.printing", "ember._api.fperr", "ember.emath", "ember.lib",
           "ember.lib.stride_tricks", "ember._config", "ember.fft",
           "ember.fft._transforms", "ember.fft._helpers", "ember.fft._args",
           "ember._torch", "ember.return_types", "ember.accelerator", "ember.backends",
           "ember.backends.cudnn", "ember.backends.mps", "ember.utils", "ember._core.util",
           "ember._core.gpu_hooks", "ember._core.public", "ember._core.nn_args",
           "ember._core.result_types"]
# the training packages: every module in them
PACKAGES = ["ember.nn", "ember.optim", "ember.data", "ember.amp", "ember.cuda", "ember.distributed"]


def _package_modules():
    import pkgutil
    out = []
    for pkg in PACKAGES:
        mod = importlib.import_module(pkg)
        out.append(pkg)
        for info in pkgutil.walk_packages(mod.__path__, pkg + "."):
            out.append(info.name)
    return out


def _examples():
    finder = doctest.DocTestFinder(exclude_empty=True)
    seen = set()
    for name in MODULES + _package_modules():
        mod = importlib.import_module(name)
        # the ember namespace shadows builtins (round, max, sum...): its examples import
        # what they use and run with Python's builtins
        globs = {"__name__": name} if name == "ember" else None
        for test in finder.find(mod, globs=globs):
            if test.examples and test.name not in seen:
                seen.add(test.name)
                yield pytest.param(test, id=test.name)


@pytest.mark.parametrize("test", list(_examples()))
def test_docstring_example(test):
    import ember
    import numpy
    ember.set_default_dtype(numpy.float32)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    out = []
    runner.run(test, out=out.append)
    assert runner.failures == 0, "".join(out)


def test_every_public_function_has_an_example():
    import ember
    from ember._api import (creation, dtype_funcs, elementwise, reductions, manipulation,
                            indexing, linalg_ops, sorting, misc, npextras, printing, fperr)
    import ember.lib.stride_tricks
    missing = []
    for mod in (creation, elementwise, reductions, manipulation, indexing, linalg_ops, sorting,
                misc, ember.linalg, ember.random, npextras, printing, fperr, ember.emath,
                ember.lib.stride_tricks, ember.fft):
        for name in getattr(mod, "__all__", []):
            obj = getattr(mod, name)
            if isinstance(obj, type) or not callable(obj) or isinstance(obj, elementwise.ufunc):
                continue
            if obj is getattr(dtype_funcs, name, None):
                continue
            if ">>>" not in (obj.__doc__ or ""):
                missing.append(f"{mod.__name__}.{name}")
    assert not missing, missing
