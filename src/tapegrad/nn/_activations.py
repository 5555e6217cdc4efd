"""PyTorch's further activations: the functions (``elu``, ``selu``, ``celu``, ``hardtanh``,
``relu6``, ``hardsigmoid``, ``hardswish``, ``softsign``, ``mish``, ``glu``, ``logsigmoid``,
``prelu``); their module forms (``ELU``, ``SELU``, ..., ``PReLU``, ``Softplus``) are in
:mod:`tapegrad.nn._activation_layers`.

Each is a composition of differentiable :mod:`tapegrad.numpy` operations (``where``,
``expm1``, ``softplus``, ``sigmoid``, ``tanh``), so it differentiates to every order under
every transform. Where the function has a kink, the branch taken exactly at the kink is
PyTorch's, so the first derivative there is PyTorch's, and so is the second (checked against
``torch.autograd`` in the tests):

- ``elu``/``selu``/``celu`` at 0: the negative branch's slope (``alpha``, ``scale * alpha``,
  1), second derivative 0;
- ``hardtanh``/``relu6`` at their bounds, ``hardsigmoid`` at +-3: derivative 0;
- ``hardswish``: derivative 0 at -3 and 1 at 3 (the outer branches), ``x / 3 + 1/2``
  strictly between;
- ``prelu`` at 0: the slope ``weight``.
"""

from __future__ import annotations

import numpy as np

from tapegrad import numpy as tnp
from tapegrad.core._keywords import strict_all
from tapegrad.core.tensor import Tensor
from tapegrad.nn import _functional as F
from tapegrad.nn._extra_functional import _dim

__all__ = [
    # functions
    "elu",
    "selu",
    "celu",
    "hardtanh",
    "relu6",
    "hardsigmoid",
    "hardswish",
    "softsign",
    "mish",
    "glu",
    "logsigmoid",
    "prelu",
]

#: SELU's constants (Klambauer et al., 2017), to PyTorch's digits.
SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946

#: The docstrings' Args and Returns of the one-input functions with ``inplace`` (their
#: ``__INPLACE_ARGS__`` line).
_INPLACE_ARGS = """    Args:
        input: Floating Tensor of any shape.
        inplace: PyTorch's option; only False.

    Returns:
        Tensor of ``input``'s shape and dtype.
"""


def _no_inplace(who: str, inplace) -> None:
    """PyTorch's ``inplace=``: only False, since Tensors are immutable."""
    if not isinstance(inplace, (bool, np.bool_)):
        raise TypeError(f"{who}: inplace must be a bool, got {inplace!r}")
    if inplace:
        raise ValueError(
            f"{who}: inplace=True is not possible: tapegrad Tensors are immutable and every "
            "function returns a new Tensor. Use inplace=False (the default) and keep the result."
        )


def _number(who: str, name: str, value) -> float:
    """A finite real parameter (not a bool)."""
    v = F._real_arg(value, who, name)
    if not np.isfinite(v):
        raise ValueError(f"{who}: {name} must be finite, got {v}")
    return v


def _elu_core(x: Tensor, alpha: float, input_scale: float) -> Tensor:
    """``x`` for ``x > 0``, ``alpha (exp(x * input_scale) - 1)`` below; at exactly 0 the
    negative branch's tangent line ``alpha input_scale x`` (slope as PyTorch, no curvature)."""
    neg = tnp.where(x < 0, x, 0.0)  # no overflow of expm1 in the unused branch
    curve = alpha * tnp.expm1(neg * input_scale) if input_scale != 1.0 else \
        alpha * tnp.expm1(neg)
    line = (alpha * input_scale) * x
    return tnp.where(x > 0, x, tnp.where(x < 0, curve, line))


def elu(input, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """Exponential linear unit ``x`` for ``x > 0``, ``alpha (exp(x) - 1)`` otherwise (Clevert
    et al., 2016; ``torch.nn.functional.elu``).

    Args:
        input: Floating Tensor of any shape.
        alpha: The negative saturation value.
        inplace: PyTorch's option; only False (Tensors are immutable).

    Returns:
        Tensor of ``input``'s shape and dtype. The derivative at 0 is ``alpha`` (PyTorch's).

    Raises:
        TypeError: for a non-floating input or a non-number ``alpha``.
        ValueError: for ``inplace=True``.

    References:
        Clevert, Unterthiner and Hochreiter, "Fast and Accurate Deep Network Learning by
        Exponential Linear Units (ELUs)", ICLR 2016.
    """
    x = F._floating(input, "elu")
    alpha = _number("elu", "alpha", alpha)
    _no_inplace("elu", inplace)
    return _elu_core(x, alpha, 1.0)


def selu(input, inplace: bool = False) -> Tensor:
    """Scaled ELU ``scale * elu(x, alpha)`` with the self-normalizing constants ``alpha =
    1.6732632...`` and ``scale = 1.0507009...`` (Klambauer et al., 2017;
    ``torch.nn.functional.selu``).

    Args:
        input: Floating Tensor of any shape.
        inplace: PyTorch's option; only False.

    Returns:
        Tensor of ``input``'s shape and dtype; derivative ``scale * alpha`` at 0.

    References:
        Klambauer, Unterthiner, Mayr and Hochreiter, "Self-Normalizing Neural Networks",
        NeurIPS 2017.
    """
    x = F._floating(input, "selu")
    _no_inplace("selu", inplace)
    return SELU_SCALE * _elu_core(x, SELU_ALPHA, 1.0)


def celu(input, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """Continuously differentiable ELU ``max(0, x) + min(0, alpha (exp(x / alpha) - 1))``
    (Barron, 2017; ``torch.nn.functional.celu``).

    Args:
        input: Floating Tensor of any shape.
        alpha: Nonzero scale of the negative part.
        inplace: PyTorch's option; only False.

    Returns:
        Tensor of ``input``'s shape and dtype; derivative 1 at 0.

    Raises:
        ValueError: for ``alpha == 0`` (PyTorch's ``ZeroDivisionError``).

    References:
        Barron, "Continuously Differentiable Exponential Linear Units", arXiv:1704.07483.
    """
    x = F._floating(input, "celu")
    alpha = _number("celu", "alpha", alpha)
    _no_inplace("celu", inplace)
    if alpha == 0.0:
        raise ValueError("celu: alpha must be nonzero (the negative part is alpha (exp(x / "
                         "alpha) - 1)), got 0")
    return _elu_core(x, alpha, 1.0 / alpha)


def _clamp_flat(x: Tensor, lo: float, hi: float) -> Tensor:
    """``x`` clipped to ``[lo, hi]`` with derivative 0 at and beyond the bounds (NaN stays
    NaN)."""
    return tnp.where(x <= lo, lo, tnp.where(x >= hi, hi, x))


def hardtanh(input, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False
             ) -> Tensor:
    """``x`` clipped to ``[min_val, max_val]`` (``torch.nn.functional.hardtanh``).

    Args:
        input: Floating Tensor of any shape.
        min_val, max_val: The bounds, ``min_val <= max_val``.
        inplace: PyTorch's option; only False.

    Returns:
        Tensor of ``input``'s shape and dtype. The derivative is 1 strictly inside the bounds
        and 0 at and beyond them (PyTorch's).

    Raises:
        ValueError: if ``min_val > max_val``.
    """
    x = F._floating(input, "hardtanh")
    lo = _number("hardtanh", "min_val", min_val)
    hi = _number("hardtanh", "max_val", max_val)
    _no_inplace("hardtanh", inplace)
    if lo > hi:
        raise ValueError(f"hardtanh: min_val ({lo}) must not be greater than max_val ({hi})")
    return _clamp_flat(x, lo, hi)


def relu6(input, inplace: bool = False) -> Tensor:
    """``min(max(x, 0), 6)`` (``torch.nn.functional.relu6``); derivative 0 at 0 and 6.

    __INPLACE_ARGS__
    """
    x = F._floating(input, "relu6")
    _no_inplace("relu6", inplace)
    return _clamp_flat(x, 0.0, 6.0)


def hardsigmoid(input, inplace: bool = False) -> Tensor:
    """Piecewise-linear sigmoid: 0 for ``x <= -3``, 1 for ``x >= 3``, ``x / 6 + 1/2`` between
    (``torch.nn.functional.hardsigmoid``); derivative 0 at +-3.

    __INPLACE_ARGS__

    References:
        Howard et al., "Searching for MobileNetV3", ICCV 2019.
    """
    x = F._floating(input, "hardsigmoid")
    _no_inplace("hardsigmoid", inplace)
    return tnp.where(x <= -3.0, 0.0, tnp.where(x >= 3.0, 1.0, x * (1.0 / 6.0) + 0.5))


def hardswish(input, inplace: bool = False) -> Tensor:
    """``x * hardsigmoid(x)``: 0 for ``x <= -3``, ``x`` for ``x >= 3``, ``x (x + 3) / 6``
    between (``torch.nn.functional.hardswish``).

    Args:
        input: Floating Tensor of any shape.
        inplace: PyTorch's option; only False.

    Returns:
        Tensor of ``input``'s shape and dtype. Derivative: 0 at -3, 1 at 3 (PyTorch's),
        ``x / 3 + 1/2`` strictly between; second derivative ``1/3`` strictly between.

    References:
        Howard et al., "Searching for MobileNetV3", ICCV 2019.
    """
    x = F._floating(input, "hardswish")
    _no_inplace("hardswish", inplace)
    return tnp.where(x <= -3.0, 0.0, tnp.where(x >= 3.0, x, x * (x + 3.0) * (1.0 / 6.0)))


def softsign(input) -> Tensor:
    """``x / (1 + |x|)`` (``torch.nn.functional.softsign``).

    Args:
        input: Floating Tensor of any shape.

    Returns:
        Tensor of ``input``'s shape and dtype, values in ``(-1, 1)``.
    """
    x = F._floating(input, "softsign")
    return x / (1.0 + tnp.abs(x))


def mish(input, inplace: bool = False) -> Tensor:
    """``x tanh(softplus(x))`` (Misra, 2019; ``torch.nn.functional.mish``), with the stable
    ``softplus``.

    __INPLACE_ARGS__

    References:
        Misra, "Mish: A Self Regularized Non-Monotonic Activation Function", BMVC 2020.
    """
    x = F._floating(input, "mish")
    _no_inplace("mish", inplace)
    return x * tnp.tanh(tnp.softplus(x))


for _f in (relu6, hardsigmoid, mish):
    _f.__doc__ = _f.__doc__.replace("    __INPLACE_ARGS__\n", _INPLACE_ARGS)  # pyright: ignore[reportOptionalMemberAccess]
del _f


def glu(input, dim: int = -1) -> Tensor:
    """Gated linear unit ``a * sigmoid(b)``, ``a`` and ``b`` the two halves of ``input``
    along ``dim`` (Dauphin et al., 2017; ``torch.nn.functional.glu``).

    Args:
        input: Floating Tensor whose size along ``dim`` is even.
        dim: The axis to split (default the last).

    Returns:
        Tensor of ``input``'s shape with ``dim`` halved, ``input``'s dtype.

    Raises:
        TypeError: for a non-int ``dim``.
        ValueError: for a 0-d input, ``dim`` out of range or an odd size along it.

    References:
        Dauphin, Fan, Auli and Grangier, "Language Modeling with Gated Convolutional
        Networks", ICML 2017.
    """
    who = "glu"
    x = F._floating(input, who)
    if x.ndim == 0:
        raise ValueError(f"{who}: input must have at least one dimension, got a 0-d Tensor")
    axis = _dim(x, dim, who)
    n = x.shape[axis]
    if n % 2:
        raise ValueError(
            f"{who}: the size of input along dim {dim} must be even (it is split in halves), "
            f"got {n} (input shape {x.shape})"
        )
    a, b = tnp.split(x, 2, axis=axis)
    return a * tnp.sigmoid(b)


def logsigmoid(input) -> Tensor:
    """``log(sigmoid(x)) = -softplus(-x)``, stable for any ``x``
    (``torch.nn.functional.logsigmoid``).

    Args:
        input: Floating Tensor of any shape.

    Returns:
        Tensor of ``input``'s shape and dtype, values ``<= 0``.
    """
    x = F._floating(input, "logsigmoid")
    return -tnp.softplus(-x)


def prelu(input, weight) -> Tensor:
    """Parametric ReLU ``x`` for ``x > 0``, ``weight * x`` otherwise (He et al., 2015;
    ``torch.nn.functional.prelu``).

    Args:
        input: Floating Tensor; its channels are axis 1 (a 0-d or 1-d input has one channel).
        weight: Floating Tensor of 1 or ``C`` (channel count) elements, the slopes.

    Returns:
        Tensor of ``input``'s shape and dtype. The derivative at 0 is ``weight`` (PyTorch's);
        ``weight`` gets the gradient ``sum(x * g)`` over the non-positive entries.

    Raises:
        TypeError: for a non-floating input or weight.
        ValueError: if ``weight`` has neither 1 nor ``C`` elements.

    References:
        He, Zhang, Ren and Sun, "Delving Deep into Rectifiers", ICCV 2015.
    """
    who = "prelu"
    x = F._floating(input, who)
    w = F._floating(weight, who, "weight")
    if w.dtype != x.dtype:
        w = tnp.astype(w, x.dtype)
    channels = x.shape[1] if x.ndim >= 2 else 1
    if w.size not in (1, channels) or w.ndim > 1:
        raise ValueError(
            f"prelu: weight must hold 1 or {channels} (the input's channel count, axis 1) "
            f"elements in at most one dimension, got shape {w.shape} for input {x.shape}"
        )
    if w.size == 1:
        w = tnp.reshape(w, ())
    else:
        w = tnp.reshape(w, (channels,) + (1,) * (x.ndim - 2))
    return tnp.where(x > 0, x, w * x)


strict_all(globals(), __all__)
