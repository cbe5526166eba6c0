"""Winograd F(2x2, 3x3) (``ember/_kernels/cpu/winograd.h``) off and on, interleaved in one
process (medians), for ResNet-20's 3x3 stride-1 convolutions and its training step.

``layers``: each 3x3 stride-1 layer of ResNet-20 (batch 64), forward (``_conv``), input
gradient (``_conv_transpose``) and weight gradient (``_conv_weight``), Winograd off / on; wall time on ember's threads and,
separately, CPU time on one thread (``time.thread_time``, far less disturbed by other jobs
on a loaded machine).  Useful GFLOP/s count the direct form's 2 * 9 * C * O * pixels.

``step``: ``bench_train.py``'s ResNet-20 step (batch 64, SGD momentum) with Winograd off
("before") and on ("after"), PyTorch alongside; wall time at two threads, or with ``--cpu``
CPU time at one thread.

    python benchmarks/ab_winograd.py layers [repetitions]
    python benchmarks/ab_winograd.py step [repetitions] [--cpu]
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

import ab_common  # noqa: E402
import ember  # noqa: E402
from ember._kernels.cpu import winograd as wg  # noqa: E402

# (name, C, O, H, count in the network): the 3x3 stride-1 pad-1 layers
LAYERS = (
    ("stem 3->16", 3, 16, 32, 1),
    ("s1 16->16", 16, 16, 32, 6),
    ("s2 32->32", 32, 32, 16, 5),
    ("s3 64->64", 64, 64, 8, 5),
)


def _mode(on):
    wg._set_mode(0 if on else -1)


def layers(repeat):
    from ember.nn.functional import conv as cv
    rng = np.random.default_rng(0)
    batch = 64
    print(f"ResNet-20 3x3 stride-1 layers, batch {batch}; load average "
          f"{os.getloadavg()[0]:.1f}; Winograd off -> on, medians of {repeat} interleaved")
    print("| layer (count) | threads, clock | fwd off ms | fwd on ms | on/off | GF/s on | "
          "dx off ms | dx on ms | on/off | GF/s on | dw off ms | dw on ms | on/off | GF/s on |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for nthreads, clock, label in ((2, time.perf_counter, "2, wall"),
                                   (1, time.thread_time, "1, CPU")):
        ember.set_num_threads(nthreads)
        tot = {"off": 0.0, "on": 0.0}
        for name, C, O, H, count in LAYERS:
            x = ember.asarray(rng.standard_normal((batch, C, H, H), dtype=np.float32))
            w = ember.asarray(rng.standard_normal((O, C, 3, 3), dtype=np.float32))
            g = ember.asarray(rng.standard_normal((batch, O, H, H), dtype=np.float32))
            geo = ((1, 1), (1, 1, 1, 1), (1, 1), 1)
            # each run follows a run of another op, so that neither mode inherits the
            # other's warm operands (a plain off, on, off, on order favoured "on" by ~10%
            # on the stem, which runs the same kernels in both modes)
            fns = {
                "fwd off": lambda: (_mode(False), cv._conv(x, w, None, *geo)),
                "dx on": lambda: (_mode(True), cv._conv_transpose(g, w, None, (H, H), *geo)),
                "dw off": lambda: (_mode(False), cv._conv_weight(x, g, (O, C, 3, 3), *geo)),
                "fwd on": lambda: (_mode(True), cv._conv(x, w, None, *geo)),
                "dx off": lambda: (_mode(False), cv._conv_transpose(g, w, None, (H, H), *geo)),
                "dw on": lambda: (_mode(True), cv._conv_weight(x, g, (O, C, 3, 3), *geo)),
            }
            ms = ab_common.round_robin(fns, clock, 2, repeat)
            _mode(True)
            flop = 2.0 * 9 * C * O * batch * H * H
            cells = [f"{name} (x{count})", label]
            for part in ("fwd", "dx", "dw"):
                off, on = ms[part + " off"], ms[part + " on"]
                cells += [f"{off:.2f}", f"{on:.2f}", f"{on / off:.2f}x",
                          f"{flop / on / 1e6:.0f}"]
                if not (part == "dx" and C == 3):       # the stem's dx is never needed
                    tot["off"] += count * off
                    tot["on"] += count * on
            print("| " + " | ".join(cells) + " |")
        print(f"| all (counts applied, stem dx excluded) | {label} | {tot['off']:.1f} | "
              f"{tot['on']:.1f} | {tot['on'] / tot['off']:.2f}x | | | | | | | | | |")
    ember.set_num_threads(2)


def step(repeat, cpu):
    ms = ab_common.step_ab("resnet20", 64, _mode, repeat, wall=not cpu)
    print("ResNet-20 step, batch 64, " + ab_common.describe(ms, not cpu, digits=2))


def main(argv):
    args = [a for a in argv[1:] if not a.startswith("--")]
    what = args[0] if args else "layers"
    repeat = int(args[1]) if len(args) > 1 else (15 if what == "layers" else 11)
    if not wg.available():
        print("Winograd is off here (EMBER_WINOGRAD=0 or no AVX-512)")
        return
    if what == "layers":
        layers(repeat)
    else:
        step(repeat, "--cpu" in argv)


if __name__ == "__main__":
    main(sys.argv)
