"""ember.nn on 'cuda' against ember.nn on the CPU, from the same weights.

Each layer is built on the CPU, deep-copied and moved with ``module.to('cuda')``;
both copies get the same input and upstream gradient; outputs, the input's
gradient, every parameter's gradient and the buffers (BatchNorm running
statistics) must agree.  Then optimizers step for step, a short training loop,
dropout statistics, and mixed precision (``ember.amp.autocast`` /
``GradScaler``).  Skipped, never faked, without a GPU (see cuda_helpers.py).
"""
import copy
from functools import partial

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember import nn
from cuda_helpers import (DEV, DRY, GPU_MARK, assert_on_device, assert_same, gpu,
                          host, real_gpu)
import helpers

pytestmark = GPU_MARK

RTOL32, ATOL32 = 1e-4, 1e-5


rnd = partial(helpers.rnd, dtype=np.float32)


def pair(module):
    """(cpu module, gpu module) with identical parameters and buffers."""
    mg = copy.deepcopy(module)
    out = mg.to(DEV)
    assert out is mg                               # Module.to works in place, returns self
    for p in mg.parameters():
        assert_on_device(p)
        assert isinstance(p, nn.Parameter) and p.requires_grad
    for b in mg.buffers():
        assert_on_device(b)
    return module, mg


def flat(y):
    """The arrays of a layer's output (tuples: LSTM's (out, (h, c)), MHA's (out, w))."""
    if isinstance(y, (tuple, list)):
        out = []
        for v in y:
            out += flat(v)
        return out
    return [] if y is None else [y]


def compare_module(module, inputs, rtol=RTOL32, atol=ATOL32, grad_inputs=True, train=True):
    """Forward + backward of ``module`` on both devices from the same weights."""
    mc, mg = pair(module)
    mc.train(train)
    mg.train(train)
    res = {}
    for dev, m in (("cpu", mc), (DEV, mg)):
        xs = []
        for a in inputs:
            x = ember.asarray(a.copy()) if dev == "cpu" else gpu(a)
            if grad_inputs and a.dtype.kind == "f":
                x.requires_grad = True
            xs.append(x)
        ys = flat(m(*xs))
        total = None
        for i, y in enumerate(ys):
            if y.dtype.kind != "f":
                continue
            g = ember.asarray(rnd(*y.shape, seed=50 + i, dtype=np.dtype(y.dtype)))
            g = g if dev == "cpu" else gpu(g)
            term = (y * g).sum()
            total = term if total is None else total + term
        if total is not None and total.requires_grad:
            total.backward()
        res[dev] = (m, xs, ys)
    (mc, xc, yc), (mg, xg, yg) = res["cpu"], res[DEV]
    assert len(yc) == len(yg)
    for a, b in zip(yg, yc):
        assert_same(a.detach(), b.detach(), rtol=rtol, atol=atol)
    for a, b in zip(xg, xc):
        if b.requires_grad:
            assert_same(a.grad, b.grad, rtol=rtol, atol=atol)
    for (n1, p1), (n2, p2) in zip(mc.named_parameters(), mg.named_parameters()):
        assert n1 == n2
        if p1.grad is None:
            assert p2.grad is None, n1
        else:
            assert_on_device(p2.grad)
            assert_same(p2.grad, p1.grad, rtol=rtol, atol=atol)
    for (n1, b1), (n2, b2) in zip(mc.named_buffers(), mg.named_buffers()):
        assert n1 == n2
        assert_same(b2, b1, rtol=rtol, atol=atol)
    return res


def seeded(build):
    def make():
        ember.random.manual_seed(0)
        return build()
    return make


LAYERS = [
    ("Linear", lambda: nn.Linear(6, 4), [(5, 6)]),
    ("Linear_3d_nobias", lambda: nn.Linear(6, 4, bias=False), [(2, 3, 6)]),
    ("Bilinear", lambda: nn.Bilinear(3, 4, 2), [(5, 3), (5, 4)]),
    ("Conv1d", lambda: nn.Conv1d(3, 4, 3, padding=1), [(2, 3, 10)]),
    ("Conv1d_stride_dil", lambda: nn.Conv1d(3, 4, 3, stride=2, dilation=2), [(2, 3, 13)]),
    ("Conv2d", lambda: nn.Conv2d(3, 5, 3, padding=1), [(2, 3, 8, 8)]),
    ("Conv2d_stride_groups", lambda: nn.Conv2d(4, 6, 3, stride=2, padding=1, groups=2), [(2, 4, 9, 9)]),
    ("Conv2d_1x1_nobias", lambda: nn.Conv2d(4, 8, 1, bias=False), [(2, 4, 5, 5)]),
    ("Conv2d_rect_dil", lambda: nn.Conv2d(2, 3, (3, 2), padding=(2, 1), dilation=(2, 1)), [(1, 2, 7, 6)]),
    ("ConvTranspose1d", lambda: nn.ConvTranspose1d(3, 2, 3, stride=2), [(2, 3, 6)]),
    ("ConvTranspose2d", lambda: nn.ConvTranspose2d(3, 4, 3, stride=2, padding=1, output_padding=1),
     [(2, 3, 5, 5)]),
    ("BatchNorm1d", lambda: nn.BatchNorm1d(4), [(8, 4)]),
    ("BatchNorm1d_3d", lambda: nn.BatchNorm1d(4), [(8, 4, 5)]),
    ("BatchNorm2d", lambda: nn.BatchNorm2d(3), [(4, 3, 5, 5)]),
    ("BatchNorm2d_noaffine", lambda: nn.BatchNorm2d(3, affine=False, momentum=0.3), [(4, 3, 5, 5)]),
    ("LayerNorm", lambda: nn.LayerNorm(6), [(3, 4, 6)]),
    ("LayerNorm_2d", lambda: nn.LayerNorm((4, 6)), [(3, 4, 6)]),
    ("GroupNorm", lambda: nn.GroupNorm(2, 4), [(3, 4, 5, 5)]),
    ("MaxPool1d", lambda: nn.MaxPool1d(2), [(2, 3, 10)]),
    ("MaxPool2d", lambda: nn.MaxPool2d(2), [(2, 3, 8, 8)]),
    ("MaxPool2d_overlap", lambda: nn.MaxPool2d(3, stride=2, padding=1), [(2, 3, 9, 9)]),
    ("AvgPool1d", lambda: nn.AvgPool1d(3, stride=2), [(2, 3, 11)]),
    ("AvgPool2d", lambda: nn.AvgPool2d(2), [(2, 3, 8, 8)]),
    ("AvgPool2d_pad", lambda: nn.AvgPool2d(3, stride=2, padding=1), [(2, 3, 9, 9)]),
    ("AdaptiveAvgPool2d", lambda: nn.AdaptiveAvgPool2d((3, 2)), [(2, 3, 7, 5)]),
    ("AdaptiveAvgPool2d_1", lambda: nn.AdaptiveAvgPool2d(1), [(2, 3, 7, 7)]),
    ("AdaptiveMaxPool2d", lambda: nn.AdaptiveMaxPool2d(2), [(2, 3, 6, 6)]),
    ("Flatten", lambda: nn.Flatten(), [(2, 3, 4, 5)]),
    ("Dropout_p0", lambda: nn.Dropout(0.0), [(4, 5)]),
    ("PReLU", lambda: nn.PReLU(3), [(2, 3, 4)]),
    ("MultiheadAttention", lambda: nn.MultiheadAttention(8, 2, batch_first=True), [(2, 5, 8)] * 3),
    ("MultiheadAttention_seqfirst", lambda: nn.MultiheadAttention(8, 2, kdim=6, vdim=4),
     [(5, 2, 8), (3, 2, 6), (3, 2, 4)]),
    ("TransformerEncoderLayer", lambda: nn.TransformerEncoderLayer(
        8, 2, dim_feedforward=16, dropout=0.0, batch_first=True), [(2, 5, 8)]),
    ("TransformerEncoderLayer_normfirst_gelu", lambda: nn.TransformerEncoderLayer(
        8, 2, dim_feedforward=16, dropout=0.0, activation="gelu", norm_first=True), [(5, 2, 8)]),
    ("TransformerEncoder", lambda: nn.TransformerEncoder(nn.TransformerEncoderLayer(
        8, 2, dim_feedforward=16, dropout=0.0, batch_first=True), 2), [(2, 5, 8)]),
    ("RNN", lambda: nn.RNN(4, 6, num_layers=2, batch_first=True), [(3, 5, 4)]),
    ("LSTM", lambda: nn.LSTM(4, 6, num_layers=2), [(5, 3, 4)]),
    ("LSTM_bidirectional", lambda: nn.LSTM(4, 3, bidirectional=True, batch_first=True), [(2, 5, 4)]),
    ("GRU", lambda: nn.GRU(4, 6), [(5, 3, 4)]),
    ("LSTMCell", lambda: nn.LSTMCell(4, 6), [(3, 4)]),
    ("GRUCell", lambda: nn.GRUCell(4, 6), [(3, 4)]),
    ("TransformerDecoderLayer", lambda: nn.TransformerDecoderLayer(
        8, 2, dim_feedforward=16, dropout=0.0, batch_first=True), [(2, 4, 8), (2, 5, 8)]),
    ("Upsample_bilinear", lambda: nn.Upsample(scale_factor=2, mode="bilinear"), [(2, 3, 4, 5)]),
    ("Upsample_bicubic", lambda: nn.Upsample(size=(5, 3), mode="bicubic"), [(1, 2, 4, 4)]),
    ("Upsample_area", lambda: nn.Upsample(size=(2, 3), mode="area"), [(1, 2, 5, 7)]),
    ("UpsamplingNearest2d", lambda: nn.UpsamplingNearest2d(scale_factor=3), [(1, 2, 3, 2)]),
    ("Unfold", lambda: nn.Unfold(3, padding=1, stride=2), [(2, 3, 6, 5)]),
    ("Fold", lambda: nn.Fold((4, 5), 2), [(2, 8, 12)]),
    ("CosineSimilarity", lambda: nn.CosineSimilarity(dim=1), [(4, 6), (4, 6)]),
    ("PairwiseDistance", lambda: nn.PairwiseDistance(), [(4, 6), (4, 6)]),
]


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
def test_pad_matches_cpu(mode):
    class Pad(nn.Module):
        def forward(self, x):
            return F.pad(x, (2, 1, 1, 2), mode=mode)
    compare_module(Pad(), [rnd(2, 3, 4, 5, seed=3)])


@pytest.mark.parametrize("case", LAYERS, ids=lambda c: c[0])
def test_layer_matches_cpu(case):
    name, build, shapes = case
    inputs = [rnd(*s, seed=i + 1) for i, s in enumerate(shapes)]
    compare_module(seeded(build)(), inputs)


@pytest.mark.parametrize("build,shape", [
    (lambda: nn.BatchNorm2d(3), (4, 3, 10, 10)),
    (lambda: nn.BatchNorm2d(2, affine=False, momentum=0.3), (3, 2, 7, 9)),
    (lambda: nn.BatchNorm1d(2), (50, 2)),
], ids=["2d", "2d_noaffine", "1d"])
def test_batch_norm_with_split_channel_reductions(monkeypatch, build, shape):
    """Few channels of many values: each channel's statistics and parameter gradients
    are reduced by several blocks and merged (forced here with tiny parts)."""
    if not DRY:
        from ember.cuda import ops_norm
        monkeypatch.setattr(ops_norm, "_MIN_PART", 7)
    compare_module(seeded(build)(), [rnd(*shape, scale=3.0) + 2.0])


def test_layers_in_eval_mode():
    """BatchNorm's running statistics and eval path on the device."""
    m = seeded(lambda: nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU()))()
    x = rnd(4, 3, 6, 6)
    m(ember.asarray(x))                           # move the running stats off their init
    compare_module(m, [x], train=False)


def test_embedding_matches_cpu():
    for kw in ({}, {"padding_idx": 0}):
        m = seeded(lambda: nn.Embedding(10, 4, **kw))()
        idx = np.array([[1, 2, 0, 9], [9, 9, 3, 0]])
        compare_module(m, [idx])


ACTIVATIONS = ["ReLU", "ReLU6", "LeakyReLU", "ELU", "SELU", "CELU", "GELU", "SiLU", "Mish",
               "Sigmoid", "Tanh", "Softplus", "Softsign", "Hardtanh", "Hardsigmoid",
               "Hardswish", "LogSigmoid", "Tanhshrink", "Softmax", "LogSoftmax", "Softmin"]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", ACTIVATIONS)
def test_activation_matches_cpu(name, dtype):
    cls = getattr(nn, name)
    m = cls(dim=-1) if name in ("Softmax", "LogSoftmax", "Softmin") else cls()
    x = rnd(4, 7, scale=3, dtype=dtype)
    tol = (RTOL32, ATOL32) if dtype == np.float32 else (1e-10, 1e-12)
    compare_module(m, [x], rtol=tol[0], atol=tol[1])
    compare_module(m, [np.ascontiguousarray(x.T).T.copy()], rtol=tol[0], atol=tol[1])


def test_gelu_tanh_and_glu_functional():
    x = rnd(4, 6, scale=2)
    for fn in (lambda t: F.gelu(t, approximate="tanh"), lambda t: F.glu(t, dim=-1),
               lambda t: F.leaky_relu(t, 0.2), lambda t: F.normalize(t, dim=1)):
        xc, xg = ember.asarray(x), gpu(x)
        assert_same(fn(xg), fn(xc), rtol=RTOL32, atol=ATOL32)


# ----------------------------------------------------------------- losses

def _targets():
    rng = np.random.default_rng(7)
    cls = rng.integers(0, 5, 6)
    cls_ign = cls.copy()
    cls_ign[[1, 4]] = -100
    probs = rng.uniform(0.05, 0.95, (6, 5)).astype(np.float32)
    soft = rng.uniform(0, 1, (6, 5)).astype(np.float32)
    soft /= soft.sum(1, keepdims=True)
    return cls, cls_ign, probs, soft


LOSSES = [
    ("CrossEntropyLoss", lambda: nn.CrossEntropyLoss(), "logits", "cls"),
    ("CrossEntropyLoss_ignore", lambda: nn.CrossEntropyLoss(ignore_index=-100), "logits", "cls_ign"),
    ("CrossEntropyLoss_smoothing", lambda: nn.CrossEntropyLoss(label_smoothing=0.1), "logits", "cls"),
    ("CrossEntropyLoss_ignore_smoothing_sum",
     lambda: nn.CrossEntropyLoss(ignore_index=-100, label_smoothing=0.2, reduction="sum"),
     "logits", "cls_ign"),
    ("CrossEntropyLoss_weight", lambda: nn.CrossEntropyLoss(
        weight=ember.asarray(np.linspace(0.5, 2, 5).astype(np.float32))), "logits", "cls"),
    ("CrossEntropyLoss_none", lambda: nn.CrossEntropyLoss(reduction="none"), "logits", "cls"),
    ("CrossEntropyLoss_soft", lambda: nn.CrossEntropyLoss(), "logits", "soft"),
    ("CrossEntropyLoss_4d", lambda: nn.CrossEntropyLoss(), "logits4d", "cls4d"),
    ("NLLLoss", lambda: nn.NLLLoss(), "logprobs", "cls"),
    ("NLLLoss_ignore", lambda: nn.NLLLoss(ignore_index=-100), "logprobs", "cls_ign"),
    ("MSELoss", lambda: nn.MSELoss(), "logits", "soft"),
    ("MSELoss_sum", lambda: nn.MSELoss(reduction="sum"), "logits", "soft"),
    ("L1Loss", lambda: nn.L1Loss(), "logits", "soft"),
    ("SmoothL1Loss", lambda: nn.SmoothL1Loss(beta=0.5), "logits", "soft"),
    ("HuberLoss", lambda: nn.HuberLoss(delta=0.7), "logits", "soft"),
    ("BCELoss", lambda: nn.BCELoss(), "probs", "soft"),
    ("BCEWithLogitsLoss", lambda: nn.BCEWithLogitsLoss(), "logits", "soft"),
    ("BCEWithLogitsLoss_posweight", lambda: nn.BCEWithLogitsLoss(
        pos_weight=ember.asarray(np.linspace(0.5, 2, 5).astype(np.float32))), "logits", "soft"),
    ("KLDivLoss", lambda: nn.KLDivLoss(reduction="batchmean"), "logprobs", "soft"),
]


@pytest.mark.parametrize("case", LOSSES, ids=lambda c: c[0])
def test_loss_matches_cpu(case):
    name, build, inp, tgt = case
    cls, cls_ign, probs, soft = _targets()
    logits = rnd(6, 5, seed=3, scale=2)
    data = {"logits": logits, "probs": probs, "soft": soft, "cls": cls, "cls_ign": cls_ign,
            "logprobs": np.log(probs / probs.sum(1, keepdims=True)).astype(np.float32),
            "logits4d": rnd(2, 5, 3, 4, seed=4), "cls4d": np.random.default_rng(5).integers(0, 5, (2, 3, 4))}
    module = build()
    # the target is data, not a parameter: no gradient is asked for it
    res = {}
    for dev in ("cpu", DEV):
        m = module if dev == "cpu" else copy.deepcopy(module).to(DEV)
        x = ember.asarray(data[inp].copy()) if dev == "cpu" else gpu(data[inp])
        x.requires_grad = True
        t = ember.asarray(data[tgt]) if dev == "cpu" else gpu(data[tgt])
        loss = m(x, t)
        (loss * ember.asarray(rnd(*loss.shape, seed=9)).to(loss.device)).sum().backward() \
            if loss.ndim else loss.backward()
        res[dev] = (loss, x.grad)
    assert_same(res[DEV][0].detach(), res["cpu"][0].detach(), rtol=RTOL32, atol=ATOL32)
    assert_same(res[DEV][1], res["cpu"][1], rtol=RTOL32, atol=ATOL32)


def test_cross_entropy_all_ignored_like_cpu():
    logits = rnd(3, 4)
    t = np.full(3, -100)
    lc = F.cross_entropy(ember.asarray(logits), ember.asarray(t))
    lg = F.cross_entropy(gpu(logits), gpu(t))
    assert_same(lg, lc)                         # NaN on both (mean over no elements)


# ----------------------------------------------------------------- dropout

def test_dropout_statistics_on_device():
    x = ember.ones((512, 512), device=DEV)
    for p in (0.1, 0.5, 0.9):
        y = F.dropout(x, p=p, training=True)
        assert_on_device(y)
        v = host(y)
        zero = (v == 0).mean()
        assert abs(zero - p) < 0.01, (p, zero)
        kept = v[v != 0]
        np.testing.assert_allclose(kept, 1 / (1 - p), rtol=1e-6)
        assert abs(v.mean() - 1) < 0.02
    m = nn.Dropout(0.5).to(DEV)
    m.eval()
    assert_same(m(x), ember.ones((512, 512)))
    assert_same(F.dropout(x, p=0.0, training=True), ember.ones((512, 512)))


def test_dropout_gradient_uses_the_same_mask():
    x = ember.ones((64, 64), device=DEV, requires_grad=True)
    y = F.dropout(x, p=0.3, training=True)
    y.sum().backward()
    np.testing.assert_array_equal(host(x.grad), host(y.detach()))


# ----------------------------------------------------------------- optimizers

OPTIMS = [
    ("SGD", {"lr": 0.1}),
    ("SGD", {"lr": 0.1, "momentum": 0.9}),
    ("SGD", {"lr": 0.1, "momentum": 0.9, "nesterov": True, "weight_decay": 1e-2}),
    ("Adam", {"lr": 1e-2}),
    ("Adam", {"lr": 1e-2, "amsgrad": True, "weight_decay": 1e-2}),
    ("AdamW", {"lr": 1e-2, "weight_decay": 0.1}),
    ("RMSprop", {"lr": 1e-2, "momentum": 0.5}),
    ("Adagrad", {"lr": 0.1}),
    ("Adadelta", {"lr": 1.0, "weight_decay": 1e-2}),
]


@pytest.mark.parametrize("opt", OPTIMS, ids=lambda o: f"{o[0]}-{'-'.join(map(str, o[1].values()))}")
def test_optimizer_steps_match_cpu(opt):
    name, kw = opt
    mc = seeded(lambda: nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3)))()
    mc, mg = pair(mc)
    oc = getattr(ember.optim, name)(mc.parameters(), **kw)
    og = getattr(ember.optim, name)(mg.parameters(), **kw)
    x, y = rnd(16, 6), np.random.default_rng(1).integers(0, 3, 16)
    xc, yc, xg, yg = ember.asarray(x), ember.asarray(y), gpu(x), gpu(y)
    for _ in range(5):
        for m, o, xx, yy in ((mc, oc, xc, yc), (mg, og, xg, yg)):
            o.zero_grad()
            F.cross_entropy(m(xx), yy).backward()
            o.step()
    for (n, pc), (_, pg) in zip(mc.named_parameters(), mg.named_parameters()):
        assert_on_device(pg)
        assert_same(pg.detach(), pc.detach(), rtol=1e-4, atol=1e-5)
    for sc, sg in zip(oc.state.values(), og.state.values()):
        for k, v in sc.items():
            if isinstance(v, ember.ndarray) and v.ndim:
                assert_same(sg[k], v, rtol=1e-4, atol=1e-5)


def test_clip_grad_norm_on_device():
    mc = seeded(lambda: nn.Linear(5, 5))()
    mc, mg = pair(mc)
    x = rnd(4, 5, scale=10)
    (mc(ember.asarray(x)) ** 2).sum().backward()
    (mg(gpu(x)) ** 2).sum().backward()
    nc = nn.utils.clip_grad_norm_(mc.parameters(), 1.0)
    ng = nn.utils.clip_grad_norm_(mg.parameters(), 1.0)
    assert float(ng) == pytest.approx(float(nc), rel=1e-5)
    assert_same(mg.weight.grad, mc.weight.grad, rtol=1e-5, atol=1e-6)


def test_state_dict_round_trip_between_devices():
    m = seeded(lambda: nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4)))()
    mg = copy.deepcopy(m).to(DEV)
    sd = mg.state_dict()
    for v in sd.values():
        assert_on_device(v)
    back = seeded(lambda: nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4)))()
    back.load_state_dict({k: v.cpu() for k, v in sd.items()})
    for (k, a), (_, b) in zip(back.state_dict().items(), m.state_dict().items()):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert all(p.device.type == "cpu" for p in mg.cpu().parameters())


def test_training_loop_converges_on_device():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((256, 10)).astype(np.float32)
    w = rng.standard_normal((10, 3)).astype(np.float32)
    y = (x @ w).argmax(1)
    ember.random.manual_seed(0)
    model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 3)).to(DEV)
    opt = ember.optim.Adam(model.parameters(), lr=1e-2)
    xg, yg = gpu(x), gpu(y)
    losses = []
    for _ in range(150):
        opt.zero_grad()
        loss = F.cross_entropy(model(xg), yg)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.25 * losses[0], losses[::25]
    acc = (model(xg).argmax(1) == yg).astype(ember.float32).mean().item()
    assert acc > 0.9


def test_small_cnn_training_step_matches_cpu():
    build = seeded(lambda: nn.Sequential(
        nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(4, 8, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 3)))
    mc, mg = pair(build())
    oc = ember.optim.SGD(mc.parameters(), lr=0.1, momentum=0.9)
    og = ember.optim.SGD(mg.parameters(), lr=0.1, momentum=0.9)
    x, y = rnd(8, 1, 10, 10), np.random.default_rng(1).integers(0, 3, 8)
    for _ in range(3):
        lc = F.cross_entropy(mc(ember.asarray(x)), ember.asarray(y))
        lg = F.cross_entropy(mg(gpu(x)), gpu(y))
        assert lg.item() == pytest.approx(lc.item(), rel=1e-4, abs=1e-5)
        for o, l in ((oc, lc), (og, lg)):
            o.zero_grad()
            l.backward()
            o.step()


def _bench_gpt(**shape):
    """bench_gpu.py's GPT-2-shaped model (the one the GPU benchmark times), small."""
    import os
    import sys
    bench = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                         "benchmarks")
    if bench not in sys.path:
        sys.path.insert(0, bench)
    from bench_gpu import gpt
    return gpt(nn, **shape)


def _no_sync_steps(model, opt, batch, loss_of, autocast=None):
    """One warm-up step (kernels compile, the memory pool fills), then two steps with
    CuPy's synchronisation detector armed: nothing may wait for the GPU."""
    import contextlib
    import warnings
    cupyx = pytest.importorskip("cupyx")
    allow = getattr(cupyx, "allow_synchronize", None)
    if allow is None:
        pytest.skip("this CuPy has no synchronisation detector")

    def step():
        opt.zero_grad()
        with (ember.amp.autocast("cuda", dtype=autocast) if autocast is not None
              else contextlib.nullcontext()):
            loss = loss_of(model(*batch))
        loss.backward()
        opt.step()
        return loss
    step()
    ember.cuda.synchronize()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)     # (the detector is deprecated)
        with allow(False):
            for _ in range(2):
                loss = step()
    assert np.isfinite(loss.item())


@real_gpu
@pytest.mark.parametrize("autocast", [None, "float16", "bfloat16"])
def test_transformer_training_step_never_waits_for_the_gpu(autocast):
    """The issue's asynchrony: ops queue and return; only reads wait (embedding indices
    and cross-entropy targets are checked without waiting: ember/cuda/_checks.py)."""
    import ember.amp
    ember.random.manual_seed(0)
    model = _bench_gpt(vocab=50, seq=16, d=32, heads=4, layers=2).to(DEV)
    opt = ember.optim.AdamW(model.parameters(), lr=1e-3)
    rng = np.random.default_rng(0)
    idx = gpu(rng.integers(0, 50, (4, 16)))
    pos = gpu(np.broadcast_to(np.arange(16), (4, 16)).copy())
    tgt = gpu(rng.integers(0, 50, (4 * 16,)))
    mask = nn.generate_square_subsequent_mask(16).to(DEV)
    _no_sync_steps(model, opt, (idx, pos, mask),
                   lambda out: F.cross_entropy(out.reshape(-1, 50).astype(ember.float32), tgt),
                   None if autocast is None else _half(autocast))


@real_gpu
def test_cnn_training_step_never_waits_for_the_gpu():
    ember.random.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        nn.Linear(16, 10)).to(DEV)
    opt = ember.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    x = gpu(rnd(8, 3, 16, 16))
    y = gpu(np.random.default_rng(1).integers(0, 10, 8))
    _no_sync_steps(model, opt, (x,), lambda out: F.cross_entropy(out, y))


# ----------------------------------------------------------------- mixed precision

def _half(name):
    return ember.float16 if name == "float16" else ember.bfloat16


@real_gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_autocast_dtypes_and_values(dtype):
    import ember.amp
    half = _half(dtype)
    ember.random.manual_seed(0)
    lin = nn.Linear(16, 8).to(DEV)
    x = gpu(rnd(4, 16))
    ref = lin(x)
    tgt = gpu(np.random.default_rng(1).integers(0, 8, 4))
    with ember.amp.autocast(device_type="cuda", dtype=half):
        y = lin(x)
        assert str(y.dtype) == dtype                 # matmul-like op in half precision
        z = x @ gpu(rnd(16, 3))
        assert str(z.dtype) == dtype
        s = F.softmax(y, dim=-1)
        assert s.dtype == np.float32                 # softmax and losses in float32
        loss = F.cross_entropy(y, tgt)
        assert loss.dtype == np.float32
        w = x + 1                                    # other ops keep their input dtype
        assert w.dtype == np.float32
    tol = 2e-2 if dtype == "float16" else 6e-2
    np.testing.assert_allclose(host(y.astype(ember.float32)), host(ref), rtol=tol, atol=tol)
    loss.backward()
    assert lin.weight.grad.dtype == np.float32       # gradients in the parameter's dtype
    assert_on_device(lin.weight.grad)
    assert not ember.amp.is_autocast_enabled("cuda")


@real_gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_autocast_conv_and_training_step_close_to_float32(dtype):
    import ember.amp
    half = _half(dtype)
    build = seeded(lambda: nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8),
                                         nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                                         nn.Linear(8, 4)))
    m32, mam = copy.deepcopy(build()).to(DEV), copy.deepcopy(build()).to(DEV)
    x = gpu(rnd(8, 3, 12, 12))
    y = gpu(np.random.default_rng(1).integers(0, 4, 8))
    l32 = F.cross_entropy(m32(x), y)
    with ember.amp.autocast("cuda", dtype=half):
        out = mam(x)
        lam = F.cross_entropy(out, y)
    assert str(out.dtype) == dtype
    assert abs(lam.item() - l32.item()) < 5e-2
    l32.backward()
    lam.backward()
    for p32, pam in zip(m32.parameters(), mam.parameters()):
        assert pam.grad.dtype == np.float32
        np.testing.assert_allclose(host(pam.grad), host(p32.grad), rtol=0.1, atol=2e-2)


@real_gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_of_16bit_activations_with_float32_parameters(dtype, training):
    """PyTorch's mixed batch norm: 16-bit input and output, float32 weight, bias, running
    statistics and parameter gradients (the _p32 kernels, no widened copy)."""
    half = _half(dtype)
    bn = seeded(lambda: nn.BatchNorm2d(3))()
    with ember.no_grad():
        bn.weight[...] = ember.asarray(np.array([0.5, 1.5, -1.0], np.float32))
        bn.bias[...] = ember.asarray(np.array([0.1, -0.2, 0.3], np.float32))
    ref = copy.deepcopy(bn)
    bn = bn.to(DEV)
    bn.train(training)
    ref.train(training)
    x16 = gpu(rnd(4, 3, 5, 5, scale=2.0)).astype(half)
    x32 = host(x16.astype(ember.float32))
    xg = x16.detach().requires_grad_()
    xr = ember.asarray(x32).requires_grad_()
    y, yr = bn(xg), ref(xr)
    assert str(y.dtype) == dtype and bn.weight.dtype == np.float32
    tol = 2e-2 if dtype == "float16" else 8e-2
    np.testing.assert_allclose(host(y.astype(ember.float32)), host(yr), rtol=tol, atol=tol)
    g = rnd(4, 3, 5, 5, seed=1)
    (y.astype(ember.float32) * gpu(g)).sum().backward()
    (yr * ember.asarray(g)).sum().backward()
    assert str(xg.grad.dtype) == dtype and bn.weight.grad.dtype == np.float32
    np.testing.assert_allclose(host(xg.grad.astype(ember.float32)), host(xr.grad),
                               rtol=tol * 2, atol=tol * 2)
    np.testing.assert_allclose(host(bn.weight.grad), host(ref.weight.grad), rtol=tol, atol=tol)
    np.testing.assert_allclose(host(bn.bias.grad), host(ref.bias.grad), rtol=tol, atol=tol)
    np.testing.assert_allclose(host(bn.running_mean), host(ref.running_mean), rtol=1e-2,
                               atol=1e-2)
    np.testing.assert_allclose(host(bn.running_var), host(ref.running_var), rtol=1e-2,
                               atol=1e-2)


@real_gpu
def test_grad_scaler_scales_unscales_and_skips_inf_steps():
    import ember.amp
    ember.random.manual_seed(0)
    model = nn.Linear(4, 2).to(DEV)
    opt = ember.optim.SGD(model.parameters(), lr=0.1)
    scaler = ember.amp.GradScaler("cuda", init_scale=1024.0, growth_interval=2)
    x = gpu(rnd(8, 4))
    ref = copy.deepcopy(model)
    ref_opt = ember.optim.SGD(ref.parameters(), lr=0.1)
    # a clean step equals the unscaled step
    with ember.amp.autocast("cuda"):
        loss = (model(x).astype(ember.float32) ** 2).mean()
    scaled = scaler.scale(loss)
    assert scaled.item() == pytest.approx(loss.item() * 1024.0, rel=1e-3)
    scaled.backward()
    scaler.step(opt)
    scaler.update()
    with ember.amp.autocast("cuda"):
        rloss = (ref(x).astype(ember.float32) ** 2).mean()
    rloss.backward()
    ref_opt.step()
    for p, q in zip(model.parameters(), ref.parameters()):
        np.testing.assert_allclose(host(p), host(q), rtol=1e-3, atol=1e-4)
    assert scaler.get_scale() == 1024.0
    # an inf gradient: the step is skipped and the scale backs off
    before = [host(p).copy() for p in model.parameters()]
    opt.zero_grad()
    loss = (model(x) * float("inf")).sum()
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    for p, b in zip(model.parameters(), before):
        np.testing.assert_array_equal(host(p), b)
    assert scaler.get_scale() == 512.0
    # growth after growth_interval clean steps
    for _ in range(2):
        opt.zero_grad()
        scaler.scale((model(x) ** 2).mean()).backward()
        scaler.step(opt)
        scaler.update()
    assert scaler.get_scale() == 1024.0


@real_gpu
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64"])
def test_grad_scaler_unscale_matches_cpu_bit_for_bit(dtype):
    """The fused unscale (one launch for every contiguous gradient) and the per-gradient
    kernel (non-contiguous ones) against the CPU's g * inv.astype(dtype); the found-inf
    flag is per device and set by an inf in any chunk of any gradient."""
    from ember.amp.grad_scaler import _unscale_on_gpu
    dt = _half(dtype) if dtype in ("float16", "bfloat16") else getattr(ember, dtype)
    rng = np.random.default_rng(3)
    shapes = [(7,), (3, 5), (40000,), (129, 257), (1,)]
    host_grads = [ember.asarray(rng.standard_normal(s) * 300).astype(dt) for s in shapes]
    inv = ember.asarray(np.float32(1.0 / 3.0))
    for inject_inf in (False, True):
        grads = [gpu(g) for g in host_grads]
        grads.append(gpu(host_grads[3]).T)                  # a non-contiguous gradient
        if inject_inf:
            grads[2][39999] = float("inf")                  # in the last chunk of a big one
        expected = [np.asarray(ember.asarray(host(g)) * inv.astype(dt)) for g in grads]
        found = _unscale_on_gpu(grads, gpu(inv))
        assert len(found) == 1 and bool(found[0].item()) is inject_inf
        for g, e in zip(grads, expected):
            got = host(g)
            nan = np.isnan(e.astype(np.float64))
            np.testing.assert_array_equal(np.isnan(got.astype(np.float64)), nan)
            np.testing.assert_array_equal(got.view(f"u{got.itemsize}")[~nan],
                                          e.view(f"u{e.itemsize}")[~nan])


@real_gpu
def test_half_precision_arrays_on_device():
    a = rnd(5, 7)
    for dt in ("float16", "bfloat16"):
        half = _half(dt)
        h = gpu(a).astype(half)
        assert str(h.dtype) == dt
        back = host(h.astype(ember.float32))
        np.testing.assert_allclose(back, a, rtol=1e-2 if dt == "float16" else 1e-2 * 8, atol=1e-2)
        s = (h * 2 + 1).astype(ember.float32)
        np.testing.assert_allclose(host(s), a * 2 + 1, rtol=2e-2, atol=2e-2)
