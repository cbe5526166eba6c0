"""Run under mpiexec -n 4: new_group subgroups against NumPy, global src/dst ranks,
non-members, and DDP on a subgroup.  Writes ok.<rank> into EMBER_TEST_OK_DIR."""
import os

import numpy as np

import ember
import ember.distributed as dist
from ember import nn
from ember.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("mpi", timeout=60)
r, n = dist.get_rank(), dist.get_world_size()
assert n == 4, n

odd = dist.new_group([1, 3])
even = dist.new_group([2, 0])          # group-rank order follows the list: 2 is group rank 0
mine = odd if r % 2 else even
members = [1, 3] if r % 2 else [2, 0]
assert dist.get_process_group_ranks(mine) == members
assert dist.get_rank(mine) == members.index(r) and dist.get_world_size(mine) == 2
assert dist.get_global_rank(mine, 0) == members[0]
assert dist.get_group_rank(mine, r) == members.index(r)

# all_reduce within the group only
x = ember.asarray(np.full(5, r + 1.0, np.float32))
dist.all_reduce(x, group=mine)
np.testing.assert_array_equal(np.asarray(x), np.full(5, sum(m + 1.0 for m in members)))

# broadcast: src is a GLOBAL rank (3 in the odd group, 0 in the even group)
src = 3 if r % 2 else 0
y = ember.asarray(np.full(3, float(r), np.float32))
dist.broadcast(y, src=src, group=mine)
np.testing.assert_array_equal(np.asarray(y), np.full(3, float(src)))

# all_gather in group-rank order
g = [ember.zeros(2) for _ in range(2)]
dist.all_gather(g, ember.asarray(np.full(2, float(r), np.float32)), group=mine)
for k, m in enumerate(members):
    np.testing.assert_array_equal(np.asarray(g[k]), np.full(2, float(m)))

# send/recv with global peers; the sender's global rank comes back
peer = members[1 - members.index(r)]
buf = ember.zeros(4)
if members.index(r) == 0:
    dist.send(ember.asarray(np.arange(4.0, dtype=np.float32) + r), dst=peer, group=mine)
else:
    got = dist.recv(buf, src=peer, group=mine)
    assert got == peer, (got, peer)
    np.testing.assert_array_equal(np.asarray(buf), np.arange(4.0) + peer)

# errors: a rank outside the group, and a non-member's placeholder
try:
    dist.broadcast(y, src=1 if r % 2 == 0 else 0, group=mine)
except ValueError as e:
    assert "not a member of the group" in str(e), str(e)
else:
    raise AssertionError("src outside the group went unnoticed")
only_zero = dist.new_group([0])
if r == 0:
    z = ember.ones(2)
    dist.all_reduce(z, group=only_zero)
    assert np.asarray(z).tolist() == [1.0, 1.0]
else:
    try:
        dist.all_reduce(ember.ones(2), group=only_zero)
    except RuntimeError as e:
        assert "not a member" in str(e), str(e)
    else:
        raise AssertionError("a non-member used the group")

# DDP on a subgroup: parameters come from the group's first member, gradients are
# averaged within the group only
ember.random.seed(10 + r)
model = DDP(nn.Linear(3, 2), process_group=mine)
ember.random.seed(10 + members[0])
ref = nn.Linear(3, 2)
np.testing.assert_array_equal(np.asarray(model.module.weight), np.asarray(ref.weight))
xs = {m: np.random.default_rng(m).standard_normal((4, 3)).astype(np.float32) for m in members}
model(ember.asarray(xs[r])).sum().backward()
exp = np.mean([np.ones((4, 2), np.float32).T @ xs[m] for m in members], axis=0)
np.testing.assert_allclose(np.asarray(model.module.weight.grad), exp, rtol=1e-5, atol=1e-6)

dist.destroy_process_group(mine)
dist.destroy_process_group()
print("OK", r, flush=True)
if os.environ.get("EMBER_TEST_OK_DIR"):
    with open(os.path.join(os.environ["EMBER_TEST_OK_DIR"], f"ok.{r}"), "w") as f:
        f.write("OK")
