"""ember.lib: NumPy's ``numpy.lib`` submodules that ember provides
(``ember.lib.stride_tricks``).

>>> from ember.lib.stride_tricks import sliding_window_view
>>> sliding_window_view(__import__("ember").arange(4), 2).tolist()
[[0, 1], [1, 2], [2, 3]]
"""
from ember.lib import stride_tricks  # noqa: F401

__all__ = ["stride_tricks"]
