"""Train a small CNN on scikit-learn's handwritten digits with ember.

The 1,797 8x8 grey-scale digit images ship inside scikit-learn, so nothing is
downloaded.  They are split 80/20 (stratified, seeded) and a three-convolution
network with batch normalisation is trained with Adam and a one-cycle learning
rate schedule -- the same program you would write with PyTorch, spelled with
``ember.nn``, ``ember.optim`` and ``ember.data``.  It shows a tqdm progress
bar, reports the test accuracy after every epoch, saves a checkpoint (model,
optimizer, scheduler and epoch) with ``ember.save`` after every epoch, reloads
the final one into a fresh model to check it, and draws the loss and accuracy
curves to a PNG with matplotlib.

Run:  python examples/digits.py [--epochs N] [--out DIR] [--seed S] [--resume]
                                [--device cpu|cuda]

``--device cuda`` trains on a GPU: the data and the model move there once, and the
rest of the program is unchanged.

``--resume`` continues an interrupted run (Ctrl-C, or ``--stop-after K``) from
``DIR/digits.safetensors``, saved after every epoch, to the number of epochs it
was started with.
"""
import argparse
import os
import time

import numpy

import ember
import ember.nn.functional as F
from ember import nn, optim
from ember.data import DataLoader, TensorDataset

DEFAULT_OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "out")


def load_data(seed):
    """(X_train, y_train, X_test, y_test) as NumPy arrays, images shaped (N, 1, 8, 8)."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    digits = load_digits()
    X = (digits.images / 16.0).astype(numpy.float32)[:, None]   # pixel values are 0..16
    y = digits.target.astype(numpy.int64)
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=0.2, stratify=y, random_state=seed)
    # normalise with the training set's statistics only
    mean, std = X_train.mean(), X_train.std()
    return (X_train - mean) / std, y_train, (X_test - mean) / std, y_test


def make_model():
    """8x8 -> conv 32 -> conv 32 -> pool 4x4 -> conv 64 -> pool 2x2 -> linear 10."""
    def block(c_in, c_out):
        # the convolution's bias is redundant in front of batch norm
        return [nn.Conv2d(c_in, c_out, 3, padding=1, bias=False), nn.BatchNorm2d(c_out),
                nn.ReLU()]
    return nn.Sequential(
        *block(1, 32), *block(32, 32), nn.MaxPool2d(2),
        *block(32, 64), nn.MaxPool2d(2),
        nn.Flatten(), nn.Dropout(0.25), nn.Linear(64 * 2 * 2, 10))


def evaluate(model, X, y, batch_size=512):
    """(mean cross-entropy, accuracy) of `model` on the arrays X, y."""
    model.eval()
    total_loss, correct = 0.0, 0
    with ember.no_grad():
        for start in range(0, len(X), batch_size):
            xb, yb = X[start:start + batch_size], y[start:start + batch_size]
            logits = model(xb)
            total_loss += float(F.cross_entropy(logits, yb, reduction="sum"))
            correct += int((ember.argmax(logits, axis=1) == yb).sum())
    return total_loss / len(X), correct / len(X)


def plot_curves(history, path):
    """Loss and accuracy per epoch, train and test, side by side in one PNG."""
    import matplotlib
    matplotlib.use("Agg")                   # no display needed: write the PNG only
    import matplotlib.pyplot as plt
    epochs = numpy.arange(1, len(history["train_loss"]) + 1)
    fig, (ax_loss, ax_acc) = plt.subplots(1, 2, figsize=(10, 4))
    ax_loss.plot(epochs, history["train_loss"], label="train")
    ax_loss.plot(epochs, history["test_loss"], label="test")
    ax_loss.set(xlabel="epoch", ylabel="cross-entropy", title="loss", yscale="log")
    ax_acc.plot(epochs, 100 * numpy.asarray(history["train_acc"]), label="train")
    ax_acc.plot(epochs, 100 * numpy.asarray(history["test_acc"]), label="test")
    ax_acc.set(xlabel="epoch", ylabel="accuracy (%)", title="accuracy")
    for ax in (ax_loss, ax_acc):
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle("ember: small CNN on scikit-learn digits")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=None,
                        help="epochs in all (default 15, or the resumed run's)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=3e-3, help="peak learning rate")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=DEFAULT_OUT, help="folder for the checkpoint and PNG")
    parser.add_argument("--resume", action="store_true",
                        help="continue from OUT/digits.safetensors")
    parser.add_argument("--stop-after", type=int, default=None, metavar="N",
                        help="train at most N epochs now (continue later with --resume)")
    parser.add_argument("--no-progress", action="store_true", help="no tqdm progress bar")
    parser.add_argument("--threads", type=int, default=None,
                        help="threads for ember's kernels (default: ember's)")
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    args = parser.parse_args(argv)
    if args.threads is not None:
        ember.set_num_threads(args.threads)
    if args.device.startswith("cuda") and not ember.cuda.is_available():
        parser.error(f"--device {args.device}: no usable CUDA device here")
    from tqdm import tqdm

    os.makedirs(args.out, exist_ok=True)
    ckpt_path = os.path.join(args.out, "digits.safetensors")
    png_path = os.path.join(args.out, "digits_curves.png")
    if args.resume and not os.path.exists(ckpt_path):
        parser.error(f"--resume: no checkpoint at {ckpt_path}")
    ckpt = ember.load(ckpt_path) if args.resume else None
    if ckpt is not None and args.epochs not in (None, ckpt["epochs"]):
        # the one-cycle schedule is laid out over the whole run, so a resumed run
        # keeps the length it was started with
        parser.error(f"{ckpt_path} belongs to a run of {ckpt['epochs']} epochs; resume it "
                     f"without --epochs (or with --epochs {ckpt['epochs']})")
    epochs = args.epochs if args.epochs is not None else ckpt["epochs"] if ckpt else 15

    t0 = time.perf_counter()
    ember.random.seed(args.seed)            # weights, dropout and shuffling all draw from it
    X_train, y_train, X_test, y_test = (ember.asarray(a).to(args.device)
                                        for a in load_data(args.seed))
    loader = DataLoader(TensorDataset(X_train, y_train), batch_size=args.batch_size,
                        shuffle=True, generator=ember.random.default_rng(args.seed))
    model = make_model().to(args.device)
    opt = optim.Adam(model.parameters(), lr=args.lr, weight_decay=1e-4)
    sched = optim.lr_scheduler.OneCycleLR(opt, max_lr=args.lr, epochs=epochs,
                                          steps_per_epoch=len(loader))
    history = {k: [] for k in ("train_loss", "train_acc", "test_loss", "test_acc")}
    first_epoch = 0
    if ckpt is not None:
        model.load_state_dict(ckpt["model"])
        opt.load_state_dict(ckpt["optimizer"])
        sched.load_state_dict(ckpt["scheduler"])
        history = {k: list(v) for k, v in ckpt["history"].items()}
        first_epoch = ckpt["epoch"]
        # shuffling and dropout draw afresh from the seed, so a resumed run is close to,
        # but not bit-identical with, one that was never interrupted
        print(f"resumed from {ckpt_path} after epoch {first_epoch}")

    n_params = sum(p.size for p in model.parameters())
    print(f"digits: {len(X_train)} train / {len(X_test)} test images, {n_params} parameters, "
          + (f"epochs {first_epoch + 1}..{epochs}" if first_epoch < epochs
             else f"all {epochs} epochs already trained"))
    last_epoch = epochs
    if args.stop_after is not None:
        last_epoch = min(epochs, first_epoch + args.stop_after)
    bar = tqdm(total=(last_epoch - first_epoch) * len(loader), unit="batch",
               disable=args.no_progress, dynamic_ncols=True)
    for epoch in range(first_epoch, last_epoch):
        model.train()
        for xb, yb in loader:
            opt.zero_grad()
            loss = F.cross_entropy(model(xb), yb)
            loss.backward()
            opt.step()
            sched.step()
            bar.update()
            bar.set_postfix(epoch=epoch + 1, loss=f"{float(loss):.3f}")
        # full-set metrics in eval mode (batch-norm running statistics, no dropout)
        for split, X, y in (("train", X_train, y_train), ("test", X_test, y_test)):
            loss_value, acc = evaluate(model, X, y)
            history[f"{split}_loss"].append(loss_value)
            history[f"{split}_acc"].append(acc)
        bar.write(f"epoch {epoch + 1:3d}  train loss {history['train_loss'][-1]:.4f}  "
                  f"test loss {history['test_loss'][-1]:.4f}  "
                  f"test accuracy {100 * history['test_acc'][-1]:.2f}%")
        ember.save({"model": model.state_dict(), "optimizer": opt.state_dict(),
                    "scheduler": sched.state_dict(), "epoch": epoch + 1, "epochs": epochs,
                    "history": history},
                   ckpt_path)
    bar.close()
    train_time = time.perf_counter() - t0

    # reload the checkpoint into a fresh model: it must give the same predictions
    fresh = make_model().to(args.device)
    fresh.load_state_dict(ember.load(ckpt_path)["model"])
    _, reloaded_acc = evaluate(fresh, X_test, y_test)
    final_acc = history["test_acc"][-1] if history["test_acc"] else reloaded_acc
    assert reloaded_acc == final_acc, (reloaded_acc, final_acc)

    if history["train_loss"]:
        plot_curves(history, png_path)
        print(f"loss and accuracy curves: {png_path}")
    print(f"checkpoint: {ckpt_path} (reloaded: test accuracy {100 * reloaded_acc:.2f}%)")
    done = len(history["test_acc"])
    print(f"{'final' if done == epochs else 'stopped:'} test accuracy {100 * final_acc:.2f}% "
          f"after {done} of {epochs} epochs, {train_time:.1f} s")


if __name__ == "__main__":
    main()
