"""ember.accelerator: PyTorch's device-agnostic ``torch.accelerator`` functions.

The accelerator is CUDA when a usable GPU is present (``ember.cuda.is_available()``),
else there is none and ``current_accelerator()`` is None, as in PyTorch.

>>> import ember
>>> dev = ember.accelerator.current_accelerator() if ember.accelerator.is_available() else ember.device("cpu")
>>> ember.zeros(2, device=dev).device == dev
True
"""
__all__ = ["is_available", "current_accelerator", "device_count", "current_device_index",
           "set_device_index", "synchronize"]


def _cuda():
    import ember.cuda
    return ember.cuda


def is_available():
    """True when an accelerator (a usable CUDA GPU) is present.

    >>> import ember
    >>> isinstance(ember.accelerator.is_available(), bool)
    True
    """
    return bool(_cuda().is_available())


def current_accelerator(check_available=False):
    """``ember.device('cuda')`` when a GPU is usable, else None.

    >>> import ember
    >>> ember.accelerator.current_accelerator() in (None, ember.device("cuda"))
    True
    """
    from ember._core.array import Device
    return Device("cuda") if is_available() else None


def device_count():
    """The number of accelerator devices (0 without a GPU).

    >>> import ember
    >>> ember.accelerator.device_count() >= 0
    True
    """
    return _cuda().device_count() if is_available() else 0


def _need(opname):
    if not is_available():
        raise RuntimeError(f"accelerator.{opname}: no accelerator is available "
                           f"(ember.cuda.is_available() is False)")


def current_device_index():
    """The index of the current accelerator device (needs one)."""
    _need("current_device_index")
    return _cuda().current_device()


def set_device_index(device):
    """Make accelerator device `device` (an index or a device) current (needs one)."""
    _need("set_device_index")
    _cuda().set_device(device)


def synchronize(device=None):
    """Wait for all work queued on the accelerator (needs one)."""
    _need("synchronize")
    _cuda().synchronize(device)
