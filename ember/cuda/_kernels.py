"""ember's CUDA kernels at run time: each ``kernels/<family>.cu`` is compiled once per
device by NVRTC (``cupy.RawModule``; CuPy also caches the binary on disk, so a
later process skips the compiler), and kernels are looked up by name once.  They are launched with ``_runtime.launch``.
"""
from ember.cuda import _sources as _src
from ember.cuda._cupy import cp

_FAMILY_OF = {name: family for family in _src.FAMILIES for name in _src.kernel_names(family)}
_modules = {}       # (device, family) -> cupy.RawModule
_functions = {}     # (device, kernel name) -> (CUfunction address, Function kept alive)


def module(family, device):
    key = (device, family)
    mod = _modules.get(key)
    if mod is None:
        mod = cp().RawModule(code=_src.kernel_source(family), options=_src.nvrtc_options())
        _modules[key] = mod
    return mod


def function(name, dev=None):
    """The CUfunction address of kernel `name` on device dev (default: the current one)."""
    if dev is None:
        dev = cp().cuda.runtime.getDevice()
    entry = _functions.get((dev, name))
    if entry is None:
        family = _FAMILY_OF.get(name)
        if family is None:
            raise KeyError(f"ember.cuda: no kernel named {name!r} in ember/cuda/kernels")
        kernel = module(family, dev).get_function(name)      # a cupy RawKernel
        fn = getattr(kernel, "kernel", kernel)                # its compiled Function
        entry = (fn.ptr, kernel)
        _functions[(dev, name)] = entry
    return entry[0]

