"""The public array API, one module per family of functions.

Each module lists its public names in ``__all__``; ``ember/__init__.py``
re-exports them.  Functions here validate arguments and dispatch to the
Cython layer (ember._core, ember._kernels); they never loop over elements.
"""
