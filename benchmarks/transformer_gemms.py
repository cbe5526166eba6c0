"""Every GEMM of the Transformer step (bench_train.py's, one layer: tokens T = 32 x 64,
d_model 128, FF 512, 4 heads of 32) timed on ember's float32 kernel (forced on for any
size), on OpenBLAS through ember (kernel off) and with torch.matmul, on the operand
layouts the step uses (x @ W^T with W read transposed, g^T @ x with g read transposed,
attention's q, k, v as strided head views of the packed projection).  The step runs the
dX products batched over the 32 sequences (the same kernel, one block per sequence);
here they are 2-D (with ``ksplit``, the batched dX products are added as rows).  One
thread: CPU time; two threads: wall time.  Medians of 7 rounds, each round one batch of
5 calls per column (interleaved).

With ``ksplit`` the columns are ember's kernel with the K split / batch collapse off
(``gemm._set_ksplit(False)``, the row / column split), on, and torch.

    python benchmarks/transformer_gemms.py [threads] [ksplit]
"""
import sys
import time

import numpy as np
import torch

import ember
from ember._kernels.cpu import gemm


def cases(T=2048):
    rng = np.random.default_rng(0)

    def mk(shape):
        return rng.standard_normal(shape, dtype=np.float32)

    out = []
    for o, i, name in ((384, 128, "in-proj"), (128, 128, "out-proj"), (512, 128, "FF1"),
                       (128, 512, "FF2")):
        x, W, g = mk((T, i)), mk((o, i)), mk((T, o))
        out.append((f"{name} fwd x@W^T {T}x{o}x{i}", x, W.T))
        out.append((f"{name} dX g@W {T}x{i}x{o}", g, W))
        out.append((f"{name} dW g^T@x {o}x{i}x{T}", g.T, x))
    qkv = mk((32, 64, 3, 4, 32))
    q, k, v = (qkv[:, :, j].transpose(0, 2, 1, 3) for j in range(3))
    p = mk((32, 4, 64, 64))
    go = mk((32, 64, 4, 32)).transpose(0, 2, 1, 3)
    out += [("attn q@k^T 128x(64x64x32)", q, k.swapaxes(-1, -2)),
            ("attn p@v 128x(64x32x64)", p, v),
            ("attn dv=p^T@go", p.swapaxes(-1, -2), go),
            ("attn dp=go@v^T", go, v.swapaxes(-1, -2)),
            ("attn dq=ds@k", p, k),
            ("attn ds^T@q (dk)", p.swapaxes(-1, -2), q)]
    return out


def batched_cases(T=2048, B=32):
    """The dX products of the step's 3-d linear inputs: (B, T/B, out) @ W (out, in)."""
    rng = np.random.default_rng(1)
    out = []
    for o, i, name in ((384, 128, "in-proj"), (128, 128, "out-proj"), (512, 128, "FF1"),
                       (128, 512, "FF2")):
        g = rng.standard_normal((B, T // B, o), dtype=np.float32)
        W = rng.standard_normal((o, i), dtype=np.float32)
        out.append((f"{name} dX {B}x({T // B}x{i}x{o})", g, W))
    return out


def main(argv):
    threads = int(argv[1]) if len(argv) > 1 and argv[1].isdigit() else 1
    ab = "ksplit" in argv[1:]
    torch.set_num_threads(threads)
    ember.set_num_threads(threads)
    clock = time.process_time if threads == 1 else time.perf_counter

    def medians_us(fs, n=5):
        for f in fs:
            f()
        r = [[] for _ in fs]
        for _ in range(7):
            for f, rf in zip(fs, r):
                t0 = clock()
                for _ in range(n):
                    f()
                rf.append((clock() - t0) / n * 1e6)
        return [float(np.median(rf)) for rf in r]

    on, limit = gemm.f32_kernel(), gemm._f32_limit()
    split = gemm._set_ksplit(True)
    gemm._set_ksplit(*split[:3], collapse=split[3])
    total = np.zeros(3)
    cols = ("kernel split off / on" if ab else "ember kernel / OpenBLAS through ember")
    print(f"{threads} thread(s); us per call: {cols} / torch; GFLOP/s")

    def kernel(ks):
        def f():
            gemm._set_ksplit(ks)
            gemm._set_f32_kernel(True, 1 << 40)
        return f

    def blas():
        gemm._set_ksplit(split[0], collapse=split[3])
        gemm._set_f32_kernel(False)

    setups = (kernel(False), kernel(True)) if ab else (kernel(split[0]), blas)
    try:
        for name, a, b in cases() + (batched_cases() if ab else []):
            shape = np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1])
            out = np.empty(shape, np.float32)
            ta, tb = torch.from_numpy(a), torch.from_numpy(b)

            def run(setup):
                def f():
                    setup()
                    gemm.matmul(a, b, out)
                return f
            r1, r2, r3 = medians_us([run(setups[0]), run(setups[1]),
                                     lambda: torch.matmul(ta, tb)])
            gf = 2.0 * out.size * a.shape[-1] / 1e3
            total += (r1, r2, r3)
            print(f"{name:28s} {r1:8.0f} {r2:8.0f} {r3:8.0f}   "
                  f"{gf / r1:6.1f} {gf / r2:6.1f} {gf / r3:6.1f}")
    finally:
        gemm._set_f32_kernel(on, *limit)
        gemm._set_ksplit(split[0], split[1], split[2], collapse=split[3])
    print(f"{'sum':28s} {total[0]:8.0f} {total[1]:8.0f} {total[2]:8.0f}")


if __name__ == "__main__":
    main(sys.argv)
