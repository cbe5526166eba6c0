"""One training step of bench_train.py's network with an ember switch off vs on, PyTorch
alongside, interleaved in one process (medians), as benchmarks/ab_lenet.py does.

Switches: ``fastbwd`` (linear's and ReLU's kernel-direct backward, issue #25), ``fuse``
(``container.fuse_enabled``), ``swap`` (``container.swap_relu_pool``), ``none``.  By
default both libraries run on ONE thread and the time is CPU time (a loaded machine
disturbs it far less than wall time); ``--wall`` uses two threads and wall time.

    python benchmarks/ab_step.py mlp|lenet5 [repetitions] [--wall] SWITCH
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

import harness  # noqa: E402
import bench_train as bt  # noqa: E402
import ember  # noqa: E402
from ember._core import array as _array  # noqa: E402
from ember.nn.modules import container  # noqa: E402
import ember.nn.functional  # noqa: E402,F401  (the modules the switches reach)

_FAST_BWD_MODULES = ("ember.nn.functional.linear", "ember.nn.functional.activation")


def _switch(knob, on):
    if knob == "fuse":
        container.fuse_enabled = on
    elif knob == "swap":
        container.swap_relu_pool = on
    elif knob == "fastbwd":     # the rules take their fast path only when grad mode is off
        for name in _FAST_BWD_MODULES:
            sys.modules[name]._grad_on = _array._is_grad_enabled if on else (lambda: True)
    elif knob != "none":
        raise SystemExit(f"ab_step: unknown switch {knob!r}")


def main(argv):
    wall = "--wall" in argv
    args = [a for a in argv[1:] if not a.startswith("--")]
    net, knob = args[0], args[-1]
    reps = int(args[1]) if len(args) > 2 else 21
    threads = 2 if wall else 1
    harness.torch.set_num_threads(threads)
    ember.set_num_threads(threads)
    clock = time.perf_counter if wall else time.process_time

    ns = bt._namespaces(net, 64)
    code = compile(bt.STEP, "<step>", "exec")
    envs = {"torch": dict(ns["torch"]), "off": dict(ns["ember"]), "on": dict(ns["ember"])}
    number = 20 if net == "mlp" else 3

    def run(kind):
        if kind != "torch":
            _switch(knob, kind == "on")
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
        _switch(knob, True if knob in ("fastbwd", "swap") else False)
    m = {k: float(np.median(v)) for k, v in s.items()}
    print(f"{net} {knob}: {'wall, 2 threads' if wall else 'CPU time, 1 thread'}; load average "
          f"{os.getloadavg()[0]:.1f}; ms per step: "
          + ", ".join(f"{k} {v:.4f}" for k, v in m.items())
          + f"; on/off {m['on'] / m['off']:.3f}, off/torch {m['off'] / m['torch']:.3f}, "
          f"on/torch {m['on'] / m['torch']:.3f}")


if __name__ == "__main__":
    main(sys.argv)
