"""Where the Transformer step's non-GEMM time goes (bench_train.py's ``transformer``, ember on
ONE thread, CPU time): every kernel call of the step is wrapped in a timer, by op, forward
and backward; "Python and the rest" is the step's time minus the timed calls.

    python benchmarks/profile_transformer_rest.py [steps] [--before] [--threads=N]

``--before`` switches branch tfm3's fused LayerNorm rows and residual add + LayerNorm off
(``ab_transformer_rest._switch``).  ``--threads=N`` runs ember on N threads and times with
the wall clock instead (the step as run_all.py runs it, at N = 2).

Prints ms per step for each group (medians over the steps are not taken: the sums over
`steps` steps divided by `steps`).  The timers themselves cost about 1 us a call (a few
hundred calls a step).
"""
import os
import sys
import time
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_train as bt  # noqa: E402
import ember  # noqa: E402

CLOCK = time.process_time
TOTALS = defaultdict(float)
COUNTS = defaultdict(int)
PHASE = ["fwd"]


def _timed(label, fn, phase_sensitive=True):
    def wrapper(*args, **kwargs):
        t0 = CLOCK()
        try:
            return fn(*args, **kwargs)
        finally:
            key = f"{label} {PHASE[0]}" if phase_sensitive else label
            TOTALS[key] += CLOCK() - t0
            COUNTS[key] += 1
    return wrapper


def _patch(module, name, label, phase_sensitive=True):
    if hasattr(module, name):
        setattr(module, name, _timed(label, getattr(module, name), phase_sensitive))


def install():
    """Wrap the kernels the step calls (GEMMs first: the groups below exclude them)."""
    import ember.nn.functional  # noqa: F401  (the modules below, not its re-exported functions)
    import ember.nn.functional.fused  # noqa: F401
    m = sys.modules
    attention, linear = m["ember.nn.functional.attention"], m["ember.nn.functional.linear"]
    normalization = m["ember.nn.functional.normalization"]
    activation = m["ember.nn.functional.activation"]
    from ember._api import linalg_ops
    from ember._kernels.cpu import softmax as ksm, norm as knorm, reduce as kred
    from ember._kernels.cpu import embedding as kact
    fused = m["ember.nn.functional.fused"]
    for mod in (attention, linear, linalg_ops, fused):
        _patch(mod, "_gemm", "GEMM")
    _patch(ksm, "softmax_forward", "softmax")
    _patch(ksm, "softmax_backward", "softmax")
    _patch(ksm, "cross_entropy_forward", "cross-entropy")
    _patch(ksm, "cross_entropy_backward", "cross-entropy")
    for name in ("layer_norm_forward", "add_layer_norm_forward"):
        _patch(knorm, name, "LayerNorm kernel")
    for name in ("_layer_norm_backward",):
        _patch(normalization, name, "LayerNorm kernel")
    _patch(linear, "_reduce", "bias-gradient sum")
    _patch(kred, "reduce", "other reductions")
    _patch(activation, "_relu", "ReLU")
    _patch(kact, "relu_backward", "ReLU")
    # inclusive timers (they contain the GEMM/softmax calls above): reported apart
    _patch(linear, "linear", "[incl] F.linear")
    _patch(m["ember.nn.modules.linear"], "linear", "[incl] F.linear")
    _patch(attention, "_self_attention_core", "[incl] attention core")
    _patch(attention, "_self_attention_core_backward", "[incl] attention core")
    _patch(attention, "_core_backward_host", "[incl] attention core")


def main(argv):
    global CLOCK
    args = [a for a in argv[1:] if not a.startswith("--")]
    steps = int(args[0]) if args else 20
    threads = ([int(a.split("=")[1]) for a in argv if a.startswith("--threads=")] or [1])[0]
    ember.set_num_threads(threads)
    if threads > 1:
        CLOCK = time.perf_counter
    if "--before" in argv:
        import ab_transformer_rest
        ab_transformer_rest._switch(False)
    ns = bt._namespaces("transformer", 32)
    env = dict(ns["ember"])
    fwd = compile("opt.zero_grad()\nloss = F.cross_entropy(model(x), y)", "<fwd>", "exec")
    bwd = compile("loss.backward()", "<bwd>", "exec")
    opt = compile("opt.step()", "<opt>", "exec")
    for _ in range(3):
        exec(fwd, env)
        exec(bwd, env)
        exec(opt, env)
    install()
    phase_t = defaultdict(float)
    for _ in range(steps):
        for ph, code in (("fwd", fwd), ("bwd", bwd), ("opt", opt)):
            PHASE[0] = ph
            t0 = CLOCK()
            exec(code, env)
            phase_t[ph] += CLOCK() - t0
    total = sum(phase_t.values())
    clock = "CPU time, one thread" if threads == 1 else f"wall time, {threads} threads"
    print(f"load average {os.getloadavg()[0]:.1f}; {steps} steps; ms per step "
          f"({clock}): total {1e3 * total / steps:.2f}")
    for ph in ("fwd", "bwd", "opt"):
        timed = sum(v for k, v in TOTALS.items() if k.endswith(" " + ph)
                    and not k.startswith("[incl]"))
        print(f"  {ph}: {1e3 * phase_t[ph] / steps:.2f}  (untimed: Python, adds, the engine, "
              f"others: {1e3 * (phase_t[ph] - timed) / steps:.2f})")
    for k in sorted(TOTALS, key=lambda k: -TOTALS[k]):
        print(f"    {k:32s} {1e3 * TOTALS[k] / steps:7.3f} ms  {COUNTS[k] // steps:3d} calls")


if __name__ == "__main__":
    main(sys.argv)
