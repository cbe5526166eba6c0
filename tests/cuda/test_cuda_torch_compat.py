"""PyTorch's Tensor methods and top-level names (ember/_torch.py) on GPU arrays:
each gives on the device what it gives on the CPU (itself tested against PyTorch in
tests/test_torch_compat.py), gradients included."""
import numpy as np
import pytest

import ember
from cuda_helpers import GPU_MARK, gpu, host, assert_same, assert_on_device, DEV

pytestmark = GPU_MARK

RNG = np.random.default_rng(0)
A = RNG.standard_normal((3, 4)).astype(np.float32)
I3 = np.array([[0, 2, 1, 0], [2, 2, 0, 1], [1, 0, 0, 2]])


def _i(x):
    return x if isinstance(x, ember.ndarray) else ember.asarray(x)


CASES = [
    ("long", lambda x, i: x.long()), ("bool", lambda x, i: x.bool()),
    ("half", lambda x, i: x.half()), ("type", lambda x, i: x.type("torch.DoubleTensor")),
    ("t", lambda x, i: x.t()), ("eq", lambda x, i: x.eq(x * 2)), ("ge", lambda x, i: x.ge(0.1)),
    ("view_as", lambda x, i: x.view_as(x.reshape(4, 3))), ("pow", lambda x, i: x.pow(2)),
    ("exp", lambda x, i: x.exp()), ("abs", lambda x, i: x.abs()),
    ("clamp", lambda x, i: x.clamp(-0.5, 0.5)), ("clamp_", lambda x, i: x.copy().clamp_(max=0.1)),
    ("add_", lambda x, i: x.copy().add_(x, alpha=2)), ("sub_", lambda x, i: x.copy().sub_(1)),
    ("mul_", lambda x, i: x.copy().mul_(x)), ("div_", lambda x, i: x.copy().div_(3.0)),
    ("zero_", lambda x, i: x.copy().zero_()), ("fill_", lambda x, i: x.copy().fill_(2)),
    ("copy_", lambda x, i: x.copy().copy_(x[::-1])),
    ("masked_fill", lambda x, i: x.masked_fill(x > 0, 0.0)),
    ("masked_fill_", lambda x, i: x.copy().masked_fill_(x > 0, -1.0)),
    ("narrow", lambda x, i: x.narrow(1, 1, 2)), ("split", lambda x, i: x.split([1, 3], 1)[1]),
    ("chunk", lambda x, i: x.chunk(2, 1)[0]), ("gather", lambda x, i: x.gather(1, i)),
    ("scatter", lambda x, i: x.scatter(1, i[:, :1], 5.0)),
    ("scatter_add", lambda x, i: x.scatter_add(1, i, x)),
    ("scatter_add_", lambda x, i: x.copy().scatter_add_(0, i, x)),
    ("index_select", lambda x, i: x.index_select(1, i[0])),
    ("new_zeros", lambda x, i: x.new_zeros(2, 3)), ("new_full", lambda x, i: x.new_full((2,), 4)),
    ("new_tensor", lambda x, i: x.new_tensor([1.0, 2.0])),
    ("mm", lambda x, i: x.mm(x.T)), ("bmm", lambda x, i: ember.bmm(x[None], x.T[None])),
    ("addmm", lambda x, i: ember.addmm(x[0], x.T, x, beta=0.5)),
    ("max_dim", lambda x, i: x.max(dim=1).indices), ("min_dim", lambda x, i: x.min(dim=0).values),
    ("sort_dim", lambda x, i: ember.sort(x, dim=1).indices),
    ("topk", lambda x, i: x.topk(2).values), ("std_dim", lambda x, i: x.std(dim=1)),
    ("transpose", lambda x, i: ember.transpose(x[None], 1, 2)),
    ("tile", lambda x, i: x.tile(2, 1)), ("swapdims", lambda x, i: x.swapdims(0, 1)),
    ("flatten", lambda x, i: x[None].flatten(1)), ("unbind", lambda x, i: x.unbind(1)[2]),
    ("masked_select", lambda x, i: x.masked_select(x > 0)),
    ("nonzero", lambda x, i: (x > 0).nonzero(as_tuple=False)),
    ("norm", lambda x, i: x.norm(dim=1)), ("softmax", lambda x, i: x.softmax(1)),
    ("median_dim", lambda x, i: ember.median(x, dim=1).values),
]


@pytest.mark.parametrize("name,fn", CASES, ids=[c[0] for c in CASES])
def test_method_on_gpu_matches_cpu(name, fn):
    x, i = ember.asarray(A), ember.asarray(I3)
    expected = fn(x, i)
    got = fn(gpu(x), gpu(i))
    assert_same(got, expected)


@pytest.mark.parametrize("name,fn", [
    ("gather", lambda x: ember.gather(x, 1, gpu(I3) if x.is_cuda else ember.asarray(I3))),
    ("narrow", lambda x: x.narrow(0, 1, 2) * 2),
    ("max_dim", lambda x: x.max(dim=1).values),
    ("masked_fill_", lambda x: (x * 1).masked_fill_(x > 0, 0.0)),
    ("clamp_", lambda x: (x * 1).clamp_(-0.2, 0.2)),
], ids=lambda v: v if isinstance(v, str) else "")
def test_gradient_on_gpu_matches_cpu(name, fn):
    xc = ember.asarray(A, requires_grad=True)
    xg = gpu(ember.asarray(A)).requires_grad_()
    w = RNG.standard_normal(fn(xc.detach()).shape).astype(np.float32)
    (fn(xc) * ember.asarray(w)).sum().backward()
    (fn(xg) * gpu(w)).sum().backward()
    assert_same(xg.grad, xc.grad)


def test_size_and_type_on_device():
    x = gpu(A)
    assert x.size == 12 and x.size() == (3, 4) and x.size(-1) == 4
    assert x.type() == ("ember.FloatTensor" if DEV == "cpu" else "ember.cuda.FloatTensor")


def test_creation_and_random_on_device():
    for x in (ember.zeros(2, 3, device=DEV), ember.randn(2, 3, device=DEV),
              ember.rand_like(gpu(A)), ember.randint(0, 5, (4,), device=DEV)):
        assert_on_device(x)
    assert host(ember.randint(0, 5, (100,), device=DEV)).max() < 5
