"""ember's first demo: NumPy-style array code that trains a classifier.

A softmax-regression model is trained on scikit-learn's handwritten digits
(the data ships inside scikit-learn) with gradients written by hand as plain
array expressions -- the code is what you would write with NumPy, with
``import ember as np``.  It prints the test accuracy and compares the run time
of the same program under NumPy.  Then a small neural network (64-64-10, tanh)
is trained on the same data with ember's autograd: ``loss.backward()`` computes
every gradient.

Run:  python examples/demo.py [--epochs N] [--mlp-epochs N]
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


def train_mlp(data, epochs, lr=0.2, batch=32, seed=0):
    """A 64-64-10 tanh network trained by SGD; gradients from autograd."""
    X, y, Xt, yt = (ember.asarray(a) for a in data)
    rng = numpy.random.default_rng(seed)
    W1 = ember.asarray(rng.standard_normal((64, 64), numpy.float32) / 8, requires_grad=True)
    b1 = ember.zeros(64, requires_grad=True)
    W2 = ember.asarray(rng.standard_normal((64, 10), numpy.float32) / 8, requires_grad=True)
    b2 = ember.zeros(10, requires_grad=True)
    params = [W1, b1, W2, b2]
    onehot = (y[:, None] == ember.arange(10)[None, :]).astype(ember.float32)

    def forward(x):
        return ember.tanh(x @ W1 + b1) @ W2 + b2

    for epoch in range(epochs):
        for start in range(0, X.shape[0], batch):
            logits = forward(X[start:start + batch])
            log_p = logits - ember.logsumexp(logits, axis=1, keepdims=True)
            loss = -(onehot[start:start + batch] * log_p).sum(axis=1).mean()
            loss.backward()
            with ember.no_grad():
                for p in params:
                    p -= lr * p.grad
                    p.grad = None
    with ember.no_grad():
        acc = float((ember.argmax(forward(Xt), axis=1) == yt).mean())
    return float(loss), acc


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--mlp-epochs", type=int, default=20)
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
    t0 = time.perf_counter()
    loss, acc = train_mlp(data, args.mlp_epochs)
    print(f"autograd: 64-64-10 tanh network, last batch loss {loss:.4f}, test accuracy "
          f"{acc * 100:.1f}%, {time.perf_counter() - t0:.2f} s for {args.mlp_epochs} epochs")


if __name__ == "__main__":
    main()
