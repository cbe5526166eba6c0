"""pytest plugin: ember as an array namespace in scikit-learn's own array-API tests.

scikit-learn parametrises its array-API tests with the namespaces that
``sklearn.utils._array_api.yield_namespaces`` yields (numpy, array_api_strict,
cupy, torch, dpnp).  Loaded with ``-p sklearn_ember`` before the test modules are
imported, this plugin makes it yield ``"ember"`` alone, so every such test runs
once on ember arrays (default device, the test's own dtypes).  Run by
``tests/clients/run_sklearn.sh``.
"""
import os

os.environ.setdefault("SCIPY_ARRAY_API", "1")       # scikit-learn skips its array-API tests without it

import sklearn.utils._array_api as _sk_array_api    # noqa: E402


def _ember_only(include_numpy_namespaces=True):
    """ember instead of scikit-learn's list of namespaces."""
    yield "ember"


_sk_array_api.yield_namespaces = _ember_only


def pytest_collection_modifyitems(config, items):
    """Keep only the tests parametrised with the ember namespace.

    Selecting them with ``-k ember`` is not enough: ``-k`` also matches the
    names of the folders above each test, and a virtual environment at a path
    such as ``/tmp/ember-ci-venv`` then selects every test of the module
    (CuPy's GPU tests among them).
    """
    keep, drop = [], []
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        ember_param = any(isinstance(v, str) and v == "ember" for v in params.values())
        (keep if ember_param else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
