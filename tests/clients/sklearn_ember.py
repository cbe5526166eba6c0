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
