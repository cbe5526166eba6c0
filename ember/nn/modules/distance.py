"""``nn.CosineSimilarity`` and ``nn.PairwiseDistance`` (PyTorch's layers)."""
from ember.nn.modules.module import Module

__all__ = ["CosineSimilarity", "PairwiseDistance"]


class CosineSimilarity(Module):
    """Cosine similarity of two inputs along `dim` (default 1; `eps` default 1e-8).

    >>> import ember
    >>> from ember import nn
    >>> nn.CosineSimilarity(dim=0)(ember.asarray([1.0, 0.0]), ember.asarray([0.0, 2.0])).item()
    0.0
    """

    def __init__(self, dim=1, eps=1e-8):
        super().__init__()
        self.dim = dim
        self.eps = eps

    def forward(self, x1, x2):
        from ember.nn.functional import cosine_similarity
        return cosine_similarity(x1, x2, self.dim, self.eps)


class PairwiseDistance(Module):
    """p-norm distance of ``x1 - x2 + eps`` over the last dimension (p=2.0, eps=1e-6,
    keepdim=False).

    >>> import ember
    >>> from ember import nn
    >>> d = nn.PairwiseDistance(eps=0.0)(ember.zeros((2, 2)), ember.asarray([[3.0, 4.0]]))
    >>> d.tolist()
    [5.0, 5.0]
    """

    def __init__(self, p=2.0, eps=1e-6, keepdim=False):
        super().__init__()
        self.norm = p
        self.eps = eps
        self.keepdim = keepdim

    def forward(self, x1, x2):
        from ember.nn.functional import pairwise_distance
        return pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)
