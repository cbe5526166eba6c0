"""``torch.backends.cudnn``'s flags, accepted so scripts that set them run.

ember chooses its cuDNN / own-kernel algorithms itself, and its convolutions are
deterministic, so ``benchmark`` and ``deterministic`` change nothing.

>>> import ember
>>> ember.backends.cudnn.deterministic = True
>>> ember.backends.cudnn.deterministic
True
"""
benchmark = False
deterministic = False
enabled = True
allow_tf32 = True


def is_available():
    """True when cuDNN can be used (a usable GPU with cuDNN installed).

    >>> import ember
    >>> isinstance(ember.backends.cudnn.is_available(), bool)
    True
    """
    import ember.cuda
    if not ember.cuda.is_available():
        return False
    try:
        from cupy.cuda import cudnn  # noqa: F401
    except Exception:
        return False
    return True
