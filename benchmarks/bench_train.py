"""The training table: one optimisation step of small networks, ember vs PyTorch (CPU).

Run directly (``python benchmarks/bench_train.py``) to print the table, or
through ``benchmarks/run_all.py`` which also rewrites benchmarks/README.md.

Each network is written ONCE, as a function of a library's ``nn`` module, so
ember and PyTorch run the same architecture.  PyTorch builds it first (its
initialisation), and ember loads PyTorch's ``state_dict`` (through NumPy): both
start from the same weights and get the same batch.  A step is the ordinary
training loop body, the same text for both libraries::

    opt.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()

Before timing, each library runs a few steps from the same start and their
losses are compared (a mismatch shows in ember's cell and the target then does
not count as met).  Times are medians over interleaved repetitions
(``harness.interleaved``).  Peak memory is measured in a fresh process per
library and network (``--rss``): the growth of the process's peak resident set
size (VmHWM, reset after the imports) over its RSS right after its imports, so the
libraries' own import footprints do not count.
"""
import os
import resource
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness  # noqa: E402
from harness import interleaved, make_row, torch, _short_error  # noqa: E402

LIBS = ("ember", "torch")


# ------------------------------------------------------------------ networks

def mlp(nn):
    """64-256-256-10 ReLU MLP."""
    return nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                         nn.Linear(256, 10))


def lenet5(nn):
    """LeNet-5 for 1x28x28 inputs (padding 2 on the first conv, max pooling, ReLU)."""
    return nn.Sequential(
        nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(),
        nn.Linear(84, 10))


def resnet20(nn):
    """ResNet-20 for 3x32x32 (He et al. 2016, CIFAR variant): 3 stages of 3 basic
    blocks with 16/32/64 channels; downsampling shortcuts are 1x1 conv + BN."""

    class Block(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.relu = nn.ReLU()
            self.shortcut = nn.Identity()
            if stride != 1 or cin != cout:
                self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False),
                                              nn.BatchNorm2d(cout))

        def forward(self, x):
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            return self.relu(out + self.shortcut(x))

    layers = [nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU()]
    cin = 16
    for cout, stride in ((16, 1), (32, 2), (64, 2)):
        for i in range(3):
            layers.append(Block(cin, cout, stride if i == 0 else 1))
            cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10)]
    return nn.Sequential(*layers)


def transformer(nn, d_model=128, nhead=4, layers=2):
    """A 2-layer Transformer encoder (d_model 128, 4 heads, feed-forward 512, no
    dropout so both libraries compute the same thing), mean-pooled into a
    10-class head."""

    class Classifier(nn.Module):
        def __init__(self):
            super().__init__()
            layer = nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward=4 * d_model,
                                               dropout=0.0, batch_first=True)
            self.encoder = nn.TransformerEncoder(layer, layers)
            self.head = nn.Linear(d_model, 10)

        def forward(self, x):
            return self.head(self.encoder(x).mean(1))

    return Classifier()


# name -> (builder, input shape without batch, optimizer, target ratio to PyTorch: issue #25)
NETWORKS = {
    "mlp": (mlp, (64,), ("Adam", {"lr": 1e-3}), 0.4),
    "lenet5": (lenet5, (1, 28, 28), ("SGD", {"lr": 0.01, "momentum": 0.9}), 0.4),
    "resnet20": (resnet20, (3, 32, 32), ("SGD", {"lr": 0.1, "momentum": 0.9}), 0.6),
    "transformer": (transformer, (64, 128), ("Adam", {"lr": 1e-4}), 0.6),
}
TITLES = {
    "mlp": "MLP 64-256-256-10, Adam",
    "lenet5": "LeNet-5 1x28x28, SGD momentum",
    "resnet20": "ResNet-20 3x32x32, SGD momentum",
    "transformer": "Transformer encoder 2x(d 128, 4 heads), seq 64, Adam",
}

STEP = ("opt.zero_grad()\n"
        "loss = F.cross_entropy(model(x), y)\n"
        "loss.backward()\n"
        "opt.step()")


def _lib(name):
    if name == "torch":
        import torch.nn.functional as F
        return torch, torch.nn, F, torch.optim
    import ember
    import ember.nn.functional as F
    return ember, ember.nn, F, ember.optim


def _batch(shape, batch, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch,) + shape, dtype=np.float32)
    y = rng.integers(0, 10, batch).astype(np.int64)
    return x, y


def _namespaces(net, batch):
    """Per library: model (same initial weights), optimizer, batch, F."""
    build, shape, (opt_name, opt_kw), _ = NETWORKS[net]
    x, y = _batch(shape, batch)
    torch.manual_seed(0)
    tmodel = build(torch.nn)
    state = {k: v.detach().numpy().copy() for k, v in tmodel.state_dict().items()}
    out = {}
    for lib in LIBS:
        mod, nn, F, optim = _lib(lib)
        model = tmodel if lib == "torch" else build(nn)
        if lib == "ember":
            model.load_state_dict({k: mod.asarray(v.copy()) for k, v in state.items()})
        opt = getattr(optim, opt_name)(model.parameters(), **opt_kw)
        if lib == "torch":
            xs, ys = torch.from_numpy(x.copy()), torch.from_numpy(y.copy())
        else:
            xs, ys = mod.asarray(x.copy()), mod.asarray(y.copy())
        out[lib] = {"model": model, "opt": opt, "x": xs, "y": ys, "F": F}
    return out


def _losses(ns, steps):
    """Run `steps` training steps, return the losses."""
    env = dict(ns)
    losses = []
    for _ in range(steps):
        exec(STEP, env)
        losses.append(float(env["loss"].item()))
    return losses


def bench_network(net, batch=None, number=None, repeat=15, check_steps=3):
    """One row: median time of a training step of `net` for both libraries."""
    build, shape, opt, target = NETWORKS[net]
    batch = batch or (32 if net == "transformer" else 64)
    errors = {}
    if torch is None:
        return [make_row(f"{TITLES[net]}, batch {batch}: one training step",
                         {"ember": None, "torch": None}, {"torch": "not installed"})]
    try:
        ns = _namespaces(net, batch)
    except Exception as exc:
        harness.log(f"bench_train {net}: setup failed: {exc!r}")
        return [make_row(f"{TITLES[net]}, batch {batch}: one training step",
                         {"ember": None, "torch": None}, {"ember": _short_error(exc)})]
    # same start, same batch: the first losses agree (checked once, untimed)
    try:
        le, lt = _losses(ns["ember"], check_steps), _losses(ns["torch"], check_steps)
        if not np.allclose(le, lt, rtol=2e-3, atol=2e-4):
            errors["ember"] = f"losses differ from PyTorch's: {le} vs {lt}"
    except Exception as exc:
        errors["ember"] = _short_error(exc)
    if number is None:
        number = 20 if net == "mlp" else (1 if net == "resnet20" else 3)
    impls = {lib: (STEP, ns[lib]) for lib in LIBS}
    times, errs = interleaved(impls, number, repeat, warmup=2)
    errs.update(errors)
    row = make_row(f"{TITLES[net]}, batch {batch}: one training step", times, errs,
                   targets=(("torch", target),))
    return [row]


# ------------------------------------------------------------------ peak memory

def _vm_kib(field):
    """A field of /proc/self/status in KiB (VmRSS, VmHWM), or None off Linux."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _rss_child(net, lib, steps):
    """Run in a fresh process: print KiB of peak RSS growth over the post-import RSS.

    The peak is the address space's high-water mark (VmHWM), reset after the imports
    through /proc/self/clear_refs.  ``getrusage``'s ru_maxrss would not do: Linux
    carries it across fork+exec, so a child of a big parent starts at the parent's
    peak."""
    import gc
    mod, nn, F, optim = _lib(lib)
    if lib == "torch":
        torch.set_num_threads(2)
    gc.collect()
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")                    # reset VmHWM to the current RSS
    except OSError:
        pass
    base = _vm_kib("VmRSS")
    use_proc = base is not None and _vm_kib("VmHWM") is not None
    if not use_proc:
        base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    build, shape, (opt_name, opt_kw), _ = NETWORKS[net]
    batch = 32 if net == "transformer" else 64
    x, y = _batch(shape, batch)
    model = build(nn)
    opt = getattr(optim, opt_name)(model.parameters(), **opt_kw)
    env = {"model": model, "opt": opt, "F": F,
           "x": (torch.from_numpy(x) if lib == "torch" else mod.asarray(x)),
           "y": (torch.from_numpy(y) if lib == "torch" else mod.asarray(y))}
    for _ in range(steps):
        exec(STEP, env)
    gc.collect()
    peak = _vm_kib("VmHWM") if use_proc else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(max(peak - base, 0))


def peak_rss(net, steps=5):
    """{lib: peak RSS growth in MiB} measured in fresh processes."""
    out = {}
    for lib in LIBS:
        if lib == "torch" and torch is None:
            continue
        try:
            r = subprocess.run([sys.executable, os.path.abspath(__file__), "--rss", net, lib,
                                str(steps)], capture_output=True, text=True, timeout=600)
            out[lib] = int(r.stdout.strip().splitlines()[-1]) / 1024
        except Exception as exc:
            harness.log(f"bench_train: RSS of {net}/{lib} failed: {exc!r}")
            out[lib] = None
    return out


def markdown_rss(rows):
    head = ("| network | ember peak RSS | PyTorch peak RSS | ember/PyTorch |\n"
            "|---|---|---|---|")
    lines = [head]
    for net, r in rows.items():
        e, t = r.get("ember"), r.get("torch")
        ratio = f"{e / t:.2f}x" if e and t else "n/a"
        fmt = (lambda v: f"{v:.0f} MiB" if v is not None else "n/a")
        lines.append(f"| {TITLES[net]} | {fmt(e)} | {fmt(t)} | {ratio} |")
    return "\n".join(lines)


def run(quick=False):
    """All training rows; ``quick`` uses tiny batches (for the smoke test)."""
    cases = tuple((lambda n=n: bench_network(n)) for n in NETWORKS)
    quick_cases = tuple((lambda n=n: bench_network(n, batch=2, number=1, repeat=2,
                                                   check_steps=1)) for n in NETWORKS)
    return harness.run_suite(cases, quick_cases, quick)


def run_rss(quick=False):
    return {net: peak_rss(net, steps=1 if quick else 5) for net in NETWORKS}


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--rss":
        _rss_child(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        t0 = time.perf_counter()
        harness.main(run)
        print()
        print(markdown_rss(run_rss()))
