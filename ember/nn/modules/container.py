"""Containers: Sequential, ModuleList, ModuleDict, ParameterList, ParameterDict.

>>> import ember
>>> from ember import nn
>>> net = nn.Sequential(nn.Linear(4, 3), nn.ReLU())
>>> len(net), type(net[0]).__name__, net(ember.ones((2, 4))).shape
(2, 'Linear', (2, 3))
"""
import operator
from collections import OrderedDict
from itertools import chain, islice

from ember._core.array import ndarray
from ember.nn.parameter import Parameter
from ember.nn.modules.module import Module, _addindent

__all__ = ["Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict"]


def _set_modules(module, items):
    """Replace a module's children in place (the ``_modules`` dict object is kept)."""
    d = module._modules
    items = list(items)
    d.clear()
    d.update(items)


def _abs_index(idx, n, what):
    idx = operator.index(idx)
    if not -n <= idx < n:
        raise IndexError(f"index {idx} is out of range for {what} of length {n}")
    return idx + n if idx < 0 else idx


class Sequential(Module):
    """Modules applied one after the other: ``Sequential(m1, m2, ...)`` or
    ``Sequential(OrderedDict(name=module, ...))``.  Supports indexing, slicing (a new
    Sequential), ``len``, iteration, ``append``, ``insert``, ``extend``, ``pop``, ``+``.

    >>> from collections import OrderedDict
    >>> from ember import nn
    >>> net = nn.Sequential(OrderedDict([("fc", nn.Linear(2, 2)), ("act", nn.Tanh())]))
    >>> net.fc is net[0], len(net[1:])
    (True, 1)
    """

    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for key, module in args[0].items():
                self.add_module(key, module)
        else:
            for idx, module in enumerate(args):
                self.add_module(str(idx), module)

    def _get_item_by_idx(self, iterator, idx):
        size = len(self)
        idx = _abs_index(idx, size, "Sequential")
        return next(islice(iterator, idx, None))

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return self.__class__(OrderedDict(list(self._modules.items())[idx]))
        return self._get_item_by_idx(iter(self._modules.values()), idx)

    def __setitem__(self, idx, module):
        key = self._get_item_by_idx(iter(self._modules.keys()), idx)
        setattr(self, key, module)

    def __delitem__(self, idx):
        keys = list(self._modules.keys())
        if isinstance(idx, slice):
            drop = set(keys[idx])
        else:
            drop = {keys[_abs_index(idx, len(keys), "Sequential")]}
        remaining = [(k, m) for k, m in self._modules.items() if k not in drop]
        # numeric keys are renumbered 0..n-1 (as PyTorch does); named keys are kept
        if all(k.isdigit() for k, _ in remaining):
            _set_modules(self, ((str(i), m) for i, (_, m) in enumerate(remaining)))
        else:
            _set_modules(self, remaining)

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __add__(self, other):
        if not isinstance(other, Sequential):
            raise ValueError(f"add operator supports only objects of Sequential class, but "
                             f"{type(other)} is given.")
        ret = Sequential()
        for layer in chain(self, other):
            ret.append(layer)
        return ret

    def __iadd__(self, other):
        if not isinstance(other, Sequential):
            raise ValueError(f"add operator supports only objects of Sequential class, but "
                             f"{type(other)} is given.")
        for layer in list(other):
            self.append(layer)
        return self

    def __mul__(self, other):
        if not isinstance(other, int) or other <= 0:
            raise ValueError(f"Non-positive multiplication factor {other} for {type(self)}")
        ret = Sequential()
        for _ in range(other):
            for layer in self:
                ret.append(layer)
        return ret

    __rmul__ = __mul__

    def __dir__(self):
        return [k for k in super().__dir__() if not k.isdigit()]

    def append(self, module):
        """Add `module` at the end; returns self."""
        self.add_module(str(len(self)), module)
        return self

    def insert(self, index, module):
        """Insert `module` before position `index`; returns self."""
        if not isinstance(module, Module):
            raise AssertionError(f"module should be of type: {Module}")
        n = len(self._modules)
        if not -n <= index <= n:
            raise IndexError(f"Index out of range: {index}")
        if index < 0:
            index += n
        values = list(self._modules.values())
        values.insert(index, module)
        _set_modules(self, ((str(i), m) for i, m in enumerate(values)))
        return self

    def extend(self, sequential):
        """Append every module of an iterable; returns self."""
        for layer in sequential:
            self.append(layer)
        return self

    def pop(self, key):
        """Remove and return the module at position `key`."""
        v = self[key]
        del self[key]
        return v

    def forward(self, input):
        # a Linear (or, with fuse_conv_enabled, a Conv2d) followed by a ReLU runs as one
        # fused op on the CPU (see ember.nn.functional.fused); the pre-activation never
        # leaves this loop.
        # A ReLU followed by a MaxPool2d runs after it (max pooling commutes with the
        # ReLU, values and gradients alike: see swap_relu_pool), on a quarter of the data
        relu_t, fusers = _FUSERS or _load_fusers()
        if not fuse_enabled:
            fusers = _NO_FUSERS
        elif not fuse_conv_enabled:
            fusers = _LINEAR_FUSER
        prev = None
        relu = None                     # a ReLU waiting to see whether a MaxPool2d follows
        for module in self._modules.values():
            if relu is not None:
                if type(module) is _MAXPOOL2D[0] and _plain(module) \
                        and not module.return_indices:
                    input = relu(module(input))
                    relu = None
                    continue
                input = relu(input)
                relu = None
            if prev is not None:
                if type(module) is relu_t and _plain(module):
                    y = fusers[type(prev)](prev, input)
                    if y is not None:
                        input = y
                        prev = None
                        continue
                input = prev(input)
                prev = None
            if type(module) in fusers and _plain(module):
                prev = module
                continue
            if swap_relu_pool and type(module) is relu_t and not module.inplace \
                    and _plain(module):
                relu = module
                continue
            input = module(input)
        if prev is not None:
            input = prev(input)
        if relu is not None:
            input = relu(input)
        return input


# Sequential's Linear + ReLU fusion: on by default (False turns it off).  With the
# vectorised bias + ReLU pass and the one-pass mask + bias gradient it made the MLP step
# faster (benchmarks/README.md, "MLP step, issue #25 (branch mlp3)").
fuse_enabled = True
# Conv2d + ReLU fusion in a Sequential (when fuse_enabled is also True): off by default,
# it has not been shown to make LeNet-5's step faster (where the ReLU instead runs after
# the max pooling, on a quarter of the data: swap_relu_pool).
fuse_conv_enabled = False
# Sequential's ReLU -> MaxPool2d reordering: on by default; False runs the modules in
# their written order.  Why ``MaxPool2d(ReLU(x))`` may run as ``ReLU(MaxPool2d(x))``
# inside a Sequential (ReLU not inplace, neither module with hooks or a replaced forward,
# no indices returned): the ReLU's output is internal to the loop, so nothing can see
# which order ran.  ReLU is non-decreasing, so the maximum of a window of relu(x) is
# relu of the window's maximum, NaN included (both orders pick it).  Gradients: where
# the window's maximum is > 0 both orders route the gradient to the same element (the
# first maximum; ReLU leaves positive values and their order unchanged); where it is
# <= 0 or NaN both give zero (ReLU's derivative there is 0).  The ReLU then touches a
# quarter of the data (2x2 pooling), forward and backward.
swap_relu_pool = True
_FUSERS = None
_NO_FUSERS = {}
_LINEAR_FUSER = {}
_MAXPOOL2D = [None]

fused = None            # ember.nn.functional.fused, imported on first use


def _plain(m):
    """A module whose call is exactly its class's forward: no hooks, no replaced forward."""
    return not m._forward_pre_hooks and not m._forward_hooks and "forward" not in m.__dict__


def _fused_linear(m, x):
    p = m._parameters
    if "weight" not in p or "bias" not in p:
        return None
    w, b = p["weight"], p["bias"]
    if not fused.fusable_linear(x, w, b):
        return None
    return fused._linear_relu(x, w, b)


def _fused_conv2d(m, x):
    p = m._parameters
    if m.padding_mode != "zeros" or "weight" not in p or "bias" not in p:
        return None
    w, b = p["weight"], p["bias"]
    if not fused.fusable_conv2d(x, w, b):
        return None
    return fused.conv2d_relu(x, w, b, m.stride, m.padding, m.dilation, m.groups)


def fuse_linear_relu(linear, x):
    """``relu(linear(x))`` as one fused op when `linear` is a plain ``Linear`` (no hooks,
    no replaced forward) and x a CPU float array it takes; else None (the caller runs the
    two modules)."""
    relu_t, fusers = _FUSERS or _load_fusers()
    if not fuse_enabled or type(linear) is not _LINEAR[0] or not _plain(linear):
        return None
    return _fused_linear(linear, x)


_LINEAR = [None]


def _load_fusers():
    global _FUSERS, fused
    from ember.nn.functional import fused
    from ember.nn.modules.linear import Linear
    from ember.nn.modules.conv import Conv2d
    from ember.nn.modules.activation import ReLU
    from ember.nn.modules.pooling import MaxPool2d
    _LINEAR[0] = Linear
    _MAXPOOL2D[0] = MaxPool2d
    _LINEAR_FUSER[Linear] = _fused_linear
    _FUSERS = (ReLU, {Linear: _fused_linear, Conv2d: _fused_conv2d})
    return _FUSERS


class ModuleList(Module):
    """A list of modules, registered as submodules (so their parameters are found).

    >>> from ember import nn
    >>> layers = nn.ModuleList([nn.Linear(2, 2) for _ in range(3)])
    >>> len(layers), len(list(layers.parameters()))
    (3, 6)
    >>> layers
    ModuleList(
      (0-2): 3 x Linear(in_features=2, out_features=2, bias=True)
    )
    """

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self += modules

    def _get_abs_string_index(self, idx):
        return str(_abs_index(idx, len(self), "ModuleList"))

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return self.__class__(list(self._modules.values())[idx])
        return self._modules[self._get_abs_string_index(idx)]

    def __setitem__(self, idx, module):
        idx = self._get_abs_string_index(idx)
        setattr(self, idx, module)

    def __delitem__(self, idx):
        if isinstance(idx, slice):
            for k in range(len(self._modules))[idx]:
                delattr(self, str(k))
        else:
            delattr(self, self._get_abs_string_index(idx))
        values = list(self._modules.values())
        _set_modules(self, ((str(i), m) for i, m in enumerate(values)))

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __iadd__(self, modules):
        return self.extend(modules)

    def __add__(self, other):
        combined = ModuleList()
        for i, module in enumerate(chain(self, other)):
            combined.add_module(str(i), module)
        return combined

    def __dir__(self):
        return [k for k in super().__dir__() if not k.isdigit()]

    def insert(self, index, module):
        """Insert `module` before position `index`."""
        values = list(self._modules.values())
        values.insert(index, module)
        for m in values:
            if not isinstance(m, Module) and m is not None:
                raise TypeError(f"{type(m).__name__} is not a Module subclass")
        _set_modules(self, ((str(i), m) for i, m in enumerate(values)))

    def append(self, module):
        """Add `module` at the end; returns self."""
        self.add_module(str(len(self)), module)
        return self

    def pop(self, key):
        """Remove and return the module at position `key`."""
        v = self[key]
        del self[key]
        return v

    def extend(self, modules):
        """Append every module of an iterable; returns self."""
        if isinstance(modules, (str, bytes)) or not hasattr(modules, "__iter__"):
            raise TypeError("ModuleList.extend should be called with an iterable, but got "
                            + type(modules).__name__)
        offset = len(self)
        for i, module in enumerate(modules):
            self.add_module(str(offset + i), module)
        return self

    def __repr__(self):
        list_of_reprs = [repr(item) for item in self]
        if len(list_of_reprs) == 0:
            return self._get_name() + "()"
        start_end_indices = [[0, 0]]
        repeated_blocks = [list_of_reprs[0]]
        for i, r in enumerate(list_of_reprs[1:], 1):
            if r == repeated_blocks[-1]:
                start_end_indices[-1][1] += 1
                continue
            start_end_indices.append([i, i])
            repeated_blocks.append(r)
        lines = []
        main_str = self._get_name() + "("
        for (start_id, end_id), b in zip(start_end_indices, repeated_blocks):
            local_repr = f"({start_id}): {b}"
            if start_id != end_id:
                n = end_id - start_id + 1
                local_repr = f"({start_id}-{end_id}): {n} x {b}"
            lines.append(_addindent(local_repr, 2))
        main_str += "\n  " + "\n  ".join(lines) + "\n"
        return main_str + ")"

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ModuleList has no forward(): iterate over it and call its "
                                  "modules in your own forward()")


class ModuleDict(Module):
    """A dict of modules (insertion-ordered), registered as submodules.

    >>> from ember import nn
    >>> d = nn.ModuleDict({"act": nn.ReLU(), "fc": nn.Linear(1, 1)})
    >>> list(d.keys()), "fc" in d, type(d["act"]).__name__
    (['act', 'fc'], True, 'ReLU')
    """

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key):
        return self._modules[key]

    def __setitem__(self, key, module):
        self.add_module(key, module)

    def __delitem__(self, key):
        del self._modules[key]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key):
        return key in self._modules

    def clear(self):
        """Remove every module."""
        self._modules.clear()

    def pop(self, key):
        """Remove `key` and return its module."""
        v = self[key]
        del self[key]
        return v

    def keys(self):
        return self._modules.keys()

    def items(self):
        return self._modules.items()

    def values(self):
        return self._modules.values()

    def update(self, modules):
        """Add the modules of a mapping or of an iterable of ``(key, module)`` pairs."""
        if isinstance(modules, (OrderedDict, ModuleDict, dict)) or hasattr(modules, "keys"):
            for key, module in modules.items():
                self[key] = module
        else:
            for j, m in enumerate(modules):
                if not isinstance(m, (list, tuple)) or len(m) != 2:
                    raise ValueError(f"ModuleDict update sequence element #{j} should be a "
                                     f"(key, module) pair")
                self[m[0]] = m[1]

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ModuleDict has no forward(): look up its modules and call "
                                  "them in your own forward()")


def _param_repr(key, p):
    """One line of ParameterList/ParameterDict's repr, formatted as PyTorch's."""
    if not isinstance(p, ndarray):
        return f"  ({key}): Object of type: {type(p).__name__}"
    size = "x".join(str(s) for s in p.shape)
    kind = "Parameter" if isinstance(p, Parameter) else "Array"
    return f"  ({key}): {kind} containing: [ember.{p.dtype} of size {size}]"


class ParameterList(Module):
    """A list of parameters, registered on the module (arrays are wrapped in Parameter).

    >>> import ember
    >>> from ember import nn
    >>> ps = nn.ParameterList([ember.zeros(2), ember.ones(3)])
    >>> len(ps), isinstance(ps[1], nn.Parameter), len(list(ps.parameters()))
    (2, True, 2)
    """

    def __init__(self, values=None):
        super().__init__()
        self._size = 0
        if values is not None:
            self += values

    def _get_abs_string_index(self, idx):
        return str(_abs_index(idx, len(self), "ParameterList"))

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            out = self.__class__()
            for i in range(len(self))[idx]:
                out.append(self[i])
            return out
        return getattr(self, self._get_abs_string_index(idx))

    def __setitem__(self, idx, param):
        idx = self._get_abs_string_index(idx)
        if isinstance(param, ndarray) and not isinstance(param, Parameter):
            param = Parameter(param)
        setattr(self, idx, param)

    def __len__(self):
        return self._size

    def __iter__(self):
        return iter(self[i] for i in range(len(self)))

    def __iadd__(self, parameters):
        return self.extend(parameters)

    def __dir__(self):
        return [k for k in super().__dir__() if not k.isdigit()]

    def append(self, value):
        """Add a parameter (an array is wrapped in Parameter) at the end; returns self."""
        new_idx = len(self)
        self._size += 1
        self[new_idx] = value
        return self

    def extend(self, values):
        """Append every value of an iterable; returns self."""
        if isinstance(values, (str, bytes, ndarray)) or not hasattr(values, "__iter__"):
            raise TypeError("ParameterList.extend should be called with an iterable, but got "
                            + type(values).__name__)
        for value in values:
            self.append(value)
        return self

    def extra_repr(self):
        return "\n".join(_param_repr(i, p) for i, p in enumerate(self))

    def __call__(self, *args, **kwargs):
        raise RuntimeError("ParameterList should not be called.")


class ParameterDict(Module):
    """A dict of parameters (insertion-ordered), registered on the module.

    >>> import ember
    >>> from ember import nn
    >>> pd = nn.ParameterDict({"w": ember.zeros((2, 2))})
    >>> pd["b"] = nn.Parameter(ember.zeros(2))
    >>> list(pd.keys()), [n for n, _ in pd.named_parameters()]
    (['w', 'b'], ['w', 'b'])
    """

    def __init__(self, parameters=None):
        super().__init__()
        self._keys = {}
        if parameters is not None:
            self.update(parameters)

    def _key_to_attr(self, key):
        if not isinstance(key, str):
            raise TypeError(f"Index given to ParameterDict cannot be used as a key as it is "
                            f"not a string (type is '{type(key).__name__}'). Open an issue "
                            f"if you need other key types.")
        return key

    def __getitem__(self, key):
        return getattr(self, self._key_to_attr(key))

    def __setitem__(self, key, value):
        self._keys[key] = None
        attr = self._key_to_attr(key)
        if isinstance(value, ndarray) and not isinstance(value, Parameter):
            value = Parameter(value)
        setattr(self, attr, value)

    def __delitem__(self, key):
        del self._keys[key]
        delattr(self, self._key_to_attr(key))

    def __len__(self):
        return len(self._keys)

    def __iter__(self):
        return iter(self._keys)

    def __reversed__(self):
        return reversed(list(self._keys))

    def __contains__(self, key):
        return key in self._keys

    def copy(self):
        """A new ParameterDict holding the same parameters."""
        return ParameterDict(OrderedDict((k, self[k]) for k in self._keys))

    def setdefault(self, key, default=None):
        if key not in self:
            self[key] = default
        return self[key]

    def clear(self):
        for k in list(self._keys):
            del self[k]

    def pop(self, key):
        v = self[key]
        del self[key]
        return v

    def popitem(self):
        k, _ = self._keys.popitem()
        self._keys[k] = None
        val = self[k]
        del self[k]
        return k, val

    def get(self, key, default=None):
        return self[key] if key in self else default

    def keys(self):
        return self._keys.keys()

    def items(self):
        return ((k, self[k]) for k in self._keys)

    def values(self):
        return (self[k] for k in self._keys)

    def update(self, parameters):
        """Add the entries of a mapping or of an iterable of ``(key, value)`` pairs."""
        if hasattr(parameters, "keys"):
            for key, value in parameters.items():
                self[key] = value
        else:
            for j, p in enumerate(parameters):
                if not isinstance(p, (list, tuple)) or len(p) != 2:
                    raise ValueError(f"ParameterDict update sequence element #{j} should be a "
                                     f"(key, value) pair")
                self[p[0]] = p[1]

    def extra_repr(self):
        return "\n".join(_param_repr(k, p) for k, p in self.items())

    def __call__(self, input):
        raise RuntimeError("ParameterDict should not be called.")
