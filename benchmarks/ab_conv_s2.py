"""ResNet-20's two 3x3 stride-2 convolutions, issue #25 (branch ``convs2``): the float32
direct path's stride-2 row moves by the scalar loops ("before", ``conv._set_s2_mode(-1)``)
and by the AVX-512 row kernels ("after"), interleaved in one process (medians).

``layers``: forward (``_conv``), input gradient (``_conv_transpose``) and weight gradient
(``_conv_weight``) of 16->32 at 32x32 and 32->64 at 16x16 (batch 64, padding 1), one
thread, CPU time (``time.thread_time``), with useful GFLOP/s.
``step``: ``bench_train.py``'s ResNet-20 step (batch 64, SGD momentum), PyTorch alongside;
wall time at two threads, or with ``--cpu`` CPU time at one thread.

    python benchmarks/ab_conv_s2.py layers [repetitions]
    python benchmarks/ab_conv_s2.py step [repetitions] [--cpu]
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

import ab_common  # noqa: E402
import ember  # noqa: E402
from ember.nn.functional import conv as cv  # noqa: E402
from ember._kernels.cpu import conv as ck  # noqa: E402

# (name, C, O, H): the 3x3 stride-2 convolutions (padding 1)
LAYERS = (("s2 16->32 3x3 /2", 16, 32, 32), ("s3 32->64 3x3 /2", 32, 64, 16))


def _mode(on):
    ck._set_s2_mode(0 if on else -1)


def layers(repeat, batch=64):
    ember.set_num_threads(1)
    rng = np.random.default_rng(0)
    geo = ((2, 2), (1, 1, 1, 1), (1, 1), 1)
    print(f"load average {os.getloadavg()[0]:.1f}; batch {batch}, one thread, CPU time, "
          f"medians of {repeat}")
    print("| layer | op | before ms | after ms | after/before | after GFLOP/s |")
    print("|---|---|---|---|---|---|")
    for name, C, O, H in LAYERS:
        x = ember.asarray(rng.standard_normal((batch, C, H, H)).astype(np.float32))
        w = ember.asarray(rng.standard_normal((O, C, 3, 3)).astype(np.float32))
        g = ember.asarray(rng.standard_normal((batch, O, H // 2, H // 2)).astype(np.float32))
        flops = 2.0 * batch * O * C * 9 * (H // 2) ** 2
        ops = {"fwd": lambda: cv._conv(x, w, None, *geo),
               "dx": lambda: cv._conv_transpose(g, w, None, (H, H), *geo),
               "dw": lambda: cv._conv_weight(x, g, (O, C, 3, 3), *geo)}
        for op, f in ops.items():
            ms = ab_common.round_robin({k: (lambda k=k, f=f: (_mode(k == "after"), f()))
                                        for k in ("before", "after")}, time.thread_time, 3,
                                       repeat)
            print(f"| {name} | {op} | {ms['before']:.3f} | {ms['after']:.3f} | "
                  f"{ms['after'] / ms['before']:.2f}x | {flops / ms['after'] / 1e6:.0f} |")
    _mode(True)
    ember.set_num_threads(2)


def step(repeat, cpu):
    ms = ab_common.step_ab("resnet20", 64, _mode, repeat, wall=not cpu)
    print("ResNet-20 step, batch 64, " + ab_common.describe(ms, not cpu, digits=2))


def main(argv):
    args = [a for a in argv[1:] if not a.startswith("--")]
    what = args[0] if args else "layers"
    repeat = int(args[1]) if len(args) > 1 else (15 if what == "layers" else 11)
    if what == "layers":
        layers(repeat)
    else:
        step(repeat, "--cpu" in argv)


if __name__ == "__main__":
    main(sys.argv)
