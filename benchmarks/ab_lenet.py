"""LeNet-5 training step (bench_train.py's) with the LeNet changes of issue #25 off and on,
and PyTorch alongside, interleaved in one process (medians).

The changes are switched by their own knobs: ``container.swap_relu_pool`` (ReLU after
MaxPool2d in a Sequential), ``pool._set_pool_simd`` (AVX-512 2x2 max pooling) and
``conv._set_input_mode`` (scatter form of the stride-1 input gradient).  By default both
libraries run on ONE thread and the time is CPU time (``time.process_time``), which a
loaded machine disturbs far less than wall time; ``--wall`` uses two threads and wall time.
``--chan`` instead compares only ``conv._set_chan_mode`` (the forward vectorised over output
channels, branch ``lenet2``) off vs on, every other change on in both.

    python benchmarks/ab_lenet.py [repetitions] [--wall] [--chan]
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


import ab_common  # noqa: E402
from ember.nn.modules import container  # noqa: E402
from ember._kernels.cpu import pool as pk, conv as ck  # noqa: E402


CHAN_ONLY = False


def _switch(on):
    ck._set_chan_mode(0 if on else -1)
    on = on or CHAN_ONLY
    container.swap_relu_pool = on
    pk._set_pool_simd(on)
    ck._set_input_mode(0 if on else -1)


def main(argv):
    global CHAN_ONLY
    wall = "--wall" in argv
    CHAN_ONLY = "--chan" in argv
    args = [a for a in argv[1:] if not a.startswith("--")]
    reps = int(args[0]) if args else 21
    ms = ab_common.step_ab("lenet5", 64, _switch, reps, wall, number=3)
    print(ab_common.describe(ms, wall))

if __name__ == "__main__":
    main(sys.argv)
