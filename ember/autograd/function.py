"""Custom differentiable functions (ember.autograd.Function). Being written."""


class Function:
    pass


def once_differentiable(fn):
    return fn
