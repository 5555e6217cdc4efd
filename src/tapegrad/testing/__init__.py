"""Tools to prove gradients and batching rules: :func:`check_grads`, :func:`numerical_jacobian`,
:func:`check_vmap`, :func:`check_rule` (every transform of an op against loops of its rules),
and hypothesis strategies in :mod:`tapegrad.testing.strategies` (import it where hypothesis is
installed)."""

from tapegrad.testing.batching import check_vmap
from tapegrad.testing.gradcheck import check_grads, check_vjp, numerical_jacobian, numerical_jvp
from tapegrad.testing.rules import check_rule

__all__ = [
    "check_grads",
    "check_rule",
    "check_vmap",
    "check_vjp",
    "numerical_jacobian",
    "numerical_jvp",
]
