"""The GPU table: ember on CUDA against PyTorch on CUDA, same process, same run.

    python benchmarks/bench_gpu.py            # full sizes (a few minutes on an H100)
    python benchmarks/bench_gpu.py --quick    # tiny sizes: checks that everything runs
    python benchmarks/bench_gpu.py --tf32     # let PyTorch use TF32 (its conv default)
    python benchmarks/bench_gpu.py --no-step-costs   # without the per-step table (shorter)
    EMBER_CUDA_EMULATION=1 python benchmarks/bench_gpu.py --quick   # no GPU: code paths only

Cases (the GPU issue's "Performance on the GPU" targets):

1. CPU-side launch cost of a small elementwise op: ``a + b`` on 1000 float32
   elements, a loop of 10,000 calls with no synchronisation inside, time per
   call of the loop (the device is synchronised before and after each batch,
   outside the timed loop).  Target: ember <= 1.0x PyTorch's time.
2. Bandwidth of a large elementwise add (2^26 float32): bytes of three arrays
   per call over the time per call, synchronised.  Target: >= 0.9x PyTorch's.
3. The matrix products those steps are made of (batched attention scores in
   float16 and bfloat16, a linear layer's input gradient, a convolution's
   weight-times-columns product), synchronised, in TFLOP/s.  No target: they
   say whether a slow training row is its GEMMs.  Then causal attention forward +
   backward at the GPT shape: ember's fused kernel and ember's math path, each next
   to PyTorch's SDPA (no target either).
4. ResNet-50 training step (batch 64, 224x224, SGD with momentum), float32 and
   under autocast float16 with a GradScaler.  Target: >= 0.6x PyTorch's images/s.
5. GPT-2-small-shaped Transformer training step (12 pre-norm layers, d 768,
   12 heads, causal, seq 1024, batch 8, vocab 50257, AdamW), float32 and under
   autocast float16.  Target: >= 0.7x PyTorch's tokens/s.
6. Per training step (a second table): kernel launches (ember: its kernels, fast-path
   launches and GEMMs; PyTorch: every GPU activity of its profiler), host time (the
   step called on an idle GPU until it returns) and GPU time (CUDA events around the
   step).  Target (issue #21): ember's host time under half its GPU time.

Each network is written ONCE as a function of a library's ``nn`` module (no
torchvision), so both libraries run the same architecture; PyTorch builds it
(its initialisation) and ember loads PyTorch's weights, and the first losses
are compared before anything is timed.  Times are medians over repetitions
that alternate between the libraries, each batch bracketed by a device
synchronisation.  float32 rows run PyTorch without TF32 (the arithmetic ember's
float32 kernels do) unless ``--tf32`` is given.  A case that fails prints
``failed: <error>`` in its row and the run goes on.  Without a CUDA device the
script says so and exits 0.
"""
import gc
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness  # noqa: E402
from harness import _short_error, make_timer, torch  # noqa: E402


# ------------------------------------------------------------------ devices

def ember_gpu():
    """The ember module when it has a usable CUDA device, else None."""
    try:
        import ember
        import ember.cuda
        return ember if ember.cuda.is_available() else None
    except Exception:
        return None


def torch_gpu():
    """torch when it has CUDA, else None."""
    try:
        return torch if torch is not None and torch.cuda.is_available() else None
    except Exception:
        return None


def _sync(lib):
    if lib == "torch":
        return torch.cuda.synchronize
    import ember.cuda
    return ember.cuda.synchronize


def _free():
    gc.collect()
    try:
        import ember.cuda
        ember.cuda.synchronize()
        ember.cuda.empty_cache()
    except Exception:
        pass
    if torch_gpu() is not None:
        torch.cuda.synchronize()
        torch.cuda.empty_cache()


# ------------------------------------------------------------------ timing

def alternate(batches, repeat):
    """``batches`` maps a library to ``f() -> seconds`` (one timed batch) or to an
    error string.  Runs them in alternating order ``repeat`` times; returns
    ({lib: median seconds or None}, {lib: error})."""
    times, errors = {}, {}
    samples = {lib: [] for lib, f in batches.items() if callable(f)}
    for lib, f in batches.items():
        if not callable(f):
            errors[lib] = f
    order = list(samples)
    for rep in range(repeat):
        k = rep % len(order) if order else 0
        for lib in order[k:] + order[:k]:
            if lib in errors:
                continue
            try:
                samples[lib].append(batches[lib]())
            except Exception as exc:
                errors[lib] = _short_error(exc)
    for lib in batches:
        s = samples.get(lib)
        times[lib] = statistics.median(s) if s and lib not in errors else None
    return times, errors


def loop_batch(stmt, ns, number, sync, include_sync):
    """f() -> seconds per call of ``stmt`` run ``number`` times in a compiled loop.
    ``include_sync``: the final synchronisation counts (device time), else only
    the loop (CPU-side time, what launching costs)."""
    run = make_timer(stmt, ns)
    run(3)
    sync()

    def f():
        sync()
        gc.disable()
        try:
            t0 = time.perf_counter()
            loop_ns = run(number)
            sync()
            t1 = time.perf_counter()
        finally:
            gc.enable()
        return (t1 - t0) / number if include_sync else loop_ns * 1e-9 / number
    return f


# ------------------------------------------------------------------ rows

def row(case, times, errors, higher_is_better, unit_fn, target, note=""):
    """One table row; ratio is ember's speed over PyTorch's (>1: ember faster)."""
    e, t = times.get("ember"), times.get("torch")
    ratio = (t / e) if e and t else None     # times -> speed ratio ember/torch
    met = None
    if ratio is not None and "ember" not in errors and target is not None:
        met = ratio >= target
    return {"case": case, "times": times, "errors": errors, "ratio": ratio, "target": target,
            "met": met, "unit_fn": unit_fn, "note": note, "hib": higher_is_better}


def failed_row(case, exc, target):
    return {"case": case, "times": {}, "errors": {"ember": f"failed: {_short_error(exc)}"},
            "ratio": None, "target": target, "met": None, "unit_fn": None, "note": "",
            "hib": True}


def _cell(r, lib):
    t = r["times"].get(lib)
    err = r["errors"].get(lib)
    if t is None:
        if err and str(err).startswith("failed"):
            return str(err)
        return f"failed: {err}" if err and err != "not available" else "n/a"
    s = harness.fmt_time(t)
    if r["unit_fn"]:
        s += f" ({r['unit_fn'](t)})"
    if err:
        s += f" [{err}]"
    return s


def markdown(rows):
    out = ["| case | ember | PyTorch | ember speed / PyTorch | target | met? |",
           "|---|---|---|---|---|---|"]
    for r in rows:
        ratio = "n/a" if r["ratio"] is None else f"{r['ratio']:.2f}x"
        met = {True: "yes", False: "**no**", None: "n/a"}[r["met"]]
        case = r["case"] + (f" ({r['note']})" if r["note"] else "")
        target = "none" if r["target"] is None else f">= {r['target']:g}x"
        out.append(f"| {case} | {_cell(r, 'ember')} | {_cell(r, 'torch')} | {ratio} | "
                   f"{target} | {met} |")
    return "\n".join(out)


# ------------------------------------------------------------------ 1, 2: elementwise

def bench_launch(n=1000, number=10_000, repeat=15):
    """CPU-side time per call of ``a + b`` (n float32), no sync inside the loop."""
    case = f"launch: `a + b`, {n} float32, loop of {number:,} calls, CPU time per call"
    batches = {}
    a = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    E, T = ember_gpu(), torch_gpu()
    try:
        ns = {"a": E.asarray(a).to("cuda"), "b": E.asarray(a).to("cuda")}
        batches["ember"] = loop_batch("a + b", ns, number, _sync("ember"), include_sync=False)
    except Exception as exc:
        batches["ember"] = _short_error(exc)
    if T is not None:
        tns = {"a": torch.from_numpy(a).cuda(), "b": torch.from_numpy(a).cuda()}
        batches["torch"] = loop_batch("a + b", tns, number, _sync("torch"), include_sync=False)
    else:
        batches["torch"] = "not available"
    times, errors = alternate(batches, repeat)
    return [row(case, times, errors, False, None, 1.0, note="speed = 1 / time; target: time <= 1.0x")]


def bench_bandwidth(n=1 << 26, number=20, repeat=11):
    """GB/s of ``c = a + b`` on n float32 (three arrays of traffic), synchronised."""
    nbytes = 3 * 4 * n
    case = f"bandwidth: `a + b`, 2^{int(np.log2(n))} float32"
    E, T = ember_gpu(), torch_gpu()
    batches = {}
    try:
        a = E.ones(n, dtype=E.float32, device="cuda")
        b = E.ones(n, dtype=E.float32, device="cuda")
        c = a + b
        if not bool((c == 2).all()):
            raise AssertionError("ember's a + b is wrong")
        del c
        batches["ember"] = loop_batch("a + b", {"a": a, "b": b}, number, _sync("ember"), True)
    except Exception as exc:
        batches["ember"] = _short_error(exc)
    if T is not None:
        ta = torch.ones(n, dtype=torch.float32, device="cuda")
        tb = torch.ones(n, dtype=torch.float32, device="cuda")
        batches["torch"] = loop_batch("a + b", {"a": ta, "b": tb}, number, _sync("torch"), True)
    else:
        batches["torch"] = "not available"
    times, errors = alternate(batches, repeat)
    rows = [row(case, times, errors, True, lambda t: f"{nbytes / t / 1e9:.0f} GB/s", 0.9)]
    del batches
    _free()
    return rows


# ------------------------------------------------------------------ 3: GEMM shapes

# (label, shape of a, shape of b, transpose b's last two axes, dtype): the matrix
# products the training rows are made of (no target of their own; they say whether a
# slow step is its GEMMs)
GEMM_CASES = [
    ("attention scores q @ k^T, 8x12 heads", (96, 1024, 64), (96, 1024, 64), True, "float16"),
    ("attention scores q @ k^T, 8x12 heads", (96, 1024, 64), (96, 1024, 64), True, "bfloat16"),
    ("linear input gradient g @ W", (8, 1024, 3072), (3072, 768), False, "float16"),
    ("conv forward W @ columns (ResNet-50 layer 2 3x3)", (128, 1152), (64, 1152, 784), False,
     "float16"),
    ("conv forward W @ columns (ResNet-50 layer 2 3x3)", (128, 1152), (64, 1152, 784), False,
     "float32"),
]


def bench_gemm(number=20, repeat=9, cases=GEMM_CASES):
    """Synchronised time of ``a @ b`` for the shapes of the training rows, both
    libraries from the same values (the results are compared first)."""
    E, T = ember_gpu(), torch_gpu()
    rows = []
    for label, sa, sb, trans, dt in cases:
        flop = 2 * int(np.prod(np.broadcast_shapes(sa[:-2], sb[:-2]))) * sa[-2] * sa[-1] * (
            sb[-2] if trans else sb[-1])
        case = f"GEMM: {label}, {sa} @ {sb}{'^T' if trans else ''}, {dt}"
        r = np.random.default_rng(0)
        a = r.standard_normal(sa).astype(np.float32)
        b = r.standard_normal(sb).astype(np.float32)
        batches = {}
        want = None
        if T is not None:
            tdt = getattr(torch, dt)
            ta, tb = torch.from_numpy(a).cuda().to(tdt), torch.from_numpy(b).cuda().to(tdt)
            if trans:
                tb = tb.transpose(-1, -2)
            want = (ta @ tb).float().cpu().numpy()
            batches["torch"] = loop_batch("a @ b", {"a": ta, "b": tb}, number, _sync("torch"),
                                          True)
        else:
            batches["torch"] = "not available"
        try:
            edt = getattr(E, dt)
            ea = E.asarray(a).to("cuda").astype(edt)
            eb = E.asarray(b).to("cuda").astype(edt)
            if trans:
                eb = eb.swapaxes(-1, -2)
            got = (ea @ eb).astype(E.float32).cpu().numpy()
            if want is not None:
                tol = 1e-2 if dt != "float32" else 1e-3
                err = float(np.max(np.abs(got - want)) / max(1e-6, float(np.max(np.abs(want)))))
                if err > tol:
                    raise AssertionError(f"ember and PyTorch differ: max rel error {err:.2g}")
            batches["ember"] = loop_batch("a @ b", {"a": ea, "b": eb}, number, _sync("ember"),
                                          True)
        except Exception as exc:
            batches["ember"] = _short_error(exc)
        times, errors = alternate(batches, repeat)
        rows.append(row(case, times, errors, True, lambda t, f=flop: f"{f / t / 1e12:.0f} TFLOP/s",
                        None))
        del batches
        _free()
    return rows


# ------------------------------------------------------------------ 3b: attention

def bench_attention(shape=(8, 12, 1024, 64), dtypes=("float16", "float32"), number=5,
                    repeat=7):
    """Synchronised forward + backward of causal ``F.scaled_dot_product_attention`` on
    (batch, heads, seq, head dim) arrays: ember's fused kernel, then ember's math path
    (``ember.backends.cuda.enable_flash_sdp(False)``: scores materialised), each next to
    PyTorch's SDPA; outputs are compared first.  No target: it says whether the GPT rows'
    attention is the fused kernel's cost (``flash`` rows' note: the peak of ember's pool
    above the inputs, against one float32 score matrix)."""
    E, T = ember_gpu(), torch_gpu()
    rows = []
    B, H, L, D = shape
    flop = 4 * B * H * L * L * D / 2 * 3.5            # causal: half; fwd + bwd ~ 3.5 fwd
    stmt = "out = F.scaled_dot_product_attention(q, q, q, is_causal=True)\nout.backward(g)"
    for dt in dtypes:
        x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
        want = None
        batches_t = "not available"
        if T is not None:
            tq = torch.from_numpy(x).cuda().to(getattr(torch, dt)).requires_grad_()
            tg = torch.ones_like(tq)
            want = torch.nn.functional.scaled_dot_product_attention(
                tq, tq, tq, is_causal=True).float().cpu().numpy()
            batches_t = loop_batch(stmt, {"F": torch.nn.functional, "q": tq, "g": tg}, number,
                                   _sync("torch"), True)
        for flash in (True, False):
            case = (f"attention fwd+bwd, causal, {shape}, {dt}, ember "
                    f"{'fused kernel' if flash else 'math path'}")
            batches = {"torch": batches_t}
            note = ""
            try:
                import ember.nn.functional as EF
                import ember.backends.cuda as ebc
                ebc.enable_flash_sdp(flash)
                eq = E.asarray(x).to("cuda").astype(getattr(E, dt)).requires_grad_()
                eg = E.ones_like(eq)
                got = EF.scaled_dot_product_attention(eq, eq, eq, is_causal=True)
                got = got.astype(E.float32).cpu().numpy()
                if want is not None:
                    err = float(np.max(np.abs(got - want)))
                    if err > (2e-2 if dt != "float32" else 1e-3):
                        raise AssertionError(f"ember and PyTorch differ: max abs error {err:.2g}")
                if flash:
                    import cupy
                    pool = cupy.get_default_memory_pool()
                    E.cuda.synchronize()
                    pool.free_all_blocks()
                    base = pool.used_bytes()
                    EF.scaled_dot_product_attention(eq, eq, eq, is_causal=True).backward(eg)
                    E.cuda.synchronize()
                    note = (f"pool peak {(pool.total_bytes() - base) / 2**20:.0f} MiB, one "
                            f"float32 score matrix {B * H * L * L * 4 / 2**20:.0f} MiB")
                batches["ember"] = loop_batch(stmt, {"F": EF, "q": eq, "g": eg}, number,
                                              _sync("ember"), True)
            except Exception as exc:
                batches["ember"] = _short_error(exc)
            times, errors = alternate(batches, repeat)
            rows.append(row(case, times, errors, True,
                            lambda t, f=flop: f"{f / t / 1e12:.0f} TFLOP/s", None, note))
            try:
                import ember.backends.cuda as ebc
                ebc.enable_flash_sdp(True)
            except Exception:
                pass
            _free()
    return rows


# ------------------------------------------------------------------ networks

def resnet50(nn, num_classes=1000, width=64):
    """ResNet-50 (He et al. 2016): bottleneck blocks [3, 4, 6, 3], widths 64-512,
    expansion 4, stride on the 3x3 conv (torchvision's "v1.5").  ``width`` scales every
    layer's channels (64: the real network; smaller: the same layers and ops, fewer
    channels, for host-side measurements such as host_step.py)."""

    class Bottleneck(nn.Module):
        def __init__(self, cin, width, stride):
            super().__init__()
            cout = width * 4
            self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(width)
            self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(width)
            self.conv3 = nn.Conv2d(width, cout, 1, bias=False)
            self.bn3 = nn.BatchNorm2d(cout)
            self.relu = nn.ReLU()
            self.downsample = None
            if stride != 1 or cin != cout:
                self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False),
                                                nn.BatchNorm2d(cout))

        def forward(self, x):
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.relu(self.bn2(self.conv2(out)))
            out = self.bn3(self.conv3(out))
            identity = x if self.downsample is None else self.downsample(x)
            return self.relu(out + identity)

    w = width
    layers = [nn.Conv2d(3, w, 7, stride=2, padding=3, bias=False), nn.BatchNorm2d(w), nn.ReLU(),
              nn.MaxPool2d(3, stride=2, padding=1)]
    cin = w
    for mult, blocks, stride in ((1, 3, 1), (2, 4, 2), (4, 6, 2), (8, 3, 2)):
        for i in range(blocks):
            layers.append(Bottleneck(cin, w * mult, stride if i == 0 else 1))
            cin = w * mult * 4
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, num_classes)]
    return nn.Sequential(*layers)


def gpt(nn, vocab, seq, d, heads, layers):
    """A GPT-2-shaped decoder-only Transformer: token + position embeddings,
    ``layers`` pre-norm blocks (GELU MLP of 4d, no dropout) with a causal mask,
    a final LayerNorm and an (untied) vocabulary head."""

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(vocab, d)
            self.pos = nn.Embedding(seq, d)
            block = nn.TransformerEncoderLayer(d, heads, dim_feedforward=4 * d, dropout=0.0,
                                               activation="gelu", batch_first=True,
                                               norm_first=True)
            self.blocks = nn.TransformerEncoder(block, layers, enable_nested_tensor=False)
            self.ln = nn.LayerNorm(d)
            self.head = nn.Linear(d, vocab, bias=False)

        def forward(self, idx, pos, mask):
            h = self.tok(idx) + self.pos(pos)
            h = self.blocks(h, mask=mask, is_causal=True)
            return self.head(self.ln(h))

    return GPT()


def _lib(lib):
    if lib == "torch":
        import torch.nn.functional as F
        return torch, torch.nn, F
    import ember
    import ember.amp  # noqa: F401
    import ember.nn.functional as F
    return ember, ember.nn, F


def _to_ember(tmodel, build):
    """ember copy of torch model ``tmodel`` (same weights), moved to cuda."""
    E, enn, _ = _lib("ember")
    model = build(enn)
    state = {k: v.detach().cpu().numpy().copy() for k, v in tmodel.state_dict().items()}
    model.load_state_dict({k: E.asarray(v) for k, v in state.items()})
    return model.to("cuda")


def _step_fn(lib, model, opt, inputs, target, amp, loss_fn, device="cuda"):
    """One training step as a closure: zero_grad, forward (under autocast when
    ``amp``), loss, backward (scaled when ``amp``), step.  Returns the loss.
    ``device``: where autocast and the GradScaler work ('cuda', or 'cpu' for
    PyTorch's CPU reference in host_step.py)."""
    mod, _, F = _lib(lib)
    if amp:
        if lib == "torch":
            scaler = torch.amp.GradScaler(device)
            ctx = lambda: torch.autocast(device, dtype=torch.float16)  # noqa: E731
        else:
            scaler = mod.amp.GradScaler(device)
            ctx = lambda: mod.amp.autocast(device, dtype=mod.float16)  # noqa: E731

    def step():
        opt.zero_grad()
        if amp:
            with ctx():
                loss = loss_fn(F, model(*inputs), target)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss = loss_fn(F, model(*inputs), target)
            loss.backward()
            opt.step()
        return loss
    return step


def _train_case(case, target, build_torch, build, make_inputs, make_opt, loss_fn, amp, number,
                repeat, work, unit, check_rtol):
    """Time training steps of the same network in both libraries."""
    T = torch_gpu()
    batches, errors = {}, {}

    def setup(lib, tmodel):
        # the model, optimizer and batch live only in the step closure, so that
        # dropping the closure frees the device memory of this case
        model = _to_ember(tmodel, build) if lib == "ember" else tmodel.cuda()
        inputs, target = make_inputs(lib)
        return _step_fn(lib, model, make_opt(lib, model), inputs, target, amp, loss_fn)

    torch.manual_seed(0)
    tmodel = build_torch()
    steps = {}
    try:
        steps["ember"] = setup("ember", tmodel)
    except Exception as exc:
        batches["ember"] = _short_error(exc)
        harness.log(f"bench_gpu {case}: ember setup failed: {exc!r}")
    if T is not None:
        steps["torch"] = setup("torch", tmodel)
    else:
        batches["torch"] = "not available"
    del tmodel
    # same start, same batch: the first losses agree (untimed, also the warm-up)
    first = {}
    for lib, step in list(steps.items()):
        try:
            first[lib] = float(step().item())
            for _ in range(2):
                step()
            _sync(lib)()
        except Exception as exc:
            batches[lib] = _short_error(exc)
            harness.log(f"bench_gpu {case}: {lib} step failed: {exc!r}")
            del steps[lib]
    if "ember" in first and "torch" in first and not np.isclose(first["ember"], first["torch"],
                                                               rtol=check_rtol, atol=check_rtol):
        errors["ember"] = f"first loss {first['ember']:.5g} vs PyTorch's {first['torch']:.5g}"

    per_step = {}
    for lib, step in list(steps.items()) if STEP_COSTS[0] else ():
        try:
            per_step[lib] = step_costs(lib, step, _sync(lib))
        except Exception as exc:
            harness.log(f"bench_gpu {case}: {lib} per-step costs failed: {exc!r}")

    host = {lib: [] for lib in steps}

    def batch_of(lib, step, sync):
        def f():
            sync()
            t0 = time.perf_counter()
            for _ in range(number):
                step()
            t1 = time.perf_counter()        # the host has queued every step
            sync()
            t2 = time.perf_counter()
            host[lib].append((t1 - t0) / (t2 - t0))
            return (t2 - t0) / number
        return f

    for lib, step in steps.items():
        batches[lib] = batch_of(lib, step, _sync(lib))
    times, errs = alternate(batches, repeat)
    for lib, shares in host.items():
        # well below 1: the GPU sets the pace.  Near 1: the host does, or it waited inside
        # the step (GradScaler reads its inf flag once a step; a full launch queue blocks)
        if shares:
            harness.log(f"bench_gpu {case}: {lib} host time until the last step returned "
                        f"{100 * statistics.median(shares):.0f}% of the step time")
    errs.update(errors)
    r = row(case, times, errs, True, lambda t: f"{work / t:,.0f} {unit}", target)
    r["per_step"] = per_step
    steps = batches = step = None      # free this case's device memory
    _free()
    return [r]


# ------------------------------------------------------------------ per-step costs

STEP_COSTS = [True]      # --no-step-costs: skip the per-step table (a shorter run)


class _EmberLaunches:
    """Counts ember's kernel launches and cuBLAS GEMMs inside the block: the general
    path (ember.cuda._runtime.launch, R.launch), the cuLaunchKernel fast path (its counter in
    ember.cuda._launch) and ember/cuda/_gemm's GEMM calls.  CuPy's own kernels are not
    counted here (benchmarks/host_step.py counts them on the emulation)."""

    def __enter__(self):
        from ember.cuda import _gemm, _launch, _runtime
        self.n = 0
        self._mods = (_runtime, _gemm)
        self._orig = (_runtime.launch, _gemm._cublas_gemm)
        launch, gemm = self._orig

        def counted_launch(*a, **k):
            self.n += 1
            return launch(*a, **k)

        def counted_gemm(*a, **k):
            self.n += 1
            return gemm(*a, **k)
        _runtime.launch, _gemm._cublas_gemm = counted_launch, counted_gemm
        self._fast = _launch.fast_launch_count()
        return self

    def __exit__(self, *exc):
        from ember.cuda import _launch
        self.n += _launch.fast_launch_count() - self._fast
        self._mods[0].launch, self._mods[1]._cublas_gemm = self._orig
        return False


def _torch_kernels(step):
    """PyTorch's GPU activities (kernels, memsets, copies) in one step, by its profiler."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    dev = torch.autograd.DeviceType.CUDA
    return sum(1 for e in prof.events() if e.device_type == dev)


def step_costs(lib, step, sync, repeat=3):
    """Per training step: launches (one counted step), host time (the step called on an
    idle device until it returns) and GPU time (CUDA events around the step), medians
    of ``repeat`` steps, in ms.  Returns {"launches", "host_ms", "gpu_ms"}."""
    if lib == "torch":
        Event = lambda: torch.cuda.Event(enable_timing=True)  # noqa: E731
        try:
            launches = _torch_kernels(step)
        except Exception as exc:
            harness.log(f"bench_gpu: PyTorch's profiler failed: {exc!r}")
            launches = None
    else:
        import ember.cuda
        Event = lambda: ember.cuda.Event(enable_timing=True)  # noqa: E731
        with _EmberLaunches() as counted:
            step()
        launches = counted.n
    host, gpu = [], []
    for _ in range(repeat):
        sync()
        start, end = Event(), Event()
        t0 = time.perf_counter()
        start.record()
        step()
        end.record()
        host.append(time.perf_counter() - t0)
        end.synchronize()
        gpu.append(start.elapsed_time(end))
    return {"launches": launches, "host_ms": 1e3 * statistics.median(host),
            "gpu_ms": statistics.median(gpu)}


def _costs_cell(c):
    if not c:
        return "n/a"
    n = "n/a" if c["launches"] is None else str(c["launches"])
    return f"{n} / {c['host_ms']:.1f} / {c['gpu_ms']:.1f}"


def markdown_steps(rows):
    """The per-step table of the training rows: launches / host ms / GPU ms per library,
    and ember's host time over its GPU time (target: under 0.5)."""
    out = ["| training step | ember launches / host ms / GPU ms | PyTorch GPU activities / "
           "host ms / GPU ms | ember host / GPU time |", "|---|---|---|---|"]
    for r in rows:
        costs = r.get("per_step")
        if not costs:
            continue
        e = costs.get("ember")
        share = f"{e['host_ms'] / e['gpu_ms']:.2f}" if e and e["gpu_ms"] else "n/a"
        out.append(f"| {r['case']} | {_costs_cell(e)} | {_costs_cell(costs.get('torch'))} | "
                   f"{share} |")
    return "\n".join(out) if len(out) > 2 else ""


def _cross_entropy(F, out, y):
    return F.cross_entropy(out, y)


def bench_resnet50(batch=64, size=224, amp=False, number=3, repeat=7):
    case = (f"ResNet-50 training step, batch {batch}, {size}x{size}, SGD momentum, "
            + ("autocast float16 + GradScaler" if amp else "float32"))
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch, 3, size, size), dtype=np.float32)
    y = rng.integers(0, 1000, batch).astype(np.int64)

    def inputs(lib):
        if lib == "torch":
            return (torch.from_numpy(x).cuda(),), torch.from_numpy(y).cuda()
        E = _lib("ember")[0]
        return (E.asarray(x).to("cuda"),), E.asarray(y).to("cuda")

    def opt(lib, model):
        mod = _lib(lib)[0]
        return mod.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)

    try:
        return _train_case(case, 0.6, lambda: resnet50(torch.nn), resnet50, inputs, opt,
                           _cross_entropy, amp, number, repeat, batch, "images/s",
                           check_rtol=5e-2 if amp else 2e-3)
    except Exception as exc:
        harness.log(f"bench_gpu {case}: {exc!r}")
        _free()
        return [failed_row(case, exc, 0.6)]


def bench_gpt(batch=8, seq=1024, d=768, heads=12, layers=12, vocab=50257, amp=False, number=2,
              repeat=5):
    case = (f"GPT-2-small-shaped training step ({layers} layers, d {d}, {heads} heads, seq {seq}, "
            f"batch {batch}, vocab {vocab}), AdamW, " + ("autocast float16 + GradScaler" if amp
                                                         else "float32"))
    rng = np.random.default_rng(0)
    idx = rng.integers(0, vocab, (batch, seq + 1)).astype(np.int64)
    mask = np.triu(np.full((seq, seq), -np.inf, dtype=np.float32), 1)
    pos = np.arange(seq, dtype=np.int64)

    def inputs(lib):
        if lib == "torch":
            cu = lambda a: torch.from_numpy(np.ascontiguousarray(a)).cuda()  # noqa: E731
        else:
            E = _lib("ember")[0]
            cu = lambda a: E.asarray(np.ascontiguousarray(a)).to("cuda")  # noqa: E731
        return (cu(idx[:, :-1]), cu(pos), cu(mask)), cu(idx[:, 1:].reshape(-1))

    def opt(lib, model):
        mod = _lib(lib)[0]
        return mod.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01)

    def loss_fn(F, logits, y):
        return F.cross_entropy(logits.reshape(-1, vocab), y)

    build = lambda nn: gpt(nn, vocab, seq, d, heads, layers)  # noqa: E731
    try:
        return _train_case(case, 0.7, lambda: build(torch.nn), build, inputs, opt, loss_fn, amp,
                           number, repeat, batch * seq, "tokens/s",
                           check_rtol=5e-2 if amp else 2e-3)
    except Exception as exc:
        harness.log(f"bench_gpu {case}: {exc!r}")
        _free()
        return [failed_row(case, exc, 0.7)]


# ------------------------------------------------------------------ main

def run(quick=False):
    if quick:
        cases = [lambda: bench_launch(number=1000, repeat=3),
                 lambda: bench_bandwidth(n=1 << 20, number=5, repeat=3),
                 lambda: bench_gemm(number=2, repeat=2, cases=[
                     ("small", (4, 64, 32), (4, 64, 32), True, "float16"),
                     ("small", (32, 48), (3, 48, 20), False, "float32")]),
                 lambda: bench_attention(shape=(1, 2, 64, 32), dtypes=("float16",),
                                         number=1, repeat=2),
                 lambda: bench_resnet50(batch=4, size=64, number=1, repeat=2),
                 lambda: bench_resnet50(batch=4, size=64, amp=True, number=1, repeat=2),
                 lambda: bench_gpt(batch=2, seq=64, d=128, heads=4, layers=2, vocab=1000,
                                   number=1, repeat=2),
                 lambda: bench_gpt(batch=2, seq=64, d=128, heads=4, layers=2, vocab=1000,
                                   amp=True, number=1, repeat=2)]
    else:
        cases = [bench_launch, bench_bandwidth, bench_gemm, bench_attention,
                 bench_resnet50, lambda: bench_resnet50(amp=True),
                 bench_gpt, lambda: bench_gpt(amp=True)]
    rows = []
    for f in cases:
        try:
            rows += f()
        except Exception as exc:            # never let one case stop the table
            rows.append(failed_row(getattr(f, "__name__", "case"), exc, 1.0))
        harness.log(f"bench_gpu: {rows[-1]['case']} done: {rows[-1]}")
    return rows


def gpu_environment():
    parts = []
    try:
        import cupy
        props = cupy.cuda.runtime.getDeviceProperties(0)
        name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
        parts.append(f"GPU: {name}; CuPy {cupy.__version__}; CUDA runtime "
                     f"{cupy.cuda.runtime.runtimeGetVersion()}")
    except Exception:
        pass
    if torch_gpu() is not None:
        parts.append(f"PyTorch {torch.__version__} CUDA {torch.version.cuda}, "
                     f"TF32 {'on' if torch.backends.cudnn.allow_tf32 else 'off'}")
    else:
        parts.append("PyTorch CUDA: not available (its column reads n/a)")
    return "- " + "; ".join(parts)


def _emulation():
    """EMBER_CUDA_EMULATION=1: ember's GPU backend on the CPU emulation (tests/cuda_emu),
    to check that every code path of this script runs; never a GPU measurement."""
    if os.environ.get("EMBER_CUDA_EMULATION") != "1":
        return False
    tests = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests")
    sys.path[:0] = [tests]
    import cuda_emu
    cuda_emu.install()
    return True


def main():
    quick = "--quick" in sys.argv
    STEP_COSTS[0] = "--no-step-costs" not in sys.argv
    if _emulation():
        print("bench_gpu: EMBER_CUDA_EMULATION=1: ember runs on the CPU emulation; the "
              "figures below check the code paths and are not GPU measurements.\n")
    if ember_gpu() is None:
        print("bench_gpu: no CUDA device (ember.cuda.is_available() is False); "
              "nothing to benchmark.")
        return 0
    if torch_gpu() is not None:
        tf32 = "--tf32" in sys.argv
        torch.backends.cudnn.allow_tf32 = tf32
        torch.backends.cuda.matmul.allow_tf32 = tf32
        ember_gpu().backends.cudnn.allow_tf32 = tf32    # the same precision on both sides
        torch.set_num_threads(max(1, os.cpu_count() or 1))
    print(harness.environment_markdown(harness.environment()))
    print(gpu_environment())
    print()
    rows = run(quick=quick)
    print(markdown(rows))
    steps = markdown_steps(rows)
    if steps:
        print("\nPer training step (launches: ember kernels + GEMMs; PyTorch: every GPU "
              "activity its profiler saw):\n")
        print(steps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
