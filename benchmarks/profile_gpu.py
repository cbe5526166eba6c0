"""Where a GPU training step of ember spends its time, op by op: GPU time from CUDA
events around every op, host time from the clock, for bench_gpu.py's networks.

    python benchmarks/profile_gpu.py resnet50 [--amp] [--batch 64] [--size 224]
    python benchmarks/profile_gpu.py gpt [--amp] [--batch 8] [--seq 1024]
    python benchmarks/profile_gpu.py gpt --amp --lib torch     # PyTorch's, torch.profiler

It times the outermost ember calls that reach the GPU: public ops (the dispatcher),
elementwise ops and casts, and the ``ember.cuda.ops_*`` functions the gradient rules
and optimizers call directly; an op called inside another is part of the outer one.
The table lists, per training step, each op's calls, GPU milliseconds (sum of its
event intervals), host milliseconds, and the share of the step's GPU time.  Events
cost a few microseconds each, so the profiled step is slower than bench_gpu.py's;
use it to rank ops, not to time the step.  Without a CUDA device it says so and
exits 0.
"""
import argparse
import collections
import inspect
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402


class OpTimer:
    """Wraps ember's GPU entry points with CUDA events (outermost calls only)."""

    def __init__(self, cupy):
        self.cupy = cupy
        self.depth = 0
        self.records = []               # (label, start event, end event, host seconds)
        self.restore = []

    def wrap(self, label_of, fn):
        timer = self

        def timed(*args, **kwargs):
            if timer.depth:
                return fn(*args, **kwargs)
            timer.depth += 1
            start = timer.cupy.cuda.Event()
            start.record()
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                t1 = time.perf_counter()
                end = timer.cupy.cuda.Event()
                end.record()
                timer.depth -= 1
                timer.records.append((label_of(args), start, end, t1 - t0))
        return timed

    def patch(self, obj, name, label_of):
        fn = getattr(obj, name)
        self.restore.append((obj, name, fn))
        setattr(obj, name, self.wrap(label_of, fn))

    def install(self):
        import importlib
        import pkgutil
        import ember.cuda
        from ember.autograd import dispatch
        from ember.cuda import _dispatch, _elementwise
        names = _elementwise.OPNAMES
        call = self.wrap(lambda a: a[0].name, _dispatch.call)
        dispatch._set_gpu_dispatch(call)
        self.restore.append((None, "dispatch", _dispatch.call))
        self.patch(_elementwise, "binary", lambda a: names[a[0]])
        self.patch(_elementwise, "unary", lambda a: names[a[0]])
        self.patch(_elementwise, "cast", lambda a: "astype")
        self.patch(_elementwise, "assign", lambda a: "assign (copy)")
        for info in pkgutil.iter_modules(ember.cuda.__path__):
            if not info.name.startswith("ops_"):
                continue
            mod = importlib.import_module(f"ember.cuda.{info.name}")
            for name, fn in list(vars(mod).items()):
                if (inspect.isfunction(fn) and fn.__module__ == mod.__name__
                        and not name.startswith("_")):
                    self.patch(mod, name, lambda a, n=f"{info.name[4:]}.{name}": n)

    def uninstall(self):
        from ember.autograd import dispatch
        for obj, name, fn in reversed(self.restore):
            if obj is None:
                dispatch._set_gpu_dispatch(fn)
            else:
                setattr(obj, name, fn)
        self.restore = []

    def table(self, steps, step_ms):
        """Markdown rows per op: calls, GPU ms and host ms per step, share of GPU time."""
        self.cupy.cuda.runtime.deviceSynchronize()
        agg = collections.defaultdict(lambda: [0, 0.0, 0.0])
        for label, start, end, host in self.records:
            a = agg[label]
            a[0] += 1
            a[1] += self.cupy.cuda.get_elapsed_time(start, end)
            a[2] += host * 1e3
        total_gpu = sum(a[1] for a in agg.values()) or 1.0
        lines = [f"step: {step_ms:.1f} ms (profiled); ops' GPU time {total_gpu / steps:.1f} ms, "
                 f"host time inside ops {sum(a[2] for a in agg.values()) / steps:.1f} ms "
                 f"(per step, over {steps} steps)", "",
                 "| op | calls | GPU ms | host ms | GPU share |", "|---|---|---|---|---|"]
        for label, (n, gpu, host) in sorted(agg.items(), key=lambda kv: -kv[1][1]):
            lines.append(f"| {label} | {n / steps:g} | {gpu / steps:.2f} | {host / steps:.2f} | "
                         f"{100 * gpu / total_gpu:.1f}% |")
        return "\n".join(lines)


def build(args, lib="ember"):
    """One training step of ``args.network`` in ``lib`` (the same weights and batch
    in both libraries: bench_gpu's builders)."""
    import bench_gpu as B
    import torch
    M = B._lib(lib)[0]
    torch.manual_seed(0)
    rng = np.random.default_rng(0)

    def cu(a):
        a = np.ascontiguousarray(a)
        return torch.from_numpy(a).cuda() if lib == "torch" else M.asarray(a).to("cuda")

    def model_of(net):
        tmodel = net(torch.nn)
        return tmodel.cuda() if lib == "torch" else B._to_ember(tmodel, net)
    if args.network == "resnet50":
        model = model_of(B.resnet50)
        x = rng.standard_normal((args.batch, 3, args.size, args.size)).astype(np.float32)
        inputs = (cu(x),)
        target = cu(rng.integers(0, 1000, args.batch).astype(np.int64))
        opt = M.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        loss_fn = B._cross_entropy
    else:
        vocab, d, heads, layers = 50257, 768, 12, 12
        seq = args.seq

        def net(nn):
            return B.gpt(nn, vocab, seq, d, heads, layers)
        model = model_of(net)
        idx = rng.integers(0, vocab, (args.batch, seq + 1)).astype(np.int64)
        mask = np.triu(np.full((seq, seq), -np.inf, dtype=np.float32), 1)
        inputs = (cu(idx[:, :-1]), cu(np.arange(seq)), cu(mask))
        target = cu(idx[:, 1:].reshape(-1))
        opt = M.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01)

        def loss_fn(F, logits, y):
            return F.cross_entropy(logits.reshape(-1, vocab), y)
    return B._step_fn(lib, model, opt, inputs, target, args.amp, loss_fn)


def profile_torch(args):
    """PyTorch's side: torch.profiler over the same step, kernels ranked by GPU time."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    if not torch.cuda.is_available():
        print("profile_gpu: PyTorch sees no CUDA device; nothing to profile.")
        return 0
    step = build(args, "torch")
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(args.steps):
        step()
    torch.cuda.synchronize()
    step_ms = (time.perf_counter() - t0) * 1e3 / args.steps
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(args.steps):
            step()
        torch.cuda.synchronize()
    events = prof.key_averages()
    print(f"PyTorch {args.network}{' autocast float16' if args.amp else ' float32'}, batch "
          f"{args.batch}: step {step_ms:.1f} ms (unprofiled), {args.steps} profiled steps")
    for key in ("self_device_time_total", "self_cuda_time_total"):
        try:
            print(events.table(sort_by=key, row_limit=30))
            break
        except (AttributeError, KeyError, ValueError):
            continue
    return 0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("network", choices=["resnet50", "gpt"])
    p.add_argument("--amp", action="store_true", help="autocast float16 + GradScaler")
    p.add_argument("--batch", type=int, default=None)
    p.add_argument("--size", type=int, default=224, help="ResNet-50 image size")
    p.add_argument("--seq", type=int, default=1024, help="GPT sequence length")
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--lib", choices=["ember", "torch"], default="ember",
                   help="whose step to profile (torch: torch.profiler, kernels by GPU time)")
    args = p.parse_args(argv)
    if args.batch is None:
        args.batch = 64 if args.network == "resnet50" else 8
    if args.lib == "torch":
        return profile_torch(args)
    import ember
    if not ember.cuda.is_available():
        print("profile_gpu: no CUDA device (ember.cuda.is_available() is False); nothing to "
              "profile.")
        return 0
    import cupy
    step = build(args)
    for _ in range(3):
        step()
    ember.cuda.synchronize()
    timer = OpTimer(cupy)
    timer.install()
    try:
        t0 = time.perf_counter()
        for _ in range(args.steps):
            step()
        ember.cuda.synchronize()
        step_ms = (time.perf_counter() - t0) * 1e3 / args.steps
    finally:
        timer.uninstall()
    print(f"{args.network}{' autocast float16' if args.amp else ' float32'}, batch "
          f"{args.batch}")
    print(timer.table(args.steps, step_ms))
    return 0


if __name__ == "__main__":
    sys.exit(main())
