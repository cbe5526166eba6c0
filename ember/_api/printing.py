"""Print options for ember arrays: ``set_printoptions``, ``get_printoptions`` and the
``printoptions`` context manager, with NumPy's keywords and meanings.

ember prints through NumPy's formatter, under ember's own options: setting them
changes how ember arrays print, not how NumPy's do.  Until they are set, ember
arrays print with NumPy's current options.

>>> import ember
>>> with ember.printoptions(precision=2):
...     print(ember.asarray([3.14159], dtype=ember.float64))
[3.14]
"""
import contextlib

import numpy as np

from ember._core import array as _array

__all__ = ["set_printoptions", "get_printoptions", "printoptions"]

def get_printoptions():
    """The current print options (a dict with NumPy's keys).

    >>> import ember
    >>> ember.get_printoptions()["precision"]
    8
    """
    opts = _array._get_print_options()
    return dict(np.get_printoptions() if opts is None else opts)


def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None,
                     suppress=None, nanstr=None, infstr=None, formatter=None, sign=None,
                     floatmode=None, *, legacy=None, override_repr=None):
    """Set how ember arrays print (NumPy's ``set_printoptions``: None leaves an option
    as it is; bad values raise NumPy's errors).

    >>> import ember
    >>> ember.set_printoptions(precision=3)
    >>> print(ember.asarray([1 / 3], dtype=ember.float64))
    [0.333]
    >>> ember.set_printoptions(precision=8)
    """
    given = dict(precision=precision, threshold=threshold, edgeitems=edgeitems,
                 linewidth=linewidth, suppress=suppress, nanstr=nanstr, infstr=infstr,
                 formatter=formatter, sign=sign, floatmode=floatmode, legacy=legacy,
                 override_repr=override_repr)
    opts = get_printoptions()
    opts.update({k: v for k, v in given.items() if v is not None})
    opts["formatter"], opts["override_repr"] = formatter, override_repr   # NumPy resets these
    with np.printoptions(**opts):       # NumPy validates them and fills in the rest
        full = np.get_printoptions()
    _array._set_print_options(full)


@contextlib.contextmanager
def printoptions(*args, **kwargs):
    """Print options for a ``with`` block (NumPy's ``printoptions``); it yields the
    options in force inside.

    >>> import ember
    >>> with ember.printoptions(precision=1) as opts:
    ...     opts["precision"]
    1
    """
    saved = _array._get_print_options()
    set_printoptions(*args, **kwargs)
    try:
        yield get_printoptions()
    finally:
        _array._set_print_options(saved)
