"""The CuPy module, imported on first use (``import ember`` never imports CuPy).

>>> from ember.cuda._cupy import cp
>>> callable(cp)
True
"""
_cp = None


def cp():
    """The cupy module (imported on first use)."""
    global _cp
    if _cp is None:
        import cupy
        _cp = cupy
    return _cp
