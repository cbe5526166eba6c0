"""ember.backends: PyTorch's ``torch.backends`` switches that training scripts set.

``cudnn.benchmark`` and ``cudnn.deterministic`` are accepted and recorded (ember
picks its convolution algorithms itself and they are deterministic);
``mps.is_available()`` is False (ember has no Metal backend);
``cuda.enable_flash_sdp(False)`` turns the fused GPU attention kernel off.

>>> import ember
>>> ember.backends.cudnn.benchmark = True
>>> ember.backends.mps.is_available()
False
"""
from ember.backends import cuda, cudnn, mps

__all__ = ["cuda", "cudnn", "mps"]
