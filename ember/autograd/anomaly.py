"""Anomaly detection: find the forward op whose backward produced NaN."""
from ember.autograd import engine as _engine

__all__ = ["detect_anomaly", "set_detect_anomaly", "is_anomaly_enabled"]


class detect_anomaly:
    """Inside, every recorded op remembers the stack where it ran, and backward
    raises as soon as a node's gradients contain NaN, naming the node and
    showing that stack.  Slow: for debugging.

    >>> import ember
    >>> x = ember.asarray([0.0], requires_grad=True)
    >>> with ember.autograd.detect_anomaly():
    ...     y = ember.sqrt(x) * 0.0
    ...     try:
    ...         y.sum().backward()
    ...     except RuntimeError as e:
    ...         print(str(e).splitlines()[0])
    Function 'SqrtBackward' returned nan values in its output; the forward op was created here:
    """

    def __init__(self, check_nan=True):
        self.check_nan = check_nan

    def __enter__(self):
        self._prev = _engine._set_anomaly(self.check_nan)
        return self

    def __exit__(self, *exc):
        _engine._set_anomaly(self._prev)
        return False


class set_detect_anomaly(detect_anomaly):
    """Turn anomaly detection on or off (a plain call, or a context manager).

    >>> import ember
    >>> with ember.autograd.set_detect_anomaly(True):
    ...     ember.autograd.anomaly.is_anomaly_enabled()
    True
    """

    def __init__(self, mode, check_nan=True):
        self.check_nan = bool(mode) and check_nan
        self._prev = _engine._set_anomaly(self.check_nan)

    def __enter__(self):
        return self


def is_anomaly_enabled():
    """True while anomaly detection is on."""
    return _engine._anomaly_enabled()
