"""The cross-device copy (``x.to('cuda')`` / ``x.cpu()`` of an array in a graph):
its gradient is the incoming gradient copied back to the input's device."""
from ember._core.array import check_device
from ember.autograd.registry import defgrad


def to_device(x, device):
    """x copied to `device` (the op ``x.to(device)`` records when x requires grad).

    >>> import ember
    >>> ember._to_device(ember.ones(2), "cpu").tolist()
    [1.0, 1.0]
    """
    d = check_device(device, "to")
    if d == x.device:
        return x.copy()
    return x.to_device(d)         # moving data (the array's own copy across devices)


@defgrad("_to_device")
def _(g, res, x, device):
    return (g.to(x.device),)
