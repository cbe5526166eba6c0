"""Where the CPU time of a training step goes: convolutions against GEMMs, and GEMM/conv
against the rest.

Not a benchmark with targets but the profile behind one (issue 25, part 2):

1. ``layers``: for every distinct convolution of ResNet-20 (CIFAR 3x32x32, batch 64 as
   in ``bench_train.py``), the forward, the input gradient and the weight gradient are
   timed as ember runs them (``_conv``, ``_conv_transpose``, ``_conv_weight`` of
   ``ember.nn.functional.conv``) against ember's own GEMM (``ember._kernels.cpu.gemm``)
   of the same M, N, K on ready-made operands (what im2col + GEMM would cost with a free
   im2col).  Printed: ms, GFLOP/s and the ratio conv/GEMM for each.
2. ``steps``: for each training step of ``bench_train.py`` (MLP, LeNet-5, ResNet-20,
   Transformer), the step's median time, the time spent inside ember's GEMM and
   convolution kernels (timers wrapped around the kernel entry points for the profiled
   steps), their FLOPs, the time those FLOPs take at the measured sgemm rate (a 1024^3
   float32 product on ember's threads), and the rest (step minus kernel time).

Every time is a median of interleaved repetitions in one process (``harness.interleaved``
for the layers), so drift hits both columns alike; the load average is printed with the
figures because the machine is shared.

    python benchmarks/profile_resnet20_layers.py            # both tables
    python benchmarks/profile_resnet20_layers.py layers     # only the per-layer table
    python benchmarks/profile_resnet20_layers.py steps      # only the step shares
"""
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness  # noqa: E402

# (name, C, O, H, k, stride, pad, number of such convolutions in the network)
RESNET20_CONVS = (
    ("stem 3->16 3x3", 3, 16, 32, 3, 1, 1, 1),
    ("s1 16->16 3x3", 16, 16, 32, 3, 1, 1, 6),
    ("s2 16->32 3x3 /2", 16, 32, 32, 3, 2, 1, 1),
    ("s2 short 16->32 1x1 /2", 16, 32, 32, 1, 2, 0, 1),
    ("s2 32->32 3x3", 32, 32, 16, 3, 1, 1, 5),
    ("s3 32->64 3x3 /2", 32, 64, 16, 3, 2, 1, 1),
    ("s3 short 32->64 1x1 /2", 32, 64, 16, 1, 2, 0, 1),
    ("s3 64->64 3x3", 64, 64, 8, 3, 1, 1, 5),
)


def load_average():
    try:
        return os.getloadavg()[0]
    except OSError:
        return float("nan")


def _median_ms(fn, number, repeat):
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter_ns()
        for _ in range(number):
            fn()
        ts.append((time.perf_counter_ns() - t0) / number / 1e6)
    return float(np.median(ts))


def _interleaved_ms(fns, number=3, repeat=11, warmup=2):
    """{name: median ms} of the callables in `fns`, timed round-robin."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    names = list(fns)
    samples = {k: [] for k in names}
    for r in range(repeat):
        order = names[r % len(names):] + names[:r % len(names)]
        for k in order:
            fn = fns[k]
            t0 = time.perf_counter_ns()
            for _ in range(number):
                fn()
            samples[k].append((time.perf_counter_ns() - t0) / number / 1e6)
    return {k: float(np.median(v)) for k, v in samples.items()}


def sgemm_gflops():
    """GFLOP/s of ember's GEMM on a 1024^3 float32 product (median of 7)."""
    from ember._kernels.cpu.gemm import matmul
    rng = np.random.default_rng(0)
    a = rng.standard_normal((1024, 1024), dtype=np.float32)
    b = rng.standard_normal((1024, 1024), dtype=np.float32)
    c = np.empty((1024, 1024), np.float32)
    ms = _median_ms(lambda: matmul(a, b, c), 1, 7)
    return 2 * 1024 ** 3 / ms / 1e6


# ------------------------------------------------------------------ per-layer table

def layer_rows(batch=64, repeat=11, number=3):
    import ember
    from ember.nn.functional import conv as cv
    from ember._kernels.cpu.gemm import matmul
    rng = np.random.default_rng(0)
    rows = []
    for name, C, O, H, k, s, p, count in RESNET20_CONVS:
        OH = (H + 2 * p - k) // s + 1
        L = OH * OH
        x = ember.asarray(rng.standard_normal((batch, C, H, H), dtype=np.float32))
        w = ember.asarray(rng.standard_normal((O, C, k, k), dtype=np.float32))
        g = ember.asarray(rng.standard_normal((batch, O, OH, OH), dtype=np.float32))
        geo = ((s, s), (p, p, p, p), (1, 1), 1)
        K = C * k * k
        NL = batch * L
        # the GEMMs of the same sizes on ready operands (im2col for free)
        A_f = rng.standard_normal((O, K), dtype=np.float32)
        B_f = rng.standard_normal((K, NL), dtype=np.float32)
        C_f = np.empty((O, NL), np.float32)
        A_i = rng.standard_normal((K, O), dtype=np.float32)
        B_i = rng.standard_normal((O, NL), dtype=np.float32)
        C_i = np.empty((K, NL), np.float32)
        A_w = rng.standard_normal((O, NL), dtype=np.float32)
        B_w = rng.standard_normal((NL, K), dtype=np.float32)
        C_w = np.empty((O, K), np.float32)
        fns = {
            "fwd": lambda: cv._conv(x, w, None, *geo),
            "fwd_gemm": lambda: matmul(A_f, B_f, C_f),
            "dx": lambda: cv._conv_transpose(g, w, None, (H, H), *geo),
            "dx_gemm": lambda: matmul(A_i, B_i, C_i),
            "dw": lambda: cv._conv_weight(x, g, (O, C, k, k), *geo),
            "dw_gemm": lambda: matmul(A_w, B_w, C_w),
        }
        ms = _interleaved_ms(fns, number=number, repeat=repeat)
        flop = 2.0 * O * K * NL
        rows.append((name, count, O, NL, K, flop, ms))
    return rows


def print_layers(rows, batch=64):
    la = load_average()
    print(f"\nResNet-20 convolutions, batch {batch}, float32, 3x32x32 "
          f"(load average {la:.1f}); GEMM = ember's GEMM of the same M, N, K")
    print("| layer (count) | M x N x K (fwd) | fwd ms | GF/s | GEMM GF/s | conv/GEMM | "
          "dx ms | GF/s | conv/GEMM | dw ms | GF/s | conv/GEMM |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    tot = {"conv": 0.0, "gemm": 0.0}
    for name, count, M, N, K, flop, ms in rows:
        gf = lambda t: flop / t / 1e6  # noqa: E731
        cells = [f"{name} (x{count})", f"{M} x {N} x {K}"]
        for part in ("fwd", "dx", "dw"):
            cells.append(f"{ms[part]:.2f}")
            cells.append(f"{gf(ms[part]):.0f}")
            if part == "fwd":
                cells.append(f"{gf(ms['fwd_gemm']):.0f}")
            cells.append(f"{ms[part] / ms[part + '_gemm']:.2f}x")
            tot["conv"] += count * ms[part]
            tot["gemm"] += count * ms[part + "_gemm"]
        print("| " + " | ".join(cells) + " |")
    print(f"\nall 20 convolutions, forward + both gradients: {tot['conv']:.1f} ms in ember's "
          f"convolutions, {tot['gemm']:.1f} ms as bare GEMMs "
          f"({tot['conv'] / tot['gemm']:.2f}x)")


# ------------------------------------------------------------------ step shares

class _KernelTimers:
    """Wraps ember's GEMM and convolution kernel entry points with timers and FLOP
    counters (the names the nn modules imported are swapped, then restored)."""

    def __init__(self):
        self.ms = 0.0
        self.flop = 0.0
        self.active = False
        self._undo = []

    def _wrap(self, fn, flops):
        def timed(*args, **kw):
            if not self.active:
                return fn(*args, **kw)
            t0 = time.perf_counter_ns()
            try:
                return fn(*args, **kw)
            finally:
                self.ms += (time.perf_counter_ns() - t0) / 1e6
                self.flop += flops(*args)
        return timed

    def install(self):
        from ember._kernels.cpu import gemm, conv as ck

        def gemm_flops(a, b, out, *alpha):
            batch = out.size // max(out.shape[-1] * out.shape[-2], 1)
            return 2.0 * batch * out.shape[-2] * out.shape[-1] * a.shape[-1]

        def conv_fwd_flops(x, w, b, out, *geo):
            return 2.0 * out.size * w.shape[1] * w.shape[2] * w.shape[3]

        def conv_w_flops(x, g, dw, *geo):
            return 2.0 * g.size * dw.shape[1] * dw.shape[2] * dw.shape[3]

        def conv_in_flops(g, w, dx, *geo):
            return 2.0 * g.size * w.shape[1] * w.shape[2] * w.shape[3]

        timed_gemm = self._wrap(gemm.matmul, gemm_flops)
        for mod in list(sys.modules.values()):
            if mod is None or not getattr(mod, "__name__", "").startswith("ember"):
                continue
            for attr, val in list(vars(mod).items()):
                if val is gemm.matmul and mod is not gemm:
                    setattr(mod, attr, timed_gemm)
                    self._undo.append((mod, attr, val))
        for name, fl in (("conv2d_forward_f32", conv_fwd_flops),
                         ("conv2d_weight_f32", conv_w_flops),
                         ("conv2d_input_f32", conv_in_flops)):
            orig = getattr(ck, name)
            setattr(ck, name, self._wrap(orig, fl))
            self._undo.append((ck, name, orig))

    def uninstall(self):
        for mod, attr, val in reversed(self._undo):
            setattr(mod, attr, val)
        self._undo = []


def step_rows(nets=("mlp", "lenet5", "resnet20", "transformer"), repeat=9, batch=None,
              number=None):
    """Per network: (name, batch, ember ms, PyTorch ms, ember's kernel ms, GFLOP per step,
    sgemm GFLOP/s).  ember's steps run with the kernel timers on, so the kernel time and
    the step time come from the same steps (medians over interleaved repetitions)."""
    import bench_train as bt
    rate = sgemm_gflops()
    out = []
    for net in nets:
        nb = batch or (32 if net == "transformer" else 64)
        ns = bt._namespaces(net, nb)
        reps = number or (20 if net == "mlp" else (1 if net == "resnet20" else 3))
        envs = {lib: dict(ns[lib]) for lib in bt.LIBS}
        code = compile(bt.STEP, "<step>", "exec")
        for lib in bt.LIBS:
            for _ in range(2):
                exec(code, envs[lib])
        timers = _KernelTimers()
        timers.install()
        samples = {"ember": [], "torch": [], "kern": [], "flop": []}
        try:
            for r in range(repeat):
                for lib in (bt.LIBS if r % 2 == 0 else bt.LIBS[::-1]):
                    env = envs[lib]
                    timers.ms = timers.flop = 0.0
                    timers.active = lib == "ember"
                    t0 = time.perf_counter_ns()
                    for _ in range(reps):
                        exec(code, env)
                    samples[lib].append((time.perf_counter_ns() - t0) / reps / 1e6)
                    timers.active = False
                    if lib == "ember":
                        samples["kern"].append(timers.ms / reps)
                        samples["flop"].append(timers.flop / reps)
        finally:
            timers.uninstall()
        med = {k: float(np.median(v)) for k, v in samples.items()}
        out.append((net, nb, med["ember"], med["torch"], med["kern"], med["flop"], rate))
    return out


def print_steps(rows):
    la = load_average()
    rate = rows[0][-1] if rows else float("nan")
    print(f"\nTraining steps: time in ember's GEMM/convolution kernels vs the rest "
          f"(sgemm rate {rate:.0f} GFLOP/s from a 1024^3 product; load average {la:.1f})")
    print("| step | ember ms | PyTorch ms | ember/PyTorch | GEMM+conv ms (share) | "
          "GFLOP | at sgemm rate ms | kernels' GFLOP/s | rest ms (share) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for net, batch, e, t, k, flop, rate in rows:
        ideal = flop / rate / 1e6
        rest = max(e - k, 0.0)
        print(f"| {net} (batch {batch}) | {e:.2f} | {t:.2f} | {e / t:.2f}x | {k:.2f} "
              f"({100 * k / e:.0f}%) | {flop / 1e9:.3f} | {ideal:.2f} | "
              f"{flop / max(k, 1e-9) / 1e6:.0f} | {rest:.2f} ({100 * rest / e:.0f}%) |")


def main(argv):
    what = argv[1:] or ["layers", "steps"]
    if harness.torch is not None:
        harness.torch.set_num_threads(2)
    if "layers" in what:
        print_layers(layer_rows())
    if "steps" in what:
        print_steps(step_rows())


if __name__ == "__main__":
    main(sys.argv)
