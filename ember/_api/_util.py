"""The small helpers the API modules share; they live in ember._core.util (the GPU backend
uses them too, and it sits under this layer)."""
from ember._core.util import *          # noqa: F401,F403
from ember._core.util import __all__    # noqa: F401
