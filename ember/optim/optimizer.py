"""Optimizer: the base class of ember's optimizers (PyTorch's API and state layout)."""
import copy
import functools
import itertools
import warnings
from collections import OrderedDict
from collections.abc import Iterable, Mapping, MutableMapping

import numpy as np

from ember._core.array import ndarray
from ember._core.dtypes import dtype_kind, is_half_dtype

__all__ = ["Optimizer", "register_optimizer_step_pre_hook",
           "register_optimizer_step_post_hook"]


class _RequiredParameter:
    """Singleton marking a hyperparameter that every group must give."""

    def __repr__(self):
        return "<required parameter>"


required = _RequiredParameter()


class RemovableHandle:
    """Handle returned by the ``register_*_hook`` methods; ``remove()`` unregisters."""

    _next_id = 0

    def __init__(self, hooks_dict):
        self._hooks = hooks_dict
        self.id = RemovableHandle._next_id
        RemovableHandle._next_id += 1

    def remove(self):
        if self._hooks is not None:
            self._hooks.pop(self.id, None)
            self._hooks = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


_global_optimizer_pre_hooks = OrderedDict()
_global_optimizer_post_hooks = OrderedDict()


def register_optimizer_step_pre_hook(hook):
    """Register a pre hook run before every optimizer's ``step``:
    ``hook(optimizer, args, kwargs) -> None or (new_args, new_kwargs)``."""
    handle = RemovableHandle(_global_optimizer_pre_hooks)
    _global_optimizer_pre_hooks[handle.id] = hook
    return handle


def register_optimizer_step_post_hook(hook):
    """Register a post hook run after every optimizer's ``step``:
    ``hook(optimizer, args, kwargs) -> None``."""
    handle = RemovableHandle(_global_optimizer_post_hooks)
    _global_optimizer_post_hooks[handle.id] = hook
    return handle


def _kid(key):
    # arrays are unhashable (NumPy semantics): parameters are keyed by identity
    return id(key) if isinstance(key, ndarray) else ("key", key)


class ParamState(MutableMapping):
    """``optimizer.state``: per-parameter state dicts keyed by the parameter
    itself (by identity, since arrays are unhashable).  Like torch's
    ``defaultdict(dict)``, ``state[p]`` creates an empty dict on first access;
    ``get`` and ``in`` do not."""

    __slots__ = ("_data", "_keys")

    def __init__(self, items=()):
        self._data = {}     # key id -> state dict (the kernels read this)
        self._keys = {}     # key id -> key object (keeps it alive)
        for k, v in (items.items() if isinstance(items, Mapping) else items):
            self[k] = v

    def __getitem__(self, key):
        kid = _kid(key)
        try:
            return self._data[kid]
        except KeyError:
            v = self._data[kid] = {}
            self._keys[kid] = key
            return v

    def get(self, key, default=None):
        return self._data.get(_kid(key), default)

    def __contains__(self, key):
        return _kid(key) in self._data

    def __setitem__(self, key, value):
        kid = _kid(key)
        self._data[kid] = value
        self._keys[kid] = key

    def __delitem__(self, key):
        kid = _kid(key)
        del self._data[kid]
        del self._keys[kid]

    def __iter__(self):
        return iter(list(self._keys.values()))

    def __len__(self):
        return len(self._data)

    def items(self):
        return [(self._keys[k], v) for k, v in self._data.items()]

    def values(self):
        return list(self._data.values())

    def keys(self):
        return list(self._keys.values())

    def clear(self):
        self._data.clear()
        self._keys.clear()

    def __repr__(self):
        return "ParamState({" + ", ".join(
            f"<{type(k).__name__} shape={getattr(k, 'shape', None)}>: {v!r}"
            for k, v in self.items()) + "})"

    def __reduce__(self):
        # keys pickle with the parameters they are (the pickle memo keeps identity)
        return (ParamState, (self.items(),))


def _hook_step(step):
    """Wrap a subclass's ``step`` so step pre/post hooks run (cheaply skipped
    when none is registered) and schedulers can see that it was called."""
    @functools.wraps(step)
    def wrapper(self, *args, **kwargs):
        self._opt_called = True
        if not (self._optimizer_step_pre_hooks or self._optimizer_step_post_hooks
                or _global_optimizer_pre_hooks or _global_optimizer_post_hooks) \
                or self.__dict__.get("_in_hooked_step"):
            # no hooks, or a subclass's step calling super().step(): hooks run once
            return step(self, *args, **kwargs)
        self._in_hooked_step = True
        try:
            return _run_hooked(self, step, args, kwargs)
        finally:
            self._in_hooked_step = False
    wrapper._ember_hooked = True
    wrapper._wrapped_by_lr_sched = True
    return wrapper


def _run_hooked(self, step, args, kwargs):
    for pre_hook in itertools.chain(_global_optimizer_pre_hooks.values(),
                                    self._optimizer_step_pre_hooks.values()):
        result = pre_hook(self, args, kwargs)
        if result is not None:
            if isinstance(result, tuple) and len(result) == 2:
                args, kwargs = result
            else:
                raise RuntimeError(f"{step} must return None or a tuple of "
                                   f"(new_args, new_kwargs), but got {result}.")
    out = step(self, *args, **kwargs)
    for post_hook in itertools.chain(self._optimizer_step_post_hooks.values(),
                                     _global_optimizer_post_hooks.values()):
        post_hook(self, args, kwargs)
    return out


def _to_ember(value, dtype=None):
    """A contiguous ember copy of an array-like (ember, NumPy, torch...)."""
    import ember
    if isinstance(value, ndarray):
        a = value.detach() if value.requires_grad else value
        out = ember.array(a, dtype=dtype if dtype is not None else a.dtype, copy=True)
    else:
        if hasattr(value, "detach") and hasattr(value, "numpy"):   # a torch tensor
            value = value.detach().cpu().numpy()
        out = ember.array(np.array(np.asarray(value), dtype=dtype), copy=True)
    return ember.ascontiguousarray(out)


def _is_array_like(value):
    return isinstance(value, ndarray) or (
        hasattr(value, "__array__") and not isinstance(value, (str, bytes, dict)))


class Optimizer:
    r"""Base class of all optimizers (PyTorch's ``torch.optim.Optimizer``).

    Args:
        params: an iterable of arrays (usually ``model.parameters()``), of
            ``(name, array)`` pairs, or of dicts defining parameter groups
            (``{"params": [...], "lr": 0.1, ...}``) with per-group options.
        defaults: the default value of every option, used where a group
            does not give one.

    Subclasses implement ``step``.  ``state`` maps each parameter to its
    state dict; ``param_groups`` is a list of dicts; ``state_dict()`` /
    ``load_state_dict()`` use PyTorch's layout (parameters replaced by
    their index).

    >>> import ember
    >>> w = ember.asarray([1.0, 2.0], requires_grad=True)
    >>> opt = ember.optim.SGD([w], lr=0.5)
    >>> (w * w).sum().backward()
    >>> opt.step(); w.tolist()
    [0.0, 0.0]
    >>> opt.zero_grad(); w.grad is None
    True
    """

    #: group options an older saved state may lack, with the defaults they take on load
    _group_defaults_on_load = {}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        step = cls.__dict__.get("step")
        if step is not None and not getattr(step, "_ember_hooked", False):
            cls.step = _hook_step(step)

    def __init__(self, params, defaults):
        self.defaults = defaults
        self._optimizer_step_pre_hooks = OrderedDict()
        self._optimizer_step_post_hooks = OrderedDict()
        self._optimizer_state_dict_pre_hooks = OrderedDict()
        self._optimizer_state_dict_post_hooks = OrderedDict()
        self._optimizer_load_state_dict_pre_hooks = OrderedDict()
        self._optimizer_load_state_dict_post_hooks = OrderedDict()
        if isinstance(params, ndarray):
            raise TypeError("params argument given to the optimizer should be an iterable of "
                            "arrays or dicts, but got " + type(params).__name__)
        if isinstance(params, dict):
            raise TypeError("params argument given to the optimizer should be an iterable of "
                            "arrays or dicts (a list of param groups), but got a dict; "
                            "wrap it in a list")
        self.state = ParamState()
        self.param_groups = []
        param_groups = list(params)
        if len(param_groups) == 0:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(param_groups[0], dict):
            param_groups = [{"params": param_groups}]
        for param_group in param_groups:
            self.add_param_group(param_group)

    # ------------------------------------------------------------ pickling
    def __getstate__(self):
        return {"defaults": self.defaults, "state": self.state,
                "param_groups": self.param_groups}

    def __setstate__(self, state):
        self.__dict__.update(state)
        for name in ("_optimizer_step_pre_hooks", "_optimizer_step_post_hooks",
                     "_optimizer_state_dict_pre_hooks", "_optimizer_state_dict_post_hooks",
                     "_optimizer_load_state_dict_pre_hooks",
                     "_optimizer_load_state_dict_post_hooks"):
            if name not in self.__dict__:
                setattr(self, name, OrderedDict())
        if not isinstance(self.state, ParamState):
            self.state = ParamState(self.state)
        self.defaults.setdefault("differentiable", False)
        # options added after a state was saved get their defaults (PyTorch's pickles too)
        for group in self.param_groups:
            for key, value in self._group_defaults_on_load.items():
                group.setdefault(key, value)

    def __repr__(self):
        s = self.__class__.__name__ + " ("
        for i, group in enumerate(self.param_groups):
            s += f"\nParameter Group {i}\n"
            for key in sorted(group.keys()):
                if key != "params":
                    s += f"    {key}: {group[key]}\n"
        return s + ")"

    # --------------------------------------------------------------- hooks
    def register_step_pre_hook(self, hook):
        """``hook(optimizer, args, kwargs) -> None or (new_args, new_kwargs)``,
        run before each ``step``; returns a handle with ``remove()``."""
        handle = RemovableHandle(self._optimizer_step_pre_hooks)
        self._optimizer_step_pre_hooks[handle.id] = hook
        return handle

    def register_step_post_hook(self, hook):
        """``hook(optimizer, args, kwargs) -> None``, run after each ``step``."""
        handle = RemovableHandle(self._optimizer_step_post_hooks)
        self._optimizer_step_post_hooks[handle.id] = hook
        return handle

    def _register(self, hooks, hook, prepend):
        handle = RemovableHandle(hooks)
        hooks[handle.id] = hook
        if prepend:
            hooks.move_to_end(handle.id, last=False)
        return handle

    def register_state_dict_pre_hook(self, hook, prepend=False):
        """``hook(optimizer) -> None``, run before ``state_dict()`` builds its result."""
        return self._register(self._optimizer_state_dict_pre_hooks, hook, prepend)

    def register_state_dict_post_hook(self, hook, prepend=False):
        """``hook(optimizer, state_dict) -> state_dict or None``, run on the result
        of ``state_dict()``."""
        return self._register(self._optimizer_state_dict_post_hooks, hook, prepend)

    def register_load_state_dict_pre_hook(self, hook, prepend=False):
        """``hook(optimizer, state_dict) -> state_dict or None``, run before loading."""
        return self._register(self._optimizer_load_state_dict_pre_hooks, hook, prepend)

    def register_load_state_dict_post_hook(self, hook, prepend=False):
        """``hook(optimizer) -> None``, run after loading."""
        return self._register(self._optimizer_load_state_dict_post_hooks, hook, prepend)

    # ---------------------------------------------------------- state dict
    def state_dict(self):
        """The optimizer's state as a dict with PyTorch's layout.

        ``{"state": {index: {...per-parameter state...}},
        "param_groups": [{...options..., "params": [indices]}]}`` where the
        indices number the parameters in group order.  The state arrays are
        the optimizer's own (not copies), as in PyTorch.

        >>> import ember
        >>> w = ember.zeros(3, requires_grad=True)
        >>> opt = ember.optim.Adam([w], lr=0.1)
        >>> w.grad = ember.ones(3); opt.step()
        >>> sd = opt.state_dict()
        >>> sorted(sd["state"][0]), sd["param_groups"][0]["params"]
        (['exp_avg', 'exp_avg_sq', 'step'], [0])
        """
        for pre_hook in self._optimizer_state_dict_pre_hooks.values():
            pre_hook(self)
        param_mappings = {}
        start_index = 0

        def pack_group(group):
            nonlocal start_index
            packed = {k: v for k, v in group.items() if k != "params"}
            for i, p in enumerate(group["params"], start_index):
                if id(p) not in param_mappings:
                    param_mappings[id(p)] = i
            packed["params"] = [param_mappings[id(p)] for p in group["params"]]
            start_index += len(packed["params"])
            return packed

        param_groups = [pack_group(g) for g in self.param_groups]
        packed_state = {(param_mappings[id(k)] if isinstance(k, ndarray) else k): v
                        for k, v in self.state.items()}
        state_dict = {"state": packed_state, "param_groups": param_groups}
        for post_hook in self._optimizer_state_dict_post_hooks.values():
            result = post_hook(self, state_dict)
            if result is not None:
                state_dict = result
        return state_dict

    def _cast_state_value(self, param, value, key):
        if key == "step":
            # the step counter keeps its own dtype (torch never casts it)
            return _to_ember(value) if _is_array_like(value) else value
        if isinstance(value, dict):
            return {k: self._cast_state_value(param, v, k) for k, v in value.items()}
        if _is_array_like(value) and not isinstance(value, (list, tuple)):
            dtype = param.dtype if dtype_kind(param.dtype) == "f" else None
            if dtype is not None and is_half_dtype(dtype):
                dtype = np.dtype(np.float32)    # 16-bit parameters keep float32 state
            return _to_ember(value, dtype)
        if isinstance(value, Iterable) and not isinstance(value, (str, bytes)):
            return type(value)(self._cast_state_value(param, v, None) for v in value)
        return value

    def load_state_dict(self, state_dict):
        """Load a state produced by ``state_dict()`` (of this or a PyTorch optimizer).

        The saved parameter groups are matched to this optimizer's in order;
        each must have the same number of parameters.  State arrays are
        copied and cast to their parameter's dtype (``step`` is kept as is).

        >>> import ember
        >>> w = ember.zeros(2, requires_grad=True)
        >>> opt = ember.optim.SGD([w], lr=0.1, momentum=0.9)
        >>> w.grad = ember.ones(2); opt.step()
        >>> opt2 = ember.optim.SGD([w], lr=0.1, momentum=0.9)
        >>> opt2.load_state_dict(opt.state_dict())
        >>> opt2.state[w]["momentum_buffer"]
        array([1., 1.], dtype=float32)
        """
        if not isinstance(state_dict, dict):
            raise TypeError(f"{type(self).__name__}.load_state_dict: expected a dict, got "
                            f"{type(state_dict).__name__}")
        state_dict = state_dict.copy()
        for pre_hook in self._optimizer_load_state_dict_pre_hooks.values():
            result = pre_hook(self, state_dict)
            if result is not None:
                state_dict = result
        for key in ("state", "param_groups"):
            if key not in state_dict:
                raise KeyError(f"{type(self).__name__}.load_state_dict: the state dict has no "
                               f"{key!r} entry")
        groups = self.param_groups
        saved_groups = copy.deepcopy(state_dict["param_groups"])
        if len(groups) != len(saved_groups):
            raise ValueError(f"loaded state dict has a different number of parameter groups "
                             f"({len(saved_groups)}) than the optimizer ({len(groups)})")
        for i, (g, sg) in enumerate(zip(groups, saved_groups)):
            if len(g["params"]) != len(sg["params"]):
                raise ValueError(
                    f"loaded state dict contains a parameter group that doesn't match the size "
                    f"of optimizer's group: group {i} has {len(sg['params'])} parameters in "
                    f"the state dict and {len(g['params'])} in the optimizer")
        id_map = dict(zip(itertools.chain.from_iterable(g["params"] for g in saved_groups),
                          itertools.chain.from_iterable(g["params"] for g in groups)))
        state = ParamState()
        for k, v in state_dict["state"].items():
            if k in id_map:
                param = id_map[k]
                state[param] = self._cast_state_value(param, v, None)
            else:
                state[k] = v

        def update_group(group, new_group):
            new_group["params"] = group["params"]
            if "param_names" in group and "param_names" not in new_group:
                new_group["param_names"] = group["param_names"]
            for name, default in self.defaults.items():
                if name not in new_group and default is not required:
                    new_group[name] = default
            return new_group

        param_groups = [update_group(g, ng) for g, ng in zip(groups, saved_groups)]
        self.__setstate__({"state": state, "param_groups": param_groups})
        for post_hook in self._optimizer_load_state_dict_post_hooks.values():
            post_hook(self)

    # ---------------------------------------------------------------- grads
    def zero_grad(self, set_to_none=True):
        """Reset the gradients of all optimized arrays: to None (default) or to zeros.

        >>> import ember
        >>> w = ember.ones(2, requires_grad=True)
        >>> (w * 3).sum().backward()
        >>> opt = ember.optim.SGD([w], lr=0.1)
        >>> opt.zero_grad(set_to_none=False); w.grad
        array([0., 0.], dtype=float32)
        """
        if set_to_none:
            for group in self.param_groups:
                for p in group["params"]:
                    p.grad = None
            return
        for group in self.param_groups:
            for p in group["params"]:
                g = p.grad
                if g is not None:
                    if g.grad_fn is not None:
                        g = g.detach()
                        p.grad = g
                    elif g.requires_grad:
                        g.requires_grad_(False)
                    if not g.flags.writeable:      # e.g. a broadcast gradient (create_graph)
                        p.grad = g = g.copy()
                    g.fill(0)

    def step(self, closure=None):
        """Perform one optimization step (subclasses implement it).

        closure: optional callable that re-evaluates the model and returns
        the loss; it runs with gradients enabled and its loss is returned.
        """
        raise NotImplementedError

    def add_param_group(self, param_group):
        """Add a parameter group (a dict with ``"params"`` and optional options).

        >>> import ember
        >>> a = ember.zeros(2, requires_grad=True); b = ember.zeros(3, requires_grad=True)
        >>> opt = ember.optim.SGD([a], lr=0.1)
        >>> opt.add_param_group({"params": [b], "lr": 0.01})
        >>> [g["lr"] for g in opt.param_groups]
        [0.1, 0.01]
        """
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group).__name__}")
        if "params" not in param_group:
            raise ValueError("param_group must have a 'params' entry")
        params = param_group["params"]
        if isinstance(params, ndarray):
            param_group["params"] = [params]
        elif isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, "
                            "but the ordering of arrays in sets will change between runs. "
                            "Please use a list instead.")
        else:
            param_group["params"] = list(params)

        tensors, names = [], []
        for param in param_group["params"]:
            if isinstance(param, tuple):
                names.append(param[0])
                tensors.append(param[1])
            else:
                tensors.append(param)
        param_group["params"] = tensors
        if names:
            if len(names) == len(tensors):
                param_group["param_names"] = names
            else:
                raise ValueError("all optimizer params should be with/without names. "
                                 "Some param names are missing")

        for param in param_group["params"]:
            if not isinstance(param, ndarray):
                raise TypeError("optimizer can only optimize ember arrays, but one of the "
                                "params is " + type(param).__module__ + "." +
                                type(param).__name__)
            if not self.defaults.get("differentiable", None) and not (
                    param.is_leaf or param.retains_grad):
                raise ValueError("can't optimize a non-leaf array (one computed from other "
                                 "arrays that require grad); optimize the leaves, or use "
                                 "x.detach().requires_grad_()")

        for name, default in self.defaults.items():
            if default is required and name not in param_group:
                raise ValueError(f"parameter group didn't specify a value of required "
                                 f"optimization parameter {name}")
            param_group.setdefault(name, default)

        params = param_group["params"]
        if len(params) != len({id(p) for p in params}):
            warnings.warn("optimizer contains a parameter group with duplicate parameters; "
                          "in future, this will cause an error; "
                          "see github.com/pytorch/pytorch/issues/40967 for more information",
                          stacklevel=3)
        param_set = set()
        for group in self.param_groups:
            param_set.update(id(p) for p in group["params"])
            if ("param_names" in param_group) != ("param_names" in group):
                txt = "with names" if "param_names" in param_group else "without names"
                raise ValueError("all optimizer param groups should be with/without names. "
                                 f"cannot add param group {txt} to the optimizer")
        if not param_set.isdisjoint(id(p) for p in param_group["params"]):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(param_group)
        self._groups_changed()

    def _groups_changed(self):
        """Subclass hook: a parameter group was added."""


def _run_closure(closure):
    import ember
    with ember.enable_grad():
        return closure()
