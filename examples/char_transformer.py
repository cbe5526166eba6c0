"""A character-level Transformer language model, trained with ember.

The model reads a window of characters and predicts, at every position, the
next character: token and position embeddings, a stack of pre-norm
``nn.TransformerEncoderLayer`` blocks under a causal mask (a position attends
only to itself and the positions before it), and a linear head over the
vocabulary.  It is trained on a few of Shakespeare's sonnets that ship with
the project (``examples/data/sonnets.txt``), prints the training and
validation loss as they fall, saves a checkpoint with ``ember.save``, and
then writes new text one character at a time, sampling with a temperature.

It trains on a GPU with ``--device cuda`` (the model and every batch move there;
the rest of the program is unchanged), and in mixed precision with ``--amp``:
``ember.amp.autocast`` runs the matrix products in bfloat16 (or float16 on a GPU
without bfloat16, with a ``GradScaler`` against underflowing gradients) while
losses, softmax and normalisation stay in float32.

Run:  python examples/char_transformer.py [--steps N] [--out DIR] [--seed S]
                                          [--temperature T] [--text FILE]
                                          [--device cpu|cuda] [--amp]
"""
import argparse
import math
import os
import time

import numpy

import ember
import ember.nn.functional as F
from ember import nn, optim

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_TEXT = os.path.join(HERE, "data", "sonnets.txt")
DEFAULT_OUT = os.path.join(HERE, "out")


class CharTransformer(nn.Module):
    """Decoder-only Transformer over characters (GPT-style, built from encoder layers
    with a causal mask)."""

    def __init__(self, vocab_size, block_size=64, d_model=96, nhead=4, num_layers=2,
                 dropout=0.1):
        super().__init__()
        self.block_size = block_size
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        self.pos_emb = nn.Embedding(block_size, d_model)
        layer = nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward=4 * d_model,
                                           dropout=dropout, activation="gelu",
                                           batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, num_layers)
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size)

    def forward(self, idx):
        """(batch, time) int64 character ids -> (batch, time, vocab) next-char logits."""
        t = idx.shape[1]
        x = self.tok_emb(idx) + self.pos_emb(ember.arange(t, device=idx.device))
        # -inf above the diagonal, on the model's device
        mask = nn.generate_square_subsequent_mask(t).to(idx.device)
        x = self.blocks(x, mask=mask, is_causal=True)
        return self.head(self.norm(x))


def get_batch(data, block_size, batch_size, rng, device="cpu"):
    """batch_size random windows of the id array `data`, and the same shifted by one,
    on `device`."""
    starts = rng.integers(0, len(data) - block_size - 1, size=batch_size)
    rows = starts[:, None] + numpy.arange(block_size + 1)[None, :]
    chunk = data[rows]
    return (ember.asarray(chunk[:, :-1]).to(device), ember.asarray(chunk[:, 1:]).to(device))


def estimate_loss(model, data, block_size, batches=8, batch_size=32, seed=1234, device="cpu"):
    """Mean next-character cross-entropy over a fixed set of windows (eval mode)."""
    rng = numpy.random.default_rng(seed)           # the same windows at every call
    model.eval()
    total = 0.0
    with ember.no_grad():
        for _ in range(batches):
            x, y = get_batch(data, block_size, batch_size, rng, device)
            logits = model(x)
            total += float(F.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                           y.reshape(-1)))
    model.train()
    return total / batches


def sample(model, prompt_ids, length, temperature, rng):
    """Extend `prompt_ids` by `length` characters drawn from the model's softmax at
    `temperature` (lower: safer, more repetitive; higher: more surprising)."""
    model.eval()
    ids = list(prompt_ids)
    with ember.no_grad():
        for _ in range(length):
            context = ember.asarray(numpy.asarray(ids[-model.block_size:])[None, :])
            logits = model(context)[0, -1] / temperature
            probs = numpy.asarray(F.softmax(logits, dim=-1), dtype=numpy.float64)
            ids.append(int(rng.choice(len(probs), p=probs / probs.sum())))
    model.train()
    return ids


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--block-size", type=int, default=64, help="context length")
    parser.add_argument("--d-model", type=int, default=96)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--text", default=DEFAULT_TEXT, help="training text (UTF-8)")
    parser.add_argument("--out", default=DEFAULT_OUT, help="folder for the checkpoint")
    parser.add_argument("--temperature", type=float, default=0.8)
    parser.add_argument("--sample-length", type=int, default=300)
    parser.add_argument("--prompt", default="Shall I ")
    parser.add_argument("--eval-every", type=int, default=50)
    parser.add_argument("--threads", type=int, default=None,
                        help="threads for ember's kernels (default: ember's)")
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    parser.add_argument("--amp", action="store_true",
                        help="mixed precision: autocast (bfloat16, or float16 + GradScaler)")
    args = parser.parse_args(argv)
    if args.threads is not None:
        ember.set_num_threads(args.threads)
    device = args.device
    if device.startswith("cuda") and not ember.cuda.is_available():
        parser.error(f"--device {device}: no usable CUDA device here")
    kind = "cuda" if device.startswith("cuda") else "cpu"
    # bfloat16 keeps float32's range (no loss scaling needed); float16 needs a GradScaler
    half = ember.bfloat16 if kind == "cpu" or ember.cuda.is_bf16_supported() else ember.float16
    scaler = ember.amp.GradScaler(kind, enabled=args.amp and half == ember.float16)

    with open(args.text, encoding="utf-8") as f:
        text = f.read()
    chars = sorted(set(text))
    stoi = {c: i for i, c in enumerate(chars)}
    data = numpy.array([stoi[c] for c in text], dtype=numpy.int64)
    n_train = int(0.9 * len(data))                  # the last 10% is held out
    train_data, val_data = data[:n_train], data[n_train:]

    ember.random.seed(args.seed)                    # initial weights and dropout
    rng = numpy.random.default_rng(args.seed)       # batch windows and sampling
    model = CharTransformer(len(chars), block_size=args.block_size, d_model=args.d_model,
                            num_layers=args.layers).to(device)
    opt = optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    # short linear warm-up, then cosine decay to 10% of the peak rate
    warmup = max(1, min(50, args.steps // 10))
    sched = optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warmup) * (
        0.1 + 0.45 * (1 + math.cos(math.pi * min(s, args.steps) / max(1, args.steps)))))

    n_params = sum(p.size for p in model.parameters())
    print(f"text: {len(text)} characters, vocabulary {len(chars)}; model: {n_params} "
          f"parameters, context {args.block_size}, {args.layers} layers, d_model {args.d_model}")
    print(f"uniform guess: loss {math.log(len(chars)):.3f}")
    print(f"device {device}" + (f", mixed precision ({half})" if args.amp else ""))
    t0 = time.perf_counter()
    first_loss = estimate_loss(model, val_data, args.block_size, device=device)
    print(f"step {0:5d}  val loss {first_loss:.3f}")
    train_loss = float("nan")
    for step in range(1, args.steps + 1):
        x, y = get_batch(train_data, args.block_size, args.batch_size, rng, device)
        with ember.amp.autocast(kind, dtype=half, enabled=args.amp):
            logits = model(x)
            # (autocast computes the loss in float32)
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        opt.zero_grad()
        scaler.scale(loss).backward()
        scaler.unscale_(opt)                        # clip the true gradients
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(opt)
        scaler.update()
        sched.step()
        # an exponential moving average gives a readable training curve
        train_loss = float(loss) if step == 1 else 0.9 * train_loss + 0.1 * float(loss)
        if step % args.eval_every == 0 or step == args.steps:
            val_loss = estimate_loss(model, val_data, args.block_size, device=device)
            print(f"step {step:5d}  train loss {train_loss:.3f}  val loss {val_loss:.3f}  "
                  f"({time.perf_counter() - t0:.1f} s)", flush=True)
    last_loss = estimate_loss(model, val_data, args.block_size, device=device)
    print(f"val loss {first_loss:.3f} -> {last_loss:.3f} in {args.steps} steps, "
          f"{time.perf_counter() - t0:.1f} s")

    os.makedirs(args.out, exist_ok=True)
    ckpt_path = os.path.join(args.out, "char_transformer.safetensors")
    config = {"vocab_size": len(chars), "block_size": args.block_size,
              "d_model": args.d_model, "num_layers": args.layers}
    ember.save({"model": model.state_dict(), "optimizer": opt.state_dict(),
                "step": args.steps, "config": config,
                "vocab": [ord(c) for c in chars]}, ckpt_path)
    print(f"checkpoint: {ckpt_path}")

    # sample from a fresh model built from the checkpoint alone
    ckpt = ember.load(ckpt_path)
    vocab = [chr(int(c)) for c in ckpt["vocab"]]
    lookup = {c: i for i, c in enumerate(vocab)}
    fresh = CharTransformer(**{k: int(v) for k, v in ckpt["config"].items()})
    fresh.load_state_dict(ckpt["model"])
    prompt = "".join(c for c in args.prompt if c in lookup) or vocab[0]
    ids = sample(fresh, [lookup[c] for c in prompt], args.sample_length, args.temperature,
                 numpy.random.default_rng(args.seed))
    print(f"--- sample (temperature {args.temperature}) ---")
    print("".join(vocab[i] for i in ids))


if __name__ == "__main__":
    main()
