"""Grad mode: whether ops record for autograd, per thread.

``no_grad``, ``enable_grad``, ``set_grad_enabled`` and ``inference_mode`` are
context managers and decorators, as in PyTorch.
"""
import functools
import threading

from ember._core import array as _array

__all__ = ["no_grad", "enable_grad", "set_grad_enabled", "inference_mode", "is_grad_enabled",
           "is_inference_mode_enabled"]


def is_grad_enabled():
    """True when ops on arrays that require grad are recorded (this thread).

    >>> import ember
    >>> ember.is_grad_enabled()
    True
    """
    return _array._is_grad_enabled()


class _Mode:
    """Base of the grad-mode context managers: sets a mode on entry, restores on exit."""
    _enabled = True

    def __enter__(self):
        self._prev = _array._set_grad_enabled(self._enabled)
        return self

    def __exit__(self, *exc):
        _array._set_grad_enabled(self._prev)
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.clone():
                return fn(*args, **kwargs)
        return wrapper

    def clone(self):
        return type(self)()


class no_grad(_Mode):
    """Ops inside do not record (their results do not require grad).

    >>> import ember
    >>> w = ember.ones(3, requires_grad=True)
    >>> with ember.no_grad():
    ...     y = w * 2
    >>> y.requires_grad
    False
    """
    _enabled = False


class enable_grad(_Mode):
    """Record again inside a ``no_grad`` block.

    >>> import ember
    >>> w = ember.ones(3, requires_grad=True)
    >>> with ember.no_grad():
    ...     with ember.enable_grad():
    ...         y = w * 2
    >>> y.requires_grad
    True
    """
    _enabled = True


class set_grad_enabled(_Mode):
    """Set grad mode to `mode` (a function call, a context manager or a decorator).

    >>> import ember
    >>> with ember.set_grad_enabled(False):
    ...     ember.is_grad_enabled()
    False
    """

    def __init__(self, mode):
        self._enabled = bool(mode)
        self._prev = _array._set_grad_enabled(self._enabled)   # takes effect as a plain call too

    def __enter__(self):
        return self

    def clone(self):
        return set_grad_enabled(self._enabled)


_inference = threading.local()


class inference_mode(_Mode):
    """Like ``no_grad``, for code that never needs gradients (``mode=False`` is a no-op).

    >>> import ember
    >>> with ember.inference_mode():
    ...     (ember.ones(2, requires_grad=True) * 3).requires_grad
    False
    """

    def __init__(self, mode=True):
        self._mode = bool(mode)
        self._enabled = not self._mode if self._mode else _array._is_grad_enabled()

    def __enter__(self):
        if not self._mode:
            self._prev = _array._is_grad_enabled()
            return self
        self._prev_inf = getattr(_inference, "on", False)
        _inference.on = True
        return super().__enter__()

    def __exit__(self, *exc):
        if self._mode:
            _inference.on = self._prev_inf
        return super().__exit__(*exc)

    def clone(self):
        return inference_mode(self._mode)


def is_inference_mode_enabled():
    """True inside ``ember.inference_mode()``.

    >>> import ember
    >>> ember.is_inference_mode_enabled()
    False
    """
    return getattr(_inference, "on", False)
