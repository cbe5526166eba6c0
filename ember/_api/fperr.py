"""Floating-point error handling settings: ``seterr``, ``geterr``, ``errstate``,
``seterrcall``, ``geterrcall`` with NumPy's signatures, values and scoping.

What is honoured: ember's kernels do not test the floating-point status flags (a
check per element, or per OpenMP thread, would slow every op), so division by
zero, overflow, underflow and invalid operations give IEEE results (inf, nan, 0)
silently, as under ``numpy.errstate(all='ignore')``.  ``geterr()`` therefore
reports 'ignore' for every category unless it is changed; a program that sets
'ignore' (the common case: ``with np.errstate(divide='ignore'):``) runs
unchanged.  Asking for 'warn', 'raise', 'call', 'print' or 'log' is recorded (so
``geterr``/``errstate`` round-trip as in NumPy) and warns once that ember does not
act on it.

>>> import ember
>>> with ember.errstate(divide="ignore"):
...     (ember.asarray([1.0]) / 0).tolist()
[inf]
"""
import contextlib
import contextvars
import warnings

# the functions here run unchanged on GPU arrays (views, ember ops, fresh arrays): the GPU
# dispatch (ember/cuda/_dispatch.py) runs them there when no GPU kernel is registered
DEVICE_GENERIC = True

__all__ = ["seterr", "geterr", "errstate", "seterrcall", "geterrcall"]

_CATEGORIES = ("divide", "over", "under", "invalid")
_MODES = ("ignore", "warn", "raise", "call", "print", "log")
_state = contextvars.ContextVar("ember_errstate",
                                default=({c: "ignore" for c in _CATEGORIES}, None))
_warned = set()


def geterr():
    """The current handling of floating-point errors (NumPy's ``geterr``).

    >>> import ember
    >>> ember.geterr()
    {'divide': 'ignore', 'over': 'ignore', 'under': 'ignore', 'invalid': 'ignore'}
    """
    return dict(_state.get()[0])


def _merged(all, divide, over, under, invalid):
    new = dict(_state.get()[0])
    if all is not None:
        new = {c: all for c in _CATEGORIES}
    for c, v in zip(_CATEGORIES, (divide, over, under, invalid)):
        if v is not None:
            new[c] = v
    for c, v in new.items():
        if v not in _MODES:
            raise ValueError(f"seterr: invalid mode {v!r} for {c!r}; expected one of "
                             f"{', '.join(_MODES)}")
    unheeded = [c for c, v in new.items() if v != "ignore" and c not in _warned]
    if unheeded:
        _warned.update(unheeded)
        warnings.warn(f"ember does not detect floating-point errors ({', '.join(unheeded)}): "
                      f"its kernels give IEEE results (inf, nan, 0) silently; the modes are "
                      f"recorded (geterr reports them) but not acted on", RuntimeWarning,
                      stacklevel=4)
    return new


def seterr(all=None, divide=None, over=None, under=None, invalid=None):
    """Set the handling of floating-point errors; returns the old settings (NumPy's
    ``seterr``; see the module notes for what ember acts on).

    >>> import ember
    >>> old = ember.seterr(all="ignore"); ember.seterr(**old)["divide"]
    'ignore'
    """
    old, call = _state.get()
    _state.set((_merged(all, divide, over, under, invalid), call))
    return dict(old)


def seterrcall(func):
    """Set the callback for the 'call' mode (or an object with ``write`` for 'log');
    returns the old one (NumPy's ``seterrcall``).

    >>> import ember
    >>> ember.seterrcall(None) is None
    True
    """
    if func is not None and not callable(func) and not callable(getattr(func, "write", None)):
        raise ValueError("seterrcall: only callable objects or objects with a write method "
                         "can be used")
    modes, old = _state.get()
    _state.set((modes, func))
    return old


def geterrcall():
    """The current callback for the 'call' mode (NumPy's ``geterrcall``).

    >>> import ember
    >>> ember.geterrcall() is None
    True
    """
    return _state.get()[1]


class errstate(contextlib.ContextDecorator):
    """Floating-point error handling for a ``with`` block or a decorated function
    (NumPy's ``errstate``; the settings are per thread and per asyncio task).

    >>> import ember
    >>> with ember.errstate(all="ignore"):
    ...     ember.geterr()["over"]
    'ignore'
    """

    def __init__(self, *, call=None, all=None, divide=None, over=None, under=None,
                 invalid=None):
        self._call = call
        self._kw = (all, divide, over, under, invalid)
        self._tokens = []

    def __enter__(self):
        modes, call = _state.get()
        new = _merged(*self._kw)
        self._tokens.append(_state.set((new, call if self._call is None else self._call)))
        return self

    def __exit__(self, *exc):
        _state.reset(self._tokens.pop())
        return False
