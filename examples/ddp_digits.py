"""Data-parallel training of a small CNN on scikit-learn's 8x8 handwritten digits.

Each process (rank) trains on its own shard of every batch (``DistributedSampler``);
``DistributedDataParallel`` averages the gradients across the ranks during backward,
so all ranks keep identical weights, exactly as one process training on the combined
batch would.

Run on 2 processes (either line):

    python -m ember.distributed.run --nproc 2 examples/ddp_digits.py
    mpiexec -n 2 python examples/ddp_digits.py

Options: ``--epochs N`` (default 10), ``--steps N`` (stop each epoch after N steps; for
quick checks), ``--batch-size`` (global batch, split over the ranks), ``--lr``.
Without a launcher it runs as a single process.
"""
import argparse
import time

import numpy as np

import ember
import ember.distributed as dist
from ember import nn
from ember.data import DataLoader, DistributedSampler, TensorDataset
from ember.nn.parallel import DistributedDataParallel as DDP


class DigitsCNN(nn.Module):
    """1x8x8 -> conv(16) -> pool -> conv(32) -> pool -> linear(64) -> 10 classes."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),     # 16x4x4
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))    # 32x2x2
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(32 * 2 * 2, 64), nn.ReLU(),
                                  nn.Linear(64, 10))

    def forward(self, x):
        return self.head(self.features(x))


def load_data(seed=0):
    from sklearn.datasets import load_digits
    d = load_digits()
    X = (d.images.astype(np.float32) / 16.0)[:, None, :, :]      # (N, 1, 8, 8)
    y = d.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(X))
    X, y = X[order], y[order]
    n_train = int(0.8 * len(X))
    return X[:n_train], y[:n_train], X[n_train:], y[n_train:]


def evaluate(model, X, y):
    with ember.no_grad():
        pred = np.asarray(model(ember.asarray(X))).argmax(axis=1)
    return float((pred == y).mean())


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--steps", type=int, default=None, help="at most N steps per epoch")
    p.add_argument("--batch-size", type=int, default=64, help="global batch size")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)

    dist.init_process_group("mpi")
    rank, world = dist.get_rank(), dist.get_world_size()
    if args.batch_size % world:
        raise SystemExit(f"--batch-size {args.batch_size} must divide by the world size {world}")

    Xtr, ytr, Xte, yte = load_data(args.seed)
    train_set = TensorDataset(ember.asarray(Xtr), ember.asarray(ytr))
    sampler = DistributedSampler(train_set, num_replicas=world, rank=rank, shuffle=True,
                                 seed=args.seed)
    loader = DataLoader(train_set, batch_size=args.batch_size // world, sampler=sampler)

    ember.random.seed(args.seed + rank)     # different on each rank: DDP broadcasts rank 0's
    model = DDP(DigitsCNN())
    opt = ember.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()

    t0 = time.perf_counter()
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        model.train()
        total, count = 0.0, 0
        for step, (xb, yb) in enumerate(loader):
            if args.steps is not None and step >= args.steps:
                break
            opt.zero_grad()
            loss = loss_fn(model(xb), yb)
            loss.backward()
            opt.step()
            total += float(loss.item())
            count += 1
        # the mean training loss over all ranks
        stats = np.array([total, count], np.float64)
        dist.all_reduce(stats)
        model.eval()
        acc = evaluate(model.module, Xte, yte)
        if rank == 0:
            print(f"epoch {epoch + 1}: train loss {stats[0] / max(stats[1], 1):.4f}, "
                  f"test accuracy {acc:.3f} ({world} ranks, {time.perf_counter() - t0:.1f} s)",
                  flush=True)

    # every rank ends with the same weights
    w = np.asarray(model.module.head[-1].weight).copy()
    w0 = w.copy()
    dist.broadcast(w0, src=0)
    assert np.array_equal(w, w0), "ranks diverged"
    print(f"rank {rank}: done, final test accuracy {evaluate(model.module, Xte, yte):.3f}",
          flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
