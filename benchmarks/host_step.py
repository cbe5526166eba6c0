"""The host side of a GPU training step, measured without a GPU.

    python benchmarks/host_step.py              # ResNet-50 and GPT-2-small, float32 and autocast
    python benchmarks/host_step.py --steps 20   # more timed steps (default 7)
    python benchmarks/host_step.py --quick      # a smoke run: GPT with 2 layers, 2 steps

ember's GPU backend runs on the CPU emulation (tests/cuda_emu) as a *null
launcher*: every ember kernel, cuBLAS GEMM and CuPy ElementwiseKernel is counted
and skipped (tests/cuda_emu/counting.py), so what is left of a step is the host
work ember does for it: Python, dispatch, autograd, allocation, CuPy's host side
on tiny arrays.  For each training row of ``bench_gpu.py`` (same networks, same
optimizers, the step of ``bench_gpu._step_fn``), at sizes small enough that host
work dominates (the number of ops does not depend on batch, image size, width or
vocabulary):

- ember: launches per step (ember kernels + GEMMs + CuPy kernel calls + memsets and
  device-to-device copies),
  host-to-device uploads, device-to-host read-backs (with their call sites), and
  the host time per step (median CPU time of the step's thread, and the wall time);
- PyTorch CPU, the same step of the same network (its profiler): the aten ops that
  do work (leaf ops that are not views or allocations: each is about one kernel on a
  GPU), all aten ops dispatched, the value reads (``aten::_local_scalar_dense``), and
  its eager time per step on one thread, a proxy for PyTorch's host overhead (it also
  does the tiny arithmetic).  Its optimizers are the fused ones (``fused=True``, else ``foreach``).

It is an emulation: real CuPy calls cost more host time than the NumPy calls standing
in for them, and ember's cuLaunchKernel fast path is off, so every elementwise op takes
the general path; the launch counts are exact.  Nothing here is timed on a GPU.
"""
import collections
import os
import statistics
import sys
import time

os.environ["EMBER_CUDA_EMULATION"] = "1"
_HERE = os.path.dirname(os.path.abspath(__file__))
_TESTS = os.path.join(os.path.dirname(_HERE), "tests")
sys.path[:0] = [_HERE, _TESTS]

import numpy as np  # noqa: E402

import harness  # noqa: E402
from harness import torch  # noqa: E402

#: leaf aten ops that launch no kernel on a GPU (views, metadata, allocation)
NO_KERNEL = frozenset(f"aten::{n}" for n in (
    "view", "_unsafe_view", "as_strided", "reshape", "_reshape_alias", "expand", "expand_as",
    "t", "transpose", "permute", "unsqueeze", "squeeze", "select", "slice", "detach", "alias",
    "empty", "empty_like", "empty_strided", "resize_", "lift_fresh", "unbind", "split",
    "chunk", "narrow", "view_as", "flatten", "unflatten", "contiguous", "result_type",
    "numpy_T", "set_", "_has_compatible_shallow_copy_type", "is_same_size", "size",
    "stride", "dim", "detach_", "requires_grad_", "_to_copy_meta", "movedim", "swapaxes",
    "split_with_sizes", "unsafe_split", "_local_scalar_dense", "item", "is_nonzero"))


def _install():
    import cuda_emu
    from cuda_emu import counting
    cuda_emu.install()
    counting.install(null=True)
    # a null run leaves kernel outputs as they were allocated: zeroed, so that a value
    # the host reads (GradScaler's inf flag) is the same every step
    import fakecupy
    alloc = fakecupy.alloc

    def zeroed(nbytes):
        mp = alloc(nbytes)
        mp.mem._keep[:] = 0
        return mp
    fakecupy.alloc = fakecupy.cuda.alloc = zeroed
    return counting


# ------------------------------------------------------------------ the cases

def cases(quick=False):
    """(name, build(nn), make_inputs(lib) -> (inputs, target), make_opt(lib, model),
    loss_fn, amp) for each row."""
    import bench_gpu
    rng = np.random.default_rng(0)
    out = []
    # ResNet-50: every layer of the real network, 8 channels where it has 64
    batch, size, classes = 2, 32, 10
    x = rng.standard_normal((batch, 3, size, size), dtype=np.float32)
    y = rng.integers(0, classes, batch).astype(np.int64)

    def res_inputs(lib):
        return _to(lib, (x,)), _to(lib, y)

    def sgd(lib, model):
        kw = dict(lr=0.01, momentum=0.9, weight_decay=1e-4)
        return _opt(lib, "SGD", model, kw)

    def res_build(nn):
        return bench_gpu.resnet50(nn, num_classes=classes, width=8)
    # GPT-2-small: 12 layers, 12 heads, d 48, vocab 256, sequence 16, batch 2
    layers = 2 if quick else 12
    vocab, seq, d, heads, gb = 256, 16, 48, 12, 2
    idx = rng.integers(0, vocab, (gb, seq + 1)).astype(np.int64)
    mask = np.triu(np.full((seq, seq), -np.inf, dtype=np.float32), 1)
    pos = np.arange(seq, dtype=np.int64)

    def gpt_inputs(lib):
        return _to(lib, (np.ascontiguousarray(idx[:, :-1]), pos, mask)), \
            _to(lib, np.ascontiguousarray(idx[:, 1:].reshape(-1)))

    def adamw(lib, model):
        return _opt(lib, "AdamW", model, dict(lr=1e-4, weight_decay=0.01))

    def gpt_loss(F, logits, t):
        return F.cross_entropy(logits.reshape(-1, vocab), t)

    def gpt_build(nn):
        return bench_gpu.gpt(nn, vocab, seq, d, heads, layers)
    res = f"ResNet-50, batch {batch}, {size}x{size}, width 8, SGD momentum"
    gpt = f"GPT-2-small ({layers} layers, 12 heads), d {d}, seq {seq}, batch {gb}, AdamW"
    for amp in (False, True):
        tag = ", autocast float16 + GradScaler" if amp else ", float32"
        out.append((res + tag, res_build, res_inputs, sgd, bench_gpu._cross_entropy, amp))
        out.append((gpt + tag, gpt_build, gpt_inputs, adamw, gpt_loss, amp))
    return out


def _to(lib, a):
    if isinstance(a, tuple):
        return tuple(_to(lib, e) for e in a)
    if lib == "torch":
        return torch.from_numpy(np.ascontiguousarray(a))
    import ember
    return ember.asarray(a).to("cuda")


def _opt(lib, name, model, kw):
    if lib == "torch":
        cls = getattr(torch.optim, name)
        for extra in ({"fused": True}, {"foreach": True}):
            try:
                opt = cls(model.parameters(), **kw, **extra)
                return opt
            except (RuntimeError, TypeError, ValueError):
                continue
        return cls(model.parameters(), **kw)
    import ember
    return getattr(ember.optim, name)(model.parameters(), **kw)


def _step(lib, case):
    import bench_gpu
    name, build, make_inputs, make_opt, loss_fn, amp = case
    torch.manual_seed(0)
    tmodel = build(torch.nn)
    model = bench_gpu._to_ember(tmodel, build) if lib == "ember" else tmodel
    inputs, target = make_inputs(lib)
    return bench_gpu._step_fn(lib, model, make_opt(lib, model), inputs, target, amp, loss_fn,
                              device="cuda" if lib == "ember" else "cpu")


def _median_ms(step, steps):
    """(wall ms, CPU ms of this thread) per step, medians: the CPU time is what the step
    costs the host, and much less disturbed than the wall time by other processes on a
    shared machine (everything runs on this thread: PyTorch has one thread here)."""
    wall, cpu = [], []
    for _ in range(steps):
        c0, t0 = time.thread_time(), time.perf_counter()
        step()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.thread_time() - c0)
    return 1e3 * statistics.median(wall), 1e3 * statistics.median(cpu)


def measure_ember(case, steps, counting):
    """{launches..., readbacks, sites, host_ms} of ember's step (null launcher)."""
    step = _step("ember", case)
    for _ in range(2):              # first steps create the optimizer state
        step()
    with counting.counting(sites=True) as c:
        step()
    with counting.counting():
        wall, cpu = _median_ms(step, steps)
    return {**c.summary(), "counter": c, "host_ms": cpu, "wall_ms": wall}


def torch_ops(step):
    """PyTorch's aten ops in one step: (kernel-like leaf ops, all aten ops, value reads by
    the outermost profiler event that made them)."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        step()
    leaf = total = 0
    reads = collections.Counter()       # by the outermost op that read
    for e in prof.events():
        if not e.name.startswith("aten::"):
            continue
        total += 1
        if e.name == "aten::_local_scalar_dense":
            top = e
            while top.cpu_parent is not None:
                top = top.cpu_parent
            reads[top.name] += 1
        if any(ch.name.startswith("aten::") for ch in e.cpu_children):
            continue
        if e.name not in NO_KERNEL:
            leaf += 1
    return leaf, total, reads


def measure_torch(case, steps):
    step = _step("torch", case)
    for _ in range(2):
        step()
    leaf, total, reads = torch_ops(step)
    wall, cpu = _median_ms(step, steps)
    return {"leaf_ops": leaf, "aten_ops": total, "reads": sum(reads.values()),
            "read_sites": reads, "host_ms": cpu, "wall_ms": wall}


def markdown(rows):
    out = ["| step | ember launches (kernels + GEMMs + CuPy + memsets/copies) | PyTorch kernel-like "
           "aten ops (all aten ops) | ember uploads | read-backs ember / PyTorch | ember host "
           "CPU ms/step, null launcher (wall) | PyTorch CPU eager, CPU ms/step (wall) | "
           "ember / PyTorch CPU time |", "|---|---|---|---|---|---|---|---|"]
    for name, e, t in rows:
        ratio = e["host_ms"] / t["host_ms"] if t["host_ms"] else float("nan")
        out.append(f"| {name} | {e['launches']} ({e['ember_kernels']} + {e['gemms']} + "
                   f"{e['cupy']} + {e['memsets'] + e['copies']}) | {t['leaf_ops']} ({t['aten_ops']}) | "
                   f"{e['uploads']} | {e['readbacks']} / {t['reads']} | {e['host_ms']:.1f} "
                   f"({e['wall_ms']:.1f}) | {t['host_ms']:.1f} ({t['wall_ms']:.1f}) | "
                   f"{ratio:.2f}x |")
    return "\n".join(out)


def details(rows):
    """The read-backs of each step with their call sites, and the busiest CuPy calls."""
    lines = []
    for name, e, t in rows:
        c = e["counter"]
        lines.append(f"\n{name}:")
        rb = _format(c)
        lines += rb if rb else ["- ember: no read-back"]
        if t["read_sites"]:
            lines.append("- PyTorch's value reads (`aten::_local_scalar_dense`), by outermost "
                         "op: " + ", ".join(f"`{k}` {v}" for k, v in t["read_sites"].items()))
        if c.cupy:
            top = ", ".join(f"{k} {v}" for k, v in c.cupy.most_common(8))
            lines.append(f"- CuPy kernel calls: {top}")
            top = ", ".join(f"{name} at `{site[0] if site else '?'}` {n}"
                            for (name, site), n in c.sites.most_common(6))
            lines.append(f"- their busiest call sites: {top}")
        top = ", ".join(f"{k} {v}" for k, v in c.kernels.most_common(6))
        lines.append(f"- busiest ember kernels: {top}")
    return "\n".join(lines)


def _format(c):
    from cuda_emu import counting
    return counting.format_readbacks(c)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    quick = "--quick" in argv
    steps = 2 if quick else 7
    if "--steps" in argv:
        steps = int(argv[argv.index("--steps") + 1])
    if torch is None:
        print("host_step: PyTorch is not installed; it is the reference here.")
        return 1
    torch.set_num_threads(1)            # all of PyTorch's work on the timed thread
    counting = _install()
    import warnings
    warnings.filterwarnings("ignore", message=".*[Aa]utocast.*")
    rows = []
    for case in cases(quick):
        e = measure_ember(case, steps, counting)
        t = measure_torch(case, steps)
        rows.append((case[0], e, t))
        harness.log(f"host_step {case[0]}: ember {e['launches']} launches, "
                    f"{e['host_ms']:.1f} ms; torch {t['leaf_ops']} ops, {t['host_ms']:.1f} ms")
    print(harness.environment_markdown(harness.environment()))
    print(f"- ember on the CPU emulation as a null launcher; PyTorch CPU eager on one thread; "
          f"{steps} timed steps, medians\n")
    print(markdown(rows))
    print(details(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
