"""Run under mpiexec -n N: every collective of ember.distributed against NumPy, on every rank.

Each rank's data is a deterministic function of its rank, so every rank can compute
what every collective must produce.  Prints "OK <rank>" at the end.
"""
import sys

import os

import numpy as np

import ember
import ember.distributed as dist
from ember.distributed import ReduceOp

dist.init_process_group("mpi", timeout=60)
r, n = dist.get_rank(), dist.get_world_size()
assert n == int(sys.argv[1]), (n, sys.argv)


def data(rank, shape, dtype, salt=0):
    g = np.random.default_rng(1000 * salt + rank)
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return g.uniform(-2, 2, shape).astype(dt)
    if dt.kind == "c":
        return (g.uniform(-2, 2, shape) + 1j * g.uniform(-2, 2, shape)).astype(dt)
    if dt.kind == "b":
        return g.integers(0, 2, shape).astype(bool)
    return g.integers(-5 if dt.kind == "i" else 0, 6, shape).astype(dt)


def E(a):
    return ember.asarray(a)


def check(got, exp, what):
    got = np.asarray(got)
    assert got.dtype == exp.dtype, (what, got.dtype, exp.dtype)
    assert got.shape == exp.shape, (what, got.shape, exp.shape)
    if exp.dtype.kind in "fc":
        tol = 2e-3 if exp.dtype == np.float16 else 1e-5
        np.testing.assert_allclose(got, exp, rtol=tol, atol=tol, err_msg=what)
    else:
        np.testing.assert_array_equal(got, exp, err_msg=what)


NP_OPS = {ReduceOp.SUM: lambda xs: np.sum(xs, axis=0, dtype=xs[0].dtype),
          ReduceOp.PRODUCT: lambda xs: np.prod(xs, axis=0, dtype=xs[0].dtype),
          ReduceOp.MAX: lambda xs: np.max(xs, axis=0), ReduceOp.MIN: lambda xs: np.min(xs, axis=0),
          ReduceOp.AVG: lambda xs: (np.sum(xs, axis=0, dtype=xs[0].dtype) / len(xs)).astype(
              xs[0].dtype),
          ReduceOp.BAND: lambda xs: np.bitwise_and.reduce(xs, axis=0),
          ReduceOp.BOR: lambda xs: np.bitwise_or.reduce(xs, axis=0),
          ReduceOp.BXOR: lambda xs: np.bitwise_xor.reduce(xs, axis=0)}
BOOL_OPS = {ReduceOp.SUM: np.logical_or, ReduceOp.MAX: np.logical_or, ReduceOp.MIN: np.logical_and,
            ReduceOp.PRODUCT: np.logical_and}


def expected_reduce(op, shape, dtype, salt=0):
    xs = np.stack([data(k, shape, dtype, salt) for k in range(n)])
    if np.dtype(dtype).kind == "b":
        return BOOL_OPS[op].reduce(xs, axis=0)
    return NP_OPS[op](xs)


FLOATS = [np.float32, np.float64, np.float16]
INTS = [np.int32, np.int64, np.int8, np.uint8]
SHAPES = [(5,), (3, 4), (), (0, 3)]

# --- all_reduce: every op x dtype x shape, sync and async
for dtype in FLOATS + INTS + [np.complex64, np.bool_]:
    kind = np.dtype(dtype).kind
    ops = ([ReduceOp.SUM, ReduceOp.AVG, ReduceOp.PRODUCT, ReduceOp.MAX, ReduceOp.MIN]
           if kind == "f" else
           [ReduceOp.SUM, ReduceOp.PRODUCT, ReduceOp.MAX, ReduceOp.MIN, ReduceOp.BAND,
            ReduceOp.BOR, ReduceOp.BXOR] if kind in "iu" else
           [ReduceOp.SUM, ReduceOp.AVG, ReduceOp.PRODUCT] if kind == "c" else
           [ReduceOp.SUM, ReduceOp.MAX, ReduceOp.MIN, ReduceOp.PRODUCT])
    for shape in SHAPES:
        for op in ops:
            x = E(data(r, shape, dtype))
            v0 = x._version
            dist.all_reduce(x, op=op)
            check(x, expected_reduce(op, shape, dtype), f"all_reduce {op} {dtype} {shape}")
            assert x._version > v0, "all_reduce must bump the version counter (in-place write)"
    x = E(data(r, (7,), dtype))
    w = dist.all_reduce(x, op="sum", async_op=True)
    assert w.wait() is True and w.is_completed()
    check(x, expected_reduce(ReduceOp.SUM, (7,), dtype), f"async all_reduce {dtype}")

# in place on the array's own memory: a view of a bigger array is reduced in place
base = E(np.zeros((4, 6), np.float32))
row = base[1]
np.asarray(row)[...] = data(r, (6,), np.float32)
ptr = row.data_ptr()
dist.all_reduce(row)
assert row.data_ptr() == ptr
check(base[1], expected_reduce(ReduceOp.SUM, (6,), np.float32), "all_reduce on a view")
check(base[0], np.zeros(6, np.float32), "all_reduce leaves the rest alone")

# non-contiguous: staged through a contiguous copy, result written back into the view
full = data(r, (4, 6), np.float64)
x = E(full.copy())
xt = x.T[::2]                                        # (3, 4), non-contiguous
assert not xt.is_contiguous()
dist.all_reduce(xt, op=ReduceOp.MAX)
exp_full = full.copy()
exp_full.T[::2] = expected_reduce(ReduceOp.MAX, (4, 6), np.float64).T[::2]
check(x, exp_full, "all_reduce on a non-contiguous view writes back")

# NumPy arrays work too
a = data(r, (3,), np.float32)
dist.all_reduce(a)
check(a, expected_reduce(ReduceOp.SUM, (3,), np.float32), "all_reduce on a NumPy array")

# --- broadcast from every source
for src in range(n):
    for dtype in (np.float32, np.int64, np.bool_):
        x = E(data(r, (2, 3), dtype, salt=src + 1))
        w = dist.broadcast(x, src=src, async_op=(src % 2 == 1))
        if w is not None:
            w.wait()
        check(x, data(src, (2, 3), dtype, salt=src + 1), f"broadcast src={src} {dtype}")

# --- reduce to every destination
for dst in range(n):
    x = E(data(r, (4,), np.float64, salt=3))
    dist.reduce(x, dst=dst, op=ReduceOp.SUM)
    exp = expected_reduce(ReduceOp.SUM, (4,), np.float64, salt=3) if r == dst else \
        data(r, (4,), np.float64, salt=3)
    check(x, exp, f"reduce dst={dst}")

# --- all_gather: separate arrays (staged), rows of one array (zero copy), async
for dtype in (np.float32, np.int32, np.float16):
    out = [E(np.full((2, 3), -1, dtype)) for _ in range(n)]
    dist.all_gather(out, E(data(r, (2, 3), dtype)))
    for k in range(n):
        check(out[k], data(k, (2, 3), dtype), f"all_gather[{k}] {dtype}")
big = E(np.zeros((n, 5), np.float32))
rows = list(big)
w = dist.all_gather(rows, E(data(r, (5,), np.float32)), async_op=True)
w.wait()
check(big, np.stack([data(k, (5,), np.float32) for k in range(n)]), "all_gather into rows")

# all_gather_into_tensor: concatenated and stacked layouts
out = E(np.zeros((2 * n, 3), np.float64))
dist.all_gather_into_tensor(out, E(data(r, (2, 3), np.float64)))
check(out, np.concatenate([data(k, (2, 3), np.float64) for k in range(n)]), "all_gather_into_tensor")
out = E(np.zeros((n, 2, 3), np.int64))
dist.all_gather_into_tensor(out, E(data(r, (2, 3), np.int64)))
check(out, np.stack([data(k, (2, 3), np.int64) for k in range(n)]), "all_gather_into_tensor stacked")

# --- reduce_scatter: rank k gets op over ranks of input_list[k]
for op, dtype in ((ReduceOp.SUM, np.float32), (ReduceOp.MAX, np.int32), (ReduceOp.AVG, np.float64)):
    ins = [E(data(r, (3,), dtype, salt=10 + k)) for k in range(n)]
    out = E(np.zeros(3, dtype))
    dist.reduce_scatter(out, ins, op=op)
    check(out, expected_reduce(op, (3,), dtype, salt=10 + r), f"reduce_scatter {op}")
stacked = E(np.stack([data(r, (2, 2), np.float32, salt=10 + k) for k in range(n)]))
out = E(np.zeros((2, 2), np.float32))
w = dist.reduce_scatter(out, list(stacked), async_op=True)   # rows: used without a copy
w.wait()
check(out, expected_reduce(ReduceOp.SUM, (2, 2), np.float32, salt=10 + r), "reduce_scatter rows")
out = E(np.zeros(2, np.float32))
inp = E(np.concatenate([data(r, (2,), np.float32, salt=20 + k) for k in range(n)]))
dist.reduce_scatter_tensor(out, inp)
check(out, expected_reduce(ReduceOp.SUM, (2,), np.float32, salt=20 + r), "reduce_scatter_tensor")

# --- gather / scatter to and from every rank
for root in range(n):
    lst = [E(np.zeros(4, np.float32)) for _ in range(n)] if r == root else None
    dist.gather(E(data(r, (4,), np.float32, salt=30)), lst, dst=root)
    if r == root:
        for k in range(n):
            check(lst[k], data(k, (4,), np.float32, salt=30), f"gather dst={root} [{k}]")
    x = E(np.zeros((2, 2), np.int64))
    sl = [E(data(k, (2, 2), np.int64, salt=40 + root)) for k in range(n)] if r == root else None
    w = dist.scatter(x, sl, src=root, async_op=True)
    w.wait()
    check(x, data(r, (2, 2), np.int64, salt=40 + root), f"scatter src={root}")

# --- point to point: a ring, blocking and nonblocking; recv from any source
right, left = (r + 1) % n, (r - 1) % n
x = E(np.zeros(6, np.float32))
if r % 2 == 0:
    dist.send(E(data(r, (6,), np.float32, salt=50)), dst=right)
    dist.recv(x, src=left)
else:
    dist.recv(x, src=left)
    dist.send(E(data(r, (6,), np.float32, salt=50)), dst=right)
check(x, data(left, (6,), np.float32, salt=50), "send/recv ring")
y = E(np.zeros((2, 3), np.float64))
wr = dist.irecv(y, src=left, tag=7)
ws = dist.isend(E(data(r, (2, 3), np.float64, salt=60)), dst=right, tag=7)
ws.wait()
wr.wait()
assert wr.source_rank() == left
check(y, data(left, (2, 3), np.float64, salt=60), "isend/irecv")
if r == 0:
    got = set()
    for _ in range(n - 1):
        z = E(np.zeros(1, np.int64))
        sender = dist.recv(z, tag=9)
        assert int(np.asarray(z)[0]) == 100 + sender
        got.add(sender)
    assert got == set(range(1, n)), got
else:
    dist.send(E(np.array([100 + r], np.int64)), dst=0, tag=9)

# --- barrier, objects
dist.barrier()
assert dist.barrier(async_op=True).wait()
objs = [{"rank": r}, "x" * r] if r == 0 else [None, None]
dist.broadcast_object_list(objs, src=0)
assert objs == [{"rank": 0}, ""], objs
allo = [None] * n
dist.all_gather_object(allo, ("hi", r, list(range(r))))
assert allo == [("hi", k, list(range(k))) for k in range(n)], allo

# --- errors name the op, the shapes and dtypes
try:
    dist.all_gather([E(np.zeros(3, np.float32)) for _ in range(n - 1)] + [E(np.zeros(4, np.float32))],
                    E(np.zeros(3, np.float32)))
except ValueError as e:
    msg = str(e)
    assert "all_gather" in msg and "(4,)" in msg and "(3,)" in msg, msg
else:
    raise AssertionError("all_gather accepted a wrongly shaped output")
try:
    dist.all_gather([E(np.zeros(3, np.float32))], E(np.zeros(3, np.float32)))
except ValueError as e:
    assert "world size" in str(e), str(e)
else:
    raise AssertionError("all_gather accepted a short output list")
try:
    dist.all_reduce(E(np.zeros(3, np.int32)), op=ReduceOp.AVG)
except TypeError as e:
    assert "all_reduce" in str(e) and "int32" in str(e), str(e)
else:
    raise AssertionError("AVG on int32 accepted")
try:
    dist.broadcast(E(np.zeros(3)), src=n)
except ValueError as e:
    assert "broadcast" in str(e) and "src" in str(e), str(e)
else:
    raise AssertionError("broadcast accepted an invalid src")
try:
    dist.send(E(np.zeros(3)), dst=r)
except ValueError as e:
    assert "own rank" in str(e)
else:
    raise AssertionError("send to self accepted")

dist.barrier()
dist.destroy_process_group()
print("OK", r, flush=True)
if os.environ.get("EMBER_TEST_OK_DIR"):          # interleaved stdout is no proof; a file is
    with open(os.path.join(os.environ["EMBER_TEST_OK_DIR"], f"ok.{r}"), "w") as f:
        f.write("OK")
