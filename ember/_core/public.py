"""The public namespace, for code under it that must call public ops.

A public op (``ember.sum``, ``ember.where``...) is the plain function of ember._api
with autograd recording and device dispatch around it, which the layers above
install on the ``ember`` module.  Code in the lower layers that builds a result from
public ops (so that the result records its gradient and runs on the arrays'
device) reaches them through ``ops()``, at call time: the ``ember`` module is
always imported by then, and no lower module imports the layers above it.

>>> from ember._core.public import ops
>>> ops().sum(ops().ones(3)).item()
3.0
"""
import sys


def ops():
    """The ``ember`` module (the public namespace, with autograd and device dispatch)."""
    return sys.modules["ember"]
