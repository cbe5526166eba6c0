"""ember.backends: PyTorch's ``torch.backends`` switches that training scripts set.

``cudnn.benchmark`` and ``cudnn.deterministic`` are accepted and recorded (ember
picks its convolution algorithms itself and they are deterministic);
``mps.is_available()`` is False (ember has no Metal backend).

>>> import ember
>>> ember.backends.cudnn.benchmark = True
>>> ember.backends.mps.is_available()
False
"""
from ember.backends import cudnn, mps

__all__ = ["cudnn", "mps"]
