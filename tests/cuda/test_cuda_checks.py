"""GPU input checks that do not wait for the GPU (ember/cuda/_checks.py).

The first part tests the queue itself with stand-in flags and streams, so it runs
on every machine (it never imports CuPy).  The second part runs the ops whose
input only the GPU can check (embedding indices, class targets, index arrays,
binary_cross_entropy's range) with bad input on the test device: the error must
be the CPU's, raised at the op in 'sync' mode, and by the next synchronisation
(not necessarily at the op) in the default 'async' mode.  Those cases skip
without a GPU (``EMBER_GPU_TESTS_ON_CPU=1`` dry-runs them on the CPU, where
every op raises at once).
"""
import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember.cuda import _checks
from cuda_helpers import GPU_MARK, HAVE_GPU, gpu, real_gpu


# ------------------------------------------------------------ the queue (no GPU)

class FakeStream:
    _next = [1]

    def __init__(self, done=True):
        self.syncs = 0
        self.done = done
        self.device_id = 0
        self.ptr = self._next[0]
        self._next[0] += 1

    def synchronize(self):
        self.syncs += 1


@pytest.fixture
def fake_flags(monkeypatch):
    """Flags are Python bools; reading them records how many were read."""
    reads = []

    def read(flags):
        reads.append(len(flags))
        return [bool(f) for f in flags]
    monkeypatch.setattr(_checks, "_read_flags", read)
    monkeypatch.setitem(_checks._state, "mode", "async")
    monkeypatch.setattr(_checks, "_pending", [])
    return reads


def test_async_check_waits_for_flush_then_raises_with_a_note(fake_flags):
    s = FakeStream()
    _checks.defer(True, lambda: IndexError("embedding: index 9 is out of range"), s)
    assert _checks.pending_count() == 1 and fake_flags == [] and s.syncs == 0
    with pytest.raises(IndexError) as err:
        _checks.flush()
    msg = str(err.value)
    assert msg.startswith("embedding: index 9 is out of range")
    assert "asynchronously" in msg and "set_check_mode('sync')" in msg
    assert s.syncs == 1 and fake_flags == [1]
    assert _checks.pending_count() == 0
    _checks.flush()                                 # nothing left: no raise, no read
    assert fake_flags == [1]


def test_passing_checks_raise_nothing_and_are_read_together(fake_flags):
    s1, s2 = FakeStream(), FakeStream()
    for i in range(5):
        _checks.defer(False, lambda: AssertionError("never built"), s1 if i % 2 else s2)
    _checks.flush()
    assert fake_flags == [5]                        # one read for all of them
    assert (s1.syncs, s2.syncs) == (1, 1)           # each stream waited for once
    assert _checks.pending_count() == 0


def test_the_first_failed_check_in_op_order_is_raised_and_the_rest_dropped(fake_flags):
    s = FakeStream()
    _checks.defer(False, lambda: AssertionError("passed"), s)
    _checks.defer(True, lambda: IndexError("first"), s)
    _checks.defer(True, lambda: ValueError("second"), s)
    with pytest.raises(IndexError, match="^first"):
        _checks.flush()
    assert _checks.pending_count() == 0
    _checks.flush()


def test_a_read_on_one_stream_reports_only_that_streams_checks(fake_flags):
    """Reading a value waits for its own stream only: checks queued on another stream
    stay pending (and that stream is not waited for) until it is synchronised."""
    mine, other = FakeStream(), FakeStream(done=False)
    _checks.defer(True, lambda: IndexError("on the other stream"), other)
    _checks.defer(False, lambda: AssertionError("never"), mine)
    _checks.flush(mine)
    assert (mine.syncs, other.syncs) == (1, 0) and _checks.pending_count() == 1
    _checks.flush(only_done=True)           # an Event wait: the other stream is still busy
    assert other.syncs == 0 and _checks.pending_count() == 1
    other.done = True
    with pytest.raises(IndexError, match="on the other stream"):
        _checks.flush(only_done=True)
    assert _checks.pending_count() == 0


def test_streams_are_matched_by_handle_not_by_object(fake_flags):
    s = FakeStream()
    same = FakeStream()
    same.ptr = s.ptr                        # another Python object for the same stream
    _checks.defer(True, lambda: IndexError("same stream"), s)
    with pytest.raises(IndexError, match="same stream"):
        _checks.flush(same)


def test_sync_mode_raises_at_the_check_without_the_note(fake_flags, monkeypatch):
    monkeypatch.setitem(_checks._state, "mode", "sync")
    with pytest.raises(ValueError) as err:
        _checks.defer(True, lambda: ValueError("binary_cross_entropy: bad"), FakeStream())
    assert str(err.value) == "binary_cross_entropy: bad"
    _checks.defer(False, lambda: AssertionError("never"), FakeStream())
    assert _checks.pending_count() == 0


def test_off_mode_queues_nothing(fake_flags, monkeypatch):
    monkeypatch.setitem(_checks._state, "mode", "off")
    assert not _checks.checks_enabled()
    _checks.defer(True, lambda: AssertionError("never"), FakeStream())
    assert _checks.pending_count() == 0 and fake_flags == []


def test_a_full_queue_is_read_without_waiting_for_a_sync_point(fake_flags, monkeypatch):
    monkeypatch.setattr(_checks, "MAX_PENDING", 4)
    s = FakeStream()
    for _ in range(3):
        _checks.defer(False, lambda: AssertionError("never"), s)
    assert _checks.pending_count() == 3 and fake_flags == []
    _checks.defer(False, lambda: AssertionError("never"), s)
    assert _checks.pending_count() == 0 and fake_flags == [4]
    for _ in range(3):
        _checks.defer(False, lambda: AssertionError("never"), s)
    with pytest.raises(IndexError):
        _checks.defer(True, lambda: IndexError("late"), s)


def test_set_check_mode_reports_pending_checks_first(fake_flags):
    _checks.defer(True, lambda: IndexError("pending"), FakeStream())
    with pytest.raises(IndexError, match="pending"):
        ember.cuda.set_check_mode("sync")
    assert ember.cuda.get_check_mode() == "async"   # not switched: the error came first
    ember.cuda.set_check_mode("sync")
    assert ember.cuda.get_check_mode() == "sync"
    ember.cuda.set_check_mode("async")


def test_set_check_mode_rejects_unknown_modes():
    with pytest.raises(ValueError, match="set_check_mode: mode must be one of"):
        ember.cuda.set_check_mode("lazy")


@pytest.mark.parametrize("value,expected", [("sync", "sync"), ("OFF", "off"), ("", "async"),
                                            ("async", "async")])
def test_environment_variable_sets_the_initial_mode(monkeypatch, value, expected):
    monkeypatch.setenv("EMBER_CUDA_CHECKS", value)
    assert _checks._initial_mode() == expected


def test_unknown_environment_value_falls_back_to_async_and_says_so(monkeypatch, capsys):
    monkeypatch.setenv("EMBER_CUDA_CHECKS", "eventually")
    assert _checks._initial_mode() == "async"
    assert "EMBER_CUDA_CHECKS='eventually'" in capsys.readouterr().err


def test_a_check_pending_at_exit_is_printed(fake_flags, capsys):
    _checks.defer(True, lambda: IndexError("never synchronised"), FakeStream())
    _checks._report_at_exit()
    err = capsys.readouterr().err
    assert "no synchronisation reported it before exit" in err
    assert "IndexError: never synchronised" in err


# ------------------------------------------------------------ the ops (GPU)

def _bad_inputs():
    rng = np.random.default_rng(0)
    logits = rng.standard_normal((4, 5)).astype(np.float32)
    return {
        "embedding": (IndexError, "embedding: index 7 is out of range",
                      lambda: F.embedding(gpu(np.array([[1, 7], [0, 2]])),
                                          gpu(rng.standard_normal((6, 3)).astype(np.float32)))),
        "cross_entropy": (IndexError, r"cross_entropy: target 5 \(at position 2\)",
                          lambda: F.cross_entropy(gpu(logits), gpu(np.array([0, 1, 5, 2])))),
        "cross_entropy_weighted": (
            IndexError, r"cross_entropy: target -3 \(at position 1\)",
            lambda: F.cross_entropy(gpu(logits), gpu(np.array([0, -3, 4, 2])),
                                    weight=gpu(np.ones(5, np.float32)))),
        "nll_loss": (IndexError, r"nll_loss: target 9 \(at position 3\)",
                     lambda: F.nll_loss(gpu(logits), gpu(np.array([0, 1, 2, 9])))),
        "getitem": (IndexError, "index 6 is out of bounds for axis 0 with size 4",
                    lambda: gpu(logits)[gpu(np.array([0, 6]))]),
        "index_add": (IndexError, "index -5 is out of bounds for axis 0 with size 4",
                      lambda: ember.index_add(gpu(logits), 0, gpu(np.array([-5])),
                                              gpu(np.ones((1, 5), np.float32)))),
        "integer_power": (ValueError, "Integers to negative integer powers are not allowed",
                          lambda: gpu(np.array([2, 3])) ** gpu(np.array([1, -1]))),
        "binary_cross_entropy": (
            ValueError, "binary_cross_entropy: all elements of input should be between 0 and 1",
            lambda: F.binary_cross_entropy(gpu(np.array([0.5, 1.5], np.float32)),
                                           gpu(np.array([0.0, 1.0], np.float32)))),
    }


CASES = sorted(_bad_inputs())


@pytest.fixture
def check_mode():
    """Restores the check mode (and drops nothing: each test reports its own errors)."""
    old = ember.cuda.get_check_mode()
    yield ember.cuda.set_check_mode
    ember.cuda.set_check_mode(old)


@GPU_MARK[0]
@GPU_MARK[1]
@pytest.mark.parametrize("case", CASES)
def test_bad_input_raises_the_cpu_error_by_the_next_read(case, check_mode):
    check_mode("async")
    exc, msg, run = _bad_inputs()[case]
    with pytest.raises(exc, match=msg):
        out = run()
        out.sum().item()                            # a read: pending checks report here
    if HAVE_GPU:
        assert _checks.pending_count() == 0


@GPU_MARK[0]
@GPU_MARK[1]
@pytest.mark.parametrize("case", CASES)
def test_sync_mode_raises_at_the_op(case, check_mode):
    check_mode("sync")
    exc, msg, run = _bad_inputs()[case]
    with pytest.raises(exc, match=msg):
        run()


@real_gpu
@pytest.mark.parametrize("case", CASES)
def test_async_mode_returns_at_once_and_synchronize_reports(case, check_mode):
    check_mode("async")
    exc, msg, run = _bad_inputs()[case]
    out = run()                                     # queued: no wait, no raise
    assert out.is_cuda and _checks.pending_count() >= 1
    with pytest.raises(exc, match=msg) as err:
        ember.cuda.synchronize()
    assert "set_check_mode('sync')" in str(err.value)
    assert _checks.pending_count() == 0
    ember.cuda.synchronize()                        # reported once


@real_gpu
def test_good_input_leaves_nothing_to_report(check_mode):
    check_mode("async")
    w = gpu(np.arange(12, dtype=np.float32).reshape(6, 2))
    idx = gpu(np.array([5, 0, 3]))
    out = F.embedding(idx, w)
    np.testing.assert_array_equal(out.cpu(), np.arange(12, dtype=np.float32).reshape(6, 2)[[5, 0, 3]])
    assert _checks.pending_count() == 0


@real_gpu
def test_writes_check_before_writing(check_mode):
    """x[idx] = v waits for its check: a wrapped index must never land in x."""
    check_mode("async")
    x = gpu(np.zeros(4, np.float32))
    with pytest.raises(IndexError, match="index 4 is out of bounds for axis 0 with size 4"):
        x[gpu(np.array([1, 4]))] = 1.0
    np.testing.assert_array_equal(x.cpu(), np.zeros(4, np.float32))


@real_gpu
def test_exporting_memory_reports_pending_checks(check_mode):
    cupy = pytest.importorskip("cupy")
    check_mode("async")
    out = F.embedding(gpu(np.array([9])), gpu(np.ones((3, 2), np.float32)))
    with pytest.raises(IndexError, match="embedding: index 9"):
        cupy.asarray(out)
