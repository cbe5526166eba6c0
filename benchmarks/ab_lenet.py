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
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

import harness  # noqa: E402
import bench_train as bt  # noqa: E402
import ember  # noqa: E402
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
    threads = 2 if wall else 1
    harness.torch.set_num_threads(threads)
    ember.set_num_threads(threads)
    clock = time.perf_counter if wall else time.process_time
    ns = bt._namespaces("lenet5", 64)
    code = compile(bt.STEP, "<step>", "exec")
    envs = {"torch": dict(ns["torch"]), "before": dict(ns["ember"]),
            "after": dict(ns["ember"])}

    def run(kind, number=3):
        if kind != "torch":
            _switch(kind == "after")
        env = envs[kind]
        t0 = clock()
        for _ in range(number):
            exec(code, env)
        return (clock() - t0) / number * 1e3

    kinds = list(envs)
    try:
        for k in kinds:
            run(k)
            run(k)
        s = {k: [] for k in kinds}
        for r in range(reps):
            for k in kinds[r % 3:] + kinds[:r % 3]:
                s[k].append(run(k))
    finally:
        _switch(True)
    m = {k: float(np.median(v)) for k, v in s.items()}
    print(f"{'wall, 2 threads' if wall else 'CPU time, 1 thread'}; load average "
          f"{os.getloadavg()[0]:.1f}; ms per step: "
          + ", ".join(f"{k} {v:.3f}" for k, v in m.items())
          + f"; after/before {m['after'] / m['before']:.3f}, after/torch "
          f"{m['after'] / m['torch']:.3f}, before/torch {m['before'] / m['torch']:.3f}")


if __name__ == "__main__":
    main(sys.argv)
