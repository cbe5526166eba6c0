"""``ember.cuda``'s device API, PyTorch's names over CuPy's runtime: devices,
streams, events, memory statistics of the caching allocator, and seeding.

>>> import ember
>>> if ember.cuda.is_available():
...     s = ember.cuda.Stream()
...     with ember.cuda.stream(s):
...         y = ember.ones(4, device="cuda") * 2
...     s.synchronize()
...     print(y.sum().item())
... else:
...     print(8.0)
8.0
"""
import contextlib

from ember.cuda import _checks

_state = {"checked": False, "ok": False, "reason": "", "init": False}
_peak = {}              # device -> most bytes in use seen (CuPy's pool keeps no peak)


def _check():
    if _state["checked"]:
        return _state["ok"]
    _state["checked"] = True
    try:
        import cupy
    except Exception as err:                            # not installed / broken install
        _state["reason"] = (f"CuPy does not import ({type(err).__name__}: {err}); "
                            f"install ember[cuda]")
        return False
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as err:
        _state["reason"] = f"no usable CUDA driver or device ({type(err).__name__}: {err})"
        return False
    if n < 1:
        _state["reason"] = "no CUDA device is visible"
        return False
    _state["ok"] = True
    return True


def is_available():
    """True when CuPy imports and at least one CUDA device is usable.

    >>> import ember
    >>> isinstance(ember.cuda.is_available(), bool)
    True
    """
    return _check()


def _unavailable_reason():
    _check()
    return _state["reason"] or "CUDA is available"


def _require(what):
    if not is_available():
        raise RuntimeError(f"ember.cuda.{what}: CUDA is not available: {_unavailable_reason()}")


def _init():
    """Start the GPU backend: install the hooks that route GPU arrays to it."""
    if _state["init"]:
        return
    _require("init")
    from ember._core import array as _array
    from ember._core import elementwise as _ew
    from ember._core import gpu_hooks
    from ember.cuda import _runtime, _elementwise, _dispatch, _launch
    _launch.load_driver()
    import cupy
    _launch.set_runtime(cupy.cuda.alloc, cupy.cuda.get_current_stream,
                        _runtime.max_resident_blocks())
    _array._set_gpu_backend(_runtime)
    _ew._set_gpu_elementwise(_elementwise, _dispatch.elementwise_impl)
    _dispatch.load_ops()
    gpu_hooks.gpu_started(_dispatch.call)      # autograd's DiffOp routes GPU calls to it
    _state["init"] = True


def _cp():
    _require("runtime")
    _init()
    import cupy
    return cupy


def _index(device):
    """None / int / 'cuda:N' / Device -> a device index."""
    if device is None:
        return _cp().cuda.runtime.getDevice()
    if isinstance(device, int):
        return device
    from ember._core.array import Device
    d = device if isinstance(device, Device) else Device(device)
    if d.type != "cuda":
        raise ValueError(f"expected a CUDA device, got {d}")
    return _cp().cuda.runtime.getDevice() if d.index is None else d.index


def device_count():
    """The number of visible CUDA devices (0 without CUDA)."""
    if not is_available():
        return 0
    import cupy
    return cupy.cuda.runtime.getDeviceCount()


def current_device():
    return _cp().cuda.runtime.getDevice()


def set_device(device):
    _cp().cuda.runtime.setDevice(_index(device))


def get_device_name(device=None):
    c = _cp()
    return c.cuda.runtime.getDeviceProperties(_index(device))["name"].decode()


class DeviceProperties:
    """What ``get_device_properties`` reports (PyTorch's field names)."""
    __slots__ = ("name", "major", "minor", "total_memory", "multi_processor_count")

    def __init__(self, name, major, minor, total_memory, multi_processor_count):
        self.name = name
        self.major = major
        self.minor = minor
        self.total_memory = total_memory
        self.multi_processor_count = multi_processor_count

    def __repr__(self):
        return (f"DeviceProperties(name={self.name!r}, major={self.major}, minor={self.minor}, "
                f"total_memory={self.total_memory // (1 << 20)}MB, "
                f"multi_processor_count={self.multi_processor_count})")


def get_device_properties(device=None):
    """Name, compute capability, memory and SM count of a CUDA device.

    >>> import ember
    >>> if ember.cuda.is_available():
    ...     p = ember.cuda.get_device_properties(0)
    ...     print(p.major >= 3, p.total_memory > 0)
    ... else:
    ...     print(True, True)
    True True
    """
    _require("get_device_properties")
    p = _cp().cuda.runtime.getDeviceProperties(_index(device))
    name = p["name"]
    return DeviceProperties(name.decode() if isinstance(name, bytes) else str(name),
                            int(p["major"]), int(p["minor"]), int(p["totalGlobalMem"]),
                            int(p["multiProcessorCount"]))


def get_device_capability(device=None):
    """(major, minor) compute capability of a CUDA device, e.g. (9, 0) for an H100."""
    p = get_device_properties(device)
    return p.major, p.minor


def mem_get_info(device=None):
    """(free, total) bytes of a CUDA device's memory, as the driver reports them
    (memory the caching allocator holds counts as used: see memory_reserved)."""
    _require("mem_get_info")
    with device_ctx(_index(device)):
        free, total = _cp().cuda.runtime.memGetInfo()
    return int(free), int(total)


def is_bf16_supported():
    """Whether bfloat16 runs on the current CUDA device: compute capability 8.0 or
    newer (native bfloat16 arithmetic) and a CuPy that knows the dtype (>= 14).
    False without CUDA.

    >>> import ember
    >>> ember.cuda.is_bf16_supported() in (True, False)
    True
    """
    if not is_available():
        return False
    if get_device_capability() < (8, 0):
        return False
    from ember.cuda import _runtime
    try:
        _runtime.check_bfloat16()
    except TypeError:
        return False
    return True


class device:
    """Context manager that makes a CUDA device current (``with ember.cuda.device(1):``)."""

    def __init__(self, device):
        self.idx = _index(device)
        self.prev = None

    def __enter__(self):
        c = _cp()
        self.prev = c.cuda.runtime.getDevice()
        c.cuda.runtime.setDevice(self.idx)
        return self

    def __exit__(self, *exc):
        _cp().cuda.runtime.setDevice(self.prev)
        return False


def synchronize(device=None):
    """Wait until every queued kernel and copy on the device has finished."""
    c = _cp()
    with device_ctx(device):
        c.cuda.runtime.deviceSynchronize()
    _checks.flush()


def device_ctx(dev):
    return device(dev) if dev is not None else contextlib.nullcontext()


class Stream:
    """A CUDA stream (kernels on one stream run in order; streams run concurrently).

    ``Stream()`` makes a new non-blocking stream on the current device;
    ``with ember.cuda.stream(s):`` queues ember ops on it."""

    def __init__(self, device=None, priority=0, *, _cupy_stream=None):
        c = _cp()
        self._dev = _index(device)
        self._outer = []                # the device contexts of nested `with` blocks
        if _cupy_stream is not None:
            self._s = _cupy_stream
        else:
            with device_ctx(self._dev):
                self._s = c.cuda.Stream(non_blocking=True, priority=priority)

    @property
    def cuda_stream(self):
        """The raw cudaStream_t handle, as an int."""
        return self._s.ptr

    @property
    def device(self):
        from ember._core.array import Device
        # (CuPy's null stream object reports -1: it is every device's legacy stream)
        return Device("cuda", self._s.device_id if self._s.device_id >= 0 else self._dev)

    def synchronize(self):
        self._s.synchronize()
        _checks.flush(self._s)

    def query(self):
        """True when all work queued on the stream has finished."""
        return self._s.done

    def record_event(self, event=None):
        event = Event() if event is None else event
        event.record(self)
        return event

    def wait_event(self, event):
        self._s.wait_event(event._e)

    def wait_stream(self, other):
        self.wait_event(other.record_event())

    def __enter__(self):
        # the stream's device becomes current too (PyTorch's StreamContext): CuPy keeps
        # one current stream per device, and the block's ops must queue on this one
        self._outer.append(device(self.device.index).__enter__())
        self._s.__enter__()
        return self

    def __exit__(self, *exc):
        try:
            return self._s.__exit__(*exc)
        finally:
            self._outer.pop().__exit__()

    def __eq__(self, other):
        return isinstance(other, Stream) and other._s.ptr == self._s.ptr

    def __hash__(self):
        return hash(self._s.ptr)

    def __repr__(self):
        return f"<ember.cuda.Stream device={self.device} cuda_stream={self._s.ptr:#x}>"


def current_stream(device=None):
    """The stream ember ops on `device` (default: the current device) queue on now."""
    c = _cp()
    idx = _index(device)
    with device_ctx(idx):
        return Stream(idx, _cupy_stream=c.cuda.get_current_stream())


def default_stream(device=None):
    c = _cp()
    idx = _index(device)
    return Stream(idx, _cupy_stream=c.cuda.Stream.null)


class stream:
    """``with ember.cuda.stream(s):`` makes s the current stream (None: no change)."""

    def __init__(self, s):
        self.s = s

    def __enter__(self):
        if self.s is not None:
            self.s.__enter__()
        return self.s

    def __exit__(self, *exc):
        if self.s is not None:
            self.s.__exit__(*exc)
        return False


class Event:
    """A CUDA event: a marker in a stream, to wait on or to time work between two.

    >>> import ember
    >>> if ember.cuda.is_available():
    ...     a, b = ember.cuda.Event(enable_timing=True), ember.cuda.Event(enable_timing=True)
    ...     a.record(); _ = ember.ones(1000, device="cuda") + 1; b.record(); b.synchronize()
    ...     print(a.elapsed_time(b) >= 0)
    ... else:
    ...     print(True)
    True
    """

    def __init__(self, enable_timing=False, blocking=False, interprocess=False):
        c = _cp()
        self._e = c.cuda.Event(block=blocking, disable_timing=not enable_timing,
                               interprocess=interprocess)

    def record(self, stream=None):
        self._e.record(None if stream is None else stream._s)

    def synchronize(self):
        self._e.synchronize()
        _checks.flush(only_done=True)

    def query(self):
        return self._e.done

    def wait(self, stream=None):
        s = current_stream() if stream is None else stream
        s.wait_event(self)

    def elapsed_time(self, end_event):
        """Milliseconds between this event and `end_event` (both recorded, timing on)."""
        import cupy
        return cupy.cuda.get_elapsed_time(self._e, end_event._e)


# ---------------------------------------------------------------- memory

def _pool():
    return _cp().get_default_memory_pool()


def _note_peak(device_index, used):
    if used > _peak.get(device_index, 0):
        _peak[device_index] = used


def memory_allocated(device=None):
    """Bytes of GPU memory held by live arrays on the device (CuPy's pool in use)."""
    idx = _index(device)
    with device_ctx(idx):
        used = _pool().used_bytes()
    _note_peak(idx, used)
    return used


def max_memory_allocated(device=None):
    """The most bytes memory_allocated has reported, or that ember's allocator saw in
    use, since the start or reset_peak_memory_stats()."""
    idx = _index(device)
    memory_allocated(idx)
    return _peak.get(idx, 0)


def memory_reserved(device=None):
    """Bytes the caching allocator holds from the driver (in use plus cached)."""
    with device_ctx(_index(device)):
        return _pool().total_bytes()


def max_memory_reserved(device=None):
    return memory_reserved(device)


def reset_peak_memory_stats(device=None):
    idx = _index(device)
    with device_ctx(idx):
        _peak[idx] = _pool().used_bytes()


def empty_cache():
    """Give the cached, unused blocks of every device back to the driver (cudaFree)."""
    c = _cp()
    for idx in range(c.cuda.runtime.getDeviceCount()):
        with c.cuda.Device(idx):        # CuPy's pool frees the current device's blocks
            _pool().free_all_blocks()


def memory_stats(device=None):
    idx = _index(device)
    return {"allocated_bytes.all.current": memory_allocated(idx),
            "allocated_bytes.all.peak": max_memory_allocated(idx),
            "reserved_bytes.all.current": memory_reserved(idx)}


# ---------------------------------------------------------------- seeding

def manual_seed(seed):
    """Seed the random generator of the current CUDA device (Philox: seed + offset)."""
    from ember.cuda import ops_random
    ops_random.seed(current_device(), int(seed))


def manual_seed_all(seed):
    from ember.cuda import ops_random
    for i in range(device_count()):
        ops_random.seed(i, int(seed))


def seed():
    """Seed the current device's generator from a fresh random number."""
    import secrets
    manual_seed(secrets.randbits(63))


def initial_seed():
    from ember.cuda import ops_random
    return ops_random.initial_seed(current_device())
