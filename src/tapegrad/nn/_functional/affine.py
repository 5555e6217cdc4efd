"""Affine layers: ``linear`` and the multilayer perceptron ``mlp``."""

from __future__ import annotations

from tapegrad import numpy as tnp
from tapegrad.core.tensor import Tensor
from tapegrad.nn._functional._common import _floating
from tapegrad.nn._functional.activations import relu
from tapegrad.ops.nn import (  # the primitives, defined with their rules in tapegrad.ops
    Linear,
)

__all__ = [
    "linear",
    "mlp",
    "Linear",
]


def linear(input, weight, bias=None) -> Tensor:
    """Affine map ``input @ weight + bias``.

    With a bias and one dtype throughout, this is the fused :class:`Linear` primitive (one
    BLAS call, the bias added in place into its result; a 1-D input runs as one row, so that
    under :func:`tapegrad.vmap` the whole batch is one BLAS call); otherwise a ``matmul``
    followed by a broadcast ``add`` (NumPy type promotion).

    Args:
        input: Floating Tensor of shape ``(..., in_features)``.
        weight: Tensor of shape ``(in_features, out_features)`` (the ``y = xW + b``
            layout, as Flax; PyTorch stores the transpose).
        bias: Optional Tensor of shape ``(out_features,)``.

    Returns:
        Tensor of shape ``(..., out_features)``, of the promoted dtype of the three inputs.

    Raises:
        TypeError: if ``input`` is not floating.
        ValueError: if ``input.shape[-1] != weight.shape[0]`` or ``bias`` has the wrong shape.
    """
    if type(input) is Tensor and type(weight) is Tensor and type(bias) is Tensor:
        xa, wa, ba = input._array, weight._array, bias._array
        xs, ws = xa.shape, wa.shape
        if (  # the common case, checked on the arrays: straight to the fused primitive
            len(xs) >= 2
            and len(ws) == 2
            and xs[-1] == ws[0]
            and ba.shape == (ws[1],)
            and xa.dtype == wa.dtype == ba.dtype
            and xa.dtype.kind in "fV"
        ):
            return Linear.apply(input, weight, bias)
    x = _floating(input, "linear")
    weight = tnp.asarray(weight)
    if weight.ndim != 2 or x.ndim < 1 or x.shape[-1] != weight.shape[0]:
        raise ValueError(
            f"linear: input of shape {x.shape} and weight of shape {weight.shape} do not fit; "
            "weight must be (in_features, out_features) with in_features == input.shape[-1]"
        )
    if bias is None:
        return tnp.matmul(x, weight)
    bias = tnp.asarray(bias)
    if bias.shape != (weight.shape[1],):
        raise ValueError(f"linear: bias must have shape ({weight.shape[1]},), got {bias.shape}")
    if x.dtype == weight.dtype == bias.dtype:
        if x.ndim >= 2:
            return Linear.apply(x, weight, bias)
        # one example (as inside vmap): a one-row Linear, so that a vmapped linear is one BLAS
        # call for the whole batch and its per-example weight gradients are outer products
        y = Linear.apply(tnp.reshape(x, (1, x.shape[0])), weight, bias)
        return tnp.reshape(y, (weight.shape[1],))
    return tnp.matmul(x, weight) + bias


def mlp(params, x, activation=relu) -> Tensor:
    """A multilayer perceptron on a params pytree from :func:`tapegrad.nn.init.mlp`.

    Args:
        params: List of ``{"weight": (in, out), "bias": (out,)}`` dicts.
        x: Tensor of shape ``(..., sizes[0])``.
        activation: Applied after every layer but the last.

    Returns:
        Tensor of shape ``(..., sizes[-1])``.
    """
    for i, layer in enumerate(params):
        x = linear(x, layer["weight"], layer.get("bias"))
        if i < len(params) - 1:
            x = activation(x)
    return x
