"""Embedding: a lookup table of learnable vectors, indexed by integer arrays.

>>> import ember
>>> from ember import nn
>>> emb = nn.Embedding(10, 3)
>>> emb(ember.asarray([[1, 2], [4, 9]])).shape
(2, 2, 3)
"""
import ember
from ember._core.array import ndarray
from ember.nn.parameter import Parameter
from ember.nn.modules.module import Module
from ember.nn import init
from ember.nn.functional.sparse import embedding

__all__ = ["Embedding"]


class Embedding(Module):
    """A (num_embeddings, embedding_dim) weight initialised from N(0, 1) (the row at
    `padding_idx`, if any, is zero and gets no gradient).

    >>> from ember import nn
    >>> nn.Embedding(5, 2, padding_idx=0)
    Embedding(5, 2, padding_idx=0)
    """

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, max_norm=None,
                 norm_type=2.0, scale_grad_by_freq=False, sparse=False, _weight=None,
                 _freeze=False, device=None, dtype=None):
        super().__init__()
        from ember.nn.modules.module import _check_cuda
        dev = _check_cuda(device, "Embedding")
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        if padding_idx is not None:
            if padding_idx > 0:
                if padding_idx >= num_embeddings:
                    raise AssertionError("Padding_idx must be within num_embeddings")
            elif padding_idx < 0:
                if padding_idx < -num_embeddings:
                    raise AssertionError("Padding_idx must be within num_embeddings")
                padding_idx = num_embeddings + padding_idx
        self.padding_idx = padding_idx
        self.max_norm = max_norm
        self.norm_type = norm_type
        self.scale_grad_by_freq = scale_grad_by_freq
        self.sparse = sparse
        if _weight is None:
            self.weight = Parameter(ember.empty((num_embeddings, embedding_dim), dtype=dtype),
                                    requires_grad=not _freeze)
            self.reset_parameters()
        else:
            if tuple(_weight.shape) != (num_embeddings, embedding_dim):
                raise AssertionError("Shape of weight does not match num_embeddings and "
                                     "embedding_dim")
            self.weight = Parameter(_weight, requires_grad=not _freeze)
        if dev is not None:
            self.to(dev)

    def reset_parameters(self):
        init.normal_(self.weight)
        self._fill_padding_idx_with_zero()

    def _fill_padding_idx_with_zero(self):
        if self.padding_idx is not None:
            with ember.no_grad():
                self.weight[self.padding_idx] = 0

    def forward(self, input):
        return embedding(input, self.weight, self.padding_idx, self.max_norm, self.norm_type,
                         self.scale_grad_by_freq, self.sparse)

    def extra_repr(self):
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        if self.max_norm is not None:
            s += f", max_norm={self.max_norm}"
        if self.norm_type != 2:
            s += f", norm_type={self.norm_type}"
        if self.scale_grad_by_freq is not False:
            s += ", scale_grad_by_freq=True"
        if self.sparse is not False:
            s += ", sparse=True"
        return s

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, padding_idx=None, max_norm=None,
                        norm_type=2.0, scale_grad_by_freq=False, sparse=False):
        """An Embedding whose weight is the 2-d array `embeddings` (sharing its memory); frozen
        (no gradient) unless ``freeze=False``.

        >>> import ember
        >>> from ember import nn
        >>> e = nn.Embedding.from_pretrained(ember.eye(3))
        >>> e(ember.asarray([2])).tolist(), e.weight.requires_grad
        ([[0.0, 0.0, 1.0]], False)
        """
        if not isinstance(embeddings, ndarray):
            embeddings = ember.asarray(embeddings)
        if embeddings.ndim != 2:
            raise ValueError("Embeddings parameter is expected to be 2-dimensional")
        rows, cols = embeddings.shape
        return cls(num_embeddings=rows, embedding_dim=cols, _weight=embeddings,
                   _freeze=freeze, padding_idx=padding_idx, max_norm=max_norm,
                   norm_type=norm_type, scale_grad_by_freq=scale_grad_by_freq, sparse=sparse)
