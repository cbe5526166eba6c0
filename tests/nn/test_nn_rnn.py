"""RNN / LSTM / GRU and their cells against PyTorch: outputs, states and every gradient."""
from functools import partial

import numpy as np
import pytest

import ember as E
from ember import nn
from ember.autograd import gradcheck, gradgradcheck
import helpers
from ember.nn.modules.rnn import _rnn_layer

torch = pytest.importorskip("torch")

# PyTorch warns about its own deprecations and prototypes (mixed mask types, nested tensors,
# oneDNN without projections): not ember's business here
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

RTOL, ATOL = 1e-4, 1e-5


def _copy_state(tmod, emod):
    sd = {k: E.asarray(v.detach().numpy().copy()) for k, v in tmod.state_dict().items()}
    assert list(sd) == list(emod.state_dict())
    emod.load_state_dict(sd)


def _pair(a, dtype=np.float32):
    a = np.asarray(a, dtype=dtype)
    t = torch.tensor(a, requires_grad=True)
    e = E.asarray(a.copy())
    e.requires_grad = True
    return t, e


_close = partial(helpers.close, rtol=RTOL, atol=ATOL)


def _loss(out, h, lib):
    """A loss that weights outputs and final states differently (all gradients differ)."""
    hs = h if isinstance(h, tuple) else (h,)
    total = (out * out).sum()
    for k, s in enumerate(hs):
        total = total + (s * s * s).sum() * (k + 1)
    return total


def _compare(tmod, emod, x, hx=None, train=True, dtype=np.float32):
    _copy_state(tmod, emod)
    tmod.train(train)
    emod.train(train)
    tx, ex = _pair(x, dtype)
    if hx is None:
        to, th = tmod(tx)
        eo, eh = emod(ex)
        thx = ehx = ()
    else:
        if isinstance(hx, tuple):
            pairs = [_pair(h, dtype) for h in hx]
            thx, ehx = tuple(p[0] for p in pairs), tuple(p[1] for p in pairs)
            to, th = tmod(tx, thx)
            eo, eh = emod(ex, ehx)
        else:
            thx, ehx = _pair(hx, dtype)
            to, th = tmod(tx, thx)
            eo, eh = emod(ex, ehx)
            thx, ehx = (thx,), (ehx,)
    _close(eo, to, "output")
    if isinstance(th, tuple):
        for a, b in zip(eh, th):
            _close(a, b, "final state")
    else:
        _close(eh, th, "h_n")
    _loss(to, th, torch).backward()
    _loss(eo, eh, E).backward()
    _close(ex.grad, tx.grad, "input grad")
    for a, b in zip(ehx, thx):
        _close(a.grad, b.grad, "initial state grad")
    for name, p in tmod.named_parameters():
        _close(getattr(emod, name).grad, p.grad, f"grad of {name}")


@pytest.mark.parametrize("mode", ["RNN", "LSTM", "GRU"])
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("with_state", [False, True])
def test_module_matches_torch(mode, batch_first, bidirectional, with_state):
    rng = np.random.default_rng(hash((mode, batch_first, bidirectional, with_state)) % 2**32)
    T, N, I, H, L = 4, 3, 5, 6, 2
    kw = dict(num_layers=L, bidirectional=bidirectional, batch_first=batch_first)
    tmod = getattr(torch.nn, mode)(I, H, **kw)
    emod = getattr(nn, mode)(I, H, **kw)
    x = rng.standard_normal((N, T, I) if batch_first else (T, N, I))
    hx = None
    if with_state:
        D = 2 if bidirectional else 1
        hx = rng.standard_normal((L * D, N, H))
        if mode == "LSTM":
            hx = (hx, rng.standard_normal((L * D, N, H)))
    _compare(tmod, emod, x, hx)


@pytest.mark.parametrize("nonlinearity", ["tanh", "relu"])
def test_rnn_relu_no_bias_eval(nonlinearity):
    rng = np.random.default_rng(1)
    tmod = torch.nn.RNN(3, 4, 1, nonlinearity=nonlinearity, bias=False)
    emod = nn.RNN(3, 4, 1, nonlinearity=nonlinearity, bias=False)
    _compare(tmod, emod, rng.standard_normal((5, 2, 3)), train=False)


@pytest.mark.parametrize("mode", ["RNN", "LSTM", "GRU"])
@pytest.mark.parametrize("batch_first", [False, True])
def test_unbatched(mode, batch_first):
    rng = np.random.default_rng(2)
    tmod = getattr(torch.nn, mode)(3, 4, 2, bidirectional=True, batch_first=batch_first)
    emod = getattr(nn, mode)(3, 4, 2, bidirectional=True, batch_first=batch_first)
    x = rng.standard_normal((5, 3))
    _compare(tmod, emod, x)
    h = rng.standard_normal((4, 4))
    _compare(tmod, emod, x, (h, rng.standard_normal((4, 4))) if mode == "LSTM" else h)


def test_lstm_proj_size():
    rng = np.random.default_rng(3)
    kw = dict(num_layers=2, bidirectional=True, proj_size=2, batch_first=True)
    tmod = torch.nn.LSTM(3, 5, **kw)
    emod = nn.LSTM(3, 5, **kw)
    x = rng.standard_normal((2, 4, 3))
    _compare(tmod, emod, x)
    _compare(tmod, emod, x, (rng.standard_normal((4, 2, 2)), rng.standard_normal((4, 2, 5))))


def test_float64_and_batch_of_one():
    rng = np.random.default_rng(4)
    tmod = torch.nn.GRU(3, 4, 2).double()
    emod = nn.GRU(3, 4, 2, dtype=E.float64)
    _compare(tmod, emod, rng.standard_normal((3, 1, 3)), dtype=np.float64)


def test_dropout_between_layers():
    emod = nn.LSTM(3, 4, 3, dropout=0.5)
    x = E.asarray(np.random.default_rng(5).standard_normal((4, 2, 3)).astype(np.float32))
    emod.eval()
    a = np.asarray(emod(x)[0])
    b = np.asarray(emod(x)[0])
    np.testing.assert_array_equal(a, b)          # no dropout in eval
    emod.train()
    out, _ = emod(x)
    out.sum().backward()
    assert emod.weight_ih_l0.grad is not None


def test_state_dict_names_and_init():
    t = torch.nn.LSTM(3, 4, 2, bidirectional=True, proj_size=2)
    e = nn.LSTM(3, 4, 2, bidirectional=True, proj_size=2)
    assert [(k, tuple(v.shape)) for k, v in t.state_dict().items()] == \
           [(k, tuple(v.shape)) for k, v in e.state_dict().items()]
    for p in e.parameters():
        assert np.abs(np.asarray(p)).max() <= 0.5 + 1e-7
    assert [k for k, _ in torch.nn.GRUCell(2, 3).named_parameters()] == \
           [k for k, _ in nn.GRUCell(2, 3).named_parameters()]


@pytest.mark.parametrize("cell", ["RNNCell", "LSTMCell", "GRUCell"])
@pytest.mark.parametrize("batched", [True, False])
@pytest.mark.parametrize("with_state", [False, True])
def test_cells(cell, batched, with_state):
    rng = np.random.default_rng(6)
    tmod, emod = getattr(torch.nn, cell)(3, 4), getattr(nn, cell)(3, 4)
    _copy_state(tmod, emod)
    shape = (2, 3) if batched else (3,)
    hshape = (2, 4) if batched else (4,)
    tx, ex = _pair(rng.standard_normal(shape))
    targs, eargs = [tx], [ex]
    states = []
    if with_state:
        n = 2 if cell == "LSTMCell" else 1
        states = [_pair(rng.standard_normal(hshape)) for _ in range(n)]
        if cell == "LSTMCell":
            targs.append(tuple(s[0] for s in states))
            eargs.append(tuple(s[1] for s in states))
        else:
            targs.append(states[0][0])
            eargs.append(states[0][1])
    to, eo = tmod(*targs), emod(*eargs)
    to = to if isinstance(to, tuple) else (to,)
    eo = eo if isinstance(eo, tuple) else (eo,)
    for a, b in zip(eo, to):
        _close(a, b, "cell output")
    sum((o * o).sum() * (k + 1) for k, o in enumerate(to)).backward()
    sum((o * o).sum() * (k + 1) for k, o in enumerate(eo)).backward()
    _close(ex.grad, tx.grad, "input grad")
    for t, e in states:
        _close(e.grad, t.grad, "state grad")
    for name, p in tmod.named_parameters():
        _close(getattr(emod, name).grad, p.grad, f"grad of {name}")


def test_rnn_cell_relu():
    t, e = torch.nn.RNNCell(3, 2, nonlinearity="relu"), nn.RNNCell(3, 2, nonlinearity="relu")
    _copy_state(t, e)
    x = np.random.default_rng(7).standard_normal((4, 3))
    _close(e(E.asarray(x.astype(np.float32))), t(torch.tensor(x, dtype=torch.float32)), "relu")


@pytest.mark.parametrize("mode", ["RNN_TANH", "RNN_RELU", "GRU", "LSTM"])
@pytest.mark.parametrize("reverse", [False, True])
def test_layer_gradcheck(mode, reverse):
    rng = np.random.default_rng(8)
    G = {"LSTM": 4, "GRU": 3}.get(mode, 1)
    T, N, I, H = 3, 2, 2, 2

    def arr(*s):
        a = E.asarray(rng.standard_normal(s) * 0.5)
        a.requires_grad = True
        return a
    x, h0 = arr(N, T, I), arr(N, H)
    ws = (arr(G * H, I), arr(G * H, H), arr(G * H), arr(G * H))
    if mode == "LSTM":
        c0 = arr(N, H)

        def f(x, h0, c0, a, b, c, d):
            return _rnn_layer(mode, x, h0, c0, a, b, c, d, None, reverse, True)[:3]
        ins = (x, h0, c0) + ws
    else:
        def f(x, h0, a, b, c, d):
            return _rnn_layer(mode, x, h0, None, a, b, c, d, None, reverse, True)[:2]
        ins = (x, h0) + ws
    assert gradcheck(f, ins)
    assert gradgradcheck(f, ins)


def test_errors():
    m = nn.LSTM(3, 4)
    with pytest.raises(ValueError, match="2D or 3D"):
        m(E.ones((2, 3, 4, 3)))
    with pytest.raises(RuntimeError, match="input_size"):
        m(E.ones((2, 3, 5)))
    with pytest.raises(RuntimeError, match="Expected hidden size"):
        m(E.ones((2, 3, 3)), (E.zeros((1, 2, 4)), E.zeros((1, 3, 4))))
    with pytest.raises(RuntimeError, match="3-D"):
        m(E.ones((2, 3, 3)), (E.zeros((3, 4)), E.zeros((3, 4))))
    with pytest.raises(TypeError, match="dtype"):
        m(E.ones((2, 3, 3), dtype=E.float64))
    with pytest.raises(ValueError, match="nonlinearity"):
        nn.RNN(3, 4, nonlinearity="gelu")
    with pytest.raises(ValueError, match="proj_size"):
        nn.GRU(3, 4, proj_size=2)
    with pytest.raises(ValueError, match="proj_size"):
        nn.LSTM(3, 4, proj_size=4)
    with pytest.raises(ValueError, match="dropout"):
        nn.GRU(3, 4, dropout=1.5)
    with pytest.raises(RuntimeError, match="input_size"):
        nn.GRUCell(3, 4)(E.ones((2, 5)))
    with pytest.raises(ValueError, match="empty"):
        m(E.ones((0, 2, 3)))
