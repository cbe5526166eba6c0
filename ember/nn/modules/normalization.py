"""Normalization modules: BatchNorm1d/2d/3d, LayerNorm, GroupNorm (PyTorch's API).

BatchNorm keeps running_mean / running_var / num_batches_tracked buffers
(track_running_stats=True), updates them in training mode (momentum=None: a
cumulative average) and normalizes with them in evaluation mode.
"""
import numbers

import ember as _E
from ember._api._util import numpy_view
from ember.nn import functional as F
from ember.nn import init
from ember.nn.modules.module import Module
from ember.nn.parameter import Parameter

__all__ = ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "LayerNorm", "GroupNorm"]


def _affine_parameters(module, affine, bias, shape, dtype):
    """The optional weight (and bias) of `shape` of the normalization layers (left
    uninitialised: each layer's reset_parameters fills them)."""
    module.register_parameter("weight", Parameter(_E.empty(shape, dtype=dtype)) if affine
                              else None)
    module.register_parameter("bias", Parameter(_E.empty(shape, dtype=dtype))
                              if affine and bias else None)


def _reset_affine(module):
    if module.weight is not None:
        init.ones_(module.weight)
    if module.bias is not None:
        init.zeros_(module.bias)


class _NormBase(Module):
    _version = 2

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, device=None, dtype=None, *, bias=True):
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        _affine_parameters(self, affine, bias, (num_features,), dtype)
        if track_running_stats:
            self.register_buffer("running_mean", _E.zeros(num_features, dtype=dtype))
            self.register_buffer("running_var", _E.ones(num_features, dtype=dtype))
            self.register_buffer("num_batches_tracked", _E.zeros((), dtype=_E.int64))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self):
        """Running mean 0, running variance 1, no batches tracked."""
        if self.track_running_stats:
            with _E.no_grad():
                self.running_mean[...] = 0
                self.running_var[...] = 1
                self.num_batches_tracked[...] = 0

    def reset_parameters(self):
        """Reset the running statistics and set weight to 1, bias to 0."""
        self.reset_running_stats()
        _reset_affine(self)

    def _check_input_dim(self, input):
        raise NotImplementedError

    def extra_repr(self):
        return ("{num_features}, eps={eps}, momentum={momentum}, affine={affine}, "
                "bias={use_bias}, track_running_stats={track_running_stats}"
                .format(**self.__dict__, use_bias=self.bias is not None))

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs):
        version = local_metadata.get("version", None) if local_metadata else None
        if (version is None or version < 2) and self.track_running_stats:
            key = prefix + "num_batches_tracked"
            if key not in state_dict:
                state_dict[key] = (self.num_batches_tracked
                                   if self.num_batches_tracked is not None
                                   else _E.zeros((), dtype=_E.int64))
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys,
                                      unexpected_keys, error_msgs)


class _BatchNorm(_NormBase):
    def forward(self, input):
        self._check_input_dim(input)
        momentum = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats:
            nbt = self.num_batches_tracked
            if nbt is not None:
                if nbt.is_cuda:
                    with _E.no_grad():
                        nbt += 1            # stays on the GPU (momentum=None reads it below)
                else:
                    numpy_view(nbt)[()] += 1
                    nbt._bump_version()
                momentum = 1.0 / float(nbt.item()) if self.momentum is None else self.momentum
        bn_training = self.training or (self.running_mean is None and self.running_var is None)
        use_running = not self.training or self.track_running_stats
        return F.batch_norm(input, self.running_mean if use_running else None,
                            self.running_var if use_running else None, self.weight, self.bias,
                            bn_training, momentum, self.eps)


class BatchNorm1d(_BatchNorm):
    """Batch normalization over (N, C) or (N, C, L) input (``bias=False``: weight only).

    >>> import ember
    >>> from ember import nn
    >>> bn = nn.BatchNorm1d(2)
    >>> y = bn(ember.asarray([[1.0, 2.0], [3.0, 6.0]]))
    >>> [round(v, 3) for v in y[:, 1].tolist()], [round(v, 3) for v in bn.running_mean.tolist()]
    ([-1.0, 1.0], [0.2, 0.4])
    """

    def _check_input_dim(self, input):
        if input.ndim != 2 and input.ndim != 3:
            raise ValueError(f"BatchNorm1d: expected 2D or 3D input (got {input.ndim}D input "
                             f"of shape {tuple(input.shape)})")


class BatchNorm2d(_BatchNorm):
    """Batch normalization over (N, C, H, W) input, per channel.

    >>> import ember
    >>> from ember import nn
    >>> bn = nn.BatchNorm2d(3).eval()
    >>> bn(ember.ones((1, 3, 2, 2))).shape
    (1, 3, 2, 2)
    """

    def _check_input_dim(self, input):
        if input.ndim != 4:
            raise ValueError(f"BatchNorm2d: expected 4D input (got {input.ndim}D input of "
                             f"shape {tuple(input.shape)})")


class BatchNorm3d(_BatchNorm):
    """Batch normalization over (N, C, D, H, W) input, per channel.

    >>> import ember
    >>> from ember import nn
    >>> nn.BatchNorm3d(2)(ember.ones((2, 2, 1, 1, 2))).shape
    (2, 2, 1, 1, 2)
    """

    def _check_input_dim(self, input):
        if input.ndim != 5:
            raise ValueError(f"BatchNorm3d: expected 5D input (got {input.ndim}D input of "
                             f"shape {tuple(input.shape)})")



class LayerNorm(Module):
    """Layer normalization over the trailing `normalized_shape` dimensions, with a learned
    elementwise weight and bias (``elementwise_affine``; ``bias=False`` drops the bias).

    >>> import ember
    >>> from ember import nn
    >>> ln = nn.LayerNorm(2)
    >>> [round(v, 3) for v in ln(ember.asarray([[1.0, 3.0]]))[0].tolist()]
    [-1.0, 1.0]
    """

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True,
                 device=None, dtype=None):
        super().__init__()
        if isinstance(normalized_shape, numbers.Integral):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(int(d) for d in normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        _affine_parameters(self, elementwise_affine, bias, self.normalized_shape, dtype)
        self.reset_parameters()

    def reset_parameters(self):
        """Weight 1, bias 0."""
        _reset_affine(self)

    def forward(self, input):
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return ("{normalized_shape}, eps={eps}, elementwise_affine={elementwise_affine}, "
                "bias={use_bias}".format(**self.__dict__, use_bias=self.bias is not None))


class GroupNorm(Module):
    """Group normalization: `num_channels` channels in `num_groups` groups, each group
    normalized per sample; per-channel weight and bias when `affine` (``bias=False``:
    weight only).

    >>> import ember
    >>> from ember import nn
    >>> gn = nn.GroupNorm(1, 2)
    >>> [round(v, 3) for v in gn(ember.asarray([[1.0, 3.0]]))[0].tolist()]
    [-1.0, 1.0]
    """

    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True, device=None,
                 dtype=None, *, bias=True):
        super().__init__()
        if num_channels % num_groups != 0:
            raise ValueError(f"GroupNorm: num_channels ({num_channels}) must be divisible by "
                             f"num_groups ({num_groups})")
        self.num_groups = num_groups
        self.num_channels = num_channels
        self.eps = eps
        self.affine = affine
        _affine_parameters(self, affine, bias, (num_channels,), dtype)
        self.reset_parameters()

    def reset_parameters(self):
        """Weight 1, bias 0."""
        _reset_affine(self)

    def forward(self, input):
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return ("{num_groups}, {num_channels}, eps={eps}, affine={affine}, bias={use_bias}"
                .format(**self.__dict__, use_bias=self.bias is not None))
