"""PyTorch's attention and Transformer layers with PyTorch's names, arguments, defaults,
masks and parameter names: ``MultiheadAttention``, ``TransformerEncoderLayer``,
``TransformerDecoderLayer``, ``TransformerEncoder``, ``TransformerDecoder`` and
``Transformer`` (Vaswani et al., 2017).

The parameters carry PyTorch's state-dict names (``self_attn.in_proj_weight``,
``linear1.weight``, ``norm2.bias``, ...) and shapes, except that every projection weight is
stored in this library's linear layout ``(in, out)``, the transpose of PyTorch's (as every
:class:`~tapegrad.nn.Linear`); :meth:`load_torch_state_dict` copies a PyTorch model's
``state_dict()`` in, transposing those weights.

Masks follow ``torch.nn.MultiheadAttention``: a boolean mask is True where attention is
*not* allowed; a floating mask is added to the attention scores (``-inf`` forbids). Unlike
PyTorch's ``MultiheadAttention``, which refuses ``is_causal=True`` without a mask,
``is_causal=True`` adds the causal mask to whatever mask is given (PyTorch treats the flag as
a hint that the given mask already is causal: the same result for a causal mask). A query
whose keys are all masked gets zero attention weights and a zero attention output (PyTorch's
result on its ``need_weights=False`` path; its ``need_weights=True`` path gives NaN).

Dropout draws its keys from :meth:`~tapegrad.nn.Module.next_key`: from the key given to
:func:`~tapegrad.nn.functional_call`, or from each layer's own key in stateful use.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from tapegrad import numpy as tnp
from tapegrad import random as _random
from tapegrad.core._keywords import strict_all
from tapegrad.core.backend import parse_device
from tapegrad.core.tensor import Tensor, all_values
from tapegrad.nn import functional as F
from tapegrad.nn import init
from tapegrad.nn.functional import ScaledDotProductAttention
from tapegrad.nn.layers import (
    Dropout,
    LayerNorm,
    Linear,
    _bool,
    _check_device,
    _keys,
    _param_dtype,
    _place,
    _positive,
    _real,
)
from tapegrad.nn.module import Module, ModuleList

__all__ = [
    "MultiheadAttention",
    "TransformerEncoderLayer",
    "TransformerDecoderLayer",
    "TransformerEncoder",
    "TransformerDecoder",
    "Transformer",
]

_PROJECTIONS = ("in_proj_weight", "q_proj_weight", "k_proj_weight", "v_proj_weight")


def _host_array(value, name: str) -> np.ndarray:
    """``value`` (a torch tensor, a tapegrad Tensor, an array) as a NumPy array."""
    if isinstance(value, Tensor):
        return value.numpy()
    if hasattr(value, "detach") and hasattr(value, "cpu"):  # a torch.Tensor
        return np.asarray(value.detach().cpu().numpy())
    try:
        return np.asarray(value)
    except Exception as e:  # noqa: BLE001 - report what could not be read
        raise TypeError(f"load_torch_state_dict: entry {name!r} is not an array ({e})") from None


class _TorchStateDict:
    """Mixin: :meth:`load_torch_state_dict`."""

    def load_torch_state_dict(self, state_dict, strict: bool = True) -> None:
        """Load a PyTorch model's ``state_dict()`` (same architecture and names) into this
        module.

        Entries are matched by name; the projection weights (of every
        :class:`~tapegrad.nn.Linear` and :class:`MultiheadAttention` inside) are transposed
        into this library's ``(in, out)`` layout; values are converted to the parameters'
        dtype and device. Everything else goes through
        :meth:`~tapegrad.nn.Module.load_state_dict` (same checks: nothing is loaded if a
        name or a shape does not fit).

        Args:
            state_dict: Mapping ``{name: torch.Tensor | array | Tensor}``, e.g. PyTorch's
                ``model.state_dict()``.
            strict: Require exactly this module's names.

        Raises:
            TypeError: if ``state_dict`` is not a mapping or an entry is not an array.
            ValueError: for missing or unexpected names (with ``strict``) or mismatched
                shapes, all listed.
        """
        if not hasattr(state_dict, "items"):
            raise TypeError(
                f"load_torch_state_dict: expected a mapping name -> tensor (a PyTorch "
                f"state_dict), got {type(state_dict).__name__}"
            )
        module: Module = self  # pyright: ignore[reportAssignmentType]
        own_states = set(module.states)
        params, states = {}, {}
        for name, value in state_dict.items():
            arr = _host_array(value, name)
            owner = _owner(module, name)
            leaf = name.rsplit(".", 1)[-1]
            transposed = arr.ndim == 2 and (
                (isinstance(owner, Linear) and leaf == "weight")
                or (isinstance(owner, MultiheadAttention) and leaf in _PROJECTIONS)
            )
            if transposed:
                arr = np.ascontiguousarray(arr.T)
            (states if name in own_states else params)[name] = arr
        sd = {"parameters": params}
        if own_states or states or strict:
            sd["states"] = states
        module.load_state_dict(sd, strict=strict)


def _owner(module: Module, dotted: str):
    """The submodule holding ``dotted``'s leaf, or None if the path does not exist."""
    m = module
    for part in dotted.split(".")[:-1]:
        m = m._modules.get(part)
        if m is None:
            return None
    return m


def _torch_linear_init(layer: Linear, key, bias_too: bool = True) -> None:
    """PyTorch's default init of a ``Linear``: ``U(-1/sqrt(in), 1/sqrt(in))`` for the weight
    (its ``kaiming_uniform(a=sqrt(5))``) and the bias."""
    kw, kb = _random.split(key)
    fan_in = layer.weight.shape[0]
    bound = 1.0 / math.sqrt(fan_in)
    dev = layer.weight.device
    w = init.uniform(kw, layer.weight.shape, layer.weight.dtype, -bound, bound)
    layer.weight = w if dev == "cpu" else w.to_device(dev)
    if bias_too and layer.bias is not None:
        b = init.uniform(kb, layer.bias.shape, layer.bias.dtype, -bound, bound)
        layer.bias = b if dev == "cpu" else b.to_device(dev)


def _mask_bias(mask, ref: Tensor, who: str, name: str) -> Tensor:
    """A PyTorch-style mask as an additive float bias of ``ref``'s dtype: a boolean mask is
    ``-inf`` where True (not allowed), a floating one is taken as is."""
    m = mask if isinstance(mask, Tensor) else tnp.asarray(mask)
    if m.dtype == np.bool_:
        neg = F._const(np.asarray(-np.inf, dtype=ref.dtype), ref)
        zero = F._const(np.asarray(0.0, dtype=ref.dtype), ref)
        return tnp.where(m, neg, zero)
    if m.dtype.kind not in "fV":
        raise TypeError(
            f"{who}: {name} must be a boolean mask (True = not allowed) or a floating one "
            f"(added to the scores), got dtype {m.dtype}"
        )
    if m.device != ref.device:
        m = m.to_device(ref.device)
    return m if m.dtype == ref.dtype else tnp.astype(m, ref.dtype)


def _causal_bias(lq: int, lk: int, ref: Tensor) -> Tensor:
    """``-inf`` above the diagonal of an ``(lq, lk)`` score table (top-left aligned)."""
    return F._const(np.triu(np.full((lq, lk), -np.inf, dtype=ref.dtype), 1), ref)


def _may_have_dead_rows(bias: Tensor) -> bool:
    """Whether a row of the additive ``bias`` may be all ``-inf`` (every key masked): looked
    up now for a constant bias (the usual masks), assumed for a traced one (a mask that is an
    input of a :func:`tapegrad.jit` program), whose values a replay may change."""
    if bias._level:
        return True
    return bool(np.isneginf(all_values(bias)).all(axis=-1).any())


def _activation_fn(who: str, activation):
    """PyTorch's ``activation`` argument: ``"relu"``, ``"gelu"`` (the exact one, PyTorch's
    ``F.gelu``) or a callable (a function or a Module)."""
    if isinstance(activation, str):
        if activation == "relu":
            return F.relu
        if activation == "gelu":
            return _exact_gelu
        raise ValueError(f"{who}: activation should be 'relu' or 'gelu' (or a callable), got "
                         f"{activation!r}")
    if not callable(activation):
        raise TypeError(f"{who}: activation must be 'relu', 'gelu' or a callable, got "
                        f"{activation!r}")
    return activation


def _exact_gelu(x):
    """PyTorch's ``F.gelu``: the exact ``x Phi(x)``."""
    return F.gelu(x, approximate="none")


# -- multi-head attention ---------------------------------------------------------------------
class MultiheadAttention(_TorchStateDict, Module):
    """Multi-head attention with PyTorch's arguments, masks and parameters (PyTorch's
    ``nn.MultiheadAttention``): ``concat_h(softmax(q_h k_h^T / sqrt(d_h) + mask) v_h) W_o``,
    each head on ``embed_dim / num_heads`` features.

    ``forward(query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
    average_attn_weights=True, is_causal=False, dropout_key=None)`` returns ``(attn_output,
    attn_weights)``:

    - ``query`` ``(L, N, E)`` (``(N, L, E)`` with ``batch_first``, ``(L, E)`` unbatched),
      ``key`` ``(S, N, kdim)``, ``value`` ``(S, N, vdim)`` likewise;
    - ``key_padding_mask`` ``(N, S)`` (``(S,)`` unbatched): True (or ``-inf``) ignores a key;
    - ``attn_mask`` ``(L, S)`` or ``(N * num_heads, L, S)``: True (or ``-inf``) forbids;
      a floating mask is added to the scores;
    - ``is_causal``: also forbid every key after the query's position;
    - ``dropout_key``: the key of the attention dropout (training mode, ``dropout > 0``),
      default :meth:`~tapegrad.nn.Module.next_key`;
    - ``attn_output`` has ``query``'s layout with ``E`` features; ``attn_weights``
      ``(N, L, S)`` averaged over the heads (``(N, num_heads, L, S)`` without
      ``average_attn_weights``; no ``N`` unbatched), after dropout, or None without
      ``need_weights``.

    Args:
        embed_dim: Model width ``E``.
        num_heads: Heads (divide ``embed_dim``).
        dropout: Dropout probability on the attention weights (training mode only).
        bias: Learn the input and output projection biases.
        add_bias_kv: Learn one more key and value (``bias_k``, ``bias_v``) appended to the
            sequence.
        add_zero_attn: Append a zero key and value to the sequence.
        kdim, vdim: Feature sizes of ``key`` and ``value`` (default ``embed_dim``; another
            size gives separate projection weights).
        batch_first: Inputs and outputs are ``(N, L, E)``.
        key, device, dtype: Init key (also seeds the dropout), parameter device and floating
            dtype (``None``: float32).

    Parameters (PyTorch's names and init; projection weights ``(in, out)``, the transpose
    of PyTorch's): ``in_proj_weight`` ``(E, 3E)`` (columns ``q | k | v``, Xavier-uniform),
    or ``q_proj_weight`` ``(E, E)``, ``k_proj_weight`` ``(kdim, E)``, ``v_proj_weight``
    ``(vdim, E)`` when ``kdim``/``vdim`` differ; ``in_proj_bias`` ``(3E,)`` zeros;
    ``out_proj.weight`` ``(E, E)`` ``U(-1/sqrt(E), 1/sqrt(E))``, ``out_proj.bias`` zeros;
    ``bias_k``, ``bias_v`` ``(1, 1, E)`` ``N(0, 1/E)`` with ``add_bias_kv``.

    Raises:
        TypeError: for bad argument kinds. ValueError: for non-positive sizes, ``num_heads``
            not dividing ``embed_dim``, ``dropout`` outside ``[0, 1)``; on call, for shapes
            or masks that do not fit.

    Example:
        >>> import tapegrad as tg
        >>> mha = tg.nn.MultiheadAttention(8, 2, batch_first=True, key=tg.random.key(0))
        >>> x = tg.random.normal(tg.random.key(1), (3, 5, 8))
        >>> out, weights = mha(x, x, x)
        >>> out.shape, weights.shape
        ((3, 5, 8), (3, 5, 5))
    """

    _keyword_hints = {"hidden_size": "MultiHeadAttention's name; here it is embed_dim",
                      "dropout_prob": "MultiHeadAttention's name; here it is dropout"}

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 add_bias_kv: bool = False, add_zero_attn: bool = False, kdim=None, vdim=None,
                 batch_first: bool = False, *, key=None, device=None, dtype=np.float32):
        super().__init__()
        who = "MultiheadAttention"
        _positive(who, embed_dim=embed_dim, num_heads=num_heads)
        if kdim is not None:
            _positive(who, kdim=kdim)
        if vdim is not None:
            _positive(who, vdim=vdim)
        if embed_dim % num_heads:
            raise ValueError(f"{who}: num_heads={num_heads} must divide embed_dim={embed_dim}")
        self.dropout = _real(who, "dropout", dropout, 0.0, 1.0, high_open=True)
        with_bias = _bool(who, "bias", bias)
        add_bias_kv = _bool(who, "add_bias_kv", add_bias_kv)
        self.add_zero_attn = _bool(who, "add_zero_attn", add_zero_attn)
        self.batch_first = _bool(who, "batch_first", batch_first)
        dt = _param_dtype(who, dtype)
        _check_device(who, device)
        e = self.embed_dim = int(embed_dim)
        self.num_heads = int(num_heads)
        self.head_dim = e // self.num_heads
        self.kdim = e if kdim is None else int(kdim)
        self.vdim = e if vdim is None else int(vdim)
        self._qkv_same_embed_dim = self.kdim == e and self.vdim == e
        ks, own = _keys(key, 6)
        self._seed(own)
        if self._qkv_same_embed_dim:
            self.in_proj_weight = init.xavier_uniform(ks[0], (e, 3 * e), dt)
            for name in _PROJECTIONS[1:]:
                self.register_parameter(name, None)
        else:
            self.register_parameter("in_proj_weight", None)
            self.q_proj_weight = init.xavier_uniform(ks[0], (e, e), dt)
            self.k_proj_weight = init.xavier_uniform(ks[1], (self.kdim, e), dt)
            self.v_proj_weight = init.xavier_uniform(ks[2], (self.vdim, e), dt)
        self.register_parameter("in_proj_bias", init.zeros(None, (3 * e,), dt) if with_bias
                                else None)
        self.out_proj = Linear(e, e, bias=with_bias, dtype=dt)
        _torch_linear_init(self.out_proj, ks[3], bias_too=False)  # the bias stays 0
        if add_bias_kv:
            std = 1.0 / math.sqrt(e)  # Xavier-normal of a (1, 1, E) tensor
            self.bias_k = init.normal(ks[4], (1, 1, e), dt, std=std)
            self.bias_v = init.normal(ks[5], (1, 1, e), dt, std=std)
        else:
            self.register_parameter("bias_k", None)
            self.register_parameter("bias_v", None)
        for _, m in self.named_modules():
            _place(m, device)

    def extra_repr(self) -> str:
        """PyTorch's configuration string (empty: it prints the submodules)."""
        return ""

    def forward(self, query, key, value, key_padding_mask=None, need_weights: bool = True,
                attn_mask=None, average_attn_weights: bool = True, is_causal: bool = False,
                dropout_key=None):
        """Attend from ``query`` to ``key``/``value``; see the class for shapes and masks.

        Returns:
            ``(attn_output, attn_weights)`` (``attn_weights`` None without ``need_weights``).

        Raises:
            TypeError: for non-floating inputs or masks of another kind.
            ValueError: for shapes or masks that do not fit.
        """
        who = "MultiheadAttention"
        need_weights = _bool(who, "need_weights", need_weights)
        is_causal = _bool(who, "is_causal", is_causal)
        average = _bool(who, "average_attn_weights", average_attn_weights)
        q_in = F._floating(query, who, "query")
        self_attention = query is key and key is value
        kv_same = key is value
        k_in = F._like(key, q_in, who, "key")
        v_in = k_in if kv_same else F._like(value, q_in, who, "value")
        if q_in.ndim not in (2, 3) or k_in.ndim != q_in.ndim or v_in.ndim != q_in.ndim:
            raise ValueError(
                f"{who}: query, key and value must all be 3-D (batched) or all 2-D "
                f"(unbatched), got {q_in.shape}, {k_in.shape}, {v_in.shape}"
            )
        batched = q_in.ndim == 3
        if not batched:
            q, k, v = (tnp.expand_dims(t, 0) for t in (q_in, k_in, v_in))
        elif self.batch_first:
            q, k, v = q_in, k_in, v_in
        else:
            q, k, v = (tnp.swapaxes(t, 0, 1) for t in (q_in, k_in, v_in))
        n, lq, e = q.shape
        s = k.shape[1]
        if e != self.embed_dim or k.shape[-1] != self.kdim or v.shape[-1] != self.vdim or \
                k.shape[0] != n or v.shape[0] != n or v.shape[1] != s:
            layout = "(N, L, E)" if self.batch_first else "(L, N, E)"
            raise ValueError(
                f"{who}: query {q_in.shape}, key {k_in.shape} and value {v_in.shape} do not "
                f"fit: need {layout} layouts (batch_first={self.batch_first}) with the same "
                f"N, E={self.embed_dim}, kdim={self.kdim}, vdim={self.vdim} and the same "
                "sequence length for key and value"
            )
        qp, kp, vp = self._project(q, k, v, self_attention, kv_same)
        bias = self._bias(attn_mask, key_padding_mask, is_causal, qp, n, lq, s, batched)
        if self.bias_k is not None:
            kp = tnp.concatenate([kp, tnp.broadcast_to(self.bias_k, (n, 1, e))], axis=1)
            vp = tnp.concatenate([vp, tnp.broadcast_to(self.bias_v, (n, 1, e))], axis=1)
            bias = None if bias is None else tnp.pad(bias, [(0, 0)] * 3 + [(0, 1)])
        h, hd = self.num_heads, self.head_dim

        def heads(t):
            return tnp.transpose(tnp.reshape(t, (n, t.shape[1], h, hd)), (0, 2, 1, 3))

        qh, kh, vh = heads(qp), heads(kp), heads(vp)
        if self.add_zero_attn:
            zeros = tnp.zeros((n, h, 1, hd), dtype=qh.dtype, device=qh.device)
            kh = tnp.concatenate([kh, zeros], axis=2)
            vh = tnp.concatenate([vh, zeros], axis=2)
            bias = None if bias is None else tnp.pad(bias, [(0, 0)] * 3 + [(0, 1)])
        sk = kh.shape[2]
        drop = None
        p = self.dropout if self.training else 0.0
        if p > 0.0:
            if dropout_key is None:
                dropout_key = self.next_key()
            keep = _random.bernoulli(dropout_key, 1.0 - p, (n, h, lq, sk))
            if qh.device != "cpu":
                keep = keep.to_device(qh.device)
            drop = tnp.where(keep, 1.0 / (1.0 - p), 0.0)
            drop = tnp.astype(drop, qh.dtype)
        if bias is not None and _may_have_dead_rows(bias):
            # a query with every key masked attends to nothing (0 weights, a 0 output)
            dead = tnp.all(tnp.isneginf(bias), axis=-1, keepdims=True)
            bias = tnp.where(dead, 0.0, bias)
            alive = tnp.astype(tnp.logical_not(dead), qh.dtype)
            drop = alive if drop is None else drop * alive
        scale = 1.0 / math.sqrt(hd)
        weights = None
        if need_weights:
            scores = tnp.matmul(qh * scale, tnp.swapaxes(kh, -1, -2))
            if bias is not None:
                scores = scores + bias
            probs = F.softmax(scores, axis=-1)
            if drop is not None:
                probs = probs * drop
            out = tnp.matmul(probs, vh)
            weights = tnp.mean(probs, axis=1) if average else probs
            if not batched:
                weights = weights[0]
        else:
            out = ScaledDotProductAttention.apply(qh, kh, vh, bias, drop, scale=scale)
        out = tnp.reshape(tnp.transpose(out, (0, 2, 1, 3)), (n, lq, e))
        out = self.out_proj(out)
        if not batched:
            out = out[0]
        elif not self.batch_first:
            out = tnp.swapaxes(out, 0, 1)
        return out, weights

    def _project(self, q, k, v, self_attention: bool, kv_same: bool):
        e = self.embed_dim
        b = self.in_proj_bias
        bq, bk, bv = (None, None, None) if b is None else (b[:e], b[e:2 * e], b[2 * e:])
        if self._qkv_same_embed_dim:
            w = self.in_proj_weight
            if self_attention:  # one matmul for the three projections
                qkv = F.linear(q, w, b)
                return qkv[..., :e], qkv[..., e:2 * e], qkv[..., 2 * e:]
            qp = F.linear(q, w[:, :e], bq)
            if kv_same:
                kv = F.linear(k, w[:, e:], None if b is None else b[e:])
                return qp, kv[..., :e], kv[..., e:]
            return qp, F.linear(k, w[:, e:2 * e], bk), F.linear(v, w[:, 2 * e:], bv)
        return (F.linear(q, self.q_proj_weight, bq), F.linear(k, self.k_proj_weight, bk),
                F.linear(v, self.v_proj_weight, bv))

    def _bias(self, attn_mask, key_padding_mask, is_causal, ref, n, lq, s, batched):
        """The masks as one additive bias broadcastable to ``(N, H, L, S)``, or None."""
        who = "MultiheadAttention"
        bias = None
        if attn_mask is not None:
            m = _mask_bias(attn_mask, ref, who, "attn_mask")
            if m.ndim == 2:
                if m.shape != (lq, s):
                    raise ValueError(f"{who}: a 2-D attn_mask must have shape (L, S) = "
                                     f"{(lq, s)}, got {m.shape}")
                bias = tnp.reshape(m, (1, 1, lq, s))
            elif m.ndim == 3:
                want = (n * self.num_heads, lq, s)
                if m.shape != want:
                    raise ValueError(f"{who}: a 3-D attn_mask must have shape (N * num_heads, "
                                     f"L, S) = {want}, got {m.shape}")
                bias = tnp.reshape(m, (n, self.num_heads, lq, s))
            else:
                raise ValueError(f"{who}: attn_mask must be 2-D (L, S) or 3-D (N * num_heads, "
                                 f"L, S), got shape {m.shape}")
        if key_padding_mask is not None:
            m = _mask_bias(key_padding_mask, ref, who, "key_padding_mask")
            want = (n, s) if batched else (s,)
            if m.shape != want:
                raise ValueError(f"{who}: key_padding_mask must have shape "
                                 f"{'(N, S)' if batched else '(S,)'} = {want}, got {m.shape}")
            m = tnp.reshape(m, (n, 1, 1, s))
            bias = m if bias is None else bias + m
        if is_causal:
            c = tnp.reshape(_causal_bias(lq, s, ref), (1, 1, lq, s))
            bias = c if bias is None else bias + c
        return bias


# -- encoder and decoder layers ---------------------------------------------------------------
def _layer_init(who, d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps,
                batch_first, norm_first, bias, dtype, device):
    _positive(who, d_model=d_model, nhead=nhead, dim_feedforward=dim_feedforward)
    if d_model % nhead:
        raise ValueError(f"{who}: nhead={nhead} must divide d_model={d_model}")
    dropout = _real(who, "dropout", dropout, 0.0, 1.0, high_open=True)
    eps = _real(who, "layer_norm_eps", layer_norm_eps, 0.0)
    for name, flag in (("batch_first", batch_first), ("norm_first", norm_first),
                       ("bias", bias)):
        _bool(who, name, flag)
    act = _activation_fn(who, activation)
    dt = _param_dtype(who, dtype)
    _check_device(who, device)
    return dropout, eps, act, dt


def _feedforward(layer, key, d_model, dim_feedforward, dropout, bias, dt):
    k1, k2, k3, k4, k5 = _random.split(key, 5)
    layer.linear1 = Linear(d_model, dim_feedforward, bias=bias, dtype=dt)
    _torch_linear_init(layer.linear1, k1)
    layer.dropout = Dropout(dropout, key=k2)
    layer.linear2 = Linear(dim_feedforward, d_model, bias=bias, dtype=dt)
    _torch_linear_init(layer.linear2, k3)
    return k4, k5


def _set_activation(layer, act) -> None:
    layer.activation = act  # a Module becomes a submodule, as in PyTorch


_SHARED_ARGS = """        dim_feedforward: Width of the feed-forward network.
        dropout: Dropout probability (attention weights, feed-forward hidden layer and each
            residual branch; training mode only).
        activation: ``"relu"`` (default), ``"gelu"`` (exact, PyTorch's) or a callable.
        layer_norm_eps: ``eps`` of the LayerNorms.
        batch_first: Inputs and outputs ``(N, L, E)`` instead of ``(L, N, E)``.
        norm_first: Pre-LayerNorm (``x + f(norm(x))``) instead of post (``norm(x + f(x))``).
        bias: Learn the biases of the linear layers and LayerNorms.
        key, device, dtype: Init key (also seeds the dropout), parameter device and floating
            dtype (``None``: float32).
"""
_LAYER_ARGS = """
    Args:
        d_model: Model width ``E``.
        nhead: Attention heads (divide ``d_model``).
""" + _SHARED_ARGS


class _TransformerLayer(_TorchStateDict, Module):
    """The constructor and self-attention block of the Transformer encoder and decoder layers:
    a self-attention, with ``_cross`` an attention to the encoder's output (``memory``), then
    a feed-forward network, each sublayer with its LayerNorm and residual dropout."""

    _cross = False

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048,
                 dropout: float = 0.1, activation: str | Callable = F.relu,
                 layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, *, key=None, device=None,
                 dtype=np.float32):
        super().__init__()
        dropout, eps, act, dt = _layer_init(type(self).__name__, d_model, nhead,
                                            dim_feedforward, dropout, activation,
                                            layer_norm_eps, batch_first, norm_first, bias,
                                            dtype, device)
        if self._cross:
            (k_sa, k_mha, k_ff, k3), own = _keys(key, 4)
        else:
            (k_sa, k_ff), own = _keys(key, 2)
            k_mha = k3 = None
        self._seed(own)
        attn: dict[str, Any] = dict(dropout=dropout, bias=bias, batch_first=batch_first, dtype=dt)
        self.self_attn = MultiheadAttention(d_model, nhead, key=k_sa, **attn)
        if self._cross:
            self.multihead_attn = MultiheadAttention(d_model, nhead, key=k_mha, **attn)
        k1, k2 = _feedforward(self, k_ff, d_model, dim_feedforward, dropout, bias, dt)
        self.norm_first = bool(norm_first)
        sublayers = range(1, 4 if self._cross else 3)
        for i in sublayers:
            setattr(self, f"norm{i}", LayerNorm(d_model, eps=eps, bias=bias, dtype=dt))
        for i, k in zip(sublayers, (k1, k2, k3)):
            setattr(self, f"dropout{i}", Dropout(dropout, key=k))
        _set_activation(self, act)
        self.batch_first = bool(batch_first)
        for _, m in self.named_modules():
            _place(m, device)

    def extra_repr(self) -> str:
        """PyTorch's configuration string (empty: it prints the submodules)."""
        return ""

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal):
        out = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                             need_weights=False, is_causal=is_causal)[0]
        return self.dropout1(out)


class TransformerEncoderLayer(_TransformerLayer):
    __doc__ = """One Transformer encoder layer, self-attention then a feed-forward network,
    each with a residual connection and LayerNorm (PyTorch's ``nn.TransformerEncoderLayer``,
    its arguments, defaults and parameter names).

    ``forward(src, src_mask=None, src_key_padding_mask=None, is_causal=False)``: ``src``
    ``(S, N, E)`` (``(N, S, E)`` with ``batch_first``, ``(S, E)`` unbatched) -> the same
    shape; the masks as in :class:`MultiheadAttention` (``src_mask`` its ``attn_mask``).
""" + _LAYER_ARGS + """
    Submodules (PyTorch's): ``self_attn`` (:class:`MultiheadAttention`), ``linear1``,
    ``dropout``, ``linear2``, ``norm1``, ``norm2``, ``dropout1``, ``dropout2``; the linear
    layers with PyTorch's default init ``U(-1/sqrt(in), 1/sqrt(in))``, weights ``(in, out)``.

    Raises:
        TypeError: for bad argument kinds. ValueError: for non-positive sizes, ``nhead`` not
            dividing ``d_model``, ``dropout`` outside ``[0, 1)`` or an unknown activation name.

    Example:
        >>> import tapegrad as tg
        >>> layer = tg.nn.TransformerEncoderLayer(8, 2, 16, batch_first=True,
        ...                                       key=tg.random.key(0)).eval()
        >>> layer(tg.random.normal(tg.random.key(1), (3, 5, 8)), is_causal=True).shape
        (3, 5, 8)
    """

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal: bool = False):
        """See the class; returns a Tensor of ``src``'s shape."""
        x = F._floating(src, "TransformerEncoderLayer", "src")
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            x = x + self._ff_block(self.norm2(x))
        else:
            x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
            x = self.norm2(x + self._ff_block(x))
        return x

    def _ff_block(self, x):
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))


class TransformerDecoderLayer(_TransformerLayer):
    __doc__ = """One Transformer decoder layer: self-attention, attention to the encoder's
    output (``memory``), then a feed-forward network, each with a residual connection and
    LayerNorm (PyTorch's ``nn.TransformerDecoderLayer``, its arguments, defaults and parameter
    names).

    ``forward(tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
    memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False)``: ``tgt``
    ``(T, N, E)``, ``memory`` ``(S, N, E)`` (batch first with ``batch_first``; no ``N``
    unbatched) -> ``tgt``'s shape. ``tgt_mask`` ``(T, T)``, ``memory_mask`` ``(T, S)``, the
    key padding masks ``(N, T)`` and ``(N, S)``, as in :class:`MultiheadAttention`.
""" + _LAYER_ARGS + """
    Submodules (PyTorch's): ``self_attn``, ``multihead_attn`` (:class:`MultiheadAttention`),
    ``linear1``, ``dropout``, ``linear2``, ``norm1``, ``norm2``, ``norm3``, ``dropout1``,
    ``dropout2``, ``dropout3``.

    Raises:
        TypeError: for bad argument kinds. ValueError: for non-positive sizes, ``nhead`` not
            dividing ``d_model``, ``dropout`` outside ``[0, 1)`` or an unknown activation name.
    """

    _cross = True

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal: bool = False,
                memory_is_causal: bool = False):
        """See the class; returns a Tensor of ``tgt``'s shape."""
        x = F._floating(tgt, "TransformerDecoderLayer", "tgt")
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), tgt_mask, tgt_key_padding_mask, tgt_is_causal)
            x = x + self._mha_block(self.norm2(x), memory, memory_mask,
                                    memory_key_padding_mask, memory_is_causal)
            x = x + self._ff_block(self.norm3(x))
        else:
            x = self.norm1(x + self._sa_block(x, tgt_mask, tgt_key_padding_mask, tgt_is_causal))
            x = self.norm2(x + self._mha_block(x, memory, memory_mask, memory_key_padding_mask,
                                               memory_is_causal))
            x = self.norm3(x + self._ff_block(x))
        return x

    def _mha_block(self, x, mem, attn_mask, key_padding_mask, is_causal):
        out = self.multihead_attn(x, mem, mem, attn_mask=attn_mask,
                                  key_padding_mask=key_padding_mask, need_weights=False,
                                  is_causal=is_causal)[0]
        return self.dropout2(out)

    def _ff_block(self, x):
        return self.dropout3(self.linear2(self.dropout(self.activation(self.linear1(x)))))


# -- stacks ---------------------------------------------------------------------------------------
def _clones(who: str, name: str, layer, num_layers) -> ModuleList:
    """``num_layers`` deep copies of ``layer`` (identical parameters, as PyTorch's), each
    with its own dropout keys (the layer's keys folded with the copy's index)."""
    if not isinstance(layer, Module):
        raise TypeError(f"{who}: {name} (the layer to stack) must be a Module, got "
                        f"{type(layer).__name__}")
    if isinstance(num_layers, (bool, np.bool_)) or not isinstance(num_layers, (int, np.integer)):
        raise TypeError(f"{who}: num_layers must be an int, got {num_layers!r}")
    if num_layers < 0:
        raise ValueError(f"{who}: num_layers must be >= 0, got {num_layers}")
    copies = []
    for i in range(int(num_layers)):
        c = copy.deepcopy(layer)
        for _, m in c.named_modules():
            rng = m.__dict__["_rng"]
            if rng is not None:
                m._seed(_random.fold_in(rng, i))
        copies.append(c)
    return ModuleList(copies)


def _optional_module(who: str, name: str, value):
    if value is not None and not isinstance(value, Module):
        raise TypeError(f"{who}: {name} must be a Module (a LayerNorm) or None, got "
                        f"{type(value).__name__}")
    return value


def _module(who: str, name: str, value) -> Module:
    if not isinstance(value, Module):
        raise TypeError(f"{who}: {name} must be a Module, got {type(value).__name__}")
    return value


def _is_causal_arg(who: str, name: str, value) -> bool:
    if value is None:
        return False
    return _bool(who, name, value)


class TransformerEncoder(_TorchStateDict, Module):
    """A stack of ``num_layers`` copies of an encoder layer, then an optional LayerNorm
    (PyTorch's ``nn.TransformerEncoder``). As in PyTorch the copies start with the same
    parameters (``Transformer`` re-initializes them); here each also gets its own dropout
    keys.

    ``forward(src, mask=None, src_key_padding_mask=None, is_causal=None)``: as
    :class:`TransformerEncoderLayer`, through every layer. ``is_causal=None`` means False
    (PyTorch then looks whether ``mask`` is causal, which only picks a faster kernel there).

    Args:
        encoder_layer: The layer to copy (a :class:`TransformerEncoderLayer` or any Module
            with its call signature).
        num_layers: Number of copies (``>= 0``).
        norm: Optional final normalization Module.
        enable_nested_tensor, mask_check: PyTorch's switches of its inference fast path
            (nested tensors for padded batches); accepted, no effect here. (That fast path
            returns zeros at padded query positions; here every position is computed.)

    Submodules: ``layers`` (``layers.0``, ``layers.1``, ...), ``norm`` (PyTorch's names).

    Raises:
        TypeError: for a layer or norm that is not a Module, or a non-int ``num_layers``.
        ValueError: for ``num_layers < 0``.
    """

    def __init__(self, encoder_layer, num_layers: int, norm=None,
                 enable_nested_tensor: bool = True, mask_check: bool = True):
        super().__init__()
        who = "TransformerEncoder"
        self.enable_nested_tensor = _bool(who, "enable_nested_tensor", enable_nested_tensor)
        self.mask_check = _bool(who, "mask_check", mask_check)
        self.layers = _clones(who, "encoder_layer", encoder_layer, num_layers)
        self.num_layers = int(num_layers)
        self.norm = _optional_module(who, "norm", norm)

    def extra_repr(self) -> str:
        """PyTorch's configuration string (empty: it prints the submodules)."""
        return ""

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        """See the class; returns a Tensor of ``src``'s shape."""
        causal = _is_causal_arg("TransformerEncoder", "is_causal", is_causal)
        out = src
        for layer in self.layers:
            out = layer(out, src_mask=mask, src_key_padding_mask=src_key_padding_mask,
                        is_causal=causal)
        if self.norm is not None:
            out = self.norm(out)
        return out


class TransformerDecoder(_TorchStateDict, Module):
    """A stack of ``num_layers`` copies of a decoder layer, then an optional LayerNorm
    (PyTorch's ``nn.TransformerDecoder``); copies as in :class:`TransformerEncoder`.

    ``forward(tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
    memory_key_padding_mask=None, tgt_is_causal=None, memory_is_causal=False)``: as
    :class:`TransformerDecoderLayer`, through every layer (``tgt_is_causal=None`` means False).

    Args:
        decoder_layer: The layer to copy.
        num_layers: Number of copies (``>= 0``).
        norm: Optional final normalization Module.

    Raises:
        TypeError: for a layer or norm that is not a Module, or a non-int ``num_layers``.
        ValueError: for ``num_layers < 0``.
    """

    def __init__(self, decoder_layer, num_layers: int, norm=None):
        super().__init__()
        who = "TransformerDecoder"
        self.layers = _clones(who, "decoder_layer", decoder_layer, num_layers)
        self.num_layers = int(num_layers)
        self.norm = _optional_module(who, "norm", norm)

    def extra_repr(self) -> str:
        """PyTorch's configuration string (empty: it prints the submodules)."""
        return ""

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=None, memory_is_causal: bool = False):
        """See the class; returns a Tensor of ``tgt``'s shape."""
        who = "TransformerDecoder"
        causal = _is_causal_arg(who, "tgt_is_causal", tgt_is_causal)
        mem_causal = _bool(who, "memory_is_causal", memory_is_causal)
        out = tgt
        for layer in self.layers:
            out = layer(out, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                        tgt_key_padding_mask=tgt_key_padding_mask,
                        memory_key_padding_mask=memory_key_padding_mask,
                        tgt_is_causal=causal, memory_is_causal=mem_causal)
        if self.norm is not None:
            out = self.norm(out)
        return out


class Transformer(_TorchStateDict, Module):
    __doc__ = """The encoder-decoder Transformer of Vaswani et al. (2017) (PyTorch's
    ``nn.Transformer``, its arguments, defaults and parameter names): an encoder of
    ``num_encoder_layers`` :class:`TransformerEncoderLayer` and a decoder of
    ``num_decoder_layers`` :class:`TransformerDecoderLayer`, each followed by a LayerNorm.
    Every parameter with more than one dimension is then drawn Xavier-uniform, as PyTorch's
    ``_reset_parameters`` does.

    ``forward(src, tgt, src_mask=None, tgt_mask=None, memory_mask=None,
    src_key_padding_mask=None, tgt_key_padding_mask=None, memory_key_padding_mask=None,
    src_is_causal=None, tgt_is_causal=None, memory_is_causal=False)``: ``src`` ``(S, N, E)``,
    ``tgt`` ``(T, N, E)`` (batch first with ``batch_first``; no ``N`` unbatched) ->
    ``(T, N, E)``; the masks as in :class:`TransformerEncoder` and :class:`TransformerDecoder`.
    :meth:`generate_square_subsequent_mask` makes the causal ``tgt_mask``.

    Args:
        d_model: Model width (512).
        nhead: Heads (8).
        num_encoder_layers, num_decoder_layers: Stack depths (6 each).
        custom_encoder, custom_decoder: Modules used instead of the built stacks.
""" + _SHARED_ARGS + """
    Submodules: ``encoder`` (``encoder.layers.i``, ``encoder.norm``), ``decoder``
    (``decoder.layers.i``, ``decoder.norm``), PyTorch's names.

    Raises:
        TypeError: for bad argument kinds. ValueError: for non-positive sizes, ``nhead`` not
            dividing ``d_model`` or ``dropout`` outside ``[0, 1)``; on call, for a batch or
            feature size of ``src`` and ``tgt`` that differ.

    Example:
        >>> import tapegrad as tg
        >>> model = tg.nn.Transformer(d_model=8, nhead=2, num_encoder_layers=1,
        ...                           num_decoder_layers=1, dim_feedforward=16,
        ...                           key=tg.random.key(0)).eval()
        >>> src = tg.random.normal(tg.random.key(1), (6, 3, 8))   # (S, N, E)
        >>> tgt = tg.random.normal(tg.random.key(2), (4, 3, 8))   # (T, N, E)
        >>> mask = tg.nn.Transformer.generate_square_subsequent_mask(4)
        >>> model(src, tgt, tgt_mask=mask).shape
        (4, 3, 8)
    """

    def __init__(self, d_model: int = 512, nhead: int = 8, num_encoder_layers: int = 6,
                 num_decoder_layers: int = 6, dim_feedforward: int = 2048,
                 dropout: float = 0.1, activation: str | Callable = F.relu,
                 custom_encoder=None, custom_decoder=None, layer_norm_eps: float = 1e-5,
                 batch_first: bool = False, norm_first: bool = False, bias: bool = True, *,
                 key=None, device=None, dtype=np.float32):
        super().__init__()
        who = "Transformer"
        _, eps, _, dt = _layer_init(who, d_model, nhead, dim_feedforward, dropout, activation,
                                    layer_norm_eps, batch_first, norm_first, bias, dtype,
                                    device)
        for name, v in (("num_encoder_layers", num_encoder_layers),
                        ("num_decoder_layers", num_decoder_layers)):
            if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
                raise TypeError(f"{who}: {name} must be an int, got {v!r}")
            if v < 0:
                raise ValueError(f"{who}: {name} must be >= 0, got {v}")
        (k_enc, k_dec, k_init), own = _keys(key, 3)
        self._seed(own)
        layer_args = dict(dim_feedforward=dim_feedforward, dropout=dropout,
                          activation=activation, layer_norm_eps=layer_norm_eps,
                          batch_first=batch_first, norm_first=norm_first, bias=bias, dtype=dt)
        for name, custom, layer_cls, stack_cls, num_layers, k in (
                ("encoder", custom_encoder, TransformerEncoderLayer, TransformerEncoder,
                 num_encoder_layers, k_enc),
                ("decoder", custom_decoder, TransformerDecoderLayer, TransformerDecoder,
                 num_decoder_layers, k_dec)):
            if custom is not None:
                setattr(self, name, _module(who, f"custom_{name}", custom))
            else:
                layer = layer_cls(d_model, nhead, key=k, **layer_args)
                setattr(self, name, stack_cls(layer, num_layers,
                                              LayerNorm(d_model, eps=eps, bias=bias, dtype=dt)))
        self._reset_parameters(k_init)
        self.d_model, self.nhead = int(d_model), int(nhead)
        self.batch_first = bool(batch_first)
        for _, m in self.named_modules():
            _place(m, device)

    def _reset_parameters(self, key) -> None:
        """Xavier-uniform for every parameter with more than one dimension (PyTorch's)."""
        flat = self.parameters
        keys = _random.split(key, max(len(flat), 1))
        for k, (name, p) in zip(keys, sorted(flat.items())):
            if p.ndim > 1:
                owner, leaf = self._resolve(name)
                owner.__dict__["_parameters"][leaf] = init.xavier_uniform(k, p.shape, p.dtype)

    @staticmethod
    def generate_square_subsequent_mask(sz: int, device=None, dtype=None) -> Tensor:
        """The causal mask of a length-``sz`` sequence: ``-inf`` above the diagonal, 0 on and
        below it (a float mask, added to the scores).

        Args:
            sz: Sequence length (``>= 0``).
            device: ``"cpu"`` (default) or ``"cuda:N"``.
            dtype: Floating dtype (``None``: float32).

        Returns:
            Tensor ``(sz, sz)``.

        Raises:
            TypeError: for a non-int ``sz`` or a non-floating dtype. ValueError: for
                ``sz < 0``.
        """
        who = "Transformer.generate_square_subsequent_mask"
        if isinstance(sz, (bool, np.bool_)) or not isinstance(sz, (int, np.integer)):
            raise TypeError(f"{who}: sz must be an int, got {sz!r}")
        if sz < 0:
            raise ValueError(f"{who}: sz must be >= 0, got {sz}")
        dt = _param_dtype(who, dtype)
        m = np.triu(np.full((int(sz), int(sz)), -np.inf, dtype=dt), 1)
        return Tensor(m, device=None if device is None else parse_device(device))

    def extra_repr(self) -> str:
        """PyTorch's configuration string (empty: it prints the submodules)."""
        return ""

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None,
                src_key_padding_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, src_is_causal=None, tgt_is_causal=None,
                memory_is_causal: bool = False):
        """See the class; returns a Tensor of ``tgt``'s shape.

        Raises:
            ValueError: if ``src`` and ``tgt`` have another batch size or feature size than
                each other and ``d_model``.
        """
        who = "Transformer"
        s = F._floating(src, who, "src")
        t = F._floating(tgt, who, "tgt")
        batch_axis = 0 if self.batch_first else 1
        if s.ndim == 3 and t.ndim == 3 and s.shape[batch_axis] != t.shape[batch_axis]:
            raise ValueError(f"{who}: src {s.shape} and tgt {t.shape} must have the same batch "
                             f"size (axis {batch_axis}, batch_first={self.batch_first})")
        if s.shape[-1] != self.d_model or t.shape[-1] != self.d_model:
            raise ValueError(f"{who}: the feature size of src {s.shape} and tgt {t.shape} must "
                             f"equal d_model={self.d_model}")
        memory = self.encoder(s, mask=src_mask, src_key_padding_mask=src_key_padding_mask,
                              is_causal=src_is_causal)
        return self.decoder(t, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask,
                            tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)


strict_all(globals(), __all__)
