"""One training step of bench_train.py with nn.Sequential's layer + ReLU fusion on and off
(Linear + ReLU and Conv2d + ReLU: ``container.fuse_enabled`` and ``fuse_conv_enabled``)
against PyTorch, interleaved in one process (medians).

    python benchmarks/ab_fusion.py mlp 31 20     # network, repetitions, steps per batch
"""
import sys, time, os
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np
import bench_train as bt
from ember.nn.modules import container
net = sys.argv[1]; reps = int(sys.argv[2]); number = int(sys.argv[3])
batch = 32 if net == "transformer" else 64
ns = bt._namespaces(net, batch)
code = compile(bt.STEP, "s", "exec")
envs = {"ember": dict(ns["ember"]), "torch": dict(ns["torch"])}
def run(kind):
    if kind == "torch":
        env = envs["torch"]
    else:
        container.fuse_enabled = container.fuse_conv_enabled = kind == "fused"
        env = envs["ember"]
    t0 = time.perf_counter_ns()
    for _ in range(number):
        exec(code, env)
    return (time.perf_counter_ns() - t0) / number / 1e6
kinds = ["fused", "unfused", "torch"]
for k in kinds:
    run(k); run(k)
s = {k: [] for k in kinds}
for r in range(reps):
    for k in kinds[r % 3:] + kinds[:r % 3]:
        s[k].append(run(k))
med = {k: float(np.median(v)) for k, v in s.items()}
container.fuse_enabled, container.fuse_conv_enabled = True, False      # the defaults
print(net, f"load {os.getloadavg()[0]:.1f}", {k: round(v, 3) for k, v in med.items()},
      f"fused/unfused {med['fused']/med['unfused']:.3f} fused/torch {med['fused']/med['torch']:.3f} unfused/torch {med['unfused']/med['torch']:.3f}")
