"""bfloat16 across ranks (MPI has no bfloat16): reductions run in float32 and round
once, data movement keeps the 16 bits, DDP averages bfloat16 gradients.

The expected values are computed here from every rank's inputs (known to all ranks)
with NumPy in float32, rounded to bfloat16 once."""
import os
import sys

import ml_dtypes
import numpy as np

import ember
import ember.distributed as dist
from ember.nn.parallel import DistributedDataParallel

BF = ml_dtypes.bfloat16
dist.init_process_group()
r, n = dist.get_rank(), dist.get_world_size()


def data(rank):
    """rank's float32 values, each representable in bfloat16"""
    v = np.random.default_rng(rank).standard_normal(12).astype(np.float32)
    return v.astype(BF).astype(np.float32)


def bits(x):
    return np.asarray(x).view(np.uint16)


every = np.stack([data(k) for k in range(n)])

x = ember.asarray(data(r)).astype(ember.bfloat16)
dist.all_reduce(x)
assert x.dtype == ember.bfloat16
np.testing.assert_array_equal(bits(x), every.sum(axis=0).astype(BF).view(np.uint16))

x = ember.asarray(data(r)).astype(ember.bfloat16)
dist.all_reduce(x, op=dist.ReduceOp.MAX)
np.testing.assert_array_equal(bits(x), every.max(axis=0).astype(BF).view(np.uint16))

x = ember.asarray(data(r)).astype(ember.bfloat16)
dist.all_reduce(x, op=dist.ReduceOp.AVG)
np.testing.assert_array_equal(bits(x), (every.sum(axis=0) / n).astype(BF).view(np.uint16))

x = ember.asarray(data(r)).astype(ember.bfloat16)
dist.reduce(x, dst=n - 1)
if r == n - 1:
    np.testing.assert_array_equal(bits(x), every.sum(axis=0).astype(BF).view(np.uint16))
else:
    np.testing.assert_array_equal(bits(x), data(r).astype(BF).view(np.uint16))

chunk = 12 // n
out = ember.zeros(chunk, dtype=ember.bfloat16)
dist.reduce_scatter_tensor(out, ember.asarray(data(r)).astype(ember.bfloat16))
want = every.sum(axis=0)[r * chunk:(r + 1) * chunk].astype(BF)
np.testing.assert_array_equal(bits(out), want.view(np.uint16))

# data movement: the 16 bits, NaN payloads and -0.0 included
special = np.array([np.nan, -0.0, np.inf, 1e-40], np.float32).astype(BF)
y = ember.asarray(special if r == 0 else np.zeros(4, BF))
dist.broadcast(y, src=0)
np.testing.assert_array_equal(bits(y), special.view(np.uint16))
outs = [ember.zeros(12, dtype=ember.bfloat16) for _ in range(n)]
dist.all_gather(outs, ember.asarray(data(r)).astype(ember.bfloat16))
for k in range(n):
    np.testing.assert_array_equal(bits(outs[k]), data(k).astype(BF).view(np.uint16))

# a mismatched output dtype is refused, not reduced into
try:
    dist.reduce_scatter_tensor(ember.zeros(chunk), ember.asarray(data(r)).astype(ember.bfloat16))
except ValueError as e:
    assert "bfloat16" in str(e) and "float32" in str(e), str(e)
else:
    raise AssertionError("reduce_scatter_tensor accepted float32 output for bfloat16 input")

# DDP of a bfloat16 model: the gradient is the average over ranks of each rank's
m = ember.nn.Linear(3, 2).bfloat16()
ddp = DistributedDataParallel(m)
inp = ember.ones((4, 3), dtype=ember.bfloat16) * (r + 1)
ddp(inp).sum().backward()
assert m.weight.grad.dtype == ember.bfloat16
want = np.mean([4.0 * (k + 1) for k in range(n)])
np.testing.assert_array_equal(np.asarray(m.weight.grad.astype(ember.float32)),
                              np.full((2, 3), want, np.float32))

dist.barrier()
dist.destroy_process_group()
print("OK", r, flush=True)
if os.environ.get("EMBER_TEST_OK_DIR"):
    with open(os.path.join(os.environ["EMBER_TEST_OK_DIR"], f"ok.{r}"), "w") as f:
        f.write("OK")
sys.exit(0)
