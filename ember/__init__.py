"""ember: an imperative, NumPy-compatible array library with automatic differentiation.

>>> import ember as np
>>> x = np.arange(6).reshape(2, 3)
>>> (x * 2).sum(axis=0).tolist()
[6, 10, 14]
"""
import sys as _sys

from ember._core.storage import (memory_stats, reset_peak_memory_stats, empty_cache,
                                 set_allocator_caching)
from ember._core.dtypes import set_default_dtype, get_default_dtype
from ember._core.array import ndarray, Device
from ember._core import array as _array
from ember._core import elementwise as _elementwise
from ember._core.elementwise import set_num_threads, get_num_threads

import os as _os
if hasattr(_os, "register_at_fork"):
    # GNU OpenMP's thread pool does not survive fork(): a parallel region in a forked
    # child of a process that used it hangs.  Forked children run ember's kernels on
    # one thread (call ember.set_num_threads in the child to change that, at your risk).
    _os.register_at_fork(after_in_child=lambda: _elementwise.set_num_threads(1))

from ember._api.dtype_funcs import *       # noqa: F401,F403
from ember._api.creation import *          # noqa: F401,F403
from ember._api.elementwise import *       # noqa: F401,F403
from ember._api.reductions import *        # noqa: F401,F403
from ember._api.manipulation import *      # noqa: F401,F403
from ember._api.indexing import *          # noqa: F401,F403
from ember._api.linalg_ops import *        # noqa: F401,F403
from ember._api.sorting import *           # noqa: F401,F403
from ember._api.interop import *           # noqa: F401,F403
from ember._api.misc import *              # noqa: F401,F403
# NumPy's long tail: fromiter, interp, indices, ndindex, ndenumerate, packbits,
# flatiter; print options; floating-point error settings
from ember._api.npextras import *          # noqa: F401,F403
from ember._api.printing import *          # noqa: F401,F403
from ember._api.fperr import *             # noqa: F401,F403
from ember import linalg, random           # noqa: F401

# private entry points the ndarray methods call (see ember/_core/array.pyx)
from ember._api import indexing as _indexing_mod, manipulation as _manip_mod, interop as _interop_mod
from ember._api import npextras as _npextras_mod
for _name, _mod in (("_getitem_advanced", _indexing_mod), ("_setitem_advanced", _indexing_mod),
                    ("_view_dtype", _manip_mod), ("_array_ufunc", _interop_mod),
                    ("_array_function", _interop_mod), ("_flatiter", _npextras_mod)):
    if hasattr(_mod, _name):
        globals()[_name] = getattr(_mod, _name)

Tensor = ndarray
from ember._build_config import VERSION as __version__  # noqa: E402  (meson.build's version)
__array_api_version__ = "2024.12"

# the connections an import cannot make (array methods -> this namespace, autograd ->
# the namespace and the elementwise op table): all in ember/_wiring.py, documented there
from ember import _wiring                                         # noqa: E402
_wiring.connect_namespace(_sys.modules[__name__])

# autograd: grad-mode switches at the top level (as in PyTorch), then every
# public function gets its gradient rule
from ember import autograd                                        # noqa: E402
from ember.autograd.grad_mode import (no_grad, enable_grad, set_grad_enabled,  # noqa: E402,F401
                                      inference_mode, is_grad_enabled,
                                      is_inference_mode_enabled)
_wiring.connect_autograd(_sys.modules[__name__])

# NumPy's submodules and configuration, and PyTorch's seeding names (issue #22)
from ember import lib, emath                                      # noqa: E402,F401
from ember._config import show_config                             # noqa: E402,F401
from ember.random import (manual_seed, initial_seed, default_generator,  # noqa: E402,F401
                          TorchGenerator as Generator, torch_seed as seed)

# NumPy names ember refuses, with the reason (a plain AttributeError would read as a gap)
_REFUSED_DTYPES = {
    "longdouble": "extended precision", "clongdouble": "extended precision",
    "float128": "extended precision", "complex256": "extended precision",
    "float96": "extended precision", "complex192": "extended precision",
    "object_": "object", "str_": "string", "bytes_": "bytes", "void": "structured/void",
    "datetime64": "datetime", "timedelta64": "timedelta",
}

# PyTorch's top-level names, and PyTorch's meaning of a clashing name when a
# torch-only keyword asks for it (README: "For PyTorch users")
from ember import _torch, return_types                            # noqa: E402,F401
_torch.install(_sys.modules[__name__])


_LAZY_SUBMODULES = ("nn", "optim", "data", "distributed", "cuda", "amp", "fft", "utils",
                    "accelerator", "backends")

# PyTorch's activations at the top level (torch.sigmoid, torch.softmax...): the
# nn.functional implementations, loaded on first use
_FUNCTIONAL = ("sigmoid", "softmax", "log_softmax", "relu", "selu", "celu", "cosine_similarity",
               "pairwise_distance", "conv1d", "conv2d", "dropout")

# PyTorch's dtype names that NumPy 2 does not define (looked up lazily, so that
# `from ember import *` never shadows the builtins float and int)
_TORCH_DTYPES = {"float": "float32", "int": "int32", "long": "int64", "short": "int16",
                 "cfloat": "complex64"}


def __getattr__(name):
    # the training layers load on first use, so `import ember` stays quick
    if name in ("save", "load"):
        from ember import serialization
        return getattr(serialization, name)
    if name in _REFUSED_DTYPES:
        raise AttributeError(f"module 'ember' has no attribute {name!r}: ember supports numeric "
                             f"dtypes only (bool, integers, float16/32/64, bfloat16, complex64/"
                             f"128), not {_REFUSED_DTYPES[name]} ({name}); use float64 / "
                             f"complex128 for the widest floats")
    if name in _LAZY_SUBMODULES:
        import importlib
        return importlib.import_module("ember." + name)
    if name in _FUNCTIONAL:
        import importlib                # the training layer, loaded on first use like ember.nn
        functional = importlib.import_module("ember.nn.functional")
        if hasattr(functional, name):
            return getattr(functional, name)
    if _TORCH_DTYPES.get(name):
        return globals()[_TORCH_DTYPES[name]]
    if name == "manual_seed":           # PyTorch's seeding (ember.random owns the generators)
        return random.manual_seed
    raise AttributeError(f"module 'ember' has no attribute {name!r}")
