"""ResNet-20 outside its 3x3 stride-1 convolutions, this branch's changes off ("before") and
on ("after"), interleaved in one process (medians):

* the 1x1 stride-2 shortcut convolutions as subsample + GEMM
  (``ember.nn.functional.conv.POINTWISE_STRIDED``);
* batch norm's float32 statistics on the AVX-512 loop (``norm._set_bn_avx512``).

``layers``: the two shortcut layers (batch 64), forward (``_conv``), input gradient
(``_conv_transpose``) and weight gradient (``_conv_weight``), and batch norm's training
forward at the three stage shapes; one-thread CPU time (``time.thread_time``).
``step``: ``bench_train.py``'s ResNet-20 step (batch 64, SGD momentum), PyTorch alongside;
wall time at two threads, or with ``--cpu`` CPU time at one thread.

    python benchmarks/ab_resnet_rest.py layers [repetitions]
    python benchmarks/ab_resnet_rest.py step [repetitions] [--cpu]
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

import harness  # noqa: E402
import ember  # noqa: E402
from ember.nn.functional import conv as cv  # noqa: E402
from ember.nn.functional import normalization as nm  # noqa: E402
from ember._kernels.cpu import norm as nk  # noqa: E402

# (name, C, O, H): the 1x1 stride-2 shortcuts
LAYERS = (("s2 short 16->32 1x1 /2", 16, 32, 32), ("s3 short 32->64 1x1 /2", 32, 64, 16))


def _interleaved(fns, clock, number, repeat):
    """{name: median ms} of the callables, timed round-robin."""
    names = list(fns)
    for k in names:
        for _ in range(2):
            fns[k]()
    samples = {k: [] for k in names}
    for r in range(repeat):
        for k in names[r % len(names):] + names[:r % len(names)]:
            t0 = clock()
            for _ in range(number):
                fns[k]()
            samples[k].append((clock() - t0) / number * 1e3)
    return {k: float(np.median(v)) for k, v in samples.items()}


def _mode(on):
    cv.POINTWISE_STRIDED = on
    nk._set_bn_avx512(on)


def layers(repeat):
    ember.set_num_threads(1)
    rng = np.random.default_rng(0)
    geo = ((2, 2), (0, 0, 0, 0), (1, 1), 1)
    print(f"load average {os.getloadavg()[0]:.1f}; one thread, CPU time, medians of {repeat}")
    print("| layer | op | before ms | after ms | after/before |")
    print("|---|---|---|---|---|")
    for name, C, O, H in LAYERS:
        x = ember.asarray(rng.standard_normal((64, C, H, H)).astype(np.float32))
        w = ember.asarray(rng.standard_normal((O, C, 1, 1)).astype(np.float32))
        g = ember.asarray(rng.standard_normal((64, O, H // 2, H // 2)).astype(np.float32))
        ops = {"fwd": lambda: cv._conv(x, w, None, *geo),
               "dx": lambda: cv._conv_transpose(g, w, None, (H, H), *geo),
               "dw": lambda: cv._conv_weight(x, g, (O, C, 1, 1), *geo)}
        for op, f in ops.items():
            ms = _interleaved({k: (lambda k=k, f=f: (_mode(k == "after"), f()))
                               for k in ("before", "after")}, time.thread_time, 5, repeat)
            print(f"| {name} | {op} | {ms['before']:.3f} | {ms['after']:.3f} | "
                  f"{ms['after'] / ms['before']:.2f}x |")
    for shape in ((64, 16, 32, 32), (64, 32, 16, 16), (64, 64, 8, 8)):
        x = ember.asarray(rng.standard_normal(shape).astype(np.float32))
        C = shape[1]
        w, b, st = ember.ones(C), ember.zeros(C), nm._new_stats(3, C, x)
        f = lambda: nk.batch_norm_train_forward(x, w, b, 1e-5, st)  # noqa: E731
        ms = _interleaved({k: (lambda k=k, f=f: (_mode(k == "after"), f()))
                           for k in ("before", "after")}, time.thread_time, 5, repeat)
        print(f"| batch norm {shape} | train fwd | {ms['before']:.3f} | {ms['after']:.3f} | "
              f"{ms['after'] / ms['before']:.2f}x |")
    _mode(True)
    ember.set_num_threads(2)


def step(repeat, cpu):
    import bench_train as bt
    threads = 1 if cpu else 2
    harness.torch.set_num_threads(threads)
    ember.set_num_threads(threads)
    clock = time.process_time if cpu else time.perf_counter
    ns = bt._namespaces("resnet20", 64)
    code = compile(bt.STEP, "<step>", "exec")
    envs = {"torch": dict(ns["torch"]), "before": dict(ns["ember"]),
            "after": dict(ns["ember"])}

    def run(kind):
        if kind != "torch":
            _mode(kind == "after")
        exec(code, envs[kind])

    try:
        ms = _interleaved({k: (lambda k=k: run(k)) for k in envs}, clock, 1, repeat)
    finally:
        _mode(True)
    print(f"ResNet-20 step, batch 64, {'CPU time, 1 thread' if cpu else 'wall, 2 threads'}; "
          f"load average {os.getloadavg()[0]:.1f}; medians of {repeat}, ms: "
          + ", ".join(f"{k} {v:.2f}" for k, v in ms.items())
          + f"; after/before {ms['after'] / ms['before']:.3f}, after/torch "
          f"{ms['after'] / ms['torch']:.3f}, before/torch {ms['before'] / ms['torch']:.3f}")


def main(argv):
    args = [a for a in argv[1:] if not a.startswith("--")]
    what = args[0] if args else "layers"
    repeat = int(args[1]) if len(args) > 1 else (25 if what == "layers" else 11)
    if what == "layers":
        layers(repeat)
    else:
        step(repeat, "--cpu" in argv)


if __name__ == "__main__":
    main(sys.argv)
