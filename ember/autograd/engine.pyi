# Type stubs for ember.autograd.engine (compiled): graph nodes and the backward pass.
from typing import Any, Callable, final

from typing_extensions import disjoint_base

from ember._core.array import ndarray

@disjoint_base
class Node:
    """A step of the recorded graph (``grad_fn`` of arrays that ops produced)."""
    next_nodes: tuple[Node | None, ...]
    next_nrs: tuple[int, ...]
    num_outputs: int
    pre_hooks: list[tuple[int, Callable[[ndarray], ndarray | None]]] | None
    released: bool
    creation_trace: Any
    out_meta: Any
    def apply(self, grads: list[ndarray | None]) -> list[ndarray | None]: ...
    @property
    def name(self) -> str: ...
    @property
    def next_functions(self) -> tuple[tuple[Node | None, int], ...]: ...
    def register_prehook(self, fn: Callable[[ndarray], ndarray | None]) -> _RemovableHandle: ...

@final
class AccumulateGrad(Node):
    """The node of a leaf: adds what reaches it into ``leaf.grad``."""
    leaf_ref: Callable[[], ndarray | None]      # a weakref to the leaf
    @property
    def variable(self) -> ndarray | None: ...

@disjoint_base
class _RemovableHandle:
    def __init__(self, container: list[Any], entry: object) -> None: ...
    def remove(self) -> None: ...

@final
class Rule:
    """An op's gradient rule: ``fn(grad, result, *args, **kwargs)`` returns one gradient
    per positional argument."""
    fn: Callable[..., Any]
    name: str
    save_args: bool
    save_result: bool
    save_cross: bool
    forward: Callable[..., Any] | None
    def __init__(self, fn: Callable[..., Any], name: str, save_args: bool = True,
                 save_result: bool = False) -> None: ...

@final
class RuleNode(Node):
    """The node of an op with a gradient rule."""
    rule: Rule
    @property
    def args(self) -> tuple[Any, ...] | None: ...
    @property
    def result(self) -> Any: ...

@final
class CallableNode(Node):
    """A node whose backward is a Python callable (custom Functions, in-place on views)."""
    fn: Callable[[list[ndarray | None]], Any]
    _name: str
    slot_meta: tuple[Any, ...]
    on_release: Callable[[], object] | None

@disjoint_base
class GradMeta:
    """Per-array autograd extras: the leaf's AccumulateGrad, retain_grad, hooks."""
    accumulator: AccumulateGrad | None
    retains_grad: bool
    post_accumulate_hooks: list[Callable[[ndarray], object]] | None

@final
class ArrayMeta:
    """What a rule that does not keep an input sees of it: shape and dtype."""
    @property
    def shape(self) -> tuple[int, ...]: ...
    @property
    def dtype(self) -> Any: ...
    @property
    def requires_grad(self) -> bool: ...
    @property
    def ndim(self) -> int: ...
    @property
    def size(self) -> int: ...

def attach(name: str, fn: Callable[[list[ndarray | None]], Any], inputs: Any, outputs: Any,
           out_meta: Any = None, on_release: Callable[[], object] | None = None) -> CallableNode | None: ...
def run_backward(outputs: tuple[ndarray, ...], grads: tuple[ndarray | None, ...], keep_graph: bool,
                 create_graph: bool, inputs: tuple[ndarray, ...] | None = None,
                 accumulate: bool = True, allow_unused: bool = True) -> list[ndarray | None] | None: ...
