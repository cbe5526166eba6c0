"""Run under mpiexec -n 2: DistributedDataParallel against one process trained on the
combined batch.  Prints "OK <rank>" at the end."""
import os

import numpy as np

import ember
import ember.distributed as dist
from ember import nn
from ember.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("mpi", timeout=60)
r, n = dist.get_rank(), dist.get_world_size()
B = 4                                  # per-rank batch


def mlp(seed):
    ember.random.seed(seed)
    return nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 16), nn.Tanh(),
                         nn.Linear(16, 3))


def cnn(seed):
    ember.random.seed(seed)
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(4, 6, 3, padding=1), nn.ReLU(), nn.Flatten(),
                         nn.Linear(6 * 4 * 4, 3))


def assert_same(ref, model, what):
    for (k, a), b in zip(ref.named_parameters(), model.module.parameters()):
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-5, atol=2e-6,
                                   err_msg=f"{what}: {k} (rank {r})")


rng = np.random.default_rng(0)
loss_fn = nn.CrossEntropyLoss()
cases = [("mlp", mlp, rng.standard_normal((B * n * 3, 6)).astype(np.float32)),
         ("cnn", cnn, rng.standard_normal((B * n * 3, 1, 8, 8)).astype(np.float32))]
Y = rng.integers(0, 3, B * n * 3)

# 1) plain training, several bucket sizes (one bucket, one bucket per parameter), momentum
for name, make, X in cases:
    for cap in (25, 1e-4):
        ref = make(100)                       # what rank 0 starts from
        model = DDP(make(100 + r), bucket_cap_mb=cap)   # rank 1 starts elsewhere: broadcast
        if cap < 1:
            assert len(model._buckets) == len(list(model.parameters())), len(model._buckets)
        o1 = ember.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
        o2 = ember.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        for step in range(3):
            sl = slice(step * B * n, (step + 1) * B * n)
            o1.zero_grad()
            loss_fn(ref(ember.asarray(X[sl])), ember.asarray(Y[sl])).backward()
            o1.step()
            mine = slice(step * B * n + r * B, step * B * n + (r + 1) * B)
            o2.zero_grad()
            loss_fn(model(ember.asarray(X[mine])), ember.asarray(Y[mine])).backward()
            o2.step()
        assert_same(ref, model, f"{name} cap={cap}")

# 2) gradient accumulation with no_sync: two micro-batches per rank, one reduction
X = rng.standard_normal((2 * 2 * B * n, 6)).astype(np.float32)
Y = rng.integers(0, 3, 2 * 2 * B * n)
ref, model = mlp(7), DDP(mlp(7 + r), bucket_cap_mb=1e-4)
o1 = ember.optim.SGD(ref.parameters(), lr=0.05)
o2 = ember.optim.SGD(model.parameters(), lr=0.05)
for step in range(2):
    base = step * 2 * B * n
    o1.zero_grad()
    loss_fn(ref(ember.asarray(X[base:base + 2 * B * n])),
            ember.asarray(Y[base:base + 2 * B * n])).backward()
    o1.step()
    o2.zero_grad()
    for micro in range(2):
        lo = base + micro * B * n + r * B
        xb, yb = ember.asarray(X[lo:lo + B]), ember.asarray(Y[lo:lo + B])
        if micro == 0:
            with model.no_sync():
                (loss_fn(model(xb), yb) / 2).backward()
            # inside no_sync the gradients stay local: they differ between the ranks
            g = np.asarray(model.module[0].weight.grad).copy()
            allg = [np.zeros_like(g) for _ in range(n)]
            dist.all_gather(allg, g)
            assert not np.allclose(allg[0], allg[1]), "no_sync must not reduce"
        else:
            (loss_fn(model(xb), yb) / 2).backward()
    o2.step()
assert_same(ref, model, "no_sync accumulation")


# 3) unused parameters
class TwoHeads(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 5)
        self.a = nn.Linear(5, 2)
        self.b = nn.Linear(5, 2)         # used only on rank 1
        self.never = nn.Linear(5, 2)     # used on no rank

    def forward(self, x, use_b):
        h = ember.tanh(self.body(x))
        out = self.a(h)
        if use_b:
            out = out + self.b(h)
        return out


def twoheads(seed):
    ember.random.seed(seed)
    return TwoHeads()


xs = [rng.standard_normal((3, 4)).astype(np.float32) for _ in range(n)]
model = DDP(twoheads(3 + r), find_unused_parameters=True, bucket_cap_mb=1e-4)
model(ember.asarray(xs[r]), use_b=(r == 1)).sum().backward()
# expected: the average over ranks of each rank's local gradient (zero where unused)
local = []
for k in range(n):
    m = twoheads(3)
    m(ember.asarray(xs[k]), use_b=(k == 1)).sum().backward()
    local.append({nm: (np.zeros(p.shape, np.float32) if p.grad is None else np.asarray(p.grad))
                  for nm, p in m.named_parameters()})
for nm, p in model.module.named_parameters():
    if nm.startswith("never"):
        assert p.grad is None, f"{nm}: unused on every rank must keep grad None"
        continue
    exp = sum(loc[nm] for loc in local) / n
    np.testing.assert_allclose(np.asarray(p.grad), exp, rtol=1e-5, atol=1e-6, err_msg=nm)
# a second iteration works too (state was reset)
model.zero_grad()
model(ember.asarray(xs[r]), use_b=(r == 1)).sum().backward()
assert model.module.b.weight.grad is not None

# without find_unused_parameters, an unused parameter is reported at the next forward
model = DDP(twoheads(3))
model(ember.asarray(xs[r]), use_b=False).sum().backward()
try:
    model(ember.asarray(xs[r]), use_b=False)
except RuntimeError as e:
    assert "find_unused_parameters" in str(e) and "b.weight" in str(e), str(e)
else:
    raise AssertionError("an unused parameter went unnoticed")

# 4) the wrapper: state_dict keys, module attribute, parameters identical on all ranks
model = DDP(mlp(50 + r))
assert sorted(model.state_dict()) == sorted("module." + k for k in model.module.state_dict())
w = np.asarray(model.module[0].weight).copy()
allw = [np.zeros_like(w) for _ in range(n)]
dist.all_gather(allw, w)
for k in range(n):
    np.testing.assert_array_equal(allw[k], allw[0])

# 5) overlap: with one bucket per parameter, when backward reaches the middle layer the
# last layer's bucket is already being reduced (its all_reduce started from a hook) and
# the first layer's has not started yet
model = DDP(mlp(60), bucket_cap_mb=1e-4)
seen = {}
first_bucket = model._bucket_of[model._index[id(model.module[0].weight)]]


def _probe(p):
    seen["last_layer_started"] = model._buckets[0].work is not None
    seen["first_layer_started"] = model._buckets[first_bucket].work is not None


model.module[2].weight.register_post_accumulate_grad_hook(_probe)
loss_fn(model(ember.asarray(X[:B])), ember.asarray(Y[:B])).backward()
assert seen == {"last_layer_started": True, "first_layer_started": False}, seen

dist.destroy_process_group()
print("OK", r, flush=True)
if os.environ.get("EMBER_TEST_OK_DIR"):          # interleaved stdout is no proof; a file is
    with open(os.path.join(os.environ["EMBER_TEST_OK_DIR"], f"ok.{r}"), "w") as f:
        f.write("OK")
