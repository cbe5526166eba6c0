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

import ab_common  # noqa: E402
import ember  # noqa: E402
from ember.nn.functional import conv as cv  # noqa: E402
from ember.nn.functional import normalization as nm  # noqa: E402
from ember._kernels.cpu import norm as nk  # noqa: E402

# (name, C, O, H): the 1x1 stride-2 shortcuts
LAYERS = (("s2 short 16->32 1x1 /2", 16, 32, 32), ("s3 short 32->64 1x1 /2", 32, 64, 16))


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
            ms = ab_common.round_robin({k: (lambda k=k, f=f: (_mode(k == "after"), f()))
                               for k in ("before", "after")}, time.thread_time, 5, repeat)
            print(f"| {name} | {op} | {ms['before']:.3f} | {ms['after']:.3f} | "
                  f"{ms['after'] / ms['before']:.2f}x |")
    for shape in ((64, 16, 32, 32), (64, 32, 16, 16), (64, 64, 8, 8)):
        x = ember.asarray(rng.standard_normal(shape).astype(np.float32))
        C = shape[1]
        w, b, st = ember.ones(C), ember.zeros(C), nm._new_stats(3, C, x)
        f = lambda: nk.batch_norm_train_forward(x, w, b, 1e-5, st)  # noqa: E731
        ms = ab_common.round_robin({k: (lambda k=k, f=f: (_mode(k == "after"), f()))
                           for k in ("before", "after")}, time.thread_time, 5, repeat)
        print(f"| batch norm {shape} | train fwd | {ms['before']:.3f} | {ms['after']:.3f} | "
              f"{ms['after'] / ms['before']:.2f}x |")
    _mode(True)
    ember.set_num_threads(2)


def step(repeat, cpu):
    ms = ab_common.step_ab("resnet20", 64, _mode, repeat, wall=not cpu)
    print("ResNet-20 step, batch 64, " + ab_common.describe(ms, not cpu, digits=2))


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
