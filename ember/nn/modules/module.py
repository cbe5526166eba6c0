"""Module: the base class of every layer (PyTorch's ``torch.nn.Module`` API).

Assigning a ``Parameter``, a ``Module`` or (through ``register_buffer``) an array
to an attribute registers it; ``parameters()``, ``state_dict()``, ``to()``,
``train()``/``eval()`` and friends then walk the tree.  Calling a module runs its
forward pre-hooks, ``forward`` and forward hooks; with no hooks the call is one
attribute test and the ``forward`` call.

>>> import ember
>>> from ember import nn
>>> class Affine(nn.Module):
...     def __init__(self):
...         super().__init__()
...         self.scale = nn.Parameter(ember.ones(3))
...         self.register_buffer("shift", ember.zeros(3))
...     def forward(self, x):
...         return x * self.scale + self.shift
>>> m = Affine()
>>> [name for name, _ in m.named_parameters()], list(m.state_dict())
(['scale'], ['scale', 'shift'])
>>> m(ember.ones(3)).tolist()
[1.0, 1.0, 1.0]
"""
import itertools
import weakref
from collections import OrderedDict, namedtuple

import numpy as np

from ember._core.array import ndarray, Device, _set_data
from ember.nn.parameter import Parameter
from ember._core.dtypes import dtype_kind

__all__ = ["Module"]


# ---------------------------------------------------------------- helpers

class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    """What ``load_state_dict`` returns: the keys it did not find and those it did not use."""

    def __repr__(self):
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


class RemovableHandle:
    """A handle returned by the ``register_*_hook`` methods; ``remove()`` unregisters.

    Also a context manager: the hook is removed on exit.
    """
    _next_id = 0

    def __init__(self, hooks_dict, *extra_dicts):
        self.hooks_dict_ref = weakref.ref(hooks_dict)
        self.id = RemovableHandle._next_id
        RemovableHandle._next_id += 1
        self.extra_dict_refs = tuple(weakref.ref(d) for d in extra_dicts)

    def remove(self):
        for ref in (self.hooks_dict_ref,) + self.extra_dict_refs:
            d = ref()
            if d is not None and self.id in d:
                del d[self.id]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def _addindent(s, num_spaces):
    lines = s.split("\n")
    if len(lines) == 1:
        return s
    first = lines.pop(0)
    return first + "\n" + "\n".join(" " * num_spaces + line for line in lines)


def _check_cuda(device, opname):
    """A ``device=`` argument of a module: None for the host, else the checked CUDA
    Device (a clear error when CUDA is unavailable or the device is unknown)."""
    if device is None:
        return None
    name = str(device)
    if name == "cpu" or name.startswith("cpu:"):
        return None
    if not (isinstance(device, (Device, int)) or name.startswith("cuda")):
        raise RuntimeError(f"{opname}: unknown device {device!r}; expected 'cpu' or 'cuda'")
    from ember._core.array import check_device
    return check_device(device, opname)


def _as_value(v):
    """An ember array from a state-dict value (ember / NumPy arrays, torch tensors...)."""
    import ember
    if isinstance(v, ndarray):
        return v
    if hasattr(v, "detach") and hasattr(v, "cpu") and hasattr(v, "numpy"):   # a torch tensor
        v = v.detach().cpu().numpy()
    return ember.asarray(v)


def _no_grad():
    import ember
    return ember.no_grad()


# ---------------------------------------------------------------- Module

class Module:
    """Base class of all layers: subclass it, call ``super().__init__()`` first, assign
    parameters / submodules as attributes and define ``forward``.

    >>> import ember
    >>> from ember import nn
    >>> net = nn.Sequential(nn.Linear(2, 3), nn.ReLU())
    >>> sum(p.size for p in net.parameters())
    9
    >>> net.eval().training
    False
    """

    training: bool
    _version = 1
    call_super_init = False

    def __init__(self, *args, **kwargs):
        if args or kwargs:
            raise TypeError(f"{type(self).__name__}.__init__() got unexpected arguments "
                            f"{args if args else ''}{kwargs if kwargs else ''}")
        d = self.__dict__
        d["training"] = True
        d["_parameters"] = {}
        d["_buffers"] = {}
        d["_non_persistent_buffers_set"] = set()
        d["_modules"] = {}
        d["_forward_pre_hooks"] = OrderedDict()
        d["_forward_pre_hooks_with_kwargs"] = OrderedDict()    # (OrderedDicts: weakref-able,
        d["_forward_hooks"] = OrderedDict()                    # for the hook handles)
        d["_forward_hooks_with_kwargs"] = OrderedDict()
        d["_forward_hooks_always_called"] = OrderedDict()
        d["_state_dict_hooks"] = OrderedDict()
        d["_load_state_dict_post_hooks"] = OrderedDict()

    # ------------------------------------------------------------ calling
    def __call__(self, *args, **kwargs):
        if self._forward_pre_hooks or self._forward_hooks:
            return self._call_with_hooks(args, kwargs)
        return self.forward(*args, **kwargs)

    def _call_with_hooks(self, args, kwargs):
        for hook_id, hook in list(self._forward_pre_hooks.items()):
            if hook_id in self._forward_pre_hooks_with_kwargs:
                res = hook(self, args, kwargs)
                if res is not None:
                    if not (isinstance(res, tuple) and len(res) == 2):
                        raise RuntimeError(
                            f"forward pre-hook must return None or a tuple of (new_args, "
                            f"new_kwargs), but got {res!r}")
                    args, kwargs = res
            else:
                res = hook(self, args)
                if res is not None:
                    args = res if isinstance(res, tuple) else (res,)
        called = set()
        try:
            result = self.forward(*args, **kwargs)
            for hook_id, hook in list(self._forward_hooks.items()):
                called.add(hook_id)
                if hook_id in self._forward_hooks_with_kwargs:
                    res = hook(self, args, kwargs, result)
                else:
                    res = hook(self, args, result)
                if res is not None:
                    result = res
        except Exception:
            for hook_id, hook in self._forward_hooks.items():
                if hook_id in self._forward_hooks_always_called and hook_id not in called:
                    try:
                        if hook_id in self._forward_hooks_with_kwargs:
                            hook(self, args, kwargs, None)
                        else:
                            hook(self, args, None)
                    except Exception:
                        pass
            raise
        return result

    def _forward_unimplemented(self, *args, **kwargs):
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required '
                                  f'"forward" function')

    forward = _forward_unimplemented

    def register_forward_pre_hook(self, hook, *, prepend=False, with_kwargs=False):
        """Call ``hook(module, args)`` before ``forward``; a returned value replaces the
        positional arguments (``hook(module, args, kwargs)`` returning ``(args, kwargs)``
        when ``with_kwargs=True``).  Returns a handle whose ``remove()`` unregisters it.

        >>> import ember
        >>> from ember import nn
        >>> m = nn.Identity()
        >>> h = m.register_forward_pre_hook(lambda mod, args: (args[0] * 2,))
        >>> m(ember.ones(2)).tolist()
        [2.0, 2.0]
        >>> h.remove(); m(ember.ones(2)).tolist()
        [1.0, 1.0]
        """
        handle = RemovableHandle(self._forward_pre_hooks, self._forward_pre_hooks_with_kwargs)
        self._forward_pre_hooks[handle.id] = hook
        if with_kwargs:
            self._forward_pre_hooks_with_kwargs[handle.id] = True
        if prepend:
            self._forward_pre_hooks.move_to_end(handle.id, last=False)
        return handle

    def register_forward_hook(self, hook, *, prepend=False, with_kwargs=False, always_call=False):
        """Call ``hook(module, args, output)`` after ``forward``; a returned value replaces
        the output (``hook(module, args, kwargs, output)`` when ``with_kwargs=True``).
        Returns a handle whose ``remove()`` unregisters it.

        >>> import ember
        >>> from ember import nn
        >>> m, seen = nn.ReLU(), []
        >>> h = m.register_forward_hook(lambda mod, args, out: seen.append(out.shape))
        >>> _ = m(ember.ones((2, 3))); seen
        [(2, 3)]
        """
        handle = RemovableHandle(self._forward_hooks, self._forward_hooks_with_kwargs,
                                 self._forward_hooks_always_called)
        self._forward_hooks[handle.id] = hook
        if with_kwargs:
            self._forward_hooks_with_kwargs[handle.id] = True
        if always_call:
            self._forward_hooks_always_called[handle.id] = True
        if prepend:
            self._forward_hooks.move_to_end(handle.id, last=False)
        return handle

    # ------------------------------------------------------------ registration
    def register_buffer(self, name, tensor, persistent=True):
        """Register an array that is part of the module's state but not a parameter
        (running statistics...).  ``persistent=False`` keeps it out of ``state_dict``.

        >>> import ember
        >>> from ember import nn
        >>> m = nn.Module()
        >>> m.register_buffer("count", ember.zeros(()))
        >>> list(m.state_dict())
        ['count']
        """
        if "_buffers" not in self.__dict__:
            raise AttributeError("cannot assign buffer before Module.__init__() call")
        if not isinstance(name, str):
            raise TypeError(f"buffer name should be a string. Got {type(name).__name__}")
        if "." in name:
            raise KeyError('buffer name can\'t contain "."')
        if name == "":
            raise KeyError('buffer name can\'t be empty string ""')
        if hasattr(self, name) and name not in self._buffers:
            raise KeyError(f"attribute '{name}' already exists")
        if tensor is not None and not isinstance(tensor, ndarray):
            raise TypeError(f"cannot assign '{type(tensor).__name__}' object to buffer '{name}' "
                            f"(ember array or None required)")
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def register_parameter(self, name, param):
        """Register a ``Parameter`` (or None) under `name`.

        >>> import ember
        >>> from ember import nn
        >>> m = nn.Module()
        >>> m.register_parameter("w", nn.Parameter(ember.zeros(2)))
        >>> m.register_parameter("b", None)
        >>> [n for n, _ in m.named_parameters()]
        ['w']
        """
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameter before Module.__init__() call")
        if not isinstance(name, str):
            raise TypeError(f"parameter name should be a string. Got {type(name).__name__}")
        if "." in name:
            raise KeyError('parameter name can\'t contain "."')
        if name == "":
            raise KeyError('parameter name can\'t be empty string ""')
        if hasattr(self, name) and name not in self._parameters:
            raise KeyError(f"attribute '{name}' already exists")
        if param is None:
            self._parameters[name] = None
            return
        if not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{type(param).__name__}' object to parameter "
                            f"'{name}' (ember.nn.Parameter or None required)")
        if param.grad_fn is not None:
            raise ValueError(f"Cannot assign non-leaf array to parameter '{name}'. Model "
                             f"parameters must be created explicitly. To express '{name}' as a "
                             f"function of another array, compute the value in the forward() "
                             f"method.")
        self._parameters[name] = param

    def add_module(self, name, module):
        """Register a child module (or None) under `name`.

        >>> from ember import nn
        >>> m = nn.Module(); m.add_module("act", nn.ReLU())
        >>> m
        Module(
          (act): ReLU()
        )
        """
        if not isinstance(module, Module) and module is not None:
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        if not isinstance(name, str):
            raise TypeError(f"module name should be a string. Got {type(name).__name__}")
        if "_modules" not in self.__dict__:
            raise AttributeError("cannot assign module before Module.__init__() call")
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        if "." in name:
            raise KeyError(f'module name can\'t contain ".", got: {name}')
        if name == "":
            raise KeyError('module name can\'t be empty string ""')
        self._modules[name] = module

    def register_module(self, name, module):
        """Alias of ``add_module``.

        >>> from ember import nn
        >>> m = nn.Module(); m.register_module("fc", nn.Linear(1, 1)); len(list(m.children()))
        1
        """
        self.add_module(name, module)

    def get_submodule(self, target):
        """The submodule at dotted path `target` ("" is the module itself).

        >>> from ember import nn
        >>> net = nn.Sequential(nn.Sequential(nn.Linear(1, 2)))
        >>> net.get_submodule("0.0")
        Linear(in_features=1, out_features=2, bias=True)
        """
        if target == "":
            return self
        mod = self
        for item in target.split("."):
            if not hasattr(mod, item):
                raise AttributeError(f"{mod._get_name()} has no attribute `{item}`")
            mod = getattr(mod, item)
            if not isinstance(mod, Module):
                raise AttributeError(f"`{item}` is not an nn.Module")
        return mod

    def get_parameter(self, target):
        """The parameter at dotted path `target` (e.g. ``"0.weight"``).

        >>> from ember import nn
        >>> nn.Sequential(nn.Linear(3, 2)).get_parameter("0.bias").shape
        (2,)
        """
        module_path, _, name = target.rpartition(".")
        mod = self.get_submodule(module_path)
        if not hasattr(mod, name):
            raise AttributeError(f"{mod._get_name()} has no attribute `{name}`")
        param = getattr(mod, name)
        if not isinstance(param, Parameter):
            raise AttributeError(f"`{name}` is not an nn.Parameter")
        return param

    def get_buffer(self, target):
        """The buffer at dotted path `target`.

        >>> import ember
        >>> from ember import nn
        >>> m = nn.Module(); m.register_buffer("b", ember.zeros(2)); m.get_buffer("b").shape
        (2,)
        """
        module_path, _, name = target.rpartition(".")
        mod = self.get_submodule(module_path)
        if not hasattr(mod, name):
            raise AttributeError(f"{mod._get_name()} has no attribute `{name}`")
        if name not in mod._buffers:
            raise AttributeError(f"`{name}` is not a buffer")
        return mod._buffers[name]

    # ------------------------------------------------------------ attribute protocol
    def __getattr__(self, name):
        d = self.__dict__
        if "_parameters" in d:
            p = d["_parameters"]
            if name in p:
                return p[name]
        if "_buffers" in d:
            b = d["_buffers"]
            if name in b:
                return b[name]
        if "_modules" in d:
            m = d["_modules"]
            if name in m:
                return m[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __setattr__(self, name, value):
        d = self.__dict__
        params = d.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            d.pop(name, None)
            self._buffers.pop(name, None)
            self._modules.pop(name, None)
            self._non_persistent_buffers_set.discard(name)
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as parameter '{name}' "
                                f"(ember.nn.Parameter or None expected)")
            self.register_parameter(name, value)
        else:
            modules = d.get("_modules")
            if isinstance(value, Module):
                if modules is None:
                    raise AttributeError("cannot assign module before Module.__init__() call")
                d.pop(name, None)
                params.pop(name, None)
                self._buffers.pop(name, None)
                self._non_persistent_buffers_set.discard(name)
                modules[name] = value
            elif modules is not None and name in modules:
                if value is not None:
                    raise TypeError(f"cannot assign '{type(value).__name__}' as child module "
                                    f"'{name}' (ember.nn.Module or None expected)")
                modules[name] = value
            else:
                buffers = d.get("_buffers")
                if buffers is not None and name in buffers:
                    if value is not None and not isinstance(value, ndarray):
                        raise TypeError(f"cannot assign '{type(value).__name__}' as buffer "
                                        f"'{name}' (ember array or None expected)")
                    buffers[name] = value
                else:
                    object.__setattr__(self, name, value)

    def __delattr__(self, name):
        if name in self._parameters:
            del self._parameters[name]
        elif name in self._buffers:
            del self._buffers[name]
            self._non_persistent_buffers_set.discard(name)
        elif name in self._modules:
            del self._modules[name]
        else:
            object.__delattr__(self, name)

    def __dir__(self):
        attrs = dir(self.__class__)
        keys = (list(attrs) + list(self.__dict__) + list(self._parameters)
                + list(self._modules) + list(self._buffers))
        return sorted(k for k in set(keys) if not k[0].isdigit())

    def __getstate__(self):
        return self.__dict__.copy()

    def __setstate__(self, state):
        self.__dict__.update(state)
        # modules pickled by older versions may lack newer hook dicts
        for k in ("_forward_pre_hooks", "_forward_hooks", "_state_dict_hooks",
                  "_load_state_dict_post_hooks", "_forward_pre_hooks_with_kwargs",
                  "_forward_hooks_with_kwargs", "_forward_hooks_always_called"):
            self.__dict__.setdefault(k, OrderedDict())
        self.__dict__.setdefault("_non_persistent_buffers_set", set())

    # ------------------------------------------------------------ traversal
    def _named_members(self, get_members_fn, prefix="", recurse=True, remove_duplicate=True):
        memo = set()
        modules = (self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate)
                   if recurse else [(prefix, self)])
        for module_prefix, module in modules:
            for k, v in get_members_fn(module):
                if v is None or (remove_duplicate and id(v) in memo):
                    continue
                if remove_duplicate:
                    memo.add(id(v))
                yield (module_prefix + ("." if module_prefix else "") + k, v)

    def parameters(self, recurse=True):
        """An iterator over the parameters (each shared parameter once).

        >>> from ember import nn
        >>> [p.shape for p in nn.Linear(3, 2).parameters()]
        [(2, 3), (2,)]
        """
        if not recurse or not self._modules:
            for p in self._parameters.values():
                if p is not None:
                    yield p
            return
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        """An iterator over ``(name, parameter)`` pairs, names dotted by submodule.

        >>> from ember import nn
        >>> [n for n, _ in nn.Sequential(nn.Linear(3, 2)).named_parameters()]
        ['0.weight', '0.bias']
        """
        yield from self._named_members(lambda m: m._parameters.items(), prefix=prefix,
                                       recurse=recurse, remove_duplicate=remove_duplicate)

    def buffers(self, recurse=True):
        """An iterator over the buffers.

        >>> import ember
        >>> from ember import nn
        >>> m = nn.Module(); m.register_buffer("b", ember.zeros(2)); len(list(m.buffers()))
        1
        """
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        """An iterator over ``(name, buffer)`` pairs.

        >>> import ember
        >>> from ember import nn
        >>> m = nn.Module(); m.register_buffer("b", ember.zeros(2))
        >>> [n for n, _ in m.named_buffers()]
        ['b']
        """
        yield from self._named_members(lambda m: m._buffers.items(), prefix=prefix,
                                       recurse=recurse, remove_duplicate=remove_duplicate)

    def children(self):
        """An iterator over the direct submodules.

        >>> from ember import nn
        >>> len(list(nn.Sequential(nn.ReLU(), nn.Tanh()).children()))
        2
        """
        for _, m in self.named_children():
            yield m

    def named_children(self):
        """An iterator over ``(name, submodule)`` for the direct submodules.

        >>> from ember import nn
        >>> [n for n, _ in nn.Sequential(nn.ReLU(), nn.Tanh()).named_children()]
        ['0', '1']
        """
        memo = set()
        for name, module in self._modules.items():
            if module is not None and id(module) not in memo:
                memo.add(id(module))
                yield name, module

    def modules(self):
        """An iterator over every module in the tree, this one first.

        >>> from ember import nn
        >>> len(list(nn.Sequential(nn.ReLU(), nn.Tanh()).modules()))
        3
        """
        for _, m in self.named_modules():
            yield m

    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        """An iterator over ``(dotted name, module)`` for the whole tree ("" is this one).

        >>> from ember import nn
        >>> [n for n, _ in nn.Sequential(nn.ReLU()).named_modules()]
        ['', '0']
        """
        if memo is None:
            memo = set()
        if id(self) in memo:
            return
        if remove_duplicate:
            memo.add(id(self))
        yield prefix, self
        for name, module in self._modules.items():
            if module is None:
                continue
            sub = prefix + ("." if prefix else "") + name
            yield from module.named_modules(memo, sub, remove_duplicate)

    # ------------------------------------------------------------ modes and grads
    def train(self, mode=True):
        """Set training mode on this module and every submodule; returns self.

        >>> from ember import nn
        >>> net = nn.Sequential(nn.Dropout()); net.train(False)[0].training
        False
        """
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for module in self.children():
            module.train(mode)
        return self

    def eval(self):
        """``train(False)``.

        >>> from ember import nn
        >>> nn.Linear(1, 1).eval().training
        False
        """
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        """Set ``requires_grad`` on every parameter (freeze with False); returns self.

        >>> from ember import nn
        >>> any(p.requires_grad for p in nn.Linear(2, 2).requires_grad_(False).parameters())
        False
        """
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none=True):
        """Reset the gradients of every parameter (to None by default, else zero in place).

        >>> import ember
        >>> from ember import nn
        >>> m = nn.Linear(2, 1); m(ember.ones((1, 2))).sum().backward()
        >>> m.zero_grad(); m.weight.grad is None
        True
        """
        for p in self.parameters():
            g = p.grad
            if g is None:
                continue
            if set_to_none:
                p.grad = None
            else:
                if g.grad_fn is not None or g.requires_grad:
                    g = g.detach()
                    p.grad = g
                if not g.flags.writeable:   # e.g. a broadcast gradient (create_graph)
                    with _no_grad():
                        p.grad = g = g.copy()
                with _no_grad():
                    g.fill(0)

    def apply(self, fn):
        """Call ``fn(module)`` on every submodule (children first) and on self; returns self.

        >>> from ember import nn
        >>> names = []
        >>> _ = nn.Sequential(nn.ReLU()).apply(lambda m: names.append(type(m).__name__))
        >>> names
        ['ReLU', 'Sequential']
        """
        for module in self.children():
            module.apply(fn)
        fn(self)
        return self

    # ------------------------------------------------------------ dtype / device
    def _apply(self, fn, recurse=True):
        """Convert every parameter and buffer ``t`` with ``fn(t)``.  As in PyTorch, a
        parameter keeps its identity (its memory is swapped, ``p.data = fn(p)``, and
        its ``.grad`` likewise), so optimizers built before ``to()`` keep working;
        buffers are replaced.  A buffer shared by several modules stays shared."""
        memo = {}
        mods = self.modules() if recurse else [self]
        for m in mods:
            m._apply_local(fn, memo)
        return self

    def _apply_local(self, fn, memo):
        for key, param in self._parameters.items():
            if param is None or id(param) in memo:
                continue
            memo[id(param)] = param
            with _no_grad():
                new = fn(param)
            if new is not param:
                _set_data(param, ndarray.detach(new))
            g = param.grad
            if g is not None:
                with _no_grad():
                    new_g = fn(g)
                if new_g is not g:
                    _set_data(g, ndarray.detach(new_g))
        for key, buf in self._buffers.items():
            if buf is None:
                continue
            if id(buf) in memo:
                self._buffers[key] = memo[id(buf)]
                continue
            with _no_grad():
                new = fn(buf)
            memo[id(buf)] = new
            self._buffers[key] = new

    def to(self, *args, **kwargs):
        """Convert parameters and buffers in place: ``to(dtype)``, ``to('cuda')``,
        ``to(device, dtype)``, ``to(array)`` (its dtype and device).  Only
        floating-point values change dtype; parameters stay the same Parameter
        objects (their memory is swapped), so an optimizer built before keeps them.

        >>> import ember
        >>> from ember import nn
        >>> nn.Linear(2, 2).to(ember.float64).weight.dtype
        dtype('float64')
        """
        device = kwargs.pop("device", None)
        dtype = kwargs.pop("dtype", None)
        kwargs.pop("non_blocking", None)
        kwargs.pop("memory_format", None)
        if kwargs:
            raise TypeError(f"to() got unexpected keyword arguments {sorted(kwargs)}")
        for a in args:
            if isinstance(a, ndarray):
                dtype = a.dtype
                device = a.device
            elif isinstance(a, (str, Device)):
                device = a
            elif isinstance(a, bool):       # non_blocking passed positionally
                continue
            elif a is not None:
                dtype = a
        from ember._core.array import check_device
        dev = None if device is None else check_device(device, f"{type(self).__name__}.to")
        if dev is not None:
            self._apply(lambda t: t.to(dev))
        if dtype is None:
            return self
        dt = np.dtype(dtype)
        if dtype_kind(dt) not in "fc":
            raise TypeError(f"nn.Module.to only accepts floating point or complex dtypes, but "
                            f"got desired dtype={dt}")

        def convert(t):
            if dtype_kind(t.dtype) in "fc" and t.dtype != dt:
                if dtype_kind(t.dtype) == "c" and dtype_kind(dt) == "f":
                    return t
                return t.astype(dt)
            return t
        return self._apply(convert)

    def cpu(self):
        """Move parameters and buffers to host memory; returns self.

        >>> from ember import nn
        >>> m = nn.ReLU(); m.cpu() is m
        True
        """
        return self.to("cpu")

    def cuda(self, device=None):
        """Move parameters and buffers to a CUDA device; returns self."""
        return self.to("cuda" if device is None else f"cuda:{device}")

    def type(self, dst_type):
        """Cast floating parameters and buffers to `dst_type`; returns self."""
        return self.to(dst_type)

    def float(self):
        """Cast floating parameters and buffers to float32; returns self.

        >>> import ember
        >>> from ember import nn
        >>> nn.Linear(1, 1).double().float().weight.dtype
        dtype('float32')
        """
        return self.to(np.float32)

    def double(self):
        """Cast floating parameters and buffers to float64; returns self.

        >>> from ember import nn
        >>> nn.Linear(1, 1).double().bias.dtype
        dtype('float64')
        """
        return self.to(np.float64)

    def half(self):
        """Cast floating parameters and buffers to float16; returns self."""
        return self.to(np.float16)

    def bfloat16(self):
        """Cast floating parameters and buffers to bfloat16; returns self.

        >>> import ember
        >>> ember.nn.Linear(2, 3).bfloat16().weight.dtype
        dtype(bfloat16)
        """
        from ember._core.dtypes import bfloat16
        return self.to(bfloat16)

    # ------------------------------------------------------------ state dict
    def _save_to_state_dict(self, destination, prefix, keep_vars):
        for name, param in self._parameters.items():
            if param is not None:
                destination[prefix + name] = param if keep_vars else ndarray.detach(param)
        for name, buf in self._buffers.items():
            if buf is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = buf if keep_vars else ndarray.detach(buf)

    def state_dict(self, *args, destination=None, prefix="", keep_vars=False):
        """An ``OrderedDict`` of every parameter and persistent buffer by dotted name
        (detached arrays sharing memory with the module's, unless ``keep_vars=True``).

        >>> from ember import nn
        >>> list(nn.Sequential(nn.Linear(2, 1)).state_dict())
        ['0.weight', '0.bias']
        """
        if args:        # PyTorch's deprecated positional form (destination, prefix, keep_vars)
            destination = args[0] if len(args) > 0 else destination
            prefix = args[1] if len(args) > 1 else prefix
            keep_vars = args[2] if len(args) > 2 else keep_vars
        if destination is None:
            destination = OrderedDict()
            destination._metadata = OrderedDict()
        meta = getattr(destination, "_metadata", None)
        if meta is not None:
            meta[prefix[:-1]] = {"version": self._version}
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, module in self._modules.items():
            if module is not None:
                module.state_dict(destination=destination, prefix=prefix + name + ".",
                                  keep_vars=keep_vars)
        for hook in self._state_dict_hooks.values():
            res = hook(self, destination, prefix, {})
            if res is not None:
                destination = res
        return destination

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs):
        """Copy this module's own parameters and persistent buffers from `state_dict`
        (override to convert old formats; call super)."""
        persistent = {k: v for k, v in self._buffers.items()
                      if k not in self._non_persistent_buffers_set}
        local = itertools.chain(self._parameters.items(), persistent.items())
        local_state = {k: v for k, v in local if v is not None}
        for name, param in local_state.items():
            key = prefix + name
            if key not in state_dict:
                if strict:
                    missing_keys.append(key)
                continue
            try:
                value = _as_value(state_dict[key])
            except Exception as ex:
                error_msgs.append(f'While copying the parameter named "{key}", could not '
                                  f'convert the value of type {type(state_dict[key]).__name__} '
                                  f'to an array: {ex}')
                continue
            if value.shape != param.shape:
                error_msgs.append(f"size mismatch for {key}: copying a param with shape "
                                  f"{tuple(value.shape)} from checkpoint, the shape in current "
                                  f"model is {tuple(param.shape)}.")
                continue
            if local_metadata.get("assign_to_params_buffers", False):
                # load_state_dict(assign=True): the module takes the checkpoint's arrays
                if name in self._parameters:
                    new = value if isinstance(value, Parameter) else \
                        Parameter(ndarray.detach(value), param.requires_grad)
                    self._parameters[name] = new
                else:
                    self._buffers[name] = value
                continue
            try:
                with _no_grad():
                    param[...] = value
            except Exception as ex:
                error_msgs.append(f'While copying the parameter named "{key}", whose '
                                  f'dimensions in the model are {tuple(param.shape)} and whose '
                                  f'dimensions in the checkpoint are {tuple(value.shape)}, an '
                                  f'exception occurred : {ex.args}.')
        if strict:
            for key in state_dict.keys():
                if key.startswith(prefix):
                    input_name = key[len(prefix):].split(".", 1)
                    if len(input_name) > 1:
                        if input_name[0] not in self._modules:
                            unexpected_keys.append(key)
                    elif input_name[0] not in local_state:
                        unexpected_keys.append(key)

    def load_state_dict(self, state_dict, strict=True, assign=False):
        """Copy parameters and buffers from `state_dict` into this module, in place (the
        Parameter objects stay the same, so an optimizer holding them keeps working).
        Returns ``(missing_keys, unexpected_keys)``; with ``strict=True`` (default) any
        missing or unexpected key, or a shape mismatch, is a RuntimeError.  Values may be
        ember or NumPy arrays (or torch tensors).  ``assign=True`` makes the module hold
        the given arrays instead of copying them (parameters keep their requires_grad).

        >>> from ember import nn
        >>> a, b = nn.Linear(2, 2), nn.Linear(2, 2)
        >>> b.load_state_dict(a.state_dict())
        <All keys matched successfully>
        >>> bool((a.weight == b.weight).all())
        True
        """
        if not hasattr(state_dict, "keys") or not hasattr(state_dict, "__getitem__"):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        missing_keys, unexpected_keys, error_msgs = [], [], []
        metadata = getattr(state_dict, "_metadata", None)
        state_dict = OrderedDict(state_dict)
        if metadata is not None:
            state_dict._metadata = metadata

        def load(module, prefix=""):
            local_metadata = {} if metadata is None else metadata.get(prefix[:-1], {})
            if assign:
                local_metadata = dict(local_metadata, assign_to_params_buffers=True)
            module._load_from_state_dict(state_dict, prefix, local_metadata, True,
                                         missing_keys, unexpected_keys, error_msgs)
            for name, child in module._modules.items():
                if child is not None:
                    load(child, prefix + name + ".")
            incompatible = _IncompatibleKeys(missing_keys, unexpected_keys)
            for hook in module._load_state_dict_post_hooks.values():
                hook(module, incompatible)

        load(self)
        if strict:
            if unexpected_keys:
                error_msgs.insert(0, "Unexpected key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in unexpected_keys)))
            if missing_keys:
                error_msgs.insert(0, "Missing key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in missing_keys)))
        if error_msgs:
            raise RuntimeError("Error(s) in loading state_dict for {}:\n\t{}".format(
                self._get_name(), "\n\t".join(error_msgs)))
        return _IncompatibleKeys(missing_keys, unexpected_keys)

    def register_state_dict_hook(self, hook):
        """``hook(module, state_dict, prefix, local_metadata)`` after ``state_dict``."""
        handle = RemovableHandle(self._state_dict_hooks)
        self._state_dict_hooks[handle.id] = hook
        return handle

    def register_load_state_dict_post_hook(self, hook):
        """``hook(module, incompatible_keys)`` after ``load_state_dict`` loads this module."""
        handle = RemovableHandle(self._load_state_dict_post_hooks)
        self._load_state_dict_post_hooks[handle.id] = hook
        return handle

    # ------------------------------------------------------------ repr
    def _get_name(self):
        return type(self).__name__

    def extra_repr(self):
        """The module-specific part of the repr (override it; one line per setting)."""
        return ""

    def __repr__(self):
        extra_lines = []
        extra = self.extra_repr()
        if extra:
            extra_lines = extra.split("\n")
        child_lines = []
        for key, module in self._modules.items():
            mod_str = _addindent(repr(module), 2)
            child_lines.append("(" + key + "): " + mod_str)
        lines = extra_lines + child_lines
        main = self._get_name() + "("
        if lines:
            if len(extra_lines) == 1 and not child_lines:
                main += extra_lines[0]
            else:
                main += "\n  " + "\n  ".join(lines) + "\n"
        return main + ")"

