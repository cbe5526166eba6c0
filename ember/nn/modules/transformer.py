"""Multi-head attention and the Transformer (PyTorch's modules and numerics).

Parameter names and initialisation are PyTorch's (``in_proj_weight``, ``in_proj_bias``,
``out_proj.weight``, ``out_proj.bias``; ``self_attn.*``, ``linear1``, ``linear2``,
``norm1``, ``norm2`` in an encoder layer, plus ``multihead_attn.*`` and ``norm3`` in a
decoder layer; ``layers.{i}.*`` in a stack; ``encoder.*`` / ``decoder.*`` in a
Transformer), so a PyTorch ``state_dict`` loads as is.
"""
import copy
import math

import ember as E
from ember._core.array import ndarray
from ember.nn.parameter import Parameter
from ember.nn.modules.module import Module
from ember.nn.modules.container import ModuleList, fuse_linear_relu, _plain
from ember.nn.modules.linear import Linear
from ember._core.dtypes import dtype_kind

__all__ = ["MultiheadAttention", "TransformerEncoderLayer", "TransformerEncoder",
           "TransformerDecoderLayer", "TransformerDecoder", "Transformer",
           "generate_square_subsequent_mask"]


def _F():
    from ember.nn import functional as F
    return F


def generate_square_subsequent_mask(sz, dtype=None):
    """The ``(sz, sz)`` causal mask: 0 on and below the diagonal, -inf above it.

    >>> import ember
    >>> from ember import nn
    >>> nn.generate_square_subsequent_mask(3).tolist()
    [[0.0, -inf, -inf], [0.0, 0.0, -inf], [0.0, 0.0, 0.0]]
    """
    return E.triu(E.full((sz, sz), -math.inf, dtype=dtype or E.get_default_dtype()), 1)


def _float_mask(mask, name, dtype):
    """PyTorch's ``_canonical_mask``: bool True -> -inf, float kept, other dtypes refused."""
    if mask is None:
        return None
    if not isinstance(mask, ndarray):
        mask = E.asarray(mask)
    if mask.dtype == E.bool:
        return E.where(mask, E.full((), -math.inf, dtype=dtype), E.zeros((), dtype=dtype))
    if dtype_kind(mask.dtype) != "f":
        raise TypeError(f"only bool and floating types of {name} are supported, got dtype "
                        f"{mask.dtype}")
    return mask


class MultiheadAttention(Module):
    """Multi-head attention from "Attention Is All You Need" (PyTorch's module).

    ``forward(query, key, value, key_padding_mask=None, need_weights=True,
    attn_mask=None, average_attn_weights=True, is_causal=False)`` returns
    ``(attn_output, attn_weights or None)``.  Inputs are ``(L, N, E)`` (``(N, L, E)``
    with ``batch_first=True``) or unbatched ``(L, E)``.  Masks follow PyTorch: a
    boolean `key_padding_mask` / `attn_mask` is True where attention is NOT allowed,
    a float one is added to the scores.  Pass ``need_weights=False`` for speed.

    >>> import ember
    >>> from ember import nn
    >>> mha = nn.MultiheadAttention(16, 4, batch_first=True)
    >>> x = ember.ones((2, 5, 16))
    >>> out, w = mha(x, x, x)
    >>> out.shape, w.shape
    ((2, 5, 16), (2, 5, 5))
    """

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False,
                 add_zero_attn=False, kdim=None, vdim=None, batch_first=False, device=None,
                 dtype=None):
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"embed_dim and num_heads must be greater than 0, got "
                             f"embed_dim={embed_dim} and num_heads={num_heads} instead")
        super().__init__()
        self.embed_dim = embed_dim
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads = num_heads
        self.dropout = dropout
        self.batch_first = batch_first
        self.head_dim = embed_dim // num_heads
        if self.head_dim * num_heads != embed_dim:
            raise ValueError(f"embed_dim must be divisible by num_heads, got embed_dim="
                             f"{embed_dim} and num_heads={num_heads}")
        dt = dtype if dtype is not None else E.get_default_dtype()
        if not self._qkv_same_embed_dim:
            self.q_proj_weight = Parameter(E.empty((embed_dim, embed_dim), dtype=dt))
            self.k_proj_weight = Parameter(E.empty((embed_dim, self.kdim), dtype=dt))
            self.v_proj_weight = Parameter(E.empty((embed_dim, self.vdim), dtype=dt))
            self.register_parameter("in_proj_weight", None)
        else:
            self.in_proj_weight = Parameter(E.empty((3 * embed_dim, embed_dim), dtype=dt))
            self.register_parameter("q_proj_weight", None)
            self.register_parameter("k_proj_weight", None)
            self.register_parameter("v_proj_weight", None)
        if bias:
            self.in_proj_bias = Parameter(E.empty((3 * embed_dim,), dtype=dt))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias, dtype=dt)
        if add_bias_kv:
            self.bias_k = Parameter(E.empty((1, 1, embed_dim), dtype=dt))
            self.bias_v = Parameter(E.empty((1, 1, embed_dim), dtype=dt))
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()

    def _reset_parameters(self):
        from ember.nn import init
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            init.xavier_uniform_(self.q_proj_weight)
            init.xavier_uniform_(self.k_proj_weight)
            init.xavier_uniform_(self.v_proj_weight)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)
        if self.bias_k is not None:
            init.xavier_normal_(self.bias_k)
        if self.bias_v is not None:
            init.xavier_normal_(self.bias_v)

    def extra_repr(self):
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}"

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True,
                attn_mask=None, average_attn_weights=True, is_causal=False):
        F = _F()
        is_batched = query.ndim == 3
        kw = dict(training=self.training, key_padding_mask=key_padding_mask,
                  need_weights=need_weights, attn_mask=attn_mask,
                  average_attn_weights=average_attn_weights, is_causal=is_causal,
                  batch_first=self.batch_first and is_batched)
        if not self._qkv_same_embed_dim:
            kw.update(use_separate_proj_weight=True, q_proj_weight=self.q_proj_weight,
                      k_proj_weight=self.k_proj_weight, v_proj_weight=self.v_proj_weight)
        return F.multi_head_attention_forward(
            query, key, value, self.embed_dim, self.num_heads, self.in_proj_weight,
            self.in_proj_bias, self.bias_k, self.bias_v, self.add_zero_attn, self.dropout,
            self.out_proj.weight, self.out_proj.bias, **kw)


fuse_add_norm = True      # post-norm layers: residual add + LayerNorm as one op (A/B switch)


_LN = []                  # (LayerNorm, nn.functional.normalization), imported on first use


def _add_norm(norm, x, r):
    """``norm(x + r)``: one fused op (``add_layer_norm``) when `norm` is a plain LayerNorm
    and the arrays are ones its kernel takes, else the two ops."""
    if fuse_add_norm:
        if not _LN:
            from ember.nn.modules.normalization import LayerNorm
            from ember.nn.functional import normalization
            _LN[:] = (LayerNorm, normalization)
        if type(norm) is _LN[0] and _plain(norm):
            p = norm._parameters
            y = _LN[1].fused_add_layer_norm(x, r, norm.normalized_shape, p.get("weight"),
                                            p.get("bias"), norm.eps)
            if y is not None:
                return y
    return norm(x + r)


def _activation_fn(activation):
    F = _F()
    if activation == "relu":
        return F.relu
    if activation == "gelu":
        return F.gelu
    raise RuntimeError(f"activation should be relu/gelu, not {activation}")


class TransformerEncoderLayer(Module):
    """Self-attention then a feed-forward network, each with a residual and LayerNorm.

    Arguments as PyTorch's: d_model, nhead, dim_feedforward=2048, dropout=0.1,
    activation='relu' ('gelu' or a callable), layer_norm_eps=1e-5, batch_first=False,
    norm_first=False, bias=True.  ``forward(src, src_mask=None,
    src_key_padding_mask=None, is_causal=False)``.

    >>> import ember
    >>> from ember import nn
    >>> layer = nn.TransformerEncoderLayer(16, 4, dim_feedforward=32, batch_first=True)
    >>> layer(ember.ones((2, 5, 16))).shape
    (2, 5, 16)
    """

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu",
                 layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True,
                 device=None, dtype=None):
        super().__init__()
        from ember.nn.modules.dropout import Dropout
        from ember.nn.modules.normalization import LayerNorm
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                            batch_first=batch_first, dtype=dtype)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, dtype=dtype)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, dtype=dtype)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        if isinstance(activation, str):
            activation = _activation_fn(activation)
        F = _F()
        from ember.nn.modules import activation as _act
        if activation is F.relu or isinstance(activation, getattr(_act, "ReLU", ())):
            self.activation_relu_or_gelu = 1
        elif activation is F.gelu or isinstance(activation, getattr(_act, "GELU", ())):
            self.activation_relu_or_gelu = 2
        else:
            self.activation_relu_or_gelu = 0
        self.activation = activation

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            x = x + self._ff_block(self.norm2(x))
        else:
            x = _add_norm(self.norm1, x, self._sa_block(x, src_mask, src_key_padding_mask,
                                                        is_causal))
            x = _add_norm(self.norm2, x, self._ff_block(x))
        return x

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal=False):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                           need_weights=False, is_causal=is_causal)[0]
        return self.dropout1(x)

    def _ff_block(self, x):
        h = None
        if self.activation is _F().relu:
            h = fuse_linear_relu(self.linear1, x)     # one op on the CPU (nn.functional.fused)
        if h is None:
            h = self.activation(self.linear1(x))
        x = self.linear2(self.dropout(h))
        return self.dropout2(x)


def _is_causal_mask(mask, size):
    """PyTorch's ``_detect_is_causal_mask`` for is_causal=None: mask == the causal mask."""
    if mask is None or mask.ndim != 2 or tuple(mask.shape) != (size, size):
        return False
    ref = generate_square_subsequent_mask(size, dtype=mask.dtype)
    return bool(E.all(mask == ref))


class TransformerEncoder(Module):
    """A stack of `num_layers` deep copies of `encoder_layer`, then `norm` if given.

    ``forward(src, mask=None, src_key_padding_mask=None, is_causal=None)``; with
    ``is_causal=None`` a `mask` equal to the causal mask is detected as causal.
    In evaluation without gradients, with a `src_key_padding_mask` and a layer that
    PyTorch runs on its nested-tensor fast path, the outputs at padded positions are
    zeros (before `norm`), as PyTorch's are.

    >>> import ember
    >>> from ember import nn
    >>> layer = nn.TransformerEncoderLayer(16, 4, dim_feedforward=32)
    >>> enc = nn.TransformerEncoder(layer, num_layers=2)
    >>> enc(ember.ones((5, 2, 16))).shape
    (5, 2, 16)
    """

    def __init__(self, encoder_layer, num_layers, norm=None, enable_nested_tensor=True,
                 mask_check=True):
        super().__init__()
        self.layers = ModuleList([copy.deepcopy(encoder_layer) for _ in range(num_layers)])
        self.num_layers = num_layers
        self.norm = norm
        self.enable_nested_tensor = enable_nested_tensor
        self.mask_check = mask_check
        layer = encoder_layer
        self.use_nested_tensor = bool(
            enable_nested_tensor and isinstance(layer, TransformerEncoderLayer)
            and not layer.norm_first and layer.self_attn.batch_first
            and layer.self_attn._qkv_same_embed_dim and layer.self_attn.in_proj_bias is not None
            and layer.activation_relu_or_gelu and layer.norm1.eps == layer.norm2.eps
            and layer.self_attn.num_heads % 2 == 0)

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        if self.num_layers == 0:
            return self.norm(src) if self.norm is not None else src
        first = self.layers[0]
        batch_first = first.self_attn.batch_first
        dtype = src.dtype
        kpm = _float_mask(src_key_padding_mask, "src_key_padding_mask", dtype)
        mask = _float_mask(mask, "mask", dtype)
        seq_len = src.shape[0] if src.ndim == 2 else src.shape[1 if batch_first else 0]
        if is_causal is None:
            is_causal = _is_causal_mask(mask, seq_len)
        keep = None
        if (self.use_nested_tensor and not first.training and src.ndim == 3
                and kpm is not None and mask is None and not self._grad_needed(src)):
            # PyTorch runs this case on nested tensors and pads the result with zeros
            keep = kpm == 0
            if self.mask_check and kpm.shape[1] > 1 and \
                    bool(E.any(keep[:, 1:] & E.logical_not(keep[:, :-1]))):
                keep = None                  # not left-aligned: PyTorch's padded path
        output = src
        for mod in self.layers:
            output = mod(output, src_mask=mask, is_causal=is_causal, src_key_padding_mask=kpm)
        if keep is not None:
            output = output * keep[..., None].astype(output.dtype)
        if self.norm is not None:
            output = self.norm(output)
        return output

    def _grad_needed(self, src):
        if not E.is_grad_enabled():
            return False
        if src.requires_grad:
            return True
        return any(p.requires_grad for p in self.layers[0].parameters())


class TransformerDecoderLayer(Module):
    """Self-attention, attention over the encoder's output (`memory`), then a
    feed-forward network, each with a residual and LayerNorm (PyTorch's module).

    Arguments as PyTorch's: d_model, nhead, dim_feedforward=2048, dropout=0.1,
    activation='relu' ('gelu' or a callable), layer_norm_eps=1e-5, batch_first=False,
    norm_first=False, bias=True.  ``forward(tgt, memory, tgt_mask=None,
    memory_mask=None, tgt_key_padding_mask=None, memory_key_padding_mask=None,
    tgt_is_causal=False, memory_is_causal=False)``.

    >>> import ember
    >>> from ember import nn
    >>> layer = nn.TransformerDecoderLayer(16, 4, dim_feedforward=32, batch_first=True)
    >>> layer(ember.ones((2, 3, 16)), ember.ones((2, 5, 16))).shape
    (2, 3, 16)
    """

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu",
                 layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True,
                 device=None, dtype=None):
        super().__init__()
        from ember.nn.modules.dropout import Dropout
        from ember.nn.modules.normalization import LayerNorm
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                            batch_first=batch_first, dtype=dtype)
        self.multihead_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                                 batch_first=batch_first, dtype=dtype)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, dtype=dtype)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, dtype=dtype)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.norm3 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.dropout3 = Dropout(dropout)
        self.activation = _activation_fn(activation) if isinstance(activation, str) \
            else activation

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False):
        x = tgt
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), tgt_mask, tgt_key_padding_mask,
                                   tgt_is_causal)
            x = x + self._mha_block(self.norm2(x), memory, memory_mask,
                                    memory_key_padding_mask, memory_is_causal)
            x = x + self._ff_block(self.norm3(x))
        else:
            x = _add_norm(self.norm1, x, self._sa_block(x, tgt_mask, tgt_key_padding_mask,
                                                        tgt_is_causal))
            x = _add_norm(self.norm2, x, self._mha_block(x, memory, memory_mask,
                                                         memory_key_padding_mask,
                                                         memory_is_causal))
            x = _add_norm(self.norm3, x, self._ff_block(x))
        return x

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal=False):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                           is_causal=is_causal, need_weights=False)[0]
        return self.dropout1(x)

    def _mha_block(self, x, mem, attn_mask, key_padding_mask, is_causal=False):
        x = self.multihead_attn(x, mem, mem, attn_mask=attn_mask,
                                key_padding_mask=key_padding_mask, is_causal=is_causal,
                                need_weights=False)[0]
        return self.dropout2(x)

    def _ff_block(self, x):
        x = self.linear2(self.dropout(self.activation(self.linear1(x))))
        return self.dropout3(x)


class TransformerDecoder(Module):
    """A stack of `num_layers` deep copies of `decoder_layer`, then `norm` if given.

    ``forward(tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
    memory_key_padding_mask=None, tgt_is_causal=None, memory_is_causal=False)``; with
    ``tgt_is_causal=None`` a `tgt_mask` equal to the causal mask is detected as causal.

    >>> import ember
    >>> from ember import nn
    >>> dec = nn.TransformerDecoder(nn.TransformerDecoderLayer(16, 4, 32), num_layers=2)
    >>> dec(ember.ones((3, 2, 16)), ember.ones((5, 2, 16))).shape
    (3, 2, 16)
    """

    def __init__(self, decoder_layer, num_layers, norm=None):
        super().__init__()
        self.layers = ModuleList([copy.deepcopy(decoder_layer) for _ in range(num_layers)])
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=None, memory_is_causal=False):
        output = tgt
        if tgt_is_causal is None:
            batch_first = bool(self.layers) and self.layers[0].self_attn.batch_first
            seq_len = tgt.shape[0] if tgt.ndim == 2 else tgt.shape[1 if batch_first else 0]
            tgt_is_causal = _is_causal_mask(
                _float_mask(tgt_mask, "tgt_mask", tgt.dtype), seq_len)
        for mod in self.layers:
            output = mod(output, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                         tgt_key_padding_mask=tgt_key_padding_mask,
                         memory_key_padding_mask=memory_key_padding_mask,
                         tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)
        if self.norm is not None:
            output = self.norm(output)
        return output


class Transformer(Module):
    """The encoder-decoder Transformer of "Attention Is All You Need" (PyTorch's module).

    Arguments as PyTorch's: d_model=512, nhead=8, num_encoder_layers=6,
    num_decoder_layers=6, dim_feedforward=2048, dropout=0.1, activation='relu'
    ('gelu' or a callable), custom_encoder=None, custom_decoder=None,
    layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True.
    ``forward(src, tgt, src_mask=None, tgt_mask=None, memory_mask=None,
    src_key_padding_mask=None, tgt_key_padding_mask=None, memory_key_padding_mask=None,
    src_is_causal=None, tgt_is_causal=None, memory_is_causal=False)``.  Every weight
    matrix is initialised with ``xavier_uniform_`` as in PyTorch.

    >>> import ember
    >>> from ember import nn
    >>> model = nn.Transformer(16, 4, 1, 1, dim_feedforward=32, batch_first=True)
    >>> src, tgt = ember.ones((2, 5, 16)), ember.ones((2, 3, 16))
    >>> mask = nn.Transformer.generate_square_subsequent_mask(3)
    >>> model(src, tgt, tgt_mask=mask).shape
    (2, 3, 16)
    """

    def __init__(self, d_model=512, nhead=8, num_encoder_layers=6, num_decoder_layers=6,
                 dim_feedforward=2048, dropout=0.1, activation="relu", custom_encoder=None,
                 custom_decoder=None, layer_norm_eps=1e-5, batch_first=False,
                 norm_first=False, bias=True, device=None, dtype=None):
        super().__init__()
        from ember.nn.modules.normalization import LayerNorm
        kw = dict(dim_feedforward=dim_feedforward, dropout=dropout, activation=activation,
                  layer_norm_eps=layer_norm_eps, batch_first=batch_first,
                  norm_first=norm_first, bias=bias, dtype=dtype)
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            layer = TransformerEncoderLayer(d_model, nhead, **kw)
            norm = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
            self.encoder = TransformerEncoder(layer, num_encoder_layers, norm)
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            layer = TransformerDecoderLayer(d_model, nhead, **kw)
            norm = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
            self.decoder = TransformerDecoder(layer, num_decoder_layers, norm)
        self._reset_parameters()
        self.d_model = d_model
        self.nhead = nhead
        self.batch_first = batch_first

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None,
                src_key_padding_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, src_is_causal=None, tgt_is_causal=None,
                memory_is_causal=False):
        is_batched = src.ndim == 3
        if not self.batch_first and src.shape[1] != tgt.shape[1] and is_batched:
            raise RuntimeError(f"Transformer: the batch number of src and tgt must be equal, "
                               f"got src {tuple(src.shape)} and tgt {tuple(tgt.shape)}")
        if self.batch_first and src.shape[0] != tgt.shape[0] and is_batched:
            raise RuntimeError(f"Transformer: the batch number of src and tgt must be equal, "
                               f"got src {tuple(src.shape)} and tgt {tuple(tgt.shape)}")
        if src.shape[-1] != self.d_model or tgt.shape[-1] != self.d_model:
            raise RuntimeError(f"Transformer: the feature number of src and tgt must be equal "
                               f"to d_model={self.d_model}, got src {tuple(src.shape)} and "
                               f"tgt {tuple(tgt.shape)}")
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask,
                              is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask,
                            tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)

    @staticmethod
    def generate_square_subsequent_mask(sz, device=None, dtype=None):
        """The ``(sz, sz)`` causal mask: 0 on and below the diagonal, -inf above it.

        >>> from ember import nn
        >>> nn.Transformer.generate_square_subsequent_mask(2).tolist()
        [[0.0, -inf], [0.0, 0.0]]
        """
        mask = generate_square_subsequent_mask(sz, dtype=dtype)
        return mask if device is None else mask.to(device)

    def _reset_parameters(self):
        from ember.nn import init
        for p in self.parameters():
            if p.ndim > 1:
                init.xavier_uniform_(p)
