"""ember's first demo: NumPy-style array code that trains a classifier.

A softmax-regression model is trained on scikit-learn's handwritten digits
(the data ships inside scikit-learn) with gradients written by hand as plain
array expressions -- the code is what you would write with NumPy, with
``import ember as np``.  It prints the test accuracy and compares the run time
of the same program under NumPy.

Run:  python examples/demo.py [--epochs N]
"""
import argparse
import time

import numpy

import ember


def load_digits_split(seed=0):
    """The 1,797 8x8 digit images, scaled to [0, 1], split 80/20 (NumPy arrays)."""
    from sklearn.datasets import load_digits
    data = load_digits()
    X = data.data.astype(numpy.float32) / 16.0
    y = data.target.astype(numpy.int64)
    order = numpy.random.default_rng(seed).permutation(len(X))
    X, y = X[order], y[order]
    n_train = int(0.8 * len(X))
    return X[:n_train], y[:n_train], X[n_train:], y[n_train:]


def train(xp, data, epochs, lr=0.5, batch=64):
    """Mini-batch softmax regression; xp is ember or numpy (same code)."""
    X, y, Xt, yt = (xp.asarray(a) for a in data)
    n, d = X.shape
    k = 10
    W = xp.zeros((d, k), dtype=xp.float32)
    b = xp.zeros((k,), dtype=xp.float32)
    onehot = (y[:, None] == xp.arange(k)[None, :]).astype(xp.float32)
    for epoch in range(epochs):
        for start in range(0, n, batch):
            xb = X[start:start + batch]
            tb = onehot[start:start + batch]
            logits = xb @ W + b
            logits = logits - logits.max(axis=1, keepdims=True)
            p = xp.exp(logits)
            p /= p.sum(axis=1, keepdims=True)
            g = (p - tb) / xb.shape[0]          # d(loss)/d(logits) of the cross-entropy
            W -= lr * (xb.T @ g) + 1e-4 * W
            b -= lr * g.sum(axis=0)
    logits = X @ W + b
    loss = -(onehot * (logits - xp.log(xp.exp(logits - logits.max(axis=1, keepdims=True)).sum(axis=1, keepdims=True))
                       - logits.max(axis=1, keepdims=True))).sum(axis=1).mean()
    acc = float((xp.argmax(Xt @ W + b, axis=1) == yt).mean())
    return float(loss), acc


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=30)
    args = parser.parse_args()
    data = load_digits_split()
    results = {}
    for name, xp in (("ember", ember), ("numpy", numpy)):
        t0 = time.perf_counter()
        loss, acc = train(xp, data, args.epochs)
        results[name] = time.perf_counter() - t0
        print(f"{name:6s}: train loss {loss:.4f}, test accuracy {acc * 100:.1f}%, "
              f"{results[name]:.2f} s for {args.epochs} epochs")
    print(f"ember ran the same array program in {results['ember'] / results['numpy']:.2f}x NumPy's time")


if __name__ == "__main__":
    main()
