"""PyTorch's further activation modules (``ELU``, ``SELU``, ``CELU``, ``Hardtanh``,
``ReLU6``, ``Hardsigmoid``, ``Hardswish``, ``Softplus``, ``Softsign``, ``Mish``, ``GLU``,
``LogSigmoid``, ``PReLU``): thin Module forms of the functions in
:mod:`tapegrad.nn._activations`.
"""

from __future__ import annotations

import numpy as np

from tapegrad.core._keywords import strict_all
from tapegrad.core.tensor import Tensor
from tapegrad.nn import _functional as F
from tapegrad.nn._activations import (
    _no_inplace,
    _number,
    celu,
    elu,
    glu,
    hardsigmoid,
    hardswish,
    hardtanh,
    logsigmoid,
    mish,
    prelu,
    relu6,
    selu,
    softsign,
)
from tapegrad.nn.module import Module, _param_dtype, _place, _positive

__all__ = [
    "ELU",
    "SELU",
    "CELU",
    "Hardtanh",
    "ReLU6",
    "Hardsigmoid",
    "Hardswish",
    "Softplus",
    "Softsign",
    "Mish",
    "GLU",
    "LogSigmoid",
    "PReLU",
]


#: The ``inplace`` argument's entry in the Args of the activation Modules' docstrings.
_INPLACE_ARG = "PyTorch's option; only False."


def _inplace_flag(who: str, inplace) -> bool:
    _no_inplace(who, inplace)
    return False


def _real_param(who: str, name: str, value):
    """A finite real constructor argument, kept as given (an int stays an int, as in
    PyTorch's printed form)."""
    _number(who, name, value)
    return value


class _Pointwise(Module):
    """Module form of a configuration-free activation: ``forward`` applies ``_fn`` (a
    subclass names it with the class keyword ``fn``)."""

    def __init_subclass__(cls, fn=None, **kwargs):
        super().__init_subclass__(**kwargs)
        if fn is not None:
            cls._fn = staticmethod(fn)

    @staticmethod
    def _fn(input) -> Tensor:
        raise NotImplementedError

    def forward(self, input):
        """Any shape -> same shape."""
        return type(self)._fn(input)

    def extra_repr(self) -> str:
        """PyTorch's configuration string (empty)."""
        return ""


class _PointwiseInplace(_Pointwise):
    """A :class:`_Pointwise` activation taking PyTorch's ``inplace=`` (only False); the
    one-line docstring of a subclass that names its ``fn`` gets that argument's Args."""

    def __init_subclass__(cls, fn=None, **kwargs):
        super().__init_subclass__(fn=fn, **kwargs)
        if fn is not None:
            cls.__doc__ = f"{cls.__doc__}\n\n    Args:\n        inplace: {_INPLACE_ARG}\n    "

    def __init__(self, inplace: bool = False):
        super().__init__()
        self.inplace = _inplace_flag(type(self).__name__, inplace)


class _AlphaActivation(Module):
    """Module form of an activation ``_fn(input, alpha)`` with PyTorch's ``inplace=`` (only
    False); ``alpha`` must be nonzero where ``_nonzero``."""

    _nonzero = False

    @staticmethod
    def _fn(input, alpha) -> Tensor:
        raise NotImplementedError

    def __init__(self, alpha: float = 1.0, inplace: bool = False):
        super().__init__()
        who = type(self).__name__
        self.alpha = _real_param(who, "alpha", alpha)
        if self._nonzero and self.alpha == 0:
            raise ValueError(f"{who}: alpha must be nonzero, got 0")
        self.inplace = _inplace_flag(who, inplace)

    def forward(self, input):
        """Any shape -> same shape."""
        return type(self)._fn(input, self.alpha)

    def extra_repr(self) -> str:
        """PyTorch's configuration string."""
        return f"alpha={self.alpha}"


class ELU(_AlphaActivation):
    """Module form of :func:`elu` (PyTorch's ``nn.ELU``).

    Args:
        alpha: The negative saturation value.
        inplace: PyTorch's option; only False (Tensors are immutable).

    Raises:
        TypeError: for a non-number ``alpha``. ValueError: for ``inplace=True``.
    """

    _fn = staticmethod(elu)


class SELU(_PointwiseInplace, fn=selu):
    """Module form of :func:`selu` (PyTorch's ``nn.SELU``)."""


class CELU(_AlphaActivation):
    """Module form of :func:`celu` (PyTorch's ``nn.CELU``).

    Args:
        alpha: Nonzero scale of the negative part.
        inplace: PyTorch's option; only False.

    Raises:
        ValueError: for ``alpha == 0`` or ``inplace=True``.
    """

    _fn = staticmethod(celu)
    _nonzero = True


class Hardtanh(Module):
    """Module form of :func:`hardtanh` (PyTorch's ``nn.Hardtanh``).

    Args:
        min_val, max_val: The bounds, ``min_val < max_val``.
        inplace: PyTorch's option; only False.

    Raises:
        ValueError: if ``min_val >= max_val`` (PyTorch's condition) or ``inplace=True``.
    """

    _keyword_hints = {"min_value": "PyTorch's deprecated name; use min_val",
                      "max_value": "PyTorch's deprecated name; use max_val"}

    def __init__(self, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False):
        super().__init__()
        who = type(self).__name__
        self.min_val = _real_param(who, "min_val", min_val)
        self.max_val = _real_param(who, "max_val", max_val)
        if not self.max_val > self.min_val:
            raise ValueError(
                f"{who}: max_val ({max_val}) must be greater than min_val ({min_val})"
            )
        self.inplace = _inplace_flag(who, inplace)

    def forward(self, input):
        """Any shape -> same shape."""
        return hardtanh(input, self.min_val, self.max_val)

    def extra_repr(self) -> str:
        """PyTorch's configuration string."""
        return f"min_val={self.min_val}, max_val={self.max_val}"


class ReLU6(_PointwiseInplace, fn=relu6):
    """Module form of :func:`relu6` (PyTorch's ``nn.ReLU6``)."""


class Hardsigmoid(_PointwiseInplace, fn=hardsigmoid):
    """Module form of :func:`hardsigmoid` (PyTorch's ``nn.Hardsigmoid``)."""


class Hardswish(_PointwiseInplace, fn=hardswish):
    """Module form of :func:`hardswish` (PyTorch's ``nn.Hardswish``)."""


class Softplus(Module):
    """Module form of :func:`~tapegrad.nn.functional.softplus` (PyTorch's ``nn.Softplus``):
    ``log(1 + exp(beta x)) / beta``, and ``x`` where ``beta x > threshold``.

    Args:
        beta: Positive sharpness.
        threshold: Above ``beta x > threshold`` the function is ``x``.

    Raises:
        TypeError: for non-number arguments. ValueError: for ``beta <= 0``.
    """

    def __init__(self, beta: float = 1.0, threshold: float = 20.0):
        super().__init__()
        self.beta = _real_param("Softplus", "beta", beta)
        if not self.beta > 0:
            raise ValueError(f"Softplus: beta must be positive, got {beta}")
        self.threshold = _real_param("Softplus", "threshold", threshold)

    def forward(self, input):
        """Any shape -> same shape."""
        return F.softplus(input, float(self.beta), float(self.threshold))

    def extra_repr(self) -> str:
        """PyTorch's configuration string."""
        return f"beta={self.beta}, threshold={self.threshold}"


class Softsign(_Pointwise, fn=softsign):
    """Module form of :func:`softsign` (PyTorch's ``nn.Softsign``)."""


class Mish(_PointwiseInplace, fn=mish):
    """Module form of :func:`mish` (PyTorch's ``nn.Mish``)."""


class GLU(Module):
    """Module form of :func:`glu` (PyTorch's ``nn.GLU``).

    Args:
        dim: The axis split in halves (default the last).

    Raises:
        TypeError: for a non-int ``dim``.
    """

    def __init__(self, dim: int = -1):
        super().__init__()
        if isinstance(dim, (bool, np.bool_)) or not isinstance(dim, (int, np.integer)):
            raise TypeError(f"GLU: dim must be an int, got {dim!r}")
        self.dim = int(dim)

    def forward(self, input):
        """``(..., 2n, ...)`` -> ``(..., n, ...)`` along ``dim``."""
        return glu(input, self.dim)

    def extra_repr(self) -> str:
        """PyTorch's configuration string."""
        return f"dim={self.dim}"


class LogSigmoid(_Pointwise, fn=logsigmoid):
    """Module form of :func:`logsigmoid` (PyTorch's ``nn.LogSigmoid``)."""


class PReLU(Module):
    """Parametric ReLU with learned slopes (PyTorch's ``nn.PReLU``) over :func:`prelu`.

    Args:
        num_parameters: 1 (one slope shared by every channel) or the input's channel count
            (axis 1). (The count is ``weight.shape[0]``: ``num_parameters()`` stays
            :meth:`Module.num_parameters`, the number of parameter elements.)
        init: The slopes' initial value.
        device, dtype: Parameter device and floating dtype (``None``: float32).

    Parameters:
        weight ``(num_parameters,)``, filled with ``init``.

    Raises:
        TypeError: for a non-int ``num_parameters``, a non-number ``init`` or a non-floating
            dtype. ValueError: for ``num_parameters < 1``.

    Example:
        >>> import tapegrad as tg
        >>> act = tg.nn.PReLU()
        >>> act(tg.Tensor([-2.0, 3.0]))
        Tensor([-0.5,  3. ], dtype=float32)
    """

    def __init__(self, num_parameters: int = 1, init: float = 0.25, *, device=None,
                 dtype=np.float32):
        super().__init__()
        _positive("PReLU", num_parameters=num_parameters)
        self.init = _real_param("PReLU", "init", init)
        dt = _param_dtype("PReLU", dtype)
        self.weight = Tensor(np.full((int(num_parameters),), float(init), dt))
        _place(self, device)

    def forward(self, input):
        """Any shape with ``num_parameters`` channels on axis 1 (or 1) -> same shape."""
        return prelu(input, self.weight)

    def extra_repr(self) -> str:
        """PyTorch's configuration string."""
        return f"num_parameters={self.weight.shape[0]}"



strict_all(globals(), __all__)
