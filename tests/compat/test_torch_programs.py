"""Five small PyTorch training programs, written the way PyTorch's own example programs
are written, run twice: with ember behind the usual PyTorch names (only the imports
differ) and with PyTorch itself.  Data is offline (scikit-learn's digits, synthetic
series, the sonnets in examples/data).  Checks: shapes, and the loss goes down under
both libraries (and, where the run is deterministic, the two runs agree).

A failure here means a PyTorch spelling that ember does not accept yet: the fix is
in ember, never in the program.
"""
import collections
import pathlib
import textwrap

import numpy as np
import pytest

torch_lib = pytest.importorskip("torch")

HEADERS = {
    "ember": """
import ember as torch
import ember.nn as nn
import ember.nn.functional as F
import ember.optim as optim
from ember.optim.lr_scheduler import StepLR
from ember.data import DataLoader, TensorDataset
""",
    "torch": """
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.optim.lr_scheduler import StepLR
from torch.utils.data import DataLoader, TensorDataset
""",
}


@pytest.fixture(autouse=True)
def _one_torch_thread():
    """PyTorch's intra-op threads only slow these tiny programs down (and fight the
    other test processes for the cores)."""
    n = torch_lib.get_num_threads()
    torch_lib.set_num_threads(1)
    yield
    torch_lib.set_num_threads(n)


def _run(program, backend, *args):
    ns = {"__name__": f"program_{backend}"}
    exec(compile(HEADERS[backend] + textwrap.dedent(program), f"<{backend} program>", "exec"),
         ns)
    return ns["main"](*args)


@pytest.fixture(scope="module")
def digits():
    datasets = pytest.importorskip("sklearn.datasets")
    d = datasets.load_digits()
    return (d.images[:768] / 16.0).astype(np.float32), d.target[:768].astype(np.int64)


import ember  # noqa: E402

# the programs need PyTorch's module-level names and Tensor methods (torch.manual_seed,
# x.size(0), new_zeros, ...), which the `torchapi` branch adds: until it is merged the
# ember runs are expected to fail (and are reported as such), never skipped or edited
_TORCH_NAMES = pytest.mark.xfail(not hasattr(ember, "manual_seed"), strict=True,
                                 reason="ember lacks PyTorch's module-level names "
                                        "(torch.manual_seed, ...) until `torchapi` lands")
BACKENDS = [pytest.param("ember", marks=_TORCH_NAMES), "torch"]

# ------------------------------------------------------------------ 1. a CNN classifier

CNN = '''
class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, 1)
        self.conv2 = nn.Conv2d(16, 32, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(128, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        x = self.conv1(x)
        x = F.relu(x)
        x = self.conv2(x)
        x = F.relu(x)
        x = F.max_pool2d(x, 2)
        x = self.dropout1(x)
        x = torch.flatten(x, 1)
        x = self.fc1(x)
        x = F.relu(x)
        x = self.dropout2(x)
        x = self.fc2(x)
        output = F.log_softmax(x, dim=1)
        return output


def train(model, device, train_loader, optimizer, epoch, losses):
    model.train()
    for batch_idx, (data, target) in enumerate(train_loader):
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())


def test(model, device, test_loader):
    model.eval()
    test_loss = 0
    correct = 0
    with torch.no_grad():
        for data, target in test_loader:
            data, target = data.to(device), target.to(device)
            output = model(data)
            test_loss += F.nll_loss(output, target, reduction='sum').item()
            pred = output.argmax(dim=1, keepdim=True)
            correct += pred.eq(target.view_as(pred)).sum().item()
    test_loss /= len(test_loader.dataset)
    return test_loss, correct / len(test_loader.dataset)


def main(images, labels):
    torch.manual_seed(1)
    device = torch.device("cpu")
    data = torch.tensor(images).unsqueeze(1)
    target = torch.tensor(labels)
    train_loader = DataLoader(TensorDataset(data[:512], target[:512]), batch_size=32,
                              shuffle=True)
    test_loader = DataLoader(TensorDataset(data[512:], target[512:]), batch_size=128)
    model = Net().to(device)
    optimizer = optim.Adadelta(model.parameters(), lr=1.0)
    scheduler = StepLR(optimizer, step_size=1, gamma=0.7)
    losses = []
    before, _ = test(model, device, test_loader)
    for epoch in range(1, 4):
        train(model, device, train_loader, optimizer, epoch, losses)
        scheduler.step()
    after, accuracy = test(model, device, test_loader)
    return before, after, accuracy, losses, optimizer.param_groups[0]["lr"]
'''


@pytest.mark.parametrize("backend", BACKENDS)
def test_cnn_classifier(backend, digits):
    before, after, accuracy, losses, lr = _run(CNN, backend, *digits)
    assert len(losses) == 3 * 16
    assert after < 0.8 * before and accuracy > 0.4
    assert np.mean(losses[-16:]) < np.mean(losses[:16])
    assert lr == pytest.approx(0.7 ** 3)


# ------------------------------------------------------------------ 2. a VAE

VAE = '''
class VAE(nn.Module):
    def __init__(self):
        super(VAE, self).__init__()
        self.fc1 = nn.Linear(64, 48)
        self.fc21 = nn.Linear(48, 8)
        self.fc22 = nn.Linear(48, 8)
        self.fc3 = nn.Linear(8, 48)
        self.fc4 = nn.Linear(48, 64)

    def encode(self, x):
        h1 = F.relu(self.fc1(x))
        return self.fc21(h1), self.fc22(h1)

    def reparameterize(self, mu, logvar):
        std = torch.exp(0.5*logvar)
        eps = torch.randn_like(std)
        return mu + eps*std

    def decode(self, z):
        h3 = F.relu(self.fc3(z))
        return torch.sigmoid(self.fc4(h3))

    def forward(self, x):
        mu, logvar = self.encode(x.view(-1, 64))
        z = self.reparameterize(mu, logvar)
        return self.decode(z), mu, logvar


# Reconstruction + KL divergence losses summed over all elements and batch
def loss_function(recon_x, x, mu, logvar):
    BCE = F.binary_cross_entropy(recon_x, x.view(-1, 64), reduction='sum')
    KLD = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return BCE + KLD


def train(model, optimizer, train_loader, epoch):
    model.train()
    train_loss = 0
    for batch_idx, (data, _) in enumerate(train_loader):
        optimizer.zero_grad()
        recon_batch, mu, logvar = model(data)
        loss = loss_function(recon_batch, data, mu, logvar)
        loss.backward()
        train_loss += loss.item()
        optimizer.step()
    return train_loss / len(train_loader.dataset)


def main(images, labels):
    torch.manual_seed(1)
    data = torch.tensor(images)
    train_loader = DataLoader(TensorDataset(data, torch.tensor(labels)), batch_size=64,
                              shuffle=True)
    model = VAE()
    optimizer = optim.Adam(model.parameters(), lr=1e-2)
    epoch_losses = [train(model, optimizer, train_loader, epoch) for epoch in range(1, 6)]
    with torch.no_grad():
        sample = torch.randn(16, 8)
        sample = model.decode(sample)
    return epoch_losses, tuple(sample.shape), float(sample.min()), float(sample.max())
'''


@pytest.mark.parametrize("backend", BACKENDS)
def test_vae(backend, digits):
    losses, shape, lo, hi = _run(VAE, backend, *digits)
    assert shape == (16, 64) and 0.0 <= lo <= hi <= 1.0
    assert losses[-1] < 0.9 * losses[0]


# ------------------------------------------------------------------ 3. an LSTM language model

LSTM_LM = '''
import math


class RNNModel(nn.Module):
    """Container module with an encoder, a recurrent module, and a decoder."""

    def __init__(self, ntoken, ninp, nhid, nlayers, dropout=0.5):
        super(RNNModel, self).__init__()
        self.ntoken = ntoken
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=dropout)
        self.decoder = nn.Linear(nhid, ntoken)
        self.init_weights()
        self.nhid = nhid
        self.nlayers = nlayers

    def init_weights(self):
        initrange = 0.1
        nn.init.uniform_(self.encoder.weight, -initrange, initrange)
        nn.init.zeros_(self.decoder.bias)
        nn.init.uniform_(self.decoder.weight, -initrange, initrange)

    def forward(self, input, hidden):
        emb = self.drop(self.encoder(input))
        output, hidden = self.rnn(emb, hidden)
        output = self.drop(output)
        decoded = self.decoder(output)
        decoded = decoded.view(-1, self.ntoken)
        return F.log_softmax(decoded, dim=1), hidden

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        return (weight.new_zeros(self.nlayers, bsz, self.nhid),
                weight.new_zeros(self.nlayers, bsz, self.nhid))


def batchify(data, bsz):
    nbatch = data.size(0) // bsz
    data = data.narrow(0, 0, nbatch * bsz)
    data = data.view(bsz, -1).t().contiguous()
    return data


def repackage_hidden(h):
    """Wraps hidden states in new Tensors, to detach them from their history."""
    if isinstance(h, torch.Tensor):
        return h.detach()
    else:
        return tuple(repackage_hidden(v) for v in h)


def get_batch(source, i, bptt):
    seq_len = min(bptt, len(source) - 1 - i)
    data = source[i:i+seq_len]
    target = source[i+1:i+1+seq_len].view(-1)
    return data, target


def evaluate(model, criterion, data_source, bptt, eval_batch_size):
    model.eval()
    total_loss = 0.
    hidden = model.init_hidden(eval_batch_size)
    with torch.no_grad():
        for i in range(0, data_source.size(0) - 1, bptt):
            data, targets = get_batch(data_source, i, bptt)
            output, hidden = model(data, hidden)
            hidden = repackage_hidden(hidden)
            total_loss += len(data) * criterion(output, targets).item()
    return total_loss / (len(data_source) - 1)


def main(ids, ntokens):
    torch.manual_seed(1111)
    corpus = torch.tensor(ids, dtype=torch.long)
    train_data = batchify(corpus, 8)
    model = RNNModel(ntokens, 32, 32, 2, dropout=0.2)
    criterion = nn.NLLLoss()
    lr, bptt, clip = 20.0, 16, 0.25
    before = evaluate(model, criterion, train_data, bptt, 8)
    for epoch in range(1, 4):
        model.train()
        hidden = model.init_hidden(8)
        for batch, i in enumerate(range(0, train_data.size(0) - 1, bptt)):
            data, targets = get_batch(train_data, i, bptt)
            hidden = repackage_hidden(hidden)
            model.zero_grad()
            output, hidden = model(data, hidden)
            loss = criterion(output, targets)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            for p in model.parameters():
                p.data.add_(p.grad, alpha=-lr)
    after = evaluate(model, criterion, train_data, bptt, 8)
    return before, after, math.exp(after)
'''


@pytest.fixture(scope="module")
def sonnets():
    path = pathlib.Path(__file__).resolve().parents[2] / "examples" / "data" / "sonnets.txt"
    if not path.exists():
        pytest.skip("examples/data/sonnets.txt is missing")
    words = path.read_text().lower().split()[:2000]
    common = {w for w, _ in collections.Counter(words).most_common(40)}
    words = [w if w in common else "<unk>" for w in words]       # a 41-word vocabulary
    vocab = {w: i for i, w in enumerate(sorted(set(words)))}
    return np.array([vocab[w] for w in words], dtype=np.int64), len(vocab)


@pytest.mark.parametrize("backend", BACKENDS)
def test_lstm_language_model(backend, sonnets):
    before, after, ppl = _run(LSTM_LM, backend, *sonnets)
    assert after < before - 0.5 and np.isfinite(ppl)


# ------------------------------------------------------------------ 4. a regression

REGRESSION = '''
POLY_DEGREE = 4


def make_features(x):
    """Builds features i.e. a matrix with columns [x, x^2, x^3, x^4]."""
    x = x.unsqueeze(1)
    return torch.cat([x ** i for i in range(1, POLY_DEGREE+1)], 1)


def f(x, W_target, b_target):
    """Approximated function."""
    return x.mm(W_target) + b_target.item()


def get_batch(W_target, b_target, batch_size=32):
    """Builds a batch i.e. (x, f(x)) pair."""
    random = torch.randn(batch_size)
    x = make_features(random)
    y = f(x, W_target, b_target)
    return x, y


def main():
    torch.manual_seed(0)
    W_target = torch.randn(POLY_DEGREE, 1) * 5
    b_target = torch.randn(1) * 5
    fc = torch.nn.Linear(W_target.size(0), 1)
    losses = []
    for batch_idx in range(200):
        batch_x, batch_y = get_batch(W_target, b_target)
        fc.zero_grad()
        output = F.smooth_l1_loss(fc(batch_x), batch_y)
        loss = output.item()
        output.backward()
        for param in fc.parameters():
            param.data.add_(-0.1 * param.grad)
        losses.append(loss)
    return losses, fc.weight.view(-1).tolist(), W_target.view(-1).tolist()
'''


@pytest.mark.parametrize("backend", BACKENDS)
def test_regression(backend):
    losses, w, w_target = _run(REGRESSION, backend)
    assert len(w) == len(w_target) == 4
    assert np.mean(losses[-20:]) < 0.2 * np.mean(losses[:20])


# ------------------------------------------------------------------ 5. a sequence predictor

SEQUENCE = '''
class Sequence(nn.Module):
    def __init__(self):
        super(Sequence, self).__init__()
        self.lstm1 = nn.LSTMCell(1, 16)
        self.lstm2 = nn.LSTMCell(16, 16)
        self.linear = nn.Linear(16, 1)

    def forward(self, input, future=0):
        outputs = []
        h_t = torch.zeros(input.size(0), 16, dtype=torch.double)
        c_t = torch.zeros(input.size(0), 16, dtype=torch.double)
        h_t2 = torch.zeros(input.size(0), 16, dtype=torch.double)
        c_t2 = torch.zeros(input.size(0), 16, dtype=torch.double)

        for input_t in input.split(1, dim=1):
            h_t, c_t = self.lstm1(input_t, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        for i in range(future):  # if we should predict the future
            h_t, c_t = self.lstm1(output, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        outputs = torch.cat(outputs, dim=1)
        return outputs


def main(data):
    np.random.seed(0)
    torch.manual_seed(0)
    input = torch.from_numpy(data[3:, :-1])
    target = torch.from_numpy(data[3:, 1:])
    test_input = torch.from_numpy(data[:3, :-1])
    test_target = torch.from_numpy(data[:3, 1:])
    seq = Sequence()
    seq.double()
    criterion = nn.MSELoss()
    optimizer = optim.LBFGS(seq.parameters(), lr=0.8)
    losses = []
    for i in range(2):
        def closure():
            optimizer.zero_grad()
            out = seq(input)
            loss = criterion(out, target)
            losses.append(loss.item())
            loss.backward()
            return loss
        optimizer.step(closure)
        with torch.no_grad():
            future = 5
            pred = seq(test_input, future=future)
            loss = criterion(pred[:, :-future], test_target)
            y = pred.detach().numpy()
    return losses, loss.item(), y.shape
'''


def _sine_waves():
    """Like the example's generate_sine_wave.py, smaller: shifted sines in float64."""
    rng = np.random.default_rng(2)
    T, L, N = 20, 30, 10
    x = np.empty((N, L), np.int64)
    x[:] = np.arange(L) + rng.integers(-4 * T, 4 * T, N).reshape(N, 1)
    return np.sin(x / 1.0 / T).astype(np.float64)


@pytest.mark.parametrize("backend", BACKENDS)
def test_sequence_predictor(backend):
    losses, test_loss, shape = _run("import numpy as np\n" + SEQUENCE, backend, _sine_waves())
    assert shape == (3, 29 + 5)
    assert losses[-1] < 0.5 * losses[0] and np.isfinite(test_loss)
