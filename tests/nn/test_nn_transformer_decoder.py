"""nn.TransformerDecoderLayer, nn.TransformerDecoder and nn.Transformer against PyTorch:
converted state dicts load as is; outputs and every gradient match in eval mode."""
import numpy as np
import pytest

import ember as E
from ember import nn

from test_nn_transformer import _pair, _close, _copy_state, _backward_both

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

D, H, FF = 8, 2, 16


def _to_np(v):
    return v if not isinstance(v, np.ndarray) else v


def _mask_pair(v):
    if isinstance(v, np.ndarray):
        v = v if v.dtype == bool else v.astype(np.float32)
        return torch.tensor(v), E.asarray(v)
    return v, v


def _run(t, e, inputs, rng, **masks):
    """Run both modules in eval mode; compare outputs, input and parameter gradients."""
    t.eval()
    e.eval()
    pairs = [_pair(a) for a in inputs]
    tkw, ekw = {}, {}
    for k, v in masks.items():
        tkw[k], ekw[k] = _mask_pair(v)
    to = t(*[p[0] for p in pairs], **tkw)
    eo = e(*[p[1] for p in pairs], **ekw)
    _close(eo, to, "output")
    _backward_both([to], [eo], rng)
    for i, (tp, ep) in enumerate(pairs):
        _close(ep.grad, tp.grad, f"grad input {i}")
    eparams = dict(e.named_parameters())
    assert list(eparams) == [n for n, _ in t.named_parameters()]
    for name, p in t.named_parameters():
        _close(eparams[name].grad, p.grad, f"grad {name}")


def _dec_layer_pair(**kw):
    base = dict(d_model=D, nhead=H, dim_feedforward=FF, dropout=0.1)
    base.update(kw)
    t = torch.nn.TransformerDecoderLayer(**base)
    e = nn.TransformerDecoderLayer(**base)
    _copy_state(t, e)
    return t, e


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_decoder_layer(norm_first, batch_first, activation):
    rng = np.random.default_rng(0)
    t, e = _dec_layer_pair(norm_first=norm_first, batch_first=batch_first,
                           activation=activation)
    N, T, S = 2, 3, 5
    tgt = rng.standard_normal((N, T, D) if batch_first else (T, N, D))
    mem = rng.standard_normal((N, S, D) if batch_first else (S, N, D))
    _run(t, e, [tgt, mem], rng)


@pytest.mark.parametrize("batch_first", [False, True])
def test_decoder_layer_masks(batch_first):
    rng = np.random.default_rng(1)
    t, e = _dec_layer_pair(batch_first=batch_first, layer_norm_eps=1e-6)
    N, T, S = 3, 4, 5
    tgt = rng.standard_normal((N, T, D) if batch_first else (T, N, D))
    mem = rng.standard_normal((N, S, D) if batch_first else (S, N, D))
    causal = np.triu(np.full((T, T), -np.inf, np.float32), 1)
    tkpm = np.zeros((N, T), bool)
    tkpm[1, 3:] = True
    mkpm = np.zeros((N, S), bool)
    mkpm[0, 2:] = True
    mmask = rng.random((T, S)) > 0.7
    mmask[:, 0] = False
    _run(t, e, [tgt, mem], rng, tgt_mask=causal, tgt_is_causal=True)
    _run(t, e, [tgt, mem], rng, tgt_mask=causal, tgt_key_padding_mask=tkpm,
         memory_key_padding_mask=mkpm)
    _run(t, e, [tgt, mem], rng, memory_mask=mmask, memory_key_padding_mask=mkpm.astype(
        np.float32) * -1e9)
    _run(t, e, [tgt[0] if batch_first else tgt[:, 0], mem[0] if batch_first else mem[:, 0]],
         rng, tgt_mask=np.triu(np.ones((T, T), bool), 1))                    # unbatched


def test_decoder_layer_bias_false_and_callable_activation():
    rng = np.random.default_rng(2)
    t = torch.nn.TransformerDecoderLayer(D, H, FF, 0.0, bias=False, activation=torch.tanh)
    e = nn.TransformerDecoderLayer(D, H, FF, 0.0, bias=False, activation=E.tanh)
    _copy_state(t, e)
    _run(t, e, [rng.standard_normal((3, 2, D)), rng.standard_normal((4, 2, D))], rng)


@pytest.mark.parametrize("with_norm", [False, True])
def test_decoder_stack(with_norm):
    rng = np.random.default_rng(3)
    kw = dict(d_model=D, nhead=H, dim_feedforward=FF, dropout=0.2)
    t = torch.nn.TransformerDecoder(torch.nn.TransformerDecoderLayer(**kw), 2,
                                    norm=torch.nn.LayerNorm(D) if with_norm else None)
    e = nn.TransformerDecoder(nn.TransformerDecoderLayer(**kw), 2,
                              norm=nn.LayerNorm(D) if with_norm else None)
    _copy_state(t, e)
    assert e.layers[0].linear1.weight is not e.layers[1].linear1.weight
    T, S, N = 4, 3, 2
    causal = np.triu(np.full((T, T), -np.inf, np.float32), 1)
    inputs = [rng.standard_normal((T, N, D)), rng.standard_normal((S, N, D))]
    _run(t, e, inputs, rng)
    _run(t, e, inputs, rng, tgt_mask=causal)                      # detected as causal
    _run(t, e, inputs, rng, tgt_mask=causal, memory_key_padding_mask=np.array(
        [[False] * S, [False, False, True]]))


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("norm_first", [False, True])
def test_transformer_matches_torch(batch_first, norm_first):
    rng = np.random.default_rng(4)
    kw = dict(d_model=D, nhead=H, num_encoder_layers=2, num_decoder_layers=2,
              dim_feedforward=FF, dropout=0.1, batch_first=batch_first, norm_first=norm_first)
    t = torch.nn.Transformer(**kw)
    e = nn.Transformer(**kw)
    tsd = t.state_dict()
    assert list(e.state_dict()) == list(tsd)
    _copy_state(t, e)
    N, S, T = 2, 5, 4
    src = rng.standard_normal((N, S, D) if batch_first else (S, N, D))
    tgt = rng.standard_normal((N, T, D) if batch_first else (T, N, D))
    tmask = nn.Transformer.generate_square_subsequent_mask(T)
    np.testing.assert_array_equal(np.asarray(tmask),
                                  torch.nn.Transformer.generate_square_subsequent_mask(T))
    _run(t, e, [src, tgt], rng)
    _run(t, e, [src, tgt], rng, tgt_mask=np.asarray(tmask), tgt_is_causal=True)
    skpm = np.zeros((N, S), bool)
    skpm[1, 3:] = True
    _run(t, e, [src, tgt], rng, tgt_mask=np.asarray(tmask), src_key_padding_mask=skpm,
         memory_key_padding_mask=skpm)


def test_transformer_float64_gelu_custom_parts_and_init():
    rng = np.random.default_rng(5)
    kw = dict(d_model=D, nhead=H, num_encoder_layers=1, num_decoder_layers=1,
              dim_feedforward=FF, dropout=0.0, activation="gelu", bias=False,
              layer_norm_eps=1e-6)
    t = torch.nn.Transformer(**kw).double()
    e = nn.Transformer(**kw, dtype=E.float64)
    assert all(p.dtype == E.float64 for p in e.parameters())
    _copy_state(t, e)
    src, tgt = rng.standard_normal((5, 2, D)), rng.standard_normal((3, 2, D))
    to = t(torch.tensor(src), torch.tensor(tgt))
    eo = e(E.asarray(src), E.asarray(tgt))
    _close(eo, to, "float64", rtol=1e-10, atol=1e-12)
    # xavier-uniform init of every matrix: bounded like torch's, LayerNorm weights ones
    e2 = nn.Transformer(d_model=16, nhead=4, num_encoder_layers=1, num_decoder_layers=1,
                        dim_feedforward=32)
    w = np.asarray(e2.encoder.layers[0].linear1.weight.detach())
    assert np.abs(w).max() <= np.sqrt(6 / (16 + 32)) and w.std() > 0
    assert np.asarray(e2.decoder.norm.weight.detach()).tolist() == [1.0] * 16
    # custom encoder/decoder are used as given
    enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(D, H, FF), 1)
    dec = nn.TransformerDecoder(nn.TransformerDecoderLayer(D, H, FF), 1)
    e3 = nn.Transformer(D, H, custom_encoder=enc, custom_decoder=dec)
    assert e3.encoder is enc and e3.decoder is dec


def test_transformer_errors():
    e = nn.Transformer(D, H, 1, 1, FF)
    with pytest.raises(RuntimeError, match="batch number"):
        e(E.ones((5, 2, D)), E.ones((3, 3, D)))
    with pytest.raises(RuntimeError, match="d_model"):
        e(E.ones((5, 2, D + 1)), E.ones((3, 2, D + 1)))
    with pytest.raises(RuntimeError, match="relu/gelu"):
        nn.TransformerDecoderLayer(D, H, FF, activation="tanh")


def test_transformer_trains():
    """A few Adam steps on a copy task lower the loss (train mode, dropout on)."""
    E.random.seed(0)
    model = nn.Transformer(d_model=16, nhead=2, num_encoder_layers=1, num_decoder_layers=1,
                           dim_feedforward=32, dropout=0.1, batch_first=True)
    emb = nn.Embedding(6, 16)
    head = nn.Linear(16, 6)
    params = list(model.parameters()) + list(emb.parameters()) + list(head.parameters())
    opt = E.optim.Adam(params, lr=3e-3)
    seq = E.asarray(np.random.default_rng(0).integers(0, 6, (8, 5)))
    mask = nn.Transformer.generate_square_subsequent_mask(5)
    losses = []
    for _ in range(15):
        opt.zero_grad()
        out = head(model(emb(seq), emb(seq), tgt_mask=mask))
        loss = nn.functional.cross_entropy(out.reshape(-1, 6), seq.reshape(-1))
        loss.backward()
        opt.step()
        losses.append(float(loss))
    assert losses[-1] < 0.8 * losses[0]
