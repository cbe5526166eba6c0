"""In-situ attention time per Transformer training step (bench_train.py's, batch 32) with the
fused float32 CPU attention kernel off vs on (``attention._set_fused``), interleaved in one
process (medians).  The time is that of the attention core's forward (``_np_attention``) and
backward (``_np_attention_grad``) inside real steps, summed per step; the step time and
PyTorch's step are printed alongside.  ``--wall``: two threads and wall time (default: one
thread, CPU time, which a loaded machine disturbs less).

    python benchmarks/ab_attention.py [repetitions] [--wall] [--batch=N]
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

import harness  # noqa: E402
import bench_train as bt  # noqa: E402
import ember  # noqa: E402
from ember._kernels.cpu import attention as fa  # noqa: E402
from ember.nn.functional import attention as attn  # noqa: E402


def main(argv):
    wall = "--wall" in argv
    args = [a for a in argv[1:] if not a.startswith("--")]
    reps = int(args[0]) if args else 15
    batch = next((int(a.split("=")[1]) for a in argv if a.startswith("--batch=")), 32)
    threads = 2 if wall else 1
    harness.torch.set_num_threads(threads)
    ember.set_num_threads(threads)
    clock = time.perf_counter if wall else time.process_time
    ns = bt._namespaces("transformer", batch)
    code = compile(bt.STEP, "<step>", "exec")
    envs = {"torch": dict(ns["torch"]), "off": dict(ns["ember"]), "on": dict(ns["ember"])}
    spent = [0.0]
    fwd, bwd = attn._np_attention, attn._np_attention_grad

    def timed(f):
        def run(*a):
            t0 = clock()
            try:
                return f(*a)
            finally:
                spent[0] += clock() - t0
        return run
    attn._np_attention, attn._np_attention_grad = timed(fwd), timed(bwd)
    step = {k: [] for k in envs}
    inside = {"off": [], "on": []}
    try:
        for r in range(reps + 2):
            names = list(envs)
            for k in names[r % 3:] + names[:r % 3]:
                if k != "torch":
                    fa._set_fused(k == "on")
                spent[0] = 0.0
                t0 = clock()
                exec(code, envs[k])
                dt = clock() - t0
                if r >= 2:
                    step[k].append(dt * 1e3)
                    if k != "torch":
                        inside[k].append(spent[0] * 1e3)
    finally:
        attn._np_attention, attn._np_attention_grad = fwd, bwd
        fa._set_fused(True)
    med = {k: float(np.median(v)) for k, v in step.items()}
    ins = {k: float(np.median(v)) for k, v in inside.items()}
    print(f"transformer batch {batch}, {'wall, 2 threads' if wall else 'CPU time, 1 thread'}; "
          f"load average {os.getloadavg()[0]:.1f}; attention ms per step: off {ins['off']:.3f}, "
          f"on {ins['on']:.3f} (on/off {ins['on'] / ins['off']:.3f}); step ms: torch "
          f"{med['torch']:.3f}, off {med['off']:.3f}, on {med['on']:.3f} (on/torch "
          f"{med['on'] / med['torch']:.3f}, off/torch {med['off'] / med['torch']:.3f})")


if __name__ == "__main__":
    main(sys.argv)
