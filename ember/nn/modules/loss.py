"""Loss modules: thin wrappers that store the options and call ember.nn.functional.

Constructor arguments follow PyTorch (including the deprecated size_average /
reduce flags); class weights and pos_weight are registered as buffers.
"""
from ember.nn import functional as F
from ember.nn.modules.module import Module

__all__ = ["MSELoss", "L1Loss", "SmoothL1Loss", "HuberLoss", "CrossEntropyLoss", "NLLLoss",
           "BCELoss", "BCEWithLogitsLoss", "KLDivLoss"]


class _Loss(Module):
    def __init__(self, size_average=None, reduce=None, reduction="mean"):
        super().__init__()
        if size_average is not None or reduce is not None:
            from ember.nn.functional.loss import _legacy_reduction
            reduction = _legacy_reduction(size_average, reduce)
        self.reduction = reduction


class _WeightedLoss(_Loss):
    def __init__(self, weight=None, size_average=None, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)


class MSELoss(_Loss):
    """Mean squared error (see ``ember.nn.functional.mse_loss``).

    >>> import ember
    >>> from ember import nn
    >>> nn.MSELoss()(ember.asarray([1.0, 2.0]), ember.asarray([1.0, 4.0])).item()
    2.0
    """

    def forward(self, input, target):
        return F.mse_loss(input, target, reduction=self.reduction)


class L1Loss(_Loss):
    """Mean absolute error (see ``ember.nn.functional.l1_loss``).

    >>> import ember
    >>> from ember import nn
    >>> nn.L1Loss(reduction="sum")(ember.asarray([1.0, 2.0]), ember.zeros(2)).item()
    3.0
    """

    def forward(self, input, target):
        return F.l1_loss(input, target, reduction=self.reduction)


class SmoothL1Loss(_Loss):
    """Smooth L1 loss with threshold `beta` (see ``ember.nn.functional.smooth_l1_loss``).

    >>> import ember
    >>> from ember import nn
    >>> nn.SmoothL1Loss(beta=2.0)(ember.asarray([1.0]), ember.zeros(1)).item()
    0.25
    """

    def __init__(self, size_average=None, reduce=None, reduction="mean", beta=1.0):
        super().__init__(size_average, reduce, reduction)
        self.beta = beta

    def forward(self, input, target):
        return F.smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)


class HuberLoss(_Loss):
    """Huber loss with threshold `delta` (see ``ember.nn.functional.huber_loss``).

    >>> import ember
    >>> from ember import nn
    >>> nn.HuberLoss(delta=0.5)(ember.asarray([2.0]), ember.zeros(1)).item()
    0.875
    """

    def __init__(self, reduction="mean", delta=1.0):
        super().__init__(reduction=reduction)
        self.delta = delta

    def forward(self, input, target):
        return F.huber_loss(input, target, reduction=self.reduction, delta=self.delta)


class CrossEntropyLoss(_WeightedLoss):
    """Cross-entropy between logits and class indices or class probabilities (see
    ``ember.nn.functional.cross_entropy``).

    >>> import ember
    >>> from ember import nn
    >>> loss = nn.CrossEntropyLoss(label_smoothing=0.1)
    >>> round(loss(ember.asarray([[2.0, 0.0]]), ember.asarray([0])).item(), 4)
    0.2269
    """

    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None,
                 reduction="mean", label_smoothing=0.0):
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing

    def forward(self, input, target):
        return F.cross_entropy(input, target, weight=self.weight, ignore_index=self.ignore_index,
                               reduction=self.reduction, label_smoothing=self.label_smoothing)


class NLLLoss(_WeightedLoss):
    """Negative log-likelihood of log-probabilities at class indices (see
    ``ember.nn.functional.nll_loss``).

    >>> import ember
    >>> from ember import nn
    >>> nn.NLLLoss()(ember.asarray([[-1.0, -2.0]]), ember.asarray([1])).item()
    2.0
    """

    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None,
                 reduction="mean"):
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = ignore_index

    def forward(self, input, target):
        return F.nll_loss(input, target, weight=self.weight, ignore_index=self.ignore_index,
                          reduction=self.reduction)


class BCELoss(_WeightedLoss):
    """Binary cross-entropy on probabilities (see
    ``ember.nn.functional.binary_cross_entropy``).

    >>> import ember
    >>> from ember import nn
    >>> round(nn.BCELoss()(ember.asarray([0.5]), ember.asarray([0.0])).item(), 4)
    0.6931
    """

    def forward(self, input, target):
        return F.binary_cross_entropy(input, target, weight=self.weight,
                                      reduction=self.reduction)


class BCEWithLogitsLoss(_Loss):
    """Binary cross-entropy on logits, with optional `weight` and `pos_weight` buffers (see
    ``ember.nn.functional.binary_cross_entropy_with_logits``).

    >>> import ember
    >>> from ember import nn
    >>> loss = nn.BCEWithLogitsLoss(pos_weight=ember.asarray([2.0]))
    >>> round(loss(ember.zeros((1, 1)), ember.ones((1, 1))).item(), 4)
    1.3863
    """

    def __init__(self, weight=None, size_average=None, reduce=None, reduction="mean",
                 pos_weight=None):
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)
        self.register_buffer("pos_weight", pos_weight)

    def forward(self, input, target):
        return F.binary_cross_entropy_with_logits(input, target, self.weight,
                                                  pos_weight=self.pos_weight,
                                                  reduction=self.reduction)


class KLDivLoss(_Loss):
    """Kullback-Leibler divergence with log-probability input (see
    ``ember.nn.functional.kl_div``).

    >>> import ember
    >>> from ember import nn
    >>> p = ember.asarray([[0.25, 0.75]])
    >>> nn.KLDivLoss(reduction="batchmean")(ember.log(p), p).item()
    0.0
    """

    def __init__(self, size_average=None, reduce=None, reduction="mean", log_target=False):
        super().__init__(size_average, reduce, reduction)
        self.log_target = log_target

    def forward(self, input, target):
        return F.kl_div(input, target, reduction=self.reduction, log_target=self.log_target)
