"""Transformer training step (bench_train.py's) of ember against PyTorch, interleaved in one
process (medians).  By default both run on ONE thread and the time is CPU time
(``time.process_time``), which a loaded machine disturbs far less than wall time;
``--wall`` uses two threads and wall time.  ``--profile`` prints ember's cProfile instead.
``--macs=N`` adds a third contender: ember with the small float32 GEMM kernel's size limit
(``gemm._set_f32_kernel``, multiply-adds per block) at N instead of its default.

    python benchmarks/ab_transformer.py [repetitions] [--wall] [--profile] [--macs=N]
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


import ab_common  # noqa: E402
import harness  # noqa: E402
import bench_train as bt  # noqa: E402
import ember  # noqa: E402


def main(argv):
    wall = "--wall" in argv
    args = [a for a in argv[1:] if not a.startswith("--")]
    reps = int(args[0]) if args else 15
    threads = 2 if wall else 1
    harness.torch.set_num_threads(threads)
    ember.set_num_threads(threads)
    clock = time.perf_counter if wall else time.process_time
    ns = bt._namespaces("transformer", 32)
    code = compile(bt.STEP, "<step>", "exec")
    envs = {"torch": dict(ns["torch"]), "ember": dict(ns["ember"])}
    from ember._kernels.cpu import gemm
    default_macs = gemm._f32_limit()[0]
    macs = [int(a.split("=")[1]) for a in argv if a.startswith("--macs=")]
    if macs:
        envs["macs"] = dict(ns["ember"])
    if "--profile" in argv:
        import cProfile
        import pstats
        for _ in range(3):
            exec(code, envs["ember"])
        pr = cProfile.Profile(clock)
        pr.enable()
        for _ in range(10):
            exec(code, envs["ember"])
        pr.disable()
        pstats.Stats(pr).sort_stats("tottime").print_stats(40)
        return

    def run(kind):
        if kind != "torch":
            gemm._set_f32_kernel(gemm.f32_kernel(), macs[0] if kind == "macs" else default_macs)
        exec(code, envs[kind])

    s = ab_common.round_robin({k: (lambda k=k: run(k)) for k in envs}, clock, 3, reps,
                              warmup=1)
    gemm._set_f32_kernel(gemm.f32_kernel(), default_macs)
    m = s
    print(f"{'wall, 2 threads' if wall else 'CPU time, 1 thread'}; load average "
          f"{os.getloadavg()[0]:.1f}; ms per step: "
          + ", ".join(f"{k} {v:.3f}" for k, v in m.items())
          + f"; ember/torch {m['ember'] / m['torch']:.3f}"
          + (f"; macs={macs[0]}/default {m['macs'] / m['ember']:.3f}" if macs else ""))


if __name__ == "__main__":
    main(sys.argv)
