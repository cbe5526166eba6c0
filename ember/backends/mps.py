"""``torch.backends.mps``: ember has no Metal (Apple GPU) backend.

>>> import ember
>>> ember.backends.mps.is_available(), ember.backends.mps.is_built()
(False, False)
"""


def is_available():
    """Always False: ember has no Metal backend."""
    return False


def is_built():
    """Always False: ember has no Metal backend."""
    return False
