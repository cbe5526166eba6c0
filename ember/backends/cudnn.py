"""``torch.backends.cudnn``: the switches of ember's cuDNN convolutions and batch norm.

* ``enabled`` (True): GPU convolutions and batch norm run through cuDNN where it is
  installed and takes the configuration; False runs ember's own kernels.
* ``benchmark`` (False): True times every cuDNN algorithm once per configuration and
  keeps the fastest; False takes cuDNN's heuristic choice.
* ``deterministic`` (False): True restricts cuDNN to algorithms it reports
  deterministic (ember's own kernels always are).
* ``allow_tf32`` (True): float32 convolutions may use TF32 tensor cores.

They are read at each call, as in PyTorch.  ``flags(...)`` sets them for a ``with``
block.

>>> import ember
>>> ember.backends.cudnn.deterministic = True
>>> ember.backends.cudnn.deterministic
True
>>> ember.backends.cudnn.deterministic = False
>>> with ember.backends.cudnn.flags(enabled=False):
...     ember.backends.cudnn.enabled
False
>>> ember.backends.cudnn.enabled
True
"""
import contextlib
import sys
import types

# (the switches are module attributes served by _Module below, not names to import)
__all__ = ["is_available", "version", "flags"]

_SWITCHES = ("enabled", "benchmark", "deterministic", "allow_tf32")


def _flags():
    from ember.cuda._cudnn import FLAGS
    return FLAGS


def is_available():
    """True when cuDNN can be used: a usable GPU and cuDNN 9 loaded (the ``cuda`` extra's
    ``nvidia-cudnn-cu13``, or the system's).

    >>> import ember
    >>> isinstance(ember.backends.cudnn.is_available(), bool)
    True
    """
    import ember.cuda
    if not ember.cuda.is_available():
        return False
    from ember.cuda import _cudnn_lib
    return _cudnn_lib.lib() is not None


def version():
    """cuDNN's version as an int (90800 for 9.8.0), or None when it is not available.

    >>> import ember
    >>> v = ember.backends.cudnn.version()
    >>> v is None or v >= 90000
    True
    """
    if not is_available():
        return None
    from ember.cuda import _cudnn_lib
    return _cudnn_lib.version()


@contextlib.contextmanager
def flags(enabled=False, benchmark=False, deterministic=False, allow_tf32=True):
    """Set the four switches inside a ``with`` block, and restore them after (PyTorch's
    ``torch.backends.cudnn.flags``, same defaults).

    >>> import ember
    >>> with ember.backends.cudnn.flags(enabled=True, deterministic=True):
    ...     ember.backends.cudnn.deterministic
    True
    """
    f = _flags()
    old = tuple(getattr(f, k) for k in _SWITCHES)
    for k, v in zip(_SWITCHES, (enabled, benchmark, deterministic, allow_tf32)):
        setattr(f, k, bool(v))
    try:
        yield
    finally:
        for k, v in zip(_SWITCHES, old):
            setattr(f, k, v)


class _Module(types.ModuleType):
    """The switches as module attributes that read and write ember.cuda's state."""

    def __getattr__(self, name):
        if name in _SWITCHES:
            return getattr(_flags(), name)
        raise AttributeError(f"module 'ember.backends.cudnn' has no attribute {name!r}")

    def __setattr__(self, name, value):
        if name in _SWITCHES:
            setattr(_flags(), name, bool(value))
        else:
            super().__setattr__(name, value)

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(_SWITCHES))


sys.modules[__name__].__class__ = _Module
