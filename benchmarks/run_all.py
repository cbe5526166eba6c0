"""Run every ember benchmark, print the tables and publish them in README.md.

    python benchmarks/run_all.py            # full run (~1-3 minutes), rewrites README.md
    python benchmarks/run_all.py --no-write # print only
    python benchmarks/run_all.py --quick    # tiny sizes, a few seconds, print only

The tables replace whatever stands between ``<!-- results:start -->`` and
``<!-- results:end -->`` in benchmarks/README.md.
"""
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import harness  # noqa: E402
import bench_core  # noqa: E402
import bench_autograd  # noqa: E402
import bench_allocator  # noqa: E402
import bench_train  # noqa: E402
import bench_data  # noqa: E402
import bench_distributed  # noqa: E402
import bench_math  # noqa: E402
import bench_bfloat16  # noqa: E402

START, END = "<!-- results:start -->", "<!-- results:end -->"
COMMAND = "python benchmarks/run_all.py"


def summary(rows):
    """One line per target: met, not met, or not measurable."""
    met = [r["case"] for r in rows if r["target"] != "-" and r["met"] is True]
    missed = [r["case"] for r in rows if r["target"] != "-" and r["met"] is False]
    na = [r["case"] for r in rows if r["target"] != "-" and r["met"] is None]
    lines = [f"- targets met ({len(met)}): " + ("; ".join(met) or "none"),
             f"- targets NOT met ({len(missed)}): " + ("; ".join(missed) or "none")]
    if na:
        lines.append(f"- not measurable ({len(na)}: ember failed or a reference is missing): "
                     + "; ".join(na))
    return "\n".join(lines)


def render(env, core_rows, alloc_rows, seconds, autograd_rows=(), train_rows=(), rss=None,
           data_rows=(), dist_tables=None, math_rows=()):
    autograd = [] if not autograd_rows else [
        "### Autograd (`benchmarks/bench_autograd.py`; medians; times per call; NumPy has no autograd)",
        "",
        harness.markdown_table(autograd_rows),
        "",
        summary(autograd_rows),
        "",
    ]
    train = [] if not train_rows else [
        "### Training steps (`benchmarks/bench_train.py`; medians; time per step; NumPy has no nn)",
        "",
        harness.markdown_table(train_rows),
        "",
        summary(train_rows),
        "",
    ]
    if rss:
        train += ["Peak memory (growth of the peak RSS, VmHWM, over the RSS right after the imports, "
                  "fresh process per library and network, 5 steps):", "",
                  bench_train.markdown_rss(rss), ""]
    data = [] if not data_rows else [
        "### Data loading (`benchmarks/bench_data.py`; medians; time per batch over a "
        "steady-state epoch; NumPy has no DataLoader)",
        "",
        harness.markdown_table(data_rows),
        "",
    ]
    math = [] if not math_rows else [
        "### float32 math and a bfloat16 step (`benchmarks/bench_math.py`, "
        "`bench_bfloat16.mlp_step`; medians; 2 threads for ember and PyTorch; "
        "\"best\" = the faster of NumPy/SciPy and PyTorch)",
        "",
        harness.markdown_table(math_rows),
        "",
        summary(math_rows),
        "",
    ]
    dist = [] if not dist_tables else [
        "### Distributed (`benchmarks/bench_distributed.py`; MPICH through mpi4py; medians)",
        "",
        *dist_tables,
        "",
    ]
    return "\n".join([
        f"Command: `{COMMAND}` (from the repository root; took {seconds:.0f} s).",
        "",
        harness.environment_markdown(env),
        "",
        "### Core cases (medians; times per call)",
        "",
        harness.markdown_table(core_rows),
        "",
        summary(core_rows),
        "",
        *autograd,
        *train,
        *math,
        *data,
        *dist,
        "### Caching allocator (`benchmarks/bench_allocator.py`; medians; time per loop iteration)",
        "",
        bench_allocator.markdown_table(alloc_rows),
    ])


def write_readme(text, path=os.path.join(HERE, "README.md")):
    with open(path) as f:
        readme = f.read()
    i, j = readme.find(START), readme.find(END)
    if i < 0 or j < i:
        raise SystemExit(f"run_all: markers {START} / {END} not found in {path}")
    readme = readme[:i + len(START)] + "\n" + text + "\n" + readme[j:]
    with open(path, "w") as f:
        f.write(readme)


def distributed_tables(quick=False):
    """The all_reduce bandwidth and DDP scaling tables (each a markdown string), or a
    line saying why they could not be measured (no mpi4py/MPI here)."""
    try:
        sizes = [1, 4, 16] if quick else [1, 4, 16, 64, 256]
        _, t1 = bench_distributed.bench_allreduce(sizes, 3 if quick else 20)
        _, t2 = bench_distributed.bench_ddp(["mlp", "lenet5"], 2 if quick else 5,
                                            2 if quick else 9)
    except Exception as exc:
        harness.log(f"run_all: distributed benchmarks failed: {exc!r}")
        return [f"not measured: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}"]
    return ["all_reduce, float32 SUM in place, 2 ranks (ratio = mpi4py time / ember time; "
            "target >= 0.95x):", "", t1, "",
            "DDP weak scaling, 2 ranks, 1 thread per rank (time per training step):", "", t2]


def main(argv):
    quick = "--quick" in argv
    write = not quick and "--no-write" not in argv
    t0 = time.perf_counter()
    env = harness.environment()
    core_rows = bench_core.run(quick=quick)
    autograd_rows = bench_autograd.run(quick=quick)
    train_rows = bench_train.run(quick=quick)
    rss = bench_train.run_rss(quick=quick)
    math_rows = bench_math.run(quick=quick) + harness.run_suite(
        [lambda: bench_bfloat16.mlp_step(128, 5, 15)],
        [lambda: bench_bfloat16.mlp_step(8, 1, 3)], quick)
    data_rows = bench_data.run(quick=quick)
    dist_tables = distributed_tables(quick)
    alloc_rows = bench_allocator.run(quick=quick)
    text = render(env, core_rows, alloc_rows, time.perf_counter() - t0, autograd_rows=autograd_rows,
                  train_rows=train_rows, rss=rss, data_rows=data_rows,
                  dist_tables=dist_tables, math_rows=math_rows)
    print(text)
    if write:
        write_readme(text)
        harness.log(f"run_all: tables written to {os.path.join(HERE, 'README.md')}")
    return core_rows, autograd_rows, alloc_rows


if __name__ == "__main__":
    main(sys.argv[1:])
