"""LeNet-5's conv2 input gradient, forward and weight gradient, issue #25 (branch ``lenet4``): the scatter
form / the forward over output channels ("before", ``conv._set_batch_input(False)``,
``conv._set_batch_forward(False)``, ``conv._set_batch_weight(False)``) against 16 samples per vector ("after",
``conv_batch.h``), interleaved in one process (medians); PyTorch's input gradient /
forward of the same layer alongside.  Batch 64, 64x6x14x14 input, 16x6x5x5 weight, one thread, CPU time
(``time.thread_time``), with useful GFLOP/s.

    python benchmarks/ab_lenet_conv.py [repetitions]
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


def main(argv):
    repeat = int(argv[1]) if len(argv) > 1 else 41
    import torch
    torch.set_num_threads(1)
    ember.set_num_threads(1)
    rng = np.random.default_rng(0)
    N, C, O, H, K = 64, 6, 16, 14, 5
    OH = H - K + 1
    wn = rng.standard_normal((O, C, K, K)).astype(np.float32)
    gn = rng.standard_normal((N, O, OH, OH)).astype(np.float32)
    w, g = ember.asarray(wn), ember.asarray(gn)
    wt, gt = torch.tensor(wn), torch.tensor(gn)
    geo = ((1, 1), (0, 0, 0, 0), (1, 1), 1)
    flops = 2.0 * N * O * C * K * K * OH * OH

    xn = rng.standard_normal((N, C, H, H)).astype(np.float32)
    bn = rng.standard_normal(O).astype(np.float32)
    x, b = ember.asarray(xn), ember.asarray(bn)
    xt, bt = torch.tensor(xn), torch.tensor(bn)

    def dx(on):
        ck._set_batch_input(on)
        cv._conv_transpose(g, w, None, (H, H), *geo)

    def fwd(on):
        ck._set_batch_forward(on)
        cv._conv(x, w, b, *geo)

    def dw(on):
        ck._set_batch_weight(on)
        cv._conv_weight(x, g, (O, C, K, K), *geo)

    cases = {"dx": (dx, lambda: torch.nn.grad.conv2d_input((N, C, H, H), wt, gt)),
             "forward + bias": (fwd, lambda: torch.nn.functional.conv2d(xt, wt, bt)),
             "dw": (dw, lambda: torch.nn.grad.conv2d_weight(xt, wt.shape, gt))}
    with torch.no_grad():
        for name, (ours, theirs) in cases.items():
            fns = {"before": lambda: ours(False), "after": lambda: ours(True), "torch": theirs}
            ms = ab_common.round_robin(fns, time.thread_time, 3, repeat)
            print(f"load average {os.getloadavg()[0]:.1f}; conv2 {name}, batch {N}, one "
                  f"thread, CPU time, medians of {repeat}: " + ", ".join(
                      f"{k} {v * 1e3:.0f} us ({flops / v / 1e6:.0f} GFLOP/s)"
                      for k, v in ms.items())
                  + f"; after/before {ms['after'] / ms['before']:.3f}")
    ck._set_batch_input(True)
    ck._set_batch_forward(True)
    ck._set_batch_weight(True)


if __name__ == "__main__":
    main(sys.argv)
