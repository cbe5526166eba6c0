"""The connections made when the GPU backend starts.

``ember.cuda`` sits under the namespace and autograd (imports only go downward), so
it cannot hand its dispatcher to them itself.  The upper layers say here what they
want connected (``on_gpu_start(fn)``), and ember.cuda calls ``gpu_started(call)``
once its runtime is up: each ``fn(call)`` runs then (or at once when the backend
is already up).  ``call(op, args, kwargs)`` runs a public op on GPU arrays.

>>> from ember._core import gpu_hooks
>>> isinstance(gpu_hooks.started(), bool)
True
"""
import importlib

#: The package that provides the GPU backend: a plugin under the namespace, loaded by
#: name the first time a CUDA device is asked for (``import ember`` never loads it).
GPU_BACKEND = "ember.cuda"

_connectors = []
_call = None


def on_gpu_start(fn):
    """Run ``fn(call)`` when the GPU backend starts (now if it has started)."""
    _connectors.append(fn)
    if _call is not None:
        fn(_call)


def gpu_started(call):
    """Called by ember.cuda when its runtime is up, with its op dispatcher."""
    global _call
    _call = call
    for fn in _connectors:
        fn(call)


_host_tables = {}


def provide_host_functions(family, module):
    """An upper-layer module offers its functions to the GPU backend, which builds their
    GPU forms from them (ember._api.reductions -> ember.cuda.ops_reduce)."""
    _host_tables[family] = module


def host_functions(family):
    """The module offered for `family` (KeyError if none was)."""
    return _host_tables[family]


def start_gpu_backend(opname, device):
    """Load and start the GPU backend for `device` (asked for by op `opname`); a clear
    RuntimeError when CUDA is not usable here."""
    backend = importlib.import_module(GPU_BACKEND)
    if not backend.is_available():
        raise RuntimeError(f"{opname}: device {device} is not available, CUDA is not usable "
                           f"here: {backend._unavailable_reason()}")
    backend._init()


def started():
    """Whether the GPU backend has started."""
    return _call is not None
