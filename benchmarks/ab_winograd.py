"""Winograd (``ember/_kernels/cpu/winograd.h``) for ResNet-20's 3x3 stride-1 convolutions and
its training step: the direct kernels, F(2x2, 3x3) and F(4x4, 3x3), interleaved in one
process (medians).

``layers``: each 3x3 stride-1 layer of ResNet-20 (batch 64): forward (``_conv``) and input
gradient (``_conv_transpose``) direct / F(2x2, 3x3) / F(4x4, 3x3), weight gradient
(``_conv_weight``) direct / F(3x3, 2x2) / F(3x3, 4x4) (each forced); CPU time on one thread
(``time.thread_time``, far less disturbed by other jobs on a loaded machine than the wall
clock).  Useful GFLOP/s count the direct form's 2 * 9 * C * O * pixels.

``step``: ``bench_train.py``'s ResNet-20 step (batch 64, SGD momentum) with the cost rule
allowed 2x2 tiles only ("before", as before F(4x4, 3x3) existed) and 4x4 tiles too
("after"), PyTorch alongside; wall time at two threads, or with ``--cpu`` CPU time at one
thread.

``accuracy``: max |error| / max |value| against a float64 oracle (PyTorch float64) of the
forward, the input gradient and the weight gradient at ResNet-20's shapes (batch 16), over
4x4 tiles, over 2x2 tiles, the direct kernels and PyTorch float32.

``rule``: F(4x4, 3x3) / F(2x2, 3x3) time of the forward and the input gradient over a grid
of shapes (one thread, CPU time; what ``winograd.tile`` is set from).

    python benchmarks/ab_winograd.py layers [repetitions]
    python benchmarks/ab_winograd.py step [repetitions] [--cpu]
    python benchmarks/ab_winograd.py accuracy
    python benchmarks/ab_winograd.py rule [repetitions]
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


def _force(mode):
    """-1 direct, 2 the 2x2 tiles, 4 the 4x4 tiles for every eligible shape; 0 the cost
    rule."""
    wg._set_mode(mode)


def _f4(on):
    """The cost rule with 4x4 tiles allowed (True) or 2x2 tiles only (False)."""
    wg._set_mode(0)
    wg._set_f4(on)


def layers(repeat):
    from ember.nn.functional import conv as cv
    rng = np.random.default_rng(0)
    batch = 64
    ember.set_num_threads(1)
    print(f"ResNet-20 3x3 stride-1 layers, batch {batch}; load average "
          f"{os.getloadavg()[0]:.1f}; one thread, CPU time, medians of {repeat} interleaved")
    print("| layer (count) | fwd direct / F2 / F4 ms | F4/F2 | GF/s F4 | dx direct / F2 / F4 ms "
          "| F4/F2 | GF/s F4 | dw direct / F2 / F4 ms | F4/F2 | GF/s F4 |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    tot = {"fwd": [0.0] * 3, "dx": [0.0] * 3, "dw": [0.0] * 3}
    for name, C, O, H, count in LAYERS:
        x = ember.asarray(rng.standard_normal((batch, C, H, H), dtype=np.float32))
        w = ember.asarray(rng.standard_normal((O, C, 3, 3), dtype=np.float32))
        g = ember.asarray(rng.standard_normal((batch, O, H, H), dtype=np.float32))
        geo = ((1, 1), (1, 1, 1, 1), (1, 1), 1)
        fns = {}
        for mode in (-1, 2, 4):
            fns[f"fwd {mode}"] = lambda m=mode: (_force(m), cv._conv(x, w, None, *geo))
            fns[f"dx {mode}"] = lambda m=mode: (
                _force(m), cv._conv_transpose(g, w, None, (H, H), *geo))
            fns[f"dw {mode}"] = lambda m=mode: (
                _force(m), cv._conv_weight(x, g, (O, C, 3, 3), *geo))
        ms = ab_common.round_robin(fns, time.thread_time, 1, repeat)
        _force(0)
        flop = 2.0 * 9 * C * O * batch * H * H
        cells = [f"{name} (x{count})"]
        for part in ("fwd", "dx", "dw"):
            t = [ms[f"{part} {m}"] for m in (-1, 2, 4)]
            cells += [" / ".join(f"{v:.2f}" for v in t), f"{t[2] / t[1]:.2f}x",
                      f"{flop / t[2] / 1e6:.0f}"]
            if not (part == "dx" and C == 3):       # the stem's dx is never needed
                for i in range(3):
                    tot[part][i] += count * t[i]
        print("| " + " | ".join(cells) + " |")
    print("| all (counts applied, stem dx excluded) | "
          + " / ".join(f"{v:.1f}" for v in tot["fwd"]) + " | | | "
          + " / ".join(f"{v:.1f}" for v in tot["dx"]) + " | | | "
          + " / ".join(f"{v:.1f}" for v in tot["dw"]) + " | | |")
    ember.set_num_threads(2)


def _rel_err(got, ref):
    return float(np.abs(np.asarray(got, np.float64) - ref).max() / np.abs(ref).max())


def accuracy():
    import torch
    from ember.nn.functional import conv as cv
    rng = np.random.default_rng(1)
    batch = 16
    print(f"max error / max |value| against float64, batch {batch}")
    print("| layer | forward: F4 / F2 / direct / PyTorch | input gradient: F4 / F2 / direct "
          "/ PyTorch | weight gradient: F4 / F2 / direct / PyTorch |")
    print("|---|---|---|---|")
    for name, C, O, H, _ in LAYERS[1:]:
        x = rng.standard_normal((batch, C, H, H)).astype(np.float32)
        w = (rng.standard_normal((O, C, 3, 3)) / np.sqrt(9 * C)).astype(np.float32)
        g = rng.standard_normal((batch, O, H, H)).astype(np.float32)
        geo = ((1, 1), (1, 1, 1, 1), (1, 1), 1)
        t64 = {"fwd": torch.nn.functional.conv2d(torch.tensor(x, dtype=torch.float64),
                                                 torch.tensor(w, dtype=torch.float64),
                                                 padding=1).numpy(),
               "dx": torch.nn.functional.conv_transpose2d(
                   torch.tensor(g, dtype=torch.float64), torch.tensor(w, dtype=torch.float64),
                   padding=1).numpy(),
               "dw": torch.nn.grad.conv2d_weight(torch.tensor(x, dtype=torch.float64),
                                                 (O, C, 3, 3),
                                                 torch.tensor(g, dtype=torch.float64),
                                                 padding=1).numpy()}
        t32 = {"fwd": torch.nn.functional.conv2d(torch.tensor(x), torch.tensor(w),
                                                 padding=1).numpy(),
               "dx": torch.nn.functional.conv_transpose2d(torch.tensor(g), torch.tensor(w),
                                                          padding=1).numpy(),
               "dw": torch.nn.grad.conv2d_weight(torch.tensor(x), (O, C, 3, 3),
                                                 torch.tensor(g), padding=1).numpy()}
        cells = [name]
        for part in ("fwd", "dx", "dw"):
            errs = []
            for mode in (4, 2, -1):
                _force(mode)
                if part == "fwd":
                    got = cv._conv(ember.asarray(x), ember.asarray(w), None, *geo)
                elif part == "dw":
                    got = cv._conv_weight(ember.asarray(x), ember.asarray(g), (O, C, 3, 3),
                                          *geo)
                else:
                    got = cv._conv_transpose(ember.asarray(g), ember.asarray(w), None, (H, H),
                                             *geo)
                errs.append(_rel_err(got, t64[part]))
            errs.append(_rel_err(t32[part], t64[part]))
            cells.append(" / ".join(f"{e:.1e}" for e in errs))
        _force(0)
        print("| " + " | ".join(cells) + " |")


def rule(repeat):
    from ember.nn.functional import conv as cv
    rng = np.random.default_rng(0)
    ember.set_num_threads(1)
    print(f"F(4x4) / F(2x2) time, one thread, CPU time, medians of {repeat}; load average "
          f"{os.getloadavg()[0]:.1f}")
    print("| N, C -> O, HxW | forward F2 ms | F4/F2 | input gradient F2 ms | F4/F2 |")
    print("|---|---|---|---|---|")
    for N, C, O, H in ((64, 8, 8, 32), (64, 16, 16, 32), (64, 8, 16, 32), (64, 16, 8, 32),
                       (64, 32, 32, 16), (64, 64, 64, 8), (64, 16, 16, 8), (64, 64, 64, 4),
                       (64, 128, 128, 4), (16, 128, 128, 8), (8, 256, 256, 8),
                       (64, 32, 32, 6), (16, 64, 64, 12)):
        x = ember.asarray(rng.standard_normal((N, C, H, H), dtype=np.float32))
        w = ember.asarray(rng.standard_normal((O, C, 3, 3), dtype=np.float32))
        g = ember.asarray(rng.standard_normal((N, O, H, H), dtype=np.float32))
        geo = ((1, 1), (1, 1, 1, 1), (1, 1), 1)
        fns = {}
        for mode in (2, 4):
            fns[f"fwd {mode}"] = lambda m=mode: (_force(m), cv._conv(x, w, None, *geo))
            fns[f"dx {mode}"] = lambda m=mode: (
                _force(m), cv._conv_transpose(g, w, None, (H, H), *geo))
        ms = ab_common.round_robin(fns, time.thread_time, 1, repeat)
        _force(0)
        print(f"| {N}, {C} -> {O}, {H}x{H} | {ms['fwd 2']:.2f} | "
              f"{ms['fwd 4'] / ms['fwd 2']:.2f}x | {ms['dx 2']:.2f} | "
              f"{ms['dx 4'] / ms['dx 2']:.2f}x |")
    ember.set_num_threads(2)


def step(repeat, cpu):
    ms = ab_common.step_ab("resnet20", 64, _f4, repeat, wall=not cpu)
    print("ResNet-20 step, batch 64, before = 2x2 tiles only, after = 4x4 tiles where the "
          "cost rule picks them; " + ab_common.describe(ms, not cpu, digits=2))


def main(argv):
    args = [a for a in argv[1:] if not a.startswith("--")]
    what = args[0] if args else "layers"
    repeat = int(args[1]) if len(args) > 1 else (15 if what in ("layers", "rule") else 11)
    if not wg.available():
        print("Winograd is off here (EMBER_WINOGRAD=0 or no AVX-512)")
        return
    if what == "layers":
        layers(repeat)
    elif what == "accuracy":
        accuracy()
    elif what == "rule":
        rule(repeat)
    else:
        step(repeat, "--cpu" in argv)


if __name__ == "__main__":
    main(sys.argv)
