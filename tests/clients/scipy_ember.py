"""pytest plugin: ember as an array-API backend in SciPy's own tests.

SciPy parametrises its array-API tests with the ``xp`` fixture of
``scipy/conftest.py`` over the backends it finds (numpy, array_api_strict,
torch, cupy, jax, dask) when ``SCIPY_ARRAY_API=1``.  Loaded with
``-p scipy_ember``, this plugin imports that conftest first (pytest then reuses
the module), makes ember a known backend (so ``np_only`` / ``cpu_only`` skips
apply to it as to any other non-NumPy backend) and the ``xp`` fixture's only
parameter, so every such test runs once on ember arrays.  The default dtype is
taken from ``EMBER_DEFAULT_DTYPE``; SciPy builds float64 references, so the
client run uses float64.  Run by ``tests/clients/run_scipy.sh``.
"""
import os

os.environ.setdefault("SCIPY_ARRAY_API", "1")     # read by SciPy at import

import pytest                   # noqa: E402
import ember                    # noqa: E402
import scipy.conftest as _sc    # noqa: E402

_dtype = os.environ.get("EMBER_DEFAULT_DTYPE")
if _dtype:
    ember.set_default_dtype(_dtype)      # for builds that do not read the variable

_EMBER = [pytest.param(ember, id="ember", marks=pytest.mark.array_api_backends)]
_sc.xp_known_backends.add("ember")
_sc.xp_available_backends[:] = _EMBER
_sc.xp = pytest.fixture(params=_EMBER)(_sc.xp._get_wrapped_function())
