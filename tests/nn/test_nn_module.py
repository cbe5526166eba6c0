"""ember.nn.Module machinery and containers (PyTorch's torch.nn.Module behaviour).

Registration through attribute assignment, traversal (parameters / buffers / modules),
state_dict round trips and strict-loading errors, hooks and their handles, repr, train /
eval propagation, deepcopy and pickle, to(dtype), zero_grad, apply, and the containers.
"""
import copy
import pickle
from collections import OrderedDict

import numpy as np
import pytest

import ember
from ember import nn
from ember.nn import Parameter


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 5)
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(5, 3)
        self.scale = Parameter(ember.ones(3))
        self.register_buffer("running", ember.zeros(3))
        self.register_buffer("tmp", ember.zeros(2), persistent=False)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x))) * self.scale + self.running


# ---------------------------------------------------------------- registration

def test_registration_and_traversal():
    m = Net()
    assert [n for n, _ in m.named_parameters()] == [
        "scale", "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
    assert [n for n, _ in m.named_buffers()] == ["running", "tmp"]
    assert [n for n, _ in m.named_children()] == ["fc1", "act", "fc2"]
    assert [n for n, _ in m.named_modules()] == ["", "fc1", "act", "fc2"]
    assert len(list(m.parameters(recurse=False))) == 1
    assert len(list(m.modules())) == 4
    assert all(isinstance(p, Parameter) for p in m.parameters())
    assert m.scale is m._parameters["scale"]
    assert m.fc1 is m._modules["fc1"]
    assert m.running is m._buffers["running"]
    assert [n for n, _ in m.named_parameters(prefix="model")][0] == "model.scale"


def test_torch_registration_order_matches():
    torch = pytest.importorskip("torch")

    class TNet(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = torch.nn.Linear(4, 5)
            self.act = torch.nn.ReLU()
            self.fc2 = torch.nn.Linear(5, 3)
            self.scale = torch.nn.Parameter(torch.ones(3))
            self.register_buffer("running", torch.zeros(3))
            self.register_buffer("tmp", torch.zeros(2), persistent=False)

    t, e = TNet(), Net()
    assert [n for n, _ in t.named_parameters()] == [n for n, _ in e.named_parameters()]
    assert list(t.state_dict()) == list(e.state_dict())


def test_reassignment_and_delete():
    m = Net()
    m.scale = None                          # a registered parameter may become None
    assert "scale" in m._parameters and m.scale is None
    assert "scale" not in [n for n, _ in m.named_parameters()]
    with pytest.raises(TypeError, match="cannot assign .* as parameter 'fc1.weight'|parameter"):
        m.fc1.weight = ember.ones((5, 4))   # plain array onto a parameter name
    m.fc1 = nn.Identity()                   # module replaced by another module
    assert isinstance(m.fc1, nn.Identity)
    with pytest.raises(TypeError, match="child module"):
        m.fc2 = ember.ones(2)
    with pytest.raises(TypeError, match="buffer"):
        m.running = 3.0
    m.running = ember.ones(3)               # arrays may replace a buffer
    assert m._buffers["running"].tolist() == [1.0, 1.0, 1.0]
    del m.act
    assert "act" not in m._modules
    del m.running
    assert "running" not in m._buffers
    m.plain = 5
    assert m.plain == 5 and "plain" in m.__dict__
    # a plain attribute replaced by a parameter moves into _parameters
    m.plain = Parameter(ember.zeros(1))
    assert "plain" in m._parameters and "plain" not in m.__dict__


def test_register_errors():
    m = nn.Module()
    with pytest.raises(KeyError, match="contain"):
        m.register_buffer("a.b", ember.zeros(1))
    with pytest.raises(KeyError, match="empty"):
        m.register_parameter("", None)
    with pytest.raises(TypeError, match="cannot assign 'list' object to buffer"):
        m.register_buffer("b", [1, 2])
    with pytest.raises(TypeError, match="Parameter or None"):
        m.register_parameter("p", ember.zeros(2))
    m.x = 1
    with pytest.raises(KeyError, match="already exists"):
        m.register_buffer("x", ember.zeros(1))
    with pytest.raises(TypeError, match="is not a Module subclass"):
        m.add_module("z", 3)
    with pytest.raises(ValueError, match="non-leaf"):
        m.register_parameter("q", _nonleaf())

    class NoInit(nn.Module):
        def __init__(self):
            self.w = Parameter(ember.zeros(1))

    with pytest.raises(AttributeError, match="before Module.__init__"):
        NoInit()
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        nn.Linear(1, 1).nope


def _nonleaf():
    p = Parameter(ember.zeros(2))
    p.grad_fn = object()        # simulate a non-leaf
    return p


def test_get_submodule_parameter_buffer():
    net = nn.Sequential(nn.Linear(2, 3), Net())
    assert net.get_submodule("1.fc2") is net[1].fc2
    assert net.get_parameter("1.fc2.bias") is net[1].fc2.bias
    assert net.get_buffer("1.running") is net[1].running
    assert net.get_submodule("") is net
    with pytest.raises(AttributeError, match="has no attribute `nope`"):
        net.get_submodule("1.nope")
    with pytest.raises(AttributeError, match="not an nn.Module"):
        net.get_submodule("0.weight")
    with pytest.raises(AttributeError, match="not an nn.Parameter"):
        net.get_parameter("1.running")


def test_shared_parameter_deduplicated():
    a = nn.Linear(3, 3)
    net = nn.Sequential(a, nn.ReLU(), a)
    assert len(list(net.parameters())) == 2
    assert len(list(net.named_parameters(remove_duplicate=False))) == 4
    assert [n for n, _ in net.named_modules()] == ["", "0", "1"]


def test_forward_unimplemented():
    with pytest.raises(NotImplementedError, match="forward"):
        nn.Module()(ember.ones(1))


# ---------------------------------------------------------------- state dict

def test_state_dict_round_trip_and_inplace_copy():
    a, b = Net(), Net()
    sd = a.state_dict()
    assert isinstance(sd, OrderedDict)
    assert list(sd) == ["scale", "running", "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
    assert all(not isinstance(v, Parameter) and not v.requires_grad for v in sd.values())
    # detached arrays share memory with the parameters
    assert np.shares_memory(np.asarray(sd["fc1.weight"]), np.asarray(a.fc1.weight))
    w_before = b.fc1.weight
    res = b.load_state_dict(sd)
    assert res.missing_keys == [] and res.unexpected_keys == []
    assert b.fc1.weight is w_before                 # same Parameter object, values copied
    assert isinstance(b.fc1.weight, Parameter) and b.fc1.weight.requires_grad
    for k, v in a.state_dict().items():
        np.testing.assert_array_equal(np.asarray(b.state_dict()[k]), np.asarray(v))
    assert not np.shares_memory(np.asarray(b.fc1.weight), np.asarray(a.fc1.weight))
    kv = a.state_dict(keep_vars=True)
    assert kv["scale"] is a.scale


def test_load_state_dict_strict_errors():
    m = Net()
    sd = m.state_dict()
    del sd["fc1.bias"]
    sd["extra.weight"] = ember.zeros(1)
    sd["fc2.weight"] = ember.zeros((9, 9))
    with pytest.raises(RuntimeError) as ei:
        m.load_state_dict(sd)
    msg = str(ei.value)
    assert "Error(s) in loading state_dict for Net" in msg
    assert 'Missing key(s) in state_dict: "fc1.bias"' in msg
    assert 'Unexpected key(s) in state_dict: "extra.weight"' in msg
    assert "size mismatch for fc2.weight" in msg and "(9, 9)" in msg and "(3, 5)" in msg
    del sd["fc2.weight"]
    res = m.load_state_dict(sd, strict=False)
    assert res.missing_keys == ["fc1.bias", "fc2.weight"]
    assert res.unexpected_keys == ["extra.weight"]
    assert res == (["fc1.bias", "fc2.weight"], ["extra.weight"])


def test_load_state_dict_non_strict_reports():
    m = nn.Linear(2, 2)
    res = m.load_state_dict({"weight": ember.ones((2, 2)), "junk": ember.ones(1)}, strict=False)
    assert res.unexpected_keys == ["junk"] and res.missing_keys == ["bias"]
    assert m.weight.tolist() == [[1.0, 1.0], [1.0, 1.0]]
    with pytest.raises(RuntimeError, match="Missing key"):
        m.load_state_dict({"weight": ember.ones((2, 2))})


def test_load_state_dict_from_numpy_and_torch():
    torch = pytest.importorskip("torch")
    t = torch.nn.Linear(3, 2)
    e = nn.Linear(3, 2)
    e.load_state_dict(t.state_dict())
    np.testing.assert_array_equal(np.asarray(e.weight), t.weight.detach().numpy())
    e.load_state_dict({k: np.asarray(v) * 0 for k, v in e.state_dict().items()})
    assert float(abs(e.weight).sum()) == 0.0


def test_load_keeps_optimizer_view_working():
    m = nn.Linear(2, 2)
    held = list(m.parameters())
    m.load_state_dict({"weight": ember.full((2, 2), 3.0), "bias": ember.zeros(2)})
    assert held[0].tolist() == [[3.0, 3.0], [3.0, 3.0]]


def test_non_persistent_buffer_not_saved_or_expected():
    m = Net()
    assert "tmp" not in m.state_dict()
    m.load_state_dict(m.state_dict())           # strict, no complaint about tmp


# ---------------------------------------------------------------- hooks

def test_forward_hooks_and_handles():
    m = nn.Linear(2, 2)
    calls = []
    h1 = m.register_forward_pre_hook(lambda mod, args: calls.append("pre"))
    h2 = m.register_forward_hook(lambda mod, args, out: calls.append(("post", out.shape)))
    m(ember.ones((1, 2)))
    assert calls == ["pre", ("post", (1, 2))]
    h1.remove()
    h2.remove()
    h2.remove()                                 # removing twice is harmless
    calls.clear()
    m(ember.ones((1, 2)))
    assert calls == []


def test_hooks_modify_args_and_output():
    m = nn.Identity()
    m.register_forward_pre_hook(lambda mod, args: args[0] + 1)          # non-tuple result
    h = m.register_forward_hook(lambda mod, args, out: out * 10)
    assert m(ember.zeros(1)).tolist() == [10.0]
    h.remove()
    m.register_forward_pre_hook(lambda mod, args, kwargs: ((args[0] * 3,), kwargs),
                                with_kwargs=True)
    assert m(ember.ones(1)).tolist() == [6.0]


def test_hook_prepend_and_with_kwargs_and_context_manager():
    m = nn.Identity()
    order = []
    m.register_forward_hook(lambda *a: order.append(1))
    m.register_forward_hook(lambda *a: order.append(0), prepend=True)
    m.register_forward_hook(lambda mod, args, kwargs, out: order.append(("kw", kwargs)),
                            with_kwargs=True)
    m(ember.ones(1))
    assert order == [0, 1, ("kw", {})]
    with m.register_forward_pre_hook(lambda mod, args: (args[0] * 0,)):
        assert m(ember.ones(1)).tolist() == [0.0]
    assert m(ember.ones(1)).tolist() == [1.0]


def test_always_call_hook_on_exception():
    class Boom(nn.Module):
        def forward(self, x):
            raise ValueError("boom")
    m = Boom()
    seen = []
    m.register_forward_hook(lambda mod, args, out: seen.append(out), always_call=True)
    with pytest.raises(ValueError, match="boom"):
        m(ember.ones(1))
    assert seen == [None]


def test_hooks_survive_deepcopy_and_gradients_flow():
    m = nn.Linear(2, 1)
    m.register_forward_hook(lambda mod, args, out: out * 2)
    y = m(ember.ones((1, 2)))
    y.sum().backward()
    assert m.weight.grad.tolist() == [[2.0, 2.0]]


# ---------------------------------------------------------------- repr

def test_repr_matches_torch():
    torch = pytest.importorskip("torch")
    e = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Dropout(0.1),
                      nn.Sequential(nn.Linear(8, 2, bias=False), nn.Tanh()),
                      nn.Flatten(), nn.Embedding(10, 3, padding_idx=0), nn.GELU(),
                      nn.LeakyReLU(0.2), nn.Softplus(), nn.ELU(), nn.Identity(),
                      nn.ModuleList([nn.ReLU(), nn.ReLU(), nn.Tanh()]))
    t = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Dropout(0.1),
                            torch.nn.Sequential(torch.nn.Linear(8, 2, bias=False),
                                                torch.nn.Tanh()),
                            torch.nn.Flatten(), torch.nn.Embedding(10, 3, padding_idx=0),
                            torch.nn.GELU(), torch.nn.LeakyReLU(0.2), torch.nn.Softplus(),
                            torch.nn.ELU(), torch.nn.Identity(),
                            torch.nn.ModuleList([torch.nn.ReLU(), torch.nn.ReLU(),
                                                 torch.nn.Tanh()]))
    assert repr(e) == repr(t)
    assert repr(nn.ModuleList()) == "ModuleList()"


def test_dir_lists_members():
    d = dir(Net())
    for name in ("fc1", "scale", "running", "forward", "training"):
        assert name in d


# ---------------------------------------------------------------- modes, grads

def test_train_eval_propagation():
    net = nn.Sequential(nn.Linear(1, 1), nn.Sequential(nn.Dropout(), nn.ReLU()))
    assert all(m.training for m in net.modules())
    assert net.eval() is net
    assert not any(m.training for m in net.modules())
    net.train()
    assert all(m.training for m in net.modules())
    net[1].train(False)
    assert net.training and not net[1][0].training
    with pytest.raises(ValueError, match="boolean"):
        net.train("yes")


def test_zero_grad_and_requires_grad_():
    m = nn.Linear(3, 2)
    m(ember.ones((4, 3))).sum().backward()
    assert m.weight.grad is not None
    g = m.weight.grad
    m.zero_grad(set_to_none=False)
    assert m.weight.grad is g and float(abs(g).sum()) == 0.0
    m.zero_grad()
    assert m.weight.grad is None and m.bias.grad is None
    m.requires_grad_(False)
    assert not any(p.requires_grad for p in m.parameters())
    m.requires_grad_()
    assert all(p.requires_grad for p in m.parameters())


def test_apply_order_and_init():
    net = nn.Sequential(nn.Linear(2, 2), nn.Sequential(nn.Linear(2, 2)))
    seen = []
    net.apply(lambda m: seen.append(type(m).__name__))
    assert seen == ["Linear", "Linear", "Sequential", "Sequential"]

    def init_fn(m):
        if isinstance(m, nn.Linear):
            nn.init.zeros_(m.weight)
    net.apply(init_fn)
    assert all(float(abs(m.weight).sum()) == 0 for m in net.modules() if isinstance(m, nn.Linear))


# ---------------------------------------------------------------- copies, dtype

def test_deepcopy_independent_parameters():
    m = Net()
    m.fc1.weight.grad = ember.ones((5, 4))
    c = copy.deepcopy(m)
    assert isinstance(c.fc1.weight, Parameter) and c.fc1.weight.requires_grad
    assert c.fc1.weight is not m.fc1.weight
    x = ember.ones((1, 4))
    np.testing.assert_allclose(np.asarray(c(x)), np.asarray(m(x)))
    np.testing.assert_array_equal(np.asarray(c.fc1.weight), np.asarray(m.fc1.weight))
    with ember.no_grad():
        c.fc1.weight[...] = 0
    assert float(abs(m.fc1.weight).sum()) > 0
    assert c.running is not m.running
    # tied weights stay tied in the copy
    a = nn.Linear(2, 2)
    tied = nn.Sequential(a, a)
    ct = copy.deepcopy(tied)
    assert ct[0].weight is ct[1].weight


def test_pickle_round_trip():
    m = nn.Sequential(nn.Linear(2, 3), nn.ReLU())
    r = pickle.loads(pickle.dumps(m))
    assert isinstance(r[0].weight, Parameter)
    np.testing.assert_array_equal(np.asarray(r[0].weight), np.asarray(m[0].weight))
    assert r(ember.ones((1, 2))).shape == (1, 3)


def test_to_dtype_and_device():
    m = Net()
    m.fc1.weight.grad = ember.ones((5, 4))
    ids = [n for n, _ in m.named_parameters()]
    assert m.to(ember.float64) is m
    assert all(p.dtype == np.float64 for p in m.parameters())
    assert all(isinstance(p, Parameter) and p.requires_grad for p in m.parameters())
    assert m.running.dtype == np.float64
    assert m.fc1.weight.grad.dtype == np.float64
    assert [n for n, _ in m.named_parameters()] == ids
    y = m(ember.ones((2, 4), dtype=ember.float64))
    assert y.dtype == np.float64
    m.float()
    assert m.fc2.weight.dtype == np.float32
    m.double()
    assert m.fc2.bias.dtype == np.float64
    m.to("cpu", ember.float32)
    assert m.fc2.bias.dtype == np.float32
    assert m.to("cpu") is m and m.cpu() is m
    m.to(ember.zeros(1, dtype=ember.float64))
    assert m.scale.dtype == np.float64
    if not ember.cuda.is_available():
        with pytest.raises(RuntimeError, match="CUDA"):
            m.to("cuda")
        with pytest.raises(RuntimeError, match="CUDA"):
            m.cuda()
    with pytest.raises(TypeError, match="floating point"):
        m.to(ember.int64)
    # tied weights stay tied through to()
    a = nn.Linear(2, 2)
    tied = nn.Sequential(a, a).double()
    assert tied[0].weight is tied[1].weight


def test_int_buffers_keep_dtype_in_to():
    m = nn.Module()
    m.register_buffer("count", ember.zeros((), dtype=ember.int64))
    m.to(ember.float64)
    assert m.count.dtype == np.int64


# ---------------------------------------------------------------- containers

def test_sequential():
    a, b, c = nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1)
    s = nn.Sequential(a, b, c)
    assert len(s) == 3 and s[0] is a and s[-1] is c
    assert list(s) == [a, b, c]
    sl = s[1:]
    assert isinstance(sl, nn.Sequential) and len(sl) == 2 and sl[0] is b
    assert [n for n, _ in sl.named_children()] == ["1", "2"]
    s.append(nn.Tanh())
    assert len(s) == 4
    del s[1]
    assert [n for n, _ in s.named_children()] == ["0", "1", "2"] and s[1] is c
    s[0] = nn.Identity()
    assert isinstance(s[0], nn.Identity)
    with pytest.raises(IndexError):
        s[10]
    s.insert(0, nn.ReLU())
    assert isinstance(s[0], nn.ReLU) and len(s) == 4
    assert isinstance(s.pop(0), nn.ReLU) and len(s) == 3
    od = nn.Sequential(OrderedDict([("fc", nn.Linear(2, 2)), ("act", nn.ReLU())]))
    assert od.fc is od[0] and [n for n, _ in od.named_parameters()] == ["fc.weight", "fc.bias"]
    both = nn.Sequential(nn.ReLU()) + nn.Sequential(nn.Tanh())
    assert len(both) == 2
    x = ember.ones((4, 2))
    y = nn.Sequential(nn.Linear(2, 3), nn.ReLU())(x)
    assert y.shape == (4, 3)
    assert nn.Sequential()(x) is x


def test_module_list():
    ml = nn.ModuleList([nn.Linear(1, 1) for _ in range(3)])
    assert len(ml) == 3 and len(list(ml.parameters())) == 6
    ml.append(nn.ReLU())
    ml.extend([nn.Tanh()])
    ml.insert(0, nn.Identity())
    assert [type(m).__name__ for m in ml] == ["Identity", "Linear", "Linear", "Linear", "ReLU",
                                              "Tanh"]
    assert isinstance(ml[1:3], nn.ModuleList) and len(ml[1:3]) == 2
    del ml[0]
    assert isinstance(ml[0], nn.Linear) and [n for n, _ in ml.named_children()][0] == "0"
    ml[-1] = nn.Sigmoid()
    assert isinstance(ml[4], nn.Sigmoid)
    with pytest.raises(IndexError):
        ml[7]
    ml += [nn.ReLU()]
    assert len(ml) == 6
    assert isinstance(ml.pop(-1), nn.ReLU)


def test_module_dict():
    d = nn.ModuleDict({"a": nn.ReLU(), "b": nn.Linear(1, 2)})
    assert list(d) == ["a", "b"] and "a" in d and len(d) == 2
    d["c"] = nn.Tanh()
    d.update([("e", nn.Identity())])
    assert list(d.keys()) == ["a", "b", "c", "e"]
    assert [n for n, _ in d.named_parameters()] == ["b.weight", "b.bias"]
    assert isinstance(d.pop("a"), nn.ReLU) and "a" not in d
    del d["c"]
    assert list(d.keys()) == ["b", "e"]
    d.clear()
    assert len(d) == 0


def test_parameter_list_and_dict():
    pl = nn.ParameterList([ember.zeros(2), Parameter(ember.ones(3))])
    assert all(isinstance(p, Parameter) for p in pl)
    pl.append(ember.zeros((1, 1)))
    assert len(pl) == 3 and len(list(pl.parameters())) == 3
    assert [n for n, _ in pl.named_parameters()] == ["0", "1", "2"]
    pl[0] = ember.full((2,), 5.0)
    assert pl[0].tolist() == [5.0, 5.0] and isinstance(pl[0], Parameter)
    pd = nn.ParameterDict({"w": ember.zeros(2)})
    pd["b"] = Parameter(ember.ones(1))
    assert list(pd) == ["w", "b"] and "w" in pd and len(pd) == 2
    assert isinstance(pd["w"], Parameter)
    assert [n for n, _ in pd.named_parameters()] == ["w", "b"]
    del pd["w"]
    assert list(pd.keys()) == ["b"]

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.ps = nn.ParameterList([ember.zeros(2)])
            self.pd = nn.ParameterDict({"x": ember.zeros(1)})
    assert list(M().state_dict()) == ["ps.0", "pd.x"]


def test_parameter_list_repr_like_torch():
    torch = pytest.importorskip("torch")
    for n in (1, 2):
        e = nn.ParameterList([ember.zeros((2, 3))] * n)
        t = torch.nn.ParameterList([torch.zeros(2, 3)] * n)
        assert repr(e).replace("ember.float32", "torch.float32") == repr(t)
    e = nn.ParameterDict({"a": ember.zeros(2), "b": ember.zeros((1, 2))})
    t = torch.nn.ParameterDict({"a": torch.zeros(2), "b": torch.zeros(1, 2)})
    # (PyTorch's ParameterDict names the dtype as a tensor type there)
    assert repr(e).replace("ember.float32", "torch.float32") == \
        repr(t).replace("torch.FloatTensor", "torch.float32")


def test_load_state_dict_assign():
    m = nn.Linear(2, 2)
    w = ember.full((2, 2), 7.0)
    m.load_state_dict({"weight": w, "bias": ember.zeros(2)}, assign=True)
    assert isinstance(m.weight, Parameter) and m.weight.requires_grad
    assert np.shares_memory(np.asarray(m.weight), np.asarray(w))
    m.requires_grad_(False)
    m.load_state_dict({"weight": w, "bias": ember.zeros(2)}, assign=True)
    assert not m.weight.requires_grad


def test_parameter_data_swap_keeps_the_read_only_flag():
    """``p.data = t`` views t's memory: a read-only t stays protected through p."""
    import ember
    p = ember.nn.Parameter(ember.zeros(3))
    src = ember.broadcast_to(ember.asarray([1.0]), (3,))         # read-only, as NumPy's
    p.data = src
    assert not p.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        with ember.no_grad():
            p[0] = 5.0
    p.data = ember.ones(3)
    assert p.flags.writeable
    with ember.no_grad():
        p[0] = 5.0
    assert p.tolist() == [5.0, 1.0, 1.0]
