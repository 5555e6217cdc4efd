"""Tensor's operators and NumPy-style methods, attached in this one module.

Each layer declares the methods its functions provide, beside the functions: the ops layer's
registry (:data:`tapegrad.ops._registry.METHODS`: arithmetic and comparison operators,
``sum``, ``reshape``, ...), the NumPy layer's conversions, shape and linear-algebra modules
(``to``, ``view``, ``permute``, ``dot``, ...), functional index updates (``at``) and NumPy's
protocols, DLPack and the array API (:data:`tapegrad.numpy.interop.METHODS`). This module attaches
them all to :class:`~tapegrad.Tensor` when ``tapegrad`` is imported, as HIPS autograd's numpy
layer attaches its boxes' methods: the core defines the Tensor record and never reaches up to
the layers that compute with it. Where two declare the same name, the later table in
:data:`TABLES` wins.
"""

from __future__ import annotations

from tapegrad.core.tensor import Tensor
from tapegrad.numpy import _core, _linalg, _shape, at, interop
from tapegrad.ops._registry import METHODS as _OP_METHODS

__all__ = ["TABLES", "attached"]

#: The method tables, in the order they are attached.
TABLES = (_OP_METHODS, at.METHODS, _core.METHODS, _shape.METHODS, _linalg.METHODS,
          interop.METHODS)


def attached() -> dict:
    """Every method name this module attaches, with what it attaches."""
    out: dict = {}
    for table in TABLES:
        out.update(table)
    if "__pos__" in _OP_METHODS:  # the ops layer's unary plus, if it has one, wins
        out["__pos__"] = _OP_METHODS["__pos__"]
    return out


for _name, _method in attached().items():
    type.__setattr__(Tensor, _name, _method)
