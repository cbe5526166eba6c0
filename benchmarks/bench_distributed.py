"""ember.distributed benchmarks: all_reduce bandwidth and DDP scaling on 2 ranks.

Run:  python benchmarks/bench_distributed.py [--quick] [--sizes 1,4,16,64,256] [--nets mlp,lenet5]

The script starts the MPI jobs itself (``mpiexec -n 2 python bench_distributed.py
--worker ...``, with ``OMP_NUM_THREADS=1`` so each rank has one core) and prints two
tables:

1. ``all_reduce`` (float32, SUM, in place) from 1 MB to 256 MB: ember's
   ``dist.all_reduce`` on an ember array against mpi4py's own ``Comm.Allreduce`` on a
   NumPy array (``MPI.IN_PLACE``), interleaved in the same job.  Each timed call
   starts after a barrier; a call's time is the slowest rank's; the figure is the
   median over the repetitions.  Bandwidth is the algorithm bandwidth
   (bytes / time).  "ratio" is mpi4py's time / ember's time (>= 1: ember is as fast).
2. DDP weak scaling: one training step of the MLP and LeNet-5 of
   ``bench_train.py`` (same models and optimizers), batch 64 per rank.  Baseline: one
   process without DDP (``mpiexec -n 1``); then 2 ranks with
   ``DistributedDataParallel`` (128 samples per step in all).  Scaling efficiency =
   time per step on 1 process / time per step on 2 ranks (1.0 = perfect: twice the
   samples in the same time).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
MARK = "BENCH_RESULT "


# ------------------------------------------------------------------ workers (under mpiexec)

def worker_allreduce(sizes_mb, repeat):
    import ember
    import ember.distributed as dist
    from mpi4py import MPI
    dist.init_process_group("mpi")
    comm = MPI.COMM_WORLD
    rows = []
    for mb in sizes_mb:
        n = int(mb * (1 << 20)) // 4
        a = ember.ones(n, dtype=ember.float32)
        b = np.ones(n, dtype=np.float32)
        c = np.ones(n, dtype=np.float32)
        reps = max(3, repeat if mb <= 16 else repeat // 2)
        times = {"ember": [], "mpi4py": [], "ember_np": []}
        order = ["ember", "mpi4py", "ember_np"]
        for i in range(reps + 1):                 # the first round is a warm-up
            for lib in (order if i % 2 == 0 else order[::-1]):
                comm.Barrier()
                t0 = time.perf_counter()
                if lib == "ember":
                    dist.all_reduce(a)
                elif lib == "ember_np":
                    dist.all_reduce(c)
                else:
                    comm.Allreduce(MPI.IN_PLACE, b)
                dt = np.array([time.perf_counter() - t0])
                comm.Allreduce(MPI.IN_PLACE, dt, op=MPI.MAX)
                if i:
                    times[lib].append(float(dt[0]))
        rows.append({k: statistics.median(v) for k, v in times.items()} | {"mb": mb})
    if comm.rank == 0:
        print(MARK + json.dumps(rows), flush=True)
    dist.destroy_process_group()


def worker_ddp(nets, steps, repeat):
    sys.path.insert(0, HERE)
    import ember
    import ember.distributed as dist
    import ember.nn.functional as F
    from ember.nn.parallel import DistributedDataParallel as DDP
    from bench_train import NETWORKS
    dist.init_process_group("mpi")
    rank, world = dist.get_rank(), dist.get_world_size()
    rows = []
    for net in nets:
        build, shape, (opt_name, opt_kw), _ = NETWORKS[net]
        ember.random.seed(0)
        model = build(ember.nn)
        if world > 1:
            model = DDP(model)
        opt = getattr(ember.optim, opt_name)(model.parameters(), **opt_kw)
        rng = np.random.default_rng(rank)
        x = ember.asarray(rng.standard_normal((64,) + shape, dtype=np.float32))
        y = ember.asarray(rng.integers(0, 10, 64).astype(np.int64))

        def step():
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()

        def local_step():               # the same step without any communication
            with model.no_sync():
                step()
        for _ in range(3):
            step()
        times = {"step": [], "local": []}
        for i in range(repeat):
            kinds = ("step", "local") if world > 1 else ("step",)
            for kind in (kinds if i % 2 == 0 else kinds[::-1]):
                f = step if kind == "step" else local_step
                dist.barrier()
                t0 = time.perf_counter()
                for _ in range(steps):
                    f()
                dt = np.array([(time.perf_counter() - t0) / steps])
                dist.all_reduce(dt, op="max")
                times[kind].append(float(dt[0]))
        rows.append({"net": net, "world": world, "step": statistics.median(times["step"]),
                     "local": statistics.median(times["local"]) if times["local"] else None})
    if rank == 0:
        print(MARK + json.dumps(rows), flush=True)
    dist.destroy_process_group()


# ------------------------------------------------------------------ driver

def _launch(n, args, timeout=1200):
    from ember.distributed.run import find_mpiexec
    env = dict(os.environ, OMP_NUM_THREADS="1")
    cmd = [find_mpiexec(), "-n", str(n), sys.executable, os.path.abspath(__file__)] + args
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       env=env, timeout=timeout)
    for line in p.stdout.splitlines():
        if line.startswith(MARK):
            return json.loads(line[len(MARK):])
    raise RuntimeError(f"{' '.join(cmd)} failed (exit {p.returncode}):\n{p.stdout}")


def bench_allreduce(sizes, repeat):
    rows = _launch(2, ["--worker", "allreduce", "--sizes", ",".join(map(str, sizes)),
                       "--repeat", str(repeat)])
    out = ["| size | ember all_reduce (ember array) | mpi4py Allreduce (NumPy array) | "
           "ember GB/s | mpi4py GB/s | ratio | ember all_reduce on a NumPy array | ratio |",
           "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        nbytes = r["mb"] * (1 << 20)
        out.append(f"| {r['mb']:g} MB | {r['ember'] * 1e3:.2f} ms | {r['mpi4py'] * 1e3:.2f} ms | "
                   f"{nbytes / r['ember'] / 1e9:.2f} | {nbytes / r['mpi4py'] / 1e9:.2f} | "
                   f"{r['mpi4py'] / r['ember']:.2f}x | {r['ember_np'] * 1e3:.2f} ms | "
                   f"{r['mpi4py'] / r['ember_np']:.2f}x |")
    return rows, "\n".join(out)


def bench_ddp(nets, steps, repeat):
    args = ["--worker", "ddp", "--nets", ",".join(nets), "--steps", str(steps),
            "--repeat", str(repeat)]
    one = {r["net"]: r["step"] for r in _launch(1, args)}
    two = {r["net"]: r for r in _launch(2, args)}
    out = ["| network | 1 process, batch 64 | 2 ranks DDP, batch 2x64 | scaling efficiency "
           "| 2 ranks, no communication (no_sync) | efficiency without communication |",
           "| --- | ---: | ---: | ---: | ---: | ---: |"]
    rows = []
    for net in nets:
        t2, loc = two[net]["step"], two[net]["local"]
        eff = one[net] / t2
        rows.append({"net": net, "one": one[net], "two": t2, "two_local": loc,
                     "efficiency": eff})
        out.append(f"| {net} | {one[net] * 1e3:.2f} ms | {t2 * 1e3:.2f} ms | {eff:.2f} | "
                   f"{loc * 1e3:.2f} ms | {one[net] / loc:.2f} |")
    return rows, "\n".join(out)


def main(argv=None):
    p = argparse.ArgumentParser(description="ember.distributed benchmarks")
    p.add_argument("--worker", choices=["allreduce", "ddp"], default=None)
    p.add_argument("--sizes", default="1,4,16,64,256", help="all_reduce sizes in MB")
    p.add_argument("--nets", default="mlp,lenet5")
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--repeat", type=int, default=None)
    p.add_argument("--quick", action="store_true", help="fewer repetitions, sizes up to 16 MB")
    a = p.parse_args(argv)
    sizes = [float(s) for s in a.sizes.split(",")]
    nets = a.nets.split(",")
    if a.worker == "allreduce":
        return worker_allreduce(sizes, a.repeat or 20)
    if a.worker == "ddp":
        return worker_ddp(nets, a.steps, a.repeat or 9)
    if a.quick:
        sizes = [s for s in sizes if s <= 16]
    repeat = a.repeat or (5 if a.quick else None)
    _, table = bench_allreduce(sizes, repeat or 20)
    print("all_reduce, float32 SUM in place, 2 ranks (median; ratio = mpi4py time / ember time)")
    print(table)
    print()
    _, table = bench_ddp(nets, 2 if a.quick else a.steps, repeat or 9)
    print("DDP weak scaling, 2 ranks, 1 thread per rank (median time per training step)")
    print(table)


if __name__ == "__main__":
    main()
