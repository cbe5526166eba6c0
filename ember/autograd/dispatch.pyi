# Type stubs for ember.autograd.dispatch (compiled): the autograd-aware entry of every
# public ember function.
from collections.abc import Callable
from typing import Any, final

from ember.autograd.engine import Rule

@final
class DiffOp:
    """A public ember function with its gradient rule (``rule`` None: no gradient)."""
    fn: Callable[..., Any]
    rule: Rule | None
    name: str
    nondiff: bool
    __wrapped__: Callable[..., Any]
    def __init__(self, fn: Callable[..., Any], name: str, rule: Rule | None = None,
                 nondiff: bool = False) -> None: ...
    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...
    def __reduce__(self) -> tuple[Callable[[str], Any], tuple[str]]: ...
    def _on_host(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any: ...

def _set_gpu_dispatch(fn: Callable[[DiffOp, tuple[Any, ...], dict[str, Any]], Any] | None) -> None: ...
def _set_autocast(fn: Callable[[str, tuple[Any, ...], dict[str, Any]],
                               tuple[tuple[Any, ...], dict[str, Any]]] | None) -> None: ...
def _public(name: str) -> Any: ...
