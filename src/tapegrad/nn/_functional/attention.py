"""Attention: ``scaled_dot_product_attention`` and ``multi_head_attention``."""

from __future__ import annotations

import math

import numpy as np

from tapegrad import numpy as tnp
from tapegrad import random as _random
from tapegrad.core import dtypes as _tg_dtypes
from tapegrad.core.tensor import Tensor
from tapegrad.nn._functional._common import _floating, _like
from tapegrad.nn._functional.affine import linear
from tapegrad.ops.nn import (  # the primitives, defined with their rules in tapegrad.ops
    ScaledDotProductAttention,
    _const,
)

__all__ = [
    "scaled_dot_product_attention",
    "multi_head_attention",
    "ScaledDotProductAttention",
]


def _mask_penalty(dtype) -> float:
    return -min(1e9, float(_tg_dtypes.finfo(dtype).max) / 4)


def scaled_dot_product_attention(
    query,
    key,
    value,
    attn_mask=None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    *,
    dropout_key=None,
) -> Tensor:
    """Scaled dot-product attention ``softmax(q k^T / sqrt(E)) v`` (Vaswani et al., 2017).

    The mask contract: a **float** mask is additive with 1.0 meaning *forbidden* and
    0.0 *allowed* (the scores get ``mask * -1e9``); a **boolean** mask is True where
    attention is *allowed* (PyTorch's and MLX's convention). ``is_causal`` forbids keys after
    the query position (top-left aligned, PyTorch); combined with a mask, both apply.
    A query whose keys are all forbidden attends uniformly (finite penalty, no NaN).
    Dropout is applied to the probabilities after the softmax (as in PyTorch), with
    an explicit key. A fused Function: backward recomputes the probabilities.

    Args:
        query: Floating Tensor ``(..., Lq, E)``.
        key: Tensor ``(..., Lk, E)``.
        value: Tensor ``(..., Lk, Ev)``.
        attn_mask: Optional float or boolean mask broadcastable to ``(..., Lq, Lk)``.
        dropout_p: Post-softmax dropout probability in ``[0, 1)``.
        is_causal: Apply a causal mask.
        scale: Score scale; default ``1 / sqrt(E)``.
        dropout_key: Key from :mod:`tapegrad.random`; required when ``dropout_p > 0``.

    Returns:
        Tensor ``(..., Lq, Ev)`` of ``query``'s dtype.

    Raises:
        ValueError: for mismatched shapes, a bad ``dropout_p`` or a missing key.

    References:
        Vaswani et al., "Attention Is All You Need", NeurIPS 2017, section 3.2.1.
    """
    who = "scaled_dot_product_attention"
    q = _floating(query, who, "query")
    k = _like(key, q)
    v = _like(value, q)
    if q.ndim < 2 or k.ndim < 2 or v.ndim < 2:
        raise ValueError(f"{who}: query, key and value must be at least 2-D")
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"{who}: shapes query {q.shape}, key {k.shape}, value {v.shape} do not fit: need "
            "query (..., Lq, E), key (..., Lk, E), value (..., Lk, Ev)"
        )
    lq, lk = q.shape[-2], k.shape[-2]
    if not 0.0 <= dropout_p < 1.0:
        raise ValueError(f"{who}: dropout_p must lie in [0, 1), got {dropout_p}")
    neg = _mask_penalty(q.dtype)
    bias = None
    if attn_mask is not None:
        m = tnp.asarray(attn_mask)
        if m.dtype == np.bool_:
            bias = tnp.where(m, 0.0, _const(np.asarray(neg, dtype=q.dtype), q))
        else:
            bias = _like(m, q) * neg
        try:
            np.broadcast_shapes(tuple(bias.shape), q.shape[:-1] + (lk,))
        except ValueError:
            raise ValueError(
                f"{who}: attn_mask of shape {tuple(m.shape)} does not broadcast to the scores' "
                f"shape {q.shape[:-1] + (lk,)}"
            ) from None
    if is_causal:
        causal = _const((np.triu(np.ones((lq, lk)), k=1) * neg).astype(q.dtype), q)
        bias = causal if bias is None else bias + causal
    drop = None
    if dropout_p > 0.0:
        if dropout_key is None:
            raise ValueError(f"{who}: dropout_p > 0 needs a dropout_key from tapegrad.random")
        shape = np.broadcast_shapes(q.shape[:-2], k.shape[:-2]) + (lq, lk)
        keep = _random.bernoulli(dropout_key, 1.0 - dropout_p, shape)
        drop = tnp.astype(keep, q.dtype) / (1.0 - dropout_p)
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1])
    return ScaledDotProductAttention.apply(q, k, v, bias, drop, scale=float(scale))


def multi_head_attention(
    query,
    key,
    value,
    params,
    num_heads: int,
    attn_mask=None,
    is_causal: bool = False,
    dropout_p: float = 0.0,
    dropout_key=None,
) -> Tensor:
    """Multi-head attention (Vaswani et al., 2017, section 3.2.2) on a params pytree.

    ``out = concat_h(attention(q W_q^h, k W_k^h, v W_v^h)) W_o``, each projection a
    :func:`linear` layer.

    Args:
        query: Floating Tensor ``(B, Lq, D)``.
        key, value: Tensors ``(B, Lk, D)``.
        params: ``{"query": {"weight": (D, D), "bias": (D,)}, "key": ..., "value": ...,
            "output": ...}`` (biases may be None or absent).
        num_heads: Number of heads; divides ``D``.
        attn_mask: Optional mask (see :func:`scaled_dot_product_attention`) of shape
            ``(Lq, Lk)`` or ``(B, Lq, Lk)`` (shared by the heads) or ``(B, H, Lq, Lk)``.
        is_causal: Causal masking.
        dropout_p, dropout_key: post-softmax dropout.

    Returns:
        Tensor ``(B, Lq, D)``.

    Raises:
        ValueError: if ``num_heads`` does not divide ``D`` or shapes differ.
    """
    who = "multi_head_attention"
    q = _floating(query, who, "query")
    if q.ndim != 3:
        raise ValueError(f"{who}: query must have shape (B, L, D), got {q.shape}")
    d = q.shape[-1]
    if num_heads < 1 or d % num_heads:
        raise ValueError(f"{who}: num_heads={num_heads} must divide the model size {d}")
    hd = d // num_heads

    def project(x, name):
        p = params[name]
        y = linear(x, p["weight"], p.get("bias"))
        b, l_ = y.shape[:2]
        return tnp.transpose(tnp.reshape(y, (b, l_, num_heads, hd)), (0, 2, 1, 3))

    qh, kh, vh = (
        project(q, "query"),
        project(_like(key, q), "key"),
        project(_like(value, q), "value"),
    )
    mask = attn_mask
    if mask is not None:
        mask = tnp.asarray(mask)
        if mask.ndim == 3:
            mask = tnp.expand_dims(mask, 1)
    out = scaled_dot_product_attention(
        qh, kh, vh, mask, dropout_p=dropout_p, is_causal=is_causal, dropout_key=dropout_key
    )
    b, _, lq, _ = out.shape
    out = tnp.reshape(tnp.transpose(out, (0, 2, 1, 3)), (b, lq, d))
    po = params["output"]
    return linear(out, po["weight"], po.get("bias"))
