"""``torch.backends.cuda``'s attention switches.

``enable_flash_sdp(False)`` makes ``F.scaled_dot_product_attention`` and
``nn.MultiheadAttention`` use the math path (scores materialised: cuBLAS GEMMs around a
row softmax) on CUDA arrays where the fused kernel (ember/cuda/kernels/attention.cu)
would otherwise run; ``True`` (the default) restores it.  For comparisons and for
debugging; results agree to rounding.

>>> import ember
>>> ember.backends.cuda.flash_sdp_enabled()
True
>>> ember.backends.cuda.enable_flash_sdp(False)
>>> ember.backends.cuda.flash_sdp_enabled()
False
>>> ember.backends.cuda.enable_flash_sdp(True)
"""
__all__ = ["enable_flash_sdp", "flash_sdp_enabled"]

_FLASH = [True]


def enable_flash_sdp(enabled):
    """Allow (True) or forbid (False) the fused flash-attention kernel."""
    _FLASH[0] = bool(enabled)


def flash_sdp_enabled():
    """Whether the fused flash-attention kernel may run."""
    return _FLASH[0]
